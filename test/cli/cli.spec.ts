import {
  awaitSignal,
  done,
  DurableFsm,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import { GenDurableClient } from '../../lib/client';
import { CURRENT_SCHEMA_VERSION } from '../../lib/schema/increments';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { type BuiltCli, buildCli, type CliRun, runCli } from './support/built-cli';

// The `gen-durable` CLI (docs/design.md §32; docs/cli.md), run as the built bin shim in a child
// process against real databases: every command, `--json`, and every exit code (0 ok,
// 1 problem, 2 usage, 3 unreachable). The engine here runs no queue: rows move only when the
// test drains them, so what each command sees is fixed.

@DurableFsm({ name: 'waiter' })
class WaiterFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('go', 'finish', ctx.state);
  }
  @Step() finish(ctx: StepContext) {
    return done({ got: ctx.awaited[0]?.payload ?? null });
  }
}

@DurableFsm({ name: 'parent' })
class ParentFsm {
  @Step() start(ctx: StepContext) {
    return scheduleChildren('joined', [{ fsm: WaiterFsm, state: { child: 1 } }], ctx.state);
  }
  @Step() joined() {
    return done({});
  }
}

@DurableFsm({ name: 'flaky' })
class FlakyFsm {
  @Step() start() {
    return stop('broken on purpose');
  }
  @Step() repaired() {
    return done({ repaired: true });
  }
}

// Each command is a node process: on a loaded machine a test of several takes a while.
jest.setTimeout(180_000);

const FIXTURE = 'test/cli/fixtures/app.module.ts';

describe('gen-durable CLI (docs/cli.md)', () => {
  let cli: BuiltCli;
  let db: TestDatabase;
  let h: Harness;
  let gd: GenDurableTesting;

  const run = (args: readonly string[], env: Record<string, string | undefined> = {}) =>
    runCli(cli, args, { DATABASE_URL: db.url, ...env });
  const json = (r: CliRun): unknown => {
    if (r.code !== 0 && r.code !== 1) throw new Error(`exit ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout) as unknown;
  };

  beforeAll(async () => {
    cli = buildCli([FIXTURE]);
    db = await createTestDatabase();
    h = await bootEngine(db, [WaiterFsm, ParentFsm, FlakyFsm], {
      queues: {},
      reaper: false,
      gc: false,
      poke: 'none',
      schedules: { prune: false, interval: 60_000 },
    });
    gd = GenDurableTesting.forEngine(h.engine);
  }, 120_000);

  afterAll(async () => {
    await h?.close();
    await db?.drop();
    cli?.remove();
  });

  describe('exit 2: usage', () => {
    it('an unknown command or flag prints the usage', async () => {
      const unknown = await run(['frobnicate']);
      expect(unknown).toMatchObject({ code: 2, stdout: '' });
      expect(unknown.stderr).toContain("unknown command 'frobnicate'");
      expect(unknown.stderr).toContain('Usage: gen-durable');
      const flag = await run(['list', '--colour']);
      expect(flag.code).toBe(2);
      expect(flag.stderr).toContain("unknown option '--colour'");
      expect(flag.stderr).toContain('Usage: gen-durable list');
      expect((await run(['show'])).code).toBe(2);
    });

    it('a malformed signal payload names its position', async () => {
      const r = await run(['signal', '1', 'go', '{"a": }']);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        /^gen-durable: the payload is not valid JSON at position 6 \(line 1, column 7\): /,
      );
      expect(r.stderr).not.toContain('    at ');
    });

    it('bad filter and option values', async () => {
      for (const args of [
        ['list', '--status', 'sleeping'],
        ['list', '--created-after', 'yesterday'],
        ['list', '--limit', '0'],
        ['list', '--parent', 'abc'],
        ['list', '--after', 'not-a-cursor'],
        ['cancel', '1', '--mode', 'hard'],
        ['retry', '1', '--at', 'soon'],
        ['show', 'abc'],
        ['schedules', 'explode'],
        ['schedules', 'pause'],
      ]) {
        const r = await run(args);
        expect({ args, code: r.code }).toEqual({ args, code: 2 });
        expect(r.stderr).not.toContain('    at ');
      }
    });

    it('no database given', async () => {
      const r = await run(['status'], { DATABASE_URL: undefined });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('set DATABASE_URL or pass --url');
    });
  });

  it('exit 3: a database the server does not have says so', async () => {
    const url = new URL(db.url);
    url.pathname = '/gd_cli_no_such_database';
    const r = await run(['status', '--url', url.toString()]);
    expect(r).toMatchObject({ code: 3, stdout: '' });
    expect(r.stderr).toBe(
      `gen-durable: database "gd_cli_no_such_database" does not exist on the server at ${url.hostname}:${url.port || '5432'}\n`,
    );
  });

  it('exit 3: an unreachable database is one line naming host and port', async () => {
    const r = await run(['status', '--url', 'postgres://postgres@127.0.0.1:1/nowhere']);
    expect(r).toMatchObject({ code: 3, stdout: '' });
    expect(r.stderr).toBe('gen-durable: cannot reach the database at 127.0.0.1:1 (ECONNREFUSED)\n');
    const asJson = await run(['list', '--json'], { DATABASE_URL: 'postgres://x@127.0.0.1:1/y' });
    expect(asJson.code).toBe(3);
    expect(JSON.parse(asJson.stderr)).toEqual({
      error: {
        code: 'CLI_UNREACHABLE',
        message: 'cannot reach the database at 127.0.0.1:1 (ECONNREFUSED)',
      },
    });
  });

  describe('migrate and verify', () => {
    let fresh: TestDatabase;
    beforeAll(async () => {
      fresh = await createTestDatabase({ migrate: false });
    });
    afterAll(async () => {
      await fresh?.drop();
    });

    it('verify fails on a schema behind the build; migrate brings it up, once', async () => {
      const url = ['--url', fresh.url];
      const behind = await run(['verify', ...url]);
      expect(behind.code).toBe(1);
      expect(behind.stdout).toContain(
        `problem: schema public is at version 0, this build needs ${CURRENT_SCHEMA_VERSION}: run gen-durable migrate`,
      );
      const partial = json(await run(['migrate', '--version', '3', '--json', ...url]));
      expect(partial).toEqual({
        schema: 'public',
        from: 0,
        to: 3,
        latest: CURRENT_SCHEMA_VERSION,
        built: [],
      });
      expect((await run(['verify', ...url])).code).toBe(1);
      const up = await run(['migrate', ...url]);
      expect(up).toMatchObject({ code: 0 });
      expect(up.stdout).toBe(
        `schema public: migrated from version 3 to ${CURRENT_SCHEMA_VERSION}; indexes built online: gen_durable_ended_key, gen_durable_fair_live, gen_durable_parked\n`,
      );
      const again = await run(['migrate', ...url]);
      expect(again.stdout).toBe(
        `schema public: at version ${CURRENT_SCHEMA_VERSION}, nothing to do\n`,
      );
      expect(json(await run(['verify', '--json', ...url]))).toMatchObject({
        ok: true,
        schema: { installed: CURRENT_SCHEMA_VERSION, required: CURRENT_SCHEMA_VERSION },
        live: [],
      });
      expect((await run(['migrate', '--version', '99', ...url])).code).toBe(2);
    });

    it('verify exits 1 naming an index a failed online build left INVALID; migrate rebuilds it', async () => {
      const url = ['--url', fresh.url];
      // A real failed CONCURRENTLY build under the index's name: two ended rows with one key
      // and one end time violate a UNIQUE variant, which PostgreSQL leaves behind INVALID.
      await fresh.pool.query('DROP INDEX gen_durable_ended_key');
      await fresh.pool.query(
        `INSERT INTO gen_durable (fsm, step, status, correlation_key, updated_at)
         VALUES ('f', 's', 'done', 'twice', '2026-01-01'), ('f', 's', 'done', 'twice', '2026-01-01')`,
      );
      await expect(
        fresh.pool.query(
          `CREATE UNIQUE INDEX CONCURRENTLY gen_durable_ended_key ON gen_durable (correlation_key, updated_at)
            WHERE status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
              AND correlation_key IS NOT NULL`,
        ),
      ).rejects.toThrow(/could not create unique index/);
      const failing = await run(['verify', ...url]);
      expect(failing.code).toBe(1);
      expect(failing.stdout).toContain('online indexes: gen_durable_ended_key invalid');
      expect(failing.stdout).toContain(
        'problem: index gen_durable_ended_key is invalid: run gen-durable migrate to build it',
      );
      const report = json(await run(['verify', '--json', ...url]));
      expect(report).toMatchObject({
        ok: false,
        indexes: [
          { name: 'gen_durable_ended_key', state: 'invalid' },
          { name: 'gen_durable_fair_live', state: 'valid' },
          { name: 'gen_durable_parked', state: 'valid' },
        ],
        problems: [{ kind: 'index' }],
      });
      const repair = await run(['migrate', ...url]);
      expect(repair.stdout).toBe(
        `schema public: at version ${CURRENT_SCHEMA_VERSION}; indexes built online: gen_durable_ended_key\n`,
      );
      expect((await run(['verify', ...url])).code).toBe(0);
      const { rows } = await fresh.pool.query<{ attempts: number; unique: boolean }>(
        `SELECT b.attempts, i.indisunique AS unique FROM gen_durable_index_builds b
           JOIN pg_class c ON c.relname = b.name JOIN pg_index i ON i.indexrelid = c.oid
          WHERE b.name = 'gen_durable_ended_key'`,
      );
      expect(rows).toEqual([{ attempts: 2, unique: false }]);
      await fresh.pool.query(`DELETE FROM gen_durable WHERE correlation_key = 'twice'`);
    });

    it('verify --module fails while live instances run an FSM version the module lacks', async () => {
      const url = ['--url', fresh.url];
      const client = new GenDurableClient(fresh.url);
      const old = await client.insert('order', { step: 'start', version: 1 });
      await client.insert('order', { step: 'start', version: 2 });
      await client.insert('mailer', { step: 'perform' });
      await client.close();
      const module = ['--module', cli.fixture(FIXTURE)];
      const failing = await run(['verify', ...module, ...url]);
      expect(failing.code).toBe(1);
      expect(failing.stdout).toContain('the module registers: mailer@1, order@2, waiter@1');
      expect(failing.stdout).toContain(
        'problem: 1 live instance(s) of FSM "order" version 1, which the module does not register',
      );
      const report = json(await run(['verify', '--json', ...module, ...url]));
      expect(report).toMatchObject({
        ok: false,
        live: [
          { fsm: 'mailer', version: 1, instances: 1 },
          { fsm: 'order', version: 1, instances: 1 },
          { fsm: 'order', version: 2, instances: 1 },
        ],
        problems: [{ kind: 'unregistered' }],
      });
      // Once the old instance ended, the gate passes.
      expect((await run(['cancel', old, ...url])).code).toBe(0);
      const passing = await run(['verify', ...module, ...url]);
      expect(passing).toMatchObject({ code: 0 });
      expect(passing.stdout).toMatch(/\nok\n$/);
      const missing = await run(['verify', '--module', '/nonexistent/app.module.js', ...url]);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain('--module /nonexistent/app.module.js: cannot load it');
      // The engine's own discovery reads the module: what the engine refuses at boot, verify refuses.
      const broken = await run([
        'verify',
        '--module',
        `${cli.fixture(FIXTURE)}#BrokenModule`,
        ...url,
      ]);
      expect(broken.code).toBe(1);
      expect(broken.stderr).toMatch(/GD_CONFIGURATION: .*fsm broken\.initial/);
    });
  });

  it('status: queues with capped counts, the next due row’s wait, and pauses', async () => {
    await h.engine.insert('waiter', { queue: 'billing' });
    expect((await run(['pause', 'billing', '--reason', 'maintenance'])).stdout).toMatch(
      /^queue billing paused since \S+ \(maintenance\)\n$/,
    );
    const text = await run(['status']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^QUEUE +PAUSED +RUNNABLE +DUE +EXECUTING +NEXT DUE WAITED\n/);
    expect(text.stdout).toMatch(/\nbilling +yes \(maintenance\) +1 +1 +0 +\S+/);
    const rows = json(await run(['status', '--json', '--cap', '1'])) as {
      queue: string;
      paused: boolean;
      runnable: { count: number; capped: boolean };
      oldestDueMs: number | null;
    }[];
    const billing = rows.find((r) => r.queue === 'billing');
    expect(billing).toMatchObject({ paused: true, runnable: { count: 1, capped: true } });
    expect(typeof billing?.oldestDueMs).toBe('number');
    expect(json(await run(['resume', 'billing', '--json']))).toMatchObject({
      queue: 'billing',
      wasPaused: true,
    });
    expect((await run(['resume', 'billing'])).stdout).toBe('queue billing was not paused\n');
    expect(json(await run(['pause', 'billing', '--json']))).toMatchObject({ created: true });
    await run(['resume', 'billing']);
  });

  it('list: filters, pages and the next cursor', async () => {
    for (let i = 0; i < 3; i++) await h.engine.insert('waiter', { correlationKey: `listed-${i}` });
    const first = json(
      await run(['list', '--key-prefix', 'listed-', '--limit', '2', '--json']),
    ) as {
      items: { correlationKey: string }[];
      next: string;
    };
    expect(first.items.map((i) => i.correlationKey)).toEqual(['listed-2', 'listed-1']);
    const second = json(
      await run([
        'list',
        '--key-prefix',
        'listed-',
        '--limit',
        '2',
        '--after',
        first.next,
        '--json',
      ]),
    ) as { items: { correlationKey: string }[]; next?: string };
    expect(second.items.map((i) => i.correlationKey)).toEqual(['listed-0']);
    expect(second.next).toBeUndefined();
    const text = await run([
      'list',
      '--fsm',
      'waiter',
      '--status',
      'runnable',
      '--key',
      'listed-1',
    ]);
    expect(text.stdout).toMatch(
      /^ID +FSM +STEP +STATUS +QUEUE +KEY +UPDATED\n\d+ +waiter@1 +start +runnable +default +listed-1 /,
    );
    const none = await run(['list', '--created-before', '2000-01-01', '--error-contains', 'x']);
    expect(none.stdout).toBe('no instances match\n');
  });

  it('show: the row, its inbox with consumed flags, its children and its history', async () => {
    const parent = await h.engine.insert('parent', { correlationKey: 'family' });
    await gd.drain();
    const [child] = (await h.engine.list({ parentId: parent })).items;
    // A signal the child does not await stays in its inbox; the awaited one of a finished
    // instance was consumed.
    await h.engine.signal(child!.id, 'note', { later: true });
    const finished = await h.engine.insert('waiter');
    await gd.drain();
    await h.engine.signal(finished, 'go', { first: true });
    await gd.drain();
    const shown = json(await run(['show', child!.id, '--json'])) as {
      instance: { id: string; status: string; parentId: string };
      inbox: { name: string; consumedAt: string | null; payload: unknown }[];
    };
    expect(shown.instance).toMatchObject({
      id: child!.id,
      status: 'awaiting_signal',
      parentId: parent,
    });
    expect(shown.inbox).toMatchObject([
      { name: 'note', consumedAt: null, payload: { later: true } },
    ]);
    const done = json(await run(['show', finished, '--json'])) as {
      instance: { status: string };
      inbox: { name: string; consumedAt: string | null }[];
    };
    expect(done.instance.status).toBe('done');
    expect(done.inbox.map((s) => [s.name, s.consumedAt !== null])).toEqual([['go', true]]);
    const inboxText = await run(['show', child!.id]);
    expect(inboxText.stdout).toMatch(
      /inbox \(newest 20\):\nID +NAME +CONSUMED +AT +PAYLOAD\n\d+ +note +no /,
    );
    const family = json(await run(['show', 'key:family', '--json'])) as {
      instance: { id: string };
      children: { id: string }[];
      history: unknown[];
    };
    expect(family.instance.id).toBe(parent);
    expect(family.children.map((c) => c.id)).toEqual([child!.id]);
    expect(Array.isArray(family.history)).toBe(true);
    const text = await run(['show', parent]);
    expect(text.stdout).toContain(`instance ${parent}: parent@1 at step joined, awaiting_children`);
    expect(text.stdout).toContain('children (newest 20):');
    expect(text.stdout).toContain('history (newest 20):');
  });

  it('exit 1: a target that does not exist; the stack only with --verbose', async () => {
    const missing = await run(['show', '999999']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('gen-durable: no instance answers id 999999\n');
    const verbose = await run(['signal', '999999', 'go', '--verbose']);
    expect(verbose.code).toBe(1);
    expect(verbose.stderr).toMatch(/^gen-durable: GD_NO_TARGET: /);
    expect(verbose.stderr).toContain('    at ');
    const quiet = await run(['signal', '999999', 'go', '--json']);
    expect(quiet.code).toBe(1);
    expect(JSON.parse(quiet.stderr)).toMatchObject({ error: { code: 'GD_NO_TARGET' } });
  });

  it('signal by id or key:, with a JSON payload', async () => {
    const id = await h.engine.insert('waiter', { correlationKey: 'sig-me' });
    await gd.drain();
    const r = await run(['signal', 'key:sig-me', 'go', '{"n": 42}', '--dedup-key', 'once']);
    expect(r).toMatchObject({ code: 0, stdout: 'signal go delivered\n' });
    expect(
      json(await run(['signal', id, 'go', '{"n": 42}', '--dedup-key', 'once', '--json'])),
    ).toEqual({
      delivered: true,
      target: id,
      name: 'go',
    });
    await gd.drain();
    expect(await h.engine.get(id)).toMatchObject({ status: 'done', result: { got: { n: 42 } } });
  });

  it('cancel with reason, children and mode; retry with step and at', async () => {
    const parent = await h.engine.insert('parent');
    await gd.drain();
    const cancelled = json(
      await run([
        'cancel',
        parent,
        '--reason',
        'operator',
        '--children',
        'keep',
        '--mode',
        'fence',
        '--json',
      ]),
    );
    expect(cancelled).toEqual({ cancelled: [parent], requested: [], alreadyTerminal: [] });
    expect(await h.engine.get(parent)).toMatchObject({
      status: 'cancelled',
      cancelReason: 'operator',
    });
    expect((await h.engine.history(parent, { limit: 1 }))[0]).toMatchObject({
      kind: 'manual.cancel',
      actor: expect.stringMatching(/^cli:\S+$/) as unknown,
    });
    const again = await run(['cancel', parent]);
    expect(again.stdout).toContain(`already ended: ${parent}`);

    const broken = await h.engine.insert('flaky');
    await gd.drain();
    const at = '2099-01-01T00:00:00.000Z';
    expect(await run(['retry', broken, '--step', 'repaired', '--at', at])).toMatchObject({
      code: 0,
      stdout: 'retried: runnable again\n',
    });
    expect(await h.engine.get(broken)).toMatchObject({
      status: 'runnable',
      step: 'repaired',
      eligibleAt: new Date(at),
    });
    const [manual] = await h.engine.history(broken, { limit: 1 });
    expect(manual).toMatchObject({
      kind: 'manual.retry',
      actor: expect.stringMatching(/^cli:\S+$/) as unknown,
    });
    const live = await run(['retry', broken, '--json']);
    expect(live.code).toBe(2);
    expect(JSON.parse(live.stderr)).toMatchObject({ error: { code: 'GD_INVALID_INPUT' } });
  });

  it('show: the instance deadline, as text and JSON', async () => {
    const deadline = new Date('2099-01-02T03:04:05.678Z');
    const id = await h.engine.insert('waiter', { deadline });
    expect((await run(['show', id])).stdout).toContain(`  deadline ${deadline.toISOString()}\n`);
    const shown = json(await run(['show', id, '--json'])) as { instance: { deadline: string } };
    expect(shown.instance.deadline).toBe(deadline.toISOString());
    const none = await h.engine.insert('waiter');
    expect((await run(['show', none])).stdout).not.toContain('  deadline ');
  });

  it('explain: every reason, the hold and the instance deadline, as text and JSON', async () => {
    const deadline = new Date('2099-01-02T03:04:05.678Z');
    const id = await h.engine.insert('waiter', { deadline, held: true });
    const shown = await run(['explain', id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^instance ${id}: waiter@1 at step start, runnable`));
    expect(shown.stdout).toContain('\n* held: it is held since ');
    expect(shown.stdout).toContain(`\n- deadline: its deadline is ${deadline.toISOString()} (in `);
    const answered = json(await run(['explain', id, '--json'])) as {
      reasons: { code: string; details: Record<string, unknown> }[];
    };
    expect(answered.reasons.map((r) => r.code)).toEqual(
      expect.arrayContaining(['held', 'deadline']),
    );
    expect(answered.reasons.find((r) => r.code === 'deadline')?.details).toMatchObject({
      deadline: deadline.toISOString(),
      overdue: false,
    });
    expect((await run(['explain', '999999999'])).code).toBe(1);
    await h.engine.cancel(id);
  });

  it('hold and release: list and show say held; release makes it claimable again', async () => {
    const id = await h.engine.insert('waiter', { correlationKey: 'cli-hold' });
    expect(await run(['hold', 'key:cli-hold', '--reason', 'audit'])).toMatchObject({
      code: 0,
      stdout: `held: ${id} (no node claims it until released)\n`,
    });
    expect(json(await run(['hold', id, '--json']))).toEqual({ id, changed: false });
    expect((await run(['list', '--fsm', 'waiter'])).stdout).toContain('runnable (held)');
    expect((await run(['show', id])).stdout).toContain('  held since ');
    expect((await run(['show', id])).stdout).toContain('(audit): not claimed until released');
    await gd.drain();
    expect(await h.engine.get(id)).toMatchObject({ status: 'runnable', claimSeq: '0' });
    expect(await run(['release', id])).toMatchObject({ code: 0, stdout: `released: ${id}\n` });
    expect((await run(['release', id])).stdout).toBe(`not held: ${id} (nothing to release)\n`);
    await gd.drain();
    expect((await h.engine.get(id))?.status).toBe('awaiting_signal');
    const manual = (await h.engine.history(id)).filter((e) => e.kind.startsWith('manual.'));
    expect(manual.map((e) => [e.kind, e.actor?.startsWith('cli:')])).toEqual([
      ['manual.release', true],
      ['manual.hold', true],
    ]);
    await h.engine.cancel(id);
    const ended = await run(['hold', id, '--json']);
    expect(ended.code).toBe(2);
    expect(JSON.parse(ended.stderr)).toMatchObject({ error: { code: 'GD_INVALID_INPUT' } });
  });

  it('sequences and skip-sequence-head: held keys as text and JSON; a skipped head lets the next run', async () => {
    const head = await h.engine.insert('flaky', { sequenceKey: 'cli-seq' });
    const next = await h.engine.insert('waiter', { sequenceKey: 'cli-seq' });
    await gd.drain();
    expect(await h.engine.get(next)).toMatchObject({ status: 'runnable', claimSeq: '0' });
    const text = await run(['sequences']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^KEY +HEAD +STATUS +STEP +WAITING +SINCE +ERROR\n/);
    expect(text.stdout).toMatch(
      new RegExp(`\\ncli-seq +${head} +failed +start +1 +\\S+ +broken on purpose`),
    );
    expect(text.stdout).toContain('broken on purpose');
    expect(json(await run(['sequences', '--key', 'cli-seq', '--json']))).toMatchObject([
      { key: 'cli-seq', headId: head, headStatus: 'failed', waiting: 1 },
    ]);
    expect(await run(['skip-sequence-head', head])).toMatchObject({
      code: 0,
      stdout: `skipped: ${head} (failed, kept; the next instance of its key runs)\n`,
    });
    expect((await run(['skip-sequence-head', head])).stdout).toBe(`already skipped: ${head}\n`);
    expect((await run(['sequences'])).stdout).toBe('no sequence key has instances waiting\n');
    await gd.drain();
    expect((await h.engine.get(next))?.status).toBe('awaiting_signal');
    expect((await run(['skip-sequence-head', next])).code).toBe(2);
    await h.engine.cancel(next);
  });

  it("fairness: each fair queue's keys in claim order as text and JSON, capped counts", async () => {
    expect((await run(['fairness'])).stdout).toBe('no queue has a fairness head\n');
    const a = await h.engine.insertAll(
      'waiter',
      Array.from({ length: 3 }, () => ({ queue: 'cli-fair', fairnessKey: 'tenant-a' })),
    );
    await h.engine.insert('waiter', {
      queue: 'cli-fair',
      fairnessKey: 'tenant-b',
      fairnessWeight: 3,
    });
    const text = await run(['fairness', '--cap', '2']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(
      /^QUEUE +KEY +VTIME +WEIGHT +RUNNABLE +DUE +EXECUTING +NEXT +DUE-MS\n/,
    );
    expect(text.stdout).toMatch(
      new RegExp(`\\ncli-fair +tenant-a +0\\.00 +1 +2\\+ +2\\+ +0 +${a[0]} +\\d+`),
    );
    expect(
      json(await run(['fairness', '--queue', 'cli-fair', '--limit', '1', '--json'])),
    ).toMatchObject([
      {
        queue: 'cli-fair',
        keys: { count: 2, capped: false },
        heads: [{ runnable: { capped: false } }],
      },
    ]);
    expect((await run(['fairness', '--limit', '0'])).code).toBe(2);
    await h.engine.cancelAll({ queue: 'cli-fair' });
  });

  it('purge: one ended instance, or --all by the filters (with --dry-run); a live one exits 2', async () => {
    const usage = [
      ['purge'],
      ['purge', '1', '--all'],
      ['purge', '1', '--fsm', 'flaky'],
      ['purge', '--all', '--batch-size', '0'],
      ['purge', '--all', '--status', 'sleeping'],
    ];
    for (const args of usage) {
      expect({ args, code: (await run(args)).code }).toEqual({ args, code: 2 });
    }

    const waiter = await h.engine.insert('waiter', { correlationKey: 'purge-cli' });
    await gd.drain();
    const live = await run(['purge', 'key:purge-cli', '--json']);
    expect(live.code).toBe(2);
    expect(JSON.parse(live.stderr)).toMatchObject({ error: { code: 'GD_INVALID_INPUT' } });
    expect(live.stderr).toContain('is awaiting_signal');
    await h.engine.cancel(waiter);
    expect(await run(['purge', 'key:purge-cli'])).toMatchObject({
      code: 0,
      stdout: 'purged: 1 instance\n',
    });
    expect(await h.engine.get(waiter)).toBeNull();
    expect((await run(['purge', waiter])).code).toBe(1); // gone: NoTargetError

    const broken = [await h.engine.insert('flaky'), await h.engine.insert('flaky')];
    await gd.drain();
    const matching = ['--all', '--fsm', 'flaky', '--status', 'failed'];
    const counted = json(await run(['purge', ...matching, '--dry-run', '--json']));
    expect(counted).toMatchObject({ dryRun: true, purged: 0 });
    const { matched } = counted as { matched: number };
    expect(matched).toBeGreaterThanOrEqual(2);
    for (const id of broken) expect((await h.engine.get(id))?.status).toBe('failed');
    expect(json(await run(['purge', ...matching, '--batch-size', '1', '--json']))).toEqual({
      matched,
      purged: matched,
      dryRun: false,
      actor: expect.stringMatching(/^cli:\S+$/) as unknown,
    });
    for (const id of broken) expect(await h.engine.get(id)).toBeNull();
    expect((await run(['purge', '--all', '--status', 'executing'])).code).toBe(2);
  });

  it('a parked instance reads "awaiting `go` → finish"; retried after a cancel there, it waits again', async () => {
    const id = await h.engine.insert('waiter', { correlationKey: 'parked-shown' });
    await gd.drain();
    const listed = await run(['list', '--key', 'parked-shown']);
    expect(listed.stdout).toMatch(
      new RegExp(
        `\\n${id} +waiter@1 +awaiting \`go\` → finish +awaiting_signal +default +parked-shown `,
      ),
    );
    expect((await run(['show', id])).stdout).toContain(
      `instance ${id}: waiter@1 awaiting \`go\` → finish, awaiting_signal`,
    );
    await h.engine.cancel(id);
    expect(await run(['retry', id])).toMatchObject({
      code: 0,
      stdout: 'retried: awaiting `go` → finish again\n',
    });
    expect(await h.engine.get(id)).toMatchObject({ status: 'awaiting_signal', awaits: ['go'] });
  });

  it('retry --step refuses a step the --module FSM lacks, and says how to force it', async () => {
    const id = await h.engine.insert('waiter');
    await gd.drain();
    await h.engine.cancel(id);
    const module = ['--module', cli.fixture(FIXTURE)];
    const refused = await run(['retry', id, '--step', 'nope', ...module]);
    expect(refused).toMatchObject({ code: 2, stdout: '' });
    expect(refused.stderr).toBe(
      'gen-durable: --step nope: FSM "waiter" has no step "nope" in the module\'s @DurableFsm class (--module): check the name, or pass --force to retry at it unchecked\n',
    );
    expect(await h.engine.get(id)).toMatchObject({ status: 'cancelled' });
    const forced = await run(['retry', id, '--step', 'nope', '--force', ...module]);
    expect(forced).toMatchObject({ code: 0, stdout: 'retried: runnable again\n' });
    expect(await h.engine.get(id)).toMatchObject({ status: 'runnable', step: 'nope' });
    await h.engine.cancel(id);
  });

  it('schedules: list, pause, resume, trigger (with --module), remove', async () => {
    await h.engine.schedules.upsert({ name: 'nightly', fsm: 'waiter', cron: '0 3 * * *' });
    const listed = await run(['schedules']);
    expect(listed.stdout).toMatch(
      /^NAME +FSM +CRON +TZ +PAUSED +NEXT FIRE +LAST FIRE\nnightly +waiter +0 3 \* \* \* +UTC +no /,
    );
    expect(json(await run(['schedules', 'pause', 'nightly', '--json']))).toMatchObject({
      name: 'nightly',
      paused: true,
    });
    expect((await run(['schedules', 'resume', 'nightly'])).stdout).toMatch(
      /^schedule nightly resumed, next fire \S+\n$/,
    );
    // The client knows no FSM without a description: trigger needs --module (or fails, exit 1).
    const blind = await run(['schedules', 'trigger', 'nightly']);
    expect(blind.code).toBe(1);
    expect(blind.stderr).toBe(
      'gen-durable: schedules trigger nightly: the CLI does not know FSM "waiter": pass --module <compiled app module> so it can insert the instance\n',
    );
    const fired = json(
      await run(['schedules', 'trigger', 'nightly', '--module', cli.fixture(FIXTURE), '--json']),
    ) as { triggered: string; id: string };
    expect(fired.triggered).toBe('nightly');
    expect(await h.engine.get(fired.id)).toMatchObject({
      fsm: 'waiter',
      fsmVersion: 1,
      step: 'start',
      status: 'runnable',
      correlationKey: expect.stringMatching(/^cron:nightly:/) as unknown,
    });
    await h.engine.schedules.upsert({ name: 'mail', fsm: 'waiter', cron: '0 3 * * *' });
    expect((await run(['schedules', 'remove', 'mail'])).stdout).toBe('schedule mail removed\n');
    expect((await run(['schedules', 'remove', 'mail'])).code).toBe(1);
    expect(json(await run(['schedules', 'list', '--json']))).toMatchObject([{ name: 'nightly' }]);
  });
});
