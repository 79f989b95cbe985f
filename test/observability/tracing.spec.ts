import {
  type CallHandler,
  Controller,
  type ExecutionContext,
  Injectable,
  type INestApplication,
  type NestInterceptor,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { Observable } from 'rxjs';
import request from 'supertest';

import {
  awaitSignal,
  done,
  DurableFsm,
  EngineService,
  GenDurableModule,
  next,
  scheduleChildren,
  Step,
  type StepContext,
} from '../../lib';
import { FAST } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §31 with the real SDK: an HTTP request span → the insert's producer span → the
// first step as its child → later steps linked to it; a signal's send span linked by the step
// it wakes; the W3C context stored on the row and the signal.

@DurableFsm({ name: 'traced_order' })
class TracedOrderFsm {
  @Step() start(ctx: StepContext) {
    return next('wait', ctx.state);
  }
  @Step() wait(ctx: StepContext) {
    return awaitSignal('paid', 'ship', ctx.state);
  }
  @Step() ship() {
    return done({ shipped: true });
  }
}

@DurableFsm({ name: 'traced_failing' })
class TracedFailingFsm {
  @Step() start(): never {
    throw new TypeError('card declined');
  }
}

@DurableFsm({ name: 'traced_parent' })
class TracedParentFsm {
  @Step() start(ctx: StepContext) {
    return scheduleChildren('joined', [{ fsm: TracedFailingFsm }], ctx.state);
  }
  @Step() joined() {
    return done({});
  }
}

/** The request span: every handler runs inside `HTTP POST <path>` (SpanKind.SERVER). */
@Injectable()
class RequestSpanInterceptor implements NestInterceptor {
  intercept(ctx: ExecutionContext, handler: CallHandler): Observable<unknown> {
    const path = ctx.switchToHttp().getRequest<{ path: string }>().path;
    const tracer = trace.getTracer('test-http');
    return new Observable((subscriber) => {
      tracer.startActiveSpan(`HTTP POST ${path}`, { kind: SpanKind.SERVER }, (span) => {
        handler.handle().subscribe({
          next: (v) => subscriber.next(v),
          error: (e: unknown) => {
            span.end();
            subscriber.error(e);
          },
          complete: () => {
            span.end();
            subscriber.complete();
          },
        });
      });
    });
  }
}

@Controller()
@UseInterceptors(RequestSpanInterceptor)
class OrdersController {
  constructor(private readonly engine: EngineService) {}

  @Post('orders')
  async create(): Promise<{ id: string }> {
    return { id: await this.engine.insert(TracedOrderFsm, { state: { total: 10 } }) };
  }
}

describe('OpenTelemetry spans (docs/design.md §31)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let engine: EngineService;
  let open = false;
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });

  const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
  const spanNamed = (name: string): ReadableSpan => {
    const found = spans().filter((s) => s.name === name);
    expect(found).toHaveLength(1);
    return found[0]!;
  };

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
    db = await createTestDatabase();
    const dataSource = await db.dataSource();
    const moduleRef = await Test.createTestingModule({
      imports: [GenDurableModule.forRoot({ dataSource, ...FAST, otel: { internalSpans: true } })],
      controllers: [OrdersController],
      providers: [TracedOrderFsm, TracedFailingFsm, TracedParentFsm, RequestSpanInterceptor],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    open = true;
    trackResource('tracing app', () => open);
    engine = app.get(EngineService);
  });
  afterAll(async () => {
    if (open) await app.close();
    open = false;
    await db.drop();
    await provider.shutdown();
    trace.disable();
    context.disable();
  });

  it('request → insert (producer) → first step (child) → later steps linked; a signal send linked by the step it wakes', async () => {
    const res = await request(app.getHttpServer()).post('/orders');
    expect(res.status).toBe(201);
    const id = (res.body as { id: string }).id;
    await engine.await(id, { until: 'settled' });

    const requestSpan = spanNamed('HTTP POST /orders');
    const insert = spanNamed('gen_durable insert traced_order');
    const first = spanNamed('gen_durable step traced_order.start');
    const second = spanNamed('gen_durable step traced_order.wait');
    const traceId = requestSpan.spanContext().traceId;

    expect(insert.kind).toBe(SpanKind.PRODUCER);
    expect(insert.spanContext().traceId).toBe(traceId);
    expect(insert.parentSpanContext?.spanId).toBe(requestSpan.spanContext().spanId);
    expect(insert.attributes).toMatchObject({
      'messaging.system': 'gen_durable',
      'messaging.operation.type': 'create',
      'messaging.operation.name': 'insert',
      'gen_durable.fsm': 'traced_order',
    });

    // The row stores the insert span's context as a W3C traceparent.
    const { rows } = await db.pool.query<{ trace_context: string | null }>(
      `SELECT trace_context FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(rows[0]?.trace_context).toBe(
      `00-${traceId}-${insert.spanContext().spanId}-0${insert.spanContext().traceFlags}`,
    );

    // First step: a child of the insert span, in the request's trace.
    expect(first.kind).toBe(SpanKind.CONSUMER);
    expect(first.spanContext().traceId).toBe(traceId);
    expect(first.parentSpanContext?.spanId).toBe(insert.spanContext().spanId);
    expect(first.attributes).toMatchObject({
      'messaging.system': 'gen_durable',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'step',
      'messaging.destination.name': 'default',
      'gen_durable.instance.id': id,
      'gen_durable.fsm': 'traced_order',
      'gen_durable.fsm_version': 1,
      'gen_durable.step': 'start',
      'gen_durable.attempt': 0,
      'gen_durable.claim_seq': '1',
      'gen_durable.outcome.kind': 'next',
    });
    expect(first.links).toEqual([]);

    // A later step: its own trace, linked to the insert span.
    expect(second.parentSpanContext).toBeUndefined();
    expect(second.spanContext().traceId).not.toBe(traceId);
    expect(second.links.map((l) => l.context.spanId)).toEqual([insert.spanContext().spanId]);
    expect(second.links[0]?.context.traceId).toBe(traceId);
    expect(second.attributes['gen_durable.outcome.kind']).toBe('await');

    // A signal sent inside a webhook's span: the send span is its child, stored on the signal,
    // and linked by the step it woke.
    const webhook = trace.getTracer('test-http');
    await webhook.startActiveSpan('HTTP POST /webhooks/paid', async (span) => {
      await engine.signal({ id }, 'paid', { amount: 10 });
      span.end();
    });
    expect(await engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { shipped: true },
    });
    const hook = spanNamed('HTTP POST /webhooks/paid');
    const send = spanNamed('gen_durable send paid');
    expect(send.kind).toBe(SpanKind.PRODUCER);
    expect(send.parentSpanContext?.spanId).toBe(hook.spanContext().spanId);
    expect(send.attributes).toMatchObject({
      'messaging.operation.type': 'send',
      'gen_durable.signal': 'paid',
    });
    const stored = await db.pool.query<{ trace_context: string | null }>(
      `SELECT trace_context FROM gen_durable_signals WHERE target_id = $1`,
      [id],
    );
    expect(stored.rows[0]?.trace_context).toBe(
      `00-${hook.spanContext().traceId}-${send.spanContext().spanId}-01`,
    );
    const ship = spanNamed('gen_durable step traced_order.ship');
    expect(ship.links.map((l) => [l.context.spanId, l.attributes?.['gen_durable.link']])).toEqual([
      [insert.spanContext().spanId, 'insert'],
      [send.spanContext().spanId, 'signal'],
    ]);
    expect(ship.attributes['gen_durable.outcome.kind']).toBe('done');
  });

  it('a throwing step ends its span in error with the error class and message', async () => {
    const id = await engine.insert(TracedFailingFsm);
    expect(await engine.await(id, { until: 'terminal' })).toMatchObject({ kind: 'failed' });
    const span = spanNamed('gen_durable step traced_failing.start');
    expect(span.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: 'TypeError: card declined',
    });
    expect(span.events.map((e) => e.name)).toEqual(['exception']);
    expect(span.attributes['gen_durable.outcome.kind']).toBe('stop');
  });

  it('insertAll: one producer span, its context stored on every row', async () => {
    exporter.reset();
    const ids = await engine.insertAll(TracedFailingFsm, [{}, {}]);
    const insert = spanNamed('gen_durable insert traced_failing');
    expect(insert.attributes['messaging.batch.message_count']).toBe(2);
    const { rows } = await db.pool.query<{ trace_context: string | null }>(
      `SELECT trace_context FROM gen_durable WHERE id = ANY ($1::bigint[])`,
      [ids],
    );
    expect(rows.map((r) => r.trace_context?.split('-')[2])).toEqual([
      insert.spanContext().spanId,
      insert.spanContext().spanId,
    ]);
    for (const id of ids) await engine.await(id, { until: 'terminal' });
  });

  it('otel.internalSpans: an internal span per claim that took rows and per flush', async () => {
    exporter.reset();
    // insertAll: a claim finds the row (a lone insert may be written claimed, with no claim
    // span of its own: docs/design.md §5.5.1).
    const [id] = await engine.insertAll(TracedFailingFsm, [{}]);
    await engine.await(id!, { until: 'terminal' });
    const claims = spans().filter((s) => s.name === 'gen_durable claim default');
    const flushes = spans().filter((s) => s.name === 'gen_durable flush');
    expect(claims.length).toBeGreaterThanOrEqual(1);
    expect(flushes.length).toBeGreaterThanOrEqual(1);
    expect(claims[0]!.kind).toBe(SpanKind.INTERNAL);
    expect(claims[0]!.parentSpanContext).toBeUndefined();
    expect(claims[0]!.attributes).toMatchObject({
      'messaging.system': 'gen_durable',
      'messaging.operation.name': 'claim',
      'messaging.destination.name': 'default',
      'messaging.batch.message_count': 1,
    });
    expect(flushes[0]!.attributes).toMatchObject({
      'messaging.operation.name': 'flush',
      'messaging.batch.message_count': 1,
    });
  });

  it('children a step schedules carry its span: their first step is its child', async () => {
    exporter.reset();
    const id = await engine.insert(TracedParentFsm);
    expect(await engine.await(id, { until: 'terminal' })).toMatchObject({ kind: 'done' });
    const parentStep = spanNamed('gen_durable step traced_parent.start');
    const childStep = spanNamed('gen_durable step traced_failing.start');
    expect(childStep.spanContext().traceId).toBe(parentStep.spanContext().traceId);
    expect(childStep.parentSpanContext?.spanId).toBe(parentStep.spanContext().spanId);
    expect(parentStep.attributes['gen_durable.outcome.kind']).toBe('scheduleChildren');
  });
});
