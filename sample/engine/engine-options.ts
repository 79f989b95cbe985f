import type { DataSource } from 'typeorm';

import type { GenDurableOptions } from '../../lib';

/**
 * The demo's callback secret (docs/callbacks.md): anyone who reads this file can sign an
 * approval, so a real app reads its own from the environment (≥ 32 characters, the same on
 * every node). `SAMPLE_CALLBACK_SECRET` overrides it.
 */
const DEMO_CALLBACK_SECRET = 'gen-durable-sample-demo-secret-do-not-use-in-production';

/**
 * Where the sample is reachable, for the signed callback URLs it mints: `SAMPLE_PUBLIC_URL`,
 * else `http://localhost:<PORT>` (PORT default 3000, as sample/main.ts listens).
 */
export function samplePublicUrl(env: NodeJS.ProcessEnv = process.env): string {
  return (env['SAMPLE_PUBLIC_URL'] ?? `http://localhost:${env['PORT'] ?? 3000}`).replace(
    /\/+$/,
    '',
  );
}

/**
 * The sample's engine: three queues on this node, reaper and GC included (a single-node
 * setup); the `email` rate limit (2 messages a second, bursts of 2) throttles the email job,
 * and `customer:<id>` concurrency keys (unconfigured name ⇒ K = 1) serialise each customer's mails.
 * Signed callback URLs (the assistant's approval link) point at the callbacks module AppModule
 * mounts at `durable/callbacks`. The node id is `GEN_DURABLE_NODE_ID` or the hostname (the
 * engine's default): a restarted node takes back its claims at once (docs/operations.md).
 */
export function sampleEngineOptions(
  dataSource: DataSource,
  env: NodeJS.ProcessEnv = process.env,
): GenDurableOptions {
  return {
    dataSource,
    queues: { default: 5, checkout: 5, email: 2 },
    pollInterval: 500,
    maxPollInterval: 2000,
    reaper: { interval: 5000 },
    rateLimits: { email: { allowed: 2, period: 1, burst: 2 } },
    callbacks: {
      secret: env['SAMPLE_CALLBACK_SECRET'] ?? DEMO_CALLBACK_SECRET,
      baseUrl: `${samplePublicUrl(env)}/durable/callbacks`,
    },
  };
}
