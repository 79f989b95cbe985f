import { Logger } from '@nestjs/common';
import { type Observable, Subject } from 'rxjs';

import type { DurableEventHandler } from '../discovery/durable-event.explorer';
import type {
  DurableEvent,
  FinishedAnnouncement,
  FinishedInstance,
  FinishedStatus,
} from '../fsm/durable-event';
import type { EntryKind } from '../fsm/outcome-kinds';
import type { FlushEntry } from './flush-entry';

/** The status an outcome of `kind` ends its instance with, or null when it does not end it. */
function endedAs(kind: EntryKind): FinishedStatus | null {
  switch (kind) {
    case 'done':
      return 'done';
    case 'stop':
      return 'failed';
    case 'cancel':
      return 'cancelled';
    default:
      return null;
  }
}

/** The class and message of an entry's failure: what the step threw, else a `stop` reason. */
function errorOf(entry: FlushEntry): DurableEvent['error'] {
  if (entry.thrown) {
    const thrown = JSON.parse(entry.thrown) as { name?: unknown; message?: unknown };
    return {
      name: typeof thrown.name === 'string' ? thrown.name : 'Error',
      message: typeof thrown.message === 'string' ? thrown.message : '',
    };
  }
  if ('error' in entry && entry.error !== null) return { name: 'stop', message: entry.error };
  return undefined;
}

/**
 * Committed outcomes as events (docs/events.md): the `@OnDurableEvent` listeners of this node,
 * called after the commit and never awaited (a throw is logged), and `finished$`, the stream of
 * instances that ended — here (with result or error) or, when announcements are on, on another
 * node (`origin: 'remote'`, best effort). Does nothing per commit when nobody listens.
 */
export class DurableEvents {
  private readonly logger = new Logger('GenDurable');
  private readonly subject = new Subject<FinishedInstance>();
  readonly finished$: Observable<FinishedInstance> = this.subject.asObservable();

  constructor(
    private readonly handlers: readonly DurableEventHandler[],
    /** Sends one batch of endings to the other nodes; undefined when announcements are off. */
    private readonly announce: ((ended: readonly FinishedAnnouncement[]) => void) | undefined,
  ) {}

  /** After a flush committed `entries`; `cancelledIds` ended `cancelled` whatever their kind. */
  committed(entries: readonly FlushEntry[], cancelledIds: readonly string[]): void {
    if (this.handlers.length === 0 && !this.subject.observed && !this.announce) return;
    const cancelled = new Set(cancelledIds);
    const ended: FinishedAnnouncement[] = [];
    for (const entry of entries) {
      const status = cancelled.has(entry.id) ? 'cancelled' : endedAs(entry.kind);
      const base = {
        id: entry.id,
        fsm: entry.fsm,
        step: entry.step,
        outcome: entry.kind,
        ...(entry.thrown || status === 'failed' ? { error: errorOf(entry) } : {}),
      };
      this.dispatch({ kind: 'step', ...base });
      if (status === null) continue;
      const result =
        status === 'done' && 'resultText' in entry && entry.resultText !== null
          ? (JSON.parse(entry.resultText) as unknown)
          : undefined;
      const event: DurableEvent = {
        kind: status,
        ...base,
        ...(result !== undefined ? { result } : {}),
      };
      this.dispatch(event);
      this.subject.next({
        id: entry.id,
        fsm: entry.fsm,
        step: entry.step,
        status,
        origin: 'local',
        ...(event.result !== undefined ? { result: event.result } : {}),
        ...(event.error ? { error: event.error } : {}),
      });
      ended.push({ id: entry.id, fsm: entry.fsm, step: entry.step, status });
    }
    if (ended.length > 0) this.announce?.(ended);
  }

  /** An instance failed outside a flush (the reaper's poison-pill verdict). */
  failed(row: { id: string; fsm: string; step: string }, message: string): void {
    const error = { name: 'PoisonPill', message };
    this.dispatch({ kind: 'failed', ...row, outcome: 'stop', error });
    this.subject.next({ ...row, status: 'failed', origin: 'local', error });
    this.announce?.([{ ...row, status: 'failed' }]);
  }

  /** Another node announced these endings. */
  heard(ended: readonly FinishedAnnouncement[]): void {
    for (const f of ended) this.subject.next({ ...f, origin: 'remote' });
  }

  complete(): void {
    this.subject.complete();
  }

  private dispatch(event: DurableEvent): void {
    for (const handler of this.handlers) {
      if (handler.kind !== event.kind) continue;
      if (handler.fsm !== undefined && handler.fsm !== event.fsm) continue;
      // After the commit and off its path: a listener never delays or fails the engine.
      queueMicrotask(() => {
        try {
          const answer = handler.call(event);
          if (answer instanceof Promise) {
            answer.catch((err: unknown) => this.failedListener(handler, event, err));
          }
        } catch (err) {
          this.failedListener(handler, event, err);
        }
      });
    }
  }

  private failedListener(handler: DurableEventHandler, event: DurableEvent, err: unknown): void {
    this.logger.error(
      `@OnDurableEvent listener ${handler.label} threw on ${event.kind} of ${event.fsm}#${event.id}: ${String(err)}`,
    );
  }
}
