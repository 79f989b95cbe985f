import { Inject, Injectable } from '@nestjs/common';
import { ContextIdFactory, DiscoveryService, ModuleRef } from '@nestjs/core';

import { DurableEventExplorer } from '../discovery/durable-event.explorer';
import { FsmExplorer } from '../discovery/fsm.explorer';
import { durableRequestOf } from '../fsm/durable-request';
import type { StepContext } from '../fsm/step-context';
import { ConfigurationError } from '../errors/configuration.error';
import type { DurableStepInterceptor } from '../fsm/step-interceptor';
import type { FsmRegistry } from '../discovery/fsm.registry';
import { GEN_DURABLE_ENGINE_NAME, GEN_DURABLE_MODULE_OPTIONS } from '../gen-durable.constants';
import type { GenDurableOptions } from '../options/gen-durable-options.interface';
import { resolveOptions } from '../options/resolve-options';
import { Telemetry } from '../telemetry/telemetry';
import { EngineRuntime } from './engine-runtime';
import { RunningEngines } from './running-engines';

/**
 * What one engine is made of once booted: its resolved options, FSM registry, telemetry and
 * runtime, and the steps that build, start, drain and close them. Internal: `EngineLifecycle`
 * drives it from Nest's hooks and `EngineService` reads it; neither is the other's concern.
 */
@Injectable()
export class EngineHost {
  private runtimeRef: EngineRuntime | undefined;
  private registryRef: FsmRegistry | undefined;
  private telemetryRef: Telemetry | undefined;
  private acquired = false;

  constructor(
    @Inject(GEN_DURABLE_MODULE_OPTIONS) private readonly rawOptions: GenDurableOptions,
    @Inject(GEN_DURABLE_ENGINE_NAME) readonly name: string,
    private readonly discovery: DiscoveryService,
    private readonly moduleRef: ModuleRef,
  ) {}

  get runtime(): EngineRuntime {
    if (!this.runtimeRef) throw this.notInitialized();
    return this.runtimeRef;
  }

  get registry(): FsmRegistry {
    if (!this.registryRef) throw this.notInitialized();
    return this.registryRef;
  }

  /** Exists before init, so `events$` can be subscribed to at construction time. */
  get telemetry(): Telemetry {
    this.telemetryRef ??= new Telemetry(this.name);
    return this.telemetryRef;
  }

  /** Module init: options resolved, the name taken, FSMs explored, the runtime built. */
  init(): void {
    const resolved = resolveOptions({ ...this.rawOptions, name: this.name });
    RunningEngines.acquire(this.name);
    this.acquired = true;
    try {
      const resolve = (
        interceptor: abstract new (...args: never[]) => DurableStepInterceptor,
        where: string,
      ): DurableStepInterceptor => this.interceptor(interceptor, where);
      this.registryRef = new FsmExplorer(this.discovery).explore(
        resolved.fsms,
        resolved.maxStateBytes,
        {
          global: resolved.stepInterceptors.map((c) => resolve(c, 'stepInterceptors')),
          resolve,
        },
        { resolve: (metatype, run) => this.scopedInstance(metatype, run) },
      );
      const eventHandlers = new DurableEventExplorer(this.discovery).explore(this.name);
      this.runtimeRef = new EngineRuntime(
        resolved,
        this.registryRef,
        this.telemetry,
        eventHandlers,
      );
    } catch (err) {
      // A failed boot gets no shutdown hooks: free the name so the process can boot again.
      this.releaseName();
      throw err;
    }
  }

  /**
   * The instance of a request- or durable-scoped FSM class for one step run
   * (docs/scoped-providers.md): the run is the request (`DurableRequest`), its context id comes
   * from `ContextIdFactory` — a host `ContextIdStrategy` (durable providers) picks the sub-tree,
   * else each run gets its own — and the request is registered for `@Inject(REQUEST)`.
   */
  private async scopedInstance(
    metatype: abstract new (...args: never[]) => unknown,
    run: StepContext<unknown>,
  ): Promise<Record<string, unknown>> {
    const request = durableRequestOf(run);
    const contextId = ContextIdFactory.getByRequest(request);
    this.moduleRef.registerRequestByContextId(request, contextId);
    return this.moduleRef.resolve<unknown, Record<string, unknown>>(metatype, contextId, {
      strict: false,
    });
  }

  /**
   * A step interceptor class's instance from Nest's container (docs/interceptors.md); a class
   * that is no provider of the application fails boot naming it and `where` it was listed.
   */
  private interceptor(
    interceptor: abstract new (...args: never[]) => DurableStepInterceptor,
    where: string,
  ): DurableStepInterceptor {
    let instance: unknown;
    try {
      instance = this.moduleRef.get(interceptor, { strict: false });
    } catch {
      throw new ConfigurationError(
        where,
        `${interceptor.name} is not a provider of the application: list it in a module's providers`,
      );
    }
    if (typeof (instance as { intercept?: unknown }).intercept !== 'function') {
      throw new ConfigurationError(where, `${interceptor.name} has no intercept(ctx, next) method`);
    }
    return instance as DurableStepInterceptor;
  }

  /** Application bootstrap: schedulers, reaper, GC and transports start. */
  async start(): Promise<void> {
    try {
      await this.runtime.start();
    } catch (err) {
      await this.runtimeRef?.close().catch(() => undefined);
      this.releaseName();
      throw err;
    }
  }

  /** Before shutdown: stop claiming, finish what is in flight (docs/design.md §17.4). */
  async drain(): Promise<void> {
    await this.runtimeRef?.drain();
  }

  /** Shutdown: timers and clients released, telemetry completed, the name freed. */
  async close(): Promise<void> {
    try {
      await this.runtimeRef?.close();
    } finally {
      this.telemetryRef?.complete();
      this.releaseName();
    }
  }

  private releaseName(): void {
    if (this.acquired) RunningEngines.release(this.name);
    this.acquired = false;
  }

  private notInitialized(): Error {
    return new Error(`gen-durable engine "${this.name}" is not initialized yet`);
  }
}
