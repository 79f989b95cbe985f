import { Client } from 'pg';

import { CLAIM_RUNNABLE, type ClaimRow } from '../../lib/sql/claim.sql';
import {
  renderStatement,
  type Statement,
  type StatementResult,
  type StatementRunner,
} from '../../lib/sql/statement';
import { trackResource } from './open-resources';
import type { TestDatabase } from './test-database';

/**
 * One dedicated PostgreSQL connection for deterministic race tests: it runs the engine's own
 * statements (a lib/sql statement's `run(session, input)`, rendered with renderStatement, i.e.
 * the production SQL, parameters and decoding) so a test can hold a flush or a delivery
 * transaction open at an exact point, and it knows its backend pid so another session can be
 * observed waiting on it.
 */
export interface RawSession extends StatementRunner {
  readonly pid: number;
  /** Runs plain SQL (BEGIN, COMMIT, test-side reads). */
  exec<R extends Record<string, unknown> = Record<string, unknown>>(
    text: string,
    params?: readonly unknown[],
  ): Promise<R[]>;
  close(): Promise<void>;
}

export async function openRawSession(db: TestDatabase, schema = 'public'): Promise<RawSession> {
  const client = new Client({ connectionString: db.url });
  await client.connect();
  let open = true;
  trackResource(`raw session on ${db.name}`, () => open);
  const pidRow = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const pid = pidRow.rows[0]!.pid;
  return {
    pid,
    async queryResult(statement: Statement, values: readonly unknown[]): Promise<StatementResult> {
      // Unprepared: the same text the engine prepares.
      return client.query(renderStatement(statement, schema), values as unknown[]);
    },
    async exec<R extends Record<string, unknown>>(text: string, params: readonly unknown[] = []) {
      const result = await client.query<R>(text, params as unknown[]);
      return result.rows;
    },
    async close() {
      if (!open) return;
      open = false;
      await client.end();
    },
  };
}

/**
 * Resolves once some backend of the test database is waiting on a lock held by `holderPid`,
 * and returns those waiting pids. Uses pg_blocking_pids, so it observes the engine's own pool
 * connections too (whose pids the test does not know in advance).
 */
export async function waitUntilBlockedBy(
  db: TestDatabase,
  holderPid: number,
  timeoutMs = 10_000,
): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db.pool.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND $1::int = ANY (pg_blocking_pids(pid))`,
      [holderPid],
    );
    if (rows.length > 0) return rows.map((r) => r.pid);
    if (Date.now() > deadline) {
      throw new Error(`no session became blocked by pid ${holderPid} within ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** True when `pid` is waiting on a lock held by `holderPid` (isolation-tester primitive). */
export async function isBlockedBy(
  db: TestDatabase,
  pid: number,
  holderPid: number,
): Promise<boolean> {
  const { rows } = await db.pool.query<{ blocked: boolean }>(
    'SELECT pg_isolation_test_session_is_blocked($1, ARRAY[$2]::int[]) AS blocked',
    [pid, holderPid],
  );
  return rows[0]?.blocked === true;
}

/**
 * Claims up to `batch` (default 100) due rows of `queue` as `worker` through the production
 * CLAIM_RUNNABLE on `runner` (a raw session, or `poolRunner(pool)` of the race fixtures),
 * without the picker's admission: the one claim helper of the raw-SQL tests. Tests that go
 * through an engine use the harness's pick instead.
 */
export async function claimOn(
  runner: StatementRunner,
  queue: string,
  worker: string,
  options: { batch?: number; leaseMs?: number } = {},
): Promise<ClaimRow[]> {
  const claim = await CLAIM_RUNNABLE.run(runner, {
    queue,
    limit: options.batch ?? 100,
    worker,
    leaseMs: options.leaseMs ?? 60_000,
    gates: [],
  });
  return claim.rows;
}

/** Opens a transaction on `session` that holds the row lock of `id` (FOR NO KEY UPDATE). */
export async function holdRowLock(session: RawSession, id: string): Promise<void> {
  await session.exec('BEGIN');
  await session.exec('SELECT 1 FROM gen_durable WHERE id = $1 FOR NO KEY UPDATE', [id]);
}
