import type { SqlExecutor } from '../db/sql-executor';
import type { ResolvedOptions } from '../options/resolved-options';
import { CLAIM_RUNNABLE, LOAD_CHILDREN, LOAD_INBOXES } from '../sql/claim.sql';
import { RELEASE_CLAIMS } from '../sql/lease.sql';
import type { Telemetry } from '../telemetry/telemetry';
import type { ChildRecord, ClaimedRow, ClaimRecord, InboxRecord } from './claimed-row';
import { faultPoint, FAULTS_ENABLED } from './fault-points';

const CLAIM_ATTEMPTS = 3;
const ARBITER_INDEX = 'gen_durable_concurrency_active';

/**
 * One pick through the production SQL (SPEC §5.3–5.4): claim (bounded retry of the K = 1
 * arbiter race), then the two enrichment reads. Used by the schedulers and by the testing
 * drain, so both run the same statements. Any failure after the claim committed releases
 * the whole batch best-effort, then rethrows.
 */
export class Picker {
  constructor(
    private readonly sql: SqlExecutor,
    private readonly options: ResolvedOptions,
    private readonly telemetry: Telemetry,
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
    if (FAULTS_ENABLED) await faultPoint('pick.afterClaim', { ids: records.map((r) => r.id), worker });
    const rows = records.map((r) => toRow(r, worker));
    try {
      await this.enrich(rows);
      return rows;
    } catch (err) {
      await this.release(worker, rows).catch(() => undefined);
      throw err;
    }
  }

  /** Guarded release back to runnable (attempt and eligible_at kept). Returns released ids. */
  async release(worker: string, rows: readonly ClaimedRow[]): Promise<string[]> {
    if (rows.length === 0) return [];
    const released = await this.sql.query<{ id: string }>(RELEASE_CLAIMS, [worker, rows.map((r) => r.id), rows.map((r) => r.claimSeq)]);
    return released.map((r) => r.id);
  }

  /** The two enrichment reads: unconsumed inboxes and every stored child, by id order. */
  async enrich(rows: readonly ClaimedRow[]): Promise<void> {
    const ids = rows.map((r) => r.id);
    const inboxes = await this.sql.query<InboxRecord>(LOAD_INBOXES, [ids]);
    const children = await this.sql.query<ChildRecord>(LOAD_CHILDREN, [ids]);
    const inboxOf = new Map<string, ClaimedRow['inbox'][number][]>();
    for (const s of inboxes) {
      const list = inboxOf.get(s.target_id) ?? [];
      list.push(Object.freeze({ id: s.id, name: s.name, payload: s.payload }));
      inboxOf.set(s.target_id, list);
    }
    const childrenOf = new Map<string, ClaimedRow['children'][number][]>();
    for (const c of children) {
      const list = childrenOf.get(c.parent_id) ?? [];
      list.push(Object.freeze({ id: c.id, fsm: c.fsm, status: c.status, state: c.state, result: c.result, lastError: c.last_error }));
      childrenOf.set(c.parent_id, list);
    }
    for (const row of rows) {
      row.inbox = Object.freeze(inboxOf.get(row.id) ?? []);
      row.children = Object.freeze(childrenOf.get(row.id) ?? []);
    }
  }
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
    inbox: [],
    children: [],
  };
}
