// The chaos sender (docs/reliability.md §3.1): a web node (no queues, no reaper, no GC) that inserts
// the workload over the feed window and signals the parkers, recording every client call in
// chaos.client_ops — invoked/completed times and the result (ok, duplicate, no_target, error,
// unknown = the connection died after sending, Jepsen's :info). Inserts carry a correlation
// key held until GC, so a retry after an ambiguous failure is idempotent.
// Cancels and retries (issue 17): a seeded share of the instances is cancelled U(0, d) after
// its insert was acknowledged, cooperatively or fenced, fan-outs and trees with `cascade`;
// right after each answer the sender reads the target's tree and records every row still live
// and not asked to stop (`liveAfter`, must be empty). A share of the cancelled ones is retried
// once it has ended; the failers are retried with a fixed state until they run.
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';

import {
  type CancelMode,
  type CancelResult,
  DuplicateError,
  EngineService,
  getEngineToken,
  GenDurableModule,
  InvalidInputError,
  NoTargetError,
} from '../../../lib';
import { isConnectionLevel } from '../../../lib/db/sql-executor';
import { CHAOS_FSMS, LEDGER } from './chaos-fsms';
import { LedgerWriter } from './ledger';
import type { SenderConfig } from './protocol';
import { mulberry32, shuffle } from './random';

const config = JSON.parse(process.env['GD_CHAOS_SENDER'] ?? 'null') as SenderConfig | null;
if (!config) throw new Error('sender-main: GD_CHAOS_SENDER is not set');
const cfg: SenderConfig = config;
const random = mulberry32(cfg.seed ^ 0x5eed);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const ledgerPool = new Pool({
  connectionString: cfg.databaseUrl,
  max: 4,
  application_name: 'gd-sender-ledger',
});
ledgerPool.on('error', () => undefined);
const ledger = new LedgerWriter(ledgerPool, 'sender');

/** A cancel the plan decided for a job (and whether the cancelled instance is retried). */
interface PlannedCancel {
  readonly mode: CancelMode;
  readonly delayMs: number;
  readonly retry: boolean;
  /** A fan-out or a tree: cancelled (cascade) once it waits for its children. */
  readonly tree: boolean;
}

interface Job {
  readonly fsm: string;
  readonly state: Record<string, unknown>;
  readonly concurrencyKey?: string;
  readonly cancel?: PlannedCancel;
}

/** Cancels are decided up front, from the seeded PRNG, so a seed replays the same choices. */
function withCancel(job: Job, share: number): Job {
  const w = cfg.workload;
  if (random() >= share) return job;
  const tree = job.fsm === 'chaos_fanout' || job.fsm === 'chaos_tree';
  const cancel: PlannedCancel = {
    mode: random() < w.fenceShare ? 'fence' : 'cooperative',
    // A tree is cancelled once it waits for its children (see cancelLater), soon after.
    delayMs: Math.floor(random() * (tree ? 600 : w.cancelDelayMs)),
    retry: random() < w.retryShare,
    tree,
  };
  // Steps that take a while: a cancel often finds rows executing (children, for a tree).
  const pause = 100 + Math.floor(random() * 300);
  const state =
    job.fsm === 'chaos_linear'
      ? { ...job.state, pauseMs: pause }
      : tree
        ? { ...job.state, childPauseMs: pause }
        : job.state;
  return { ...job, state, cancel };
}

function plan(): Job[] {
  const w = cfg.workload;
  const jobs: Job[] = [];
  for (let i = 0; i < w.linear; i++) jobs.push({ fsm: 'chaos_linear', state: { seq: 0 } });
  for (let i = 0; i < w.keyed; i++) {
    const key = `hot:${i % w.hotKeys}`;
    jobs.push({ fsm: 'chaos_linear', state: { seq: 0, key }, concurrencyKey: key });
  }
  for (let i = 0; i < w.retrier; i++) jobs.push({ fsm: 'chaos_retrier', state: { seq: 0 } });
  for (let i = 0; i < w.parker; i++) jobs.push({ fsm: 'chaos_parker', state: { seq: 0 } });
  for (let i = 0; i < w.fanout; i++) jobs.push({ fsm: 'chaos_fanout', state: { seq: 0 } });
  for (let i = 0; i < w.tree; i++) jobs.push({ fsm: 'chaos_tree', state: { seq: 0, level: 0 } });
  for (let i = 0; i < w.transactional; i++) jobs.push({ fsm: 'chaos_tx', state: { seq: 0 } });
  for (const [i, job] of jobs.entries()) {
    const tree = job.fsm === 'chaos_fanout' || job.fsm === 'chaos_tree';
    jobs[i] = withCancel(job, tree ? w.treeCancelShare : w.cancelShare);
  }
  for (let i = 0; i < w.failer; i++) jobs.push({ fsm: 'chaos_failer', state: { seq: 0 } });
  shuffle(jobs, random);
  // The self-inflicted faults go in after the first third, when every worker is busy.
  const third = Math.floor(jobs.length / 3);
  for (let i = 0; i < w.spinner; i++) {
    jobs.splice(third + i * 7, 0, { fsm: 'chaos_spinner', state: { seq: 0 } });
  }
  for (let i = 0; i < w.pill; i++) {
    jobs.splice(third + 3, 0, { fsm: 'chaos_pill', state: { seq: 0 } });
  }
  return jobs;
}

function op(row: {
  op: string;
  id?: string | null;
  fsm?: string | null;
  name?: string | null;
  dedup?: string | null;
  invoked: number;
  completed: number | null;
  result: string;
  detail?: string;
  options?: Record<string, unknown>;
  answer?: Record<string, unknown>;
}): Promise<void> {
  return ledger.write(
    `INSERT INTO chaos.client_ops (op, instance_id, fsm, name, dedup_key, invoked_at, completed_at, result, detail, options, answer)
     VALUES ($1, $2, $3, $4, $5, to_timestamp($6::float8 / 1000), to_timestamp($7::float8 / 1000), $8, $9, $10, $11)`,
    [
      row.op,
      row.id ?? null,
      row.fsm ?? null,
      row.name ?? null,
      row.dedup ?? null,
      row.invoked,
      row.completed,
      row.result,
      row.detail ?? null,
      row.options ? JSON.stringify(row.options) : null,
      row.answer ? JSON.stringify(row.answer) : null,
    ],
  );
}

/**
 * The rows of `id`'s tree (itself included) that are live and not asked to stop: right after a
 * cascading cancel answered, there must be none (docs/operations-control.md "Children": no child
 * of a cancelled tree is left live when `cancel` returns; a running one carries the request).
 */
async function liveInTree(id: string): Promise<{ id: string; status: string; depth: number }[]> {
  return ledger.read<{ id: string; status: string; depth: number }>(
    `WITH RECURSIVE tree AS (
       SELECT id, status, cancel_requested_at, 0 AS depth FROM public.gen_durable WHERE id = $1
       UNION ALL
       SELECT g.id, g.status, g.cancel_requested_at, t.depth + 1
         FROM public.gen_durable g JOIN tree t ON g.parent_id = t.id)
     SELECT id::text, status::text, depth FROM tree
      WHERE status NOT IN ('done', 'failed', 'cancelled')
        AND NOT (status = 'executing' AND cancel_requested_at IS NOT NULL)`,
    [id],
  );
}

function classify(err: unknown): 'unknown' | 'error' {
  return isConnectionLevel(err) ? 'unknown' : 'error';
}

async function main(): Promise<void> {
  const dataSource = new DataSource({
    type: 'postgres',
    url: cfg.databaseUrl,
    poolSize: 12,
    applicationName: 'gd-sender-engine',
    extra: { connectionTimeoutMillis: 5_000 },
  });
  await dataSource.initialize();

  @Module({
    imports: [
      GenDurableModule.forRoot({
        dataSource,
        name: 'chaos',
        nodeId: 'sender',
        queues: {},
        reaper: false,
        gc: false,
        poke: cfg.redisUrl ? { redis: cfg.redisUrl } : 'postgres',
        statementTimeout: 5_000,
      }),
    ],
    providers: [{ provide: LEDGER, useValue: ledger }, ...CHAOS_FSMS],
  })
  class SenderModule {}

  const app = await NestFactory.createApplicationContext(SenderModule, { logger: ['error'] });
  const engine = app.get<EngineService>(getEngineToken('chaos'));
  process.on('message', (raw: unknown) => {
    if ((raw as { type?: string }).type === 'shutdown') {
      void (async () => {
        await app.close();
        await dataSource.destroy().catch(() => undefined);
        await ledgerPool.end().catch(() => undefined);
        process.exit(0);
      })();
    }
  });
  process.on('disconnect', () => process.exit(1));
  process.send?.({ type: 'ready', pid: process.pid });

  const parkers: string[] = [];
  let signals = 0;
  let cancels = 0;
  let retries = 0;
  let inFlight = 0;
  const pending = new Set<Promise<void>>();

  /** Inserts until acknowledged; every attempt is recorded. */
  const insert = async (job: Job, n: number): Promise<void> => {
    // Per phase: the control phase's keys are held until GC (45 s in R1), and a chaos insert
    // with the same key was once answered DuplicateError and "found" as a control instance —
    // the chaos job was never inserted (issue 17: failers that never failed).
    const key = `ins:${cfg.tag}:${n}`;
    for (let attempt = 0; ; attempt++) {
      const invoked = Date.now();
      try {
        const id = await engine.insert(job.fsm, {
          state: job.state,
          correlationKey: key,
          correlationScope: [
            'runnable',
            'executing',
            'awaiting_signal',
            'awaiting_children',
            'done',
            'failed',
            'cancelled',
          ],
          ...(job.concurrencyKey ? { concurrencyKey: job.concurrencyKey } : {}),
        });
        await op({
          op: 'insert',
          id,
          fsm: job.fsm,
          dedup: key,
          invoked,
          completed: Date.now(),
          result: 'ok',
          detail: attempt > 0 ? `attempt ${attempt}` : undefined,
        });
        acknowledged(job, id);
        return;
      } catch (err) {
        if (err instanceof DuplicateError) {
          // An earlier, ambiguous attempt committed: the key finds it.
          const found = await engine.get({ correlationKey: key }).catch(() => null);
          if (found) {
            await op({
              op: 'insert',
              id: found.id,
              fsm: job.fsm,
              dedup: key,
              invoked,
              completed: Date.now(),
              result: 'ok',
              detail: 'found after an ambiguous attempt',
            });
            acknowledged(job, found.id);
            return;
          }
        }
        await op({
          op: 'insert',
          fsm: job.fsm,
          dedup: key,
          invoked,
          completed: Date.now(),
          result: err instanceof DuplicateError ? 'duplicate' : classify(err),
          detail: String(err).slice(0, 300),
        });
        await sleep(Math.min(100 * 2 ** attempt, 1_000));
      }
    }
  };

  /** Signals until acknowledged or refused (a webhook that retries). */
  const send = async (id: string, name: string, dedup: string): Promise<'ok' | 'no_target'> => {
    for (let attempt = 0; ; attempt++) {
      const invoked = Date.now();
      try {
        await engine.signal({ id }, name, { dedup }, { dedupKey: dedup });
        signals++;
        await op({ op: 'signal', id, name, dedup, invoked, completed: Date.now(), result: 'ok' });
        return 'ok';
      } catch (err) {
        if (err instanceof NoTargetError) {
          await op({
            op: 'signal',
            id,
            name,
            dedup,
            invoked,
            completed: Date.now(),
            result: 'no_target',
          });
          return 'no_target';
        }
        await op({
          op: 'signal',
          id,
          name,
          dedup,
          invoked,
          completed: Date.now(),
          result: classify(err),
          detail: String(err).slice(0, 300),
        });
        await sleep(Math.min(100 * 2 ** attempt, 1_000));
      }
    }
  };

  /** What follows an acknowledged insert: the parker's signal, a planned cancel, a fix. */
  const acknowledged = (job: Job, id: string): void => {
    if (job.fsm === 'chaos_parker') {
      parkers.push(id);
      track(signalParker(id));
    }
    if (job.cancel) track(cancelLater(job, id, job.cancel));
    if (job.fsm === 'chaos_failer') track(fixFailer(id));
  };

  /** The instance's status and step, read until the read succeeds (null: no such row). */
  const view = async (id: string): Promise<{ status: string; step: string } | null> => {
    for (let attempt = 0; ; attempt++) {
      try {
        const v = await engine.get({ id });
        return v ? { status: v.status, step: v.step } : null;
      } catch (err) {
        if (attempt >= 100) throw err;
        await sleep(200);
      }
    }
  };

  /**
   * Waits until the instance is terminal (a requested cancel ends with its step; a failer
   * waits for its turn in a queue that can be a minute behind under the nemesis).
   */
  const ended = async (id: string): Promise<{ status: string; step: string } | null> => {
    const deadline = Date.now() + 240_000;
    for (;;) {
      const v = await view(id);
      if (!v || ['done', 'failed', 'cancelled'].includes(v.status) || Date.now() > deadline) {
        return v;
      }
      await sleep(100);
    }
  };

  /** Waits until no row of `id`'s tree is live (a requested row ends with its step). */
  const treeEnded = async (id: string): Promise<void> => {
    const deadline = Date.now() + 240_000;
    for (;;) {
      const live = await ledger.read<{ n: string }>(
        `WITH RECURSIVE tree AS (
           SELECT id, status FROM public.gen_durable WHERE id = $1
           UNION ALL
           SELECT g.id, g.status FROM public.gen_durable g JOIN tree t ON g.parent_id = t.id)
         SELECT count(*) AS n FROM tree WHERE status NOT IN ('done', 'failed', 'cancelled')`,
        [id],
      );
      if (Number(live[0]?.n ?? 0) === 0 || Date.now() > deadline) return;
      await sleep(100);
    }
  };

  /** Cancels until answered (cancel is idempotent: a second call after a lost answer is safe). */
  const cancelLater = async (job: Job, id: string, plan: PlannedCancel): Promise<void> => {
    if (plan.tree) {
      // Under the nemesis the default queue can be 20 s and more behind the feed.
      const deadline = Date.now() + 120_000;
      for (;;) {
        const v = await view(id);
        if (!v || (v.status !== 'runnable' && v.status !== 'executing') || Date.now() > deadline) {
          break;
        }
        await sleep(50);
      }
    }
    await sleep(plan.delayMs);
    const options = { mode: plan.mode, children: 'cascade' as const };
    let answer: CancelResult | undefined;
    for (let attempt = 0; !answer; attempt++) {
      const invoked = Date.now();
      try {
        answer = await engine.cancel({ id }, { ...options, reason: 'chaos' });
        const live = await liveInTree(id);
        cancels++;
        await op({
          op: 'cancel',
          id,
          fsm: job.fsm,
          name: plan.mode,
          invoked,
          completed: Date.now(),
          result: 'ok',
          options,
          answer: { ...answer, liveAfter: live },
        });
      } catch (err) {
        const refused = err instanceof NoTargetError;
        await op({
          op: 'cancel',
          id,
          fsm: job.fsm,
          name: plan.mode,
          invoked,
          completed: Date.now(),
          result: refused ? 'no_target' : classify(err),
          detail: String(err).slice(0, 300),
          options,
        });
        if (refused) return;
        await sleep(Math.min(100 * 2 ** attempt, 1_000));
      }
    }
    if (!plan.retry) return;
    await sleep(Math.floor(random() * 1_000));
    const before = await ended(id);
    if (before?.status !== 'cancelled') return;
    // A tree is retried once every row in it has ended: a retried parent resumes at its join
    // step at once, and a child still running its requested step would be joined as live.
    if (plan.tree) await treeEnded(id);
    const retried = await retryUntilAnswered(job.fsm, id, {});
    // A parker cancelled before it parked parks again after the retry: its `go` (consumed by
    // the cancel) is sent again, under a new dedup key.
    if (retried && job.fsm === 'chaos_parker' && before.step === 'start') {
      await send(id, 'go', `go-${id}-retried`);
    }
  };

  /** A failer ends `failed` at once: retried with `fixed: true` until a retry is answered. */
  const fixFailer = async (id: string): Promise<void> => {
    await sleep(Math.floor(random() * 1_000));
    const v = await ended(id);
    if (v?.status !== 'failed') return;
    await retryUntilAnswered('chaos_failer', id, { fix: true });
  };

  /**
   * Retries until answered. Not idempotent: after an ambiguous attempt the row is read, and
   * retried again only while it is still failed or cancelled. True when a retry was acknowledged
   * (or an ambiguous one took effect).
   */
  const retryUntilAnswered = async (
    fsm: string,
    id: string,
    options: { fix?: boolean },
  ): Promise<boolean> => {
    for (let attempt = 0; ; attempt++) {
      const invoked = Date.now();
      const before = attempt === 0 ? undefined : await view(id);
      if (before && before.status !== 'failed' && before.status !== 'cancelled') return true;
      try {
        await engine.retry<{ fixed?: boolean }>(
          { id },
          options.fix ? { state: (s) => ({ ...s, fixed: true }) } : {},
        );
        retries++;
        await op({
          op: 'retry',
          id,
          fsm,
          name: options.fix ? 'fix' : 'plain',
          invoked,
          completed: Date.now(),
          result: 'ok',
          options,
        });
        return true;
      } catch (err) {
        const refused = err instanceof InvalidInputError || err instanceof NoTargetError;
        await op({
          op: 'retry',
          id,
          fsm,
          name: options.fix ? 'fix' : 'plain',
          invoked,
          completed: Date.now(),
          result: refused ? 'refused' : err instanceof DuplicateError ? 'duplicate' : classify(err),
          detail: String(err).slice(0, 300),
          options,
        });
        if (refused) return false;
        await sleep(Math.min(100 * 2 ** attempt, 1_000));
      }
    }
  };

  const signalParker = async (id: string): Promise<void> => {
    // Around park time on purpose (S21): U(0, 30) ms after the insert was acknowledged.
    await sleep(Math.floor(random() * 30));
    await send(id, 'go', `go-${id}`);
    if (random() < cfg.workload.duplicateShare) {
      await sleep(Math.floor(random() * 50));
      await send(id, 'go', `go-${id}`);
    }
  };

  const track = (p: Promise<void>): void => {
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };

  const jobs = plan();
  const started = Date.now();
  for (const [n, job] of jobs.entries()) {
    const due = started + Math.floor((n * cfg.feedMs) / jobs.length);
    if (due > Date.now()) await sleep(due - Date.now());
    while (inFlight >= 16) await sleep(5);
    inFlight++;
    track(insert(job, n).finally(() => inFlight--));
  }
  while (pending.size > 0) await Promise.all([...pending]);

  // S25: a name nobody awaits, to parkers that have finished: must be refused, never stored.
  let late = 0;
  for (const id of parkers) {
    if (late >= cfg.workload.lateSignals) break;
    const view = await engine.get({ id }).catch(() => null);
    if (view?.status !== 'done') continue;
    late++;
    await send(id, 'late', `late-${id}`);
  }
  process.send?.({ type: 'fed', inserts: jobs.length, signals, cancels, retries });
}

main().catch((err: unknown) => {
  process.send?.({
    type: 'fatal',
    error: err instanceof Error ? (err.stack ?? err.message) : String(err),
  });
  process.exit(1);
});
