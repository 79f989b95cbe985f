import type { ScheduleView } from '../../cron/schedule-spec';
import type { BlockedSequence } from '../../control/blocked-sequence';
import type { FairQueueHeads } from '../../control/fairness-head';
import type { LimiterStatus } from '../../control/limiter-status';
import type { QueueStatus } from '../../instance/queue-status';
import type { BulkAction } from '../dashboard-actions';
import type { FilterFields } from '../filter-query';
import { type Html, html, queryString } from '../html';
import { actionForm, capped, duration, section, time, type ViewContext } from './components';
import { layout } from './layout';

/** Cron schedules with their next and last fire. */
export function schedulesView(ctx: ViewContext, schedules: readonly ScheduleView[]): Html {
  const table = html`<div class="scroll">
    <table class="grid">
      <thead>
        <tr>
          <th>name</th>
          <th>fsm</th>
          <th>cron</th>
          <th>zone</th>
          <th>next fire</th>
          <th>last fire</th>
          <th>missed / overlap</th>
          <th>state</th>
        </tr>
      </thead>
      <tbody>
        ${schedules.map(
          (s) =>
            html`<tr>
              <td>${s.name}${s.declared ? html` <span class="badge">declared</span>` : ''}</td>
              <td><a href="${ctx.base}/instances${queryString({ fsm: s.fsm })}">${s.fsm}</a></td>
              <td><code>${s.cron}</code></td>
              <td>${s.tz}</td>
              <td>
                ${s.paused ? html`<span class="badge paused">paused</span>` : time(s.nextFireAt)}
              </td>
              <td>${time(s.lastFireAt)}</td>
              <td>${s.missed} / ${s.overlap}</td>
              <td>
                <a
                  href="${ctx.base}/instances${queryString({ correlationKeyPrefix: `cron:${s.name}` })}"
                  >instances</a
                >
              </td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
  return layout(
    ctx,
    'schedules',
    'Schedules',
    section(
      'Cron schedules',
      schedules.length === 0 ? html`<p class="muted">No schedule.</p>` : table,
    ),
  );
}

interface GateLike {
  readonly key?: unknown;
  readonly name?: unknown;
  readonly [field: string]: unknown;
}

function rowsOf(list: unknown): Html {
  if (!Array.isArray(list) || list.length === 0) return html`<p class="muted">None.</p>`;
  const columns = [...new Set((list as GateLike[]).flatMap((r) => Object.keys(r ?? {})))];
  return html`<div class="scroll">
    <table class="grid">
      <thead>
        <tr>
          ${columns.map((c) => html`<th>${c}</th>`)}
        </tr>
      </thead>
      <tbody>
        ${(list as GateLike[]).map(
          (r) =>
            html`<tr>
              ${columns.map((c) => html`<td>${cell(r[c])}</td>`)}
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

function cell(value: unknown): Html | string {
  if (value instanceof Date) return time(value);
  if (value === null || value === undefined) return '—';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return String(value);
  }
  return JSON.stringify(value) ?? '';
}

/** Where the counters were read, above the tables. */
function limiterNote(status: LimiterStatus): Html {
  const where =
    status.backend === 'redis'
      ? html`<span class="badge">Redis</span> Live counters read from Redis (the limiter's keys, by
          SCAN; its clock refills the buckets); one shard per key.`
      : html`<span class="badge">PostgreSQL</span> Live counters read from gen_durable_buckets,
          summed over each key's shards.`;
  return html`<p class="muted" id="backend">
      ${where} A key that is absent is free (a gate with no holder, a full bucket).
    </p>
    ${
      status.unreadable !== undefined
        ? html`<p class="error" id="unreadable">Redis could not be read: ${status.unreadable}</p>`
        : ''
    }
    ${
      status.truncated
        ? html`<p class="warn">More keys exist than were read (the first 1,000 of each).</p>`
        : ''
    }`;
}

/** Concurrency gates and rate-limit buckets, live, beside the configured limits. */
export function limitersView(ctx: ViewContext, status: LimiterStatus): Html {
  const body = html`${limiterNote(status)}${section('Configured limits', rowsOf(status.declarations), 'declarations')}${section('Concurrency gates', rowsOf(status.gates), 'gates')}${section('Rate-limit buckets', rowsOf(status.buckets), 'buckets')}`;
  return layout(ctx, 'limiters', 'Limiters', body);
}

/**
 * The sequence keys with instances waiting behind their head (docs/sequences.md "Seeing held
 * keys"), the longest waiting first: each head linked to its instance page (retry, cancel).
 */
export function sequencesView(ctx: ViewContext, blocked: readonly BlockedSequence[]): Html {
  const table =
    blocked.length === 0
      ? html`<p class="muted">No sequence key has instances waiting.</p>`
      : html`<div class="scroll">
          <table class="grid">
            <thead>
              <tr>
                <th>key</th>
                <th>head</th>
                <th>head status</th>
                <th>step</th>
                <th class="num">waiting</th>
                <th>waiting since</th>
                <th>last error</th>
              </tr>
            </thead>
            <tbody>
              ${blocked.map(
                (b) =>
                  html`<tr data-sequence="${b.key}">
                    <td>${b.key}</td>
                    <td><a href="${ctx.base}/instances/${b.headId}">#${b.headId}</a></td>
                    <td><span class="badge">${b.headStatus}</span></td>
                    <td>${b.headStep}</td>
                    <td class="num">${String(b.waiting)}</td>
                    <td>${time(b.waitingSince)}</td>
                    <td class="wrap">${b.headError ?? ''}</td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </div>`;
  return layout(ctx, 'sequences', 'Sequences', section('Blocked sequences', table));
}

/**
 * The fairness heads of each fair queue (docs/many-tenants.md "Seeing the heads"), in the fair
 * claim's order: per key its virtual time (ahead of the queue's first head by), capped counts
 * of runnable, due and executing rows, and the row the claim serves next, linked, with how long
 * it has been due and its weight. `queue` narrows the page to one queue.
 */
export function fairnessView(
  ctx: ViewContext,
  queues: readonly FairQueueHeads[],
  limit: number,
): Html {
  if (queues.length === 0) {
    return layout(
      ctx,
      'fairness',
      'Fairness',
      section('Fairness heads', html`<p class="muted">No queue has a fairness head.</p>`),
    );
  }
  const sections = queues.map((q) => {
    const first = q.heads[0]?.vtime ?? 0;
    const table = html`<div class="scroll">
      <table class="grid">
        <thead>
          <tr>
            <th>key</th>
            <th class="num">vtime +</th>
            <th class="num">weight</th>
            <th class="num">runnable</th>
            <th class="num">due</th>
            <th class="num">executing</th>
            <th>next row</th>
            <th>due for</th>
          </tr>
        </thead>
        <tbody>
          ${q.heads.map(
            (h) =>
              html`<tr data-fairness-key="${h.key}">
                <td>${h.key}</td>
                <td class="num">${(h.vtime - first).toFixed(2)}</td>
                <td class="num">${h.next ? String(h.next.weight) : ''}</td>
                <td class="num">${capped(h.runnable)}</td>
                <td class="num">${capped(h.due)}</td>
                <td class="num">${capped(h.executing)}</td>
                <td>
                  ${
                    h.next
                      ? html`<a href="${ctx.base}/instances/${h.next.id}">#${h.next.id}</a>`
                      : html`<span class="muted">none due</span>`
                  }
                </td>
                <td>
                  ${h.next ? html`<span title="${h.next.eligibleAt.toISOString()}">${duration(h.next.ageMs)}</span>` : ''}
                </td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>`;
    const shown =
      q.heads.length < q.keys.count || q.keys.capped
        ? html`<p class="muted">
            The first ${String(q.heads.length)} of ${capped(q.keys)} keys in claim order (limit
            ${String(limit)}).
          </p>`
        : html`<p class="muted">${capped(q.keys)} keys with work, in claim order.</p>`;
    return section(`Queue ${q.queue}`, html`${shown}${table}`, `queue-${q.queue}`);
  });
  return layout(ctx, 'fairness', 'Fairness', html`${sections}`);
}

/** Queues with their pause and counts; pause and resume when access allows. */
export function queuesView(ctx: ViewContext, queues: readonly QueueStatus[]): Html {
  const table = html`<div class="scroll">
    <table class="grid">
      <thead>
        <tr>
          <th>queue</th>
          <th>state</th>
          <th class="num">runnable</th>
          <th class="num">due</th>
          <th class="num">executing</th>
          <th>served here</th>
          ${ctx.canAct ? html`<th>action</th>` : ''}
        </tr>
      </thead>
      <tbody>
        ${queues.map(
          (q) =>
            html`<tr data-queue="${q.queue}">
              <td>
                <a href="${ctx.base}/instances${queryString({ queue: q.queue })}">${q.queue}</a>
              </td>
              <td class="wrap">
                ${q.paused ? html`<span class="badge paused">paused</span> ${time(q.pausedAt)}${q.reason ? html` <span class="muted">${q.reason}</span>` : ''}` : html`<span class="badge st-done">running</span>`}
              </td>
              <td class="num">${capped(q.runnable)}</td>
              <td class="num">${capped(q.due)}</td>
              <td class="num">${capped(q.executing)}</td>
              <td>${q.served ? 'yes' : 'no'}</td>
              ${ctx.canAct ? html`<td>${q.paused ? actionForm(ctx, `queues/${encodeURIComponent(q.queue)}/resume`, html`<button type="submit">Resume</button>`) : actionForm(ctx, `queues/${encodeURIComponent(q.queue)}/pause`, html`<input name="reason" placeholder="reason" maxlength="200" /><button type="submit" class="danger">Pause</button>`, { confirm: `Pause queue ${q.queue} on every node?` })}</td>` : ''}
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
  return layout(ctx, 'queues', 'Queues', section('Queues', table));
}

/** What the confirm step of each bulk action says. */
const BULK_LABELS: Readonly<Record<BulkAction, { verb: string; effect: string }>> = {
  cancel: { verb: 'Cancel', effect: 'cancelled (live ones)' },
  retry: { verb: 'Retry', effect: 'retried (failed and cancelled ones)' },
  purge: {
    verb: 'Purge',
    effect:
      'deleted with their inbox, history and streams (ended ones; children of a live parent are kept)',
  },
};

/** The confirm step of a bulk action: the dry-run count, the filter, and the button that does it. */
export function bulkView(
  ctx: ViewContext,
  action: BulkAction,
  fields: FilterFields,
  matched: number | { readonly error: string },
): Html {
  const back = html`<a class="button ghost" href="${ctx.base}/instances${queryString(fields)}"
    >Back to the list</a
  >`;
  const describe = Object.entries(fields).map(
    ([k, v]) => html`<li><b>${k}</b>: ${Array.isArray(v) ? v.join(', ') : v}</li>`,
  );
  if (typeof matched !== 'number') {
    return layout(
      ctx,
      'instances',
      `Bulk ${action}`,
      section(
        'Dry run',
        html`<p class="error" role="alert">${matched.error}</p>
          ${back}`,
      ),
    );
  }
  const hidden = Object.entries(fields).flatMap(([k, v]) =>
    (Array.isArray(v) ? v : [v]).map((x) => html`<input type="hidden" name="${k}" value="${x}" />`),
  );
  const form = actionForm(
    ctx,
    'bulk',
    html`${hidden}<input type="hidden" name="action" value="${action}" /><input
        type="hidden"
        name="expected"
        value="${matched}"
      /><button type="submit" class="danger">
        ${BULK_LABELS[action].verb} ${matched} instance(s)
      </button>
      ${back}`,
    { cls: 'confirm' },
  );
  return layout(
    ctx,
    'instances',
    `Bulk ${action}`,
    section(
      'Dry run',
      html`<p>Filter:</p>
        <ul>
          ${describe.length > 0 ? describe : html`<li>every instance</li>`}
        </ul>
        <p class="big">
          <b id="matched">${matched}</b> instance(s) match and would be
          ${BULK_LABELS[action].effect}.
        </p>
        ${form}`,
    ),
  );
}

/** A page for a missing instance or FSM, or bad input. */
export function messageView(
  ctx: ViewContext,
  current: string,
  title: string,
  message: string,
): Html {
  return layout(
    ctx,
    current,
    title,
    section(title, html`<p class="error" role="alert">${message}</p>`),
  );
}
