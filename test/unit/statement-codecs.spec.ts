import { CLAIM_RUNNABLE, INSERT_CLAIMED } from '../../lib/sql/claim.sql';
import { resolveInstanceFilter } from '../../lib/control/instance-filter';
import { COUNT_INSTANCES, FILTER_PARAM_COUNT, LIST_INSTANCES } from '../../lib/sql/query.sql';
import { PAUSE_QUEUE, QUEUE_STATUS } from '../../lib/sql/queue.sql';
import {
  INSERT_INSTANCE,
  INSERT_INSTANCE_OR_HOLDER,
  INSERT_INSTANCES,
  INSERT_UNKEYED_INSTANCES,
} from '../../lib/sql/insert.sql';
import { HEARTBEAT } from '../../lib/sql/lease.sql';
import { GC_DELETE } from '../../lib/sql/maintenance.sql';
import { FLUSH_TRANSITIONS, RECHECK_PARKS, type TransitionWrite } from '../../lib/sql/outcome.sql';
import { DELIVER_SIGNAL } from '../../lib/sql/signal.sql';
import { CANCEL_BATCH, CANCEL_INSTANCES } from '../../lib/sql/cancel.sql';
import { RETRY_INSTANCES } from '../../lib/sql/retry.sql';
import type {
  Statement,
  StatementResult,
  StatementRunner,
  TypedStatement,
} from '../../lib/sql/statement';
import type { InsertRow } from '../../lib/instance/insert-row';

// A statement owns its `$n` order and its row shape (lib/sql/statement.ts). These check a few
// parameter builders and decoders without a database: each builder yields exactly as many
// parameters as its text numbers, in the order the text uses them, and each decoder maps the
// raw columns to the typed fields.

/** The highest `$n` in a statement's text: how many parameters it takes. */
function parameterCount(statement: Statement): number {
  let max = 0;
  for (const m of statement.text.matchAll(/\$(\d+)/g)) max = Math.max(max, Number(m[1]));
  return max;
}

function expectArity<I>(statement: TypedStatement<I, unknown>, input: I): unknown[] {
  const params = statement.params(input);
  expect(params).toHaveLength(parameterCount(statement));
  return params;
}

const transition = (over: Partial<TransitionWrite>): TransitionWrite => ({
  worker: 'w',
  id: '1',
  seq: '7',
  kind: 'next',
  nextStep: 'b',
  stateText: '{}',
  resultText: null,
  error: null,
  delayMs: 0,
  rateLimit: null,
  weight: 1,
  setKey: false,
  concurrencyKey: null,
  ...over,
});

const insertRow = (over: Partial<InsertRow>): InsertRow => ({
  fsm: 'order',
  fsmVersion: 1,
  step: 'start',
  stateText: '{}',
  queue: 'default',
  priority: 0,
  at: null,
  delayMs: 0,
  correlationKey: null,
  scope: 'runnable',
  concurrencyKey: null,
  rateLimit: null,
  weight: 1,
  ...over,
});

describe('statement parameter builders and decoders (no database)', () => {
  it('CLAIM_RUNNABLE: $1 queue, $2 limit, $3 worker, $4 lease, $5 gates, $6–$8 the floor (the head of the index without one), $9 when to look at the horizon (never without one); rows carry the worker and frozen enrichment', () => {
    const input = { queue: 'q', limit: 10, worker: 'node-a', leaseMs: 30_000, gates: ['pool'] };
    expect(expectArity(CLAIM_RUNNABLE, input)).toEqual([
      'q',
      10,
      'node-a',
      30_000,
      ['pool'],
      -32768,
      '-infinity',
      '-infinity',
      null,
    ]);
    const scanFrom = new Date('2026-12-05T01:00:00.000Z');
    const headFrom = new Date('2026-12-05T01:00:00.250Z');
    expect(
      CLAIM_RUNNABLE.params({ ...input, from: { priority: 3, scanFrom, headFrom } }).slice(5),
    ).toEqual([3, scanFrom, headFrom, null]);
    expect(CLAIM_RUNNABLE.params({ ...input, horizonCheckMs: 0.5 }).slice(8)).toEqual([0.5]);
    const dbNow = new Date('2026-12-05T01:00:01.000Z');
    const claim = CLAIM_RUNNABLE.decode(
      [
        {
          id: '5',
          fsm: 'order',
          fsmVersion: 2,
          step: 'pay',
          state: { n: 1 },
          attempt: 0,
          awaits: null,
          queue: 'q',
          priority: 0,
          concurrencyKey: 'pool:1',
          concurrencyShard: 0,
          rateLimit: null,
          weight: 1,
          claimSeq: '3',
          reaps: 2,
          suspect: true,
          parentId: null,
          gated: true,
          inbox: [{ id: '9', name: 'go', payload: { a: 1 } }],
          paused: false,
          traceContext: null,
          lastProgress: null,
          fairnessKey: null,
          worker: null,
          inboxTraceContexts: null,
          head_priority: null,
          head_at: null,
          db_now: null,
          exec_ms: null,
          children: [
            {
              id: '6',
              fsm: 'item',
              status: 'done',
              state: {},
              result: { ok: true },
              last_error: null,
            },
          ],
        },
        {
          id: '8',
          fsm: 'order',
          fsmVersion: 2,
          step: 'pay',
          state: {},
          attempt: 1,
          awaits: null,
          queue: 'q',
          priority: 0,
          concurrencyKey: null,
          concurrencyShard: null,
          rateLimit: null,
          weight: 1,
          claimSeq: '1',
          reaps: 0,
          suspect: false,
          parentId: '5',
          gated: false,
          inbox: null,
          children: null,
          paused: false,
          traceContext: null,
          lastProgress: null,
          fairnessKey: null,
          worker: null,
          inboxTraceContexts: null,
          head_priority: null,
          head_at: null,
          db_now: null,
          exec_ms: null,
        },
        // The trailer: the pause, the head and the timing, once, after the claimed rows.
        {
          id: null,
          paused: false,
          head_priority: 0,
          head_at: headFrom.getTime(),
          db_now: dbNow.getTime(),
          exec_ms: '1.5',
        },
      ],
      input,
    );
    expect(claim.paused).toBe(false);
    expect(claim.head).toEqual({ priority: 0, at: headFrom });
    expect(claim.dbNow).toEqual(dbNow);
    expect(claim.execMs).toBe(1.5);
    expect(claim.rows).toHaveLength(2);
    const [row, bare] = claim.rows;
    expect(row).toMatchObject({
      id: '5',
      fsmVersion: 2,
      concurrencyKey: 'pool:1',
      concurrencyShard: 0,
      claimSeq: '3',
      reaps: 2,
      suspect: true,
      worker: 'node-a',
      inbox: [{ id: '9', name: 'go', payload: { a: 1 } }],
      children: [{ id: '6', status: 'done', result: { ok: true }, lastError: null }],
    });
    expect(Object.isFrozen(row!.inbox)).toBe(true);
    expect(Object.isFrozen(row!.children[0])).toBe(true);
    expect(bare).toMatchObject({
      parentId: '5',
      suspect: false,
      worker: 'node-a',
      inbox: [],
      children: [],
    });
  });

  it('CLAIM_RUNNABLE: a claim that took nothing answers only its trailer, carrying the pause', () => {
    const input = { queue: 'q', limit: 10, worker: 'node-a', leaseMs: 30_000, gates: [] };
    const dbNow = new Date('2026-12-05T01:00:01.000Z');
    const none = {
      head_priority: null,
      head_at: null,
      db_now: dbNow.getTime(),
      exec_ms: '0.25',
      pin_xids: '7',
      horizon_xids: null,
    };
    expect(CLAIM_RUNNABLE.decode([{ id: null, paused: true, ...none }], input)).toEqual({
      rows: [],
      paused: true,
      head: undefined,
      dbNow,
      execMs: 0.25,
      pinXids: 7,
      horizonXids: undefined,
    });
    // A claim that looked at the horizon's holders answers their age.
    expect(
      CLAIM_RUNNABLE.decode([{ id: null, paused: false, ...none, horizon_xids: 1200 }], input),
    ).toEqual({
      rows: [],
      paused: false,
      head: undefined,
      dbNow,
      execMs: 0.25,
      pinXids: 7,
      horizonXids: 1200,
    });
  });

  it('LIST_INSTANCES / COUNT_INSTANCES: driver, bounds, then the twelve filter parameters; the scan summary rides on every row', () => {
    const filter = resolveInstanceFilter({ fsm: 'a', status: ['failed'], parentId: 7n }, 'f');
    const list = expectArity(LIST_INSTANCES, {
      driver: 'failed',
      after: '99',
      scan: 1000,
      limit: 10,
      filter,
    });
    expect(list.slice(0, 4)).toEqual(['failed', '99', 1000, 10]);
    expect(list).toHaveLength(4 + FILTER_PARAM_COUNT);
    expect(list.slice(4, 7)).toEqual([['a'], ['failed'], null]);
    expect(list[10]).toBe('7');
    const count = expectArity(COUNT_INSTANCES, { driver: 'parent', cap: 5, budgetMs: 700, filter });
    expect(count.slice(0, 2)).toEqual(['parent', 5]);
    expect(count[2 + FILTER_PARAM_COUNT]).toBe(700);
    expect(
      LIST_INSTANCES.decode([{ id: null, scanned: 12, last_scanned: '40' }], {
        driver: 'scan',
        after: null,
        scan: 12,
        limit: 3,
        filter,
      }),
    ).toEqual({ items: [], scanned: 12, lastScanned: '40' });
    expect(COUNT_INSTANCES.decode([], { driver: 'scan', cap: 1, budgetMs: 1, filter })).toEqual({
      count: 0,
      pulled: 0,
    });
  });

  it('PAUSE_QUEUE / QUEUE_STATUS: a pause that met a concurrent one decodes as null; counts at the cap are capped', () => {
    expect(expectArity(PAUSE_QUEUE, { queue: 'q', reason: null })).toEqual(['q', null]);
    expect(PAUSE_QUEUE.decode([], { queue: 'q', reason: null })).toBeNull();
    const input = { queues: ['q'], cap: 2, only: null };
    expect(expectArity(QUEUE_STATUS, input)).toEqual([['q'], 2, null]);
    expect(
      QUEUE_STATUS.decode(
        [
          {
            queue: 'q',
            reason: null,
            paused_at: null,
            paused: false,
            runnable: 2,
            due: 1,
            executing: 0,
          },
        ],
        input,
      ),
    ).toEqual([
      {
        queue: 'q',
        paused: false,
        reason: null,
        pausedAt: null,
        runnable: { count: 2, capped: true },
        due: { count: 1, capped: false },
        executing: { count: 0, capped: false },
      },
    ]);
  });

  it('FLUSH_TRANSITIONS: sixteen parallel arrays; the lease only for continue, solo on every row, a sleep’s instant', () => {
    const until = new Date('2030-01-01T00:00:00Z');
    const params = expectArity(FLUSH_TRANSITIONS, {
      entries: [
        transition({ id: '1', kind: 'next', leaseMs: 500 }),
        transition({ id: '2', kind: 'continue', leaseMs: 500, setKey: true, concurrencyKey: 'k' }),
        transition({ id: '3', kind: 'done', nextStep: null, stateText: null, resultText: '{}' }),
        transition({ id: '4', kind: 'sleep', at: until }),
        transition({ id: '5', kind: 'sleep', delayMs: 250 }),
      ],
      solo: true,
    });
    expect(params[1]).toEqual(['1', '2', '3', '4', '5']);
    expect(params[3]).toEqual(['next', 'continue', 'done', 'sleep', 'sleep']);
    expect(params[6]).toEqual([null, null, '{}', null, null]);
    expect(params[8]).toEqual([0, 0, 0, 0, 250]);
    expect(params[11]).toEqual([false, true, false, false, false]);
    expect(params[12]).toEqual([null, 'k', null, null, null]);
    expect(params[13]).toEqual([null, 500, null, null, null]);
    // solo code 1 on every row (2 would also hold a cancel for its history row, docs/design.md §28.1)
    expect(params[14]).toEqual([1, 1, 1, 1, 1]);
    expect(params[15]).toEqual([null, null, null, until, null]);
    expect(
      FLUSH_TRANSITIONS.decode(
        [{ id: '3', parent_id: '9', status: 'done', queue: 'q', signaled: true, held: false }],
        { entries: [], solo: false },
      ),
    ).toEqual([
      { id: '3', parentId: '9', status: 'done', queue: 'q', signaled: true, held: false },
    ]);
  });

  it('HEARTBEAT: (id, seq) pairs; decodes renewed ids and lost claims apart', () => {
    const params = expectArity(HEARTBEAT, {
      worker: 'w',
      rows: [
        { id: '1', claimSeq: '4' },
        { id: '2', claimSeq: '9' },
      ],
      leaseMs: 60_000,
    });
    expect(params).toEqual([['w', 'w'], ['1', '2'], ['4', '9'], 60_000, [null, null]]);
    // docs/design.md §28.2: pending progress rides along, aligned with the rows.
    expect(
      HEARTBEAT.params({
        worker: 'w',
        rows: [
          { id: '1', claimSeq: '4' },
          { id: '2', claimSeq: '9' },
        ],
        leaseMs: 60_000,
        progress: [null, '{"rows":3}'],
      })[4],
    ).toEqual([null, '{"rows":3}']);
    expect(
      HEARTBEAT.decode(
        [
          { id: '1', seq: '4', renewed: true, cancel_requested: false, cancel_reason: null },
          { id: '2', seq: '9', renewed: false, cancel_requested: false, cancel_reason: null },
          { id: '3', seq: '5', renewed: true, cancel_requested: true, cancel_reason: 'stop' },
        ],
        { worker: 'w', rows: [], leaseMs: 1 },
      ),
    ).toEqual({
      renewed: ['1', '3'],
      lost: [{ id: '2', claimSeq: '9' }],
      cancelRequested: [{ id: '3', claimSeq: '5', reason: 'stop' }],
    });
  });

  it('INSERT_INSTANCES: per-row parents (absent = NULL) and ordinals; the ordinal decodes as a number', () => {
    const rows = [insertRow({ correlationKey: 'k:1' }), insertRow({ at: new Date(0) })];
    const params = expectArity(INSERT_INSTANCES, { rows, parentIds: ['42'] });
    expect(params[6]).toEqual([null, new Date(0)]);
    expect(params[8]).toEqual(['k:1', null]);
    expect(params[13]).toEqual(['42', null]);
    expect(params[14]).toEqual([0, 1]);
    expect(
      INSERT_INSTANCES.decode(
        [{ id: '11', queue: 'default', correlation_key: null, parent_id: '42', due: true, ord: 1 }],
        { rows },
      ),
    ).toEqual([
      { id: '11', queue: 'default', correlationKey: null, parentId: '42', due: true, ord: 1 },
    ]);
  });

  it('INSERT_UNKEYED_INSTANCES: the same $1–$24 as INSERT_INSTANCES; ordinals by ascending id, whatever order the rows come back in (ids of unequal lengths too)', () => {
    const rows = [insertRow({}), insertRow({}), insertRow({})];
    expect(expectArity(INSERT_UNKEYED_INSTANCES, { rows, parentIds: ['7'] })).toEqual(
      INSERT_INSTANCES.params({ rows, parentIds: ['7'] }),
    );
    const raw = (id: string) => ({ id, queue: 'default', parent_id: null, due: true });
    const decoded = INSERT_UNKEYED_INSTANCES.decode([raw('100'), raw('99'), raw('101')], { rows });
    expect(decoded.map((r) => [r.id, r.ord])).toEqual([
      ['99', 0],
      ['100', 1],
      ['101', 2],
    ]);
    expect(decoded[0]).toEqual({
      id: '99',
      queue: 'default',
      correlationKey: null,
      parentId: null,
      due: true,
      ord: 0,
    });
  });

  it('INSERT_UNKEYED_INSTANCES: a row count other than the entries is an engine bug, thrown', () => {
    const rows = [insertRow({}), insertRow({})];
    expect(() =>
      INSERT_UNKEYED_INSTANCES.decode([{ id: '1', queue: 'q', parent_id: null, due: true }], {
        rows,
      }),
    ).toThrow(/unkeyed insert of 2 row\(s\) returned 1/);
  });

  it('INSERT_INSTANCES: the deadlines are per-row arrays once an entry has one, empty otherwise', () => {
    const none = expectArity(INSERT_INSTANCES, { rows: [insertRow({})] });
    expect(none[16]).toEqual([]);
    expect(none[17]).toEqual([]);
    const rows = [insertRow({ deadlineInMs: 500 }), insertRow({ deadlineAt: new Date(0) })];
    const params = expectArity(INSERT_INSTANCES, { rows });
    expect(params[16]).toEqual([null, new Date(0)]);
    expect(params[17]).toEqual([500, null]);
  });

  it('INSERT_INSTANCES: the sequence keys and policies are per-row arrays once an entry has a key, empty otherwise', () => {
    const none = expectArity(INSERT_INSTANCES, { rows: [insertRow({})] });
    expect(none[22]).toEqual([]);
    expect(none[23]).toEqual([]);
    const rows = [insertRow({}), insertRow({ sequenceKey: 'k', onHeadFailure: 'skip' })];
    const params = expectArity(INSERT_INSTANCES, { rows });
    expect(params[22]).toEqual([null, 'k']);
    expect(params[23]).toEqual([null, 'skip']);
  });

  it('INSERT_INSTANCE and INSERT_INSTANCE_OR_HOLDER: the same twenty-two parameters; a duplicate decodes as null', () => {
    const row = insertRow({ correlationKey: 'k:1', at: new Date(0), weight: 2 });
    const params = expectArity(INSERT_INSTANCE, row);
    expect(params).toEqual([
      'order',
      1,
      'start',
      '{}',
      'default',
      0,
      new Date(0),
      0,
      'k:1',
      'runnable',
      null,
      null,
      2,
      null,
      false,
      null,
      null,
      null,
      null,
      1,
      null,
      null,
    ]);
    expect(expectArity(INSERT_INSTANCE_OR_HOLDER, row)).toEqual(params);
    // INSERT_CLAIMED: the same twenty-two, then the worker and the lease (docs/design.md §5.5.1).
    expect(expectArity(INSERT_CLAIMED, { row, worker: 'w-1', leaseMs: 30_000 })).toEqual([
      ...params,
      'w-1',
      30_000,
    ]);
    const keyed = insertRow({ sequenceKey: 'tenant-1', onHeadFailure: 'skip' });
    expect(expectArity(INSERT_INSTANCE, keyed).slice(20)).toEqual(['tenant-1', 'skip']);
    expect(INSERT_INSTANCE.decode([], row)).toBeNull();
    const holder = { id: '5', queue: 'default', due: false, inserted: false };
    expect(INSERT_INSTANCE_OR_HOLDER.decode([holder], row)).toEqual(holder);
  });

  it('RECHECK_PARKS: the presented pairs split into the $2 / $3 target and signal arrays', () => {
    expect(
      expectArity(RECHECK_PARKS, {
        parkedIds: ['1', '2'],
        presented: [
          { targetId: '1', signalId: '10' },
          { targetId: '2', signalId: '11' },
        ],
      }),
    ).toEqual([
      ['1', '2'],
      ['1', '2'],
      ['10', '11'],
    ]);
  });

  it('DELIVER_SIGNAL: target, key, name, payload, dedup key, trace context; no live target decodes as null', () => {
    const input = {
      targetId: null,
      correlationKey: 'order:1',
      name: 'paid',
      payloadText: '{"x":1}',
      dedupKey: 'd-1',
    };
    expect(expectArity(DELIVER_SIGNAL, input)).toEqual([
      null,
      'order:1',
      'paid',
      '{"x":1}',
      'd-1',
      null,
    ]);
    expect(DELIVER_SIGNAL.decode([], input)).toBeNull();
  });

  it('RETRY_INSTANCES: one array statement for one row or a batch; each answered row decodes to its verdict', () => {
    const at = new Date('2030-01-01T00:00:00Z');
    const input = {
      rows: [
        { id: '4', claimSeq: '7', record: 2 as const },
        { id: '5', claimSeq: '1', record: 0 as const },
      ],
      step: 'again',
      stateText: '{"n":1}',
      at,
      detach: true,
      actor: 'ops',
    };
    expect(expectArity(RETRY_INSTANCES, input)).toEqual([
      ['4', '5'],
      ['7', '1'],
      [2, 0],
      'again',
      '{"n":1}',
      at,
      true,
      'ops',
    ]);
    const row = {
      status: 'failed' as const,
      parent_status: null,
      queue: null,
      due: null,
      parked: null,
      deadline_in_ms: null,
    };
    expect(
      RETRY_INSTANCES.decode(
        [
          { ...row, id: '4', verdict: 'retried', queue: 'q', due: true, parked: false },
          {
            ...row,
            id: '7',
            verdict: 'retried',
            queue: 'q',
            due: false,
            parked: true,
            deadline_in_ms: 250,
          },
          { ...row, id: '5', verdict: 'status', status: 'runnable' },
          { ...row, id: '6', verdict: 'parent', parent_status: 'done' },
        ],
        input,
      ),
    ).toEqual([
      { id: '4', verdict: 'retried', queue: 'q', due: true, parked: false, deadlineInMs: null },
      { id: '7', verdict: 'retried', queue: 'q', due: false, parked: true, deadlineInMs: 250 },
      { id: '5', verdict: 'status', status: 'runnable' },
      { id: '6', verdict: 'parent', parentStatus: 'done' },
    ]);
  });

  it('the cancel family: CANCEL_INSTANCES and CANCEL_BATCH number their shared writes by their own parameters', () => {
    const history = { historyOff: ['quiet'], historyFull: ['loud'], actor: 'ops' };
    expect(
      expectArity(CANCEL_INSTANCES, {
        targetId: '9',
        correlationKey: null,
        reason: 'r',
        children: 'cascade',
        fence: false,
        descendantsOnly: false,
        onlyFsms: null,
        ...history,
      }),
    ).toEqual(['9', null, 'r', 'cascade', false, false, null, ['quiet'], ['loud'], 'ops']);
    expect(
      expectArity(CANCEL_BATCH, { ids: ['1', '2'], reason: null, fence: true, ...history }),
    ).toEqual([['1', '2'], null, true, ['quiet'], ['loud'], 'ops']);
    // The shared writes name the reason and the history parameters of each statement.
    expect(CANCEL_INSTANCES.text).toContain('COALESCE(g.cancel_reason, $3::text)');
    expect(CANCEL_INSTANCES.text).toContain('$10::text');
    expect(CANCEL_BATCH.text).toContain('COALESCE(g.cancel_reason, $2::text)');
    expect(CANCEL_BATCH.text).toContain('$6::text');
  });

  it('run() sends the built parameters through the runner and decodes its result (GC_DELETE: the affected-row count)', async () => {
    const sent: { name: string; values: readonly unknown[] }[] = [];
    const runner: StatementRunner = {
      queryResult(statement, values): Promise<StatementResult> {
        sent.push({ name: statement.name, values });
        return Promise.resolve({ rows: [], rowCount: 2 });
      },
    };
    expect(await GC_DELETE.run(runner, { ids: ['1', '2', '3'] })).toBe(2);
    expect(sent).toEqual([{ name: 'gc_delete', values: [['1', '2', '3']] }]);
  });
});
