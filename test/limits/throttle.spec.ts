import { randomBytes } from 'node:crypto';

import {
  done,
  DurableFsm,
  type GenDurableOptions,
  InvalidInputError,
  Step,
  type StepContext,
  stop,
  throttle,
} from '../../lib';
import { PostgresLimiter } from '../../lib/limiter/postgres.limiter';
import { bootEngine, eventually, type Harness, sleep } from '../support/engine-harness';
import { createTestDatabase, redisUrl, type TestDatabase } from '../support/test-database';
import {
  bucketsOf,
  entriesOf,
  executorOf,
  gate,
  insertExecuting,
  rate,
  recordedTelemetry,
} from './support/limiter-fixtures';

// Backing off on 429 (docs/design.md §16.5, docs/rate-limiting.md, docs/concurrency.md,
// docs/jobs.md): a step's `throttle({ limit | key, retryAfterMs })`, or a thrown error carrying
// `retryAfterMs`, closes the limit cluster-wide until the deadline on both limiter backends,
// and the instance runs its step again after it without spending an attempt. Two engines
// share one database (and one Redis namespace): the one that did not run the throttled step
// claims rows of the closed limit, is denied until the deadline, then runs them.
const WAIT = 1500;

type Mode = 'limit' | 'key' | 'thrown' | 'follow' | 'unknown';
interface S {
  mode: Mode;
  part: string;
}

/** Every step start: row id, attempt, wall clock (the database's, same machine). */
const starts: { id: string; attempt: number; at: number }[] = [];
const handled: { id: string; error: unknown }[] = [];

function startsOf(id: string): { id: string; attempt: number; at: number }[] {
  return starts.filter((s) => s.id === id);
}

@DurableFsm({ name: 'throttled', queue: 'tq' })
class ThrottledFsm {
  @Step() start(ctx: StepContext<S>) {
    starts.push({ id: ctx.id, attempt: ctx.attempt, at: Date.now() });
    const first = startsOf(ctx.id).length === 1;
    const { mode, part } = ctx.state;
    if (mode === 'limit' && first) return throttle({ limit: ['api', part], retryAfterMs: WAIT });
    if (mode === 'key' && first) return throttle({ key: ['lane', part], retryAfterMs: WAIT });
    if (mode === 'thrown' && first) {
      throw Object.assign(new Error('429 Too Many Requests'), { retryAfterMs: WAIT });
    }
    if (mode === 'unknown') return throttle({ limit: 'nope', retryAfterMs: 10 });
    return done({ attempt: ctx.attempt });
  }
  onError(err: unknown, ctx: StepContext<S>) {
    handled.push({ id: ctx.id, error: err });
    return stop(err);
  }
}

/** The engine of `pair` whose events show row `id`'s step. */
function ranOn(pair: readonly Harness[], id: string): number {
  const i = pair.findIndex((h) => h.eventsOf('step:stop', id).length > 0);
  if (i < 0) throw new Error(`row ${id} ran on neither engine`);
  return i;
}

async function eligibleAt(db: TestDatabase, id: string): Promise<number> {
  const { rows } = await db.pool.query<{ eligible_at: Date }>(
    'SELECT eligible_at FROM gen_durable WHERE id = $1',
    [id],
  );
  return rows[0]!.eligible_at.getTime();
}

async function row(
  db: TestDatabase,
  id: string,
): Promise<{ status: string; attempt: number; last_error: string | null }> {
  const { rows } = await db.pool.query<{
    status: string;
    attempt: number;
    last_error: string | null;
  }>('SELECT status, attempt, last_error FROM gen_durable WHERE id = $1', [id]);
  return rows[0]!;
}

// Two engines in one process need distinct names (docs/design.md §2.1). Names namespace only
// pokes and the default Redis prefix: rows and the PostgreSQL limiter tables are shared, and
// both engines get the same explicit `redisPrefix`, so they share every Redis gate and bucket
// as two nodes of one engine would.
const backends: [string, () => Partial<GenDurableOptions>][] = [
  ['postgres', () => ({ limiter: 'postgres' })],
];
const url = redisUrl();
if (url) {
  const redisPrefix = `gd-throttle-${randomBytes(3).toString('hex')}:`;
  const u = new URL(url);
  backends.push([
    'redis',
    () => ({
      limiter: { redis: { host: u.hostname, port: Number(u.port || 6379) } },
      redisPrefix,
    }),
  ]);
}

describe.each(backends)('throttle on the %s limiter', (_backend, limiter) => {
  let db: TestDatabase;
  let pair: Harness[];

  beforeAll(async () => {
    // Row ids restart in each database: forget the previous backend's starts.
    starts.length = 0;
    db = await createTestDatabase();
    const options: Partial<GenDurableOptions> = {
      ...limiter(),
      queues: { tq: 4 },
      rateLimits: { api: { allowed: 100, period: [1, 'second'] } },
      concurrencyLimits: { lane: { limit: 2 } },
      gc: false,
    };
    pair = [await bootEngine(db, [ThrottledFsm], { ...options, name: 'NodeA' })];
    pair.push(await bootEngine(db, [ThrottledFsm], { ...options, name: 'NodeB' }));
  });
  afterAll(async () => {
    for (const h of pair ?? []) await h.close();
    await db?.drop();
  });

  /**
   * Inserts the throttling row, waits until its commit closed `key`, then inserts followers on
   * the same limit: the other engine claims them and is denied until the deadline; afterwards
   * every row runs, the throttled one again at attempt 0.
   */
  async function closesUntilDeadline(
    mode: 'limit' | 'key' | 'thrown',
    kind: 'rate' | 'conc',
    key: string,
    insert: { rateLimit?: string; concurrencyKey?: string },
    part: string,
  ): Promise<void> {
    const a = pair[0]!;
    const [id] = await a.engine.insertAll(ThrottledFsm, [{ state: { mode, part }, ...insert }]);
    const closed = await Promise.race(
      pair.map((h) =>
        h.waitFor('limit:throttled', (e) => e.metadata['id'] === id && e.metadata['key'] === key),
      ),
    );
    expect(closed.metadata['kind']).toBe(kind);
    expect(closed.measurements['retryAfterMs']).toBe(WAIT);
    const deadline = await eligibleAt(db, id!);
    expect((await row(db, id!)).attempt).toBe(0);

    const other = pair[1 - ranOn(pair, id!)]!;
    // A gated row is denied at its gate before its bucket is asked (docs/design.md §16.2).
    const denial = insert.concurrencyKey ? 'concurrency:throttled' : 'rate_limit:throttled';
    const denied = insert.concurrencyKey ?? insert.rateLimit;
    const followers = await a.engine.insertAll(
      ThrottledFsm,
      [1, 2, 3].map(() => ({ state: { mode: 'follow', part }, ...insert })),
    );
    // The engine that did not throttle claims a follower and its admission is denied.
    await other.waitFor(denial, (e) => e.metadata['key'] === denied, WAIT);
    expect(Date.now()).toBeLessThan(deadline);
    for (const f of followers) expect(startsOf(f)).toEqual([]);

    await eventually(async () => {
      const rows = await Promise.all([id!, ...followers].map((x) => row(db, x)));
      return rows.every((r) => r.status === 'done');
    }, 15_000);
    for (const f of followers) {
      expect(startsOf(f)).toHaveLength(1);
      expect(startsOf(f)[0]!.at).toBeGreaterThanOrEqual(deadline);
    }
    const again = startsOf(id!);
    expect(again.map((s) => s.attempt)).toEqual([0, 0]);
    expect(again[1]!.at).toBeGreaterThanOrEqual(deadline);
    expect((await row(db, id!)).attempt).toBe(0);
  }

  it('closes a rate limit cluster-wide until the deadline, then both engines run it again', async () => {
    const part = `r${randomBytes(2).toString('hex')}`;
    await closesUntilDeadline('limit', 'rate', `api:${part}`, { rateLimit: `api:${part}` }, part);
  });

  it('closes a concurrency key cluster-wide until the deadline', async () => {
    const part = `c${randomBytes(2).toString('hex')}`;
    await closesUntilDeadline(
      'key',
      'conc',
      `lane:${part}`,
      { concurrencyKey: `lane:${part}` },
      part,
    );
  });

  it("closes a thrown error's own rate limit and concurrency key, without an attempt or onError", async () => {
    const part = `t${randomBytes(2).toString('hex')}`;
    handled.length = 0;
    await closesUntilDeadline(
      'thrown',
      'rate',
      `api:${part}`,
      { rateLimit: `api:${part}`, concurrencyKey: `lane:${part}` },
      part,
    );
    const closes = pair.flatMap((h) =>
      h.eventsOf('limit:throttled').filter((e) => String(e.metadata['key']).endsWith(part)),
    );
    expect(closes.map((e) => e.metadata['kind']).sort()).toEqual(['conc', 'rate']);
    expect(handled).toEqual([]);
  });

  it('refuses an unknown limit name: an InvalidInputError naming it, through onError', async () => {
    handled.length = 0;
    const [id] = await pair[0]!.engine.insertAll(ThrottledFsm, [
      { state: { mode: 'unknown', part: 'u' } },
    ]);
    await eventually(async () => (await row(db, id!)).status === 'failed', 10_000);
    expect(handled).toHaveLength(1);
    expect(handled[0]!.error).toBeInstanceOf(InvalidInputError);
    expect(String((handled[0]!.error as Error).message)).toContain('"nope"');
    expect((await row(db, id!)).last_error).toContain('throttle.limit');
  });
});

describe('PostgresLimiter.throttle (CLOSE_LIMITS)', () => {
  let db: TestDatabase;
  let limiter: PostgresLimiter;
  const t = recordedTelemetry();

  beforeAll(async () => {
    db = await createTestDatabase();
    limiter = new PostgresLimiter(executorOf(db).sql, t.telemetry, 0);
    await limiter.syncConfig([gate('g', 3, 2), rate('r', 1000, 1, 4, 2)]);
  });
  afterAll(async () => {
    t.close();
    await db.drop();
  });

  it('mints a cold key closed, keeps the later deadline, and the GC reconcile keeps a closed idle gate', async () => {
    await limiter.throttle([
      { kind: 'conc', key: 'g:a', ms: 600 },
      { kind: 'rate', key: 'r:a', ms: 600 },
    ]);
    // A shorter closure later does not shorten it.
    await limiter.throttle([{ kind: 'conc', key: 'g:a', ms: 10 }]);
    const gates = await bucketsOf(db, 'conc', 'g:a');
    expect(gates.map((b) => [b.shard, b.capacity, b.available])).toEqual([
      [0, 2, 2],
      [1, 1, 1],
    ]);
    const rates = await bucketsOf(db, 'rate', 'r:a');
    expect(rates.map((b) => [b.shard, b.capacity, b.available])).toEqual([
      [0, 2, 0],
      [1, 2, 0],
    ]);
    const until = (gates[0]!.last_refill as Date).getTime();
    expect(until - Date.now()).toBeGreaterThan(300);

    // Idle (no holders) and all lockable: without the closure, the GC reconcile would delete
    // the gate's rows (and the bucket prune the rate rows), losing the deadline.
    await limiter.reconcile();
    expect(await bucketsOf(db, 'conc', 'g:a')).toHaveLength(2);
    expect(await bucketsOf(db, 'rate', 'r:a')).toHaveLength(2);

    const ids = await insertExecuting(db, 2, { gateKey: 'g:a', rateKey: null });
    const rated = await insertExecuting(db, 2, { rateKey: 'r:a' });
    expect((await limiter.admit(entriesOf(ids, { gateKey: 'g:a' }), 'limits')).admitted).toEqual(
      [],
    );
    expect((await limiter.admit(entriesOf(rated, { rateKey: 'r:a' }), 'limits')).admitted).toEqual(
      [],
    );

    await sleep(Math.max(0, until - Date.now()) + 50);
    const gated = await limiter.admit(entriesOf(ids, { gateKey: 'g:a' }), 'limits');
    expect(gated.admitted.map((a) => a.id)).toEqual(ids);
    // Reopened empty, refilling at 1000/s: a token or two after 50 ms, never the whole burst at once.
    const granted = await limiter.admit(entriesOf(rated, { rateKey: 'r:a' }), 'limits');
    expect(granted.admitted.length).toBeGreaterThan(0);
  });

  it('closes nothing for a name without a config row', async () => {
    await limiter.throttle([{ kind: 'rate', key: 'unknown:x', ms: 1000 }]);
    expect(await bucketsOf(db, 'rate', 'unknown:x')).toEqual([]);
  });
});
