import { done, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

let release: (() => void) | undefined;
const started = new Map<string, number>();

@DurableFsm({ name: 'skew-probe' })
class SkewProbeFsm {
  @Step() async start(ctx: StepContext<{ hold?: boolean }>) {
    started.set(ctx.id, Date.now());
    if (ctx.state.hold) await new Promise<void>((resolve) => (release = resolve));
    return done({});
  }
}

// docs/reliability.md S31, the cheap R0 guard: a node whose clock runs 30 s ahead must not change any
// lease or eligibility decision, because every one of them is taken on the database clock.
describe('S31 guard: a worker clock 30 s ahead', () => {
  let db: TestDatabase;
  let t: Harness;
  const realNow = Date.now.bind(Date);

  beforeAll(async () => {
    db = await createTestDatabase();
    jest.spyOn(Date, 'now').mockImplementation(() => realNow() + 30_000);
    t = await bootEngine(db, [SkewProbeFsm]);
  });
  afterAll(async () => {
    release?.();
    await t.close();
    jest.restoreAllMocks();
    await db.drop();
  });

  it('leases are stamped on the database clock', async () => {
    const id = await t.engine.insert(SkewProbeFsm, { state: { hold: true } });
    await eventually(async () => started.has(id));
    const { rows } = await db.pool.query<{ remaining: number }>(
      `SELECT extract(epoch FROM lease_expires_at - now()) * 1000 AS remaining FROM gen_durable WHERE id = $1`,
      [id],
    );
    const remaining = Number(rows[0]?.remaining);
    expect(remaining).toBeGreaterThan(0);
    expect(remaining).toBeLessThanOrEqual(2000); // leaseTtl of the test timings, not 30 s off
    release?.();
    expect(await t.engine.await(id, { until: 'terminal' })).toMatchObject({ kind: 'done' });
  });

  it('a delay is honoured on the database clock, not the skewed one', async () => {
    const id = await t.engine.insert(SkewProbeFsm, { scheduleIn: 1500 });
    const { rows } = await db.pool.query<{ due_in: number }>(
      `SELECT extract(epoch FROM eligible_at - now()) * 1000 AS due_in FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(Number(rows[0]?.due_in)).toBeGreaterThan(1000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(started.has(id)).toBe(false); // the skewed clock says it is 28 s overdue: still not run
    expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
  });

  it('the reaper does not take a live, heartbeated claim', async () => {
    const id = await t.engine.insert(SkewProbeFsm, { state: { hold: true } });
    await eventually(async () => started.has(id));
    await new Promise((resolve) => setTimeout(resolve, 2500)); // longer than the lease: heartbeats keep it
    const { rows } = await db.pool.query<{ status: string; reaps: number }>(
      `SELECT status, reaps FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(rows[0]).toMatchObject({ status: 'executing', reaps: 0 });
    release?.();
    expect(await t.engine.await(id, { until: 'terminal' })).toMatchObject({ kind: 'done' });
  });
});
