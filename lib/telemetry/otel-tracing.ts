import type { Context, Link, Span, SpanContext } from '@opentelemetry/api';

import type { OtelApi, OtelProviders } from './otel-api';
import { METER_NAME } from './otel-api';
import type {
  ProducerAttributes,
  StepSpan,
  StepSpanRow,
  StepTracer,
  TraceMode,
} from './otel-span-types';
import { formatTraceContext, parseTraceContext } from './otel-trace-context';

/**
 * The engine's spans (docs/design.md §31, docs/observability.md): producer spans around inserts
 * and signal sends, whose context is stored with the row or the signal, consumer spans around
 * steps (child of the stored context for the first step and linked after, as `traceMode`
 * says; signals in the step's inbox linked), internal spans for claims and flushes. Every entry
 * point first asks whether a tracer provider is registered (allocation-free) and does nothing
 * more when none is. The tracer is asked from the API each time, so a provider registered or
 * replaced later is used at once.
 */
export class OtelTracing implements StepTracer {
  constructor(
    private readonly api: OtelApi,
    private readonly providers: OtelProviders,
    private readonly mode: TraceMode,
  ) {}

  /** True while a tracer provider is registered. */
  on(): boolean {
    return this.providers.tracing();
  }

  /**
   * Runs `run` inside a producer span `gen_durable <operation> <target>` (child of the caller's
   * active context) and hands it the span's stored text, or null when no provider is
   * registered (then no span). A throw ends the span in error and is rethrown.
   */
  async produce<T>(
    operation: 'insert' | 'send',
    target: string,
    attributes: ProducerAttributes,
    run: (traceContext: string | null) => Promise<T>,
  ): Promise<T> {
    if (!this.providers.tracing()) return run(null);
    const api = this.api;
    const parent = api.context.active();
    const span = api.trace.getTracer(METER_NAME).startSpan(
      `gen_durable ${operation} ${target}`,
      {
        kind: api.SpanKind.PRODUCER,
        attributes: {
          'messaging.system': 'gen_durable',
          'messaging.operation.type': operation === 'insert' ? 'create' : 'send',
          'messaging.operation.name': operation,
          ...attributes,
        },
      },
      parent,
    );
    const traceContext = textOf(span.spanContext());
    try {
      return await api.context.with(api.trace.setSpan(parent, span), () => run(traceContext));
    } catch (err) {
      failSpan(api, span, err);
      throw err;
    } finally {
      span.end();
    }
  }

  startStep(row: StepSpanRow, first: boolean): StepSpan | undefined {
    if (!this.providers.tracing()) return undefined;
    const api = this.api;
    const stored = row.traceContext ? this.spanContextOf(row.traceContext) : undefined;
    let parent: Context = api.ROOT_CONTEXT;
    const links: Link[] = [];
    if (stored) {
      if (this.mode === 'parent' || (this.mode === 'auto' && first)) {
        parent = api.trace.setSpanContext(api.ROOT_CONTEXT, stored);
      } else {
        links.push({ context: stored, attributes: { 'gen_durable.link': 'insert' } });
      }
    }
    for (const text of row.inboxTraceContexts ?? []) {
      const signal = this.spanContextOf(text);
      if (signal) links.push({ context: signal, attributes: { 'gen_durable.link': 'signal' } });
    }
    const span = api.trace.getTracer(METER_NAME).startSpan(
      `gen_durable step ${row.fsm}.${row.step}`,
      {
        kind: api.SpanKind.CONSUMER,
        links,
        attributes: {
          'messaging.system': 'gen_durable',
          'messaging.operation.type': 'process',
          'messaging.operation.name': 'step',
          'messaging.destination.name': row.queue,
          'gen_durable.instance.id': row.id,
          'gen_durable.fsm': row.fsm,
          'gen_durable.fsm_version': row.fsmVersion,
          'gen_durable.step': row.step,
          'gen_durable.attempt': row.attempt,
          'gen_durable.claim_seq': row.claimSeq,
        },
      },
      parent,
    );
    return new OtelStepSpan(api, span, api.trace.setSpan(api.ROOT_CONTEXT, span));
  }

  /**
   * An internal span `name` that ran from `startMs` to `endMs` (epoch ms), a root span: the
   * claims and flushes of `otel.internalSpans`, drawn from their telemetry events.
   */
  internal(name: string, startMs: number, endMs: number, attributes: ProducerAttributes): void {
    if (!this.providers.tracing()) return;
    const api = this.api;
    api.trace
      .getTracer(METER_NAME)
      .startSpan(
        name,
        {
          kind: api.SpanKind.INTERNAL,
          startTime: startMs,
          attributes: { 'messaging.system': 'gen_durable', ...attributes },
        },
        api.ROOT_CONTEXT,
      )
      .end(endMs);
  }

  /** A stored text as a remote span context, or undefined when it is not a valid one. */
  private spanContextOf(text: string): SpanContext | undefined {
    const parsed = parseTraceContext(text);
    if (parsed === null) return undefined;
    return {
      traceId: parsed.traceId,
      spanId: parsed.spanId,
      traceFlags: parsed.traceFlags,
      isRemote: true,
      ...(parsed.traceState === undefined
        ? {}
        : { traceState: this.api.createTraceState(parsed.traceState) }),
    };
  }
}

class OtelStepSpan implements StepSpan {
  readonly traceContext: string | null;

  constructor(
    private readonly api: OtelApi,
    private readonly span: Span,
    private readonly context: Context,
  ) {
    this.traceContext = textOf(span.spanContext());
  }

  within<T>(run: () => Promise<T>): Promise<T> {
    return this.api.context.with(this.context, run);
  }

  thrown(err: unknown): void {
    failSpan(this.api, this.span, err);
  }

  end(outcomeKind: string): void {
    this.span.setAttribute('gen_durable.outcome.kind', outcomeKind);
    this.span.end();
  }
}

/** The stored text of a span's context, or null when it is not valid. */
function textOf(context: SpanContext): string | null {
  return formatTraceContext(
    context.traceId,
    context.spanId,
    context.traceFlags,
    context.traceState?.serialize(),
  );
}

/** Error status with the error's class and message, and the exception event (no state). */
function failSpan(api: OtelApi, span: Span, err: unknown): void {
  if (err instanceof Error) {
    span.recordException(err);
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: `${err.name}: ${err.message}` });
  } else {
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: typeof err });
  }
}
