import '../chaos/support/enable-faults';

import {
  awaitSignal,
  done,
  DurableFsm,
  NoTargetError,
  scheduleChildren,
  Step,
  type StepContext,
} from '../../lib';
import type { ClaimedRow } from '../../lib/runtime/claimed-row';
import { armFault, onFaultHit, releaseFaults } from '../../lib/runtime/fault-points';
import { LOAD_ENRICHMENT } from '../../lib/sql/claim.sql';
import { DELIVER_SIGNAL } from '../../lib/sql/signal.sql';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { flushEntry, submitTogether } from '../support/flush-entries';
import {
  claimOn,
  isBlockedBy,
  openRawSession,
  type RawSession,
  waitUntilBlockedBy,
} from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Deterministic races on real connections (docs/design.md §8.4, §26.6). One side holds its transaction
// open at the exact point of interest; pg_blocking_pids / pg_isolation_test_session_is_blocked
// tell the test that the other side is waiting on it. Flushes are the engine's own flusher:
// to hold a flush transaction open after it wrote the row under test, the same flush carries
// a fan-out entry for a second row whose lock a test session holds (fan-outs run after the
// transitions and parks, docs/design.md §6.3), so the flush stops there with the first row written.

const gates = new Map<string, { opened: Promise<void>; open(): void; entered: boolean }>();
function gate(id: string): { opened: Promise<void>; open(): void; entered: boolean } {
  let g = gates.get(id);
  if (!g) {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    g = { opened, open, entered: false };
    gates.set(id, g);
  }
  return g;
}

/** Holds its first step on a test gate, then parks (or finishes, with state.finish). */
@DurableFsm({ name: 'racer' })
class RacerFsm {
  @Step() async start(ctx: StepContext<{ finish?: boolean }>) {
    const g = gate(ctx.id);
    g.entered = true;
    await g.opened;
    return ctx.state.finish ? done({ finished: true }) : awaitSignal('go', 'woken', ctx.state);
  }
  @Step() woken(ctx: StepContext) {
    return done({ payloads: ctx.awaited.map((s) => s.payload) });
  }
}

const WORKER = 'race-worker';

describe('races: signal vs park, signal vs terminal outcome (docs/design.md §8.4, §26.6)', () => {
  let db: TestDatabase;
  let t: Harness;
  let a: RawSession;
  let b: RawSession;
  beforeAll(async () => {
    db = await createTestDatabase();
    // No reaper or GC: their transactions (begin … commit) would interleave with the flush
    // statements these races read, and a reap would end a race the test holds on purpose.
    t = await bootEngine(db, [RacerFsm], { queues: { default: 4 }, reaper: false, gc: false });
    a = await openRawSession(db);
    b = await openRawSession(db);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await t.close();
    await db.drop();
  });

  const status = async (id: string) =>
    (
      await db.pool.query<{
        status: string;
        awaits: string[] | null;
        await_deadline: Date | null;
        due: boolean;
      }>(
        `SELECT status, awaits, await_deadline, eligible_at <= now() AS due FROM gen_durable WHERE id = $1`,
        [id],
      )
    ).rows[0];
  const inbox = async (id: string) =>
    (
      await db.pool.query<{ name: string; consumed: boolean }>(
        `SELECT name, consumed_at IS NOT NULL AS consumed FROM gen_durable_signals WHERE target_id = $1 ORDER BY id`,
        [id],
      )
    ).rows;

  /** A row of a queue no scheduler runs, claimed by WORKER through the production claim. */
  let queues = 0;
  /** Rows of a fresh queue no scheduler runs, claimed by WORKER through the production claim. */
  async function claimedManualRows(
    n: number,
    options: { correlationKey?: string } = {},
  ): Promise<ClaimedRow[]> {
    const queue = `race-${++queues}`;
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      ids.push(await t.engine.insert(RacerFsm, { queue, ...(i === 0 ? options : {}) }));
    }
    const claimed = await claimOn(a, queue, WORKER, { batch: n });
    expect(claimed.map((c) => c.id).sort()).toEqual([...ids].sort());
    return ids.map((id) => claimed.find((c) => c.id === id)!);
  }

  /**
   * Submits `entry` for `row` to the engine's flusher together with a fan-out of `blocker` (so
   * that it is a flush transaction, not the solo UPDATE), paused at `flush.beforeCommit`:
   * resolves once the transaction has written both rows and waits to commit, with the
   * flusher's backend pid (the one open transaction that wrote: the node's liveness lock
   * holds another, without an xid), the flush's replies and the function that lets it commit.
   */
  async function flushHeldOpen(
    row: ClaimedRow,
    entryOutcome: Parameters<typeof flushEntry>[2],
    blocker: ClaimedRow,
  ) {
    armFault({ point: 'flush.beforeCommit', action: { kind: 'pause' }, ids: [row.id], times: 1 });
    const paused = new Promise<void>((resolve) => {
      const off = onFaultHit((hit) => {
        if (hit.point !== 'flush.beforeCommit') return;
        off();
        resolve();
      });
    });
    const replies = submitTogether(t.engine, [
      flushEntry(t.engine, row, entryOutcome),
      flushEntry(t.engine, blocker, scheduleChildren('woken', [], {})),
    ]);
    await paused;
    const { rows } = await db.pool.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND state = 'idle in transaction'
          AND backend_xid IS NOT NULL AND pid <> ALL ($1::int[])`,
      [[a.pid, b.pid]],
    );
    expect(rows).toHaveLength(1);
    return {
      flusherPid: rows[0]!.pid,
      replies,
      commit: () => releaseFaults('flush.beforeCommit'),
    };
  }

  describe('signal vs park', () => {
    it('park first: delivery waits on the parked, uncommitted row and flips it once the park commits', async () => {
      const [row, blocker] = await claimedManualRows(2);
      t.clear();
      const { flusherPid, replies, commit } = await flushHeldOpen(
        row!,
        awaitSignal('go', 'woken', {}, { timeout: 60_000 }),
        blocker!,
      );
      // The park and its recheck ran in the open transaction; the recheck found nothing.
      expect(t.statements).toEqual(
        expect.arrayContaining(['flush_parks', 'recheck_parks', 'fanout_lock_parents']),
      );

      const delivery = t.engine.signal({ id: row!.id }, 'go', { n: 1 });
      const [waiter] = await waitUntilBlockedBy(db, flusherPid);
      expect(await isBlockedBy(db, waiter!, flusherPid)).toBe(true);
      // While it waits, nothing is stored and the committed row is still executing.
      expect(await inbox(row!.id)).toEqual([]);
      expect((await status(row!.id))!.status).toBe('executing');

      commit();
      expect(await replies).toEqual(['committed', 'committed']);
      await delivery;
      // The delivery's CASE was re-evaluated on the parked row after the lock: no lost wake-up.
      expect(await status(row!.id)).toEqual({
        status: 'runnable',
        awaits: ['go'],
        await_deadline: null,
        due: true,
      });
      expect(await inbox(row!.id)).toEqual([{ name: 'go', consumed: false }]);
      // And the next claim presents it.
      const again = await claimOn(a, row!.queue, WORKER, { batch: 2 });
      expect(again.find((c) => c.id === row!.id)?.inbox).toEqual([
        expect.objectContaining({ name: 'go' }),
      ]);
    });

    it('delivery first: the park waits on the delivery, then its recheck sees the signal', async () => {
      const [row] = await claimedManualRows(1);
      await b.exec('BEGIN');
      // Delivery locks the executing row and stores the signal; no flip (not parked yet).
      expect(await deliver(b, row!.id, '{"n":2}')).toEqual(
        expect.objectContaining({ id: row!.id, status: 'executing', inserted: true }),
      );
      t.clear();
      const replies = submitTogether(t.engine, [
        flushEntry(t.engine, row!, awaitSignal('go', 'woken', {})),
      ]);
      const [flusherPid] = await waitUntilBlockedBy(db, b.pid);
      expect(await isBlockedBy(db, flusherPid!, b.pid)).toBe(true);
      expect(t.statements).toContain('flush_parks');
      expect(t.statements).not.toContain('recheck_parks');
      await b.exec('COMMIT');
      expect(await replies).toEqual(['committed']);
      // The recheck is a new statement: its snapshot saw the committed, unpresented signal.
      expect(t.statements).toContain('recheck_parks');
      expect(await status(row!.id)).toEqual({
        status: 'runnable',
        awaits: ['go'],
        await_deadline: null,
        due: true,
      });
    });

    it('delivery first: the production flush parks behind the delivery and wakes at once', async () => {
      const id = await t.engine.insert(RacerFsm);
      await eventually(async () => gate(id).entered);
      await b.exec('BEGIN');
      await deliver(b, id, '{"n":3}');
      t.clear();
      gate(id).open();
      // The step returned awaitSignal; the flusher's park waits on the delivery's row lock.
      const [flusherPid] = await waitUntilBlockedBy(db, b.pid);
      expect(await isBlockedBy(db, flusherPid!, b.pid)).toBe(true);
      expect(t.statements).toContain('flush_parks');
      await b.exec('COMMIT');
      expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
        kind: 'done',
        result: { payloads: [{ n: 3 }] },
      });
      expect(t.statements).toContain('recheck_parks');
      expect(await inbox(id)).toEqual([{ name: 'go', consumed: true }]);
    });

    it('a presented signal is excluded by the recheck: re-parking on it does not wake', async () => {
      const [row] = await claimedManualRows(1);
      await deliver(b, row!.id, '{"n":4}');
      const [enrichment] = await LOAD_ENRICHMENT.run(a, { ids: [row!.id] });
      const presented = enrichment?.inbox[0];
      const replies = submitTogether(t.engine, [
        flushEntry(t.engine, row!, awaitSignal('go', 'woken', {}), [presented!.id]),
      ]);
      expect(await replies).toEqual(['committed']);
      expect((await status(row!.id))!.status).toBe('awaiting_signal');
      // A new arrival wakes it.
      await t.engine.signal({ id: row!.id }, 'go', { n: 5 });
      expect((await status(row!.id))!.status).toBe('runnable');
    });
  });

  describe('signal vs terminal outcome (§26.6)', () => {
    for (const by of ['id', 'correlationKey'] as const) {
      it(`terminal first: delivery by ${by} waits, then answers NoTargetError and stores nothing`, async () => {
        const key = `race:terminal:${by}`;
        const [row, blocker] = await claimedManualRows(2, { correlationKey: key });
        const { flusherPid, replies, commit } = await flushHeldOpen(
          row!,
          done({ ok: true }),
          blocker!,
        );

        const delivery = t.engine.signal(
          by === 'id' ? { id: row!.id } : { correlationKey: key },
          'go',
          { late: true },
          { dedupKey: `d-${by}` },
        );
        const settled = delivery.then(
          () => 'delivered',
          (err: unknown) => err,
        );
        const [waiter] = await waitUntilBlockedBy(db, flusherPid);
        expect(await isBlockedBy(db, waiter!, flusherPid)).toBe(true);
        commit();
        expect(await replies).toEqual(['committed', 'committed']);
        expect(await settled).toBeInstanceOf(NoTargetError);
        // No orphaned "delivered" signal on the finished instance.
        expect(await inbox(row!.id)).toEqual([]);
        expect((await status(row!.id))!.status).toBe('done');
      });
    }

    it('delivery first: the production terminal flush waits, then consumes the signal with the inbox', async () => {
      const id = await t.engine.insert(RacerFsm, { state: { finish: true } });
      await eventually(async () => gate(id).entered);
      await b.exec('BEGIN');
      await deliver(b, id, '{"n":6}');
      t.clear();
      gate(id).open();
      const [flusherPid] = await waitUntilBlockedBy(db, b.pid);
      expect(await isBlockedBy(db, flusherPid!, b.pid)).toBe(true);
      // The flush is the solo UPDATE (no rider known before it; a `done`: FLUSH_DONE), waiting
      // on the delivery's lock.
      const flushStatements = () =>
        t.statements.filter((s) =>
          ['flush_done', 'begin', 'consume_inboxes', 'commit'].includes(s),
        );
      // (The blocked pid may be a heartbeat of the row: wait for the flush statement itself.)
      await eventually(async () => flushStatements().length > 0);
      expect(flushStatements()).toEqual(['flush_done']);
      expect((await status(id))!.status).toBe('executing');
      await b.exec('COMMIT');
      expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
        kind: 'done',
        result: { finished: true },
      });
      // After the lock it found the row signaled and refused the terminal; the flusher then
      // committed it in a transaction with the inbox sweep.
      expect(flushStatements().slice(0, 5)).toEqual([
        'flush_done',
        'begin',
        'flush_done',
        'consume_inboxes',
        'commit',
      ]);
      // Delivered while live, then consumed by the terminal outcome: not orphaned.
      expect(await inbox(id)).toEqual([{ name: 'go', consumed: true }]);
    });
  });
});

/** Delivers signal `go` with `payloadText` to `id` through the production DELIVER_SIGNAL on `session`. */
function deliver(session: RawSession, id: string, payloadText: string) {
  return DELIVER_SIGNAL.run(session, {
    targetId: id,
    correlationKey: null,
    name: 'go',
    payloadText,
    dedupKey: null,
  });
}
