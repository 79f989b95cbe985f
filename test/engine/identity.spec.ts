import {
  awaitSignal,
  done,
  DuplicateError,
  DurableFsm,
  type DurableStatus,
  InvalidInputError,
  NoTargetError,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Identity (docs/design.md §11, §3.5): one correlation key is the uniqueness guard and the signal
// address; the scope lists the statuses in which the key is occupied.

/** Parks until `finish` (done) or `fail` (failed). */
@DurableFsm({ name: 'session' })
class SessionFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal(['finish', 'fail'], 'end', ctx.state);
  }
  @Step() end(ctx: StepContext) {
    const last = ctx.awaited[ctx.awaited.length - 1];
    return last?.name === 'fail' ? stop('failed by signal') : done({ by: last?.payload ?? null });
  }
}

const LIVE: DurableStatus[] = ['runnable', 'executing', 'awaiting_signal', 'awaiting_children'];

describe('identity: correlation keys (docs/design.md §11)', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    // GC runs only when a test calls sweep(); retention 1 ms makes every terminal row eligible.
    t = await bootEngine(db, [SessionFsm], {
      gc: {
        interval: 3_600_000,
        retention: 1,
        failedRetention: 1,
        cancelledRetention: 1,
        batch: 1000,
      },
    });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  const parked = async (id: string): Promise<boolean> =>
    (await t.engine.get({ id }))?.status === 'awaiting_signal';
  async function finish(id: string, how: 'finish' | 'fail' = 'finish'): Promise<void> {
    await eventually(() => parked(id));
    await t.engine.signal({ id }, how, { id });
    await t.engine.await(id, { until: 'terminal' });
  }
  const guard = async (id: string): Promise<string | null> =>
    (
      await db.pool.query<{ g: string | null }>(
        `SELECT correlation_guard AS g FROM gen_durable WHERE id = $1`,
        [id],
      )
    ).rows[0]!.g;

  it('default scope: unique among live instances (DuplicateError), freed at termination', async () => {
    const first = await t.engine.insert(SessionFsm, { correlationKey: 'user:1' });
    await expect(t.engine.insert(SessionFsm, { correlationKey: 'user:1' })).rejects.toBeInstanceOf(
      DuplicateError,
    );
    await expect(t.engine.insert(SessionFsm, { correlationKey: 'user:1' })).rejects.toMatchObject({
      correlationKey: 'user:1',
      code: 'GD_DUPLICATE',
    });
    expect((await t.engine.get({ correlationKey: 'user:1' }))?.id).toBe(first);

    await finish(first);
    expect(await guard(first)).toBeNull();
    // Freed: a new instance may take the key, signals by key find no live target, and a read
    // by key finds the ended instance (docs/identity.md "Finding an instance by key").
    expect((await t.engine.get({ correlationKey: 'user:1' }))?.id).toBe(first);
    await expect(t.engine.signal({ correlationKey: 'user:1' }, 'finish')).rejects.toBeInstanceOf(
      NoTargetError,
    );
    const second = await t.engine.insert(SessionFsm, { correlationKey: 'user:1' });
    expect(second).not.toBe(first);
    // Addressing resolves to the live occupant, which wins over the ended one.
    expect((await t.engine.get({ correlationKey: 'user:1' }))?.id).toBe(second);
    await eventually(() => parked(second));
    await t.engine.signal({ correlationKey: 'user:1' }, 'finish', { to: 'second' });
    expect(await t.engine.await(second, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { by: { to: 'second' } },
    });
    expect((await t.engine.get({ id: first }))?.result).toEqual({ by: { id: first } });
  });

  it('concurrent inserts of one key: exactly one occupant, the others DuplicateError', async () => {
    const outcomes = await Promise.allSettled(
      Array.from({ length: 10 }, () => t.engine.insert(SessionFsm, { correlationKey: 'race:1' })),
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    const rejected = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(rejected).toHaveLength(9);
    expect(rejected.every((o) => o.reason instanceof DuplicateError)).toBe(true);
    const { rows } = await db.pool.query(
      `SELECT id FROM gen_durable WHERE correlation_key = 'race:1'`,
    );
    expect(rows).toHaveLength(1);
  });

  for (const held of ['done', 'failed'] as const) {
    it(`a scope including ${held} holds the key until GC; signals to the finished row are refused`, async () => {
      const key = `invoice:${held}`;
      const scope: DurableStatus[] = [...LIVE, held];
      const id = await t.engine.insert(SessionFsm, {
        correlationKey: key,
        correlationScope: scope,
      });
      await finish(id, held === 'done' ? 'finish' : 'fail');
      expect((await t.engine.get({ id }))?.status).toBe(held);
      expect(await guard(id)).toBe(key);

      await expect(
        t.engine.insert(SessionFsm, { correlationKey: key, correlationScope: scope }),
      ).rejects.toBeInstanceOf(DuplicateError);
      // Other scopes of the same key family collide with the holder as well.
      await expect(t.engine.insert(SessionFsm, { correlationKey: key })).rejects.toBeInstanceOf(
        DuplicateError,
      );
      await expect(t.engine.signal({ correlationKey: key }, 'finish')).rejects.toBeInstanceOf(
        NoTargetError,
      );
      // get by key answers the current occupant: the finished holder, until GC frees the key.
      expect(await t.engine.get({ correlationKey: key })).toMatchObject({ id, status: held });
      const { rows } = await db.pool.query(
        `SELECT 1 FROM gen_durable_signals WHERE target_id = $1 AND consumed_at IS NULL`,
        [id],
      );
      expect(rows).toHaveLength(0);

      expect(await t.engine.runtime.gc!.sweep()).toBeGreaterThanOrEqual(1);
      expect(await t.engine.get({ id })).toBeNull();
      expect(await t.engine.get({ correlationKey: key })).toBeNull();
      expect(await t.engine.await(id)).toEqual({ kind: 'not_found' });
      const again = await t.engine.insert(SessionFsm, {
        correlationKey: key,
        correlationScope: scope,
      });
      expect(again).not.toBe(id);
    });
  }

  it('the other terminal status does not hold a key scoped to one of them', async () => {
    const scope: DurableStatus[] = [...LIVE, 'done'];
    const id = await t.engine.insert(SessionFsm, {
      correlationKey: 'invoice:x',
      correlationScope: scope,
    });
    await finish(id, 'fail');
    expect(await guard(id)).toBeNull();
    await t.engine.insert(SessionFsm, { correlationKey: 'invoice:x', correlationScope: scope });
  });

  it('an empty scope is a mere label: neither unique nor addressable', async () => {
    const a = await t.engine.insert(SessionFsm, {
      correlationKey: 'label:1',
      correlationScope: [],
    });
    const b = await t.engine.insert(SessionFsm, {
      correlationKey: 'label:1',
      correlationScope: [],
    });
    expect(a).not.toBe(b);
    expect(await guard(a)).toBeNull();
    await eventually(() => parked(a));
    await expect(t.engine.signal({ correlationKey: 'label:1' }, 'finish')).rejects.toBeInstanceOf(
      NoTargetError,
    );
    expect(await t.engine.get({ correlationKey: 'label:1' })).toBeNull();
    expect((await t.engine.get({ id: a }))?.correlationKey).toBe('label:1');
    await finish(a);
    await finish(b);
  });

  it('insertAll drops duplicates silently, in the batch and against live occupants', async () => {
    const live = await t.engine.insert(SessionFsm, { correlationKey: 'bulk:b' });
    t.clear();
    const ids = await t.engine.insertAll(SessionFsm, [
      { correlationKey: 'bulk:c' },
      { correlationKey: 'bulk:a' },
      { correlationKey: 'bulk:b' },
      { correlationKey: 'bulk:a' },
      { correlationKey: 'bulk:d', correlationScope: [] },
      { correlationKey: 'bulk:d', correlationScope: [] },
      {},
    ]);
    expect(t.statements.filter((s) => s === 'insert_instances')).toHaveLength(1);
    expect(ids).toHaveLength(5);
    const { rows } = await db.pool.query<{ id: string; correlation_key: string | null }>(
      `SELECT id, correlation_key FROM gen_durable WHERE id = ANY ($1::bigint[]) ORDER BY id`,
      [ids],
    );
    expect(rows.map((r) => r.correlation_key).sort()).toEqual(
      ['bulk:a', 'bulk:c', 'bulk:d', 'bulk:d', null].sort(),
    );
    expect((await t.engine.get({ correlationKey: 'bulk:b' }))?.id).toBe(live);
  });

  it('rejects bad identity input with a typed error naming the field; nothing is written', async () => {
    const before = (await db.pool.query(`SELECT count(*) AS n FROM gen_durable`)).rows[0]
      .n as string;
    await expect(t.engine.insert(SessionFsm, { correlationKey: '' })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(
      t.engine.insert(SessionFsm, {
        correlationKey: 'k',
        correlationScope: ['finished' as DurableStatus],
      }),
    ).rejects.toThrow(/correlationScope/);
    await expect(t.engine.signal({ correlationKey: '' }, 'finish')).rejects.toThrow(
      InvalidInputError,
    );
    expect((await db.pool.query(`SELECT count(*) AS n FROM gen_durable`)).rows[0].n).toBe(before);
  });
});
