import { Test } from '@nestjs/testing';
import { DataSource } from 'typeorm';

import { done, DurableFsm, EngineService, GenDurableModule, Step } from '../../lib';
import { FAST } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { OutageProxy } from './support/outage-proxy';

// Boot rides out a database blip (docs/operations.md, "Boot"): the engine's boot statements
// retry connection-level errors for up to `bootTimeout`, so a database that is unreachable for
// a moment while the host boots delays the boot instead of failing it. The outage is played by
// a proxy between the engine's DataSource and the real server: every connection is dropped and
// new ones are closed on accept, then the proxy forwards again.

@DurableFsm({ name: 'blip-job', queue: 'blip' })
class BlipJob {
  @Step() start() {
    return done({ ran: true });
  }
}

describe('boot during a database outage', () => {
  let db: TestDatabase;
  let proxy: OutageProxy;
  const opened: DataSource[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    proxy = await OutageProxy.start(Number(new URL(db.url).port || 5432));
  });
  afterAll(async () => {
    for (const ds of opened) if (ds.isInitialized) await ds.destroy();
    await proxy.close();
    await db.drop();
  });

  async function compiled(bootTimeout: number) {
    const dataSource = new DataSource({ type: 'postgres', url: proxy.urlFor(db.url), poolSize: 5 });
    await dataSource.initialize();
    opened.push(dataSource);
    return Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({ dataSource, ...FAST, queues: { blip: 2 }, bootTimeout }),
      ],
      providers: [BlipJob],
    }).compile();
  }

  it('boots once the database is back (2 s outage) and runs work', async () => {
    const moduleRef = await compiled(30_000);
    proxy.down();
    let upAt = 0;
    const back = new Promise<void>((resolve) =>
      setTimeout(() => {
        upAt = Date.now();
        proxy.up();
        resolve();
      }, 2_000),
    );
    try {
      await moduleRef.init();
      const bootedAt = Date.now();
      await back;
      // Boot could not have finished while every connection was refused.
      expect(bootedAt).toBeGreaterThanOrEqual(upAt);
      const engine = moduleRef.get(EngineService);
      const id = await engine.insert(BlipJob, {});
      const answer = await engine.await(id, { timeout: 20_000 });
      expect(answer).toMatchObject({ kind: 'done', result: { ran: true } });
    } finally {
      proxy.up();
      await moduleRef.close();
    }
  });

  it('gives up after bootTimeout with the connection error when the outage lasts longer', async () => {
    const moduleRef = await compiled(300);
    proxy.down();
    try {
      await expect(moduleRef.init()).rejects.toThrow(/Connection terminated|ECONNRESET|connect/i);
    } finally {
      proxy.up();
      await moduleRef.close().catch(() => undefined);
    }
  });
});
