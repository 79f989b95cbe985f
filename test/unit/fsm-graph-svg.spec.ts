import type { FsmGraph } from '../../lib/fsm/fsm-graph';
import { fsmGraphMermaid } from '../../lib/graph/fsm-graph-mermaid';
import {
  escapeXml,
  graphLayers,
  layoutGraph,
  renderFsmGraphSvg,
} from '../../lib/graph/fsm-graph-svg';

// docs/design.md §30: the FSM page's drawing, a pure function of the graph and the counts.

function graphOf(
  initial: string,
  steps: readonly [string, (readonly string[] | null)?][],
): FsmGraph {
  const s = steps.map(([name, nextSteps]) => ({ name, next: nextSteps ?? null }));
  const edges = s.flatMap((step) => (step.next ?? []).map((to) => ({ from: step.name, to })));
  return {
    fsm: 'g',
    version: 1,
    kind: 'fsm',
    initial,
    steps: s,
    edges,
    mermaid: fsmGraphMermaid(initial, s, edges),
  };
}

describe('FSM graph layout and SVG', () => {
  const order = graphOf('start', [
    ['start', ['pay', 'reject']],
    ['pay', ['ship', 'start', '$done']],
    ['ship', ['$done']],
    ['reject', ['$done']],
    ['orphan'],
  ]);

  it('layers breadth-first from the initial step; unreached steps after; the end last', () => {
    expect(graphLayers(order)).toEqual([
      ['start'],
      ['pay', 'reject'],
      ['ship'],
      ['orphan'],
      ['$done'],
    ]);
    expect(graphLayers(graphOf('b', [['a', ['b']], ['b']]))).toEqual([['b'], ['a']]);
  });

  it('boxes of one layer share a row and never overlap', () => {
    const { boxes, width, height } = layoutGraph(order);
    const pay = boxes.find((b) => b.name === 'pay');
    const reject = boxes.find((b) => b.name === 'reject');
    expect(pay?.y).toBe(reject?.y);
    expect((pay?.x ?? 0) + (pay?.width ?? 0)).toBeLessThan(reject?.x ?? 0);
    for (const b of boxes) {
      expect(b.x).toBeGreaterThanOrEqual(0);
      expect(b.x + b.width).toBeLessThanOrEqual(width);
      expect(b.y + b.height).toBeLessThanOrEqual(height);
    }
    const start = boxes.find((b) => b.name === 'start');
    expect(start?.y).toBeLessThan(pay?.y ?? 0);
  });

  it('draws one arrow per edge, the end circle, and each count (capped as n+)', () => {
    const svg = renderFsmGraphSvg(order, { pay: 12, ship: { count: 10000, capped: true } });
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.match(/class="gd-edge"/g)).toHaveLength(order.edges.length);
    expect(svg.match(/class="gd-end"/g)).toHaveLength(1);
    expect(svg).toContain('data-step="pay"');
    expect(svg).toContain('>12</text>');
    expect(svg).toContain('>10000+</text>');
    expect(svg).toContain('class="gd-node gd-initial" data-step="start"');
    expect(svg).not.toMatch(/<script|href=/);
  });

  it('escapes every name', () => {
    const nasty = graphOf('<b>"x"&', [['<b>"x"&', ["it's"]], ["it's"]]);
    const svg = renderFsmGraphSvg(nasty, { "it's": 1 });
    expect(svg).not.toContain('<b>');
    expect(svg).toContain('&lt;b&gt;&quot;x&quot;&amp;');
    expect(svg).toContain('it&#39;s');
    expect(escapeXml(`<&>"'`)).toBe('&lt;&amp;&gt;&quot;&#39;');
  });

  it('Mermaid aliases names that are not identifiers', () => {
    const text = fsmGraphMermaid(
      'a b',
      [
        { name: 'a b', next: ['c'] },
        { name: 'c', next: ['$done'] },
      ],
      [
        { from: 'a b', to: 'c' },
        { from: 'c', to: '$done' },
      ],
    );
    expect(text).toBe(
      'stateDiagram-v2\n  state "a b" as s0\n  [*] --> s0\n  s0 --> c\n  c --> [*]\n',
    );
  });
});
