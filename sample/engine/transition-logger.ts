import {
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { Subscription } from 'rxjs';

import { EngineService } from '../../lib';

/**
 * Logs every committed step (`step:stop` telemetry) so a new user watches instances move:
 * `checkout#12 start → await`.
 */
@Injectable()
export class TransitionLogger implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Transitions');
  private subscription: Subscription | undefined;

  constructor(private readonly engine: EngineService) {}

  onApplicationBootstrap(): void {
    if (process.env['SAMPLE_QUIET'] === '1') return;
    this.subscription = this.engine.events$.subscribe((event) => {
      if (event.event === 'step:stop') {
        const m = event.metadata;
        this.logger.log(
          `${String(m['fsm'])}#${String(m['id'])} ${String(m['step'])} → ${String(m['kind'])}`,
        );
      } else if (
        event.event === 'outcome:stale' ||
        event.event === 'executor:crash' ||
        event.event === 'reaper:reaped'
      ) {
        this.logger.warn(`${event.event} ${JSON.stringify(event.metadata)}`);
      }
    });
  }

  onApplicationShutdown(): void {
    this.subscription?.unsubscribe();
  }
}
