import { randomUUID } from 'node:crypto';

import { Inject } from '@nestjs/common';

import {
  awaitSignal,
  done,
  DurableFsm,
  next,
  type Outcome,
  retry,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
  type TransactionalStepContext,
} from '../../../lib';
import type { LedgerWriter } from './ledger';

/**
 * The chaos workload (docs/reliability.md S01 and friends): every step writes its execution to the
 * ledger (start with the claim token, end) and bumps `state.seq`, carrying its execution id
 * in `state.exec` (or `result.exec`), so the history trigger ties each committed transition
 * to the execution that produced it.
 */
export const LEDGER = 'CHAOS_LEDGER';
export const LEASE_MS = 2_000;

interface Base {
  seq: number;
  exec?: string;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A child counts as ended in a join when it is terminal (a cascade cancel ends it `cancelled`). */
const ENDED: readonly string[] = ['done', 'failed', 'cancelled'];

async function recorded<S extends Base>(
  ledger: LedgerWriter,
  ctx: StepContext<S>,
  key: string | null,
  body: (exec: string, seq: number) => Promise<Outcome> | Outcome,
): Promise<Outcome> {
  const exec = randomUUID();
  const seq = ctx.state.seq + 1;
  await ledger.begin(exec, ctx.id, ctx.fsm, ctx.step, seq, ctx.attempt, key);
  const outcome = await body(exec, seq);
  await ledger.end(exec);
  return outcome;
}

interface LinearState extends Base {
  key?: string;
  pauseMs?: number;
}

/** Five steps; keyed instances (K = 1) do a racy read-modify-write of their key's counter. */
@DurableFsm({ name: 'chaos_linear', queue: 'default', initial: 's1' })
export class ChaosLinear {
  constructor(@Inject(LEDGER) private readonly ledger: LedgerWriter) {}
  private step(ctx: StepContext<LinearState>, to: string | null): Promise<Outcome> {
    return recorded(this.ledger, ctx, ctx.state.key ?? null, async (exec, seq) => {
      if (ctx.state.key) await this.ledger.racyIncrement(ctx.state.key);
      if (ctx.state.pauseMs) await sleep(ctx.state.pauseMs);
      const state = { ...ctx.state, seq, exec };
      return to === null ? done({ seq, exec }) : next(to, state);
    });
  }
  @Step() s1(ctx: StepContext<LinearState>) {
    return this.step(ctx, 's2');
  }
  @Step() s2(ctx: StepContext<LinearState>) {
    return this.step(ctx, 's3');
  }
  @Step() s3(ctx: StepContext<LinearState>) {
    return this.step(ctx, 's4');
  }
  @Step() s4(ctx: StepContext<LinearState>) {
    return this.step(ctx, 's5');
  }
  @Step() s5(ctx: StepContext<LinearState>) {
    return this.step(ctx, null);
  }
}

/** Retries twice (30 ms backoff), then finishes: 3 + 1 executions. */
@DurableFsm({ name: 'chaos_retrier', queue: 'default' })
export class ChaosRetrier {
  constructor(@Inject(LEDGER) private readonly ledger: LedgerWriter) {}
  @Step() start(ctx: StepContext<Base & { tries?: number }>) {
    return recorded(this.ledger, ctx, null, (exec, seq) => {
      const tries = (ctx.state.tries ?? 0) + 1;
      return tries < 3 ? retry({ seq, exec, tries }, 30) : next('fin', { seq, exec, tries });
    });
  }
  @Step() fin(ctx: StepContext<Base>) {
    return recorded(this.ledger, ctx, null, (exec, seq) => done({ seq, exec }));
  }
}

/** Parks on `go` (docs/reliability.md S21/S22); the woken step records every signal it was handed. */
@DurableFsm({ name: 'chaos_parker', queue: 'default' })
export class ChaosParker {
  constructor(@Inject(LEDGER) private readonly ledger: LedgerWriter) {}
  @Step() start(ctx: StepContext<Base>) {
    return recorded(this.ledger, ctx, null, (exec, seq) =>
      awaitSignal('go', 'woken', { seq, exec }),
    );
  }
  @Step() async woken(ctx: StepContext<Base>) {
    return recorded(this.ledger, ctx, null, async (exec, seq) => {
      for (const s of ctx.awaited) {
        const dedup = (s.payload as { dedup?: string } | null)?.dedup ?? null;
        await this.ledger.observe(ctx.id, exec, s.id, s.name, dedup);
      }
      return done({ seq, exec, got: ctx.awaited.length });
    });
  }
}

/**
 * Spawns 10 children in queue `children`, then checks the join (docs/reliability.md S26). A
 * fan-out the sender means to cancel carries `childPauseMs`: its children's steps take that
 * long, so a cascading cancel finds some of them executing.
 */
@DurableFsm({ name: 'chaos_fanout', queue: 'default' })
export class ChaosFanout {
  constructor(@Inject(LEDGER) private readonly ledger: LedgerWriter) {}
  @Step() start(ctx: StepContext<Base & { childPauseMs?: number }>) {
    const pause = ctx.state.childPauseMs ? { pauseMs: ctx.state.childPauseMs } : {};
    return recorded(this.ledger, ctx, null, (exec, seq) =>
      scheduleChildren(
        'join',
        Array.from({ length: 10 }, (_, i) => ({
          fsm: 'chaos_child',
          queue: 'children',
          state: { seq: 0, n: i, ...pause },
        })),
        { seq, exec },
      ),
    );
  }
  @Step() join(ctx: StepContext<Base>) {
    return recorded(this.ledger, ctx, null, (exec, seq) =>
      done({
        seq,
        exec,
        children: ctx.children.length,
        terminal: ctx.children.filter((c) => ENDED.includes(c.status)).length,
      }),
    );
  }
}

/** A fan-out child: two steps (each `pauseMs` long, when given). */
@DurableFsm({ name: 'chaos_child', queue: 'children' })
export class ChaosChild {
  constructor(@Inject(LEDGER) private readonly ledger: LedgerWriter) {}
  @Step() start(ctx: StepContext<Base & { pauseMs?: number }>) {
    return recorded(this.ledger, ctx, null, async (exec, seq) => {
      if (ctx.state.pauseMs) await sleep(ctx.state.pauseMs);
      return next('fin', { ...ctx.state, seq, exec });
    });
  }
  @Step() fin(ctx: StepContext<Base & { pauseMs?: number }>) {
    return recorded(this.ledger, ctx, null, async (exec, seq) => {
      if (ctx.state.pauseMs) await sleep(ctx.state.pauseMs);
      return done({ seq, exec });
    });
  }
}

/**
 * A 3-level tree (docs/reliability.md S28): level 0 → 5 × level 1 → 5 × level 2, in two queues.
 * `childPauseMs` (a tree the sender means to cancel) makes every level below the root's first
 * step take that long.
 */
@DurableFsm({ name: 'chaos_tree', queue: 'default' })
export class ChaosTree {
  constructor(@Inject(LEDGER) private readonly ledger: LedgerWriter) {}
  @Step() start(ctx: StepContext<Base & { level: number; childPauseMs?: number }>) {
    return recorded(this.ledger, ctx, null, async (exec, seq) => {
      const level = ctx.state.level;
      const pauseMs = ctx.state.childPauseMs;
      if (level > 0 && pauseMs) await sleep(pauseMs);
      if (level >= 2) return done({ seq, exec, level });
      const queue = level === 0 ? 'children' : 'default';
      return scheduleChildren(
        'join',
        Array.from({ length: 5 }, () => ({
          fsm: 'chaos_tree',
          queue,
          state: { seq: 0, level: level + 1, ...(pauseMs ? { childPauseMs: pauseMs } : {}) },
        })),
        { seq, exec, level },
      );
    });
  }
  @Step() join(ctx: StepContext<Base & { level: number }>) {
    return recorded(this.ledger, ctx, null, (exec, seq) =>
      done({
        seq,
        exec,
        level: ctx.state.level,
        children: ctx.children.length,
        terminal: ctx.children.filter((c) => ENDED.includes(c.status)).length,
      }),
    );
  }
}

/**
 * docs/reliability.md S05: on its first attempt the step spins synchronously for 3 × the lease, so the
 * worker's event loop (heartbeats, flushes) stalls; its rows are reaped and re-run elsewhere.
 */
@DurableFsm({ name: 'chaos_spinner', queue: 'default' })
export class ChaosSpinner {
  constructor(@Inject(LEDGER) private readonly ledger: LedgerWriter) {}
  @Step() async start(ctx: StepContext<Base>) {
    return recorded(this.ledger, ctx, null, async (exec, seq) => {
      if (ctx.attempt === 0) {
        await this.ledger.fault('spin', { id: ctx.id, ms: 3 * LEASE_MS });
        const until = Date.now() + 3 * LEASE_MS;
        let spins = 0;
        while (Date.now() < until) spins++;
        await this.ledger.healFault('spin');
        return next('fin', { seq, exec, spins: spins > 0 });
      }
      return next('fin', { seq, exec });
    });
  }
  @Step() fin(ctx: StepContext<Base>) {
    return recorded(this.ledger, ctx, null, (exec, seq) => done({ seq, exec }));
  }
}

/**
 * Fails on its first step until it is fixed: `stop` ends it `failed` (its state, seq
 * included, stays), and the sender retries it with `fixed: true` (docs/design.md §27.3): then
 * two steps, like a child.
 */
@DurableFsm({ name: 'chaos_failer', queue: 'default' })
export class ChaosFailer {
  constructor(@Inject(LEDGER) private readonly ledger: LedgerWriter) {}
  @Step() start(ctx: StepContext<Base & { fixed?: boolean }>) {
    return recorded(this.ledger, ctx, null, (exec, seq) =>
      ctx.state.fixed ? next('fin', { ...ctx.state, seq, exec }) : stop('not fixed yet'),
    );
  }
  @Step() fin(ctx: StepContext<Base>) {
    return recorded(this.ledger, ctx, null, (exec, seq) => done({ seq, exec }));
  }
}

/** docs/reliability.md S09: every execution kills its worker; the reaper ends it as a poison pill. */
@DurableFsm({ name: 'chaos_pill', queue: 'default' })
export class ChaosPill {
  constructor(@Inject(LEDGER) private readonly ledger: LedgerWriter) {}
  @Step() start(ctx: StepContext<Base>) {
    return recorded(this.ledger, ctx, null, async () => {
      await this.ledger.fault('pill', { id: ctx.id, attempt: ctx.attempt });
      process.kill(process.pid, 'SIGKILL');
      await new Promise(() => undefined);
      return done({});
    });
  }
}

/**
 * Transactional steps (docs/transactional-steps.md): each of its three steps inserts one row in
 * `chaos.tx_effects` through `ctx.manager`, so the row commits with the step's outcome or not
 * at all. I-TX-EFFECTS holds the effects to the committed transitions: one row per committed
 * step (its execution id), none for an execution that did not commit, never two per step.
 */
@DurableFsm({ name: 'chaos_tx', queue: 'tx', initial: 't1' })
export class ChaosTx {
  constructor(@Inject(LEDGER) private readonly ledger: LedgerWriter) {}
  private step(ctx: TransactionalStepContext<Base>, to: string | null): Promise<Outcome> {
    return recorded(this.ledger, ctx, null, async (exec, seq) => {
      await ctx.manager.query(
        `INSERT INTO chaos.tx_effects (exec_id, instance_id, step_seq) VALUES ($1, $2, $3)`,
        [exec, ctx.id, seq],
      );
      return to === null ? done({ seq, exec }) : next(to, { ...ctx.state, seq, exec });
    });
  }
  @Step({ transactional: true }) t1(ctx: TransactionalStepContext<Base>) {
    return this.step(ctx, 't2');
  }
  @Step({ transactional: true }) t2(ctx: TransactionalStepContext<Base>) {
    return this.step(ctx, 't3');
  }
  @Step({ transactional: true }) t3(ctx: TransactionalStepContext<Base>) {
    return this.step(ctx, null);
  }
}

export const CHAOS_FSMS = [
  ChaosLinear,
  ChaosRetrier,
  ChaosParker,
  ChaosFanout,
  ChaosChild,
  ChaosTree,
  ChaosSpinner,
  ChaosFailer,
  ChaosPill,
  ChaosTx,
];
