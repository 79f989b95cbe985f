import type { Counter, Histogram, MeterProvider, ObservableGauge } from '@opentelemetry/api';

import type { OtelApi } from './otel-api';
import type { QueueGaugeReader, QueueGaugeReading } from './otel-span-types';
import { METER_NAME } from './otel-api';
import type { GenDurableEvent } from './telemetry-events';

const SIZE_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];

/**
 * The engine's metrics through the meter `gen_durable` (docs/design.md §31; every name, unit
 * and attribute in docs/observability.md), fed by the engine's own telemetry events (the
 * events the engine emits anyway: `step:stop`, `pick:stop`, `flush:stop`, `outcome:stale`,
 * `reaper:reaped`, `reaper:poisoned`), plus two observable gauges read from the newest
 * `gen_durable_stats` snapshot at each collection. Made for one meter provider: the owner
 * builds a new one when the registered provider changes.
 */
export class OtelMetrics {
  private readonly stepDuration: Histogram;
  private readonly outcomes: Counter;
  private readonly claimBatch: Histogram;
  private readonly flushSize: Histogram;
  private readonly flushDuration: Histogram;
  private readonly stale: Counter;
  private readonly reaped: Counter;
  private readonly poisoned: Counter;
  private readonly depth: ObservableGauge;
  private readonly oldestAge: ObservableGauge;
  private readonly observe: Parameters<
    ReturnType<MeterProvider['getMeter']>['addBatchObservableCallback']
  >[0];

  constructor(
    api: OtelApi,
    /** The provider the instruments were made from. */
    readonly provider: MeterProvider,
    private readonly readGauges: QueueGaugeReader,
  ) {
    const meter = provider.getMeter(METER_NAME);
    this.stepDuration = meter.createHistogram('gen_durable.step.duration', {
      unit: 'ms',
      description: 'Time a step took, from its call to its validated outcome',
    });
    this.outcomes = meter.createCounter('gen_durable.step.outcomes', {
      unit: '{outcome}',
      description: 'Step outcomes by kind',
    });
    this.claimBatch = meter.createHistogram('gen_durable.claim.batch_size', {
      unit: '{instance}',
      description: 'Rows one claim took (claims that took none are not recorded)',
      advice: { explicitBucketBoundaries: SIZE_BUCKETS },
    });
    this.flushSize = meter.createHistogram('gen_durable.flush.size', {
      unit: '{outcome}',
      description: 'Outcomes one group-commit flush wrote',
      advice: { explicitBucketBoundaries: SIZE_BUCKETS },
    });
    this.flushDuration = meter.createHistogram('gen_durable.flush.duration', {
      unit: 'ms',
      description: 'Time one group-commit flush took, retries included',
    });
    this.stale = meter.createCounter('gen_durable.outcomes.stale', {
      unit: '{outcome}',
      description: 'Outcomes refused because their claim was no longer held',
    });
    this.reaped = meter.createCounter('gen_durable.reaper.reaped', {
      unit: '{instance}',
      description: 'Expired leases the reaper returned to runnable',
    });
    this.poisoned = meter.createCounter('gen_durable.reaper.poisoned', {
      unit: '{instance}',
      description: 'Rows failed as poison pills',
    });
    this.depth = meter.createObservableGauge('gen_durable.queue.depth', {
      unit: '{instance}',
      description: 'Rows per queue and status in the newest stats snapshot',
      valueType: api.ValueType.INT,
    });
    this.oldestAge = meter.createObservableGauge('gen_durable.queue.oldest_runnable_age', {
      unit: 's',
      description: 'How long the oldest runnable row had waited, in the newest stats snapshot',
    });
    this.observe = async (result) => {
      let readings: readonly QueueGaugeReading[];
      try {
        readings = await this.readGauges();
      } catch {
        return; // No snapshot readable now: report nothing.
      }
      for (const r of readings) {
        for (const [status, count] of Object.entries(r.counts)) {
          result.observe(this.depth, count, {
            'messaging.destination.name': r.queue,
            'gen_durable.status': status,
          });
        }
        if (r.oldestRunnableAgeS !== null) {
          result.observe(this.oldestAge, r.oldestRunnableAgeS, {
            'messaging.destination.name': r.queue,
          });
        }
      }
    };
    meter.addBatchObservableCallback(this.observe, [this.depth, this.oldestAge]);
  }

  /** Records what one telemetry event measured; other events are ignored. */
  record(e: GenDurableEvent): void {
    const m = e.measurements;
    const d = e.metadata;
    switch (e.event) {
      case 'step:stop': {
        const attributes = {
          'gen_durable.fsm': d['fsm'] as string,
          'gen_durable.step': d['step'] as string,
          'gen_durable.outcome.kind': d['kind'] as string,
        };
        this.stepDuration.record(m['durationMs'] ?? 0, attributes);
        this.outcomes.add(1, attributes);
        return;
      }
      case 'pick:stop':
        if ((m['count'] ?? 0) > 0) {
          this.claimBatch.record(m['count'] ?? 0, {
            'messaging.destination.name': d['queue'] as string,
          });
        }
        return;
      case 'flush:stop':
        this.flushSize.record(m['count'] ?? 0);
        this.flushDuration.record(m['durationMs'] ?? 0);
        return;
      case 'outcome:stale':
        this.stale.add(m['count'] ?? 1, {
          'gen_durable.fsm': d['fsm'] as string,
          'gen_durable.outcome.kind': d['kind'] as string,
        });
        return;
      case 'reaper:reaped':
        this.reaped.add(m['count'] ?? 0);
        return;
      case 'reaper:poisoned':
        this.poisoned.add(m['count'] ?? 1, { 'gen_durable.fsm': d['fsm'] as string });
        return;
      default:
        return;
    }
  }

  /** Stops the gauges' callback (the instruments stay with their provider). */
  close(): void {
    this.provider
      .getMeter(METER_NAME)
      .removeBatchObservableCallback(this.observe, [this.depth, this.oldestAge]);
  }
}
