/**
 * `npm run soak -- --engine pgq` (docs/performance.md, "Soak"): the no-bloat reference. The same
 * phases, windows and horizon holders as the gen-durable soak, on the same private PostgreSQL 15
 * cluster (Debian binaries, where Debian's `postgresql-15-pgq3` puts the `pgq` extension), with
 * PgQ 3.5 in place of the engine: a producer inserts the offered events with `pgq.insert_event`
 * (one statement per 20 ms tick for what the schedule owes), one consumer loops
 * `next_batch` / `get_batch_events` / `finish_batch`, and the harness plays pgqd: `pgq.ticker()`
 * every 100 ms and `pgq.maint_operations()` every window. Each event is one unit of work, so
 * `--rate` is events per second here (the engine's is steps per second). PgQ never updates or
 * deletes an event: a queue rotates over three event tables and TRUNCATEs the oldest once every
 * consumer has passed it, so the event tables hold no dead tuples; the rotation period is set to
 * a quarter of the phase length (at least 5 s) so that several rotations, and so TRUNCATEs of
 * consumed events, happen within a short run (PgQ's default is 2 hours).
 */
import { Client } from 'pg';

import { HorizonPin, RepeatableReadReaders } from './horizon-holders';
import { phaseOfWindow, phaseSchedule, type PhaseName, windowCount } from './phase-schedule';
import type { SoakCluster } from './soak-cluster';
import type { SoakOptions } from './soak-options';
import { percentile } from './window-stats';

const QUEUE = 'soak';
const CONSUMER = 'soak_consumer';
const TICK_MS = 20;
const TICKER_MS = 100;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** One reporting window of the PgQ soak. */
export interface PgqWindow {
  readonly endS: number;
  readonly phase: PhaseName;
  readonly offeredPerS: number;
  readonly consumedPerS: number;
  readonly completionPct: number;
  /** From the `insert_event` call to the consumer's receipt of the event, ms. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** n_dead_tup summed over the queue's event tables, and over pgq's own tables. */
  readonly eventDeadTuples: number;
  readonly pgqDeadTuples: number;
  /** The queue's event tables (with their indexes), and pgq's own tables, bytes. */
  readonly eventBytes: number;
  readonly pgqBytes: number;
  readonly horizonXids: number | null;
  readonly pinXids: number | null;
  readonly backlog: number;
}

export interface PgqSoakResult {
  readonly windows: PgqWindow[];
  readonly inserted: number;
  readonly consumed: number;
  readonly duplicates: number;
  readonly rotations: number;
}

/** Inserts what the schedule owes every 20 ms: `insert_event` per event, one statement per tick. */
class Producer {
  offered = 0;
  inserted = 0;
  private timer: NodeJS.Timeout | undefined;
  private busy: Promise<void> | undefined;
  private t0 = 0;

  constructor(
    private readonly client: Client,
    private readonly perSecond: number,
  ) {}

  start(): void {
    this.t0 = performance.now();
    this.timer = setInterval(() => {
      if (this.busy) return;
      const owed = Math.floor(((performance.now() - this.t0) / 1000) * this.perSecond);
      const n = owed - this.offered;
      if (n <= 0) return;
      this.offered = owed;
      const stamps = Array.from({ length: n }, () => String(Date.now()));
      this.busy = this.client
        .query(`SELECT pgq.insert_event($1, 'job', d) FROM unnest($2::text[]) AS d`, [
          QUEUE,
          stamps,
        ])
        .then(() => void (this.inserted += n))
        .finally(() => (this.busy = undefined));
    }, TICK_MS);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.busy;
  }
}

/** One PgQ consumer: batches until stopped, recording latency and every event id it saw. */
class Consumer {
  consumed = 0;
  duplicates = 0;
  private latencies: number[] = [];
  private readonly seen = new Set<string>();
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(private readonly client: Client) {}

  start(): void {
    this.loop = this.run();
  }

  takeLatencies(): number[] {
    const out = this.latencies;
    this.latencies = [];
    return out;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const { rows } = await this.client.query<{ batch: string | null }>(
        'SELECT pgq.next_batch($1, $2)::text AS batch',
        [QUEUE, CONSUMER],
      );
      const batch = rows[0]?.batch ?? null;
      if (batch === null) {
        await sleep(TICKER_MS / 2);
        continue;
      }
      const events = await this.client.query<{ ev_id: string; ev_data: string }>(
        'SELECT ev_id::text, ev_data FROM pgq.get_batch_events($1::bigint)',
        [batch],
      );
      const now = Date.now();
      for (const e of events.rows) {
        if (this.seen.has(e.ev_id)) this.duplicates++;
        this.seen.add(e.ev_id);
        this.latencies.push(now - Number(e.ev_data));
      }
      await this.client.query('SELECT pgq.finish_batch($1::bigint)', [batch]);
      this.consumed += events.rows.length;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

/** pgqd's two jobs: `pgq.ticker()` every 100 ms, `pgq.maint_operations()` on demand. */
class Ticker {
  /** Switches of the queue's current event table seen (one per rotation between two looks). */
  rotations = 0;
  private table: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private busy: Promise<unknown> | undefined;

  constructor(private readonly client: Client) {}

  start(): void {
    this.timer = setInterval(() => {
      if (this.busy) return;
      this.busy = this.client.query('SELECT pgq.ticker()').finally(() => (this.busy = undefined));
    }, TICKER_MS);
  }

  async maintain(): Promise<void> {
    await this.busy;
    const { rows: cur } = await this.client.query<{ t: number }>(
      'SELECT queue_cur_table AS t FROM pgq.queue WHERE queue_name = $1',
      [QUEUE],
    );
    if (this.table !== undefined && cur[0]?.t !== this.table) this.rotations++;
    this.table = cur[0]?.t;
    const { rows } = await this.client.query<{ func_name: string; func_arg: string | null }>(
      'SELECT func_name, func_arg FROM pgq.maint_operations()',
    );
    for (const op of rows) {
      if (op.func_name.toLowerCase() === 'vacuum') continue; // autovacuum is on
      if (!/^[a-z_.0-9]+$/i.test(op.func_name)) throw new Error(`pgq: odd op ${op.func_name}`);
      await this.client.query(
        op.func_arg === null ? `SELECT ${op.func_name}()` : `SELECT ${op.func_name}($1)`,
        op.func_arg === null ? [] : [op.func_arg],
      );
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.busy;
  }
}

async function sample(
  client: Client,
  pinPid: number | null,
): Promise<
  Pick<
    PgqWindow,
    'eventDeadTuples' | 'pgqDeadTuples' | 'eventBytes' | 'pgqBytes' | 'horizonXids' | 'pinXids'
  >
> {
  const { rows } = await client.query<{
    event_dead: string;
    pgq_dead: string;
    event_bytes: string;
    pgq_bytes: string;
    horizon: number | null;
    pin: number | null;
  }>(
    `SELECT coalesce(sum(s.n_dead_tup) FILTER (WHERE s.relname LIKE 'event\\_%'), 0) AS event_dead,
            coalesce(sum(s.n_dead_tup) FILTER (WHERE s.relname NOT LIKE 'event\\_%'), 0) AS pgq_dead,
            coalesce(sum(pg_total_relation_size(s.relid)) FILTER (WHERE s.relname LIKE 'event\\_%'), 0) AS event_bytes,
            coalesce(sum(pg_total_relation_size(s.relid)) FILTER (WHERE s.relname NOT LIKE 'event\\_%'), 0) AS pgq_bytes,
            (SELECT max(greatest(age(backend_xid), age(backend_xmin))) FROM pg_stat_activity
              WHERE pid <> pg_backend_pid() AND datname = current_database()) AS horizon,
            (SELECT age(backend_xid) FROM pg_stat_activity WHERE pid = $1) AS pin
       FROM pg_stat_user_tables s WHERE s.schemaname = 'pgq'`,
    [pinPid],
  );
  const r = rows[0]!;
  return {
    eventDeadTuples: Number(r.event_dead),
    pgqDeadTuples: Number(r.pgq_dead),
    eventBytes: Number(r.event_bytes),
    pgqBytes: Number(r.pgq_bytes),
    horizonXids: r.horizon,
    pinXids: r.pin,
  };
}

const pad = (v: string | number, n: number): string => String(v).padStart(n);
const mib = (b: number): string => (b / 1048576).toFixed(1);

export function pgqWindowHeader(): string {
  return `${pad('t s', 5)} ${pad('phase', 8)} ${pad('offer/s', 7)} ${pad('cons/s', 7)} ${pad('%', 5)} ${pad('p50 ms', 7)} ${pad('p99 ms', 7)} ${pad('ev dead', 8)} ${pad('pgq dead', 8)} ${pad('ev MiB', 7)} ${pad('pgq MiB', 7)} ${pad('horizon', 8)} ${pad('pin age', 8)} ${pad('backlog', 7)}`;
}

export function pgqWindowLine(w: PgqWindow): string {
  return `${pad(w.endS, 5)} ${pad(w.phase, 8)} ${pad(w.offeredPerS.toFixed(0), 7)} ${pad(w.consumedPerS.toFixed(0), 7)} ${pad(w.completionPct.toFixed(0), 5)} ${pad(w.p50Ms.toFixed(0), 7)} ${pad(w.p99Ms.toFixed(0), 7)} ${pad(w.eventDeadTuples, 8)} ${pad(w.pgqDeadTuples, 8)} ${pad(mib(w.eventBytes), 7)} ${pad(mib(w.pgqBytes), 7)} ${pad(w.horizonXids ?? '—', 8)} ${pad(w.pinXids ?? '—', 8)} ${pad(w.backlog, 7)}`;
}

/** Runs the PgQ soak on `cluster` (a PostgreSQL 15 with Debian's pgq3 files) and reports. */
export async function runPgqSoak(
  cluster: SoakCluster,
  opts: SoakOptions,
  print: (line: string) => void,
): Promise<PgqSoakResult> {
  const admin = new Client({ connectionString: cluster.url });
  await admin.connect();
  try {
    await admin.query('CREATE DATABASE gd_soak_pgq');
  } finally {
    await admin.end();
  }
  const url = new URL(cluster.url);
  url.pathname = '/gd_soak_pgq';
  const dbUrl = url.toString();
  const connect = async (name: string): Promise<Client> => {
    const c = new Client({ connectionString: dbUrl, application_name: name });
    c.on('error', () => undefined);
    await c.connect();
    return c;
  };
  const [setup, producerConn, consumerConn, tickerConn] = await Promise.all([
    connect('gd-soak-pgq-admin'),
    connect('gd-soak-pgq-producer'),
    connect('gd-soak-pgq-consumer'),
    connect('gd-soak-pgq-ticker'),
  ]);
  let pin: HorizonPin | undefined;
  let readers: RepeatableReadReaders | undefined;
  const producer = new Producer(producerConn, opts.rate);
  const consumer = new Consumer(consumerConn);
  const ticker = new Ticker(tickerConn);
  try {
    await setup.query('CREATE EXTENSION pgq');
    await setup.query('SELECT pgq.create_queue($1)', [QUEUE]);
    const rotationS = Math.max(5, opts.phaseSeconds / 4);
    await setup.query(`SELECT pgq.set_queue_config($1, 'rotation_period', $2)`, [
      QUEUE,
      `${rotationS} seconds`,
    ]);
    await setup.query('SELECT pgq.register_consumer($1, $2)', [QUEUE, CONSUMER]);
    const { rows: ext } = await setup.query<{ extversion: string }>(
      `SELECT extversion FROM pg_extension WHERE extname = 'pgq'`,
    );
    const { rows: pfx } = await setup.query<{ queue_data_pfx: string }>(
      'SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = $1',
      [QUEUE],
    );
    print(
      `pgq ${ext[0]?.extversion}: queue ${QUEUE} (${pfx[0]?.queue_data_pfx}), rotation period ${rotationS} s, ticker every ${TICKER_MS} ms`,
    );
    const readerSql = `SELECT count(*) FROM ${pfx[0]!.queue_data_pfx}`;
    const schedule = phaseSchedule(
      opts.phaseSeconds,
      opts.recoverySeconds,
      opts.windowSeconds,
      opts.phaseLengths,
    );
    const windows: PgqWindow[] = [];
    let phase: PhaseName | undefined;
    let offered0 = 0;
    let consumed0 = 0;
    ticker.start();
    consumer.start();
    const t0 = performance.now();
    producer.start();
    print(pgqWindowHeader());
    for (let i = 0; i < windowCount(schedule); i++) {
      const next = phaseOfWindow(schedule, i).name;
      if (next !== phase) {
        if (next === 'pinned') pin = await HorizonPin.open(dbUrl);
        else if (next === 'readers') {
          readers = await RepeatableReadReaders.start(
            dbUrl,
            opts.readers,
            2 * opts.windowSeconds * 1000,
            readerSql,
          );
        } else if (next === 'recovery') {
          await readers?.stop();
          await pin?.release();
          readers = undefined;
          pin = undefined;
        }
        phase = next;
      }
      await sleep(Math.max(0, t0 + (i + 1) * opts.windowSeconds * 1000 - performance.now()));
      await ticker.maintain();
      const reading = await sample(setup, pin?.pid ?? null);
      const offered = producer.offered;
      const consumed = consumer.consumed;
      const latencies = consumer.takeLatencies();
      const w: PgqWindow = {
        endS: (i + 1) * opts.windowSeconds,
        phase: next,
        offeredPerS: (offered - offered0) / opts.windowSeconds,
        consumedPerS: (consumed - consumed0) / opts.windowSeconds,
        completionPct:
          offered > offered0 ? (100 * (consumed - consumed0)) / (offered - offered0) : NaN,
        p50Ms: percentile(latencies, 50),
        p99Ms: percentile(latencies, 99),
        ...reading,
        backlog: producer.inserted - consumed,
      };
      windows.push(w);
      print(pgqWindowLine(w));
      offered0 = offered;
      consumed0 = consumed;
    }
    await producer.stop();
    const drainBy = performance.now() + opts.drainSeconds * 1000;
    while (consumer.consumed < producer.inserted && performance.now() < drainBy) await sleep(200);
    await consumer.stop();
    await ticker.stop();
    return {
      windows,
      inserted: producer.inserted,
      consumed: consumer.consumed,
      duplicates: consumer.duplicates,
      rotations: ticker.rotations,
    };
  } finally {
    await producer.stop().catch(() => undefined);
    await consumer.stop().catch(() => undefined);
    await ticker.stop().catch(() => undefined);
    await readers?.stop().catch(() => undefined);
    await pin?.release().catch(() => undefined);
    for (const c of [setup, producerConn, consumerConn, tickerConn]) {
      await c.end().catch(() => undefined);
    }
  }
}
