import { Get, Inject, NotFoundException, Param, Req, Res } from '@nestjs/common';

import { GenDurableError } from '../errors/gen-durable.error';
import { DASHBOARD_CONTEXT, type DashboardContext } from './dashboard-context';
import { dryRun, isBulkAction } from './dashboard-actions';
import type { DashboardRequest } from './dashboard-options';
import { filterFromQuery } from './filter-query';
import { type DashboardResponse, queryOf } from './http-exchange';
import type { ViewContext } from './views/components';
import { FAIRNESS_PAGE_LIMIT } from './dashboard-reads';
import {
  bulkView,
  fairnessView,
  limitersView,
  messageView,
  queuesView,
  schedulesView,
  sequencesView,
} from './views/control.view';
import { fsmsView, fsmView } from './views/fsm.view';
import { instancesView } from './views/instances.view';
import { instanceView } from './views/instance.view';
import { overviewView } from './views/overview.view';

/**
 * The HTML pages (docs/design.md §30). Mounted at the dashboard's path by
 * `GenDurableDashboardModule.register` (which adds `@Controller(path)` and the guards): a real
 * Nest controller, so the host's global guards, interceptors, filters and pipes apply. Answers
 * are strings with headers set through `res.header`, the one reply method Express and Fastify share.
 */
export class DashboardPagesController {
  constructor(@Inject(DASHBOARD_CONTEXT) private readonly dashboard: DashboardContext) {}

  @Get()
  async overview(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<string> {
    const ctx = this.dashboard.viewContext(req, res, 0);
    return overviewView(ctx, await this.dashboard.reads.overview()).text;
  }

  @Get('instances')
  async instances(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<string> {
    const ctx = this.dashboard.viewContext(req, res, 1);
    const query = queryOf(req);
    const after =
      typeof query['after'] === 'string' && query['after'] !== '' ? query['after'] : undefined;
    const choices = {
      fsms: this.dashboard.reads.fsms().map((f) => f.name),
      queues: await this.dashboard.reads.queueNames(),
    };
    let fields = {};
    try {
      const parsed = filterFromQuery(query);
      fields = parsed.fields;
      const page = await this.dashboard.reads.instances(parsed.filter, after);
      return instancesView(ctx, parsed.fields, choices, page, after).text;
    } catch (err) {
      if (!(err instanceof GenDurableError)) throw err;
      return instancesView(ctx, fields, choices, { error: err.message }, after).text;
    }
  }

  @Get('instances/:id')
  async instance(
    @Param('id') id: string,
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<string> {
    const ctx = this.dashboard.viewContext(req, res, 2);
    const detail = /^[1-9][0-9]{0,18}$/.test(id) ? await this.dashboard.reads.instance(id) : null;
    if (detail === null) throw new NotFoundException(`no instance #${id}`);
    return instanceView(ctx, detail).text;
  }

  @Get('fsms')
  fsms(@Req() req: DashboardRequest, @Res({ passthrough: true }) res: DashboardResponse): string {
    const ctx = this.dashboard.viewContext(req, res, 1);
    return fsmsView(ctx, this.dashboard.reads.fsms()).text;
  }

  @Get('fsms/:name')
  async fsm(
    @Param('name') name: string,
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<string> {
    const ctx = this.dashboard.viewContext(req, res, 2);
    const detail = await this.dashboard.reads.fsm(name);
    if (detail === null) throw new NotFoundException(`no FSM ${name} registered on this node`);
    return fsmView(ctx, detail).text;
  }

  @Get('schedules')
  async schedules(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<string> {
    const ctx = this.dashboard.viewContext(req, res, 1);
    return schedulesView(ctx, await this.dashboard.reads.schedules()).text;
  }

  @Get('limiters')
  async limiters(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<string> {
    const ctx = this.dashboard.viewContext(req, res, 1);
    return limitersView(ctx, await this.dashboard.reads.limiters()).text;
  }

  @Get('sequences')
  async sequences(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<string> {
    const ctx = this.dashboard.viewContext(req, res, 1);
    return sequencesView(ctx, await this.dashboard.reads.sequences()).text;
  }

  /** The fairness heads of each fair queue; `?queue=` narrows it to one (docs/many-tenants.md). */
  @Get('fairness')
  async fairness(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<string> {
    const ctx = this.dashboard.viewContext(req, res, 1);
    const q = queryOf(req)['queue'];
    const queue = typeof q === 'string' && q !== '' ? q : undefined;
    const heads = await this.dashboard.reads.fairness(queue);
    return fairnessView(ctx, heads, FAIRNESS_PAGE_LIMIT).text;
  }

  @Get('queues')
  async queues(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<string> {
    const ctx = this.dashboard.viewContext(req, res, 1);
    return queuesView(ctx, await this.dashboard.reads.queues()).text;
  }

  /** The confirm step of a bulk cancel, retry or purge: the dry-run count of the current filter. */
  @Get('bulk')
  async bulk(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<string> {
    const ctx: ViewContext = this.dashboard.viewContext(req, res, 1);
    const query = queryOf(req);
    const action = query['action'];
    if (!isBulkAction(action)) {
      return messageView(
        ctx,
        'instances',
        'Bulk action',
        "action must be 'cancel', 'retry' or 'purge'",
      ).text;
    }
    if (!ctx.canAct) {
      return messageView(
        ctx,
        'instances',
        'Bulk action',
        'read-only access: actions are not available',
      ).text;
    }
    let fields = {};
    try {
      const parsed = filterFromQuery(query);
      fields = parsed.fields;
      return bulkView(
        ctx,
        action,
        parsed.fields,
        await dryRun(this.dashboard.engine, action, parsed.filter),
      ).text;
    } catch (err) {
      if (!(err instanceof GenDurableError)) throw err;
      return bulkView(ctx, action, fields, { error: err.message }).text;
    }
  }
}
