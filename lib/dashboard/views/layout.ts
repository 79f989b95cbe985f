import { type Html, html, type HtmlValue } from '../html';
import type { ViewContext } from './components';

const NAV: readonly (readonly [string, string])[] = [
  ['', 'Overview'],
  ['instances', 'Instances'],
  ['fsms', 'FSMs'],
  ['schedules', 'Schedules'],
  ['limiters', 'Limiters'],
  ['sequences', 'Sequences'],
  ['fairness', 'Fairness'],
  ['queues', 'Queues'],
];

/**
 * The page around every view: the stylesheet and htmx from the dashboard's own assets (no
 * inline script or style: the CSP forbids both), htmx configured by its meta tag not to inject
 * styles or evaluate code, every link and form boosted, the CSRF token sent by htmx as a header.
 */
export function layout(ctx: ViewContext, current: string, title: string, body: HtmlValue): Html {
  const config = JSON.stringify({
    includeIndicatorStyles: false,
    allowEval: false,
    allowScriptTags: false,
    historyCacheSize: 0,
    refreshOnHistoryMiss: true,
    selfRequestsOnly: true,
  });
  const headers = JSON.stringify({ 'X-CSRF-Token': ctx.csrf });
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="htmx-config" content="${config}" />
        <title>${title} · gen-durable</title>
        <link rel="stylesheet" href="${ctx.base}/assets/dashboard.css" />
        <link rel="icon" href="data:," />
        <script src="${ctx.base}/assets/htmx.min.js" defer></script>
      </head>
      <body hx-boost="true" hx-headers="${headers}">
        <header class="top">
          <a class="brand" href="${ctx.base}/">gen-durable</a>
          <nav>
            ${NAV.map(([href, label]) => html`<a href="${ctx.base}/${href}" ${href === current ? html` class="on" aria-current="page"` : ''}>${label}</a>`)}
          </nav>
          <span class="who"
            >engine <b>${ctx.engine}</b> · ${ctx.canAct ? 'read & act' : 'read only'}</span
          >
        </header>
        <main>
          ${ctx.flash ? html`<p class="flash" role="status">${ctx.flash}</p>` : ''}
          <h1>${title}</h1>
          ${body}
        </main>
      </body>
    </html>`;
}
