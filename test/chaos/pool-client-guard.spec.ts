import { Client, Pool } from 'pg';

import { guardPoolClients } from '../../lib/db/pool-client-guard';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The open F-CRASH of docs/reliability.md: a pg client checked out by someone who is not
// listening (TypeORM's query runner between its checkout and its listener, or after it removed
// its listener on a first error) emitted 'error' for a killed backend: an uncaught exception.
// guardPoolClients gives every client its pool hands out a listener of its own.

describe('pool client guard', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('without the guard, an error on a checked-out client nobody listens to throws', async () => {
    const pool = new Pool({ connectionString: db.url, max: 1 });
    const client = await pool.connect();
    try {
      expect(() => client.emit('error', new Error('late FATAL'))).toThrow('late FATAL');
    } finally {
      client.release(true);
      await pool.end();
    }
  });

  it('with it, an error on a checked-out client nobody listens to is heard', async () => {
    const pool = new Pool({ connectionString: db.url, max: 1 });
    guardPoolClients(pool);
    guardPoolClients(pool); // once per pool: one listener, not two
    const client = await pool.connect();
    try {
      expect(client.listenerCount('error')).toBe(1);
      expect(() => client.emit('error', new Error('late FATAL'))).not.toThrow();
    } finally {
      client.release(true);
      await pool.end();
    }
  });

  it('a backend killed under a checked-out, idle client leaves the process up and the pool usable', async () => {
    const pool = new Pool({ connectionString: db.url, max: 2 });
    guardPoolClients(pool);
    const client = await pool.connect();
    const admin = new Client({ connectionString: db.url });
    await admin.connect();
    try {
      const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!
        .pid;
      const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      await ended;
      await expect(client.query('SELECT 1')).rejects.toThrow();
      client.release(true);
      expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
    } finally {
      await admin.end();
      await pool.end();
    }
  });
});
