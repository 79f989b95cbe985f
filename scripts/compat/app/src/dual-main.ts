// ESM app + CommonJS dependency: the process loads both builds of gen-durable. The app registers
// its engine with the ES-module build; the dependency's provider injects it by the CommonJS
// build's token and class and must get the same engine, and the CommonJS build must refuse a
// second engine of the same name (one registry per process).
import 'reflect-metadata';

import { notStrictEqual, rejects, strictEqual } from 'node:assert';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { EngineProbe, genDurable as cjs } from 'compat-dep';
import * as esm from 'gen-durable';
import type { DataSource } from 'typeorm';

import { SetupGenDurable1700000000000 } from './setup-gen-durable.migration.js';

const typeorm = TypeOrmModule.forRoot({
  type: 'postgres',
  url: process.env['DATABASE_URL'],
  migrations: [SetupGenDurable1700000000000],
  migrationsRun: true,
});

@Module({
  imports: [
    typeorm,
    esm.GenDurableModule.forRootAsync({
      inject: [getDataSourceToken()],
      useFactory: (dataSource: DataSource) => ({ dataSource, queues: {}, poke: 'none' as const }),
    }),
  ],
  providers: [EngineProbe],
})
class EsmAppModule {}

@Module({
  imports: [
    typeorm,
    cjs.GenDurableModule.forRootAsync({
      inject: [getDataSourceToken()],
      useFactory: (dataSource: DataSource) => ({ dataSource, queues: {}, poke: 'none' as const }),
    }),
  ],
})
class CjsAppModule {}

async function main(): Promise<void> {
  notStrictEqual(cjs.EngineService, esm.EngineService, 'expected two builds in this process');
  const app = await NestFactory.createApplicationContext(EsmAppModule, { logger: ['error'] });
  try {
    const engine = app.get(esm.EngineService);
    const probe = app.get(EngineProbe);
    strictEqual(probe.byToken, engine, 'the CommonJS token resolves to the ESM engine');
    strictEqual(probe.byClass, engine, 'the CommonJS class resolves to the ESM engine');
    strictEqual(esm.getEngineToken(), cjs.getEngineToken());
    await rejects(
      NestFactory.createApplicationContext(CjsAppModule, { logger: false, abortOnError: false }),
      (err: unknown) => err instanceof cjs.AlreadyStartedError,
      'the CommonJS build must see the engine the ESM build started',
    );
  } finally {
    await app.close();
  }
  process.stdout.write('COMPAT OK dual package: one engine, one registry, both builds\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
