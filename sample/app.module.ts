import { Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';

import { GenDurableCallbacksModule, GenDurableModule, GenDurableStreamsModule } from '../lib';
import { GenDurableDashboardModule } from '../lib/dashboard';
import { GenDurableHealthModule } from '../lib/health';

import { AppController } from './app.controller';
import { SAMPLE_STREAMS_PATH } from './assistant/assistant.controller';
import { AssistantModule } from './assistant/assistant.module';
import { CheckoutModule } from './checkout/checkout.module';
import { DashboardDemoSeeder } from './dashboard/dashboard-demo-seeder';
import { DemoDashboardGuard } from './dashboard/demo-dashboard.guard';
import { DemoSeeder } from './demo/demo-seeder';
import { NotificationsModule } from './notifications/notifications.module';
import { ReportsModule } from './reports/reports.module';
import { sampleDatabaseOptions } from './database';
import { sampleEngineOptions } from './engine/engine-options';
import { TransitionLogger } from './engine/transition-logger';
import { HealthController } from './health/health.controller';

/**
 * The sample app: TypeORM on DATABASE_URL with the gen-durable migration run at boot, the
 * engine over TypeORM's DataSource, Terminus health endpoints, the dashboard at /durable, the
 * SSE route of durable streams and the signed callbacks route, and the sample FSMs.
 */
@Module({
  imports: [
    TypeOrmModule.forRootAsync({ useFactory: () => sampleDatabaseOptions() }),
    GenDurableModule.forRootAsync({
      inject: [getDataSourceToken()],
      useFactory: (dataSource: DataSource) => sampleEngineOptions(dataSource),
    }),
    GenDurableHealthModule.forFeature(),
    // The dashboard at /durable (docs/dashboard.md) behind a demo token guard; the demo lets
    // every holder of the token act. A real app passes its own guards, access and actor.
    GenDurableDashboardModule.register({
      path: 'durable',
      guards: [DemoDashboardGuard],
      access: () => 'all',
      actor: () => 'sample-demo',
    }),
    // The assistant's stream over SSE (docs/streams.md) and its signed approval URLs
    // (docs/callbacks.md). Open for the demo: no guards, so anyone who can reach the sample
    // reads any instance's stream; a real app passes guards that check the caller may read
    // that instance. The callbacks route needs none beyond the signed token it checks.
    GenDurableStreamsModule.register({ path: SAMPLE_STREAMS_PATH }),
    GenDurableCallbacksModule.register({ path: 'durable/callbacks' }),
    AssistantModule,
    CheckoutModule,
    NotificationsModule,
    ReportsModule,
  ],
  controllers: [AppController, HealthController],
  providers: [TransitionLogger, DemoSeeder, DashboardDemoSeeder],
})
export class AppModule implements OnApplicationShutdown {
  private readonly logger = new Logger('Sample');

  onApplicationShutdown(signal?: string): void {
    this.logger.log(`shut down${signal ? ` on ${signal}` : ''}`);
  }
}
