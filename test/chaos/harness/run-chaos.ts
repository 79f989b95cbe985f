// The chaos orchestrator (docs/reliability.md §3): `npm run test:chaos` (R1, CI) and
// `npm run chaos:soak -- --seed N` (R2, by hand). Starts a private PostgreSQL cluster (and a
// private Redis), a fault proxy per worker, the worker processes (real Nest apps), the sender
// and the monitor; runs a fault-free control phase, then the seeded nemesis during the feed;
// heals everything, drains, audits the ledgers and prints the headline of docs/reliability.md §5.3.
// Writes test/chaos/report.json; exits 1 when any hard invariant of §5.1 is not 0.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { Client, Pool } from 'pg';

import { migrateUp } from '../../../lib/schema/migrator';
import { freePort, PrivateRedis } from '../../limits/support/private-redis';
import { audit, type Audit } from './checker';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';

import { FaultProxy, FLUSH_COMMIT_NEEDLES, IN_FLUSH_NEEDLES } from './fault-proxy';
import { createLedger } from './ledger';
import { Monitor } from './monitor';
import { type FaultKind, type PlannedFault, planFaults } from './nemesis';
import { PrivateCluster } from './pg-cluster';
import { ChaosProcess } from './processes';
import { type Profile, PROFILES } from './profiles';
import type { SenderConfig, WorkerConfig, Workload } from './protocol';
import { percentile } from '../../../bench/src/stats';
import { mulberry32 } from './random';
import { LEASE_MS } from './chaos-fsms';

const ROOT = resolve(__dirname, '../../..');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const log = (line: string): void =>
  void process.stdout.write(`[chaos ${new Date().toISOString().slice(11, 23)}] ${line}\n`);

function args(): {
  profile: Profile;
  seed: number;
  report: string;
  keep: boolean;
  contention: boolean;
} {
  const argv = process.argv.slice(2);
  const value = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const name = value('--profile') ?? 'R1';
  const profile = PROFILES[name];
  if (!profile) {
    throw new Error(`unknown profile ${name} (known: ${Object.keys(PROFILES).join(', ')})`);
  }
  const seed = Number(value('--seed') ?? Math.floor(Math.random() * 2 ** 31));
  if (!Number.isInteger(seed)) throw new Error('--seed must be an integer');
  return {
    profile,
    seed,
    report: resolve(value('--report') ?? join(ROOT, 'test/chaos/report.json')),
    keep: argv.includes('--keep'),
    contention: argv.includes('--contention'),
  };
}

/**
 * `--contention`: one busy-loop process per core, pinned to it (taskset when present), for
 * the whole run, so the engine runs on a box whose CPUs are taken by other work (finding
 * F-R11: worker boot, heartbeats and flushes all slow down). Killed with the run.
 */
function startContention(): ChildProcess[] {
  const cores = Math.max(1, Math.min(2, availableParallelism()));
  const taskset = existsSync('/usr/bin/taskset') ? '/usr/bin/taskset' : undefined;
  const loops: ChildProcess[] = [];
  for (let core = 0; core < 2; core++) {
    const command = [process.execPath, '-e', 'for (;;) {}'];
    const child = taskset
      ? spawn(taskset, ['-c', String(core % cores), ...command], { stdio: 'ignore' })
      : spawn(command[0]!, command.slice(1), { stdio: 'ignore' });
    loops.push(child);
  }
  return loops;
}

/** Run on a failed run (exit 2): nothing of ours may outlive the orchestrator. */
const cleanups: (() => Promise<unknown>)[] = [];

interface Worker {
  readonly name: string;
  readonly proc: ChaosProcess;
  readonly proxy: FaultProxy;
  down: boolean;
  paused: boolean;
  blackholed: boolean;
  /** A start in progress (restarts by the nemesis and the supervisor may overlap). */
  starting?: Promise<void>;
  /** Booted and serving (the last start completed and it has not exited since). */
  ready: boolean;
  /** A fault point was armed to end this worker (S02): its next exit is the nemesis's. */
  armedExit: boolean;
  /** When its current process was forked (a pill record after it is this process's). */
  startedAt: number;
}

interface FaultLog {
  kind: FaultKind;
  target: string;
  at: number;
  healed?: number;
}

async function main(): Promise<void> {
  const { profile, seed, report, keep, contention } = args();
  const random = mulberry32(seed);
  const artifacts = join(ROOT, '.tmp', 'chaos', `${profile.name}-${seed}-${Date.now()}`);
  mkdirSync(artifacts, { recursive: true });
  log(
    `${profile.title}, seed ${seed} (replay: --seed ${seed}${contention ? ' --contention' : ''}); artifacts in ${artifacts}`,
  );
  const began = Date.now();
  if (contention) {
    const loops = startContention();
    const stop = async (): Promise<void> => {
      for (const loop of loops) if (loop.exitCode === null) loop.kill('SIGKILL');
    };
    cleanups.push(stop);
    process.once('exit', () => void stop());
    log(
      `CPU contention: ${loops.length} busy-loop processes (pids ${loops.map((l) => l.pid).join(', ')})`,
    );
  }

  const cluster = await PrivateCluster.create(await freePort());
  cleanups.push(() => cluster.destroy(true));
  await cluster.start();
  const admin = new Client({ connectionString: cluster.url('postgres') });
  await admin.connect();
  await admin.query('CREATE DATABASE chaos');
  await admin.end();
  const dbUrl = cluster.url('chaos');
  const pool = new Pool({ connectionString: dbUrl, max: 4, application_name: 'gd-orchestrator' });
  pool.on('error', () => undefined);
  {
    const c = await pool.connect();
    try {
      await migrateUp(
        { query: (text, params) => c.query(text, params), inTransaction: false },
        { schema: 'public' },
      );
    } finally {
      c.release();
    }
  }
  await createLedger(pool);
  const redis = profile.redis ? await PrivateRedis.start() : undefined;
  if (redis) cleanups.push(() => redis.kill());
  log(
    `PostgreSQL on ${cluster.port} (${cluster.baseDir})${redis ? `, Redis on ${redis.port}` : ''}`,
  );

  const faults: FaultLog[] = [];
  const recordFault = async (f: FaultLog): Promise<void> => {
    faults.push(f);
  };
  const flushFaults = async (): Promise<void> => {
    for (const f of faults.splice(0)) {
      await pool.query(
        `INSERT INTO chaos.faults (kind, target, injected_at, healed_at) VALUES ($1, $2, to_timestamp($3::float8 / 1000), to_timestamp($4::float8 / 1000))`,
        [f.kind, f.target, f.at, f.healed ?? f.at],
      );
    }
  };

  // Workers, each behind its own proxy; worker 1 of N runs the GC, every worker a reaper.
  const workers: Worker[] = [];
  for (let i = 1; i <= profile.workers; i++) {
    const name = `w${i}`;
    const proxy = await FaultProxy.start(cluster.port, random);
    const config: WorkerConfig = {
      name,
      databaseUrl: `postgres://postgres@127.0.0.1:${proxy.port}/chaos`,
      ledgerUrl: dbUrl,
      redisUrl: redis?.url ?? null,
      concurrency: profile.concurrency,
      childConcurrency: profile.childConcurrency,
      txConcurrency: profile.txConcurrency,
      reaper: true,
      gc: i === profile.workers,
      gcRetentionMs: profile.gcRetentionMs,
      statementTimeoutMs: profile.statementTimeoutMs,
      connectTimeoutMs: 0,
    };
    const proc = new ChaosProcess(
      name,
      'worker-main.ts',
      { GD_CHAOS_WORKER: JSON.stringify(config) },
      artifacts,
    );
    cleanups.unshift(() => proc.kill());
    workers.push({
      name,
      proc,
      proxy,
      down: true,
      paused: false,
      blackholed: false,
      ready: false,
      armedExit: false,
      startedAt: 0,
    });
  }
  let crashes = 0;
  /** Workers that died while booting (their start is retried by startWorker, not counted as crashes). */
  let bootDeaths = 0;
  /** Worker → when its flush exit was armed (S02). */
  const flushExits = new Map<string, number>();
  const boots: number[] = [];
  let pillDeaths = 0;

  const supervise = (w: Worker): void => {
    w.proc.onExit = (exit) => {
      const wasBooting = !w.ready;
      w.down = true;
      w.ready = false;
      w.paused = false;
      if (exit.expected) {
        w.armedExit = false; // the armed rule died with the process
        flushExits.delete(w.name);
        return;
      }
      if (w.armedExit) {
        // S02: the flush fault point ended it, as the nemesis asked; restart it.
        w.armedExit = false;
        void (async () => {
          await sleep(500);
          await startWorker(w);
          const armed = flushExits.get(w.name);
          flushExits.delete(w.name);
          if (armed) {
            await recordFault({
              kind: 'flush-exit',
              target: w.name,
              at: armed,
              healed: Date.now(),
            });
          }
        })().catch((err: unknown) => log(`restarting ${w.name} failed: ${String(err)}`));
        return;
      }
      if (wasBooting) {
        // Died during boot (createApplicationContext threw, e.g. the database went away in
        // the middle of it): startWorker's own retry starts it again. A boot death is not a
        // scheduler crash; its error text says why.
        bootDeaths++;
        log(
          `worker ${w.name} died while booting (code ${String(exit.code)}, signal ${String(exit.signal)}): ${exit.fatal ?? 'no fatal message'}`,
        );
        return;
      }
      // Not ours: the poison pill (it records a 'pill' fault just before it kills), or a crash.
      void (async () => {
        // The lookup is retried while Postgres is down (a pg-blip or restart right after the
        // pill's kill): a failed lookup once counted the pill's death as a crash (seed 402).
        // Any pill record since this process was forked is its death: the pill's kill can come
        // long after its record when a spinning step starves the event loop and a SIGSTOP
        // follows (11 s in R1 seed 1701; a 10 s window counted it as a crash).
        const startedAt = w.startedAt;
        let pill = false;
        for (let attempt = 0; ; attempt++) {
          try {
            const found = await pool.query(
              `SELECT 1 FROM chaos.faults WHERE kind = 'pill' AND target = $1
                 AND injected_at >= to_timestamp($2::float8 / 1000)`,
              [w.name, startedAt],
            );
            pill = found.rows.length > 0;
            break;
          } catch (err) {
            if (attempt >= 60) {
              log(`looking up the pill record of ${w.name} failed: ${String(err)}`);
              break;
            }
            await sleep(500);
          }
        }
        if (pill) pillDeaths++;
        else {
          crashes++;
          log(
            `worker ${w.name} exited unexpectedly (code ${String(exit.code)}, signal ${String(exit.signal)}): ${exit.fatal ?? 'no fatal message'}`,
          );
        }
        await sleep(500);
        await startWorker(w);
      })().catch((err: unknown) => log(`restarting ${w.name} failed: ${String(err)}`));
    };
  };
  const startWorker = (w: Worker): Promise<void> => {
    if (w.starting) return w.starting;
    if (w.proc.running) return Promise.resolve();
    w.starting = (async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          // A booting worker holds no claims: it no longer counts as disrupted, and the next
          // fault may pick another worker (or this one, mid-boot).
          w.startedAt = Date.now();
          const booting = w.proc.start();
          w.down = false;
          const started = Date.now();
          await booting;
          boots.push(Date.now() - started);
          w.ready = true;
          return;
        } catch (err) {
          if (attempt >= 5) throw err;
          await sleep(1_000);
        }
      }
    })().finally(() => (w.starting = undefined));
    return w.starting;
  };
  for (const w of workers) supervise(w);
  await Promise.all(workers.map((w) => startWorker(w)));
  log(`${workers.length} workers up`);

  const monitor = new Monitor(dbUrl, 15);
  monitor.start();

  const startSender = async (
    workload: Workload,
    feedMs: number,
    tag: string,
  ): Promise<{ proc: ChaosProcess; fed: Promise<void> }> => {
    const config: SenderConfig = {
      databaseUrl: dbUrl,
      redisUrl: redis?.url ?? null,
      seed: seed + tag.length,
      tag,
      feedMs,
      workload,
    };
    const proc = new ChaosProcess(
      `sender-${tag}`,
      'sender-main.ts',
      { GD_CHAOS_SENDER: JSON.stringify(config) },
      artifacts,
    );
    cleanups.unshift(() => proc.kill());
    let fedResolve!: () => void;
    let fedReject!: (e: Error) => void;
    const fed = new Promise<void>((res, rej) => {
      fedResolve = res;
      fedReject = rej;
    });
    proc.onMessage = (m) => {
      if (m.type === 'fed') fedResolve();
      if (m.type === 'fatal') fedReject(new Error(`sender failed: ${m.error}`));
    };
    proc.onExit = (exit) => {
      if (!exit.expected) {
        fedReject(new Error(`sender exited (${String(exit.code ?? exit.signal)})`));
      }
    };
    await proc.start();
    return { proc, fed };
  };
  const live = async (): Promise<number> => {
    const { rows } = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM gen_durable WHERE status NOT IN ('done', 'failed', 'cancelled')`,
    );
    return Number(rows[0]?.n ?? 0);
  };
  const drain = async (deadlineMs: number): Promise<boolean> => {
    const deadline = Date.now() + deadlineMs;
    while (Date.now() < deadline) {
      const n = await live().catch(() => -1);
      if (n === 0) return true;
      await sleep(250);
    }
    return false;
  };

  // Phase 1: fault-free control.
  const control = await startSender(profile.control, 5_000, 'control');
  await control.fed;
  const controlDrained = await drain(60_000);
  await control.proc.shutdown();
  const { rows: controlRows } = await pool.query<{ executions: string; committed: string }>(
    `SELECT (SELECT count(*) FROM chaos.executions) AS executions,
            (SELECT count(*) FROM chaos.history WHERE old_seq IS DISTINCT FROM new_seq AND old_seq IS NOT NULL AND new_seq IS NOT NULL) AS committed`,
  );
  const controlReexec = Number(controlRows[0]!.executions) - Number(controlRows[0]!.committed);
  log(
    `control phase: ${controlRows[0]!.executions} executions, ${controlReexec} re-executions, drained ${controlDrained}`,
  );
  const chaosSince = new Date();

  // Phase 2: the workload under the nemesis.
  const plan = planFaults(
    random,
    profile.budget,
    profile.faultStartMs,
    profile.faultEndMs,
    LEASE_MS,
  );
  writeFileSync(join(artifacts, 'nemesis-plan.json'), JSON.stringify(plan, null, 2));
  const sender = await startSender(profile.workload, profile.feedMs, 'chaos');
  const phaseStart = Date.now();
  const counts = new Map<FaultKind, number>();
  const pgRecoveries: number[] = [];
  const inFlight = new Set<Promise<void>>();
  const pick = <T>(list: readonly T[]): T | undefined =>
    list.length === 0 ? undefined : list[Math.floor(random() * list.length)];
  const available = (): Worker[] =>
    workers.filter((w) => w.ready && !w.down && !w.paused && !w.blackholed && w.proc.running);
  // One process-level fault at a time (SIGKILL, SIGSTOP, blackhole), so the other workers are
  // there to recover its rows and the recovery figure measures the engine, not an empty fleet.
  // Backend kills, Postgres and Redis faults overlap freely; the workload's own pill and
  // spinning steps come on top.
  const disrupted = (): number => workers.filter((w) => w.down || w.paused || w.blackholed).length;

  const heldBy = async (w: Worker): Promise<{ id: string; claim_seq: string }[]> =>
    (
      await pool.query<{ id: string; claim_seq: string }>(
        `SELECT id, claim_seq FROM gen_durable WHERE status = 'executing' AND left(locked_by, length($1)) = $1 AND locked_by LIKE $2`,
        ['chaos:', `%@${w.name}-%`],
      )
    ).rows;

  // Faults that stop or restart Postgres run one at a time: a restart planned while a blip
  // holds the server down would otherwise race its start ("another server might be running")
  // and leave the cluster in a state no production fault produces.
  const POSTGRES_FAULTS = new Set(['pg-immediate', 'pg-fast', 'pg-outage', 'pg-blip']);
  let postgresTurn: Promise<unknown> = Promise.resolve();
  const inject = (f: PlannedFault): Promise<boolean> => {
    if (!POSTGRES_FAULTS.has(f.kind)) return injectNow(f);
    const turn = postgresTurn.then(() => injectNow(f));
    postgresTurn = turn.catch(() => undefined);
    return turn;
  };

  /** Injects one fault; false when it cannot be injected now (no eligible victim). */
  const injectNow = async (f: PlannedFault): Promise<boolean> => {
    const count = (target = ''): void => {
      counts.set(f.kind, (counts.get(f.kind) ?? 0) + 1);
      log(
        `fault ${f.kind} ${target} (+${((Date.now() - phaseStart) / 1000).toFixed(1)} s${f.holdMs ? `, hold ${f.holdMs} ms` : ''})`,
      );
    };
    switch (f.kind) {
      case 'sigkill': {
        if (disrupted() >= 1) return false;
        const w = pick(available());
        if (!w) return false;
        const at = Date.now();
        w.down = true; // before the first await: a concurrent fault must not pick it too
        await w.proc.kill();
        count(w.name);
        const held = await heldBy(w).catch(() => []);
        monitor.trackRecovery('sigkill', w.name, at, held);
        await sleep(f.holdMs);
        await startWorker(w);
        await recordFault({ kind: f.kind, target: w.name, at, healed: Date.now() });
        return true;
      }
      case 'sigstop': {
        if (disrupted() >= 1) return false;
        const w = pick(available());
        if (!w) return false;
        const at = Date.now();
        w.paused = true;
        w.proc.pause();
        count(w.name);
        await sleep(f.holdMs);
        if (w.proc.running) w.proc.resume();
        w.paused = false;
        await recordFault({ kind: f.kind, target: w.name, at, healed: Date.now() });
        return true;
      }
      case 'backend-kill': {
        const w = pick(available());
        if (!w) return false;
        const { rows } = await pool
          .query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid`,
            [`gd-${w.name}-engine`],
          )
          .catch(() => ({ rows: [] as { pid: number }[] }));
        const victim = pick(rows);
        if (!victim) return false;
        const at = Date.now();
        await pool.query('SELECT pg_terminate_backend($1)', [victim.pid]).catch(() => undefined);
        count(w.name);
        await recordFault({ kind: f.kind, target: w.name, at, healed: Date.now() });
        return true;
      }
      case 'pg-immediate':
      case 'pg-fast': {
        const at = Date.now();
        await cluster.restart(f.kind === 'pg-immediate' ? 'immediate' : 'fast');
        const ready = Date.now();
        count();
        await recordFault({ kind: f.kind, target: 'postgres', at, healed: ready });
        // F-PGREC: Postgres accepting connections → first committed outcome.
        const deadline = ready + 60_000;
        while (Date.now() < deadline) {
          const rows = await monitor
            .query<{ at: Date }>(
              `SELECT min(at) AS at FROM chaos.history WHERE at > to_timestamp($1::float8 / 1000) AND old_seq IS DISTINCT FROM new_seq AND old_seq IS NOT NULL`,
              [ready],
            )
            .catch(() => []);
          const first = rows[0]?.at;
          if (first) {
            pgRecoveries.push(first.getTime() - ready);
            break;
          }
          await sleep(50);
        }
        return true;
      }
      case 'blackhole': {
        if (disrupted() >= 1) return false;
        const w = pick(available());
        if (!w) return false;
        const at = Date.now();
        w.blackholed = true;
        w.proxy.setMode({ kind: 'blackhole' });
        count(w.name);
        await sleep(f.holdMs);
        // A partition that heals leaves its half-open connections useless: reset them.
        w.proxy.reset();
        w.proxy.setMode({ kind: 'pass' });
        w.blackholed = false;
        await recordFault({ kind: f.kind, target: w.name, at, healed: Date.now() });
        return true;
      }
      case 'flush-exit': {
        // S02: exit(137) at the next flush of a random worker, before or after its COMMIT.
        if (disrupted() >= 1) return false;
        const w = pick(available());
        if (!w) return false;
        const point = random() < 0.5 ? 'flush.beforeCommit' : 'flush.afterCommit';
        w.armedExit = true;
        flushExits.set(w.name, Date.now());
        w.proc.send({
          type: 'gd-fault',
          op: 'arm',
          rule: { point, action: { kind: 'exit' }, times: 1 },
        });
        count(`${w.name} at ${point}`);
        // An idle worker may not flush soon: disarm after a while so the exit stays near the arm.
        // The disarm message can cross a flush already at the point, so the exit stays
        // attributed to this fault for a grace period after it.
        await sleep(5_000);
        if (w.armedExit && w.proc.running) {
          w.proc.send({ type: 'gd-fault', op: 'disarm', point });
          await sleep(2_000);
          if (w.armedExit && w.proc.running) {
            w.armedExit = false;
            flushExits.delete(w.name);
          }
        }
        return true;
      }
      case 'pg-outage': {
        // S14: Postgres down for 2 × the lease (clean stop), then back.
        const at = Date.now();
        await cluster.stop('fast');
        count();
        await sleep(f.holdMs);
        await cluster.start();
        await recordFault({ kind: f.kind, target: 'postgres', at, healed: Date.now() });
        return true;
      }
      case 'link-reset': {
        // F-R8: the next flush commit of a worker answered by the server, then its link reset.
        const w = pick(available());
        if (!w) return false;
        const fired = await Promise.race([
          w.proxy.arm('reset-after-reply', FLUSH_COMMIT_NEEDLES).then(() => true),
          sleep(5_000).then(() => false),
        ]);
        if (!fired) {
          w.proxy.disarm();
          return false;
        }
        const at = Date.now();
        count(w.name);
        await recordFault({ kind: f.kind, target: w.name, at, healed: at + 100 });
        return true;
      }
      case 'flush-blackhole': {
        // F-R9: the link goes dark right after a statement inside a flush transaction.
        if (disrupted() >= 1) return false;
        const w = pick(available());
        if (!w) return false;
        w.blackholed = true;
        const fired = await Promise.race([
          w.proxy.arm('blackhole-after-send', IN_FLUSH_NEEDLES).then(() => true),
          sleep(5_000).then(() => false),
        ]);
        if (!fired) {
          w.proxy.disarm();
          w.blackholed = false;
          return false;
        }
        const at = Date.now();
        count(w.name);
        await sleep(f.holdMs);
        w.proxy.reset();
        w.proxy.setMode({ kind: 'pass' });
        w.blackholed = false;
        await recordFault({ kind: f.kind, target: w.name, at, healed: Date.now() });
        return true;
      }
      case 'pg-blip': {
        // F-R10: Postgres stopped and started again at once (shorter than the lease).
        const at = Date.now();
        await cluster.stop('fast');
        count();
        await sleep(f.holdMs);
        await cluster.start();
        await recordFault({ kind: f.kind, target: 'postgres', at, healed: Date.now() });
        return true;
      }
      case 'redis-kill': {
        if (!redis) return true;
        const at = Date.now();
        await redis.kill();
        count();
        await sleep(f.holdMs);
        await redis.restart();
        await recordFault({ kind: f.kind, target: 'redis', at, healed: Date.now() });
        return true;
      }
    }
  };

  // A fault that finds no victim (workers down after a pill, say) is retried a second later,
  // until 45 s past the fault window.
  const queue = [...plan];
  while (queue.length > 0) {
    queue.sort((a, b) => a.at - b.at);
    const f = queue.shift()!;
    const wait = phaseStart + f.at - Date.now();
    if (wait > 0) await sleep(wait);
    const p = inject(f).then(
      (done) => {
        if (!done && f.at < profile.faultEndMs + 45_000) {
          queue.push({ ...f, at: Date.now() - phaseStart + 1_000 });
        }
      },
      (err: unknown) => log(`fault ${f.kind} failed: ${String(err)}`),
    );
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
    // Let an immediate refusal requeue before the loop looks at the queue again.
    await Promise.race([p, sleep(10)]);
    while (queue.length === 0 && inFlight.size > 0) await Promise.race([...inFlight, sleep(100)]);
  }
  while (inFlight.size > 0) await Promise.all([...inFlight]);
  await sender.fed;
  log(
    `feed done after ${((Date.now() - phaseStart) / 1000).toFixed(1)} s; faults: ${[...counts].map(([k, n]) => `${k} ${n}`).join(', ')}`,
  );

  // Heal and drain.

  for (const w of workers) {
    if (w.paused) w.proc.resume();
    w.paused = false;
    w.proxy.setMode({ kind: 'pass' });
  }
  await Promise.all(workers.map((w) => startWorker(w)));
  const drainStart = Date.now();
  // Under --contention a worker boot takes ~30 s instead of ~10 s (docs/reliability.md, R1 under
  // CPU contention), and the pill's last kill (its solo run, docs/design.md §26.5) may land in the
  // drain and take a worker with it: the drain gets twice the profile's time there (seed 503).
  const drained = await drain(contention ? 2 * profile.drainMs : profile.drainMs);
  log(
    `drain ${drained ? 'complete' : 'TIMED OUT'} after ${((Date.now() - drainStart) / 1000).toFixed(1)} s (${await live().catch(() => -1)} live rows)`,
  );
  await sender.proc.shutdown();
  await Promise.all(workers.map((w) => w.proc.shutdown()));
  await flushFaults();
  await monitor.stop();

  const monitorHard: Record<string, number> = {
    'I-K1-DB': 0,
    'I-STALL': 0,
    'I-DEDUP': 0,
    'I-JOIN': 0,
  };
  for (const [k, v] of monitor.violations) monitorHard[k] = v.count;
  const result: Audit = await audit(pool, {
    since: chaosSince,
    monitor: monitorHard,
    crashes,
    deadlocks: monitor.deadlocks,
  });
  result.hard['I-REEXEC-CONTROL'] = controlReexec;
  result.hard['DRAIN'] = drained && controlDrained ? 0 : 1;

  const recoveries = monitor.recoveries.filter((r) => r.kind === 'sigkill');
  const rec = recoveries.filter((r) => r.done !== undefined).map((r) => (r.done! - r.from) / 1000);
  const halfOpen = await pool.query<{ ms: number | null }>(
    `SELECT extract(epoch FROM (SELECT min(e.at) FROM chaos.events e WHERE e.worker = f.target AND e.at > f.injected_at
                                 AND e.event IN ('log:warn', 'log:error', 'flush:error', 'executor:crash')) - f.injected_at) * 1000 AS ms
       FROM chaos.faults f WHERE f.kind = 'blackhole'`,
  );
  const figures: Record<string, number | string | null> = {
    ...result.figures,
    'worker deaths while booting (retried)': bootDeaths,
    'SIGKILL recoveries measured': rec.length,
    'SIGKILLs with no held rows':
      recoveries.length === 0
        ? (counts.get('sigkill') ?? 0)
        : (counts.get('sigkill') ?? 0) - recoveries.length,
    'SIGKILLs not recovered': recoveries.length - rec.length,
    'recovery p50 s': percentile(rec, 50),
    'recovery p99 s': percentile(rec, 99),
    'recovery max s': rec.length ? Math.max(...rec) : Number.NaN,
    'Postgres back → first commit s': pgRecoveries.length
      ? Math.max(...pgRecoveries) / 1000
      : Number.NaN,
    'blackhole → worker noticed s': halfOpen.rows.length
      ? Math.max(...halfOpen.rows.map((r) => Number(r.ms ?? Number.NaN))) / 1000
      : Number.NaN,
    'poison-pill worker deaths': pillDeaths,
    'worker boot p50 s': percentile(boots, 50) / 1000,
    'worker boot max s': boots.length ? Math.max(...boots) / 1000 : Number.NaN,
    'monitor samples': monitor.samples,
    'wall time s': Math.round((Date.now() - began) / 1000),
  };
  if (result.hard['SIGKILL-NOT-RECOVERED'] === undefined) {
    result.hard['SIGKILL-NOT-RECOVERED'] = recoveries.length - rec.length;
  }

  const c = (k: FaultKind): number => counts.get(k) ?? 0;
  const f2 = (n: number | string | null | undefined): string =>
    typeof n === 'number' && Number.isFinite(n) ? n.toFixed(2) : String(n);
  const zero = (name: string): string => `${result.hard[name] ?? 0}`;
  const failed = Object.entries(result.hard).filter(([, n]) => n !== 0);
  const headline =
    `${profile.title}${contention ? ' under CPU contention' : ''}, seed ${seed}: ${figures['instances']} instances (${figures['step executions']} step executions, ` +
    `${figures['signals acknowledged']} signals, ${figures['fan-outs']} fan-outs × 10 children; ` +
    `${figures['cancels (cooperative)']} cooperative + ${figures['cancels (fence)']} fenced cancels, ${figures['cancelled trees']} of them cascading through a tree, ` +
    `${figures['retries acknowledged']} retries) through ${c('sigkill')} SIGKILLs, ` +
    `${c('sigstop')} pauses past the lease, ${c('backend-kill')} backend kills, ${c('pg-immediate')} immediate + ${c('pg-fast')} fast ` +
    `Postgres restarts, ${c('pg-outage')} Postgres outages of 2 × the lease, ${c('blackhole')} blackholed links, ${c('redis-kill')} Redis kills, ` +
    `${c('flush-exit')} exits at a flush commit, ${c('link-reset')} link resets after a commit, ` +
    `${c('flush-blackhole')} links blackholed inside a flush, ${c('pg-blip')} short Postgres stops: ${zero('I-LOST')} lost, ${zero('I-REWIND')} rewinds, ` +
    `${zero('I-DUPCOMMIT')} duplicate commits (${figures['stale outcomes rejected']} stale outcomes rejected), ${zero('I-SIG-LOST')} lost signals, ` +
    `${zero('I-CANCEL-TREE')} live rows in cancelled trees, ${zero('I-CANCEL-AFTER')} cancelled rows revived, ` +
    `${zero('I-K1-DB')} K=1 violations, ${zero('F-DEADLOCK')} deadlocks, ${zero('F-CRASH')} scheduler crashes; recovery after SIGKILL ` +
    `p50 / p99 / max = ${f2(figures['recovery p50 s'])} / ${f2(figures['recovery p99 s'])} / ${f2(figures['recovery max s'])} s at lease 2 s; ` +
    `Postgres restart → resumed in ${f2(figures['Postgres back → first commit s'])} s; re-executions ${figures['re-executions']} ` +
    `(${result.hard['I-REEXEC-EXPLAINED'] === 0 ? 'all explained by faults' : `${result.hard['I-REEXEC-EXPLAINED']} unexplained`}).`;

  const recoveryDetail = recoveries.map((r) => {
    const slowest = [...r.recovered].sort((a, b) => b[1] - a[1])[0];
    return {
      target: r.target,
      atS: (r.from - phaseStart) / 1000,
      rows: r.rows.size,
      recoveredS: r.done === undefined ? null : (r.done - r.from) / 1000,
      slowest: slowest ? { id: slowest[0], afterS: (slowest[1] - r.from) / 1000 } : null,
    };
  });
  const out = {
    recoveries: recoveryDetail,
    profile: profile.name,
    seed,
    command: `${replayScript(profile.name)} -- --seed ${seed}${contention ? ' --contention' : ''}`,
    contention,
    headline,
    hard: result.hard,
    figures,
    examples: result.examples,
    faults: Object.fromEntries(counts),
    monitorExamples: Object.fromEntries(monitor.violations),
    artifacts,
  };
  writeFileSync(report, `${JSON.stringify(out, null, 2)}\n`);
  process.stdout.write('\nHard invariants (docs/reliability.md §5.1, each must be 0):\n');
  for (const [k, v] of Object.entries(result.hard)) {
    process.stdout.write(`  ${v === 0 ? 'ok ' : 'BAD'} ${k} = ${v}\n`);
  }
  process.stdout.write('Figures:\n');
  for (const [k, v] of Object.entries(figures)) {
    process.stdout.write(
      `  ${k}: ${typeof v === 'number' && !Number.isInteger(v) ? f2(v) : String(v)}\n`,
    );
  }
  for (const [k, v] of Object.entries(result.examples)) {
    process.stdout.write(`Examples of ${k}: ${JSON.stringify(v).slice(0, 2000)}\n`);
  }
  if (monitor.deadlocks > 0) printDeadlockReports(cluster.logFile);
  process.stdout.write(
    `\n${headline}\n${Object.keys(result.hard).length - failed.length} passed, ${failed.length} failed. report: ${report}\n`,
  );

  await pool.end();
  for (const w of workers) {
    await w.proxy.close();
    w.proc.close();
  }
  await redis?.kill();
  await cluster.destroy(keep || failed.length > 0);
  if (failed.length > 0) log(`kept ${cluster.baseDir} and ${artifacts} for inspection`);
  process.exit(failed.length > 0 ? 1 : 0);
}

/** The npm script that runs `profile` (docs/reliability.md §3.5). */
function replayScript(profile: string): string {
  const scripts: Record<string, string> = {
    R1: 'test:chaos',
    R2: 'chaos:soak',
    T1: 'chaos:transactional',
  };
  const script = scripts[profile];
  return script
    ? `npm run ${script}`
    : `node -r ./test/support/ts-register.cjs test/chaos/harness/run-chaos.ts --profile ${profile}`;
}

/**
 * Prints each `deadlock detected` report from the server's log with the lines Postgres writes
 * after it (DETAIL names both processes and their statements; CONTEXT, STATEMENT), so a CI run
 * that fails on F-DEADLOCK shows which statements crossed without needing the kept folder.
 */
function printDeadlockReports(logFile: string): void {
  let lines: string[];
  try {
    lines = readFileSync(logFile, 'utf8').split('\n');
  } catch {
    return;
  }
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.includes('deadlock detected')) continue;
    process.stdout.write(`Deadlock report from ${logFile}:\n`);
    for (let j = Math.max(0, i - 6); j < Math.min(lines.length, i + 14); j++) {
      process.stdout.write(`  ${lines[j]!.slice(0, 1500)}\n`);
    }
  }
}

for (const kind of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(kind, (err: unknown) => {
    process.stderr.write(
      `chaos orchestrator ${kind}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    void (async () => {
      for (const cleanup of cleanups) await cleanup().catch(() => undefined);
      process.exit(2);
    })();
  });
}

main().catch(async (err: unknown) => {
  process.stderr.write(
    `chaos run failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  for (const cleanup of cleanups) await cleanup().catch(() => undefined);
  process.exit(2);
});
