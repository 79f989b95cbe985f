import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';

import { CronExpression } from '../../lib/cron/cron-expression';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §29, issue 18 "Done means": every node is stopped for 5 occurrences, then
// restarted. Three run-time schedules of one FSM, one per `missed` policy, share one expression
// and one run. Their occurrences are placed on the database clock around the stop so the number
// missed is exactly 5 whatever the boot takes: with B the second the schedules are upserted,
// group 1 is B+4..B+6 (fired on time, all nodes up), group 2 is B+12..B+16 (every node is
// SIGKILLed once group 1 has fired, so nobody ticks them), and group 3 is B+55..B+57 (on time
// again). Nothing occurs between B+17 and B+54: the nodes are restarted at B+18 or later, so at
// their first tick every group-2 occurrence is more than `schedules.grace` (1 s, the default)
// old — missed, not on time — and group 3 is still in the future as long as a node has booted
// by B+54 (asserted, so a slow boot fails with that message instead of a wrong count). The
// replacement processes are forked and load their code before the stop but start their engines
// only at the restart (support/cron-downtime-node-main.ts `standby`): a cold start compiles the
// library and took 47 s on the shared 2-core machine, an engine boot takes a few seconds. The
// expected missed occurrences are read from the cron library between the last fire before the
// stop and the first on-time fire after the restart: 5. Then `skip` fires none of them, `once`
// one for the latest with `missed = 5`, `all` each of them.

const TS_REGISTER = join(__dirname, '..', 'support', 'ts-register.cjs');
const NODE_MAIN = join(__dirname, 'support', 'cron-downtime-node-main.ts');
const NODE_NAMES = ['down-a', 'down-b', 'down-c'];
const POLICIES = ['skip', 'once', 'all'] as const;
const GROUP_1 = [4, 5, 6];
const GROUP_2 = [12, 13, 14, 15, 16];
const GROUP_3 = [55, 56, 57];
const GRACE_MS = 1_000;

interface DowntimeNode {
  readonly child: ChildProcess;
  output(): string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

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

/** Forks a node; resolves once it reports `until` (`ready`, or `loaded` for a standby). */
function forkNode(name: string, url: string, until: 'ready' | 'loaded'): Promise<DowntimeNode> {
  const standby = until === 'loaded';
  const child = fork(NODE_MAIN, [], {
    execArgv: ['-r', TS_REGISTER],
    env: { ...process.env, GD_CRON_NODE: JSON.stringify({ url, nodeId: name, standby }) },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  trackResource(`cron downtime node ${name}`, () => !exited(child));
  const lines: string[] = [];
  const collect = (chunk: Buffer): void => {
    lines.push(...chunk.toString('utf8').split('\n'));
    lines.splice(0, Math.max(0, lines.length - 100));
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const node = { child, output: () => lines.join('\n') };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} did not report ${until} in 120 s:\n${node.output()}`)),
      120_000,
    );
    child.on('message', (m: { type?: string }) => {
      if (m.type === until) {
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

function request(node: DowntimeNode, message: object, reply: string): Promise<void> {
  return new Promise((resolve) => {
    const onMessage = (m: { type?: string }) => {
      if (m.type !== reply) return;
      node.child.off('message', onMessage);
      resolve();
    };
    node.child.on('message', onMessage);
    node.child.send(message);
  });
}

describe('cron downtime across processes (docs/design.md §29)', () => {
  let db: TestDatabase;
  let nodes: DowntimeNode[] = [];
  let spares: DowntimeNode[] = [];
  const dbEpoch = async (): Promise<number> => {
    const { rows } = await db.pool.query<{ ms: string }>(
      `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS ms`,
    );
    return Number(rows[0]!.ms);
  };
  const waitDbClock = async (epochMs: number): Promise<void> => {
    for (let now = await dbEpoch(); now < epochMs; now = await dbEpoch()) {
      await sleep(Math.min(500, epochMs - now));
    }
  };
  const firedKeys = async (keys: string[]): Promise<number> => {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable WHERE correlation_key = ANY($1) AND status = 'done'`,
      [keys],
    );
    return rows[0]!.n;
  };
  const waitFired = async (keys: string[]): Promise<void> => {
    while ((await firedKeys(keys)) < keys.length) await sleep(100);
  };
  const killAll = async (): Promise<void> => {
    for (const n of nodes) n.child.kill('SIGKILL');
    await Promise.all(nodes.map((n) => waitExit(n.child, 5_000)));
  };

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    for (const n of [...nodes, ...spares]) {
      if (exited(n.child)) continue;
      n.child.send({ type: 'shutdown' });
      await waitExit(n.child, 15_000);
    }
    await db.drop();
  });

  it('every node stopped for 5 occurrences: skip fires 0 catch-ups, once 1 with missed = 5, all 5', async () => {
    nodes = await Promise.all(NODE_NAMES.map((n) => forkNode(n, db.url, 'ready')));
    spares = await Promise.all(NODE_NAMES.map((n) => forkNode(`${n}-2`, db.url, 'loaded')));
    const base = Math.floor((await dbEpoch()) / 1000) * 1000;
    const at = (offsets: number[]) => offsets.map((s) => new Date(base + s * 1000));
    const seconds = [...GROUP_1, ...GROUP_2, ...GROUP_3].map(
      (s) => (Math.floor(base / 1000) + s) % 60,
    );
    const cron = `${seconds.join(',')} * * * * *`;
    await request(
      nodes[0]!,
      {
        type: 'upsert',
        specs: POLICIES.map((missed) => ({
          name: `down-${missed}`,
          fsm: 'downtime',
          cron,
          missed,
          maxCatchup: 10,
        })),
      },
      'upserted',
    );
    const keysAt = (instants: Date[]) =>
      POLICIES.flatMap((p) => instants.map((d) => `cron:down-${p}:${d.toISOString()}`));

    // Group 1 on time, then every node down before group 2 begins.
    await waitFired(keysAt(at(GROUP_1)));
    await killAll();
    const stoppedAt = await dbEpoch();
    expect(stoppedAt).toBeLessThan(base + GROUP_2[0]! * 1000);

    // Group 2 passes with no node up; restart once its last occurrence is beyond the grace.
    await waitDbClock(base + (GROUP_2[GROUP_2.length - 1]! + 2) * 1000 + GRACE_MS);
    const restartedAt = await dbEpoch();
    nodes = spares;
    await Promise.all(nodes.map((n) => request(n, { type: 'boot' }, 'ready')));
    const bootedAt = await dbEpoch();
    if (bootedAt >= base + GROUP_3[0]! * 1000 - GRACE_MS) {
      throw new Error(
        `the nodes took ${bootedAt - restartedAt} ms to boot: group 3 began before they ticked`,
      );
    }
    await waitFired(keysAt(at(GROUP_3)));
    for (const n of nodes) {
      n.child.send({ type: 'shutdown' });
      await waitExit(n.child, 15_000);
    }

    const { rows } = await db.pool.query<{ key: string; missed: number; inserted: string }>(
      `SELECT correlation_key AS key, (result->'cron'->>'missed')::int AS missed,
              (extract(epoch FROM inserted_at) * 1000)::bigint::text AS inserted
         FROM gen_durable WHERE fsm = 'downtime' AND status = 'done' ORDER BY correlation_key`,
    );
    const expression = CronExpression.parse(cron);
    const summary: Record<string, unknown> = {};
    for (const policy of POLICIES) {
      const prefix = `cron:down-${policy}:`;
      const fires = rows
        .filter((r) => r.key.startsWith(prefix))
        .map((r) => ({
          at: new Date(r.key.slice(prefix.length)),
          missed: r.missed,
          inserted: Number(r.inserted),
        }));
      const before = fires.filter((f) => f.inserted < restartedAt);
      const after = fires.filter((f) => f.inserted >= restartedAt);
      const lastBeforeStop = before[before.length - 1]!.at;
      const firstOnTime = after.find((f) => f.at.getTime() >= restartedAt)!.at;
      const missedOccurrences = expression.between(
        new Date(lastBeforeStop.getTime() + 1),
        new Date(firstOnTime.getTime() - 1),
        100,
      ).instants;
      expect(before.map((f) => f.at)).toEqual(at(GROUP_1));
      expect(missedOccurrences).toEqual(at(GROUP_2));
      expect(missedOccurrences).toHaveLength(5);
      const catchUps = after.filter((f) => f.at.getTime() < restartedAt);
      const expectedCatchUps = {
        skip: [],
        once: [{ at: missedOccurrences[4], missed: 5 }],
        all: missedOccurrences.map((d) => ({ at: d, missed: 0 })),
      }[policy];
      expect(catchUps.map((f) => ({ at: f.at, missed: f.missed }))).toEqual(expectedCatchUps);
      expect(after.filter((f) => f.at.getTime() >= restartedAt)).toEqual(
        at(GROUP_3).map((d) => expect.objectContaining({ at: d, missed: 0 })),
      );
      summary[policy] = catchUps.length;
    }
    process.stdout.write(
      `[cron downtime] ${cron}: down from ${new Date(stoppedAt).toISOString()} to ${new Date(restartedAt).toISOString()}, booted in ${bootedAt - restartedAt} ms, catch-ups ${JSON.stringify(summary)}\n`,
    );
  }, 240_000);
});
