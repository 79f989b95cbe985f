import { Inject, Injectable } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';

import { DurableEventExplorer } from '../discovery/durable-event.explorer';
import { FsmExplorer } from '../discovery/fsm.explorer';
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
      this.registryRef = new FsmExplorer(this.discovery).explore(
        resolved.fsms,
        resolved.maxStateBytes,
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
