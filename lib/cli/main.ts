import { CommanderError } from 'commander';

import { GenDurableError } from '../errors/gen-durable.error';
import { errorCodeOf, EXIT, type ExitCode, exitCodeOf } from './exit-codes';
import { VerifyFailed } from './commands';
import { buildProgram, defaultRunner } from './program';

/** PostgreSQL's "relation does not exist": the schema is not installed. */
const UNDEFINED_TABLE = '42P01';

/**
 * Runs the `gen-durable` CLI on `argv` (as `process.argv`) and resolves with its exit code
 * (docs/cli.md "Exit codes"). Errors print as one line on stderr (`--json`: a JSON object), with
 * the stack only under `--verbose`.
 */
export async function runCli(argv: readonly string[]): Promise<ExitCode> {
  const write = (text: string): void => {
    process.stdout.write(text);
  };
  const program = buildProgram(defaultRunner(write), write);
  try {
    await program.parseAsync([...argv]);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version print and exit 0; every other commander error is a usage error, its
      // message and the usage already printed by commander.
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    const opts = program.opts<{ json?: boolean; verbose?: boolean }>();
    if (!(err instanceof VerifyFailed)) report(err, opts.json === true, opts.verbose === true);
    return exitCodeOf(err);
  }
}

function report(err: unknown, json: boolean, verbose: boolean): void {
  const code = errorCodeOf(err);
  let message = err instanceof Error ? err.message : String(err);
  if ((err as { code?: unknown } | null)?.code === UNDEFINED_TABLE) {
    message = `${message} (is the schema installed? run gen-durable migrate)`;
  }
  if (json) {
    process.stderr.write(`${JSON.stringify({ error: { code, message } })}\n`);
  } else {
    const known = err instanceof GenDurableError ? `${code}: ` : '';
    process.stderr.write(`gen-durable: ${known}${message}\n`);
  }
  if (verbose && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
}

/** The bin entry: runs on `process.argv` and sets the exit code. */
export function main(): void {
  void runCli(process.argv).then((code) => {
    process.exitCode = code;
  });
}
