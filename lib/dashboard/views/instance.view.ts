import { instancePosition } from '../../control/instance-position';
import type { InstanceView } from '../../instance/instance-view';
import type { ChildNode, InstanceDetail } from '../dashboard-reads';
import { type Html, html } from '../html';
import {
  actionForm,
  duration,
  heldBadge,
  jsonBlock,
  section,
  statusBadge,
  time,
  type ViewContext,
} from './components';

import { layout } from './layout';

const TERMINAL = new Set(['done', 'failed', 'cancelled']);

function rowTable(ctx: ViewContext, i: InstanceView): Html {
  const rows: [string, Html | string][] = [
    ['fsm', `${i.fsm} v${i.fsmVersion}`],
    ['status', html`${statusBadge(i.status)}${heldBadge(i)}`],
    ['step', instancePosition(i)],
    ['attempt', String(i.attempt)],
    ['queue', `${i.queue} (priority ${i.priority})`],
    ['eligible at', time(i.eligibleAt)],
    ['deadline', time(i.deadline)],
    ['correlation key', i.correlationKey ?? '—'],
    [
      'parent',
      i.parentId ? html`<a href="${ctx.base}/instances/${i.parentId}">#${i.parentId}</a>` : '—',
    ],
    ['children pending', String(i.childrenPending)],
    ['awaits', i.awaits?.join(', ') ?? '—'],
    ['await deadline', time(i.awaitDeadline)],
    ['concurrency key', i.concurrencyKey ?? '—'],
    ['rate limit', i.rateLimit ? `${i.rateLimit} (weight ${i.weight})` : '—'],
    ['locked by', i.lockedBy ?? '—'],
    ['lease expires', time(i.leaseExpiresAt)],
    ['reaps', String(i.reaps)],
    ['cancel requested', time(i.cancelRequestedAt)],
    ['cancel reason', i.cancelReason ?? '—'],
    ['held', i.heldAt ? html`${time(i.heldAt)}${i.heldReason ? ` (${i.heldReason})` : ''}` : '—'],
    ['inserted', time(i.insertedAt)],
    ['updated', time(i.updatedAt)],
  ];
  return html`<table class="kv">
      ${rows.map(
        ([k, v]) =>
          html`<tr>
            <th>${k}</th>
            <td>${v}</td>
          </tr>`,
      )}
    </table>
    ${i.lastError ? html`<p class="error">${i.lastError}</p>` : ''}`;
}

function reasonText(r: unknown): Html | string {
  if (typeof r === 'string') return r;
  const { code, message, text, blocking } = (r ?? {}) as Record<string, unknown>;
  const sentence = typeof text === 'string' ? text : message;
  if (typeof sentence !== 'string') return jsonBlock(r);
  return html`<span class="badge${blocking === true ? ' st-failed' : ''}"
      >${typeof code === 'string' ? code : ''}</span
    >
    ${sentence}`;
}

function explanationOf(value: unknown): Html {
  const reasons = (value as { reasons?: unknown }).reasons;
  const summary = (value as { summary?: unknown }).summary;
  if (Array.isArray(reasons)) {
    return html`${typeof summary === 'string' ? html`<p><b>${summary}</b></p>` : ''}
      <ul class="reasons">
        ${reasons.map((r) => html`<li>${reasonText(r)}</li>`)}
      </ul>
      <details>
        <summary>raw</summary>
        ${jsonBlock(value)}
      </details>`;
  }
  return jsonBlock(value);
}

function tree(ctx: ViewContext, nodes: readonly ChildNode[], more: boolean): Html {
  if (nodes.length === 0) return html`<p class="muted">No children.</p>`;
  return html`<ul class="tree">
    ${nodes.map((n) => html`<li><a href="${ctx.base}/instances/${n.instance.id}">#${n.instance.id}</a> ${n.instance.fsm} · ${instancePosition(n.instance)} ${statusBadge(n.instance.status)}${n.instance.correlationKey ? html` <span class="key">${n.instance.correlationKey}</span>` : ''}${n.children.length > 0 || n.more ? tree(ctx, n.children, n.more) : ''}</li>`)}${more ? html`<li class="muted">more children… <a href="${ctx.base}/instances?parentId=${nodes[0]?.instance.parentId ?? ''}">list them</a></li>` : ''}
  </ul>`;
}

function historyOf(detail: InstanceDetail): Html {
  if (detail.history.length === 0) {
    return html`<p class="muted">
      No history recorded: the default <code>history</code> level, <code>'failures'</code>, records
      nothing for a run without failures (set <code>history: 'transitions'</code> on the FSM for a
      timeline).
    </p>`;
  }
  return html`<ol class="timeline">
    ${detail.history.map(
      (h) =>
        html`<li>
          <span class="kind">${h.kind}</span> ${time(h.at)}
          <span class="muted">step</span>
          ${h.step ?? '—'}${h.nextStep ? html` → ${h.nextStep}` : ''}${h.attempt !== null ? html` <span class="muted">attempt ${h.attempt}</span>` : ''}${h.outcome ? html` ${statusBadge(h.outcome)}` : ''}${h.actor ? html` <span class="actor">by ${h.actor}</span>` : ''}${h.worker ? html` <span class="muted">on ${h.worker}</span>` : ''}${h.error ? html`<div class="error">${h.error.name}: ${h.error.message}</div>` : ''}${
            h.state !== null && h.state !== undefined
              ? html`<details>
                  <summary>state</summary>
                  ${jsonBlock(h.state)}
                </details>`
              : ''
          }
        </li>`,
    )}
  </ol>`;
}

function inboxOf(detail: InstanceDetail): Html {
  if (detail.inbox.length === 0) return html`<p class="muted">No signal delivered.</p>`;
  return html`<div class="scroll">
    <table class="grid">
      <thead>
        <tr>
          <th>#</th>
          <th>name</th>
          <th>consumed</th>
          <th>dedup key</th>
          <th>delivered</th>
          <th>payload</th>
        </tr>
      </thead>
      <tbody>
        ${detail.inbox.map(
          (s) =>
            html`<tr>
              <td>${s.id}</td>
              <td>${s.name}</td>
              <td>
                ${s.consumedAt ? html`<span class="badge st-done">consumed</span> ${time(s.consumedAt)}` : html`<span class="badge st-runnable">pending</span>`}
              </td>
              <td>${s.dedupKey ?? ''}</td>
              <td>${time(s.insertedAt)}</td>
              <td>${jsonBlock(s.payload)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

/** The retry form's default: its own step, or — it ended parked — the same wait again (docs/design.md §27.3). */
function retryDefault(i: InstanceView): string {
  return i.awaits && i.awaits.length > 0
    ? `its own (${instancePosition({ ...i, status: 'awaiting_signal' })})`
    : `its own (${i.step})`;
}

function stepOptions(steps: readonly string[], current: string, blank: string): Html {
  return html`<option value="">${blank}</option>
    ${steps.map((s) => html`<option value="${s}">${s}${s === current ? ' (current)' : ''}</option>`)}`;
}

function actions(ctx: ViewContext, d: InstanceDetail): Html {
  const i = d.instance;
  const at = `instances/${i.id}`;
  const live = !TERMINAL.has(i.status);
  const parts: Html[] = [];
  if (live) {
    parts.push(
      actionForm(
        ctx,
        `${at}/cancel`,
        html`<h3>Cancel</h3>
          <label>Reason<input name="reason" maxlength="500" placeholder="optional" /></label>
          <label
            >Children<select name="children">
              <option value="cascade">cascade</option>
              <option value="detach">detach</option>
              <option value="keep">keep</option>
            </select></label
          >
          <label
            >Mode<select name="mode">
              <option value="cooperative">cooperative</option>
              <option value="fence">fence</option>
            </select></label
          >
          <button type="submit" class="danger">Cancel instance</button>`,
        { confirm: `Cancel instance #${i.id}?`, cls: 'action' },
      ),
    );
    parts.push(
      i.heldAt === null
        ? actionForm(
            ctx,
            `${at}/hold`,
            html`<h3>Hold</h3>
              <p class="muted">No node claims it until released; it still takes signals.</p>
              <label>Reason<input name="reason" maxlength="500" placeholder="optional" /></label>
              <button type="submit">Hold instance</button>`,
            { cls: 'action' },
          )
        : actionForm(
            ctx,
            `${at}/release`,
            html`<h3>Release</h3>
              <p class="muted">Held: claimable again once released.</p>
              <button type="submit">Release instance</button>`,
            { cls: 'action' },
          ),
    );
    parts.push(
      actionForm(
        ctx,
        `${at}/signal`,
        html`<h3>Send a signal</h3>
          <label>Name<input name="name" required value="${i.awaits?.[0] ?? ''}" /></label>
          <label
            >Payload (JSON)<textarea name="payload" rows="3" spellcheck="false">{}</textarea>
          </label>
          <label>Dedup key<input name="dedupKey" placeholder="optional" /></label>
          <button type="submit">Send signal</button>`,
        { cls: 'action' },
      ),
    );
  }
  if (i.status === 'failed' || i.status === 'cancelled') {
    parts.push(
      actionForm(
        ctx,
        `${at}/retry`,
        html`<h3>Retry</h3>
          <label
            >From step<select name="step">
              ${stepOptions(d.steps, i.step, retryDefault(i))}
            </select></label
          >
          <label class="check"
            ><input type="checkbox" name="detach" value="true" /> detach from a parent that moved
            on</label
          >
          <button type="submit">Retry instance</button>`,
        { cls: 'action' },
      ),
    );
  }
  if (!live) {
    parts.push(
      actionForm(
        ctx,
        `${at}/purge`,
        html`<h3>Purge</h3>
          <p class="muted">
            Deletes the instance with its inbox, history and streams, as GC would.
          </p>
          <button type="submit" class="danger">Purge instance</button>`,
        {
          confirm: `Purge instance #${i.id}? Its row, inbox, history and streams are deleted.`,
          cls: 'action',
        },
      ),
    );
  }
  parts.push(
    actionForm(
      ctx,
      `${at}/fork`,
      html`<h3>Fork from a step</h3>
        <label
          >Step<select name="step">
            ${stepOptions(d.steps, i.step, `its own (${i.step})`)}
          </select></label
        >
        <label
          >State (JSON)<textarea name="state" rows="6" spellcheck="false">
${JSON.stringify(i.state, null, 2)}</textarea>
        </label>
        <button type="submit">Fork new instance</button>`,
      { cls: 'action' },
    ),
  );
  return section('Actions', html`<div class="actions">${parts}</div>`, 'actions');
}

/** One instance: row, "why isn't it running?", state, progress, inbox, children, history, actions. */
export function instanceView(ctx: ViewContext, d: InstanceDetail): Html {
  const i = d.instance;
  const progress = (i as { progress?: unknown; progressAt?: Date | null }).progress;
  const progressAt = (i as { progressAt?: Date | null }).progressAt;
  const age = Date.now() - i.updatedAt.getTime();
  const body = html`<p class="sub">
      ${statusBadge(i.status)} ${i.fsm} at <b class="position">${instancePosition(i)}</b> · updated
      ${duration(age)} ago
    </p>
    <div class="cols">
      ${section('Row', rowTable(ctx, i))}
      <div>
        ${TERMINAL.has(i.status) ? '' : section("Why isn't it running?", explanationOf(d.explanation), 'why')}
        ${section('State', jsonBlock(i.state), 'state')}
        ${i.result !== null ? section('Result', jsonBlock(i.result)) : ''}
        ${
          progress !== undefined && progress !== null
            ? section(
                'Progress',
                html`${jsonBlock(progress)}
                  <p class="muted">at ${time(progressAt ?? null)}</p>`,
              )
            : ''
        }
      </div>
    </div>
    ${ctx.canAct ? actions(ctx, d) : ''} ${section('Inbox', inboxOf(d), 'inbox')}
    ${section('Children', tree(ctx, d.children, d.moreChildren), 'children')}
    ${section('History', historyOf(d), 'history')}`;
  return layout(ctx, 'instances', `Instance #${i.id}`, body);
}
