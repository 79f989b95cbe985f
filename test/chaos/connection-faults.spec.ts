import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Finding F-R1 (docs/reliability.md): a backend terminated while an engine client is checked
// out but between statements (inside a flush transaction; or a FATAL arriving in the same TCP
// chunk as the previous ReadyForQuery) makes node-postgres emit 'error' on the client. The
// pool listens only on idle clients, so without a listener of the engine's own the event is
// an uncaught exception and the whole worker process dies — found by the R1 chaos run
// (`pg_terminate_backend` sweep and immediate Postgres restart: docs/reliability.md S10, S12).

const ROOT = path.resolve(__dirname, '../..');

describe('connection faults inside an engine transaction', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('S12: a backend terminated between two statements, or while its new connection is handed over, rejects — never crashes the process', () => {
    const child = spawnSync(
      process.execPath,
      [
        '-r',
        path.join(ROOT, 'test/support/ts-register.cjs'),
        path.join(__dirname, 'support/terminate-child.ts'),
      ],
      {
        env: { ...process.env, GD_TERMINATE_URL: db.url },
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    expect({
      status: child.status,
      stderr: child.stderr.split('\n').slice(0, 3).join('\n'),
    }).toEqual({ status: 0, stderr: '' });
    const report = JSON.parse(child.stdout.trim()) as {
      answer: string;
      poolWorks: boolean;
      handoverAnswer: string;
      handoverPoolWorks: boolean;
    };
    expect(report.answer).toMatch(/^rejected: /);
    expect(report.poolWorks).toBe(true);
    // The fresh client terminated in the chunk that made it ready: rejected, not a crash.
    expect(report.handoverAnswer).toMatch(/^rejected: /);
    expect(report.handoverPoolWorks).toBe(true);
  });
});
