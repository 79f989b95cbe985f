import type { EngineService, Outcome } from '../../lib';
import type { ClaimedRow } from '../../lib/runtime/claimed-row';
import type { FlushEntry, FlushReply } from '../../lib/runtime/flush-entry';
import { outcomeToEntry } from '../../lib/runtime/outcome-entry';

/**
 * Feeding the engine's own flusher by hand, for race tests: a row claimed through the
 * production claim (raw-session `claimOn`) is a ClaimedRow already, an outcome becomes a flush
 * entry through the production validation/serialization, and entries submitted in one turn
 * of the event loop ride one flush transaction. Nothing here re-states the flush SQL or its
 * parameters, so these tests follow the flusher as it changes.
 */
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
