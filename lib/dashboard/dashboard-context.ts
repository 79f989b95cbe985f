import { ForbiddenException } from '@nestjs/common';

import type { EngineService } from '../engine/engine.service';
import { CsrfProtection, FlashSigner } from './csrf';
import type {
  DashboardAccess,
  DashboardRequest,
  ResolvedDashboardOptions,
} from './dashboard-options';
import { DashboardReads } from './dashboard-reads';
import { basePathOf, type DashboardResponse, queryOf, setSecurityHeaders } from './http-exchange';
import type { ViewContext } from './views/components';

/** The injection token of a mounted dashboard's {@link DashboardContext}. */
export const DASHBOARD_CONTEXT = Symbol('GenDurableDashboardContext');

/**
 * One mounted dashboard: its options, its engine, its reads and its CSRF defence, shared by
 * its controllers. Every handler starts here: access is decided per request, 403 on `'none'`.
 */
export class DashboardContext {
  readonly reads: DashboardReads;
  readonly csrf = new CsrfProtection();
  readonly flash = new FlashSigner();

  constructor(
    readonly engine: EngineService,
    readonly options: ResolvedDashboardOptions,
  ) {
    this.reads = new DashboardReads(engine, options.redact);
  }

  /** The request's access; `'none'` is refused here (403). */
  accessOf(req: DashboardRequest): Exclude<DashboardAccess, 'none'> {
    const level = this.options.access(req);
    if (level === 'all' || level === 'read') return level;
    throw new ForbiddenException('no access to the dashboard');
  }

  /** An action's gate: access `'all'` (else 403) and a same-origin POST with the CSRF token (else 403). */
  authorizeAction(req: DashboardRequest): string | undefined {
    if (this.accessOf(req) !== 'all') {
      throw new ForbiddenException('read-only access: actions are refused');
    }
    this.csrf.verify(req);
    return this.options.actor(req) ?? undefined;
  }

  /**
   * A page's context: access checked, security headers set, the browser's CSRF token (issued
   * when it has none), the flash of the last action. `depth`: the route's segments below the mount.
   */
  viewContext(req: DashboardRequest, res: DashboardResponse, depth: number): ViewContext {
    const level = this.accessOf(req);
    setSecurityHeaders(res, 'text/html; charset=utf-8');
    const base = basePathOf(req, depth);
    const flash = queryOf(req)['flash'];
    return {
      base,
      csrf: this.csrf.tokenFor(req, res, base),
      canAct: level === 'all',
      engine: this.engine.name,
      flash: this.flash.open(typeof flash === 'string' ? flash : undefined),
    };
  }
}
