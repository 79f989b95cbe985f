import { Client } from 'pg';

/** A sampled violation, kept with its first examples. */
export interface Violation {
  count: number;
  examples: string[];
}

export interface RecoveryTrack {
  readonly kind: string;
  readonly target: string;
  readonly from: number;
  readonly rows: Map<string, bigint>;
  /** When each row was seen claimed again (or terminal). */
  readonly recovered: Map<string, number>;
  done?: number;
}

/**
 * The monitor connection (docs/reliability.md §3.1): never through a proxy, samples the hard
 * invariants every `intervalMs` (I-K1-DB, I-STALL; I-DEDUP occupants and negative join
 * counters every 10th tick), sums `pg_stat_database.deadlocks` deltas across restarts, and
 * tracks recoveries: the rows a killed worker held until every one was claimed again.
 * Reconnects by itself while Postgres restarts.
 */
export class Monitor {
  private client: Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private tick = 0;
  private lastDeadlocks: number | undefined;
  readonly violations = new Map<string, Violation>();
  samples = 0;
  deadlocks = 0;
  readonly recoveries: RecoveryTrack[] = [];

  constructor(
    private readonly url: string,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      if (this.ticking) return;
      this.ticking = true;
      void this.sample().finally(() => (this.ticking = false));
    }, this.intervalMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    while (this.ticking) await new Promise((r) => setTimeout(r, 5));
    await this.client?.end().catch(() => undefined);
    this.client = undefined;
  }

  /** Runs one query on the monitor connection (reconnecting); throws when Postgres is down. */
  async query<R extends Record<string, unknown>>(
    text: string,
    params: unknown[] = [],
  ): Promise<R[]> {
    if (!this.client) {
      const client = new Client({
        connectionString: this.url,
        application_name: 'gd-monitor',
        connectionTimeoutMillis: 2_000,
      });
      client.on('error', () => {
        if (this.client === client) this.client = undefined;
      });
      await client.connect();
      this.client = client;
    }
    try {
      return (await this.client.query<R>(text, params)).rows;
    } catch (err) {
      const c = this.client;
      this.client = undefined;
      await c?.end().catch(() => undefined);
      throw err;
    }
  }

  /** Starts timing a recovery: done when every row's claim_seq moved past its value now. */
  trackRecovery(
    kind: string,
    target: string,
    from: number,
    rows: readonly { id: string; claim_seq: string }[],
  ): void {
    if (rows.length === 0) return;
    this.recoveries.push({
      kind,
      target,
      from,
      rows: new Map(rows.map((r) => [r.id, BigInt(r.claim_seq)])),
      recovered: new Map(),
    });
  }

  private note(kind: string, detail: string): void {
    const v = this.violations.get(kind) ?? { count: 0, examples: [] };
    v.count++;
    if (v.examples.length < 10) v.examples.push(`${new Date().toISOString()} ${detail}`);
    this.violations.set(kind, v);
  }

  private async sample(): Promise<void> {
    try {
      this.tick++;
      const rows = await this.query<{ kind: string; detail: string }>(
        `SELECT 'I-K1-DB' AS kind, concurrency_key AS detail FROM gen_durable
          WHERE status = 'executing' AND concurrency_key IS NOT NULL AND concurrency_shard IS NULL
          GROUP BY concurrency_key HAVING count(*) > 1
         UNION ALL
         SELECT 'I-STALL', g.id::text FROM gen_durable g
          WHERE g.status = 'awaiting_signal' AND g.updated_at < now() - interval '1350 milliseconds'
            AND EXISTS (SELECT 1 FROM gen_durable_signals s WHERE s.target_id = g.id AND s.consumed_at IS NULL
                          AND s.name = ANY (g.awaits) AND s.inserted_at < now() - interval '1350 milliseconds')`,
      );
      this.samples++;
      for (const r of rows) this.note(r.kind, r.detail);
      if (this.tick % 10 === 0) {
        const slow = await this.query<{ kind: string; detail: string }>(
          `SELECT 'I-DEDUP' AS kind, correlation_guard AS detail FROM gen_durable
            WHERE correlation_guard IS NOT NULL GROUP BY correlation_guard HAVING count(*) > 1
           UNION ALL
           SELECT 'I-JOIN', id::text FROM gen_durable WHERE children_pending < 0`,
        );
        for (const r of slow) this.note(r.kind, r.detail);
      }
      if (this.tick % 25 === 0) {
        const [d] = await this.query<{ deadlocks: string }>(
          `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`,
        );
        const now = Number(d?.deadlocks ?? 0);
        // Crash recovery resets the statistics: a drop starts a new baseline.
        if (this.lastDeadlocks !== undefined && now > this.lastDeadlocks) {
          this.deadlocks += now - this.lastDeadlocks;
        }
        this.lastDeadlocks = now;
      }
      const open = this.recoveries.filter((r) => r.done === undefined);
      if (open.length > 0) {
        const ids = [...new Set(open.flatMap((r) => [...r.rows.keys()]))];
        const current = await this.query<{ id: string; claim_seq: string; status: string }>(
          `SELECT id, claim_seq, status FROM gen_durable WHERE id = ANY ($1::bigint[])`,
          [ids],
        );
        const byId = new Map(current.map((r) => [r.id, r]));
        for (const r of open) {
          const now = Date.now();
          const pending = [...r.rows].filter(([id, seq]) => {
            const row = byId.get(id);
            const waiting =
              row !== undefined &&
              BigInt(row.claim_seq) <= seq &&
              row.status !== 'done' &&
              row.status !== 'failed' &&
              row.status !== 'cancelled';
            if (!waiting && !r.recovered.has(id)) r.recovered.set(id, now);
            return waiting;
          });
          if (pending.length === 0) r.done = now;
        }
      }
    } catch {
      // Postgres is restarting or the connection was killed: the next tick reconnects.
    }
  }
}
