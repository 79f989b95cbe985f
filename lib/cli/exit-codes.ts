import { GenDurableError } from '../errors/gen-durable.error';
import { InvalidInputError } from '../errors/invalid-input.error';

/** The CLI's exit codes (docs/cli.md "Exit codes"). */
export const EXIT = {
  /** The command did what was asked. */
  ok: 0,
  /** `verify` found a problem, or the library refused the action (no such target, a duplicate, …). */
  problem: 1,
  /** The command line is wrong: unknown command or flag, a missing argument, a bad value. */
  usage: 2,
  /** The database could not be reached. */
  unreachable: 3,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A command-line mistake the CLI found itself (exit 2): a malformed value, a bad JSON payload. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The database could not be reached (exit 3); the message names host and port. */
export class UnreachableError extends Error {
  override readonly name = 'UnreachableError';
}

/** A problem a command reports after running (exit 1), e.g. a failed `verify`. */
export class ProblemError extends Error {
  override readonly name = 'ProblemError';
}

/** Socket-level codes of a connection that never came up. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
  '57P03', // the database system is starting up / shutting down
  '3D000', // the database does not exist
]);

/** True for an error that means the database could not be reached at all. */
export function isUnreachable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (typeof e?.code === 'string' && UNREACHABLE_CODES.has(e.code)) return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  return /^timeout: no database connection|Connection terminated due to connection timeout|timeout expired/.test(
    message,
  );
}

/**
 * The exit code of an error: usage (a library `InvalidInputError` refuses an argument too), the
 * database unreachable, else a problem (a typed library error such as `NoTargetError`, or an
 * unexpected one).
 */
export function exitCodeOf(err: unknown): ExitCode {
  if (err instanceof UsageError || err instanceof InvalidInputError) return EXIT.usage;
  if (err instanceof UnreachableError || isUnreachable(err)) return EXIT.unreachable;
  return EXIT.problem;
}

/** The stable code printed with an error (`--json`): a library error's own, else the CLI's. */
export function errorCodeOf(err: unknown): string {
  if (err instanceof GenDurableError) return err.code;
  if (err instanceof UsageError) return 'CLI_USAGE';
  if (err instanceof UnreachableError) return 'CLI_UNREACHABLE';
  if (err instanceof ProblemError) return 'CLI_PROBLEM';
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'CLI_ERROR';
}
