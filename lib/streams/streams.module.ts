import {
  type CanActivate,
  Controller,
  type DynamicModule,
  Module,
  type Type,
  UseGuards,
} from '@nestjs/common';

import { ConfigurationError } from '../errors/configuration.error';
import { DEFAULT_ENGINE_NAME, getEngineToken } from '../gen-durable.constants';
import { STREAMS_ENGINE, STREAMS_MOUNT, StreamsController } from './streams.controller';

/** Options of `GenDurableStreamsModule.register`. */
export interface StreamsModuleOptions {
  /** Route prefix: streams are served at `GET <path>/:id/:name`. Default `'durable/streams'`. */
  path?: string;
  /** The engine whose instances' streams are served. Default the default engine. */
  engine?: string;
  /**
   * Guards on the route: who may read which instance's stream (the route serves any instance's
   * stream by id, so mount it behind the host's authentication). Default none.
   */
  guards?: Type<CanActivate>[];
  /** ms between keep-alive comments on an idle stream (proxies close silent connections). Default 15 000. */
  keepAliveMs?: number;
  /** The reconnection delay sent to clients (`retry:`), ms. Default 1 000. */
  retryMs?: number;
}

/**
 * Serves durable streams as Server-Sent Events (docs/streams.md): `GET <path>/:id/:name?from=N`
 * (or with `Last-Event-ID`) sends the chunks as `id: <offset>` / `data: <json>` events and
 * follows the stream until its instance ends. Import `GenDurableStreamsModule.register({ path,
 * guards })` beside `GenDurableModule`.
 */
@Module({})
export class GenDurableStreamsModule {
  /** One mount of the SSE route; `ConfigurationError` for a bad `keepAliveMs` or `retryMs`. */
  static register(options: StreamsModuleOptions = {}): DynamicModule {
    const path = (options.path ?? 'durable/streams').replace(/^\/+|\/+$/g, '');
    const engine = options.engine ?? DEFAULT_ENGINE_NAME;
    const keepAliveMs = positiveMs(options.keepAliveMs, 15_000, 'keepAliveMs');
    const retryMs = positiveMs(options.retryMs, 1_000, 'retryMs');
    const controller = class extends StreamsController {};
    Object.defineProperty(controller, 'name', { value: StreamsController.name });
    Controller(path)(controller);
    if (options.guards && options.guards.length > 0) UseGuards(...options.guards)(controller);
    return {
      module: GenDurableStreamsModule,
      controllers: [controller],
      providers: [
        { provide: STREAMS_MOUNT, useValue: { path, engine, keepAliveMs, retryMs } },
        { provide: STREAMS_ENGINE, useExisting: getEngineToken(engine) },
      ],
    };
  }
}

function positiveMs(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new ConfigurationError(`GenDurableStreamsModule.${name}`, 'must be an integer ≥ 1 (ms)');
  }
  return value;
}
