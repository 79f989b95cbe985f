import type { Pool } from 'pg';

/**
 * The post-drain audit (docs/reliability.md §5): SQL over the ledgers, the history trigger's log and
 * the engine's table. Returns the hard invariants (each must be 0) and the reported figures.
 */

export interface Audit {
  readonly hard: Record<string, number>;
  readonly figures: Record<string, number | string | null>;
  readonly examples: Record<string, unknown[]>;
}

/** Steps each FSM path commits (= its final seq); the pill never commits one. */
const EXPECTED_SEQ = `CASE f.fsm
  WHEN 'chaos_linear' THEN 5 WHEN 'chaos_retrier' THEN 4 WHEN 'chaos_parker' THEN 2
  WHEN 'chaos_fanout' THEN 2 WHEN 'chaos_child' THEN 2 WHEN 'chaos_spinner' THEN 2
  WHEN 'chaos_failer' THEN 2 WHEN 'chaos_tx' THEN 3
  WHEN 'chaos_tree' THEN CASE WHEN (f.result->>'level')::int >= 2 THEN 1 ELSE 2 END
  WHEN 'chaos_pill' THEN 0 END`;

const FINAL = `
  final AS (
    SELECT g.id, g.fsm, g.status::text AS status, g.result,
           COALESCE(g.parent_id, (SELECT l.parent_id FROM chaos.parents l WHERE l.id = g.id)) AS parent_id,
           COALESCE((g.result->>'seq')::int, (g.state->>'seq')::int) AS seq, g.last_error, g.reaps
      FROM gen_durable g
    UNION ALL
    SELECT d.id, d.fsm, d.status, d.result,
           COALESCE(d.parent_id, (SELECT l.parent_id FROM chaos.parents l WHERE l.id = d.id)),
           COALESCE((d.result->>'seq')::int, (SELECT h.new_seq FROM chaos.history h WHERE h.id = d.id ORDER BY h.hid DESC LIMIT 1), 0),
           d.last_error, d.reaps
      FROM chaos.deleted d
  )`;

/** The statuses an instance ends in (docs/design.md §3.1); the others are live. */
const TERMINAL = `('done', 'failed', 'cancelled')`;
const LIVE = `('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`;

/**
 * Every instance with its ancestors (itself at depth 0), over the final rows (GC'd and archived
 * ones from chaos.deleted), parents as inserted (chaos.parents: a parent deleted first sets its
 * children's parent_id to NULL).
 */
const ANCESTRY = `ancestry AS (
    WITH RECURSIVE up AS (
      SELECT f.id, f.id AS ancestor, f.parent_id, 0 AS depth FROM final f
      UNION ALL
      SELECT up.id, p.id, p.parent_id, up.depth + 1 FROM up JOIN final p ON p.id = up.parent_id WHERE up.depth < 10
    ) SELECT id, ancestor, depth FROM up
  )`;

/** Acknowledged cancels with the ids their answer listed (cancelled now, or asked to stop). */
const CANCELS = `cancels AS (
    SELECT o.op_id, o.instance_id AS target, o.name AS mode, o.options->>'children' AS children, o.invoked_at, o.completed_at, o.answer
      FROM chaos.client_ops o WHERE o.op = 'cancel' AND o.result = 'ok'
  ), answered AS (
    SELECT c.op_id, c.target, c.completed_at, x.id::bigint AS id, 'cancelled' AS how
      FROM cancels c, jsonb_array_elements_text(c.answer->'cancelled') AS x(id)
    UNION ALL
    SELECT c.op_id, c.target, c.completed_at, x.id::bigint, 'requested'
      FROM cancels c, jsonb_array_elements_text(c.answer->'requested') AS x(id)
  )`;

/** Committed outcomes: the history rows whose seq moved (every workload step bumps it). */
const COMMITTED = `committed AS (
    SELECT h.* FROM chaos.history h WHERE h.old_seq IS DISTINCT FROM h.new_seq AND h.new_seq IS NOT NULL AND h.old_seq IS NOT NULL
  )`;

async function one(pool: Pool, text: string, params: unknown[] = []): Promise<number> {
  const { rows } = await pool.query<{ n: string | number | null }>(text, params);
  return Number(rows[0]?.n ?? 0);
}

async function list(pool: Pool, text: string, params: unknown[] = []): Promise<unknown[]> {
  return (await pool.query(text, params)).rows.slice(0, 10);
}

export async function audit(
  pool: Pool,
  options: { since?: Date; monitor: Record<string, number>; crashes: number; deadlocks: number },
): Promise<Audit> {
  const hard: Record<string, number> = {};
  const figures: Record<string, number | string | null> = {};
  const examples: Record<string, unknown[]> = {};
  const check = async (
    name: string,
    countSql: string,
    exampleSql: string,
    params: unknown[] = [],
  ): Promise<void> => {
    hard[name] = await one(pool, countSql, params);
    if (hard[name] > 0) examples[name] = await list(pool, exampleSql, params);
  };

  // I-LOST: acknowledged inserts whose instance is not terminal (GC'd rows were terminal: I-GC).
  const lost = `WITH ${FINAL}, acked AS (SELECT DISTINCT instance_id AS id FROM chaos.client_ops WHERE op = 'insert' AND result = 'ok')
    SELECT %s FROM acked a LEFT JOIN final f ON f.id = a.id WHERE f.id IS NULL OR f.status NOT IN ${TERMINAL}`;
  // A cancelled instance ended (it was asked to: I-CANCEL-UNASKED holds every cancelled row to a
  // cancel of itself or an ancestor).
  await check('I-LOST', lost.replace('%s', 'count(*) AS n'), lost.replace('%s', 'a.id, f.status'));
  // I-INSERT-IDENTITY: an acknowledged insert answered with an instance that is not the one it
  // inserted: of another FSM, or acknowledged under another correlation key (the insert's
  // key is stored as its dedup_key).
  const identity = `WITH ${FINAL}, acked AS (
      SELECT instance_id AS id, fsm, dedup_key FROM chaos.client_ops WHERE op = 'insert' AND result = 'ok')
    SELECT %s FROM acked a LEFT JOIN final f ON f.id = a.id
     WHERE f.fsm IS DISTINCT FROM a.fsm
        OR EXISTS (SELECT 1 FROM acked b WHERE b.id = a.id AND b.dedup_key IS DISTINCT FROM a.dedup_key)`;
  await check(
    'I-INSERT-IDENTITY',
    identity.replace('%s', 'count(*) AS n'),
    identity.replace('%s', 'a.id, a.fsm, a.dedup_key, f.fsm AS row_fsm'),
  );
  // Every row, children included, drained to a terminal state.
  await check(
    'I-LOST-ANY',
    `SELECT count(*) AS n FROM gen_durable WHERE status NOT IN ${TERMINAL}`,
    `SELECT id, fsm, status, step, attempt, locked_by FROM gen_durable WHERE status NOT IN ${TERMINAL}`,
  );
  // Terminal in the wrong way: failed although it is not the pill.
  await check(
    'I-UNEXPECTED-FAIL',
    `WITH ${FINAL} SELECT count(*) AS n FROM final f WHERE f.status = 'failed' AND f.fsm <> 'chaos_pill'`,
    `WITH ${FINAL} SELECT f.id, f.fsm, f.reaps, f.last_error FROM final f WHERE f.status = 'failed' AND f.fsm <> 'chaos_pill'`,
  );
  // I-REWIND: a committed transition that did not move seq by exactly +1, or a final seq that
  // is not its path's length. A row that ended cancelled stopped where the cancel found it: its
  // seq is at most its path's length (a cancel drops an outcome, never commits one). A cancelled
  // row that was retried is held to its full path again: the retry keeps its step and state, so
  // its post-retry life continues the same sequence up to the same final seq.
  const badFinal = `f.fsm IS NOT NULL AND CASE WHEN f.status = 'cancelled'
      THEN f.seq IS NULL OR f.seq < 0 OR f.seq > ${EXPECTED_SEQ}
      ELSE f.seq IS DISTINCT FROM ${EXPECTED_SEQ} END`;
  await check(
    'I-REWIND',
    `WITH ${FINAL}, ${COMMITTED}
     SELECT (SELECT count(*) FROM committed WHERE new_seq <> old_seq + 1)
          + (SELECT count(*) FROM final f WHERE ${badFinal}) AS n`,
    `WITH ${FINAL}, ${COMMITTED}
     SELECT 'transition' AS what, id, old_seq, new_seq, NULL AS status FROM committed WHERE new_seq <> old_seq + 1
     UNION ALL SELECT 'final', f.id, f.seq, ${EXPECTED_SEQ}, f.status FROM final f WHERE ${badFinal}`,
  );
  // I-DUPCOMMIT: a seq committed twice, or an outcome committed under a claim that was not the
  // one its execution ran under (the fencing token of docs/design.md §26.1).
  await check(
    'I-DUPCOMMIT',
    `WITH ${COMMITTED}
     SELECT (SELECT count(*) FROM (SELECT id, new_seq FROM committed GROUP BY 1, 2 HAVING count(*) > 1) d)
          + (SELECT count(*) FROM committed c LEFT JOIN chaos.executions e ON e.exec_id::text = c.exec
              WHERE e.exec_id IS NULL OR e.instance_id <> c.id OR e.step_seq <> c.new_seq OR e.claim_seq IS DISTINCT FROM c.claim_seq) AS n`,
    `WITH ${COMMITTED}
     SELECT c.id, c.new_seq, c.claim_seq, c.exec, e.claim_seq AS exec_claim, e.worker FROM committed c
       LEFT JOIN chaos.executions e ON e.exec_id::text = c.exec
      WHERE e.exec_id IS NULL OR e.instance_id <> c.id OR e.step_seq <> c.new_seq OR e.claim_seq IS DISTINCT FROM c.claim_seq`,
  );
  // I-TX-EFFECTS (docs/transactional-steps.md): chaos_tx's database effects are exactly its
  // committed transitions: every committed step has its effect row (same execution), no
  // execution that did not commit left one (its writes rolled back with it), and no step has
  // two. GC'd instances keep their history and effects (chaos.deleted has the fsm).
  const txEffects = `WITH ${FINAL}, ${COMMITTED},
      txc AS (SELECT c.id, c.new_seq, c.exec FROM committed c JOIN final f ON f.id = c.id WHERE f.fsm = 'chaos_tx'),
      bad AS (
        SELECT 'missing' AS what, t.id, t.new_seq AS seq, t.exec FROM txc t
         WHERE NOT EXISTS (SELECT 1 FROM chaos.tx_effects x WHERE x.exec_id::text = t.exec)
        UNION ALL
        SELECT 'uncommitted', x.instance_id, x.step_seq, x.exec_id::text FROM chaos.tx_effects x
         WHERE NOT EXISTS (SELECT 1 FROM txc t WHERE t.exec = x.exec_id::text)
        UNION ALL
        SELECT 'duplicate', x.instance_id, x.step_seq, min(x.exec_id::text) FROM chaos.tx_effects x
         GROUP BY x.instance_id, x.step_seq HAVING count(*) > 1)
    SELECT %s FROM bad`;
  await check(
    'I-TX-EFFECTS',
    txEffects.replace('%s', 'count(*) AS n'),
    txEffects.replace('%s', 'what, id, seq, exec'),
  );
  figures['transactional steps committed'] = await one(
    pool,
    `WITH ${FINAL}, ${COMMITTED}
     SELECT count(*) AS n FROM committed c JOIN final f ON f.id = c.id WHERE f.fsm = 'chaos_tx'`,
  );
  figures['transactional effect rows'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.tx_effects`,
  );
  // I-REEXEC-EXPLAINED: every execution that did not commit overlaps a fault on its worker
  // (or a cluster-wide one), ±2 s. A link reset after a commit explains nothing: the flush
  // retry on a fresh connection must keep every such outcome (finding F-R8).
  // An execution whose outcome a cancel dropped is explained by that cancel: its row went from
  // executing to cancelled (a cooperative request its flush turned into `cancelled`, a fence whose
  // claim bump made the late outcome stale, the reaper ending a requested row) after it started
  // (2 s before: a fence can land between the claim and the step's first ledger write) and
  // before the instance's next execution. So is a failer's `stop` (executing → failed).
  const unexplained = `WITH ${COMMITTED}, lost0 AS (
      SELECT e.*, (SELECT min(n.started_at) FROM chaos.executions n WHERE n.instance_id = e.instance_id AND n.started_at > e.started_at) AS next_start
        FROM chaos.executions e
       WHERE e.started_at >= $1 AND NOT EXISTS (SELECT 1 FROM committed c WHERE c.exec = e.exec_id::text)
    ), lost AS (
      SELECT l.*, COALESCE(l.ended_at, l.next_start, clock_timestamp()) AS until,
             EXISTS (SELECT 1 FROM chaos.history h
                      WHERE h.id = l.instance_id AND h.old_status = 'executing'
                        AND (h.new_status = 'cancelled' OR (h.new_status = 'failed' AND l.fsm = 'chaos_failer'))
                        AND h.at >= l.started_at - interval '2 seconds'
                        AND h.at <= COALESCE(l.next_start, 'infinity')) AS dropped
        FROM lost0 l
    )
    SELECT %s FROM lost l
     WHERE NOT l.dropped AND NOT EXISTS (SELECT 1 FROM chaos.faults f
                        WHERE (f.target = l.worker OR f.target IN ('postgres', 'all'))
                          AND f.kind <> 'link-reset'
                          AND f.injected_at <= l.until + interval '2 seconds'
                          AND COALESCE(f.healed_at, 'infinity') >= l.started_at - interval '2 seconds')
       -- A stall the worker itself reported (scheduler:stall: its event loop was starved past
       -- the heartbeat, e.g. by a loaded box) is a fault too, just not one the nemesis injected.
       AND NOT EXISTS (SELECT 1 FROM chaos.events s
                        WHERE s.worker = l.worker AND s.event = 'scheduler:stall'
                          AND s.at BETWEEN l.started_at - interval '2 seconds' AND l.until + interval '4 seconds')`;
  const since = options.since ?? new Date(0);
  await check(
    'I-REEXEC-EXPLAINED',
    unexplained.replace('%s', 'count(*) AS n'),
    unexplained.replace('%s', 'l.instance_id, l.fsm, l.step, l.worker, l.started_at, l.ended_at'),
    [since],
  );
  // I-SIG-LOST: an acknowledged `go` never handed to a committed execution of its parker.
  const sigLost = `WITH ${COMMITTED}, acked AS (
      SELECT instance_id, dedup_key, min(invoked_at) AS invoked_at FROM chaos.client_ops
       WHERE op = 'signal' AND name = 'go' AND result = 'ok' GROUP BY 1, 2)
    SELECT %s FROM acked a
     WHERE NOT EXISTS (SELECT 1 FROM chaos.observed o JOIN committed c ON c.exec = o.exec_id::text
                        WHERE o.instance_id = a.instance_id AND o.dedup_key = a.dedup_key)
       -- A cancel after the signal was sent drops it with the inbox (docs/operations-control.md
       -- "Cancelling": unconsumed signals are marked consumed).
       AND NOT EXISTS (SELECT 1 FROM chaos.history h WHERE h.id = a.instance_id AND h.new_status = 'cancelled'
                        AND h.at > a.invoked_at)`;
  await check(
    'I-SIG-LOST',
    sigLost.replace('%s', 'count(*) AS n'),
    sigLost.replace('%s', 'a.instance_id, a.dedup_key'),
  );
  // I-DEDUP: one dedup key handed twice to committed executions, or stored twice.
  await check(
    'I-DEDUP',
    `WITH ${COMMITTED}
     SELECT (SELECT count(*) FROM (SELECT o.instance_id, o.dedup_key FROM chaos.observed o JOIN committed c ON c.exec = o.exec_id::text
                                    GROUP BY 1, 2 HAVING count(*) > 1) d)
          + (SELECT count(*) FROM (SELECT target_id, dedup_key FROM gen_durable_signals WHERE dedup_key IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1) s) AS n`,
    `WITH ${COMMITTED}
     SELECT o.instance_id, o.dedup_key, count(*) FROM chaos.observed o JOIN committed c ON c.exec = o.exec_id::text GROUP BY 1, 2 HAVING count(*) > 1`,
  );
  // S25: no unconsumed ("delivered") signal on a terminal row.
  await check(
    'I-ORPHAN-SIGNAL',
    `SELECT count(*) AS n FROM gen_durable_signals s JOIN gen_durable g ON g.id = s.target_id WHERE g.status IN ${TERMINAL} AND s.consumed_at IS NULL`,
    `SELECT s.id, s.target_id, s.name FROM gen_durable_signals s JOIN gen_durable g ON g.id = s.target_id WHERE g.status IN ${TERMINAL} AND s.consumed_at IS NULL`,
  );
  // I-K1-PHYS: two committed executions of one key overlapping in time (an execution killed
  // mid-step has no end: it counts as the instant it started).
  const overlap = `WITH ${COMMITTED}, k AS (
      SELECT e.*, EXISTS (SELECT 1 FROM committed c WHERE c.exec = e.exec_id::text) AS ok FROM chaos.executions e WHERE e.ckey IS NOT NULL)
    SELECT %s FROM k a JOIN k b ON a.ckey = b.ckey AND a.exec_id < b.exec_id
       AND a.started_at < COALESCE(b.ended_at, b.started_at) AND b.started_at < COALESCE(a.ended_at, a.started_at)`;
  await check(
    'I-K1-PHYS',
    overlap.replace('%s', 'count(*) FILTER (WHERE a.ok AND b.ok) AS n'),
    overlap.replace('%s', 'a.ckey, a.instance_id, b.instance_id, a.started_at, b.started_at') +
      ' WHERE a.ok AND b.ok',
  );
  figures['K1 overlaps explained by a lost claim'] = await one(
    pool,
    overlap.replace('%s', 'count(*) FILTER (WHERE NOT (a.ok AND b.ok)) AS n'),
  );
  // I-JOIN: a parent joined with a wrong child count, woken more than once per round, or a
  // negative counter in the committed history.
  await check(
    'I-JOIN',
    `WITH ${FINAL}
     SELECT (SELECT count(*) FROM final WHERE fsm = 'chaos_fanout' AND status = 'done'
               AND ((result->>'children')::int <> 10 OR (result->>'terminal')::int <> 10))
          + (SELECT count(*) FROM final WHERE fsm = 'chaos_tree' AND status = 'done' AND (result->>'level')::int < 2
               AND ((result->>'children')::int <> 5 OR (result->>'terminal')::int <> 5))
          + (SELECT count(*) FROM (SELECT id FROM chaos.history WHERE old_status = 'awaiting_children' AND new_status = 'runnable'
                                    GROUP BY id HAVING count(*) > 1) w)
          + (SELECT count(*) FROM chaos.history WHERE new_pending < 0) AS n`,
    `WITH ${FINAL} SELECT id, fsm, result FROM final WHERE fsm IN ('chaos_fanout', 'chaos_tree') AND status = 'done'
        AND (result->>'children')::int IS DISTINCT FROM (result->>'terminal')::int`,
  );
  // I-GC: a deleted row that was live, or whose parent was live.
  await check(
    'I-GC',
    `SELECT count(*) AS n FROM chaos.deleted WHERE status NOT IN ${TERMINAL} OR parent_status IN ${LIVE}`,
    `SELECT * FROM chaos.deleted WHERE status NOT IN ${TERMINAL} OR parent_status IN ${LIVE}`,
  );
  await cancelChecks(check);
  for (const [name, n] of Object.entries(options.monitor)) hard[name] = (hard[name] ?? 0) + n;
  hard['F-CRASH'] =
    options.crashes +
    (await one(pool, `SELECT count(*) AS n FROM chaos.events WHERE event = 'fatal'`));
  hard['F-DEADLOCK'] = options.deadlocks;

  // Reported figures.
  figures['instances'] = await one(
    pool,
    `SELECT count(DISTINCT instance_id) AS n FROM chaos.client_ops WHERE op = 'insert' AND result = 'ok'`,
  );
  figures['instances incl. children'] = await one(
    pool,
    `SELECT (SELECT count(*) FROM gen_durable) + (SELECT count(*) FROM chaos.deleted) AS n`,
  );
  // Children whose parent was deleted before them (GC, archive): their ancestry comes from
  // chaos.parents.
  figures['children outliving their parent row'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.parents l
      WHERE NOT EXISTS (SELECT 1 FROM gen_durable g WHERE g.id = l.id AND g.parent_id IS NOT NULL)
        AND NOT EXISTS (SELECT 1 FROM chaos.deleted d WHERE d.id = l.id AND d.parent_id IS NOT NULL)`,
  );
  figures['step executions'] = await one(pool, `SELECT count(*) AS n FROM chaos.executions`);
  figures['committed steps'] = await one(
    pool,
    `WITH ${COMMITTED} SELECT count(*) AS n FROM committed`,
  );
  figures['re-executions'] =
    Number(figures['step executions']) - Number(figures['committed steps']);
  figures['signals acknowledged'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.client_ops WHERE op = 'signal' AND result = 'ok'`,
  );
  figures['signals refused (no_target)'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.client_ops WHERE op = 'signal' AND result = 'no_target'`,
  );
  figures['client calls ambiguous (unknown)'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.client_ops WHERE result = 'unknown'`,
  );
  figures['fan-outs'] = await one(
    pool,
    `SELECT count(DISTINCT instance_id) AS n FROM chaos.client_ops WHERE op = 'insert' AND result = 'ok' AND fsm = 'chaos_fanout'`,
  );
  await cancelFigures(pool, figures, since);
  figures['stale outcomes rejected'] = await one(
    pool,
    `SELECT COALESCE(sum(count), 0) AS n FROM chaos.events WHERE event = 'outcome:stale'`,
  );
  figures['rows reaped'] = await one(
    pool,
    `SELECT COALESCE(sum(count), 0) AS n FROM chaos.events WHERE event = 'reaper:reaped'`,
  );
  figures['rows reclaimed at startup'] = await one(
    pool,
    `SELECT COALESCE(sum(count), 0) AS n FROM chaos.events WHERE event = 'scheduler:reclaimed'`,
  );
  figures['poison pills failed'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.events WHERE event = 'reaper:poisoned'`,
  );
  figures['poison-pill suspects'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.events WHERE event = 'reaper:suspect'`,
  );
  figures['solo runs started'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.events WHERE event = 'scheduler:solo' AND detail LIKE '%"result":"started"%'`,
  );
  figures['solo runs abandoned'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.events WHERE event = 'scheduler:solo' AND detail LIKE '%"result":"abandoned"%'`,
  );
  figures['flush errors'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.events WHERE event = 'flush:error'`,
  );
  figures['executor crash paths'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.events WHERE event = 'executor:crash'`,
  );
  figures['event-loop stalls'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.events WHERE event = 'scheduler:stall'`,
  );
  figures['re-executions explained only by a reported stall'] =
    (await one(
      pool,
      unexplained
        .replace('%s', 'count(*) AS n')
        .replace(/AND NOT EXISTS \(SELECT 1 FROM chaos\.events s[\s\S]*$/, ''),
      [since],
    )) - (hard['I-REEXEC-EXPLAINED'] ?? 0);
  figures['GC deleted'] = await one(pool, `SELECT count(*) AS n FROM chaos.deleted`);
  const counters = await pool.query<{ key: string; n: number; runs: string }>(
    `SELECT c.key, c.n, (SELECT count(*) FROM chaos.executions e WHERE e.ckey = c.key AND e.ended_at IS NOT NULL) AS runs FROM chaos.counters c`,
  );
  figures['K1 racy counter lost updates'] = counters.rows.reduce(
    (acc, r) => acc + Math.max(0, Number(r.runs) - r.n),
    0,
  );
  return { hard, figures, examples };
}

type Check = (
  name: string,
  countSql: string,
  exampleSql: string,
  params?: unknown[],
) => Promise<void>;

/**
 * The cancel and retry invariants (issue 17), each required to be 0:
 * - I-CANCEL-TREE: a row of a cascade-cancelled tree left live. Counted twice over: the rows the
 *   sender found live and not asked to stop right after each cascading cancel answered
 *   (`liveAfter`), and at the end, every live descendant of an instance that ended cancelled
 *   after a cascading cancel.
 * - I-CANCEL-AFTER: a row a cancel answered (cancelled or requested) that later went back to a
 *   live status without a retry of it asked in between, or, answered cancelled, committed a step
 *   after the answer (a fenced step's late outcome must be stale).
 * - I-CANCEL-UNASKED: a row that ended cancelled with no cancel asked of it or an ancestor.
 * - I-RETRY-UNDONE: a row a retry was acknowledged for that did not end done (nothing cancels
 *   a row twice, and a failer is retried fixed), so its post-retry life met I-REWIND's full path.
 */
async function cancelChecks(check: Check): Promise<void> {
  const treeLive = `WITH ${FINAL}, ${ANCESTRY}, ${CANCELS}
    SELECT %s FROM (
      SELECT c.target AS root, (x->>'id')::bigint AS id, x->>'status' AS status, 'after the answer' AS seen
        FROM cancels c, jsonb_array_elements(c.answer->'liveAfter') AS x
       WHERE c.children = 'cascade'
      UNION ALL
      SELECT a.ancestor, f.id, f.status, 'at the end'
        FROM final f JOIN ancestry a ON a.id = f.id AND a.depth > 0
        JOIN final r ON r.id = a.ancestor AND r.status = 'cancelled'
       WHERE f.status IN ${LIVE}
         AND EXISTS (SELECT 1 FROM cancels c WHERE c.target = a.ancestor AND c.children = 'cascade')
    ) v`;
  await check(
    'I-CANCEL-TREE',
    treeLive.replace('%s', 'count(*) AS n'),
    treeLive.replace('%s', 'v.root, v.id, v.status, v.seen'),
  );
  const after = `WITH ${COMMITTED}, ${CANCELS}
    SELECT %s FROM answered a JOIN chaos.history h ON h.id = a.id AND h.at > a.completed_at
     WHERE (h.new_status IN ${LIVE} OR (a.how = 'cancelled' AND EXISTS (SELECT 1 FROM committed c WHERE c.hid = h.hid)))
       AND NOT EXISTS (SELECT 1 FROM chaos.client_ops r WHERE r.op = 'retry' AND r.instance_id = a.id
                        AND r.result IN ('ok', 'unknown', 'error') AND r.invoked_at > a.completed_at - interval '1 second'
                        AND r.invoked_at < h.at)`;
  await check(
    'I-CANCEL-AFTER',
    after.replace('%s', 'count(*) AS n'),
    after.replace(
      '%s',
      'a.op_id, a.target, a.id, a.how, a.completed_at, h.at, h.old_status, h.new_status, h.old_seq, h.new_seq',
    ),
  );
  const unasked = `WITH ${FINAL}, ${ANCESTRY}
    SELECT %s FROM final f WHERE f.status = 'cancelled'
       AND NOT EXISTS (SELECT 1 FROM ancestry a JOIN chaos.client_ops o ON o.instance_id = a.ancestor AND o.op = 'cancel'
                        WHERE a.id = f.id)`;
  await check(
    'I-CANCEL-UNASKED',
    unasked.replace('%s', 'count(*) AS n'),
    unasked.replace('%s', 'f.id, f.fsm, f.parent_id'),
  );
  const undone = `WITH ${FINAL}
    SELECT %s FROM (SELECT DISTINCT instance_id FROM chaos.client_ops WHERE op = 'retry' AND result = 'ok') r
      LEFT JOIN final f ON f.id = r.instance_id
     WHERE f.status IS DISTINCT FROM 'done'`;
  await check(
    'I-RETRY-UNDONE',
    undone.replace('%s', 'count(*) AS n'),
    undone.replace('%s', 'r.instance_id, f.fsm, f.status, f.seq'),
  );
}

/** What the cancels and retries did (printed figures, not invariants). */
async function cancelFigures(
  pool: Pool,
  figures: Record<string, number | string | null>,
  since: Date,
): Promise<void> {
  const { rows } = await pool.query<{ k: string; n: string }>(
    `SELECT op || ' ' || COALESCE(name, '') || ' ' || result AS k, count(*) AS n FROM chaos.client_ops
      WHERE op IN ('cancel', 'retry') GROUP BY 1 ORDER BY 1`,
  );
  figures['cancel/retry calls'] = rows.map((r) => `${r.k} ${r.n}`).join(', ') || 'none';
  const answered = await pool.query<{
    mode: string;
    targets: string;
    cancelled: string;
    requested: string;
    terminal: string;
    trees: string;
  }>(
    `SELECT name AS mode, count(*) AS targets,
            sum(jsonb_array_length(answer->'cancelled')) AS cancelled,
            sum(jsonb_array_length(answer->'requested')) AS requested,
            sum(jsonb_array_length(answer->'alreadyTerminal')) AS terminal,
            count(*) FILTER (WHERE fsm IN ('chaos_fanout', 'chaos_tree')) AS trees
       FROM chaos.client_ops WHERE op = 'cancel' AND result = 'ok' GROUP BY name ORDER BY name`,
  );
  for (const mode of ['cooperative', 'fence']) {
    figures[`cancels (${mode})`] = Number(answered.rows.find((r) => r.mode === mode)?.targets ?? 0);
  }
  for (const r of answered.rows) {
    figures[`cancels ${r.mode}`] =
      `${r.targets} targets (${r.trees} trees): ${r.cancelled} rows cancelled, ${r.requested} asked to stop, ${r.terminal} already ended`;
  }
  figures['cancelled trees'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.client_ops WHERE op = 'cancel' AND result = 'ok'
        AND fsm IN ('chaos_fanout', 'chaos_tree') AND jsonb_array_length(answer->'cancelled') + jsonb_array_length(answer->'requested') > 1`,
  );
  figures['retries acknowledged'] = await one(
    pool,
    `SELECT count(*) AS n FROM chaos.client_ops WHERE op = 'retry' AND result = 'ok'`,
  );
  figures['rows ended cancelled'] = await one(
    pool,
    `WITH ${FINAL} SELECT count(*) AS n FROM final WHERE status = 'cancelled'`,
  );
  figures['executions dropped by a cancel'] = await one(
    pool,
    `WITH ${COMMITTED} SELECT count(*) AS n FROM chaos.executions e
      WHERE e.started_at >= $1 AND NOT EXISTS (SELECT 1 FROM committed c WHERE c.exec = e.exec_id::text)
        AND EXISTS (SELECT 1 FROM chaos.history h WHERE h.id = e.instance_id AND h.old_status = 'executing'
                     AND h.new_status = 'cancelled' AND h.at >= e.started_at - interval '2 seconds'
                     AND h.at <= COALESCE((SELECT min(n.started_at) FROM chaos.executions n
                                            WHERE n.instance_id = e.instance_id AND n.started_at > e.started_at), 'infinity'))`,
    [since],
  );
}
