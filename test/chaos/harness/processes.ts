import { type ChildProcess, fork } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { join } from 'node:path';

import type { ChildMessage } from './protocol';

const ROOT = join(__dirname, '..', '..', '..');
const TS_REGISTER = join(ROOT, 'test', 'support', 'ts-register.cjs');

export interface ExitRecord {
  readonly at: number;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The orchestrator caused it (kill, shutdown). */
  readonly expected: boolean;
  /** The error text of the child's last `fatal` message before it exited, if it sent one. */
  readonly fatal: string | undefined;
}

/**
 * A forked chaos process (worker or sender) with its output appended to a log file. Tracks
 * its exits and whether the orchestrator caused each, and can be restarted with the same
 * configuration (same node id: startup reclaim applies).
 */
export class ChaosProcess {
  private child: ChildProcess | undefined;
  private expecting = false;
  private readonly log: WriteStream;
  readonly exits: ExitRecord[] = [];
  stopped = false;
  starts = 0;
  onExit: ((record: ExitRecord) => void) | undefined;
  onMessage: ((message: ChildMessage) => void) | undefined;
  /** The last `fatal` message of the running child (its uncaught error or failed boot). */
  private lastFatal: string | undefined;

  constructor(
    readonly name: string,
    private readonly main: string,
    private readonly env: Record<string, string>,
    logDir: string,
  ) {
    this.log = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  /** Forks and waits for `ready` (rejects on `fatal` or an early exit). */
  start(timeoutMs = 90_000): Promise<void> {
    if (this.child) throw new Error(`${this.name} is running`);
    this.starts++;
    this.expecting = false;
    this.lastFatal = undefined;
    this.stopped = false;
    const child = fork(join(__dirname, this.main), [], {
      execArgv: ['-r', TS_REGISTER],
      env: { ...process.env, ...this.env, GEN_DURABLE_FAULTS: '1' },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    this.child = child;
    this.log.write(`--- start #${this.starts} pid ${child.pid} at ${new Date().toISOString()}\n`);
    child.stdout?.on('data', (chunk: Buffer) => this.log.write(chunk));
    child.stderr?.on('data', (chunk: Buffer) => this.log.write(chunk));
    child.on('message', (m) => {
      const message = m as ChildMessage;
      if (message.type === 'fatal') {
        this.lastFatal = message.error;
        this.log.write(`--- fatal: ${message.error}\n`);
      }
      this.onMessage?.(message);
    });
    child.once('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      const record: ExitRecord = {
        at: Date.now(),
        code,
        signal,
        expected: this.expecting,
        fatal: this.lastFatal,
      };
      this.exits.push(record);
      this.log.write(
        `--- exit code ${String(code)} signal ${String(signal)} expected ${this.expecting}\n`,
      );
      this.onExit?.(record);
    });
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.name} did not become ready within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const onMessage = (raw: unknown): void => {
        const m = raw as ChildMessage;
        if (m.type === 'ready') {
          clearTimeout(timer);
          child.off('message', onMessage);
          resolve();
        } else if (m.type === 'fatal') {
          clearTimeout(timer);
          child.off('message', onMessage);
          reject(new Error(`${this.name} failed to start: ${m.error}`));
        }
      };
      child.on('message', onMessage);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${this.name} exited while starting (${String(code ?? signal)})`));
      });
    });
  }

  send(message: unknown): void {
    if (this.child?.connected) this.child.send(message as object);
  }

  /** SIGKILL (expected): nothing flushed or released. Resolves at exit. */
  kill(): Promise<void> {
    return this.signalAndWait('SIGKILL');
  }

  /** SIGSTOP: the process is frozen (a zombie once its leases run out). */
  pause(): void {
    if (this.child?.pid === undefined) return;
    this.stopped = true;
    process.kill(this.child.pid, 'SIGSTOP');
  }

  resume(): void {
    if (this.child?.pid === undefined) return;
    this.stopped = false;
    process.kill(this.child.pid, 'SIGCONT');
  }

  /** Graceful stop over IPC; SIGKILL when it does not exit within `timeoutMs`. */
  async shutdown(timeoutMs = 15_000): Promise<void> {
    const child = this.child;
    if (!child) return;
    if (this.stopped) this.resume();
    this.expecting = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    this.send({ type: 'shutdown' });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    await exited;
    clearTimeout(timer);
  }

  private async signalAndWait(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.expecting = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    await exited;
  }

  close(): void {
    this.log.end();
  }
}
