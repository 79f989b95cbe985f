import { hostname } from 'node:os';

import type { Pool } from 'pg';

import { postgresPokeChannel } from '../db/engine-namespace';
import { SqlExecutor } from '../db/sql-executor';
import type {
  ControlDefinition,
  ControlNode,
  ControlRegistry,
  ControlRuntime,
} from '../control/control-runtime';
import { pollAwait } from '../control/poll-await';
import { pollStreamWaiter } from '../control/read-stream';
import type { ScheduleRegistry } from '../cron/schedules';
import { FsmNotRegisteredError } from '../errors/fsm-not-registered.error';
import { InvalidInputError } from '../errors/invalid-input.error';
import { NotAvailableError } from '../errors/not-available.error';
import { DEFAULT_ENGINE_NAME } from '../gen-durable.constants';
import type { InsertDefinition } from '../instance/build-insert-row';
import { delayMs } from '../instance/insert-conflict';
import { pokePayload, pokeSenderToken } from '../poke/poke-channel';
import { NOTIFY_POKE } from '../sql/poke.sql';
import type { ClientFsm, GenDurableClientOptions } from './client-options';

/** The module's defaults of the options the client shares with it. */
const DEFAULT_MAX_STATE_BYTES = 1024 * 1024;
const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;
const DEFAULT_QUEUE = 'default';

/** A step set that accepts every name: the steps of an FSM the client was not told. */
const ANY_STEP = { has: (): boolean => true };

/**
 * The client's side of {@link ControlRuntime} (docs/design.md §32): its own SqlExecutor over
 * the pool, the FSMs it was described, and after-commit effects fit for a process that runs no
 * engine. A poke is a NOTIFY on the engine's channel (`gen_durable:<schema>:<name>:poke`, the
 * one engines with `poke: 'postgres'` LISTEN on), sent after the write committed; `settle()`
 * waits for the NOTIFYs sent so far (a short-lived script ends only after its pokes left).
 * Waiter nudges, gate-slot credits and local wake-ups have no engine here to act on: an
 * engine's waiter finds the row by its probe, a fenced slot is repaired by the GC reconcile,
 * a row due later is found by the engine's poll.
 */
export class ClientRuntime implements ControlRuntime {
  readonly sql: SqlExecutor;
  readonly options: ControlRuntime['options'];
  readonly registry: ControlRegistry & ScheduleRegistry;
  readonly telemetry: ControlRuntime['telemetry'] = { emit: () => undefined };
  readonly pokes = { poke: (queues: Iterable<string>): void => this.notify(queues) };
  /** No engine's watcher here: `await` polls the row (docs/client.md "Awaiting an instance"). */
  readonly watcher: ControlRuntime['watcher'] = {
    nudge: (): void => undefined,
    await: (id, timeoutMs, until) => pollAwait(this.sql, id, timeoutMs, until),
  };
  /** No engine's watcher here: a stream reader re-reads after a pause (docs/streams.md). */
  readonly streamWaiter = pollStreamWaiter;
  readonly limiter = { credit: (): Promise<void> => Promise.resolve() };
  readonly wakeUps = { arm: (): boolean => false };
  readonly awaitDeadlines = { arm: (): boolean => false };
  readonly schedulers = { has: (): boolean => false };
  readonly otel = undefined;
  /**
   * No engine here: no `@DurableFsm` classes (`graph`, `stepCounts`, `fork`, `registeredFsms`
   * throw `NotAvailableError`), no knowledge of the engines' limiter (`limiterStatus` throws),
   * and `explain` leaves out the reasons about a node.
   */
  readonly node: ControlNode = {
    definitions: (operation) => {
      throw new NotAvailableError(
        operation,
        'the client has no @DurableFsm classes: call it on an EngineService',
      );
    },
    limiter: (operation) => {
      throw new NotAvailableError(
        operation,
        "the client does not know the engines' limiter: call it on an EngineService",
      );
    },
    explainContext: {},
  };
  private readonly channel: string;
  private readonly sender = pokeSenderToken(`gd-client-${hostname()}`);
  private readonly pending = new Set<Promise<void>>();
  private readonly fsms: ReadonlyMap<string, ClientFsm>;

  constructor(pool: Pool, options: GenDurableClientOptions) {
    const schema = options.schema ?? 'public';
    this.sql = new SqlExecutor(pool, {
      schema,
      preparedStatements: options.preparedStatements ?? true,
      statementTimeoutMs: options.statementTimeout ?? DEFAULT_STATEMENT_TIMEOUT_MS,
    });
    this.options = {
      maxStateBytes: options.maxStateBytes ?? DEFAULT_MAX_STATE_BYTES,
      concurrencyLimits: {},
      queues: {},
      rateLimits: {},
    };
    this.channel = postgresPokeChannel(options.name ?? DEFAULT_ENGINE_NAME, schema);
    this.fsms = describedFsms(options.fsms);
    this.registry = {
      find: (name, version) => this.find(name, version),
      all: () => [...this.fsms.values()].map((f) => ({ queue: f.queue ?? DEFAULT_QUEUE })),
      cancellingFsms: (signal) => {
        const names = [...this.fsms].filter(([, f]) => f.cancelOn?.includes(signal));
        return names.length > 0 ? names.map(([name]) => name) : null;
      },
      resolve: (fsm) => this.described(fsm),
      declaredSchedule: () => undefined,
    };
  }

  /**
   * What an insert of `fsm` runs on: its description, or for an FSM not described, `step`
   * (required) on `version` (default 1) in queue `default` unless the insert names one.
   */
  insertDefinition(fsm: unknown, step: unknown, version: unknown): InsertDefinition {
    if (typeof fsm !== 'string' || fsm.length === 0) {
      throw new InvalidInputError('insert.fsm', 'must be a non-empty FSM name');
    }
    const described = this.fsms.get(fsm);
    if (described) {
      if (version !== undefined && version !== (described.version ?? 1)) {
        throw new InvalidInputError(
          'insert.version',
          `FSM "${fsm}" is described to this client as version ${described.version ?? 1}`,
        );
      }
      return this.described(fsm);
    }
    if (typeof step !== 'string' || step.length === 0) {
      throw new InvalidInputError(
        'insert.step',
        `FSM "${fsm}" is not described to this client (options.fsms): give the step to start at`,
      );
    }
    const v = version ?? 1;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) {
      throw new InvalidInputError('insert.version', 'must be an integer ≥ 1');
    }
    return {
      name: fsm,
      version: v,
      initial: step,
      queue: DEFAULT_QUEUE,
      codec: undefined,
      steps: ANY_STEP,
    };
  }

  /** Waits for the NOTIFYs sent so far (each best-effort: a lost one costs a poll). */
  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  private described(fsm: unknown): InsertDefinition {
    const name = typeof fsm === 'string' ? fsm : String(fsm);
    const f = this.fsms.get(name);
    if (!f) throw new FsmNotRegisteredError(name);
    return {
      name,
      version: f.version ?? 1,
      initial: f.initial,
      queue: f.queue ?? DEFAULT_QUEUE,
      codec: f.stateCodec,
      steps: f.steps ? new Set(f.steps) : ANY_STEP,
      ...(f.deadlineMs !== undefined ? { deadline: { ms: f.deadlineMs } } : {}),
    };
  }

  /**
   * The steps and codec of `(name, version)`: a described FSM's own version, else every step
   * (a row of an FSM the client was not told about is retried at any step the caller names).
   */
  private find(name: string, version: number): ControlDefinition | undefined {
    const f = this.fsms.get(name);
    if (!f || (f.version ?? 1) !== version) return { steps: ANY_STEP, codec: undefined };
    return { steps: f.steps ? new Set(f.steps) : ANY_STEP, codec: f.stateCodec };
  }

  private notify(queues: Iterable<string>): void {
    for (const queue of new Set(queues)) {
      const sent = NOTIFY_POKE.run(this.sql, {
        channel: this.channel,
        payload: pokePayload(this.sender, queue),
      }).catch(() => undefined);
      this.pending.add(sent);
      void sent.finally(() => this.pending.delete(sent));
    }
  }
}

/** The `fsms` option checked: `InvalidInputError` naming the bad field. */
function describedFsms(fsms: unknown): ReadonlyMap<string, ClientFsm> {
  const out = new Map<string, ClientFsm>();
  if (fsms === undefined) return out;
  if (typeof fsms !== 'object' || fsms === null || Array.isArray(fsms)) {
    throw new InvalidInputError('client.fsms', 'must be an object { [fsm name]: { initial, … } }');
  }
  for (const [name, f] of Object.entries(fsms as Record<string, unknown>)) {
    const path = `client.fsms.${name}`;
    if (typeof f !== 'object' || f === null) throw new InvalidInputError(path, 'must be an object');
    const d = f as Record<string, unknown>;
    if (typeof d['initial'] !== 'string' || d['initial'].length === 0) {
      throw new InvalidInputError(`${path}.initial`, 'must be a non-empty step name');
    }
    const version = d['version'];
    if (version !== undefined && !(Number.isInteger(version) && (version as number) >= 1)) {
      throw new InvalidInputError(`${path}.version`, 'must be an integer ≥ 1');
    }
    const queue = d['queue'];
    if (queue !== undefined && (typeof queue !== 'string' || queue.length === 0)) {
      throw new InvalidInputError(`${path}.queue`, 'must be a non-empty string');
    }
    if (d['deadlineMs'] !== undefined) delayMs(d['deadlineMs'], 1, `${path}.deadlineMs`);
    for (const list of ['steps', 'cancelOn'] as const) {
      const v = d[list];
      if (v !== undefined && !(Array.isArray(v) && v.every((s) => typeof s === 'string'))) {
        throw new InvalidInputError(`${path}.${list}`, 'must be an array of names');
      }
    }
    out.set(name, f as ClientFsm);
  }
  return out;
}
