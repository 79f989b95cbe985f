import {
  bootDashboardApp,
  DASHBOARD_TOKEN,
  type DashboardApp,
  DashChargeFsm,
  TokenGuard,
} from './support/dashboard-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The dashboard's Fairness page (docs/many-tenants.md "Seeing the heads"), browser-free: the
// HTML a request answers lists each fair queue's keys in claim order with their counts and the
// row served next, linked to its instance page; `?queue=` narrows it; an empty page says so.
// The rows live on a queue no node serves, so they stay runnable.

const HEADERS = { 'x-dashboard-token': DASHBOARD_TOKEN };

describe('dashboard: fairness heads page', () => {
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

  const page = async (query = ''): Promise<string> => {
    const r = await fetch(`${host.url}/durable/fairness${query}`, { headers: HEADERS });
    expect(r.status).toBe(200);
    return r.text();
  };

  it('lists the keys of each fair queue with counts and the next row, escaped and linked', async () => {
    expect(await page()).toContain('No queue has a fairness head.');
    const big = await host.engine.insertAll(
      DashChargeFsm,
      Array.from({ length: 3 }, (_, i) => ({
        state: { card: String(i) },
        queue: 'dash-fair',
        fairnessKey: 'tenant-<a>',
      })),
    );
    const small = await host.engine.insert(DashChargeFsm, {
      state: { card: '9' },
      queue: 'dash-fair',
      fairnessKey: 'tenant-b',
      fairnessWeight: 4,
    });
    await host.engine.insert(DashChargeFsm, {
      state: { card: '8' },
      queue: 'dash-other',
      fairnessKey: 'tenant-c',
    });
    const html = await page();
    expect(html).toContain('href="/durable/fairness"');
    expect(html).toContain('Queue dash-fair');
    expect(html).toContain('Queue dash-other');
    // The key is escaped; its next row is linked; the counts are shown.
    expect(html).toContain('data-fairness-key="tenant-&lt;a&gt;"');
    expect(html).toContain(`href="/durable/instances/${big[0]}">#${big[0]}</a>`);
    expect(html).toContain(`href="/durable/instances/${small}">#${small}</a>`);
    expect(html).toMatch(/<td class="num">3<\/td>/);
    expect(html).toMatch(/<td class="num">4<\/td>/); // tenant-b's weight
    expect(html).toContain('2 keys with work, in claim order.');
    const one = await page('?queue=dash-other');
    expect(one).toContain('Queue dash-other');
    expect(one).not.toContain('Queue dash-fair');
  });
});
