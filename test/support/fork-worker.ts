import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';

import { trackResource } from './open-resources';
import type { WorkerConfig, WorkerMessage } from './worker-process';

// A real worker process (test/support/worker-process.ts) forked with the ts-register hook,
// with its IPC messages collected. Used by the crash and restart tests.

export interface Worker {
  readonly name: string;
  readonly child: ChildProcess;
  readonly messages: WorkerMessage[];
  readonly workerIds: Record<string, string>;
  waitFor(match: (m: WorkerMessage) => boolean, timeoutMs?: number): Promise<WorkerMessage>;
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Every worker forked in this test file, for the afterAll clean-up. */
export const children: ChildProcess[] = [];

export async function forkWorker(
  name: string,
  url: string,
  options: WorkerConfig['options'],
): Promise<Worker> {
  const config: WorkerConfig = { name, url, options };
  const child = fork(join(__dirname, 'worker-process.ts'), [], {
    execArgv: ['-r', join(__dirname, 'ts-register.cjs')],
    env: { ...process.env, GD_WORKER: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.push(child);
  trackResource(
    `worker process ${name} (pid ${child.pid})`,
    () => child.exitCode === null && child.signalCode === null,
  );
  const messages: WorkerMessage[] = [];
  const listeners = new Set<(m: WorkerMessage) => void>();
  child.on('message', (m: WorkerMessage) => {
    messages.push(m);
    for (const l of listeners) l(m);
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const waitFor = (
    match: (m: WorkerMessage) => boolean,
    timeoutMs = 60_000,
  ): Promise<WorkerMessage> => {
    const past = messages.find(match);
    if (past) return Promise.resolve(past);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`worker ${name}: no matching message within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const listener = (m: WorkerMessage) => {
        if (!match(m)) return;
        clearTimeout(timer);
        listeners.delete(listener);
        resolve(m);
      };
      listeners.add(listener);
      void exit.then(({ code, signal }) =>
        reject(new Error(`worker ${name} exited (${code ?? signal}) before the message`)),
      );
    });
  };
  const ready = (await waitFor((m) => m.type === 'ready')) as Extract<
    WorkerMessage,
    { type: 'ready' }
  >;
  return { name, child, messages, workerIds: ready.workerIds, waitFor, exited: () => exit };
}

/** Kills every worker still running (SIGCONT first, for a stopped one). */
export async function killAll(): Promise<void> {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
}
