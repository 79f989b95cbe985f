import type { FsmGraphEdge, FsmGraphStep } from '../fsm/fsm-graph';

/** The `next` target that marks an end (the decorator's `STEP_END`). */
const END = '$done';

/**
 * Mermaid `stateDiagram-v2` text of a state graph (docs/design.md §30): `[*] --> initial`,
 * one line per declared edge, `step --> [*]` for a `'$done'` target. Step names that are not
 * plain identifiers get a `state "<name>" as sN` alias, so any name draws.
 */
export function fsmGraphMermaid(
  initial: string,
  steps: readonly FsmGraphStep[],
  edges: readonly FsmGraphEdge[],
): string {
  const ids = new Map<string, string>();
  const lines = ['stateDiagram-v2'];
  steps.forEach((step, i) => {
    if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(step.name) && step.name !== 'state') {
      ids.set(step.name, step.name);
    } else {
      const id = `s${i}`;
      ids.set(step.name, id);
      lines.push(`  state "${step.name.replace(/["\n\r]/g, ' ')}" as ${id}`);
    }
  });
  const id = (name: string): string => (name === END ? '[*]' : (ids.get(name) ?? name));
  lines.push(`  [*] --> ${id(initial)}`);
  for (const edge of edges) lines.push(`  ${id(edge.from)} --> ${id(edge.to)}`);
  return `${lines.join('\n')}\n`;
}
