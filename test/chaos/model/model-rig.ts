import type fc from 'fast-check';

import { GarbageCollector } from '../../../lib/runtime/gc';
import { Reaper } from '../../../lib/runtime/reaper';
import { bootEngine, type Harness } from '../../support/engine-harness';
import type { TestDatabase } from '../../support/test-database';
import { checkInvariants, LEASE_MS, ModelFsm, type Real, type World } from './model-commands';
import { MAX_REAPS } from './reference-model';

/** Commands run per kind, printed at the end (shows the runs really exercised the machine). */
export const tally = new Map<string, number>();

export class Checked implements fc.AsyncCommand<World, Real, false> {
  constructor(readonly inner: fc.AsyncCommand<World, Real, false>) {}
  check = (m: Readonly<World>): boolean => this.inner.check(m);
  async run(m: World, r: Real): Promise<void> {
    r.log.push(this.inner.toString());
    const kind = this.inner.toString().replace(/\(.*$/, '');
    tally.set(kind, (tally.get(kind) ?? 0) + 1);
    await this.inner.run(m, r);
    await checkInvariants(m.model, r);
  }
  toString = (): string => this.inner.toString();
}

export async function startModelRig(
  db: TestDatabase,
): Promise<{ app: Harness; fresh: () => Promise<Real> }> {
  const app = await bootEngine(db, [ModelFsm], {
    queues: {},
    reaper: false,
    gc: false,
    poke: 'none',
    leaseTtl: LEASE_MS,
    heartbeatInterval: 20_000,
  });
  const runtime = app.engine.runtime;
  const reaper = new Reaper(
    runtime.sql,
    60_000,
    MAX_REAPS,
    runtime.telemetry,
    () => undefined,
    () => undefined,
  );
  const gc = new GarbageCollector(
    runtime.sql,
    {
      interval: 60_000,
      retention: 3_600_000,
      failedRetention: 3_600_000,
      cancelledRetention: 3_600_000,
      batch: 100,
      archive: 'off',
      archiveAfter: 0,
    },
    runtime.telemetry,
    runtime.limiter,
  );
  const fresh = async (): Promise<Real> => {
    await db.pool.query('TRUNCATE gen_durable, gen_durable_signals CASCADE');
    return {
      db,
      engine: app.engine,
      definition: runtime.registry.resolve(ModelFsm),
      flusher: runtime.flusherFor('m'),
      reaper,
      gc,
      held: new Map(),
      log: [],
    };
  };
  return { app, fresh };
}
