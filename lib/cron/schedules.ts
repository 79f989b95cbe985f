import type { FsmDefinition } from '../discovery/fsm-definition';
import type { FsmRegistry } from '../discovery/fsm.registry';
import { DuplicateError } from '../errors/duplicate.error';
import { InvalidInputError } from '../errors/invalid-input.error';
import { ScheduleNotFoundError } from '../errors/schedule-not-found.error';
import { ALL_STATUSES, LIVE_STATUSES } from '../gen-durable.constants';
import { toJsonObjectText } from '../serialization/json-value';
import {
  DELETE_SCHEDULE,
  GET_SCHEDULE,
  LIST_SCHEDULES,
  SCHEDULE_CLOCK,
  SET_SCHEDULE_PAUSED,
  UPSERT_SCHEDULE,
} from '../sql/cron.sql';
import { INSERT_INSTANCE } from '../sql/insert.sql';
import type { StatementRunner } from '../sql/statement';
import { CronExpression } from './cron-expression';
import { resolveSchedule } from './resolved-schedule';
import { scheduleRow } from './schedule-sync';
import type { CronFireInfo, ScheduleSpec, ScheduleView } from './schedule-spec';

const SPEC_KEYS = new Set([
  'name',
  'fsm',
  'cron',
  'tz',
  'missed',
  'maxCatchup',
  'overlap',
  'state',
  'queue',
  'priority',
]);

/**
 * The FSM lookups `Schedules` needs: an FSM by name or class (to insert a fired instance) and
 * the `@DurableCron` declarations (`FsmRegistry` is one; `GenDurableClient` has its own).
 */
export type ScheduleRegistry = Pick<FsmRegistry, 'declaredSchedule'> & {
  resolve(fsm: unknown): Pick<FsmDefinition, 'name' | 'version' | 'queue' | 'initial'>;
};

/**
 * `engine.schedules` (docs/design.md §29): schedules defined at run time beside the
 * `@DurableCron` ones. Every method is one or two statements on `gen_durable_schedules`; bad
 * input is refused with a typed error naming the field before anything is written. A change
 * made here is fired by this node's ticker at once and seen by the other nodes' tickers within
 * `schedules.interval`.
 */
export class Schedules {
  /** @internal built by the engine runtime. */
  constructor(
    private readonly sql: StatementRunner,
    private readonly registry: ScheduleRegistry,
    private readonly maxStateBytes: number,
    private readonly changed: () => void,
    private readonly poke: (queues: Iterable<string>) => void,
  ) {}

  /**
   * Creates or updates a run-time schedule; its next fire is recomputed only when its
   * definition changed. `InvalidInputError` for a bad field (the expression, an unknown time
   * zone…) or a name a `@DurableCron` schedule holds; `FsmNotRegisteredError` for an FSM this
   * node does not know.
   */
  async upsert(spec: ScheduleSpec): Promise<ScheduleView> {
    const path = 'schedules.upsert';
    if (typeof spec !== 'object' || spec === null) {
      throw new InvalidInputError(path, 'the spec must be an object');
    }
    for (const key of Object.keys(spec)) {
      if (!SPEC_KEYS.has(key)) {
        throw new InvalidInputError(`${path}.${key}`, 'is not a schedule field');
      }
    }
    const definition = this.registry.resolve(spec.fsm);
    const resolved = resolveSchedule(
      { ...spec, fsm: definition.name },
      false,
      this.maxStateBytes,
      (field, problem) => {
        throw new InvalidInputError(`${path}.${field}`, problem);
      },
    );
    const declaredHere = this.registry.declaredSchedule(resolved.name);
    if (declaredHere) {
      throw this.declaredName(path, resolved.name, declaredHere.fsm);
    }
    const now = await SCHEDULE_CLOCK.run(this.sql);
    const view = await UPSERT_SCHEDULE.run(this.sql, scheduleRow(resolved, now));
    if (view === null) {
      const held = await GET_SCHEDULE.run(this.sql, { name: resolved.name });
      throw this.declaredName(path, resolved.name, held?.fsm ?? '?');
    }
    this.changed();
    return view;
  }

  /** Deletes a schedule (a declared one comes back at its next boot upsert). Its fired instances stay. */
  async remove(name: string): Promise<void> {
    const deleted = await DELETE_SCHEDULE.run(this.sql, { name: this.checkName(name, 'remove') });
    if (deleted === 0) throw new ScheduleNotFoundError(name);
  }

  /** Stops firing a schedule until `resume`; a boot upsert keeps the pause. */
  async pause(name: string): Promise<ScheduleView> {
    const view = await SET_SCHEDULE_PAUSED.run(this.sql, {
      name: this.checkName(name, 'pause'),
      paused: true,
      next: null,
    });
    if (view === null) throw new ScheduleNotFoundError(name);
    return view;
  }

  /** Fires a paused schedule again from its next occurrence after now (what fell due while paused is not caught up). */
  async resume(name: string): Promise<ScheduleView> {
    const current = await GET_SCHEDULE.run(this.sql, { name: this.checkName(name, 'resume') });
    if (current === null) throw new ScheduleNotFoundError(name);
    const now = await SCHEDULE_CLOCK.run(this.sql);
    const view = await SET_SCHEDULE_PAUSED.run(this.sql, {
      name,
      paused: false,
      next: CronExpression.parse(current.cron, current.tz).nextAfter(now),
    });
    if (view === null) throw new ScheduleNotFoundError(name);
    this.changed();
    return view;
  }

  /**
   * Fires a schedule now, outside its expression (its next fire is unchanged): one instance
   * with `state._cron = { at: now, missed: 0 }`. Resolves with its id; `DuplicateError` when
   * `overlap: 'skip'` and the previous instance is still live.
   */
  async trigger(name: string): Promise<string> {
    const view = await GET_SCHEDULE.run(this.sql, { name: this.checkName(name, 'trigger') });
    if (view === null) throw new ScheduleNotFoundError(name);
    const definition = this.registry.resolve(view.fsm);
    const now = await SCHEDULE_CLOCK.run(this.sql);
    const at = now.toISOString();
    const fn = this.registry.declaredSchedule(name)?.stateFn;
    const base = (fn ? fn() : view.state) as Record<string, unknown>;
    const info: CronFireInfo = { at, missed: 0 };
    const queue = view.queue ?? definition.queue;
    const correlationKey = view.overlap === 'skip' ? `cron:${name}` : `cron:${name}:${at}`;
    const inserted = await INSERT_INSTANCE.run(this.sql, {
      fsm: definition.name,
      fsmVersion: definition.version,
      step: definition.initial,
      stateText: toJsonObjectText(
        { ...base, _cron: info },
        `schedule ${name}.state`,
        this.maxStateBytes,
      ),
      queue,
      priority: view.priority,
      at: null,
      delayMs: 0,
      correlationKey,
      scope: (view.overlap === 'skip' ? LIVE_STATUSES : ALL_STATUSES).join(','),
      concurrencyKey: null,
      rateLimit: null,
      weight: 1,
    });
    if (inserted === null) throw new DuplicateError(correlationKey);
    this.poke([inserted.queue]);
    return inserted.id;
  }

  /** Every stored schedule (declared and run-time), by name. */
  list(): Promise<ScheduleView[]> {
    return LIST_SCHEDULES.run(this.sql);
  }

  /** One stored schedule, or null. */
  get(name: string): Promise<ScheduleView | null> {
    return GET_SCHEDULE.run(this.sql, { name: this.checkName(name, 'get') });
  }

  private checkName(name: unknown, method: string): string {
    if (typeof name !== 'string' || name.length === 0) {
      throw new InvalidInputError(`schedules.${method}.name`, 'must be a non-empty string');
    }
    return name;
  }

  private declaredName(path: string, name: string, fsm: string): InvalidInputError {
    return new InvalidInputError(
      `${path}.name`,
      `"${name}" is a @DurableCron schedule declared on fsm ${fsm}: change it in code, or pick another name`,
    );
  }
}
