import { randomBytes } from 'node:crypto';

import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';

/** The sample dashboard's token: SAMPLE_DASHBOARD_TOKEN, or a random one per boot (printed by main.ts). */
export const DEMO_DASHBOARD_TOKEN =
  process.env['SAMPLE_DASHBOARD_TOKEN'] ?? randomBytes(12).toString('base64url');

const COOKIE = 'sample_dashboard_token';

interface HttpRequest {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly query?: Readonly<Record<string, unknown>>;
}

interface HttpReply {
  header(name: string, value: string): unknown;
}

/**
 * A demo guard for the sample's dashboard at /durable: the token as `?token=` (which sets a
 * cookie for the dashboard's path), as that cookie, or as `Authorization: Bearer <token>`.
 * A real app puts its own authentication guard here (docs/dashboard.md).
 */
@Injectable()
export class DemoDashboardGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const req = http.getRequest<HttpRequest>();
    if (req.query?.['token'] === DEMO_DASHBOARD_TOKEN) {
      http
        .getResponse<HttpReply>()
        .header(
          'Set-Cookie',
          `${COOKIE}=${DEMO_DASHBOARD_TOKEN}; Path=/durable; HttpOnly; SameSite=Strict`,
        );
      return true;
    }
    const cookie = String(req.headers['cookie'] ?? '')
      .split(';')
      .map((c) => c.trim())
      .includes(`${COOKIE}=${DEMO_DASHBOARD_TOKEN}`);
    return cookie || req.headers['authorization'] === `Bearer ${DEMO_DASHBOARD_TOKEN}`;
  }
}
