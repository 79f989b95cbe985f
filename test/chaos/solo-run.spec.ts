import './support/enable-faults';

import { done, DurableFsm, next, Step, type StepContext } from '../../lib';
import { armFault, clearFaults, onFaultHit, releaseFaults } from '../../lib/runtime/fault-points';
import { Reaper } from '../../lib/runtime/reaper';
import { bootEngine, eventually, Gates, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Finding F-R11 (docs/design.md §26.5): with a real scheduler, a loss counts toward the poison-pill
// cap only while the row's own step runs, and a row at the cap (a suspect) is run alone on its
// node before any verdict. The "lost worker" is explicit: heartbeats are skipped (fault point
// heartbeat.before), the test expires the lease and sweeps with its own reaper; steps wait on
// gates keyed by attempt, so every step runs exactly when the test lets it.

const MAX_REAPS = 5;
const gates = new Gates();
/** Step ids running in this process now. */
const live = new Set<string>();
/** Each step start: the row and the other steps running in this process at that moment. */
const starts: { id: string; attempt: number; others: string[] }[] = [];

interface GatedState {
  key: string;
}

async function gated(ctx: StepContext<GatedState>) {
  starts.push({ id: ctx.id, attempt: ctx.attempt, others: [...live] });
  live.add(ctx.id);
  try {
    await gates.wait(`${ctx.state.key}:${ctx.attempt}`);
  } finally {
    live.delete(ctx.id);
  }
  return done({ key: ctx.state.key });
}

@DurableFsm({ name: 'solo_a', queue: 'solo-a' })
class SoloA {
  @Step() start(ctx: StepContext<GatedState>) {
    return gated(ctx);
  }
}

@DurableFsm({ name: 'solo_b', queue: 'solo-b' })
class SoloB {
  @Step() start(ctx: StepContext<GatedState>) {
    return gated(ctx);
  }
}

/** Step `start` hands over to `finish` (a `next`: one autocommit flush, never a terminal's). */
@DurableFsm({ name: 'solo_next', queue: 'solo-a' })
class SoloNext {
  @Step() start(ctx: StepContext<GatedState>) {
    return next('finish', ctx.state);
  }
  @Step() finish(ctx: StepContext<GatedState>) {
    return done({ key: ctx.state.key });
  }
}

describe('poison-pill suspects run alone (F-R11, §26.5)', () => {
  let db: TestDatabase;
  let h: Harness;
  let reaper: Reaper;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [SoloA, SoloB, SoloNext], {
      queues: { 'solo-a': 3, 'solo-b': 3 },
      reaper: false,
      gc: false,
      poke: 'local',
    });
    const runtime = h.engine.runtime;
    reaper = new Reaper(
      runtime.sql,
      60_000,
      MAX_REAPS,
      runtime.telemetry,
      () => undefined,
      () => undefined,
      0,
    );
  });
  afterAll(async () => {
    clearFaults();
    gates.openAll();
    await h.close();
    await db.drop();
  });
  afterEach(() => clearFaults());

  /** A row that is not due yet, then made due with `reaps` (and `suspect`) set as given. */
  const insertWith = async (
    fsm: typeof SoloA | typeof SoloB,
    key: string,
    reaps: number,
    suspect = false,
  ): Promise<string> => {
    const id = await h.engine.insert(fsm, { state: { key }, scheduleIn: 3_600_000 });
    await db.pool.query(
      `UPDATE gen_durable SET reaps = $2, suspect = $3, eligible_at = now() WHERE id = $1`,
      [id, reaps, suspect],
    );
    return id;
  };

  /** The worker of `id` is lost: its lease runs out and the reaper takes the row back. */
  const loseWorker = async (id: string): Promise<void> => {
    await db.pool.query(
      `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    expect((await reaper.sweep()).reaped).toBe(1);
  };

  const flushPaused = (id: string): Promise<void> =>
    new Promise((resolve) => {
      const off = onFaultHit((hit) => {
        if (hit.point === 'flush.beforeCommit' && hit.detail.ids?.includes(id)) {
          off();
          resolve();
        }
      });
    });

  it('a row that lost workers while its outcome awaited the flush is never counted and completes', async () => {
    // Its worker already died once (reaps 1), so the scheduler marks its steps: each loss
    // below happens after the step returned, while the commit waits (paused before it runs).
    armFault({ point: 'heartbeat.before', action: { kind: 'skip' } });
    const pauseNextFlush = (id: string): Promise<void> => {
      const paused = flushPaused(id);
      armFault({ point: 'flush.beforeCommit', action: { kind: 'pause' }, ids: [id], times: 1 });
      return paused;
    };
    const id = await h.engine.insert(SoloNext, {
      state: { key: 'flush' },
      scheduleIn: 3_600_000,
    });
    let paused = pauseNextFlush(id);
    await db.pool.query(`UPDATE gen_durable SET reaps = 1, eligible_at = now() WHERE id = $1`, [
      id,
    ]);
    h.engine.runtime.schedulers.get('solo-a')?.poke();
    for (let loss = 1; loss <= MAX_REAPS + 1; loss++) {
      await paused;
      // The mark was set before the step and cleared when it returned (beside the flush).
      await eventually(async () => {
        const row = await rowOf(db, id);
        return row['status'] === 'executing' && row['started_seq'] === null;
      });
      await loseWorker(id);
      // Not counted (the scheduler may have claimed it again already).
      expect(await rowOf(db, id)).toMatchObject({ reaps: 1, suspect: false });
      // The next claim's flush pauses too (armed before this one goes on), but for the last.
      if (loss <= MAX_REAPS) paused = pauseNextFlush(id);
      releaseFaults('flush.beforeCommit');
      // The late outcome of the lost claim is refused.
      await eventually(async () => h.eventsOf('outcome:stale', id).length === loss);
    }
    clearFaults();
    await eventually(async () => (await rowOf(db, id))['status'] === 'done');
    expect(await rowOf(db, id)).toMatchObject({ reaps: 0, suspect: false });
    expect(h.eventsOf('reaper:suspect', id)).toEqual([]);
    expect(h.statements.filter((s) => s === 'mark_step_started').length).toBeGreaterThan(MAX_REAPS);
    expect(h.statements.filter((s) => s === 'clear_step_started').length).toBeGreaterThan(
      MAX_REAPS,
    );
  });

  it('a row that lost its worker 5 times while its step ran (pauses, stalls, other rows) becomes a suspect, runs alone and completes', async () => {
    const id = await insertWith(SoloA, 'ambiguous', 0);
    armFault({ point: 'heartbeat.before', action: { kind: 'skip' } });
    h.engine.runtime.schedulers.get('solo-a')?.poke();
    for (let loss = 1; loss <= MAX_REAPS; loss++) {
      // attempt = losses so far: the step of this claim is running now.
      await gates.reached(`ambiguous:${loss - 1}`);
      await loseWorker(id);
      gates.open(`ambiguous:${loss - 1}`);
      await eventually(async () => h.eventsOf('outcome:stale', id).length === loss);
    }
    // A suspect, not failed (the scheduler may hold it already, waiting for the node to go quiet).
    expect(await rowOf(db, id)).toMatchObject({
      reaps: MAX_REAPS,
      suspect: true,
      last_error: null,
    });
    expect(['runnable', 'executing']).toContain((await rowOf(db, id))['status']);
    expect(h.eventsOf('reaper:suspect', id)).toHaveLength(1);
    clearFaults();
    gates.open(`ambiguous:${MAX_REAPS}`);
    await eventually(async () => (await rowOf(db, id))['status'] === 'done');
    expect(await rowOf(db, id)).toMatchObject({ reaps: 0, suspect: false });
    const solo = h.eventsOf('scheduler:solo', id);
    expect(solo.map((e) => e.metadata['result'])).toEqual(['started']);
    expect(h.eventsOf('reaper:poisoned', id)).toEqual([]);
  });

  it('while a suspect runs alone nothing else runs on its node, on any queue; then the node resumes', async () => {
    const busy = [
      await insertWith(SoloA, 'busy-a1', 0),
      await insertWith(SoloA, 'busy-a2', 0),
      await insertWith(SoloB, 'busy-b1', 0),
      await insertWith(SoloB, 'busy-b2', 0),
    ];
    for (const s of h.engine.runtime.schedulers.values()) s.poke();
    for (const key of ['busy-a1', 'busy-a2', 'busy-b1', 'busy-b2']) await gates.reached(`${key}:0`);
    const suspect = await insertWith(SoloA, 'suspect', MAX_REAPS, true);
    h.engine.runtime.schedulers.get('solo-a')?.poke();
    await eventually(async () => h.engine.runtime.solo.suspectId === suspect);

    // Load keeps coming on both queues: the node claims none of it while the suspect waits.
    const later: string[] = [];
    for (const [fsm, key] of [
      [SoloA, 'later-a1'],
      [SoloA, 'later-a2'],
      [SoloB, 'later-b1'],
      [SoloB, 'later-b2'],
    ] as const) {
      gates.open(`${key}:0`);
      later.push(await insertWith(fsm, key, 0));
    }
    const polls = async (): Promise<void> => {
      const mark = h.events.length;
      const ticks = (queue: string) =>
        h.events
          .slice(mark)
          .filter((e) => e.event === 'scheduler:saturation' && e.metadata['queue'] === queue)
          .length;
      await eventually(async () => ticks('solo-a') >= 3 && ticks('solo-b') >= 3);
    };
    const statusOf = async (ids: readonly string[]) => {
      const { rows } = await db.pool.query<{ status: string }>(
        `SELECT status FROM gen_durable WHERE id = ANY ($1::bigint[]) ORDER BY id`,
        [ids],
      );
      return rows.map((r) => r.status);
    };
    await polls();
    expect(await statusOf(later)).toEqual(['runnable', 'runnable', 'runnable', 'runnable']);
    expect(starts.some((s) => s.id === suspect)).toBe(false);
    expect((await rowOf(db, suspect))['status']).toBe('executing');

    // The rows in flight finish; only then does the suspect start, alone.
    for (const key of ['busy-a1', 'busy-a2', 'busy-b1', 'busy-b2']) gates.open(`${key}:0`);
    await gates.reached('suspect:0');
    expect(starts.find((s) => s.id === suspect)?.others).toEqual([]);
    expect(await statusOf(busy)).toEqual(['done', 'done', 'done', 'done']);
    await polls();
    const { rows: executing } = await db.pool.query<{ id: string }>(
      `SELECT id FROM gen_durable WHERE status = 'executing'`,
    );
    expect(executing.map((r) => r.id)).toEqual([suspect]);
    expect(await statusOf(later)).toEqual(['runnable', 'runnable', 'runnable', 'runnable']);
    const a = h.engine.runtime.schedulers.get('solo-a')!;
    const b = h.engine.runtime.schedulers.get('solo-b')!;
    expect([a.inFlightCount, a.awaitingCommitCount, a.bufferedCount]).toEqual([1, 0, 0]);
    expect([b.inFlightCount, b.awaitingCommitCount, b.bufferedCount]).toEqual([0, 0, 0]);
    expect(live).toEqual(new Set([suspect]));

    // Its outcome commits; the node resumes and runs the rest.
    gates.open('suspect:0');
    await eventually(async () => (await rowOf(db, suspect))['status'] === 'done');
    expect(await rowOf(db, suspect)).toMatchObject({ reaps: 0, suspect: false });
    await eventually(async () => (await statusOf(later)).every((s) => s === 'done'));
    expect(h.engine.runtime.solo.active).toBe(false);
    const solo = h.eventsOf('scheduler:solo', suspect);
    expect(solo).toHaveLength(1);
    expect(solo[0]?.metadata).toMatchObject({ result: 'started', queue: 'solo-a' });
    expect(solo[0]?.measurements['waitedMs']).toBeGreaterThan(0);
  });
});
