import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

import { ForbiddenException } from '@nestjs/common';
import { stringifySetCookie } from 'cookie';

import type { DashboardRequest } from './dashboard-options';
import {
  appendSetCookie,
  bodyOf,
  cookiesOf,
  type DashboardResponse,
  headerOf,
} from './http-exchange';

/** The cookie holding a browser's CSRF token. */
export const CSRF_COOKIE = 'gd_dashboard_csrf';
/** The form field carrying the token. */
export const CSRF_FIELD = '_csrf';
/** The header carrying the token (htmx sends it on every request, from `hx-headers`). */
export const CSRF_HEADER = 'x-csrf-token';

const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/**
 * The dashboard's CSRF defence (docs/design.md §30): every action is a POST that must
 * (1) carry no foreign `Origin` (or, without one, no foreign `Referer`), and (2) present the
 * browser's token both in its cookie and in the form field or header (double submit: another
 * site can make the browser send the cookie, but cannot read it to put it in the form). The
 * cookie is `HttpOnly`, `SameSite=Strict` and scoped to the dashboard's path; the token is
 * random per browser, so it is valid on every process behind a load balancer.
 */
export class CsrfProtection {
  /**
   * The browser's token, issuing one when it has none: its cookie is added to `res` beside any
   * the host's guards or middleware set in the same request (a guard that sets its session
   * cookie on the first visit keeps it).
   */
  tokenFor(req: DashboardRequest, res: DashboardResponse, basePath: string): string {
    const current = cookiesOf(req).get(CSRF_COOKIE);
    if (current !== undefined && TOKEN.test(current)) return current;
    const token = randomBytes(32).toString('base64url');
    appendSetCookie(
      res,
      stringifySetCookie(CSRF_COOKIE, token, {
        path: basePath === '' ? '/' : basePath,
        httpOnly: true,
        sameSite: 'strict',
        secure: headerOf(req, 'x-forwarded-proto') === 'https',
      }),
    );
    return token;
  }

  /** Throws 403 unless the POST is same-origin (when it says) and carries the cookie's token. */
  verify(req: DashboardRequest): void {
    const host = headerOf(req, 'host');
    const origin = headerOf(req, 'origin');
    const referer = headerOf(req, 'referer');
    const claimed = origin ?? referer;
    if (claimed !== undefined && !sameHost(claimed, host)) {
      throw new ForbiddenException('cross-origin request refused (CSRF)');
    }
    const cookie = cookiesOf(req).get(CSRF_COOKIE);
    const field = bodyOf(req)[CSRF_FIELD];
    const sent = headerOf(req, CSRF_HEADER) ?? (typeof field === 'string' ? field : undefined);
    if (cookie === undefined || sent === undefined || !TOKEN.test(cookie) || !equal(cookie, sent)) {
      throw new ForbiddenException('missing or wrong CSRF token');
    }
  }
}

function sameHost(url: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    return new URL(url).host === host;
  } catch {
    return false; // 'null' (an opaque origin) or garbage
  }
}

function equal(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Signs short texts (the message shown after an action's redirect) with a per-process key. */
export class FlashSigner {
  private readonly key = randomBytes(32);

  sign(message: string): string {
    const body = Buffer.from(message.slice(0, 500)).toString('base64url');
    return `${body}.${this.mac(body)}`;
  }

  /** The message, or undefined when the text was not signed here (another process, tampering). */
  open(signed: string | undefined): string | undefined {
    if (signed === undefined) return undefined;
    const [body, mac] = signed.split('.');
    if (body === undefined || mac === undefined || !equal(mac, this.mac(body))) return undefined;
    return Buffer.from(body, 'base64url').toString();
  }

  private mac(body: string): string {
    return createHmac('sha256', this.key).update(body).digest('base64url');
  }
}
