import type { TransitionWrite } from '../lib/sql/outcome.sql';

/** A claimed row as the claim statement answers it: enough to guard a write to it. */
export interface ClaimedForWrite {
  readonly worker: string;
  readonly id: string;
  readonly claimSeq: string;
}

/**
 * The flush's write of a `done` outcome with an empty result for each claimed row: the bench
 * scripts that time or explain FLUSH_TRANSITIONS on rows they claimed build their batch here.
 */
export function doneWrites(rows: readonly ClaimedForWrite[]): TransitionWrite[] {
  return rows.map((r) => ({
    worker: r.worker,
    id: r.id,
    seq: r.claimSeq,
    kind: 'done',
    nextStep: null,
    stateText: null,
    resultText: '{}',
    error: null,
    delayMs: 0,
    rateLimit: null,
    weight: 1,
    setKey: false,
    concurrencyKey: null,
  }));
}
