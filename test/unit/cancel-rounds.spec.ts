import { cancelInput, cancelRounds, summarize } from '../../lib/control/cancel-instance';
import { InvalidInputError } from '../../lib/errors/invalid-input.error';
import type { CancelledRow, CancelRequest } from '../../lib/sql/cancel.sql';

// The pure half of cancel (docs/design.md §27.2): option validation, the cascade's rounds and
// the answer's lists, without a database (the statement itself: test/engine/cancel*.spec.ts,
// test/chaos/control-races.spec.ts).

const request: CancelRequest = {
  targetId: '1',
  correlationKey: null,
  reason: null,
  children: 'cascade',
  fence: false,
  descendantsOnly: false,
  onlyFsms: null,
};

function rowOf(id: string, action: CancelledRow['action'], extra: Partial<CancelledRow> = {}) {
  return {
    id,
    action,
    isTarget: id === '1',
    queue: 'q',
    prior: 'runnable',
    moved: false,
    signaled: false,
    concurrencyKey: null,
    concurrencyShard: null,
    ...extra,
  } satisfies CancelledRow;
}

describe('cancel options', () => {
  it('defaults to cascade and cooperative, and names each bad field', () => {
    expect(cancelInput(undefined)).toEqual({
      reason: null,
      children: 'cascade',
      mode: 'cooperative',
      actor: null,
    });
    expect(cancelInput({ reason: 'r', children: 'keep', mode: 'fence', actor: 'ops' })).toEqual({
      reason: 'r',
      children: 'keep',
      mode: 'fence',
      actor: 'ops',
    });
    const cases: [unknown, string][] = [
      [null, 'cancel.options'],
      [[], 'cancel.options'],
      [{ children: 'some' }, 'cancel.children'],
      [{ mode: 'hard' }, 'cancel.mode'],
      [{ reason: 1 }, 'cancel.reason'],
      [{ reason: 'é'.repeat(5000) }, 'cancel.reason'],
      [{ cascade: true }, 'cancel.options.cascade'],
    ];
    for (const [options, path] of cases) {
      let thrown: unknown;
      try {
        cancelInput(options);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(InvalidInputError);
      expect((thrown as InvalidInputError).path).toBe(path);
    }
  });
});

const noSweep = async (): Promise<void> => undefined;

describe('cancel rounds', () => {
  it('one round when nothing moved; further rounds over the descendants while something did', async () => {
    const seen: CancelRequest[] = [];
    const answers = [
      [rowOf('1', 'cancelled'), rowOf('2', 'requested', { moved: true })],
      [rowOf('1', 'none'), rowOf('2', 'cancelled'), rowOf('3', 'cancelled', { moved: true })],
      [rowOf('1', 'none'), rowOf('4', 'cancelled')],
    ];
    const rounds = await cancelRounds(
      async (r) => {
        seen.push(r);
        return answers[seen.length - 1] ?? [];
      },
      request,
      noSweep,
    );
    expect(seen.map((r) => r.descendantsOnly)).toEqual([false, true, true]);
    expect(seen.every((r) => r.targetId === '1')).toBe(true);
    expect(summarize(rounds.rows)).toEqual({
      cancelled: ['1', '2', '3', '4'],
      requested: [],
      alreadyTerminal: [],
    });
  });

  it('no further round for keep/detach, nor for an ended target', async () => {
    let calls = 0;
    const moved = [rowOf('1', 'cancelled'), rowOf('2', 'none', { moved: true })];
    await cancelRounds(async () => (calls++, moved), { ...request, children: 'keep' }, noSweep);
    expect(calls).toBe(1);
    calls = 0;
    const ended = [rowOf('1', 'terminal', { moved: true })];
    const r = await cancelRounds(async () => (calls++, ended), request, noSweep);
    expect(calls).toBe(1);
    expect(summarize(r.rows)).toEqual({ cancelled: [], requested: [], alreadyTerminal: ['1'] });
  });

  it('no root: nothing answered', async () => {
    expect((await cancelRounds(async () => [], request, noSweep)).root).toBeUndefined();
  });

  it('sweeps again the inbox of a cancelled row that moved and was signaled (a late delivery)', async () => {
    const swept: string[][] = [];
    await cancelRounds(
      async () => [
        rowOf('1', 'cancelled', { moved: true, signaled: true }),
        rowOf('2', 'cancelled', { signaled: true }),
      ],
      { ...request, children: 'keep' },
      async (ids) => {
        swept.push(ids);
      },
    );
    expect(swept).toEqual([['1']]);
  });
});
