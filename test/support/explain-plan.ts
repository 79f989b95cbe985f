import type { PoolClient } from 'pg';

import { renderStatement, type Statement, type TypedStatement } from '../../lib/sql/statement';

/**
 * Runs `statement` under `EXPLAIN (ANALYZE, FORMAT JSON)` on `client` and answers the index
 * names of the plan nodes that ran (Actual Loops > 0), `seq:<relation>` for sequential scans
 * that ran, sorted, and the rows the top node returned. ANALYZE executes the statement: wrap
 * a writing one in a transaction the caller rolls back.
 */
export async function explainRan(
  client: PoolClient,
  statement: Statement,
  params: unknown[],
): Promise<{ used: string[]; rows: number }> {
  const { rows } = await client.query<{ 'QUERY PLAN': unknown }>({
    text: `EXPLAIN (ANALYZE, FORMAT JSON) ${renderStatement(statement, 'public')}`,
    values: params,
  });
  const used = new Set<string>();
  const walk = (node: Record<string, unknown>): void => {
    const loops = Number(node['Actual Loops'] ?? 0);
    if (typeof node['Index Name'] === 'string' && loops > 0) used.add(node['Index Name']);
    if (node['Node Type'] === 'Seq Scan' && loops > 0) {
      used.add(`seq:${String(node['Relation Name'])}`);
    }
    for (const child of (node['Plans'] as Record<string, unknown>[] | undefined) ?? []) {
      walk(child);
    }
  };
  const plan = (rows[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan;
  walk(plan);
  return { used: [...used].sort(), rows: Number(plan['Actual Rows']) };
}

/**
 * Shared buffers (hit + read) `statement` touched with `input`, from `EXPLAIN (ANALYZE,
 * BUFFERS)` on `client`, each run in a transaction rolled back. With `runs` > 1 it is prepared
 * (named) and run that many times, so from the sixth PostgreSQL may use its generic plan, the
 * one a long-lived pool runs; the answer is the last run's. `check` sees each run's plan (JSON).
 */
export async function explainBuffers<I>(
  client: PoolClient,
  statement: TypedStatement<I, unknown>,
  input: I,
  opts: { readonly runs?: number; readonly check?: (planJson: string) => void } = {},
): Promise<number> {
  const runs = opts.runs ?? 1;
  let last = 0;
  for (let run = 0; run < runs; run++) {
    await client.query('BEGIN');
    try {
      const { rows } = await client.query<{ 'QUERY PLAN': { Plan: Record<string, number> }[] }>({
        ...(runs > 1 ? { name: `explain_buffers_${statement.name}` } : {}),
        text: `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${renderStatement(statement, 'public')}`,
        values: statement.params(input),
      });
      const plan = rows[0]!['QUERY PLAN'][0]!.Plan;
      last = plan['Shared Hit Blocks']! + plan['Shared Read Blocks']!;
      opts.check?.(JSON.stringify(plan));
    } finally {
      await client.query('ROLLBACK');
    }
  }
  return last;
}
