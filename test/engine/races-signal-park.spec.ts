import { awaitSignal, done, DurableFsm, NoTargetError, Step, type StepContext } from '../../lib';
import { LOAD_INBOXES } from '../../lib/sql/claim.sql';
import { FLUSH_PARKS, FLUSH_TRANSITIONS, CONSUME_INBOXES, RECHECK_PARKS } from '../../lib/sql/outcome.sql';
import { DELIVER_SIGNAL } from '../../lib/sql/signal.sql';
import { createTestApp, eventually, type TestApp } from '../support/create-test-app';
import { claimRows, isBlockedBy, openRawSession, type RawSession, waitUntilBlockedBy } from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Deterministic races on two (or three) real connections (SPEC §8.4, §26.6). One side holds
// its transaction open at the exact point of interest; pg_blocking_pids /
// pg_isolation_test_session_is_blocked tell the test that the other side is waiting on it.
// Flush and delivery statements are the production lib/sql constants.

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

describe('races: signal vs park, signal vs terminal outcome (SPEC §8.4, §26.6)', () => {
  let db: TestDatabase;
  let t: TestApp;
  let a: RawSession;
  let b: RawSession;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(db, [RacerFsm], { queues: { default: 4 } });
    a = await openRawSession(db);
    b = await openRawSession(db);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await t.close();
    await db.drop();
  });

  const row = async (id: string) =>
    (
      await db.pool.query<{ status: string; awaits: string[] | null; await_deadline: Date | null; due: boolean }>(
        `SELECT status, awaits, await_deadline, eligible_at <= now() AS due FROM gen_durable WHERE id = $1`,
        [id],
      )
    ).rows[0];
  const inbox = async (id: string) =>
    (
      await db.pool.query<{ name: string; consumed: boolean }>(
        `SELECT name, consumed_at IS NOT NULL AS consumed FROM signals WHERE target_id = $1 ORDER BY id`,
        [id],
      )
    ).rows;

  /** A row of a queue no scheduler runs, claimed by WORKER through the production claim. */
  let queues = 0;
  async function claimedManualRow(options: { correlationKey?: string } = {}): Promise<{ id: string; seq: string; queue: string }> {
    const queue = `race-${++queues}`;
    const id = await t.engine.insert(RacerFsm, { queue, ...options });
    const claimed = await claimRows(a, queue, WORKER, { batch: 1 });
    expect(claimed.map((c) => c.id)).toEqual([id]);
    return { id, seq: claimed[0]!.claim_seq, queue };
  }

  const parkParams = (id: string, seq: string, timeoutMs: number | null = 60_000) => [
    [WORKER], [id], [seq], ['woken'], ['{}'], ['["go"]'], [timeoutMs],
  ];
  const doneParams = (id: string, seq: string) => [
    [WORKER], [id], [seq], ['done'], [null], [null], ['{"ok":true}'], [null], [0], [null], [1], [false], [null],
  ];

  describe('signal vs park', () => {
    it('park first: delivery waits on the parked, uncommitted row and flips it once the park commits', async () => {
      const { id, seq, queue } = await claimedManualRow();
      await a.exec('BEGIN');
      expect(await a.run(FLUSH_PARKS, parkParams(id, seq))).toHaveLength(1);
      // The recheck in the same transaction finds nothing: the signal does not exist yet.
      expect(await a.run(RECHECK_PARKS, [[id], [], []])).toEqual([]);

      const delivery = t.engine.signal({ id }, 'go', { n: 1 });
      const [waiter] = await waitUntilBlockedBy(db, a.pid);
      expect(await isBlockedBy(db, waiter!, a.pid)).toBe(true);
      // While it waits, nothing is stored and the committed row is still executing.
      expect(await inbox(id)).toEqual([]);
      expect((await row(id))!.status).toBe('executing');

      await a.exec('COMMIT');
      await delivery;
      // The delivery's CASE was re-evaluated on the parked row after the lock: no lost wake-up.
      expect(await row(id)).toEqual({ status: 'runnable', awaits: ['go'], await_deadline: null, due: true });
      expect(await inbox(id)).toEqual([{ name: 'go', consumed: false }]);
      // And the next claim presents it.
      const [again] = await claimRows(a, queue, WORKER, { batch: 1 });
      expect(again!.id).toBe(id);
      expect(await a.run<{ name: string }>(LOAD_INBOXES, [[id]])).toEqual([expect.objectContaining({ name: 'go' })]);
    });

    it('delivery first: the park waits on the delivery, then its recheck sees the signal (manual flush)', async () => {
      const { id, seq } = await claimedManualRow();
      await b.exec('BEGIN');
      // Delivery locks the executing row and stores the signal; no flip (not parked yet).
      expect(await b.run(DELIVER_SIGNAL, [id, null, 'go', '{"n":2}', null])).toEqual([
        expect.objectContaining({ id, status: 'executing', inserted: true }),
      ]);

      await a.exec('BEGIN');
      const park = a.run(FLUSH_PARKS, parkParams(id, seq));
      await eventually(() => isBlockedBy(db, a.pid, b.pid), 10_000, 5);
      await b.exec('COMMIT');
      expect(await park).toHaveLength(1);
      // The recheck is a new statement: its snapshot sees the committed, unpresented signal.
      expect(await a.run<{ id: string }>(RECHECK_PARKS, [[id], [], []])).toEqual([expect.objectContaining({ id })]);
      await a.exec('COMMIT');
      expect(await row(id)).toEqual({ status: 'runnable', awaits: ['go'], await_deadline: null, due: true });
    });

    it('delivery first: the production flush parks behind the delivery and wakes at once', async () => {
      const id = await t.engine.insert(RacerFsm);
      await eventually(async () => gate(id).entered);
      await b.exec('BEGIN');
      await b.run(DELIVER_SIGNAL, [id, null, 'go', '{"n":3}', null]);
      t.resetStatements();
      gate(id).open();
      // The step returned awaitSignal; the flusher's park waits on the delivery's row lock.
      const [flusherPid] = await waitUntilBlockedBy(db, b.pid);
      expect(await isBlockedBy(db, flusherPid!, b.pid)).toBe(true);
      expect(t.statements).toContain('flush_parks');
      await b.exec('COMMIT');
      expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({ kind: 'done', result: { payloads: [{ n: 3 }] } });
      expect(t.statements).toContain('recheck_parks');
      expect(await inbox(id)).toEqual([{ name: 'go', consumed: true }]);
    });

    it('a presented signal is excluded by the recheck: re-parking on it does not wake', async () => {
      const { id, seq } = await claimedManualRow();
      await b.run(DELIVER_SIGNAL, [id, null, 'go', '{"n":4}', null]);
      const [presented] = await a.run<{ id: string }>(LOAD_INBOXES, [[id]]);
      await a.exec('BEGIN');
      await a.run(FLUSH_PARKS, parkParams(id, seq));
      expect(await a.run(RECHECK_PARKS, [[id], [id], [presented!.id]])).toEqual([]);
      await a.exec('COMMIT');
      expect((await row(id))!.status).toBe('awaiting_signal');
      // A new arrival wakes it.
      await t.engine.signal({ id }, 'go', { n: 5 });
      expect((await row(id))!.status).toBe('runnable');
    });
  });

  describe('signal vs terminal outcome (§26.6)', () => {
    for (const by of ['id', 'correlationKey'] as const) {
      it(`terminal first: delivery by ${by} waits, then answers NoTargetError and stores nothing`, async () => {
        const key = `race:terminal:${by}`;
        const { id, seq } = await claimedManualRow({ correlationKey: key });
        await a.exec('BEGIN');
        expect(await a.run(FLUSH_TRANSITIONS, doneParams(id, seq))).toEqual([expect.objectContaining({ id, status: 'done' })]);
        await a.run(CONSUME_INBOXES, [[id]]);

        const delivery = t.engine.signal(by === 'id' ? { id } : { correlationKey: key }, 'go', { late: true }, { dedupKey: `d-${by}` });
        const settled = delivery.then(
          () => 'delivered',
          (err: unknown) => err,
        );
        const [waiter] = await waitUntilBlockedBy(db, a.pid);
        expect(await isBlockedBy(db, waiter!, a.pid)).toBe(true);
        await a.exec('COMMIT');
        expect(await settled).toBeInstanceOf(NoTargetError);
        // No orphaned "delivered" signal on the finished instance.
        expect(await inbox(id)).toEqual([]);
        expect((await row(id))!.status).toBe('done');
      });
    }

    it('delivery first: the production terminal flush waits, then consumes the signal with the inbox', async () => {
      const id = await t.engine.insert(RacerFsm, { state: { finish: true } });
      await eventually(async () => gate(id).entered);
      await b.exec('BEGIN');
      await b.run(DELIVER_SIGNAL, [id, null, 'go', '{"n":6}', null]);
      gate(id).open();
      const [flusherPid] = await waitUntilBlockedBy(db, b.pid);
      expect(await isBlockedBy(db, flusherPid!, b.pid)).toBe(true);
      await b.exec('COMMIT');
      expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({ kind: 'done', result: { finished: true } });
      // Delivered while live, then consumed by the terminal outcome: not orphaned.
      expect(await inbox(id)).toEqual([{ name: 'go', consumed: true }]);
    });
  });
});
