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
