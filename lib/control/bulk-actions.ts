import { InvalidInputError } from '../errors/invalid-input.error';
import { UnknownStepError } from '../errors/unknown-step.error';
import { isEmptyFilter, resolveInstanceFilter } from './instance-filter';
import type { ResolvedFilter } from './instance-filter';
import type { BulkResult } from './bulk-options';
import type { PurgeAllResult } from './purge-options';
import { LIVE_STATUSES, TERMINAL_STATUSES } from '../gen-durable.constants';
import { BULK_BATCH, type BulkRow, PURGE_BATCH } from '../sql/bulk.sql';
import { CANCEL_BATCH } from '../sql/cancel.sql';
import { listDriver } from '../sql/query.sql';
import { afterCancel, cancelInput, historyLevels, runCancel } from './cancel-instance';
import type { ControlRuntime } from './control-runtime';
import { dueDate, flag, integerIn, nonEmptyText, optionsObject } from './input-checks';
import { actorOf } from './instance-history';
import { runPurge } from './purge-instance';
import { runRetry } from './retry-instance';

export type { BulkResult } from './bulk-options';

/** Rows acted on per batch: the batch statement reads at most this many (docs/design.md §27.7). */
export const BULK_BATCH_SIZE = 1000;
/** Rows a batch statement examines at most (the list's default scan bound). */
const BULK_SCAN = 10_000;

const CANCEL_KEYS = ['reason', 'children', 'mode', 'actor', 'dryRun', 'all'];
const RETRY_KEYS = ['step', 'at', 'detach', 'actor', 'dryRun', 'all'];
const PURGE_KEYS = ['batchSize', 'actor', 'dryRun', 'all'];

/**
 * `cancelAll` / `retryAll` (docs/design.md §27.7): the filter's rows in batches of at most
 * {@link BULK_BATCH_SIZE}, newest first, each batch read by one keyset statement (BULK_BATCH,
 * the walk and the indexes of `list`) and acted on by one statement: CANCEL_BATCH (CANCEL_INSTANCES'
 * writes on many leaf rows) or RETRY_INSTANCES (the statement of `retry` itself). A row the batch statement will not judge
 * alone — a cancel target with children, or one that changed under the statement — goes
 * through the single action (CANCEL_INSTANCES with its tree, rounds and riders), so a bulk
 * action does on each row what the single action does. Resumable: nothing is remembered
 * between calls, so a call that stopped part way is finished by calling it again (rows already
 * acted on no longer match, or answer as unchanged). Bad input is refused before anything runs:
 * `InvalidInputError` naming the field (an unknown status, an unknown option, an empty filter
 * without `all: true`).
 */
export class BulkActions {
  constructor(private readonly runtime: ControlRuntime) {}

  /**
   * Cancels every row the filter matches; `changed` counts the matched rows this call cancelled
   * or asked to stop (a row already cancelled by an earlier match's cascade counts once, with no
   * statement of its own).
   */
  async cancelAll(filter: unknown, options: unknown): Promise<BulkResult> {
    const o = optionsOf(options, 'cancelAll', CANCEL_KEYS);
    const f = filterOf(filter, 'cancelAll', o['all']);
    const { dryRun } = flags(o, 'cancelAll');
    const cancel = cancelInput({
      ...(o['reason'] !== undefined && { reason: o['reason'] }),
      ...(o['children'] !== undefined && { children: o['children'] }),
      ...(o['mode'] !== undefined && { mode: o['mode'] }),
      ...(o['actor'] !== undefined && { actor: o['actor'] }),
    });
    const history = historyLevels(this.runtime);
    const fence = cancel.mode === 'fence';
    const acted = new Set<string>();
    return this.walk(f, dryRun, async (rows) => {
      let changed = 0;
      const ids: string[] = [];
      for (const row of rows) {
        if (acted.has(row.id)) changed++;
        else ids.push(row.id);
      }
      if (ids.length === 0) return changed;
      const answer = await CANCEL_BATCH.run(this.runtime.sql, {
        ids,
        reason: cancel.reason,
        fence,
        ...history,
        actor: cancel.actor,
      });
      const single: string[] = [];
      const deferred: string[] = [];
      for (const row of answer) {
        switch (row.action) {
          case 'cancelled':
          case 'requested':
            break;
          case 'woken':
          case 'terminal':
            continue;
          case 'single':
            if (!single.includes(row.id)) single.push(row.id);
            continue;
          case 'deferred':
            deferred.push(row.id);
            continue;
        }
        acted.add(row.id);
        changed++;
        this.runtime.telemetry.emit(
          'instance:cancelled',
          {
            cancelled: row.action === 'cancelled' ? 1 : 0,
            requested: row.action === 'requested' ? 1 : 0,
            alreadyTerminal: 0,
          },
          { id: row.id, mode: cancel.mode, children: cancel.children },
        );
      }
      afterCancel(this.runtime, answer);
      // Families from the top: rows with children oldest first, then the rows left aside.
      single.sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
      for (const id of [...single, ...deferred]) {
        if (acted.has(id)) {
          changed++;
          continue;
        }
        const result = await runCancel(this.runtime, {
          targetId: id,
          correlationKey: null,
          reason: cancel.reason,
          children: cancel.children,
          fence,
          descendantsOnly: false,
          onlyFsms: null,
          actor: cancel.actor,
        });
        if (!result) continue;
        for (const c of result.cancelled) acted.add(c);
        for (const c of result.requested) acted.add(c);
        if (acted.has(id)) changed++;
      }
      return changed;
    });
  }

  /**
   * Makes every `failed` or `cancelled` row the filter matches runnable again (as `retry`);
   * `changed` counts those retried. A matched row that is live, whose parent moved on
   * (without `detach`) or whose key is occupied again is left as it is and not counted. With
   * `step`, the filter must name its FSM(s), and a batch holding a row whose FSM version lacks
   * the step is refused before it is written (`UnknownStepError`).
   */
  async retryAll(filter: unknown, options: unknown): Promise<BulkResult> {
    const o = optionsOf(options, 'retryAll', RETRY_KEYS);
    const f = filterOf(filter, 'retryAll', o['all']);
    const { dryRun } = flags(o, 'retryAll');
    const step = nonEmptyText(o['step'], 'retryAll.step');
    if (step !== undefined && f.fsms === null) {
      throw new InvalidInputError(
        'retryAll.step',
        'needs filter.fsm: a step is checked against the FSMs it names',
      );
    }
    const at = dueDate(o['at'], 'retryAll.at');
    const detach = flag(o['detach'], 'retryAll.detach');
    const actor = actorOf(o['actor'], 'retryAll.actor') ?? null;
    return this.walk(f, dryRun, async (rows) => {
      const retryable = rows.filter((r) => r.status === 'failed' || r.status === 'cancelled');
      if (retryable.length === 0) return 0;
      if (step !== undefined) {
        for (const row of retryable) {
          const definition = this.runtime.registry.find(row.fsm, row.fsmVersion);
          if (!definition) {
            throw new InvalidInputError(
              'retryAll.step',
              `FSM "${row.fsm}" version ${row.fsmVersion} is not registered on this node: its steps cannot be checked`,
            );
          }
          if (!definition.steps.has(step)) throw new UnknownStepError(row.fsm, step);
        }
      }
      const outcomes = await runRetry(this.runtime, retryable, {
        step: step ?? null,
        stateText: null,
        at: at ?? null,
        detach,
        actor,
      });
      let changed = 0;
      for (const outcome of outcomes.values()) if (outcome.verdict === 'retried') changed++;
      return changed;
    });
  }

  /**
   * Deletes every ended row the filter matches (docs/design.md §27.8): the filter's statuses
   * must all be ended ones (default: done, failed and cancelled), each batch of at most
   * `batchSize` rows deleted by one PURGE_INSTANCES (skip-locked: a row locked by GC, a worker
   * or another purge is left for a later call, as is a child of a live parent). `matched`
   * counts the ended rows the filter matched (the dry run's answer; nothing deleted), `purged`
   * those this call deleted. Archived rows are matched and purged too (PURGE_BATCH reads the
   * view gen_durable_all, docs/archive.md).
   */
  async purgeAll(filter: unknown, options: unknown): Promise<PurgeAllResult> {
    const o = optionsOf(options, 'purgeAll', PURGE_KEYS);
    const f = filterOf(filter, 'purgeAll', o['all']);
    const live = f.statuses?.filter((s) => (LIVE_STATUSES as readonly string[]).includes(s));
    if (live !== undefined && live.length > 0) {
      throw new InvalidInputError(
        'purgeAll.filter.status',
        `names ${live.join(', ')}: only done, failed or cancelled instances can be purged (cancel them first)`,
      );
    }
    const { dryRun } = flags(o, 'purgeAll');
    const batchSize = integerIn(
      o['batchSize'],
      'purgeAll.batchSize',
      BULK_BATCH_SIZE,
      1,
      BULK_BATCH_SIZE,
    );
    const actor = actorOf(o['actor'], 'purgeAll.actor') ?? null;
    const ended: ResolvedFilter = { ...f, statuses: f.statuses ?? [...TERMINAL_STATUSES] };
    const answer = await this.walk(
      ended,
      dryRun,
      async (rows) =>
        (
          await runPurge(
            this.runtime,
            rows.map((r) => r.id),
            actor,
          )
        ).length,
      batchSize,
      PURGE_BATCH,
    );
    return { matched: answer.matched, purged: answer.changed };
  }

  /**
   * Walks the filter's rows newest first in batches of at most `size` (one `batches` statement
   * each: BULK_BATCH over the hot table, PURGE_BATCH over hot and archived rows) and hands each
   * non-empty batch to `act`, which answers how many of its rows it changed.
   */
  private async walk(
    f: ResolvedFilter,
    dryRun: boolean,
    act: (rows: readonly BulkRow[]) => Promise<number>,
    size = BULK_BATCH_SIZE,
    batches: typeof BULK_BATCH = BULK_BATCH,
  ): Promise<BulkResult> {
    const driver = listDriver(f);
    let after: string | null = null;
    let matched = 0;
    let changed = 0;
    for (;;) {
      const batch = await batches.run(this.runtime.sql, {
        driver,
        after,
        scan: BULK_SCAN,
        limit: size,
        filter: f,
      });
      matched += batch.rows.length;
      if (!dryRun && batch.rows.length > 0) changed += await act(batch.rows);
      const last = batch.rows[batch.rows.length - 1];
      if (batch.rows.length >= size && last) after = last.id;
      else if (batch.scanned >= BULK_SCAN && batch.lastScanned !== null) after = batch.lastScanned;
      else return { matched, changed };
    }
  }
}

function optionsOf(
  options: unknown,
  path: string,
  keys: readonly string[],
): Record<string, unknown> {
  return optionsObject(options, keys, `${path}.options`) ?? {};
}

function filterOf(filter: unknown, path: string, all: unknown): ResolvedFilter {
  const f = resolveInstanceFilter(filter, `${path}.filter`);
  const everything = flag(all, `${path}.all`);
  if (isEmptyFilter(f) && !everything) {
    throw new InvalidInputError(
      `${path}.filter`,
      'has no criteria: it would address every instance; pass { all: true } in the options to mean that',
    );
  }
  return f;
}

function flags(o: Record<string, unknown>, path: string): { dryRun: boolean } {
  return { dryRun: flag(o['dryRun'], `${path}.dryRun`) };
}
