/**
 * The claim's plan under the soak's load (docs/performance.md, "Soak"): the production
 * statement CLAIM_RUNNABLE run once under `EXPLAIN (ANALYZE, BUFFERS)` in a transaction that is
 * rolled back (the rows it claims go back to runnable), with the figures the soak compares at
 * the pin's start and end: execution time and the shared buffers the whole statement and its
 * pick-index scan touched.
 */
import { Client } from 'pg';

import { CLAIM_RUNNABLE } from '../../lib/sql/claim.sql';
import { renderStatement } from '../../lib/sql/statement';

export interface ClaimPlan {
  /** When in the run (e.g. `pin start`). */
  readonly label: string;
  readonly executionMs: number;
  /** Shared buffers (hit + read) of the whole statement. */
  readonly buffers: number;
  /** Shared buffers of the pick index scan (the first scan of gen_durable_pick). */
  readonly pickBuffers: number;
  /** Rows the claim's UPDATE took (0 when the workers' own claims held every candidate). */
  readonly rowsClaimed: number;
  readonly text: string;
}

const buffersOf = (line: string | undefined): number => {
  const m = /Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?/.exec(line ?? '');
  return m ? Number(m[1] ?? 0) + Number(m[2] ?? 0) : NaN;
};

/**
 * Parses the text plan: the first Buffers line is the top node's (cumulative); the rows claimed
 * are the UPDATE's (the statement's own top row count includes the pause row of an empty claim).
 */
export function readClaimPlan(label: string, lines: readonly string[]): ClaimPlan {
  const exec = lines.map((l) => /Execution Time: ([\d.]+) ms/.exec(l)).find((m) => m);
  const pickAt = lines.findIndex((l) => l.includes('gen_durable_pick'));
  const pickBuffersLine = lines.slice(pickAt + 1).find((l) => l.includes('Buffers:'));
  const top = lines.find((l) => l.includes('Buffers:'));
  const update = lines.find((l) => l.includes('Update on gen_durable'));
  const rows = /actual time=[\d.]+\.\.[\d.]+ rows=(\d+)/.exec(update ?? '');
  return {
    label,
    executionMs: exec ? Number(exec[1]) : NaN,
    buffers: buffersOf(top),
    pickBuffers: pickAt >= 0 ? buffersOf(pickBuffersLine) : NaN,
    rowsClaimed: rows ? Number(rows[1]) : NaN,
    text: lines.join('\n'),
  };
}

export async function explainClaim(url: string, label: string, limit: number): Promise<ClaimPlan> {
  const client = new Client({ connectionString: url, application_name: 'gd-soak-explain' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('BEGIN');
    const input = {
      queue: 'default',
      limit,
      worker: 'gd-soak-explain',
      leaseMs: 60_000,
      gates: [],
    };
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${renderStatement(CLAIM_RUNNABLE, 'public')}`,
      CLAIM_RUNNABLE.params(input),
    );
    return readClaimPlan(
      label,
      rows.map((r) => r['QUERY PLAN']),
    );
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
    await client.end();
  }
}
