import { Argument, Command, InvalidArgumentError, Option } from 'commander';

import { ALL_STATUSES, DEFAULT_ENGINE_NAME, type DurableStatus } from '../gen-durable.constants';
import type { CancelOptions } from '../control/cancel-options';
import type { InstanceFilter } from '../control/instance-filter';
import { CliContext, type GlobalOptions } from './cli-context';
import * as commands from './commands';
import { clientFsmsOf, type ModuleFsm, readModuleFsms } from './module-fsms';
import { Output } from './output';

/** What a command's action runs: with its context and output, after connecting. */
type Run = (ctx: CliContext, out: Output, fsms: readonly ModuleFsm[] | undefined) => Promise<void>;

/** Runs one command: the connection, the module's FSMs when `--module` is given, the output. */
export type Runner = (globals: GlobalOptions & { module?: string }, run: Run) => Promise<void>;

function integerIn(min: number, max: number): (value: string) => number {
  return (value) => {
    if (!/^-?[0-9]+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new InvalidArgumentError(`must be an integer in ${min} … ${max}`);
    }
    return Number(value);
  };
}

function date(value: string): Date {
  const d = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(d.getTime())) {
    throw new InvalidArgumentError('must be an ISO date, e.g. 2026-05-01 or 2026-05-01T12:00:00Z');
  }
  return d;
}

function statuses(value: string, previous: DurableStatus[] | undefined): DurableStatus[] {
  const out = [...(previous ?? [])];
  for (const s of value.split(',')) {
    if (!(ALL_STATUSES as readonly string[]).includes(s)) {
      throw new InvalidArgumentError(`"${s}" is not a status (${ALL_STATUSES.join(', ')})`);
    }
    out.push(s as DurableStatus);
  }
  return out;
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), ...value.split(',')];
}

function id(value: string): string {
  if (!/^[1-9][0-9]{0,18}$/.test(value)) throw new InvalidArgumentError('must be an instance id');
  return value;
}

/** The filter flags of `list` and `purge --all` as commander parses them. */
interface FilterFlags {
  fsm?: string[];
  status?: DurableStatus[];
  queue?: string;
  step?: string;
  key?: string;
  keyPrefix?: string;
  parent?: string;
  createdAfter?: Date;
  createdBefore?: Date;
  updatedBefore?: Date;
  errorContains?: string;
}

/** The filter flags on `cmd` (those of `list`; `purge --all` takes the same). */
function filterFlags(cmd: Command): Command {
  return cmd
    .option('--fsm <names>', 'FSM name(s), comma-separated', collect)
    .option('--status <statuses>', `status(es): ${ALL_STATUSES.join(', ')}`, statuses)
    .option('--queue <queue>', 'queue')
    .option('--step <step>', 'current step')
    .option('--key <key>', 'exact correlation key')
    .option('--key-prefix <prefix>', 'correlation keys starting with this')
    .option('--parent <id>', 'children of this instance', id)
    .option('--created-after <date>', 'inserted at or after (ISO date)', date)
    .option('--created-before <date>', 'inserted before (ISO date)', date)
    .option('--updated-before <date>', 'last changed before (ISO date)', date)
    .option('--error-contains <text>', 'last error contains this text');
}

/** The InstanceFilter the filter flags name. */
function filterOf(o: FilterFlags): InstanceFilter {
  return {
    ...(o.fsm && { fsm: o.fsm }),
    ...(o.status && { status: o.status }),
    ...(o.queue !== undefined && { queue: o.queue }),
    ...(o.step !== undefined && { step: o.step }),
    ...(o.key !== undefined && { correlationKey: o.key }),
    ...(o.keyPrefix !== undefined && { correlationKeyPrefix: o.keyPrefix }),
    ...(o.parent !== undefined && { parentId: o.parent }),
    ...(o.createdAfter && { createdAfter: o.createdAfter }),
    ...(o.createdBefore && { createdBefore: o.createdBefore }),
    ...(o.updatedBefore && { updatedBefore: o.updatedBefore }),
    ...(o.errorContains !== undefined && { errorContains: o.errorContains }),
  };
}

/**
 * The `gen-durable` command line (docs/cli.md), on commander. `runner` connects and runs each
 * command; errors thrown by commander (unknown command or flag, a missing argument, a bad
 * value) surface as `CommanderError`s through `exitOverride`.
 */
export function buildProgram(runner: Runner, write: (text: string) => void): Command {
  const program = new Command('gen-durable')
    .description('Operate gen-durable instances, queues and schedules on PostgreSQL.')
    .option('--url <url>', 'PostgreSQL connection string (default: $DATABASE_URL)')
    .option('--schema <schema>', 'schema of the gen-durable tables', 'public')
    .option('--name <engine>', 'engine name (names the NOTIFY poke channel)', DEFAULT_ENGINE_NAME)
    .option(
      '--module <file>',
      'compiled Nest module (CommonJS) whose @DurableFsm classes describe the FSMs (file or file#Export)',
    )
    .option('--json', 'print JSON', false)
    .option('--verbose', 'print stack traces of errors', false)
    .configureOutput({
      writeOut: write,
      writeErr: (text) => process.stderr.write(text),
    })
    .exitOverride()
    .showHelpAfterError()
    .allowExcessArguments(false);

  const globals = (cmd: Command): GlobalOptions & { module?: string } =>
    cmd.optsWithGlobals<GlobalOptions & { module?: string }>();
  const configure = (cmd: Command): Command =>
    cmd.exitOverride().showHelpAfterError().allowExcessArguments(false);

  configure(
    program
      .command('migrate')
      .description('install or upgrade the schema (idempotent; safe from two processes at once)')
      .addOption(
        new Option('--version <n>', 'target schema version (default: latest)').argParser(
          integerIn(1, 1_000),
        ),
      ),
  ).action(async (options: { version?: number }, cmd: Command) => {
    await runner(globals(cmd), (ctx, out) => commands.migrate(ctx, out, options));
  });

  configure(
    program
      .command('status')
      .description('queues: paused, capped counts, how long the next due row has waited')
      .option('--cap <n>', 'count at most this many rows per count', integerIn(1, 1_000_000)),
  ).action(async (options: { cap?: number }, cmd: Command) => {
    await runner(globals(cmd), (ctx, out) => commands.status(ctx, out, options));
  });

  configure(
    filterFlags(
      program.command('list').description('instances matching the filters, newest first, one page'),
    )
      .option('--limit <n>', 'items per page (1 … 1000, default 50)', integerIn(1, 1_000))
      .option('--after <cursor>', 'the cursor printed by the previous page'),
  ).action(async (o: FilterFlags & { limit?: number; after?: string }, cmd: Command) => {
    const filter = filterOf(o);
    const page = {
      ...(o.limit !== undefined && { limit: o.limit }),
      ...(o.after !== undefined && { after: o.after }),
    };
    await runner(globals(cmd), (ctx, out) => commands.list(ctx, out, filter, page));
  });

  configure(
    program
      .command('show')
      .description('one instance: its row, inbox (with consumed flags), children and history')
      .argument('<target>', 'instance id, or key:<correlationKey>'),
  ).action(async (target: string, _o: unknown, cmd: Command) => {
    const to = commands.parseTarget(target);
    await runner(globals(cmd), (ctx, out) => commands.show(ctx, out, to));
  });

  configure(
    program
      .command('signal')
      .description('deliver a signal to a live instance')
      .argument('<target>', 'instance id, or key:<correlationKey>')
      .argument('<name>', 'signal name')
      .argument('[json]', 'payload, JSON (default {})')
      .option('--dedup-key <key>', 'deliver at most once per instance for this key'),
  ).action(
    async (
      target: string,
      name: string,
      json: string | undefined,
      o: { dedupKey?: string },
      cmd: Command,
    ) => {
      const to = commands.parseTarget(target);
      const payload = commands.parsePayload(json);
      await runner(globals(cmd), (ctx, out) =>
        commands.signal(ctx, out, to, name, payload, o.dedupKey),
      );
    },
  );

  configure(
    program
      .command('cancel')
      .description('cancel an instance (and by default its live descendants)')
      .argument('<target>', 'instance id, or key:<correlationKey>')
      .option('--reason <text>', 'stored on the row and answered to waiters')
      .addOption(
        new Option('--children <mode>', 'live children').choices(['cascade', 'detach', 'keep']),
      )
      .addOption(new Option('--mode <mode>', 'an executing row').choices(['cooperative', 'fence'])),
  ).action(async (target: string, o: CancelOptions, cmd: Command) => {
    const to = commands.parseTarget(target);
    const options: CancelOptions = {
      ...(o.reason !== undefined && { reason: o.reason }),
      ...(o.children !== undefined && { children: o.children }),
      ...(o.mode !== undefined && { mode: o.mode }),
    };
    await runner(globals(cmd), (ctx, out) => commands.cancel(ctx, out, to, options));
  });

  configure(
    program
      .command('hold')
      .description(
        'hold a live instance: no node claims it until released (it still takes signals)',
      )
      .argument('<target>', 'instance id, or key:<correlationKey>')
      .option('--reason <text>', 'stored on the row, shown by show, explain and the dashboard'),
  ).action(async (target: string, o: { reason?: string }, cmd: Command) => {
    const to = commands.parseTarget(target);
    await runner(globals(cmd), (ctx, out) => commands.hold(ctx, out, to, o.reason));
  });

  configure(
    program
      .command('sequences')
      .description(
        'sequence keys with instances waiting behind their head: the head, why it holds the key, how many wait and since when',
      )
      .option('--limit <n>', 'at most this many keys (1 … 1000, default 100)', integerIn(1, 1_000))
      .option('--key <key>', 'only this sequence key'),
  ).action(async (o: { limit?: number; key?: string }, cmd: Command) => {
    const options = {
      ...(o.limit !== undefined && { limit: o.limit }),
      ...(o.key !== undefined && { key: o.key }),
    };
    await runner(globals(cmd), (ctx, out) => commands.sequences(ctx, out, options));
  });

  configure(
    program
      .command('fairness')
      .description(
        'fairness heads of each fair queue in claim order: per key its virtual time, runnable / due / executing rows and the row served next',
      )
      .option('--queue <queue>', 'only this queue')
      .option(
        '--limit <n>',
        'at most this many keys per queue (1 … 1000, default 100)',
        integerIn(1, 1_000),
      )
      .option(
        '--cap <n>',
        'each count stops at this (1 … 100000, default 1000)',
        integerIn(1, 100_000),
      ),
  ).action(async (o: { queue?: string; limit?: number; cap?: number }, cmd: Command) => {
    const options = {
      ...(o.queue !== undefined && { queue: o.queue }),
      ...(o.limit !== undefined && { limit: o.limit }),
      ...(o.cap !== undefined && { cap: o.cap }),
    };
    await runner(globals(cmd), (ctx, out) => commands.fairness(ctx, out, options));
  });

  configure(
    program
      .command('skip-sequence-head')
      .description(
        "a failed head under onHeadFailure 'block' stops holding its sequence key (kept, failed): the next instance runs",
      )
      .argument('<target>', 'instance id, or key:<correlationKey>'),
  ).action(async (target: string, _o: unknown, cmd: Command) => {
    const to = commands.parseTarget(target);
    await runner(globals(cmd), (ctx, out) => commands.skipSequenceHead(ctx, out, to));
  });

  configure(
    program
      .command('explain')
      .description(
        "why isn't it running: every reason (blocking ones first, marked *), the hold and the instance deadline",
      )
      .argument('<target>', 'instance id, or key:<correlationKey>'),
  ).action(async (target: string, _o: unknown, cmd: Command) => {
    const to = commands.parseTarget(target);
    await runner(globals(cmd), (ctx, out) => commands.explain(ctx, out, to));
  });

  configure(
    program
      .command('release')
      .description('release a held instance: claimable again')
      .argument('<target>', 'instance id, or key:<correlationKey>'),
  ).action(async (target: string, _o: unknown, cmd: Command) => {
    const to = commands.parseTarget(target);
    await runner(globals(cmd), (ctx, out) => commands.release(ctx, out, to));
  });

  configure(
    program
      .command('retry')
      .description('run a failed or cancelled instance again')
      .argument('<target>', 'instance id, or key:<correlationKey>')
      .option('--step <step>', 'resume at this step (default: its own)')
      .option('--at <date>', 'due at this time (ISO date; default now)', date)
      .option('--detach', 'retry a child whose parent moved on, unlinked')
      .option('--force', 'retry at --step unchecked, though the FSM of --module has no such step'),
  ).action(
    async (
      target: string,
      o: { step?: string; at?: Date; detach?: boolean; force?: boolean },
      cmd: Command,
    ) => {
      const to = commands.parseTarget(target);
      const options = {
        ...(o.step !== undefined && { step: o.step }),
        ...(o.at !== undefined && { at: o.at }),
        ...(o.detach === true && { detach: true }),
      };
      // --force: the module's FSMs are not loaded, so the client checks no step.
      const g = o.force === true ? { ...globals(cmd), module: undefined } : globals(cmd);
      await runner(g, (ctx, out) => commands.retry(ctx, out, to, options));
    },
  );

  configure(
    filterFlags(
      program
        .command('purge')
        .description(
          'delete an ended (done, failed, cancelled) instance with its inbox, history and streams, or with --all every ended one the filters match',
        )
        .argument('[target]', 'instance id, or key:<correlationKey>')
        .option('--all', 'purge every ended instance the filter flags match (none: every one)')
        .option('--dry-run', 'with --all: count the matches, delete nothing')
        .option('--batch-size <n>', 'with --all: rows per delete (1 … 1000)', integerIn(1, 1_000)),
    ),
  ).action(
    async (
      target: string | undefined,
      o: FilterFlags & { all?: boolean; dryRun?: boolean; batchSize?: number },
      cmd: Command,
    ) => {
      const many = commands.purgeRequest(target, o.all === true, {
        filter: filterOf(o),
        dryRun: o.dryRun === true,
        ...(o.batchSize !== undefined && { batchSize: o.batchSize }),
      });
      await runner(globals(cmd), (ctx, out) => commands.purge(ctx, out, many));
    },
  );

  configure(
    program
      .command('pause')
      .description('pause a queue on every node (inserts and signals are still accepted)')
      .argument('<queue>', 'queue name')
      .option('--reason <text>', 'why (shown by status)'),
  ).action(async (queue: string, o: { reason?: string }, cmd: Command) => {
    await runner(globals(cmd), (ctx, out) => commands.pause(ctx, out, queue, o.reason));
  });

  configure(
    program
      .command('resume')
      .description('resume a paused queue on every node')
      .argument('<queue>', 'queue name'),
  ).action(async (queue: string, _o: unknown, cmd: Command) => {
    await runner(globals(cmd), (ctx, out) => commands.resume(ctx, out, queue));
  });

  configure(
    program
      .command('schedules')
      .description('cron schedules: list (default), pause, resume, trigger or remove one')
      .addArgument(
        new Argument('[action]', 'what to do').choices(commands.SCHEDULE_ACTIONS).default('list'),
      )
      .argument('[name]', 'schedule name (all but list)'),
  ).action(
    async (
      action: commands.ScheduleAction,
      name: string | undefined,
      _o: unknown,
      cmd: Command,
    ) => {
      await runner(globals(cmd), (ctx, out, fsms) =>
        commands.schedules(ctx, out, action, name, fsms !== undefined),
      );
    },
  );

  configure(
    program
      .command('verify')
      .description(
        'deploy gate: exit 1 when the schema is behind this build, or (with --module) live instances run FSM versions the module does not register',
      ),
  ).action(async (_o: unknown, cmd: Command) => {
    await runner(globals(cmd), (ctx, out, fsms) => commands.verify(ctx, out, fsms));
  });

  return program;
}

/** The default runner: connects, loads `--module`, runs, closes. */
export const defaultRunner =
  (write: (text: string) => void): Runner =>
  async (globals, run) => {
    const fsms = globals.module === undefined ? undefined : await readModuleFsms(globals.module);
    const ctx = new CliContext(globals, fsms === undefined ? {} : clientFsmsOf(fsms));
    try {
      await ctx.connect();
      await run(ctx, new Output(globals.json, write), fsms);
    } finally {
      await ctx.close();
    }
  };
