import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  type INestApplication,
} from '@nestjs/common';
import request from 'supertest';

import { launchChromium, type TestBrowser } from './support/chromium';
import { bootDashboardApp, type DashboardApp } from './support/dashboard-app';
import type { DashboardRequest } from '../../lib/dashboard';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The dashboard behind a host guard that sets its own cookie (docs/dashboard.md "Guards"): the
// pattern of the sample's demo guard, where `?token=` on the first visit sets a session cookie
// and later requests (the stylesheet, htmx, every link) carry that cookie instead. The
// dashboard's CSRF cookie is issued on that same first answer and must be added beside the
// guard's cookie, not replace it: on Express `res.header('Set-Cookie')` replaces what
// `res.cookie()` appended, so the page opened unstyled (its assets 403) and its links 403.

const TOKEN = 'host-cookie-token';
const SESSION = 'host_session';

interface CookieReply {
  /** Express's `res.cookie` (appends a Set-Cookie header); Fastify's reply has none. */
  cookie?(name: string, value: string, options: Record<string, unknown>): unknown;
  header(name: string, value: string): unknown;
}

/** Accepts `?token=` (and then sets the session cookie) or the session cookie. */
@Injectable()
class SessionCookieGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const req = http.getRequest<DashboardRequest>();
    const query = req['query'] as Record<string, unknown> | undefined;
    if (query?.['token'] === TOKEN) {
      const res = http.getResponse<CookieReply>();
      if (typeof res.cookie === 'function') {
        res.cookie(SESSION, TOKEN, { path: '/', httpOnly: true, sameSite: 'strict' });
      } else {
        res.header('Set-Cookie', `${SESSION}=${TOKEN}; Path=/; HttpOnly; SameSite=Strict`);
      }
      return true;
    }
    const cookie = req.headers['cookie'];
    return typeof cookie === 'string' && cookie.split(/;\s*/).includes(`${SESSION}=${TOKEN}`);
  }
}

/** The Set-Cookie headers of a supertest answer, as an array. */
function setCookies(headers: Record<string, unknown>): string[] {
  const value = headers['set-cookie'];
  if (Array.isArray(value)) return value.map(String);
  return typeof value === 'string' ? [value] : [];
}

describe("the dashboard keeps the cookies a host's guard sets", () => {
  jest.setTimeout(120_000);
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  }, 60_000);

  afterAll(async () => {
    await db?.drop();
  });

  describe.each(['express', 'fastify'] as const)('over HTTP on %s', (adapter) => {
    let host: DashboardApp;
    let app: INestApplication;

    beforeAll(async () => {
      host = await bootDashboardApp(db, adapter, {
        engine: { stats: false },
        mounts: [{ guards: [SessionCookieGuard], access: () => 'all' }],
      });
      app = host.app;
    }, 60_000);

    afterAll(async () => {
      await host?.close();
    });

    it("a first visit's answer carries the guard's cookie and the CSRF cookie", async () => {
      const first = await request(app.getHttpServer()).get(`/durable?token=${TOKEN}`).expect(200);
      const cookies = setCookies(first.headers);
      expect(cookies).toHaveLength(2);
      expect(cookies.find((c) => c.startsWith(`${SESSION}=`))).toMatch(
        new RegExp(`^${SESSION}=${TOKEN}; Path=/;`),
      );
      expect(cookies.find((c) => c.startsWith('gd_dashboard_csrf='))).toMatch(
        /^gd_dashboard_csrf=[A-Za-z0-9_-]{43}; Path=\/durable; HttpOnly; SameSite=Strict$/,
      );
      // with the guard's cookie alone (what the browser sends for the stylesheet next)
      const css = await request(app.getHttpServer())
        .get('/durable/assets/dashboard.css')
        .set('cookie', `${SESSION}=${TOKEN}`)
        .expect(200);
      expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
      expect(css.headers['cache-control']).toBe('private, max-age=300');
      expect(css.text).toContain('header.top');
    });
  });

  describe('in Chromium on Express, a first visit in a fresh profile', () => {
    let host: DashboardApp;
    let browser: TestBrowser;

    beforeAll(async () => {
      host = await bootDashboardApp(db, 'express', {
        engine: { stats: false },
        mounts: [{ guards: [SessionCookieGuard], access: () => 'all' }],
      });
      browser = await launchChromium();
    }, 60_000);

    afterAll(async () => {
      await browser?.close();
      await host?.close();
    });

    it('opens …/durable?token= styled (assets 200), its links answer 200 and an action passes CSRF', async () => {
      const ctx = await browser.browser.newContext();
      expect(await ctx.cookies()).toEqual([]);
      const page = await ctx.newPage();
      const statuses = new Map<string, number>();
      page.on('response', (r) => statuses.set(new URL(r.url()).pathname, r.status()));
      page.on('dialog', (d) => void d.accept());

      const first = await page.goto(`${host.url}/durable?token=${TOKEN}`);
      expect(first?.status()).toBe(200);
      await page.waitForLoadState('networkidle');
      expect(statuses.get('/durable/assets/dashboard.css')).toBe(200);
      expect(statuses.get('/durable/assets/htmx.min.js')).toBe(200);
      // the stylesheet applies: the header bar is a dark flex row
      // (a string, evaluated in the page: tsconfig has no DOM types)
      const header = await page.evaluate<string[]>(
        "(() => { const s = getComputedStyle(document.querySelector('header.top')); return [s.display, s.backgroundColor]; })()",
      );
      expect(header).toEqual(['flex', 'rgb(29, 35, 48)']);
      expect((await ctx.cookies()).map((c) => c.name).sort()).toEqual([
        'gd_dashboard_csrf',
        SESSION,
      ]);

      await page.click('nav a:has-text("Queues")');
      await page.waitForURL(`${host.url}/durable/queues`);
      expect(statuses.get('/durable/queues')).toBe(200);
      expect(await page.locator('h1').textContent()).toBe('Queues');

      await page.click('tr[data-queue="dash"] button:has-text("Pause")');
      await page.waitForSelector('.flash:has-text("queue dash paused")');
      await ctx.close();
    });
  });
});
