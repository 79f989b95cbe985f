import { metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  MeterProvider,
  MetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';

import { done, DurableFsm, next, Step, type StepContext } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §31 metrics with the real SDK: the meter `gen_durable`'s instruments, their
// units and attributes, fed by the engine's telemetry events; the queue gauges read from the
// newest gen_durable_stats row per queue.

/** A reader the test collects from on demand, in delta temporality (each collection alone). */
class CollectingReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

@DurableFsm({ name: 'metered' })
class MeteredFsm {
  @Step() start(ctx: StepContext) {
    return next('finish', ctx.state);
  }
  @Step() finish() {
    return done({});
  }
}

describe('OpenTelemetry metrics (docs/design.md §31)', () => {
  let db: TestDatabase;
  let t: Harness;
  const reader = new CollectingReader({
    aggregationTemporalitySelector: () => AggregationTemporality.DELTA,
  });
  const provider = new MeterProvider({ readers: [reader] });

  const collect = async (): Promise<Map<string, MetricData>> => {
    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).toEqual([]);
    const byName = new Map<string, MetricData>();
    for (const scope of resourceMetrics.scopeMetrics) {
      if (scope.scope.name !== 'gen_durable') continue;
      for (const m of scope.metrics) byName.set(m.descriptor.name, m);
    }
    return byName;
  };

  beforeAll(async () => {
    metrics.setGlobalMeterProvider(provider);
    db = await createTestDatabase();
    t = await bootEngine(db, [MeteredFsm]);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
    await provider.shutdown();
    metrics.disable();
  });

  it('steps, claims, flushes and reaps are measured with their units and attributes', async () => {
    const ids = await t.engine.insertAll(MeteredFsm, [{}, {}, {}]);
    for (const id of ids) await t.engine.await(id, { until: 'terminal' });
    // A lease that ran out: the reaper returns the row (and then it runs to its end).
    await db.pool.query(
      `UPDATE gen_durable SET status = 'executing', locked_by = 'gone', lease_expires_at = now() - interval '1 minute'
        WHERE id = $1`,
      [await t.engine.insert(MeteredFsm, { scheduleIn: 3_600_000 })],
    );
    await t.waitFor('reaper:reaped');

    const byName = await collect();
    const descriptor = (name: string) => {
      const m = byName.get(name);
      expect(m).toBeDefined();
      return { unit: m!.descriptor.unit, type: m!.dataPointType };
    };
    expect(descriptor('gen_durable.step.duration').unit).toBe('ms');
    expect(descriptor('gen_durable.step.outcomes').unit).toBe('{outcome}');
    expect(descriptor('gen_durable.claim.batch_size').unit).toBe('{instance}');
    expect(descriptor('gen_durable.flush.size').unit).toBe('{outcome}');
    expect(descriptor('gen_durable.flush.duration').unit).toBe('ms');
    expect(descriptor('gen_durable.reaper.reaped').unit).toBe('{instance}');

    const points = (name: string) =>
      byName.get(name)!.dataPoints as DataPoint<number | Histogram>[];
    const outcomes = points('gen_durable.step.outcomes').map((p) => [p.attributes, p.value]);
    expect(outcomes).toEqual(
      expect.arrayContaining([
        [
          {
            'gen_durable.fsm': 'metered',
            'gen_durable.step': 'start',
            'gen_durable.outcome.kind': 'next',
          },
          3,
        ],
        [
          {
            'gen_durable.fsm': 'metered',
            'gen_durable.step': 'finish',
            'gen_durable.outcome.kind': 'done',
          },
          3,
        ],
      ]),
    );
    const durations = points('gen_durable.step.duration');
    const finish = durations.find((p) => p.attributes['gen_durable.step'] === 'finish');
    expect((finish?.value as Histogram).count).toBe(3);
    const claims = points('gen_durable.claim.batch_size');
    expect(claims.map((p) => p.attributes)).toEqual([{ 'messaging.destination.name': 'default' }]);
    expect((claims[0]!.value as Histogram).sum).toBeGreaterThanOrEqual(3);
    const flushed = points('gen_durable.flush.size')[0]!.value as Histogram;
    expect(flushed.sum).toBeGreaterThanOrEqual(6);
    expect((points('gen_durable.flush.duration')[0]!.value as Histogram).count).toBe(flushed.count);
    expect(points('gen_durable.reaper.reaped')[0]!.value).toBeGreaterThanOrEqual(1);
  });

  it('queue gauges report the newest stats snapshot of each queue, nothing without one', async () => {
    // The newest row of queue `gauged` (an hour ahead, so no snapshot writer's minute is newer).
    await db.pool.query(
      `INSERT INTO gen_durable_stats (at, queue, counts, oldest_runnable_at)
       VALUES (date_trunc('minute', now()) + interval '59 minutes', 'gauged',
               '{"runnable": 4, "scheduled": 1, "executing": 2, "done": 50, "capped": []}',
               date_trunc('minute', now()) + interval '58 minutes 30 seconds'),
              (date_trunc('minute', now()) + interval '58 minutes', 'gauged',
               '{"runnable": 99}', NULL)`,
    );
    const byName = await collect();
    const depth = byName.get('gen_durable.queue.depth')!;
    expect(depth.descriptor.unit).toBe('{instance}');
    const gauged = depth.dataPoints
      .filter((p) => p.attributes['messaging.destination.name'] === 'gauged')
      .map((p) => [p.attributes['gen_durable.status'], p.value]);
    expect(gauged).toEqual(
      expect.arrayContaining([
        ['runnable', 4],
        ['scheduled', 1],
        ['executing', 2],
      ]),
    );
    expect(gauged).toHaveLength(3);
    const age = byName.get('gen_durable.queue.oldest_runnable_age')!;
    expect(age.descriptor.unit).toBe('s');
    expect(
      age.dataPoints
        .filter((p) => p.attributes['messaging.destination.name'] === 'gauged')
        .map((p) => p.value),
    ).toEqual([30]);

    await db.pool.query(`DELETE FROM gen_durable_stats WHERE queue = 'gauged'`);
    const after = await collect();
    const left = after.get('gen_durable.queue.depth')?.dataPoints ?? [];
    expect(left.filter((p) => p.attributes['messaging.destination.name'] === 'gauged')).toEqual([]);
  });
});
