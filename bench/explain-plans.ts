/**
 * `npm run explain`: EXPLAIN (ANALYZE, BUFFERS) of the production claim, enrichment and flush
 * statements on a table with ROWS terminal + runnable rows (default 200 000), printed as text.
 * Uses DATABASE_URL (a server where it may CREATE DATABASE) or the embedded PostgreSQL.
 * Every analysed statement runs inside a transaction that is rolled back.
 */
import { Client } from 'pg';

import { migrateUp } from '../lib/schema/migrator';
import { CLAIM_RUNNABLE, LOAD_ENRICHMENT } from '../lib/sql/claim.sql';
import { FLUSH_TRANSITIONS } from '../lib/sql/outcome.sql';
import { renderStatement, type Statement, type StatementRunner } from '../lib/sql/statement';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startEmbeddedPostgres } = require('../scripts/embedded-postgres.cjs') as {
  startEmbeddedPostgres(): Promise<{ url: string; stop(): Promise<void> }>;
};

const ROWS = Number(process.env['ROWS'] ?? 200_000);
const BATCH = 50;

async function explain(
  client: Client,
  title: string,
  statement: Statement,
  params: unknown[],
): Promise<void> {
  await client.query('BEGIN');
  try {
    const text = `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING ON) ${renderStatement(statement, 'public')}`;
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(text, params);
    process.stdout.write(
      `\n=== ${title} (${statement.name}) ===\n${rows.map((r) => r['QUERY PLAN']).join('\n')}\n`,
    );
  } finally {
    await client.query('ROLLBACK');
  }
}

async function main(): Promise<void> {
  const embedded = process.env['DATABASE_URL'] ? undefined : await startEmbeddedPostgres();
  const server = process.env['DATABASE_URL'] ?? embedded!.url;
  const name = `gd_explain_${Date.now()}`;
  const admin = new Client({ connectionString: server });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(server);
  url.pathname = `/${name}`;
  const client = new Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await migrateUp({ query: (text, params) => client.query(text, params), inTransaction: false });
    const terminal = Math.floor(ROWS * 0.7);
    await client.query(
      `INSERT INTO gen_durable (fsm, step, status, updated_at)
       SELECT 'job', 'perform', 'done', now() - interval '1 hour' FROM generate_series(1, $1)`,
      [terminal],
    );
    await client.query(
      `INSERT INTO gen_durable (fsm, step) SELECT 'job', 'perform' FROM generate_series(1, $1)`,
      [ROWS - terminal],
    );
    await client.query('ANALYZE gen_durable');
    process.stdout.write(
      `${server.replace(/:[^:@/]*@/, ':***@')} ${embedded ? '(embedded PostgreSQL)' : ''}: ${ROWS} rows, ${terminal} terminal\n`,
    );

    const claim = {
      queue: 'default',
      limit: BATCH,
      worker: 'explain-worker',
      leaseMs: 60_000,
      gates: [],
    };
    await explain(
      client,
      `claim of ${BATCH}, enrichment included`,
      CLAIM_RUNNABLE,
      CLAIM_RUNNABLE.params(claim),
    );

    // Claim a batch for real, then explain the inline chain's enrichment and the flush of it.
    const runner: StatementRunner = {
      queryResult: (statement, values) =>
        client.query(renderStatement(statement, 'public'), values as unknown[]),
    };
    const claimed = await CLAIM_RUNNABLE.run(runner, claim);
    const ids = claimed.map((r) => r.id);
    await explain(
      client,
      `enrichment alone (inline chains) of ${ids.length}`,
      LOAD_ENRICHMENT,
      LOAD_ENRICHMENT.params({ ids }),
    );
    const entries = claimed.map((r) => ({
      worker: r.worker,
      id: r.id,
      seq: r.claimSeq,
      kind: 'done' as const,
      nextStep: null,
      stateText: null,
      resultText: '{}',
      error: null,
      delayMs: 0,
      rateLimit: null,
      weight: 1,
      setKey: false,
      concurrencyKey: null,
    }));
    await explain(
      client,
      `flush of ${entries.length} done outcomes, solo (autocommit)`,
      FLUSH_TRANSITIONS,
      FLUSH_TRANSITIONS.params({ entries, solo: true }),
    );
  } finally {
    await client.end();
    await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
    await admin.end();
    await embedded?.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
