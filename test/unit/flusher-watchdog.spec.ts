import type { SqlExecutor } from '../../lib/db/sql-executor';
import type { FlushReply, TransitionEntry } from '../../lib/runtime/flush-entry';
import { Flusher } from '../../lib/runtime/flusher';
import { Telemetry } from '../../lib/telemetry/telemetry';

// The flusher's answer watchdog (docs/design.md §6.4): an outcome whose flush hangs where no
// timeout reaches is answered `error` after the answer timeout (its row stays executing for the
// reaper), by one timer for every waiting entry; the hung flush's late answer is dropped.
// The behaviour under test is the flusher's, so its statements go to a runner that hangs until
// the test lets it fail.

const ANSWER_TIMEOUT_MS = 4_000;

function doneEntry(id: string): TransitionEntry {
  return {
    id,
    seq: '1',
    worker: 'w1',
    queue: 'default',
    fsm: 'job',
    step: 'perform',
    parentId: null,
    awaitedIds: [],
    slot: null,
    attempt: 0,
    history: 0,
    thrown: null,
    kind: 'done',
    nextStep: null,
    stateText: null,
    resultText: '{}',
    error: null,
    delayMs: 0,
    at: null,
    rateLimit: null,
    weight: 1,
    setKey: false,
    concurrencyKey: null,
    inline: undefined,
  };
}

describe('Flusher answer watchdog', () => {
  let fail: (err: Error) => void = () => undefined;
  let statements = 0;
  const hanging = {
    queryResult: () => {
      statements++;
      return new Promise((_resolve, reject) => (fail = reject));
    },
  } as unknown as SqlExecutor;

  beforeEach(() => {
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] });
    statements = 0;
  });
  afterEach(() => jest.useRealTimers());

  it('answers error once the answer timeout passed, in flight or queued, and only once', async () => {
    const flusher = new Flusher(
      hanging,
      { queues: 'all', maxBatch: 100, maxDelayMs: 0 },
      new Telemetry('watchdog-test'),
      () => undefined,
      1_000,
      ANSWER_TIMEOUT_MS,
    );
    const replies = new Map<string, FlushReply[]>();
    const hand = (id: string): void =>
      flusher.enqueue(doneEntry(id), (reply) =>
        replies.set(id, [...(replies.get(id) ?? []), reply]),
      );
    hand('1');
    await new Promise((resolve) => setImmediate(resolve));
    expect(statements).toBe(1); // '1' is in flight, its statement hangs
    jest.advanceTimersByTime(ANSWER_TIMEOUT_MS / 2);
    hand('2'); // queued behind the hung flush
    jest.advanceTimersByTime(ANSWER_TIMEOUT_MS / 2 - 1);
    expect(replies.size).toBe(0); // nothing before the timeout

    jest.advanceTimersByTime(ANSWER_TIMEOUT_MS / 4 + 1);
    expect(replies.get('1')).toEqual(['error']);
    expect(replies.get('2')).toBeUndefined(); // handed over later: still within its time
    jest.advanceTimersByTime(ANSWER_TIMEOUT_MS / 2);
    expect(replies.get('2')).toEqual(['error']);
    expect(jest.getTimerCount()).toBe(0); // nothing waits: the watchdog stopped

    // The hung statement fails at last (not transient): its flush answers nobody twice.
    fail(new Error('boom'));
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(replies.get('1')).toEqual(['error']);
  });

  it('answers a flush that ends in time with its own reply, and stops the watchdog', async () => {
    const quick = {
      queryResult: () => Promise.resolve({ rows: [], rowCount: 0 }),
    } as unknown as SqlExecutor;
    const flusher = new Flusher(
      quick,
      { queues: 'all', maxBatch: 100, maxDelayMs: 0 },
      new Telemetry('watchdog-test'),
      () => undefined,
      1_000,
      ANSWER_TIMEOUT_MS,
    );
    const replies: FlushReply[] = [];
    // A `next` the runner matches to no row: stale (a terminal would go on to a transaction).
    const next: TransitionEntry = {
      ...doneEntry('7'),
      kind: 'next',
      nextStep: 'b',
      stateText: '{}',
    };
    flusher.enqueue(next, (reply) => replies.push(reply));
    expect(jest.getTimerCount()).toBe(1);
    await flusher.drain();
    expect(replies).toEqual(['stale']);
    jest.advanceTimersByTime(2 * ANSWER_TIMEOUT_MS);
    expect(replies).toEqual(['stale']);
    expect(jest.getTimerCount()).toBe(0);
  });
});
