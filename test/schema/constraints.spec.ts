import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §25 "uncommittable": each constraint refuses the bad write at the database.
describe('schema constraints refuse bad writes', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });
  beforeEach(async () => {
    await db.pool.query(
      'TRUNCATE gen_durable, gen_durable_signals, gen_durable_buckets, gen_durable_bucket_configs, gen_durable_schedules RESTART IDENTITY CASCADE',
    );
  });

  const insert = (cols: string, vals: string) =>
    db.pool.query(
      `INSERT INTO gen_durable (fsm, step${cols ? `, ${cols}` : ''}) VALUES ('f', 's'${vals ? `, ${vals}` : ''}) RETURNING id`,
    );

  it('two executing NULL-shard rows with one concurrency key (K = 1 arbiter)', async () => {
    await insert(`status, concurrency_key`, `'executing', 'acct:1'`);
    await expect(insert(`status, concurrency_key`, `'executing', 'acct:1'`)).rejects.toMatchObject({
      code: '23505',
      constraint: 'gen_durable_concurrency_active',
    });
    // not executing, or shard-stamped (gated), or another key: allowed
    await insert(`status, concurrency_key`, `'runnable', 'acct:1'`);
    await insert(`status, concurrency_key, concurrency_shard`, `'executing', 'acct:1', 0`);
    await insert(`status, concurrency_key`, `'executing', 'acct:2'`);
  });

  it('concurrency_name is the key part before the first colon', async () => {
    const { rows } = await insert(`concurrency_key`, `'stripe:cust:9'`);
    const r = await db.pool.query(`SELECT concurrency_name FROM gen_durable WHERE id = $1`, [
      rows[0].id,
    ]);
    expect(r.rows[0].concurrency_name).toBe('stripe');
  });

  it('two occupants of one correlation key within its scope', async () => {
    const live = `'{runnable,executing,awaiting_signal,awaiting_children}'`;
    await insert(`correlation_key, correlation_scope`, `'order:1', ${live}`);
    await expect(
      insert(`correlation_key, correlation_scope`, `'order:1', ${live}`),
    ).rejects.toMatchObject({
      code: '23505',
      constraint: 'gen_durable_correlation',
    });
    // a terminal row outside the default scope frees the key
    await db.pool.query(`UPDATE gen_durable SET status = 'done' WHERE correlation_key = 'order:1'`);
    await insert(`correlation_key, correlation_scope`, `'order:1', ${live}`);
    // empty scope: never unique
    await insert(`correlation_key`, `'order:1'`);
    await insert(`correlation_key`, `'order:1'`);
  });

  it('bucket counters outside [0, capacity] and duplicate (kind, key, shard)', async () => {
    await db.pool.query(
      `INSERT INTO gen_durable_buckets (kind, key, shard, capacity, available) VALUES ('conc', 'g', 0, 5, 5)`,
    );
    await expect(
      db.pool.query(`UPDATE gen_durable_buckets SET available = available - 6`),
    ).rejects.toMatchObject({
      code: '23514',
      constraint: 'gen_durable_buckets_check',
    });
    await expect(
      db.pool.query(`UPDATE gen_durable_buckets SET available = available + 1`),
    ).rejects.toMatchObject({
      constraint: 'gen_durable_buckets_check',
    });
    await expect(
      db.pool.query(
        `INSERT INTO gen_durable_buckets (kind, key, shard, capacity, available) VALUES ('conc', 'g', 0, 5, 5)`,
      ),
    ).rejects.toMatchObject({ code: '23505', constraint: 'gen_durable_buckets_pkey' });
    // the same name as a rate bucket is a different key
    await db.pool.query(
      `INSERT INTO gen_durable_buckets (kind, key, shard, capacity, available) VALUES ('rate', 'g', 0, 5, 5)`,
    );
  });

  it('a duplicate (target_id, dedup_key) and a signal without target', async () => {
    const { rows } = await insert('', '');
    const id = rows[0].id as string;
    await db.pool.query(
      `INSERT INTO gen_durable_signals (target_id, name, dedup_key) VALUES ($1, 'paid', 'k')`,
      [id],
    );
    await expect(
      db.pool.query(
        `INSERT INTO gen_durable_signals (target_id, name, dedup_key) VALUES ($1, 'paid', 'k')`,
        [id],
      ),
    ).rejects.toMatchObject({ code: '23505', constraint: 'gen_durable_signals_target_dedup' });
    // NULL dedup keys never conflict
    await db.pool.query(`INSERT INTO gen_durable_signals (target_id, name) VALUES ($1, 'paid')`, [
      id,
    ]);
    await db.pool.query(`INSERT INTO gen_durable_signals (target_id, name) VALUES ($1, 'paid')`, [
      id,
    ]);
    await expect(
      db.pool.query(`INSERT INTO gen_durable_signals (target_id, name) VALUES (999999, 'paid')`),
    ).rejects.toMatchObject({
      code: '23503',
    });
  });

  it('state must be a JSON object', async () => {
    await expect(insert(`state`, `'[1,2]'::jsonb`)).rejects.toMatchObject({ code: '23514' });
  });

  it('deleting an instance cascades its inbox and nulls its children parent_id', async () => {
    const parent = (await insert('', '')).rows[0].id as string;
    const child = (await insert('parent_id', parent)).rows[0].id as string;
    await db.pool.query(`INSERT INTO gen_durable_signals (target_id, name) VALUES ($1, 'x')`, [
      parent,
    ]);
    await db.pool.query(`DELETE FROM gen_durable WHERE id = $1`, [parent]);
    expect(
      (await db.pool.query(`SELECT count(*)::int AS n FROM gen_durable_signals`)).rows[0].n,
    ).toBe(0);
    expect(
      (await db.pool.query(`SELECT parent_id FROM gen_durable WHERE id = $1`, [child])).rows[0]
        .parent_id,
    ).toBeNull();
  });

  it('a schedule: one row per name, a known missed and overlap policy, object state and options', async () => {
    const schedule = (name: string, extra = '', values = '') =>
      db.pool.query(
        `INSERT INTO gen_durable_schedules (name, fsm, cron, next_fire_at, definition_hash${extra})
         VALUES ($1, 'report', '0 3 * * *', now(), 'h'${values})`,
        [name],
      );
    await schedule('nightly');
    await expect(schedule('nightly')).rejects.toMatchObject({
      code: '23505',
      constraint: 'gen_durable_schedules_pkey',
    });
    await expect(schedule('a', ', missed', ", 'sometimes'")).rejects.toMatchObject({
      constraint: 'gen_durable_schedules_missed_check',
    });
    await expect(schedule('b', ', overlap', ", 'queue'")).rejects.toMatchObject({
      constraint: 'gen_durable_schedules_overlap_check',
    });
    await expect(schedule('c', ', state', ", '[1]'::jsonb")).rejects.toMatchObject({
      constraint: 'gen_durable_schedules_state_is_object',
    });
    await expect(schedule('d', ', options', ", '2'::jsonb")).rejects.toMatchObject({
      constraint: 'gen_durable_schedules_options_is_object',
    });
  });
});
