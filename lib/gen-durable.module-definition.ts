import { ConfigurableModuleBuilder, type Provider, type Type } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';

import {
  DEFAULT_ENGINE_NAME,
  GEN_DURABLE_ENGINE_NAME,
  GEN_DURABLE_MODULE_OPTIONS,
} from './gen-durable.constants';
import { EngineHost } from './engine/engine-host';
import { EngineLifecycle } from './engine/engine-lifecycle';
import { EngineService } from './engine/engine.service';
import { getEngineToken } from './gen-durable.constants';
import { engineServiceClasses } from './engine/engine-service-classes';
import type { GenDurableOptions } from './options/gen-durable-options.interface';
import { MODULE_OPTION_TABLE } from './options/option-table';

export interface GenDurableModuleExtras {
  /** Global module. Default true (lib/options/option-table.ts). */
  isGlobal?: boolean;
  /** Engine name; beside `useFactory` in forRootAsync because tokens need it early. */
  name?: string;
}

/**
 * No extra given: `name` falls back to DEFAULT_ENGINE_NAME (the table's default), `isGlobal` to
 * its declaration in lib/options/option-table.ts.
 */
const UNSET_EXTRAS: GenDurableModuleExtras = { isGlobal: undefined, name: undefined };

export const {
  ConfigurableModuleClass: GenDurableConfigurableModule,
  OPTIONS_TYPE: GEN_DURABLE_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: GEN_DURABLE_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<GenDurableOptions>({
  moduleName: 'GenDurable',
  optionsInjectionToken: GEN_DURABLE_MODULE_OPTIONS,
})
  .setClassMethodName('forRoot')
  .setExtras<GenDurableModuleExtras>(UNSET_EXTRAS, (definition, extras) => {
    const name = extras.name ?? DEFAULT_ENGINE_NAME;
    const token = getEngineToken(name);
    const isDefault = name === DEFAULT_ENGINE_NAME;
    const providers: Provider[] = [
      ...(definition.providers ?? []),
      EngineHost,
      EngineLifecycle,
      { provide: GEN_DURABLE_ENGINE_NAME, useValue: name },
      // A named engine is provided under its token only: a provider keyed by the EngineService
      // class in its module would answer `app.get(EngineService)`, which looks the class up in
      // every module and takes the last one registered (docs/design.md §2.1).
      isDefault
        ? { provide: token, useExisting: EngineService }
        : { provide: token, useClass: EngineService },
    ];
    const exported: Array<string | Type> = [token];
    if (isDefault) {
      // The default engine is also injectable by type: as this copy's EngineService and as the
      // class of any other loaded copy of the package (its other build).
      providers.push(EngineService);
      for (const engineClass of engineServiceClasses()) {
        if (engineClass !== EngineService) {
          providers.push({ provide: engineClass, useExisting: EngineService });
        }
        exported.push(engineClass);
      }
    }
    return {
      ...definition,
      // The table's default and check: `isGlobal: 'no'` is a ConfigurationError, not truthy.
      global: MODULE_OPTION_TABLE.isGlobal.resolve(extras.isGlobal, 'isGlobal', 'isGlobal'),
      imports: [...(definition.imports ?? []), DiscoveryModule],
      providers,
      exports: exported,
    };
  })
  .build();
