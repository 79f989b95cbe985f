// Scenarios that are scripts of their own (bench/noisy-neighbour.ts, bench/sequences.ts): one
// engine, gen-durable only, each measuring a behaviour rather than comparing engines. The
// harness runs them as children against its server (DATABASE_URL = the server it uses), prints
// their report in its own and keeps their output in the JSON. They run only when named
// (`--only noisy-neighbour`, `--only sequences`): each takes minutes at its full size.
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';

import type { Options } from './cli';
import type { Infra } from './infra';
import { repoRoot } from './infra';

export const SCRIPT_SCENARIOS = ['noisy-neighbour', 'sequences'] as const;
export type ScriptScenario = (typeof SCRIPT_SCENARIOS)[number];

/** What one script scenario printed, for the report and the JSON. */
export interface ScriptResult {
  scenario: ScriptScenario;
  command: string;
  env: Record<string, string>;
  exitCode: number | null;
  seconds: number;
  /** The script's report: its stdout from its first table line (or all of it). */
  report: string;
  stderrTail: string;
}

const SCRIPTS: Record<ScriptScenario, string> = {
  'noisy-neighbour': 'bench/noisy-neighbour.ts',
  sequences: 'bench/sequences.ts',
};

/**
 * The sizes of each script: the issue's targets in a full run, small ones with `--quick`. An
 * environment variable the script reads (A_ROWS, PHASE_S, KEYS, …) wins over both.
 */
function sizes(scenario: ScriptScenario, quick: boolean): Record<string, string> {
  if (scenario === 'noisy-neighbour') {
    return quick ? { A_ROWS: '100000', PHASE_S: '10' } : { A_ROWS: '1000000', PHASE_S: '20' };
  }
  return quick
    ? { KEYS: '1000', PER_KEY: '3', FAIL: '0.05', KILLS: '2' }
    : { KEYS: '10000', PER_KEY: '3', FAIL: '0.05', KILLS: '5' };
}

/** Runs one script scenario to its end; never throws (a failure is in exitCode / stderrTail). */
export async function runScript(
  scenario: ScriptScenario,
  opts: Options,
  infra: Infra,
  timeoutS: number,
  progress: (line: string) => void,
): Promise<ScriptResult> {
  const root = repoRoot();
  const defaults = sizes(scenario, opts.quick);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(defaults)) env[k] = process.env[k] ?? v;
  const args = ['-r', './test/support/ts-register.cjs', SCRIPTS[scenario]];
  const command = `${Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')} node ${args.join(' ')}`;
  progress(`  ${scenario}: ${command}`);
  const t0 = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env, DATABASE_URL: infra.adminUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutS * 1000);
  const exitCode = await new Promise<number | null>((resolve) => {
    child.on('close', (code) => resolve(code));
    child.on('error', () => resolve(null));
  });
  clearTimeout(timer);
  const seconds = (performance.now() - t0) / 1000;
  const lines = out.split('\n');
  const first = lines.findIndex((l) =>
    l.startsWith(scenario === 'sequences' ? 'sequences' : 'noisy'),
  );
  const report = (first >= 0 ? lines.slice(first) : lines).join('\n').trim();
  progress(`  ${scenario}: exit ${String(exitCode)} after ${seconds.toFixed(0)} s`);
  return {
    scenario,
    command: `${command} (DATABASE_URL: the bench's server; cwd ${path.relative(process.cwd(), root) || '.'})`,
    env,
    exitCode,
    seconds,
    report,
    stderrTail: err.split('\n').slice(-20).join('\n'),
  };
}
