import {
  type CanActivate,
  Controller,
  type DynamicModule,
  Module,
  type Type,
  UseGuards,
} from '@nestjs/common';

import { DEFAULT_ENGINE_NAME, getEngineToken } from '../gen-durable.constants';
import { CALLBACKS_ENGINE, CallbacksController } from './callbacks.controller';

/** Options of `GenDurableCallbacksModule.register`. */
export interface CallbacksModuleOptions {
  /** Route prefix of the callbacks, matching the engine's `callbacks.baseUrl`. Default `'durable/callbacks'`. */
  path?: string;
  /** The engine whose secret signs the tokens and that delivers them. Default the default engine. */
  engine?: string;
  /**
   * Guards on the route beside the token's signature (an IP allow-list, a webhook provider's
   * own signature check). Default none: the signed token is the credential.
   */
  guards?: Type<CanActivate>[];
}

/** The injection token of a mount's path and engine (as data, see the dashboard module). */
const CALLBACKS_MOUNT = Symbol('GenDurableCallbacksMount');

/**
 * Serves signed callback URLs (docs/callbacks.md): `POST <path>/:token` delivers its JSON body
 * as the token's signal, once. Import `GenDurableCallbacksModule.register({ path })` beside
 * `GenDurableModule`, and set the engine's `callbacks: { secret, baseUrl }` so `baseUrl` ends
 * in this `path`.
 */
@Module({})
export class GenDurableCallbacksModule {
  static register(options: CallbacksModuleOptions = {}): DynamicModule {
    const path = (options.path ?? 'durable/callbacks').replace(/^\/+|\/+$/g, '');
    const engine = options.engine ?? DEFAULT_ENGINE_NAME;
    const controller = class extends CallbacksController {};
    Object.defineProperty(controller, 'name', { value: CallbacksController.name });
    Controller(path)(controller);
    if (options.guards && options.guards.length > 0) UseGuards(...options.guards)(controller);
    return {
      module: GenDurableCallbacksModule,
      controllers: [controller],
      providers: [
        { provide: CALLBACKS_MOUNT, useValue: { path, engine } },
        { provide: CALLBACKS_ENGINE, useExisting: getEngineToken(engine) },
      ],
    };
  }
}
