import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';

import { trackResource } from '../../support/open-resources';
import type { NodeConfig, NodeMessage, NodeRequest } from './node-protocol';

const TS_REGISTER = join(__dirname, '..', '..', 'support', 'ts-register.cjs');
const NODE_MAIN = join(__dirname, 'node-main.ts');
const OUTPUT_LINES = 200;

/** A node process of the multi-process tests. */
export interface NodeHandle {
  readonly name: string;
  readonly config: NodeConfig;
  readonly process: ChildProcess;
  /** Every message the node sent (step starts, events, replies). */
  readonly messages: NodeMessage[];
  /** The last lines the node wrote to stdout/stderr (for failure messages). */
  output(): string;
  /** Sends a command and resolves with its result (rejects with the node's error). */
  request<T>(command: NodeRequest, timeoutMs?: number): Promise<T>;
  /** SIGKILL: the process dies mid-whatever, nothing flushed or released. */
  kill(): Promise<void>;
  /** Graceful stop (app.close), SIGKILL if it does not exit in time. Idempotent. */
  stop(): Promise<void>;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (exited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Forks node-main.ts as `name` and waits until its engine has booted. */
export async function startNode(
  name: string,
  config: NodeConfig,
  bootTimeoutMs = 90_000,
): Promise<NodeHandle> {
  const child = fork(NODE_MAIN, [], {
    execArgv: ['-r', TS_REGISTER, '--enable-source-maps'],
    env: { ...process.env, GD_NODE_CONFIG: JSON.stringify(config), GEN_DURABLE_FAULTS: '' },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  trackResource(`node process ${name}`, () => !exited(child));
  const lines: string[] = [];
  const collect = (chunk: Buffer): void => {
    lines.push(
      ...chunk
        .toString('utf8')
        .split('\n')
        .filter((l) => l.length > 0),
    );
    if (lines.length > OUTPUT_LINES) lines.splice(0, lines.length - OUTPUT_LINES);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);

  const messages: NodeMessage[] = [];
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let nextReq = 1;
  child.on('message', (raw) => {
    const message = raw as NodeMessage;
    messages.push(message);
    if (message.type === 'reply') {
      const w = waiting.get(message.reqId);
      waiting.delete(message.reqId);
      if (message.ok) w?.resolve(message.result);
      else w?.reject(new Error(`${name}: ${message.error ?? 'failed'}`));
    }
  });
  child.on('exit', () => {
    for (const w of waiting.values()) w.reject(new Error(`${name} exited`));
    waiting.clear();
  });

  const output = (): string => lines.join('\n');
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} did not boot within ${bootTimeoutMs} ms:\n${output()}`)),
      bootTimeoutMs,
    );
    const onMessage = (raw: unknown): void => {
      const message = raw as NodeMessage;
      if (message.type === 'ready' || message.type === 'fatal') {
        clearTimeout(timer);
        child.off('message', onMessage);
        if (message.type === 'ready') resolve();
        else reject(new Error(`${name} failed to boot: ${message.error}\n${output()}`));
      }
    };
    child.on('message', onMessage);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited during boot (${String(code ?? signal)}):\n${output()}`));
    });
  });

  const handle: NodeHandle = {
    name,
    config,
    process: child,
    messages,
    output,
    request<T>(command: NodeRequest, timeoutMs = 60_000): Promise<T> {
      const reqId = nextReq++;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(reqId);
          reject(new Error(`${name}: no reply to ${command.cmd} within ${timeoutMs} ms`));
        }, timeoutMs);
        waiting.set(reqId, {
          resolve: (v) => {
            clearTimeout(timer);
            resolve(v as T);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        });
        child.send({ ...command, reqId });
      });
    },
    async kill() {
      if (exited(child)) return;
      child.kill('SIGKILL');
      await waitExit(child, 10_000);
    },
    async stop() {
      if (exited(child)) return;
      try {
        await handle.request({ cmd: 'shutdown' }, 15_000);
      } catch {
        // a node that cannot shut down cleanly is killed below
      }
      if (!(await waitExit(child, 10_000))) {
        child.kill('SIGKILL');
        await waitExit(child, 10_000);
      }
    },
  };
  return handle;
}
