import { Logger } from '@nestjs/common';

import { isTransient, type SqlExecutor } from '../db/sql-executor';
import { OUTCOME_KINDS } from '../fsm/outcome-kinds';
import type { ResolvedFlusher } from '../options/resolved-options';
import type { Telemetry } from '../telemetry/telemetry';
import { faultPoint, FAULTS_ENABLED } from './fault-points';
import type { FlushEntry, FlushReply } from './flush-entry';
import { type FlushEffects, isSolo, writeFlush, writeSoloFlush } from './flush-write';

export type { FlushEffects } from './flush-write';

/**
 * An entry waiting for its answer. A class, not an object literal: it lives until its flush
 * answers, and V8's allocation-site pretenuring may move a literal's allocations to the old
 * generation for good (docs/performance.md "Allocation per step").
 */
class Pending {
  /** Answered already (by its flush, or `error` by the watchdog): later answers are dropped. */
  answered = false;

  constructor(
    readonly entry: FlushEntry,
    readonly resolve: (reply: FlushReply) => void,
    /** The watchdog's tick when the entry was handed over. */
    readonly tick: number,
  ) {}
}

/**
 * The watchdog ticks this many times per answer timeout; an entry is answered `error` at the
 * first tick more than that many ticks after its own: between 1 and 1.25 answer timeouts.
 */
const WATCHDOG_TICKS = 4;

/** First retry delay of a failed flush, ms; doubles up to {@link MAX_RETRY_DELAY_MS}. */
const FIRST_RETRY_DELAY_MS = 40;
const MAX_RETRY_DELAY_MS = 1_000;
/** At least this many attempts, even with a retry window shorter than their backoff. */
const MIN_FLUSH_ATTEMPTS = 3;

/**
 * Group commit (docs/design.md §6.2–6.4). Natural batching: when no flush is in flight, pending
 * entries flush at once; arrivals during a flush form the next one (≤ maxBatch). Never two
 * flushes at once. A flush no rider can follow is one autocommit UPDATE ("solo"), any other one
 * transaction; transient failures are retried (docs/design.md §26.3) until half the lease; a
 * failed flush answers `error` to all its entries and leaves the rows executing for the reaper.
 */
export class Flusher {
  private pending: Pending[] = [];
  /** The entries of the flush in flight (answered at its end). */
  private inFlight: readonly Pending[] = [];
  private flushing: Promise<void> | undefined;
  private delayTimer: NodeJS.Timeout | undefined;
  /** Answers what waited past `answerTimeoutMs`; runs while an entry is unanswered. */
  private watchdog: NodeJS.Timeout | undefined;
  private tick = 0;
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly sql: SqlExecutor,
    readonly config: ResolvedFlusher,
    private readonly telemetry: Telemetry,
    private readonly afterCommit: (effects: FlushEffects) => void,
    /**
     * How long a failed flush is retried, ms: `leaseTtl / 2`, while the claims it carries are
     * still valid (docs/design.md §26.3).
     */
    private readonly retryWindowMs = 30_000,
    /**
     * How long an entry may wait for its answer before it is answered `error` (its row stays
     * executing for the reaper): longer than a flush's retries can take, so it fires only when
     * a flush hangs where no timeout reaches (docs/design.md §6.4).
     */
    private readonly answerTimeoutMs = 2 * retryWindowMs,
  ) {}

  /** Hands an entry to the next flush; resolves once its transaction committed or failed. */
  submit(entry: FlushEntry): Promise<FlushReply> {
    return new Promise<FlushReply>((resolve) => this.enqueue(entry, resolve));
  }

  /**
   * {@link submit} with a callback instead of a promise (the executor's per-step path). The
   * answer comes from the entry's flush, or is `error` once it waited `answerTimeoutMs`: one
   * watchdog timer for every entry, not a timer per step (docs/performance.md "Allocation per
   * step").
   */
  enqueue(entry: FlushEntry, answer: (reply: FlushReply) => void): void {
    this.pending.push(new Pending(entry, answer, this.tick));
    if (this.watchdog === undefined) {
      this.watchdog = setInterval(() => this.watch(), this.answerTimeoutMs / WATCHDOG_TICKS);
      this.watchdog.unref();
    }
    this.kick();
  }

  /** A watchdog tick: answers `error` to what waited too long; stops when nothing waits. */
  private watch(): void {
    this.tick++;
    let waiting = 0;
    for (const list of [this.inFlight, this.pending]) {
      for (const p of list) {
        if (p.answered) continue;
        if (this.tick - p.tick > WATCHDOG_TICKS) {
          this.logger.error(
            `outcome of ${p.entry.fsm}#${p.entry.id} got no flush answer in ${this.answerTimeoutMs} ms; its row stays executing for the reaper`,
          );
          answer(p, 'error');
        } else waiting++;
      }
    }
    if (waiting === 0) {
      clearInterval(this.watchdog);
      this.watchdog = undefined;
    }
  }

  /**
   * A transactional step's entry committed in the step's own transaction, not in a flush of
   * this flusher (docs/transactional-steps.md): runs the after-commit effects a flush of it
   * would have run (pokes, settled awaits, the gate credit) and answers its reply.
   */
  committedApart(entry: FlushEntry, effects: FlushEffects): FlushReply {
    try {
      this.afterCommit(effects);
    } catch (err) {
      this.logger.error(`after-commit effects failed: ${String(err)}`);
    }
    if (effects.cancelledIds.includes(entry.id)) return 'cancelled';
    return effects.committed.some((e) => e.id === entry.id) ? 'committed' : 'stale';
  }

  /** Flushes everything pending (shutdown). */
  async drain(): Promise<void> {
    if (this.delayTimer) {
      clearTimeout(this.delayTimer);
      this.delayTimer = undefined;
    }
    while (this.pending.length > 0 || this.flushing) {
      if (!this.flushing) this.start();
      await this.flushing;
    }
  }

  private kick(): void {
    if (this.flushing || this.delayTimer) return;
    if (this.config.maxDelayMs > 0) {
      this.delayTimer = setTimeout(() => {
        this.delayTimer = undefined;
        this.start();
      }, this.config.maxDelayMs);
    } else {
      this.start();
    }
  }

  private start(): void {
    if (this.flushing || this.pending.length === 0) return;
    this.flushing = this.loop().finally(() => {
      this.flushing = undefined;
      if (this.pending.length > 0) this.kick();
    });
  }

  private async loop(): Promise<void> {
    // Let entries that settle in the same turn of the event loop join this flush.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, this.config.maxBatch);
      this.inFlight = batch;
      try {
        await this.flushBatch(batch);
      } finally {
        this.inFlight = [];
      }
    }
  }

  private async flushBatch(batch: Pending[]): Promise<void> {
    const started = performance.now();
    const entries = batch.map((p) => p.entry).sort((a, b) => compareIds(a.id, b.id));
    let effects: FlushEffects;
    let failed: readonly FlushEntry[] = [];
    let failure: unknown;
    try {
      if (isSolo(entries)) {
        // Phase 1, one autocommit statement; phase 2 (rare) what it refused or held — the
        // terminals of signaled rows, and rows whose cancel was requested that need riders —
        // in a transaction with the riders. A phase-2 failure leaves phase 1 committed and
        // answered as such.
        const solo = await this.withRetries(() => writeSoloFlush(this.sql, entries));
        effects = solo.effects;
        const committedIds = new Set(effects.committed.map((e) => e.id));
        const rest = entries.filter(
          (e) => !committedIds.has(e.id) && (OUTCOME_KINDS[e.kind].terminal || solo.held.has(e.id)),
        );
        if (rest.length > 0) {
          try {
            effects = merge(effects, await this.withRetries(() => this.inTransaction(rest)));
          } catch (err) {
            failed = rest;
            failure = err;
          }
        }
      } else {
        effects = await this.withRetries(() => this.inTransaction(entries));
      }
    } catch (err) {
      failed = entries;
      failure = err;
      effects = { committed: [], pokeQueues: new Set(), settledIds: [], cancelledIds: [] };
    }
    const wrote = failed !== entries;
    if (wrote && FAULTS_ENABLED) {
      await faultPoint('flush.afterCommit', { ids: entries.map((e) => e.id) });
    }
    if (wrote && this.telemetry.wants('flush:stop')) {
      this.telemetry.emit(
        'flush:stop',
        { count: entries.length, durationMs: performance.now() - started },
        {},
      );
    }
    if (failed.length > 0) {
      this.telemetry.emit('flush:error', { count: failed.length }, { error: String(failure) });
      this.logger.error(
        `flush of ${failed.length} outcome(s) failed; rows stay executing for the reaper: ${String(failure)}`,
      );
    }
    const committed = new Set(effects.committed.map((e) => e.id));
    const cancelled = new Set(effects.cancelledIds);
    const errored = new Set(failed.map((e) => e.id));
    for (const p of batch) {
      const id = p.entry.id;
      answer(
        p,
        cancelled.has(id)
          ? 'cancelled'
          : committed.has(id)
            ? 'committed'
            : errored.has(id)
              ? 'error'
              : 'stale',
      );
    }
    if (!wrote) return;
    try {
      this.afterCommit(effects);
    } catch (err) {
      this.logger.error(`after-commit effects failed: ${String(err)}`);
    }
  }

  /**
   * Runs one flush write, retrying connection-class and transient failures (docs/design.md
   * §26.3) with a doubling backoff for as long as the claims can still be valid
   * (`retryWindowMs`, `leaseTtl / 2`), so a reset link or a Postgres restart of a few seconds
   * loses no outcome. Each attempt runs on a fresh connection (a failed one was destroyed); the
   * ownership guard makes a retry of a write that did commit answer stale, never apply twice.
   * Rethrows the last error.
   */
  private async withRetries<T>(write: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.retryWindowMs;
    let delay = FIRST_RETRY_DELAY_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        return await write();
      } catch (err) {
        if (!isTransient(err)) throw err;
        const wait = Math.min(delay, MAX_RETRY_DELAY_MS) * (0.5 + Math.random() / 2);
        if (attempt >= MIN_FLUSH_ATTEMPTS && Date.now() + wait > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, wait));
        delay *= 2;
      }
    }
  }

  private inTransaction(entries: FlushEntry[]): Promise<FlushEffects> {
    return this.sql.transaction((tx) => writeFlush(this.sql, tx, entries));
  }
}

/** Answers `p` once: a second answer (its flush after the watchdog's `error`) is dropped. */
function answer(p: Pending, reply: FlushReply): void {
  if (p.answered) return;
  p.answered = true;
  p.resolve(reply);
}

function merge(a: FlushEffects, b: FlushEffects): FlushEffects {
  return {
    committed: [...a.committed, ...b.committed],
    pokeQueues: new Set([...a.pokeQueues, ...b.pokeQueues]),
    settledIds: [...a.settledIds, ...b.settledIds],
    cancelledIds: [...a.cancelledIds, ...b.cancelledIds],
  };
}

function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}
