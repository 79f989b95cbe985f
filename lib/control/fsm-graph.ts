import type { FsmDefinition } from '../discovery/fsm-definition';
import type { FsmGraph, FsmGraphEdge, FsmGraphStep } from '../fsm/fsm-graph';
import { fsmGraphMermaid } from '../graph/fsm-graph-mermaid';

/**
 * The state graph of a registered FSM version from its decorator metadata (docs/design.md
 * §30): steps in declaration order with their declared `next` (null = undeclared) and
 * timeout, the declared edges, and the Mermaid text. Behind `engine.graph(fsm)`.
 */
export function fsmGraphOf(definition: FsmDefinition): FsmGraph {
  const steps: FsmGraphStep[] = [];
  const edges: FsmGraphEdge[] = [];
  for (const name of definition.steps.keys()) {
    const next = definition.next.get(name) ?? null;
    const timeout = definition.timeouts.get(name);
    steps.push({ name, next, ...(timeout === undefined ? {} : { timeout }) });
    for (const to of next ?? []) edges.push({ from: name, to });
  }
  return {
    fsm: definition.name,
    version: definition.version,
    kind: definition.kind,
    initial: definition.initial,
    steps,
    edges,
    mermaid: fsmGraphMermaid(definition.initial, steps, edges),
  };
}
