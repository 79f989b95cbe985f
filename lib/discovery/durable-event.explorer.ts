import type { DiscoveryService } from '@nestjs/core';

import { ConfigurationError } from '../errors/configuration.error';
import type { DurableEvent, DurableEventKind } from '../fsm/durable-event';
import { FsmMetadataAccessor } from './fsm-metadata.accessor';

/** One `@OnDurableEvent` listener, bound to its provider instance. */
export interface DurableEventHandler {
  readonly kind: DurableEventKind;
  /** The FSM name it is limited to, or undefined for every FSM. */
  readonly fsm: string | undefined;
  /** `Class.method`, for logs. */
  readonly label: string;
  readonly call: (event: DurableEvent) => unknown;
}

/**
 * At module init, walks the providers for `@OnDurableEvent` methods (docs/events.md) and binds
 * each to its instance; the listeners of another engine (`{ engine }`) are left out. A listener
 * on a request- or transient-scoped provider, on a member that is not a method, or limited to
 * a class that is not a `@DurableFsm` fails boot with `ConfigurationError`.
 */
export class DurableEventExplorer {
  constructor(private readonly discovery: DiscoveryService) {}

  explore(engineName: string): DurableEventHandler[] {
    const handlers: DurableEventHandler[] = [];
    const seen = new Set<unknown>();
    for (const wrapper of this.discovery.getProviders()) {
      const instance: unknown = wrapper.instance;
      if (!instance || typeof instance !== 'object' || seen.has(instance)) continue;
      const metas = FsmMetadataAccessor.events(instance.constructor);
      if (metas.length === 0) continue;
      seen.add(instance);
      const className = (instance.constructor as { name: string }).name;
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
        throw new ConfigurationError(
          `@OnDurableEvent on ${className}`,
          'must be on a singleton provider (not request- or transient-scoped)',
        );
      }
      for (const [kind, property, options] of metas) {
        if (options.engine !== undefined && options.engine !== engineName) continue;
        const label = `${className}.${String(property)}`;
        const method = (instance as Record<string | symbol, unknown>)[property];
        if (typeof method !== 'function') {
          throw new ConfigurationError(`@OnDurableEvent on ${label}`, 'must decorate a method');
        }
        handlers.push({
          kind,
          fsm: this.fsmName(options.fsm, label),
          label,
          call: (event) => (method as (e: DurableEvent) => unknown).call(instance, event),
        });
      }
    }
    return handlers;
  }

  private fsmName(
    fsm: string | (abstract new (...args: never[]) => unknown) | undefined,
    label: string,
  ): string | undefined {
    if (fsm === undefined || typeof fsm === 'string') return fsm;
    const meta = FsmMetadataAccessor.fsm(fsm);
    if (!meta) {
      throw new ConfigurationError(
        `@OnDurableEvent on ${label}`,
        `fsm ${fsm.name} is not a @DurableFsm class`,
      );
    }
    return meta.name ?? fsm.name;
  }
}
