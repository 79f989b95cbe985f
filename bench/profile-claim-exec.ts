/**
 * `BEFORE=/path/to/other/checkout npm run profile:claim-exec`: the claim statement's time on the
 * server, this checkout's CLAIM_RUNNABLE against another checkout's (a `git worktree` of the
 * commit before a change), interleaved, to see what a change of the statement costs or saves
 * per claimed row (docs/performance.md, "What a row's update costs"). On one scratch database
 * (this checkout's schema): ROWS rows (default 20 000), a third of them runnable in queue
 * `default`, analyzed; then ROUNDS rounds (default 300, the first 20 left out as warm-up), each
 * running both statements once in turn, each claiming BATCH rows (default 740, a default c=10
 * claim) under `EXPLAIN (ANALYZE, TIMING OFF)` in a transaction that is rolled back, so every
 * claim sees the same table. Prints each side's median execution time and the difference per
 * claimed row. Without BEFORE it times this checkout alone. The other checkout's statement is
 * rendered against this schema, so a change that also migrates the schema is not comparable
 * this way. Uses DATABASE_URL (a server where it may CREATE DATABASE) or the embedded
 * PostgreSQL.
 */
import { resolve } from 'node:path';

import { Client } from 'pg';

import { CLAIM_RUNNABLE, type ClaimInput } from '../lib/sql/claim.sql';
import { migrateUp } from '../lib/schema/migrator';
import { renderStatement } from '../lib/sql/statement';
import { runScript, withScratchDatabase } from './scratch-database';
import { serverTimeMs } from './server-time';
import { median } from './src/stats';

const ROWS = Number(process.env['ROWS'] ?? 20_000);
const BATCH = Number(process.env['BATCH'] ?? 740);
const ROUNDS = Number(process.env['ROUNDS'] ?? 300);
const WARM_UP = 20;
const BEFORE = process.env['BEFORE'];

type ClaimStatement = typeof CLAIM_RUNNABLE;

interface Side {
  readonly name: string;
  readonly statement: ClaimStatement;
  readonly times: number[];
}

function sides(): Side[] {
  const out: Side[] = [{ name: 'this checkout', statement: CLAIM_RUNNABLE, times: [] }];
  if (BEFORE !== undefined) {
    const path = resolve(BEFORE, 'lib/sql/claim.sql');
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const other = require(path) as { CLAIM_RUNNABLE: ClaimStatement };
    out.unshift({ name: `BEFORE (${BEFORE})`, statement: other.CLAIM_RUNNABLE, times: [] });
  }
  return out;
}

async function profileClaimExec(url: string): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await migrateUp({ query: (text, params) => client.query(text, params), inTransaction: false });
    await client.query(
      `INSERT INTO gen_durable (fsm, step, status, updated_at)
       SELECT 'prof1', 'perform', 'done', now() - interval '1 hour'
         FROM generate_series(1, $1::int)`,
      [ROWS - Math.floor(ROWS / 3)],
    );
    await client.query(
      `INSERT INTO gen_durable (fsm, step, queue)
       SELECT 'prof1', 'perform', 'default' FROM generate_series(1, $1::int)`,
      [Math.floor(ROWS / 3)],
    );
    await client.query('ANALYZE gen_durable');
    const input: ClaimInput = {
      queue: 'default',
      limit: BATCH,
      worker: 'profile-claim-exec',
      leaseMs: 30_000,
      gates: [],
    };
    const all = sides();
    for (let round = 0; round < ROUNDS; round++) {
      for (const side of all) {
        await client.query('BEGIN');
        try {
          const ms = await serverTimeMs(
            client,
            renderStatement(side.statement, 'public'),
            side.statement.params(input),
          );
          if (round >= WARM_UP) side.times.push(ms);
        } finally {
          await client.query('ROLLBACK');
        }
      }
    }
    const out = [
      `CLAIM_RUNNABLE of ${BATCH} rows from ${ROWS} (${Math.floor(ROWS / 3)} runnable), ${ROUNDS - WARM_UP} rounds, server time:`,
    ];
    for (const side of all) out.push(`  ${side.name}: median ${median(side.times).toFixed(3)} ms`);
    if (all.length === 2) {
      const saved = median(all[0]!.times) - median(all[1]!.times);
      out.push(
        `  difference: ${((saved / BATCH) * 1000).toFixed(2)} µs per claimed row (positive: this checkout is faster)`,
      );
    }
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await client.end();
  }
}

runScript(() => withScratchDatabase('gd_claim_exec', ({ url }) => profileClaimExec(url)));
