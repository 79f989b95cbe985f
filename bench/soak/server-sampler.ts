/**
 * What the soak reads from the server at each window's end (docs/performance.md, "Soak"): the
 * claim statement's pg_stat_statements counters, gen_durable's live and dead tuples and
 * autovacuum count, its table and index sizes, the xmin horizon's age and the pin's XID age.
 * One connection of its own; harness SQL, not the library's.
 */
import { Client } from 'pg';

import type { StatementTotal } from './phase-statements';
import type { StatementCounters } from './window-stats';

export interface ServerReading {
  readonly claim: StatementCounters;
  readonly liveTuples: number;
  readonly deadTuples: number;
  readonly autovacuums: number;
  readonly tableBytes: number;
  readonly indexBytes: number;
  readonly horizonXids: number;
  readonly pinXids: number | null;
  /** The session with the oldest XID or xmin: application name, backend type, state. */
  readonly horizonHolder: string | null;
}

/** The claim's text is the only one with this locking clause (lib/sql/claim.sql.ts). */
const CLAIM_MARK = '%FOR NO KEY UPDATE OF g SKIP LOCKED%';

export class ServerSampler {
  private constructor(private readonly client: Client) {}

  static async connect(url: string): Promise<ServerSampler> {
    const client = new Client({ connectionString: url, application_name: 'gd-soak-sampler' });
    client.on('error', () => undefined);
    await client.connect();
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    return new ServerSampler(client);
  }

  async read(pinPid: number | null): Promise<ServerReading> {
    const { rows } = await this.client.query<{
      calls: string;
      total_ms: number;
      rows: string;
      hit: string;
      read: string;
      live: string;
      dead: string;
      autovacuums: string;
      table_bytes: string;
      index_bytes: string;
      horizon: number | null;
      pin: number | null;
      holder: string | null;
    }>(
      `SELECT s.calls, s.total_ms, s.rows, s.hit, s.read,
              t.n_live_tup AS live, t.n_dead_tup AS dead, t.autovacuum_count AS autovacuums,
              pg_table_size('gen_durable') AS table_bytes,
              pg_indexes_size('gen_durable') AS index_bytes,
              (SELECT max(greatest(age(a.backend_xid), age(a.backend_xmin)))
                 FROM pg_stat_activity a WHERE a.pid <> pg_backend_pid()) AS horizon,
              (SELECT greatest(age(a.backend_xid), age(a.backend_xmin))
                 FROM pg_stat_activity a WHERE a.pid = $2) AS pin,
              (SELECT concat_ws(' ', nullif(a.application_name, ''), a.backend_type, a.state,
                                'xid age ' || age(a.backend_xid), 'xmin age ' || age(a.backend_xmin),
                                left(a.query, 40))
                 FROM pg_stat_activity a
                WHERE a.pid <> pg_backend_pid()
                  AND (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
                ORDER BY greatest(age(a.backend_xid), age(a.backend_xmin)) DESC LIMIT 1) AS holder
         FROM (SELECT coalesce(sum(calls), 0) AS calls,
                      coalesce(sum(total_exec_time), 0)::float8 AS total_ms,
                      coalesce(sum(p.rows), 0) AS rows,
                      coalesce(sum(shared_blks_hit), 0) AS hit,
                      coalesce(sum(shared_blks_read), 0) AS read
                 FROM pg_stat_statements p
                WHERE p.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND p.query LIKE $1) s,
              pg_stat_user_tables t
        WHERE t.relname = 'gen_durable'`,
      [CLAIM_MARK, pinPid ?? 0],
    );
    const r = rows[0];
    if (!r) throw new Error('sampler: gen_durable is missing from pg_stat_user_tables');
    return {
      claim: {
        calls: Number(r.calls),
        totalMs: r.total_ms,
        rows: Number(r.rows),
        sharedHit: Number(r.hit),
        sharedRead: Number(r.read),
      },
      liveTuples: Number(r.live),
      deadTuples: Number(r.dead),
      autovacuums: Number(r.autovacuums),
      tableBytes: Number(r.table_bytes),
      indexBytes: Number(r.index_bytes),
      horizonXids: r.horizon ?? 0,
      pinXids: pinPid === null ? null : r.pin,
      horizonHolder: r.holder,
    };
  }

  /** Every statement of this database in pg_stat_statements (the phase report's readings). */
  async statements(): Promise<StatementTotal[]> {
    const { rows } = await this.client.query<{
      id: string;
      text: string;
      calls: string;
      total_ms: number;
    }>(
      `SELECT p.queryid::text AS id, left(regexp_replace(min(p.query), '[[:space:]]+', ' ', 'g'), 90) AS text,
              sum(p.calls) AS calls, sum(p.total_exec_time)::float8 AS total_ms
         FROM pg_stat_statements p
        WHERE p.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        GROUP BY p.queryid`,
    );
    return rows.map((r) => ({
      queryId: r.id,
      text: r.text,
      calls: Number(r.calls),
      totalMs: r.total_ms,
    }));
  }

  /** Each index of gen_durable and its size, largest first (the report's end-of-run table). */
  async indexSizes(): Promise<{ index: string; bytes: number }[]> {
    const { rows } = await this.client.query<{ index: string; bytes: string }>(
      `SELECT indexrelname AS index, pg_relation_size(indexrelid) AS bytes
         FROM pg_stat_user_indexes WHERE relname = 'gen_durable' ORDER BY 2 DESC`,
    );
    return rows.map((r) => ({ index: r.index, bytes: Number(r.bytes) }));
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}
