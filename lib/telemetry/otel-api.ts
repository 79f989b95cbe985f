import type * as OtelApiModule from '@opentelemetry/api';

/** The `@opentelemetry/api` module, the optional peer (docs/design.md §31). */
export type OtelApi = typeof OtelApiModule;

let loaded: OtelApi | null | undefined;

/**
 * The optional `@opentelemetry/api` peer, loaded on first use, or null when it is not
 * installed (the library works without it). Loaded at most once per process.
 */
export function loadOtelApi(): OtelApi | null {
  if (loaded === undefined) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      loaded = require('@opentelemetry/api') as OtelApi;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}

/**
 * Whether a tracer or a meter provider is registered with the API, asked without allocating
 * (docs/observability.md, "Zero cost"). The API's global tracer provider is a proxy whose
 * delegate is the API's no-op provider until an SDK registers one: the probe compares the
 * delegate with that no-op provider (read once from a fresh, unregistered proxy). A proxy of
 * another copy of the API counts as registered. The meter provider has no proxy: with none
 * registered the API answers its no-op provider, whose meter is the no-op meter.
 */
export class OtelProviders {
  private readonly noopTracerProvider: unknown;
  private readonly noopMeter: unknown;

  constructor(private readonly api: OtelApi) {
    this.noopTracerProvider = new api.ProxyTracerProvider().getDelegate();
    this.noopMeter = api.createNoopMeter();
  }

  /** True while a tracer provider is registered. Two calls, no allocation. */
  tracing(): boolean {
    const provider = this.api.trace.getTracerProvider();
    return !(
      provider instanceof this.api.ProxyTracerProvider &&
      provider.getDelegate() === this.noopTracerProvider
    );
  }

  /** True while a meter provider is registered. */
  metrics(): boolean {
    return this.api.metrics.getMeterProvider().getMeter(METER_NAME) !== this.noopMeter;
  }
}

/** The tracer's and the meter's name. */
export const METER_NAME = 'gen_durable';
