import type { EngineService } from '../engine/engine.service';
import { InvalidInputError } from '../errors/invalid-input.error';
import type { DurableStatus } from '../gen-durable.constants';
import type { CancelOptions } from '../control/cancel-options';
import type { InstanceFilter } from '../control/instance-filter';
import type { RetryOptions } from '../control/retry-options';
import { type BulkAnswer, optionalFeature } from './dashboard-engine';

/** A form's fields as both adapters parse them. */
export type FormFields = Readonly<Record<string, string | string[]>>;

const LIVE = ['runnable', 'executing', 'awaiting_signal', 'awaiting_children'] as const;
const RETRYABLE = ['failed', 'cancelled'] as const;
/** A bulk action without the engine's `cancelAll` / `retryAll` changes at most this many rows per request. */
export const BULK_FALLBACK_LIMIT = 1000;

function text(form: FormFields, name: string): string | undefined {
  const v = form[name];
  const t = (Array.isArray(v) ? v[0] : v)?.trim();
  return t === undefined || t === '' ? undefined : t;
}

function json(form: FormFields, name: string): unknown {
  const t = text(form, name);
  if (t === undefined) return undefined;
  try {
    return JSON.parse(t) as unknown;
  } catch (err) {
    throw new InvalidInputError(name, `must be JSON: ${(err as Error).message}`);
  }
}

function oneOf<T extends string>(
  form: FormFields,
  name: string,
  values: readonly T[],
): T | undefined {
  const t = text(form, name);
  if (t === undefined) return undefined;
  if (!(values as readonly string[]).includes(t)) {
    throw new InvalidInputError(name, `must be one of ${values.join(', ')}`);
  }
  return t as T;
}

/** The `actor` option of an engine action (recorded in its history rows, docs/design.md §28.1), when known. */
function actorOf(actor: string | undefined): { actor?: string } {
  return actor === undefined ? {} : { actor };
}

/**
 * The dashboard's actions (docs/design.md §30), each one engine call with the request's
 * `actor`, each answering the message shown after it. Bad form input is an `InvalidInputError`
 * naming the field, nothing changed; the engine's typed errors pass through.
 */
export class DashboardActions {
  constructor(private readonly engine: EngineService) {}

  async cancel(id: string, form: FormFields, actor: string | undefined): Promise<string> {
    const reason = text(form, 'reason');
    const options: CancelOptions = {
      children: oneOf(form, 'children', ['cascade', 'detach', 'keep'] as const) ?? 'cascade',
      mode: oneOf(form, 'mode', ['cooperative', 'fence'] as const) ?? 'cooperative',
      ...(reason !== undefined ? { reason } : {}),
    };
    const r = await this.engine.cancel(id, { ...options, ...actorOf(actor) });
    return `cancel #${id}: ${r.cancelled.length} cancelled, ${r.requested.length} asked to stop, ${r.alreadyTerminal.length} already ended`;
  }

  async retry(id: string, form: FormFields, actor: string | undefined): Promise<string> {
    const step = text(form, 'step');
    const options: RetryOptions = {
      ...(step !== undefined ? { step } : {}),
      ...(text(form, 'detach') === 'true' ? { detach: true } : {}),
    };
    await this.engine.retry(id, { ...options, ...actorOf(actor) });
    return `retried #${id}${step ? ` from step ${step}` : ''}`;
  }

  /** Null when this engine has no `fork`. */
  async fork(id: string, form: FormFields, actor: string | undefined): Promise<string | null> {
    const fork = optionalFeature(this.engine, 'fork');
    if (!fork) return null;
    const step = text(form, 'step');
    const state = json(form, 'state');
    const options = { ...(step ? { step } : {}), ...(state !== undefined ? { state } : {}) };
    return fork(id, { ...options, ...actorOf(actor) });
  }

  async signal(id: string, form: FormFields): Promise<string> {
    const name = text(form, 'name');
    if (name === undefined) throw new InvalidInputError('name', 'must be a non-empty signal name');
    const dedupKey = text(form, 'dedupKey');
    await this.engine.signal(id, name, json(form, 'payload') ?? {}, dedupKey ? { dedupKey } : {});
    return `signal ${name} delivered to #${id}`;
  }

  async pause(queue: string, form: FormFields, actor: string | undefined): Promise<string> {
    const reason = text(form, 'reason') ?? (actor ? `paused by ${actor}` : undefined);
    const r = await this.engine.pauseQueue(queue, reason ? { reason } : {});
    return `queue ${queue} ${r.created ? 'paused' : 'was already paused'}`;
  }

  async resume(queue: string): Promise<string> {
    const r = await this.engine.resumeQueue(queue);
    return `queue ${queue} ${r.wasPaused ? 'resumed' : 'was not paused'}`;
  }

  /** A bulk cancel or retry of what `filter` matches; the engine's bulk call when it has one. */
  async bulk(
    action: 'cancel' | 'retry',
    filter: InstanceFilter,
    actor: string | undefined,
  ): Promise<BulkAnswer> {
    const bulk = optionalFeature(this.engine, action === 'cancel' ? 'cancelAll' : 'retryAll');
    if (bulk) return bulk(filter, { all: true, ...actorOf(actor) });
    const status = eligible(action, filter);
    if (status.length === 0) return { matched: 0, changed: 0 };
    const page = await this.engine.list({ ...filter, status }, { limit: BULK_FALLBACK_LIMIT });
    let changed = 0;
    for (const item of page.items) {
      try {
        if (action === 'cancel') {
          changed += (await this.engine.cancel(item.id, actorOf(actor))).cancelled.length;
        } else {
          await this.engine.retry(item.id, actorOf(actor));
          changed++;
        }
      } catch {
        // a row that moved on between the list and the action is left as it is
      }
    }
    return { matched: page.items.length, changed };
  }
}

function eligible(action: 'cancel' | 'retry', filter: InstanceFilter): DurableStatus[] {
  const allowed: readonly DurableStatus[] = action === 'cancel' ? LIVE : RETRYABLE;
  if (filter.status === undefined) return [...allowed];
  const asked = Array.isArray(filter.status) ? filter.status : [filter.status];
  return allowed.filter((s) => asked.includes(s));
}

/** How many instances a bulk action would change: the engine's dry run, or a capped count of the eligible statuses. */
export async function dryRun(
  engine: EngineService,
  action: 'cancel' | 'retry',
  filter: InstanceFilter,
): Promise<number> {
  const bulk = optionalFeature(engine, action === 'cancel' ? 'cancelAll' : 'retryAll');
  if (bulk) return (await bulk(filter, { dryRun: true, all: true })).matched;
  const status = eligible(action, filter);
  if (status.length === 0) return 0;
  return (await engine.count({ ...filter, status }, { cap: BULK_FALLBACK_LIMIT })).count;
}
