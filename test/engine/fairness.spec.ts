import type { PoolClient } from 'pg';

import { done, DurableFsm, InvalidInputError, Step } from '../../lib';
import { CLAIM_FAIR, type ClaimInput } from '../../lib/sql/claim.sql';
import { renderStatement, type StatementRunner } from '../../lib/sql/statement';
import { bootEngine, claimRows, eventually, type Harness } from '../support/engine-harness';
import { explainRan } from '../support/explain-plan';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Fair claims by key (docs/many-tenants.md "Fair claims by key"): within a queue and priority
// the claim serves fairness keys in weighted round robin, work-conserving. Rows live on queues
// no scheduler serves; each claim is driven by hand through the production picker, and the
// order is read from what each claim returned.

@DurableFsm({ name: 'tenant-job', queue: 'fair-a', fairnessKey: (s) => String(s['tenant']) })
class TenantFsm {
  @Step() start() {
    return done({});
  }
}

// Declares its own queue fair: its first claim is fair too.
@DurableFsm({ name: 'weighted-job', queue: 'fair-w', fairnessKey: (s) => String(s['tenant']) })
class WeightedFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'plain-job', queue: 'fair-plain' })
class PlainFsm {
  @Step() start() {
    return done({});
  }
}

describe('fairness keys', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [TenantFsm, WeightedFsm, PlainFsm], { queues: {}, reaper: false });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  /** Inserts `n` rows of tenant `key` on `queue`, one statement. */
  async function backlog(
    queue: string,
    key: string,
    n: number,
    extra: Record<string, unknown> = {},
  ): Promise<void> {
    await h.engine.insertAll(
      TenantFsm,
      Array.from({ length: n }, () => ({ state: { tenant: key }, queue, ...extra })),
    );
  }

  /** Tenants of one claim of `batch` rows, in the claim's order. */
  async function claimKeys(queue: string, batch: number): Promise<string[]> {
    const rows = await claimRows(h.engine, queue, batch, 'w1');
    return rows.map((r) => String(r.fairnessKey));
  }

  function counts(keys: readonly string[]): Record<string, number> {
    const out: Record<string, number> = {};
    for (const k of keys) out[k] = (out[k] ?? 0) + 1;
    return out;
  }

  it('interleaves keys in round robin: A with 100 rows does not starve B and C with 5', async () => {
    await backlog('fair-a', 'A', 100);
    await backlog('fair-a', 'B', 5);
    await backlog('fair-a', 'C', 5);
    const first = await claimKeys('fair-a', 3);
    expect([...first].sort()).toEqual(['A', 'B', 'C']);
    const next: string[] = [];
    for (let i = 0; i < 4; i++) next.push(...(await claimKeys('fair-a', 3)));
    // Five claims of 3: every key served once per claim while B and C have work.
    expect(counts(next)).toEqual({ A: 4, B: 4, C: 4 });
    // B and C have 0 rows left after their fifth; A then gets whole batches (work-conserving).
    const tail = await claimKeys('fair-a', 10);
    expect(counts(tail)).toEqual({ A: 10 });
  });

  it('a key of weight 2 gets twice the share of a key of weight 1', async () => {
    await h.engine.insertAll(
      WeightedFsm,
      Array.from({ length: 40 }, () => ({ state: { tenant: 'heavy' }, fairnessWeight: 2 })),
    );
    await h.engine.insertAll(
      WeightedFsm,
      Array.from({ length: 40 }, () => ({ state: { tenant: 'light' } })),
    );
    const got: string[] = [];
    for (let i = 0; i < 4; i++) got.push(...(await claimKeys('fair-w', 6)));
    expect(counts(got)).toEqual({ heavy: 16, light: 8 });
  });

  it('a lone key gets whole batches', async () => {
    await backlog('fair-lone', 'solo', 30);
    // The queue is unknown to the picker: its first claim is plain and reveals the key.
    expect(await claimKeys('fair-lone', 10)).toHaveLength(10);
    const fair = await claimKeys('fair-lone', 10);
    expect(fair).toEqual(Array.from({ length: 10 }, () => 'solo'));
    const log = h.statements.filter((s) => s.startsWith('claim_'));
    expect(log).toContain('claim_fair');
  });

  it('keeps the K = 1 guard and skips held rows of keyed rows', async () => {
    await h.engine.insertAll(TenantFsm, [
      { state: { tenant: 'k' }, queue: 'fair-k1', concurrencyKey: 'one' },
      { state: { tenant: 'k' }, queue: 'fair-k1', concurrencyKey: 'one' },
      { state: { tenant: 'j' }, queue: 'fair-k1', held: true },
      { state: { tenant: 'j' }, queue: 'fair-k1' },
    ]);
    const first = await claimRows(h.engine, 'fair-k1', 10, 'w1');
    // One row of K = 1 key `one`, the unheld row of j; the held row stays runnable.
    expect(first.map((r) => r.fairnessKey).sort()).toEqual(['j', 'k']);
    expect(first.filter((r) => r.concurrencyKey === 'one')).toHaveLength(1);
    // While `one` executes, its second row is not claimed; the held row never is.
    expect(await claimRows(h.engine, 'fair-k1', 10, 'w1')).toEqual([]);
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable WHERE queue = 'fair-k1' AND status = 'runnable'`,
    );
    expect(rows[0]!.n).toBe(2);
  });

  it('serves rows without a key in a fair queue, and leaves plain queues on the plain claim', async () => {
    await backlog('fair-mixed', 'M', 3);
    await h.engine.insertAll(PlainFsm, [{ queue: 'fair-mixed' }, { queue: 'fair-mixed' }]);
    const first = await claimRows(h.engine, 'fair-mixed', 10, 'w1');
    expect(first).toHaveLength(5);
    await h.engine.insertAll(PlainFsm, [{}, {}, {}]);
    h.clear();
    expect(await claimRows(h.engine, 'fair-plain', 10, 'w1')).toHaveLength(3);
    expect(h.statements.filter((s) => s.startsWith('claim_'))).toEqual(['claim_runnable']);
  });

  it('refuses a bad fairnessKey or fairnessWeight with an InvalidInputError naming it', async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ fairnessKey: '' }, 'insert.fairnessKey'],
      [{ fairnessKey: 7 }, 'insert.fairnessKey'],
      [{ fairnessKey: 'x'.repeat(201) }, 'insert.fairnessKey'],
      [{ fairnessKey: 'a', fairnessWeight: 0 }, 'insert.fairnessWeight'],
      [{ fairnessKey: 'a', fairnessWeight: 1.5 }, 'insert.fairnessWeight'],
      [{ fairnessKey: 'a', fairnessWeight: 1001 }, 'insert.fairnessWeight'],
    ];
    for (const [options, path] of bad) {
      const err = await h.engine.insert(PlainFsm, options as never).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).message).toContain(path);
    }
    // The FSM's default key answering no string fails the insert the same way.
    const err = await h.engine.insert(TenantFsm, { state: { tenant: '' } }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).message).toContain('insert.fairnessKey');
    // Weight without a key.
    const noKey = await h.engine.insert(PlainFsm, { fairnessWeight: 2 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect((noKey as InvalidInputError).message).toContain('insert.fairnessWeight');
  });

  it('an insert-level key wins over the FSM default and every insert path stores it', async () => {
    const id = await h.engine.insert(TenantFsm, {
      state: { tenant: 'x' },
      queue: 'fair-paths',
      fairnessKey: 'override',
      fairnessWeight: 3,
    });
    const { rows } = await db.pool.query<{ fairness_key: string; fairness_weight: number }>(
      `SELECT fairness_key, fairness_weight FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(rows[0]).toEqual({ fairness_key: 'override', fairness_weight: 3 });
    const heads = await db.pool.query<{ fairness_key: string }>(
      `SELECT fairness_key FROM gen_durable_fair_keys WHERE queue = 'fair-paths'`,
    );
    expect(heads.rows.map((r) => r.fairness_key)).toEqual(['override']);
  });

  it('insertAsync (the group-commit batcher) stores the key and the weight too', async () => {
    await h.engine.insertAsync(TenantFsm, {
      state: { tenant: 'async' },
      queue: 'fair-async',
      fairnessWeight: 4,
    });
    const rows = await eventually(async () => {
      const { rows: found } = await db.pool.query<{
        fairness_key: string;
        fairness_weight: number;
      }>(`SELECT fairness_key, fairness_weight FROM gen_durable WHERE queue = 'fair-async'`);
      return found.length > 0 ? found : undefined;
    });
    expect(rows).toEqual([{ fairness_key: 'async', fairness_weight: 4 }]);
  });

  it('a key whose rows wait behind a busy K = 1 key costs a bounded probe, and others are served', async () => {
    await h.engine.insertAll(TenantFsm, [
      ...Array.from({ length: 60 }, () => ({
        state: { tenant: 'hot' },
        queue: 'fair-hot',
        concurrencyKey: 'hot-k1',
      })),
      ...Array.from({ length: 3 }, () => ({ state: { tenant: 'cold' }, queue: 'fair-hot' })),
    ]);
    // The first claim (plain, the queue is not declared) takes one hot row: `hot-k1` executes.
    const first = await claimRows(h.engine, 'fair-hot', 1, 'w1');
    expect(first.map((r) => r.fairnessKey)).toEqual(['hot']);
    const next = await claimRows(h.engine, 'fair-hot', 10, 'w1');
    expect(next.map((r) => r.fairnessKey)).toEqual(['cold', 'cold', 'cold']);
    // The plan: heads by gen_durable_fair_keys_walk, rows by gen_durable_fair_pick, no seq scan
    // of gen_durable; the hot key's probe reads at most the batch (10) of its 59 waiting rows.
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const input = { queue: 'fair-hot', limit: 10, worker: 'w', leaseMs: 1000, gates: [] };
      const { used } = await explainRan(client, CLAIM_FAIR, CLAIM_FAIR.params(input));
      expect(used).toContain('gen_durable_fair_pick');
      expect(used).not.toContain('seq:gen_durable');
      const { rows } = await client.query<{ 'QUERY PLAN': unknown }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) SELECT 1 FROM (SELECT x.id FROM gen_durable x
           WHERE x.queue = 'fair-hot' AND x.fairness_key = 'hot' AND x.status = 'runnable'
           ORDER BY x.priority, x.eligible_at LIMIT 10) q`,
      );
      expect(JSON.stringify(rows[0]!['QUERY PLAN'])).toContain('gen_durable_fair_pick');
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });

  it('a claim beside another in flight serves a new key without waiting; a head the other holds is left to it', async () => {
    // Two sessions run CLAIM_FAIR by hand: the first holds its transaction open (a refill in
    // flight), the second claims beside it (a poke). Before heads were read without a lock,
    // the second skipped every head the first had walked and came back empty.
    const q = 'fair-two';
    const on = (client: PoolClient | TestDatabase['pool']): StatementRunner => ({
      queryResult: (statement, values) =>
        client.query(renderStatement(statement, 'public'), values as unknown[]),
    });
    const input = (limit: number, worker: string): ClaimInput => ({
      queue: q,
      limit,
      worker,
      leaseMs: 60_000,
      gates: [],
    });
    const vtimes = async (): Promise<Record<string, number>> => {
      const { rows } = await db.pool.query<{ k: string; v: number }>(
        `SELECT fairness_key AS k, vtime AS v FROM gen_durable_fair_keys WHERE queue = $1`,
        [q],
      );
      return Object.fromEntries(rows.map((r) => [r.k, r.v]));
    };
    // B has a head and nothing due (its one row executes); A then gets 20 rows; C has a head
    // and nothing due too, walked by the second claim only.
    await backlog(q, 'B', 1);
    const b0 = await CLAIM_FAIR.run(on(db.pool), input(1, 'w0'));
    expect(b0.rows.map((r) => r.fairnessKey)).toEqual(['B']);
    await backlog(q, 'A', 20);
    const v0 = await vtimes();
    expect(v0['A']).toBe(v0['B']);

    const first = await db.pool.connect();
    const second = await db.pool.connect();
    try {
      await first.query('BEGIN');
      const one = await CLAIM_FAIR.run(on(first), input(5, 'w1'));
      expect(one.rows.map((r) => r.fairnessKey)).toEqual(['A', 'A', 'A', 'A', 'A']);
      // B's next row commits while the first claim's transaction is open (the trigger's FOR KEY
      // SHARE on B's head does not wait for the claim's FOR NO KEY UPDATE).
      await backlog(q, 'B', 1);
      // The second claim answers while the first still holds its heads: it locked its rows
      // (skipping the five the first holds) and left the heads A and B to the first.
      const two = await CLAIM_FAIR.run(on(second), input(10, 'w2'));
      // Ten candidates A1–A9 and B by finish time; A1–A5 are the first claim's: four of A and B's.
      expect(counts(two.rows.map((r) => String(r.fairnessKey)))).toEqual({ A: 4, B: 1 });
      const ids = new Set([...one.rows, ...two.rows].map((r) => r.id));
      expect(ids.size).toBe(10);
      await first.query('COMMIT');
      // The first claim's advance only: A served 5; B moved behind its round (its largest
      // finish, v0 + 5, plus 1). The second claim's rows of A and B went uncounted.
      expect(await vtimes()).toEqual({ A: v0['A']! + 5, B: v0['A']! + 5 + 1 });
      // A head updated and committed after a claim's snapshot is advanced in its new version:
      // the next claim, alone, counts from there.
      const three = await CLAIM_FAIR.run(on(db.pool), input(2, 'w3'));
      expect(three.rows.map((r) => r.fairnessKey)).toEqual(['A', 'A']);
      expect((await vtimes())['A']).toBe(v0['A']! + 5 + 2);
    } finally {
      await first.query('ROLLBACK').catch(() => undefined);
      first.release();
      second.release();
    }
  });

  it('a fair queue keeps sequence keys in order: a row whose older row of its key is live is not claimed', async () => {
    // Tenant S's three rows share a sequence key; tenant T's do not.
    await h.engine.insertAll(TenantFsm, [
      { state: { tenant: 'S' }, queue: 'fair-seq', sequenceKey: 'order-1' },
      { state: { tenant: 'S' }, queue: 'fair-seq', sequenceKey: 'order-1' },
      { state: { tenant: 'S' }, queue: 'fair-seq', sequenceKey: 'order-1' },
      { state: { tenant: 'T' }, queue: 'fair-seq' },
      { state: { tenant: 'T' }, queue: 'fair-seq' },
    ]);
    h.engine.runtime.picker.declareFair(['fair-seq']);
    const first = await claimRows(h.engine, 'fair-seq', 10, 'w1');
    // The sequence's head and both of T's rows; the head's followers wait for it.
    expect(counts(first.map((r) => String(r.fairnessKey)))).toEqual({ S: 1, T: 2 });
    expect(await claimRows(h.engine, 'fair-seq', 10, 'w1')).toEqual([]);
  });
});
