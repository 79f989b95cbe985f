import { launchChromium, type TestBrowser } from './support/chromium';
import {
  bootDashboardApp,
  DASHBOARD_TOKEN,
  type DashboardApp,
  DashChargeFsm,
  DashReportFsm,
  TokenGuard,
} from './support/dashboard-app';
import { StatsSnapshot } from '../../lib/runtime/stats-snapshot';
import { Telemetry } from '../../lib/telemetry/telemetry';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The dashboard under a host's global prefix (`app.setGlobalPrefix('admin')`) and mounted twice
// in one app (docs/dashboard.md "Mounting"): /admin/durable read-only, /admin/ops with actions.
// Each mount's links, assets, htmx requests and CSRF-protected POSTs stay under its own base.

const ORIGIN_HEADERS = { 'x-dashboard-token': DASHBOARD_TOKEN };

/** Every URL attribute a page carries (href, src, action, hx-get / hx-post). */
function urlsOf(page: string): string[] {
  const out: string[] = [];
  for (const m of page.matchAll(/\s(?:href|src|action|hx-get|hx-post)="([^"]*)"/g)) {
    out.push(m[1]!.replace(/&amp;/g, '&'));
  }
  return out;
}

describe('dashboard under a global prefix, mounted twice', () => {
  jest.setTimeout(120_000);
  let db: TestDatabase;
  let host: DashboardApp;
  let failed: string;
  let runnable: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    host = await bootDashboardApp(db, 'express', {
      globalPrefix: 'admin',
      engine: { stats: false }, // the overview test writes the one snapshot itself
      mounts: [
        { path: 'durable', guards: [TokenGuard] },
        { path: 'ops', guards: [TokenGuard], access: () => 'all', actor: () => 'ops-user' },
      ],
    });
    failed = await host.engine.insert(DashChargeFsm, {
      state: { card: '4242', fail: true },
      rateLimit: 'charge',
    });
    runnable = await host.engine.insert(DashReportFsm, { state: {}, scheduleIn: 3_600_000 });
    const deadline = Date.now() + 15_000;
    while ((await host.engine.get(failed))?.status !== 'failed') {
      if (Date.now() > deadline) throw new Error('the charge did not fail');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }, 60_000);

  afterAll(async () => {
    await host?.close();
    await db?.drop();
  });

  const get = (path: string, headers: Record<string, string> = {}) =>
    fetch(`${host.url}${path}`, { headers: { ...ORIGIN_HEADERS, ...headers }, redirect: 'manual' });

  it('the overview counts live (capped) until a snapshot is stored, then reads the snapshot and says how old it is', async () => {
    interface OverviewJson {
      source: string;
      ageMs: number;
      queues: { queue: string; counts: Record<string, { count: number } | null> }[];
    }
    const overview = async () =>
      (await (await get('/admin/durable/api/overview')).json()) as OverviewJson;
    const live = await overview();
    expect(live.source).toBe('live');
    const dash = live.queues.find((q) => q.queue === 'dash')!;
    expect(dash.counts['runnable']).toMatchObject({ count: 1, capped: false });
    expect(dash.counts['awaitingSignal']).toMatchObject({ count: 0, capped: false });
    expect(dash.counts['done']).toBeNull();
    expect(await (await get('/admin/durable')).text()).toContain('No stats snapshot is stored yet');

    const written = await new StatsSnapshot(
      host.engine.runtime.sql,
      { interval: 60_000, retention: 86_400_000, cap: 10_000 },
      new Telemetry('test'),
    ).take();
    expect(written).toContain('dash');
    // the next row counted from now on changes nothing the overview shows: it reads the snapshot
    const extra = await host.engine.insert(DashReportFsm, { state: {}, scheduleIn: 3_600_000 });
    const snap = await overview();
    expect(snap.source).toBe('snapshot');
    expect(snap.ageMs).toBeGreaterThanOrEqual(0);
    expect(snap.ageMs).toBeLessThan(120_000);
    const counted = snap.queues.find((q) => q.queue === 'dash')!;
    expect(counted.counts['runnable']).toEqual({ count: 1, capped: false });
    expect(counted.counts['scheduled']).toEqual({ count: 1, capped: false });
    expect(counted.counts['done']).toEqual({ count: 0, capped: false });
    const page = await (await get('/admin/durable')).text();
    expect(page).toMatch(/Counts from the stats snapshot of \d\d:\d\d UTC, [^<]* old/);
    await db.pool.query('DELETE FROM gen_durable WHERE id = $1', [extra]);
  });

  it.each([
    ['/admin/durable', 'read only'],
    ['/admin/ops', 'read &amp; act'],
  ])('every link, asset and form of %s stays under it and answers', async (base, access) => {
    const pages = ['', '/instances', `/instances/${failed}`, '/fsms', '/fsms/dash-charge'];
    const seen = new Set<string>();
    for (const page of pages) {
      const res = await get(`${base}${page}`);
      expect([page, res.status]).toEqual([page, 200]);
      const body = await res.text();
      expect(body).toContain(access);
      for (const url of urlsOf(body)) {
        if (url.startsWith('data:')) continue;
        expect([page, url.startsWith(`${base}/`) || url === base]).toEqual([page, true]);
        seen.add(url);
      }
    }
    for (const url of [...seen].filter((u) => !u.includes('/cancel') && !u.includes('/retry'))) {
      if (/\/(fork|signal|pause|resume|purge)$/.test(url) || url.endsWith('/bulk')) continue;
      const res = await get(url);
      expect([url, res.status]).toEqual([url, 200]);
    }
    expect(seen.has(`${base}/assets/htmx.min.js`)).toBe(true);
    expect(seen.has(`${base}/assets/dashboard.css`)).toBe(true);
    expect(seen.has(`${base}/api/overview`)).toBe(false); // the pages link no API
    expect((await get(`${base}/api/overview`)).status).toBe(200);
  });

  it('answers an htmx request of the filtered list under the mount', async () => {
    const res = await get('/admin/ops/instances?fsm=dash-charge&status=failed', {
      'hx-request': 'true',
      'hx-current-url': `${host.url}/admin/ops/instances`,
    });
    expect(res.status).toBe(200);
    const body = await res.text();
    expect(body).toContain(`data-id="${failed}"`);
    expect(body).not.toContain(`data-id="${runnable}"`);
    expect(body).toContain('action="/admin/ops/instances"');
  });

  it("scopes each mount's CSRF cookie to its base; a POST passes on /ops and is refused on the read-only mount", async () => {
    const page = await get('/admin/ops/queues');
    const cookie = page.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^gd_dashboard_csrf=[A-Za-z0-9_-]{43}; Path=\/admin\/ops;/);
    const token = cookie.slice(cookie.indexOf('=') + 1, cookie.indexOf(';'));
    const readOnly = (await get('/admin/durable/queues')).headers.get('set-cookie') ?? '';
    expect(readOnly).toMatch(/; Path=\/admin\/durable;/);

    const post = (path: string, form: Record<string, string>, headers = {}) =>
      fetch(`${host.url}${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          ...ORIGIN_HEADERS,
          origin: host.url,
          cookie: `gd_dashboard_csrf=${token}`,
          'content-type': 'application/x-www-form-urlencoded',
          ...headers,
        },
        body: new URLSearchParams(form).toString(),
      });
    const paused = async () =>
      (await db.pool.query("SELECT 1 FROM gen_durable_paused_queues WHERE queue = 'dash'"))
        .rowCount;

    // the form's field, as a plain form post sends it
    const pause = await post('/admin/ops/queues/dash/pause', { _csrf: token, reason: 'ops' });
    expect(pause.status).toBe(303);
    const location = pause.headers.get('location') ?? '';
    expect(location).toMatch(/^\/admin\/ops\/queues\?flash=/);
    expect(await paused()).toBe(1);
    const shown = await (await get(location, { cookie: `gd_dashboard_csrf=${token}` })).text();
    expect(shown).toContain('queue dash paused');

    // the header, as htmx sends it
    const resume = await post('/admin/ops/queues/dash/resume', {}, { 'x-csrf-token': token });
    expect(resume.status).toBe(303);
    expect(await paused()).toBe(0);

    // the read-only mount refuses the same POST; a missing token is refused on /ops
    expect((await post('/admin/durable/queues/dash/pause', { _csrf: token })).status).toBe(403);
    expect(
      (await post('/admin/ops/queues/dash/pause', {}, { cookie: 'gd_dashboard_csrf=' })).status,
    ).toBe(403);
    expect(await paused()).toBe(0);

    // the action's history row carries the /ops mount's actor
    const retry = await post(`/admin/ops/instances/${failed}/retry`, { _csrf: token });
    expect(retry.status).toBe(303);
    expect(retry.headers.get('location')).toMatch(
      new RegExp(`^/admin/ops/instances/${failed}\\?flash=`),
    );
    const history = await host.engine.history(failed, { limit: 10 });
    expect(history.find((h) => h.kind === 'manual.retry')?.actor).toBe('ops-user');
  });

  it('purges an ended instance from its page and the ended matches of a filter after a dry run, with the mount actor; a live one is refused', async () => {
    const page = await get('/admin/ops/queues');
    const cookie = page.headers.get('set-cookie') ?? '';
    const token = cookie.slice(cookie.indexOf('=') + 1, cookie.indexOf(';'));
    const post = (path: string, form: Record<string, string>) =>
      fetch(`${host.url}${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          ...ORIGIN_HEADERS,
          origin: host.url,
          cookie: `gd_dashboard_csrf=${token}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams(form).toString(),
      });
    const purged: { id: string; actor: string | null }[] = [];
    const subscription = host.engine.events$.subscribe((e) => {
      if (e.event === 'instance:purged') {
        purged.push({ id: String(e.metadata['id']), actor: e.metadata['actor'] as string | null });
      }
    });
    try {
      const ids: string[] = [];
      for (const k of [1, 2, 3]) {
        ids.push(
          await host.engine.insert(DashChargeFsm, {
            state: { card: '4000', fail: true },
            correlationKey: `purge-${k}`,
          }),
        );
      }
      const live = await host.engine.insert(DashReportFsm, {
        state: {},
        correlationKey: 'purge-live',
        scheduleIn: 3_600_000,
      });
      const deadline = Date.now() + 15_000;
      for (const id of ids) {
        while ((await host.engine.get(id))?.status !== 'failed') {
          if (Date.now() > deadline) throw new Error('the charge did not fail');
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      }

      // the instance page offers Purge on an ended instance only, and only on the acting mount
      const [one, ...rest] = ids;
      expect(await (await get(`/admin/ops/instances/${one}`)).text()).toContain(
        `action="/admin/ops/instances/${one}/purge"`,
      );
      expect(await (await get(`/admin/ops/instances/${live}`)).text()).not.toContain('/purge"');
      expect(await (await get(`/admin/durable/instances/${one}`)).text()).not.toContain('/purge"');

      const single = await post(`/admin/ops/instances/${one}/purge`, { _csrf: token });
      expect(single.status).toBe(303);
      expect(single.headers.get('location')).toMatch(/^\/admin\/ops\/instances\?flash=/);
      expect(await host.engine.get(one!)).toBeNull();
      expect(purged).toEqual([{ id: one, actor: 'ops-user' }]);

      const refused = await post(`/admin/ops/instances/${live}/purge`, { _csrf: token });
      const shown = await (
        await get(refused.headers.get('location') ?? '', { cookie: `gd_dashboard_csrf=${token}` })
      ).text();
      expect(shown).toContain('is runnable');
      expect((await host.engine.get(live))?.status).toBe('runnable');
      expect(
        (await post(`/admin/durable/instances/${rest[0]}/purge`, { _csrf: token })).status,
      ).toBe(403);

      // bulk: the dry run counts the ended matches, the confirmed POST deletes them
      const dry = await (
        await get('/admin/ops/bulk?action=purge&correlationKeyPrefix=purge-')
      ).text();
      expect(dry).toContain('<b id="matched">2</b>');
      expect(dry).toContain('Purge 2 instance(s)');
      expect(await host.engine.get(rest[0]!)).not.toBeNull();
      const bulk = await post('/admin/ops/bulk', {
        _csrf: token,
        action: 'purge',
        correlationKeyPrefix: 'purge-',
      });
      expect(bulk.status).toBe(303);
      const flash = await (
        await get(bulk.headers.get('location') ?? '', { cookie: `gd_dashboard_csrf=${token}` })
      ).text();
      expect(flash).toContain('bulk purge: 2 matched, 2 changed');
      for (const id of rest) expect(await host.engine.get(id)).toBeNull();
      expect(purged.slice(1).map((p) => p.actor)).toEqual(['ops-user', 'ops-user']);
      expect((await host.engine.get(live))?.status).toBe('runnable');
      // gone again, so the other tests see the dash-report rows they made
      await host.engine.cancel(live);
      await host.engine.purge(live);
    } finally {
      subscription.unsubscribe();
    }
  });

  it("mounts twice under Nest's 'deep-hash' module identity too (mounts differing only in path)", async () => {
    const other = await bootDashboardApp(db, 'express', {
      globalPrefix: 'admin',
      moduleIds: 'deep-hash',
      engine: { name: 'second', queues: {} }, // a second engine in this process, no worker
      mounts: [
        { path: 'one', engine: 'second', guards: [TokenGuard] },
        { path: 'two', engine: 'second', guards: [TokenGuard] },
      ],
    });
    try {
      for (const base of ['/admin/one', '/admin/two']) {
        const res = await fetch(`${other.url}${base}/instances`, { headers: ORIGIN_HEADERS });
        expect([base, res.status]).toEqual([base, 200]);
        const body = await res.text();
        expect(body).toContain(`href="${base}/fsms"`);
        expect(body).toContain('engine <b>second</b>');
      }
    } finally {
      await other.close();
    }
  });

  describe('in Chromium', () => {
    let browser: TestBrowser;
    beforeAll(async () => {
      browser = await launchChromium();
    });
    afterAll(async () => {
      await browser?.close();
    });

    it('filters (htmx), navigates and cancels under /admin/ops; /admin/durable shows no actions', async () => {
      const ctx = await browser.browser.newContext({ extraHTTPHeaders: ORIGIN_HEADERS });
      const page = await ctx.newPage();
      const urls: string[] = [];
      const problems: string[] = [];
      page.on('request', (r) => {
        if (!r.url().startsWith('data:')) urls.push(new URL(r.url()).pathname);
      });
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(m.text());
      });
      page.on('pageerror', (e) => problems.push(e.message));
      page.on('dialog', (d) => void d.accept());

      await page.goto(`${host.url}/admin/ops/instances`);
      await page.waitForLoadState('networkidle');
      await page.fill('input[name="fsm"]', 'dash-report');
      await page.click('button:has-text("Apply filters")');
      await page.waitForURL(/\/admin\/ops\/instances\?.*fsm=dash-report/);
      await page.waitForFunction("document.querySelectorAll('#list tbody tr').length === 1");
      await page.click(`#list tr[data-id="${runnable}"] a[href$="/instances/${runnable}"]`);
      await page.waitForURL(new RegExp(`/admin/ops/instances/${runnable}$`));
      await page.fill('form[action$="/cancel"] input[name="reason"]', 'under a prefix');
      await page.click('button:has-text("Cancel instance")');
      await page.waitForSelector('.flash:has-text("1 cancelled")');
      expect(page.url()).toMatch(new RegExp(`/admin/ops/instances/${runnable}\\?flash=`));
      expect((await host.engine.get(runnable))?.status).toBe('cancelled');

      await page.click('nav a:has-text("Queues")');
      await page.waitForURL(/\/admin\/ops\/queues$/);
      await page.goto(`${host.url}/admin/durable/instances/${failed}`);
      expect(await page.locator('.who').textContent()).toContain('read only');
      expect(await page.locator('form[method="post"]').count()).toBe(0);

      expect(
        urls.filter((u) => !u.startsWith('/admin/ops') && !u.startsWith('/admin/durable')),
      ).toEqual([]);
      expect(problems).toEqual([]);
      await ctx.close();
    });
  });
});
