/**
 * Where the server's time went in each phase of a soak (docs/performance.md, "Soak"): every
 * statement's pg_stat_statements calls and total time, read at each phase's start and end, and
 * the difference ranked by total time. Under a pinned horizon this names what else, besides
 * the claim, walks the dead index entries. Pure.
 */
import type { PhaseName } from './phase-schedule';

/** One statement's cumulative counters at a reading. */
export interface StatementTotal {
  readonly queryId: string;
  /** The statement's normalized text, whitespace collapsed, cut short. */
  readonly text: string;
  readonly calls: number;
  readonly totalMs: number;
}

/** One statement's share of a phase. */
export interface StatementShare {
  readonly text: string;
  readonly calls: number;
  readonly totalMs: number;
  readonly meanMs: number;
}

export interface PhaseStatements {
  readonly phase: PhaseName;
  readonly seconds: number;
  /** Server time of every statement in the phase, ms. */
  readonly totalMs: number;
  /** The statements that took the most time, most first. */
  readonly top: readonly StatementShare[];
}

/** The statements between two readings, ranked by the time they took, the first `top` kept. */
export function phaseStatements(
  phase: PhaseName,
  seconds: number,
  before: readonly StatementTotal[],
  after: readonly StatementTotal[],
  top: number,
): PhaseStatements {
  const earlier = new Map(before.map((s) => [s.queryId, s]));
  const shares: StatementShare[] = [];
  let totalMs = 0;
  for (const s of after) {
    const b = earlier.get(s.queryId);
    const calls = s.calls - (b?.calls ?? 0);
    const ms = s.totalMs - (b?.totalMs ?? 0);
    if (calls <= 0) continue;
    totalMs += ms;
    shares.push({ text: s.text, calls, totalMs: ms, meanMs: ms / calls });
  }
  shares.sort((x, y) => y.totalMs - x.totalMs);
  return { phase, seconds, totalMs, top: shares.slice(0, top) };
}
