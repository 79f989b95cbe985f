import fc from 'fast-check';

import {
  awaitSignal,
  done,
  DuplicateError,
  DurableFsm,
  type EngineService,
  InvalidInputError,
  next,
  NoTargetError,
  type Outcome,
  retry,
  scheduleChildren,
  Step,
  stop,
} from '../../../lib';
import type { FsmDefinition } from '../../../lib/discovery/fsm-definition';
import type { ClaimedRow } from '../../../lib/runtime/claimed-row';
import type { Flusher } from '../../../lib/runtime/flusher';
import type { GarbageCollector } from '../../../lib/runtime/gc';
import { outcomeToEntry } from '../../../lib/runtime/outcome-entry';
import type { Reaper } from '../../../lib/runtime/reaper';
import { HEARTBEAT, MARK_STEP_STARTED, RECLAIM_PREDECESSOR } from '../../../lib/sql/lease.sql';
import type { TestDatabase } from '../../support/test-database';
import {
  byId,
  LIVE,
  MAX_REAPS,
  type MClaim,
  type MRow,
  type OutcomeKind,
  ReferenceModel,
  type Status,
} from './reference-model';

/** The FSM the model's rows belong to; its steps never run (outcomes are built directly). */
@DurableFsm({ name: 'm', queue: 'm' })
export class ModelFsm {
  @Step() start() {
    return done({});
  }
  @Step() b() {
    return done({});
  }
  @Step() c() {
    return done({});
  }
}

export const WORKERS = ['model:m@node-A-1', 'model:m@node-A-2', 'model:m@node-B-1'] as const;
export const PREFIXES = ['model:m@node-A-', 'model:m@node-B-'] as const;
export const LEASE_MS = 60_000;
const FAR_MS = 3_600_000;

/** The system under test: the engine's own query layer and components, no timers. */
export interface Real {
  readonly db: TestDatabase;
  readonly engine: EngineService;
  readonly definition: FsmDefinition;
  readonly flusher: Flusher;
  readonly reaper: Reaper;
  readonly gc: GarbageCollector;
  /** Every claim each worker has made (newest last), current or stale. */
  readonly held: Map<string, ClaimedRow[]>;
  /** A log of the commands run, for the failure message. */
  readonly log: string[];
}

export interface World {
  readonly model: ReferenceModel;
}

export type Cmd = fc.AsyncCommand<World, Real, false>;

/** Outcome tallies across runs (printed by the spec: shows the interesting paths were taken). */
export const outcomes = new Map<string, number>();
const count = (what: string): void => void outcomes.set(what, (outcomes.get(what) ?? 0) + 1);

const ids = (m: ReferenceModel, filter: (r: MRow) => boolean): string[] =>
  [...m.rows.values()]
    .filter(filter)
    .sort(byId)
    .map((r) => r.id);
const pickOf = <T>(list: readonly T[], n: number): T | undefined =>
  list.length === 0 ? undefined : list[n % list.length];
const claimOf = (row: ClaimedRow): MClaim => ({
  id: row.id,
  worker: row.worker,
  claimSeq: Number(row.claimSeq),
});

export class InsertCmd implements Cmd {
  constructor(
    readonly key: string | null,
    readonly corrKey: string | null,
    readonly delayed: boolean,
  ) {}
  check = (): boolean => true;
  async run({ model }: World, real: Real): Promise<void> {
    const options = {
      state: { seq: 0 },
      ...(this.key ? { concurrencyKey: this.key } : {}),
      ...(this.corrKey ? { correlationKey: this.corrKey } : {}),
      ...(this.delayed ? { scheduleIn: FAR_MS } : {}),
    };
    const occupied = this.corrKey !== null && model.liveByCorrKey(this.corrKey) !== undefined;
    try {
      const id = await real.engine.insert(ModelFsm, options);
      if (occupied) throw new Error(`insert with occupied key ${this.corrKey} was accepted`);
      model.insert(id, { key: this.key, corrKey: this.corrKey, eligible: !this.delayed });
    } catch (err) {
      if (!(err instanceof DuplicateError) || !occupied) throw err;
    }
  }
  toString = (): string =>
    `Insert(key=${this.key}, corr=${this.corrKey}${this.delayed ? ', delayed' : ''})`;
}

export class PickCmd implements Cmd {
  constructor(
    readonly worker: number,
    readonly batch: number,
  ) {}
  check = (): boolean => true;
  async run({ model }: World, real: Real): Promise<void> {
    const worker = WORKERS[this.worker]!;
    const claimable = model.claimable();
    const claimableIds = new Set(claimable.map((r) => r.id));
    const rows = await real.engine.runtime.picker.pick('m', this.batch, worker);
    // The model validates the choice instead of predicting it (docs/reliability.md §6.2).
    expect(rows.length).toBeLessThanOrEqual(this.batch);
    if (claimable.length > 0) expect(rows.length).toBeGreaterThan(0);
    const keys = new Set<string>();
    for (const row of rows) {
      expect(claimableIds.has(row.id)).toBe(true);
      const m = model.must(row.id);
      if (m.key !== null) {
        expect(keys.has(m.key)).toBe(false);
        keys.add(m.key);
      }
      expect(Number(row.claimSeq)).toBe(m.claimSeq + 1);
      expect(row.attempt).toBe(m.attempt);
      expect(row.step).toBe(m.step);
      expect(row.state).toEqual({ seq: m.seq });
      // Enrichment: the unconsumed inbox and every stored child, by id.
      expect(row.inbox.map((s) => [s.id, s.name])).toEqual(
        m.inbox.filter((s) => !s.consumed).map((s) => [s.id, s.name]),
      );
      const children = [...model.rows.values()].filter((c) => c.parent === row.id).sort(byId);
      expect(row.children.map((c) => [c.id, c.status])).toEqual(
        children.map((c) => [c.id, c.status]),
      );
    }
    for (const row of rows) model.adoptClaim(row.id, worker, Number(row.claimSeq));
    // Every picked row counts as started, as the scheduler records for a row that already lost
    // a worker (finding F-R11): each later reap then counts, exactly as the model's cap does.
    // Reaps of rows lost while merely buffered are covered by poison-pill.spec.ts.
    for (const row of rows) {
      if (row.reaps > 0) {
        await MARK_STEP_STARTED.run(real.engine.runtime.sql, { worker, row });
      }
    }
    const list = real.held.get(worker) ?? [];
    list.push(...rows);
    real.held.set(worker, list.slice(-8));
  }
  toString = (): string => `Pick(${WORKERS[this.worker]}, ${this.batch})`;
}

function outcomeFor(kind: OutcomeKind, row: ClaimedRow, seq: number): Outcome {
  const state = { seq };
  switch (kind) {
    case 'next':
      return next(row.step === 'b' ? 'c' : 'b', state);
    case 'retry':
      return retry(state, 0);
    case 'retryLater':
      return retry(state, FAR_MS);
    case 'await':
      return awaitSignal('x', 'b', state);
    case 'awaitTimeout':
      return awaitSignal(['x', 'y'], 'b', state, { timeout: FAR_MS });
    case 'spawn0':
      return scheduleChildren('c', [], state);
    case 'spawn2':
      return scheduleChildren(
        'c',
        [
          { fsm: ModelFsm, state: { seq: 0 } },
          { fsm: ModelFsm, state: { seq: 0 } },
        ],
        state,
      );
    case 'done':
      return done({ seq });
    case 'stop':
      return stop(`stopped at ${seq}`);
  }
}

export class CompleteCmd implements Cmd {
  constructor(
    readonly worker: number,
    readonly claim: number,
    readonly kind: OutcomeKind,
  ) {}
  check = (): boolean => true;
  async run({ model }: World, real: Real): Promise<void> {
    // The chosen worker, or the next one that holds any claim.
    const worker = [0, 1, 2]
      .map((d) => WORKERS[(this.worker + d) % WORKERS.length]!)
      .find((w) => (real.held.get(w) ?? []).length > 0);
    if (!worker) return;
    const held = real.held.get(worker) ?? [];
    // `claim` ≥ 0 counts back from the newest claim; -1 asks for a claim the worker still owns
    // (the common case of a live task finishing), falling back to the newest.
    const current = held.filter((r) => model.owns(claimOf(r)));
    const row =
      this.claim < 0
        ? (current[current.length - 1] ?? held[held.length - 1])
        : held[Math.max(0, held.length - 1 - (this.claim % held.length))];
    if (!row) return;
    const claim = claimOf(row);
    const owned = model.owns(claim);
    // The step computes from the state it was handed at claim time.
    const seq = (row.state as { seq: number }).seq + 1;
    const presented = row.awaits
      ? row.inbox.filter((s) => row.awaits?.includes(s.name)).map((s) => s.id)
      : [];
    const entry = outcomeToEntry(
      outcomeFor(this.kind, row, seq),
      row,
      real.definition,
      real.engine.runtime.registry,
      real.engine.runtime.options,
      presented,
    );
    const before = new Set(
      (
        await real.db.pool.query<{ id: string }>(
          'SELECT id FROM gen_durable WHERE parent_id = $1',
          [row.id],
        )
      ).rows.map((r) => r.id),
    );
    const commits = owned ? model.commitsAs(row.id, this.kind) : undefined;
    const reply = await real.flusher.submit(entry);
    // Exactly once per claim: committed iff this claim is the row's current one; a requested
    // cancel turns it into `cancelled` (docs/design.md §27.2).
    expect(reply).toBe(owned ? (commits === 'cancel' ? 'cancelled' : 'committed') : 'stale');
    count(`${this.kind}:${reply}`);
    if (!owned) return;
    const children = (
      await real.db.pool.query<{ id: string }>(
        'SELECT id FROM gen_durable WHERE parent_id = $1 ORDER BY id',
        [row.id],
      )
    ).rows
      .map((r) => r.id)
      .filter((id) => !before.has(id));
    if (commits === 'cancel') count('cancel:committed');
    expect(children).toHaveLength(commits === 'spawn2' ? 2 : 0);
    // A committed step wrote seq = claimed seq + 1: the model's row must be at claimed seq.
    expect(model.must(row.id).seq).toBe(seq - 1);
    model.applyOutcome(claim, this.kind, presented, children);
  }
  toString = (): string =>
    `Complete(${WORKERS[this.worker]}, ${this.claim < 0 ? 'current' : `claim-${this.claim}`}, ${this.kind})`;
}

export class HeartbeatCmd implements Cmd {
  constructor(readonly worker: number) {}
  check = (): boolean => true;
  async run({ model }: World, real: Real): Promise<void> {
    const worker = WORKERS[this.worker]!;
    const held = real.held.get(worker) ?? [];
    if (held.length === 0) return;
    const { renewed } = await HEARTBEAT.run(real.engine.runtime.sql, {
      worker,
      rows: held,
      leaseMs: LEASE_MS,
    });
    const expected = model.heartbeat(held.map(claimOf));
    expect([...renewed].sort()).toEqual([...new Set(expected)].sort());
  }
  toString = (): string => `Heartbeat(${WORKERS[this.worker]})`;
}

export class ExpireLeaseCmd implements Cmd {
  constructor(readonly n: number) {}
  check = ({ model }: World): boolean => ids(model, (r) => r.status === 'executing').length > 0;
  async run({ model }: World, real: Real): Promise<void> {
    const id = pickOf(
      ids(model, (r) => r.status === 'executing'),
      this.n,
    )!;
    await real.db.pool.query(
      `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    model.must(id).leaseExpired = true;
  }
  toString = (): string => `ExpireLease(#${this.n})`;
}

export class ReapCmd implements Cmd {
  check = (): boolean => true;
  async run({ model }: World, real: Real): Promise<void> {
    const result = await real.reaper.sweep();
    const expected = model.reap();
    if (expected.reaped.length) count('reaped');
    if (expected.poisoned.length) count('poisoned');
    if (expected.timeouts.length) count('await-timeout');
    expect(result).toEqual({
      reaped: expected.reaped.length,
      poisoned: expected.poisoned.length,
      timeouts: expected.timeouts.length,
      // The model's rig wires no instance deadlines into its reaper.
      deadlines: 0,
    });
  }
  toString = (): string => 'Reap()';
}

export class ReclaimCmd implements Cmd {
  constructor(readonly prefix: number) {}
  check = (): boolean => true;
  async run({ model }: World, real: Real): Promise<void> {
    const prefix = PREFIXES[this.prefix]!;
    const rows = await RECLAIM_PREDECESSOR.run(real.engine.runtime.sql, {
      queue: 'm',
      workerPrefix: prefix,
      leaseBelowMs: 0,
      maxReaps: MAX_REAPS,
      spreadMs: 0,
      ownWorker: `${prefix}reclaiming`, // the new incarnation, holding nothing yet
    });
    expect([...rows].sort()).toEqual(model.reclaim(prefix).sort());
  }
  toString = (): string => `StartupReclaim(${PREFIXES[this.prefix]})`;
}

export class DeliverCmd implements Cmd {
  constructor(
    readonly n: number,
    readonly name: string,
    readonly dedup: string | null,
    readonly byKey: boolean,
    readonly missing: boolean,
  ) {}
  check = (): boolean => true;
  async run({ model }: World, real: Real): Promise<void> {
    let target: string | null;
    let address: { id: string } | { correlationKey: string };
    if (this.missing) {
      target = null;
      address = { id: '9000000000' };
    } else if (this.byKey) {
      const key = ['c1', 'c2'][this.n % 2]!;
      target = model.liveByCorrKey(key)?.id ?? null;
      address = { correlationKey: key };
    } else {
      const all = [...model.rows.keys()].sort((a, b) => byId({ id: a }, { id: b }));
      target = pickOf(all, this.n) ?? null;
      address = { id: target ?? '9000000001' };
    }
    const expected = model.deliver(target, this.name, this.dedup);
    count(`deliver:${expected}`);
    try {
      await real.engine.signal(
        address,
        this.name,
        { n: this.n },
        this.dedup ? { dedupKey: this.dedup } : {},
      );
    } catch (err) {
      if (err instanceof NoTargetError && expected === 'no_target') return;
      throw err;
    }
    expect(expected).not.toBe('no_target');
    if (expected === 'stored') {
      const { rows } = await real.db.pool.query<{ id: string }>(
        'SELECT max(id) AS id FROM gen_durable_signals WHERE target_id = $1',
        [target],
      );
      model.addSignal(target!, {
        id: rows[0]!.id,
        name: this.name,
        dedup: this.dedup,
        consumed: false,
      });
    }
  }
  toString = (): string =>
    `Deliver(${this.missing ? 'missing' : this.byKey ? `key#${this.n}` : `#${this.n}`}, ${this.name}${this.dedup ? `, dedup=${this.dedup}` : ''})`;
}

export class ExpireAwaitCmd implements Cmd {
  constructor(readonly n: number) {}
  check = ({ model }: World): boolean =>
    ids(model, (r) => r.status === 'awaiting_signal' && r.deadline === 'future').length > 0;
  async run({ model }: World, real: Real): Promise<void> {
    const id = pickOf(
      ids(model, (r) => r.status === 'awaiting_signal' && r.deadline === 'future'),
      this.n,
    )!;
    // The park time moves back with the deadline, so the timeout stays FAR_MS: a retry after a
    // cancel re-arms it for that long (docs/design.md §27.3).
    await real.db.pool.query(
      `UPDATE gen_durable SET await_deadline = now() - interval '1 second',
              eligible_at = now() - interval '1 second' - make_interval(secs => $2::float8 / 1000)
        WHERE id = $1`,
      [id, FAR_MS],
    );
    model.must(id).deadline = 'past';
  }
  toString = (): string => `ExpireAwait(#${this.n})`;
}

export class MakeDueCmd implements Cmd {
  constructor(readonly n: number) {}
  check = ({ model }: World): boolean =>
    ids(model, (r) => r.status === 'runnable' && !r.eligible).length > 0;
  async run({ model }: World, real: Real): Promise<void> {
    const id = pickOf(
      ids(model, (r) => r.status === 'runnable' && !r.eligible),
      this.n,
    )!;
    await real.db.pool.query(
      `UPDATE gen_durable SET eligible_at = now() - interval '1 millisecond' WHERE id = $1`,
      [id],
    );
    model.must(id).eligible = true;
  }
  toString = (): string => `MakeDue(#${this.n})`;
}

export class AgeCmd implements Cmd {
  constructor(readonly n: number) {}
  check = ({ model }: World): boolean =>
    ids(model, (r) => !LIVE.includes(r.status) && !r.aged).length > 0;
  async run({ model }: World, real: Real): Promise<void> {
    const id = pickOf(
      ids(model, (r) => !LIVE.includes(r.status) && !r.aged),
      this.n,
    )!;
    await real.db.pool.query(
      `UPDATE gen_durable SET updated_at = now() - interval '2 hours' WHERE id = $1`,
      [id],
    );
    model.must(id).aged = true;
  }
  toString = (): string => `AgePastRetention(#${this.n})`;
}

export class GcCmd implements Cmd {
  check = (): boolean => true;
  async run({ model }: World, real: Real): Promise<void> {
    const deleted = await real.gc.sweep();
    expect(deleted).toBe(model.gc().length);
  }
  toString = (): string => 'GC()';
}

/**
 * `cancel(row, { children: 'cascade', mode })` (docs/design.md §27.2) through EngineService: the
 * answer's three lists must be the model's, and the rows the model changed (checked after the
 * command with everything else).
 */
export class CancelCmd implements Cmd {
  constructor(
    readonly n: number,
    readonly fence: boolean,
  ) {}
  check = ({ model }: World): boolean => model.rows.size > 0;
  async run({ model }: World, real: Real): Promise<void> {
    const all = [...model.rows.keys()].sort((a, b) => byId({ id: a }, { id: b }));
    const id = pickOf(all, this.n)!;
    const expected = model.cancel(id, this.fence)!;
    const answer = await real.engine.cancel(
      { id },
      { children: 'cascade', mode: this.fence ? 'fence' : 'cooperative' },
    );
    const sorted = (list: readonly string[]): string[] =>
      [...list].sort((a, b) => byId({ id: a }, { id: b }));
    expect({
      cancelled: sorted(answer.cancelled),
      requested: sorted(answer.requested),
      alreadyTerminal: sorted(answer.alreadyTerminal),
    }).toEqual(expected);
    if (expected.cancelled.length) count('cancel:cancelled');
    if (expected.requested.length) count('cancel:requested');
    if (expected.alreadyTerminal.length) count('cancel:terminal');
    if (expected.cancelled.length + expected.requested.length > 1) count('cancel:tree');
  }
  toString = (): string => `Cancel(#${this.n}, ${this.fence ? 'fence' : 'cooperative'})`;
}

/** `retry(row)` (docs/design.md §27.3) through EngineService: runs it again, or refuses as the model says. */
export class RetryCmd implements Cmd {
  constructor(readonly n: number) {}
  check = ({ model }: World): boolean => model.rows.size > 0;
  async run({ model }: World, real: Real): Promise<void> {
    // Mostly rows that can be retried; sometimes any row (the refusals).
    const ended = ids(model, (r) => r.status === 'failed' || r.status === 'cancelled');
    const all = ids(model, () => true);
    const id = pickOf(this.n % 4 === 0 || ended.length === 0 ? all : ended, this.n)!;
    const expected = model.retry(id);
    count(`retry:${expected}`);
    try {
      await real.engine.retry({ id });
    } catch (err) {
      if (expected === 'duplicate' && err instanceof DuplicateError) return;
      if ((expected === 'status' || expected === 'parent') && err instanceof InvalidInputError) {
        return;
      }
      throw err;
    }
    expect(expected).toBe('retried');
  }
  toString = (): string => `Retry(#${this.n})`;
}

const KINDS: OutcomeKind[] = [
  'next',
  'next',
  'retry',
  'retryLater',
  'await',
  'awaitTimeout',
  'spawn0',
  'spawn2',
  'done',
  'stop',
];

/** The command arbitraries (docs/reliability.md §6.2), weighted toward the interesting ones. */
export function commandArbitraries(): fc.Arbitrary<Cmd>[] {
  const worker = fc.nat({ max: WORKERS.length - 1 });
  const insert = fc
    .record({
      key: fc.constantFrom(null, null, 'k1', 'k2'),
      corr: fc.constantFrom(null, null, 'c1', 'c2'),
      delayed: fc.constantFrom(false, false, false, true),
    })
    .map((o) => new InsertCmd(o.key, o.corr, o.delayed));
  const pick = fc.tuple(worker, fc.integer({ min: 1, max: 3 })).map(([w, b]) => new PickCmd(w, b));
  // Claims are drawn from the newest end: mostly the current one, sometimes an older (stale) one.
  const complete = fc
    .tuple(worker, fc.constantFrom(-1, -1, -1, 0, 1, 2), fc.constantFrom(...KINDS))
    .map(([w, c, k]) => new CompleteCmd(w, c, k));
  return [
    insert,
    insert,
    insert,
    pick,
    pick,
    pick,
    complete,
    complete,
    complete,
    complete,
    worker.map((w) => new HeartbeatCmd(w)),
    fc.nat().map((n) => new ExpireLeaseCmd(n)),
    fc.constant(new ReapCmd()),
    fc.nat({ max: 1 }).map((p) => new ReclaimCmd(p)),
    fc
      .record({
        n: fc.nat(),
        name: fc.constantFrom('x', 'y', 'z'),
        dedup: fc.constantFrom(null, null, 'd1', 'd2'),
        to: fc.constantFrom('id', 'id', 'id', 'key', 'missing'),
      })
      .map((o) => new DeliverCmd(o.n, o.name, o.dedup, o.to === 'key', o.to === 'missing')),
    fc.nat().map((n) => new ExpireAwaitCmd(n)),
    fc.nat().map((n) => new MakeDueCmd(n)),
    fc.nat().map((n) => new AgeCmd(n)),
    fc.constant(new GcCmd()),
    fc.tuple(fc.nat(), fc.boolean()).map(([n, fence]) => new CancelCmd(n, fence)),
    fc.nat().map((n) => new RetryCmd(n)),
  ];
}

interface DbRow {
  id: string;
  status: Status;
  step: string;
  attempt: number;
  seq: number;
  claim_seq: string;
  locked_by: string | null;
  expired: boolean | null;
  awaits: string[] | null;
  deadline_past: boolean | null;
  eligible: boolean;
  parent_id: string | null;
  children_pending: number;
  concurrency_key: string | null;
  correlation_key: string | null;
  reaps: number;
  suspect: boolean;
  cancel_requested: boolean;
}

/**
 * The global invariants of docs/reliability.md §6.3, checked after every command: the database
 * equals the model row by row and signal by signal, plus the model-free invariants (K = 1,
 * join counters, no lost wake-up, no live signal on a terminal row, one occupant per key).
 */
export async function checkInvariants(model: ReferenceModel, real: Real): Promise<void> {
  const pool = real.db.pool;
  const { rows } = await pool.query<DbRow>(
    `SELECT id, status, step, attempt, (state->>'seq')::int AS seq, claim_seq, locked_by,
            lease_expires_at < now() AS expired, awaits, await_deadline <= now() AS deadline_past,
            eligible_at <= now() AS eligible, parent_id, children_pending, concurrency_key,
            correlation_key, reaps, suspect, cancel_requested_at IS NOT NULL AS cancel_requested
       FROM gen_durable ORDER BY id`,
  );
  const expected = [...model.rows.values()].sort(byId);
  expect(rows.map((r) => r.id)).toEqual(expected.map((r) => r.id));
  rows.forEach((db, i) => {
    const m = expected[i]!;
    const view = {
      id: db.id,
      status: db.status,
      step: db.step,
      attempt: db.attempt,
      seq: db.seq,
      claimSeq: Number(db.claim_seq),
      worker: db.locked_by,
      awaits: db.awaits,
      deadline: db.deadline_past === null ? 'none' : db.deadline_past ? 'past' : 'future',
      parent: db.parent_id,
      childrenPending: db.children_pending,
      reaps: db.reaps,
      suspect: db.suspect,
      cancelRequested: db.cancel_requested,
      ...(db.status === 'executing' ? { leaseExpired: db.expired } : {}),
      ...(db.status === 'runnable' ? { eligible: db.eligible } : {}),
    };
    expect(view).toEqual({
      id: m.id,
      status: m.status,
      step: m.step,
      attempt: m.attempt,
      seq: m.seq,
      claimSeq: m.claimSeq,
      worker: m.worker,
      awaits: m.awaits,
      deadline: m.deadline,
      parent: m.parent,
      childrenPending: m.childrenPending,
      reaps: m.reaps,
      suspect: m.suspect,
      cancelRequested: m.cancelRequested,
      ...(m.status === 'executing' ? { leaseExpired: m.leaseExpired } : {}),
      ...(m.status === 'runnable' ? { eligible: m.eligible } : {}),
    });
  });
  const signals = await pool.query<{
    id: string;
    target_id: string;
    name: string;
    dedup_key: string | null;
    consumed: boolean;
  }>(
    'SELECT id, target_id, name, dedup_key, consumed_at IS NOT NULL AS consumed FROM gen_durable_signals ORDER BY id',
  );
  const modelSignals = expected
    .flatMap((r) =>
      r.inbox.map((s) => ({
        id: s.id,
        target_id: r.id,
        name: s.name,
        dedup_key: s.dedup,
        consumed: s.consumed,
      })),
    )
    .sort(byId);
  expect(signals.rows).toEqual(modelSignals);

  // Model-free invariants, straight from SQL.
  const k1 = await pool.query(
    `SELECT concurrency_key FROM gen_durable WHERE status = 'executing' AND concurrency_key IS NOT NULL AND concurrency_shard IS NULL
      GROUP BY 1 HAVING count(*) > 1`,
  );
  expect(k1.rows).toEqual([]);
  const join = await pool.query(
    `SELECT p.id FROM gen_durable p
      WHERE p.status = 'awaiting_children'
        AND p.children_pending <> (SELECT count(*) FROM gen_durable c WHERE c.parent_id = p.id AND c.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children'))`,
  );
  expect(join.rows).toEqual([]);
  const terminalInbox = await pool.query(
    `SELECT s.id FROM gen_durable_signals s JOIN gen_durable g ON g.id = s.target_id WHERE g.status IN ('done', 'failed', 'cancelled') AND s.consumed_at IS NULL`,
  );
  expect(terminalInbox.rows).toEqual([]);
  const occupants = await pool.query(
    `SELECT correlation_key FROM gen_durable WHERE correlation_key IS NOT NULL AND status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
      GROUP BY 1 HAVING count(*) > 1`,
  );
  expect(occupants.rows).toEqual([]);
  // The lost-wake-up detector: a parked row never holds an unconsumed, unpresented signal it awaits.
  for (const m of expected) {
    if (m.status !== 'awaiting_signal') continue;
    const waiting = m.inbox.filter(
      (s) => !s.consumed && m.awaits?.includes(s.name) && !m.presented.includes(s.id),
    );
    expect({ id: m.id, waiting }).toEqual({ id: m.id, waiting: [] });
  }
  expect(expected.every((m) => LIVE.includes(m.status) || m.worker === null)).toBe(true);
}
