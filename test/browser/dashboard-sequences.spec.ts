import {
  bootDashboardApp,
  DASHBOARD_TOKEN,
  type DashboardApp,
  DashChargeFsm,
  TokenGuard,
} from './support/dashboard-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The dashboard's Sequences page (docs/sequences.md "Seeing held keys"), browser-free: the
// HTML a request answers lists each key held by its head, with the head's status and error,
// linked to the head's instance page; an empty page says so.

const HEADERS = { 'x-dashboard-token': DASHBOARD_TOKEN };

describe('dashboard: blocked sequences page', () => {
  jest.setTimeout(120_000);
  let db: TestDatabase;
  let host: DashboardApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    host = await bootDashboardApp(db, 'express', {
      mounts: [{ path: 'durable', guards: [TokenGuard] }],
    });
  }, 60_000);
  afterAll(async () => {
    await host?.close();
    await db?.drop();
  });

  const page = async (): Promise<string> => {
    const r = await fetch(`${host.url}/durable/sequences`, { headers: HEADERS });
    expect(r.status).toBe(200);
    return r.text();
  };

  it('lists a key held by its failed head, then none once the head is skipped', async () => {
    expect(await page()).toContain('No sequence key has instances waiting.');
    const head = await host.engine.insert(DashChargeFsm, {
      state: { card: '1', fail: true },
      sequenceKey: 'acct-<7>',
    });
    const next = await host.engine.insert(DashChargeFsm, {
      state: { card: '2' },
      sequenceKey: 'acct-<7>',
    });
    const deadline = Date.now() + 15_000;
    while ((await host.engine.get(head))?.status !== 'failed') {
      if (Date.now() > deadline) throw new Error('the head did not fail');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const html = await page();
    // The key is escaped; the head is linked; its status, step, waiting count and error shown.
    expect(html).toContain('data-sequence="acct-&lt;7&gt;"');
    expect(html).toContain(`href="/durable/instances/${head}">#${head}</a>`);
    expect(html).toMatch(/<span class="badge">failed<\/span>/);
    expect(html).toContain('card declined');
    expect(html).toMatch(/<td class="num">1<\/td>/);
    expect(html).toContain('href="/durable/sequences"');
    expect((await host.engine.get(next))?.status).toBe('runnable');
    await host.engine.skipSequenceHead(head);
    expect(await host.engine.await(next, { until: 'terminal', timeout: 15_000 })).toMatchObject({
      kind: 'done',
    });
    expect(await page()).toContain('No sequence key has instances waiting.');
  });
});
