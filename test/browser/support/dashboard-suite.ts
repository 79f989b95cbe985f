import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import type { BrowserContext, Page } from 'playwright-core';

import { CONTENT_SECURITY_POLICY } from '../../../lib/dashboard';
import { createTestDatabase, type TestDatabase } from '../../support/test-database';
import { launchChromium, type TestBrowser } from './chromium';
import {
  bootDashboardApp,
  DASHBOARD_TOKEN,
  type DashboardApp,
  latch,
  seedDashboard,
  type Seeded,
} from './dashboard-app';

/**
 * The dashboard in a real browser (docs/design.md §30) on one HTTP adapter: every view renders
 * with data, filters narrow the list, a retry and a cancel from the page change the row, the
 * guard denies pages, API and assets, CSRF is refused, read-only access hides and refuses
 * actions, and no page loads anything from another origin or breaks the CSP.
 */
export function describeDashboard(adapter: 'express' | 'fastify'): void {
  describe(`dashboard in Chromium (${adapter})`, () => {
    // Page loads in a real browser beside another suite on a 2-core machine: generous bounds.
    jest.setTimeout(120_000);
    let db: TestDatabase;
    let host: DashboardApp;
    let browser: TestBrowser;
    let seeded: Seeded;
    let base: string;
    const hold = `hold-${adapter}`;

    beforeAll(async () => {
      db = await createTestDatabase();
      host = await bootDashboardApp(db, adapter);
      base = `${host.url}/durable`;
      seeded = await seedDashboard(host.engine, hold);
      browser = await launchChromium();
    }, 60_000);

    afterAll(async () => {
      latch.open(hold);
      await browser?.close();
      await host?.close();
      await db?.drop();
    });

    /** A browser context that carries the guard's credential (and optionally a read-only role). */
    async function context(role?: 'read'): Promise<BrowserContext> {
      return browser.browser.newContext({
        extraHTTPHeaders: {
          'x-dashboard-token': DASHBOARD_TOKEN,
          ...(role ? { 'x-dashboard-role': role } : {}),
        },
      });
    }

    /** A page that records every request URL and every CSP or script error. */
    async function watched(
      ctx: BrowserContext,
    ): Promise<{ page: Page; urls: string[]; problems: string[] }> {
      const page = await ctx.newPage();
      const urls: string[] = [];
      const problems: string[] = [];
      page.on('request', (r) => urls.push(r.url()));
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(m.text());
      });
      page.on('pageerror', (e) => problems.push(e.message));
      page.on('dialog', (d) => void d.accept());
      return { page, urls, problems };
    }

    const status = async (id: string): Promise<string> =>
      (
        await db.pool.query<{ status: string }>('SELECT status FROM gen_durable WHERE id = $1', [
          id,
        ])
      ).rows[0]!.status;

    it('renders every view with data, loads nothing from another origin and breaks no CSP rule', async () => {
      const ctx = await context();
      const { page, urls, problems } = await watched(ctx);
      const overview = await page.goto(base);
      expect(overview?.status()).toBe(200);
      expect(overview?.headers()['content-security-policy']).toBe(CONTENT_SECURITY_POLICY);
      await page.waitForLoadState('networkidle');
      expect(await page.locator('h1').textContent()).toBe('Overview');
      expect(await page.locator('table.grid').first().textContent()).toContain('dash');

      await page.click('nav a:has-text("Instances")');
      await page.waitForSelector(`tr[data-id="${seeded.failed}"]`);
      expect(await page.locator('#list').textContent()).toContain('declined');

      await page.goto(`${base}/instances/${seeded.tree}`);
      const children = page.locator('#children ul.tree > li');
      expect(await children.count()).toBe(3);
      expect(await page.locator('#why').textContent()).toContain('approve');
      expect(await page.locator('#state').textContent()).toContain('A-1');

      await page.goto(`${base}/instances/${seeded.failed}`);
      // redact replaced the card number wherever state is shown
      expect(await page.locator('#state').textContent()).toContain('••••');
      expect(await page.content()).not.toContain('4242-4242');
      expect(await page.locator('#history').count()).toBe(1);

      await page.goto(`${base}/fsms/dash-order`);
      expect(await page.locator('#graph svg .gd-node').count()).toBeGreaterThanOrEqual(3);
      await page.goto(`${base}/schedules`);
      expect(await page.locator('main').textContent()).toContain('dash-nightly');
      await page.goto(`${base}/limiters`);
      expect(await page.locator('h1').textContent()).toBe('Limiters');
      await page.goto(`${base}/fairness`);
      expect(await page.locator('h1').textContent()).toBe('Fairness');
      await page.goto(`${base}/queues`);
      expect(await page.locator('tr[data-queue="dash"]').count()).toBe(1);

      const origin = new URL(host.url).origin;
      const foreign = urls.filter((u) => !u.startsWith(origin) && !u.startsWith('data:'));
      expect(foreign).toEqual([]);
      expect(problems).toEqual([]);
      await ctx.close();
    });

    it('narrows the list by the filters (htmx swaps the list and pushes the URL)', async () => {
      const ctx = await context();
      const { page, problems } = await watched(ctx);
      await page.goto(`${base}/instances`);
      await page.waitForLoadState('networkidle');
      expect(await page.locator('#list tbody tr').count()).toBeGreaterThanOrEqual(8);
      await page.fill('input[name="fsm"]', 'dash-charge');
      await page.check('input[name="status"][value="failed"]');
      await page.click('button:has-text("Apply filters")');
      await page.waitForURL(/status=failed/);
      await page.waitForFunction("document.querySelectorAll('#list tbody tr').length === 1");
      expect(await page.locator('#list tbody tr').getAttribute('data-id')).toBe(seeded.failed);
      await page.fill('input[name="correlationKeyPrefix"]', 'nothing-has-this-key');
      await page.click('button:has-text("Apply filters")');
      await page.waitForSelector('#list :text("No instance matches.")');
      expect(problems).toEqual([]);
      await ctx.close();
    });

    it('cancels and retries from the page; each changes the row and records the actor', async () => {
      const ctx = await context();
      const { page, problems } = await watched(ctx);
      await page.goto(`${base}/instances/${seeded.parked}`);
      await page.waitForLoadState('networkidle');
      await page.fill('form[action$="/cancel"] input[name="reason"]', 'from the browser');
      await page.click('button:has-text("Cancel instance")');
      await page.waitForSelector('.flash:has-text("1 cancelled")');
      expect(await status(seeded.parked)).toBe('cancelled');
      const reason = await db.pool.query('SELECT cancel_reason FROM gen_durable WHERE id = $1', [
        seeded.parked,
      ]);
      expect(reason.rows[0].cancel_reason).toBe('from the browser');

      const updatedAt = async () =>
        (
          await db.pool.query<{ t: Date }>(
            'SELECT updated_at AS t FROM gen_durable WHERE id = $1',
            [seeded.failed],
          )
        ).rows[0]!.t.getTime();
      const before = await updatedAt();
      await page.goto(`${base}/instances/${seeded.failed}`);
      await page.click('button:has-text("Retry instance")');
      await page.waitForSelector(`.flash:has-text("retried #${seeded.failed}")`);
      // it ran again (and stopped again: its card is still declined)
      const deadline = Date.now() + 10_000;
      while (!((await updatedAt()) > before && (await status(seeded.failed)) === 'failed')) {
        if (Date.now() > deadline) throw new Error('the retried instance did not run again');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(problems).toEqual([]);
      await ctx.close();
    });

    it('holds and releases from the page: the list and the row say held; a POST without the token is refused', async () => {
      const ctx = await context();
      const { page, problems } = await watched(ctx);
      const held = async () =>
        (
          await db.pool.query<{ held: boolean; reason: string | null }>(
            'SELECT held_at IS NOT NULL AS held, held_reason AS reason FROM gen_durable WHERE id = $1',
            [seeded.tree],
          )
        ).rows[0]!;
      const refused = await ctx.request.post(`${base}/instances/${seeded.tree}/hold`, {
        form: { reason: 'no token' },
        headers: { origin: new URL(host.url).origin },
      });
      expect(refused.status()).toBe(403);
      expect((await held()).held).toBe(false);

      await page.goto(`${base}/instances/${seeded.tree}`);
      await page.waitForLoadState('networkidle');
      await page.fill('form[action$="/hold"] input[name="reason"]', 'from the browser');
      await page.click('button:has-text("Hold instance")');
      await page.waitForSelector(`.flash:has-text("held #${seeded.tree}")`);
      expect(await held()).toEqual({ held: true, reason: 'from the browser' });
      expect(await page.locator('table.kv .badge:has-text("held")').count()).toBe(1);
      expect(await page.locator('#why').textContent()).toContain('held since');
      await page.goto(`${base}/instances?fsm=dash-order`);
      await page.waitForSelector(`tr[data-id="${seeded.tree}"]`);
      expect(
        await page.locator(`tr[data-id="${seeded.tree}"] .badge:has-text("held")`).count(),
      ).toBe(1);

      await page.goto(`${base}/instances/${seeded.tree}`);
      await page.click('button:has-text("Release instance")');
      await page.waitForSelector(`.flash:has-text("released #${seeded.tree}")`);
      expect(await held()).toEqual({ held: false, reason: null });
      expect(await status(seeded.tree)).toBe('awaiting_signal');
      // Both buttons recorded their history row (docs/operations-control.md "Hold and release").
      const recorded = await db.pool.query<{ kind: string; reason: string | null }>(
        `SELECT kind, error->>'message' AS reason FROM gen_durable_history
          WHERE instance_id = $1 AND kind IN ('manual.hold', 'manual.release') ORDER BY id`,
        [seeded.tree],
      );
      expect(recorded.rows).toEqual([
        { kind: 'manual.hold', reason: 'from the browser' },
        { kind: 'manual.release', reason: null },
      ]);
      expect(await page.locator('button:has-text("Hold instance")').count()).toBe(1);
      expect(problems).toEqual([]);
      await ctx.close();
    });

    it('shows a parked instance at its wait; the default Retry of one cancelled there parks it again', async () => {
      const ctx = await context();
      const { page, problems } = await watched(ctx);
      const waiting = 'awaiting `approve` → ship';
      await page.goto(`${base}/instances?fsm=dash-order`);
      await page.waitForSelector(`tr[data-id="${seeded.tree}"]`);
      expect(await page.locator(`tr[data-id="${seeded.tree}"] td.step`).textContent()).toBe(
        waiting,
      );
      await page.goto(`${base}/instances/${seeded.tree}`);
      expect(await page.locator('.sub b.position').textContent()).toBe(waiting);

      // Cancelled while parked (the test before cancels it from the page; alone, cancel it here).
      if ((await status(seeded.parked)) !== 'cancelled') await host.engine.cancel(seeded.parked);
      await page.goto(`${base}/instances/${seeded.parked}`);
      expect(
        await page
          .locator('form[action$="/retry"] select[name="step"] option')
          .first()
          .textContent(),
      ).toBe(`its own (${waiting})`);
      await page.click('button:has-text("Retry instance")');
      await page.waitForSelector(`.flash:has-text("retried #${seeded.parked}")`);
      expect(await status(seeded.parked)).toBe('awaiting_signal');
      await page.goto(`${base}/instances/${seeded.parked}`);
      expect(await page.locator('.sub b.position').textContent()).toBe(waiting);

      // The FSM page counts both parked orders at the step they wait to run.
      await page.goto(`${base}/fsms/dash-order`);
      expect(
        await page.locator('tr:has(td:text-is("ship")) td.num').first().textContent(),
      ).toContain('2');
      expect(problems).toEqual([]);
      await ctx.close();
    });

    it('sends a signal, forks with edited state and pauses / resumes a queue from the pages', async () => {
      const ctx = await context();
      const { page, problems } = await watched(ctx);
      await page.goto(`${base}/instances/${seeded.tree}`);
      // a name it does not await: stored in its inbox, the instance stays parked
      await page.fill('form[action$="/signal"] input[name="name"]', 'note');
      await page.fill('form[action$="/signal"] textarea[name="payload"]', '{"by":"browser"}');
      await page.click('button:has-text("Send signal")');
      await page.waitForSelector(`.flash:has-text("signal note delivered to #${seeded.tree}")`);
      const inbox = await db.pool.query<{ payload: unknown }>(
        "SELECT payload FROM gen_durable_signals WHERE target_id = $1 AND name = 'note'",
        [seeded.tree],
      );
      expect(inbox.rows.map((r) => r.payload)).toEqual([{ by: 'browser' }]);

      await page.goto(`${base}/instances/${seeded.done}`);
      await page.fill(
        'form[action$="/fork"] textarea[name="state"]',
        '{"card":"9999","fail":false}',
      );
      await page.click('button:has-text("Fork new instance")');
      await page.waitForSelector(`.flash:has-text("forked #${seeded.done} as #")`);
      const forked = await db.pool.query<{ state: unknown }>(
        'SELECT state FROM gen_durable WHERE forked_from = $1',
        [seeded.done],
      );
      expect(forked.rows.map((r) => r.state)).toEqual([{ card: '9999', fail: false }]);

      const paused = async () =>
        (await db.pool.query("SELECT 1 FROM gen_durable_paused_queues WHERE queue = 'dash'"))
          .rowCount;
      await page.goto(`${base}/queues`);
      await page.fill('tr[data-queue="dash"] input[name="reason"]', 'maintenance');
      await page.click('tr[data-queue="dash"] button:has-text("Pause")');
      await page.waitForSelector('.flash:has-text("queue dash paused")');
      expect(await paused()).toBe(1);
      await page.click('tr[data-queue="dash"] button:has-text("Resume")');
      await page.waitForSelector('.flash:has-text("queue dash resumed")');
      expect(await paused()).toBe(0);
      expect(problems).toEqual([]);
      await ctx.close();
    });

    it('bulk-cancels by the filter after showing the dry-run count', async () => {
      const ctx = await context();
      const { page } = await watched(ctx);
      await page.goto(`${base}/instances?fsm=dash-report&status=runnable`);
      await page.click('a:has-text("Cancel matching…")');
      expect(await page.locator('#matched').textContent()).toBe('1');
      expect(await status(seeded.runnable)).toBe('runnable');
      await page.click('button:has-text("Cancel 1 instance(s)")');
      await page.waitForSelector('.flash:has-text("bulk cancel: 1 matched, 1 changed")');
      expect(await status(seeded.runnable)).toBe('cancelled');
      await ctx.close();
    });

    it('read-only access hides the actions and refuses their POSTs', async () => {
      const ctx = await context('read');
      const { page } = await watched(ctx);
      await page.goto(`${base}/instances/${seeded.tree}`);
      expect(await page.locator('#actions').count()).toBe(0);
      expect(await page.locator('form[method="post"]').count()).toBe(0);
      await page.goto(`${base}/queues`);
      expect(await page.locator('button:has-text("Pause")').count()).toBe(0);
      // a POST with the page's own cookie and token is still refused
      const headers = JSON.parse((await page.getAttribute('body', 'hx-headers')) ?? '{}') as Record<
        string,
        string
      >;
      const token = headers['X-CSRF-Token'];
      const res = await ctx.request.post(`${base}/instances/${seeded.tree}/cancel`, {
        form: { _csrf: token ?? '' },
        headers: { origin: new URL(host.url).origin },
      });
      expect(res.status()).toBe(403);
      expect(await status(seeded.tree)).toBe('awaiting_signal');
      await ctx.close();
    });

    it('refuses a cross-site POST and a POST without the CSRF token (403), nothing changed', async () => {
      // the attacker's page, on another origin, auto-submits a cancel to the dashboard
      const evil: Server = createServer((_req, res) => {
        res.setHeader('Content-Type', 'text/html');
        res.end(
          `<form id="f" method="post" action="${base}/instances/${seeded.tree}/cancel"><input name="reason" value="csrf"></form>` +
            '<script>document.getElementById("f").submit()</script>',
        );
      });
      await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
      try {
        const ctx = await context();
        const page = await ctx.newPage();
        await page.goto(`${base}/instances/${seeded.tree}`); // the victim holds a CSRF cookie
        const answer = page.waitForResponse((r) => r.url().endsWith('/cancel'));
        await page.goto(`http://localhost:${(evil.address() as AddressInfo).port}/`);
        expect((await answer).status()).toBe(403);
        // same origin, the cookie sent, but no token in the form or header
        const res = await ctx.request.post(`${base}/instances/${seeded.tree}/cancel`, {
          form: { reason: 'no token' },
          headers: { origin: new URL(host.url).origin },
        });
        expect(res.status()).toBe(403);
        expect(await status(seeded.tree)).toBe('awaiting_signal');
        await ctx.close();
      } finally {
        await new Promise<void>((resolve) => evil.close(() => resolve()));
      }
    });

    it('answers 403 to a request without the guard credential: pages, API and assets', async () => {
      const anonymous = await browser.browser.newContext();
      const paths = [
        '',
        '/instances',
        `/instances/${seeded.tree}`,
        '/api/overview',
        '/api/instances',
        '/assets/htmx.min.js',
        '/assets/dashboard.css',
      ];
      for (const path of paths) {
        const res = await anonymous.request.get(`${base}${path}`);
        expect([path, res.status()]).toEqual([path, 403]);
      }
      const post = await anonymous.request.post(`${base}/queues/dash/pause`);
      expect(post.status()).toBe(403);
      await anonymous.close();
      const ctx = await context();
      const ok = await ctx.request.get(`${base}/api/instances?fsm=dash-charge`);
      expect(ok.status()).toBe(200);
      const body = (await ok.json()) as { items: { state: { card: string } }[] };
      expect(body.items.length).toBeGreaterThan(0);
      expect(body.items.every((i) => i.state.card === '••••')).toBe(true);
      await ctx.close();
    });
  });
}
