import { userInfo } from 'node:os';

import type { BlockedSequencesOptions } from '../control/blocked-sequence';
import type { FairnessHeadsOptions } from '../control/fairness-head';
import type { CancelOptions, CancelResult } from '../control/cancel-options';
import { FsmNotRegisteredError } from '../errors/fsm-not-registered.error';
import { UnknownStepError } from '../errors/unknown-step.error';
import type { InstanceFilter } from '../control/instance-filter';
import { instancePosition } from '../control/instance-position';
import type { InstanceView } from '../instance/instance-view';
import type { RetryOptions } from '../control/retry-options';
import {
  type MigrationConnection,
  migrateUp,
  readSchemaIndexBuilds,
  readSchemaVersion,
} from '../schema/migrator';
import { CURRENT_SCHEMA_VERSION } from '../schema/increments';
import type { Target } from '../control/target';
import type { CliContext } from './cli-context';
import { ProblemError, UsageError } from './exit-codes';
import type { ModuleFsm } from './module-fsms';
import { capped, duration, type Output, table } from './output';

/** Rows `show` prints of an instance's inbox, children and history. */
const SHOW_LIMIT = 20;

/** `<id>` or `key:<correlationKey>` (docs/cli.md "Targets"). */
export function parseTarget(text: string): Target {
  if (text.startsWith('key:')) {
    const key = text.slice(4);
    if (key.length === 0) throw new UsageError(`target "${text}": the key after key: is empty`);
    return { correlationKey: key };
  }
  if (!/^[1-9][0-9]{0,18}$/.test(text)) {
    throw new UsageError(`target "${text}": give an instance id or key:<correlationKey>`);
  }
  return text;
}

/** The actor manual actions record: `cli:<os user>`. */
export function cliActor(): string {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return `cli:${process.env['USER'] ?? 'unknown'}`;
  }
}

/** A MigrationConnection on one pooled client (the migrator's own transaction handling). */
async function withMigrationConnection<T>(
  ctx: CliContext,
  fn: (conn: MigrationConnection) => Promise<T>,
): Promise<T> {
  const client = await ctx.pool.connect();
  try {
    return await fn({ query: (text, params) => client.query(text, params), inTransaction: false });
  } finally {
    client.release();
  }
}

export async function migrate(
  ctx: CliContext,
  out: Output,
  options: { version?: number },
): Promise<void> {
  const schema = ctx.options.schema;
  const target = options.version ?? CURRENT_SCHEMA_VERSION;
  if (target > CURRENT_SCHEMA_VERSION) {
    throw new UsageError(
      `--version ${target}: this build knows versions 1 … ${CURRENT_SCHEMA_VERSION}`,
    );
  }
  const [from, to, built] = await withMigrationConnection(ctx, async (conn) => {
    const before = await readSchemaVersion(conn, schema);
    const known = Math.min(before, CURRENT_SCHEMA_VERSION);
    const ready = (await readSchemaIndexBuilds(conn, schema, known))
      .filter((i) => i.state === 'valid')
      .map((i) => i.name);
    await migrateUp(conn, { schema, version: target });
    const after = await readSchemaVersion(conn, schema);
    const now = await readSchemaIndexBuilds(conn, schema, Math.min(after, CURRENT_SCHEMA_VERSION));
    const fresh = now
      .filter((i) => i.state === 'valid' && !ready.includes(i.name))
      .map((i) => i.name);
    return [before, after, before === 0 ? [] : fresh] as const;
  });
  out.result({ schema, from, to, latest: CURRENT_SCHEMA_VERSION, built }, () => {
    const head =
      from === to && built.length === 0
        ? `schema ${schema}: at version ${to}, nothing to do`
        : from === to
          ? `schema ${schema}: at version ${to}`
          : `schema ${schema}: migrated from version ${from} to ${to}`;
    return built.length === 0 ? head : `${head}; indexes built online: ${built.join(', ')}`;
  });
}

export async function status(
  ctx: CliContext,
  out: Output,
  options: { cap?: number },
): Promise<void> {
  const queues = await ctx.client.queueStatus(
    undefined,
    options.cap ? { cap: options.cap } : undefined,
  );
  const heads = await ctx.client.queueBacklog(
    queues.map((q) => q.queue),
    { cap: 1 },
  );
  const wait = new Map(heads.map((h) => [h.queue, h.headAgeMs]));
  const rows = queues.map((q) => ({
    queue: q.queue,
    paused: q.paused,
    reason: q.reason,
    pausedAt: q.pausedAt,
    runnable: q.runnable,
    due: q.due,
    executing: q.executing,
    oldestDueMs: wait.get(q.queue) ?? null,
  }));
  out.result(rows, () =>
    rows.length === 0
      ? 'no queues: nothing is runnable and nothing is paused'
      : table(
          ['QUEUE', 'PAUSED', 'RUNNABLE', 'DUE', 'EXECUTING', 'NEXT DUE WAITED'],
          rows.map((r) => [
            r.queue,
            r.paused ? `yes${r.reason ? ` (${r.reason})` : ''}` : 'no',
            capped(r.runnable),
            capped(r.due),
            capped(r.executing),
            duration(r.oldestDueMs),
          ]),
        ),
  );
}

function instanceRows(items: readonly InstanceView[]): string {
  return table(
    ['ID', 'FSM', 'STEP', 'STATUS', 'QUEUE', 'KEY', 'UPDATED'],
    items.map((i) => [
      i.id,
      `${i.fsm}@${i.fsmVersion}`,
      instancePosition(i),
      i.heldAt !== null ? `${i.status} (held)` : i.status,
      i.queue,
      i.correlationKey,
      i.updatedAt,
    ]),
  );
}

export async function list(
  ctx: CliContext,
  out: Output,
  filter: InstanceFilter,
  page: { limit?: number; after?: string },
): Promise<void> {
  const answer = await ctx.client.list(filter, page);
  out.result(answer, () =>
    answer.items.length === 0 && answer.next === undefined
      ? 'no instances match'
      : `${instanceRows(answer.items)}${answer.next ? `\nnext page: --after ${answer.next}` : ''}`,
  );
}

export async function show(ctx: CliContext, out: Output, target: Target): Promise<void> {
  const instance = await ctx.client.get(target);
  if (instance === null) {
    throw new ProblemError(
      `no instance answers ${typeof target === 'string' ? `id ${target}` : `key ${JSON.stringify((target as { correlationKey: string }).correlationKey)}`}`,
    );
  }
  const [inbox, children, history] = await Promise.all([
    ctx.client.inbox(instance.id, { limit: SHOW_LIMIT }),
    ctx.client.list({ parentId: instance.id }, { limit: SHOW_LIMIT }),
    ctx.client.history(instance.id, { limit: SHOW_LIMIT }),
  ]);
  const value = { instance, inbox, children: children.items, history };
  out.result(value, () => {
    const lines = [
      `instance ${instance.id}: ${instance.fsm}@${instance.fsmVersion} ${instance.status === 'awaiting_signal' ? instancePosition(instance) : `at step ${instance.step}`}, ${instance.status}`,
      `  queue ${instance.queue}, priority ${instance.priority}, attempt ${instance.attempt}, eligible ${instance.eligibleAt.toISOString()}`,
      `  key ${instance.correlationKey ?? '-'}, parent ${instance.parentId ?? '-'}, children pending ${instance.childrenPending}`,
      `  state ${JSON.stringify(instance.state)}`,
    ];
    if (instance.result) lines.push(`  result ${JSON.stringify(instance.result)}`);
    if (instance.lastError) lines.push(`  last error ${instance.lastError}`);
    if (instance.deadline) lines.push(`  deadline ${instance.deadline.toISOString()}`);
    if (instance.cancelReason) lines.push(`  cancel reason ${instance.cancelReason}`);
    if (instance.heldAt) {
      lines.push(
        `  held since ${instance.heldAt.toISOString()}${instance.heldReason ? ` (${instance.heldReason})` : ''}: not claimed until released`,
      );
    }
    lines.push('', `inbox (newest ${SHOW_LIMIT}):`);
    lines.push(
      inbox.length === 0
        ? '  none'
        : table(
            ['ID', 'NAME', 'CONSUMED', 'AT', 'PAYLOAD'],
            inbox.map((s) => [s.id, s.name, s.consumedAt ? 'yes' : 'no', s.insertedAt, s.payload]),
          ),
    );
    lines.push('', `children (newest ${SHOW_LIMIT}):`);
    lines.push(children.items.length === 0 ? '  none' : instanceRows(children.items));
    lines.push('', `history (newest ${SHOW_LIMIT}):`);
    lines.push(
      history.length === 0
        ? '  none'
        : table(
            ['ID', 'AT', 'KIND', 'STEP', 'NEXT', 'OUTCOME', 'ACTOR', 'ERROR'],
            history.map((h) => [
              h.id,
              h.at,
              h.kind,
              h.step,
              h.nextStep,
              h.outcome,
              h.actor,
              h.error ? `${h.error.name}: ${h.error.message}` : null,
            ]),
          ),
    );
    return lines.join('\n');
  });
}

/** Parses a signal payload; a malformed one is a usage error naming where it broke. */
export function parsePayload(text: string | undefined): unknown {
  if (text === undefined) return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const position = jsonErrorPosition(text);
    const before = text.slice(0, position);
    const line = before.split('\n').length;
    const column = position - before.lastIndexOf('\n');
    throw new UsageError(
      `the payload is not valid JSON at position ${position} (line ${line}, column ${column}): ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/**
 * Where `text` stops being JSON: the length of its longest prefix that is still the start of a
 * JSON text (the parser's own message names no position for every error on Node 20).
 */
function jsonErrorPosition(text: string): number {
  const continues = (length: number): boolean => {
    try {
      JSON.parse(text.slice(0, length));
      return true;
    } catch (err) {
      const message = err instanceof Error ? err.message : '';
      const at = /position (\d+)/.exec(message);
      return (
        /end of JSON input|Unterminated/.test(message) || (at !== null && Number(at[1]) >= length)
      );
    }
  };
  let low = 0;
  let high = text.length;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (continues(mid)) low = mid;
    else high = mid - 1;
  }
  return low;
}

export async function signal(
  ctx: CliContext,
  out: Output,
  target: Target,
  name: string,
  payload: unknown,
  dedupKey: string | undefined,
): Promise<void> {
  await ctx.client.signal(target, name, payload, dedupKey === undefined ? {} : { dedupKey });
  out.result({ delivered: true, target, name }, () => `signal ${name} delivered`);
}

export async function cancel(
  ctx: CliContext,
  out: Output,
  target: Target,
  options: CancelOptions,
): Promise<void> {
  const result: CancelResult = await ctx.client.cancel(target, { ...options, actor: cliActor() });
  out.result(result, () =>
    [
      `cancelled: ${result.cancelled.join(', ') || '-'}`,
      `requested (executing, its owner stops it): ${result.requested.join(', ') || '-'}`,
      `already ended: ${result.alreadyTerminal.join(', ') || '-'}`,
    ].join('\n'),
  );
}

export async function hold(
  ctx: CliContext,
  out: Output,
  target: Target,
  reason: string | undefined,
): Promise<void> {
  const result = await ctx.client.hold(target, {
    ...(reason === undefined ? {} : { reason }),
    actor: cliActor(),
  });
  out.result(result, () =>
    result.changed
      ? `held: ${result.id} (no node claims it until released)`
      : `already held: ${result.id}`,
  );
}

/**
 * The sequence keys with instances waiting behind their head (docs/sequences.md "Seeing held
 * keys"), the longest waiting first.
 */
export async function sequences(
  ctx: CliContext,
  out: Output,
  options: BlockedSequencesOptions,
): Promise<void> {
  const blocked = await ctx.client.blockedSequences(options);
  out.result(blocked, () =>
    blocked.length === 0
      ? 'no sequence key has instances waiting'
      : table(
          ['KEY', 'HEAD', 'STATUS', 'STEP', 'WAITING', 'SINCE', 'ERROR'],
          blocked.map((b) => [
            b.key,
            b.headId,
            b.headStatus,
            b.headStep,
            b.waiting,
            b.waitingSince,
            b.headError,
          ]),
        ),
  );
}

/**
 * The fairness heads of each fair queue in the fair claim's order (docs/many-tenants.md "Seeing
 * the heads"): per key its virtual time, capped counts and the row the claim serves next.
 */
export async function fairness(
  ctx: CliContext,
  out: Output,
  options: FairnessHeadsOptions,
): Promise<void> {
  const queues = await ctx.client.fairnessHeads(options);
  out.result(queues, () =>
    queues.length === 0
      ? 'no queue has a fairness head'
      : table(
          ['QUEUE', 'KEY', 'VTIME', 'WEIGHT', 'RUNNABLE', 'DUE', 'EXECUTING', 'NEXT', 'DUE-MS'],
          queues.flatMap((q) =>
            q.heads.map((h) => [
              q.queue,
              h.key,
              h.vtime.toFixed(2),
              h.next?.weight ?? null,
              capped(h.runnable),
              capped(h.due),
              capped(h.executing),
              h.next?.id ?? null,
              h.next?.ageMs ?? null,
            ]),
          ),
        ),
  );
}

/** A failed head stops holding its sequence key (docs/sequences.md "When the head fails"). */
export async function skipSequenceHead(
  ctx: CliContext,
  out: Output,
  target: Target,
): Promise<void> {
  const result = await ctx.client.skipSequenceHead(target);
  out.result(result, () =>
    result.changed
      ? `skipped: ${result.id} (failed, kept; the next instance of its key runs)`
      : `already skipped: ${result.id}`,
  );
}

/**
 * "Why isn't it running?" (docs/dashboard-data.md, `engine.explain`): every reason, blocking
 * ones first and marked `*`, with the instance deadline and what it will do. The CLI's client
 * has no FSM classes: a deadline's action says "cancelled, or moved to onDeadline".
 */
export async function explain(ctx: CliContext, out: Output, target: Target): Promise<void> {
  const e = await ctx.client.explain(target);
  out.result(e, () =>
    [
      `instance ${e.id}: ${e.fsm}@${e.version} at step ${e.step}, ${e.status} (queue ${e.queue}, read ${e.at.toISOString()})`,
      ...e.reasons.map((r) => `${r.blocking ? '*' : '-'} ${r.code}: ${r.text}`),
    ].join('\n'),
  );
}

export async function release(ctx: CliContext, out: Output, target: Target): Promise<void> {
  const result = await ctx.client.release(target, { actor: cliActor() });
  out.result(result, () =>
    result.changed ? `released: ${result.id}` : `not held: ${result.id} (nothing to release)`,
  );
}

export async function retry(
  ctx: CliContext,
  out: Output,
  target: Target,
  options: RetryOptions,
): Promise<void> {
  try {
    // Manual actions record who asked (docs/design.md §28.1).
    await ctx.client.retry(target, { ...options, actor: cliActor() });
  } catch (err) {
    // The client checks a step only against an FSM `--module` describes (docs/cli.md "retry").
    if (err instanceof UnknownStepError) {
      throw new UsageError(
        `--step ${err.step}: FSM "${err.fsm}" has no step "${err.step}" in the module's @DurableFsm class (--module): check the name, or pass --force to retry at it unchecked`,
      );
    }
    throw err;
  }
  // A row that ended parked on signals is parked again (docs/design.md §27.3): say which.
  const row = await ctx.client.get(target);
  const status = row?.status ?? 'runnable';
  out.result({ retried: true, target, status }, () =>
    row && status === 'awaiting_signal'
      ? `retried: ${instancePosition(row)} again`
      : 'retried: runnable again',
  );
}

/** What `purge` was asked: one target, or every ended instance a filter matches. */
export type PurgeRequest =
  | { readonly target: Target }
  | {
      readonly filter: InstanceFilter;
      readonly dryRun: boolean;
      readonly batchSize?: number;
    };

/**
 * The `purge` request of the command line: a target, or `--all` with the filter flags;
 * `UsageError` for both, neither, or a flag of `--all` beside a target.
 */
export function purgeRequest(
  target: string | undefined,
  all: boolean,
  many: { filter: InstanceFilter; dryRun: boolean; batchSize?: number },
): PurgeRequest {
  if (target !== undefined) {
    if (all || many.dryRun || many.batchSize !== undefined || Object.keys(many.filter).length > 0) {
      throw new UsageError(
        'purge: give a target, or --all with filter flags (--dry-run, --batch-size), not both',
      );
    }
    return { target: parseTarget(target) };
  }
  if (!all) throw new UsageError('purge: give a target, or --all with filter flags');
  return many;
}

export async function purge(ctx: CliContext, out: Output, request: PurgeRequest): Promise<void> {
  // Manual actions name who asked (docs/design.md §27.8): the instance:purged event's actor.
  const actor = cliActor();
  if ('target' in request) {
    await ctx.client.purge(request.target, { actor });
    out.result({ purged: 1, target: request.target, actor }, () => 'purged: 1 instance');
    return;
  }
  const result = await ctx.client.purgeAll(request.filter, {
    all: true,
    dryRun: request.dryRun,
    actor,
    ...(request.batchSize !== undefined && { batchSize: request.batchSize }),
  });
  out.result({ ...result, dryRun: request.dryRun, actor }, () =>
    request.dryRun
      ? `dry run: ${result.matched} ended instance(s) match, nothing deleted`
      : `purged: ${result.purged} of ${result.matched} matching ended instance(s)`,
  );
}

export async function pause(
  ctx: CliContext,
  out: Output,
  queue: string,
  reason: string | undefined,
): Promise<void> {
  const result = await ctx.client.pauseQueue(queue, reason === undefined ? undefined : { reason });
  out.result(
    result,
    () =>
      `queue ${queue} ${result.created ? 'paused' : 'was already paused'} since ${result.pausedAt.toISOString()}${result.reason ? ` (${result.reason})` : ''}`,
  );
}

export async function resume(ctx: CliContext, out: Output, queue: string): Promise<void> {
  const result = await ctx.client.resumeQueue(queue);
  out.result(result, () =>
    result.wasPaused ? `queue ${queue} resumed` : `queue ${queue} was not paused`,
  );
}

export const SCHEDULE_ACTIONS = ['list', 'pause', 'resume', 'trigger', 'remove'] as const;
export type ScheduleAction = (typeof SCHEDULE_ACTIONS)[number];

export async function schedules(
  ctx: CliContext,
  out: Output,
  action: ScheduleAction,
  name: string | undefined,
  moduleGiven = false,
): Promise<void> {
  const ops = ctx.client.schedules;
  if (action === 'list') {
    const all = await ops.list();
    out.result(all, () =>
      all.length === 0
        ? 'no schedules'
        : table(
            ['NAME', 'FSM', 'CRON', 'TZ', 'PAUSED', 'NEXT FIRE', 'LAST FIRE'],
            all.map((s) => [
              s.name,
              s.fsm,
              s.cron,
              s.tz,
              s.paused ? 'yes' : 'no',
              s.nextFireAt,
              s.lastFireAt,
            ]),
          ),
    );
    return;
  }
  if (name === undefined) throw new UsageError(`schedules ${action}: give the schedule name`);
  if (action === 'remove') {
    await ops.remove(name);
    out.result({ removed: name }, () => `schedule ${name} removed`);
  } else if (action === 'trigger') {
    const id = await ops.trigger(name).catch((err: unknown) => {
      // The CLI inserts only FSMs a module describes (docs/cli.md "schedules"): no engine advice.
      if (err instanceof FsmNotRegisteredError) {
        throw new ProblemError(
          moduleGiven
            ? `schedules trigger ${name}: the module (--module) registers no @DurableFsm named "${err.fsm}"${err.version === undefined ? '' : ` version ${err.version}`}: pass the module of the application that runs it`
            : `schedules trigger ${name}: the CLI does not know FSM "${err.fsm}": pass --module <compiled app module> so it can insert the instance`,
        );
      }
      throw err;
    });
    out.result({ triggered: name, id }, () => `schedule ${name} fired: instance ${id}`);
  } else {
    const view = await (action === 'pause' ? ops.pause(name) : ops.resume(name));
    out.result(view, () =>
      action === 'pause'
        ? `schedule ${name} paused`
        : `schedule ${name} resumed, next fire ${view.nextFireAt.toISOString()}`,
    );
  }
}

/** One finding of `verify`. */
export interface VerifyProblem {
  readonly kind: 'schema' | 'index' | 'unregistered';
  readonly message: string;
}

export async function verify(
  ctx: CliContext,
  out: Output,
  moduleFsms: readonly ModuleFsm[] | undefined,
): Promise<void> {
  const schema = ctx.options.schema;
  const [installed, indexes] = await withMigrationConnection(ctx, async (conn) => {
    const version = await readSchemaVersion(conn, schema);
    const known = Math.min(version, CURRENT_SCHEMA_VERSION);
    return [version, await readSchemaIndexBuilds(conn, schema, known)] as const;
  });
  const problems: VerifyProblem[] = [];
  for (const index of indexes) {
    if (index.state === 'valid') continue;
    problems.push({
      kind: 'index',
      message:
        index.state === 'building'
          ? `index ${index.name} is being built (a concurrent build is in progress): wait for it to finish`
          : `index ${index.name} is ${index.state}${index.error !== null ? ` (last build failed: ${index.error})` : ''}: run gen-durable migrate to build it`,
    });
  }
  if (installed !== CURRENT_SCHEMA_VERSION) {
    problems.push({
      kind: 'schema',
      message:
        installed < CURRENT_SCHEMA_VERSION
          ? `schema ${schema} is at version ${installed}, this build needs ${CURRENT_SCHEMA_VERSION}: run gen-durable migrate`
          : `schema ${schema} is at version ${installed}, newer than this build's ${CURRENT_SCHEMA_VERSION}: deploy a newer gen-durable`,
    });
  }
  const live = installed === 0 ? [] : await ctx.client.liveFsmVersions();
  if (moduleFsms !== undefined) {
    const registered = new Set(moduleFsms.map((f) => `${f.name}@${f.version}`));
    for (const v of live) {
      if (registered.has(`${v.fsm}@${v.version}`)) continue;
      problems.push({
        kind: 'unregistered',
        message: `${v.instances} live instance(s) of FSM "${v.fsm}" version ${v.version}, which the module does not register`,
      });
    }
  }
  const value = {
    ok: problems.length === 0,
    schema: { name: schema, installed, required: CURRENT_SCHEMA_VERSION },
    indexes: indexes.map((i) => ({ name: i.name, state: i.state, error: i.error })),
    live,
    registered: moduleFsms?.map((f) => ({ fsm: f.name, version: f.version, class: f.className })),
    problems,
  };
  out.result(value, () => {
    const lines = [
      `schema ${schema}: version ${installed} (this build needs ${CURRENT_SCHEMA_VERSION})`,
    ];
    if (indexes.length > 0) {
      lines.push(`online indexes: ${indexes.map((i) => `${i.name} ${i.state}`).join(', ')}`);
    }
    lines.push(
      `live instances by FSM version: ${live.map((v) => `${v.fsm}@${v.version} ×${v.instances}`).join(', ') || 'none'}`,
    );
    if (moduleFsms !== undefined) {
      lines.push(
        `the module registers: ${moduleFsms.map((f) => `${f.name}@${f.version}`).join(', ') || 'nothing'}`,
      );
    }
    lines.push(
      problems.length === 0 ? 'ok' : problems.map((p) => `problem: ${p.message}`).join('\n'),
    );
    return lines.join('\n');
  });
  if (problems.length > 0) throw new VerifyFailed(problems.length);
}

/** `verify` found problems (exit 1); they were printed with the result. */
export class VerifyFailed extends ProblemError {
  constructor(readonly count: number) {
    super(`verify found ${count} problem(s)`);
  }
}
