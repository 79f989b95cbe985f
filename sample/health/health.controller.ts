import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';

import { GenDurableHealthIndicator } from '../../lib/health';

/**
 * `GET /health/live`: the process's schedulers loop and heartbeat (restart it if down).
 * `GET /health/ready`: a reaper keeps up and the queues drain (stop routing work if down).
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly gd: GenDurableHealthIndicator,
  ) {}

  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([() => this.gd.schedulerLiveness('schedulers')]);
  }

  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([
      () => this.gd.leaseBacklog('leases'),
      () => this.gd.runnableBacklog('queues', { maxAgeMs: 60_000 }),
    ]);
  }
}
