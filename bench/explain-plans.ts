/**
 * `npm run explain`: EXPLAIN (ANALYZE, BUFFERS) of the production claim, enrichment and flush
 * statements on a table with ROWS terminal + runnable rows (default 200 000), then of the
 * default dashboard views of `list`, `count` and `queueStatus` (docs/design.md §27.6–27.7)
 * once 1 % failed rows and a parent with 100 children are added (as generic plans), of `get`
 * by correlation key (live, ended, absent), then the control writes (a retryAll and a cancelAll
 * batch, a cascading cancel), printed as text.
 * Uses DATABASE_URL (a server where it may CREATE DATABASE) or the embedded PostgreSQL.
 * Every analysed statement runs inside a transaction that is rolled back.
 */
import { GC_SELECT_TERMINAL } from '../lib/sql/maintenance.sql';
import { Client } from 'pg';

import { migrateUp } from '../lib/schema/migrator';
import { CLAIM_RUNNABLE, LOAD_ENRICHMENT } from '../lib/sql/claim.sql';
import { FLUSH_TRANSITIONS } from '../lib/sql/outcome.sql';
import { type InstanceFilter, resolveInstanceFilter } from '../lib/control/instance-filter';
import { COUNT_INSTANCES, countDriver, LIST_INSTANCES, listDriver } from '../lib/sql/query.sql';
import { QUEUE_STATUS } from '../lib/sql/queue.sql';
import { renderStatement, type Statement, type StatementRunner } from '../lib/sql/statement';
import { LATEST_STATS, STATS_SERIES, WRITE_STATS_SNAPSHOT } from '../lib/sql/stats.sql';
import { EXPLAIN_INSTANCE } from '../lib/sql/explain.sql';
import { GET_INSTANCE_BY_KEY } from '../lib/sql/instance.sql';
import { LIMIT_CONFIGS, LIMIT_COUNTERS } from '../lib/sql/limiter-status.sql';
import { CANCEL_BATCH, CANCEL_INSTANCES } from '../lib/sql/cancel.sql';
import { RETRY_INSTANCES } from '../lib/sql/retry.sql';
import { runScript, type ScratchDatabase, withScratchDatabase } from './scratch-database';
import { doneWrites } from './done-writes';

const ROWS = Number(process.env['ROWS'] ?? 200_000);
const BATCH = 50;

async function explain(
  client: Client,
  title: string,
  statement: Statement,
  params: unknown[],
): Promise<void> {
  await client.query('BEGIN');
  try {
    const text = `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING ON) ${renderStatement(statement, 'public')}`;
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(text, params);
    process.stdout.write(
      `\n=== ${title} (${statement.name}) ===\n${rows.map((r) => r['QUERY PLAN']).join('\n')}\n`,
    );
  } finally {
    await client.query('ROLLBACK');
  }
}

async function explainPlans({ url, server, embedded }: ScratchDatabase): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await migrateUp({ query: (text, params) => client.query(text, params), inTransaction: false });
    const terminal = Math.floor(ROWS * 0.7);
    await client.query(
      `INSERT INTO gen_durable (fsm, step, status, updated_at)
       SELECT 'job', 'perform', 'done', now() - interval '1 hour' FROM generate_series(1, $1)`,
      [terminal],
    );
    await client.query(
      `INSERT INTO gen_durable (fsm, step) SELECT 'job', 'perform' FROM generate_series(1, $1)`,
      [ROWS - terminal],
    );
    await client.query('ANALYZE gen_durable');
    process.stdout.write(
      `${server.replace(/:[^:@/]*@/, ':***@')} ${embedded ? '(embedded PostgreSQL)' : ''}: ${ROWS} rows, ${terminal} terminal\n`,
    );

    await explain(
      client,
      'GC: ended rows past their retention (one FSM overriding done)',
      GC_SELECT_TERMINAL,
      GC_SELECT_TERMINAL.params({
        limit: 10_000,
        retention: { done: 60_000, failed: 604_800_000, cancelled: 86_400_000 },
        overrides: [{ fsm: 'kept', retention: { done: 864_000_000 } }],
      }),
    );
    const claim = {
      queue: 'default',
      limit: BATCH,
      worker: 'explain-worker',
      leaseMs: 60_000,
      gates: [],
    };
    await explain(
      client,
      `claim of ${BATCH}, enrichment included`,
      CLAIM_RUNNABLE,
      CLAIM_RUNNABLE.params(claim),
    );

    // Claim a batch for real, then explain the inline chain's enrichment and the flush of it.
    const runner: StatementRunner = {
      queryResult: (statement, values) =>
        client.query(renderStatement(statement, 'public'), values as unknown[]),
    };
    const { rows: claimed } = await CLAIM_RUNNABLE.run(runner, claim);
    const ids = claimed.map((r) => r.id);
    await explain(
      client,
      `enrichment alone (inline chains) of ${ids.length}`,
      LOAD_ENRICHMENT,
      LOAD_ENRICHMENT.params({ ids }),
    );
    const entries = doneWrites(claimed);
    await explain(
      client,
      `flush of ${entries.length} done outcomes, solo (autocommit)`,
      FLUSH_TRANSITIONS,
      FLUSH_TRANSITIONS.params({ entries, solo: true }),
    );

    // The default views of docs/design.md §27.7 (a dashboard's first pages and counts).
    await client.query(
      `INSERT INTO gen_durable (fsm, step, status, last_error, updated_at)
       SELECT 'job', 'perform', 'failed', 'Error: boom', now() - interval '1 hour'
         FROM generate_series(1, $1)`,
      [Math.floor(ROWS / 100)],
    );
    const { rows: parents } = await client.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, status) VALUES ('batch', 'join', 'awaiting_children')
       RETURNING id::text`,
    );
    const parentId = parents[0]!.id;
    await client.query(
      `INSERT INTO gen_durable (fsm, step, parent_id) SELECT 'item', 'perform', $1 FROM generate_series(1, 100)`,
      [parentId],
    );
    await client.query('ANALYZE gen_durable');
    // The engine runs named prepared statements, generic after a few runs: show those plans.
    await client.query('SET plan_cache_mode = force_generic_plan');
    const views: [string, InstanceFilter][] = [
      ['every instance, newest first', {}],
      ['failed instances, newest first', { status: 'failed' }],
      ['children of a parent', { parentId }],
      [
        'failed of one FSM with an error text (bounded scan)',
        { fsm: 'job', status: 'failed', errorContains: 'boom' },
      ],
    ];
    for (const [title, input] of views) {
      const filter = resolveInstanceFilter(input, 'filter');
      const list = { driver: listDriver(filter), after: null, scan: 10_000, limit: 50, filter };
      await explain(
        client,
        `list: ${title} (driver ${list.driver})`,
        LIST_INSTANCES,
        LIST_INSTANCES.params(list),
      );
    }
    const counts: [string, InstanceFilter][] = [
      ['failed', { status: 'failed' }],
      ['runnable of queue default', { status: 'runnable', queue: 'default' }],
      ['executing', { status: 'executing' }],
      ['children of a parent', { parentId }],
      ['failed of one FSM', { fsm: 'job', status: 'failed' }],
      ['one FSM with few rows (no index has fsm: the budget bounds it)', { fsm: 'item' }],
    ];
    for (const [title, input] of counts) {
      const filter = resolveInstanceFilter(input, 'filter');
      const count = { driver: countDriver(filter), cap: 10_000, budgetMs: 1_000, filter };
      await explain(
        client,
        `count (cap 10 000): ${title} (driver ${count.driver})`,
        COUNT_INSTANCES,
        COUNT_INSTANCES.params(count),
      );
    }
    // queueStatus runs its statement after SET LOCAL jit = off (lib/sql/queue.sql.ts).
    await client.query('SET jit = off');
    await explain(
      client,
      'queueStatus (cap 10 000, JIT off)',
      QUEUE_STATUS,
      QUEUE_STATUS.params({ queues: ['default'], cap: 10_000, only: null }),
    );
    await client.query('SET jit = on');
    await explainKeyReads(client);
    await explainControlWrites(client, parentId);
    await explainDashboardData(client);
  } finally {
    await client.end();
  }
}

/**
 * The control actions' writes (docs/design.md §27.2, §27.3, §27.7), each rolled back: a
 * `retryAll` batch of 1 000 failed rows and a `retry` of one (RETRY_INSTANCES, by primary
 * key), a `cancelAll` batch of 1 000 runnable leaf rows (CANCEL_BATCH: primary key,
 * gen_durable_parent for the children probe), and the cascading cancel of the parent with 100
 * children (CANCEL_INSTANCES: primary key, then gen_durable_parent down the tree).
 */
async function explainControlWrites(client: Client, parentId: string): Promise<void> {
  const history = { historyOff: [], historyFull: [], actor: null };
  const { rows: failed } = await client.query<{ id: string; seq: string }>(
    `SELECT id::text, claim_seq::text AS seq FROM gen_durable WHERE status = 'failed'
      ORDER BY id DESC LIMIT 1000`,
  );
  await explain(
    client,
    `retryAll: one batch of ${failed.length} failed rows`,
    RETRY_INSTANCES,
    RETRY_INSTANCES.params({
      rows: failed.map((r) => ({ id: r.id, claimSeq: r.seq, record: 1 as const })),
      step: null,
      stateText: null,
      at: null,
      detach: false,
      actor: null,
    }),
  );
  const [newest] = failed;
  if (newest) {
    await explain(
      client,
      'retry: one failed row (the same statement, an array of one)',
      RETRY_INSTANCES,
      RETRY_INSTANCES.params({
        rows: [{ id: newest.id, claimSeq: newest.seq, record: 1 }],
        step: null,
        stateText: null,
        at: null,
        detach: false,
        actor: null,
      }),
    );
  }
  const { rows: runnable } = await client.query<{ id: string }>(
    `SELECT id::text FROM gen_durable WHERE status = 'runnable' AND parent_id IS NULL
      ORDER BY id DESC LIMIT 1000`,
  );
  await explain(
    client,
    `cancelAll: one batch of ${runnable.length} runnable leaf rows`,
    CANCEL_BATCH,
    CANCEL_BATCH.params({ ids: runnable.map((r) => r.id), reason: null, fence: false, ...history }),
  );
  await explain(
    client,
    'cancel: a parent and its 100 children (cascade)',
    CANCEL_INSTANCES,
    CANCEL_INSTANCES.params({
      targetId: parentId,
      correlationKey: null,
      reason: null,
      children: 'cascade',
      fence: false,
      descendantsOnly: false,
      onlyFsms: null,
      ...history,
    }),
  );
}

/**
 * Reads by correlation key (docs/identity.md "Finding an instance by key"): a live key (the
 * occupant, gen_durable_correlation), a key only the most recently ended row carries and a key
 * nobody carries (both then gen_durable_ended_key, the key's range read backward).
 */
async function explainKeyReads(client: Client): Promise<void> {
  const live = ['runnable', 'executing', 'awaiting_signal', 'awaiting_children'];
  await client.query(
    `INSERT INTO gen_durable (fsm, step, correlation_key, correlation_scope)
     VALUES ('order', 'start', 'order:live', $1::gen_durable_status[])`,
    [live],
  );
  await client.query(
    `INSERT INTO gen_durable (fsm, step, status, correlation_key, correlation_scope, updated_at)
     VALUES ('order', 'ship', 'done', 'order:ended', $1::gen_durable_status[], now())`,
    [live],
  );
  await client.query('ANALYZE gen_durable');
  for (const [title, key] of [
    ['a live key', 'order:live'],
    ['a key only a recently ended row carries', 'order:ended'],
    ['a key nobody carries', 'order:none'],
  ] as const) {
    await explain(
      client,
      `get by key: ${title}`,
      GET_INSTANCE_BY_KEY,
      GET_INSTANCE_BY_KEY.params({ correlationKey: key }),
    );
  }
}

/**
 * The dashboard's data reads (docs/dashboard-data.md): the stats snapshot write (and, once a
 * minute is written, the same statement skipping at its one-time probe), the overview reads,
 * "why isn't it running?" of a due row and of a parked row, and the limiter counters.
 */
async function explainDashboardData(client: Client): Promise<void> {
  await client.query(
    `INSERT INTO gen_durable (fsm, step, status, lease_expires_at, locked_by, concurrency_key)
     SELECT 'job', 'perform', 'executing', now() + interval '1 minute', 'w', 'acct:' || i
       FROM generate_series(1, 200) i`,
  );
  await client.query(
    `INSERT INTO gen_durable (fsm, step, status, awaits)
     SELECT 'job', 'wait', 'awaiting_signal', '{go}' FROM generate_series(1, $1)`,
    [Math.floor(ROWS / 100)],
  );
  await client.query(
    `UPDATE gen_durable SET updated_at = date_trunc('minute', now()) - interval '30 seconds'
      WHERE id IN (SELECT id FROM gen_durable WHERE status = 'done' LIMIT 5000)`,
  );
  await client.query(
    `INSERT INTO gen_durable_bucket_configs (kind, name, rate, capacity, shards)
     VALUES ('conc', 'acct', NULL, 2, 1), ('rate', 'mail', 10, 20, 2)`,
  );
  await client.query(
    `INSERT INTO gen_durable_buckets (kind, key, shard, capacity, available, last_refill)
     SELECT 'rate', 'mail:' || i, s, 10, 3, now() FROM generate_series(1, 500) i, generate_series(0, 1) s`,
  );
  await client.query('ANALYZE');
  // The snapshot runs after SET LOCAL jit = off (lib/runtime/stats-snapshot.ts).
  await client.query('SET jit = off');
  await explain(
    client,
    'stats snapshot: write the minute (cap 10 000, JIT off)',
    WRITE_STATS_SNAPSHOT,
    WRITE_STATS_SNAPSHOT.params({ cap: 10_000 }),
  );
  await client.query(
    `INSERT INTO gen_durable_stats (at, queue, counts)
     SELECT date_trunc('minute', now()) - make_interval(mins => m), 'default', '{"done": 1}'
       FROM generate_series(0, 1439) m`,
  );
  await client.query('ANALYZE gen_durable_stats');
  await explain(
    client,
    'stats snapshot: the minute is written (one-time probe, JIT off)',
    WRITE_STATS_SNAPSHOT,
    WRITE_STATS_SNAPSHOT.params({ cap: 10_000 }),
  );
  await client.query('SET jit = on');
  await explain(client, 'overview: newest snapshot', LATEST_STATS, LATEST_STATS.params());
  await explain(
    client,
    'overview: 60-minute series',
    STATS_SERIES,
    STATS_SERIES.params({ minutes: 61 }),
  );
  const { rows } = await client.query<{ due: string; parked: string }>(
    `SELECT (SELECT max(id) FROM gen_durable WHERE status = 'runnable')::text AS due,
            (SELECT max(id) FROM gen_durable WHERE status = 'awaiting_signal')::text AS parked`,
  );
  await explain(
    client,
    'explain: a due runnable row',
    EXPLAIN_INSTANCE,
    EXPLAIN_INSTANCE.params({ id: rows[0]!.due, correlationKey: null }),
  );
  await explain(
    client,
    'explain: a parked row',
    EXPLAIN_INSTANCE,
    EXPLAIN_INSTANCE.params({ id: rows[0]!.parked, correlationKey: null }),
  );
  await explain(client, 'limiter status: declarations', LIMIT_CONFIGS, LIMIT_CONFIGS.params());
  await explain(
    client,
    'limiter status: counters (cap 1 000)',
    LIMIT_COUNTERS,
    LIMIT_COUNTERS.params({ limit: 1_000 }),
  );
}

runScript(() => withScratchDatabase('gd_explain', explainPlans));
