import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import type { HistoryEntry, HistoryLevel } from '../instance/history-entry';
import { READ_HISTORY, READ_HISTORY_BY_KEY } from '../sql/history.sql';
import type { StatementRunner } from '../sql/statement';
import { integerIn, optionsObject } from './input-checks';
import { idText, type ResolvedTarget, targetLabel } from './target';

/** Rows per page when `limit` is not given. */
export const DEFAULT_HISTORY_LIMIT = 100;
/** The largest page `history` answers. */
export const MAX_HISTORY_LIMIT = 1000;

/** A validated page request of `history`. */
export interface ResolvedHistoryPage {
  readonly limit: number;
  readonly before: string | null;
}

/**
 * Validates `history`'s options `{ limit?, before? }` (`InvalidInputError` naming the field,
 * `path` prefixing it).
 */
export function resolveHistoryPage(
  options: unknown,
  path = 'history.options',
): ResolvedHistoryPage {
  const o = optionsObject(options, ['limit', 'before'], path, {
    nameKey: false,
    shape: '{ limit?, before? }',
  });
  const limit = integerIn(
    o?.['limit'],
    `${path}.limit`,
    DEFAULT_HISTORY_LIMIT,
    1,
    MAX_HISTORY_LIMIT,
  );
  const before = o?.['before'] === undefined ? null : idText(o['before'], `${path}.before`);
  return { limit, before };
}

/**
 * One page of an instance's history, newest first (docs/design.md §28.1): one statement,
 * through index gen_durable_history_instance. `NoTargetError` when no instance answers the
 * target (missing, collected by GC — its history went with it —, or its key freed). Nest-free:
 * `runner` is any schema-aware statement runner (the engine's SqlExecutor, a client's).
 */
export async function readInstanceHistory(
  runner: StatementRunner,
  target: ResolvedTarget,
  page: ResolvedHistoryPage,
): Promise<HistoryEntry[]> {
  const byId = 'id' in target;
  const read = { target: byId ? target.id : target.correlationKey, ...page };
  const entries = await (byId ? READ_HISTORY : READ_HISTORY_BY_KEY).run(runner, read);
  if (entries === null) throw new NoTargetError(targetLabel(target), 'it has no history to read');
  return entries;
}

/** The longest `actor` a manual action records, characters. */
export const MAX_ACTOR_LENGTH = 200;

/**
 * The `actor` option of a manual action (`cancel`, `retry`): a non-empty string of at most
 * {@link MAX_ACTOR_LENGTH} characters, or undefined; `InvalidInputError` at `path` otherwise.
 */
export function actorOf(value: unknown, path: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_ACTOR_LENGTH) {
    throw new InvalidInputError(
      path,
      `must be a non-empty string of at most ${MAX_ACTOR_LENGTH} characters`,
    );
  }
  return value;
}

/**
 * Whether a manual action on an instance of an FSM at `level` writes a history row
 * (docs/design.md §28.1): every level but `'off'` records manual actions (they are among what
 * `'failures'` records); `'full'` with the state. 0 none, 1 a row, 2 with the state.
 */
export function manualRecord(level: HistoryLevel): 0 | 1 | 2 {
  return level === 'off' ? 0 : level === 'full' ? 2 : 1;
}
