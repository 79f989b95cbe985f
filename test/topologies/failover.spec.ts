import { createServer } from 'node:net';

import { type Client, Pool } from 'pg';

import { multiHostClient } from '../../lib';
import { migrateUp } from '../../lib/schema/migrator';
import { PrivateCluster } from '../chaos/harness/pg-cluster';
import { type NodeHandle, startNode } from '../distribution/support/cluster';
import type { NodeConfig, NodeMessage } from '../distribution/support/node-protocol';
import { eventually } from '../support/engine-harness';

// docs/operations.md "Failover": a primary and a streaming standby (PostgreSQL 15 from Debian,
// private clusters on their own ports), a web node, three worker processes and a maintenance
// node connected through `multiHostClient({ hosts: [primary, standby] })`. While the web node
// inserts, the primary is killed (`pg_ctl stop -m immediate`) and the standby promoted. With a
// synchronous standby every acknowledged insert, signal and parked step survives; with an
// asynchronous one the loss window is measured and printed, not asserted. Either way the
// processes reconnect by themselves and finish every instance that exists.

type StepMessage = Extract<NodeMessage, { type: 'step' }>;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const MODES = [
  { mode: 'synchronous', conf: [`synchronous_standby_names = 'standby1'`] },
  { mode: 'asynchronous', conf: [] },
] as const;

describe.each(MODES)('failover to a promoted $mode standby', ({ mode, conf }) => {
  let primary: PrivateCluster | undefined;
  let standby: PrivateCluster | undefined;
  let pool: Pool | undefined;
  let nodes: NodeHandle[] = [];
  let web: NodeHandle;
  let workers: NodeHandle[];

  beforeAll(async () => {
    const [p1, p2] = [await freePort(), await freePort()];
    // The synchronous setting is turned on once the standby streams: before that, every commit
    // (CREATE DATABASE, the migration) would wait for a standby that does not exist yet.
    primary = await PrivateCluster.create(p1);
    await primary.start();
    const admin = new Pool({ connectionString: primary.url('postgres'), max: 1 });
    await admin.query('CREATE DATABASE gd');
    await admin.end();
    const migrate = new Pool({ connectionString: primary.url('gd'), max: 1 });
    const c = await migrate.connect();
    try {
      await migrateUp({ query: (text, params) => c.query(text, params), inTransaction: false });
    } finally {
      c.release();
      await migrate.end();
    }
    standby = await PrivateCluster.standbyOf(primary, p2, 'standby1');
    await standby.start();
    const settings = new Pool({ connectionString: primary.url('postgres'), max: 1 });
    for (const line of conf) {
      const [name, value] = line.split(' = ') as [string, string];
      await settings.query(`ALTER SYSTEM SET ${name} = ${value}`);
    }
    await settings.query('SELECT pg_reload_conf()');
    await settings.end();
    const hosts = [
      { host: '127.0.0.1', port: p1 },
      { host: '127.0.0.1', port: p2 },
    ];
    pool = new Pool({
      connectionString: primary.url('gd'),
      max: 2,
      Client: multiHostClient({ hosts }) as unknown as typeof Client,
    });
    pool.on('error', () => undefined);
    // The standby streams (and, in synchronous mode, is the synchronous one) before anything runs.
    await eventually(async () => {
      const { rows } = await pool!.query<{ sync_state: string }>(
        `SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'`,
      );
      return rows[0]?.sync_state === (mode === 'synchronous' ? 'sync' : 'async');
    }, 30_000);

    const base: Omit<NodeConfig, 'role' | 'nodeId'> = {
      databaseUrl: primary.url('gd'),
      hosts,
      poke: 'postgres',
      pollInterval: 100,
      maxPollInterval: 500,
      concurrency: 4,
    };
    const started = await Promise.all([
      startNode(`web-${mode}`, { ...base, role: 'web', nodeId: `web-${mode}` }),
      ...[1, 2, 3].map((i) =>
        startNode(`worker-${i}-${mode}`, {
          ...base,
          role: 'worker',
          nodeId: `worker-${i}-${mode}`,
        }),
      ),
      startNode(`maintenance-${mode}`, {
        ...base,
        role: 'maintenance',
        nodeId: `maintenance-${mode}`,
      }),
    ]);
    nodes = started;
    web = started[0]!;
    workers = started.slice(1, 4);
  }, 180_000);

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    await pool?.end();
    await standby?.destroy();
    await primary?.destroy();
  }, 120_000);

  async function statusOf(ids: readonly string[]): Promise<Map<string, string>> {
    const { rows } = await pool!.query<{ id: string; status: string }>(
      `SELECT id::text AS id, status::text AS status FROM gen_durable WHERE id = ANY($1::bigint[])`,
      [ids],
    );
    return new Map(rows.map((r) => [r.id, r.status]));
  }

  /** The nodes' last output lines, for a failure's message. */
  const outputs = (): string =>
    nodes.map((n) => `--- ${n.name}\n${n.output().split('\n').slice(-15).join('\n')}`).join('\n');

  it('the processes reconnect to the promoted standby by themselves and finish every instance; with a synchronous standby no acknowledged write is lost', async () => {
    const tag = `failover-${mode}`;
    const acked: string[] = [];
    let refusedInserts = 0;
    let inserting = true;
    const insertLoop = (async () => {
      while (inserting) {
        try {
          const [row] = await web.request<Array<{ id: string }>>(
            { cmd: 'insert', count: 1, spacingMs: 0, sleepMs: 50, tag },
            20_000,
          );
          if (row) acked.push(row.id);
        } catch {
          refusedInserts += 1;
        }
        await sleep(20);
      }
    })();

    // Some instances parked (their start step's outcome committed and acknowledged) before the
    // primary dies.
    await eventually(async () => {
      if (acked.length < 40) return false;
      const s = await statusOf(acked);
      return [...s.values()].filter((v) => v === 'awaiting_signal').length >= 20;
    }, 60_000);
    const before = await statusOf(acked);
    const parkedBefore = [...before].filter(([, s]) => s === 'awaiting_signal').map(([id]) => id);
    const ackedBeforeKill = acked.length;
    // Half of the parked ones are signalled (acknowledged) before the kill: each flips to
    // runnable in the statement that stores the signal, so it must never be parked again.
    const signalledBefore = parkedBefore.slice(0, Math.floor(parkedBefore.length / 2));
    await web.request({ cmd: 'signal', ids: signalledBefore, spacingMs: 0 }, 30_000);

    const killedAt = Date.now();
    await primary!.stop('immediate');
    await standby!.promote();
    const promotedAt = Date.now();

    // Inserts go on through the promotion; then stop and let the backlog settle.
    await eventually(async () => acked.length >= ackedBeforeKill + 20, 90_000).catch((err) => {
      throw new Error(
        `${String(err)} (acked ${acked.length}, refused ${refusedInserts})\n${outputs()}`,
      );
    });
    inserting = false;
    await insertLoop;

    // Every instance that exists parks, then is signalled once (acknowledged), then finishes.
    const { rows: existing } = await pool!.query<{ id: string }>(
      `SELECT id::text AS id FROM gen_durable WHERE state->>'tag' = $1`,
      [tag],
    );
    const present = new Set(existing.map((r) => r.id));
    const lostInserts = acked.filter((id) => !present.has(id));
    await eventually(async () => {
      const s = await statusOf([...present]);
      return [...s.values()].every((v) => v === 'awaiting_signal' || v === 'done');
    }, 120_000);
    const settled = await statusOf([...present]);
    const lostSignals = signalledBefore.filter((id) => settled.get(id) === 'awaiting_signal');
    const signalled: string[] = [];
    for (const id of present) {
      if ((await statusOf([id])).get(id) !== 'awaiting_signal') continue;
      await web.request({ cmd: 'signal', ids: [id], spacingMs: 0 }, 30_000);
      signalled.push(id);
    }
    await eventually(async () => {
      const s = await statusOf([...present]);
      return [...s.values()].every((v) => v === 'done');
    }, 120_000);

    const steps = workers.flatMap((w) =>
      w.messages.filter((m): m is StepMessage => m.type === 'step'),
    );
    // A start step of an instance seen parked before the kill, run again after it: the parked
    // outcome was lost (a rewind).
    const rewound = parkedBefore.filter((id) =>
      steps.some((m) => m.id === id && m.step === 'start' && m.at > killedAt),
    );
    const firstAfter = steps
      .filter((m) => m.at > promotedAt)
      .reduce((t, m) => Math.min(t, m.at), Number.POSITIVE_INFINITY);
    const recoveryS = (firstAfter - killedAt) / 1000;
    const finishes = new Set(steps.filter((m) => m.step === 'finish').map((m) => m.id));

    console.log(
      [
        `[failover, ${mode} standby] ${acked.length} inserts acknowledged (${ackedBeforeKill} before the kill), ${refusedInserts} refused during the failover;`,
        `  primary killed → standby promoted in ${((promotedAt - killedAt) / 1000).toFixed(2)} s; first step on the new primary ${recoveryS.toFixed(2)} s after the kill`,
        `  acknowledged inserts lost: ${lostInserts.length}; acknowledged signals lost: ${lostSignals.length} of ${signalledBefore.length}; parked steps rewound: ${rewound.length} of ${parkedBefore.length}; ${present.size} instances finished, ${signalled.length} signalled after the failover`,
      ].join('\n'),
    );

    expect(Number.isFinite(recoveryS)).toBe(true);
    for (const id of present) expect(finishes.has(id)).toBe(true);
    if (mode === 'synchronous') {
      expect(lostInserts).toEqual([]);
      expect(lostSignals).toEqual([]);
      expect(rewound).toEqual([]);
    }
  }, 400_000);
});
