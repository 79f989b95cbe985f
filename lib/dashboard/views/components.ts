import type { CappedCount } from '../../instance/queue-status';
import { type Html, html, type HtmlValue } from '../html';

/** What every view knows about the request it answers. */
export interface ViewContext {
  /** The dashboard's base path as the browser sees it (no trailing slash; '' at the root). */
  readonly base: string;
  /** The browser's CSRF token (forms and the htmx header carry it). */
  readonly csrf: string;
  /** Access is `'all'`: action buttons and forms are shown. */
  readonly canAct: boolean;
  /** The engine's name. */
  readonly engine: string;
  /** A message left by the last action (signed, read from the redirect's query). */
  readonly flash?: string;
}

/** A date as `YYYY-MM-DD HH:MM:SS` UTC, with the full ISO text as its tooltip. */
export function time(date: Date | null | undefined): Html {
  if (date === null || date === undefined) return html`<span class="muted">—</span>`;
  const iso = date.toISOString();
  return html`<time datetime="${iso}" title="${iso}">${iso.slice(0, 19).replace('T', ' ')}</time>`;
}

/** A duration in ms as `1h 2m`, `3m 4s`, `5.0 s` or `120 ms`. */
export function duration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(ms)} ms`;
  if (abs < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(abs / 1000);
  const sign = ms < 0 ? '-' : '';
  if (s < 3600) return `${sign}${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86_400) return `${sign}${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${sign}${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`;
}

/** A capped count: `1 234` or `10 000+`. */
export function capped(count: CappedCount): string {
  return `${count.count.toLocaleString('en-US')}${count.capped ? '+' : ''}`;
}

/** A status as a coloured badge. */
export function statusBadge(status: string): Html {
  return html`<span class="badge st-${status}">${status.replace(/_/g, ' ')}</span>`;
}

/** The badge of a held instance (docs/operations-control.md "Hold and release"), or nothing. */
export function heldBadge(i: { readonly heldAt: Date | null }): Html | string {
  return i.heldAt !== null ? html` <span class="badge paused">held</span>` : '';
}

/** A JSON value pretty-printed and escaped. */
export function jsonBlock(value: unknown): Html {
  return html`<pre class="json">${JSON.stringify(value, jsonReplacer, 2) ?? 'undefined'}</pre>`;
}

function jsonReplacer(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

/** A hidden CSRF field for a form. */
export function csrfField(ctx: ViewContext): Html {
  return html`<input type="hidden" name="_csrf" value="${ctx.csrf}" />`;
}

/**
 * A POST form to `action` (relative to the base) with the CSRF field; `confirm` asks first
 * (htmx `hx-confirm`, no inline script).
 */
export function actionForm(
  ctx: ViewContext,
  action: string,
  body: HtmlValue,
  options: { confirm?: string; cls?: string } = {},
): Html {
  return html`<form
    method="post"
    action="${ctx.base}/${action}"
    class="${options.cls ?? 'inline'}"
    ${options.confirm ? html` hx-confirm="${options.confirm}"` : ''}
  >
    ${csrfField(ctx)}${body}
  </form>`;
}

/** A section with a heading. */
export function section(title: string, body: HtmlValue, id?: string): Html {
  return html`<section class="card" ${id ? html` id="${id}"` : ''}>
    <h2>${title}</h2>
    ${body}
  </section>`;
}

/**
 * A sparkline as inline SVG (no script, no style attribute: fits the CSP): `values` left to
 * right, scaled to the largest, with the last value as its title.
 */
export function sparkline(
  values: readonly number[],
  label: string,
  cls = 'spark',
  width = 120,
): Html {
  const height = 28;
  if (values.length === 0) return html`<span class="muted">no data yet</span>`;
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : width;
  const points = values
    .map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - (v / max) * (height - 4)).toFixed(1)}`)
    .join(' ');
  const last = values[values.length - 1] ?? 0;
  return html`<svg
    class="${cls}"
    width="${width}"
    height="${height}"
    viewBox="0 0 ${width} ${height}"
    role="img"
    aria-label="${label}"
  >
    <title>${label}: last ${last}, max ${max}</title>
    <polyline points="${points}" fill="none" stroke="currentColor" stroke-width="1.5" />
  </svg>`;
}
