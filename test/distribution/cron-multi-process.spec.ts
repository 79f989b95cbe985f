import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';

import { CronExpression } from '../../lib/cron/cron-expression';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §29, issue 18 "Done means": three node processes, each declaring the
// every-second schedule `pulse` and ticking it with their own clocks, fire it for 30 s while
// one of them is SIGKILLed at 10 s and restarted at 13 s. Counted against the occurrences the
// cron library lists between the first and the last fire: exactly one instance per occurrence,
// none missing, none twice. Time is only the run's length; nothing asserts how fast a fire was.

const TS_REGISTER = join(__dirname, '..', 'support', 'ts-register.cjs');
const NODE_MAIN = join(__dirname, 'support', 'cron-node-main.ts');

interface CronNode {
  readonly name: string;
  readonly child: ChildProcess;
  output(): string;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitExit(child: ChildProcess, timeoutMs: number): Promise<void> {
  if (exited(child)) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve();
    }, timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function startNode(name: string, url: string): Promise<CronNode> {
  const child = fork(NODE_MAIN, [], {
    execArgv: ['-r', TS_REGISTER],
    env: { ...process.env, GD_CRON_NODE: JSON.stringify({ url, nodeId: name }) },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  trackResource(`cron node ${name}`, () => !exited(child));
  const lines: string[] = [];
  const collect = (chunk: Buffer): void => {
    lines.push(...chunk.toString('utf8').split('\n'));
    lines.splice(0, Math.max(0, lines.length - 100));
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const node = { name, child, output: () => lines.join('\n') };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} did not boot in 90 s:\n${node.output()}`)),
      90_000,
    );
    child.on('message', (m: { type?: string }) => {
      if (m.type === 'ready') {
        clearTimeout(timer);
        resolve(node);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${String(code)}) before ready:\n${node.output()}`));
    });
  });
}

async function stopNode(node: CronNode): Promise<void> {
  if (exited(node.child)) return;
  node.child.send({ type: 'shutdown' });
  await waitExit(node.child, 15_000);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('cron across processes (docs/design.md §29)', () => {
  let db: TestDatabase;
  let nodes: CronNode[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    for (const n of nodes) await stopNode(n);
    await db.drop();
  });

  it('3 nodes fire an every-second schedule for 30 s, one SIGKILLed and restarted: one instance per occurrence', async () => {
    nodes = await Promise.all(['cron-a', 'cron-b', 'cron-c'].map((n) => startNode(n, db.url)));
    await sleep(10_000);
    const victim = nodes[1]!;
    victim.child.kill('SIGKILL');
    await waitExit(victim.child, 5_000);
    await sleep(3_000);
    nodes[1] = await startNode('cron-b', db.url);
    await sleep(17_000);
    for (const n of nodes) await stopNode(n);

    const { rows } = await db.pool.query<{ key: string; n: number }>(
      `SELECT correlation_key AS key, count(*)::int AS n FROM gen_durable WHERE fsm = 'pulse'
        GROUP BY correlation_key ORDER BY correlation_key`,
    );
    const fired = rows.map((r) => r.key.replace('cron:pulse:', ''));
    expect(rows.filter((r) => r.n > 1)).toEqual([]);
    expect(fired.length).toBeGreaterThanOrEqual(20);
    const first = new Date(fired[0]!);
    const last = new Date(fired[fired.length - 1]!);
    const expected = CronExpression.parse('* * * * * *')
      .between(first, last, 10_000)
      .instants.map((d) => d.toISOString());
    expect(fired).toEqual(expected);
    const { rows: byNode } = await db.pool.query<{ node: string; n: number }>(
      `SELECT result->>'node' AS node, count(*)::int AS n FROM gen_durable
        WHERE fsm = 'pulse' AND status = 'done' GROUP BY 1 ORDER BY 1`,
    );
    process.stdout.write(
      `[cron multi-process] ${fired.length} occurrences from ${fired[0]} to ${fired[fired.length - 1]}, run by ${JSON.stringify(byNode)}\n`,
    );
  }, 180_000);
});
