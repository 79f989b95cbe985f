import type { CanActivate, Type } from '@nestjs/common';

import { ConfigurationError } from '../errors/configuration.error';

/** What a request may do on the dashboard: everything, read only, or nothing (403). */
export type DashboardAccess = 'all' | 'read' | 'none';

/**
 * The request as both HTTP adapters give it (Express `Request`, Fastify `FastifyRequest`): the
 * fields the dashboard reads and the host's own properties (a user set by its auth guard, …).
 */
export interface DashboardRequest {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly [property: string]: unknown;
}

/** Options of `GenDurableDashboardModule.register` (docs/dashboard.md). */
export interface DashboardOptions {
  /** Mount path, without slashes at the ends. Default `'durable'`. */
  path?: string;
  /** The engine shown (a named engine of `GenDurableModule.forRoot(…, { name })`). Default: the default engine. */
  engine?: string;
  /** Guards run on every dashboard route (pages, API, assets, actions), after the host's global guards. */
  guards?: Type<CanActivate>[];
  /**
   * What a request may do: `'all'` (read and act), `'read'` (no actions: buttons hidden, POSTs
   * answered 403), `'none'` (403 everywhere). Default: `'read'` for every request.
   */
  access?: (req: DashboardRequest) => DashboardAccess;
  /** Who acts, recorded with each action (history `actor`). Default: none. */
  actor?: (req: DashboardRequest) => string | undefined;
  /**
   * Replaces an instance's state (and result) wherever the dashboard shows it, pages and API
   * alike. Default: shown as stored, to whoever passes the guards.
   */
  redact?: (fsm: string, state: unknown) => unknown;
}

/** Options with defaults applied. */
export interface ResolvedDashboardOptions {
  readonly path: string;
  readonly engine: string | undefined;
  readonly guards: readonly Type<CanActivate>[];
  readonly access: (req: DashboardRequest) => DashboardAccess;
  readonly actor: (req: DashboardRequest) => string | undefined;
  readonly redact: ((fsm: string, state: unknown) => unknown) | undefined;
}

const KNOWN = new Set(['path', 'engine', 'guards', 'access', 'actor', 'redact']);

/** Validates `register`'s options (`ConfigurationError` naming `dashboard.<option>`). */
export function resolveDashboardOptions(options: DashboardOptions = {}): ResolvedDashboardOptions {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigurationError('dashboard', 'options must be an object');
  }
  for (const key of Object.keys(options)) {
    if (!KNOWN.has(key)) {
      throw new ConfigurationError(
        `dashboard.${key}`,
        `unknown option; known: ${[...KNOWN].join(', ')}`,
      );
    }
  }
  const path = (options.path ?? 'durable').replace(/^\/+|\/+$/g, '');
  if (!/^[A-Za-z0-9._~\-/]*$/.test(path) || path.includes('//')) {
    throw new ConfigurationError(
      'dashboard.path',
      'must be a URL path of letters, digits, ".", "_", "~", "-" and "/"',
    );
  }
  if (
    options.engine !== undefined &&
    (typeof options.engine !== 'string' || options.engine === '')
  ) {
    throw new ConfigurationError('dashboard.engine', 'must be a non-empty engine name');
  }
  const guards = options.guards ?? [];
  if (!Array.isArray(guards) || guards.some((g) => typeof g !== 'function')) {
    throw new ConfigurationError('dashboard.guards', 'must be an array of guard classes');
  }
  for (const name of ['access', 'actor', 'redact'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      throw new ConfigurationError(`dashboard.${name}`, 'must be a function');
    }
  }
  return {
    path,
    engine: options.engine,
    guards,
    access: options.access ?? (() => 'read'),
    actor: options.actor ?? (() => undefined),
    redact: options.redact,
  };
}
