import { done, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, Gates, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §14's config-change caveats, pinned so the behaviour is documented, not accidental:
// the regime of a row (K = 1 vs gate) is fixed at its claim by the claiming node's config
// (shard NULL = K = 1). Two engines with different declarations share one database, as two
// nodes of a rolling deploy would; each serves its own queue so the test picks the claimant.
const latches = new Gates();
const inside = new Set<string>();

@DurableFsm({ name: 'caveat', queue: 'unused' })
class CaveatFsm {
  @Step() async start(ctx: StepContext<{ tag: string }>) {
    inside.add(ctx.state.tag);
    await latches.wait(ctx.state.tag);
    inside.delete(ctx.state.tag);
    return done({});
  }
}

describe('config changes while rows execute (docs/design.md §14 caveats)', () => {
  let db: TestDatabase;
  let unconfigured: Harness;
  let configured: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    unconfigured = await bootEngine(db, [CaveatFsm], {
      name: 'Unconfigured',
      queues: { old: 2 },
      gc: false,
    });
    configured = await bootEngine(db, [CaveatFsm], {
      name: 'Configured',
      queues: { new: 2 },
      concurrencyLimits: { acct: { limit: 1 } },
      gc: false,
      reaper: false,
    });
  });
  afterAll(async () => {
    latches.openAll();
    await configured.close();
    await unconfigured.close();
    await db.drop();
  });

  async function shardOf(tag: string): Promise<number | null> {
    const { rows } = await db.pool.query(
      `SELECT concurrency_shard FROM gen_durable WHERE state->>'tag' = $1`,
      [tag],
    );
    return rows[0].concurrency_shard as number | null;
  }

  it('name ADDED: a new gated claim ignores the K = 1 guard and runs beside an old NULL-shard row (limit + 1)', async () => {
    // A node without the declaration runs acct:1 as K = 1...
    await unconfigured.engine.insert(CaveatFsm, {
      state: { tag: 'added-old' },
      queue: 'old',
      concurrencyKey: 'acct:1',
    });
    await latches.reached('added-old');
    expect(await shardOf('added-old')).toBeNull();
    // ...and a node that declares `acct` (limit 1) claims the same key as a gate: cold, free.
    await configured.engine.insert(CaveatFsm, {
      state: { tag: 'added-new' },
      queue: 'new',
      concurrencyKey: 'acct:1',
    });
    await latches.reached('added-new');
    expect(await shardOf('added-new')).toBe(0);
    // Two holders of a key whose limit is 1.
    expect([...inside].filter((t) => t.startsWith('added-')).sort()).toEqual([
      'added-new',
      'added-old',
    ]);
    latches.open('added-old');
    latches.open('added-new');
  });

  it('name REMOVED: a K = 1 claim runs beside a shard-stamped row (outside arbiter and guard)', async () => {
    // The declaring node runs acct:2 as a gated, shard-stamped holder...
    await configured.engine.insert(CaveatFsm, {
      state: { tag: 'removed-gated' },
      queue: 'new',
      concurrencyKey: 'acct:2',
    });
    await latches.reached('removed-gated');
    expect(await shardOf('removed-gated')).toBe(0);
    // ...and a node without the declaration claims acct:2 as K = 1: its guard and the arbiter
    // only see NULL-shard rows.
    await unconfigured.engine.insert(CaveatFsm, {
      state: { tag: 'removed-k1' },
      queue: 'old',
      concurrencyKey: 'acct:2',
    });
    await latches.reached('removed-k1');
    expect(await shardOf('removed-k1')).toBeNull();
    expect([...inside].filter((t) => t.startsWith('removed-')).sort()).toEqual([
      'removed-gated',
      'removed-k1',
    ]);
    latches.open('removed-gated');
    latches.open('removed-k1');
  });

  it('with one view of the config, the same key never overlaps', async () => {
    await configured.engine.insert(CaveatFsm, {
      state: { tag: 'same-1' },
      queue: 'new',
      concurrencyKey: 'acct:3',
    });
    await configured.engine.insert(CaveatFsm, {
      state: { tag: 'same-2' },
      queue: 'new',
      concurrencyKey: 'acct:3',
    });
    await latches.reached('same-1');
    await new Promise((r) => setTimeout(r, 300));
    expect(inside.has('same-2')).toBe(false);
    latches.open('same-1');
    await latches.reached('same-2');
    latches.open('same-2');
  });
  it('each node seeds only its own declarations at boot; differing declarations last-write-win; nothing is deleted', async () => {
    const configs = async () =>
      (
        await db.pool.query(
          `SELECT kind, name, rate, capacity, shards FROM gen_durable_bucket_configs ORDER BY kind, name`,
        )
      ).rows;
    // The unconfigured node declared nothing; the configured one declared its gate.
    expect(await configs()).toEqual([
      { kind: 'conc', name: 'acct', rate: null, capacity: 1, shards: 1 },
    ]);
    const third = await bootEngine(db, [CaveatFsm], {
      name: 'Redeclaring',
      queues: {},
      concurrencyLimits: { acct: { limit: 4, shards: 2 }, zeta: { limit: 2 } },
      rateLimits: { api: { allowed: 60, period: [1, 'minute'], burst: 10 } },
      gc: false,
      reaper: false,
    });
    await third.close();
    expect(await configs()).toEqual([
      { kind: 'conc', name: 'acct', rate: null, capacity: 4, shards: 2 },
      { kind: 'conc', name: 'zeta', rate: null, capacity: 2, shards: 1 },
      { kind: 'rate', name: 'api', rate: 1, capacity: 10, shards: 1 },
    ]);
  });
});
