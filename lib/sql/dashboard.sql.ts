import type { InboxSignal } from '../instance/inbox-signal';
import { sql } from './statement';

interface InboxRecord {
  id: string;
  name: string;
  payload: unknown;
  dedup_key: string | null;
  consumed_at: Date | null;
  inserted_at: Date;
}

/**
 * The newest `$2` signals delivered to instance `$1`, consumed or not (index gen_durable_signals_target on
 * (target_id, name): the target's rows only, sorted by id in memory — an inbox is small).
 */
export const READ_INBOX = sql(
  'read_inbox',
  `SELECT id, name, payload, dedup_key, consumed_at, inserted_at
     FROM {schema}.gen_durable_signals WHERE target_id = $1 ORDER BY id DESC LIMIT $2`,
  {
    params: (i: { readonly id: string; readonly limit: number }) => [i.id, i.limit],
    decode: (rows: readonly InboxRecord[]): InboxSignal[] =>
      rows.map((r) => ({
        id: String(r.id),
        name: r.name,
        payload: r.payload,
        dedupKey: r.dedup_key,
        consumedAt: r.consumed_at,
        insertedAt: r.inserted_at,
      })),
  },
);
