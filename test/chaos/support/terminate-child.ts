// Child process of test/chaos/connection-faults.spec.ts: a flush-like transaction through the
// engine's SqlExecutor whose backend is terminated between two statements (what a
// pg_terminate_backend sweep or a Postgres restart does to an engine process). Prints one
// JSON line with what the transaction answered; an unhandled 'error' event would instead
// kill this process with an uncaught exception.
import { Client, Pool } from 'pg';

import { SqlExecutor } from '../../../lib/db/sql-executor';
import { noParams, sql } from '../../../lib/sql/statement';
import { HandoverProxy } from './handover-proxy';

const PID = sql('chaos_probe_pid', 'SELECT pg_backend_pid() AS pid', {
  params: noParams,
  decode: (rows: readonly { pid: number }[]) => rows[0]?.pid,
});
const url = process.env['GD_TERMINATE_URL'] ?? '';

async function main(): Promise<void> {
  const pool = new Pool({ connectionString: url, max: 2 });
  pool.on('error', () => undefined);
  const executor = new SqlExecutor(pool, {
    schema: 'public',
    preparedStatements: true,
    statementTimeoutMs: 5_000,
  });
  const killer = new Client({ connectionString: url });
  await killer.connect();
  let answer: string;
  try {
    await executor.transaction(async (tx) => {
      const pid = await PID.run(executor, undefined, tx);
      await killer.query('SELECT pg_terminate_backend($1)', [pid]);
      // The FATAL message arrives while the client is checked out but runs no query.
      await new Promise((resolve) => setTimeout(resolve, 300));
      await PID.run(executor, undefined, tx);
    });
    answer = 'committed';
  } catch (err) {
    answer = `rejected: ${(err as Error).message}`;
  }
  // The pool still works afterwards (the broken client was destroyed, not reused).
  const after = await PID.run(executor);

  // A backend terminated while the pool hands its brand-new client over: the FATAL comes in
  // the same TCP chunk as the startup's ReadyForQuery (a backend kill or a Postgres restart
  // racing a fresh connection; the R1 run met it through its fault proxy).
  const port = Number(new URL(url).port || 5432);
  const proxy = await HandoverProxy.start(port, async (pid) => {
    await killer.query('SELECT pg_terminate_backend($1)', [pid]);
  });
  const proxied = new URL(url);
  proxied.port = String(proxy.port);
  const handoverPool = new Pool({ connectionString: proxied.toString(), max: 1 });
  handoverPool.on('error', () => undefined);
  const handover = new SqlExecutor(handoverPool, {
    schema: 'public',
    preparedStatements: true,
    statementTimeoutMs: 5_000,
  });
  let handoverAnswer: string;
  try {
    await PID.run(handover);
    handoverAnswer = 'answered';
  } catch (err) {
    handoverAnswer = `rejected: ${(err as Error).message}`;
  }
  const again = await PID.run(handover);
  process.stdout.write(
    `${JSON.stringify({ answer, poolWorks: typeof after === 'number', handoverAnswer, handoverPoolWorks: typeof again === 'number' })}\n`,
  );
  await handoverPool.end();
  await proxy.close();
  await killer.end();
  await pool.end();
}

void main();
