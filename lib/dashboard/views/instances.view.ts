import { instancePosition } from '../../control/instance-position';
import { ALL_STATUSES } from '../../gen-durable.constants';
import type { InstanceView } from '../../instance/instance-view';
import type { InstancesPage } from '../dashboard-reads';
import type { FilterFields } from '../filter-query';
import { type Html, html, queryString } from '../html';
import { capped, heldBadge, section, statusBadge, time, type ViewContext } from './components';
import { layout } from './layout';

/** What the filter form offers: the registered FSMs and the known queues. */
export interface FilterChoices {
  readonly fsms: readonly string[];
  readonly queues: readonly string[];
}

function field(fields: FilterFields, name: keyof FilterFields): string {
  const v = fields[name];
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

function filterForm(ctx: ViewContext, fields: FilterFields, choices: FilterChoices): Html {
  const statuses = new Set(
    Array.isArray(fields.status) ? fields.status : fields.status ? [fields.status] : [],
  );
  const input = (name: keyof FilterFields, label: string, type = 'text', list?: string) =>
    html`<label
      >${label}<input
        type="${type}"
        name="${name}"
        value="${field(fields, name)}"
        ${list ? html` list="${list}"` : ''}
    /></label>`;
  return html`<form
    id="filters"
    class="filters"
    method="get"
    action="${ctx.base}/instances"
    hx-target="#list"
    hx-select="#list"
    hx-swap="outerHTML"
    hx-push-url="true"
  >
    <datalist id="fsm-names">
      ${choices.fsms.map((f) => html`<option value="${f}"></option>`)}
    </datalist>
    <datalist id="queue-names">
      ${choices.queues.map((q) => html`<option value="${q}"></option>`)}
    </datalist>
    <div class="row">
      ${input('fsm', 'FSM', 'text', 'fsm-names')} ${input('queue', 'Queue', 'text', 'queue-names')}
      ${input('step', 'Step')} ${input('correlationKeyPrefix', 'Key prefix')}
      ${input('parentId', 'Parent id')} ${input('errorContains', 'Error contains')}
      ${input('createdAfter', 'Created after (UTC)', 'datetime-local')}
      ${input('createdBefore', 'Created before (UTC)', 'datetime-local')}
    </div>
    <fieldset class="statuses">
      <legend>Status</legend>
      ${ALL_STATUSES.map((s) => html`<label class="check"><input type="checkbox" name="status" value="${s}" ${statuses.has(s) ? ' checked' : ''} />${statusBadge(s)}</label>`)}
    </fieldset>
    <div class="row">
      <button type="submit">Apply filters</button
      ><a class="button ghost" href="${ctx.base}/instances">Clear</a>
    </div>
  </form>`;
}

/** The rows of an instance list (also used for children). */
export function instanceRows(ctx: ViewContext, items: readonly InstanceView[]): Html {
  return html`<div class="scroll">
    <table class="grid list">
      <thead>
        <tr>
          <th>id</th>
          <th>fsm</th>
          <th>step</th>
          <th>status</th>
          <th>queue</th>
          <th>key</th>
          <th>attempt</th>
          <th>updated</th>
          <th>error</th>
        </tr>
      </thead>
      <tbody>
        ${items.map(
          (i) =>
            html`<tr data-id="${i.id}">
              <td><a href="${ctx.base}/instances/${i.id}">#${i.id}</a></td>
              <td>${i.fsm}</td>
              <td class="step">${instancePosition(i)}</td>
              <td>${statusBadge(i.status)}${heldBadge(i)}</td>
              <td>${i.queue}</td>
              <td class="key">${i.correlationKey ?? ''}</td>
              <td class="num">${i.attempt}</td>
              <td>${time(i.updatedAt)}</td>
              <td class="err">${i.lastError ?? ''}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

/** Instances: every filter of docs/design.md §27.7, keyset pages, bulk actions by the filter. */
export function instancesView(
  ctx: ViewContext,
  fields: FilterFields,
  choices: FilterChoices,
  page: InstancesPage | { readonly error: string },
  after: string | undefined,
): Html {
  const q = (extra: Record<string, string | undefined>) => queryString({ ...fields, ...extra });
  let list: Html;
  if ('error' in page) {
    list = html`<div id="list"><p class="error" role="alert">${page.error}</p></div>`;
  } else {
    const pager = html`<nav class="pager">
      ${after ? html`<a href="${ctx.base}/instances${q({})}">« first page</a>` : ''}${page.next ? html`<a class="next" href="${ctx.base}/instances${q({ after: page.next })}">next page »</a>` : ''}
    </nav>`;
    const bulk = ctx.canAct
      ? html`<span class="bulk"
          >Bulk:
          <a class="button small" href="${ctx.base}/bulk${q({ action: 'cancel' })}"
            >Cancel matching…</a
          >
          <a class="button small" href="${ctx.base}/bulk${q({ action: 'retry' })}"
            >Retry matching…</a
          >
          <a class="button small" href="${ctx.base}/bulk${q({ action: 'purge' })}"
            >Purge matching…</a
          ></span
        >`
      : '';
    list = html`<div id="list">
      <p class="summary">
        <b>${capped(page.total)}</b> matching · showing ${page.items.length}${bulk}
      </p>
      ${page.items.length === 0 ? html`<p class="muted">No instance matches.</p>` : instanceRows(ctx, page.items)}
      ${pager}
    </div>`;
  }
  return layout(
    ctx,
    'instances',
    'Instances',
    html`${section('Filters', filterForm(ctx, fields, choices))}
      <section class="card">${list}</section>`,
  );
}
