import { InvalidOutcomeError, retry, sleep, type SleepDuration } from '../../lib';
import { MAX_DELAY_MS } from '../../lib/fsm/outcome';

// docs/design.md §27.4: the sleep outcome's arguments, checked when it is built (a bad one is
// an InvalidOutcomeError, routed to onError like any throw of the step).

describe('sleep()', () => {
  it('builds a sleep for ms or until an instant', () => {
    expect(sleep('later', { n: 1 }, { for: 250 })).toEqual({
      kind: 'sleep',
      step: 'later',
      state: { n: 1 },
      delayMs: 250,
      until: null,
    });
    const at = new Date('2030-01-02T03:04:05.678Z');
    const outcome = sleep('later', {}, { until: at });
    expect(outcome).toMatchObject({ kind: 'sleep', delayMs: 0, until: at });
    // A copy: mutating the caller's Date afterwards changes nothing.
    at.setUTCFullYear(2040);
    expect((outcome as { until: Date }).until.toISOString()).toBe('2030-01-02T03:04:05.678Z');
    expect(sleep('later', {}, { for: 0 })).toMatchObject({ delayMs: 0 });
    expect(sleep('later', {}, { for: MAX_DELAY_MS })).toMatchObject({ delayMs: MAX_DELAY_MS });
    expect(sleep('later', {}, { until: new Date('2000-01-01T00:00:00Z') })).toMatchObject({
      kind: 'sleep',
    });
  });

  it.each([
    [{ for: -1 }, /for must be an integer number of ms in 0 … \d+, got -1/],
    [{ for: Number.NaN }, /got NaN/],
    [{ for: 1.5 }, /got 1\.5/],
    [{ for: Number.POSITIVE_INFINITY }, /got Infinity/],
    [{ for: MAX_DELAY_MS + 1 }, /for must be an integer/],
    [{ for: '10' }, /got 10/],
    [
      { until: new Date('not a date') },
      /until must be a valid Date in years 1 … 9999, got an invalid Date/,
    ],
    [{ until: '2030-01-01' }, /until must be a valid Date.*got 2030-01-01/],
    [{ until: new Date('+010000-01-01T00:00:00Z') }, /until must be a valid Date/],
    [{ until: new Date(-62198755200000) }, /until must be a valid Date/], // year 0
    [{ for: 10, until: new Date() }, /exactly one of/],
    [{}, /exactly one of/],
  ])('refuses %p', (duration, message) => {
    expect(() => sleep('later', {}, duration as unknown as SleepDuration)).toThrow(
      InvalidOutcomeError,
    );
    expect(() => sleep('later', {}, duration as unknown as SleepDuration)).toThrow(message);
  });

  it('refuses a missing duration and an empty step name', () => {
    expect(() => sleep('later', {}, undefined as unknown as SleepDuration)).toThrow(
      /sleep\(\): the duration must be \{ for: ms \} or \{ until: Date \}, got undefined/,
    );
    expect(() => sleep('', {}, { for: 1 })).toThrow(
      /sleep\(\): the step must be a non-empty string/,
    );
  });
});

describe('retry()', () => {
  it('refuses a delay beyond 100 years: it would leave the timestamp range and fail its flush', () => {
    expect(retry({}, MAX_DELAY_MS)).toMatchObject({ kind: 'retry', delayMs: MAX_DELAY_MS });
    expect(() => retry({}, 1e20)).toThrow(
      /retry\(\): delayMs must be an integer in 0 … 3155760000000, got 100000000000000000000/,
    );
    expect(() => retry({}, -1)).toThrow(InvalidOutcomeError);
  });
});
