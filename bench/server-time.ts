/**
 * A statement's execution time on the server, as `EXPLAIN (ANALYZE, TIMING OFF)` reports it:
 * what the profiles (profile:claim-exec, profile:flush-set, profile:row-cost) compare, without
 * the round trip, the rows' transfer or the client's parsing. The statement runs for real: a
 * caller that wants the table unchanged runs it in a transaction it rolls back.
 */
import type { Client } from 'pg';

interface ExplainJson {
  readonly 'QUERY PLAN': readonly { readonly 'Execution Time': number }[];
}

/** Milliseconds the server spent executing `text` with `values` (planning not included). */
export async function serverTimeMs(
  client: Client,
  text: string,
  values: readonly unknown[],
): Promise<number> {
  const { rows } = await client.query<ExplainJson>({
    text: `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${text}`,
    values: values as unknown[],
  });
  const time = rows[0]?.['QUERY PLAN'][0]?.['Execution Time'];
  if (time === undefined) throw new Error(`EXPLAIN gave no execution time for: ${text}`);
  return time;
}
