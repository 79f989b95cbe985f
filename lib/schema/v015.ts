import type { SchemaIncrement } from './schema-increment';

/**
 * Version 15: fairness keys (docs/many-tenants.md "Fair claims by key").
 * - `gen_durable.fairness_key` / `fairness_weight`: the insert's `fairnessKey` (NULL = none)
 *   and `fairnessWeight` (integer ≥ 1, default 1). Added with a constant default: nothing is
 *   rewritten.
 * - `gen_durable_fair_keys`: one head per (queue, fairness key) with work in that queue:
 *   `vtime`, the key's virtual time (the rows it was served, each divided by its weight). The
 *   fair claim (CLAIM_FAIR) walks a queue's heads in `vtime` order by
 *   gen_durable_fair_keys_walk and advances the heads it served; only that claim writes
 *   `vtime`, under FOR NO KEY UPDATE SKIP LOCKED, so claimers never wait on each other.
 * - The trigger gen_durable_fair_head makes sure a keyed row that enters a queue live (an
 *   insert on any path, a manual retry of an ended row, a move to another queue) finds its
 *   head: it takes FOR KEY SHARE on it, creating it when missing at the queue's lowest `vtime`
 *   (a newcomer starts level with the least-served key, not behind nor ahead of everyone).
 *   KEY SHARE does not conflict with the claim's FOR NO KEY UPDATE nor with other inserters,
 *   so no insert waits for a claim and no claim waits at all; only a head's deletion (FOR
 *   UPDATE, SKIP LOCKED) is excluded while an insert holds it. The trigger fires only for a
 *   keyed row (`WHEN`), so unkeyed inserts pay one NULL test.
 * - gen_durable_fair_pick `(queue, fairness_key, priority, eligible_at) WHERE status =
 *   'runnable' AND fairness_key IS NOT NULL`: the per-key LATERAL probe of the fair claim, in
 *   the pick order of gen_durable_pick. Partial on keyed rows: plain rows never enter it.
 */
export const V015: SchemaIncrement = {
  version: 15,
  up: [
    `ALTER TABLE {schema}.gen_durable ADD COLUMN fairness_key text,
       ADD COLUMN fairness_weight int NOT NULL DEFAULT 1`,
    `CREATE TABLE {schema}.gen_durable_fair_keys (
       queue        text NOT NULL,
       fairness_key text NOT NULL,
       vtime        float8 NOT NULL DEFAULT 0,
       CONSTRAINT gen_durable_fair_keys_pkey PRIMARY KEY (queue, fairness_key)
     )`,
    `CREATE INDEX gen_durable_fair_keys_walk ON {schema}.gen_durable_fair_keys (queue, vtime)`,
    `CREATE INDEX gen_durable_fair_pick ON {schema}.gen_durable (queue, fairness_key, priority, eligible_at)
       WHERE status = 'runnable' AND fairness_key IS NOT NULL`,
    `CREATE FUNCTION {schema}.gen_durable_fair_head() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       LOOP
         PERFORM 1 FROM {schema}.gen_durable_fair_keys f
           WHERE f.queue = NEW.queue AND f.fairness_key = NEW.fairness_key FOR KEY SHARE;
         EXIT WHEN FOUND;
         INSERT INTO {schema}.gen_durable_fair_keys (queue, fairness_key, vtime)
           SELECT NEW.queue, NEW.fairness_key,
                  COALESCE((SELECT min(m.vtime) FROM {schema}.gen_durable_fair_keys m WHERE m.queue = NEW.queue), 0)
           ON CONFLICT DO NOTHING;
       END LOOP;
       RETURN NULL;
     END
     $$`,
    `CREATE TRIGGER gen_durable_fair_head_insert AFTER INSERT ON {schema}.gen_durable
       FOR EACH ROW WHEN (NEW.fairness_key IS NOT NULL)
       EXECUTE FUNCTION {schema}.gen_durable_fair_head()`,
    `CREATE TRIGGER gen_durable_fair_head_update AFTER UPDATE OF status, queue ON {schema}.gen_durable
       FOR EACH ROW WHEN (NEW.fairness_key IS NOT NULL AND NEW.status::text = 'runnable'
                          AND (OLD.status::text IN ('done', 'failed', 'cancelled') OR OLD.queue IS DISTINCT FROM NEW.queue))
       EXECUTE FUNCTION {schema}.gen_durable_fair_head()`,
  ],
  down: [
    `DROP TRIGGER IF EXISTS gen_durable_fair_head_update ON {schema}.gen_durable`,
    `DROP TRIGGER IF EXISTS gen_durable_fair_head_insert ON {schema}.gen_durable`,
    `DROP FUNCTION IF EXISTS {schema}.gen_durable_fair_head()`,
    `DROP INDEX IF EXISTS {schema}.gen_durable_fair_pick`,
    `DROP TABLE IF EXISTS {schema}.gen_durable_fair_keys`,
    `ALTER TABLE {schema}.gen_durable DROP COLUMN IF EXISTS fairness_weight, DROP COLUMN IF EXISTS fairness_key`,
  ],
};
