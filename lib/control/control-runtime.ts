import type { SqlExecutor } from '../db/sql-executor';
import type { AwaitUntil } from '../instance/await-answer';
import type { HistoryLevel } from '../instance/history-entry';
import type { AwaitResult } from '../instance/instance-view';
import type { StateCodec } from '../fsm/state-codec';
import type { LimiterSlot } from '../limiter/limiter.interface';
import type { ResolvedOptions } from '../options/resolved-options';
import type { Telemetry } from '../telemetry/telemetry';
import type { ProducerAttributes } from '../telemetry/otel-span-types';
import type { FsmDefinition } from '../discovery/fsm-definition';
import type { RedisCounters } from '../limiter/redis-limiter-counters';
import type { ExplainContext } from './instance-explain';

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
  /**
   * The waiters of `await` (docs/design.md §9): nudged by same-node commits, and `await`'s wait
   * on the row — the engine's watcher, or the client's poll (`pollAwait`).
   */
  readonly watcher: {
    nudge(ids: Iterable<string>): void;
    await(id: string, timeoutMs: number, until: AwaitUntil): Promise<AwaitResult>;
  };
  /**
   * A stream reader's wait between two reads (docs/streams.md): the engine's watcher (woken by
   * its own appends and outcomes, and one batched probe per `await.tick`), or the client's
   * pause (`pollStreamWaiter`).
   */
  readonly streamWaiter: StreamWaiter;
  readonly limiter: { credit(slots: readonly LimiterSlot[]): Promise<void> };
  readonly wakeUps: { arm(queue: string, delayMs: number): boolean };
  /** The local timer that fires await deadlines (docs/design.md §8.5): a retry that parks again arms it. */
  readonly awaitDeadlines: { arm(queue: string, delayMs: number): boolean };
  readonly schedulers: { has(queue: string): boolean };
  /** The producer spans of inserts and signals (docs/design.md §31); undefined: none. */
  readonly otel: ControlTracing | undefined;
  /** What only an engine process knows; the client's throws `NotAvailableError` where it must. */
  readonly node: ControlNode;
  /** Waits for the after-commit effects sent so far (the client's NOTIFY pokes); the engine's resolves at once. */
  settle(): Promise<void>;
}

/** The wait of a stream reader (`StreamWatcher` is the engine's). */
export interface StreamWaiter {
  /**
   * Resolves when stream `name` of instance `id` may hold a chunk at offset `next` or the
   * instance may have ended, at the latest after a pause, or once `signal` aborts; never
   * rejects. `idle`: how many reads in a row found nothing new (the client's pause grows with it).
   */
  wait(id: string, name: string, next: number, idle: number, signal?: AbortSignal): Promise<void>;
  /** The engine is shutting down: a reader stops at its next wait (the client's is never closed). */
  readonly closed?: boolean;
}

/** The producer-span runner of {@link ControlRuntime} (`Otel` is one). */
export interface ControlTracing {
  produce<T>(
    operation: 'insert' | 'send',
    target: string,
    attributes: ProducerAttributes,
    run: (traceContext: string | null) => Promise<T>,
  ): Promise<T>;
}

/**
 * What only an engine process knows (docs/design.md §32): the `@DurableFsm` classes' definitions,
 * the limiter it runs, the node-local facts `explain` reports. A face without an engine (the
 * client) passes one whose `definitions` and `limiter` throw `NotAvailableError` and whose
 * `explainContext` is empty, so every face has the same operations and says the same thing
 * when one cannot be answered.
 */
export interface ControlNode {
  /** The registered FSM definitions (`graph`, `stepCounts`, `fork`, `registeredFsms`). */
  definitions(operation: string): FsmDefinitions;
  /** The limiter backend, and the Redis limiter's live counters when it runs one. */
  limiter(operation: string): {
    readonly backend: 'postgres' | 'redis';
    readonly redis: ((cap: number) => Promise<RedisCounters>) | undefined;
  };
  /** The node-local facts of `explain` (empty: the node-local reasons are left out). */
  readonly explainContext: ExplainContext;
}

/** The definition lookups of {@link ControlNode} (`FsmRegistry` is one). */
export interface FsmDefinitions {
  resolve(fsm: unknown): FsmDefinition;
  find(name: string, version: number): FsmDefinition | undefined;
  all(): FsmDefinition[];
}

/** What control needs of one FSM version: its steps (to check a step) and its codec. */
export interface ControlDefinition {
  readonly steps: { has(step: string): boolean };
  readonly codec: StateCodec | undefined;
  /** What its step history records (docs/design.md §28.1); absent = the default, `'failures'`. */
  readonly history?: HistoryLevel;
  /** `@DurableFsm({ onDeadline, deadlineGraceMs })` (docs/operations-control.md "Instance deadlines"); absent = none. */
  readonly deadline?: {
    readonly onDeadline: string | null;
    readonly graceMs: number | null;
  };
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
