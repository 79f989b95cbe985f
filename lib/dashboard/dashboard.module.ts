import {
  type CanActivate,
  Controller,
  type DynamicModule,
  Module,
  type Type,
  UseGuards,
} from '@nestjs/common';

import type { EngineService } from '../engine/engine.service';
import { getEngineToken } from '../gen-durable.constants';
import { DashboardActionsController } from './dashboard-actions.controller';
import { DashboardApiController } from './dashboard-api.controller';
import { DashboardAssetsController } from './dashboard-assets.controller';
import { DASHBOARD_CONTEXT, DashboardContext } from './dashboard-context';
import { type DashboardOptions, resolveDashboardOptions } from './dashboard-options';
import { DashboardPagesController } from './dashboard-pages.controller';

/** The injection token of a mount's path and engine name (see `register`). */
const DASHBOARD_MOUNT = Symbol('GenDurableDashboardMount');

type ControllerClass = new (dashboard: DashboardContext) => object;

/**
 * A controller class of its own for this mount: a subclass of `base` (whose methods carry the
 * routes) with `@Controller(path)` and the dashboard's guards, so each `register` call mounts
 * its own paths and guards, and Nest treats them as any controller of the host.
 */
function mounted(base: ControllerClass, path: string, guards: readonly Type<CanActivate>[]): Type {
  const controller = class extends base {};
  Object.defineProperty(controller, 'name', { value: base.name });
  Controller(path)(controller);
  if (guards && guards.length > 0) UseGuards(...guards)(controller);
  return controller;
}

/**
 * The dashboard (docs/dashboard.md, docs/design.md §30): HTML pages, their JSON twins under
 * `<path>/api`, the actions and the assets, as real Nest controllers mounted at `path`. Import
 * `GenDurableDashboardModule.register({ … })` beside `GenDurableModule`, from `gen-durable/dashboard`.
 */
@Module({})
export class GenDurableDashboardModule {
  static register(options: DashboardOptions = {}): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    const controllers = [
      DashboardAssetsController,
      DashboardApiController,
      DashboardActionsController,
      DashboardPagesController,
    ].map((base) => mounted(base, resolved.path, resolved.guards));
    return {
      module: GenDurableDashboardModule,
      controllers,
      providers: [
        // The mount as data in the module's metadata: Nest's 'deep-hash' module identity
        // (`moduleIdGeneratorAlgorithm`) hashes metadata with classes by name and functions by
        // text, which is alike for every mount, and would merge two mounts into one.
        { provide: DASHBOARD_MOUNT, useValue: { path: resolved.path, engine: resolved.engine } },
        {
          provide: DASHBOARD_CONTEXT,
          useFactory: (engine: EngineService) => new DashboardContext(engine, resolved),
          inject: [getEngineToken(resolved.engine)],
        },
      ],
    };
  }
}
