/**
 * The child join's writes to a parent (docs/design.md §6.3 step 5), on alias `p`, `n` being the
 * SQL of how many of its children ended: `children_pending` goes down by `n`; a parent
 * awaiting_children whose count reaches 0 becomes runnable, eligible now. One text for the
 * flush's JOIN_PARENTS and the cancel's `joined` CTE, so the two joins cannot drift apart.
 */
export function parentJoinSet(n: string): string {
  const last = `p.status = 'awaiting_children' AND p.children_pending - ${n} <= 0`;
  return `children_pending = p.children_pending - ${n},
          status = CASE WHEN ${last} THEN 'runnable'::{schema}.gen_durable_status ELSE p.status END,
          eligible_at = CASE WHEN ${last} THEN now() ELSE p.eligible_at END,
          updated_at = now()`;
}
