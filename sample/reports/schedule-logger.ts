import {
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { Subscription } from 'rxjs';

import { EngineService } from '../../lib';

/**
 * Shows the cron schedules: one line per stored schedule once the app is up (its expression,
 * zone and next fire), and one line per fire (`cron:fired`).
 */
@Injectable()
export class ScheduleLogger implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Schedules');
  private subscription: Subscription | undefined;

  constructor(private readonly engine: EngineService) {}

  onApplicationBootstrap(): void {
    if (process.env['SAMPLE_QUIET'] === '1') return;
    this.subscription = this.engine.events$.subscribe((event) => {
      if (event.event === 'cron:fired') {
        this.logger.log(
          `${String(event.metadata['name'])} fired for ${String(event.metadata['at'])}`,
        );
      }
    });
  }

  /** The schedules as stored (called by main.ts once the engine has upserted them). */
  async logSchedules(): Promise<void> {
    for (const s of await this.engine.schedules.list()) {
      this.logger.log(
        `${s.name}: "${s.cron}" (${s.tz}) runs ${s.fsm}, next at ${s.nextFireAt.toISOString()}${s.paused ? ' (paused)' : ''}`,
      );
    }
  }

  onApplicationShutdown(): void {
    this.subscription?.unsubscribe();
  }
}
