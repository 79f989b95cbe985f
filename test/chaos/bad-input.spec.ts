import { Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import {
  done,
  DurableFsm,
  EngineService,
  GenDurableModule,
  type GenDurableEvent,
  getEngineToken,
  next,
  Step,
  type StepContext,
} from '../../lib';
import {
  bootEngine,
  eventually,
  FAST,
  type Harness,
  rowOf,
  sleep,
} from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Malformed input and misuse (docs/reliability.md S32–S35, S39) as ordinary tests, beside
// test/engine/robustness.spec.ts (non-Error throws, unserializable and invalid outcomes, the
// crash path of an unknown FSM, typed insert errors) and bad-input-properties.spec.ts (S36,
// S38). Each case: a typed error naming the problem, no scheduler crash, other instances
// unaffected.

const gate = { release: (): void => undefined, opened: Promise.resolve() };
function closeGate(): void {
  gate.opened = new Promise<void>((resolve) => (gate.release = resolve));
}

@DurableFsm({ name: 'input_v2', queue: 'skew' })
class V2Fsm {
  @Step() start(ctx: StepContext<{ n: number }>) {
    return done({ ran: 'v2', n: ctx.state.n });
  }
}

@DurableFsm({ name: 'input_plain', queue: 'skew' })
class PlainFsm {
  @Step() start() {
    return done({ ran: 'plain' });
  }
}

interface Typed {
  order: { id: number };
}

@DurableFsm({
  name: 'input_typed',
  queue: 'input',
  stateCodec: {
    load(stored: Record<string, unknown>): Typed {
      const order = stored['order'] as { id?: unknown } | undefined;
      if (typeof order?.id !== 'number') {
        throw new TypeError(`state.order.id must be a number, got ${JSON.stringify(order?.id)}`);
      }
      return { order: { id: order.id } };
    },
    dump(state: unknown): Record<string, unknown> {
      return state as Record<string, unknown>;
    },
  },
})
class TypedFsm {
  @Step() start(ctx: StepContext<Typed>) {
    return done({ id: ctx.state.order.id });
  }
}

@DurableFsm({ name: 'input_batch', queue: 'batch' })
class BatchFsm {
  @Step() async start(ctx: StepContext<{ big?: boolean }>) {
    await gate.opened;
    return done(ctx.state.big ? { blob: 'x'.repeat(8 * 1024) } : { ok: true });
  }
}

@DurableFsm({ name: 'input_misbehaving', queue: 'input' })
class MisbehavingFsm {
  @Step() async start(ctx: StepContext<{ mode: 'hang' | 'mutate'; x?: string }>) {
    if (ctx.state.mode === 'hang') await new Promise(() => undefined);
    const state = { ...ctx.state };
    // Mutated after the step returned: the outcome was serialized at return.
    setTimeout(() => (state.x = 'mutated later'), 0);
    return next('second', state);
  }
  @Step() second(ctx: StepContext<{ x?: string }>) {
    return done({ x: ctx.state.x ?? null });
  }
}

describe('bad input and misuse (S32–S35, S39)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  describe('S32: an FSM no node (or only some nodes) know', () => {
    it('rolling deploy: rows of an FSM only the new node knows finish there, and the old node does not hot-loop them', async () => {
      // Two engines in one process: "old" does not register input_v2, "new" does; both serve
      // queue `skew`. Rows the old node grabs take the crash path and wait for the lease.
      const dataSource = await db.dataSource();
      const base = {
        dataSource,
        ...FAST,
        queues: { skew: 2 },
        reaper: { interval: 250, maxReaps: 20 },
        gc: false as const,
      };
      @Module({
        imports: [
          GenDurableModule.forRoot({ ...base, name: 'old', nodeId: 'old-node', fsms: [PlainFsm] }),
          GenDurableModule.forRoot({
            ...base,
            name: 'new',
            nodeId: 'new-node',
            fsms: [PlainFsm, V2Fsm],
          }),
        ],
        providers: [PlainFsm, V2Fsm],
      })
      class SkewModule {}
      const moduleRef = await Test.createTestingModule({ imports: [SkewModule] }).compile();
      let open = true;
      trackResource('rolling-deploy app', () => open);
      const crashes: GenDurableEvent[] = [];
      try {
        await moduleRef.init();
        const oldEngine = moduleRef.get<EngineService>(getEngineToken('old'));
        const newEngine = moduleRef.get<EngineService>(getEngineToken('new'));
        const sub = oldEngine.events$.subscribe((e) => {
          if (e.event === 'executor:crash') crashes.push(e);
        });
        const started = Date.now();
        const ids = await newEngine.insertAll(
          V2Fsm,
          Array.from({ length: 8 }, (_, n) => ({ state: { n } })),
        );
        // A row the old node grabbed waits out the lease, and each reap spreads its next pick
        // over reaps × leaseTtl (docs/design.md §26.5): 15–18 s for the last row is usual here, so wait
        // for all of them together, well past that.
        const outcomes = await Promise.all(
          ids.map((id) => newEngine.await(id, { until: 'terminal', timeout: 50_000 })),
        );
        for (const outcome of outcomes) {
          expect(outcome).toMatchObject({ kind: 'done', result: { ran: 'v2' } });
        }
        const elapsed = Date.now() - started;
        sub.unsubscribe();
        // Not hot-looped: each row the old node grabbed waited a lease before it was picked
        // again, so per row at most one crash per lease (+1) over the run.
        const perRow = new Map<string, number>();
        for (const c of crashes) {
          perRow.set(String(c.metadata['id']), (perRow.get(String(c.metadata['id'])) ?? 0) + 1);
        }
        for (const n of perRow.values()) {
          expect(n).toBeLessThanOrEqual(Math.ceil(elapsed / FAST.leaseTtl!) + 1);
        }
      } finally {
        await moduleRef.close();
        open = false;
      }
    }, 90_000);

    it('pinned (finding F-R4): when no node registers it, the row is failed as a poison pill after reaper.maxReaps reaps and one solo run', async () => {
      const h = await bootEngine(db, [PlainFsm], {
        queues: { skew: 2 },
        reaper: { interval: 250, maxReaps: 2 },
        gc: false,
      });
      try {
        const { rows } = await db.pool.query<{ id: string }>(
          `INSERT INTO gen_durable (fsm, step, queue) VALUES ('input_gone', 'start', 'skew') RETURNING id`,
        );
        const id = rows[0]!.id;
        const poisoned = await h.waitFor('reaper:poisoned', (e) => e.metadata['id'] === id, 20_000);
        // Two counted losses make it a suspect (docs/design.md §26.5); the third, during its solo
        // run, fails it.
        expect(poisoned.metadata).toMatchObject({ fsm: 'input_gone', reaps: 3 });
        expect(h.eventsOf('reaper:suspect', id)).toHaveLength(1);
        expect(h.eventsOf('scheduler:solo', id)).toHaveLength(1);
        expect(await rowOf(db, id)).toMatchObject({
          status: 'failed',
          last_error:
            'poison pill: step start lost its worker 3 times, the last while it ran alone (reaper.maxReaps)',
        });
        // Each pick was one crash per lease, never a hot loop, and the scheduler stayed up.
        expect(h.eventsOf('executor:crash', id)).toHaveLength(3);
        expect(h.engine.runtime.schedulers.get('skew')?.status).toBe('running');
      } finally {
        await h.close();
      }
    }, 30_000);
  });

  describe('on one engine', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [TypedFsm, BatchFsm, MisbehavingFsm], {
        queues: { input: 4, batch: 100 },
        maxStateBytes: 4 * 1024,
        flushers: [{ queues: 'all', maxBatch: 500, maxDelayMs: 20 }],
      });
    });
    afterAll(async () => {
      gate.release();
      await h.close();
    });
    const terminal = (id: string) => h.engine.await(id, { until: 'terminal', timeout: 15_000 });

    it('S33: a state the codec cannot load reaches onError as a typed failure, once (no crash loop)', async () => {
      const good = await h.engine.insert(TypedFsm, { state: { order: { id: 7 } } });
      expect(await terminal(good)).toEqual({ kind: 'done', result: { id: 7 } });
      for (const state of [{ order: {} }, { order: { id: 'seven' } }, { renamed: { id: 7 } }]) {
        const id = await h.engine.insert(TypedFsm, { state });
        const result = await terminal(id);
        expect(result).toMatchObject({
          kind: 'failed',
          error: expect.stringMatching(/state\.order\.id must be a number/),
        });
        expect(await rowOf(db, id)).toMatchObject({ attempt: 0, reaps: 0 });
      }
    });

    it('S34a: a row whose step no longer exists fails with UnknownStepError naming it', async () => {
      const id = await h.engine.insert(TypedFsm, {
        state: { order: { id: 1 } },
        scheduleIn: 60_000,
      });
      await db.pool.query(
        `UPDATE gen_durable SET step = 'renamed_away', eligible_at = now() WHERE id = $1`,
        [id],
      );
      h.engine.runtime.schedulers.get('input')?.poke();
      expect(await terminal(id)).toMatchObject({
        kind: 'failed',
        error: expect.stringMatching(/renamed_away/),
      });
    });

    it('S35: one oversize outcome among 100 in one group commit fails alone; the 99 commit in the same flushes', async () => {
      closeGate();
      const ids = await h.engine.insertAll(
        BatchFsm,
        Array.from({ length: 100 }, (_, i) => ({ state: i === 42 ? { big: true } : {} })),
      );
      await eventually(
        async () => h.engine.runtime.schedulers.get('batch')!.inFlightCount === 100,
        15_000,
      );
      h.clear();
      gate.release();
      const results = await Promise.all(ids.map((id) => terminal(id)));
      const failed = results.filter((r) => r.kind === 'failed');
      expect(failed).toEqual([{ kind: 'failed', error: expect.stringMatching(/4096-byte limit/) }]);
      expect(results.filter((r) => r.kind === 'done')).toHaveLength(99);
      expect(h.eventsOf('flush:error')).toEqual([]);
      // They shared group commits: far fewer flush transactions than outcomes.
      const flushes = h.statements.filter((s) => s === 'flush_transitions' || s === 'flush_done');
      expect(flushes.length).toBeLessThan(20);
    });

    it('S35: insertAll of 70 000 rows (over the 65 535-parameter ceiling) is one statement with unique ids', async () => {
      h.clear();
      const ids = await h.engine.insertAll(
        TypedFsm,
        Array.from({ length: 70_000 }, (_, i) => ({
          state: { order: { id: i } },
          scheduleIn: 3_600_000,
        })),
      );
      expect(ids).toHaveLength(70_000);
      expect(new Set(ids).size).toBe(70_000);
      expect(h.statements.filter((s) => s === 'insert_unkeyed_instances')).toHaveLength(1);
      await db.pool.query(`DELETE FROM gen_durable WHERE id = ANY ($1::bigint[])`, [ids]);
    }, 60_000);

    it('S39: a never-settling step keeps its claim and lease (heartbeated, never reaped); others flow', async () => {
      const hung = await h.engine.insert(MisbehavingFsm, { state: { mode: 'hang' } });
      const claimed = await eventually(async () => {
        const row = await rowOf(db, hung);
        return row['status'] === 'executing' ? row : undefined;
      });
      // Past the lease TTL (2 s): renewed by heartbeats, same claim, attempt unchanged.
      await sleep(3_000);
      const later = await rowOf(db, hung);
      expect(later).toMatchObject({
        status: 'executing',
        claim_seq: claimed['claim_seq'],
        attempt: 0,
        reaps: 0,
      });
      expect((later['lease_expires_at'] as Date).getTime()).toBeGreaterThan(
        (claimed['lease_expires_at'] as Date).getTime(),
      );
      // The other slots keep working.
      const other = await h.engine.insert(MisbehavingFsm, { state: { mode: 'mutate' } });
      expect(await terminal(other)).toEqual({ kind: 'done', result: { x: null } });
    });

    it('S39: a state mutated after the step returned does not leak into the committed outcome', async () => {
      const id = await h.engine.insert(MisbehavingFsm, { state: { mode: 'mutate' } });
      expect(await terminal(id)).toEqual({ kind: 'done', result: { x: null } });
    });
  });
});
