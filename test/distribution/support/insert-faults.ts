import type { TestDatabase } from '../../support/test-database';

/**
 * Test-only faults on the instance table of `db` (real PostgreSQL behaviour, no mock): a
 * BEFORE INSERT trigger that raises for a row whose state has a `poison` key, and sleeps for
 * `slow` seconds for a row whose state has a `slow` key — so a test can fail a whole insert
 * statement, or hold one open long enough to kill its backend.
 */
export async function installInsertFaults(db: TestDatabase, schema = 'public'): Promise<void> {
  await db.pool.query(`
    CREATE OR REPLACE FUNCTION "${schema}".test_insert_faults() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.state ? 'poison' THEN
        RAISE EXCEPTION 'test fault: poisoned row %', NEW.state->>'poison';
      END IF;
      IF NEW.state ? 'slow' THEN
        PERFORM pg_sleep((NEW.state->>'slow')::float8);
      END IF;
      RETURN NEW;
    END $$`);
  await db.pool.query(`
    CREATE OR REPLACE TRIGGER test_insert_faults BEFORE INSERT ON "${schema}".gen_durable
      FOR EACH ROW EXECUTE FUNCTION "${schema}".test_insert_faults()`);
}

/**
 * Terminates the backend of `db` sleeping in the `slow` fault (waits until one is), as a crash
 * of that connection mid-statement would. Resolves with the pid terminated.
 */
export async function killSleepingInsert(db: TestDatabase, timeoutMs = 10_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows = (
      await db.pool.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'PgSleep' AND pid <> pg_backend_pid()`,
        [db.name],
      )
    ).rows;
    const victim = rows[0];
    if (victim) {
      await db.pool.query('SELECT pg_terminate_backend($1)', [victim.pid]);
      return victim.pid;
    }
    if (Date.now() > deadline) {
      throw new Error(`no insert sleeping in the slow fault within ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Rows whose state.tag equals `tag`. */
export async function countTagged(
  db: TestDatabase,
  tag: string,
  schema = 'public',
): Promise<number> {
  const rows = (
    await db.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM "${schema}".gen_durable WHERE state->>'tag' = $1`,
      [tag],
    )
  ).rows;
  return Number(rows[0]?.n ?? 0);
}
