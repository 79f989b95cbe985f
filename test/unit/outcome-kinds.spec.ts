import { FLUSH_TRANSITIONS } from '../../lib/sql/outcome.sql';
import { OUTCOME_KINDS, TALLY_KINDS, type EntryKind } from '../../lib/fsm/outcome-kinds';
import * as outcomes from '../../lib/fsm/outcome';
import { emptyTally } from '../../lib/testing/drain-tally';

const kinds = Object.keys(OUTCOME_KINDS) as EntryKind[];

describe('the outcome-kind table', () => {
  it('names every kind the transitions UPDATE writes in that statement', () => {
    for (const kind of kinds) {
      if (OUTCOME_KINDS[kind].write !== 'transition') continue;
      expect(FLUSH_TRANSITIONS.text).toContain(`'${kind}'`);
    }
  });

  it('has a public constructor for every public kind, and the constructor builds that kind', () => {
    const built = {
      next: outcomes.next('a', {}),
      retry: outcomes.retry({}),
      throttle: outcomes.throttle({ limit: 'api', retryAfterMs: 1000 }),
      sleep: outcomes.sleep('a', {}, { for: 10 }),
      await: outcomes.awaitSignal('go', 'a', {}),
      scheduleChildren: outcomes.scheduleChildren('a', [], {}),
      done: outcomes.done(),
      stop: outcomes.stop('no'),
    } satisfies Record<outcomes.OutcomeKind, outcomes.Outcome>;
    const publicKinds = kinds.filter((k) => OUTCOME_KINDS[k].public);
    expect(Object.keys(built).sort()).toEqual([...publicKinds].sort());
    for (const [kind, outcome] of Object.entries(built)) expect(outcome.kind).toBe(kind);
  });

  it('feeds each tally counter once, and the drain tally has exactly those counters', () => {
    expect(new Set(TALLY_KINDS).size).toBe(TALLY_KINDS.length);
    expect(Object.keys(emptyTally()).sort()).toEqual(['steps', ...TALLY_KINDS].sort());
  });

  it('makes a throttle a non-terminal transition of its own tally, due after its delay', () => {
    expect(OUTCOME_KINDS.throttle).toEqual({
      public: true,
      write: 'transition',
      terminal: false,
      consumesAwaited: false,
      pokes: 'whenDue',
      tally: 'throttle',
    });
    // The attempt column keeps g.attempt for a throttle: only retry adds one.
    expect(FLUSH_TRANSITIONS.text).toMatch(/WHEN 'retry' THEN g\.attempt \+ 1 ELSE g\.attempt END/);
    expect(FLUSH_TRANSITIONS.text).toContain(
      "WHEN 'throttle' THEN now() + make_interval(secs => t.delay_ms / 1000)",
    );
  });

  it('refuses a throttle without a limit or a key, or with a bad retryAfterMs', () => {
    expect(() => outcomes.throttle({ retryAfterMs: 10 })).toThrow(/give a limit, a key or both/);
    for (const bad of [0, -1, 1.5, Number.NaN, outcomes.MAX_DELAY_MS + 1]) {
      expect(() => outcomes.throttle({ key: 'k', retryAfterMs: bad })).toThrow(/retryAfterMs/);
    }
    const ok = outcomes.throttle({ limit: ['api', 7], key: 'k', retryAfterMs: 5 });
    expect(ok).toMatchObject({ kind: 'throttle', limit: ['api', 7], key: 'k', retryAfterMs: 5 });
  });

  it('makes terminals neither poke nor consume presented signals (their riders sweep instead)', () => {
    for (const kind of kinds) {
      const spec = OUTCOME_KINDS[kind];
      if (!spec.terminal) continue;
      expect(spec.pokes).toBe('never');
      expect(spec.consumesAwaited).toBe(false);
      expect(spec.write).toBe('transition');
    }
  });
});
