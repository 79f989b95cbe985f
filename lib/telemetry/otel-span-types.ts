/**
 * The engine-facing shapes of its OpenTelemetry spans (docs/design.md §31), free of
 * `@opentelemetry/api` types: the runtime and the engine use these, so the published
 * declarations never name the optional peer.
 */

/** How a step span relates to its row's stored trace context (`otel.traceMode`). */
export type TraceMode = 'auto' | 'parent' | 'link';

/** What a step span reads from the row it runs (a claimed row). */
export interface StepSpanRow {
  readonly id: string;
  readonly fsm: string;
  readonly fsmVersion: number;
  readonly step: string;
  readonly attempt: number;
  readonly queue: string;
  readonly claimSeq: string;
  readonly traceContext?: string | null;
  readonly inboxTraceContexts?: readonly string[];
}

/** One step's span, as the executor drives it (lib/runtime/executor.ts). */
export interface StepSpan {
  /** The span's W3C trace context as stored (children the step schedules carry it), or null. */
  readonly traceContext: string | null;
  /** Runs the step inside the span's context (work the step starts is traced under it). */
  within<T>(run: () => Promise<T>): Promise<T>;
  /** The step threw: the span records the error's class and message and ends in error. */
  thrown(err: unknown): void;
  /** The outcome is known (`gen_durable.outcome.kind`): the span ends. */
  end(outcomeKind: string): void;
}

/** Starts step spans; undefined = no tracer provider registered now (nothing allocated). */
export interface StepTracer {
  /** `first`: the row's first step (its first claim, not an inline continuation). */
  startStep(row: StepSpanRow, first: boolean): StepSpan | undefined;
}

/** Span attributes besides the messaging ones. */
export type ProducerAttributes = Readonly<Record<string, string | number>>;

/** One queue's latest stats snapshot, as the queue gauges report it (docs/design.md §31). */
export interface QueueGaugeReading {
  readonly queue: string;
  /** The snapshot's live counts by status (`runnable`, `scheduled`, `executing`, `awaiting_*`). */
  readonly counts: Readonly<Record<string, number>>;
  /** Seconds the oldest runnable row had waited when the snapshot was taken; null = none. */
  readonly oldestRunnableAgeS: number | null;
}

/** Reads the latest stats snapshot per queue, for the queue gauges. */
export type QueueGaugeReader = () => Promise<readonly QueueGaugeReading[]>;
