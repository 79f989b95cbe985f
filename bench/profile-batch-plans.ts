/**
 * `npm run profile:batch-plans`: the guarded batch writes' cost by batch size, generic plan
 * against custom plan, on a table analyzed and on one never analyzed (docs/performance.md,
 * "The guarded batch writes' plans").
 *
 *   ROWS=20000 SIZES=10,50,100,400 npm run profile:batch-plans
 *
 * A scratch database gets ROWS runnable rows (all updated once, so the table holds dead
 * versions as a drained one does), analyzed or not. For each size, FLUSH_TRANSITIONS (every
 * entry `done`) and HEARTBEAT run on that many freshly claimed rows, each in a transaction
 * rolled back, as a named statement under `plan_cache_mode = force_generic_plan` (the plan a
 * pooled connection runs from a statement's sixth execution) and `force_custom_plan`. Prints
 * the best client-side time of three runs, ms. Uses DATABASE_URL (a server where it may
 * CREATE DATABASE) or the embedded PostgreSQL.
 */
import { Client } from 'pg';
import { DataSource } from 'typeorm';

import { withArrayLiterals } from '../lib/db/array-literal';
import { migrateUp } from '../lib/schema/migrator';
import { CLAIM_RUNNABLE } from '../lib/sql/claim.sql';
import { HEARTBEAT } from '../lib/sql/lease.sql';
import { FLUSH_TRANSITIONS } from '../lib/sql/outcome.sql';
import { renderStatement, type StatementRunner } from '../lib/sql/statement';
import { doneWrites } from './done-writes';
import { runScript, withScratchDatabase } from './scratch-database';

const ROWS = Number(process.env['ROWS'] ?? 20_000);
const SIZES = (process.env['SIZES'] ?? '10,50,100,400').split(',').map(Number);
const RUNS = 3;
const MODES = ['force_generic_plan', 'force_custom_plan'] as const;

/** Best time of RUNS runs of one statement on `size` claimed rows, ms. */
async function timeStatement(
  client: Client,
  which: 'flush' | 'heartbeat',
  size: number,
  mode: (typeof MODES)[number],
): Promise<number> {
  const runner: StatementRunner = {
    queryResult: (s, v) => client.query(renderStatement(s, 'public'), v as unknown[]),
  };
  const statement = which === 'flush' ? FLUSH_TRANSITIONS : HEARTBEAT;
  let best = Infinity;
  for (let run = 0; run < RUNS; run++) {
    await client.query('BEGIN');
    try {
      const { rows } = await CLAIM_RUNNABLE.run(runner, {
        queue: 'default',
        limit: size,
        worker: 'w',
        leaseMs: 60_000,
        gates: [],
      });
      await client.query(`SET LOCAL plan_cache_mode = ${mode}`);
      const values =
        which === 'flush'
          ? FLUSH_TRANSITIONS.params({
              solo: false,
              entries: doneWrites(rows),
            })
          : HEARTBEAT.params({
              worker: 'w',
              rows: rows.map((r) => ({ id: r.id, claimSeq: r.claimSeq })),
              leaseMs: 60_000,
            });
      const started = process.hrtime.bigint();
      const result = await client.query({
        name: `profile_${statement.name}_${mode}`,
        text: renderStatement(statement, 'public'),
        values: withArrayLiterals(values) as unknown[],
      });
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      if (result.rowCount !== size) {
        throw new Error(`${statement.name} wrote ${result.rowCount} rows of ${size}`);
      }
      best = Math.min(best, ms);
    } finally {
      await client.query('ROLLBACK');
    }
  }
  return best;
}

async function profile(url: string, analyzed: boolean): Promise<void> {
  const ds = new DataSource({ type: 'postgres', url });
  await ds.initialize();
  try {
    await migrateUp({ query: (text, params) => ds.query(text, params), inTransaction: false });
  } finally {
    await ds.destroy();
  }
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('TRUNCATE gen_durable CASCADE');
    await client.query(
      `INSERT INTO gen_durable (fsm, step) SELECT 'job', 'perform' FROM generate_series(1, $1::int)`,
      [ROWS],
    );
    await client.query('UPDATE gen_durable SET updated_at = now()');
    if (analyzed) await client.query('ANALYZE gen_durable');
    for (const size of SIZES) {
      for (const which of ['flush', 'heartbeat'] as const) {
        const [generic, custom] = [
          await timeStatement(client, which, size, MODES[0]),
          await timeStatement(client, which, size, MODES[1]),
        ];
        console.log(
          `${analyzed ? 'analyzed      ' : 'never analyzed'}  ${which.padEnd(9)}  ${String(size).padStart(4)} rows` +
            `  generic ${generic.toFixed(2).padStart(7)} ms  custom ${custom.toFixed(2).padStart(7)} ms`,
        );
      }
    }
  } finally {
    await client.end();
  }
}

runScript(async () => {
  console.log(`${ROWS} rows; best of ${RUNS} runs, client-side, each rolled back`);
  for (const analyzed of [true, false]) {
    await withScratchDatabase('gd_profile_plans', ({ url }) => profile(url, analyzed));
  }
});
