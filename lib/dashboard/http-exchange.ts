import { parseCookie } from 'cookie';

import type { DashboardRequest } from './dashboard-options';

/**
 * What the dashboard needs of a request and a reply, on Express and Fastify alike
 * (docs/design.md §30): no adapter-specific API, only fields and methods both have.
 */

/**
 * The reply methods the dashboard uses: `header(name, value)`, which both adapters have, and
 * Express's `append(name, value)`, which Fastify's reply lacks (see {@link appendSetCookie}).
 */
export interface DashboardResponse {
  header(name: string, value: string): unknown;
  append?(name: string, value: string): unknown;
}

/** The strict policy of every dashboard answer: nothing inline, nothing from another origin. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
  "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** A request header as one string (the first of repeated ones), or undefined. */
export function headerOf(req: DashboardRequest, name: string): string | undefined {
  const value = req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

/** The request's cookies by name, parsed by the `cookie` package (first occurrence wins). */
export function cookiesOf(req: DashboardRequest): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const [name, value] of Object.entries(parseCookie(headerOf(req, 'cookie') ?? ''))) {
    if (value !== undefined) cookies.set(name, value);
  }
  return cookies;
}

/**
 * Adds a `Set-Cookie` header to the reply, keeping every cookie the host's guards, interceptors
 * or middleware set earlier in the request. On Express `res.header` (`res.set`) replaces the
 * header, so this appends with `res.append`; Fastify's `reply.header` already adds each
 * `set-cookie` value to those set before (and its reply has no `append`).
 */
export function appendSetCookie(res: DashboardResponse, cookie: string): void {
  if (typeof res.append === 'function') res.append('Set-Cookie', cookie);
  else res.header('Set-Cookie', cookie);
}

/** The parsed query (both adapters give an object; a repeated key is an array). */
export function queryOf(req: DashboardRequest): Record<string, string | string[]> {
  return fieldsOf(req['query']);
}

/** The parsed form or JSON body (urlencoded and JSON are parsed by both adapters by default). */
export function bodyOf(req: DashboardRequest): Record<string, string | string[]> {
  return fieldsOf(req['body']);
}

function fieldsOf(value: unknown): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  if (typeof value !== 'object' || value === null) return out;
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (typeof v === 'string') out[key] = v;
    else if (Array.isArray(v)) out[key] = v.filter((x): x is string => typeof x === 'string');
    else if (typeof v === 'number' || typeof v === 'boolean') out[key] = String(v);
  }
  return out;
}

/** The request's path without its query (`originalUrl` on Express, `url` on Fastify). */
export function pathnameOf(req: DashboardRequest): string {
  const url = req['originalUrl'] ?? req['url'];
  const text = typeof url === 'string' ? url : '/';
  return text.split('?')[0] ?? '/';
}

/**
 * The dashboard's base URL path as the browser sees it (any global prefix of the host
 * included): the request's path less the `depth` segments of the route below the mount.
 */
export function basePathOf(req: DashboardRequest, depth: number): string {
  const segments = pathnameOf(req).replace(/\/+$/, '').split('/');
  return segments.slice(0, Math.max(1, segments.length - depth)).join('/');
}

/** Sets the headers every dashboard answer carries (CSP, no sniffing, no framing, no caching). */
export function setSecurityHeaders(res: DashboardResponse, contentType: string): void {
  res.header('Content-Type', contentType);
  res.header('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  res.header('X-Content-Type-Options', 'nosniff');
  res.header('X-Frame-Options', 'DENY');
  res.header('Referrer-Policy', 'same-origin');
  res.header('Cache-Control', 'no-store');
}
