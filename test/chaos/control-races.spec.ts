import type { Pool } from 'pg';

import { cancelRounds, summarize } from '../../lib/control/cancel-instance';
import { CANCEL_INSTANCES, type CancelRequest } from '../../lib/sql/cancel.sql';
import { INSERT_INSTANCES } from '../../lib/sql/insert.sql';
import { REAP_EXPIRED } from '../../lib/sql/lease.sql';
import {
  CONSUME_INBOXES,
  FANOUT_LOCK_PARENTS,
  FANOUT_PARK_PARENTS,
  FLUSH_TRANSITIONS,
  JOIN_PARENTS,
  type TransitionWrite,
} from '../../lib/sql/outcome.sql';
import { GC_DELETE, GC_SELECT_TERMINAL } from '../../lib/sql/maintenance.sql';
import { RETRY_INSTANCES, type RetriedRow } from '../../lib/sql/retry.sql';
import { DELIVER_SIGNAL } from '../../lib/sql/signal.sql';
import { transitionWrite } from '../../bench/done-writes';
import type { RawSession } from '../support/raw-session';
import { claimOn } from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { type RaceReport, type RaceSpec, type RaceStep, runRace } from './support/isolation-runner';
import {
  expireLease,
  freshQueue,
  inboxOf,
  insertRow,
  poolRunner,
  row,
  rowView,
} from './support/race-fixtures';

// Cancel and retry races (docs/design.md §27.2, §27.3), every interleaving on real connections, as
// test/chaos/races.spec.ts: each session replays the production statements in the engine's
// order — the flusher's transaction (§6.3), the cancel's rounds (lib/control/cancel-instance.ts
// over CANCEL_INSTANCES), a delivery (§8.1), the reaper's transaction (§17.2) — and
// pg_isolation_test_session_is_blocked tells the runner who waits.

const W = 'race:default@node-a-0001';
const REAP = { maxReaps: 5, limit: 100, spreadMs: 2000 };

const step = <V>(name: string, run: RaceStep<V>['run']): RaceStep<V> => ({ name, run });
const begin = <V>(name: string) => step<V>(name, ({ session }) => session.exec('BEGIN'));
const commit = <V>(name: string) => step<V>(name, ({ session }) => session.exec('COMMIT'));
const rowsOf = (value: unknown): Record<string, unknown>[] => value as Record<string, unknown>[];

/** The engine's cancel on one session: its rounds, as cancelInstance runs them. */
function cancelOn(session: RawSession, targetId: string, extra: Partial<CancelRequest> = {}) {
  return cancelRounds(
    (request) => CANCEL_INSTANCES.run(session, request),
    {
      targetId,
      correlationKey: null,
      reason: 'race',
      children: 'cascade',
      fence: false,
      descendantsOnly: false,
      onlyFsms: null,
      ...extra,
    },
    (ids) => CONSUME_INBOXES.run(session, { ids }),
  ).then((r) => summarize(r.rows));
}

function transitionOf(
  kind: TransitionWrite['kind'],
  vars: { id: string; seq: string },
): TransitionWrite {
  return transitionWrite(
    { worker: W, id: vars.id, claimSeq: vars.seq },
    {
      kind,
      nextStep: kind === 'next' ? 'second' : null,
      stateText: kind === 'next' ? '{"seq":1}' : null,
      resultText: kind === 'done' ? '{"ok":true}' : null,
    },
  );
}

/**
 * The riders of the rows a transition, park or reap ended (§6.3 steps 4–5): the inbox sweep
 * (the flusher's for rows ever signaled; the reaper's, which has no flag, for all) and the join.
 */
async function riders(
  session: RawSession,
  ended: readonly { id: string; status: string; parentId: string | null; signaled?: boolean }[],
): Promise<void> {
  const terminal = ended.filter((r) => ['done', 'failed', 'cancelled'].includes(r.status));
  const sweep = terminal.filter((r) => r.signaled !== false).map((r) => r.id);
  if (sweep.length > 0) await CONSUME_INBOXES.run(session, { ids: sweep });
  const parents = terminal.flatMap((r) => (r.parentId !== null ? [r.parentId] : []));
  if (parents.length > 0) await JOIN_PARENTS.run(session, { parentIds: parents });
}

const liveDescendants = async (pool: Pool, root: string): Promise<number> => {
  const { rows } = await pool.query<{ n: number }>(
    `WITH RECURSIVE t AS (SELECT id FROM gen_durable WHERE parent_id = $1
                          UNION SELECT c.id FROM gen_durable c JOIN t ON c.parent_id = t.id)
     SELECT count(*)::int AS n FROM gen_durable g JOIN t USING (id)
      WHERE g.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`,
    [root],
  );
  return rows[0]!.n;
};

describe('cancel and retry races on real connections, all permutations (docs/design.md §27.2–27.3)', () => {
  let db: TestDatabase;
  const reports: RaceReport[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    for (const r of reports) {
      process.stdout.write(
        `[control-races] ${r.spec}: ${r.total} permutations, ${r.valid} valid, ${r.invalid} invalid, ${r.withBlocking} with a blocked step\n`,
      );
    }
    await db.drop();
  });

  async function run<V>(spec: RaceSpec<V>, valid: number): Promise<void> {
    const report = await runRace(db, spec);
    reports.push(report);
    expect(report.valid).toBe(valid);
    expect(report.withBlocking).toBeGreaterThan(0);
  }

  /** A claimed (executing) row with a parent awaiting it alone. */
  interface OwnedVars {
    id: string;
    seq: string;
    parent: string;
  }

  async function ownedChild(pool: Pool, options: { expired?: boolean } = {}): Promise<OwnedVars> {
    await pool.query('TRUNCATE gen_durable CASCADE');
    const queue = freshQueue();
    const parent = await insertRow(pool, row('basket', 'joined', {}, `${queue}-parents`));
    const [child] = await INSERT_INSTANCES.run(poolRunner(pool), {
      rows: [row('item', 'start', { seq: 0 }, queue)],
      parentIds: [parent],
    });
    await pool.query(
      `UPDATE gen_durable SET status = 'awaiting_children', children_pending = 1 WHERE id = $1`,
      [parent],
    );
    const [claimed] = await claimOn(poolRunner(pool), queue, W);
    if (options.expired) await expireLease(pool, child!.id);
    return { id: child!.id, seq: claimed!.claimSeq, parent };
  }

  /** The parent was joined exactly once: runnable, nothing pending. */
  async function joinedOnce(pool: Pool, parent: string): Promise<void> {
    expect(await rowView(pool, parent)).toMatchObject({
      status: 'runnable',
      children_pending: 0,
    });
  }

  const flushOf = (kind: 'next' | 'done'): RaceStep<OwnedVars>[] => [
    begin('f_begin'),
    step('f_update', async ({ session, vars }) => {
      const rows = await FLUSH_TRANSITIONS.run(session, {
        entries: [transitionOf(kind, vars)],
        solo: false,
      });
      await riders(session, rows);
      return rows;
    }),
    commit('f_commit'),
  ];

  it('cancel vs the owner flush of a `next`: the row ends cancelled in every order, its parent joined once', async () => {
    await run<OwnedVars>(
      {
        name: 'cancel-vs-flush-next',
        sessions: {
          flush: flushOf('next'),
          cancel: [step('c_cancel', ({ session, vars }) => cancelOn(session, vars.id))],
        },
        setup: (pool) => ownedChild(pool),
        async check({ vars, steps }, pool) {
          for (const o of steps.values()) expect(o.error).toBeUndefined();
          expect((await rowView(pool, vars.id)).status).toBe('cancelled');
          await joinedOnce(pool, vars.parent);
          const flushed = rowsOf(steps.get('f_update')!.value);
          const answer = steps.get('c_cancel')!.value as ReturnType<typeof summarize>;
          if (answer.requested.includes(vars.id)) {
            // The request came first: the flush turned its next into cancelled.
            expect(flushed).toEqual([expect.objectContaining({ status: 'cancelled' })]);
          } else {
            expect(answer.cancelled).toEqual([vars.id]);
            expect(flushed).toEqual([expect.objectContaining({ status: 'runnable' })]);
            expect((await rowView(pool, vars.id)).step).toBe('second');
          }
        },
      },
      4,
    );
  });

  it('cancel vs the owner flush of a `done`: a terminal outcome wins in every order', async () => {
    await run<OwnedVars>(
      {
        name: 'cancel-vs-flush-done',
        sessions: {
          flush: flushOf('done'),
          cancel: [step('c_cancel', ({ session, vars }) => cancelOn(session, vars.id))],
        },
        setup: (pool) => ownedChild(pool),
        async check({ vars, steps }, pool) {
          for (const o of steps.values()) expect(o.error).toBeUndefined();
          const view = await rowView(pool, vars.id);
          expect(view.status).toBe('done');
          await joinedOnce(pool, vars.parent);
          const answer = steps.get('c_cancel')!.value as ReturnType<typeof summarize>;
          expect(answer.cancelled).toEqual([]);
          const committedFirst =
            steps.get('f_commit')!.completedAs < steps.get('c_cancel')!.completedAs;
          if (answer.requested.length === 0) expect(answer.alreadyTerminal).toEqual([vars.id]);
          if (committedFirst) expect(answer.alreadyTerminal).toEqual([vars.id]);
        },
      },
      4,
    );
  });

  interface SpawnVars extends OwnedVars {
    owned: { id: string; cancelRequested: boolean }[];
    landed: number;
    queue: string;
  }

  /** The flusher's fan-out transaction of `vars.id` (§6.3 step 3, with the guarded spawn). */
  const fanOut = (prefix: string): RaceStep<SpawnVars>[] => [
    begin(`${prefix}_begin`),
    step(`${prefix}_lock`, async ({ session, vars }) => {
      vars.owned = await FANOUT_LOCK_PARENTS.run(session, {
        entries: [{ worker: W, id: vars.id, seq: vars.seq }],
      });
      return vars.owned;
    }),
    step(`${prefix}_children`, async ({ session, vars }) => {
      const spawning = vars.owned.some((o) => o.id === vars.id && !o.cancelRequested);
      if (!spawning) return [];
      const children = [1, 2].map((n) => row('leaf', 'start', { n }, `${vars.queue}-leaves`));
      const inserted = await INSERT_INSTANCES.run(session, {
        rows: children,
        parentIds: children.map(() => vars.id),
      });
      vars.landed = inserted.length;
      return inserted;
    }),
    step(`${prefix}_park`, async ({ session, vars }) => {
      if (!vars.owned.some((o) => o.id === vars.id)) return [];
      const parked = await FANOUT_PARK_PARENTS.run(session, {
        entries: [{ worker: W, id: vars.id, seq: vars.seq, nextStep: 'joined', stateText: '{}' }],
        landed: new Map([[vars.id, vars.landed]]),
      });
      await riders(session, parked);
      return parked;
    }),
    commit(`${prefix}_commit`),
  ];

  it('cancel vs the owner flush of a `scheduleChildren`: no live child is left in any order', async () => {
    await run<SpawnVars>(
      {
        name: 'cancel-vs-flush-fan-out',
        sessions: {
          flush: fanOut('f'),
          cancel: [step('c_cancel', ({ session, vars }) => cancelOn(session, vars.id))],
        },
        async setup(pool) {
          const v = await ownedChild(pool);
          return { ...v, owned: [], landed: 0, queue: freshQueue() };
        },
        async check({ vars, steps }, pool) {
          for (const o of steps.values()) expect(o.error).toBeUndefined();
          expect((await rowView(pool, vars.id)).status).toBe('cancelled');
          expect(await liveDescendants(pool, vars.id)).toBe(0);
          await joinedOnce(pool, vars.parent);
        },
      },
      6,
    );
  });

  it('cascade vs a child fan-out: the grandchildren a racing spawn inserts are cancelled too', async () => {
    await run<SpawnVars & { root: string }>(
      {
        name: 'cascade-vs-child-fan-out',
        sessions: {
          flush: fanOut('f'),
          cancel: [step('c_cancel', ({ session, vars }) => cancelOn(session, vars.root))],
        },
        async setup(pool) {
          // root (awaiting_children) ← parent (awaiting_children) ← child (executing, fanning out)
          const v = await ownedChild(pool);
          const queue = freshQueue();
          const root = await insertRow(pool, row('root', 'joined', {}, `${queue}-root`));
          await pool.query(`UPDATE gen_durable SET parent_id = $1 WHERE id = $2;`, [
            root,
            v.parent,
          ]);
          await pool.query(
            `UPDATE gen_durable SET status = 'awaiting_children', children_pending = 1 WHERE id = $1`,
            [root],
          );
          return { ...v, root, owned: [], landed: 0, queue };
        },
        async check({ vars, steps }, pool) {
          for (const o of steps.values()) expect(o.error).toBeUndefined();
          expect((await rowView(pool, vars.root)).status).toBe('cancelled');
          expect((await rowView(pool, vars.parent)).status).toBe('cancelled');
          expect((await rowView(pool, vars.id)).status).toBe('cancelled');
          expect(await liveDescendants(pool, vars.root)).toBe(0);
        },
      },
      6,
    );
  });

  interface SignalVars {
    id: string;
  }

  it('cancel vs a delivery that would wake the row: cancelled, nothing left unconsumed', async () => {
    await run<SignalVars>(
      {
        name: 'cancel-vs-waking-delivery',
        sessions: {
          deliver: [
            begin('d_begin'),
            step('d_deliver', ({ session, vars }) =>
              DELIVER_SIGNAL.run(session, {
                targetId: vars.id,
                correlationKey: null,
                name: 'go',
                payloadText: '{}',
                dedupKey: null,
              }),
            ),
            commit('d_commit'),
          ],
          cancel: [
            begin('c_begin'),
            step('c_cancel', ({ session, vars }) => cancelOn(session, vars.id)),
            commit('c_commit'),
          ],
        },
        async setup(pool) {
          await pool.query('TRUNCATE gen_durable CASCADE');
          const id = await insertRow(pool, row('parker', 'finish', {}, freshQueue()));
          await pool.query(
            `UPDATE gen_durable SET status = 'awaiting_signal', awaits = '{go}' WHERE id = $1`,
            [id],
          );
          return { id };
        },
        async check({ vars, steps }, pool) {
          for (const o of steps.values()) expect(o.error).toBeUndefined();
          expect((await rowView(pool, vars.id)).status).toBe('cancelled');
          const inbox = await inboxOf(pool, vars.id);
          expect(inbox.filter((s) => !s.consumed)).toEqual([]);
          const delivered = steps.get('d_deliver')!.value !== null;
          expect(inbox).toHaveLength(delivered ? 1 : 0);
        },
      },
      14,
    );
  });

  interface ReapVars extends OwnedVars {
    requestedFirst?: boolean;
  }

  it('cancel vs the reaper: cancelled in every order, the parent joined exactly once', async () => {
    await run<ReapVars>(
      {
        name: 'cancel-vs-reaper',
        sessions: {
          reaper: [
            begin('r_begin'),
            step('r_reap', async ({ session }) => {
              const { rows } = await REAP_EXPIRED.run(session, REAP);
              await riders(session, rows);
              return rows;
            }),
            commit('r_commit'),
          ],
          cancel: [step('c_cancel', ({ session, vars }) => cancelOn(session, vars.id))],
        },
        setup: (pool) => ownedChild(pool, { expired: true }),
        async check({ vars, steps }, pool) {
          for (const o of steps.values()) expect(o.error).toBeUndefined();
          expect((await rowView(pool, vars.id)).status).toBe('cancelled');
          await joinedOnce(pool, vars.parent);
        },
      },
      4,
    );
  });

  it('two concurrent cancels: one cancels, the other finds it ended; the parent joined once', async () => {
    await run<OwnedVars>(
      {
        name: 'cancel-vs-cancel',
        sessions: {
          first: [
            begin('a_begin'),
            step('a_cancel', ({ session, vars }) => cancelOn(session, vars.id, { fence: true })),
            commit('a_commit'),
          ],
          second: [
            step('b_cancel', ({ session, vars }) => cancelOn(session, vars.id, { fence: true })),
          ],
        },
        setup: (pool) => ownedChild(pool),
        async check({ vars, steps }, pool) {
          for (const o of steps.values()) expect(o.error).toBeUndefined();
          expect((await rowView(pool, vars.id)).status).toBe('cancelled');
          await joinedOnce(pool, vars.parent);
          const a = steps.get('a_cancel')!.value as ReturnType<typeof summarize>;
          const b = steps.get('b_cancel')!.value as ReturnType<typeof summarize>;
          expect([...a.cancelled, ...b.cancelled]).toEqual([vars.id]);
          expect([...a.alreadyTerminal, ...b.alreadyTerminal]).toEqual([vars.id]);
        },
      },
      4,
    );
  });

  interface RetryVars {
    id: string;
    seq: string;
    selected: string[];
  }

  it('retry vs GC of the same row: either it is retried and kept, or it is gone and the retry says so', async () => {
    await run<RetryVars>(
      {
        name: 'retry-vs-gc',
        sessions: {
          gc: [
            begin('g_begin'),
            step('g_select', async ({ session, vars }) => {
              vars.selected = await GC_SELECT_TERMINAL.run(session, {
                limit: 10,
                retention: { done: 1000, failed: 1000, cancelled: 1000 },
                overrides: [],
              });
              return vars.selected;
            }),
            step('g_delete', ({ session, vars }) =>
              vars.selected.length > 0
                ? GC_DELETE.run(session, { ids: vars.selected })
                : Promise.resolve(0),
            ),
            commit('g_commit'),
          ],
          retry: [
            step('r_retry', ({ session, vars }) =>
              RETRY_INSTANCES.run(session, {
                rows: [{ id: vars.id, claimSeq: vars.seq, record: 1 }],
                step: null,
                stateText: null,
                at: null,
                detach: false,
                actor: null,
              }),
            ),
          ],
        },
        async setup(pool) {
          await pool.query('TRUNCATE gen_durable CASCADE');
          const id = await insertRow(pool, row('flaky', 'start', {}, freshQueue()));
          await pool.query(
            `UPDATE gen_durable SET status = 'failed', last_error = 'broken', updated_at = now() - interval '1 minute' WHERE id = $1`,
            [id],
          );
          return { id, seq: (await rowView(pool, id)).claim_seq, selected: [] };
        },
        async check({ vars, steps }, pool) {
          for (const o of steps.values()) expect(o.error).toBeUndefined();
          const answer = steps.get('r_retry')!.value as RetriedRow[];
          const { rows } = await pool.query<{ status: string }>(
            `SELECT status FROM gen_durable WHERE id = $1`,
            [vars.id],
          );
          if (answer.length > 0) {
            // Retried and kept: GC_DELETE re-checked terminality and skipped the row.
            expect(answer).toEqual([
              {
                id: vars.id,
                verdict: 'retried',
                queue: expect.any(String),
                due: true,
                parked: false,
                deadlineInMs: null,
              },
            ]);
            expect(rows).toEqual([{ status: 'runnable' }]);
          } else {
            // Gone first: the retry found no row and answers nothing for it.
            expect(rows).toEqual([]);
          }
        },
      },
      5,
    );
  });
});
