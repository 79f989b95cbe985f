import { assertNever, OUTCOME_KINDS } from '../fsm/outcome-kinds';

import { type DurableStatus, isTerminalStatus } from '../gen-durable.constants';

import { type Queryable, type SqlExecutor } from '../db/sql-executor';
import { insertInstances } from '../sql/insert.sql';
import {
  CONSUME_INBOXES,
  CONSUME_SIGNALS,
  FANOUT_LOCK_PARENTS,
  FANOUT_PARK_PARENTS,
  FLUSH_PARKS,
  FLUSH_DONE,
  FLUSH_TRANSITIONS,
  FLUSH_TRANSITIONS_RECORDED,
  JOIN_PARENTS,
  LOCK_FLUSH_ROWS,
  RECHECK_PARKS,
  type SignalPair,
} from '../sql/outcome.sql';
import { type HistoryWrite, INSERT_HISTORY } from '../sql/history.sql';
import { faultPoint, FAULTS_ENABLED } from './fault-points';
import {
  dueInMs,
  type FanOutEntry,
  type FlushEntry,
  type ParkEntry,
  type TransitionEntry,
} from './flush-entry';

/** What a committed flush changed, for the after-commit effects (docs/design.md §6.4). */
export interface FlushEffects {
  /** Entries that committed. */
  readonly committed: readonly FlushEntry[];
  /** Queues with rows that became runnable and due (woken parents, recheck flips, children). */
  readonly pokeQueues: ReadonlySet<string>;
  /** Instance ids whose settled state changed (for caller-side await). */
  readonly settledIds: readonly string[];
  /**
   * Committed entries whose rows ended `cancelled` (a cancel requested while their step ran,
   * docs/design.md §27.2), whatever their own kind: answered `cancelled`.
   */
  readonly cancelledIds: readonly string[];
}

/**
 * A flush no rider can follow (see {@link isSolo}) is the transitions UPDATE alone, in
 * autocommit: one statement instead of BEGIN + UPDATE + COMMIT. Its terminals skip rows that
 * were ever signaled; the caller commits those in a transaction with the inbox sweep.
 */
export async function writeSoloFlush(
  sql: SqlExecutor,
  entries: TransitionEntry[],
): Promise<{ effects: FlushEffects; held: ReadonlySet<string> }> {
  if (FAULTS_ENABLED) await faultPoint('flush.beforeCommit', { ids: entries.map((e) => e.id) });
  const rows = await transitionsStatement(entries).run(sql, { entries, solo: true });
  const committedIds = new Set<string>();
  const held = new Set<string>();
  const pokeQueues = new Set<string>();
  const settledIds: string[] = [];
  const cancelledIds: string[] = [];
  for (const row of rows) {
    if (row.held) {
      held.add(row.id);
      continue;
    }
    committedIds.add(row.id);
    if (isTerminalStatus(row.status)) settledIds.push(row.id);
    if (row.status === 'cancelled') cancelledIds.push(row.id);
  }
  const ended = new Set(cancelledIds);
  for (const e of entries) {
    if (committedIds.has(e.id) && !ended.has(e.id) && pokesAfter(e)) pokeQueues.add(e.queue);
  }
  return {
    effects: {
      committed: entries.filter((e) => committedIds.has(e.id)),
      pokeQueues,
      settledIds,
      cancelledIds,
    },
    held,
  };
}

/**
 * The flush transaction body (docs/design.md §6.3): transitions, parks with their lost-wakeup
 * recheck, fan-outs, inbox consumption, parent joins and history rows, in `tx`.
 */
export async function writeFlush(
  sql: SqlExecutor,
  tx: Queryable,
  entries: FlushEntry[],
): Promise<FlushEffects> {
  const { transitions, parks, fanOuts } = byStatement(entries);
  const committedIds = new Set<string>();
  const pokeQueues = new Set<string>();
  const settledIds: string[] = [];
  const cancelledIds: string[] = [];
  const terminalParents: string[] = [];
  const terminalIds: string[] = [];
  /** A row this flush ended: its inbox sweep (if ever signaled) and its parent's join follow. */
  const ended = (row: {
    id: string;
    status: DurableStatus;
    parentId: string | null;
    signaled: boolean;
  }): void => {
    // A row never signaled has an empty inbox (read under its row lock: exact).
    if (row.signaled) terminalIds.push(row.id);
    settledIds.push(row.id);
    if (row.status === 'cancelled') cancelledIds.push(row.id);
    if (row.parentId !== null) terminalParents.push(row.parentId);
  };

  /** History rows no statement of this flush wrote (docs/design.md §28.1); rare. */
  let history: HistoryWrite[] | undefined;
  const record = (e: FlushEntry, status: DurableStatus): void => {
    const row = historyRow(e, status);
    if (row !== null) (history ??= []).push(row);
  };

  // 0. lock order: every row this flush may write, in one ascending pass, before any write
  if (needsLockPass(entries, transitions, parks, fanOuts)) {
    await LOCK_FLUSH_ROWS.run(
      sql,
      {
        ids: entries.map((e) => e.id),
        terminalIds: entries
          .filter((e) => e.parentId !== null && OUTCOME_KINDS[e.kind].terminal)
          .map((e) => e.id),
      },
      tx,
    );
  }

  // 1. transitions (their history rows in the same statement when one must be recorded)
  if (transitions.length > 0) {
    const statement = transitionsStatement(transitions);
    const rows = await statement.run(sql, { entries: transitions, solo: false }, tx);
    for (const row of rows) {
      committedIds.add(row.id);
      if (isTerminalStatus(row.status)) ended(row);
      // A mark-1 row a cancel request ended, when the plain statement wrote it.
      if (row.status === 'cancelled' && statement === FLUSH_TRANSITIONS) {
        record(entryOf(transitions, row.id), row.status);
      }
    }
  }

  // 2. parks + lost-wakeup recheck (a row whose cancel was requested ends instead)
  if (parks.length > 0) {
    const rows = await FLUSH_PARKS.run(sql, { entries: parks }, tx);
    const parkedIds: string[] = [];
    const recordParks = marked(parks);
    for (const row of rows) {
      committedIds.add(row.id);
      if (recordParks) record(entryOf(parks, row.id), row.status);
      if (isTerminalStatus(row.status)) {
        ended(row);
      } else {
        parkedIds.push(row.id);
        settledIds.push(row.id);
      }
    }
    if (parkedIds.length > 0) {
      const parked = new Set(parkedIds);
      const presented = presentedPairs(parks.filter((e) => parked.has(e.id)));
      const woken = await RECHECK_PARKS.run(sql, { parkedIds, presented }, tx);
      for (const w of woken) pokeQueues.add(w.queue);
    }
  }

  // 3. fan-outs: lock parents, insert children gated on ownership and on no cancel request
  //    (the guarded spawn, docs/design.md §27.2), park on landed count
  if (fanOuts.length > 0) {
    const owned = await FANOUT_LOCK_PARENTS.run(sql, { entries: fanOuts }, tx);
    const ownedIds = new Set(owned.map((o) => o.id));
    const spawnIds = new Set(owned.filter((o) => !o.cancelRequested).map((o) => o.id));
    const parking = fanOuts.filter((e) => ownedIds.has(e.id));
    const spawning = parking.filter((e) => spawnIds.has(e.id));
    const landed = new Map<string, number>();
    const childRows = spawning.flatMap((e) => e.children.map((row) => ({ row, parent: e.id })));
    if (childRows.length > 0) {
      const inserted = await insertInstances(
        sql,
        { rows: childRows.map((c) => c.row), parentIds: childRows.map((c) => c.parent) },
        tx,
      );
      for (const child of inserted) {
        const parent = child.parentId as string;
        landed.set(parent, (landed.get(parent) ?? 0) + 1);
        if (child.due) pokeQueues.add(child.queue);
      }
      if (FAULTS_ENABLED) {
        await faultPoint('spawn.afterChildInsert', { ids: spawning.map((e) => e.id) });
      }
    }
    if (parking.length > 0) {
      const parked = await FANOUT_PARK_PARENTS.run(sql, { entries: parking, landed }, tx);
      const recordParking = marked(parking);
      for (const p of parked) {
        committedIds.add(p.id);
        if (recordParking) record(entryOf(parking, p.id), p.status);
        if (isTerminalStatus(p.status)) {
          ended(p);
          continue;
        }
        settledIds.push(p.id);
        if (p.status === 'runnable') pokeQueues.add(p.queue);
      }
    }
  }

  // 4. consume: exact awaited pairs of committed progressing entries; whole inbox of terminals
  const endedIds = new Set(cancelledIds);
  const pairs = presentedPairs(
    entries.filter(
      (e) => committedIds.has(e.id) && !endedIds.has(e.id) && OUTCOME_KINDS[e.kind].consumesAwaited,
    ),
  );
  if (pairs.length > 0) await CONSUME_SIGNALS.run(sql, { pairs }, tx);
  if (terminalIds.length > 0) await CONSUME_INBOXES.run(sql, { ids: terminalIds }, tx);

  // 5. join: each parent decremented once by its count of terminal children
  if (terminalParents.length > 0) {
    const parents = await JOIN_PARENTS.run(sql, { parentIds: terminalParents }, tx);
    for (const p of parents) if (p.status === 'runnable') pokeQueues.add(p.queue);
  }

  for (const e of transitions) {
    if (committedIds.has(e.id) && !endedIds.has(e.id) && pokesAfter(e)) pokeQueues.add(e.queue);
  }
  // 6. history rows of parks, fan-outs and cancels, in this transaction (docs/design.md §28.1)
  if (history !== undefined) await INSERT_HISTORY.run(sql, { rows: history }, tx);
  if (FAULTS_ENABLED) await faultPoint('flush.beforeCommit', { ids: entries.map((e) => e.id) });
  return {
    committed: entries.filter((e) => committedIds.has(e.id)),
    pokeQueues,
    settledIds,
    cancelledIds,
  };
}

/**
 * Whether the flush takes its row locks first, in one id-ordered pass (LOCK_FLUSH_ROWS,
 * docs/design.md §6.3 step 0): when its rows are written by more than one statement
 * (transitions, parks, fan-outs each lock their own rows in id order, but one after the other)
 * or when it may join a parent (any row with a parent: a terminal outcome, or a cancel request
 * read under the lock, ends it). A flush of one statement's rows and no parent locks them in
 * that statement's id order already.
 */
function needsLockPass(
  entries: readonly FlushEntry[],
  transitions: readonly FlushEntry[],
  parks: readonly FlushEntry[],
  fanOuts: readonly FlushEntry[],
): boolean {
  const groups = [transitions, parks, fanOuts].filter((g) => g.length > 0).length;
  return groups > 1 || entries.some((e) => e.parentId !== null);
}

/**
 * True when no rider can follow the transitions UPDATE: transitions only (no park, no
 * fan-out), no presented signal to consume, no terminal with a parent to join. A terminal's
 * inbox sweep is the one rider that cannot be known before the UPDATE; the solo statement
 * refuses terminals on signaled rows instead (FLUSH_TRANSITIONS).
 */
export function isSolo(entries: readonly FlushEntry[]): entries is TransitionEntry[] {
  for (const e of entries) {
    const spec = OUTCOME_KINDS[e.kind];
    if (spec.write !== 'transition') return false;
    if (e.awaitedIds.length > 0) return false;
    if (spec.terminal && e.parentId !== null) return false;
  }
  return true;
}

/**
 * The transitions statement of a flush: FLUSH_TRANSITIONS_RECORDED, which writes the history
 * rows in the same statement, when one of the entries must be recorded (mark ≥ 2); FLUSH_DONE
 * when every entry is `done` (a drain's flush: the same write without the per-kind CASEs); the
 * plain FLUSH_TRANSITIONS otherwise (docs/design.md §28.1: the happy path of `'off'` and
 * `'failures'` runs the statement it always ran). A loop, no closure: it runs once per flush.
 */
function transitionsStatement(entries: readonly TransitionEntry[]): typeof FLUSH_TRANSITIONS {
  let allDone = true;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if ((e.history ?? 0) >= 2) return FLUSH_TRANSITIONS_RECORDED;
    if (e.kind !== 'done') allDone = false;
  }
  return allDone ? FLUSH_DONE : FLUSH_TRANSITIONS;
}

/** Whether any entry may write a history row (mark ≥ 1). */
function marked(entries: readonly FlushEntry[]): boolean {
  for (let i = 0; i < entries.length; i++) if ((entries[i]!.history ?? 0) > 0) return true;
  return false;
}

function entryOf<E extends FlushEntry>(entries: readonly E[], id: string): E {
  for (const e of entries) if (e.id === id) return e;
  throw new Error(`flush: no entry for row ${id}`);
}

/**
 * The history row of an entry written by a statement that records none itself (a park, a
 * fan-out's park, a transition a cancel request ended under the plain statement), or null
 * when its mark does not record it: mark ≥ 2 always, mark 1 when the row ended `cancelled`.
 */
function historyRow(e: FlushEntry, status: DurableStatus): HistoryWrite | null {
  const mark = e.history ?? 0;
  const cancelled = status === 'cancelled';
  if (mark === 0 || (mark === 1 && !cancelled)) return null;
  return {
    instanceId: e.id,
    kind: cancelled || e.kind === 'cancel' ? 'cancelled' : e.kind === 'continue' ? 'next' : e.kind,
    step: e.step,
    nextStep: cancelled || e.kind === 'retry' ? null : e.nextStep,
    attempt: e.attempt ?? null,
    claimSeq: e.seq,
    worker: e.worker,
    outcome: status,
    errorText: e.thrown ?? reasonError(e),
    withState: mark === 3,
    actor: null,
  };
}

/** A stop's or retried job's reason, as history keeps it when nothing was thrown. */
function reasonError(e: FlushEntry): string | null {
  if ((e.kind !== 'stop' && e.kind !== 'retry') || e.error === null) return null;
  return JSON.stringify({ name: 'reason', message: e.error, stack: null });
}

/** The entries of a flush by the statement that writes them (the outcome table's `write`). */
function byStatement(entries: readonly FlushEntry[]): {
  transitions: TransitionEntry[];
  parks: ParkEntry[];
  fanOuts: FanOutEntry[];
} {
  const transitions: TransitionEntry[] = [];
  const parks: ParkEntry[] = [];
  const fanOuts: FanOutEntry[] = [];
  for (const e of entries) {
    const write = OUTCOME_KINDS[e.kind].write;
    switch (write) {
      case 'transition':
        transitions.push(e as TransitionEntry);
        break;
      case 'park':
        parks.push(e as ParkEntry);
        break;
      case 'fanOut':
        fanOuts.push(e as FanOutEntry);
        break;
      default:
        assertNever(write, 'flush statement');
    }
  }
  return { transitions, parks, fanOuts };
}

/** A committed transition pokes its queue when it leaves work runnable now (the table's `pokes`). */
function pokesAfter(e: TransitionEntry): boolean {
  const pokes = OUTCOME_KINDS[e.kind].pokes;
  switch (pokes) {
    case 'always':
      return true;
    case 'whenDue':
      return dueInMs(e) <= 0;
    case 'never':
      return false;
    default:
      return assertNever(pokes, 'poke rule');
  }
}

/** The (target, signal) pairs of the signals presented to `entries`' steps. */
function presentedPairs(entries: readonly FlushEntry[]): SignalPair[] {
  const pairs: SignalPair[] = [];
  for (const e of entries) {
    for (const signalId of e.awaitedIds) pairs.push({ targetId: e.id, signalId });
  }
  return pairs;
}
