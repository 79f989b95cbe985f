import type { CappedCount } from '../../instance/queue-status';
import type { QueueOverviewCounts } from '../../control/stats-overview';
import type { Overview, OverviewQueue } from '../dashboard-reads';
import { type Html, html, queryString } from '../html';
import { capped, duration, section, sparkline, statusBadge, type ViewContext } from './components';

import { layout } from './layout';

/** A column of the overview: a count of the snapshot and the status its link filters by. */
interface CountColumn {
  readonly key: keyof QueueOverviewCounts;
  readonly status: string;
  readonly label: Html | string;
}

const LIVE_COLUMNS: readonly CountColumn[] = [
  { key: 'runnable', status: 'runnable', label: statusBadge('runnable') },
  {
    key: 'scheduled',
    status: 'runnable',
    label: html`<span title="runnable rows not yet due: scheduled, backing off, sleeping"
      >not due</span
    >`,
  },
  { key: 'executing', status: 'executing', label: statusBadge('executing') },
  { key: 'awaitingSignal', status: 'awaiting_signal', label: statusBadge('awaiting_signal') },
  { key: 'awaitingChildren', status: 'awaiting_children', label: statusBadge('awaiting_children') },
];

/** Where the figures come from and how old they are, above the table. */
function sourceNote(data: Overview): Html {
  if (data.source === 'live') {
    return html`<p class="muted" id="source">
      <span class="badge">live counts</span> No stats snapshot is stored yet (a maintenance node
      writes one a minute): counted now, each capped at 10,000; ended rows per minute appear with
      the first snapshot.
    </p>`;
  }
  const at = data.at.toISOString().slice(11, 16);
  return html`<p class="muted" id="source">
    <span class="badge ${data.stale ? 'paused' : ''}">snapshot${data.stale ? ' · stale' : ''}</span>
    Counts from the stats snapshot of ${at} UTC, ${duration(data.ageMs)}
    old${data.stale ? ' — no snapshot for over two minutes: is a maintenance node running?' : ''};
    done / failed / cancelled are rows ended per minute over the last ${data.minutes} minutes
    (sparkline) and in the snapshot's previous minute (number).
  </p>`;
}

function countCell(ctx: ViewContext, q: OverviewQueue, column: CountColumn): Html {
  const count = q.counts[column.key];
  if (count === null) return html`<td class="num"><span class="muted">—</span></td>`;
  return html`<td class="num">
    <a href="${ctx.base}/instances${queryString({ queue: q.queue, status: column.status })}"
      >${capped(count)}</a
    >
  </td>`;
}

/** An ended status: the last minute's number (linked to the list) and the window's sparkline. */
function endedCell(
  ctx: ViewContext,
  q: OverviewQueue,
  status: 'done' | 'failed' | 'cancelled',
): Html {
  const count: CappedCount | null = q.counts[status];
  if (count === null) return html`<td class="num"><span class="muted">—</span></td>`;
  const values = q.series.map((p) => p[status]);
  return html`<td class="num">
    ${
      values.length > 0 && status !== 'cancelled'
        ? sparkline(
            values,
            `${q.queue} ${status} per minute`,
            status === 'failed' ? 'spark bad' : 'spark',
            72,
          )
        : ''
    }
    <a href="${ctx.base}/instances${queryString({ queue: q.queue, status })}">${capped(count)}</a>
  </td>`;
}

/** Overview: per queue the snapshot's counts by status, oldest due age, ended-per-minute sparklines. */
export function overviewView(ctx: ViewContext, data: Overview): Html {
  const head = html`<tr>
    <th>queue</th>
    ${LIVE_COLUMNS.map((c) => html`<th class="num">${c.label}</th>`)}
    <th>oldest due</th>
    <th class="num">${statusBadge('done')} / min</th>
    <th class="num">${statusBadge('failed')} / min</th>
    <th class="num">${statusBadge('cancelled')} / min</th>
  </tr>`;
  const now = data.at.getTime() + data.ageMs;
  const rows = data.queues.map(
    (q) =>
      html`<tr data-queue="${q.queue}">
        <td>
          <a href="${ctx.base}/instances${queryString({ queue: q.queue })}">${q.queue}</a
          >${q.paused ? html` <span class="badge paused">paused</span>` : ''}
        </td>
        ${LIVE_COLUMNS.map((c) => countCell(ctx, q, c))}
        <td>
          ${
            q.oldestRunnableAt !== null
              ? ageText(Math.max(0, now - q.oldestRunnableAt.getTime()))
              : html`<span class="muted">—</span>`
          }
        </td>
        ${endedCell(ctx, q, 'done')}${endedCell(ctx, q, 'failed')}${endedCell(ctx, q, 'cancelled')}
      </tr>`,
  );
  const table =
    data.queues.length === 0
      ? html`<p class="muted">No queue yet.</p>`
      : html`<div class="scroll">
          <table class="grid overview">
            <thead>
              ${head}
            </thead>
            <tbody>
              ${rows}
            </tbody>
          </table>
        </div>`;
  return layout(ctx, '', 'Overview', section('Queues × status', html`${sourceNote(data)}${table}`));
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
