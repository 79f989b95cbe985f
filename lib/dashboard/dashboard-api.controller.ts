import {
  BadRequestException,
  Get,
  Inject,
  NotFoundException,
  Param,
  Req,
  Res,
} from '@nestjs/common';

import { InvalidInputError } from '../errors/invalid-input.error';
import { DASHBOARD_CONTEXT, type DashboardContext } from './dashboard-context';
import type { DashboardRequest } from './dashboard-options';
import type {
  FsmDetail,
  FsmSummary,
  InstanceDetail,
  InstancesPage,
  Overview,
} from './dashboard-reads';
import { filterFromQuery } from './filter-query';
import { type DashboardResponse, queryOf, setSecurityHeaders } from './http-exchange';
import type { LimiterStatus } from '../control/limiter-status';
import type { QueueStatus } from '../instance/queue-status';
import type { ScheduleView } from '../cron/schedule-spec';

/**
 * The JSON twin of every page under `<path>/api` (docs/design.md §30), for scripts: the same
 * reads, the same access rule (403 on `'none'`), state through `redact`. Bad filters are 400
 * with the engine's message, a missing instance or FSM 404.
 */
export class DashboardApiController {
  constructor(@Inject(DASHBOARD_CONTEXT) private readonly dashboard: DashboardContext) {}

  private begin(req: DashboardRequest, res: DashboardResponse): void {
    this.dashboard.accessOf(req);
    setSecurityHeaders(res, 'application/json; charset=utf-8');
  }

  @Get('api/overview')
  overview(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<Overview> {
    this.begin(req, res);
    return this.dashboard.reads.overview();
  }

  @Get('api/instances')
  async instances(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<InstancesPage> {
    this.begin(req, res);
    const query = queryOf(req);
    const after =
      typeof query['after'] === 'string' && query['after'] !== '' ? query['after'] : undefined;
    try {
      return await this.dashboard.reads.instances(filterFromQuery(query).filter, after);
    } catch (err) {
      if (err instanceof InvalidInputError) throw new BadRequestException(err.message);
      throw err;
    }
  }

  @Get('api/instances/:id')
  async instance(
    @Param('id') id: string,
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<InstanceDetail> {
    this.begin(req, res);
    const detail = /^[1-9][0-9]{0,18}$/.test(id) ? await this.dashboard.reads.instance(id) : null;
    if (detail === null) throw new NotFoundException(`no instance #${id}`);
    return detail;
  }

  @Get('api/fsms')
  fsms(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): FsmSummary[] {
    this.begin(req, res);
    return this.dashboard.reads.fsms();
  }

  @Get('api/fsms/:name')
  async fsm(
    @Param('name') name: string,
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<FsmDetail> {
    this.begin(req, res);
    const detail = await this.dashboard.reads.fsm(name);
    if (detail === null) throw new NotFoundException(`no FSM ${name} registered on this node`);
    return detail;
  }

  @Get('api/schedules')
  schedules(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<ScheduleView[]> {
    this.begin(req, res);
    return this.dashboard.reads.schedules();
  }

  @Get('api/limiters')
  async limiters(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<LimiterStatus> {
    this.begin(req, res);
    return this.dashboard.reads.limiters();
  }

  @Get('api/queues')
  queues(
    @Req() req: DashboardRequest,
    @Res({ passthrough: true }) res: DashboardResponse,
  ): Promise<QueueStatus[]> {
    this.begin(req, res);
    return this.dashboard.reads.queues();
  }
}
