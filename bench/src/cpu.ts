// CPU cost of a case, read from /proc before and after it.
//
// - worker: this process (every engine's workers run in-process), process.cpuUsage() — the same
//   utime+stime counters as /proc/self/stat, at microsecond resolution;
// - postgres: utime+stime (/proc/<pid>/stat, clock ticks) of every process of the case's server
//   that belongs to the case's database or to no database (client backends and parallel /
//   autovacuum workers of the case database, plus the server-wide checkpointer, background
//   writer, WAL writer, launchers), as listed by pg_stat_activity at the start and at the end
//   (processes seen at either point are read at the end; one that exited mid-case loses its
//   ticks — the pools stay open until after the final read, so that is rare);
// - postgres (machine): the same counters summed over every process on the machine whose
//   command is `postgres` — includes other users of a shared server, kept in the JSON only;
// - redis: utime+stime of the redis-server process (its pid from INFO server), for BullMQ on
//   Redis only.
// When the server is not on this machine (no such pid in /proc), the PostgreSQL / Redis figures
// are reported as unavailable rather than guessed.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import { Client } from 'pg';
import Redis from 'ioredis';

let clkTck = 100;
try {
  clkTck = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
} catch {
  /* keep 100 */
}
const msPerTick = 1000 / clkTck;

interface Stat {
  comm: string;
  ppid: number;
  ticks: number;
  start: number;
}

function readStat(pid: number): Stat | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const open = s.indexOf('(');
    const close = s.lastIndexOf(')');
    const comm = s.slice(open + 1, close);
    const f = s.slice(close + 2).split(' ');
    // f[0] = state (field 3); utime = field 14, stime = 15, starttime = 22.
    return { comm, ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]), start: Number(f[19]) };
  } catch {
    return undefined;
  }
}

function allPids(): number[] {
  return fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number);
}

export interface CpuSample {
  selfUs: number;
  pg: Map<number, Stat> | undefined;
  pgAll: Map<number, Stat>;
  redis: Stat | undefined;
}

export interface CpuDelta {
  workerMs: number;
  pgMs: number | undefined;
  pgMachineMs: number;
  redisMs: number | undefined;
  /** worker + postgres (+ redis when measured). */
  totalMs: number;
}

export class CpuProbe {
  private pgLocal = true;
  private redisPid: number | undefined;

  private constructor(
    private readonly admin: Client,
    private readonly dbName: string,
    private readonly redis: Redis | undefined,
  ) {}

  /**
   * @param adminUrl a connection to the server (not the case database: the probe's own backend
   *   is then not counted)
   */
  static async open(adminUrl: string, dbName: string, redisUrl?: string): Promise<CpuProbe> {
    const admin = new Client({ connectionString: adminUrl });
    await admin.connect();
    const redis = redisUrl ? new Redis(redisUrl, { maxRetriesPerRequest: 1 }) : undefined;
    const p = new CpuProbe(admin, dbName, redis);
    const own = (await admin.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const st = readStat(own);
    p.pgLocal = st !== undefined && st.comm.startsWith('postgres');
    if (redis) {
      const info = await redis.info('server');
      const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
      const rs = readStat(pid);
      p.redisPid = rs && rs.comm.startsWith('redis') ? pid : undefined;
    }
    return p;
  }

  get measuresPostgres(): boolean {
    return this.pgLocal;
  }

  private async pgPids(): Promise<number[]> {
    const r = await this.admin.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = $1 OR datname IS NULL',
      [this.dbName],
    );
    return r.rows.map((x) => x.pid);
  }

  private static machinePostgres(): Map<number, Stat> {
    const m = new Map<number, Stat>();
    for (const pid of allPids()) {
      const s = readStat(pid);
      if (s && s.comm.startsWith('postgres')) m.set(pid, s);
    }
    return m;
  }

  async sample(): Promise<CpuSample> {
    let pg: Map<number, Stat> | undefined;
    if (this.pgLocal) {
      pg = new Map();
      for (const pid of await this.pgPids()) {
        const s = readStat(pid);
        if (s) pg.set(pid, s);
      }
    }
    const usage = process.cpuUsage();
    return {
      selfUs: usage.user + usage.system,
      pg,
      pgAll: CpuProbe.machinePostgres(),
      redis: this.redisPid !== undefined ? readStat(this.redisPid) : undefined,
    };
  }

  /** CPU spent between `before` and now. */
  async since(before: CpuSample): Promise<CpuDelta> {
    const usage = process.cpuUsage();
    const workerMs = (usage.user + usage.system - before.selfUs) / 1000;
    let pgMs: number | undefined;
    if (before.pg) {
      const pids = new Set([...before.pg.keys(), ...(await this.pgPids())]);
      let ticks = 0;
      for (const pid of pids) {
        const now = readStat(pid);
        if (!now) continue;
        const was = before.pg.get(pid);
        ticks += was && was.start === now.start ? now.ticks - was.ticks : now.ticks;
      }
      pgMs = ticks * msPerTick;
    }
    let allTicks = 0;
    for (const [pid, now] of CpuProbe.machinePostgres()) {
      const was = before.pgAll.get(pid);
      allTicks += was && was.start === now.start ? now.ticks - was.ticks : now.ticks;
    }
    let redisMs: number | undefined;
    if (before.redis && this.redisPid !== undefined) {
      const now = readStat(this.redisPid);
      if (now) redisMs = (now.ticks - before.redis.ticks) * msPerTick;
    }
    return {
      workerMs,
      pgMs,
      pgMachineMs: allTicks * msPerTick,
      redisMs,
      totalMs: workerMs + (pgMs ?? 0) + (redisMs ?? 0),
    };
  }

  async close(): Promise<void> {
    await this.admin.end().catch(() => undefined);
    this.redis?.disconnect();
  }
}
