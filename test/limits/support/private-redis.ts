import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, connect } from 'node:net';

import { trackResource } from '../../support/open-resources';

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function accepting(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * A private, memory-only redis-server (docs/reliability.md §3.1: `--save "" --appendonly no`, so a
 * restart comes back empty) that a test may kill and restart without touching the shared one.
 */
export class PrivateRedis {
  private child: ChildProcess | undefined;

  private constructor(readonly port: number) {
    trackResource(`redis-server :${port}`, () => this.child !== undefined);
  }

  static async start(): Promise<PrivateRedis> {
    const redis = new PrivateRedis(await freePort());
    await redis.restart();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts (again) on the same port, empty. */
  async restart(): Promise<void> {
    if (this.child) throw new Error('redis-server is running');
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: 'ignore',
      },
    );
    this.child = child;
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
    });
    const deadline = Date.now() + 10_000;
    while (!(await accepting(this.port))) {
      if (Date.now() > deadline) throw new Error(`redis-server did not start on ${this.port}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGKILL: the data is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
    this.child = undefined;
  }
}
