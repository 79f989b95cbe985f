import { sql } from './statement';

/** A history row's recorded state, as `fork({ fromHistory })` reads it. */
export interface RecordedState {
  readonly instanceId: string;
  readonly kind: string;
  /** Null when the row recorded no state (levels below 'full'). */
  readonly state: Record<string, unknown> | null;
  /** The step the row recorded the instance leaving for, or else at. */
  readonly step: string | null;
}

interface RecordedStateRecord {
  instance_id: string;
  kind: string;
  state: Record<string, unknown> | null;
  step: string | null;
}

/**
 * The state recorded in history row `$1` of instance `$2` (docs/design.md §28.3
 * `fromHistory`), hot or archived (view gen_durable_history_all, docs/archive.md): the hot
 * table's primary key, then, only when it found nothing (LIMIT 1 stops the append),
 * gen_durable_history_archive_instance `(instance_id, id)` in each archive partition. No row: no
 * such history row of that instance.
 */
export const READ_RECORDED_STATE = sql(
  'read_recorded_state',
  `SELECT instance_id::text AS instance_id, kind, state, COALESCE(next_step, step) AS step
     FROM {schema}.gen_durable_history_all
    WHERE id = $1::bigint AND instance_id = $2::bigint LIMIT 1`,
  {
    params: (i: { readonly historyId: string; readonly instanceId: string }) => [
      i.historyId,
      i.instanceId,
    ],
    decode: (rows: readonly RecordedStateRecord[]): RecordedState | null => {
      const r = rows[0];
      return r ? { instanceId: r.instance_id, kind: r.kind, state: r.state, step: r.step } : null;
    },
  },
);

/**
 * Marks a just-inserted fork with its source (docs/design.md §28.3): `forked_from` of row `$1`
 * (PK) set to `$2`. Runs in the fork's transaction, after INSERT_INSTANCE.
 */
export const SET_FORKED_FROM = sql(
  'set_forked_from',
  `UPDATE {schema}.gen_durable SET forked_from = $2::bigint WHERE id = $1::bigint`,
  {
    params: (i: { readonly id: string; readonly forkedFrom: string }) => [i.id, i.forkedFrom],
    decode: () => undefined,
  },
);
