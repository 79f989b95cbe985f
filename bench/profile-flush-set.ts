/**
 * `npm run profile:flush-set`: what the flush's per-kind SET list costs PostgreSQL per row
 * (docs/performance.md, "What a row's update costs"). FLUSH_TRANSITIONS writes every kind of
 * outcome with one SET list whose columns are CASE expressions over the row's kind (KIND, itself
 * a CASE over the row's cancel request), evaluated once per column per row. On one scratch
 * database of ROWS rows (default 20 000, each updated once, analyzed), ROUNDS rounds (default
 * 60, the first 5 left out) time three statements on BATCH freshly claimed rows (default 400,
 * every entry `done`), each under `EXPLAIN (ANALYZE, TIMING OFF)` in a transaction rolled back:
 *
 * - `production`: FLUSH_TRANSITIONS, the flush of any mix of kinds;
 * - `done-only SET`: the same statement (FROM, WHERE, guard, RETURNING) with the SET list a
 *   `done` entry amounts to, without CASE: the SET list of FLUSH_DONE, which the flusher runs
 *   for a batch of `done` entries (FLUSH_DONE itself also takes 4 arrays instead of 16);
 * - `no RETURNING`: FLUSH_TRANSITIONS without its RETURNING list.
 *
 * Prints each one's median server time and µs per row. Uses DATABASE_URL (a server where it may
 * CREATE DATABASE) or the embedded PostgreSQL.
 */
import { Client } from 'pg';

import { withArrayLiterals } from '../lib/db/array-literal';
import { migrateUp } from '../lib/schema/migrator';
import { CLAIM_RUNNABLE } from '../lib/sql/claim.sql';
import { FLUSH_TRANSITIONS } from '../lib/sql/outcome.sql';
import { renderStatement, type StatementRunner } from '../lib/sql/statement';
import { doneWrites } from './done-writes';
import { runScript, withScratchDatabase } from './scratch-database';
import { serverTimeMs } from './server-time';
import { median } from './src/stats';

const ROWS = Number(process.env['ROWS'] ?? 20_000);
const BATCH = Number(process.env['BATCH'] ?? 400);
const ROUNDS = Number(process.env['ROUNDS'] ?? 60);
const WARM_UP = 5;

/** The three statement texts compared, by label. */
function variants(): [string, string][] {
  const production = renderStatement(FLUSH_TRANSITIONS, 'public');
  const set = production.indexOf('SET status');
  const from = production.indexOf('FROM unnest');
  if (set < 0 || from < 0)
    throw new Error('FLUSH_TRANSITIONS no longer has the shape this script cuts');
  const doneOnly =
    production.slice(0, set) +
    `SET status = 'done', result = t.result::jsonb, awaits = NULL, await_deadline = NULL,
          locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL, reaps = 0,
          suspect = false, updated_at = now()
     ` +
    production.slice(from);
  const noReturning = production.replace(/RETURNING[\s\S]*$/, '');
  return [
    ['production', production],
    ['done-only SET', doneOnly],
    ['no RETURNING', noReturning],
  ];
}

async function profileFlushSet(url: string): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await migrateUp({ query: (text, params) => client.query(text, params), inTransaction: false });
    await client.query(
      `INSERT INTO gen_durable (fsm, step) SELECT 'job', 'perform' FROM generate_series(1, $1::int)`,
      [ROWS],
    );
    await client.query('UPDATE gen_durable SET updated_at = now()');
    await client.query('ANALYZE gen_durable');
    const runner: StatementRunner = {
      queryResult: (s, v) => client.query(renderStatement(s, 'public'), v as unknown[]),
    };
    const all = variants();
    const times = new Map<string, number[]>(all.map(([label]) => [label, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const [label, text] of all) {
        await client.query('BEGIN');
        try {
          const { rows } = await CLAIM_RUNNABLE.run(runner, {
            queue: 'default',
            limit: BATCH,
            worker: 'w',
            leaseMs: 60_000,
            gates: [],
          });
          const values = FLUSH_TRANSITIONS.params({ solo: false, entries: doneWrites(rows) });
          const ms = await serverTimeMs(client, text, withArrayLiterals(values));
          if (round >= WARM_UP) times.get(label)!.push(ms);
        } finally {
          await client.query('ROLLBACK');
        }
      }
    }
    const out = [
      `FLUSH_TRANSITIONS of ${BATCH} done entries on ${ROWS} rows, ${ROUNDS - WARM_UP} rounds, server time (median):`,
    ];
    for (const [label] of all) {
      const ms = median(times.get(label)!);
      out.push(
        `  ${label.padEnd(14)} ${ms.toFixed(3)} ms, ${((ms / BATCH) * 1000).toFixed(2)} µs per row`,
      );
    }
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await client.end();
  }
}

runScript(() => withScratchDatabase('gd_flush_set', ({ url }) => profileFlushSet(url)));
