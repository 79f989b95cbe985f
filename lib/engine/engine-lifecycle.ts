import {
  type BeforeApplicationShutdown,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';

import { EngineHost } from './engine-host';

/**
 * Nest's lifecycle hooks for one engine, and nothing else: init builds it, bootstrap starts
 * it, `beforeApplicationShutdown` drains it (so the host's DataSource is still open while
 * in-flight outcomes commit), `onApplicationShutdown` releases it (docs/design.md §2.1, §17.4).
 */
@Injectable()
export class EngineLifecycle
  implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown
{
  constructor(private readonly host: EngineHost) {}

  onModuleInit(): void {
    this.host.init();
  }

  onApplicationBootstrap(): Promise<void> {
    return this.host.start();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.host.drain();
  }

  onApplicationShutdown(): Promise<void> {
    return this.host.close();
  }
}
