/**
 * Every kind of outcome the engine commits, in one table: what it is called in the public API,
 * in flush entries, in telemetry and in the testing tally; whether it ends the instance; which
 * flush statement writes it; which riders follow it in the flush transaction; and when its
 * commit pokes its queue (docs/design.md §2.4, §6.3).
 *
 * The executor, outcome-entry, the flusher's phase selection and riders, the run-ahead and the
 * testing tally read this table. Adding a kind here without handling it fails `tsc`: the
 * public `Outcome` union must list exactly the public kinds (see `publicKindsMatch` in
 * outcome.ts), and every `switch` over a kind or a column of this table ends in `assertNever`.
 */
export const OUTCOME_KINDS = {
  next: {
    public: true,
    write: 'transition',
    terminal: false,
    consumesAwaited: true,
    pokes: 'always',
    tally: 'next',
  },
  retry: {
    public: true,
    write: 'transition',
    terminal: false,
    consumesAwaited: false,
    pokes: 'whenDue',
    tally: 'retry',
  },
  /**
   * Back off on a 429 (docs/design.md §16.5): the same step again after `retryAfterMs`, state
   * and attempt unchanged; the flush's after-commit closes the named limits (limiter `throttle`).
   */
  throttle: {
    public: true,
    write: 'transition',
    terminal: false,
    consumesAwaited: false,
    pokes: 'whenDue',
    tally: 'throttle',
  },
  await: {
    public: true,
    write: 'park',
    terminal: false,
    consumesAwaited: false,
    pokes: 'never',
    tally: 'await',
  },
  /** Runnable again at a later time at the next step, attempt 0 (docs/design.md §27.4). */
  sleep: {
    public: true,
    write: 'transition',
    terminal: false,
    consumesAwaited: true,
    pokes: 'whenDue',
    tally: 'sleep',
  },
  scheduleChildren: {
    public: true,
    write: 'fanOut',
    terminal: false,
    consumesAwaited: true,
    pokes: 'never',
    tally: 'scheduleChildren',
  },
  done: {
    public: true,
    write: 'transition',
    terminal: true,
    consumesAwaited: false,
    pokes: 'never',
    tally: 'done',
  },
  stop: {
    public: true,
    write: 'transition',
    terminal: true,
    consumesAwaited: false,
    pokes: 'never',
    tally: 'stop',
  },
  /**
   * A cooperative cancel honoured by the owner's flush (docs/design.md §27.2): whatever
   * non-terminal outcome the step returned is committed as `cancelled` instead; internal.
   */
  cancel: {
    public: false,
    write: 'transition',
    terminal: true,
    consumesAwaited: false,
    pokes: 'never',
    tally: 'cancelled',
  },
  /** The inline hand-off of a `next` that keeps its claim (docs/design.md §7); internal. */
  continue: {
    public: false,
    write: 'transition',
    terminal: false,
    consumesAwaited: true,
    pokes: 'never',
    tally: 'next',
  },
} as const satisfies Record<string, OutcomeKindSpec>;

export interface OutcomeKindSpec {
  /** Built by a public outcome constructor (next(), retry(), …); false for engine-internal kinds. */
  readonly public: boolean;
  /**
   * Which flush statement writes it: `transition` (the batched transitions UPDATE),
   * `park` (the park + lost-wakeup recheck), `fanOut` (park on children + child inserts).
   */
  readonly write: 'transition' | 'park' | 'fanOut';
  /**
   * Ends the instance. A terminal's riders: the inbox sweep when the row was ever signaled,
   * and the parent join when it has a parent (docs/design.md §8.3, §10).
   */
  readonly terminal: boolean;
  /** Consumes the signals its step was presented as `awaited` (docs/design.md §8.3). */
  readonly consumesAwaited: boolean;
  /**
   * When a commit pokes its queue: `always` (work is runnable now), `whenDue` (only when due
   * now; a later due time arms a local wake-up instead, docs/design.md §27.4), `never` (parks
   * and fan-outs poke from their recheck's result instead).
   */
  readonly pokes: 'always' | 'whenDue' | 'never';
  /** The counter it feeds in `drain()`'s tally and `ExecutionResult.kind`. */
  readonly tally: string;
}

/** A kind as it appears in a flush entry and in telemetry's `kind` label. */
export type EntryKind = keyof typeof OUTCOME_KINDS;

/** The kinds a step can return (built by the constructors of outcome.ts). */
export type PublicOutcomeKind = {
  [K in EntryKind]: (typeof OUTCOME_KINDS)[K]['public'] extends true ? K : never;
}[EntryKind];

/** The kinds a given flush statement writes. */
export type KindsWrittenBy<W extends OutcomeKindSpec['write']> = {
  [K in EntryKind]: (typeof OUTCOME_KINDS)[K]['write'] extends W ? K : never;
}[EntryKind];

/** The counters of the testing tally. */
export type TallyKind = (typeof OUTCOME_KINDS)[EntryKind]['tally'];

/** Every tally counter, in table order, each once. */
export const TALLY_KINDS: readonly TallyKind[] = [
  ...new Set(Object.values(OUTCOME_KINDS).map((spec) => spec.tally)),
];

/** The spec of one kind. */
export function outcomeKind(kind: EntryKind): OutcomeKindSpec {
  return OUTCOME_KINDS[kind];
}

/** The end of an exhaustive `switch`: a new kind that reaches it fails compilation. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unhandled ${what}: ${String(value)}`);
}
