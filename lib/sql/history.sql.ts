import type { HistoryEntry, HistoryError, HistoryKind } from '../instance/history-entry';
import { keyTargetId } from './instance.sql';
import { noRows } from './row-decoders';
import { sql } from './statement';

/** The inputs of a history page read: the instance (by id or key), the keyset bound, the size. */
export interface HistoryRead {
  /** The instance id (READ_HISTORY) or correlation key (READ_HISTORY_BY_KEY). */
  readonly target: string;
  /** Only rows with a lower id; null for the newest page. */
  readonly before: string | null;
  readonly limit: number;
}

/** A history row as the read statements select it, with the instance's id (`target_id`). */
interface HistoryRecord {
  target_id: string;
  id: string | null;
  instance_id: string;
  at: Date;
  kind: HistoryKind;
  step: string | null;
  next_step: string | null;
  attempt: number | null;
  claim_seq: string | null;
  worker: string | null;
  outcome: string | null;
  error: HistoryError | null;
  state: unknown;
  actor: string | null;
}

/**
 * One page of an instance's history, newest first, and whether the instance exists: the target
 * CTE finds the instance (the row whose id is `targetId`), the lateral branch reads its history through index
 * gen_durable_history_instance `(instance_id, id)` backwards from the keyset bound (an index
 * condition: `id < coalesce(before, max)`), stopping at the limit. No row at all: no instance;
 * one row whose `id` is null: an instance without history (on this page). Hot or archived
 * (views gen_durable_all and gen_durable_history_all, docs/archive.md: the archive's
 * gen_durable_archive_id and gen_durable_history_archive_instance serve the same reads).
 */
function readHistoryText(targetId: string): string {
  return `WITH target AS (SELECT id FROM {schema}.gen_durable_all WHERE id = ${targetId} LIMIT 1)
SELECT t.id AS target_id, h.id, h.instance_id, h.at, h.kind, h.step, h.next_step, h.attempt,
       h.claim_seq, h.worker, h.outcome, h.error, h.state, h.actor
  FROM target t
  LEFT JOIN LATERAL (
    SELECT * FROM {schema}.gen_durable_history_all x
     WHERE x.instance_id = t.id
       AND x.id < coalesce($2::bigint, 9223372036854775807)
     ORDER BY x.id DESC
     LIMIT $3
  ) h ON true
 ORDER BY h.id DESC`;
}

const codec = {
  params: (i: HistoryRead): unknown[] => [i.target, i.before, i.limit],
  decode: historyPage,
};

/** A page of history of the instance with id `$1` (PK, then gen_durable_history_instance). */
export const READ_HISTORY = sql('read_history', readHistoryText('$1'), codec);

/**
 * A page of history of the instance correlation key `$1` addresses: its live occupant, else the
 * most recent ended instance with the key ({@link keyTargetId}: gen_durable_correlation, then
 * gen_durable_ended_key), by PK, then gen_durable_history_instance.
 */
export const READ_HISTORY_BY_KEY = sql(
  'read_history_by_key',
  readHistoryText(keyTargetId('$1')),
  codec,
);

/** The rows as frozen `HistoryEntry`s, or null when no instance answered. */
function historyPage(rows: readonly HistoryRecord[]): HistoryEntry[] | null {
  if (rows.length === 0) return null;
  const entries: HistoryEntry[] = [];
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    if (r.id === null) continue;
    entries.push(
      Object.freeze({
        id: r.id,
        instanceId: r.instance_id,
        at: r.at,
        kind: r.kind,
        step: r.step,
        nextStep: r.next_step,
        attempt: r.attempt,
        claimSeq: r.claim_seq,
        worker: r.worker,
        outcome: r.outcome,
        error: r.error,
        state: r.state,
        actor: r.actor,
      }),
    );
  }
  return entries;
}

/** One history row to write (INSERT_HISTORY). */
export interface HistoryWrite {
  readonly instanceId: string;
  readonly kind: HistoryKind;
  readonly step: string | null;
  readonly nextStep: string | null;
  readonly attempt: number | null;
  readonly claimSeq: string | null;
  readonly worker: string | null;
  readonly outcome: string | null;
  /** JSON text of a `HistoryError`, or null. */
  readonly errorText: string | null;
  /** Record the row's state as it is in this transaction (level `'full'`). */
  readonly withState: boolean;
  readonly actor: string | null;
}

/**
 * History rows of a flush transaction (docs/design.md §28.1) that no statement of it wrote
 * already: parks, fan-outs, and mark-1 rows a cancel request ended. Runs last in the
 * transaction, so a row is written exactly when its outcome commits; `state` is read from the
 * row as the transaction left it (PK lookup). One insert per row (index
 * gen_durable_history_instance).
 */
export const INSERT_HISTORY = sql(
  'insert_history',
  `INSERT INTO {schema}.gen_durable_history
          (instance_id, kind, step, next_step, attempt, claim_seq, worker, outcome, error, state, actor)
   SELECT h.instance_id, h.kind, h.step, h.next_step, h.attempt, h.claim_seq, h.worker, h.outcome,
          h.error::jsonb,
          CASE WHEN h.with_state THEN (SELECT g.state FROM {schema}.gen_durable g WHERE g.id = h.instance_id) END,
          h.actor
     FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int[], $6::bigint[], $7::text[],
                 $8::text[], $9::text[], $10::boolean[], $11::text[])
          AS h(instance_id, kind, step, next_step, attempt, claim_seq, worker, outcome, error, with_state, actor)`,
  {
    params: ({ rows }: { readonly rows: readonly HistoryWrite[] }): unknown[] => {
      const columns: unknown[][] = [[], [], [], [], [], [], [], [], [], [], []];
      for (const r of rows) {
        columns[0]!.push(r.instanceId);
        columns[1]!.push(r.kind);
        columns[2]!.push(r.step);
        columns[3]!.push(r.nextStep);
        columns[4]!.push(r.attempt);
        columns[5]!.push(r.claimSeq);
        columns[6]!.push(r.worker);
        columns[7]!.push(r.outcome);
        columns[8]!.push(r.errorText);
        columns[9]!.push(r.withState);
        columns[10]!.push(r.actor);
      }
      return columns;
    },
    decode: noRows,
  },
);
