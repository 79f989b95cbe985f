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

/** Lengths of single phases, in seconds, where they differ from the common phase length. */
export interface PhaseLengths {
  readonly clean?: number;
  readonly pinned?: number;
  /** 0 leaves the readers phase out (the pin runs straight into recovery). */
  readonly readers?: number;
}

/**
 * The schedule of `phaseS` seconds per phase (the recovery `recoveryS`, any phase named in
 * `lengths` its own), windows of `windowS`.
 */
export function phaseSchedule(
  phaseS: number,
  recoveryS: number,
  windowS: number,
  lengths: PhaseLengths = {},
): PhaseSchedule {
  const seconds: Record<PhaseName, number> = {
    clean: lengths.clean ?? phaseS,
    pinned: lengths.pinned ?? phaseS,
    readers: lengths.readers ?? phaseS,
    recovery: recoveryS,
  };
  for (const [name, v] of [
    ['phase seconds', phaseS],
    ['recovery seconds', recoveryS],
    ['window seconds', windowS],
    ['clean seconds', seconds.clean],
    ['pinned seconds', seconds.pinned],
  ] as const) {
    if (!Number.isInteger(v) || v <= 0) throw new Error(`${name} must be a positive integer`);
  }
  if (!Number.isInteger(seconds.readers) || seconds.readers < 0) {
    throw new Error('readers seconds must be a non-negative integer');
  }
  if (Object.values(seconds).some((v) => v % windowS !== 0)) {
    throw new Error(`phase and recovery seconds must be multiples of the window (${windowS} s)`);
  }
  let startS = 0;
  const phases = PHASE_NAMES.filter((name) => seconds[name] > 0).map((name) => {
    const phase = { name, startS, seconds: seconds[name] };
    startS += seconds[name];
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
