import type { FsmGraph } from '../fsm/fsm-graph';

/** A step's live count for the drawing: a number, or a capped count (`capped` draws `n+`). */
export type StepCount = number | { readonly count: number; readonly capped: boolean };

/** Where the renderer put one node (exported for tests and for callers that add links). */
export interface GraphNodeBox {
  readonly name: string;
  readonly layer: number;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

/** The `next` target that marks an end (the decorator's `STEP_END`). */
const END = '$done';
const NODE_HEIGHT = 44;
const LAYER_GAP = 72;
const NODE_GAP = 28;
const MARGIN = 24;
const CHAR_WIDTH = 7.5;
const MIN_WIDTH = 96;
const END_RADIUS = 10;

/**
 * Layers of a graph's steps (docs/design.md §30): breadth-first from `initial` along the
 * declared edges, each step in the layer of its shortest path; steps no declared edge reaches
 * share one layer after the reachable ones. The end marker (`'$done'`) gets the last layer.
 */
export function graphLayers(graph: FsmGraph): string[][] {
  const layerOf = new Map<string, number>([[graph.initial, 0]]);
  const queue = [graph.initial];
  while (queue.length > 0) {
    const from = queue.shift() as string;
    const depth = layerOf.get(from) as number;
    for (const edge of graph.edges) {
      if (edge.from !== from || edge.to === END || layerOf.has(edge.to)) continue;
      layerOf.set(edge.to, depth + 1);
      queue.push(edge.to);
    }
  }
  const layers: string[][] = [];
  for (const step of graph.steps) {
    const depth = layerOf.get(step.name);
    if (depth !== undefined) (layers[depth] ??= []).push(step.name);
  }
  const unreached = graph.steps.filter((s) => !layerOf.has(s.name)).map((s) => s.name);
  if (unreached.length > 0) layers.push(unreached);
  if (graph.edges.some((e) => e.to === END)) layers.push([END]);
  return layers;
}

/** Each node's box: layers top to bottom, each layer centred. */
export function layoutGraph(graph: FsmGraph): {
  boxes: GraphNodeBox[];
  width: number;
  height: number;
} {
  const layers = graphLayers(graph);
  const widthOf = (name: string): number =>
    name === END ? END_RADIUS * 2 : Math.max(MIN_WIDTH, Math.ceil(name.length * CHAR_WIDTH) + 24);
  const rowWidths = layers.map(
    (row) => row.reduce((sum, name) => sum + widthOf(name), 0) + NODE_GAP * (row.length - 1),
  );
  const width = Math.max(MIN_WIDTH, ...rowWidths) + MARGIN * 2;
  const boxes: GraphNodeBox[] = [];
  layers.forEach((row, layer) => {
    let x = (width - (rowWidths[layer] as number)) / 2;
    const y = MARGIN + layer * (NODE_HEIGHT + LAYER_GAP);
    for (const name of row) {
      const w = widthOf(name);
      const h = name === END ? END_RADIUS * 2 : NODE_HEIGHT;
      boxes.push({
        name,
        layer,
        x,
        y: name === END ? y + (NODE_HEIGHT - h) / 2 : y,
        width: w,
        height: h,
      });
      x += w + NODE_GAP;
    }
  });
  const height =
    MARGIN * 2 + layers.length * NODE_HEIGHT + Math.max(0, layers.length - 1) * LAYER_GAP;
  return { boxes, width, height };
}

/** Escapes text for SVG/XML content and attribute values. */
export function escapeXml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

function countText(count: StepCount | undefined): string | undefined {
  if (count === undefined) return undefined;
  if (typeof count === 'number') return String(count);
  return `${count.count}${count.capped ? '+' : ''}`;
}

/**
 * The graph as a self-contained SVG document fragment (docs/design.md §30), no script, no
 * external reference (fits a strict CSP): steps as boxes in breadth-first layers from the
 * initial step, declared edges as arrows (an edge back up or within a layer curves to the
 * side), `'$done'` as an end circle, the initial step marked by a start dot, and each step's
 * live count (`countsByStep`, e.g. instances at that step) under its name. Every name is
 * escaped. Classes (`gd-node`, `gd-initial`, `gd-edge`, `gd-count`, `gd-end`) let a page style it.
 */
export function renderFsmGraphSvg(
  graph: FsmGraph,
  countsByStep: Readonly<Record<string, StepCount>> = {},
): string {
  const { boxes, width, height } = layoutGraph(graph);
  const at = new Map(boxes.map((b) => [b.name, b]));
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="gd-graph" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${escapeXml(`state graph of ${graph.fsm} v${graph.version}`)}">`,
    `<defs><marker id="gd-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>`,
  );
  for (const edge of graph.edges) {
    const from = at.get(edge.from);
    const to = at.get(edge.to);
    if (!from || !to) continue;
    parts.push(
      `<path class="gd-edge" data-from="${escapeXml(edge.from)}" data-to="${escapeXml(edge.to)}" d="${edgePath(from, to)}" fill="none" stroke="#555" stroke-width="1.5" marker-end="url(#gd-arrow)"/>`,
    );
  }
  for (const box of boxes) {
    if (box.name === END) {
      parts.push(
        `<circle class="gd-end" cx="${box.x + END_RADIUS}" cy="${box.y + END_RADIUS}" r="${END_RADIUS}" fill="#333"><title>end</title></circle>`,
      );
      continue;
    }
    const initial = box.name === graph.initial;
    const count = countText(countsByStep[box.name]);
    const cx = box.x + box.width / 2;
    const nameY = count === undefined ? box.y + box.height / 2 + 5 : box.y + 18;
    parts.push(
      `<g class="gd-node${initial ? ' gd-initial' : ''}" data-step="${escapeXml(box.name)}">`,
      `<rect x="${box.x}" y="${box.y}" width="${box.width}" height="${box.height}" rx="8" fill="#fff" stroke="${initial ? '#1f6feb' : '#555'}" stroke-width="${initial ? 2 : 1.2}"/>`,
      `<text x="${cx}" y="${nameY}" text-anchor="middle" font-family="sans-serif" font-size="13">${escapeXml(box.name)}</text>`,
    );
    if (count !== undefined) {
      parts.push(
        `<text class="gd-count" x="${cx}" y="${box.y + 36}" text-anchor="middle" font-family="sans-serif" font-size="12" fill="#1f6feb">${escapeXml(count)}</text>`,
      );
    }
    parts.push('</g>');
    if (initial) {
      parts.push(
        `<circle class="gd-start" cx="${box.x - 10}" cy="${box.y + box.height / 2}" r="5" fill="#333"/>`,
      );
    }
  }
  parts.push('</svg>');
  return parts.join('');
}

/** A straight arrow down to a lower layer; a curve out to the right for any other edge. */
function edgePath(from: GraphNodeBox, to: GraphNodeBox): string {
  const r = (n: number): number => Math.round(n * 10) / 10;
  if (to.layer > from.layer) {
    return `M${r(from.x + from.width / 2)},${r(from.y + from.height)} L${r(to.x + to.width / 2)},${r(to.y)}`;
  }
  if (from === to) {
    const x = from.x + from.width;
    const y = from.y + from.height / 2;
    return `M${r(x)},${r(y - 8)} C${r(x + 30)},${r(y - 24)} ${r(x + 30)},${r(y + 24)} ${r(x)},${r(y + 8)}`;
  }
  const x1 = from.x + from.width;
  const y1 = from.y + from.height / 2;
  const x2 = to.x + to.width;
  const y2 = to.y + to.height / 2;
  const bulge = Math.max(x1, x2) + 40 + 10 * Math.abs(from.layer - to.layer);
  return `M${r(x1)},${r(y1)} C${r(bulge)},${r(y1)} ${r(bulge)},${r(y2)} ${r(x2)},${r(y2)}`;
}
