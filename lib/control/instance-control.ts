import type { PoolClient } from 'pg';

import type { Schedules } from '../cron/schedules';
import { InvalidInputError } from '../errors/invalid-input.error';
import { FsmNotRegisteredError } from '../errors/fsm-not-registered.error';
import type { FsmGraph } from '../fsm/fsm-graph';
import type { HistoryEntry, HistoryPage } from '../instance/history-entry';
import type { InstanceView } from '../instance/instance-view';
import type {
  PauseQueueResult,
  QueueBacklog,
  QueueStatus,
  ResumeQueueResult,
} from '../instance/queue-status';
import type { InboxSignal } from '../instance/inbox-signal';
import type { LiveFsmVersion } from '../instance/live-fsm-version';
import type { ReadStreamOptions, StreamChunk, StreamInfo } from '../fsm/durable-stream';
import { READ_INBOX } from '../sql/dashboard.sql';
import { HEALTH_RUNNABLE_BACKLOG } from '../sql/health.sql';
import { LIVE_FSM_VERSIONS } from '../sql/verify.sql';
import type { AwaitResult } from '../instance/instance-view';
import { type AwaitInstanceOptions, resolveAwaitOptions } from './await-options';
import { BulkActions } from './bulk-actions';
import type { BulkResult, CancelAllOptions, RetryAllOptions } from './bulk-options';
import { cancelInstance } from './cancel-instance';
import type { CancelOptions, CancelResult } from './cancel-options';
import type { ControlRuntime } from './control-runtime';
import { deliverSignal } from './deliver-signal';
import type { Explanation } from './explanation';
import { forkInstance } from './fork-instance';
import { holdInstance, releaseInstance } from './hold-instance';
import type { HoldOptions, HoldResult, ReleaseOptions } from './hold-options';
import type { ForkOptions } from './fork-options';
import { purgeInstance } from './purge-instance';
import type { PurgeAllOptions, PurgeAllResult, PurgeOptions } from './purge-options';
import { fsmGraphOf } from './fsm-graph';
import { explainInstance } from './instance-explain';
import type {
  CountOptions,
  InstanceCount,
  InstanceFilter,
  ListPage,
  ListResult,
} from './instance-filter';
import { readInstanceHistory, resolveHistoryPage } from './instance-history';
import { InstanceQuery } from './instance-query';
import type { LimiterStatus } from './limiter-status';
import { QueueControl } from './queue-control';
import { readLimiterStatus } from './read-limiter-status';
import { readOverview } from './read-stats-overview';
import { readResolved, readTarget, targetId } from './read-target';
import { readStreamChunks, readStreamInfo, resolveReadStream } from './read-stream';
import { retryInstance } from './retry-instance';
import type { RetryOptions } from './retry-options';
import type { StatsOverview, StatsOverviewOptions } from './stats-overview';
import { readStepCounts } from './step-counts';
import type {
  BlockedSequence,
  BlockedSequencesOptions,
  SkipSequenceHeadResult,
} from './blocked-sequence';
import { readBlockedSequences, skipSequenceHead } from './sequence-control';
import { readFairnessHeads } from './fairness-control';
import type { FairnessHeadsOptions, FairQueueHeads } from './fairness-head';
import { resolveTarget, type Target } from './target';

export type { InboxSignal, LiveFsmVersion, QueueBacklog };

/** The schedule operations every face offers (docs/design.md §29); the engine's add `upsert`. */
export type ControlSchedules = Pick<
  Schedules,
  'list' | 'get' | 'pause' | 'resume' | 'trigger' | 'remove'
>;

/** One registered FSM version as `registeredFsms` answers it. */
export interface RegisteredFsm {
  readonly name: string;
  readonly version: number;
  readonly kind: 'fsm' | 'job';
  readonly queue: string;
  /** Its step names, in declaration order. */
  readonly steps: readonly string[];
}

/** An FSM as `graph` and `stepCounts` take it: its class or its name. */
export type FsmRef = (abstract new (...args: never[]) => unknown) | string;

const DEFAULT_INBOX_LIMIT = 100;
const MAX_INBOX_LIMIT = 1000;
const DEFAULT_BACKLOG_CAP = 10_000;

/**
 * Instance control, once for every face (docs/design.md §27, §32): get, list, count, history,
 * inbox, streams, signal, cancel, hold, release, retry, fork, purge, the bulk actions, queue pause / resume / status, explain,
 * stats, limiter status, step counts, graph. `EngineService` and `GenDurableClient` extend it,
 * each handing its {@link ControlRuntime} (the engine's, or one over the client's pool) through
 * `controlRuntime()`, read at each call (the engine's runtime is built at module init, after
 * Nest constructed the service). A face that cannot answer an operation says so through its
 * runtime (`NotAvailableError`), so every face has the same methods with the same checks,
 * statements and typed errors. Nest-free. `SignalOptions`: what a face's `signal` takes beyond
 * `dedupKey` (the engine's `manager`).
 */
export abstract class InstanceControl<SignalOptions extends object = Record<never, never>> {
  /** @internal the runtime every operation runs on; read at each call. */
  protected abstract controlRuntime(): ControlRuntime;

  /** @internal the connection of the caller's transaction a `signal` joins (the engine's `manager`), or undefined. */
  protected abstract transactionOf(
    options: SignalOptions | undefined,
  ): Promise<PoolClient | undefined>;

  /** Stored schedules: `list`, `get`, `pause`, `resume`, `remove`, `trigger`. */
  abstract readonly schedules: ControlSchedules;

  private memo:
    | { runtime: ControlRuntime; query: InstanceQuery; queues: QueueControl; bulk: BulkActions }
    | undefined;

  /** The runtime with its per-runtime helpers, built once it exists. */
  private get parts(): {
    runtime: ControlRuntime;
    query: InstanceQuery;
    queues: QueueControl;
    bulk: BulkActions;
  } {
    const runtime = this.controlRuntime();
    if (this.memo?.runtime !== runtime) {
      this.memo = {
        runtime,
        // On the read replica when the engine has one (`readDataSource`): list and count may lag.
        query: new InstanceQuery(runtime.reads ?? runtime.sql),
        queues: new QueueControl(runtime),
        bulk: new BulkActions(runtime),
      };
    }
    return this.memo;
  }

  /** Runs `run` in the producer span `gen_durable <operation> <target>` when tracing is on (docs/design.md §31), else with null. */
  protected traced<T>(
    operation: 'insert' | 'send',
    target: string,
    count: number,
    run: (traceContext: string | null) => Promise<T>,
  ): Promise<T> {
    const otel = this.controlRuntime().otel;
    if (otel === undefined) return run(null);
    const attributes: Readonly<Record<string, string | number>> =
      operation === 'insert'
        ? { 'gen_durable.fsm': target, 'messaging.batch.message_count': count }
        : { 'gen_durable.signal': target };
    return otel.produce(operation, target, attributes, run);
  }

  /**
   * The instance row, or null. `target`: an id, `{ id }` or `{ correlationKey }` (by key: only
   * the current occupant, docs/design.md §11). One statement.
   */
  async get(target: Target): Promise<InstanceView | null> {
    return readTarget(this.controlRuntime().sql, target, 'get.target');
  }

  /**
   * Waits until the instance settles — done, failed, cancelled, or parked (awaiting a signal
   * or its children) — or, with `until: 'terminal'`, until it ended; answers from the row
   * (docs/design.md §9). At `timeout` ms (default 5 000) it answers `busy` with the row's
   * snapshot: call again. `target`: an id, `{ id }` or `{ correlationKey }` (looked up once as
   * `get` does: the live occupant, else the most recent ended instance with the key);
   * `not_found` when no instance answers it. The engine's waiters are woken by its own commits
   * and by one batched probe per `await.tick`; the client re-reads the row after 25 ms, doubling
   * to 1 s (docs/client.md "Awaiting an instance"). `InvalidInputError` for bad options.
   */
  async await(target: Target, options?: AwaitInstanceOptions): Promise<AwaitResult> {
    const to = resolveTarget(target, 'await.target');
    const { timeoutMs, until } = resolveAwaitOptions(options);
    const runtime = this.controlRuntime();
    const id = 'id' in to ? to.id : (await readResolved(runtime.sql, to))?.id;
    if (id === undefined) return { kind: 'not_found' };
    return runtime.watcher.await(id, timeoutMs, until);
  }

  /**
   * The chunks of stream `name` of an instance (docs/streams.md), from offset `from` (default 0)
   * in offset order, each exactly once and without a gap: an async iterable to read with
   * `for await`. It reads what is committed, then (`follow`, the default) waits for chunks
   * written later — woken at once by this engine's own appends and outcomes, else by one
   * batched probe per `await.tick` (the client re-reads after 25 ms, doubling to 250 ms) —
   * and ends once the instance has ended and every chunk was read. A reader that stops and
   * starts again with `from` = the offset after the last one it received misses and repeats
   * nothing, whatever happened to the nodes meanwhile. `target`: an id, `{ id }` or
   * `{ correlationKey }` (resolved once, as `await` does). `InvalidInputError` at the call for
   * bad arguments; `NoTargetError` from the first read when no instance answers; an instance
   * deleted while followed (GC, purge) ends the iteration. `signal` ends it when aborted. An
   * engine that shuts down makes its followers throw `NotAvailableError` (not an end).
   */
  readStream<T = unknown>(
    target: Target,
    name: string,
    options?: ReadStreamOptions,
  ): AsyncIterable<StreamChunk<T>> {
    const checked = resolveReadStream(target, name, options);
    const runtime = this.controlRuntime();
    return readStreamChunks<T>(
      runtime.sql,
      runtime.streamWaiter,
      checked.to,
      checked.name,
      checked.options,
    );
  }

  /**
   * How many chunks stream `name` of an instance holds (`length`: the next chunk's offset, 0
   * for a stream never written) and whether the instance ended (docs/streams.md). One
   * statement (two by key). `NoTargetError` when no instance answers the target.
   */
  async streamInfo(target: Target, name: string): Promise<StreamInfo> {
    return readStreamInfo(this.controlRuntime().sql, target, name);
  }

  /**
   * Instances matching `filter`, newest first, one keyset page (docs/design.md §27.7): pass
   * the answer's `next` as `page.after` for the next page (absent on the last). One statement
   * per page at any depth; each call examines at most `page.scanLimit` rows (default 10 000)
   * through the index its filter allows, so a page may come back short with a `next`.
   */
  async list(filter: InstanceFilter = {}, page?: ListPage): Promise<ListResult> {
    return this.parts.query.list(filter, page);
  }

  /**
   * How many instances match `filter`, examining at most `cap` rows (default 10 000) through
   * the index its filter allows; `capped: true` means there are at least `count`. One statement.
   */
  async count(filter: InstanceFilter = {}, options?: CountOptions): Promise<InstanceCount> {
    return this.parts.query.count(filter, options);
  }

  /**
   * An instance's step history, newest first (docs/design.md §28.1; docs/operations-control.md
   * "Step history"): at most `limit` rows (default 100, at most 1 000), older than the history
   * id `before` when given (pass the last `id` of a page for the next). What is recorded
   * depends on the FSM's `history` level. One statement, on the read replica when the engine
   * has one (`readDataSource`; it may lag). `NoTargetError` when no instance answers the target
   * (there); `InvalidInputError` for bad options.
   */
  async history(target: Target, options?: HistoryPage): Promise<HistoryEntry[]> {
    const to = resolveTarget(target, 'history.target');
    const runtime = this.controlRuntime();
    return readInstanceHistory(
      runtime.reads ?? runtime.sql,
      to,
      resolveHistoryPage(options, 'history.options'),
    );
  }

  /**
   * An instance's inbox (docs/design.md §8.1): the newest `limit` signals delivered to it
   * (default 100, at most 1 000), consumed or not, newest first. An id is read as given (an
   * unknown id has an empty inbox); a key reads its current occupant's (`NoTargetError` when
   * the key is free). One statement (two by key).
   */
  async inbox(target: Target, options: { limit?: number } = {}): Promise<InboxSignal[]> {
    const to = resolveTarget(target, 'inbox.target');
    const limit = options?.limit ?? DEFAULT_INBOX_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_INBOX_LIMIT) {
      throw new InvalidInputError('inbox.limit', `must be an integer in 1..${MAX_INBOX_LIMIT}`);
    }
    const sql = this.controlRuntime().sql;
    const id = await targetId(sql, to, 'it has no inbox to read');
    return READ_INBOX.run(sql, { id, limit });
  }

  /**
   * Delivers a signal to a live instance in one statement (docs/design.md §8.1). Resolves once
   * stored (or recognised as a duplicate of `dedupKey` for the instance's life, also once it has
   * finished: a retry after a lost answer succeeds); `NoTargetError` when no live instance
   * answers otherwise. A name listed in the target FSM's `cancelOn` cancels the instance
   * instead of being stored (docs/design.md §27.2).
   */
  async signal(
    target: Target,
    name: string,
    payload: unknown = {},
    options?: { dedupKey?: string } & SignalOptions,
  ): Promise<void> {
    await this.deliver(target, name, payload, options);
  }

  /** `signal`, answering whether its dedup key was already stored (nothing new delivered). */
  protected async deliver(
    target: Target,
    name: string,
    payload: unknown,
    options?: { dedupKey?: string } & SignalOptions,
  ): Promise<{ readonly duplicate: boolean }> {
    const runtime = this.controlRuntime();
    const deliver = (traceContext: string | null) =>
      deliverSignal(
        runtime,
        target,
        name,
        payload,
        options?.dedupKey,
        () => this.transactionOf(options),
        traceContext,
      );
    // A name that is not a string fails in deliverSignal, before any span.
    const answer = await (typeof name === 'string' && name.length > 0
      ? this.traced('send', name, 1, deliver)
      : deliver(null));
    await runtime.settle();
    return answer;
  }

  /**
   * Cancels an instance (docs/design.md §27.2; docs/operations-control.md "Cancelling"). A live
   * row that is not executing is cancelled at once, in one statement with its riders: inbox
   * consumed, parent's join decremented, waiters answered `{ kind: 'cancelled', reason }`. An
   * executing row is asked to stop (`requested`): its owner's flush ends it `cancelled` unless
   * its step's terminal outcome commits first (`mode: 'fence'` cancels it at once instead).
   * `children` (default `cascade`) cancels every live descendant too. An ended row is answered
   * in `alreadyTerminal`, unchanged. `NoTargetError` when no instance answers the target.
   */
  async cancel(target: Target, options?: CancelOptions): Promise<CancelResult> {
    const to = resolveTarget(target, 'cancel.target');
    const runtime = this.controlRuntime();
    const result = await cancelInstance(runtime, to, options);
    await runtime.settle();
    return result;
  }

  /**
   * Holds a live instance (docs/operations-control.md "Hold and release"): no node claims it
   * until `release`; it still takes signals (stored, and a parked one wakes to runnable), and
   * `cancel` and `retry` work on it (a retry clears the hold). An executing instance finishes
   * its step (an inline chain may run its next steps on the same claim) and is not claimed
   * again. `changed` is false when it was already held (`reason`, when given, replaces the
   * stored one). One statement, which records a `manual.hold` history row with the `actor`
   * and `reason` (docs/design.md §28.1). `NoTargetError` for a missing target, `InvalidInputError` for
   * an ended one.
   */
  async hold(target: Target, options?: HoldOptions): Promise<HoldResult> {
    const to = resolveTarget(target, 'hold.target');
    return holdInstance(this.controlRuntime(), to, options);
  }

  /**
   * Releases a held instance (docs/operations-control.md "Hold and release"): claimable again,
   * its queue poked when it is due. `changed` is false when it was not held. One statement,
   * which records a `manual.release` history row with the `actor` and `reason`.
   * `NoTargetError` for a missing target.
   */
  async release(target: Target, options?: ReleaseOptions): Promise<HoldResult> {
    const to = resolveTarget(target, 'release.target');
    const runtime = this.controlRuntime();
    const result = await releaseInstance(runtime, to, options);
    await runtime.settle();
    return result;
  }

  /**
   * The sequence keys with instances waiting behind their head (docs/sequences.md "Seeing
   * held keys"), the longest waiting first: each key's head (id, status refined to `'held'`,
   * `'retrying'` or `'scheduled'` for a runnable head, step, last error), how many wait behind
   * it and since when. `limit` 1 … 1 000 (default 100), `key` one key. One statement, whose
   * cost grows with the rows that hold a key. `InvalidInputError` naming a bad option.
   */
  async blockedSequences(options?: BlockedSequencesOptions): Promise<BlockedSequence[]> {
    return readBlockedSequences(this.controlRuntime().sql, options);
  }

  /**
   * The fairness heads of each fair queue (docs/many-tenants.md "Seeing the heads"): per queue
   * (`queue` one queue; default every queue with a head, at most 100), its keys with work in
   * the fair claim's order, the first `limit` (1 … 1 000, default 100) — each key's virtual
   * time, runnable / due / executing rows counted up to `cap` (1 … 100 000, default 1 000) and
   * the row the claim serves next (id, priority, since when it is due, weight). One
   * statement of bounded index reads. `InvalidInputError` naming a bad option.
   */
  async fairnessHeads(options?: FairnessHeadsOptions): Promise<FairQueueHeads[]> {
    return readFairnessHeads(this.controlRuntime().sql, options);
  }

  /**
   * Releases the key of a failed head under `onHeadFailure: 'block'` (docs/sequences.md "When
   * the head fails"): its policy becomes `'skip'`, the failed row is kept, and the next
   * instance of its key runs. `changed` false when it was already `'skip'`. One statement.
   * `NoTargetError` for a missing target; `InvalidInputError` for an instance without a
   * sequence key or one that has not failed (cancel a live head instead).
   */
  async skipSequenceHead(target: Target): Promise<SkipSequenceHeadResult> {
    const to = resolveTarget(target, 'skipSequenceHead.target');
    const runtime = this.controlRuntime();
    const id = await targetId(runtime.sql, to, 'no head was skipped');
    const result = await skipSequenceHead(runtime, id);
    await runtime.settle();
    return result;
  }

  /**
   * Runs a `failed` or `cancelled` instance again (docs/design.md §27.3; docs/operations-control.md
   * "Retrying"): runnable at its step (or `step`), with its state (or `state`, a value or a
   * function of the current one), due now (or `at`), `attempt` and `reaps` reset. A parent
   * still awaiting its children counts it again; one that moved on refuses the retry unless
   * `detach: true`. Typed errors, nothing changed: `NoTargetError`, `InvalidInputError` (a
   * live or done row, bad options, a throwing `state` function), `UnknownStepError`,
   * `DuplicateError` (its correlation key is occupied again).
   */
  async retry<S = Record<string, unknown>>(
    target: Target,
    options?: RetryOptions<S>,
  ): Promise<void> {
    const to = resolveTarget(target, 'retry.target');
    const runtime = this.controlRuntime();
    await retryInstance(runtime, to, options);
    await runtime.settle();
  }

  /**
   * Forks an instance (docs/design.md §28.3; docs/operations-control.md "Forking"): inserts a
   * new instance of the same FSM (its newest registered version, or the source's with
   * `version: 'same'`) at `step` (default: the source's current step) with `state` (a value or
   * a function of the source's state; default: the source's) or the state recorded in the
   * source's history row `fromHistory`; `forkedFrom` on the new row names the source, which is
   * untouched. Resolves with the new id once committed (one transaction: the insert and its
   * mark). Typed errors, nothing written: `NoTargetError`, `InvalidInputError`,
   * `UnknownStepError`, `FsmNotRegisteredError`; `NotAvailableError` on a face without the FSM
   * classes (the client).
   */
  async fork<S = Record<string, unknown>>(
    target: Target,
    options?: ForkOptions<S>,
  ): Promise<string> {
    const to = resolveTarget(target, 'fork.target');
    const runtime = this.controlRuntime();
    const definitions = runtime.node.definitions('fork');
    const source = 'id' in to ? `#${to.id}` : to.correlationKey;
    return this.traced('insert', source, 1, async (traceContext) => {
      const answer = await forkInstance(runtime, definitions, to, options, traceContext);
      if (answer.due) runtime.pokes.poke([answer.queue]);
      await runtime.settle();
      return answer.id;
    });
  }

  /**
   * Cancels every instance `filter` matches (docs/design.md §27.7; docs/operations-control.md
   * "Bulk actions"), each as `cancel` would with `options`: in batches of at most 1 000 rows,
   * each batch read by one keyset statement, then one cancel statement per row. `matched`
   * counts the rows the filter matched, `changed` those this call cancelled or asked to stop.
   * `dryRun: true` only counts. A filter with no criteria is refused unless `all: true`.
   * Resumable: after a crash, call it again.
   */
  async cancelAll(filter: InstanceFilter, options?: CancelAllOptions): Promise<BulkResult> {
    const { runtime, bulk } = this.parts;
    const result = await bulk.cancelAll(filter, options);
    await runtime.settle();
    return result;
  }

  /**
   * Retries every `failed` or `cancelled` instance `filter` matches (docs/design.md §27.7), as
   * `retry` would with `step`, `at` and `detach`, in batches as `cancelAll`. `changed` counts
   * the rows retried; matched rows that cannot be retried (live, their parent moved on, their
   * key occupied, their version lacking `step`) are left alone. `dryRun: true` only counts.
   */
  async retryAll(filter: InstanceFilter, options?: RetryAllOptions): Promise<BulkResult> {
    const { runtime, bulk } = this.parts;
    const result = await bulk.retryAll(filter, options);
    await runtime.settle();
    return result;
  }

  /**
   * Deletes an ended (done, failed or cancelled) instance with its inbox, history and streams
   * (docs/design.md §27.8; docs/operations-control.md "Purging"), as GC would once its
   * retention passed: one read, then one skip-locked delete. The history goes with the row, so
   * the record of the purge is the `instance:purged` event naming `actor`. Typed errors,
   * nothing deleted: `NoTargetError`, `InvalidInputError` (a live instance, naming its status;
   * a child of a live parent; a row that stayed locked; bad options).
   */
  async purge(target: Target, options?: PurgeOptions): Promise<void> {
    const to = resolveTarget(target, 'purge.target');
    const runtime = this.controlRuntime();
    await purgeInstance(runtime, to, options);
    await runtime.settle();
  }

  /**
   * Deletes every ended instance `filter` matches (docs/design.md §27.8), as `purge` would, in
   * batches of at most `batchSize` (default 1 000): one keyset read and one skip-locked delete
   * per batch, so it never waits on GC, workers or another purge (a locked row is left for a
   * later call). A filter naming a live status is refused; without statuses it means done,
   * failed and cancelled. `dryRun: true` only counts (`matched`). A filter with no criteria is
   * refused unless `all: true`. Resumable: after a crash, call it again.
   */
  async purgeAll(filter: InstanceFilter, options?: PurgeAllOptions): Promise<PurgeAllResult> {
    const { runtime, bulk } = this.parts;
    const result = await bulk.purgeAll(filter, options);
    await runtime.settle();
    return result;
  }

  /**
   * Pauses `queue` on every node (docs/design.md §27.6): each scheduler of it stops claiming
   * at its next claim or poll tick (within `pollInterval`; a poke sooner), releases the rows it
   * had buffered and lets running steps finish. Inserts and signals are still accepted. A
   * queue no node runs yet may be paused (`known: false` in the answer). Pausing a paused
   * queue keeps its `pausedAt` and replaces its reason if one is given. One statement.
   */
  async pauseQueue(queue: string, options?: { reason?: string }): Promise<PauseQueueResult> {
    const { runtime, queues } = this.parts;
    const result = await queues.pause(queue, options);
    await runtime.settle();
    return result;
  }

  /** Resumes a paused queue on every node (pokes it); `wasPaused: false` when it was not paused. One statement. */
  async resumeQueue(queue: string): Promise<ResumeQueueResult> {
    const { runtime, queues } = this.parts;
    const result = await queues.resume(queue);
    await runtime.settle();
    return result;
  }

  /**
   * Queues with their pause and counts capped at `cap` (default 10 000): this node's queues,
   * its FSMs' queues, every paused queue and every queue holding runnable rows — or only
   * `queue` (`served` is false on a face that runs no scheduler). One statement (with JIT off,
   * in one transaction), index-served.
   */
  async queueStatus(queue?: string, options?: { cap?: number }): Promise<QueueStatus[]> {
    return this.parts.queues.status(queue, options);
  }

  /**
   * Per queue of `queues`: how long its oldest due runnable row has waited (`headAgeMs`, null
   * when none is due), how many are due (capped at `cap`, default 10 000) and whether it is
   * paused — the health check's backlog read (docs/design.md §21). One statement, index-served
   * (gen_durable_pick per queue).
   */
  async queueBacklog(
    queues: readonly string[],
    options: { cap?: number } = {},
  ): Promise<QueueBacklog[]> {
    if (!Array.isArray(queues) || !queues.every((q) => typeof q === 'string')) {
      throw new InvalidInputError('queueBacklog.queues', 'must be an array of queue names');
    }
    const cap = options?.cap ?? DEFAULT_BACKLOG_CAP;
    if (!Number.isInteger(cap) || cap < 1) {
      throw new InvalidInputError('queueBacklog.cap', 'must be an integer ≥ 1');
    }
    const runtime = this.controlRuntime();
    return HEALTH_RUNNABLE_BACKLOG.run(runtime.reads ?? runtime.sql, { queues, depthCap: cap });
  }

  /**
   * The FSM versions live instances run on, with how many do (the CLI's `verify`, docs/cli.md):
   * one sequential scan of gen_durable — a deploy-time read, not for a hot path.
   */
  async liveFsmVersions(): Promise<LiveFsmVersion[]> {
    return LIVE_FSM_VERSIONS.run(this.controlRuntime().sql);
  }

  /**
   * "Why isn't it running?" (docs/design.md §30; docs/dashboard-data.md): every reason that
   * applies to the instance, blocking ones first, each with a machine `code`, a sentence and
   * its facts — not yet eligible (until when), awaited signal names vs the inbox, children
   * pending, its K = 1 key's holder, a full gate (holders / limit), an empty rate bucket (until
   * when), an expired lease, a paused queue, an FSM version or queue this node does not run
   * (an engine only), an ended row (with its error or cancel reason), or running now (owner,
   * lease). One statement. `NoTargetError` when no instance answers `target`.
   */
  async explain(target: Target): Promise<Explanation> {
    const to = resolveTarget(target, 'explain.target');
    const runtime = this.controlRuntime();
    return explainInstance(runtime.sql, to, runtime.node.explainContext);
  }

  /**
   * The limiters view (docs/design.md §30; docs/dashboard-data.md): the configured gates and
   * rate limits, and live per key — gates: holders / limit over their shards; rate buckets:
   * tokens available now, capacity, refill per second — from the PostgreSQL limiter's counters,
   * at most `cap` counter rows read (default 1 000; `truncated` says more exist). With the
   * Redis limiter the same from Redis (SCAN of its gate and bucket keys, at most `cap` of each;
   * `unreadable` when Redis cannot be read). Two statements. `NotAvailableError` on a face that
   * does not know the engines' limiter (the client).
   */
  async limiterStatus(options?: { cap?: number }): Promise<LimiterStatus> {
    const runtime = this.controlRuntime();
    const limiter = runtime.node.limiter('limiterStatus');
    return readLimiterStatus(runtime.sql, limiter.backend, options, limiter.redis);
  }

  /**
   * The dashboard's overview (docs/design.md §30; docs/dashboard-data.md): per queue the newest
   * once-a-minute snapshot's capped counts by status, the oldest due row, and a sparkline of
   * rows done / failed / cancelled per minute over the last `minutes` (default 60). With no
   * snapshot stored yet (`source: 'live'`), live capped counts of runnable, scheduled and
   * executing rows. Index-served reads of gen_durable_stats, whatever the table size.
   */
  async stats(options?: StatsOverviewOptions): Promise<StatsOverview> {
    const runtime = this.controlRuntime();
    const queues = new Set([
      ...Object.keys(runtime.options.queues),
      ...runtime.registry.all().map((d) => d.queue),
    ]);
    return readOverview(runtime.reads ?? runtime.sql, options, [...queues]);
  }

  /**
   * The state graph of a registered FSM (its newest version, or `version`) from decorator
   * metadata (docs/design.md §30; docs/dashboard-data.md): steps with their declared
   * `@Step({ next })` (null = undeclared) and timeouts, the edges, and `mermaid`, the same
   * graph as Mermaid `stateDiagram-v2` text. `FsmNotRegisteredError` for an FSM (or version)
   * this node does not register; `NotAvailableError` on a face without the FSM classes. No
   * statement.
   */
  graph(fsm: FsmRef, version?: number): FsmGraph {
    const definitions = this.controlRuntime().node.definitions('graph');
    const newest = definitions.resolve(fsm);
    if (version === undefined || version === newest.version) return fsmGraphOf(newest);
    const found = definitions.find(newest.name, version);
    if (!found) throw new FsmNotRegisteredError(newest.name, version);
    return fsmGraphOf(found);
  }

  /**
   * Live instances (not ended) per step of an FSM's newest registered version, for its graph
   * (docs/design.md §30; `renderFsmGraphSvg(graph, counts)`): one capped `count` per step
   * (default cap 10 000; `capped: true` = at least that many). `FsmNotRegisteredError` for an
   * FSM this node does not register; `NotAvailableError` on a face without the FSM classes.
   */
  async stepCounts(
    fsm: FsmRef,
    options?: { cap?: number },
  ): Promise<Record<string, InstanceCount>> {
    const graph = this.graph(fsm);
    const runtime = this.controlRuntime();
    return readStepCounts(
      runtime.reads ?? runtime.sql,
      graph.fsm,
      graph.steps.map((s) => s.name),
      options?.cap,
    );
  }

  /**
   * Every registered FSM version (docs/design.md §30: the dashboard's FSM list), sorted by name
   * then version. No statement. `NotAvailableError` on a face without the FSM classes.
   */
  registeredFsms(): RegisteredFsm[] {
    return this.controlRuntime()
      .node.definitions('registeredFsms')
      .all()
      .map((d) => ({
        name: d.name,
        version: d.version,
        kind: d.kind,
        queue: d.queue,
        steps: [...d.steps.keys()],
      }))
      .sort((a, b) => a.name.localeCompare(b.name) || a.version - b.version);
  }
}
