import { type DynamicModule, Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';

import { getEngineToken } from '../gen-durable.constants';
import {
  GEN_DURABLE_HEALTH_ENGINE,
  GenDurableHealthIndicator,
} from './gen-durable-health.indicator';

/**
 * Provides `GenDurableHealthIndicator` for one engine (the default one unless `engine` names
 * another), and re-exports TerminusModule (HealthCheckService). Imported from `gen-durable/health`, so apps without @nestjs/terminus never load it.
 */
@Module({})
export class GenDurableHealthModule {
  static forFeature(options: { engine?: string } = {}): DynamicModule {
    return {
      module: GenDurableHealthModule,
      imports: [TerminusModule],
      providers: [
        { provide: GEN_DURABLE_HEALTH_ENGINE, useExisting: getEngineToken(options.engine) },
        GenDurableHealthIndicator,
      ],
      exports: [GenDurableHealthIndicator, TerminusModule],
    };
  }
}
