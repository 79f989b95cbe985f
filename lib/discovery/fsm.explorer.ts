import { inspect } from 'node:util';

import { Logger, type Type } from '@nestjs/common';
import type { DiscoveryService } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';

import { ConfigurationError } from '../errors/configuration.error';
import type { RetentionOverride } from '../fsm/retention';
import type { StepContext } from '../fsm/step-context';
import type { StandardSchemaV1 } from '../fsm/fsm-schemas';
import { MAX_DELAY_MS } from '../fsm/outcome';
import { checkFsmSequence } from '../fsm/sequence-policy';
import type { DurableStepInterceptor } from '../fsm/step-interceptor';
import type { FsmDeadline, FsmDefinition, StepFunction } from './fsm-definition';
import { FsmMetadataAccessor } from './fsm-metadata.accessor';
import { FsmRegistry } from './fsm.registry';
import { HISTORY_LEVELS, type HistoryLevel } from '../instance/history-entry';
import { STEP_END, type StepMetadata } from '../decorators/step.decorator';
import { type ResolvedSchedule, resolveSchedule } from '../cron/resolved-schedule';

type AnyFunction = (...args: unknown[]) => unknown;
type FsmClass = abstract new (...args: never[]) => unknown;

/**
 * How the explorer gets the instance of a request- or durable-scoped FSM class for one step run
 * (docs/scoped-providers.md): Nest's container, through `ContextIdFactory` with the run as the
 * request. Absent (the CLI, which runs no step): such a class's steps cannot run.
 */
export interface ScopedInstanceSource {
  resolve(metatype: FsmClass, run: StepContext<unknown>): Promise<Record<string, unknown>>;
}

/**
 * How the explorer gets step interceptors (docs/interceptors.md): the module's, and a
 * `@UseStepInterceptors` class resolved from Nest's container.
 */
export interface InterceptorSource {
  readonly global: readonly DurableStepInterceptor[];
  resolve(
    interceptor: abstract new (...args: never[]) => DurableStepInterceptor,
    where: string,
  ): DurableStepInterceptor;
}

/**
 * Walks the application's providers for `@DurableFsm()` classes and builds the registry,
 * failing boot with a ConfigurationError naming the bad definition (docs/design.md §2.2).
 */
export class FsmExplorer {
  private readonly logger = new Logger('GenDurable');

  constructor(private readonly discovery: DiscoveryService) {}

  explore(
    restrictTo: readonly (Type<unknown> | string)[] | undefined,
    maxStateBytes = 1024 * 1024,
    /** Absent (the CLI, which runs no step): no interceptors. */
    interceptors?: InterceptorSource,
    /** Absent (the CLI): a scoped FSM's steps cannot run. */
    scopedSource?: ScopedInstanceSource,
  ): FsmRegistry {
    const registry = new FsmRegistry();
    const seen = new Set<unknown>();
    for (const wrapper of this.discovery.getProviders()) {
      const instance: unknown = wrapper.instance;
      const metatype = this.metatypeOf(wrapper);
      if (!metatype) continue;
      const meta = FsmMetadataAccessor.fsm(metatype);
      if (!meta) continue;
      if (wrapper.isTransient) {
        throw new ConfigurationError(
          `fsm ${metatype.name}`,
          'must not be a transient-scoped provider (singleton, request- or durable-scoped)',
        );
      }
      // docs/scoped-providers.md: resolved per step run, the run as the request.
      const scoped = !wrapper.isDependencyTreeStatic();
      if (instance === undefined || instance === null || seen.has(instance)) continue;
      seen.add(instance);
      const name = meta.name ?? metatype.name;
      if (restrictTo && !restrictTo.some((r) => r === metatype || r === name)) continue;
      registry.register(
        this.define(
          metatype,
          instance as Record<string, unknown>,
          meta,
          name,
          interceptors,
          scoped ? (scopedSource ?? unavailableScope(name)) : undefined,
        ),
      );
      for (const schedule of this.schedules(metatype, instance, name, maxStateBytes)) {
        registry.declareSchedule(schedule);
      }
    }
    if (restrictTo) {
      for (const wanted of restrictTo) {
        const label = typeof wanted === 'string' ? wanted : wanted.name;
        const found = registry.all().some((d) => d.metatype === wanted || d.name === wanted);
        if (!found) {
          throw new ConfigurationError(
            'fsms',
            `"${label}" is not a @DurableFsm provider of this application`,
          );
        }
      }
    }
    return registry;
  }

  /**
   * The `@DurableCron` declarations of one FSM class, validated (docs/design.md §29): a bad
   * expression, zone or option fails boot with a ConfigurationError naming the schedule.
   */
  private schedules(
    metatype: abstract new (...args: never[]) => unknown,
    instance: unknown,
    fsm: string,
    maxStateBytes: number,
  ): ResolvedSchedule[] {
    const declarations = FsmMetadataAccessor.crons(metatype);
    return declarations.map(({ expression, options }, i) => {
      const name = options.name ?? (declarations.length === 1 ? fsm : undefined);
      const label = `@DurableCron ${name === undefined ? `#${i + 1}` : JSON.stringify(name)} of fsm ${fsm}`;
      if (name === undefined) {
        throw new ConfigurationError(
          `${label}.name`,
          `${metatype.name} declares ${declarations.length} schedules: give each a stable { name }`,
        );
      }
      const state =
        typeof options.state === 'function'
          ? (options.state as () => unknown).bind(instance)
          : options.state;
      return resolveSchedule(
        { ...options, name, fsm, cron: expression, state },
        true,
        maxStateBytes,
        (field, problem) => {
          throw new ConfigurationError(`${label}.${field}`, problem);
        },
      );
    });
  }

  private metatypeOf(
    wrapper: InstanceWrapper,
  ): (abstract new (...args: never[]) => unknown) | undefined {
    const instance: unknown = wrapper.instance;
    if (instance && typeof instance === 'object' && FsmMetadataAccessor.fsm(instance.constructor)) {
      return instance.constructor as abstract new (...args: never[]) => unknown;
    }
    const metatype = wrapper.metatype as unknown;
    if (typeof metatype === 'function' && FsmMetadataAccessor.fsm(metatype)) {
      return metatype as abstract new (...args: never[]) => unknown;
    }
    return undefined;
  }

  private define(
    metatype: abstract new (...args: never[]) => unknown,
    instance: Record<string, unknown>,
    meta: NonNullable<ReturnType<typeof FsmMetadataAccessor.fsm>>,
    name: string,
    interceptorSource: InterceptorSource | undefined,
    /** Present for a request- or durable-scoped class: its instance is resolved per step run. */
    scope: ScopedInstanceSource | undefined,
  ): FsmDefinition {
    const where = `fsm ${name}`;
    if (meta.nameDefaulted) {
      this.logger.warn(
        `@DurableFsm() on ${metatype.name} has no name: the class name is stored in rows, and minifiers rename classes. Give it { name }.`,
      );
    }
    if (meta.inlineExecution !== undefined && typeof meta.inlineExecution !== 'boolean') {
      throw new ConfigurationError(
        `${where}.inlineExecution`,
        `must be a boolean, got ${String(meta.inlineExecution)}`,
      );
    }
    const version = meta.version ?? 1;
    if (!Number.isInteger(version) || version < 1) {
      throw new ConfigurationError(`${where}.version`, 'must be an integer ≥ 1');
    }
    const stepEntries = FsmMetadataAccessor.steps(metatype);
    const perform = instance['perform'];
    const isJob = typeof perform === 'function';
    if (isJob && stepEntries.length > 0) {
      throw new ConfigurationError(
        where,
        'defines both @Step() methods and perform(): a class is an FSM or a job, not both',
      );
    }
    if (!isJob && stepEntries.length === 0) {
      throw new ConfigurationError(where, 'has no @Step() methods and no perform() method');
    }
    const stepTimeout = checkTimeout(meta.stepTimeout, `${where}.stepTimeout`);
    const steps = new Map<string, StepFunction>();
    const timeouts = new Map<string, number>();
    /** A method call for one run: on the singleton, or on the run's scoped instance. */
    const call = (property: string, method: AnyFunction) =>
      scope === undefined
        ? (_ctx: StepContext<unknown>, args: unknown[]) => method.apply(instance, args)
        : async (ctx: StepContext<unknown>, args: unknown[]) => {
            const own = await scope.resolve(metatype, ctx);
            return (own[property] as AnyFunction).apply(own, args);
          };
    const transactional = new Set<string>();
    if (checkFlag(meta.transactional, `${where}.transactional`)) {
      if (!isJob) {
        throw new ConfigurationError(
          `${where}.transactional`,
          'applies to a job (perform); mark the steps of an FSM with @Step({ transactional: true })',
        );
      }
      transactional.add('perform');
    }
    if (isJob) {
      const performs = call('perform', perform as AnyFunction);
      steps.set('perform', (ctx: StepContext<unknown>) => performs(ctx, [ctx.state, ctx]));
      if (stepTimeout !== undefined) timeouts.set('perform', stepTimeout);
    }
    for (const [stepName, property, options] of stepEntries) {
      if (steps.has(stepName)) {
        throw new ConfigurationError(`${where}.${stepName}`, 'step name is used twice');
      }
      const method = instance[property as string];
      if (typeof method !== 'function') {
        throw new ConfigurationError(`${where}.${stepName}`, 'is not a method');
      }
      if (scope === undefined) {
        steps.set(stepName, (ctx) => (method as AnyFunction).call(instance, ctx));
      } else {
        const runs = call(property as string, method as AnyFunction);
        steps.set(stepName, (ctx) => runs(ctx, [ctx]));
      }
      const timeout = checkTimeout(options?.timeout, `${where}.${stepName}.timeout`) ?? stepTimeout;
      if (timeout !== undefined) timeouts.set(stepName, timeout);
      if (checkFlag(options?.transactional, `${where}.${stepName}.transactional`)) {
        transactional.add(stepName);
      }
    }
    const next = declaredEdges(stepEntries, steps, where);
    const initial = meta.initial ?? (isJob ? 'perform' : 'start');
    if (!steps.has(initial)) {
      throw new ConfigurationError(
        `${where}.initial`,
        `step "${initial}" does not exist (steps: ${[...steps.keys()].join(', ')})`,
      );
    }
    const maxAttempts = meta.maxAttempts ?? 20;
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
      throw new ConfigurationError(`${where}.maxAttempts`, 'must be an integer ≥ 1');
    }
    const onError = instance['onError'];
    const backoff = instance['backoff'];
    if (
      meta.stateCodec &&
      (typeof meta.stateCodec.load !== 'function' || typeof meta.stateCodec.dump !== 'function')
    ) {
      throw new ConfigurationError(`${where}.stateCodec`, 'must have load() and dump() functions');
    }
    const cancelOn = meta.cancelOn ?? [];
    if (
      !Array.isArray(cancelOn) ||
      !cancelOn.every((n: unknown) => typeof n === 'string' && n.length > 0)
    ) {
      throw new ConfigurationError(
        `${where}.cancelOn`,
        'must be an array of non-empty signal names',
      );
    }
    const deadline = checkDeadline(meta, steps, where);
    const sequence = checkFsmSequence(meta, where);
    const history: unknown = meta.history ?? 'failures';
    if (!HISTORY_LEVELS.includes(history as HistoryLevel)) {
      throw new ConfigurationError(
        `${where}.history`,
        `must be one of ${HISTORY_LEVELS.map((l) => `'${l}'`).join(', ')}, got ${inspect(history)}`,
      );
    }
    const retention = checkRetention(meta.retention, `${where}.retention`);
    if (meta.fairnessKey !== undefined && typeof meta.fairnessKey !== 'function') {
      throw new ConfigurationError(
        `${where}.fairnessKey`,
        'must be a function of the inserted state that answers the key',
      );
    }
    const signalSchemas = new Map<string, StandardSchemaV1>();
    if (meta.signals !== undefined) {
      if (
        typeof meta.signals !== 'object' ||
        meta.signals === null ||
        Array.isArray(meta.signals)
      ) {
        throw new ConfigurationError(`${where}.signals`, 'must be an object: signal name → schema');
      }
      for (const [signal, schema] of Object.entries(meta.signals)) {
        signalSchemas.set(signal, checkSchema(schema, `${where}.signals.${signal}`));
      }
    }
    let stepInterceptors: readonly DurableStepInterceptor[] | undefined;
    if (interceptorSource !== undefined) {
      const own = FsmMetadataAccessor.stepInterceptors(metatype).map((cls) =>
        interceptorSource.resolve(cls, `${where} @UseStepInterceptors`),
      );
      const all = [...interceptorSource.global, ...own];
      stepInterceptors = all.length > 0 ? Object.freeze(all) : undefined;
    }
    return Object.freeze({
      name,
      version,
      cancelOn: new Set(cancelOn),
      ...(deadline ? { deadline } : {}),
      ...(meta.fairnessKey !== undefined ? { fairnessKey: meta.fairnessKey } : {}),
      ...(sequence ? { sequence } : {}),
      history: history as HistoryLevel,
      retention,
      queue: meta.queue ?? 'default',
      initial,
      inlineExecution: meta.inlineExecution ?? false,
      kind: isJob ? 'job' : 'fsm',
      maxAttempts,
      codec: meta.stateCodec,
      metatype,
      steps,
      timeouts,
      transactional,
      next,
      onError:
        typeof onError === 'function'
          ? onErrorOf(call('onError', onError as AnyFunction))
          : undefined,
      backoff:
        typeof backoff === 'function'
          ? (attempt: number) => (backoff as AnyFunction).call(instance, attempt) as number
          : undefined,
      stateSchema: checkSchema(meta.state, `${where}.state`),
      signalSchemas,
      resultSchema: checkSchema(meta.result, `${where}.result`),
      interceptors: stepInterceptors,
    });
  }
}

function onErrorOf(
  call: (ctx: StepContext<unknown>, args: unknown[]) => unknown,
): (err: unknown, ctx: StepContext<unknown>) => unknown {
  return (err, ctx) => call(ctx, [err, ctx]);
}

/** A scoped FSM's instance source where none exists (the CLI): a step run is refused. */
function unavailableScope(fsm: string): ScopedInstanceSource {
  return {
    resolve: () =>
      Promise.reject(
        new ConfigurationError(`fsm ${fsm}`, 'a scoped FSM runs only inside the engine'),
      ),
  };
}

/**
 * `@DurableFsm({ deadlineMs, onDeadline, deadlineGraceMs })` checked (docs/operations-control.md
 * "Instance deadlines"): whole ms, `onDeadline` a step of the FSM; undefined when none is declared.
 */
function checkDeadline(
  meta: { deadlineMs?: unknown; onDeadline?: unknown; deadlineGraceMs?: unknown },
  steps: ReadonlyMap<string, unknown>,
  where: string,
): FsmDeadline | undefined {
  const ms = (value: unknown, min: number, field: string): number | null => {
    if (value === undefined) return null;
    if (
      typeof value !== 'number' ||
      !Number.isInteger(value) ||
      value < min ||
      value > MAX_DELAY_MS
    ) {
      throw new ConfigurationError(
        `${where}.${field}`,
        `must be an integer number of ms in ${min} … ${MAX_DELAY_MS}, got ${inspect(value)}`,
      );
    }
    return value;
  };
  const deadlineMs = ms(meta.deadlineMs, 1, 'deadlineMs');
  const graceMs = ms(meta.deadlineGraceMs, 0, 'deadlineGraceMs');
  const onDeadline = meta.onDeadline;
  if (onDeadline !== undefined && (typeof onDeadline !== 'string' || !steps.has(onDeadline))) {
    throw new ConfigurationError(
      `${where}.onDeadline`,
      `must name a step of the FSM (steps: ${[...steps.keys()].join(', ')}), got ${inspect(onDeadline)}`,
    );
  }
  if (deadlineMs === null && graceMs === null && onDeadline === undefined) return undefined;
  return { ms: deadlineMs, onDeadline: onDeadline ?? null, graceMs };
}

/** An optional boolean option: true, or false when absent; anything else fails boot. */
function checkFlag(value: unknown, path: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') {
    throw new ConfigurationError(path, `must be a boolean, got ${inspect(value)}`);
  }
  return value;
}

/**
 * The `@Step({ next })` declarations of one FSM (docs/design.md §30): each target a step of
 * the FSM or `'$done'`, else a ConfigurationError naming the FSM, the step and the target.
 */
function declaredEdges(
  entries: readonly StepMetadata[],
  steps: ReadonlyMap<string, StepFunction>,
  where: string,
): Map<string, readonly string[]> {
  const edges = new Map<string, readonly string[]>();
  for (const [stepName, , options] of entries) {
    const next: unknown = options?.next;
    if (next === undefined) continue;
    if (!Array.isArray(next) || !next.every((t): t is string => typeof t === 'string')) {
      throw new ConfigurationError(
        `${where}.${stepName}.next`,
        `must be an array of step names, got ${inspect(next)}`,
      );
    }
    for (const target of next) {
      if (target !== STEP_END && !steps.has(target)) {
        throw new ConfigurationError(
          `${where}.${stepName}.next`,
          `step "${target}" does not exist (steps: ${[...steps.keys()].join(', ')}; "${STEP_END}" marks an end)`,
        );
      }
    }
    edges.set(stepName, Object.freeze([...new Set(next)]));
  }
  return edges;
}

/** A Standard Schema option (docs/schemas.md): undefined, or an object with `~standard.validate`. */
function checkSchema<T extends StandardSchemaV1 | undefined>(value: T, path: string): T {
  if (value === undefined) return value;
  const standard: unknown =
    (typeof value === 'object' || typeof value === 'function') && value !== null
      ? (value as { '~standard'?: unknown })['~standard']
      : undefined;
  if (
    typeof standard !== 'object' ||
    standard === null ||
    typeof (standard as { validate?: unknown }).validate !== 'function'
  ) {
    throw new ConfigurationError(
      path,
      `must be a Standard Schema (zod, valibot, arktype…: an object with ~standard.validate), got ${inspect(value, { depth: 0 })}`,
    );
  }
  return value;
}

/** setTimeout's largest delay, ms: a longer one fires at once. */
const MAX_TIMEOUT_MS = 2_147_483_647;

/** A step timeout option: undefined, or an integer in 1 … {@link MAX_TIMEOUT_MS} ms. */
function checkTimeout(value: unknown, path: string): number | undefined {
  if (value === undefined) return undefined;
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < 1 ||
    value > MAX_TIMEOUT_MS
  ) {
    throw new ConfigurationError(
      path,
      `must be an integer number of ms in 1 … ${MAX_TIMEOUT_MS}, got ${inspect(value)}`,
    );
  }
  return value;
}

const RETENTION_STATUSES = ['done', 'failed', 'cancelled'] as const;

/** `@DurableFsm({ retention })`: an object of `done` / `failed` / `cancelled` integers ≥ 0 (ms). */
function checkRetention(raw: unknown, path: string): RetentionOverride {
  if (raw === undefined) return Object.freeze({});
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigurationError(path, 'must be an object { done?, failed?, cancelled? } of ms');
  }
  const given = raw as Record<string, unknown>;
  const unknownKeys = Object.keys(given).filter(
    (k) => !(RETENTION_STATUSES as readonly string[]).includes(k),
  );
  if (unknownKeys.length > 0) {
    throw new ConfigurationError(
      path,
      `has unknown key(s) ${unknownKeys.join(', ')} (allowed: ${RETENTION_STATUSES.join(', ')})`,
    );
  }
  const out: { -readonly [K in keyof RetentionOverride]: number } = {};
  for (const status of RETENTION_STATUSES) {
    const ms = given[status];
    if (ms === undefined) continue;
    if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0) {
      throw new ConfigurationError(
        `${path}.${status}`,
        `must be an integer ≥ 0 (ms), got ${inspect(ms)}`,
      );
    }
    out[status] = ms;
  }
  return Object.freeze(out);
}
