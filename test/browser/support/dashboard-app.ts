import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  type INestApplication,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Module } from '@nestjs/common';

import {
  awaitSignal,
  done,
  DurableFsm,
  EngineService,
  GenDurableModule,
  getEngineToken,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
} from '../../../lib';
import {
  type DashboardOptions,
  GenDurableDashboardModule,
  type DashboardRequest,
} from '../../../lib/dashboard';
import { FAST, Gates } from '../../support/engine-harness';
import { trackResource } from '../../support/open-resources';
import type { TestDatabase } from '../../support/test-database';

// A host app for the dashboard specs: GenDurableModule over a test database, FSMs that leave
// instances in every status, the dashboard at /durable behind a token guard, with access read
// from a header (`x-dashboard-role: read` → read only, else all).

export const DASHBOARD_TOKEN = 'test-dashboard-token';

/** A step that waits on this latch keeps its instance `executing` until the test opens it. */
export const latch = new Gates();

@Injectable()
export class TokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<DashboardRequest>();
    return req.headers['x-dashboard-token'] === DASHBOARD_TOKEN;
  }
}

@DurableFsm({ name: 'dash-line', queue: 'dash' })
export class DashLineFsm {
  @Step({ next: ['$done'] }) start(ctx: StepContext<{ sku: string }>) {
    return done({ sku: ctx.state.sku });
  }
}

@DurableFsm({ name: 'dash-order', queue: 'dash' })
export class DashOrderFsm {
  @Step({ next: ['collect'] }) start(ctx: StepContext<{ order: string; lines: string[] }>) {
    return scheduleChildren(
      'collect',
      ctx.state.lines.map((sku) => ({ fsm: DashLineFsm, state: { sku } })),
      ctx.state,
    );
  }

  @Step({ next: ['ship'] }) collect(ctx: StepContext<{ order: string }>) {
    return awaitSignal('approve', 'ship', ctx.state);
  }

  @Step({ next: ['$done'] }) ship() {
    return done({ shipped: true });
  }
}

@DurableFsm({ name: 'dash-charge', queue: 'dash' })
export class DashChargeFsm {
  @Step({ next: ['$done'] }) start(ctx: StepContext<{ card: string; fail?: boolean }>) {
    if (ctx.state.fail) return stop('card declined');
    return done({ charged: true });
  }
}

@DurableFsm({ name: 'dash-report', queue: 'dash' })
export class DashReportFsm {
  @Step({ next: ['$done'] }) async start(ctx: StepContext<{ hold?: string }>) {
    if (ctx.state.hold) await latch.wait(ctx.state.hold);
    return done({});
  }
}

export const DASHBOARD_FSMS = [DashLineFsm, DashOrderFsm, DashChargeFsm, DashReportFsm];

export interface DashboardApp {
  readonly app: INestApplication;
  readonly engine: EngineService;
  readonly url: string;
  close(): Promise<void>;
}

/** The specs' usual mount: /durable behind the token guard, access from a header, `redact`. */
export const DEFAULT_MOUNT: DashboardOptions = {
  guards: [TokenGuard],
  access: (req) => (req.headers['x-dashboard-role'] === 'read' ? 'read' : 'all'),
  actor: (req) => {
    const who = req.headers['x-dashboard-user'];
    return typeof who === 'string' ? who : 'tester';
  },
  redact: (_fsm, state) =>
    state !== null && typeof state === 'object' && 'card' in state
      ? { ...(state as Record<string, unknown>), card: '••••' }
      : state,
};

/** How the host mounts the dashboard: a global prefix, the mounts (default: {@link DEFAULT_MOUNT}). */
export interface HostShape {
  readonly globalPrefix?: string;
  readonly mounts?: readonly DashboardOptions[];
  /** Extra GenDurableModule options (for example `limiter: 'redis'`). */
  readonly engine?: Record<string, unknown>;
  /** Nest's module identity (`moduleIdGeneratorAlgorithm`; Nest 11's default is `'reference'`). */
  readonly moduleIds?: 'reference' | 'deep-hash';
}

/** Boots the host app on a random port, on Express or Fastify. */
export async function bootDashboardApp(
  db: Pick<TestDatabase, 'dataSource'>,
  adapter: 'express' | 'fastify',
  shape: HostShape = {},
): Promise<DashboardApp> {
  const dataSource = await db.dataSource();
  @Module({
    imports: [
      GenDurableModule.forRoot({
        dataSource,
        ...FAST,
        queues: { dash: 4 },
        rateLimits: { charge: { allowed: 20, period: 1, burst: 20 } },
        concurrencyLimits: { report: { limit: 2 } },
        ...shape.engine,
      }),
      ...(shape.mounts ?? [DEFAULT_MOUNT]).map((m) => GenDurableDashboardModule.register(m)),
    ],
    providers: DASHBOARD_FSMS,
  })
  class HostModule {}
  const app =
    adapter === 'fastify'
      ? await NestFactory.create(HostModule, new FastifyAdapter(), {
          logger: false,
          ...(shape.moduleIds ? { moduleIdGeneratorAlgorithm: shape.moduleIds } : {}),
        })
      : await NestFactory.create(HostModule, {
          logger: false,
          ...(shape.moduleIds ? { moduleIdGeneratorAlgorithm: shape.moduleIds } : {}),
        });
  if (shape.globalPrefix !== undefined) app.setGlobalPrefix(shape.globalPrefix);
  await app.listen(0, '127.0.0.1');
  let open = true;
  trackResource(`dashboard app (${adapter})`, () => open);
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return {
    app,
    // A named engine is provided under its token only (docs/design.md §2.1).
    engine: app.get<string, EngineService>(
      getEngineToken(typeof shape.engine?.['name'] === 'string' ? shape.engine['name'] : undefined),
    ),
    url,
    async close() {
      if (!open) return;
      open = false;
      await app.close();
    },
  };
}

/** What the specs look at: one instance in each status, a fan-out tree, a schedule. */
export interface Seeded {
  readonly parked: string;
  readonly tree: string;
  readonly failed: string;
  readonly cancelled: string;
  readonly executing: string;
  readonly runnable: string;
  readonly done: string;
}

const until = async (check: () => Promise<boolean>, what: string): Promise<void> => {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
};

/** Seeds instances in every status; `executing` stays so until `latch.open(holdKey)`. */
export async function seedDashboard(engine: EngineService, holdKey: string): Promise<Seeded> {
  const statusOf = async (id: string) => (await engine.get(id))?.status;
  const tree = await engine.insert(DashOrderFsm, {
    state: { order: 'A-1', lines: ['book', 'pen', 'ink'] },
    correlationKey: 'order:A-1',
  });
  const parked = await engine.insert(DashOrderFsm, {
    state: { order: 'B-2', lines: ['mug'] },
    correlationKey: 'order:B-2',
  });
  const failed = await engine.insert(DashChargeFsm, {
    state: { card: '4242-4242', fail: true },
    correlationKey: 'charge:1',
    rateLimit: 'charge',
  });
  const doneId = await engine.insert(DashChargeFsm, {
    state: { card: '5555-1111' },
    rateLimit: 'charge',
  });
  const executing = await engine.insert(DashReportFsm, {
    state: { hold: holdKey },
    concurrencyKey: ['report', 'nightly'],
  });
  const cancelled = await engine.insert(DashReportFsm, {
    state: {},
    scheduleIn: 3_600_000,
  });
  await engine.cancel(cancelled, { reason: 'seeded as cancelled' });
  const runnable = await engine.insert(DashReportFsm, { state: {}, scheduleIn: 3_600_000 });
  await engine.schedules.upsert({ name: 'dash-nightly', fsm: DashReportFsm, cron: '0 3 * * *' });
  await until(async () => (await statusOf(tree)) === 'awaiting_signal', 'the tree to park');
  await until(async () => (await statusOf(parked)) === 'awaiting_signal', 'the order to park');
  await until(async () => (await statusOf(failed)) === 'failed', 'the charge to fail');
  await until(async () => (await statusOf(doneId)) === 'done', 'the charge to finish');
  await until(async () => (await statusOf(executing)) === 'executing', 'the report to run');
  return { parked, tree, failed, cancelled, executing, runnable, done: doneId };
}
