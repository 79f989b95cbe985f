import type { BulkResult } from '../control/bulk-options';
import type { CancelOptions } from '../control/cancel-options';
import type { InstanceControl } from '../control/instance-control';
import type { InstanceFilter } from '../control/instance-filter';
import type { RetryOptions } from '../control/retry-options';
import { InvalidInputError } from '../errors/invalid-input.error';

/** The bulk actions of the list (docs/design.md §30): by the filter, after a dry run. */
export const BULK_ACTIONS = ['cancel', 'retry', 'purge'] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];

/** Whether `value` names a bulk action. */
export function isBulkAction(value: unknown): value is BulkAction {
  return (BULK_ACTIONS as readonly unknown[]).includes(value);
}

/** A form's fields as both adapters parse them. */
export type FormFields = Readonly<Record<string, string | string[]>>;

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
  constructor(private readonly engine: InstanceControl) {}

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

  /** Holds a live instance (docs/operations-control.md "Hold and release"). */
  async hold(id: string, form: FormFields, actor: string | undefined): Promise<string> {
    const reason = text(form, 'reason');
    const r = await this.engine.hold(id, {
      ...(reason !== undefined ? { reason } : {}),
      ...actorOf(actor),
    });
    return r.changed ? `held #${id}: no node claims it until released` : `#${id} was already held`;
  }

  async release(id: string, actor: string | undefined): Promise<string> {
    const r = await this.engine.release(id, actorOf(actor));
    return r.changed ? `released #${id}` : `#${id} was not held`;
  }

  /** The new instance's id. */
  async fork(id: string, form: FormFields, actor: string | undefined): Promise<string> {
    const step = text(form, 'step');
    const state = json(form, 'state');
    const options = { ...(step ? { step } : {}), ...(state !== undefined ? { state } : {}) };
    return this.engine.fork(id, { ...options, ...actorOf(actor) });
  }

  /** Deletes an ended instance with its inbox, history and streams; the `instance:purged` event names the actor. */
  async purge(id: string, actor: string | undefined): Promise<string> {
    await this.engine.purge(id, actorOf(actor));
    return `purged #${id}`;
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

  /**
   * A bulk cancel, retry or purge of everything `filter` matches (the engine's `cancelAll`,
   * `retryAll`, `purgeAll`; a purge's `changed` is the rows it deleted).
   */
  async bulk(
    action: BulkAction,
    filter: InstanceFilter,
    actor: string | undefined,
  ): Promise<BulkResult> {
    const options = { all: true, ...actorOf(actor) };
    switch (action) {
      case 'cancel':
        return this.engine.cancelAll(filter, options);
      case 'retry':
        return this.engine.retryAll(filter, options);
      case 'purge': {
        const r = await this.engine.purgeAll(filter, options);
        return { matched: r.matched, changed: r.purged };
      }
    }
  }
}

/** How many instances a bulk action would change: the engine's dry run. */
export async function dryRun(
  engine: InstanceControl,
  action: BulkAction,
  filter: InstanceFilter,
): Promise<number> {
  const options = { dryRun: true, all: true };
  switch (action) {
    case 'cancel':
      return (await engine.cancelAll(filter, options)).matched;
    case 'retry':
      return (await engine.retryAll(filter, options)).matched;
    case 'purge':
      return (await engine.purgeAll(filter, options)).matched;
  }
}
