import { FsmNotRegisteredError } from '../errors/fsm-not-registered.error';
import { ConfigurationError } from '../errors/configuration.error';
import type { FsmDefinition } from './fsm-definition';
import type { ResolvedSchedule } from '../cron/resolved-schedule';

/** `(name, version)` → definition; the newest version per name answers inserts. */
export class FsmRegistry {
  private readonly byKey = new Map<string, FsmDefinition>();
  private readonly latest = new Map<string, FsmDefinition>();
  private readonly byClass = new Map<unknown, FsmDefinition>();
  private readonly declared = new Map<string, ResolvedSchedule>();
  private readonly signalSchemaNames = new Set<string>();
  private stateSchemas = false;

  register(definition: FsmDefinition): void {
    const key = `${definition.name}@${definition.version}`;
    const taken = this.byKey.get(key);
    if (taken) {
      throw new ConfigurationError(
        `fsm ${definition.name}`,
        `version ${definition.version} is registered twice: by class ${taken.metatype.name} and by class ${definition.metatype.name}`,
      );
    }
    this.byKey.set(key, definition);
    const current = this.latest.get(definition.name);
    if (!current || current.version < definition.version) {
      this.latest.set(definition.name, definition);
    }
    this.byClass.set(definition.metatype, definition);
    if (definition.stateSchema !== undefined) this.stateSchemas = true;
    for (const name of definition.signalSchemas.keys()) this.signalSchemaNames.add(name);
  }

  /** Whether some registered FSM declares a state schema (docs/schemas.md). */
  get hasStateSchemas(): boolean {
    return this.stateSchemas;
  }

  /** Whether some registered FSM declares a payload schema for signal `name` (docs/schemas.md). */
  hasSignalSchema(name: string): boolean {
    return this.signalSchemaNames.has(name);
  }

  /** Adds a `@DurableCron` schedule; refuses a name another declaration took (docs/design.md §29). */
  declareSchedule(schedule: ResolvedSchedule): void {
    const taken = this.declared.get(schedule.name);
    if (taken) {
      throw new ConfigurationError(
        `@DurableCron ${JSON.stringify(schedule.name)}`,
        `the schedule name is declared twice: on fsm ${taken.fsm} and on fsm ${schedule.fsm}; schedule names are unique per engine`,
      );
    }
    this.declared.set(schedule.name, schedule);
  }

  /** Every `@DurableCron` schedule of the registered FSMs, in declaration order. */
  declaredSchedules(): ResolvedSchedule[] {
    return [...this.declared.values()];
  }

  /** The `@DurableCron` schedule named `name`, if this node declares it. */
  declaredSchedule(name: string): ResolvedSchedule | undefined {
    return this.declared.get(name);
  }

  /** The FSM names this node can run (a schedule of another FSM is never fired here). */
  names(): string[] {
    return [...this.latest.keys()];
  }

  /** The definition a row runs on, or undefined (a rolling deploy: the crash path, §2.7). */
  find(name: string, version: number): FsmDefinition | undefined {
    return this.byKey.get(`${name}@${version}`);
  }

  /** Resolves an insert target: a class or a name (newest version). */
  resolve(fsm: unknown): FsmDefinition {
    if (typeof fsm === 'string') {
      const found = this.latest.get(fsm);
      if (!found) throw new FsmNotRegisteredError(fsm);
      return found;
    }
    const found = this.byClass.get(fsm);
    if (!found) {
      const name = typeof fsm === 'function' ? fsm.name : String(fsm);
      throw new FsmNotRegisteredError(name);
    }
    return found;
  }

  /**
   * The queues of registered FSMs that are not in `served`, each with its FSM names: on a node
   * that runs queues, rows of those FSMs wait until some other node runs them.
   */
  queuesOutside(served: readonly string[]): Map<string, string[]> {
    const outside = new Map<string, string[]>();
    for (const definition of this.byKey.values()) {
      if (served.includes(definition.queue)) continue;
      const names = outside.get(definition.queue) ?? [];
      if (!names.includes(definition.name)) names.push(definition.name);
      outside.set(definition.queue, names);
    }
    return outside;
  }

  /**
   * The FSM names (any registered version) whose `cancelOn` lists `signal`, or null when none
   * does: a delivery of it may cancel its target (docs/design.md §27.2).
   */
  cancellingFsms(signal: string): string[] | null {
    const names = new Set<string>();
    for (const definition of this.byKey.values()) {
      if (definition.cancelOn.has(signal)) names.add(definition.name);
    }
    return names.size > 0 ? [...names] : null;
  }

  all(): FsmDefinition[] {
    return [...this.byKey.values()];
  }
}
