import type { TransitionWrite } from '../lib/sql/outcome.sql';

/** A claimed row as the claim statement answers it: enough to guard a write to it. */
export interface ClaimedForWrite {
  readonly worker: string;
  readonly id: string;
  readonly claimSeq: string;
}

/** What a transition write says beyond its guard: its kind, and any column that differs. */
export type TransitionFields = Pick<TransitionWrite, 'kind'> &
  Partial<Omit<TransitionWrite, 'worker' | 'id' | 'seq'>>;

/**
 * The flush's write of one outcome to a claimed row, guarded by the claim's worker and token:
 * no step, state, result or error, no delay, weight 1, the key untouched, unless `fields` says
 * otherwise. The bench scripts and the tests that run FLUSH_TRANSITIONS on rows they claimed
 * build their entries here, so a new column of the write is added once.
 */
export function transitionWrite(row: ClaimedForWrite, fields: TransitionFields): TransitionWrite {
  return {
    worker: row.worker,
    id: row.id,
    seq: row.claimSeq,
    nextStep: null,
    stateText: null,
    resultText: null,
    error: null,
    delayMs: 0,
    rateLimit: null,
    weight: 1,
    setKey: false,
    concurrencyKey: null,
    ...fields,
  };
}

/**
 * The flush's write of a `done` outcome with an empty result for each claimed row: the bench
 * scripts that time or explain FLUSH_TRANSITIONS on rows they claimed build their batch here.
 */
export function doneWrites(rows: readonly ClaimedForWrite[]): TransitionWrite[] {
  return rows.map((r) => transitionWrite(r, { kind: 'done', resultText: '{}' }));
}
