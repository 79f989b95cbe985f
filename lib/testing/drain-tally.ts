/** What one `drain()` ran, by outcome kind (SPEC §23). */
export interface DrainTally {
  steps: number;
  next: number;
  retry: number;
  await: number;
  scheduleChildren: number;
  done: number;
  stop: number;
}

export function emptyTally(): DrainTally {
  return { steps: 0, next: 0, retry: 0, await: 0, scheduleChildren: 0, done: 0, stop: 0 };
}
