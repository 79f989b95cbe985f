import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { awaitSignal, done, DurableFsm, Step, type StepContext } from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { type BuiltCli, buildCli, runCli } from '../cli/support/built-cli';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Runs the session of docs/cli.md ("A session") command by command with the built bin and
// compares what each prints (stdout, then stderr, then `[exit N]` when not 0) with the page.
// Timestamps, durations and runs of spaces (table widths follow them) are normalized.

@DurableFsm({ name: 'order', queue: 'orders' })
class OrderFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('paid', 'ship', ctx.state);
  }
  @Step() ship() {
    return done({ shipped: true });
  }
}

// Each command is a node process: on a loaded machine a test of several takes a while.
jest.setTimeout(180_000);

/** The ```console block after `<!-- cli-session -->`: commands and their expected output. */
function session(): { command: string; expected: string }[] {
  const lines = readFileSync(join(__dirname, '..', '..', 'docs', 'cli.md'), 'utf8').split('\n');
  const marker = lines.indexOf('<!-- cli-session -->');
  const open = lines.findIndex((l, i) => i > marker && l === '```console');
  const close = lines.findIndex((l, i) => i > open && l === '```');
  const steps: { command: string; expected: string[] }[] = [];
  for (const line of lines.slice(open + 1, close)) {
    if (line.startsWith('$ ')) steps.push({ command: line.slice(2), expected: [] });
    else steps[steps.length - 1]?.expected.push(line);
  }
  return steps.map((s) => ({ command: s.command, expected: s.expected.join('\n') }));
}

/** Shell-like words: spaces split, single or double quotes group. */
function words(command: string): string[] {
  const out: string[] = [];
  for (const m of command.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) out.push(m[1] ?? m[2] ?? m[3]!);
  return out;
}

function normalize(text: string): string {
  return text
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/g, '<time>')
    .replace(/\b\d+(?:\.\d)?(?:ms|s)\b|\b\d+m\d{2}s\b|\b\d+h\d{2}m\b/g, '<duration>')
    .replace(/ +/g, ' ')
    .trimEnd();
}

describe('docs/cli.md: a session', () => {
  let cli: BuiltCli;
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    cli = buildCli();
    db = await createTestDatabase();
    h = await bootEngine(db, [OrderFsm], { queues: {}, reaper: false, gc: false, poke: 'none' });
    await h.engine.insert('order', { correlationKey: 'order-1' });
    await h.engine.insert('order', { correlationKey: 'order-2' });
    await GenDurableTesting.forEngine(h.engine).drain();
  }, 120_000);

  afterAll(async () => {
    await h?.close();
    await db?.drop();
    cli?.remove();
  });

  it('prints what the page shows', async () => {
    const steps = session();
    expect(steps.length).toBeGreaterThan(5);
    for (const step of steps) {
      const [bin, ...args] = words(step.command);
      expect(bin).toBe('gen-durable');
      const r = await runCli(cli, args, { DATABASE_URL: db.url });
      const printed = `${r.stdout}${r.stderr}${r.code === 0 ? '' : `[exit ${r.code}]\n`}`;
      expect({ command: step.command, output: normalize(printed) }).toEqual({
        command: step.command,
        output: normalize(step.expected),
      });
    }
  });
});
