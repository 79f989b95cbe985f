/**
 * The guard of every write a worker makes to a row it claimed (docs/design.md §26.1): the row
 * still carries this worker (`worker`), is `executing`, and carries the claim's fencing token
 * (`seq`), on alias `g`, as SQL text to splice into a statement. A stale worker's write (its
 * lease reaped, the row re-claimed, ended or cancelled meanwhile) matches nothing.
 *
 * The status is compared as text, `g.status::text = 'executing'`, which does not imply
 * gen_durable_lease's partial predicate (`status = 'executing'`): each statement that uses this
 * names its rows by id (`g.id = ANY (…)` or `g.id = $n`), and with the predicate implied the
 * planner could read the batch's rows through gen_durable_lease with the ids as a filter, which
 * under a pinned xmin horizon walks a dead entry per claim since the pin
 * (test/engine/pinned-horizon-writes.spec.ts).
 *
 * That comparison sits inside a CASE (true when executing, else NULL, which a WHERE drops like
 * false) for the planner's estimate: PostgreSQL keeps no statistics on `status::text`, so a
 * plain `=` on it is estimated to keep 0.5 % of the rows, and the batch writes, which join
 * their unnested entries to these rows, were planned as if one row matched: a nested loop
 * rescanning every entry for every row, quadratic in the batch (a flush of 400 outcomes took
 * 232 ms instead of 23, `npm run profile:batch-plans`). A CASE gets the planner's neutral default instead. `worker` and `seq`
 * are the entries' columns in those joins, never a constant, for the same reason
 * (test/engine/batch-write-plans.spec.ts; docs/performance.md, "The guarded batch writes'
 * plans").
 */
export function heldClaim(g: string, worker: string, seq: string): string {
  return `${g}.locked_by = ${worker} AND (CASE WHEN ${g}.status::text = 'executing' THEN true END) AND ${g}.claim_seq = ${seq}`;
}
