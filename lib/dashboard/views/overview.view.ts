import { ALL_STATUSES } from '../../gen-durable.constants';
import type { Overview } from '../dashboard-reads';
import { type Html, html, queryString } from '../html';
import { capped, jsonBlock, section, sparkline, statusBadge, type ViewContext } from './components';
import { layout } from './layout';

/** Per-minute series the engine's stats read may carry, by queue. */
interface StatsSeries {
  readonly queue: string;
  readonly throughput?: readonly number[];
  readonly failures?: readonly number[];
  readonly oldestRunnableAgeMs?: number | null;
}

function seriesOf(stats: unknown): Map<string, StatsSeries> {
  const out = new Map<string, StatsSeries>();
  const queues = (stats as { queues?: unknown } | null)?.queues;
  if (!Array.isArray(queues)) return out;
  for (const q of queues as StatsSeries[]) if (typeof q?.queue === 'string') out.set(q.queue, q);
  return out;
}

/** Overview: per queue × status capped counts, oldest runnable age, throughput and failure sparklines. */
export function overviewView(ctx: ViewContext, data: Overview): Html {
  const series = seriesOf(data.stats);
  const head = html`<tr>
    <th>queue</th>
    ${ALL_STATUSES.map((s) => html`<th class="num">${statusBadge(s)}</th>`)}
    <th>oldest runnable</th>
    <th>done / min</th>
    <th>failed / min</th>
  </tr>`;
  const rows = data.queues.map((q) => {
    const s = series.get(q.queue);
    return html`<tr>
      <td>
        <a href="${ctx.base}/instances${queryString({ queue: q.queue })}">${q.queue}</a
        >${q.paused ? html` <span class="badge paused">paused</span>` : ''}
      </td>
      ${ALL_STATUSES.map((status) => html`<td class="num"><a href="${ctx.base}/instances${queryString({ queue: q.queue, status })}">${capped(q.counts[status])}</a></td>`)}
      <td>
        ${s?.oldestRunnableAgeMs != null ? ageText(s.oldestRunnableAgeMs) : html`<span class="muted">—</span>`}
      </td>
      <td>
        ${s?.throughput ? sparkline(s.throughput, `${q.queue} done per minute`) : html`<span class="muted">—</span>`}
      </td>
      <td>
        ${s?.failures ? sparkline(s.failures, `${q.queue} failed per minute`, 'spark bad') : html`<span class="muted">—</span>`}
      </td>
    </tr>`;
  });
  const table =
    data.queues.length === 0
      ? html`<p class="muted">No queue yet.</p>`
      : html`<div class="scroll">
          <table class="grid">
            <thead>
              ${head}
            </thead>
            <tbody>
              ${rows}
            </tbody>
          </table>
        </div>`;
  const extra =
    data.stats !== null && series.size === 0 ? section('Stats', jsonBlock(data.stats)) : '';
  return layout(ctx, '', 'Overview', html`${section('Queues × status', table)}${extra}`);
}

function ageText(ms: number): Html {
  const s = Math.round(ms / 1000);
  const text =
    s < 60
      ? `${s} s`
      : s < 3600
        ? `${Math.floor(s / 60)} min`
        : `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return html`<span class="${s > 60 ? 'warn' : ''}">${text}</span>`;
}
