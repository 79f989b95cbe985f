/** One step of an {@link FsmGraph}. */
export interface FsmGraphStep {
  /** The step name. */
  readonly name: string;
  /**
   * The targets its `@Step({ next })` declares (step names, or `'$done'` when the instance may
   * end there); null when the step declares none (docs/design.md §30).
   */
  readonly next: readonly string[] | null;
  /** Its timeout, ms, when it has one (`@Step({ timeout })` or the FSM's `stepTimeout`). */
  readonly timeout?: number;
}

/** One declared edge of an {@link FsmGraph}: `to` is a step name or `'$done'`. */
export interface FsmGraphEdge {
  readonly from: string;
  readonly to: string;
}

/**
 * The state graph of one registered FSM version, from its decorator metadata
 * (docs/design.md §30): `engine.graph(fsm)`. Steps in declaration order; edges as declared by
 * `@Step({ next })`, in that order. `mermaid` is the same graph as Mermaid `stateDiagram-v2`.
 */
export interface FsmGraph {
  readonly fsm: string;
  readonly version: number;
  readonly kind: 'fsm' | 'job';
  readonly initial: string;
  readonly steps: readonly FsmGraphStep[];
  readonly edges: readonly FsmGraphEdge[];
  readonly mermaid: string;
}
