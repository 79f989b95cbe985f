import { TALLY_KINDS, type TallyKind } from '../fsm/outcome-kinds';

/**
 * What one `drain()` ran: `steps` in all, and one counter per tally kind of the outcome table
 * (lib/fsm/outcome-kinds.ts): next, retry, throttle, sleep, await, scheduleChildren, done, stop,
 * cancelled (a cooperative cancel honoured by the flush; docs/design.md §23, §27.2).
 */
export type DrainTally = { steps: number } & Record<TallyKind, number>;

export function emptyTally(): DrainTally {
  const tally = { steps: 0 } as DrainTally;
  for (const kind of TALLY_KINDS) tally[kind] = 0;
  return tally;
}
