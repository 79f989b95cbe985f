// The engines of a run. gen-durable is loaded only when its adapter was compiled (lib/ exports
// the public API); otherwise the harness says so and runs the peers alone.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { bullPostgres, bullRedis } from './bullmq';
import { dbosAdapter } from './dbos';
import { graphileBatched, graphileDefault } from './graphile';
import { pgBoss1, pgBoss50 } from './pgboss';
import { rawAdapter, rawBatch50Adapter } from './raw';
import type { Adapter } from './types';

export interface Loaded {
  adapters: Adapter[];
  /** Why gen-durable is absent, when it is. */
  genDurableMissing: string | undefined;
}

export function loadAdapters(): Loaded {
  let genDurable: Adapter[] = [];
  let genDurableMissing: string | undefined;
  const file = path.join(__dirname, 'gen-durable.js');
  if (!fs.existsSync(file)) {
    genDurableMissing =
      'gen-durable: not built yet (lib/index.ts does not export the public API; adapter not compiled)';
  } else {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const m = require(file) as {
        genDurableAdapter: Adapter;
        genDurableTuned: Adapter;
        genDurableDirectInsert: Adapter;
        genDurableOtelOff: Adapter;
        genDurableOtelApi: Adapter;
        genDurableOtelSdk: Adapter;
      };
      genDurable = [
        m.genDurableAdapter,
        m.genDurableTuned,
        m.genDurableDirectInsert,
        m.genDurableOtelOff,
        m.genDurableOtelApi,
        m.genDurableOtelSdk,
      ];
    } catch (e) {
      genDurableMissing = `gen-durable: not built yet (loading the adapter failed: ${(e as Error).message.split('\n')[0]})`;
    }
  }
  const adapters = [
    ...genDurable,
    rawAdapter,
    rawBatch50Adapter,
    graphileDefault,
    graphileBatched,
    pgBoss1,
    pgBoss50,
    bullRedis,
    bullPostgres,
    dbosAdapter,
  ];
  return { adapters, genDurableMissing };
}
