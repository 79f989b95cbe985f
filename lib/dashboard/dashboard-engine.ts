import type { EngineService } from '../engine/engine.service';
import type { InstanceFilter } from '../control/instance-filter';

/**
 * The engine calls the dashboard makes beyond the core API, as optional members: a build of
 * the engine that has them is used, one that lacks them shows "not available" (docs/design.md
 * §30). Shapes are the dashboard's own reading of them; unknown fields are shown as JSON.
 */
export interface DashboardGraphStep {
  readonly name: string;
  readonly next: readonly string[] | null;
}

export interface DashboardGraph {
  readonly fsm: string;
  readonly version: number;
  readonly kind: 'fsm' | 'job';
  readonly initial: string;
  readonly steps: readonly DashboardGraphStep[];
  readonly edges: readonly { readonly from: string; readonly to: string }[];
  readonly mermaid: string;
}

export interface DashboardHistoryEntry {
  readonly id: string;
  readonly at: Date;
  readonly kind: string;
  readonly step: string | null;
  readonly nextStep: string | null;
  readonly attempt: number | null;
  readonly worker: string | null;
  readonly outcome: string | null;
  readonly error: {
    readonly name: string;
    readonly message: string;
    readonly stack: string | null;
  } | null;
  readonly state: unknown;
  readonly actor: string | null;
}

export interface BulkAnswer {
  readonly matched: number;
  readonly changed: number;
}

/** Options the dashboard passes to actions; `actor` is recorded in history where the engine records it. */
interface ActorOption {
  actor?: string;
}

interface OptionalEngine {
  history(target: string, options?: { limit?: number }): Promise<DashboardHistoryEntry[]>;
  explain(target: string): Promise<unknown>;
  cancelAll(filter: InstanceFilter, options?: Record<string, unknown>): Promise<BulkAnswer>;
  retryAll(filter: InstanceFilter, options?: Record<string, unknown>): Promise<BulkAnswer>;
  fork(target: string, options: { step?: string; state?: unknown } & ActorOption): Promise<string>;
}

/** The optional member `name` of `engine`, bound, or undefined when this engine lacks it. */
export function optionalFeature<K extends keyof OptionalEngine>(
  engine: EngineService,
  name: K,
): OptionalEngine[K] | undefined {
  const member = (engine as unknown as Partial<OptionalEngine>)[name];
  return typeof member === 'function' ? (member.bind(engine) as OptionalEngine[K]) : undefined;
}
