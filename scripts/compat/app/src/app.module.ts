// The README's module: TypeORM runs the migration at boot, gen-durable runs on its DataSource,
// plus the Terminus checks of gen-durable/health and the README's HTTP error filter.
import { type DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { GenDurableExceptionFilter, GenDurableModule, type GenDurableOptions } from 'gen-durable';
import { GenDurableHealthModule } from 'gen-durable/health';
import type { DataSource } from 'typeorm';

import { CheckoutFsm } from './checkout.fsm.js';
import { OrdersController } from './orders.controller.js';
import { Mailer, SendReceiptJob } from './receipt.job.js';
import { SetupGenDurable1700000000000 } from './setup-gen-durable.migration.js';

export type AppMode = 'worker' | 'test';

@Module({})
export class AppModule {
  static register(mode: AppMode): DynamicModule {
    const redisUrl = process.env['REDIS_URL'];
    const engineOptions: Omit<GenDurableOptions, 'dataSource'> =
      mode === 'test'
        ? { queues: {}, reaper: false, gc: false, poke: 'none' }
        : {
            queues: { default: 4 },
            pollInterval: 100,
            maxPollInterval: 200,
            // The retention defaults (done 1 day, failed 7 days), swept often for the check.
            gc: { interval: 250 },
            // Loads the optional peer ioredis lazily, from whichever build the app loaded.
            ...(redisUrl ? { poke: { redis: redisUrl } } : {}),
          };
    return {
      module: AppModule,
      imports: [
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: process.env['DATABASE_URL'],
          migrations: [SetupGenDurable1700000000000],
          migrationsRun: true,
        }),
        GenDurableModule.forRootAsync({
          inject: [getDataSourceToken()],
          useFactory: (dataSource: DataSource) => ({ dataSource, ...engineOptions }),
        }),
        GenDurableHealthModule.forFeature(),
      ],
      controllers: [OrdersController],
      providers: [
        CheckoutFsm,
        SendReceiptJob,
        Mailer,
        { provide: APP_FILTER, useClass: GenDurableExceptionFilter },
      ],
    };
  }
}
