import { done, DurableFsm, next, type NextOptions, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

interface ChainState {
  tag: string;
  /** Rate key of step b. */
  bRate?: string;
  /** Concurrency key set by the start → b transition (absent = keep). */
  bKey?: string | null;
  /** Per-transition override of start → b. */
  inlineB?: boolean;
  sleepMs?: number;
  /** Start: the test takes the claim away (a re-claim bumps the fencing token) mid-step. */
  steal?: boolean;
}

/** What the steps saw, for the assertions. */
const probe = {
  statements: [] as string[],
  steps: [] as Array<{ id: string; step: string; tag: string; stmt: number }>,
  running: new Map<string, number>(),
  maxRunning: new Map<string, number>(),
  steal: async (_id: string): Promise<void> => undefined,
  reset(statements: string[]): void {
    this.statements = statements;
    this.steps.length = 0;
    this.running.clear();
    this.maxRunning.clear();
  },
};

async function observe(ctx: StepContext<ChainState>, holdsKey: boolean): Promise<void> {
  probe.steps.push({
    id: ctx.id,
    step: ctx.step,
    tag: ctx.state.tag,
    stmt: probe.statements.length,
  });
  if (!holdsKey) {
    if (ctx.state.sleepMs) await new Promise((r) => setTimeout(r, ctx.state.sleepMs));
    return;
  }
  const tag = ctx.state.tag;
  const now = (probe.running.get(tag) ?? 0) + 1;
  probe.running.set(tag, now);
  probe.maxRunning.set(tag, Math.max(probe.maxRunning.get(tag) ?? 0, now));
  await new Promise((r) => setTimeout(r, ctx.state.sleepMs ?? 0));
  probe.running.set(tag, (probe.running.get(tag) ?? 1) - 1);
}

function toB(state: ChainState): NextOptions {
  const options: NextOptions = {};
  if (state.bRate !== undefined) options.rateLimit = state.bRate;
  if (state.bKey !== undefined) options.concurrencyKey = state.bKey;
  if (state.inlineB !== undefined) options.inlineExecution = state.inlineB;
  return options;
}

/** start → b → c → done, inline by default. */
@DurableFsm({ name: 'inline_chain', inlineExecution: true })
class InlineChain {
  @Step() async start(ctx: StepContext<ChainState>) {
    await observe(ctx, ctx.state.bKey === undefined && ctx.state.tag.startsWith('keep'));
    if (ctx.state.steal) await probe.steal(ctx.id);
    return next('b', ctx.state, toB(ctx.state));
  }
  @Step() async b(ctx: StepContext<ChainState>) {
    await observe(ctx, true);
    return next('c', ctx.state);
  }
  @Step() async c(ctx: StepContext<ChainState>) {
    await observe(ctx, true);
    return done({ tag: ctx.state.tag });
  }
}

/** The same chain on an FSM that does not inline by default: only start → b opts in. */
@DurableFsm({ name: 'opt_in_chain' })
class OptInChain {
  @Step() start(ctx: StepContext<ChainState>) {
    probe.steps.push({
      id: ctx.id,
      step: ctx.step,
      tag: ctx.state.tag,
      stmt: probe.statements.length,
    });
    return next('b', ctx.state, { inlineExecution: true });
  }
  @Step() b(ctx: StepContext<ChainState>) {
    probe.steps.push({
      id: ctx.id,
      step: ctx.step,
      tag: ctx.state.tag,
      stmt: probe.statements.length,
    });
    return next('c', ctx.state);
  }
  @Step() c(ctx: StepContext<ChainState>) {
    probe.steps.push({
      id: ctx.id,
      step: ctx.step,
      tag: ctx.state.tag,
      stmt: probe.statements.length,
    });
    return done({ tag: ctx.state.tag });
  }
}

// The continue is a flush no rider can follow: one autocommit statement; then the re-read.
const CHAIN_WINDOW = ['flush_transitions', 'load_enrichment'];

// docs/design.md §7, §25.6: inline execution (run-ahead).
describe('inline execution', () => {
  let db: TestDatabase;
  /** Serves `default`: nothing in the background, so the statements between steps are the chain's own. */
  let h: Harness;
  /** Serves `limits` and `scarce` with a short poll: rows released after a denial come back by it (§5.5). */
  let lim: Harness;
  const limits = {
    rateLimits: {
      fast: { allowed: 10_000, period: 1 },
      scarce: { allowed: 5, period: [1, 'hour'] as [number, 'hour'] },
    },
    concurrencyLimits: { one: { limit: 1 }, two: { limit: 2 }, shardy: { limit: 4, shards: 2 } },
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [InlineChain, OptInChain], {
      name: 'Inline',
      queues: { default: 4 },
      pollInterval: 60_000,
      maxPollInterval: 60_000,
      leaseTtl: 60_000,
      heartbeatInterval: 15_000,
      reaper: false,
      gc: false,
      ...limits,
    });
    lim = await bootEngine(db, [InlineChain, OptInChain], {
      name: 'InlineLimits',
      queues: { limits: 4, scarce: 4 },
      pollInterval: 100,
      maxPollInterval: 200,
      reaper: false,
      gc: false,
      ...limits,
    });
    await h.waitFor('scheduler:saturation');
  });
  afterAll(async () => {
    await lim.close();
    await h.close();
    await db.drop();
  });

  beforeEach(() => {
    h.clear();
    lim.clear();
    probe.reset(h.statements);
  });

  async function statusOf(
    id: string,
  ): Promise<{ status: string; step: string; locked_by: string | null; attempt: number }> {
    const rows = (
      await db.pool.query(
        `SELECT status, step, locked_by, attempt FROM gen_durable WHERE id = $1`,
        [id],
      )
    ).rows;
    return rows[0] as { status: string; step: string; locked_by: string | null; attempt: number };
  }

  async function doneCount(tag: string): Promise<number> {
    const rows = (
      await db.pool.query<{ n: string }>(
        `SELECT count(*) AS n FROM gen_durable WHERE state->>'tag' = $1 AND status = 'done'`,
        [tag],
      )
    ).rows;
    return Number(rows[0]?.n);
  }

  async function availableOf(key: string): Promise<number> {
    const rows = (
      await db.pool.query<{ available: number }>(
        `SELECT available FROM gen_durable_buckets WHERE kind = 'conc' AND key = $1`,
        [key],
      )
    ).rows;
    return rows.reduce((n, r) => n + r.available, 0);
  }

  function stepsOf(id: string): Array<{ step: string; stmt: number }> {
    return probe.steps.filter((s) => s.id === id);
  }

  it('one executor runs the chain; each chained step costs the continue commit + 2 enrichment reads', async () => {
    const id = await h.engine.insert(InlineChain, { state: { tag: 'plain' } });
    await eventually(async () => (await statusOf(id)).status === 'done');
    const [a, b, c] = stepsOf(id);
    expect([a?.step, b?.step, c?.step]).toEqual(['start', 'b', 'c']);
    expect(h.statements.slice(a!.stmt, b!.stmt)).toEqual(CHAIN_WINDOW);
    expect(h.statements.slice(b!.stmt, c!.stmt)).toEqual(CHAIN_WINDOW);
    expect(
      h.eventsOf('run_ahead:continue', id).map((e) => [e.metadata['from'], e.metadata['to']]),
    ).toEqual([
      ['start', 'b'],
      ['b', 'c'],
    ]);
    // One claim fetched the row (a pick, or the insert itself: docs/design.md §5.5.1); every
    // later step ran on it.
    const picks = h.eventsOf('pick:stop').filter((e) => (e.measurements['count'] ?? 0) > 0);
    const insertedClaimed = h.statements.filter((s) => s === 'insert_claimed');
    expect(picks.length + insertedClaimed.length).toBe(1);
    // Two continues (FLUSH_TRANSITIONS) and the last step's `done` (FLUSH_DONE).
    expect(h.statements.filter((s) => s === 'flush_transitions')).toHaveLength(2);
    expect(h.statements.filter((s) => s === 'flush_done')).toHaveLength(1);
  });

  it('a rate-limited next step adds exactly one admit statement', async () => {
    const id = await h.engine.insert(InlineChain, { state: { tag: 'rated', bRate: 'fast' } });
    await eventually(async () => (await statusOf(id)).status === 'done');
    const [a, b, c] = stepsOf(id);
    expect(h.statements.slice(a!.stmt, b!.stmt)).toEqual([
      'flush_transitions',
      'admit',
      'load_enrichment',
    ]);
    expect(h.statements.slice(b!.stmt, c!.stmt)).toEqual(CHAIN_WINDOW);
  });

  it('next(…, { inlineExecution: false }) opts one transition out; { inlineExecution: true } opts one in', async () => {
    const out = await h.engine.insert(InlineChain, { state: { tag: 'opt-out', inlineB: false } });
    const inn = await h.engine.insert(OptInChain, { state: { tag: 'opt-in' } });
    await eventually(
      async () =>
        (await statusOf(out)).status === 'done' && (await statusOf(inn)).status === 'done',
    );
    expect(h.eventsOf('run_ahead:continue', out).map((e) => e.metadata['to'])).toEqual(['c']);
    const [a, b] = stepsOf(out);
    expect(h.statements.slice(a!.stmt, b!.stmt)).toContain('claim_runnable');
    expect(h.eventsOf('run_ahead:continue', inn).map((e) => e.metadata['to'])).toEqual(['b']);
  });

  it('yields on a rate denial: requeued at its next step, and the limit is never exceeded', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      ids.push(
        await lim.engine.insert(InlineChain, {
          state: { tag: 'scarce', bRate: 'scarce' },
          queue: 'scarce',
        }),
      );
    }
    await eventually(async () => (await doneCount('scarce')) === 5, 20_000);
    await eventually(async () => {
      const states = await Promise.all(ids.map((id) => statusOf(id)));
      const waiting = states.filter((s) => s.status === 'runnable');
      return (
        waiting.length === 2 &&
        waiting.every((s) => s.step === 'b' && s.locked_by === null && s.attempt === 0)
      );
    }, 20_000);
    // The two left over reached b inline, were denied, and yielded.
    const yields = lim
      .eventsOf('run_ahead:yield')
      .filter((e) => ids.includes(String(e.metadata['id'])));
    expect(yields.length).toBeGreaterThanOrEqual(2);
    expect(
      yields.every((e) => e.metadata['reason'] === 'throttled' && e.metadata['to'] === 'b'),
    ).toBe(true);
    // The bucket holds 5 tokens an hour: exactly 5 b steps ran, however they were reached.
    expect(probe.steps.filter((s) => s.tag === 'scarce' && s.step === 'b')).toHaveLength(5);
  });

  it('a new configured key is drawn at the hand-off, held through the chain and credited once at the end', async () => {
    const id = await lim.engine.insert(InlineChain, {
      state: { tag: 'drawn', bKey: 'shardy:k', sleepMs: 400 },
      queue: 'limits',
    });
    // Step b runs (it sleeps 400 ms): admission is behind it.
    await eventually(async () => stepsOf(id).some((s) => s.step === 'b'));
    const during = await eventually(async () => {
      const rows = (
        await db.pool.query<{
          step: string;
          status: string;
          concurrency_key: string;
          concurrency_shard: number | null;
        }>(
          `SELECT step, status, concurrency_key, concurrency_shard FROM gen_durable WHERE id = $1`,
          [id],
        )
      ).rows;
      return rows[0]?.step === 'b' && rows[0].status === 'executing' ? rows[0] : undefined;
    });
    expect(during.concurrency_key).toBe('shardy:k');
    const gate = async () =>
      (
        await db.pool.query<{ shard: number; available: number; capacity: number }>(
          `SELECT shard, available, capacity FROM gen_durable_buckets WHERE kind = 'conc' AND key = 'shardy:k' ORDER BY shard`,
        )
      ).rows;
    const held = await gate();
    expect(held.reduce((n, r) => n + r.capacity - r.available, 0)).toBe(1);
    // The drawn shard is the one stamped on the row.
    expect(held.find((r) => r.available < r.capacity)?.shard).toBe(during.concurrency_shard);
    await eventually(async () => (await statusOf(id)).status === 'done');
    await eventually(async () => (await gate()).every((r) => r.available === r.capacity));
    expect(lim.eventsOf('run_ahead:continue', id)).toHaveLength(2);
  });

  it('a limit-1 keep-chain holds its one slot across steps: chains of one key never overlap', async () => {
    await lim.engine.insertAll(
      InlineChain,
      Array.from({ length: 3 }, () => ({
        state: { tag: 'keep-one', sleepMs: 60 },
        concurrencyKey: 'one:k',
        queue: 'limits',
      })),
    );
    await eventually(async () => (await doneCount('keep-one')) === 3, 20_000);
    expect(probe.maxRunning.get('keep-one')).toBe(1);
    expect(probe.steps.filter((s) => s.tag === 'keep-one')).toHaveLength(9);
    // Credits run after each commit: the gate comes back to exactly its capacity, never above.
    await eventually(async () => (await availableOf('one:k')) === 1);
  });

  it('chains adopting a gated key never exceed the gate; the denied ones yield and finish later', async () => {
    // One statement, one poke: one pick claims four, so four chains reach the gate together.
    // One statement, one poke: one pick claims four, so four chains reach the gate together.
    await lim.engine.insertAll(
      InlineChain,
      Array.from({ length: 6 }, () => ({
        state: { tag: 'two', bKey: 'two:x', sleepMs: 300 },
        queue: 'limits',
      })),
    );
    await eventually(async () => (await doneCount('two')) === 6, 30_000);
    expect(probe.maxRunning.get('two')).toBeLessThanOrEqual(2);
    expect(lim.eventsOf('run_ahead:yield').some((e) => e.metadata['reason'] === 'throttled')).toBe(
      true,
    );
    await eventually(async () => (await availableOf('two:x')) === 2);
  });

  it('a chain whose claim was taken away ends at the stale continue and never reaches admission', async () => {
    probe.steal = async (id) => {
      await db.pool.query(`UPDATE gen_durable SET claim_seq = claim_seq + 1 WHERE id = $1`, [id]);
    };
    const id = await h.engine.insert(InlineChain, {
      state: { tag: 'stolen', bRate: 'fast', steal: true },
    });
    const stale = await h.waitFor('outcome:stale', (e) => e.metadata['id'] === id);
    expect(stale.metadata['kind']).toBe('next');
    const [a] = stepsOf(id);
    // After the step: the continue's flush, found stale — no admit, no enrichment, no step b
    // (a refill claim of the now idle scheduler may follow; it finds nothing).
    expect(h.statements.slice(a!.stmt).filter((s) => s !== 'claim_runnable')).toEqual([
      'flush_transitions',
    ]);
    expect(stepsOf(id).map((s) => s.step)).toEqual(['start']);
    expect(h.eventsOf('run_ahead:continue', id)).toEqual([]);
    expect(await statusOf(id)).toMatchObject({ status: 'executing', step: 'start' });
  });

  it('a new unconfigured (K = 1) key is never inlined: the chain yields contended and the row requeues', async () => {
    const id = await lim.engine.insert(InlineChain, {
      state: { tag: 'k1', bKey: 'free:1' },
      queue: 'limits',
    });
    await eventually(async () => (await statusOf(id)).status === 'done');
    expect(
      lim.eventsOf('run_ahead:yield', id).map((e) => [e.metadata['reason'], e.metadata['to']]),
    ).toEqual([['contended', 'b']]);
    expect(lim.eventsOf('run_ahead:continue', id).map((e) => e.metadata['to'])).toEqual(['c']);
  });
});
