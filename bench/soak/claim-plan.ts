/**
 * The claim's plan under the soak's load (docs/performance.md, "Soak"): the production
 * statement CLAIM_RUNNABLE run once under `EXPLAIN (ANALYZE, BUFFERS)` in a transaction that is
 * rolled back (the rows it claims go back to runnable), with the figures the soak compares at
 * the pin's start and end: execution time and the shared buffers the whole statement and its
 * pick-index scan touched.
 */
import { Client } from 'pg';

import { CLAIM_FLOOR_SLACK_MS } from '../../lib/runtime/claim-floor';
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
  // The candidates' scan: the gen_durable_pick scan under CTE cand (the head probe has one too).
  const candAt = lines.findIndex((l) => l.includes('CTE cand'));
  const pickAt = lines.findIndex((l, k) => k > candAt && l.includes('gen_durable_pick'));
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

/**
 * The claim's plan twice, each rolled back: as a full scan from the head of the pick index,
 * and as a claim from the floor a scheduler would hold then (docs/design.md §5.3.1): the
 * oldest runnable, unheld row, read first, less the 250 ms slack. Labels: `label` and
 * `label (floor)`.
 */
export async function explainClaim(
  url: string,
  label: string,
  limit: number,
): Promise<ClaimPlan[]> {
  const client = new Client({ connectionString: url, application_name: 'gd-soak-explain' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('BEGIN');
    const base = {
      queue: 'default',
      limit,
      worker: 'gd-soak-explain',
      leaseMs: 60_000,
      gates: [],
    };
    // The floor's head, as the head probe finds it (bench-only read; the engine's is in the claim).
    const { rows: heads } = await client.query<{ priority: number; at: Date }>(
      `SELECT priority, LEAST(eligible_at, now()) AS at FROM gen_durable
        WHERE queue = 'default' AND status = 'runnable' AND held_at IS NULL
        ORDER BY priority, eligible_at LIMIT 1`,
    );
    const head = heads[0] ?? { priority: 0, at: new Date() };
    const from = {
      priority: head.priority,
      scanFrom: new Date(head.at.getTime() - CLAIM_FLOOR_SLACK_MS),
      headFrom: head.at,
    };
    const plans: ClaimPlan[] = [];
    for (const [name, input] of [
      [label, base],
      [`${label} (floor)`, { ...base, from }],
    ] as const) {
      await client.query('SAVEPOINT plan');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${renderStatement(CLAIM_RUNNABLE, 'public')}`,
        CLAIM_RUNNABLE.params(input),
      );
      await client.query('ROLLBACK TO SAVEPOINT plan');
      plans.push(
        readClaimPlan(
          name,
          rows.map((r) => r['QUERY PLAN']),
        ),
      );
    }
    return plans;
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
    await client.end();
  }
}
