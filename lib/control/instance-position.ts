import type { DurableStatus } from '../gen-durable.constants';

/** What {@link instancePosition} reads of an instance. */
export interface PositionedInstance {
  readonly status: DurableStatus;
  readonly step: string;
  readonly awaits: readonly string[] | null;
}

/**
 * Where an instance is, as the dashboard and the CLI print it (docs/dashboard.md, docs/cli.md):
 * its step, or — parked on signals — what it awaits and the step that runs once one arrives,
 * "awaiting `paid` → ship" (a parked row's `step` is the step after the wait, docs/design.md
 * §8), so a parked instance does not read as if it were at that step already.
 */
export function instancePosition(i: PositionedInstance): string {
  if (i.status !== 'awaiting_signal' || !i.awaits || i.awaits.length === 0) return i.step;
  return `awaiting ${i.awaits.map((n) => `\`${n}\``).join(' or ')} → ${i.step}`;
}
