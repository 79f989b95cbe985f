import type { StepContext } from './step-context';

/**
 * What a request- or durable-scoped FSM provider sees as its request (docs/scoped-providers.md):
 * one step run. `@Inject(REQUEST)` in such a provider, and a host `ContextIdStrategy`'s
 * `attach(contextId, request)`, receive it — e.g. to pick a tenant's durable sub-tree by
 * `state.tenantId`.
 */
export interface DurableRequest {
  /** The instance's id. */
  readonly instanceId: string;
  readonly fsm: string;
  readonly step: string;
  readonly attempt: number;
  /** The instance's state as the step receives it (read-only by contract). */
  readonly state: unknown;
}

/** The request of one step run. */
export function durableRequestOf(ctx: StepContext<unknown>): DurableRequest {
  return {
    instanceId: ctx.id,
    fsm: ctx.fsm,
    step: ctx.step,
    attempt: ctx.attempt,
    state: ctx.state,
  };
}
