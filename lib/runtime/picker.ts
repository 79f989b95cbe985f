import type { SqlExecutor } from '../db/sql-executor';
import type { Limiter, LimiterSlot } from '../limiter/limiter.interface';
import type { ResolvedOptions } from '../options/resolved-options';
import { CLAIM_RUNNABLE, LOAD_ENRICHMENT } from '../sql/claim.sql';
import { RELEASE_CLAIMS } from '../sql/lease.sql';
import type { Telemetry } from '../telemetry/telemetry';
import type {
  ChildRecord,
  ClaimedRow,
  ClaimRecord,
  EnrichmentRecord,
  InboxRecord,
} from './claimed-row';
import { faultPoint, FAULTS_ENABLED } from './fault-points';
import { emitThrottled } from './throttle-telemetry';

const CLAIM_ATTEMPTS = 3;
const ARBITER_INDEX = 'gen_durable_concurrency_active';

/**
 * One pick through the production SQL (docs/design.md §5.3–5.4): claim with its enrichment in one
 * statement (bounded retry of the K = 1 arbiter race), then admission of gated and
 * rate-limited rows (denied rows released by one guarded statement). Used by the
 * schedulers and by the testing drain, so both run the same statements. Any failure after
 * the claim committed releases the whole batch best-effort (crediting admitted slots), then
 * rethrows.
 */
export class Picker {
  constructor(
    private readonly sql: SqlExecutor,
    private readonly options: ResolvedOptions,
    private readonly telemetry: Telemetry,
    readonly limiter: Limiter,
  ) {}

  async pick(queue: string, batch: number, worker: string): Promise<ClaimedRow[]> {
    let records: ClaimRecord[] = [];
    for (let attempt = 1; ; attempt++) {
      try {
        records = await this.sql.query<ClaimRecord>(CLAIM_RUNNABLE, [
          queue,
          batch,
          worker,
          this.options.leaseTtl,
          Object.keys(this.options.concurrencyLimits),
        ]);
        break;
      } catch (err) {
        if ((err as { constraint?: string }).constraint !== ARBITER_INDEX) throw err;
        this.telemetry.emit('concurrency:contended', { count: 1 }, { queue });
        if (attempt >= CLAIM_ATTEMPTS) return [];
      }
    }
    if (records.length === 0) return [];
    if (FAULTS_ENABLED) {
      await faultPoint('pick.afterClaim', { ids: records.map((r) => r.id), worker });
    }
    const rows = records.map((r) => toRow(r, worker));
    try {
      return await this.admit(queue, worker, rows);
    } catch (err) {
      await this.release(worker, rows).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Admission (docs/design.md §5.4, §16): gated or rate-limited rows go to the limiter in claim order
   * (unlimited picks skip it); each admitted row takes its drawn slot; denied rows are
   * released by one guarded statement and reported per key (`concurrency:throttled`,
   * `rate_limit:throttled`). Returns the rows to run, in claim order.
   */
  async admit(queue: string, worker: string, rows: ClaimedRow[]): Promise<ClaimedRow[]> {
    const limited = rows.filter((r) => r.gated || r.rateLimit !== null);
    if (limited.length === 0) return rows;
    const result = await this.limiter.admit(
      limited.map((r) => ({
        id: r.id,
        gateKey: r.gated ? r.concurrencyKey : null,
        rateKey: r.rateLimit,
        weight: r.weight,
      })),
      queue,
    );
    emitThrottled(this.telemetry, result.throttled, queue);
    const slots = new Map(result.admitted.map((a) => [a.id, a.slot]));
    for (const row of rows) if (slots.has(row.id)) row.slot = slots.get(row.id) ?? null;
    if (result.denied.length === 0) return rows;
    const denied = new Set(result.denied);
    await this.release(
      worker,
      rows.filter((r) => denied.has(r.id)),
    );
    return rows.filter((r) => !denied.has(r.id));
  }

  /**
   * Guarded release back to runnable (attempt and eligible_at kept; lock, lease and shard
   * cleared), then the released rows' slots are credited. Returns released ids.
   */
  async release(worker: string, rows: readonly ClaimedRow[]): Promise<string[]> {
    if (rows.length === 0) return [];
    const released = await this.sql.query<{ id: string }>(RELEASE_CLAIMS, [
      worker,
      rows.map((r) => r.id),
      rows.map((r) => r.claimSeq),
    ]);
    const ids = new Set(released.map((r) => r.id));
    const slots: LimiterSlot[] = [];
    for (const row of rows) {
      if (row.slot && ids.has(row.id)) slots.push(row.slot);
      if (ids.has(row.id)) row.slot = null;
    }
    if (slots.length > 0) await this.limiter.credit(slots);
    return [...ids];
  }

  /** Heartbeat (docs/design.md §17.1): renews the slots of held rows. Never throws. */
  async renew(rows: readonly ClaimedRow[]): Promise<void> {
    const slots = rows.flatMap((r) => (r.slot ? [r.slot] : []));
    if (slots.length > 0) await this.limiter.renew(slots).catch(() => undefined);
  }

  /** Re-reads inbox and children of held rows (inline chains, docs/design.md §7): one statement. */
  async enrich(rows: readonly ClaimedRow[]): Promise<void> {
    const records = await this.sql.query<EnrichmentRecord>(LOAD_ENRICHMENT, [
      rows.map((r) => r.id),
    ]);
    const byId = new Map(records.map((r) => [r.id, r]));
    for (const row of rows) {
      const record = byId.get(row.id);
      row.inbox = inboxView(record?.inbox ?? null);
      row.children = childrenView(record?.children ?? null);
    }
  }
}

const NONE: readonly never[] = Object.freeze([]);

function inboxView(records: InboxRecord[] | null): ClaimedRow['inbox'] {
  if (records === null) return NONE;
  return Object.freeze(
    records.map((s) => Object.freeze({ id: s.id, name: s.name, payload: s.payload })),
  );
}

function childrenView(records: ChildRecord[] | null): ClaimedRow['children'] {
  if (records === null) return NONE;
  return Object.freeze(
    records.map((c) =>
      Object.freeze({
        id: c.id,
        fsm: c.fsm,
        status: c.status,
        state: c.state,
        result: c.result,
        lastError: c.last_error,
      }),
    ),
  );
}

function toRow(r: ClaimRecord, worker: string): ClaimedRow {
  return {
    id: r.id,
    fsm: r.fsm,
    fsmVersion: r.fsm_version,
    step: r.step,
    state: r.state,
    attempt: r.attempt,
    awaits: r.awaits,
    queue: r.queue,
    priority: r.priority,
    concurrencyKey: r.concurrency_key,
    concurrencyShard: r.concurrency_shard,
    rateLimit: r.rate_limit,
    weight: r.weight,
    claimSeq: r.claim_seq,
    parentId: r.parent_id,
    gated: r.gated,
    worker,
    inbox: inboxView(r.inbox),
    children: childrenView(r.children),
  };
}
