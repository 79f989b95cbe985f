import { channel, type Channel } from 'node:diagnostics_channel';

import { Logger } from '@nestjs/common';
import { Observable, type Observer, Subject, type Subscription } from 'rxjs';

import type { GenDurableEvent, GenDurableEventName, TelemetryPayloads } from './telemetry-events';

/**
 * The engine's event emitter. Subscriber errors are caught and logged, never thrown into
 * the engine (docs/design.md §20).
 */
export class Telemetry {
  private readonly subject = new Subject<GenDurableEvent>();
  private readonly channels = new Map<string, Channel>();
  private readonly logger = new Logger('GenDurable');
  /** Hot, no replay. A throwing `next` handler passed to `subscribe` is caught and logged. */
  readonly events$: Observable<GenDurableEvent> = new GuardedObservable(this.subject, (err) =>
    this.logger.error(`events$ subscriber threw: ${String(err)}`),
  );

  constructor(private readonly engine: string) {}

  /**
   * Someone listens to `event` now (a diagnostics-channel subscriber or an `events$`
   * observer): the hot path asks before it builds an event's measurements and metadata.
   */
  wants(event: GenDurableEventName): boolean {
    return this.subject.observed || this.channelOf(event).hasSubscribers;
  }

  private channelOf(event: GenDurableEventName): Channel {
    let ch = this.channels.get(event);
    if (!ch) {
      ch = channel(`gen_durable:${event}`);
      this.channels.set(event, ch);
    }
    return ch;
  }

  /** Publishes `event` with the measurements and metadata its entry in TelemetryPayloads names. */
  emit<E extends GenDurableEventName>(
    event: E,
    measurements: TelemetryPayloads[E]['measurements'],
    metadata: TelemetryPayloads[E]['metadata'],
  ): void {
    const ch = this.channelOf(event);
    const hasObservers = this.subject.observed;
    if (!ch.hasSubscribers && !hasObservers) return;
    const payload: GenDurableEvent = {
      event,
      engine: this.engine,
      at: Date.now(),
      measurements,
      metadata,
    };
    if (ch.hasSubscribers) {
      try {
        ch.publish(payload);
      } catch (err) {
        this.logger.error(`telemetry subscriber of ${event} threw: ${String(err)}`);
      }
    }
    if (hasObservers) {
      try {
        this.subject.next(payload);
      } catch (err) {
        this.logger.error(`events$ subscriber of ${event} threw: ${String(err)}`);
      }
    }
  }

  complete(): void {
    this.subject.complete();
  }
}

/** An Observable whose direct subscribers' `next` handlers cannot throw into the emitter. */
class GuardedObservable<T> extends Observable<T> {
  constructor(
    private readonly source$: Subject<T>,
    private readonly onError: (err: unknown) => void,
  ) {
    super((subscriber) => this.source$.subscribe(subscriber));
  }

  override subscribe(
    observerOrNext?: Partial<Observer<T>> | ((value: T) => void) | null,
  ): Subscription {
    const guard =
      (fn: (value: T) => void) =>
      (value: T): void => {
        try {
          fn(value);
        } catch (err) {
          this.onError(err);
        }
      };
    if (typeof observerOrNext === 'function') return super.subscribe(guard(observerOrNext));
    if (observerOrNext?.next) {
      const next = observerOrNext.next.bind(observerOrNext);
      return super.subscribe({ ...observerOrNext, next: guard(next) });
    }
    return super.subscribe(observerOrNext ?? undefined);
  }
}
