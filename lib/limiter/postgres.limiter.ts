import { Logger } from '@nestjs/common';

import { isTransient, type SqlExecutor } from '../db/sql-executor';
import {
  ADMIT,
  CREDIT_GATES,
  LOCK_GATE_SHARDS,
  PRUNE_RATE_BUCKETS,
  READ_GATE_DEFICITS,
  RECONCILE_GATES,
} from '../sql/limiter.sql';
import type { Telemetry } from '../telemetry/telemetry';
import { AdmitVerdicts } from './admit-verdicts';
import { upsertLimitConfigs } from './upsert-limit-configs';
import type {
  AdmitResult,
  LimitConfig,
  Limiter,
  LimiterEntry,
  LimiterSlot,
  ReconcileResult,
} from './limiter.interface';

/** Retries of an admit that tripped a bucket constraint, and of a credit (SPEC §22 fixed internals). */
const ATTEMPTS = 3;
const CHECK_CONSTRAINT = 'gen_durable_buckets_check';
const PK_CONSTRAINT = 'gen_durable_buckets_pkey';
const DEADLOCK = '40P01';
/** Rate keys per bucket-GC page. */
const PRUNE_PAGE = 1000;
/** Default settle window of the gate reconcile, ms (see READ_GATE_DEFICITS). */
const RECONCILE_SETTLE_MS = 1000;

interface AdmitRecord {
  id: string;
  admitted: boolean;
  shard: number | null;
  gate_ok: boolean;
  rate_checked: boolean;
  rate_ok: boolean;
}

/**
 * The default limiter (SPEC §16.2): sharded counters in gen_durable_buckets, admitted in one
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
    const params = [
      entries.map((e) => e.id),
      entries.map((e) => e.gateKey),
      entries.map((e) => e.rateKey),
      entries.map((e) => e.weight),
    ];
    for (let attempt = 1; ; attempt++) {
      try {
        const records = await this.sql.query<AdmitRecord>(ADMIT, params);
        return verdicts(entries, records);
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
    const rows = [...counts.values()];
    const params = [rows.map((r) => r.key), rows.map((r) => r.shard), rows.map((r) => r.n)];
    for (let attempt = 1; ; attempt++) {
      try {
        await this.sql.query(CREDIT_GATES, params);
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

  syncConfig(configs: readonly LimitConfig[]): Promise<void> {
    return upsertLimitConfigs(this.sql, configs);
  }

  async reconcile(): Promise<ReconcileResult> {
    let buckets = 0;
    let after = '';
    for (;;) {
      const page = (
        await this.sql.query<{ deleted: number; last_key: string | null }>(PRUNE_RATE_BUCKETS, [
          after,
          PRUNE_PAGE,
        ])
      )[0];
      buckets += page?.deleted ?? 0;
      if (!page?.last_key) break;
      after = page.last_key;
    }
    // A counter is raised only by a deficit that outlived the settle window: a credit still in
    // flight (outcome committed, credit not yet applied) looks like a leak for an instant.
    const deficits = await this.sql.query<{ key: string; shard: number; deficit: number }>(
      READ_GATE_DEFICITS,
    );
    const raise = new Map(deficits.map((d) => [`${d.shard}\u0000${d.key}`, d.deficit]));
    if (deficits.length > 0) await new Promise((resolve) => setTimeout(resolve, this.settleMs));
    const gates = await this.sql.transaction(async (tx) => {
      const locked = await this.sql.query<{ key: string; shard: number }>(LOCK_GATE_SHARDS, [], tx);
      if (locked.length === 0) return 0;
      const changed = await this.sql.query<{ changed: number }>(
        RECONCILE_GATES,
        [
          locked.map((l) => l.key),
          locked.map((l) => l.shard),
          locked.map((l) => raise.get(`${l.shard}\u0000${l.key}`) ?? 0),
        ],
        tx,
      );
      return changed[0]?.changed ?? 0;
    });
    return { buckets, gates };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Turns the per-entry rows of ADMIT into the contract's result and per-key reports. */
function verdicts(entries: readonly LimiterEntry[], records: readonly AdmitRecord[]): AdmitResult {
  const byId = new Map(records.map((r) => [r.id, r]));
  const v = new AdmitVerdicts();
  for (const entry of entries) {
    const r = byId.get(entry.id);
    if (entry.gateKey !== null) v.gate(entry.gateKey, r?.gate_ok === true);
    if (entry.rateKey !== null && r?.rate_checked) v.rate(entry.rateKey, r.rate_ok);
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
