import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';

import {
  awaitSignal,
  done,
  DurableFsm,
  EngineService,
  GenDurableModule,
  InjectEngine,
  scheduleChildren,
  Step,
  type StepContext,
} from '../../lib';
import { GenDurableClient } from '../../lib/client';
import { type BuiltCli, buildCli, runCli } from '../cli/support/built-cli';
import { FAST } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/scaling.md "Cells": two databases, one named engine per database ('eu', 'us'), and the
// router provider the docs show, which picks the engine by tenant. Inserts by tenant land in
// that tenant's cell only; a fan-out's children are inserted by the engine that runs the parent,
// so they stay in its cell by construction; ids are per database and collide across cells, and a
// cancel by id through one cell's engine, through GenDurableClient on one cell's URL, or through
// the `gen-durable` CLI (built as test/cli does) with one cell's DATABASE_URL and engine name,
// leaves the other cell's row with the same id untouched.

type Cell = 'eu' | 'us';

/** The app's tenant directory (a table, a config map, a hash of the tenant id): a constant here. */
const TENANT_CELLS: Readonly<Record<string, Cell>> = { acme: 'eu', globex: 'us' };

/** Picks a tenant's engine: every call about a tenant's instances goes through it. */
@Injectable()
class CellRouter {
  private readonly engines: ReadonlyMap<Cell, EngineService>;

  constructor(@InjectEngine('eu') eu: EngineService, @InjectEngine('us') us: EngineService) {
    this.engines = new Map([
      ['eu', eu],
      ['us', us],
    ]);
  }

  cellOf(tenant: string): Cell {
    const cell = TENANT_CELLS[tenant];
    if (cell === undefined) throw new Error(`no cell for tenant "${tenant}"`);
    return cell;
  }

  engineFor(tenant: string): EngineService {
    return this.engines.get(this.cellOf(tenant))!;
  }
}

interface OrderState {
  readonly tenant: string;
  readonly fanOut?: boolean;
}

@DurableFsm({ name: 'cell-item', queue: 'cells' })
class CellItemFsm {
  @Step() start() {
    return done({});
  }
}

/** Fans out to three items, or parks until `go` (a live row to cancel). */
@DurableFsm({ name: 'cell-order', queue: 'cells' })
class CellOrderFsm {
  @Step() start(ctx: StepContext<OrderState>) {
    return ctx.state.fanOut
      ? scheduleChildren('after', [CellItemFsm, CellItemFsm, CellItemFsm], ctx.state)
      : awaitSignal('go', 'after', ctx.state);
  }
  @Step() after() {
    return done({});
  }
}

describe('cells: one named engine per database, a router by tenant (docs/scaling.md)', () => {
  const dbs: Partial<Record<Cell, TestDatabase>> = {};
  let app: TestingModule | undefined;
  let open = false;
  let router: CellRouter;
  let cli: BuiltCli | undefined;
  const db = (cell: Cell): TestDatabase => dbs[cell]!;

  beforeAll(async () => {
    dbs.eu = await createTestDatabase();
    dbs.us = await createTestDatabase();
    const [euSource, usSource] = [await db('eu').dataSource(), await db('us').dataSource()];
    app = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          name: 'eu',
          dataSource: euSource,
          ...FAST,
          queues: { cells: 2 },
        }),
        GenDurableModule.forRoot({
          name: 'us',
          dataSource: usSource,
          ...FAST,
          queues: { cells: 2 },
        }),
      ],
      providers: [CellOrderFsm, CellItemFsm, CellRouter],
    }).compile();
    open = true;
    trackResource('cells app', () => open);
    await app.init();
    router = app.get(CellRouter);
  }, 60_000);

  afterAll(async () => {
    cli?.remove();
    await app?.close();
    open = false;
    await dbs.eu?.drop();
    await dbs.us?.drop();
  });

  /** Rows of `fsm` in one cell's database, read there directly. */
  async function rowsIn(cell: Cell, where: string, params: unknown[] = []) {
    const { rows } = await db(cell).pool.query<{
      id: string;
      tenant: string;
      status: string;
      parent_id: string | null;
    }>(
      `SELECT id::text, state->>'tenant' AS tenant, status::text, parent_id::text
         FROM gen_durable WHERE ${where} ORDER BY id`,
      params,
    );
    return rows;
  }

  /** Both cells' identity sequences at one value: their next inserts get the same id. */
  async function alignIds(value: number): Promise<void> {
    for (const cell of ['eu', 'us'] as const) {
      await db(cell).pool.query(`SELECT setval(pg_get_serial_sequence('gen_durable', 'id'), $1)`, [
        value,
      ]);
    }
  }

  it('an insert by tenant lands in its cell only', async () => {
    const acme = await router.engineFor('acme').insert(CellOrderFsm, { state: { tenant: 'acme' } });
    const globex = await router
      .engineFor('globex')
      .insert(CellOrderFsm, { state: { tenant: 'globex' } });
    expect((await rowsIn('eu', `fsm = 'cell-order'`)).map((r) => [r.id, r.tenant])).toEqual([
      [acme, 'acme'],
    ]);
    expect((await rowsIn('us', `fsm = 'cell-order'`)).map((r) => [r.id, r.tenant])).toEqual([
      [globex, 'globex'],
    ]);
    // Each engine answers for its own database only.
    expect((await router.engineFor('acme').list({ fsm: 'cell-order' })).items).toHaveLength(1);
    expect((await router.engineFor('globex').list({ fsm: 'cell-order' })).items).toHaveLength(1);
  });

  it("a fan-out's children are inserted by the engine that runs the parent: all in its cell", async () => {
    const engine = router.engineFor('globex');
    const parent = await engine.insert(CellOrderFsm, {
      state: { tenant: 'globex', fanOut: true },
    });
    expect(
      await engine.await({ id: parent }, { timeout: 15_000, until: 'terminal' }),
    ).toMatchObject({
      kind: 'done',
    });
    const children = await rowsIn('us', `parent_id = $1`, [parent]);
    expect(children).toHaveLength(3);
    expect(children.every((c) => c.status === 'done')).toBe(true);
    expect(await rowsIn('eu', `parent_id IS NOT NULL OR fsm = 'cell-item'`)).toEqual([]);
  });

  it("ids collide across cells: a cancel by id through one cell leaves the other cell's row", async () => {
    // Through the cell's engine.
    await alignIds(1000);
    const inEu = await router.engineFor('acme').insert(CellOrderFsm, { state: { tenant: 'acme' } });
    const inUs = await router
      .engineFor('globex')
      .insert(CellOrderFsm, { state: { tenant: 'globex' } });
    expect(inEu).toBe(inUs);
    await waitParked(inEu);
    await router.engineFor('acme').cancel({ id: inEu }, { reason: 'cell eu' });
    expect((await rowsIn('eu', 'id = $1', [inEu]))[0]?.status).toBe('cancelled');
    expect((await rowsIn('us', 'id = $1', [inUs]))[0]).toMatchObject({
      tenant: 'globex',
      status: 'awaiting_signal',
    });

    // Through GenDurableClient on one cell's URL (scripts, the CLI's DATABASE_URL).
    await alignIds(2000);
    const second = await router
      .engineFor('acme')
      .insert(CellOrderFsm, { state: { tenant: 'acme' } });
    expect(
      await router.engineFor('globex').insert(CellOrderFsm, { state: { tenant: 'globex' } }),
    ).toBe(second);
    await waitParked(second);
    const usClient = new GenDurableClient(db('us').url, { name: 'us' });
    try {
      await usClient.cancel({ id: second }, { reason: 'cell us' });
    } finally {
      await usClient.close();
    }
    expect((await rowsIn('us', 'id = $1', [second]))[0]?.status).toBe('cancelled');
    expect((await rowsIn('eu', 'id = $1', [second]))[0]).toMatchObject({
      tenant: 'acme',
      status: 'awaiting_signal',
    });

    // Through the CLI, pointed at one cell by DATABASE_URL (and --name for its poke channel).
    await alignIds(3000);
    const third = await router
      .engineFor('acme')
      .insert(CellOrderFsm, { state: { tenant: 'acme' } });
    expect(
      await router.engineFor('globex').insert(CellOrderFsm, { state: { tenant: 'globex' } }),
    ).toBe(third);
    await waitParked(third);
    cli = buildCli();
    const run = await runCli(cli, ['cancel', third, '--name', 'eu', '--reason', 'cell eu (cli)'], {
      DATABASE_URL: db('eu').url,
    });
    expect(run).toMatchObject({ code: 0 });
    expect((await rowsIn('eu', 'id = $1', [third]))[0]?.status).toBe('cancelled');
    expect((await rowsIn('us', 'id = $1', [third]))[0]).toMatchObject({
      tenant: 'globex',
      status: 'awaiting_signal',
    });
  }, 60_000);

  /** Both cells' rows with `id` have parked on `go`. */
  async function waitParked(id: string): Promise<void> {
    for (const cell of ['eu', 'us'] as const) {
      const engine = router.engineFor(cell === 'eu' ? 'acme' : 'globex');
      const until = Date.now() + 15_000;
      while ((await engine.get({ id }))?.status !== 'awaiting_signal') {
        if (Date.now() > until) throw new Error(`${cell} row ${id} did not park`);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }
});
