import { SqlExecutor } from '../../../lib/db/sql-executor';
import type { GenDurableEvent, GenDurableEventName } from '../../../lib';
import type { LimitConfig, LimiterEntry } from '../../../lib/limiter/limiter.interface';
import { Telemetry } from '../../../lib/telemetry/telemetry';
import type { TestDatabase } from '../../support/test-database';

/** A SqlExecutor over the test database's pool (schema public), recording statement names. */
export function executorOf(db: TestDatabase): { sql: SqlExecutor; statements: string[] } {
  const sql = new SqlExecutor(db.pool, {
    schema: 'public',
    preparedStatements: true,
    statementTimeoutMs: 30_000,
  });
  const statements: string[] = [];
  sql.onStatement((e) => statements.push(e.name));
  return { sql, statements };
}

/** A Telemetry whose events are recorded. */
export function recordedTelemetry(): {
  telemetry: Telemetry;
  events: GenDurableEvent[];
  of(name: GenDurableEventName): GenDurableEvent[];
  close(): void;
} {
  const telemetry = new Telemetry('limits-test');
  const events: GenDurableEvent[] = [];
  const sub = telemetry.events$.subscribe((e) => events.push(e));
  return {
    telemetry,
    events,
    of: (name) => events.filter((e) => e.event === name),
    close: () => {
      sub.unsubscribe();
      telemetry.complete();
    },
  };
}

export const gate = (name: string, limit: number, shards = 1): LimitConfig => ({
  kind: 'conc',
  name,
  rate: null,
  capacity: limit,
  shards: Math.min(limit, shards),
});

/** `allowed` per `periodSeconds`, capacity `burst` (default allowed). */
export const rate = (
  name: string,
  allowed: number,
  periodSeconds: number,
  burst = allowed,
  shards = 1,
): LimitConfig => ({
  kind: 'rate',
  name,
  rate: allowed / periodSeconds,
  capacity: burst,
  shards,
});

/**
 * Inserts `n` executing rows (as if claimed, provisional shard 0 when gated) carrying the
 * given keys; returns their ids in order.
 */
export async function insertExecuting(
  db: TestDatabase,
  n: number,
  o: { gateKey?: string | null; rateKey?: string | null; weight?: number; worker?: string } = {},
): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO gen_durable (fsm, step, status, queue, concurrency_key, concurrency_shard, rate_limit, weight, locked_by, lease_expires_at)
     SELECT 'fixture', 'start', 'executing', 'limits', $2::text, CASE WHEN $2::text IS NULL THEN NULL ELSE 0 END, $3, $4,
            $5, now() + interval '1 minute'
       FROM generate_series(1, $1::int)
     RETURNING id`,
    [n, o.gateKey ?? null, o.rateKey ?? null, o.weight ?? 1, o.worker ?? 'fixture-worker'],
  );
  return rows.map((r) => r.id);
}

export function entriesOf(
  ids: readonly string[],
  o: { gateKey?: string | null; rateKey?: string | null; weight?: number | readonly number[] },
): LimiterEntry[] {
  return ids.map((id, i) => ({
    id,
    gateKey: o.gateKey ?? null,
    rateKey: o.rateKey ?? null,
    weight: Array.isArray(o.weight)
      ? (o.weight[i] as number)
      : ((o.weight as number | undefined) ?? 1),
  }));
}

export interface BucketRow {
  kind: string;
  key: string;
  shard: number;
  capacity: number;
  available: number;
  last_refill: Date | null;
}

export async function bucketsOf(
  db: TestDatabase,
  kind: 'conc' | 'rate',
  key?: string,
): Promise<BucketRow[]> {
  const { rows } = await db.pool.query<BucketRow>(
    `SELECT kind, key, shard, capacity, available, last_refill FROM gen_durable_buckets
      WHERE kind = $1 AND ($2::text IS NULL OR key = $2) ORDER BY key, shard`,
    [kind, key ?? null],
  );
  return rows;
}

export const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);
