import type { PoolClient } from 'pg';

import { DuplicateError } from '../errors/duplicate.error';
import type { InsertRow } from '../instance/insert-row';
import { CANCEL_INSTANCES, type CancelRequest } from '../sql/cancel.sql';
import { CONSUME_INBOXES } from '../sql/outcome.sql';
import { type ReplaceAnswer, REPLACE_INSTANCE } from '../sql/replace.sql';
import { afterCancel, cancelRounds, historyLevels, summarize } from './cancel-instance';
import type { ControlRuntime } from './control-runtime';

/** The reason stored on an occupant a replace cancelled (docs/identity.md "Conflict modes"). */
export const REPLACED_REASON = 'replaced';

/** What a replace answered: the inserted row. */
export interface ReplaceResult {
  readonly id: string;
  readonly queue: string;
  readonly due: boolean;
}

/**
 * `insert({ onConflict: 'replace' })` (docs/identity.md "Conflict modes"): REPLACE_INSTANCE
 * cancels the key's live occupant as a cooperative `cancel` with `children: 'cascade'` would
 * (the occupant ends cancelled now, or, executing, is asked to end and its late outcome ends
 * it cancelled) and inserts `row` in the same statement; a cascade whose tree moved runs
 * CANCEL_INSTANCES rounds after it ({@link cancelRounds}). After commit (no `client`): the
 * cancel's effects ({@link afterCancel}). An occupant that ended but keeps the key by its scope,
 * or a dedup window, is not replaced: `DuplicateError`. A holder that committed after the
 * statement's snapshot (a concurrent insert) makes it run once more.
 */
export async function replaceInstance(
  runtime: ControlRuntime,
  row: InsertRow,
  client?: PoolClient,
): Promise<ReplaceResult> {
  const key = row.correlationKey ?? '';
  const request: CancelRequest = {
    targetId: null,
    correlationKey: key,
    reason: REPLACED_REASON,
    children: 'cascade',
    fence: false,
    descendantsOnly: false,
    onlyFsms: null,
    actor: null,
    ...historyLevels(runtime),
  };
  for (let attempt = 1; attempt <= 2; attempt++) {
    let answer: ReplaceAnswer | undefined;
    const { root, rows } = await cancelRounds(
      async (r) => {
        if (answer !== undefined) return CANCEL_INSTANCES.run(runtime.sql, r, client);
        answer = await REPLACE_INSTANCE.run(runtime.sql, { request: r, row }, client);
        return answer.cancelled;
      },
      request,
      (ids) => CONSUME_INBOXES.run(runtime.sql, { ids }, client),
    );
    if (client === undefined) afterCancel(runtime, rows);
    if (root && (root.action === 'cancelled' || root.action === 'requested')) {
      const result = summarize(rows);
      runtime.telemetry.emit(
        'instance:cancelled',
        {
          cancelled: result.cancelled.length,
          requested: result.requested.length,
          alreadyTerminal: result.alreadyTerminal.length,
        },
        { id: root.id, mode: 'cooperative', children: 'cascade' },
      );
    }
    const inserted = answer?.inserted;
    if (inserted) return inserted;
    if (answer?.holder) break;
  }
  throw new DuplicateError(key);
}
