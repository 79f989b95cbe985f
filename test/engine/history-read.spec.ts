import { done, DurableFsm, InvalidInputError, NoTargetError, Step } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Reading step history (docs/design.md §28.1): `history(target, { limit, before })` pages an
// instance's rows newest first by id or key; a missing instance is NoTargetError, bad options
// InvalidInputError. The rows here are written directly so the read is tested on its own.

@DurableFsm({ name: 'history-read' })
class ReadFsm {
  @Step() start() {
    return done();
  }
}

describe('history(target) (docs/design.md §28.1)', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [ReadFsm], { queues: {}, reaper: false, gc: false, poke: 'none' });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  async function writeRows(id: string, count: number): Promise<void> {
    await db.pool.query(
      `INSERT INTO gen_durable_history (instance_id, kind, step, next_step, attempt, claim_seq,
              worker, outcome, error, state, actor)
       SELECT $1, 'next', 's' || n, 's' || (n + 1), n, n, 'w', 'runnable',
              CASE WHEN n = 2 THEN '{"name":"TypeError","message":"boom","stack":"at x"}'::jsonb END,
              jsonb_build_object('n', n), NULL
         FROM generate_series(1, $2::int) n`,
      [id, count],
    );
  }

  it('pages newest first with before, by id and by correlation key', async () => {
    const id = await h.engine.insert(ReadFsm, { correlationKey: 'hist-a' });
    await writeRows(id, 5);
    const first = await h.engine.history(id, { limit: 2 });
    expect(first.map((e) => e.step)).toEqual(['s5', 's4']);
    expect(first[0]).toMatchObject({
      instanceId: id,
      kind: 'next',
      nextStep: 's6',
      attempt: 5,
      claimSeq: '5',
      worker: 'w',
      outcome: 'runnable',
      error: null,
      state: { n: 5 },
      actor: null,
    });
    expect(first[0]!.at).toBeInstanceOf(Date);
    const second = await h.engine.history({ id }, { limit: 2, before: first[1]!.id });
    expect(second.map((e) => e.step)).toEqual(['s3', 's2']);
    expect(second[1]!.error).toEqual({ name: 'TypeError', message: 'boom', stack: 'at x' });
    const last = await h.engine.history(id, { limit: 2, before: BigInt(second[1]!.id) });
    expect(last.map((e) => e.step)).toEqual(['s1']);
    expect(await h.engine.history(id, { before: last[0]!.id })).toEqual([]);
    const byKey = await h.engine.history({ correlationKey: 'hist-a' });
    expect(byKey.map((e) => e.step)).toEqual(['s5', 's4', 's3', 's2', 's1']);
  });

  it('answers [] for an instance without history', async () => {
    const id = await h.engine.insert(ReadFsm);
    expect(await h.engine.history(id)).toEqual([]);
  });

  it('refuses a missing instance and bad options', async () => {
    await expect(h.engine.history('999999999')).rejects.toBeInstanceOf(NoTargetError);
    await expect(h.engine.history({ correlationKey: 'nobody' })).rejects.toBeInstanceOf(
      NoTargetError,
    );
    const id = await h.engine.insert(ReadFsm);
    for (const bad of [
      { limit: 0 },
      { limit: 1001 },
      { limit: 1.5 },
      { before: 'x' },
      { page: 1 },
    ]) {
      await expect(h.engine.history(id, bad as never)).rejects.toBeInstanceOf(InvalidInputError);
    }
    await expect(h.engine.history({} as never)).rejects.toBeInstanceOf(InvalidInputError);
  });
});
