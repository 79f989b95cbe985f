import type { ControlNode } from '../control/control-runtime';
import type { FsmRegistry } from '../discovery/fsm.registry';
import type { Limiter } from '../limiter/limiter.interface';
import { RedisLimiter } from '../limiter/redis.limiter';
import type { ResolvedOptions } from '../options/resolved-options';

/**
 * An engine's {@link ControlNode} (docs/design.md §32): its registry's `@DurableFsm`
 * definitions, the limiter it runs (the Redis limiter's live counters when it is Redis), and
 * the node-local facts `explain` reports — whether this node registers an FSM version and runs
 * a scheduler of a queue, and what an FSM's instance deadline does.
 */
export function engineControlNode(
  registry: FsmRegistry,
  options: Pick<ResolvedOptions, 'limiter' | 'leaseTtl'>,
  limiter: Limiter,
  schedulers: { has(queue: string): boolean },
): ControlNode {
  const backend = options.limiter === 'postgres' ? 'postgres' : 'redis';
  const redis =
    limiter instanceof RedisLimiter ? (cap: number) => limiter.counters(cap) : undefined;
  return {
    definitions: () => registry,
    limiter: () => ({ backend, redis }),
    explainContext: {
      registered: (fsm, version) => registry.find(fsm, version) !== undefined,
      serves: (queue) => schedulers.has(queue),
      limiter: backend,
      deadline: (fsm, version) => {
        const d = registry.find(fsm, version);
        if (d === undefined) return undefined;
        return {
          onDeadline: d.deadline?.onDeadline ?? null,
          graceMs: d.deadline?.graceMs ?? options.leaseTtl,
        };
      },
    },
  };
}
