import {
  ConfigurationError,
  done,
  DuplicateError,
  DurableFsm,
  InvalidInputError,
  NoTargetError,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { insertRowInStatus } from '../support/rows';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The archive (docs/archive.md): a GC sweep moves done rows, with their history
// and stream chunks, out of the hot table into time partitions; every read API still finds
// them; keys, dedup windows and family links keep them hot while they matter; retention drops
// whole partitions.

@DurableFsm({ name: 'archived-writer', queue: 'archive-q', history: 'full' })
class WriterFsm {
  @Step() async start(ctx: StepContext<{ n: number }>) {
    const out = ctx.stream('answer');
    for (let i = 0; i < ctx.state.n; i++) await out.write({ i });
    return done({ wrote: ctx.state.n });
  }
}

/** Never run here (no worker serves its queue): inserted to be cancelled or written by hand. */
@DurableFsm({ name: 'archived-idle', queue: 'archive-idle' })
class IdleFsm {
  @Step() start() {
    return done({});
  }
}

const DAY = 86_400_000;
const HOUR = 3_600_000;

describe('the archive (docs/archive.md)', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [WriterFsm, IdleFsm], {
      queues: { 'archive-q': 2 },
      gc: { interval: HOUR, batch: 3, archiveAfter: 0 },
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  const sweep = () => h.engine.runtime.gc!.sweep();

  /** Where the row of `id` is: 'hot', 'archive' or 'gone'. */
  async function whereIs(id: string): Promise<'hot' | 'archive' | 'gone'> {
    const { rows } = await db.pool.query<{ hot: boolean; archived: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM gen_durable WHERE id = $1) AS hot,
              EXISTS (SELECT 1 FROM gen_durable_archive WHERE id = $1) AS archived`,
      [id],
    );
    const r = rows[0]!;
    if (r.hot && r.archived) throw new Error(`row ${id} is in both tables`);
    return r.hot ? 'hot' : r.archived ? 'archive' : 'gone';
  }

  /** Inserts a row straight into a status, `ageMs` old by updated_at. */
  const row = (status: string, ageMs: number, parentId: string | null = null) =>
    insertRowInStatus(db.pool, {
      status,
      ageMs,
      parentId,
      fsm: 'archived-idle',
      queue: 'archive-idle',
    });

  it("each archive table has its hot table's columns in order, then expires_at (ARCHIVE_MOVE copies by position)", async () => {
    const columns = async (table: string) =>
      (
        await db.pool.query<{ c: string }>(
          `SELECT attname || ' ' || format_type(atttypid, atttypmod) AS c FROM pg_attribute
            WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
          [table],
        )
      ).rows.map((r) => r.c);
    for (const hot of ['gen_durable', 'gen_durable_history', 'gen_durable_streams']) {
      const archive = await columns(hot.replace(/^gen_durable(_\w+)?$/, 'gen_durable$1_archive'));
      expect(archive).toEqual([...(await columns(hot)), 'expires_at timestamp with time zone']);
    }
  });

  it('moves an ended instance with its history and stream; get, key, await, history, list, count, streams and explain still find it', async () => {
    const id = await h.engine.insert(WriterFsm, {
      state: { n: 3 },
      correlationKey: 'archive:1',
    });
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
    const cancelled = await h.engine.insert(IdleFsm, {});
    await h.engine.cancel(cancelled, { reason: 'not needed' });
    const before = await h.engine.get(id);
    const historyBefore = await h.engine.history(id);
    expect(historyBefore.length).toBeGreaterThan(0);

    h.clear();
    await sweep();
    expect(await whereIs(id)).toBe('archive');
    // A cancelled row stays (retry acts on it in the hot table).
    expect(await whereIs(cancelled)).toBe('hot');
    expect(h.eventsOf('gc:archived')).toEqual([
      expect.objectContaining({
        measurements: expect.objectContaining({ instances: 1, chunks: 3 }),
      }),
    ]);
    // Nothing of it is left in the hot tables (the cascade took the heads and the inbox).
    const { rows: left } = await db.pool.query(
      `SELECT (SELECT count(*) FROM gen_durable_history WHERE instance_id = $1)::int AS history,
              (SELECT count(*) FROM gen_durable_streams WHERE instance_id = $1)::int AS chunks,
              (SELECT count(*) FROM gen_durable_stream_heads WHERE instance_id = $1)::int AS heads,
              (SELECT count(*) FROM gen_durable_history_archive WHERE instance_id = $1)::int AS archived`,
      [id],
    );
    expect(left).toEqual([{ history: 0, chunks: 0, heads: 0, archived: historyBefore.length }]);
    // Its expiry: its end + the done retention (the module's default, 1 day).
    const { rows: expiry } = await db.pool.query(
      `SELECT expires_at = updated_at + interval '1 day' AS exact FROM gen_durable_archive WHERE id = $1`,
      [id],
    );
    expect(expiry).toEqual([{ exact: true }]);

    expect(await h.engine.get(id)).toEqual(before);
    expect(await h.engine.get({ correlationKey: 'archive:1' })).toEqual(before);
    expect((await h.engine.get(cancelled))?.status).toBe('cancelled');
    expect(await h.engine.await(id, { until: 'terminal', timeout: 1000 })).toMatchObject({
      kind: 'done',
      result: { wrote: 3 },
    });
    expect(await h.engine.await(cancelled, { timeout: 1000 })).toMatchObject({
      kind: 'cancelled',
    });
    expect(await h.engine.history(id)).toEqual(historyBefore);
    expect(await h.engine.history({ correlationKey: 'archive:1' })).toEqual(historyBefore);
    expect(await h.engine.history(id, { limit: 1 })).toEqual(historyBefore.slice(0, 1));

    const listed = await h.engine.list({ fsm: 'archived-writer' });
    expect(listed.items.map((i) => i.id)).toEqual([id]);
    const all = await h.engine.list({});
    expect(all.items.map((i) => i.id)).toEqual(expect.arrayContaining([id, cancelled]));
    expect((await h.engine.list({ status: 'cancelled' })).items.map((i) => i.id)).toEqual([
      cancelled,
    ]);
    expect((await h.engine.count({ fsm: 'archived-writer' })).count).toBe(1);

    const chunks: unknown[] = [];
    for await (const c of h.engine.readStream(id, 'answer')) chunks.push(c);
    expect(chunks).toEqual([
      { offset: 0, chunk: { i: 0 } },
      { offset: 1, chunk: { i: 1 } },
      { offset: 2, chunk: { i: 2 } },
    ]);
    expect(await h.engine.streamInfo(id, 'answer')).toMatchObject({ length: 3, ended: true });
    expect(await h.engine.streamInfo(id, 'never')).toMatchObject({ length: 0, ended: true });
    expect((await h.engine.explain(id)).status).toBe('done');
    expect(await h.engine.inbox(id)).toEqual([]);
    // Control actions answer an archived instance as they answer an ended hot one.
    expect(await h.engine.cancel(id)).toEqual({
      cancelled: [],
      requested: [],
      alreadyTerminal: [id],
    });
    await expect(h.engine.hold(id)).rejects.toThrow(InvalidInputError);
    await expect(h.engine.hold(id)).rejects.toThrow(/is done: only a live instance/);
    expect(await h.engine.release(id)).toEqual({ id, changed: false });
    await expect(h.engine.signal(id, 'late', {})).rejects.toThrow(NoTargetError);
    // fork from the archived instance's recorded state (history 'full').
    const recorded = historyBefore.find((e) => e.state !== null)!;
    const forked = await h.engine.fork(id, { fromHistory: recorded.id });
    expect(await h.engine.await(forked, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
      result: { wrote: 3 },
    });
  });

  it('leaves failed rows, key holders, open dedup windows and family links in the hot table', async () => {
    // A failed row stays (retry acts on it).
    const failed = await row('failed', 1000);
    // A key whose scope keeps done holders: the unique index must keep enforcing it.
    const holder = await h.engine.insert(WriterFsm, {
      state: { n: 0 },
      correlationKey: 'archive:once',
      correlationScope: ['runnable', 'executing', 'awaiting_signal', 'awaiting_children', 'done'],
    });
    // A dedup window still open after the end.
    const windowed = await h.engine.insert(WriterFsm, {
      state: { n: 0 },
      correlationKey: 'archive:window',
      dedupWindowMs: 10 * DAY,
    });
    // A live scope key: freed at the end, so its row may go.
    const freed = await h.engine.insert(WriterFsm, {
      state: { n: 0 },
      correlationKey: 'archive:free',
    });
    for (const id of [holder, windowed, freed]) {
      await h.engine.await(id, { until: 'terminal', timeout: 10_000 });
    }
    // A live parent's ended child stays; so does an ended parent with a child still hot.
    const liveParent = await row('awaiting_children', 1000);
    const keptChild = await row('done', 1000, liveParent);
    // A failed parent may be retried back into its join: its ended child stays too.
    const failedParent = await row('failed', 1000);
    const childOfFailed = await row('done', 1000, failedParent);

    await sweep();
    expect(await whereIs(failed)).toBe('hot');
    expect(await whereIs(holder)).toBe('hot');
    expect(await whereIs(windowed)).toBe('hot');
    expect(await whereIs(freed)).toBe('archive');
    expect(await whereIs(keptChild)).toBe('hot');
    expect(await whereIs(childOfFailed)).toBe('hot');
    await expect(h.engine.insert(WriterFsm, { correlationKey: 'archive:once' })).rejects.toThrow(
      DuplicateError,
    );
    await expect(h.engine.insert(WriterFsm, { correlationKey: 'archive:window' })).rejects.toThrow(
      DuplicateError,
    );
    const again = await h.engine.insert(WriterFsm, {
      state: { n: 0 },
      correlationKey: 'archive:free',
    });
    expect(again).not.toBe(freed);

    // The window closes: the row goes, and the key is free again.
    await db.pool.query(`UPDATE gen_durable SET dedup_until = now() WHERE id = $1`, [windowed]);
    // The parent ends: the child goes first, the parent in a later batch (not while a child of
    // it is hot: the FK would null the child's parent_id).
    await db.pool.query(
      `UPDATE gen_durable SET status = 'done', children_pending = 0 WHERE id = $1`,
      [liveParent],
    );
    await h.engine.await(again, { until: 'terminal', timeout: 10_000 });
    await sweep();
    expect(await whereIs(windowed)).toBe('archive');
    expect(await whereIs(keptChild)).toBe('archive');
    expect(await whereIs(liveParent)).toBe('archive');
    expect((await h.engine.get(keptChild))?.parentId).toBe(liveParent);
    expect((await h.engine.list({ parentId: liveParent })).items.map((i) => i.id)).toEqual([
      keptChild,
    ]);
    expect((await h.engine.count({ parentId: liveParent })).count).toBe(1);
    expect(await h.engine.insert(WriterFsm, { correlationKey: 'archive:window' })).not.toBe(
      windowed,
    );
    expect(await whereIs(holder)).toBe('hot');
  });

  it('skips a row another transaction holds, without waiting for it, and moves it once released', async () => {
    const held = await row('done', 1000);
    const free = await row('done', 1000);
    const other = await db.pool.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM gen_durable WHERE id = $1 FOR UPDATE', [held]);
      // The sweep completes while the lock is held: SKIP LOCKED, nothing waits.
      await sweep();
      expect(await whereIs(held)).toBe('hot');
      expect(await whereIs(free)).toBe('archive');
      await other.query('COMMIT');
    } finally {
      other.release();
    }
    await sweep();
    expect(await whereIs(held)).toBe('archive');
  });

  it('purge deletes an archived instance with its archived history and chunks', async () => {
    const id = await h.engine.insert(WriterFsm, { state: { n: 2 } });
    await h.engine.await(id, { until: 'terminal', timeout: 10_000 });
    await sweep();
    expect(await whereIs(id)).toBe('archive');
    await h.engine.purge(id, { actor: 'ops' });
    expect(await whereIs(id)).toBe('gone');
    expect(await h.engine.get(id)).toBeNull();
    const { rows } = await db.pool.query(
      `SELECT (SELECT count(*) FROM gen_durable_history_archive WHERE instance_id = $1)::int AS history,
              (SELECT count(*) FROM gen_durable_streams_archive WHERE instance_id = $1)::int AS chunks`,
      [id],
    );
    expect(rows).toEqual([{ history: 0, chunks: 0 }]);
    expect(h.eventsOf('instance:purged', id)).toHaveLength(1);
  });

  it('a read by id of a hot instance never opens the archive; an archived one is read from it after a hot miss', async () => {
    const archived = await h.engine.insert(WriterFsm, { state: { n: 1 } });
    await h.engine.await(archived, { until: 'terminal', timeout: 10_000 });
    await sweep();
    expect(await whereIs(archived)).toBe('archive');
    const hot = await row('runnable', 0);

    // Another session holds the archive's parent table exclusively (a partition DROP waiting
    // on a long reader would): every statement that opens the archive waits behind it.
    const locker = await db.pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE gen_durable_archive IN ACCESS EXCLUSIVE MODE');
      // A hot row: get, await's read and probe, and a control action's target read answer
      // while the lock is held (one of them reading the view would wait for it).
      expect(await h.engine.get(hot)).toMatchObject({ id: hot, status: 'runnable' });
      expect(await h.engine.await(hot, { timeout: 300 })).toMatchObject({ kind: 'busy' });
      await h.engine.hold(hot, { reason: 'lock test' });
      await h.engine.release(hot);
      // An archived row is found by the archive read, which waits for the lock's release.
      const pending = h.engine.get(archived);
      const first = await Promise.race([
        pending.then(() => 'answered'),
        new Promise((resolve) => setTimeout(() => resolve('waiting'), 200)),
      ]);
      expect(first).toBe('waiting');
      await locker.query('COMMIT');
      expect(await pending).toMatchObject({ id: archived, status: 'done' });
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    }
    await h.engine.cancel(hot);
  });

  it('purgeAll matches and purges archived instances with the hot ones; a failed filter reads the hot table', async () => {
    const filter = { fsm: 'archived-writer', status: 'done' as const };
    // Earlier tests of this file leave done instances of the same FSM, hot and archived.
    const before = (await h.engine.purgeAll(filter, { dryRun: true })).matched;
    const archived = await h.engine.insert(WriterFsm, { state: { n: 1 } });
    await h.engine.await(archived, { until: 'terminal', timeout: 10_000 });
    await sweep();
    expect(await whereIs(archived)).toBe('archive');
    const hot = await h.engine.insert(WriterFsm, { state: { n: 1 } });
    await h.engine.await(hot, { until: 'terminal', timeout: 10_000 });
    expect(await whereIs(hot)).toBe('hot');

    expect(await h.engine.purgeAll(filter, { dryRun: true })).toEqual({
      matched: before + 2,
      purged: 0,
    });
    expect(await h.engine.purgeAll({ fsm: 'archived-writer', status: 'failed' })).toEqual({
      matched: 0,
      purged: 0,
    });
    expect(await h.engine.purgeAll(filter, { actor: 'ops' })).toEqual({
      matched: before + 2,
      purged: before + 2,
    });
    expect(await whereIs(archived)).toBe('gone');
    expect(await whereIs(hot)).toBe('gone');
    expect(h.eventsOf('instance:purged', archived)).toEqual([
      expect.objectContaining({
        metadata: expect.objectContaining({ actor: 'ops', status: 'done' }),
      }),
    ]);
  });

  it('creates partitions ahead and drops a partition whole once its range has passed', async () => {
    await sweep();
    // One day of done/cancelled retention, hourly: the hour now is in, plus 25 more at least.
    const { rows: ranges } = await db.pool.query<{ n: number; covers: boolean }>(
      `SELECT count(*)::int AS n,
              min(from_at) <= now() AND max(to_at) >= now() + interval '25 hours' AS covers
         FROM gen_durable_archive_partitions`,
    );
    expect(ranges[0]!.covers).toBe(true);
    expect(ranges[0]!.n).toBeGreaterThanOrEqual(26);
    // A partition from yesterday (as an earlier sweep made it), holding an expired row.
    await db.pool.query(`
      CREATE TABLE gen_durable_archive_old PARTITION OF gen_durable_archive
        FOR VALUES FROM (now() - interval '2 days') TO (now() - interval '1 day');
      CREATE TABLE gen_durable_history_archive_old PARTITION OF gen_durable_history_archive
        FOR VALUES FROM (now() - interval '2 days') TO (now() - interval '1 day');
      CREATE TABLE gen_durable_streams_archive_old PARTITION OF gen_durable_streams_archive
        FOR VALUES FROM (now() - interval '2 days') TO (now() - interval '1 day');
      INSERT INTO gen_durable_archive_partitions (suffix, from_at, to_at)
        VALUES ('old', now() - interval '2 days', now() - interval '1 day')`);
    const expired = await row('done', 3 * DAY);
    await db.pool.query(
      `WITH m AS (DELETE FROM gen_durable WHERE id = $1 RETURNING *)
       INSERT INTO gen_durable_archive SELECT m.*, now() - interval '36 hours' FROM m`,
      [expired],
    );
    expect((await h.engine.get(expired))?.status).toBe('done');
    const archivedIds = async () =>
      (
        await db.pool.query<{ id: string }>(`SELECT id FROM gen_durable_archive ORDER BY id`)
      ).rows.map((r) => r.id);
    const kept = (await archivedIds()).filter((i) => i !== expired);

    h.clear();
    await sweep();
    expect(await h.engine.get(expired)).toBeNull();
    expect(h.eventsOf('gc:archived')).toEqual([
      expect.objectContaining({ measurements: expect.objectContaining({ dropped: 1 }) }),
    ]);
    const { rows: tables } = await db.pool.query(
      `SELECT relname FROM pg_class WHERE relname LIKE 'gen_durable%archive_old'`,
    );
    expect(tables).toEqual([]);
    // Only the expired partition's row went: every other archived row is still there.
    const after = await archivedIds();
    expect(after).toEqual(expect.arrayContaining(kept));
    expect(after).not.toContain(expired);
    expect(
      (await db.pool.query(`SELECT 1 FROM gen_durable_archive_partitions WHERE suffix = 'old'`))
        .rows,
    ).toEqual([]);
  });

  it("archive: 'off' keeps ended rows hot; a bad grain is refused naming the option", async () => {
    const off = await bootEngine(db, [WriterFsm, IdleFsm], {
      name: 'archive-off',
      queues: {},
      gc: { interval: HOUR, archive: 'off' },
    });
    try {
      const id = await row('done', 1000);
      await off.engine.runtime.gc!.sweep();
      expect(await whereIs(id)).toBe('hot');
      expect(off.eventsOf('gc:archived')).toEqual([]);
    } finally {
      await off.close();
    }
    // archiveAfter: a row that ended more recently stays hot.
    const later = await bootEngine(db, [WriterFsm, IdleFsm], {
      name: 'archive-later',
      queues: {},
      gc: { interval: HOUR, archiveAfter: HOUR },
    });
    try {
      const recent = await row('done', 1000);
      const older = await row('done', 2 * HOUR);
      await later.engine.runtime.gc!.sweep();
      expect(await whereIs(recent)).toBe('hot');
      expect(await whereIs(older)).toBe('archive');
    } finally {
      await later.close();
    }
    await expect(
      bootEngine(db, [WriterFsm], {
        name: 'archive-bad',
        queues: {},
        gc: { archive: 'week' as unknown as 'day' },
      }),
    ).rejects.toThrow(ConfigurationError);
    await expect(
      bootEngine(db, [WriterFsm], {
        name: 'archive-bad',
        queues: {},
        gc: { archive: 'week' as unknown as 'day' },
      }),
    ).rejects.toThrow(/gc\.archive/);
  });
});
