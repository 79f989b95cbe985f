import './support/enable-faults';

import { type ChildProcess, fork, spawnSync } from 'node:child_process';
import path from 'node:path';

import { done, DurableFsm, next, Step, type StepContext } from '../../lib';
import {
  armFault,
  clearFaults,
  disarmFaults,
  FAULTS_ENABLED,
  onFaultHit,
} from '../../lib/runtime/fault-points';
import { bootEngine, eventually, type Harness, rowOf } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The fault-point registry (docs/reliability.md §3.3): off unless GEN_DURABLE_FAULTS is set at load,
// pre-armed from the variable, controlled over IPC in a forked process, and — in process —
// the engine's own points drive S02 (injected failure before commit) and S04 (the same
// worker re-claims a row whose old task is still running).

const ROOT = path.resolve(__dirname, '../..');
const REGISTER = path.join(ROOT, 'test/support/ts-register.cjs');
const CHILD = path.join(__dirname, 'support/fault-child.ts');

function forkChild(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; enabled: boolean }> {
  const child = fork(CHILD, [], {
    execArgv: ['-r', REGISTER],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let alive = true;
  child.once('exit', () => (alive = false));
  trackResource(`fault child ${child.pid}`, () => alive);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('message', (m: { type: string; enabled: boolean }) =>
      resolve({ child, enabled: m.enabled }),
    );
  });
}

function nextMessage<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: { type: string }): void => {
      if (m.type !== type) return;
      child.off('message', on);
      resolve(m as T);
    };
    child.on('message', on);
  });
}

function exitOf(
  child: ChildProcess,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

describe('fault points: registry', () => {
  it('are off unless GEN_DURABLE_FAULTS is set when the module loads', () => {
    const probe = `process.stdout.write(String(require(${JSON.stringify(path.join(ROOT, 'lib/runtime/fault-points.ts'))}).FAULTS_ENABLED))`;
    const env = { ...process.env };
    delete env['GEN_DURABLE_FAULTS'];
    const off = spawnSync(process.execPath, ['-r', REGISTER, '-e', probe], {
      env,
      encoding: 'utf8',
    });
    expect(off.stdout).toBe('false');
    const on = spawnSync(process.execPath, ['-r', REGISTER, '-e', probe], {
      env: { ...env, GEN_DURABLE_FAULTS: '1' },
      encoding: 'utf8',
    });
    expect(on.stdout).toBe('true');
    expect(FAULTS_ENABLED).toBe(true);
  });

  it('are pre-armed from the variable, controlled over IPC, and exit like SIGKILL', async () => {
    const rules = [{ point: 'pick.afterClaim', action: { kind: 'pause' }, ids: ['7'] }];
    const { child, enabled } = await forkChild({ GEN_DURABLE_FAULTS: JSON.stringify(rules) });
    expect(enabled).toBe(true);
    try {
      // A non-matching id passes straight through.
      child.send({ type: 'hit', point: 'pick.afterClaim', id: '8' });
      expect(await nextMessage(child, 'passed')).toEqual({
        type: 'passed',
        point: 'pick.afterClaim',
        result: null,
      });

      // The matching id pauses and is reported; a release over IPC lets it go.
      const hit = nextMessage<{ point: string; action: string; detail: unknown }>(
        child,
        'gd-fault-hit',
      );
      const passed = nextMessage(child, 'passed');
      child.send({ type: 'hit', point: 'pick.afterClaim', id: '7' });
      expect(await hit).toMatchObject({
        point: 'pick.afterClaim',
        action: 'pause',
        detail: { ids: ['7'] },
      });
      let released = false;
      void passed.then(() => (released = true));
      await new Promise((r) => setTimeout(r, 100));
      expect(released).toBe(false);
      child.send({ type: 'gd-fault', op: 'release', point: 'pick.afterClaim' });
      await passed;

      // throw fires once, with a connection-class code; skip answers 'skip'.
      child.send({
        type: 'gd-fault',
        op: 'arm',
        rule: { point: 'flush.beforeCommit', action: { kind: 'throw' } },
      });
      child.send({
        type: 'gd-fault',
        op: 'arm',
        rule: { point: 'heartbeat.before', action: { kind: 'skip' } },
      });
      child.send({ type: 'hit', point: 'flush.beforeCommit' });
      expect(await nextMessage(child, 'threw')).toEqual({
        type: 'threw',
        point: 'flush.beforeCommit',
        code: '08006',
      });
      child.send({ type: 'hit', point: 'flush.beforeCommit' });
      expect(await nextMessage(child, 'passed')).toMatchObject({
        point: 'flush.beforeCommit',
        result: null,
      });
      child.send({ type: 'hit', point: 'heartbeat.before' });
      expect(await nextMessage(child, 'passed')).toMatchObject({
        point: 'heartbeat.before',
        result: 'skip',
      });
      child.send({ type: 'gd-fault', op: 'disarm', point: 'heartbeat.before' });
      child.send({ type: 'hit', point: 'heartbeat.before' });
      expect(await nextMessage(child, 'passed')).toMatchObject({
        point: 'heartbeat.before',
        result: null,
      });

      // exit: the process dies by SIGKILL, nothing after the point runs.
      child.send({
        type: 'gd-fault',
        op: 'arm',
        rule: { point: 'step.beforeOutcome', action: { kind: 'exit' } },
      });
      child.send({ type: 'hit', point: 'step.beforeOutcome' });
      expect(await exitOf(child)).toEqual({ code: null, signal: 'SIGKILL' });
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exitOf(child);
      }
    }
  });
});

const executions: { id: string; step: string; attempt: number }[] = [];

@DurableFsm({ name: 'faulted', queue: 'default', initial: 'a' })
class FaultedFsm {
  @Step() a(ctx: StepContext<{ seq: number }>) {
    executions.push({ id: ctx.id, step: 'a', attempt: ctx.attempt });
    // `by` records which execution of step a committed (its attempt).
    return next('b', { seq: ctx.state.seq + 1, by: ctx.attempt });
  }
  @Step() b(ctx: StepContext<{ seq: number; by: number }>) {
    executions.push({ id: ctx.id, step: 'b', attempt: ctx.attempt });
    return done({ seq: ctx.state.seq + 1, by: ctx.state.by });
  }
}

describe('fault points in the engine', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [FaultedFsm], { queues: { default: 2 } });
  });
  afterAll(async () => {
    clearFaults();
    await h.close();
    await db.drop();
  });
  afterEach(() => clearFaults());

  const runsOf = (id: string, step: string) =>
    executions.filter((e) => e.id === id && e.step === step);

  it('S02: a connection failure injected before COMMIT rolls the flush back; the retry commits it once', async () => {
    const hits: string[] = [];
    const off = onFaultHit((hit) => hits.push(hit.point));
    try {
      armFault({ point: 'flush.beforeCommit', action: { kind: 'throw' }, times: 1 });
      const id = await h.engine.insert(FaultedFsm, { state: { seq: 0 } });
      expect(await h.engine.await(id, { until: 'terminal', timeout: 15_000 })).toEqual({
        kind: 'done',
        result: { seq: 2, by: 0 },
      });
      expect(hits).toEqual(['flush.beforeCommit']);
      // Each step ran once: the failed transaction was retried by the flusher, not re-executed.
      expect(runsOf(id, 'a')).toHaveLength(1);
      expect(runsOf(id, 'b')).toHaveLength(1);
      expect(h.eventsOf('flush:error')).toEqual([]);
      expect(h.eventsOf('outcome:stale', id)).toEqual([]);
    } finally {
      off();
    }
  });

  it('S04: the same worker re-claims a row whose old task is still running; the old outcome is stale, the step commits once', async () => {
    const scheduler = h.engine.runtime.schedulers.get('default')!;
    const id = await h.engine.insert(FaultedFsm, { state: { seq: 0 }, scheduleIn: 60_000 });
    // T1 holds its outcome at step.beforeOutcome; this worker's heartbeats are skipped so the
    // lease runs out while the task is alive.
    armFault({ point: 'step.beforeOutcome', action: { kind: 'pause' }, ids: [id], times: 1 });
    armFault({ point: 'heartbeat.before', action: { kind: 'skip' }, worker: scheduler.workerId });
    const paused = new Promise<void>((resolve) => {
      const off = onFaultHit((hit) => {
        if (hit.point === 'step.beforeOutcome' && hit.detail.ids?.includes(id)) {
          off();
          resolve();
        }
      });
    });
    await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]);
    h.engine.runtime.schedulers.get('default')?.poke();
    await paused;
    const first = await rowOf(db, id);
    expect(first).toMatchObject({
      status: 'executing',
      locked_by: scheduler.workerId,
      claim_seq: '1',
    });

    // The reaper returns the row; the same scheduler (same worker id) claims it again (T2)
    // but holds it in its buffer while T1 is in flight (docs/design.md §26.1).
    const reclaimed = await eventually(async () => {
      const r = await rowOf(db, id);
      return r['claim_seq'] === '2' && r['status'] === 'executing' ? r : undefined;
    }, 15_000);
    expect(reclaimed).toMatchObject({ locked_by: scheduler.workerId, attempt: 1 });
    disarmFaults('heartbeat.before');
    expect(runsOf(id, 'a')).toHaveLength(1);

    // Release T1: its outcome carries claim_seq 1 and is dropped whole.
    clearFaults();
    const stale = await h.waitFor('outcome:stale', (e) => e.metadata['id'] === id);
    expect(stale.metadata).toMatchObject({ step: 'a', kind: 'next' });
    // T2 (attempt 1) committed step a, not the stale T1: seq went 0 → 1 → 2, never back.
    expect(await h.engine.await(id, { until: 'terminal', timeout: 15_000 })).toEqual({
      kind: 'done',
      result: { seq: 2, by: 1 },
    });
    // Step a executed twice (at-least-once) but committed once.
    expect(runsOf(id, 'a').map((e) => e.attempt)).toEqual([0, 1]);
    expect(runsOf(id, 'b')).toHaveLength(1);
  });
});
