import { Logger } from '@nestjs/common';

import { isTransient, type SqlExecutor } from '../db/sql-executor';
import {
  ADMIT,
  CLOSE_LIMITS,
  CREDIT_GATES,
  LOCK_GATE_SHARDS,
  PRUNE_RATE_BUCKETS,
  READ_GATE_DEFICITS,
  RECONCILE_GATES,
  type AdmitVerdict,
  type GateCredit,
} from '../sql/limiter.sql';
import type { Telemetry } from '../telemetry/telemetry';
import { AdmitVerdicts } from './admit-verdicts';
import { upsertLimitConfigs } from './upsert-limit-configs';
import type {
  AdmitResult,
  LimitClosure,
  LimitConfig,
  Limiter,
  LimiterEntry,
  LimiterSlot,
  ReconcileResult,
} from './limiter.interface';

/** Retries of an admit that tripped a bucket constraint, and of a credit (docs/design.md §22, fixed internals). */
const ATTEMPTS = 3;
const CHECK_CONSTRAINT = 'gen_durable_buckets_check';
const PK_CONSTRAINT = 'gen_durable_buckets_pkey';
const DEADLOCK = '40P01';
/** Rate keys per bucket-GC page. */
const PRUNE_PAGE = 1000;
/** Default settle window of the gate reconcile, ms (see READ_GATE_DEFICITS). */
const RECONCILE_SETTLE_MS = 1000;

/**
 * The default limiter (docs/design.md §16.2): sharded counters in gen_durable_buckets, admitted in one
 * statement per pick, fenced by the bucket CHECK and PK. A violated constraint means a
 * concurrent admit won a race (a cold mint, a merged overdraft): the statement aborted whole
 * and is retried against committed truth, 3 attempts, each reported as `concurrency:contended`
 * (CHECK) or `rate_limit:contended` (PK), then rethrown. `renew` is a no-op: a PG slot lives
 * until credited or reconciled.
 */
export class PostgresLimiter implements Limiter {
  private readonly logger = new Logger('GenDurable');

  /**
   * `settleMs`: how long the gate reconcile lets in-flight credits land between seeing a
   * deficit and repairing it (default 1 000 ms; only paid when some counter looks leaked).
   */
  constructor(
    private readonly sql: SqlExecutor,
    private readonly telemetry: Telemetry,
    private readonly settleMs = RECONCILE_SETTLE_MS,
  ) {}

  async admit(entries: readonly LimiterEntry[], queue: string): Promise<AdmitResult> {
    if (entries.length === 0) return { admitted: [], denied: [], throttled: [] };
    for (let attempt = 1; ; attempt++) {
      try {
        return verdicts(entries, await ADMIT.run(this.sql, { entries }));
      } catch (err) {
        const { constraint, code } = err as { constraint?: string; code?: string };
        if (constraint === CHECK_CONSTRAINT || code === DEADLOCK) {
          this.telemetry.emit('concurrency:contended', { count: 1 }, { queue });
        } else if (constraint === PK_CONSTRAINT) {
          this.telemetry.emit('rate_limit:contended', { count: 1 }, { queue });
        } else {
          throw err;
        }
        if (attempt >= ATTEMPTS) throw err;
      }
    }
  }

  async credit(slots: readonly LimiterSlot[]): Promise<void> {
    if (slots.length === 0) return;
    const counts = new Map<string, { key: string; shard: number; n: number }>();
    for (const s of slots) {
      const id = `${s.shard}\u0000${s.key}`;
      const c = counts.get(id);
      if (c) c.n += 1;
      else counts.set(id, { key: s.key, shard: s.shard, n: 1 });
    }
    const credits: readonly GateCredit[] = [...counts.values()];
    for (let attempt = 1; ; attempt++) {
      try {
        await CREDIT_GATES.run(this.sql, { credits });
        return;
      } catch (err) {
        if (attempt >= ATTEMPTS || !isTransient(err)) {
          // A lost credit is a leaked slot: stricter until the GC reconcile repairs it (§18).
          this.logger.warn(
            `credit of ${slots.length} gate slot(s) failed; the GC reconcile will repair them: ${String(err)}`,
          );
          return;
        }
      }
    }
  }

  renew(): Promise<void> {
    return Promise.resolve();
  }

  /** One CLOSE_LIMITS (docs/design.md §16.5); a failure is logged, not thrown. */
  async throttle(closures: readonly LimitClosure[]): Promise<void> {
    if (closures.length === 0) return;
    try {
      await CLOSE_LIMITS.run(this.sql, { closures });
    } catch (err) {
      this.logger.warn(
        `throttle of ${closures.length} limit(s) failed; the throttled rows still wait their delay: ${String(err)}`,
      );
    }
  }

  syncConfig(configs: readonly LimitConfig[]): Promise<void> {
    return upsertLimitConfigs(this.sql, configs);
  }

  async reconcile(): Promise<ReconcileResult> {
    let buckets = 0;
    let after = '';
    for (;;) {
      const page = await PRUNE_RATE_BUCKETS.run(this.sql, {
        afterKey: after,
        pageSize: PRUNE_PAGE,
      });
      buckets += page.deleted;
      if (!page.lastKey) break;
      after = page.lastKey;
    }
    // A counter is raised only by a deficit that outlived the settle window: a credit still in
    // flight (outcome committed, credit not yet applied) looks like a leak for an instant.
    const deficits = await READ_GATE_DEFICITS.run(this.sql);
    const raise = new Map(deficits.map((d) => [`${d.shard}\u0000${d.key}`, d.deficit]));
    if (deficits.length > 0) await new Promise((resolve) => setTimeout(resolve, this.settleMs));
    const gates = await this.sql.transaction(async (tx) => {
      const locked = await LOCK_GATE_SHARDS.run(this.sql, undefined, tx);
      if (locked.length === 0) return 0;
      const shards = locked.map((l) => ({
        key: l.key,
        shard: l.shard,
        raise: raise.get(`${l.shard}\u0000${l.key}`) ?? 0,
      }));
      return RECONCILE_GATES.run(this.sql, { shards }, tx);
    });
    return { buckets, gates };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Turns the per-entry rows of ADMIT into the contract's result and per-key reports. */
function verdicts(entries: readonly LimiterEntry[], records: readonly AdmitVerdict[]): AdmitResult {
  const byId = new Map(records.map((r) => [r.id, r]));
  const v = new AdmitVerdicts();
  for (const entry of entries) {
    const r = byId.get(entry.id);
    if (entry.gateKey !== null) v.gate(entry.gateKey, r?.gateOk === true);
    if (entry.rateKey !== null && r?.rateChecked) v.rate(entry.rateKey, r.rateOk);
    if (r?.admitted) {
      v.admit(
        entry.id,
        entry.gateKey !== null && r.shard !== null
          ? { key: entry.gateKey, shard: r.shard, id: entry.id }
          : null,
      );
    } else {
      v.deny(entry.id);
    }
  }
  return v.result();
}
