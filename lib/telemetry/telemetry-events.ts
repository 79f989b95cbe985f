import type { EntryKind } from '../fsm/outcome-kinds';
import type { StepAbortCause } from '../fsm/step-abort';

type Count = { count: number };
type None = Record<string, never>;
type Row = { id: string; fsm: string; step: string };

/**
 * Every telemetry event with its measurements and metadata (docs/design.md §20), documented in
 * docs/telemetry.md. Published on `diagnostics_channel` as `gen_durable:<event>` (only when
 * subscribed) and on `engine.events$`. `Telemetry.emit` is typed by this map, so an event is
 * emitted with exactly the fields its row of the docs table names. To add an event, add it
 * here and to docs/telemetry.md.
 */
export type TelemetryPayloads = {
  'step:stop': { measurements: { durationMs: number }; metadata: Row & { kind: EntryKind } };
  'step:abort': { measurements: Count; metadata: Row & { cause: StepAbortCause } };
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
  'scheduler:resumed': { measurements: Count; metadata: { queue: string; worker: string } };
  'queue:paused': { measurements: Count; metadata: { queue: string; created: boolean } };
  'queue:resumed': { measurements: Count; metadata: { queue: string; wasPaused: boolean } };
  'scheduler:reclaimed': { measurements: Count; metadata: { queue: string } };
  'scheduler:solo': {
    measurements: { waitedMs: number };
    metadata: Row & { queue: string; result: 'started' | 'abandoned' };
  };
  'scheduler:stall': { measurements: { durationMs: number }; metadata: None };
  'concurrency:contended': { measurements: Count; metadata: { queue: string } };
  'concurrency:throttled': {
    measurements: { wanted: number; admitted: number };
    metadata: { key: string; queue: string };
  };
  'rate_limit:throttled': {
    measurements: { wanted: number; granted: number };
    metadata: { key: string; queue: string };
  };
  'rate_limit:contended': { measurements: Count; metadata: { queue: string } };
  'rate_limit:unknown': {
    measurements: Count;
    metadata: { key: string; name: string; fsm: string; step: string };
  };
  'outcome:stale': { measurements: Count; metadata: Row & { kind: EntryKind } };
  'run_ahead:continue': {
    measurements: Count;
    metadata: { id: string; fsm: string; from: string; to: string };
  };
  'run_ahead:yield': { measurements: Count; metadata: Row & { to: string; reason: string } };
  'reaper:reaped': { measurements: Count; metadata: None };
  'reaper:suspect': { measurements: Count; metadata: Row & { reaps: number } };
  'reaper:cancelled': { measurements: Count; metadata: None };
  'reaper:poisoned': { measurements: Count; metadata: Row & { reaps: number } };
  'await:timeout': { measurements: Count; metadata: None };
  'gc:swept': { measurements: { count: number; buckets: number; gates: number }; metadata: None };
  'stats:snapshot': { measurements: { queues: number }; metadata: None };
  'flush:stop': { measurements: { count: number; durationMs: number }; metadata: None };
  'flush:error': { measurements: Count; metadata: { error: string } };
  'insert_batch:error': {
    measurements: Count;
    metadata: { error: string; lane: 'async' | 'durable' };
  };
  'executor:crash': { measurements: Count; metadata: Row & { error: string } };
  'instance:cancelled': {
    measurements: { cancelled: number; requested: number; alreadyTerminal: number };
    metadata: {
      id: string;
      mode: 'cooperative' | 'fence';
      children: 'cascade' | 'detach' | 'keep';
    };
  };
  'instance:retried': { measurements: Count; metadata: Row };
  'instance:forked': { measurements: Count; metadata: Row & { from: string } };
  'step:progress': { measurements: Count; metadata: Row };
  'cron:fired': { measurements: Count; metadata: { name: string; fsm: string; at: string } };
  'cron:missed': {
    measurements: Count;
    metadata: { name: string; policy: 'skip' | 'once' | 'all' };
  };
  'cron:skipped': {
    measurements: Count;
    metadata: { name: string; reason: 'overlap' | 'duplicate' };
  };
  'boot:warning': { measurements: Count; metadata: { warning: string } };
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
