/**
 * `npm run profile:row-cost`: what one row's UPDATE costs PostgreSQL, on gen_durable and on
 * narrower copies of it, to place the drain's PostgreSQL CPU against the raw baseline's
 * (docs/performance.md, "What a row's update costs"). A job's row is updated twice (the claim
 * marks it executing, the flush marks it done); the raw baseline's `jobs` row is updated twice
 * too. Four tables of ROWS rows each (default 20 000), vacuumed, then BATCH rows at a time
 * (default 740, the size of a default c=10 claim) updated as the claim does, then as the flush's
 * `done` does, in rotating order, REPEATS times (default 9), each statement timed by the server
 * (`EXPLAIN (ANALYZE, TIMING OFF)`, committed):
 *
 * - `gen_durable`: the engine's table (47 columns; the primary key and 14 partial indexes; its
 *   check constraint, stored generated column and triggers);
 * - `indexed`: the same columns and indexes (`LIKE … INCLUDING INDEXES`), no constraint,
 *   generated column or trigger;
 * - `bare`: the same columns and values, the primary key only;
 * - `jobs`: the raw baseline's table (bench/src/engines/raw.ts: 4 columns).
 *
 * Prints the median µs per row of each statement on each table and the tables' mean row size.
 * Uses DATABASE_URL (a server where it may CREATE DATABASE) or the embedded PostgreSQL.
 */
import { Client } from 'pg';

import { migrateUp } from '../lib/schema/migrator';
import { runScript, withScratchDatabase } from './scratch-database';
import { serverTimeMs } from './server-time';
import { median } from './src/stats';

const ROWS = Number(process.env['ROWS'] ?? 20_000);
const BATCH = Number(process.env['BATCH'] ?? 740);
const REPEATS = Number(process.env['REPEATS'] ?? 9);

/** The claim's write (lib/sql/claim.sql.ts `claimKept`), by id instead of by ctid. */
const claimOf = (table: string): string =>
  `UPDATE ${table} g SET status = 'executing', locked_by = 'profile-row-cost:1:0a1b2c3d',
          lease_expires_at = now() + make_interval(secs => 60), concurrency_shard = NULL,
          claim_seq = g.claim_seq + 1, updated_at = now()
    WHERE g.id = ANY ($1::bigint[])`;

/** The flush's `done` write (lib/sql/outcome.sql.ts FLUSH_TRANSITIONS), its columns only. */
const doneOf = (table: string): string =>
  `UPDATE ${table} g SET status = 'done', result = '{}'::jsonb, locked_by = NULL,
          lease_expires_at = NULL, attempt = 0, updated_at = now()
    WHERE g.id = ANY ($1::bigint[])`;

interface Variant {
  readonly table: string;
  readonly claim: string;
  readonly done: string;
}

const VARIANTS: readonly Variant[] = [
  { table: 'gen_durable', claim: claimOf('gen_durable'), done: doneOf('gen_durable') },
  { table: 'indexed', claim: claimOf('indexed'), done: doneOf('indexed') },
  { table: 'bare', claim: claimOf('bare'), done: doneOf('bare') },
  {
    table: 'jobs',
    claim: `UPDATE jobs SET status = 'running' WHERE id = ANY ($1::bigint[])`,
    done: `UPDATE jobs SET status = CASE WHEN step >= 1 THEN 'done' ELSE 'runnable' END,
                  step = CASE WHEN step >= 1 THEN step ELSE step + 1 END
            WHERE id = ANY ($1::bigint[])`,
  },
];

async function profileRowCost(url: string): Promise<void> {
  if (BATCH * REPEATS > ROWS) throw new Error(`BATCH × REPEATS (${BATCH * REPEATS}) > ROWS`);
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await migrateUp({ query: (text, params) => client.query(text, params), inTransaction: false });
    await client.query(
      `INSERT INTO gen_durable (fsm, step, state)
       SELECT 'prof1', 'perform', '{}' FROM generate_series(1, $1::int)`,
      [ROWS],
    );
    const { rows: columnRows } = await client.query<{ list: string }>(
      `SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) AS list
         FROM pg_attribute
        WHERE attrelid = 'gen_durable'::regclass AND attnum > 0 AND NOT attisdropped
          AND attgenerated = ''`,
    );
    const columns = columnRows[0]!.list;
    await client.query(`CREATE TABLE bare AS SELECT * FROM gen_durable`);
    await client.query(`ALTER TABLE bare ADD PRIMARY KEY (id)`);
    await client.query(
      `CREATE TABLE indexed (LIKE gen_durable INCLUDING DEFAULTS INCLUDING INDEXES)`,
    );
    await client.query(`INSERT INTO indexed (${columns}) SELECT ${columns} FROM gen_durable`);
    await client.query(
      `CREATE TABLE jobs (id bigserial PRIMARY KEY, status text NOT NULL DEFAULT 'runnable',
                          step int NOT NULL DEFAULT 1, payload jsonb NOT NULL DEFAULT '{}')`,
    );
    await client.query(`INSERT INTO jobs (payload) SELECT '{}' FROM generate_series(1, $1::int)`, [
      ROWS,
    ]);
    await client.query('VACUUM ANALYZE gen_durable, bare, indexed, jobs');
    const { rows: firstIds } = await client.query<{ table: string; first: string }>(
      `SELECT 'gen_durable' AS table, min(id)::text AS first FROM gen_durable
       UNION ALL SELECT 'bare', min(id)::text FROM bare
       UNION ALL SELECT 'indexed', min(id)::text FROM indexed
       UNION ALL SELECT 'jobs', min(id)::text FROM jobs`,
    );
    const first = new Map(firstIds.map((r) => [r.table, BigInt(r.first)]));

    const claims = new Map<string, number[]>(VARIANTS.map((v) => [v.table, []]));
    const dones = new Map<string, number[]>(VARIANTS.map((v) => [v.table, []]));
    for (let r = 0; r < REPEATS; r++) {
      for (let v = 0; v < VARIANTS.length; v++) {
        const variant = VARIANTS[(r + v) % VARIANTS.length]!;
        const base = first.get(variant.table)! + BigInt(r * BATCH);
        const ids = Array.from({ length: BATCH }, (_, k) => String(base + BigInt(k)));
        const claimMs = await serverTimeMs(client, variant.claim, [ids]);
        const doneMs = await serverTimeMs(client, variant.done, [ids]);
        claims.get(variant.table)!.push(claimMs);
        dones.get(variant.table)!.push(doneMs);
      }
    }
    const { rows: sizes } = await client.query<{ table: string; bytes: string }>(
      `SELECT 'gen_durable' AS table, avg(pg_column_size(t.*))::int::text AS bytes FROM gen_durable t
       UNION ALL SELECT 'indexed', avg(pg_column_size(t.*))::int::text FROM indexed t
       UNION ALL SELECT 'bare', avg(pg_column_size(t.*))::int::text FROM bare t
       UNION ALL SELECT 'jobs', avg(pg_column_size(t.*))::int::text FROM jobs t`,
    );
    const size = new Map(sizes.map((s) => [s.table, s.bytes]));
    const jobsClaim = median(claims.get('jobs')!);
    const jobsDone = median(dones.get('jobs')!);
    const out = [
      `${ROWS} rows a table, ${BATCH} rows an update, ${REPEATS} repeats (median, server time, µs per row):`,
      `${'table'.padEnd(12)} ${'row bytes'.padStart(9)} ${'claim'.padStart(7)} ${'done'.padStart(7)} ${'both'.padStart(7)}  vs jobs`,
    ];
    for (const { table } of VARIANTS) {
      const c = median(claims.get(table)!);
      const d = median(dones.get(table)!);
      const perRow = (ms: number): string => ((ms / BATCH) * 1000).toFixed(2).padStart(7);
      out.push(
        `${table.padEnd(12)} ${String(size.get(table)).padStart(9)} ${perRow(c)} ${perRow(d)} ${perRow(c + d)}  ${((c + d) / (jobsClaim + jobsDone)).toFixed(2)}×`,
      );
    }
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await client.end();
  }
}

runScript(() => withScratchDatabase('gd_row_cost', ({ url }) => profileRowCost(url)));
