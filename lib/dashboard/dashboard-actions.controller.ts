import { Inject, Param, Post, Redirect, Req } from '@nestjs/common';

import { GenDurableError } from '../errors/gen-durable.error';
import { DashboardActions, isBulkAction } from './dashboard-actions';
import { DASHBOARD_CONTEXT, type DashboardContext } from './dashboard-context';
import type { DashboardRequest } from './dashboard-options';
import { filterFromQuery, type FilterQuery } from './filter-query';
import { basePathOf, bodyOf } from './http-exchange';

/** Where an action's redirect goes. */
interface RedirectTo {
  readonly url: string;
  readonly statusCode: number;
}

/**
 * The actions (docs/design.md §30): POST only, refused with 403 unless access is `'all'` and
 * the request passes the CSRF check; each answers 303 to the page it came from with the
 * outcome as a signed message (`@Redirect`, which both adapters implement).
 */
export class DashboardActionsController {
  private readonly actions: DashboardActions;

  constructor(@Inject(DASHBOARD_CONTEXT) private readonly dashboard: DashboardContext) {
    this.actions = new DashboardActions(dashboard.engine);
  }

  private async run(
    req: DashboardRequest,
    depth: number,
    page: string,
    act: (actor: string | undefined) => Promise<string>,
  ): Promise<RedirectTo> {
    const actor = this.dashboard.authorizeAction(req);
    let message: string;
    try {
      message = await act(actor);
    } catch (err) {
      if (!(err instanceof GenDurableError)) throw err;
      message = `refused: ${err.message}`;
    }
    const base = basePathOf(req, depth);
    const sep = page.includes('?') ? '&' : '?';
    return {
      url: `${base}/${page}${sep}flash=${encodeURIComponent(this.dashboard.flash.sign(message))}`,
      statusCode: 303,
    };
  }

  @Post('instances/:id/cancel')
  @Redirect()
  cancel(@Param('id') id: string, @Req() req: DashboardRequest): Promise<RedirectTo> {
    return this.run(req, 3, `instances/${encodeURIComponent(id)}`, (actor) =>
      this.actions.cancel(id, bodyOf(req), actor),
    );
  }

  @Post('instances/:id/retry')
  @Redirect()
  retry(@Param('id') id: string, @Req() req: DashboardRequest): Promise<RedirectTo> {
    return this.run(req, 3, `instances/${encodeURIComponent(id)}`, (actor) =>
      this.actions.retry(id, bodyOf(req), actor),
    );
  }

  @Post('instances/:id/hold')
  @Redirect()
  hold(@Param('id') id: string, @Req() req: DashboardRequest): Promise<RedirectTo> {
    return this.run(req, 3, `instances/${encodeURIComponent(id)}`, (actor) =>
      this.actions.hold(id, bodyOf(req), actor),
    );
  }

  @Post('instances/:id/release')
  @Redirect()
  release(@Param('id') id: string, @Req() req: DashboardRequest): Promise<RedirectTo> {
    return this.run(req, 3, `instances/${encodeURIComponent(id)}`, (actor) =>
      this.actions.release(id, actor),
    );
  }

  /** Back to the list: the instance is gone. */
  @Post('instances/:id/purge')
  @Redirect()
  purge(@Param('id') id: string, @Req() req: DashboardRequest): Promise<RedirectTo> {
    return this.run(req, 3, 'instances', (actor) => this.actions.purge(id, actor));
  }

  @Post('instances/:id/signal')
  @Redirect()
  signal(@Param('id') id: string, @Req() req: DashboardRequest): Promise<RedirectTo> {
    return this.run(req, 3, `instances/${encodeURIComponent(id)}`, () =>
      this.actions.signal(id, bodyOf(req)),
    );
  }

  @Post('instances/:id/fork')
  @Redirect()
  async fork(@Param('id') id: string, @Req() req: DashboardRequest): Promise<RedirectTo> {
    let forked: string | null = null;
    const to = await this.run(req, 3, `instances/${encodeURIComponent(id)}`, async (actor) => {
      forked = await this.actions.fork(id, bodyOf(req), actor);
      return `forked #${id} as #${forked}`;
    });
    if (forked === null) return to;
    return {
      ...to,
      url: to.url.replace(
        `/instances/${encodeURIComponent(id)}?`,
        `/instances/${forked as string}?`,
      ),
    };
  }

  @Post('queues/:queue/pause')
  @Redirect()
  pause(@Param('queue') queue: string, @Req() req: DashboardRequest): Promise<RedirectTo> {
    return this.run(req, 3, 'queues', (actor) => this.actions.pause(queue, bodyOf(req), actor));
  }

  @Post('queues/:queue/resume')
  @Redirect()
  resume(@Param('queue') queue: string, @Req() req: DashboardRequest): Promise<RedirectTo> {
    return this.run(req, 3, 'queues', () => this.actions.resume(queue));
  }

  /** The confirmed bulk action: the same filter as its dry run (form fields), `action` cancel, retry or purge. */
  @Post('bulk')
  @Redirect()
  bulk(@Req() req: DashboardRequest): Promise<RedirectTo> {
    const form = bodyOf(req);
    let parsed: FilterQuery | undefined;
    try {
      parsed = filterFromQuery(form);
    } catch {
      parsed = undefined; // reported by the action below, after the access and CSRF checks
    }
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(parsed?.fields ?? {})) {
      for (const x of Array.isArray(v) ? v : [v]) query.append(k, x);
    }
    const action = form['action'];
    return this.run(
      req,
      1,
      `instances${query.size > 0 ? `?${query.toString()}` : ''}`,
      async (actor) => {
        if (!isBulkAction(action)) {
          return "refused: action must be 'cancel', 'retry' or 'purge'";
        }
        const { filter } = parsed ?? filterFromQuery(form);
        const r = await this.actions.bulk(action, filter, actor);
        return `bulk ${action}: ${r.matched} matched, ${r.changed} changed`;
      },
    );
  }
}
