import { done, DurableFsm, Step, type StepContext } from '../../lib';
import { GenDurableClient } from '../../lib/client';
import { DashboardReads } from '../../lib/dashboard/dashboard-reads';
import { type BuiltCli, buildCli, runCli } from '../cli/support/built-cli';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The faces without an engine read archived instances too (docs/archive.md "Reading archived
// instances"): GenDurableClient (get, await, history, list, count), the dashboard's reads
// (instance page, instance list) and the CLI (`show`, `list`), once the GC sweep moved the
// instance and its history out of the hot table.

@DurableFsm({ name: 'archived-greeter', queue: 'archive-client', history: 'transitions' })
class GreeterFsm {
  @Step() start(ctx: StepContext<{ name: string }>) {
    return done({ greeting: `hello ${ctx.state.name}` });
  }
}

// Each CLI command is a node process.
jest.setTimeout(180_000);

describe('client, dashboard and CLI on an archived instance (docs/archive.md)', () => {
  let db: TestDatabase;
  let h: Harness;
  let client: GenDurableClient;
  let cli: BuiltCli;
  let id: string;

  beforeAll(async () => {
    cli = buildCli();
    db = await createTestDatabase();
    h = await bootEngine(db, [GreeterFsm], {
      queues: { 'archive-client': 2 },
      gc: { interval: 3_600_000, archiveAfter: 0 },
    });
    client = new GenDurableClient(db.pool, {
      fsms: { 'archived-greeter': { initial: 'start', steps: ['start'] } },
    });
    id = await h.engine.insert(GreeterFsm, {
      state: { name: 'ada' },
      correlationKey: 'greet:ada',
    });
    await h.engine.await(id, { until: 'terminal', timeout: 10_000 });
    await h.engine.runtime.gc!.sweep();
    const { rows } = await db.pool.query(
      `SELECT (SELECT count(*) FROM gen_durable WHERE id = $1)::int AS hot,
              (SELECT count(*) FROM gen_durable_archive WHERE id = $1)::int AS archived`,
      [id],
    );
    expect(rows).toEqual([{ hot: 0, archived: 1 }]);
  });
  afterAll(async () => {
    await client?.close();
    await h?.close();
    await db?.drop();
  });

  it('GenDurableClient: get, await, history, list and count', async () => {
    expect(await client.get(id)).toMatchObject({
      id,
      status: 'done',
      result: { greeting: 'hello ada' },
    });
    expect(await client.get({ correlationKey: 'greet:ada' })).toMatchObject({ id });
    expect(await client.await(id, { timeout: 1000 })).toMatchObject({
      kind: 'done',
      result: { greeting: 'hello ada' },
    });
    expect((await client.history(id)).length).toBeGreaterThan(0);
    expect((await client.list({ fsm: 'archived-greeter' })).items.map((i) => i.id)).toEqual([id]);
    expect((await client.count({ fsm: 'archived-greeter' })).count).toBe(1);
  });

  it("the dashboard's instance page and instance list", async () => {
    const reads = new DashboardReads(h.engine, undefined);
    const page = await reads.instance(id);
    expect(page?.instance).toMatchObject({ id, status: 'done' });
    expect(page?.history.length).toBeGreaterThan(0);
    const listed = await reads.instances({ fsm: 'archived-greeter' }, undefined);
    expect(listed.items.map((i) => i.id)).toEqual([id]);
  });

  it('the CLI: show and list', async () => {
    const shown = await runCli(cli, ['show', id, '--json'], { DATABASE_URL: db.url });
    expect(shown.code).toBe(0);
    const detail = JSON.parse(shown.stdout) as {
      instance: { id: string; status: string };
      history: unknown[];
    };
    expect(detail.instance).toMatchObject({ id, status: 'done' });
    expect(detail.history.length).toBeGreaterThan(0);
    const listed = await runCli(cli, ['list', '--fsm', 'archived-greeter', '--json'], {
      DATABASE_URL: db.url,
    });
    expect(listed.code).toBe(0);
    expect(
      (JSON.parse(listed.stdout) as { items: { id: string }[] }).items.map((i) => i.id),
    ).toEqual([id]);
  });
});
