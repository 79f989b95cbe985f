import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

import { awaitSignal, done, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §31 "nothing happens without a registered provider": with @opentelemetry/api
// installed and no tracer provider, no tracer is asked for and no trace context is stored; a
// provider registered later is used by the next insert; `otel.enabled: false` stores and
// traces nothing even with one.

@DurableFsm({ name: 'untraced' })
class UntracedFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('go', 'finish', ctx.state);
  }
  @Step() finish() {
    return done({});
  }
}

async function contexts(db: TestDatabase, id: string): Promise<(string | null)[]> {
  const row = await db.pool.query<{ trace_context: string | null }>(
    `SELECT trace_context FROM gen_durable WHERE id = $1`,
    [id],
  );
  const signals = await db.pool.query<{ trace_context: string | null }>(
    `SELECT trace_context FROM gen_durable_signals WHERE target_id = $1 ORDER BY id`,
    [id],
  );
  return [...row.rows, ...signals.rows].map((r) => r.trace_context);
}

async function runOne(t: Harness): Promise<string> {
  const id = await t.engine.insert(UntracedFsm);
  await eventually(async () => (await t.engine.get({ id }))?.status === 'awaiting_signal');
  await t.engine.signal({ id }, 'go');
  await t.engine.await(id, { until: 'terminal' });
  return id;
}

describe('OpenTelemetry without a provider (docs/design.md §31)', () => {
  let db: TestDatabase;
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
    await provider.shutdown();
    trace.disable();
    context.disable();
  });

  it('no provider: no tracer asked, no context stored; one registered later is used at once', async () => {
    const t = await bootEngine(db, [UntracedFsm]);
    try {
      expect(t.engine.runtime.otel).toBeDefined();
      const getTracer = jest.spyOn(trace, 'getTracer');
      const id = await runOne(t);
      expect(getTracer).not.toHaveBeenCalled();
      getTracer.mockRestore();
      expect(await contexts(db, id)).toEqual([null, null]);

      trace.setGlobalTracerProvider(provider);
      const later = await runOne(t);
      const stored = await contexts(db, later);
      expect(stored).toEqual([expect.stringMatching(/^00-/), expect.stringMatching(/^00-/)]);
      expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(
        expect.arrayContaining(['gen_durable insert untraced', 'gen_durable send go']),
      );
    } finally {
      await t.close();
    }
  });

  it('otel.enabled false: nothing traced or stored even with a provider', async () => {
    trace.setGlobalTracerProvider(provider); // no-op when already registered
    exporter.reset();
    const t = await bootEngine(db, [UntracedFsm], { otel: { enabled: false } });
    try {
      expect(t.engine.runtime.otel).toBeUndefined();
      const id = await runOne(t);
      expect(await contexts(db, id)).toEqual([null, null]);
      expect(exporter.getFinishedSpans()).toEqual([]);
    } finally {
      await t.close();
    }
  });
});
