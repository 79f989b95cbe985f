import { done, DurableFsm, Step } from '../../lib';
import { Reaper } from '../../lib/runtime/reaper';
import type { ClaimedRow } from '../../lib/runtime/claimed-row';
import {
  CLEAR_STEP_STARTED,
  MARK_STEP_STARTED,
  RECLAIM_PREDECESSOR,
  RELEASE_CLAIMS,
} from '../../lib/sql/lease.sql';
import {
  bootEngine,
  claimRows,
  execute,
  type Harness,
  rowOf,
  sleep,
} from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/reliability.md S09 (docs/design.md §26.5): a step that kills its worker becomes a suspect after
// reaper.maxReaps counted reaps and ends as a poison pill when it kills the worker of its solo
// run too, and every other instance completes. Rows claimed in the same batch
// as the pill die with it; before finding F-R2 the reaper gave them back their place at the
// head of the queue, so the next worker claimed them together with the pill again, and they
// were failed as pills too. The claims and the "worker deaths" are explicit here: a batch that
// holds the pill is never executed, its leases run out and the reaper sweeps.

const MAX_REAPS = 5;
const SPREAD_MS = 400;
/** last_error of a pill failed after MAX_REAPS counted losses and its solo run. */
const POISONED = `poison pill: step start lost its worker ${MAX_REAPS + 1} times, the last while it ran alone (reaper.maxReaps)`;

@DurableFsm({ name: 'collateral', queue: 'pill-q' })
class CollateralFsm {
  @Step() start() {
    return done({ ok: true });
  }
}

describe('poison pill and its batch mates (S09, §26.5)', () => {
  let db: TestDatabase;
  let h: Harness;
  let reaper: Reaper;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [CollateralFsm], {
      queues: {},
      reaper: false,
      gc: false,
      poke: 'none',
    });
    const runtime = h.engine.runtime;
    reaper = new Reaper(
      runtime.sql,
      60_000,
      MAX_REAPS,
      runtime.telemetry,
      () => undefined,
      () => undefined,
      SPREAD_MS,
    );
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  /** What the scheduler does before the step of a row that already lost a worker (F-R11). */
  const stepStarts = async (row: ClaimedRow | undefined): Promise<void> => {
    if (row && row.reaps > 0) {
      await MARK_STEP_STARTED.run(h.engine.runtime.sql, { worker: row.worker, row });
    }
  };

  /** What the scheduler does when that step returns, its outcome going to the flusher (F-R11). */
  const stepReturns = async (row: ClaimedRow | undefined): Promise<void> => {
    if (row && row.reaps > 0) {
      await CLEAR_STEP_STARTED.run(h.engine.runtime.sql, { worker: row.worker, row });
    }
  };

  it('rows that die with a pill are spread apart on their second reap and complete; only the pill fails', async () => {
    const pill = await h.engine.insert(CollateralFsm, { state: { pill: true } });
    const innocents = [
      await h.engine.insert(CollateralFsm, { state: {} }),
      await h.engine.insert(CollateralFsm, { state: {} }),
      await h.engine.insert(CollateralFsm, { state: {} }),
    ];
    let deaths = 0;
    for (let round = 0; round < 400 && (await rowOf(db, pill))['status'] !== 'failed'; round++) {
      let batch = await claimRows(h.engine, 'pill-q', 4, `pill-worker-${round}`);
      const pillRow = batch.find((r) => r.id === pill);
      if (pillRow?.suspect) {
        // A suspect runs alone: the node gives its batch mates back first (lib/runtime/solo-run.ts).
        const mates = batch.filter((r) => r.id !== pill);
        await RELEASE_CLAIMS.run(h.engine.runtime.sql, { worker: pillRow.worker, rows: mates });
        batch = [pillRow];
      }
      if (pillRow) {
        // The pill runs (its batch mates wait in the buffer): the worker dies with everything
        // it holds.
        await stepStarts(pillRow);
        deaths++;
        await db.pool.query(
          `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = ANY ($1::bigint[])`,
          [batch.map((r) => r.id)],
        );
        await reaper.sweep();
      } else {
        for (const row of batch) expect(await execute(h.engine, row)).toBe('committed');
      }
      await sleep(25);
    }
    expect(await rowOf(db, pill)).toMatchObject({
      status: 'failed',
      reaps: MAX_REAPS + 1,
      last_error: POISONED,
    });
    // The cap, then the solo run.
    expect(deaths).toBe(MAX_REAPS + 1);
    for (const id of innocents) {
      expect(await rowOf(db, id)).toMatchObject({ status: 'done', reaps: 0 });
    }
  });

  it('a row lost while buffered counts once, however often (F-R11); one lost while its step runs counts each time', async () => {
    // Finding F-R11: under churn a row sat in the buffers of workers that died of other
    // causes (the nemesis, other rows' pills) and was failed as a pill it never was.
    const bystander = await h.engine.insert(CollateralFsm, { queue: 'bystander-q' });
    for (let loss = 1; loss <= 3 * MAX_REAPS; loss++) {
      const [row] = await claimRows(h.engine, 'bystander-q', 1, `busy-worker-${loss}`);
      expect(row?.id).toBe(bystander);
      // Its worker dies before the row's step starts (it was buffered behind other work).
      await db.pool.query(
        `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
        [bystander],
      );
      await reaper.sweep();
      expect(await rowOf(db, bystander)).toMatchObject({ status: 'runnable', reaps: 1 });
      await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [bystander]);
    }
    const [last] = await claimRows(h.engine, 'bystander-q', 1, 'healthy-worker');
    expect(await execute(h.engine, last!)).toBe('committed');
    expect(await rowOf(db, bystander)).toMatchObject({ status: 'done', reaps: 0 });

    // The same losses with the step started each time: at the cap it is a suspect, and the
    // loss during its solo run fails it.
    const pill = await h.engine.insert(CollateralFsm, { queue: 'bystander-q' });
    for (let loss = 1; loss <= MAX_REAPS + 1; loss++) {
      const [row] = await claimRows(h.engine, 'bystander-q', 1, `pill-host-${loss}`);
      expect(row).toMatchObject({ id: pill, suspect: loss > MAX_REAPS });
      await stepStarts(row);
      await db.pool.query(
        `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
        [pill],
      );
      await reaper.sweep();
      await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [pill]);
    }
    expect(await rowOf(db, pill)).toMatchObject({
      status: 'failed',
      reaps: MAX_REAPS + 1,
      last_error: POISONED,
    });
  });

  it('a loss after the step returned (its outcome awaiting the flush) does not count (F-R11)', async () => {
    // The scheduler clears the mark when the step returns (CLEAR_STEP_STARTED): a worker lost
    // while the outcome waits for a slow or retried commit, or killed by another row, is not
    // this row's doing.
    const id = await h.engine.insert(CollateralFsm, { queue: 'flush-q' });
    for (let loss = 1; loss <= 3 * MAX_REAPS; loss++) {
      const [row] = await claimRows(h.engine, 'flush-q', 1, `flushing-worker-${loss}`);
      expect(row).toMatchObject({ id, suspect: false });
      await stepStarts(row);
      await stepReturns(row);
      await db.pool.query(
        `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
        [id],
      );
      await reaper.sweep();
      // The first loss counts (a row that never lost a worker is not marked: the hot path).
      expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', reaps: 1, suspect: false });
      await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]);
    }
    const [last] = await claimRows(h.engine, 'flush-q', 1, 'healthy-worker');
    expect(await execute(h.engine, last!)).toBe('committed');
    expect(await rowOf(db, id)).toMatchObject({ status: 'done', reaps: 0, suspect: false });
  });

  it('a suspect lost before its solo step started stays a suspect, uncounted; its solo run completes it', async () => {
    // Its losses were ambiguous (the step ran each time, as when pauses or stalls take a
    // worker): at the cap it is not failed.
    const id = await h.engine.insert(CollateralFsm, { queue: 'suspect-q' });
    for (let loss = 1; loss <= MAX_REAPS; loss++) {
      const [row] = await claimRows(h.engine, 'suspect-q', 1, `stalled-worker-${loss}`);
      await stepStarts(row);
      await db.pool.query(
        `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
        [id],
      );
      await reaper.sweep();
      await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]);
    }
    expect(await rowOf(db, id)).toMatchObject({
      status: 'runnable',
      reaps: MAX_REAPS,
      suspect: true,
      last_error: null,
    });
    // Lost while its node waited to go quiet (not marked): no count, still a suspect.
    for (let loss = 1; loss <= 2; loss++) {
      const [row] = await claimRows(h.engine, 'suspect-q', 1, `quieting-worker-${loss}`);
      expect(row).toMatchObject({ id, suspect: true });
      await db.pool.query(
        `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
        [id],
      );
      await reaper.sweep();
      expect(await rowOf(db, id)).toMatchObject({
        status: 'runnable',
        reaps: MAX_REAPS,
        suspect: true,
      });
      await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]);
    }
    const [solo] = await claimRows(h.engine, 'suspect-q', 1, 'solo-worker');
    await stepStarts(solo);
    expect(await execute(h.engine, solo!)).toBe('committed');
    expect(await rowOf(db, id)).toMatchObject({ status: 'done', reaps: 0, suspect: false });
  });

  it('a first reap keeps the row in place; a second one moves it within reaps × the spread', async () => {
    const id = await h.engine.insert(CollateralFsm, { queue: 'spread-q' });
    const before = (await rowOf(db, id))['eligible_at'] as Date;
    for (const reap of [1, 2]) {
      await stepStarts((await claimRows(h.engine, 'spread-q', 1, `spread-worker-${reap}`))[0]);
      await db.pool.query(
        `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
        [id],
      );
      const swept = Date.now();
      await reaper.sweep();
      const row = await rowOf(db, id);
      expect(row).toMatchObject({ status: 'runnable', reaps: reap });
      const at = (row['eligible_at'] as Date).getTime();
      if (reap === 1) expect(at).toBe(before.getTime());
      else {
        expect(at).toBeGreaterThanOrEqual(swept - 1_000);
        expect(at).toBeLessThanOrEqual(swept + SPREAD_MS + 1_000);
        await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]);
      }
    }
  });

  it('a startup reclaim counts toward the cap; the row that reaches it is left to the reaper (a suspect), and so is the loss of its solo run, which fails it', async () => {
    // A pill whose node comes back within the reclaim margin every time (finding F-R3).
    const id = await h.engine.insert(CollateralFsm, { queue: 'reclaim-q' });
    const prefix = 'chaos:reclaim-q@pill-node-';
    for (let life = 1; life <= MAX_REAPS + 1; life++) {
      const [claimed] = await claimRows(h.engine, 'reclaim-q', 1, `${prefix}${life}`);
      expect(claimed).toMatchObject({ id, suspect: life > MAX_REAPS });
      await stepStarts(claimed);
      await db.pool.query(
        `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
        [id],
      );
      // The restarted node reclaims its dead predecessor's row (margin 0: expired ones).
      const reclaimed = await RECLAIM_PREDECESSOR.run(h.engine.runtime.sql, {
        queue: 'reclaim-q',
        workerPrefix: prefix,
        leaseBelowMs: 0,
        maxReaps: MAX_REAPS,
        spreadMs: SPREAD_MS,
        ownWorker: `${prefix}reclaiming`, // the new incarnation, holding nothing yet
      });
      if (life < MAX_REAPS) {
        expect(reclaimed).toEqual([id]);
        expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', reaps: life, attempt: 0 });
        await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]);
      } else if (life === MAX_REAPS) {
        expect(reclaimed).toEqual([]);
        expect(await rowOf(db, id)).toMatchObject({ status: 'executing', reaps: MAX_REAPS - 1 });
        await reaper.sweep();
        expect(await rowOf(db, id)).toMatchObject({
          status: 'runnable',
          reaps: MAX_REAPS,
          suspect: true,
        });
        await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]);
      } else {
        // Its solo run killed the node again: left to the reaper, which fails it.
        expect(reclaimed).toEqual([]);
        expect(await rowOf(db, id)).toMatchObject({ status: 'executing', reaps: MAX_REAPS });
      }
    }
    await reaper.sweep();
    expect(await rowOf(db, id)).toMatchObject({
      status: 'failed',
      reaps: MAX_REAPS + 1,
      last_error: POISONED,
    });
  });
});
