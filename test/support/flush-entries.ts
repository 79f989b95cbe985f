import type { EngineService, Outcome } from '../../lib';
import type { ClaimedRow, ClaimRecord } from '../../lib/runtime/claimed-row';
import type { FlushEntry, FlushReply } from '../../lib/runtime/flush-entry';
import { outcomeToEntry } from '../../lib/runtime/outcome-entry';

/**
 * Feeding the engine's own flusher by hand, for race tests: a row claimed through the
 * production claim (raw-session `claimRows`) becomes a ClaimedRow, an outcome becomes a flush
 * entry through the production validation/serialization, and entries submitted in one turn
 * of the event loop ride one flush transaction. Nothing here re-states the flush SQL or its
 * parameters, so these tests follow the flusher as it changes.
 */
export function claimedRow(record: ClaimRecord, worker: string): ClaimedRow {
  return {
    id: record.id,
    fsm: record.fsm,
    fsmVersion: record.fsm_version,
    step: record.step,
    state: record.state,
    attempt: record.attempt,
    awaits: record.awaits,
    queue: record.queue,
    priority: record.priority,
    concurrencyKey: record.concurrency_key,
    concurrencyShard: record.concurrency_shard,
    rateLimit: record.rate_limit,
    weight: record.weight,
    claimSeq: record.claim_seq,
    parentId: record.parent_id,
    gated: record.gated,
    worker,
    inbox: [],
    children: [],
  };
}

/** The flush entry the executor would submit for `outcome` (awaitedIds = signals presented). */
export function flushEntry(
  engine: EngineService,
  row: ClaimedRow,
  outcome: Outcome,
  awaitedIds: readonly string[] = [],
): FlushEntry {
  const runtime = engine.runtime;
  const definition = runtime.registry.find(row.fsm, row.fsmVersion);
  if (!definition) {
    throw new Error(`no FSM ${row.fsm} v${row.fsmVersion} registered in the test app`);
  }
  return outcomeToEntry(outcome, row, definition, runtime.registry, runtime.options, awaitedIds);
}

/** Submits `entries` to the engine's flusher in one synchronous burst: they share one flush. */
export function submitTogether(
  engine: EngineService,
  entries: readonly FlushEntry[],
): Promise<FlushReply[]> {
  return Promise.all(entries.map((entry) => engine.runtime.flusherFor(entry.queue).submit(entry)));
}
