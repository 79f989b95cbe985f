import type { Pool } from 'pg';

import { insertParams, type InsertRow } from '../../../lib/engine/insert-row';
import { LIVE_STATUSES } from '../../../lib/gen-durable.constants';
import { CLAIM_RUNNABLE } from '../../../lib/sql/claim.sql';
import { INSERT_INSTANCE } from '../../../lib/sql/insert.sql';
import { renderStatement, type Statement } from '../../../lib/sql/statement';

/** Production statements run on the test pool (rendered for `public`, unprepared). */
export async function runOn<R extends Record<string, unknown>>(
  pool: Pool,
  statement: Statement,
  params: readonly unknown[],
): Promise<R[]> {
  return (await pool.query<R>(renderStatement(statement, 'public'), params as unknown[])).rows;
}

let queues = 0;
/** A queue name no other fixture uses (claims are by queue). */
export function freshQueue(prefix = 'race'): string {
  return `${prefix}-${process.pid}-${++queues}`;
}

/** An InsertRow as buildInsertRow would make it (the race specs run without a registry). */
export function row(
  fsm: string,
  step: string,
  state: Record<string, unknown>,
  queue: string,
  extra: Partial<InsertRow> = {},
): InsertRow {
  return {
    fsm,
    fsmVersion: 1,
    step,
    stateText: JSON.stringify(state),
    queue,
    priority: 0,
    at: null,
    delayMs: 0,
    correlationKey: null,
    scope: LIVE_STATUSES.join(','),
    concurrencyKey: null,
    rateLimit: null,
    weight: 1,
    ...extra,
  };
}

/** Inserts through INSERT_INSTANCE; returns the id. */
export async function insertRow(pool: Pool, r: InsertRow): Promise<string> {
  const [inserted] = await runOn<{ id: string }>(pool, INSERT_INSTANCE, insertParams(r));
  if (!inserted) throw new Error(`insert of ${r.fsm} was a duplicate`);
  return inserted.id;
}

export interface Claimed {
  readonly id: string;
  readonly claim_seq: string;
  readonly step: string;
  readonly state: Record<string, unknown>;
}

/** Claims the due rows of `queue` as `worker` through CLAIM_RUNNABLE. */
export function claim(
  pool: Pool,
  queue: string,
  worker: string,
  leaseMs = 60_000,
  batch = 10,
): Promise<Claimed[]> {
  return runOn<Claimed & Record<string, unknown>>(pool, CLAIM_RUNNABLE, [
    queue,
    batch,
    worker,
    leaseMs,
    [],
  ]);
}

/** Test-side clock control: the lease of `id` ran out a second ago. */
export async function expireLease(pool: Pool, id: string): Promise<void> {
  await pool.query(
    `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
    [id],
  );
}

export interface RowView {
  status: string;
  step: string;
  attempt: number;
  state: Record<string, unknown>;
  claim_seq: string;
  locked_by: string | null;
  children_pending: number;
  awaits: string[] | null;
  reaps: number;
}

export async function rowView(pool: Pool, id: string): Promise<RowView> {
  const { rows } = await pool.query<RowView>(
    `SELECT status, step, attempt, state, claim_seq, locked_by, children_pending, awaits, reaps FROM gen_durable WHERE id = $1`,
    [id],
  );
  if (!rows[0]) throw new Error(`row ${id} is gone`);
  return rows[0];
}

export async function inboxOf(
  pool: Pool,
  id: string,
): Promise<{ id: string; name: string; consumed: boolean }[]> {
  const { rows } = await pool.query<{ id: string; name: string; consumed: boolean }>(
    `SELECT id, name, consumed_at IS NOT NULL AS consumed FROM signals WHERE target_id = $1 ORDER BY id`,
    [id],
  );
  return rows;
}

/**
 * Parameters of a batched flush statement for one row, by column name: the statement's own
 * `unnest(...) AS t(col, ...)` list gives the order, so the race specs follow the production
 * text as it evolves (a column they do not name is NULL).
 */
export function unnestParams(statement: Statement, values: Record<string, unknown>): unknown[][] {
  const match = /AS t\(([^)]*)\)/.exec(statement.text);
  if (!match) throw new Error(`${statement.name} has no unnest column list`);
  const columns = match[1]!.split(',').map((c) => c.trim());
  for (const key of Object.keys(values)) {
    if (!columns.includes(key)) {
      throw new Error(`${statement.name} has no column ${key} (columns: ${columns.join(', ')})`);
    }
  }
  return columns.map((c) => [values[c] ?? null]);
}
