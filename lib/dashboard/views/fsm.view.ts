import { ALL_STATUSES } from '../../gen-durable.constants';
import { renderFsmGraphSvg } from '../../graph/fsm-graph-svg';
import type { FsmDetail, FsmSummary } from '../dashboard-reads';
import { Html, html, queryString } from '../html';
import { capped, section, statusBadge, type ViewContext } from './components';
import { layout } from './layout';

/** The registered FSMs. */
export function fsmsView(ctx: ViewContext, fsms: readonly FsmSummary[]): Html {
  const table = html`<div class="scroll">
    <table class="grid">
      <thead>
        <tr>
          <th>name</th>
          <th>version</th>
          <th>kind</th>
          <th>queue</th>
          <th>steps</th>
        </tr>
      </thead>
      <tbody>
        ${fsms.map(
          (f) =>
            html`<tr>
              <td><a href="${ctx.base}/fsms/${encodeURIComponent(f.name)}">${f.name}</a></td>
              <td class="num">${f.version}</td>
              <td>${f.kind}</td>
              <td>${f.queue}</td>
              <td>${f.steps.join(' · ')}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
  return layout(
    ctx,
    'fsms',
    'FSMs',
    section(
      'Registered on this node',
      fsms.length === 0 ? html`<p class="muted">No FSM registered.</p>` : table,
    ),
  );
}

/** One FSM: its state graph (inline SVG, live count per step) and its counts per status and step. */
export function fsmView(ctx: ViewContext, f: FsmDetail): Html {
  const graph = html`<div class="graph">${new Html(renderFsmGraphSvg(f.graph, f.liveByStep))}</div>
    <p class="muted">Numbers under a step: live instances at that step.</p>`;
  const statuses = html`<table class="grid">
    <tbody>
      ${ALL_STATUSES.map(
        (s) =>
          html`<tr>
            <td>${statusBadge(s)}</td>
            <td class="num">
              <a href="${ctx.base}/instances${queryString({ fsm: f.name, status: s })}"
                >${capped(f.counts[s])}</a
              >
            </td>
          </tr>`,
      )}
    </tbody>
  </table>`;
  const steps = html`<table class="grid">
    <thead>
      <tr>
        <th>step</th>
        <th class="num">live</th>
      </tr>
    </thead>
    <tbody>
      ${f.steps.map(
        (s) =>
          html`<tr>
            <td>${s}</td>
            <td class="num">
              <a href="${ctx.base}/instances${queryString({ fsm: f.name, step: s })}"
                >${capped(f.liveByStep[s] ?? { count: 0, capped: false })}</a
              >
            </td>
          </tr>`,
      )}
    </tbody>
  </table>`;
  return layout(
    ctx,
    'fsms',
    `FSM ${f.name}`,
    html`<p class="sub">v${f.version} · ${f.kind} · queue ${f.queue}</p>
      ${section('State graph', graph, 'graph')}
      <div class="cols">${section('By status', statuses)}${section('By step', steps)}</div>`,
  );
}
