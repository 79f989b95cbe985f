import type { Pool } from 'pg';

/**
 * The chaos ledgers (docs/reliability.md §3.2), in schema `chaos` of the run's database, and the
 * test-side triggers that audit the engine's table: `history` gets one row per status,
 * state or join-counter change of an instance (written in the engine's own transaction, so
 * it is exactly the committed history), `deleted` one row per GC'd instance.
 */
export const LEDGER_DDL = `
CREATE SCHEMA chaos;
CREATE TABLE chaos.executions (
  exec_id uuid PRIMARY KEY,
  instance_id bigint NOT NULL,
  fsm text NOT NULL,
  step text NOT NULL,
  step_seq int NOT NULL,
  attempt int NOT NULL,
  worker text NOT NULL,
  claim_seq bigint,
  ckey text,
  started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  ended_at timestamptz
);
CREATE INDEX executions_instance ON chaos.executions (instance_id, started_at);
CREATE INDEX executions_ckey ON chaos.executions (ckey) WHERE ckey IS NOT NULL;
CREATE TABLE chaos.client_ops (
  op_id bigserial PRIMARY KEY,
  op text NOT NULL,
  instance_id bigint,
  fsm text,
  name text,
  dedup_key text,
  invoked_at timestamptz NOT NULL,
  completed_at timestamptz,
  result text NOT NULL,
  detail text,
  -- cancel / retry: the options sent ({ mode, children } / { fix }) and the engine's answer
  -- (cancel: { cancelled, requested, alreadyTerminal, liveAfter }; retry: the status before).
  options jsonb,
  answer jsonb
);
CREATE INDEX client_ops_instance ON chaos.client_ops (instance_id, op);
CREATE TABLE chaos.observed (
  instance_id bigint NOT NULL,
  exec_id uuid NOT NULL,
  signal_id bigint NOT NULL,
  name text NOT NULL,
  dedup_key text,
  at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX observed_exec ON chaos.observed (exec_id);
CREATE TABLE chaos.faults (
  seq serial PRIMARY KEY,
  kind text NOT NULL,
  target text NOT NULL,
  injected_at timestamptz NOT NULL,
  healed_at timestamptz,
  detail jsonb
);
CREATE TABLE chaos.events (
  worker text NOT NULL,
  event text NOT NULL,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  instance_id bigint,
  count int,
  detail text
);
CREATE TABLE chaos.counters (key text PRIMARY KEY, n int NOT NULL);
-- chaos_tx's database effects, written through ctx.manager in the step's own transaction.
CREATE TABLE chaos.tx_effects (
  exec_id uuid NOT NULL,
  instance_id bigint NOT NULL,
  step_seq int NOT NULL,
  at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX tx_effects_exec ON chaos.tx_effects (exec_id);
CREATE TABLE chaos.history (
  hid bigserial PRIMARY KEY,
  id bigint NOT NULL,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  old_status text,
  new_status text,
  old_seq int,
  new_seq int,
  claim_seq bigint,
  exec text,
  old_pending int,
  new_pending int,
  locked_by text
);
CREATE INDEX history_id ON chaos.history (id);
CREATE INDEX history_exec ON chaos.history (exec);
CREATE TABLE chaos.deleted (
  id bigint NOT NULL,
  fsm text NOT NULL,
  status text NOT NULL,
  result jsonb,
  last_error text,
  reaps int,
  parent_id bigint,
  parent_status text,
  at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION chaos.record_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO chaos.history (id, old_status, new_status, old_seq, new_seq, claim_seq, exec, old_pending, new_pending, locked_by)
  VALUES (NEW.id, OLD.status, NEW.status, (OLD.state->>'seq')::int,
          COALESCE((NEW.result->>'seq')::int, (NEW.state->>'seq')::int), OLD.claim_seq,
          COALESCE(NEW.result->>'exec', NEW.state->>'exec'), OLD.children_pending, NEW.children_pending, OLD.locked_by);
  RETURN NULL;
END $$;
CREATE TRIGGER chaos_history AFTER UPDATE ON public.gen_durable FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.state IS DISTINCT FROM NEW.state
        OR OLD.children_pending IS DISTINCT FROM NEW.children_pending OR OLD.result IS DISTINCT FROM NEW.result)
  EXECUTE FUNCTION chaos.record_history();
CREATE FUNCTION chaos.record_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO chaos.deleted (id, fsm, status, result, last_error, reaps, parent_id, parent_status)
  VALUES (OLD.id, OLD.fsm, OLD.status, OLD.result, OLD.last_error, OLD.reaps, OLD.parent_id,
          (SELECT p.status::text FROM public.gen_durable p WHERE p.id = OLD.parent_id));
  RETURN NULL;
END $$;
CREATE TRIGGER chaos_deleted AFTER DELETE ON public.gen_durable FOR EACH ROW EXECUTE FUNCTION chaos.record_delete();
-- Every child's parent as inserted: deleting a parent (GC, archive) sets its children's parent_id
-- to NULL (the foreign key's ON DELETE SET NULL) with no UPDATE trigger seeing it, so a child
-- deleted or left in the table after its parent would lose its ancestry.
CREATE TABLE chaos.parents (id bigint PRIMARY KEY, parent_id bigint NOT NULL);
CREATE FUNCTION chaos.record_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO chaos.parents (id, parent_id) VALUES (NEW.id, NEW.parent_id) ON CONFLICT (id) DO NOTHING;
  RETURN NULL;
END $$;
CREATE TRIGGER chaos_parents AFTER INSERT ON public.gen_durable FOR EACH ROW
  WHEN (NEW.parent_id IS NOT NULL) EXECUTE FUNCTION chaos.record_parent();
`;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A test FSM's own writer to the ledgers, through its own pool (never inside the engine's
 * transactions). Every write retries until it lands (bounded), like an idempotent external
 * side effect: a step waits out a Postgres restart instead of failing because of its ledger.
 */
export class LedgerWriter {
  constructor(
    readonly pool: Pool,
    readonly worker: string,
  ) {}

  async write(text: string, params: readonly unknown[], deadlineMs = 120_000): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    let wait = 25;
    for (;;) {
      try {
        await this.pool.query(text, params as unknown[]);
        return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await sleep(wait);
        wait = Math.min(wait * 2, 500);
      }
    }
  }

  async read<R extends Record<string, unknown>>(
    text: string,
    params: readonly unknown[],
    deadlineMs = 120_000,
  ): Promise<R[]> {
    const deadline = Date.now() + deadlineMs;
    let wait = 25;
    for (;;) {
      try {
        return (await this.pool.query<R>(text, params as unknown[])).rows;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await sleep(wait);
        wait = Math.min(wait * 2, 500);
      }
    }
  }

  /** An execution starts: records the claim token it runs under (read at start). */
  begin(
    exec: string,
    id: string,
    fsm: string,
    step: string,
    stepSeq: number,
    attempt: number,
    key: string | null,
  ): Promise<void> {
    return this.write(
      `INSERT INTO chaos.executions (exec_id, instance_id, fsm, step, step_seq, attempt, worker, claim_seq, ckey)
       SELECT $1, $2, $3, $4, $5, $6, $7, (SELECT claim_seq FROM public.gen_durable WHERE id = $2), $8`,
      [exec, id, fsm, step, stepSeq, attempt, this.worker, key],
    );
  }

  end(exec: string): Promise<void> {
    return this.write(
      `UPDATE chaos.executions SET ended_at = clock_timestamp() WHERE exec_id = $1`,
      [exec],
    );
  }

  observe(
    id: string,
    exec: string,
    signalId: string,
    name: string,
    dedup: string | null,
  ): Promise<void> {
    return this.write(
      `INSERT INTO chaos.observed (instance_id, exec_id, signal_id, name, dedup_key) VALUES ($1, $2, $3, $4, $5)`,
      [id, exec, signalId, name, dedup],
    );
  }

  event(
    event: string,
    options: { id?: string | null; count?: number; detail?: string } = {},
  ): Promise<void> {
    return this.write(
      `INSERT INTO chaos.events (worker, event, instance_id, count, detail) VALUES ($1, $2, $3, $4, $5)`,
      [this.worker, event, options.id ?? null, options.count ?? null, options.detail ?? null],
    );
  }

  /** A fault the workload inflicts on itself (a spinning step, a poison pill). */
  fault(kind: string, detail: Record<string, unknown>): Promise<void> {
    return this.write(
      `INSERT INTO chaos.faults (kind, target, injected_at, healed_at, detail) VALUES ($1, $2, clock_timestamp(), NULL, $3)`,
      [kind, this.worker, JSON.stringify(detail)],
    );
  }

  healFault(kind: string): Promise<void> {
    return this.write(
      `UPDATE chaos.faults SET healed_at = clock_timestamp() WHERE seq = (SELECT max(seq) FROM chaos.faults WHERE kind = $1 AND target = $2 AND healed_at IS NULL)`,
      [kind, this.worker],
    );
  }

  /**
   * A deliberately racy read-modify-write of a per-key counter (docs/reliability.md S16): two
   * statements with a sleep between, so any concurrent execution of one key loses an update.
   */
  async racyIncrement(key: string): Promise<void> {
    const rows = await this.read<{ n: number }>(`SELECT n FROM chaos.counters WHERE key = $1`, [
      key,
    ]);
    const read = rows[0]?.n ?? 0;
    await sleep(5);
    await this.write(
      `INSERT INTO chaos.counters (key, n) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET n = EXCLUDED.n`,
      [key, read + 1],
    );
  }
}

/** Creates the ledger schema and triggers (the engine schema must exist). */
export async function createLedger(pool: Pool): Promise<void> {
  await pool.query(LEDGER_DDL);
}
