import type { Pool } from 'pg';

import { INSERT_INSTANCES } from '../../lib/sql/insert.sql';
import {
  FIRE_AWAIT_DEADLINES,
  HEARTBEAT,
  type HeartbeatResult,
  REAP_EXPIRED,
} from '../../lib/sql/lease.sql';
import {
  CONSUME_INBOXES,
  FANOUT_LOCK_PARENTS,
  FANOUT_PARK_PARENTS,
  FLUSH_PARKS,
  FLUSH_TRANSITIONS,
  RECHECK_PARKS,
} from '../../lib/sql/outcome.sql';
import {
  type DeliveredSignal,
  DELIVER_SIGNAL,
  type SignalDelivery,
} from '../../lib/sql/signal.sql';
import { transitionWrite } from '../../bench/done-writes';
import { claimOn } from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { type RaceReport, type RaceSpec, type RaceStep, runRace } from './support/isolation-runner';
import {
  expireLease,
  freshQueue,
  inboxOf,
  insertRow,
  row,
  poolRunner,
  rowView,
} from './support/race-fixtures';

// R0 races (docs/reliability.md §3.4): every interleaving of the production statements of two or
// more sessions, on real connections, with pg_isolation_test_session_is_blocked telling the
// runner who waits. Each session replays exactly what the engine sends: the flusher's
// transaction (docs/design.md §6.3, the same statements in the same order, with the flusher's own
// "only owned parents spawn" rule), one-statement signal delivery (§8.1), the reaper (§17.2),
// the claim (§5.3) and the heartbeat (§17.1). Covered: docs/design.md §8.4 (signal vs park), §10
// (reaper vs parent mid-spawn), §26.1 (stale worker vs re-claim), §26.6 (signal vs terminal
// outcome), docs/reliability.md S06 (heartbeat vs a foreign row lock) and S24 (await timeout vs signal).

const W = 'race:default@node-a-0001';
const W2 = 'race:default@node-b-0002';
const MAX_REAPS = 5;

const step = <V>(name: string, run: RaceStep<V>['run']): RaceStep<V> => ({ name, run });
const begin = <V>(name: string) => step<V>(name, ({ session }) => session.exec('BEGIN'));
const commit = <V>(name: string) => step<V>(name, ({ session }) => session.exec('COMMIT'));

const rowsOf = (value: unknown): Record<string, unknown>[] => value as Record<string, unknown>[];
const deliveryOf = (value: unknown): DeliveredSignal | null => value as DeliveredSignal | null;
/** A delivery by id (no dedup key unless given). */
const toId = (id: string, name: string, payloadText: string, dedupKey: string | null = null) =>
  ({ targetId: id, correlationKey: null, name, payloadText, dedupKey }) satisfies SignalDelivery;
const REAP = { maxReaps: MAX_REAPS, limit: 100, spreadMs: 2000 };
const reports: RaceReport[] = [];

describe('R0 races on real connections, all permutations', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    for (const r of reports) {
      process.stdout.write(
        `[races] ${r.spec}: ${r.total} permutations, ${r.valid} valid, ${r.invalid} invalid, ${r.withBlocking} with a blocked step\n`,
      );
    }
    await db.drop();
  });

  async function run<V>(
    spec: RaceSpec<V>,
    expected: { valid: number; blocking: boolean },
  ): Promise<RaceReport> {
    const report = await runRace(db, spec);
    reports.push(report);
    expect(report.valid).toBe(expected.valid);
    // The interesting orders were actually exercised: some step really waited on a lock.
    expect(report.withBlocking > 0).toBe(expected.blocking);
    return report;
  }

  // ---------------------------------------------------------------------------------------
  // docs/design.md §8.4: signal vs park. The flush parks and rechecks in one transaction; delivery
  // locks the target first and flips it in a CASE. Whatever the order, the parked row wakes
  // exactly once — by the recheck or by the delivery's flip — and the signal waits unconsumed.
  // ---------------------------------------------------------------------------------------
  interface ParkVars {
    id: string;
    seq: string;
    presented: string[];
    signalName: string;
  }

  async function parkFixture(
    pool: Pool,
    options: { presentOld?: boolean; signalName?: string } = {},
  ): Promise<ParkVars> {
    const queue = freshQueue();
    const id = await insertRow(pool, row('parker', 'start', { seq: 0 }, queue));
    const presented: string[] = [];
    if (options.presentOld) {
      // A pack: the parking step was shown signal #1 and re-awaits it.
      const old = await DELIVER_SIGNAL.run(poolRunner(pool), toId(id, 'go', '{"n":1}'));
      const inbox = await inboxOf(pool, old!.id);
      presented.push(...inbox.map((s) => s.id));
    }
    const [claimed] = await claimOn(poolRunner(pool), queue, W);
    return { id, seq: claimed!.claimSeq, presented, signalName: options.signalName ?? 'go' };
  }

  const parkSteps: RaceStep<ParkVars>[] = [
    begin('p_begin'),
    step('p_park', ({ session, vars }) =>
      FLUSH_PARKS.run(session, {
        entries: [
          {
            worker: W,
            id: vars.id,
            seq: vars.seq,
            nextStep: 'woken',
            stateText: '{"seq":1}',
            names: ['go'],
            timeoutMs: null,
          },
        ],
      }),
    ),
    step('p_recheck', ({ session, vars }) =>
      RECHECK_PARKS.run(session, {
        parkedIds: [vars.id],
        presented: vars.presented.map((signalId) => ({ targetId: vars.id, signalId })),
      }),
    ),
    commit('p_commit'),
  ];
  const deliver = (name: string) =>
    step<ParkVars>(name, ({ session, vars }) =>
      DELIVER_SIGNAL.run(session, toId(vars.id, vars.signalName, '{"n":2}')),
    );

  async function checkPark(
    result: { vars: ParkVars; steps: ReadonlyMap<string, { value?: unknown; error?: Error }> },
    pool: Pool,
    deliverStep: string,
  ) {
    const { vars, steps } = result;
    for (const o of steps.values()) expect(o.error).toBeUndefined();
    expect(rowsOf(steps.get('p_park')!.value)).toHaveLength(1);
    const delivered = deliveryOf(steps.get(deliverStep)!.value);
    expect(delivered).toEqual(expect.objectContaining({ id: vars.id, inserted: true }));
    const wokenByRecheck = rowsOf(steps.get('p_recheck')!.value).length === 1;
    const wokenByDelivery = delivered!.status === 'runnable';
    const final = await rowView(pool, vars.id);
    const inbox = await inboxOf(pool, vars.id);
    expect(inbox.filter((s) => s.consumed)).toEqual([]);
    if (vars.signalName === 'go') {
      // No lost wake-up, and no double wake.
      expect(wokenByRecheck !== wokenByDelivery).toBe(true);
      expect(final).toMatchObject({
        status: 'runnable',
        step: 'woken',
        awaits: ['go'],
        state: { seq: 1 },
      });
    } else {
      // Control: a signal the row does not await wakes nothing (so the check above can fail).
      expect(wokenByRecheck || wokenByDelivery).toBe(false);
      expect(final).toMatchObject({ status: 'awaiting_signal', step: 'woken' });
    }
  }

  it('§8.4 signal vs park: delivery in its own transaction, 35 interleavings', async () => {
    await run<ParkVars>(
      {
        name: 'signal-vs-park (delivery in a transaction)',
        sessions: {
          flush: parkSteps,
          signal: [begin('s_begin'), deliver('s_deliver'), commit('s_commit')],
        },
        setup: (pool) => parkFixture(pool),
        check: (r, pool) => checkPark(r, pool, 's_deliver'),
      },
      // Orders that ask a blocked session to step are invalid (as in the isolation tester).
      { valid: 19, blocking: true },
    );
  });

  it('§8.4 signal vs park: autocommit delivery (the engine path), 5 interleavings', async () => {
    const report = await run<ParkVars>(
      {
        name: 'signal-vs-park (autocommit delivery)',
        sessions: { flush: parkSteps, signal: [deliver('s_deliver')] },
        setup: (pool) => parkFixture(pool),
        check: (r, pool) => checkPark(r, pool, 's_deliver'),
      },
      { valid: 5, blocking: true },
    );
    // Park first, commit last: the delivery waited on the parked row and re-evaluated its CASE.
    expect(report.lines).toContain('p_begin p_park p_recheck s_deliver* p_commit');
  });

  it('§8.4 re-await of a pack: the presented signal is excluded, a new one still wakes', async () => {
    await run<ParkVars>(
      {
        name: 'signal-vs-re-park (presented signal excluded)',
        sessions: { flush: parkSteps, signal: [deliver('s_deliver')] },
        setup: (pool) => parkFixture(pool, { presentOld: true }),
        check: (r, pool) => checkPark(r, pool, 's_deliver'),
      },
      { valid: 5, blocking: true },
    );
  });

  it('§8.4 control: a signal name the park does not await wakes nothing in any order', async () => {
    await run<ParkVars>(
      {
        name: 'signal-vs-park control (unawaited name)',
        sessions: { flush: parkSteps, signal: [deliver('s_deliver')] },
        setup: (pool) => parkFixture(pool, { signalName: 'other' }),
        check: (r, pool) => checkPark(r, pool, 's_deliver'),
      },
      { valid: 5, blocking: true },
    );
  });

  // ---------------------------------------------------------------------------------------
  // docs/design.md §10: reaper vs parent mid-spawn. The parent's lease has run out while its fan-out
  // flush runs. The flush locks its owned parents first, inserts children only for them and
  // parks them on the landed count; the reaper claims skip-locked. Either the reaper wins
  // (parent back to runnable, attempt + 1, no child exists) or the spawn wins (children exist,
  // parent awaiting exactly them, never reaped) — never children of a reaped parent.
  // ---------------------------------------------------------------------------------------
  interface SpawnVars {
    parent: string;
    seq: string;
    queue: string;
    owned: string[];
    landed: number;
  }

  it('§10 reaper vs parent mid-spawn: 6 interleavings', async () => {
    const flush: RaceStep<SpawnVars>[] = [
      begin('f_begin'),
      step('f_lock', async ({ session, vars }) => {
        const owned = await FANOUT_LOCK_PARENTS.run(session, {
          entries: [{ worker: W, id: vars.parent, seq: vars.seq }],
        });
        vars.owned = owned.map((o) => o.id);
        return owned;
      }),
      step('f_children', async ({ session, vars }) => {
        // The flusher spawns only for parents FANOUT_LOCK_PARENTS returned.
        if (!vars.owned.includes(vars.parent)) return [];
        const children = [1, 2, 3].map((n) =>
          row('child', 'start', { n }, `${vars.queue}-children`),
        );
        const inserted = await INSERT_INSTANCES.run(session, {
          rows: children,
          parentIds: children.map(() => vars.parent),
        });
        vars.landed = inserted.length;
        return inserted;
      }),
      step('f_park', async ({ session, vars }) => {
        if (!vars.owned.includes(vars.parent)) return [];
        return FANOUT_PARK_PARENTS.run(session, {
          entries: [
            {
              worker: W,
              id: vars.parent,
              seq: vars.seq,
              nextStep: 'joined',
              stateText: '{"seq":1}',
            },
          ],
          landed: new Map([[vars.parent, vars.landed]]),
        });
      }),
      commit('f_commit'),
    ];
    await run<SpawnVars>(
      {
        name: 'reaper-vs-parent-mid-spawn',
        sessions: {
          flush,
          reaper: [
            step('r_reap', ({ session }) => REAP_EXPIRED.run(session, REAP).then((s) => s.rows)),
          ],
        },
        async setup(pool) {
          await pool.query('TRUNCATE gen_durable CASCADE');
          const queue = freshQueue();
          const parent = await insertRow(pool, row('basket', 'start', { seq: 0 }, queue));
          const [claimed] = await claimOn(poolRunner(pool), queue, W);
          await expireLease(pool, parent);
          return { parent, seq: claimed!.claimSeq, queue, owned: [], landed: 0 };
        },
        async check({ vars, steps }, pool) {
          for (const o of steps.values()) expect(o.error).toBeUndefined();
          const reaped = rowsOf(steps.get('r_reap')!.value).map((r) => r['id']);
          const parent = await rowView(pool, vars.parent);
          const { rows: children } = await pool.query<{ n: string }>(
            `SELECT count(*) AS n FROM gen_durable WHERE parent_id = $1`,
            [vars.parent],
          );
          const childCount = Number(children[0]!.n);
          if (reaped.includes(vars.parent)) {
            expect(childCount).toBe(0);
            expect(parent).toMatchObject({
              status: 'runnable',
              step: 'start',
              attempt: 1,
              reaps: 1,
              children_pending: 0,
            });
          } else {
            expect(childCount).toBe(3);
            expect(parent).toMatchObject({
              status: 'awaiting_children',
              step: 'joined',
              attempt: 0,
              reaps: 0,
              children_pending: 3,
            });
          }
        },
      },
      // SKIP LOCKED never waits: no interleaving blocks, the lock is what makes the reaper skip.
      { valid: 6, blocking: false },
    );
  });

  // ---------------------------------------------------------------------------------------
  // docs/design.md §26.1: a stale worker vs the re-claim. T1 ran step `start` under claim_seq 1 and
  // its lease ran out; the reaper returns the row; a worker (the same worker id, or another
  // node) claims it again and T2 commits its outcome. T1's outcome commits iff no reap came
  // before it; a reaped claim's outcome is stale whatever the worker id; state never rewinds.
  // ---------------------------------------------------------------------------------------
  interface FenceVars {
    id: string;
    queue: string;
    seq1: string;
    claimed: { seq: string; step: string; state: { seq: number } } | null;
  }

  const transition = (worker: string, id: string, seq: string, step: string, state: object) => ({
    entries: [
      {
        worker,
        id,
        seq,
        kind: 'next' as const,
        nextStep: step,
        stateText: JSON.stringify(state),
        resultText: null,
        error: null,
        delayMs: 0,
        rateLimit: null,
        weight: 1,
        setKey: false,
        concurrencyKey: null,
      },
    ],
    solo: false,
  });

  for (const [label, second] of [
    ['the same worker id', W],
    ['another node', W2],
  ] as const) {
    it(`§26.1 stale worker vs re-claim by ${label}: 120 interleavings`, async () => {
      const t1: RaceStep<FenceVars>[] = [
        begin('t1_begin'),
        step('t1_outcome', ({ session, vars }) =>
          FLUSH_TRANSITIONS.run(
            session,
            transition(W, vars.id, vars.seq1, 'b', { seq: 1, by: 'T1' }),
          ),
        ),
        commit('t1_commit'),
      ];
      const reaper = [
        step<FenceVars>('r_reap', ({ session }) =>
          REAP_EXPIRED.run(session, REAP).then((s) => s.rows),
        ),
      ];
      const claimer = [
        step<FenceVars>('c_claim', async ({ session, vars }) => {
          const rows = await claimOn(session, vars.queue, second, { batch: 10 });
          const r = rows[0];
          vars.claimed = r
            ? { seq: r.claimSeq, step: r.step, state: r.state as { seq: number } }
            : null;
          return rows;
        }),
      ];
      const t2 = [
        step<FenceVars>('t2_outcome', async ({ session, vars }) => {
          if (!vars.claimed) return 'nothing claimed';
          // T2 ran whatever step the claim handed it, from the state it was handed.
          const next = vars.claimed.step === 'start' ? 'b' : 'c';
          return FLUSH_TRANSITIONS.run(
            session,
            transition(second, vars.id, vars.claimed.seq, next, {
              seq: vars.claimed.state.seq + 1,
              by: 'T2',
            }),
          );
        }),
      ];
      await run<FenceVars>(
        {
          name: `fencing (re-claim by ${label})`,
          sessions: { t1, reaper, claimer, t2 },
          async setup(pool) {
            await pool.query('TRUNCATE gen_durable CASCADE');
            const queue = freshQueue();
            const id = await insertRow(pool, row('fenced', 'start', { seq: 0 }, queue));
            const [claimed] = await claimOn(poolRunner(pool), queue, W);
            await expireLease(pool, id);
            return { id, queue, seq1: claimed!.claimSeq, claimed: null };
          },
          async check({ vars, steps }, pool) {
            for (const o of steps.values()) expect(o.error).toBeUndefined();
            const reaped = rowsOf(steps.get('r_reap')!.value).some((r) => r['id'] === vars.id);
            const t1Committed = rowsOf(steps.get('t1_outcome')!.value).length === 1;
            const t2Value = steps.get('t2_outcome')!.value;
            const t2Committed = Array.isArray(t2Value) && t2Value.length === 1;
            // The fence: a reaped claim's outcome never commits, whoever claims next.
            if (reaped) expect(t1Committed).toBe(false);
            else expect(t1Committed).toBe(true);
            // A claim's own outcome always commits (nothing else touches the row here).
            expect(t2Committed).toBe(vars.claimed !== null && t2Value !== 'nothing claimed');
            const final = await rowView(pool, vars.id);
            // No rewind, no double apply: the state's seq counts the committed outcomes.
            expect(final.state['seq']).toBe(Number(t1Committed) + Number(t2Committed));
            if (t2Committed && t1Committed) {
              expect(vars.claimed).toMatchObject({ step: 'b', state: { seq: 1, by: 'T1' } });
            }
            expect(Number(final.claim_seq)).toBe(Number(vars.seq1) + (vars.claimed ? 1 : 0));
          },
        },
        { valid: 120, blocking: false },
      );
      // 120 interleavings of real sessions: about 24–30 s on a loaded 2-core machine, past
      // jest's 30 s default. A time limit only: nothing here asserts on wall-clock time.
    }, 180_000);
  }

  // ---------------------------------------------------------------------------------------
  // docs/design.md §26.6: signal vs terminal outcome. The terminal flush (done + consume inbox) races a
  // delivery by id or by correlation key. Acknowledged ⇒ stored and consumed by the terminal
  // flush; refused (no live target) ⇒ nothing stored. Never an unconsumed signal on a
  // terminal row (an orphaned "delivered" signal).
  // ---------------------------------------------------------------------------------------
  interface TerminalVars {
    id: string;
    seq: string;
    key: string;
  }

  const terminalFlush: RaceStep<TerminalVars>[] = [
    begin('f_begin'),
    step('f_done', ({ session, vars }) =>
      FLUSH_TRANSITIONS.run(session, {
        entries: [
          transitionWrite(
            { worker: W, id: vars.id, claimSeq: vars.seq },
            { kind: 'done', resultText: '{"ok":true}' },
          ),
        ],
        solo: false,
      }),
    ),
    step('f_consume', ({ session, vars }) => CONSUME_INBOXES.run(session, { ids: [vars.id] })),
    commit('f_commit'),
  ];

  for (const by of ['id', 'key'] as const) {
    const deliverTo = (name: string) =>
      step<TerminalVars>(name, ({ session, vars }) =>
        DELIVER_SIGNAL.run(
          session,
          by === 'id'
            ? toId(vars.id, 'go', '{}', 'd-1')
            : {
                targetId: null,
                correlationKey: vars.key,
                name: 'go',
                payloadText: '{}',
                dedupKey: 'd-1',
              },
        ),
      );
    const setup = async (pool: Pool): Promise<TerminalVars> => {
      const queue = freshQueue();
      const key = `order:${queue}`;
      const id = await insertRow(
        pool,
        row('checkout', 'start', {}, queue, { correlationKey: key }),
      );
      const [claimed] = await claimOn(poolRunner(pool), queue, W);
      return { id, seq: claimed!.claimSeq, key };
    };
    const check = async (
      {
        vars,
        steps,
      }: { vars: TerminalVars; steps: ReadonlyMap<string, { value?: unknown; error?: Error }> },
      pool: Pool,
      name: string,
    ) => {
      for (const o of steps.values()) expect(o.error).toBeUndefined();
      expect(rowsOf(steps.get('f_done')!.value)).toEqual([
        expect.objectContaining({ id: vars.id, status: 'done' }),
      ]);
      const acknowledged = deliveryOf(steps.get(name)!.value) !== null;
      const inbox = await inboxOf(pool, vars.id);
      if (acknowledged) {
        expect(inbox).toEqual([expect.objectContaining({ name: 'go', consumed: true })]);
      } else expect(inbox).toEqual([]);
      expect((await rowView(pool, vars.id)).status).toBe('done');
    };

    it(`§26.6 signal by ${by} vs terminal outcome: delivery in its own transaction, 35 interleavings`, async () => {
      await run<TerminalVars>(
        {
          name: `signal-by-${by}-vs-terminal (delivery in a transaction)`,
          sessions: {
            flush: terminalFlush,
            signal: [begin('s_begin'), deliverTo('s_deliver'), commit('s_commit')],
          },
          setup,
          check: (r, pool) => check(r, pool, 's_deliver'),
        },
        { valid: 19, blocking: true },
      );
    });

    it(`§26.6 signal by ${by} vs terminal outcome: autocommit delivery, 5 interleavings`, async () => {
      const report = await run<TerminalVars>(
        {
          name: `signal-by-${by}-vs-terminal (autocommit delivery)`,
          sessions: { flush: terminalFlush, signal: [deliverTo('s_deliver')] },
          setup,
          check: (r, pool) => check(r, pool, 's_deliver'),
        },
        { valid: 5, blocking: true },
      );
      // The delivery that waited on the terminal flush was refused, not orphaned.
      expect(report.lines).toContain('f_begin f_done s_deliver* f_consume f_commit');
    });
  }

  // ---------------------------------------------------------------------------------------
  // docs/reliability.md S24: an await deadline firing while a matching signal arrives. The reaper's
  // sweep claims skip-locked; delivery locks the row and flips it in a CASE. Exactly one of
  // them wakes the row; the signal is stored either way, unconsumed, for the woken step (not
  // lost, not consumed unseen); the timeout keeps `awaits` and `attempt`.
  // ---------------------------------------------------------------------------------------
  interface DeadlineVars {
    id: string;
  }

  const deadlineSetup = async (pool: Pool): Promise<DeadlineVars> => {
    await pool.query('TRUNCATE gen_durable CASCADE');
    const queue = freshQueue();
    const id = await insertRow(pool, row('timed', 'start', { seq: 0 }, queue));
    const [claimed] = await claimOn(poolRunner(pool), queue, W);
    await FLUSH_PARKS.run(poolRunner(pool), {
      entries: [
        {
          worker: W,
          id,
          seq: claimed!.claimSeq,
          nextStep: 'woken',
          stateText: '{"seq":1}',
          names: ['go'],
          timeoutMs: 60_000,
        },
      ],
    });
    await pool.query(
      `UPDATE gen_durable SET await_deadline = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    return { id };
  };
  const deadlineCheck = async (
    {
      vars,
      steps,
    }: { vars: DeadlineVars; steps: ReadonlyMap<string, { value?: unknown; error?: Error }> },
    pool: Pool,
  ): Promise<void> => {
    for (const o of steps.values()) expect(o.error).toBeUndefined();
    const byTimeout = rowsOf(steps.get('t_fire')!.value).some((r) => r['id'] === vars.id);
    const delivered = deliveryOf(steps.get('s_deliver')!.value);
    expect(delivered).toEqual(expect.objectContaining({ id: vars.id, inserted: true }));
    const bySignal = delivered!.status === 'runnable' && !byTimeout;
    expect(byTimeout !== bySignal).toBe(true);
    expect(await rowView(pool, vars.id)).toMatchObject({
      status: 'runnable',
      step: 'woken',
      awaits: ['go'],
      attempt: 0,
    });
    expect(await inboxOf(pool, vars.id)).toEqual([
      expect.objectContaining({ name: 'go', consumed: false }),
    ]);
    const { rows } = await pool.query<{ deadline: Date | null }>(
      `SELECT await_deadline AS deadline FROM gen_durable WHERE id = $1`,
      [vars.id],
    );
    expect(rows[0]!.deadline).toBeNull();
  };
  const deliverGo = step<DeadlineVars>('s_deliver', ({ session, vars }) =>
    DELIVER_SIGNAL.run(session, toId(vars.id, 'go', '{}')),
  );

  it('S24 await timeout vs signal: sweep and delivery each in their own transaction, 20 interleavings', async () => {
    await run<DeadlineVars>(
      {
        name: 'await-timeout-vs-signal (transactions)',
        sessions: {
          sweeper: [
            begin('t_begin'),
            step('t_fire', ({ session }) => FIRE_AWAIT_DEADLINES.run(session, { limit: 100 })),
            commit('t_commit'),
          ],
          signal: [begin('s_begin'), deliverGo, commit('s_commit')],
        },
        setup: deadlineSetup,
        check: deadlineCheck,
      },
      { valid: 17, blocking: true },
    );
  });

  it('S24 await timeout vs signal: autocommit sweep and delivery, both orders', async () => {
    await run<DeadlineVars>(
      {
        name: 'await-timeout-vs-signal (autocommit)',
        sessions: {
          sweeper: [
            step('t_fire', ({ session }) => FIRE_AWAIT_DEADLINES.run(session, { limit: 100 })),
          ],
          signal: [deliverGo],
        },
        setup: deadlineSetup,
        check: deadlineCheck,
      },
      { valid: 2, blocking: false },
    );
  });

  // ---------------------------------------------------------------------------------------
  // docs/reliability.md S06: a foreign session holds the row lock (SELECT … FOR UPDATE) while the
  // lease runs out. Heartbeat and reaper are skip-locked: neither waits. The lease is either
  // renewed or the row reaped, never both, and a row left expired is reaped once released.
  // ---------------------------------------------------------------------------------------
  interface LockVars {
    id: string;
    seq: string;
  }

  it('S06 heartbeat and reaper vs a foreign row lock: 20 interleavings', async () => {
    await run<LockVars>(
      {
        name: 'heartbeat-vs-reaper-vs-foreign-lock',
        sessions: {
          foreign: [
            begin('x_begin'),
            step('x_lock', ({ session, vars }) =>
              session.exec('SELECT id FROM gen_durable WHERE id = $1 FOR UPDATE', [vars.id]),
            ),
            commit('x_commit'),
          ],
          heartbeat: [
            step('h_beat', ({ session, vars }) =>
              HEARTBEAT.run(session, {
                worker: W,
                rows: [{ id: vars.id, claimSeq: vars.seq }],
                leaseMs: 2000,
              }),
            ),
          ],
          reaper: [
            step('r_reap', ({ session }) => REAP_EXPIRED.run(session, REAP).then((s) => s.rows)),
          ],
        },
        async setup(pool) {
          await pool.query('TRUNCATE gen_durable CASCADE');
          const queue = freshQueue();
          const id = await insertRow(pool, row('locked', 'start', {}, queue));
          const [claimed] = await claimOn(poolRunner(pool), queue, W);
          await expireLease(pool, id);
          return { id, seq: claimed!.claimSeq };
        },
        async check({ vars, steps }, pool) {
          for (const o of steps.values()) expect(o.error).toBeUndefined();
          const renewed = (steps.get('h_beat')!.value as HeartbeatResult).renewed.length === 1;
          const reaped = rowsOf(steps.get('r_reap')!.value).length === 1;
          expect(renewed && reaped).toBe(false);
          const final = await rowView(pool, vars.id);
          if (reaped) expect(final).toMatchObject({ status: 'runnable', attempt: 1 });
          else expect(final).toMatchObject({ status: 'executing', attempt: 0, locked_by: W });
          if (!renewed && !reaped) {
            // Both were skipped under the foreign lock: the next sweep reaps the row.
            expect((await REAP_EXPIRED.run(poolRunner(pool), REAP)).rows).toEqual([
              expect.objectContaining({ id: vars.id, status: 'runnable' }),
            ]);
          }
        },
      },
      { valid: 20, blocking: false },
    );
  });
});
