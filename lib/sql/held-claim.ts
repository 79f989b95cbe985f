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
 */
export function heldClaim(g: string, worker: string, seq: string): string {
  return `${g}.locked_by = ${worker} AND ${g}.status::text = 'executing' AND ${g}.claim_seq = ${seq}`;
}
