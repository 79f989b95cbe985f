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
 * (test/engine/pinned-horizon-writes.spec.ts). Worker and token are compared with
 * `IS NOT DISTINCT FROM` (the same as `=` here: `worker` and `seq` are never NULL, and a NULL
 * column matches neither): against a batch's entries (`t.worker`, `t.seq`) an `=` is a clause
 * the planner can hash on, and it did, a hash on the worker that every entry shares, one bucket
 * for the whole batch (see {@link entryRow}).
 */
export function heldClaim(g: string, worker: string, seq: string): string {
  return `${g}.locked_by IS NOT DISTINCT FROM ${worker} AND ${g}.status::text = 'executing' AND ${g}.claim_seq IS NOT DISTINCT FROM ${seq}`;
}

/**
 * Joins a guarded batch write's entry `t` to its row `g`: a primary-key probe per entry
 * (gen_durable_pkey). Written `g.id = ANY (ARRAY[t.id])`, which a btree takes as an index
 * condition but the planner can neither hash nor merge on, so every plan, custom or generic,
 * is a nested loop over the entries with one probe each. NOTE: as `g.id = t.id` beside
 * `g.id = ANY (ids)`, the generic plan of the prepared statement (from its sixth run, ten
 * entries and one executing row assumed) rescanned every entry for every row, O(n²): 280 ms for
 * a flush of 600 outcomes; as plain `g.id = t.id`, a small analyzed table got a sequential scan
 * and a hash join (docs/performance.md "The flush's generic plan";
 * test/engine/batch-write-plans.spec.ts). A row updated meanwhile is rechecked by its id, which
 * an update keeps (not by `ctid`: a TID scan's recheck drops it).
 */
export function entryRow(g: string, t: string): string {
  return `${g}.id = ANY (ARRAY[${t}.id])`;
}
