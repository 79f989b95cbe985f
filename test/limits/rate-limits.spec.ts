import {
  done,
  DurableFsm,
  InvalidInputError,
  next,
  retry,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, eventually, type Harness, sleep } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { bucketsOf } from './support/limiter-fixtures';

// Rate limits through the engine (docs/design.md §15, §25 item 5, §26.8): insert limits the first step,
// a step limits its next one, kept on retry and cleared by other transitions, tokens are
// never refunded, `[name, partition]` buckets, unknown names stall with rate_limit:unknown,
// and `weight > burst` is refused where it is written.
let pool: TestDatabase['pool'] | undefined;
const rateColumn = new Map<string, (string | null)[]>();
async function recordRate(id: string): Promise<void> {
  const { rows } = await pool!.query<{ rate_limit: string | null }>(
    'SELECT rate_limit FROM gen_durable WHERE id = $1',
    [id],
  );
  rateColumn.set(id, [...(rateColumn.get(id) ?? []), rows[0]!.rate_limit]);
}

@DurableFsm({ name: 'once', queue: 'rq' })
class OnceFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'two-step', queue: 'rq' })
class TwoStepFsm {
  @Step() start(ctx: StepContext<{ partition: string }>) {
    return next('limited', ctx.state, { rateLimit: ['per', ctx.state.partition] });
  }
  @Step() limited() {
    return done({});
  }
}

@DurableFsm({ name: 'retrying', queue: 'rq' })
class RetryingFsm {
  @Step() async start(ctx: StepContext<Record<string, never>>) {
    await recordRate(ctx.id);
    return ctx.attempt === 0 ? retry({}, 0) : next('after', {});
  }
  @Step() async after(ctx: StepContext<Record<string, never>>) {
    await recordRate(ctx.id);
    return done({});
  }
}

let neverRan = false;
@DurableFsm({ name: 'unknown-limit', queue: 'rq' })
class UnknownLimitFsm {
  @Step() start() {
    return next('never', {}, { rateLimit: ['nope', 'x'] });
  }
  @Step() never() {
    neverRan = true;
    return done({});
  }
}

@DurableFsm({ name: 'too-heavy', queue: 'rq' })
class TooHeavyFsm {
  @Step() start() {
    return next('heavy', {}, { rateLimit: 'api', weight: 3 });
  }
  @Step() heavy() {
    return done({});
  }
}

@DurableFsm({ name: 'manual-rate', queue: 'manual' })
class ManualRateFsm {
  @Step() start() {
    return done({});
  }
}

const FSMS = [OnceFsm, TwoStepFsm, RetryingFsm, UnknownLimitFsm, TooHeavyFsm, ManualRateFsm];

async function rowsOf(
  db: TestDatabase,
  ids: readonly string[],
): Promise<{ id: string; status: string; step: string; attempt: number }[]> {
  const { rows } = await db.pool.query(
    `SELECT id, status, step, attempt FROM gen_durable WHERE id = ANY ($1::bigint[]) ORDER BY id`,
    [ids],
  );
  return rows;
}

describe('rate limits through the engine', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    pool = db.pool;
    h = await bootEngine(db, FSMS, {
      queues: { rq: 10 },
      // Per hour: nothing refills within a test.
      rateLimits: {
        api: { allowed: 2, period: [1, 'hour'] },
        per: { allowed: 1, period: 3600 },
        slow: { allowed: 5, period: [1, 'hour'] },
      },
      gc: false,
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('insert limits the first step; the rest stay runnable and are reported (rate_limit:throttled)', async () => {
    h.clear();
    const ids = await h.engine.insertAll(
      OnceFsm,
      [1, 2, 3, 4].map(() => ({ rateLimit: 'api' })),
    );
    await eventually(
      async () => (await rowsOf(db, ids)).filter((r) => r.status === 'done').length === 2,
      10_000,
    );
    const throttled = await h.waitFor('rate_limit:throttled', (e) => e.metadata['key'] === 'api');
    expect(throttled.metadata).toEqual({ key: 'api', queue: 'rq' });
    expect(throttled.measurements['granted']).toBeLessThan(throttled.measurements['wanted']!);
    await sleep(300); // several polls later, still nothing more
    const rows = await rowsOf(db, ids);
    expect(rows.filter((r) => r.status === 'done')).toHaveLength(2);
    // Not done, never retried (a pick may be holding them for an instant between claim and release).
    expect(rows.filter((r) => r.status !== 'done' && r.attempt === 0)).toHaveLength(2);
  });

  it('a step limits its next step; [name, partition] is one bucket per partition', async () => {
    const ids = [
      await h.engine.insert(TwoStepFsm, { state: { partition: 'a' } }),
      await h.engine.insert(TwoStepFsm, { state: { partition: 'a' } }),
      await h.engine.insert(TwoStepFsm, { state: { partition: 'b' } }),
    ];
    await eventually(
      async () => (await rowsOf(db, ids)).filter((r) => r.status === 'done').length === 2,
      10_000,
    );
    await sleep(300);
    const rows = await rowsOf(db, ids);
    // Both first steps ran (unlimited); one `limited` step per partition ran.
    expect(rows.map((r) => r.step)).toEqual(['limited', 'limited', 'limited']);
    expect(rows.filter((r) => r.status !== 'done')).toHaveLength(1);
    expect(
      (await bucketsOf(db, 'rate')).filter((b) => b.key.startsWith('per:')).map((b) => b.key),
    ).toEqual(['per:a', 'per:b']);
  });

  it('the limit is kept on retry and cleared by next; a re-run pays again (never refunded)', async () => {
    const id = await h.engine.insert(RetryingFsm, { rateLimit: 'slow' });
    expect(await h.engine.await(id, { timeout: 10_000 })).toMatchObject({ kind: 'done' });
    expect(rateColumn.get(id)).toEqual(['slow', 'slow', null]);
    // Two executions of the limited step took two of the five tokens.
    const [bucket] = await bucketsOf(db, 'rate', 'slow');
    expect(bucket!.available).toBeGreaterThan(2.99);
    expect(bucket!.available).toBeLessThan(3.01);
  });

  it('a next naming an unknown limit emits rate_limit:unknown and the row stalls (never granted)', async () => {
    h.clear();
    const id = await h.engine.insert(UnknownLimitFsm);
    const unknown = await h.waitFor('rate_limit:unknown');
    expect(unknown.measurements).toEqual({ count: 1 });
    expect(unknown.metadata).toEqual({
      key: 'nope:x',
      name: 'nope',
      fsm: 'unknown-limit',
      step: 'start',
    });
    // Several polls later it still has not run (each pick claims and releases it).
    await sleep(300);
    expect(neverRan).toBe(false);
    expect(await rowsOf(db, [id])).toMatchObject([{ step: 'never', attempt: 0 }]);
    expect(['runnable', 'executing']).toContain((await rowsOf(db, [id]))[0]!.status);
    await db.pool.query(`DELETE FROM gen_durable WHERE id = $1`, [id]);
  });

  it('weight > burst of a known limit is refused at the source: insert throws, a next fails the step', async () => {
    await expect(h.engine.insert(OnceFsm, { rateLimit: 'api', weight: 3 })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(h.engine.insert(OnceFsm, { rateLimit: 'api', weight: 3 })).rejects.toThrow(
      /exceeds the burst 2 of rate limit "api"/,
    );
    const id = await h.engine.insert(TooHeavyFsm);
    const result = await h.engine.await(id, { timeout: 10_000 });
    expect(result).toMatchObject({ kind: 'failed' });
    expect(result.kind === 'failed' && result.error).toMatch(/next\.weight.*exceeds the burst 2/);
  });

  it('claim + admit (+ release when denied) + 2 enrichment for rate-limited rows too', async () => {
    // A quiet engine (no scheduler, reaper or GC) so only the pick's statements are counted.
    const quiet = await bootEngine(db, FSMS, {
      name: 'Quiet',
      queues: {},
      reaper: false,
      gc: false,
      rateLimits: { api: { allowed: 2, period: 3600 } },
    });
    try {
      await quiet.engine.insertAll(
        ManualRateFsm,
        [1, 2, 3].map(() => ({ rateLimit: ['api', 'manual'] as const })),
      );
      quiet.clear();
      const rows = await quiet.engine.runtime.picker.pick('manual', 10, 'rate-worker');
      expect(rows).toHaveLength(2);
      expect(rows.every((r) => r.slot === null)).toBe(true);
      expect(quiet.statements).toEqual(['claim_runnable', 'admit', 'release_claims']);
    } finally {
      await quiet.close();
    }
    await db.pool.query(`DELETE FROM gen_durable WHERE queue = 'manual'`);
  });
});
