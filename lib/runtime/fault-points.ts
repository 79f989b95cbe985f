/**
 * Fault points (docs/reliability.md §3.3): named places in the engine where the reliability harness
 * can stop, delay, fail or kill the process at an exact moment (after a claim, before a flush
 * commits, …), modelled on DBOS's debug triggers.
 *
 * Off unless the environment variable `GEN_DURABLE_FAULTS` is set when this module loads:
 * every call site reads `if (FAULTS_ENABLED) await faultPoint(…)`, so normal use pays one
 * branch on a module constant and never enters this file's logic. When on, rules come from
 * the variable (a JSON array of {@link FaultRule}, or any other non-empty value for none), from
 * {@link armFault} in the same process, or over the IPC channel of a forked process
 * (`{ type: 'gd-fault', op: 'arm' | 'disarm' | 'release' | 'clear', … }`); hits are reported back over
 * IPC as `{ type: 'gd-fault-hit', point, action, detail }`.
 */

/** Every fault point the engine declares. */
export type FaultPointName =
  | 'pick.afterClaim'
  | 'flush.beforeCommit'
  | 'flush.afterCommit'
  | 'spawn.afterChildInsert'
  | 'heartbeat.before'
  | 'reaper.afterSelect'
  | 'step.beforeOutcome'
  | 'signal.afterCommit';

/**
 * What a matching rule does: `pause` until released (IPC or {@link releaseFaults}), `sleep`
 * for `ms`, `throw` a connection-class error (a retryable failure), `exit` the process with
 * SIGKILL semantics (code 137: no exit handlers, nothing flushed), `skip` the guarded work
 * (only `heartbeat.before` honours it).
 */
export type FaultAction =
  | { kind: 'pause' }
  | { kind: 'sleep'; ms: number }
  | { kind: 'throw' }
  | { kind: 'exit' }
  | { kind: 'skip' };

/** One armed rule. */
export interface FaultRule {
  readonly point: FaultPointName;
  readonly action: FaultAction;
  /** Only when the point's detail names one of these instance ids. */
  readonly ids?: readonly string[];
  /** Only when the point's detail names this worker id. */
  readonly worker?: string;
  /** How many hits fire before the rule disarms; default unlimited (`throw`: 1). */
  readonly times?: number;
}

/** What the call site knows at the point. */
export interface FaultDetail {
  readonly ids?: readonly string[];
  readonly worker?: string;
}

/** A hit, as reported to in-process listeners and over IPC. */
export interface FaultHit {
  readonly point: FaultPointName;
  readonly action: FaultAction['kind'];
  readonly detail: FaultDetail;
}

const RAW = process.env['GEN_DURABLE_FAULTS'];

/** True when fault points are live in this process (read once, at load). */
export const FAULTS_ENABLED: boolean = RAW !== undefined && RAW !== '' && RAW !== '0';

interface ArmedRule {
  readonly rule: FaultRule;
  remaining: number;
}

const rules: ArmedRule[] = [];
const paused = new Map<FaultPointName, Set<() => void>>();
const listeners = new Set<(hit: FaultHit) => void>();

/** Injected failure: connection class (SQLSTATE 08006), so the engine treats it as transient. */
export class InjectedFaultError extends Error {
  /** A server-reported connection failure, as node-postgres builds one (SQLSTATE + severity). */
  readonly code = '08006';
  readonly severity = 'FATAL';
  constructor(point: FaultPointName) {
    super(`gen-durable fault point ${point}: injected connection failure`);
    this.name = 'InjectedFaultError';
  }
}

/**
 * The call-site hook. Resolves `'skip'` when a `skip` rule matched, else undefined; may
 * pause, sleep, throw or end the process. Call only behind `FAULTS_ENABLED`.
 */
export async function faultPoint(
  point: FaultPointName,
  detail: FaultDetail = {},
): Promise<'skip' | undefined> {
  const armed = rules.find((r) => r.rule.point === point && matches(r.rule, detail));
  if (!armed) return undefined;
  armed.remaining -= 1;
  if (armed.remaining <= 0) rules.splice(rules.indexOf(armed), 1);
  const action = armed.rule.action;
  report({ point, action: action.kind, detail });
  switch (action.kind) {
    case 'pause':
      await new Promise<void>((resolve) => {
        let set = paused.get(point);
        if (!set) {
          set = new Set();
          paused.set(point, set);
        }
        set.add(resolve);
      });
      return undefined;
    case 'sleep':
      await new Promise((resolve) => setTimeout(resolve, action.ms));
      return undefined;
    case 'throw':
      throw new InjectedFaultError(point);
    case 'exit':
      process.kill(process.pid, 'SIGKILL');
      // SIGKILL is delivered asynchronously; never let the caller go on meanwhile.
      await new Promise(() => undefined);
      return undefined;
    case 'skip':
      return 'skip';
  }
}

/** Arms a rule in this process. */
export function armFault(rule: FaultRule): void {
  const times = rule.times ?? (rule.action.kind === 'throw' ? 1 : Number.POSITIVE_INFINITY);
  rules.push({ rule, remaining: times });
}

/** Releases the callers paused at `point` (all points when omitted); returns how many. */
export function releaseFaults(point?: FaultPointName): number {
  let count = 0;
  for (const [name, set] of paused) {
    if (point !== undefined && name !== point) continue;
    for (const resolve of set) resolve();
    count += set.size;
    set.clear();
  }
  return count;
}

/** Disarms the rules of `point` (callers already paused there stay paused). */
export function disarmFaults(point: FaultPointName): void {
  for (let i = rules.length - 1; i >= 0; i--) {
    if (rules[i]?.rule.point === point) rules.splice(i, 1);
  }
}

/** Disarms every rule and releases every paused caller. */
export function clearFaults(): void {
  rules.length = 0;
  releaseFaults();
}

/** Listens to hits in this process; returns the function that stops listening. */
export function onFaultHit(listener: (hit: FaultHit) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function matches(rule: FaultRule, detail: FaultDetail): boolean {
  if (rule.worker !== undefined && rule.worker !== detail.worker) return false;
  if (rule.ids !== undefined && !rule.ids.some((id) => detail.ids?.includes(id))) return false;
  return true;
}

function report(hit: FaultHit): void {
  for (const listener of listeners) {
    try {
      listener(hit);
    } catch {
      // a test hook never breaks the engine
    }
  }
  if (process.send && process.connected) process.send({ type: 'gd-fault-hit', ...hit });
}

interface FaultMessage {
  readonly type: 'gd-fault';
  readonly op: 'arm' | 'disarm' | 'release' | 'clear';
  readonly rule?: FaultRule;
  readonly point?: FaultPointName;
}

function isFaultMessage(message: unknown): message is FaultMessage {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === 'gd-fault'
  );
}

if (FAULTS_ENABLED) {
  if (RAW?.trim().startsWith('[')) {
    for (const rule of JSON.parse(RAW) as FaultRule[]) armFault(rule);
  }
  if (process.send) {
    process.on('message', (message: unknown) => {
      if (!isFaultMessage(message)) return;
      if (message.op === 'arm' && message.rule) armFault(message.rule);
      else if (message.op === 'disarm' && message.point) disarmFaults(message.point);
      else if (message.op === 'release') releaseFaults(message.point);
      else if (message.op === 'clear') clearFaults();
    });
    // The control channel must not keep a finished process alive. Under a test runner that
    // wraps `process` (jest workers), the channel may refuse unref: it is then the runner's.
    try {
      process.channel?.unref();
    } catch {
      // the runner owns the channel's lifetime
    }
  }
}
