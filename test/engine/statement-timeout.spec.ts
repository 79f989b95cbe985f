import { Client } from 'pg';

import { done, DurableFsm, type GenDurableEvent, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

let release: (() => void) | undefined;
const started: string[] = [];

@DurableFsm({ name: 'held-step' })
class HeldFsm {
  @Step() async start(ctx: StepContext) {
    started.push(ctx.id);
    await new Promise<void>((resolve) => (release = resolve));
    return done({ ok: true });
  }
}

// docs/design.md §26.4: no hung connections. A flush stuck behind a foreign row lock gives up at the
// client-side statementTimeout (retried, then flush:error), instead of hanging the flusher;
// the row stays executing for the reaper and commits once the lock is gone.
describe('statementTimeout', () => {
  let db: TestDatabase;
  let t: Harness;
  const events: GenDurableEvent[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [HeldFsm], {
      statementTimeout: 300,
      reaper: false,
      queues: { default: 1 },
    });
    t.engine.events$.subscribe((e) => events.push(e));
  });
  afterAll(async () => {
    release?.();
    await t.close();
    await db.drop();
  });

  it('bounds a flush blocked by a foreign lock; the row stays executing', async () => {
    const id = await t.engine.insert(HeldFsm);
    await eventually(async () => started.includes(id));
    const locker = new Client({ connectionString: db.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT id FROM gen_durable WHERE id = $1 FOR UPDATE', [id]);
      release?.();
      const failed = await eventually(
        async () => events.find((e) => e.event === 'flush:error'),
        15_000,
      );
      expect(String(failed.metadata['error'])).toMatch(/timeout/i);
      const row = await db.pool.query(`SELECT status, locked_by FROM gen_durable WHERE id = $1`, [
        id,
      ]);
      expect(row.rows[0]).toMatchObject({ status: 'executing' });
      expect(row.rows[0].locked_by).not.toBeNull();
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
  });
});
