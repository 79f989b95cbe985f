import { Module } from '@nestjs/common';

import { GenDurableConfigurableModule } from './gen-durable.module-definition';

/**
 * Registers one gen-durable engine: `GenDurableModule.forRoot(options)` or
 * `forRootAsync({ name?, imports, inject, useFactory })`. Wiring only.
 */
@Module({})
export class GenDurableModule extends GenDurableConfigurableModule {}
