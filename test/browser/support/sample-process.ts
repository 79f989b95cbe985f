import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';

import { trackResource } from '../../support/open-resources';

// The sample app (sample/main.ts) as a real child process, loaded through the ts-register
// hook the crash tests use: a test can SIGKILL it and start it again on the same port, so a
// page loaded from it reconnects to the new process.

const ROOT = join(__dirname, '..', '..', '..');

export interface SampleProcess {
  readonly child: ChildProcess;
  /** What the process printed so far (for a failure's message). */
  output(): string;
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** A TCP port free at the time of the call, for the sample to listen on. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/**
 * Starts the sample with `env` added to this process's environment and answers once it serves
 * `GET /` on `port`; rejects with its output when it exits first or is not up within `timeoutMs`.
 */
export async function startSample(
  port: number,
  env: Record<string, string>,
  timeoutMs = 120_000,
): Promise<SampleProcess> {
  const child = spawn(
    process.execPath,
    ['-r', join(ROOT, 'test/support/ts-register.cjs'), join(ROOT, 'sample/main.ts')],
    {
      cwd: ROOT,
      env: { ...process.env, ...env, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  trackResource(
    `sample process (pid ${child.pid})`,
    () => child.exitCode === null && child.signalCode === null,
  );
  let output = '';
  child.stdout?.on('data', (data: Buffer) => (output += data.toString()));
  child.stderr?.on('data', (data: Buffer) => (output += data.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let gone = false;
  void exit.then(() => (gone = true));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (gone) throw new Error(`the sample exited before it served HTTP:\n${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the sample did not serve HTTP within ${timeoutMs} ms:\n${output}`);
    }
    try {
      const response = await fetch(`http://127.0.0.1:${port}/`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { child, output: () => output, exited: () => exit };
}

/** Stops the sample if it still runs: SIGTERM (its shutdown hooks), SIGKILL after `graceMs`. */
export async function stopSample(sample: SampleProcess | undefined, graceMs = 15_000) {
  if (!sample || sample.child.exitCode !== null || sample.child.signalCode !== null) return;
  sample.child.kill('SIGTERM');
  const timer = setTimeout(() => sample.child.kill('SIGKILL'), graceMs);
  await sample.exited();
  clearTimeout(timer);
}
