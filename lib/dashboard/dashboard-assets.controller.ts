import { readFileSync } from 'node:fs';

import { Get, Inject, Req, Res } from '@nestjs/common';

import { DASHBOARD_CONTEXT, type DashboardContext } from './dashboard-context';
import type { DashboardRequest } from './dashboard-options';
import { type DashboardResponse, setSecurityHeaders } from './http-exchange';

let htmx: string | undefined;
let css: string | undefined;

/** htmx's minified build, read once from the installed `htmx.org` package (its licence ships there). */
function htmxSource(): string {
  htmx ??= readFileSync(require.resolve('htmx.org/dist/htmx.min.js'), 'utf8');
  return htmx;
}

/**
 * The stylesheet, read once from `assets/dashboard.css` beside this module: lib/dashboard/assets
 * under ts-jest, dist/cjs/dashboard/assets and dist/esm/dashboard/assets in the builds
 * (scripts/build.cjs copies it; the ES build's `require` comes from `createRequire`).
 */
function cssSource(): string {
  css ??= readFileSync(require.resolve('./assets/dashboard.css'), 'utf8');
  return css;
}

/**
 * The dashboard's two assets, served by the same guarded controllers as its pages (a request
 * without the guards' credential gets neither): the stylesheet and htmx.
 */
export class DashboardAssetsController {
  constructor(@Inject(DASHBOARD_CONTEXT) private readonly dashboard: DashboardContext) {}

  private serve(req: DashboardRequest, res: DashboardResponse, type: string): void {
    this.dashboard.accessOf(req);
    setSecurityHeaders(res, type);
    res.header('Cache-Control', 'private, max-age=300');
  }

  @Get('assets/dashboard.css')
  css(@Req() req: DashboardRequest, @Res({ passthrough: true }) res: DashboardResponse): string {
    this.serve(req, res, 'text/css; charset=utf-8');
    return cssSource();
  }

  @Get('assets/htmx.min.js')
  htmx(@Req() req: DashboardRequest, @Res({ passthrough: true }) res: DashboardResponse): string {
    this.serve(req, res, 'text/javascript; charset=utf-8');
    return htmxSource();
  }
}
