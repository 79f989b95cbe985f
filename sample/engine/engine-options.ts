import type { DataSource } from 'typeorm';

import type { GenDurableOptions } from '../../lib';

/**
 * The sample's engine: three queues on this node, reaper and GC included (a single-node
 * setup); the `email` rate limit (2 messages a second, bursts of 2) throttles the email job,
 * and `customer:<id>` concurrency keys (unconfigured name ⇒ K = 1) serialise each customer's mails.
 */
export function sampleEngineOptions(dataSource: DataSource): GenDurableOptions {
  return {
    dataSource,
    queues: { default: 5, checkout: 5, email: 2 },
    pollInterval: 500,
    maxPollInterval: 2000,
    reaper: { interval: 5000 },
    rateLimits: { email: { allowed: 2, period: 1, burst: 2 } },
  };
}
