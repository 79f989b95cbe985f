import type { Subscription } from 'rxjs';

import { loadOtelApi, type OtelApi, OtelProviders } from './otel-api';
import { OtelMetrics } from './otel-metrics';
import type {
  ProducerAttributes,
  QueueGaugeReader,
  StepTracer,
  TraceMode,
} from './otel-span-types';
import { OtelTracing } from './otel-tracing';
import type { Telemetry } from './telemetry';
import type { GenDurableEvent } from './telemetry-events';

/** The resolved `otel` option. */
export interface OtelSettings {
  readonly enabled: boolean;
  readonly traceMode: TraceMode;
  readonly internalSpans: boolean;
}

/** How often a running engine looks for a meter provider (or a tracer provider, for internal spans) registered or replaced after it started, ms. */
const RECHECK_MS = 10_000;

/**
 * One engine's OpenTelemetry (docs/design.md §31, docs/observability.md). Made only when
 * `otel.enabled` and `@opentelemetry/api` is installed ({@link Otel.create} answers undefined
 * otherwise: nothing is loaded, nothing runs). Spans come from {@link OtelTracing}, which
 * asks per operation, without allocating, whether a tracer provider is registered. Metrics
 * and internal spans read the engine's telemetry events: the subscription exists only while a
 * meter provider is registered (or, for internal spans, a tracer provider), so with none the
 * events cost what they cost without OpenTelemetry. That is checked at `start()` and every
 * {@link RECHECK_MS} after (one timer, unref'd), so a provider registered later is picked up.
 */
export class Otel {
  private readonly tracing: OtelTracing;
  private readonly providers: OtelProviders;
  private metrics: OtelMetrics | undefined;
  private subscription: Subscription | undefined;
  private timer: NodeJS.Timeout | undefined;

  /** The engine's OpenTelemetry, or undefined: disabled, or the API is not installed. */
  static create(
    settings: OtelSettings,
    telemetry: Telemetry,
    readGauges: QueueGaugeReader,
  ): Otel | undefined {
    if (!settings.enabled) return undefined;
    const api = loadOtelApi();
    return api === null ? undefined : new Otel(api, settings, telemetry, readGauges);
  }

  private constructor(
    private readonly api: OtelApi,
    private readonly settings: OtelSettings,
    private readonly telemetry: Telemetry,
    private readonly readGauges: QueueGaugeReader,
  ) {
    this.providers = new OtelProviders(api);
    this.tracing = new OtelTracing(api, this.providers, settings.traceMode);
  }

  /** The executor's step spans. */
  get stepTracer(): StepTracer {
    return this.tracing;
  }

  /**
   * Runs `run` inside a producer span (an insert or a signal send) and hands it the span's
   * W3C trace context to store, or null with no tracer provider (then no span).
   */
  produce<T>(
    operation: 'insert' | 'send',
    target: string,
    attributes: ProducerAttributes,
    run: (traceContext: string | null) => Promise<T>,
  ): Promise<T> {
    return this.tracing.produce(operation, target, attributes, run);
  }

  /** Subscribes what the registered providers need, and re-checks every {@link RECHECK_MS}. */
  start(): void {
    this.refresh();
    this.timer ??= setInterval(() => this.refresh(), RECHECK_MS);
    this.timer.unref();
  }

  /**
   * Matches the event subscription and the instruments to the providers registered now: a
   * meter provider registered (or replaced) gets instruments, one removed loses them.
   */
  refresh(): void {
    const provider = this.providers.metrics() ? this.api.metrics.getMeterProvider() : undefined;
    if (this.metrics !== undefined && this.metrics.provider !== provider) {
      this.metrics.close();
      this.metrics = undefined;
    }
    if (provider !== undefined && this.metrics === undefined) {
      this.metrics = new OtelMetrics(this.api, provider, this.readGauges);
    }
    const wanted = this.metrics !== undefined || (this.settings.internalSpans && this.tracing.on());
    if (wanted && this.subscription === undefined) {
      this.subscription = this.telemetry.events$.subscribe((e) => this.onEvent(e));
    } else if (!wanted && this.subscription !== undefined) {
      this.subscription.unsubscribe();
      this.subscription = undefined;
    }
  }

  /** Unsubscribes and stops the re-check (engine shutdown). */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.subscription?.unsubscribe();
    this.subscription = undefined;
    this.metrics?.close();
    this.metrics = undefined;
  }

  private onEvent(e: GenDurableEvent): void {
    this.metrics?.record(e);
    if (!this.settings.internalSpans) return;
    if (e.event === 'pick:stop' && (e.measurements['count'] ?? 0) > 0) {
      const queue = e.metadata['queue'] as string;
      this.tracing.internal(
        `gen_durable claim ${queue}`,
        e.at - (e.measurements['durationMs'] ?? 0),
        e.at,
        {
          'messaging.operation.type': 'receive',
          'messaging.operation.name': 'claim',
          'messaging.destination.name': queue,
          'messaging.batch.message_count': e.measurements['count'] ?? 0,
        },
      );
    } else if (e.event === 'flush:stop') {
      this.tracing.internal('gen_durable flush', e.at - (e.measurements['durationMs'] ?? 0), e.at, {
        'messaging.operation.type': 'settle',
        'messaging.operation.name': 'flush',
        'messaging.batch.message_count': e.measurements['count'] ?? 0,
      });
    }
  }
}
