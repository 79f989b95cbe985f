import { DURABLE_EVENT_METADATA } from '../gen-durable.constants';
import type { DurableEventKind } from '../fsm/durable-event';

/** Options of `@OnDurableEvent()`. */
export interface OnDurableEventOptions {
  /** Only outcomes of this FSM (its name, or its `@DurableFsm` class). Default: every FSM. */
  fsm?: string | (abstract new (...args: never[]) => unknown);
  /** Only outcomes committed by this engine (its name). Default: every engine of the app. */
  engine?: string;
}

/** One `@OnDurableEvent` declaration: the kind, its options, the method it calls. */
export type DurableEventMetadata = readonly [
  kind: DurableEventKind,
  property: string | symbol,
  options: OnDurableEventOptions,
];

const KINDS: readonly DurableEventKind[] = ['done', 'failed', 'cancelled', 'step'];

/**
 * Calls the decorated provider method with a `DurableEvent` each time this node commits an
 * outcome of that kind (docs/events.md): `'done'`, `'failed'` or `'cancelled'` when an instance
 * ends, `'step'` for every step outcome. Called after the commit, never awaited by the engine;
 * a throw or rejection is logged and does not touch the instance.
 */
export function OnDurableEvent(
  kind: DurableEventKind,
  options: OnDurableEventOptions = {},
): MethodDecorator {
  if (!KINDS.includes(kind)) {
    throw new TypeError(
      `@OnDurableEvent(${JSON.stringify(kind)}): the kind must be one of ${KINDS.join(', ')}`,
    );
  }
  return (target, propertyKey) => {
    const ctor = target.constructor;
    const existing = (Reflect.getOwnMetadata(DURABLE_EVENT_METADATA, ctor) as
      DurableEventMetadata[] | undefined) ?? [
      ...((Reflect.getMetadata(DURABLE_EVENT_METADATA, ctor) as
        DurableEventMetadata[] | undefined) ?? []),
    ];
    existing.push([kind, propertyKey, { ...options }]);
    Reflect.defineMetadata(DURABLE_EVENT_METADATA, existing, ctor);
  };
}
