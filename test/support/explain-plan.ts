import type { PoolClient } from 'pg';

import { renderStatement, type Statement } from '../../lib/sql/statement';

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
