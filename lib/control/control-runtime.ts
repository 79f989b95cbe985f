import type { SqlExecutor } from '../db/sql-executor';
import type { HistoryLevel } from '../instance/history-entry';
import type { StateCodec } from '../fsm/state-codec';
import type { LimiterSlot } from '../limiter/limiter.interface';
import type { ResolvedOptions } from '../options/resolved-options';
import type { Telemetry } from '../telemetry/telemetry';

/**
 * What the instance-control functions (cancel, retry, signal, insert, queue pause) need from
 * an engine: the statement runner, a few options, the FSM lookups they check against, and the
 * after-commit effects (pokes, waiter nudges, gate-slot credits, local wake-ups, telemetry).
 * `EngineRuntime` is one (structurally); `GenDurableClient` builds another over its own pool,
 * where the effects that only a running engine has are no-ops and a poke is a NOTIFY on the
 * engine's channel (docs/design.md §32). One set of functions serves both, so the client runs
 * the same statements with the same checks.
 */
export interface ControlRuntime {
  readonly sql: SqlExecutor;
  /** Where lag-tolerant reads (`queueStatus`) run: a read replica's executor; default `sql`. */
  readonly reads?: SqlExecutor;
  readonly options: Pick<
    ResolvedOptions,
    'maxStateBytes' | 'concurrencyLimits' | 'queues' | 'rateLimits'
  >;
  readonly registry: ControlRegistry;
  readonly telemetry: Pick<Telemetry, 'emit'>;
  readonly pokes: { poke(queues: Iterable<string>): void };
  readonly watcher: { nudge(ids: Iterable<string>): void };
  readonly limiter: { credit(slots: readonly LimiterSlot[]): Promise<void> };
  readonly wakeUps: { arm(queue: string, delayMs: number): boolean };
  readonly schedulers: { has(queue: string): boolean };
}

/** What control needs of one FSM version: its steps (to check a step) and its codec. */
export interface ControlDefinition {
  readonly steps: { has(step: string): boolean };
  readonly codec: StateCodec | undefined;
  /** What its step history records (docs/design.md §28.1); absent = the default, `'failures'`. */
  readonly history?: HistoryLevel;
}

/** The FSM lookups of {@link ControlRuntime} (`FsmRegistry` is one). */
export interface ControlRegistry {
  /** The definition a row runs on, or undefined when this process does not know it. */
  find(name: string, version: number): ControlDefinition | undefined;
  /** The known definitions' queues (a queue is `known` when one declares it). */
  all(): readonly {
    readonly queue: string;
    readonly name?: string;
    readonly history?: HistoryLevel;
  }[];
  /** FSM names whose `cancelOn` lists `signal`, or null (docs/design.md §27.2). */
  cancellingFsms(signal: string): string[] | null;
}
