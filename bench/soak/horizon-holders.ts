/**
 * What holds the xmin horizon back during the soak (docs/performance.md, "Soak"): the pin, an
 * idle transaction that took an XID (a forgotten `BEGIN` in psql after a write), and the
 * readers, REPEATABLE READ transactions that keep one snapshot and read the table again and
 * again (an analytics session). Each is its own connection, outside the engine's pool.
 */
import { Client } from 'pg';

/**
 * What pins the horizon in the pinned phase (`--pin`): `xid`, an idle transaction that took an
 * XID; `reader`, an idle REPEATABLE READ transaction that read once and holds its snapshot, with
 * no XID of its own (a stalled `pg_dump` or report).
 */
export type PinKind = 'xid' | 'reader';

/** An idle transaction holding an XID, or a snapshot ({@link PinKind}), until released. */
export class HorizonPin {
  private constructor(
    private readonly client: Client,
    /** The pinning session's backend pid (the sampler checks its XID's age by it). */
    readonly pid: number,
    readonly xid: string,
  ) {}

  static async open(url: string, kind: PinKind = 'xid'): Promise<HorizonPin> {
    const client = new Client({ connectionString: url, application_name: 'gd-soak-pin' });
    client.on('error', () => undefined);
    await client.connect();
    await client.query(kind === 'xid' ? 'BEGIN' : 'BEGIN ISOLATION LEVEL REPEATABLE READ');
    const { rows } = await client.query<{ xid: string; pid: number }>(
      kind === 'xid'
        ? 'SELECT txid_current()::text AS xid, pg_backend_pid() AS pid'
        : `SELECT '' AS xid, pg_backend_pid() AS pid FROM (SELECT count(*) FROM gen_durable) n`,
    );
    const row = rows[0]!;
    return new HorizonPin(client, row.pid, row.xid);
  }

  async release(): Promise<void> {
    try {
      await this.client.query('ROLLBACK');
    } finally {
      await this.client.end();
    }
  }
}

/** REPEATABLE READ readers, each re-reading the table in its one snapshot every `everyMs`. */
export class RepeatableReadReaders {
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly reads = new Set<Promise<void>>();
  private stopped = false;
  /** Duration of every read, ms. */
  readonly readMs: number[] = [];

  private constructor(private readonly clients: Client[]) {}

  static async start(
    url: string,
    count: number,
    everyMs: number,
    sql = 'SELECT status, count(*) FROM gen_durable GROUP BY status',
  ): Promise<RepeatableReadReaders> {
    const clients: Client[] = [];
    for (let i = 0; i < count; i++) {
      const client = new Client({ connectionString: url, application_name: `gd-soak-reader-${i}` });
      client.on('error', () => undefined);
      await client.connect();
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      clients.push(client);
    }
    const readers = new RepeatableReadReaders(clients);
    clients.forEach((client, i) => readers.schedule(client, sql, (everyMs * i) / count, everyMs));
    return readers;
  }

  /** Reads now and every `everyMs` after `delayMs` (staggered), skipping while one runs. */
  private schedule(client: Client, sql: string, delayMs: number, everyMs: number): void {
    let running = false;
    const read = (): void => {
      if (running || this.stopped) return;
      running = true;
      const t0 = performance.now();
      const p = client
        .query(sql)
        .then(
          () => void this.readMs.push(performance.now() - t0),
          () => undefined,
        )
        .finally(() => {
          running = false;
          this.reads.delete(p);
        });
      this.reads.add(p);
    };
    this.timers.push(
      setTimeout(() => {
        read();
        if (!this.stopped) this.timers.push(setInterval(read, everyMs));
      }, delayMs),
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await Promise.allSettled([...this.reads]);
    await Promise.allSettled(
      this.clients.map(async (c) => {
        await c.query('ROLLBACK');
        await c.end();
      }),
    );
  }
}
