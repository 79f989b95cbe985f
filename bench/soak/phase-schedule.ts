/**
 * The soak's phases (docs/performance.md, "Soak"): clean → pinned (an idle transaction holds an
 * XID) → readers (the pin stays, REPEATABLE READ readers join it) → recovery (both released).
 * Pure: which phase a moment of the run falls in, and the windows the sampler reports.
 */
export type PhaseName = 'clean' | 'pinned' | 'readers' | 'recovery';

export const PHASE_NAMES: readonly PhaseName[] = ['clean', 'pinned', 'readers', 'recovery'];

export interface Phase {
  readonly name: PhaseName;
  /** Offset of the phase's start from the run's start, in seconds. */
  readonly startS: number;
  readonly seconds: number;
}

export interface PhaseSchedule {
  readonly phases: readonly Phase[];
  /** The whole run, in seconds (the sum of the phases). */
  readonly totalS: number;
  readonly windowS: number;
}

/** The schedule of `phaseS` seconds per phase (the recovery `recoveryS`), windows of `windowS`. */
export function phaseSchedule(phaseS: number, recoveryS: number, windowS: number): PhaseSchedule {
  for (const [name, v] of [
    ['phase seconds', phaseS],
    ['recovery seconds', recoveryS],
    ['window seconds', windowS],
  ] as const) {
    if (!Number.isInteger(v) || v <= 0) throw new Error(`${name} must be a positive integer`);
  }
  if (phaseS % windowS !== 0 || recoveryS % windowS !== 0) {
    throw new Error(`phase and recovery seconds must be multiples of the window (${windowS} s)`);
  }
  let startS = 0;
  const phases = PHASE_NAMES.map((name) => {
    const seconds = name === 'recovery' ? recoveryS : phaseS;
    const phase = { name, startS, seconds };
    startS += seconds;
    return phase;
  });
  return { phases, totalS: startS, windowS };
}

/** The phase at `elapsedS` seconds into the run, or undefined once the run is over. */
export function phaseAt(schedule: PhaseSchedule, elapsedS: number): Phase | undefined {
  if (elapsedS < 0) return undefined;
  return schedule.phases.find((p) => elapsedS >= p.startS && elapsedS < p.startS + p.seconds);
}

/** How many windows the run has (each phase is a whole number of them). */
export function windowCount(schedule: PhaseSchedule): number {
  return schedule.totalS / schedule.windowS;
}

/** The phase window `index` belongs to (by its start). */
export function phaseOfWindow(schedule: PhaseSchedule, index: number): Phase {
  const phase = phaseAt(schedule, index * schedule.windowS);
  if (!phase) throw new Error(`window ${index} is past the end of the run`);
  return phase;
}
