import type { INestApplicationContext, Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import { EngineService, GenDurableModule, type GenDurableOptions } from '../../lib';
import { trackResource } from './open-resources';
import type { TestDatabase } from './test-database';

export interface TestApp {
  readonly app: INestApplicationContext;
  readonly engine: EngineService;
  /** Names of the statements run since the last `resetStatements()`. */
  readonly statements: string[];
  resetStatements(): void;
  close(): Promise<void>;
}

/** Fast timings for tests (lease 2 s, heartbeat 0.5 s, reaper 0.25 s, poll 50 ms). */
export const FAST: Partial<GenDurableOptions> = {
  leaseTtl: 2000,
  heartbeatInterval: 500,
  pollInterval: 50,
  maxPollInterval: 200,
  reaper: { interval: 250 },
  drainTimeout: 1000,
};

/**
 * A Nest application context with the engine over `db`'s DataSource and the given FSM
 * providers. Tracked: the leak check fails the file if it is not closed.
 */
export async function createTestApp(
  db: TestDatabase,
  providers: Provider[],
  options: Partial<GenDurableOptions> = {},
): Promise<TestApp> {
  const dataSource = await db.dataSource();
  const moduleRef = await Test.createTestingModule({
    imports: [GenDurableModule.forRoot({ dataSource, ...FAST, ...options })],
    providers,
  }).compile();
  const app = moduleRef;
  await app.init();
  let open = true;
  trackResource(`engine app on ${db.name}`, () => open);
  const engine = app.get(EngineService);
  const statements: string[] = [];
  const off = engine.runtime.sql.onStatement((e) => statements.push(e.name));
  return {
    app,
    engine,
    statements,
    resetStatements: () => {
      statements.length = 0;
    },
    close: async () => {
      off();
      await app.close();
      open = false;
    },
  };
}

/** Polls `fn` until it returns a truthy value or `timeoutMs` passes. */
export async function eventually<T>(
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 10_000,
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
