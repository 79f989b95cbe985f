import { Injectable, type Type } from '@nestjs/common';
import type { PoolClient } from 'pg';
import type { Observable } from 'rxjs';
import type { EntityManager } from 'typeorm';

import { isArray } from '../util/is-array';
import type { Schedules } from '../cron/schedules';
import type { FsmRegistry } from '../discovery/fsm.registry';
import { InvalidInputError } from '../errors/invalid-input.error';
import type { ResolvedOptions } from '../options/resolved-options';
import { INSERT_INSTANCE, insertInstances } from '../sql/insert.sql';
import type { GenDurableEvent } from '../telemetry/telemetry-events';
import type { FinishedInstance } from '../fsm/durable-event';
import {
  callbackDedupKey,
  signCallbackToken,
  verifyCallbackToken,
} from '../callbacks/callback-token';
import { CallbackTokenError } from '../errors/callback-token.error';
import { ConfigurationError } from '../errors/configuration.error';
import { NoTargetError } from '../errors/no-target.error';
import { EngineHost } from './engine-host';
import type { EngineRuntime } from './engine-runtime';
import { InstanceControl } from '../control/instance-control';
import { insertConflictOf } from '../instance/insert-conflict';
import { insertInstance } from '../control/insert-instance';
import { resolveTarget, type Target, targetLabel } from '../control/target';
import type { InsertOptions } from '../fsm/insert-options.interface';
import { type InsertRow, withTraceContext } from '../instance/insert-row';
import { buildInsertRow } from '../instance/build-insert-row';
import type {
  FsmSchemas,
  InsertOptionsFor,
  SchemaSignalInput,
  SchemaSignalName,
  SchemasOf,
  SchemaTypedClass,
} from '../fsm/fsm-schemas';
import { withSchemaState } from '../fsm/insert-schema';
import { schemaPayload } from './signal-schema';

/**
 * The engine's public API (docs/design.md §2.5): instance control — get, list, count, signal,
 * cancel, retry, fork, the bulk actions, queues, explain, stats, graph — from
 * {@link InstanceControl} over the engine's runtime, and here what only an engine in a Nest
 * application has: insert, insertAsync, insertAll (with its batcher and wake-ups), await,
 * events$, schedules, a signal that joins a TypeORM transaction. Thin: it validates input and
 * delegates to the runtime. Nothing here needs a local scheduler, and nothing here is a
 * lifecycle hook (those are EngineLifecycle's).
 */
@Injectable()
export class EngineService extends InstanceControl<{ manager?: EntityManager }> {
  /** @internal built by Nest's injector; the published types leave the engine's internals out. */
  constructor(private readonly host: EngineHost) {
    super();
  }

  /**
   * @internal instance control's runtime: the engine's, built at module init (after Nest
   * constructed this service), so read at each call.
   */
  protected controlRuntime(): EngineRuntime {
    return this.host.runtime;
  }

  /** The engine name. */
  get name(): string {
    return this.host.name;
  }

  /** Telemetry events of this engine (hot, no replay; docs/design.md §20). */
  get events$(): Observable<GenDurableEvent> {
    return this.host.telemetry.events$;
  }

  /**
   * Instances that ended: on this node with their result or error (`origin: 'local'`), and, where
   * other nodes set `announceFinished`, theirs (`origin: 'remote'`). Best effort: a node that
   * was down or disconnected misses some; the row is the truth (docs/events.md). Subscribe after
   * the module initialized.
   */
  get finished$(): Observable<FinishedInstance> {
    return this.host.runtime.durableEvents.finished$;
  }

  /**
   * The runtime, for the testing and health entry points of this package.
   * @internal not part of the published types (stripInternal).
   */
  get runtime(): EngineRuntime {
    return this.host.runtime;
  }

  /** @internal the validated options (their shape is the option table's, not a public type). */
  get options(): ResolvedOptions {
    return this.host.runtime.options;
  }

  /**
   * Cron schedules defined at run time beside the `@DurableCron` ones: `upsert`, `remove`,
   * `pause`, `resume`, `trigger`, `list`, `get` (docs/design.md §29).
   */
  get schedules(): Schedules {
    return this.host.runtime.schedules;
  }

  private get registry(): FsmRegistry {
    return this.host.registry;
  }

  /**
   * Inserts one instance; resolves with its id once committed. `DuplicateError` on an occupied
   * key. One statement — or, by default with no `manager` and no conflict mode, a share of one
   * group-commit statement with concurrent callers (docs/design.md §26.11; a call alone is
   * written at once by the direct insert's statement), held or with a dedup window too.
   */
  async insert<F extends Type<unknown> | string>(
    fsm: F,
    options?: InsertOptionsFor<F>,
  ): Promise<string> {
    const given: InsertOptions | undefined = options;
    const definition = this.registry.resolve(fsm);
    // docs/schemas.md: the state schema's output is what gets stored.
    const checked =
      definition.stateSchema === undefined
        ? given
        : await withSchemaState(definition.stateSchema, given, 'insert');
    return this.traced('insert', definition.name, 1, async (traceContext) => {
      const row = withTraceContext(
        buildInsertRow(definition, checked, this.runtime.options),
        traceContext,
      );
      const conflict = insertConflictOf(checked ?? {}, 'insert');
      const plain = conflict.mode === 'error' || row.correlationKey === null;
      const batcher = this.runtime.batcher;
      if (given?.manager === undefined && batcher.takesDurable && plain) {
        const inserted = await batcher.insert(row); // the batcher pokes due rows per statement
        if (!inserted.due && row.held !== true) this.armWakeUp(row);
        this.armDeadline(row);
        return inserted.id;
      }
      const client = await this.clientOf(given?.manager);
      const answer = await insertInstance(this.runtime, row, conflict, client);
      if ((answer.inserted || answer.debounced) && !given?.manager && row.held !== true) {
        this.pokeOrArm(answer, row);
      }
      if (answer.inserted) this.armDeadline(row);
      return answer.id;
    });
  }

  /** After an insert committed: poke its queue if it is due, else arm a wake-up for when it is. */
  private pokeOrArm(inserted: { queue: string; due: boolean }, row: InsertRow): void {
    if (inserted.due) this.runtime.insertedDue([row]);
    else this.armWakeUp(row);
  }

  /** The local timers of a row's instance deadline (docs/operations-control.md "Instance deadlines"). */
  private armDeadline(row: InsertRow): void {
    this.runtime.armDeadline(row);
  }

  /**
   * A local wake-up for a row inserted to run later (docs/design.md §27.4): `scheduleIn` counts
   * on the database clock from the insert, as the timer does from its commit; an absolute
   * `scheduleAt` / `eligibleAt` is read on this node's clock (a node clock ahead of the
   * database's wakes the queue early, finds nothing due, and the poll runs the row).
   */
  private armWakeUp(row: InsertRow): void {
    const delay = row.at === null ? row.delayMs : row.at.getTime() - Date.now();
    this.runtime.wakeUps.arm(row.queue, delay);
  }

  /**
   * Lossy buffered insert (docs/design.md §6.5): validates the entry (typed errors, nothing buffered),
   * hands it to the insert batcher and resolves at once, without an id. Buffered rows die with
   * the process; a failed batch is dropped (`insert_batch:error`); a duplicate vanishes. At
   * `maxBuffer` pending, or with no live batcher, it inserts durably instead (one statement,
   * duplicate ignored). It cannot join a caller's transaction.
   */
  async insertAsync(fsm: Type<unknown> | string, given?: InsertOptions): Promise<void> {
    const definition = this.registry.resolve(fsm);
    const options =
      definition.stateSchema === undefined
        ? given
        : await withSchemaState(definition.stateSchema, given, 'insertAsync');
    if (options?.manager !== undefined) {
      throw new InvalidInputError(
        'insertAsync.manager',
        'insertAsync cannot join a transaction: use insert(fsm, { manager })',
      );
    }
    await this.traced('insert', definition.name, 1, async (traceContext) => {
      const row = withTraceContext(
        buildInsertRow(definition, options, this.runtime.options, 'insertAsync'),
        traceContext,
      );
      if (this.runtime.batcher.offer(row)) {
        this.armDeadline(row);
        return;
      }
      const inserted = await INSERT_INSTANCE.run(this.runtime.sql, row);
      if (inserted) {
        if (row.held !== true) this.pokeOrArm(inserted, row);
        this.armDeadline(row);
      }
    });
  }

  /**
   * Inserts many instances in one statement for any size; duplicates drop silently. Rows are
   * inserted ordered by correlation key, so ids do not map to entries by position.
   */
  async insertAll(
    fsm: Type<unknown> | string,
    entries: readonly InsertOptions[],
    options: { manager?: EntityManager } = {},
  ): Promise<string[]> {
    if (!isArray(entries)) throw new InvalidInputError('insertAll.entries', 'must be an array');
    if (entries.length === 0) return [];
    const definition = this.registry.resolve(fsm);
    const schema = definition.stateSchema;
    // docs/schemas.md: each entry's state validated (a schema may answer a promise).
    const checked =
      schema === undefined
        ? entries
        : await Promise.all(
            entries.map((e, i) => Promise.resolve(withSchemaState(schema, e, `insertAll[${i}]`))),
          );
    return this.traced('insert', definition.name, entries.length, async (traceContext) => {
      const rows = checked.map((entry, i) => {
        if (entry?.manager !== undefined) {
          throw new InvalidInputError(
            `insertAll[${i}].manager`,
            'pass manager as the third argument of insertAll',
          );
        }
        return withTraceContext(
          buildInsertRow(definition, entry, this.runtime.options, `insertAll[${i}]`),
          traceContext,
        );
      });
      const client = await this.clientOf(options.manager);
      const inserted = await insertInstances(this.runtime.sql, { rows }, client);
      if (!options.manager) {
        this.runtime.insertedDue(inserted.filter((r) => r.due).map((r) => rows[r.ord]!));
        if (inserted.some((r) => !r.due)) {
          for (const row of rows) if (row.held !== true) this.armWakeUp(row);
        }
        for (const r of inserted) this.armDeadline(rows[r.ord] as InsertRow);
      }
      return inserted.map((r) => r.id);
    });
  }

  /**
   * Delivers a signal to a live instance in one statement (docs/design.md §8.1; see
   * `InstanceControl.signal`). Typed form (docs/schemas.md): `signal(Fsm, target, name, payload)`
   * with a class carrying its schemas' types takes only a declared signal name and its schema's
   * input, and validates the payload with that FSM's schema (no extra statement). The untyped
   * form validates it too when some FSM declares a schema for `name` (one read of the target).
   * The schema's output is what gets stored.
   */
  override signal<F extends SchemaTypedClass<FsmSchemas>, N extends SchemaSignalName<SchemasOf<F>>>(
    fsm: F,
    target: Target,
    name: N,
    payload: SchemaSignalInput<SchemasOf<F>, N>,
    options?: { dedupKey?: string; manager?: EntityManager },
  ): Promise<void>;
  override signal(
    target: Target,
    name: string,
    payload?: unknown,
    options?: { dedupKey?: string; manager?: EntityManager },
  ): Promise<void>;
  override async signal(...args: readonly unknown[]): Promise<void> {
    if (typeof args[0] !== 'function') {
      const [target, name, payload, options] = args as Parameters<InstanceControl['signal']>;
      await this.deliver(target, name, payload ?? {}, options);
      return;
    }
    const [fsm, target, name, payload, options] = args as [
      Type<unknown>,
      Target,
      string,
      unknown,
      { dedupKey?: string; manager?: EntityManager } | undefined,
    ];
    const definition = this.registry.resolve(fsm);
    const checked = await schemaPayload(
      this.registry,
      this.runtime.sql,
      definition,
      target,
      name,
      payload ?? {},
    );
    await super.deliver(target, name, checked, options);
  }

  /** @internal `signal` (and callbacks) with the payload validated by its schema (docs/schemas.md). */
  protected override async deliver(
    target: Target,
    name: string,
    payload: unknown,
    options?: { dedupKey?: string; manager?: EntityManager },
  ): Promise<{ readonly duplicate: boolean }> {
    const checked = this.registry.hasSignalSchema(name)
      ? await schemaPayload(this.registry, this.runtime.sql, undefined, target, name, payload, () =>
          this.transactionOf(options),
        )
      : payload;
    return super.deliver(target, name, checked, options);
  }

  /**
   * A signed URL that delivers a POST's JSON body as `signal` to the instance (docs/callbacks.md):
   * `<callbacks.baseUrl>/<token>`, HMAC-signed with `callbacks.secret`, valid `ttlMs` (default
   * `callbacks.ttl`), single-use with `once`. A key target is resolved to its instance now
   * (`NoTargetError` when none answers). Serve it with `GenDurableCallbacksModule`.
   */
  async callbackUrl(
    target: Target,
    signal: string,
    options: { ttlMs?: number; once?: boolean } = {},
  ): Promise<string> {
    const config = this.callbacksConfig();
    if (typeof signal !== 'string' || signal.length === 0) {
      throw new InvalidInputError('callbackUrl.signal', 'must be a non-empty string');
    }
    const ttlMs = options.ttlMs ?? config.ttl;
    if (!Number.isInteger(ttlMs) || ttlMs <= 0) {
      throw new InvalidInputError('callbackUrl.ttlMs', 'must be an integer > 0 (ms)');
    }
    if (options.once !== undefined && typeof options.once !== 'boolean') {
      throw new InvalidInputError('callbackUrl.once', 'must be a boolean');
    }
    const to = resolveTarget(target, 'callbackUrl.target');
    const id = 'id' in to ? to.id : (await this.get(target))?.id;
    if (id === undefined) throw new NoTargetError(targetLabel(to), 'no callback URL was made');
    const { token } = signCallbackToken(config.secret, {
      id,
      signal,
      expiresAt: Date.now() + ttlMs,
      once: options.once ?? false,
    });
    return `${config.baseUrl.replace(/\/+$/, '')}/${token}`;
  }

  /**
   * Delivers a callback (docs/callbacks.md): verifies `token` (`CallbackTokenError` `invalid` or
   * `expired`), then signals its instance with `payload` under the token's dedup key, so a
   * retried POST delivers once. A single-use token delivered before is `CallbackTokenError`
   * `used`; a reusable one answers `duplicate: true`. `NoTargetError` when the instance ended.
   */
  async deliverCallback(token: string, payload: unknown): Promise<{ duplicate: boolean }> {
    const config = this.callbacksConfig();
    if (typeof token !== 'string') throw new CallbackTokenError('invalid');
    const claims = verifyCallbackToken(config.secret, token, Date.now());
    const { duplicate } = await this.deliver({ id: claims.id }, claims.signal, payload, {
      dedupKey: callbackDedupKey(claims.nonce),
    });
    if (duplicate && claims.once) throw new CallbackTokenError('used');
    return { duplicate };
  }

  private callbacksConfig(): { secret: string; baseUrl: string; ttl: number } {
    const config = this.runtime.options.callbacks;
    if (!config) {
      throw new ConfigurationError(
        'callbacks',
        'is not configured: GenDurableModule.forRoot({ callbacks: { secret, baseUrl } }) (docs/callbacks.md)',
      );
    }
    return config;
  }

  /**
   * @internal the connection of the caller's TypeORM transaction a `signal` joins (`manager`:
   * the EntityManager of an active transaction).
   */
  protected transactionOf(
    options: { manager?: EntityManager } | undefined,
  ): Promise<PoolClient | undefined> {
    return this.clientOf(options?.manager);
  }

  private async clientOf(manager: EntityManager | undefined): Promise<PoolClient | undefined> {
    if (manager === undefined) return undefined;
    const runner = manager.queryRunner;
    if (!runner || !runner.isTransactionActive) {
      throw new InvalidInputError(
        'manager',
        'must be the EntityManager of an active TypeORM transaction (dataSource.transaction(manager => …))',
      );
    }
    return (await runner.connect()) as PoolClient;
  }
}
