import fc from 'fast-check';

import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  type Cmd,
  CompleteCmd,
  DeliverCmd,
  ExpireLeaseCmd,
  GcCmd,
  AgeCmd,
  HeartbeatCmd,
  InsertCmd,
  PickCmd,
  ReapCmd,
  ReclaimCmd,
} from './model/model-commands';
import { Checked, startModelRig } from './model/model-rig';
import { ReferenceModel } from './model/reference-model';

// Fixed command sequences for the model-based test (docs/reliability.md §6.7): the shapes the random
// runs must keep covering, and every counterexample a run has found (kept here once fixed,
// named after its finding in docs/reliability.md). Each runs through the same rig and the
// same after-every-command audit as model.spec.ts.

/** The newest claim the worker made (-1: one it still owns; n ≥ 0: n claims back from the newest). */
const NEWEST = 0;
const CURRENT = -1;
const W_A1 = 0;
const W_A2 = 1;
const W_B1 = 2;

const sequences: Record<string, Cmd[]> = {
  // §26.1: the same worker id re-claims a reaped row; the old claim's outcome is stale, the
  // new one commits, state never goes back.
  'same worker re-claims after a reap; the old token is stale': [
    new InsertCmd(null, null, false),
    new PickCmd(W_A1, 1),
    new ExpireLeaseCmd(0),
    new ReapCmd(),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, 1, 'next'),
    new CompleteCmd(W_A1, NEWEST, 'next'),
    new CompleteCmd(W_A1, 1, 'done'),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, NEWEST, 'done'),
  ],
  // §26.5: a row reaped MAX_REAPS times becomes a suspect, and the next counted loss (its
  // solo run) fails it as a poison pill; its parent is joined. Both children are claimed and
  // lost together each round (every model pick counts as a started step), so each gets there.
  'poison pill after repeated reaps joins its parent': [
    new InsertCmd(null, null, false),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, NEWEST, 'spawn2'),
    ...[1, 2, 3, 4].flatMap(() => [
      new PickCmd(W_B1, 2),
      new ExpireLeaseCmd(0),
      new ExpireLeaseCmd(1),
      new ReapCmd(),
    ]),
    new PickCmd(W_A2, 1),
    new CompleteCmd(W_A2, NEWEST, 'done'),
  ],
  // §8.4: the signal is stored while the step runs; the park's recheck wakes the row at once.
  'signal before the park: the recheck wakes it': [
    new InsertCmd(null, null, false),
    new PickCmd(W_A1, 1),
    new DeliverCmd(0, 'x', null, false, false),
    new CompleteCmd(W_A1, CURRENT, 'await'),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, CURRENT, 'next'),
  ],
  // §8.4/§8.5: a pack — a presented signal does not wake a re-await, a new one does; a
  // duplicate dedup key stays a duplicate after consumption (§26.7).
  'pack re-await, life-long dedup': [
    new InsertCmd(null, 'c1', false),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, CURRENT, 'await'),
    new DeliverCmd(0, 'x', 'd1', true, false),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, CURRENT, 'await'),
    new DeliverCmd(0, 'x', 'd1', true, false),
    new DeliverCmd(0, 'x', 'd2', true, false),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, CURRENT, 'next'),
    new DeliverCmd(0, 'x', 'd2', true, false),
    // Parked on x again: a webhook retrying d1 after its consumption is still a duplicate and
    // wakes nothing (§26.7); only a new key does.
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, CURRENT, 'await'),
    new DeliverCmd(0, 'x', 'd1', true, false),
    new DeliverCmd(0, 'x', 'd3', true, false),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, CURRENT, 'done'),
    new DeliverCmd(0, 'x', null, true, false),
  ],
  // §17.3: startup reclaim takes back only expired claims under its own prefix, and the
  // reclaimed claim's late outcome is stale.
  'startup reclaim by prefix, then the orphan outcome is stale': [
    new InsertCmd(null, null, false),
    new InsertCmd(null, null, false),
    new PickCmd(W_A1, 1),
    new PickCmd(W_B1, 1),
    new ExpireLeaseCmd(0),
    new ExpireLeaseCmd(1),
    new ReclaimCmd(0),
    new HeartbeatCmd(W_A1),
    new HeartbeatCmd(W_B1),
    new CompleteCmd(W_A1, NEWEST, 'next'),
    new CompleteCmd(W_B1, NEWEST, 'next'),
  ],
  // "After an ambiguous answer" (docs/reliability.md): a dedup key retried by id after the
  // instance consumed it and finished answers the duplicate, not NoTargetError; a new key to
  // the finished instance is still refused. (Found by seed 103720980 once the engine changed.)
  'a stored dedup key retried after the instance finished is the duplicate': [
    new InsertCmd(null, null, false),
    new DeliverCmd(0, 'x', 'd1', false, false),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, NEWEST, 'done'),
    new DeliverCmd(0, 'x', 'd1', false, false),
    new DeliverCmd(0, 'x', 'd2', false, false),
    new DeliverCmd(0, 'x', null, false, false),
  ],
  // §18: GC spares terminal children of a live parent, then takes the family.
  'GC spares children of a live parent': [
    new InsertCmd(null, null, false),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, NEWEST, 'spawn2'),
    new PickCmd(W_A2, 1),
    new CompleteCmd(W_A2, NEWEST, 'done'),
    new AgeCmd(0),
    new GcCmd(),
    new PickCmd(W_A2, 1),
    new CompleteCmd(W_A2, NEWEST, 'stop'),
    new PickCmd(W_A1, 1),
    new CompleteCmd(W_A1, NEWEST, 'done'),
    new AgeCmd(0),
    new AgeCmd(0),
    new GcCmd(),
  ],
};

describe('model-based regressions (fixed sequences)', () => {
  let db: TestDatabase;
  let rig: Awaited<ReturnType<typeof startModelRig>>;
  beforeAll(async () => {
    db = await createTestDatabase();
    rig = await startModelRig(db);
  });
  afterAll(async () => {
    await rig.app.close();
    await db.drop();
  });

  for (const [name, cmds] of Object.entries(sequences)) {
    it(name, async () => {
      const real = await rig.fresh();
      const model = new ReferenceModel();
      await fc.asyncModelRun(
        () => ({ model: { model }, real }),
        cmds.map((c) => new Checked(c)),
      );
      // Every command of the sequence ran (none was skipped by its precondition).
      expect(real.log).toEqual(cmds.map((c) => c.toString()));
    });
  }
});
