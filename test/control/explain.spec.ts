import {
  awaitSignal,
  done,
  DurableFsm,
  type ExplainCode,
  type Explanation,
  NoTargetError,
  Step,
} from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §30 "why isn't it running?": each situation made in the database, then
// engine.explain answers its reason code. The engine runs queue `served` only; rows of queue
// `xq` stay where the test puts them.

@DurableFsm({ name: 'explain-job', queue: 'xq' })
class ExplainJob {
  @Step() start() {
    return awaitSignal('go', 'finish', {});
  }
  @Step() finish() {
    return done({});
  }
}

@DurableFsm({ name: 'explain-expiring', queue: 'xq', onDeadline: 'expired' })
class ExpiringJob {
  @Step() start() {
    return awaitSignal('go', 'expired', {});
  }
  @Step() expired() {
    return done({});
  }
}

function codes(e: Explanation): ExplainCode[] {
  return e.reasons.map((r) => r.code);
}

describe('engine.explain (docs/design.md §30)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [ExplainJob, ExpiringJob], {
      queues: { served: 1 },
      reaper: false,
      gc: false,
      stats: false,
      poke: 'none',
      concurrencyLimits: { api: { limit: 2 } },
      rateLimits: { mail: { allowed: 1, period: 1, burst: 2 } },
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  async function row(sets: string, insert: Record<string, unknown> = {}): Promise<string> {
    const id = await h.engine.insert(ExplainJob, insert);
    await db.pool.query(`UPDATE gen_durable SET ${sets} WHERE id = $1`, [id]);
    return id;
  }

  async function explain(id: string): Promise<Explanation> {
    return h.engine.explain(id);
  }

  it('a future eligible_at: not_yet_eligible with the time', async () => {
    const id = await h.engine.insert(ExplainJob, { scheduleIn: 3_600_000 });
    const e = await explain(id);
    expect(codes(e)).toEqual(['not_yet_eligible', 'queue_not_served']);
    expect(e.reasons[0]?.blocking).toBe(true);
    expect((e.reasons[0]?.details['eligibleAt'] as Date).getTime()).toBeGreaterThan(Date.now());
  });

  it('a due row nobody claims: queued, with rows ahead', async () => {
    const first = await h.engine.insert(ExplainJob, {});
    const second = await h.engine.insert(ExplainJob, {});
    const e = await explain(second);
    expect(codes(e)).toEqual(['queued', 'queue_not_served']);
    expect(e.reasons[0]?.details['ahead']).toBeGreaterThanOrEqual(1);
    await db.pool.query('DELETE FROM gen_durable WHERE id = ANY($1::bigint[])', [[first, second]]);
  });

  it('awaiting a signal: awaited names vs the unconsumed inbox', async () => {
    const id = await row(`status = 'awaiting_signal', awaits = '{go}'`);
    await db.pool.query(
      `INSERT INTO gen_durable_signals (target_id, name) VALUES ($1, 'stop'), ($1, 'other')`,
      [id],
    );
    const e = await h.engine.explain({ id });
    expect(e.reasons[0]).toMatchObject({
      code: 'awaiting_signal',
      blocking: true,
      details: { awaited: ['go'], inbox: ['other', 'stop'] },
    });
  });

  it('awaiting children: the pending count', async () => {
    const id = await row(`status = 'awaiting_children', children_pending = 3`);
    expect((await explain(id)).reasons[0]).toMatchObject({
      code: 'awaiting_children',
      details: { pending: 3 },
    });
  });

  it('a K = 1 key held by another executing row names the holder', async () => {
    const holder = await row(
      `status = 'executing', locked_by = 'w1', lease_expires_at = now() + interval '1 minute'`,
      { concurrencyKey: 'acct:7' },
    );
    const id = await h.engine.insert(ExplainJob, { concurrencyKey: 'acct:7' });
    const e = await explain(id);
    expect(e.reasons[0]).toMatchObject({
      code: 'concurrency_key_held',
      blocking: true,
      details: { key: 'acct:7', holder },
    });
    expect((await explain(holder)).reasons[0]).toMatchObject({
      code: 'executing',
      blocking: false,
      details: { owner: 'w1' },
    });
  });

  it('a full gate: holders / limit', async () => {
    const holders = [];
    for (let i = 0; i < 2; i++) {
      holders.push(
        await row(
          `status = 'executing', locked_by = 'w', concurrency_shard = 0, lease_expires_at = now() + interval '1 minute'`,
          { concurrencyKey: 'api:1' },
        ),
      );
    }
    await db.pool.query(
      `INSERT INTO gen_durable_buckets (kind, key, shard, capacity, available) VALUES ('conc', 'api:1', 0, 2, 0)`,
    );
    const id = await h.engine.insert(ExplainJob, { concurrencyKey: 'api:1' });
    expect((await explain(id)).reasons[0]).toMatchObject({
      code: 'gate_full',
      blocking: true,
      details: { key: 'api:1', holders: 2, limit: 2, free: 0, holderIds: holders.sort() },
    });
    const other = await h.engine.insert(ExplainJob, { concurrencyKey: 'api:2' });
    expect((await explain(other)).reasons[0]).toMatchObject({
      code: 'gate_full',
      blocking: false,
      details: { free: 2, limit: 2 },
    });
  });

  it('an empty rate bucket: until when', async () => {
    await db.pool.query(
      `INSERT INTO gen_durable_buckets (kind, key, shard, capacity, available, last_refill)
       VALUES ('rate', 'mail:x', 0, 2, 0, now())`,
    );
    const id = await h.engine.insert(ExplainJob, { rateLimit: 'mail:x', weight: 2 });
    const e = await explain(id);
    expect(e.reasons[0]).toMatchObject({
      code: 'rate_limited',
      blocking: true,
      details: { key: 'mail:x', capacity: 2, perSecond: 1, weight: 2 },
    });
    const until = e.reasons[0]?.details['until'] as Date;
    expect(until.getTime() - e.at.getTime()).toBeGreaterThan(0);
    expect(until.getTime() - e.at.getTime()).toBeLessThanOrEqual(2000);
  });

  it('an expired lease: awaiting the reaper', async () => {
    const id = await row(
      `status = 'executing', locked_by = 'w9', lease_expires_at = now() - interval '5 seconds'`,
    );
    expect((await explain(id)).reasons[0]).toMatchObject({
      code: 'lease_expired',
      blocking: true,
      details: { owner: 'w9' },
    });
  });

  it('a paused queue', async () => {
    await h.engine.pauseQueue('xq', { reason: 'incident' });
    try {
      const id = await h.engine.insert(ExplainJob, {});
      expect((await explain(id)).reasons[0]).toMatchObject({
        code: 'queue_paused',
        blocking: true,
        details: { queue: 'xq', reason: 'incident' },
      });
    } finally {
      await h.engine.resumeQueue('xq');
    }
  });

  it('an FSM version this node does not register', async () => {
    const id = await row(`fsm_version = 9`);
    expect(codes(await explain(id))).toContain('fsm_not_registered');
  });

  it('a row of a queue this node serves has no queue_not_served', async () => {
    const id = await row(`queue = 'served', eligible_at = now() + interval '1 hour'`);
    expect(codes(await explain(id))).toEqual(['not_yet_eligible']);
  });

  it('the instance deadline: when, whether it passed, and what it does (cancel or onDeadline)', async () => {
    const ahead = await h.engine.insert(ExplainJob, { deadlineInMs: 3_600_000 });
    const e = await explain(ahead);
    const reason = e.reasons.find((r) => r.code === 'deadline');
    expect(reason).toMatchObject({
      blocking: false,
      details: { overdue: false, action: 'cancel', step: null, graceMs: h.engine.options.leaseTtl },
    });
    expect(reason?.details['deadline']).toBeInstanceOf(Date);
    expect(reason?.text).toMatch(
      /^its deadline is .* \(in 3600 s\): if it has not ended by then, it is cancelled/,
    );
    const passed = await row(`deadline_at = now() - interval '5 minutes'`, {
      deadlineInMs: 3_600_000,
    });
    expect((await explain(passed)).reasons.find((r) => r.code === 'deadline')).toMatchObject({
      blocking: false,
      details: { overdue: true, action: 'cancel' },
      text: expect.stringMatching(
        /^its deadline passed at .* \(30\d s ago\): the next deadline firing/,
      ),
    });
    const routed = await h.engine.insert(ExpiringJob, { deadlineInMs: 3_600_000 });
    expect((await explain(routed)).reasons.find((r) => r.code === 'deadline')).toMatchObject({
      details: { overdue: false, action: 'onDeadline', step: 'expired' },
      text: expect.stringContaining('it moves to step expired'),
    });
    // Without one, no reason; an ended row answers only `terminal`.
    expect(codes(await explain(await h.engine.insert(ExplainJob, {})))).not.toContain('deadline');
    await h.engine.cancel(ahead);
    expect(codes(await explain(ahead))).toEqual(['terminal']);
  });

  it('ended rows: terminal with the error or cancel reason; an unknown target is NoTargetError', async () => {
    const failed = await row(`status = 'failed', last_error = 'boom'`);
    expect((await explain(failed)).reasons).toMatchObject([
      { code: 'terminal', details: { status: 'failed', reason: 'boom' } },
    ]);
    const id = await h.engine.insert(ExplainJob, { correlationKey: 'explain-c' });
    await h.engine.cancel(id, { reason: 'not needed' });
    expect((await explain(id)).reasons[0]).toMatchObject({
      code: 'terminal',
      details: { status: 'cancelled', reason: 'not needed' },
    });
    await expect(h.engine.explain('999999999')).rejects.toBeInstanceOf(NoTargetError);
    await expect(h.engine.explain({ correlationKey: 'nobody' })).rejects.toBeInstanceOf(
      NoTargetError,
    );
  });
});
