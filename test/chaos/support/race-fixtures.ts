import type { Pool } from 'pg';

import { LIVE_STATUSES } from '../../../lib/gen-durable.constants';
import type { InsertRow } from '../../../lib/instance/insert-row';
import { INSERT_INSTANCE } from '../../../lib/sql/insert.sql';
import { renderStatement, type StatementRunner } from '../../../lib/sql/statement';

/** Runs production statements on the test pool (`STATEMENT.run(poolRunner(pool), input)`): rendered for `public`, unprepared. */
export function poolRunner(pool: Pool): StatementRunner {
  return {
    queryResult: (statement, values) =>
      pool.query(renderStatement(statement, 'public'), values as unknown[]),
  };
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
  const inserted = await INSERT_INSTANCE.run(poolRunner(pool), r);
  if (!inserted) throw new Error(`insert of ${r.fsm} was a duplicate`);
  return inserted.id;
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
    `SELECT id, name, consumed_at IS NOT NULL AS consumed FROM gen_durable_signals WHERE target_id = $1 ORDER BY id`,
    [id],
  );
  return rows;
}
