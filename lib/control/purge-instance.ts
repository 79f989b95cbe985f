import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { isTerminalStatus } from '../gen-durable.constants';
import { PURGE_INSTANCES, type PurgedRow } from '../sql/purge.sql';
import type { ControlRuntime } from './control-runtime';
import { optionsObject } from './input-checks';
import { actorOf } from './instance-history';
import { readResolved } from './read-target';
import { type ResolvedTarget, targetLabel } from './target';

export type { PurgeOptions } from './purge-options';

/** How often `purge` tries again when its row is locked by someone else (a worker, GC, a retry). */
const LOCKED_ATTEMPTS = 5;

/**
 * Deletes one ended instance (docs/design.md §27.8): one read (the row, to refuse a live one),
 * then {@link runPurge} over its id. Typed errors, nothing deleted: `NoTargetError` (no row),
 * `InvalidInputError` (bad options; a live row, naming its status; a child whose parent is
 * live; a row still locked after a few tries). A row deleted meanwhile by someone else (GC)
 * resolves: it is gone, as asked.
 */
export async function purgeInstance(
  runtime: ControlRuntime,
  target: ResolvedTarget,
  options: unknown,
): Promise<void> {
  const o = optionsObject(options, ['actor'], 'purge.options');
  const actor = actorOf(o?.['actor'], 'purge.actor') ?? null;
  let row = await readResolved(runtime.sql, target);
  if (!row) throw new NoTargetError(targetLabel(target), 'nothing was purged');
  for (let attempt = 1; ; attempt++) {
    if (!isTerminalStatus(row.status)) {
      throw new InvalidInputError(
        'purge.target',
        `${row.fsm}#${row.id} is ${row.status}: only a done, failed or cancelled instance can be purged (cancel it first)`,
      );
    }
    if (row.parentId !== null) {
      const parent = await readResolved(runtime.sql, { id: row.parentId });
      if (parent && !isTerminalStatus(parent.status)) {
        throw new InvalidInputError(
          'purge.target',
          `${row.fsm}#${row.id} is a child of ${parent.fsm}#${parent.id}, which is ${parent.status}: a live parent's children are kept (docs/design.md §18.1)`,
        );
      }
    }
    if ((await runPurge(runtime, [row.id], actor)).length > 0) return;
    if (attempt >= LOCKED_ATTEMPTS) {
      throw new InvalidInputError(
        'purge.target',
        `${row.fsm}#${row.id} (or one of its children) stayed locked by another transaction: try again`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
    // By id from here: a key's next read could answer an older instance that carried it.
    row = await readResolved(runtime.sql, { id: row.id });
    if (!row) return;
  }
}

/**
 * Deletes the ended rows of `ids` (at most one bulk batch) by one PURGE_INSTANCES statement —
 * `purge` and `purgeAll` alike — and emits `instance:purged` for each deleted row with `actor`:
 * the row's history goes with it (ON DELETE CASCADE), so the event is the record of the purge
 * (docs/operations-control.md "Purging"). Rows live, children of a live parent, locked or gone
 * are left alone and not answered.
 */
export async function runPurge(
  runtime: ControlRuntime,
  ids: readonly string[],
  actor: string | null,
): Promise<PurgedRow[]> {
  const purged = await PURGE_INSTANCES.run(runtime.sql, { ids });
  for (const row of purged) {
    runtime.telemetry.emit(
      'instance:purged',
      { count: 1 },
      { id: row.id, fsm: row.fsm, status: row.status, actor },
    );
  }
  return purged;
}
