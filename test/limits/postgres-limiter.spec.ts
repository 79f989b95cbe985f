import { PostgresLimiter } from '../../lib/limiter/postgres.limiter';
import { ADMIT } from '../../lib/sql/limiter.sql';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  bucketsOf,
  entriesOf,
  executorOf,
  gate,
  insertExecuting,
  rate,
  recordedTelemetry,
  sum,
} from './support/limiter-fixtures';

// The PostgreSQL limiter on real PostgreSQL (docs/design.md §16.2, §25 item 5): admission order, shard
// ranges, credit to the drawn shard, cumulative weights, refill, cold mints and their races.
describe('PostgresLimiter', () => {
  let db: TestDatabase;
  let limiter: PostgresLimiter;
  const t = recordedTelemetry();
  let sqlx: ReturnType<typeof executorOf>;

  beforeAll(async () => {
    db = await createTestDatabase();
    sqlx = executorOf(db);
    limiter = new PostgresLimiter(sqlx.sql, t.telemetry);
    await limiter.syncConfig([
      gate('g5', 5),
      gate('gs', 5, 2),
      gate('g3', 3),
      gate('g2', 2),
      rate('r3', 3, 3600),
      rate('r2', 2, 3600),
      rate('fast', 10, 1, 2),
      rate('cold', 5, 3600),
      rate('rs', 4, 3600, 4, 2),
    ]);
  });
  afterAll(async () => {
    t.close();
    await db.drop();
  });
  beforeEach(() => {
    t.events.length = 0;
  });

  it('admits a cold gate key in claim order up to its limit, minted pre-debited, in one statement', async () => {
    const ids = await insertExecuting(db, 7, { gateKey: 'g5:a' });
    sqlx.statements.length = 0;
    const result = await limiter.admit(entriesOf(ids, { gateKey: 'g5:a' }), 'limits');
    expect(sqlx.statements).toEqual(['admit']);
    expect(result.admitted.map((a) => a.id)).toEqual(ids.slice(0, 5));
    expect(result.denied).toEqual(ids.slice(5));
    expect(result.admitted.every((a) => a.slot?.key === 'g5:a' && a.slot.shard === 0)).toBe(true);
    expect(result.throttled).toEqual([{ kind: 'conc', key: 'g5:a', wanted: 7, granted: 5 }]);
    expect(await bucketsOf(db, 'conc', 'g5:a')).toMatchObject([
      { shard: 0, capacity: 5, available: 0, last_refill: null },
    ]);
    // Nothing left: the next admit of this key denies everything.
    const again = await limiter.admit(entriesOf(ids.slice(5), { gateKey: 'g5:a' }), 'limits');
    expect(again.admitted).toEqual([]);
  });

  it('lays sharded gates out as ranges by availability and stamps the drawn shard', async () => {
    const ids = await insertExecuting(db, 6, { gateKey: 'gs:a' });
    const result = await limiter.admit(entriesOf(ids, { gateKey: 'gs:a' }), 'limits');
    // limit 5 over 2 shards: shard 0 holds 3, shard 1 holds 2; entries 1-3 → 0, 4-5 → 1.
    expect(result.admitted.map((a) => a.slot?.shard)).toEqual([0, 0, 0, 1, 1]);
    expect(result.denied).toEqual([ids[5]]);
    expect(await bucketsOf(db, 'conc', 'gs:a')).toMatchObject([
      { shard: 0, capacity: 3, available: 0 },
      { shard: 1, capacity: 2, available: 0 },
    ]);
    const { rows } = await db.pool.query(
      `SELECT id, concurrency_shard FROM gen_durable WHERE id = ANY ($1::bigint[]) ORDER BY id`,
      [ids],
    );
    expect(rows.map((r) => r.concurrency_shard)).toEqual([0, 0, 0, 1, 1, 0]);
  });

  it('credits to the drawn shard, capped at capacity', async () => {
    const ids = await insertExecuting(db, 5, { gateKey: 'gs:b' });
    const result = await limiter.admit(entriesOf(ids, { gateKey: 'gs:b' }), 'limits');
    const onShard1 = result.admitted.filter((a) => a.slot?.shard === 1).map((a) => a.slot!);
    expect(onShard1).toHaveLength(2);
    await limiter.credit([onShard1[0]!]);
    expect((await bucketsOf(db, 'conc', 'gs:b')).map((b) => b.available)).toEqual([0, 1]);
    // A double credit never lifts a shard above its capacity.
    await limiter.credit([onShard1[1]!, onShard1[1]!, onShard1[1]!]);
    expect((await bucketsOf(db, 'conc', 'gs:b')).map((b) => b.available)).toEqual([0, 2]);
    // The freed shard admits again, and only as many as it holds.
    const more = await insertExecuting(db, 3, { gateKey: 'gs:b' });
    const next = await limiter.admit(entriesOf(more, { gateKey: 'gs:b' }), 'limits');
    expect(next.admitted.map((a) => a.slot?.shard)).toEqual([1, 1]);
  });

  it('grants the longest prefix whose cumulative weight fits; a heavy head blocks its key', async () => {
    const ids = await insertExecuting(db, 4, { rateKey: 'r3:a' });
    const r1 = await limiter.admit(
      entriesOf(ids, { rateKey: 'r3:a', weight: [1, 1, 1, 1] }),
      'limits',
    );
    expect(r1.admitted.map((a) => a.id)).toEqual(ids.slice(0, 3));
    expect(r1.admitted.every((a) => a.slot === null)).toBe(true);
    expect(r1.throttled).toEqual([{ kind: 'rate', key: 'r3:a', wanted: 4, granted: 3 }]);
    const bucket = await bucketsOf(db, 'rate', 'r3:a');
    expect(bucket).toHaveLength(1);
    expect(bucket[0]!.available).toBeLessThan(0.01);

    // Cumulative, not per-row: [2, 2] against 3 → only the first; the second does not fit.
    const w = await insertExecuting(db, 3, { rateKey: 'r3:b' });
    const r2 = await limiter.admit(entriesOf(w, { rateKey: 'r3:b', weight: [2, 2, 1] }), 'limits');
    expect(r2.admitted.map((a) => a.id)).toEqual([w[0]]);
    // ...and the light row behind the denied one is not granted either (a prefix).
    expect(r2.denied).toEqual([w[1], w[2]]);

    // A head heavier than what is left blocks the key without debiting it.
    const h = await insertExecuting(db, 2, { rateKey: 'r3:c' });
    const r3 = await limiter.admit(entriesOf(h, { rateKey: 'r3:c', weight: [4, 1] }), 'limits');
    expect(r3.admitted).toEqual([]);
    expect(await bucketsOf(db, 'rate', 'r3:c')).toEqual([]);
  });

  it('refills at rate, capped at burst', async () => {
    const ids = await insertExecuting(db, 6, { rateKey: 'fast:a' });
    const first = await limiter.admit(entriesOf(ids.slice(0, 3), { rateKey: 'fast:a' }), 'limits');
    expect(first.admitted).toHaveLength(2); // burst 2
    // 10 tokens/s: pretend the last refill was 5 s ago; the bucket caps at its burst of 2.
    await db.pool.query(
      `UPDATE gen_durable_buckets SET last_refill = last_refill - interval '5 seconds' WHERE key = 'fast:a'`,
    );
    const second = await limiter.admit(entriesOf(ids.slice(3), { rateKey: 'fast:a' }), 'limits');
    expect(second.admitted).toHaveLength(2);
    // Half a token's worth of time later: 0.5 token (+ the few ms elapsed) does not fit a weight of 1.
    await db.pool.query(
      `UPDATE gen_durable_buckets SET available = 0, last_refill = now() - interval '50 milliseconds' WHERE key = 'fast:a'`,
    );
    const third = await limiter.admit(entriesOf(ids.slice(5), { rateKey: 'fast:a' }), 'limits');
    expect(third.admitted).toHaveLength(0);
  });

  it('a gated and rated row debits the gate only when the rate passes too', async () => {
    const ids = await insertExecuting(db, 4, { gateKey: 'g5:both', rateKey: 'r2:both' });
    const result = await limiter.admit(
      entriesOf(ids, { gateKey: 'g5:both', rateKey: 'r2:both' }),
      'limits',
    );
    expect(result.admitted.map((a) => a.id)).toEqual(ids.slice(0, 2));
    expect(result.throttled).toEqual([{ kind: 'rate', key: 'r2:both', wanted: 4, granted: 2 }]);
    expect(await bucketsOf(db, 'conc', 'g5:both')).toMatchObject([{ capacity: 5, available: 3 }]);
    // The gate denying first keeps the bucket untouched for those rows.
    const g = await insertExecuting(db, 3, { gateKey: 'g2:x', rateKey: 'r3:x' });
    const r = await limiter.admit(entriesOf(g, { gateKey: 'g2:x', rateKey: 'r3:x' }), 'limits');
    expect(r.admitted).toHaveLength(2);
    expect(r.throttled).toEqual([{ kind: 'conc', key: 'g2:x', wanted: 3, granted: 2 }]);
    expect((await bucketsOf(db, 'rate', 'r3:x'))[0]!.available).toBeCloseTo(1, 2);
  });

  it('never admits unknown names', async () => {
    const ids = await insertExecuting(db, 2, { gateKey: 'nogate:a' });
    expect((await limiter.admit(entriesOf(ids, { gateKey: 'nogate:a' }), 'limits')).denied).toEqual(
      ids,
    );
    const r = await insertExecuting(db, 2, { rateKey: 'norate:a' });
    const res = await limiter.admit(entriesOf(r, { rateKey: 'norate:a' }), 'limits');
    expect(res.denied).toEqual(r);
    expect(await bucketsOf(db, 'rate', 'norate:a')).toEqual([]);
  });

  it('splits rate shards and debits them proportionally', async () => {
    const ids = await insertExecuting(db, 5, { rateKey: 'rs:a' });
    const r = await limiter.admit(entriesOf(ids, { rateKey: 'rs:a' }), 'limits');
    expect(r.admitted).toHaveLength(4);
    const rows = await bucketsOf(db, 'rate', 'rs:a');
    expect(rows.map((b) => b.capacity)).toEqual([2, 2]);
    expect(sum(rows.map((b) => b.available))).toBeLessThan(0.01);
  });

  it('concurrent admits take disjoint shards: a shard locked elsewhere is skipped, never waited on', async () => {
    const first = await insertExecuting(db, 1, { gateKey: 'gs:lock' });
    await limiter.admit(entriesOf(first, { gateKey: 'gs:lock' }), 'limits'); // mints shards 0 (3) and 1 (2)
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      // Another admit holds shard 0 for the length of its statement (here: a transaction).
      await client.query(
        `SELECT 1 FROM gen_durable_buckets WHERE kind = 'conc' AND key = 'gs:lock' AND shard = 0 FOR UPDATE`,
      );
      const ids = await insertExecuting(db, 3, { gateKey: 'gs:lock' });
      const result = await limiter.admit(entriesOf(ids, { gateKey: 'gs:lock' }), 'limits');
      expect(result.admitted.map((a) => a.slot?.shard)).toEqual([1, 1]);
      expect(result.denied).toEqual([ids[2]]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    // With every shard locked elsewhere the key is not cold: nothing is admitted or minted.
    const other = await db.pool.connect();
    try {
      await other.query('BEGIN');
      await other.query(
        `SELECT 1 FROM gen_durable_buckets WHERE kind = 'conc' AND key = 'gs:lock' FOR UPDATE`,
      );
      const ids = await insertExecuting(db, 1, { gateKey: 'gs:lock' });
      expect(
        (await limiter.admit(entriesOf(ids, { gateKey: 'gs:lock' }), 'limits')).denied,
      ).toEqual(ids);
      await other.query('COMMIT');
    } finally {
      other.release();
    }
    expect((await bucketsOf(db, 'conc', 'gs:lock')).map((b) => b.available)).toEqual([2, 0]);
  });

  it('a racing cold gate mint merges through ON CONFLICT and an overdraft trips the CHECK, retried (concurrency:contended)', async () => {
    const a = await insertExecuting(db, 2, { gateKey: 'g3:race' });
    const b = await insertExecuting(db, 2, { gateKey: 'g3:race' });
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      // Transaction A mints the cold key holding 2 of 3 and does not commit yet.
      const first = await ADMIT.run(
        sqlx.sql,
        { entries: entriesOf(a, { gateKey: 'g3:race' }) },
        client,
      );
      expect(first.map((r) => r.admitted)).toEqual([true, true]);
      // B saw the key cold too: its mint waits on A's uncommitted row...
      const racing = limiter.admit(entriesOf(b, { gateKey: 'g3:race' }), 'limits');
      await new Promise((r) => setTimeout(r, 200));
      await client.query('COMMIT');
      // ...then merges 2 into a shard holding 1: CHECK violation, retried against the truth.
      const result = await racing;
      expect(result.admitted.map((x) => x.id)).toEqual([b[0]]);
    } finally {
      client.release();
    }
    expect(t.of('concurrency:contended').length).toBeGreaterThanOrEqual(1);
    expect(await bucketsOf(db, 'conc', 'g3:race')).toMatchObject([{ capacity: 3, available: 0 }]);
  });

  it('a racing cold rate mint trips the PK and is retried (rate_limit:contended)', async () => {
    const a = await insertExecuting(db, 2, { rateKey: 'cold:race' });
    const b = await insertExecuting(db, 5, { rateKey: 'cold:race' });
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      await ADMIT.run(sqlx.sql, { entries: entriesOf(a, { rateKey: 'cold:race' }) }, client);
      const racing = limiter.admit(entriesOf(b, { rateKey: 'cold:race' }), 'limits');
      await new Promise((r) => setTimeout(r, 200));
      await client.query('COMMIT');
      const result = await racing;
      expect(result.admitted).toHaveLength(3); // burst 5, 2 taken by A
    } finally {
      client.release();
    }
    expect(t.of('rate_limit:contended').length).toBeGreaterThanOrEqual(1);
  });

  it('racing cold mints over many keys grant exactly burst per key', async () => {
    const keys = ['cold:k1', 'cold:k2', 'cold:k3'];
    const pickers = 8;
    const perPick = 3;
    const batches = await Promise.all(
      Array.from({ length: pickers }, async () => {
        const ids: string[] = [];
        const entries = [];
        for (const key of keys) {
          const rows = await insertExecuting(db, perPick, { rateKey: key });
          ids.push(...rows);
          entries.push(...entriesOf(rows, { rateKey: key }));
        }
        return entries;
      }),
    );
    // Eight pickers race the same three cold keys at once; some of them lose a mint race.
    const results = await Promise.all(
      batches.map(async (entries) => {
        try {
          return await limiter.admit(entries, 'limits');
        } catch (err) {
          // Three lost races in a row: the pick fails and its rows stay unadmitted.
          if ((err as { constraint?: string }).constraint === 'gen_durable_buckets_pkey') {
            return { admitted: [], denied: [], throttled: [] };
          }
          throw err;
        }
      }),
    );
    const granted = new Map<string, number>();
    const keyOf = new Map(batches.flat().map((e) => [e.id, e.rateKey!]));
    for (const r of results) {
      for (const a of r.admitted) {
        granted.set(keyOf.get(a.id)!, (granted.get(keyOf.get(a.id)!) ?? 0) + 1);
      }
    }
    // burst 5 at 5/hour: the few ms of the test refill nothing that fits a weight of 1.
    expect(Object.fromEntries(granted)).toEqual({ 'cold:k1': 5, 'cold:k2': 5, 'cold:k3': 5 });
  });
});
