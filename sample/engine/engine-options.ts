import type { DataSource } from 'typeorm';

import type { GenDurableOptions } from '../../lib';

/** The sample's engine: three queues on this node, reaper and GC included (a single-node setup). */
export function sampleEngineOptions(dataSource: DataSource): GenDurableOptions {
  return {
    dataSource,
    queues: { default: 5, checkout: 5, email: 2 },
    pollInterval: 500,
    maxPollInterval: 2000,
    reaper: { interval: 5000 },
  };
}
