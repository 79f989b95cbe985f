import { InvalidInputError } from '../errors/invalid-input.error';
import type { PauseQueueResult, QueueStatus, ResumeQueueResult } from '../instance/queue-status';
import { PAUSE_QUEUE, QUEUE_STATUS, RESUME_QUEUE, SET_LOCAL_NO_JIT } from '../sql/queue.sql';
import type { ControlRuntime } from './control-runtime';
import { integerIn, optionsObject } from './input-checks';

/** Longest pause reason stored, in characters. */
const MAX_REASON_LENGTH = 1000;
/** `queueStatus`'s default count cap. */
const DEFAULT_STATUS_CAP = 10_000;
/** A pause statement that met a concurrent pause's commit answers nothing; it runs again. */
const PAUSE_ATTEMPTS = 3;

/**
 * Fleet-wide queue pause, resume and status (docs/design.md §27.6), behind `EngineService`.
 * A pause is a row of gen_durable_paused_queues: every scheduler of the queue, on any node,
 * reads it with its next claim (or its next poll tick while it holds buffered rows), so it
 * takes effect within `pollInterval`; a poke carries it sooner. Inserts and signals to a
 * paused queue are accepted as usual.
 *
 * A queue no node of this process knows may be paused: a queue is fleet-wide and this node
 * cannot tell which queues other nodes run (an operator may pause from a node that runs none,
 * or before the first node of a new queue deploys). The answer's `known` says whether this
 * node runs the queue or a registered FSM declares it, and `queueStatus` lists every paused
 * queue, so a mistyped name is visible.
 */
export class QueueControl {
  constructor(private readonly runtime: ControlRuntime) {}

  async pause(queue: unknown, options: unknown): Promise<PauseQueueResult> {
    const name = queueName(queue, 'pauseQueue.queue');
    const reason = reasonOf(options);
    let answer = null;
    for (let attempt = 1; attempt <= PAUSE_ATTEMPTS && answer === null; attempt++) {
      answer = await PAUSE_QUEUE.run(this.runtime.sql, { queue: name, reason });
    }
    if (answer === null) {
      throw new Error(
        `pausing queue "${name}" met ${PAUSE_ATTEMPTS} concurrent changes; try again`,
      );
    }
    this.runtime.telemetry.emit(
      'queue:paused',
      { count: 1 },
      { queue: name, created: answer.created },
    );
    // The local scheduler learns at once; other nodes at their next claim (poked) or poll.
    this.runtime.pokes.poke([name]);
    return { ...answer, known: this.known(name) };
  }

  async resume(queue: unknown): Promise<ResumeQueueResult> {
    const name = queueName(queue, 'resumeQueue.queue');
    const removed = await RESUME_QUEUE.run(this.runtime.sql, { queue: name });
    this.runtime.telemetry.emit(
      'queue:resumed',
      { count: 1 },
      { queue: name, wasPaused: removed !== null },
    );
    // Every node's scheduler of the queue claims again at once (a poke), else at its poll.
    if (removed !== null) this.runtime.pokes.poke([name]);
    return { queue: name, wasPaused: removed !== null, known: this.known(name) };
  }

  /**
   * The queues this node runs or its FSMs declare, every paused queue and every queue with a
   * runnable row (or only `queue`), each with its pause and counts capped at `cap`. One
   * read-only transaction, on the read replica when the engine has one (`reads`).
   */
  async status(queue: unknown, options: unknown): Promise<QueueStatus[]> {
    const only = queue === undefined ? null : queueName(queue, 'queueStatus.queue');
    const cap = statusCap(options);
    const local = Object.keys(this.runtime.options.queues);
    const declared = this.runtime.registry.all().map((d) => d.queue);
    const sql = this.runtime.reads ?? this.runtime.sql;
    // Three statements in one transaction: JIT off (SET_LOCAL_NO_JIT says why), then the status.
    const rows = await sql.transaction(async (tx) => {
      await SET_LOCAL_NO_JIT.run(sql, undefined, tx);
      return QUEUE_STATUS.run(
        sql,
        { queues: [...new Set([...local, ...declared])], cap, only },
        tx,
      );
    });
    return rows.map((r) => ({ ...r, served: this.runtime.schedulers.has(r.queue) }));
  }

  private known(queue: string): boolean {
    return (
      this.runtime.schedulers.has(queue) ||
      queue in this.runtime.options.queues ||
      this.runtime.registry.all().some((d) => d.queue === queue)
    );
  }
}

function queueName(queue: unknown, path: string): string {
  if (typeof queue !== 'string' || queue.length === 0) {
    throw new InvalidInputError(path, 'must be a non-empty string (a queue name)');
  }
  return queue;
}

function reasonOf(options: unknown): string | null {
  const o = optionsObject(options, ['reason'], 'pauseQueue.options', {
    nameKey: false,
    shape: '{ reason? }',
  });
  const reason = o?.['reason'];
  if (reason === undefined) return null;
  if (typeof reason !== 'string' || reason.length === 0 || reason.length > MAX_REASON_LENGTH) {
    throw new InvalidInputError(
      'pauseQueue.options.reason',
      `must be a non-empty string of at most ${MAX_REASON_LENGTH} characters`,
    );
  }
  return reason;
}

function statusCap(options: unknown): number {
  const o = optionsObject(options, ['cap'], 'queueStatus.options', {
    nameKey: false,
    shape: '{ cap? }',
  });
  return integerIn(o?.['cap'], 'queueStatus.options.cap', DEFAULT_STATUS_CAP, 1, 1_000_000);
}
