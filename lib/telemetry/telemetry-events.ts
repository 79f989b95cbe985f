import type { EntryKind } from '../fsm/outcome-kinds';
import type { StepAbortCause } from '../fsm/step-abort';

/** The measurements of an event that counts one thing. */
export type TelemetryCount = { count: number };
/** The metadata of an event that has none. */
export type TelemetryNone = Record<string, never>;
/** The metadata naming one instance and its step. */
export type TelemetryRow = { id: string; fsm: string; step: string };

/**
 * Every telemetry event with its measurements and metadata (docs/design.md §20), documented in
 * docs/telemetry.md. Published on `diagnostics_channel` as `gen_durable:<event>` (only when
 * subscribed) and on `engine.events$`. `Telemetry.emit` is typed by this map, so an event is
 * emitted with exactly the fields its row of the docs table names. To add an event, add it
 * here and to docs/telemetry.md.
 */
export type TelemetryPayloads = {
  'step:stop': {
    measurements: { durationMs: number };
    metadata: TelemetryRow & { kind: EntryKind };
  };
  'step:abort': {
    measurements: TelemetryCount;
    metadata: TelemetryRow & { cause: StepAbortCause };
  };
  'pick:stop': {
    measurements: { count: number; demand: number; durationMs: number };
    metadata: { queue: string; worker: string };
  };
  'scheduler:saturation': {
    measurements: {
      inFlight: number;
      awaitingCommit: number;
      buffer: number;
      concurrency: number;
      prefetch: number;
    };
    metadata: { queue: string };
  };
  'scheduler:drain': {
    measurements: { released: number; inFlight: number };
    metadata: { queue: string };
  };
  'scheduler:shed': {
    measurements: { released: number };
    metadata: { queue: string; worker: string };
  };
  'scheduler:paused': {
    measurements: { released: number };
    metadata: { queue: string; worker: string };
  };
  'scheduler:resumed': {
    measurements: TelemetryCount;
    metadata: { queue: string; worker: string };
  };
  'queue:paused': { measurements: TelemetryCount; metadata: { queue: string; created: boolean } };
  'queue:resumed': {
    measurements: TelemetryCount;
    metadata: { queue: string; wasPaused: boolean };
  };
  'scheduler:reclaimed': { measurements: TelemetryCount; metadata: { queue: string } };
  'scheduler:solo': {
    measurements: { waitedMs: number };
    metadata: TelemetryRow & { queue: string; result: 'started' | 'abandoned' };
  };
  'scheduler:stall': { measurements: { durationMs: number }; metadata: TelemetryNone };
  'concurrency:contended': { measurements: TelemetryCount; metadata: { queue: string } };
  'concurrency:throttled': {
    measurements: { wanted: number; admitted: number };
    metadata: { key: string; queue: string };
  };
  'rate_limit:throttled': {
    measurements: { wanted: number; granted: number };
    metadata: { key: string; queue: string };
  };
  'rate_limit:contended': { measurements: TelemetryCount; metadata: { queue: string } };
  /** A committed `throttle` closed a limit (docs/design.md §16.5), once per limit it closed. */
  'limit:throttled': {
    measurements: { retryAfterMs: number };
    metadata: TelemetryRow & { kind: 'rate' | 'conc'; key: string; queue: string };
  };
  'rate_limit:unknown': {
    measurements: TelemetryCount;
    metadata: { key: string; name: string; fsm: string; step: string };
  };
  'outcome:stale': { measurements: TelemetryCount; metadata: TelemetryRow & { kind: EntryKind } };
  'run_ahead:continue': {
    measurements: TelemetryCount;
    metadata: { id: string; fsm: string; from: string; to: string };
  };
  'run_ahead:yield': {
    measurements: TelemetryCount;
    metadata: TelemetryRow & { to: string; reason: string };
  };
  'reaper:reaped': { measurements: TelemetryCount; metadata: TelemetryNone };
  'reaper:suspect': { measurements: TelemetryCount; metadata: TelemetryRow & { reaps: number } };
  'reaper:cancelled': { measurements: TelemetryCount; metadata: TelemetryNone };
  'reaper:poisoned': { measurements: TelemetryCount; metadata: TelemetryRow & { reaps: number } };
  'await:timeout': { measurements: TelemetryCount; metadata: TelemetryNone };
  'gc:swept': {
    measurements: { count: number; heads: number; buckets: number; gates: number };
    metadata: TelemetryNone;
  };
  'gc:archived': {
    measurements: {
      instances: number;
      history: number;
      chunks: number;
      created: number;
      dropped: number;
    };
    metadata: TelemetryNone;
  };
  'stats:snapshot': {
    measurements: { queues: number; durationMs: number };
    metadata: TelemetryNone;
  };
  'priority:aged': { measurements: TelemetryCount; metadata: { queues: readonly string[] } };
  'flush:stop': { measurements: { count: number; durationMs: number }; metadata: TelemetryNone };
  'flush:error': { measurements: TelemetryCount; metadata: { error: string } };
  'insert_batch:error': {
    measurements: TelemetryCount;
    metadata: { error: string; lane: 'async' | 'durable' };
  };
  'stream:error': { measurements: TelemetryCount; metadata: { error: string } };
  'stream:refused': { measurements: TelemetryCount; metadata: TelemetryRow & { name: string } };
  'executor:crash': { measurements: TelemetryCount; metadata: TelemetryRow & { error: string } };
  'instance:cancelled': {
    measurements: { cancelled: number; requested: number; alreadyTerminal: number };
    metadata: {
      id: string;
      mode: 'cooperative' | 'fence';
      children: 'cascade' | 'detach' | 'keep';
    };
  };
  'instance:deadline': {
    measurements: { cancelled: number; requested: number; routed: number };
    metadata: TelemetryNone;
  };
  'instance:retried': { measurements: TelemetryCount; metadata: TelemetryRow };
  'instance:forked': { measurements: TelemetryCount; metadata: TelemetryRow & { from: string } };
  'instance:purged': {
    measurements: TelemetryCount;
    metadata: {
      id: string;
      fsm: string;
      status: 'done' | 'failed' | 'cancelled';
      actor: string | null;
    };
  };
  'step:progress': { measurements: TelemetryCount; metadata: TelemetryRow };
  'cron:fired': {
    measurements: TelemetryCount;
    metadata: { name: string; fsm: string; at: string };
  };
  'cron:missed': {
    measurements: TelemetryCount;
    metadata: { name: string; policy: 'skip' | 'once' | 'all' };
  };
  'cron:skipped': {
    measurements: TelemetryCount;
    metadata: { name: string; reason: 'overlap' | 'duplicate' };
  };
  'boot:warning': { measurements: TelemetryCount; metadata: { warning: string } };
};

export type GenDurableEventName = keyof TelemetryPayloads;

/** One published event, as `events$` and diagnostics_channel subscribers receive it. */
export interface GenDurableEvent {
  readonly event: GenDurableEventName;
  /** Engine name. */
  readonly engine: string;
  /** Epoch ms. */
  readonly at: number;
  readonly measurements: Readonly<Record<string, number>>;
  readonly metadata: Readonly<Record<string, unknown>>;
}

/** One event with the exact fields of its name (narrow a `GenDurableEvent` by `event` to use it). */
export type TypedGenDurableEvent<E extends GenDurableEventName> = GenDurableEvent & {
  readonly event: E;
  readonly measurements: Readonly<TelemetryPayloads[E]['measurements']>;
  readonly metadata: Readonly<TelemetryPayloads[E]['metadata']>;
};
