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

interface StatsQueueLike {
  readonly queue?: unknown;
  readonly oldestRunnableAt?: unknown;
  readonly series?: unknown;
}

/** The engine's `stats()` answer (docs/dashboard-data.md) as per-queue series. */
function seriesOf(stats: unknown): Map<string, StatsSeries> {
  const out = new Map<string, StatsSeries>();
  const at = (stats as { at?: unknown } | null)?.at;
  const now = at instanceof Date ? at.getTime() : Date.now();
  const queues = (stats as { queues?: unknown } | null)?.queues;
  if (!Array.isArray(queues)) return out;
  for (const q of queues as StatsQueueLike[]) {
    if (typeof q?.queue !== 'string') continue;
    const points = Array.isArray(q.series)
      ? (q.series as { done?: unknown; failed?: unknown }[])
      : [];
    const num = (v: unknown) => (typeof v === 'number' ? v : 0);
    out.set(q.queue, {
      queue: q.queue,
      throughput: points.map((p) => num(p.done)),
      failures: points.map((p) => num(p.failed)),
      oldestRunnableAgeMs:
        q.oldestRunnableAt instanceof Date ? Math.max(0, now - q.oldestRunnableAt.getTime()) : null,
    });
  }
  return out;
}

/** "snapshot of 00:41 (stale)" or "live counts" under the table. */
function statsNote(stats: unknown): string {
  const s = stats as { source?: unknown; at?: unknown; stale?: unknown; minutes?: unknown } | null;
  if (s === null || typeof s !== 'object') return '';
  const at = s.at instanceof Date ? s.at.toISOString().slice(11, 16) : '?';
  const source =
    s.source === 'snapshot'
      ? `snapshot of ${at} UTC${s.stale === true ? ' (stale)' : ''}`
      : 'live counts (no snapshot stored yet)';
  return `Sparklines: done and failed per minute over the last ${typeof s.minutes === 'number' ? s.minutes : 60} minutes, from the stats ${source}.`;
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
  const note = statsNote(data.stats);
  return layout(
    ctx,
    '',
    'Overview',
    html`${section('Queues × status', html`${table}${note ? html`<p class="muted">${note}</p>` : ''}`)}${extra}`,
  );
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
