import type { InsertRow } from '../instance/insert-row';
import {
  CANCEL_INSTANCES,
  type CancelledRow,
  type CancelRequest,
  cancelRoundCtes,
} from './cancel.sql';
import {
  INSERT_ROW_COLUMNS,
  type InsertedInstance,
  insertRowParams,
  insertRowSelect,
  keyHolderSelect,
} from './insert.sql';
import { sql } from './statement';

/** What REPLACE_INSTANCE is asked: the cancel of the key's occupant, and the row to insert. */
export interface ReplaceInput {
  /** The cancel of the occupant of `row.correlationKey` (by key, cascade, cooperative). */
  readonly request: CancelRequest;
  readonly row: InsertRow;
}

/** What REPLACE_INSTANCE answered. */
export interface ReplaceAnswer {
  /** The rows the cancel looked at, as CANCEL_INSTANCES answers them. */
  readonly cancelled: CancelledRow[];
  /** The row inserted, or null. */
  readonly inserted: InsertedInstance | null;
  /** Nothing inserted: the key's holder in the statement's snapshot (an ended occupant whose scope keeps the key, or a dedup window), or null. */
  readonly holder: { readonly id: string; readonly queue: string } | null;
}

interface ReplaceRecord {
  part: 'cancel' | 'inserted' | 'holder';
  id: string;
  action: string;
  is_target: boolean;
  queue: string;
  prior: string;
  moved: boolean;
  signaled: boolean;
  concurrency_key: string | null;
  concurrency_shard: number | null;
  due: boolean | null;
}

/**
 * `insert({ onConflict: 'replace' })` (docs/identity.md "Conflict modes"), one statement: the
 * first round of CANCEL_INSTANCES on the key's live occupant (`$1`…`$10`: found by
 * gen_durable_correlation, locked, cancelled now or, executing, asked to end, cooperatively,
 * with its history row and riders), which also frees the occupant's key (its scope emptied),
 * then the insert of `$11`…`$30` (INSERT_INSTANCE's parameters, shifted by 10), run after the
 * cancel's writes (its WHERE reads `changed`): the unique index gen_durable_correlation no
 * longer holds the occupant's entry for this transaction, and the occupant's own dedup window
 * (gen_durable_dedup) is not counted. An ended occupant whose scope keeps the key is not
 * cancelled (`terminal`) and the insert conflicts: no `inserted` row, the `holder` row names it.
 * A cascade whose tree moved runs further rounds with CANCEL_INSTANCES (the caller).
 */
export const REPLACE_INSTANCE = sql(
  'replace_instance',
  `WITH RECURSIVE ${cancelRoundCtes(true)}, ins AS (
     INSERT INTO {schema}.gen_durable
       ${INSERT_ROW_COLUMNS}
     ${insertRowSelect(10, '(SELECT t.id FROM target t)')}
       AND (SELECT count(*) FROM changed) >= 0
     ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
     RETURNING id, queue, eligible_at <= now() AS due
   )
   SELECT 'cancel' AS part, a.id, a.action, a.is_target, a.queue, a.status AS prior, a.moved,
          a.signaled, a.concurrency_key, a.concurrency_shard, NULL::boolean AS due
     FROM act a WHERE a.role = 'tree'
   UNION ALL
   SELECT 'cancel', j.id, 'woken', false, j.queue, 'awaiting_children', false, false, NULL, NULL, NULL
     FROM joined j WHERE j.status = 'runnable'
   UNION ALL
   SELECT 'inserted', i.id, 'none', false, i.queue, NULL, false, false, NULL, NULL, i.due FROM ins i
   UNION ALL
   SELECT 'holder', h.id, 'none', false, h.queue, NULL, false, false, NULL, NULL, false
     FROM ${keyHolderSelect(10)} h
    WHERE NOT EXISTS (SELECT 1 FROM ins) AND NOT EXISTS (SELECT 1 FROM act a WHERE a.is_target AND a.action IN ('cancelled', 'requested'))`,
  {
    params: (i: ReplaceInput) => [...CANCEL_INSTANCES.params(i.request), ...insertRowParams(i.row)],
    decode: (rows: readonly ReplaceRecord[], i: ReplaceInput): ReplaceAnswer => {
      const cancelRows = rows.filter((r) => r.part === 'cancel');
      const ins = rows.find((r) => r.part === 'inserted');
      const holder = rows.find((r) => r.part === 'holder');
      return {
        cancelled: CANCEL_INSTANCES.decode(
          cancelRows as unknown as Parameters<typeof CANCEL_INSTANCES.decode>[0],
          i.request,
        ),
        inserted: ins ? { id: ins.id, queue: ins.queue, due: ins.due === true } : null,
        holder: holder ? { id: holder.id, queue: holder.queue } : null,
      };
    },
  },
);
