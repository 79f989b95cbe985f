import type { SqlExecutor } from '../db/sql-executor';
import { gateHolder, type Limiter, type LimiterSlot } from '../limiter/limiter.interface';
import type { ResolvedOptions } from '../options/resolved-options';
import {
  type BehindFloor,
  type ClaimBatch,
  CLAIM_FAIR,
  CLAIM_RUNNABLE,
  type ClaimHead,
  type ClaimStart,
  LOAD_ENRICHMENT,
  PROBE_BEHIND_FLOOR,
} from '../sql/claim.sql';
import { RELEASE_CLAIMS } from '../sql/lease.sql';
import type { Telemetry } from '../telemetry/telemetry';
import type { ClaimFloor } from './claim-floor';
import type { ClaimedRow } from './claimed-row';
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
  ) {
    this.gates = Object.keys(options.concurrencyLimits);
  }

  /** This node's gate names, passed to every claim. */
  private readonly gates: readonly string[];

  /**
   * The queues whose claims are fair (CLAIM_FAIR, docs/many-tenants.md "Fair claims by key"):
   * a queue enters when a plain claim returns a keyed row, and leaves when a fair claim finds
   * no fairness head left. A plain queue never leaves CLAIM_RUNNABLE.
   */
  private readonly fairQueues = new Set<string>();

  /**
   * Makes the claims of `queues` fair from the next one (their FSMs declare
   * `@DurableFsm({ fairnessKey })`); a queue found without fairness heads goes back to plain.
   */
  declareFair(queues: Iterable<string>): void {
    for (const q of queues) this.fairQueues.add(q);
  }

  /** The queue's claims are fair now (CLAIM_FAIR, docs/many-tenants.md "Fair claims by key"). */
  isFair(queue: string): boolean {
    return this.fairQueues.has(queue);
  }

  /** {@link pickBatch}'s rows: what the testing drain and the specs run. */
  async pick(queue: string, batch: number, worker: string): Promise<ClaimedRow[]> {
    return (await this.pickBatch(queue, batch, worker)).rows;
  }

  /**
   * One pick, with the queue's pause as the claim read it (docs/design.md §27.6): a paused
   * queue claims nothing and answers `paused: true`; the scheduler learns the pause from it.
   * With a `floor` (the scheduler's, one per queue), the claim starts at it when its budget
   * allows and teaches it the head it saw (docs/design.md §5.3.1); without one it scans from
   * the head of the index, as the testing drain and the specs do.
   */
  async pickBatch(
    queue: string,
    batch: number,
    worker: string,
    floor?: ClaimFloor,
  ): Promise<{ rows: ClaimedRow[]; paused: boolean }> {
    let claim: ClaimBatch | undefined;
    // Where the claim starts, taken once: an attempt retried after a lost K = 1 race starts
    // where the first did (a wide start stays wide, docs/design.md §5.3.1).
    let from: ClaimStart | undefined;
    let fromTaken = false;
    for (let attempt = 1; ; attempt++) {
      try {
        const input = {
          queue,
          limit: batch,
          worker,
          leaseMs: this.options.leaseTtl,
          gates: this.gates,
        };
        if (this.fairQueues.has(queue)) {
          // The fair claim walks its heads, not the pick index: no floor (docs/many-tenants.md).
          claim = await CLAIM_FAIR.run(this.sql, input);
          if (claim.fair === false) this.fairQueues.delete(queue);
        } else {
          if (!fromTaken) {
            from = floor?.start(Date.now());
            fromTaken = true;
          }
          const horizonCheckMs = floor?.horizonCheckMs(Date.now());
          claim = await CLAIM_RUNNABLE.run(this.sql, { ...input, from, horizonCheckMs });
          floor?.learn(
            claim.head,
            claim.dbNow ?? new Date(),
            from === undefined,
            claim.execMs ?? 0,
            Date.now(),
            claim.pinXids ?? 0,
            claim.horizonXids,
          );
          if (claim.rows.some((r) => r.fairnessKey != null)) this.fairQueues.add(queue);
        }
        break;
      } catch (err) {
        if ((err as { constraint?: string }).constraint !== ARBITER_INDEX) throw err;
        this.telemetry.emit('concurrency:contended', { count: 1 }, { queue });
        if (attempt >= CLAIM_ATTEMPTS) return { rows: [], paused: false };
      }
    }
    if (claim === undefined) return { rows: [], paused: false };
    const rows: ClaimedRow[] = claim.rows;
    if (rows.length === 0) return { rows, paused: claim.paused };
    if (FAULTS_ENABLED) {
      await faultPoint('pick.afterClaim', { ids: rows.map((r) => r.id), worker });
    }
    try {
      return { rows: await this.admit(queue, worker, rows, floor), paused: false };
    } catch (err) {
      await this.release(worker, rows, floor).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Admission (docs/design.md §5.4, §16): gated or rate-limited rows go to the limiter in claim order
   * (unlimited picks skip it); each admitted row takes its drawn slot; denied rows are
   * released by one guarded statement and reported per key (`concurrency:throttled`,
   * `rate_limit:throttled`). Returns the rows to run, in claim order.
   */
  async admit(
    queue: string,
    worker: string,
    rows: ClaimedRow[],
    floor?: ClaimFloor,
  ): Promise<ClaimedRow[]> {
    const limited = rows.filter((r) => r.gated || r.rateLimit !== null);
    if (limited.length === 0) return rows;
    const result = await this.limiter.admit(
      limited.map((r) => ({
        id: r.id,
        gateKey: r.gated ? r.concurrencyKey : null,
        rateKey: r.rateLimit,
        weight: r.weight,
        holder: gateHolder(r.id, r.claimSeq),
      })),
      queue,
    );
    emitThrottled(this.telemetry, result.throttled, queue);
    const slots = new Map(result.admitted.map((a) => [a.id, a.slot]));
    for (const row of rows) if (slots.has(row.id)) row.slot = slots.get(row.id) ?? null;
    if (result.denied.length === 0) return rows;
    // The denied rows go back to runnable at their place, which may be behind the floor.
    const denied = new Set(result.denied);
    await this.release(
      worker,
      rows.filter((r) => denied.has(r.id)),
      floor,
    );
    return rows.filter((r) => !denied.has(r.id));
  }

  /**
   * Guarded release back to runnable (attempt and eligible_at kept; lock, lease and shard
   * cleared), then the released rows' slots are credited. Returns released ids. With the
   * queue's claim `floor`, the floor goes back to the earliest released row's place.
   */
  async release(
    worker: string,
    rows: readonly ClaimedRow[],
    floor?: ClaimFloor,
  ): Promise<string[]> {
    if (rows.length === 0) return [];
    const released = await RELEASE_CLAIMS.run(this.sql, { worker, rows });
    // Back at their places, which may be behind the queue's claim floor (docs/design.md §5.3.1).
    if (released.earliest !== undefined) floor?.lower(released.earliest);
    const ids = new Set(released.ids);
    const slots: LimiterSlot[] = [];
    for (const row of rows) {
      if (row.slot && ids.has(row.id)) slots.push(row.slot);
      if (ids.has(row.id)) row.slot = null;
    }
    if (slots.length > 0) await this.limiter.credit(slots);
    return [...ids];
  }

  /**
   * The claim floor's look behind itself (docs/design.md §5.3.1): the oldest runnable row of
   * `queue` before `before`, read-only (PROBE_BEHIND_FLOOR).
   */
  probeBehindFloor(queue: string, before: ClaimHead): Promise<BehindFloor> {
    return PROBE_BEHIND_FLOOR.run(this.sql, { queue, before });
  }

  /** Heartbeat (docs/design.md §17.1): renews the slots of held rows. Never throws. */
  async renew(rows: readonly ClaimedRow[]): Promise<void> {
    const slots = rows.flatMap((r) => (r.slot ? [r.slot] : []));
    if (slots.length > 0) await this.limiter.renew(slots).catch(() => undefined);
  }

  /** Re-reads inbox and children of held rows (inline chains, docs/design.md §7): one statement. */
  async enrich(rows: readonly ClaimedRow[]): Promise<void> {
    const records = await LOAD_ENRICHMENT.run(this.sql, { ids: rows.map((r) => r.id) });
    const byId = new Map(records.map((r) => [r.id, r]));
    for (const row of rows) {
      const record = byId.get(row.id);
      row.inbox = record?.inbox ?? NONE;
      row.children = record?.children ?? NONE;
      row.inboxTraceContexts = record?.inboxTraceContexts ?? NONE;
    }
  }
}

const NONE: readonly never[] = Object.freeze([]);
