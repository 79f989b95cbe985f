// What the harness needs from an engine. Every adapter drives its engine through the engine's
// public API only; what each call maps to is written in the adapter.
import * as fs from 'node:fs';
import * as path from 'node:path';

import { repoRoot } from '../infra';

/** `job`: trivial one-step job. `fsm3`: three steps (next, next, done) per instance. */
export type Kind = 'job' | 'fsm3';

export type CaseName =
  | 'drain'
  | 'fsm3'
  | 'enqueue-single'
  | 'enqueue-bulk'
  | 'latency'
  | 'latency-xproc'
  | 'signal'
  | 'scale'
  | 'memory';

export interface CaseContext {
  /** URL of the case's own, freshly created database. */
  pgUrl: string;
  dbName: string;
  redisUrl: string | undefined;
  /** Redis key prefix of the case (BullMQ on Redis). */
  redisPrefix: string;
  log: (m: string) => void;
  /**
   * Inserts come from another process than the workers (cross-process latency): engines whose
   * cross-process wake-up is a setting turn it on (gen-durable: `poke: 'postgres'`).
   */
  crossProcess?: boolean;
}

export interface Hooks {
  /** Called when the first step of an instance starts, with the marker passed at insert. */
  onStart?: (marker: number | undefined) => void;
  /** Called when the last step of an instance runs (counts finished instances in-process). */
  onFinal?: () => void;
}

export interface Instance {
  /** Schema / migrations / connections. Not timed. */
  setup(): Promise<void>;
  /** Inserts `n` instances of `kind` through the engine's bulk API. */
  insertBulk(kind: Kind, n: number): Promise<void>;
  /** One awaited single insert through the engine's single-insert API. */
  insertOne(kind: Kind, marker?: number): Promise<void>;
  /** Starts the workers with `concurrency` parallel steps. */
  start(kind: Kind, concurrency: number, hooks: Hooks): Promise<void>;
  /** Instances of `kind` not durably finished yet, as the engine itself records it. */
  remaining(kind: Kind): Promise<number>;
  close(): Promise<void>;
  /**
   * Signal round trip (engines with a signal primitive): start workers, create `count` instances
   * parked on a signal (instance i carries marker i), resolve once all are parked.
   */
  parkForSignals?(count: number, concurrency: number, hooks: Hooks): Promise<void>;
  /** Wakes parked instance `i`; its woken step calls hooks.onStart(i). */
  signal?(i: number): Promise<void>;
}

export interface Adapter {
  /** Unique id, e.g. `graphile-worker:batched`; `--only` matches it or its family. */
  id: string;
  family: string;
  /** Package name and version, e.g. `graphile-worker 0.17.3`. */
  peer: string;
  /** One line on the settings used. */
  settings: string;
  backend: 'postgres' | 'redis';
  /** Cases the engine cannot run (or is not run on), with the reason printed in the report. */
  unsupported: Partial<Record<CaseName, string>>;
  /**
   * Largest drain (jobs) / fsm3 (machines) N worth running, [full run, --quick]: slow engines run
   * on fewer instances so the whole run fits its time budget; rates still compare.
   */
  maxN?: Partial<Record<Kind, [number, number]>>;
  /** Cases left out of --quick runs (too slow for its 3-minute budget), with the reason. */
  notInQuick?: Partial<Record<CaseName, string>>;
  create(ctx: CaseContext): Promise<Instance>;
  /**
   * Scale case: with `total` rows in the engine's table (70 % terminal, 29.5 % runnable, the
   * rest in flight), measure what the adapter documents (claim time, or drain rate).
   */
  scale?(ctx: CaseContext, total: number, repeats: number): Promise<ScaleResult>;
  /** Has a signal primitive (an instance parked until a message wakes it): runs the signal case. */
  signals?: boolean;
}

export interface ScaleResult {
  metric: string;
  unit: string;
  /** Lower is better (time) or higher is better (rate). */
  better: 'lower' | 'higher';
  value: number;
  detail?: Record<string, unknown>;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Installed version of a bench dependency (read from bench/node_modules, exports maps aside). */
export function version(pkg: string): string {
  // The bench's own install first; a script run from the repo root without it (bench/*.ts)
  // resolves the package from the root's node_modules, and reports that one.
  const own = path.join(repoRoot(), 'bench', 'node_modules', pkg, 'package.json');
  const file = fs.existsSync(own)
    ? own
    : path.join(repoRoot(), 'node_modules', pkg, 'package.json');
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
}
