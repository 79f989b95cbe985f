import type { Pool } from 'pg';

import { openRawSession, type RawSession } from '../../support/raw-session';
import type { TestDatabase } from '../../support/test-database';

/**
 * A deterministic interleaving runner in the style of PostgreSQL's isolation tester
 * (docs/reliability.md §3.4). Each *session* is a dedicated connection running a fixed list of
 * steps; a *permutation* is one interleaving of all sessions' steps (each session's own
 * order kept). The runner issues the steps in permutation order; after issuing one it waits
 * until the step either finishes or its session is waiting on a lock held by another session
 * of the spec — asked of `pg_isolation_test_session_is_blocked`, the function the isolation
 * tester itself uses — and then goes on with the next step. A step of a session that is still
 * blocked cannot be issued: such a permutation is *invalid* (as in the isolation tester) and
 * is counted, not run to the end. After the last step every blocked step must finish (else
 * the permutation hangs, which fails it) and the spec's `check` audits the outcome.
 */

/** What a session's step sees. */
export interface StepScope<V> {
  readonly session: RawSession;
  /** The fixture of this permutation (from `setup`), shared by all steps, mutable. */
  readonly vars: V;
}

export interface RaceStep<V> {
  /** Unique across the spec, e.g. `park` or `s1_commit`. */
  readonly name: string;
  run(scope: StepScope<V>): Promise<unknown>;
}

export interface StepOutcome {
  readonly step: string;
  readonly session: string;
  readonly value?: unknown;
  readonly error?: Error;
  /** The session was seen waiting on another session's lock while running this step. */
  readonly blocked: boolean;
  /** Position in completion order (0-based). */
  readonly completedAs: number;
}

export interface PermutationResult<V> {
  readonly permutation: readonly string[];
  readonly vars: V;
  /** Outcome per step name. */
  readonly steps: ReadonlyMap<string, StepOutcome>;
  /** Step names in completion order. */
  readonly completionOrder: readonly string[];
}

export interface RaceSpec<V> {
  readonly name: string;
  /** Session name → its steps in order. */
  readonly sessions: Readonly<Record<string, readonly RaceStep<V>[]>>;
  /** Builds this permutation's fixture (fresh rows) through the test pool. */
  setup(pool: Pool): Promise<V>;
  /** Audits one completed permutation; throw (or fail an expect) to fail it. */
  check(result: PermutationResult<V>, pool: Pool): Promise<void> | void;
  /** Only these permutations (by step names joined with a space); default all. */
  readonly permutations?: readonly (readonly string[])[];
}

export interface RaceReport {
  readonly spec: string;
  readonly total: number;
  readonly valid: number;
  readonly invalid: number;
  /** Permutations in which at least one step was seen blocked. */
  readonly withBlocking: number;
  /** One line per permutation: steps in order, `*` marking a step that blocked. */
  readonly lines: readonly string[];
}

const POLL_MS = 2;
const STEP_TIMEOUT_MS = 10_000;

/** Every interleaving of the given sequences, each sequence's order kept. */
export function interleavings(sequences: readonly (readonly string[])[]): string[][] {
  const out: string[][] = [];
  const idx = sequences.map(() => 0);
  const acc: string[] = [];
  const total = sequences.reduce((n, s) => n + s.length, 0);
  const walk = (): void => {
    if (acc.length === total) {
      out.push([...acc]);
      return;
    }
    sequences.forEach((seq, i) => {
      const at = idx[i]!;
      if (at >= seq.length) return;
      acc.push(seq[at]!);
      idx[i] = at + 1;
      walk();
      idx[i] = at;
      acc.pop();
    });
  };
  walk();
  return out;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

class InvalidPermutation extends Error {}

/**
 * Runs every permutation of `spec` on dedicated connections of `db`; throws the first
 * failed check (naming the permutation) and returns a report otherwise.
 */
export async function runRace<V>(
  db: TestDatabase,
  spec: RaceSpec<V>,
  schema = 'public',
): Promise<RaceReport> {
  const names = Object.keys(spec.sessions);
  const sessions = new Map<string, RaceSession>();
  for (const name of names) {
    sessions.set(name, new RaceSession(name, await openRawSession(db, schema)));
  }
  const ownerOf = new Map<string, string>();
  const stepOf = new Map<string, RaceStep<V>>();
  for (const [name, steps] of Object.entries(spec.sessions)) {
    for (const step of steps) {
      if (ownerOf.has(step.name)) {
        throw new Error(`${spec.name}: step name ${step.name} is used twice`);
      }
      ownerOf.set(step.name, name);
      stepOf.set(step.name, step);
    }
  }
  const perms =
    spec.permutations ?? interleavings(names.map((n) => spec.sessions[n]!.map((s) => s.name)));
  const lines: string[] = [];
  let valid = 0;
  let invalid = 0;
  let withBlocking = 0;
  try {
    for (const perm of perms) {
      const result = await runOne(db, spec, perm, sessions, ownerOf, stepOf);
      if (result === 'invalid') {
        invalid++;
        lines.push(`${perm.join(' ')}  (invalid: a blocked session was asked to step)`);
        continue;
      }
      valid++;
      const blocked = [...result.steps.values()].filter((o) => o.blocked);
      if (blocked.length > 0) withBlocking++;
      lines.push(perm.map((s) => (result.steps.get(s)?.blocked ? `${s}*` : s)).join(' '));
      try {
        await spec.check(result, db.pool);
      } catch (err) {
        const detail = [...result.steps.values()]
          .sort((a, b) => a.completedAs - b.completedAs)
          .map(
            (o) =>
              `${o.step}${o.blocked ? '*' : ''}=${o.error ? `error(${o.error.message})` : JSON.stringify(o.value)}`,
          )
          .join('; ');
        (err as Error).message =
          `${spec.name}, permutation [${perm.join(' ')}] (completed: ${detail}):\n${(err as Error).message}`;
        throw err;
      }
    }
  } finally {
    for (const s of sessions.values()) await s.session.close();
  }
  return { spec: spec.name, total: perms.length, valid, invalid, withBlocking, lines };
}

class RaceSession {
  /** The step this session is still running (blocked or finishing). */
  running: Promise<void> | undefined;
  constructor(
    readonly name: string,
    readonly session: RawSession,
  ) {}
}

async function runOne<V>(
  db: TestDatabase,
  spec: RaceSpec<V>,
  perm: readonly string[],
  sessions: Map<string, RaceSession>,
  ownerOf: Map<string, string>,
  stepOf: Map<string, RaceStep<V>>,
): Promise<PermutationResult<V> | 'invalid'> {
  const vars = await spec.setup(db.pool);
  const outcomes = new Map<string, StepOutcome>();
  const completion: string[] = [];
  const blockedSteps = new Set<string>();
  const pids = [...sessions.values()].map((s) => s.session.pid);

  const isBlocked = async (s: RaceSession): Promise<boolean> => {
    const others = pids.filter((p) => p !== s.session.pid);
    const { rows } = await db.pool.query<{ blocked: boolean }>(
      'SELECT pg_isolation_test_session_is_blocked($1, $2::int[]) AS blocked',
      [s.session.pid, others],
    );
    return rows[0]?.blocked === true;
  };

  /** Waits until `s`'s running step finished (true) or is blocked (false). */
  const settle = async (s: RaceSession, step: string): Promise<boolean> => {
    const deadline = Date.now() + STEP_TIMEOUT_MS;
    for (;;) {
      if (s.running === undefined) return true;
      const finished = await Promise.race([
        s.running.then(() => true),
        sleep(POLL_MS).then(() => false),
      ]);
      if (finished) return true;
      if (await isBlocked(s)) {
        blockedSteps.add(step);
        // It may have been granted the lock between the two checks: look once more.
        if (s.running === undefined) return true;
        return false;
      }
      if (Date.now() > deadline) {
        throw new Error(
          `${spec.name}: step ${step} neither finished nor blocked within ${STEP_TIMEOUT_MS} ms`,
        );
      }
    }
  };

  const runningStep = new Map<RaceSession, string>();
  try {
    for (const stepName of perm) {
      const s = sessions.get(ownerOf.get(stepName)!)!;
      if (s.running !== undefined) throw new InvalidPermutation();
      const step = stepOf.get(stepName)!;
      runningStep.set(s, stepName);
      s.running = step.run({ session: s.session, vars }).then(
        (value) => {
          outcomes.set(stepName, {
            step: stepName,
            session: s.name,
            value,
            blocked: blockedSteps.has(stepName),
            completedAs: completion.length,
          });
          completion.push(stepName);
          s.running = undefined;
        },
        (error: unknown) => {
          outcomes.set(stepName, {
            step: stepName,
            session: s.name,
            error: error instanceof Error ? error : new Error(String(error)),
            blocked: blockedSteps.has(stepName),
            completedAs: completion.length,
          });
          completion.push(stepName);
          s.running = undefined;
        },
      );
      await settle(s, stepName);
      // A step may have released locks others waited on: let those finish or re-block.
      for (const other of sessions.values()) {
        if (other !== s && other.running !== undefined) {
          await settle(other, runningStep.get(other)!);
        }
      }
    }
    for (const s of sessions.values()) {
      if (s.running !== undefined && !(await settle(s, runningStep.get(s)!))) {
        throw new Error(
          `${spec.name}: permutation [${perm.join(' ')}] ends with step ${runningStep.get(s)} still blocked`,
        );
      }
    }
  } catch (err) {
    await abandon(db, sessions);
    if (err instanceof InvalidPermutation) return 'invalid';
    throw err;
  }
  await abandon(db, sessions);
  // Record the final blocked flags (a step may have blocked after its outcome object was made).
  for (const [name, o] of outcomes) {
    if (blockedSteps.has(name) && !o.blocked) outcomes.set(name, { ...o, blocked: true });
  }
  return { permutation: perm, vars, steps: outcomes, completionOrder: completion };
}

/** Cancels whatever still waits and rolls back every session (a no-op outside a transaction). */
async function abandon(db: TestDatabase, sessions: Map<string, RaceSession>): Promise<void> {
  for (const s of sessions.values()) {
    const running = s.running;
    if (running) {
      await db.pool.query('SELECT pg_cancel_backend($1)', [s.session.pid]);
      await running.catch(() => undefined);
    }
  }
  for (const s of sessions.values()) await s.session.exec('ROLLBACK').catch(() => undefined);
}
