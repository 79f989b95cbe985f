import {
  done,
  DuplicateError,
  DurableFsm,
  InvalidInputError,
  scheduleChildren,
  Step,
  type StepContext,
} from '../../lib';
import { GenDurableClient } from '../../lib/client';
import { bootEngine, eventually, type Harness, rowOf, sleep } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// `held` and `dedupWindowMs` on every insert path (docs/operations-control.md "Hold and
// release", docs/identity.md "Dedup windows"): `insert` (alone and group-committed),
// `insertAll` entries, `insertAsync` (buffered), inside the caller's transaction,
// `GenDurableClient.insert`, a step's children and `fork({ held })`. Only `onConflict` and its
// options stay `insert`-only.

@DurableFsm({ name: 'paths', queue: 'paths-q' })
class QuickFsm {
  @Step() start(ctx: StepContext<{ n?: number }>) {
    return done({ n: ctx.state.n ?? 0 });
  }
}

@DurableFsm({ name: 'paths-parent', queue: 'paths-q' })
class ParentFsm {
  @Step() start(ctx: StepContext) {
    return scheduleChildren(
      'joined',
      [{ fsm: QuickFsm, held: true, correlationKey: 'paths-child', dedupWindowMs: 600_000 }],
      ctx.state,
    );
  }
  @Step() joined() {
    return done({ joined: true });
  }
}

describe('held and dedupWindowMs on every insert path', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [QuickFsm, ParentFsm], {
      queues: { 'paths-q': 4 },
      insertBatcher: { maxDelayMs: 5 },
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  /** Held and unclaimed after several polls of a served queue, then released and run. */
  async function heldThenRuns(id: string): Promise<void> {
    await sleep(300);
    const row = await h.engine.get(id);
    expect(row).toMatchObject({ status: 'runnable', claimSeq: '0' });
    expect(row?.heldAt).toBeInstanceOf(Date);
    expect(await h.engine.release(id)).toEqual({ id, changed: true });
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
  }

  it('insert: alone and group-committed with concurrent callers', async () => {
    await heldThenRuns(await h.engine.insert(QuickFsm, { held: true }));
    // Concurrent awaited inserts share INSERT_INSTANCES statements (the durable batcher).
    h.clear();
    const ids = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        h.engine.insert(QuickFsm, {
          state: { n: i },
          held: true,
          correlationKey: `paths-gc-${i}`,
          dedupWindowMs: 600_000,
        }),
      ),
    );
    expect(h.statements).toContain('insert_instances');
    await sleep(300);
    for (const id of ids) {
      expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', claim_seq: '0' });
      expect((await rowOf(db, id))['held_at']).toBeInstanceOf(Date);
      expect((await rowOf(db, id))['dedup_until']).toBeInstanceOf(Date);
    }
    await h.engine.cancel(ids[0]!);
    // Ended, but its window still takes the key.
    await expect(h.engine.insert(QuickFsm, { correlationKey: 'paths-gc-0' })).rejects.toThrow(
      DuplicateError,
    );
    for (const id of ids.slice(1)) await h.engine.cancel(id);
  });

  it('insertAll entries: held rows are not claimed; windows take their keys', async () => {
    const ids = await h.engine.insertAll(QuickFsm, [
      { state: { n: 1 }, held: true },
      { state: { n: 2 }, correlationKey: 'paths-all-w', dedupWindowMs: 600_000 },
      { state: { n: 3 } },
    ]);
    expect(ids).toHaveLength(3);
    const rows = await Promise.all(ids.map((id) => rowOf(db, id)));
    const held = rows.find((r) => r['held_at'] !== null)!;
    const windowed = rows.find((r) => r['correlation_key'] === 'paths-all-w')!;
    expect(rows.filter((r) => r['held_at'] !== null)).toHaveLength(1);
    expect(windowed['dedup_until']).toBeInstanceOf(Date);
    await h.engine.await(String(windowed['id']), { until: 'terminal', timeout: 10_000 });
    // The windowed instance ended; its key stays taken for every path.
    expect(await h.engine.insertAll(QuickFsm, [{ correlationKey: 'paths-all-w' }])).toEqual([]);
    await expect(h.engine.insert(QuickFsm, { correlationKey: 'paths-all-w' })).rejects.toThrow(
      DuplicateError,
    );
    await heldThenRuns(String(held['id']));
  });

  it('insertAll: an entry whose key an earlier entry of the batch takes with a window is dropped', async () => {
    // An empty scope: no occupant guard, only the window keeps the key (the statement's
    // snapshot cannot see the batch's own rows, so the batch checks its earlier entries).
    const ids = await h.engine.insertAll(QuickFsm, [
      { correlationKey: 'paths-batch', correlationScope: [], dedupWindowMs: 600_000 },
      { correlationKey: 'paths-batch', correlationScope: [], dedupWindowMs: 600_000 },
      { correlationKey: 'paths-batch', correlationScope: [] },
    ]);
    expect(ids).toHaveLength(1);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM gen_durable WHERE correlation_key = 'paths-batch'`,
    );
    expect(rows[0]).toEqual({ n: 1 });
    // Without a window the empty scope is a plain label: every entry is inserted.
    expect(
      await h.engine.insertAll(QuickFsm, [
        { correlationKey: 'paths-label', correlationScope: [] },
        { correlationKey: 'paths-label', correlationScope: [] },
      ]),
    ).toHaveLength(2);
  });

  it('insertAsync (buffered): held and windowed rows as the others', async () => {
    await h.engine.insertAsync(QuickFsm, {
      state: { n: 7 },
      held: true,
      correlationKey: 'paths-async',
      dedupWindowMs: 600_000,
    });
    const row = await eventually(async () => {
      const { rows } = await db.pool.query<{ id: string; held_at: Date | null }>(
        `SELECT id, held_at, dedup_until FROM gen_durable WHERE correlation_key = 'paths-async'`,
      );
      return rows[0];
    });
    expect(row.held_at).toBeInstanceOf(Date);
    // Its window drops a second buffered insert of the key, even once the first has ended.
    await h.engine.cancel(row.id);
    await h.engine.insertAsync(QuickFsm, { correlationKey: 'paths-async' });
    await sleep(200);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM gen_durable WHERE correlation_key = 'paths-async'`,
    );
    expect(rows[0]).toEqual({ n: 1 });
  });

  it("inside the caller's transaction: insert and insertAll, held and windowed, commit or roll back together", async () => {
    const ds = await db.dataSource();
    let ids: string[] = [];
    await expect(
      ds.transaction(async (manager) => {
        ids = [
          await h.engine.insert(QuickFsm, {
            held: true,
            correlationKey: 'paths-tx-1',
            dedupWindowMs: 600_000,
            manager,
          }),
          ...(await h.engine.insertAll(
            QuickFsm,
            [{ held: true, correlationKey: 'paths-tx-2', dedupWindowMs: 600_000 }],
            { manager },
          )),
        ];
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await h.engine.get(ids[0]!)).toBeNull();
    expect(await h.engine.get(ids[1]!)).toBeNull();
    await ds.transaction(async (manager) => {
      ids = [
        await h.engine.insert(QuickFsm, {
          held: true,
          correlationKey: 'paths-tx-1',
          dedupWindowMs: 600_000,
          manager,
        }),
        ...(await h.engine.insertAll(
          QuickFsm,
          [{ held: true, correlationKey: 'paths-tx-2', dedupWindowMs: 600_000 }],
          { manager },
        )),
      ];
    });
    for (const id of ids) {
      expect((await rowOf(db, id))['dedup_until']).toBeInstanceOf(Date);
      await heldThenRuns(id);
    }
    await expect(h.engine.insert(QuickFsm, { correlationKey: 'paths-tx-2' })).rejects.toThrow(
      DuplicateError,
    );
  });

  it('GenDurableClient.insert: held and windowed', async () => {
    const client = new GenDurableClient(db.pool, {
      fsms: { paths: { initial: 'start', queue: 'paths-q' } },
    });
    try {
      const id = await client.insert('paths', {
        held: true,
        correlationKey: 'paths-client',
        dedupWindowMs: 600_000,
      });
      await heldThenRuns(id);
      await expect(client.insert('paths', { correlationKey: 'paths-client' })).rejects.toThrow(
        DuplicateError,
      );
      expect(
        await client.insert('paths', { correlationKey: 'paths-client', onConflict: 'skip' }),
      ).toBe(id);
    } finally {
      await client.close();
    }
  });

  it("a step's children: a held child keeps its parent waiting until it is released", async () => {
    const parent = await h.engine.insert(ParentFsm, {});
    const child = await eventually(
      async () => (await h.engine.get({ correlationKey: 'paths-child' }))?.id,
    );
    await eventually(async () => (await h.engine.get(parent))?.status === 'awaiting_children');
    await heldThenRuns(child);
    expect(await h.engine.await(parent, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
    // The child's window outlives it.
    await expect(h.engine.insert(QuickFsm, { correlationKey: 'paths-child' })).rejects.toThrow(
      DuplicateError,
    );
  });

  it('fork({ held: true }) inserts the fork held; a bad held is refused', async () => {
    const source = await h.engine.insert(QuickFsm, { state: { n: 9 } });
    await h.engine.await(source, { until: 'terminal', timeout: 10_000 });
    const fork = await h.engine.fork(source, { held: true });
    expect((await h.engine.get(fork))?.forkedFrom).toBe(source);
    await heldThenRuns(fork);
    await expect(h.engine.fork(source, { held: 'yes' as unknown as boolean })).rejects.toThrow(
      InvalidInputError,
    );
  });

  it('onConflict and its options stay insert-only; a bad held or window is refused on every path', async () => {
    await expect(
      h.engine.insertAll(QuickFsm, [{ correlationKey: 'x', onConflict: 'skip' }]),
    ).rejects.toThrow(InvalidInputError);
    await expect(h.engine.insertAll(QuickFsm, [{ held: 1 as unknown as boolean }])).rejects.toThrow(
      InvalidInputError,
    );
    await expect(h.engine.insertAsync(QuickFsm, { dedupWindowMs: 1000 })).rejects.toThrow(
      InvalidInputError,
    );
  });
});
