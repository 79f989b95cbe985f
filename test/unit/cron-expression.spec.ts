import { CronExpression, CronInputError, isTimeZone } from '../../lib/cron/cron-expression';

// docs/design.md §29: occurrences from the cron library, time-zone aware, with the DST rules
// pinned at fixed instants in two zones (no database, no clock): a nonexistent local time fires
// at the next valid instant, an ambiguous one once.

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());

function next(expression: string, tz: string, after: string, n: number): string[] {
  const c = CronExpression.parse(expression, tz);
  const out: string[] = [];
  let cursor = new Date(after);
  for (let i = 0; i < n; i++) {
    const d = c.nextAfter(cursor);
    if (d === null) break;
    out.push(d.toISOString());
    cursor = d;
  }
  return out;
}

describe('CronExpression (docs/design.md §29)', () => {
  it('answers UTC occurrences strictly after an instant, with or without a seconds field', () => {
    expect(next('0 3 * * *', 'UTC', '2026-01-01T00:00:00Z', 2)).toEqual([
      '2026-01-01T03:00:00.000Z',
      '2026-01-02T03:00:00.000Z',
    ]);
    // Strictly after: an instant on an occurrence answers the one after it.
    expect(next('0 3 * * *', 'UTC', '2026-01-01T03:00:00Z', 1)).toEqual([
      '2026-01-02T03:00:00.000Z',
    ]);
    expect(next('*/5 * * * * *', 'UTC', '2026-01-01T00:00:00.500Z', 2)).toEqual([
      '2026-01-01T00:00:05.000Z',
      '2026-01-01T00:00:10.000Z',
    ]);
    expect(next('@daily', 'UTC', '2026-01-01T12:00:00Z', 1)).toEqual(['2026-01-02T00:00:00.000Z']);
  });

  it('defaults to UTC', () => {
    expect(iso(CronExpression.parse('0 3 * * *').nextAfter(new Date('2026-06-01T00:00:00Z')))).toBe(
      '2026-06-01T03:00:00.000Z',
    );
  });

  describe('Europe/Berlin (CET ↔ CEST: 2026-03-29 02:00 → 03:00, 2026-10-25 03:00 → 02:00)', () => {
    it('spring forward: 02:30 does not exist and fires at the next valid instant, 03:00 CEST', () => {
      expect(next('30 2 * * *', 'Europe/Berlin', '2026-03-28T12:00:00Z', 3)).toEqual([
        '2026-03-29T01:00:00.000Z', // 03:00 CEST, the first instant after the gap
        '2026-03-30T00:30:00.000Z', // 02:30 CEST
        '2026-03-31T00:30:00.000Z',
      ]);
    });

    it('fall back: 02:30 happens twice and fires once, at its first instant (CEST)', () => {
      expect(next('30 2 * * *', 'Europe/Berlin', '2026-10-24T12:00:00Z', 3)).toEqual([
        '2026-10-25T00:30:00.000Z', // 02:30 CEST; 02:30 CET (01:30Z) does not fire
        '2026-10-26T01:30:00.000Z', // 02:30 CET
        '2026-10-27T01:30:00.000Z',
      ]);
      // A list of fixed times in the repeated hour: each once.
      expect(next('0,30 2 * * *', 'Europe/Berlin', '2026-10-24T23:00:00Z', 3)).toEqual([
        '2026-10-25T00:00:00.000Z',
        '2026-10-25T00:30:00.000Z',
        '2026-10-26T01:00:00.000Z',
      ]);
    });

    it('an interval expression follows elapsed time through the repeated hour', () => {
      expect(next('*/30 * * * *', 'Europe/Berlin', '2026-10-24T23:45:00Z', 5)).toEqual([
        '2026-10-25T00:00:00.000Z', // 02:00 CEST
        '2026-10-25T00:30:00.000Z', // 02:30 CEST
        '2026-10-25T01:00:00.000Z', // 02:00 CET
        '2026-10-25T01:30:00.000Z', // 02:30 CET
        '2026-10-25T02:00:00.000Z', // 03:00 CET
      ]);
    });
  });

  describe('America/New_York (EST ↔ EDT: 2026-03-08 02:00 → 03:00, 2026-11-01 02:00 → 01:00)', () => {
    it('spring forward: 02:30 does not exist and fires at 03:00 EDT', () => {
      expect(next('30 2 * * *', 'America/New_York', '2026-03-07T12:00:00Z', 2)).toEqual([
        '2026-03-08T07:00:00.000Z', // 03:00 EDT
        '2026-03-09T06:30:00.000Z', // 02:30 EDT
      ]);
    });

    it('fall back: 01:30 happens twice and fires once, at its first instant (EDT)', () => {
      expect(next('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z', 3)).toEqual([
        '2026-11-01T05:30:00.000Z', // 01:30 EDT; 01:30 EST (06:30Z) does not fire
        '2026-11-02T06:30:00.000Z', // 01:30 EST
        '2026-11-03T06:30:00.000Z',
      ]);
    });

    it('a time outside the transition keeps its local hour across it', () => {
      expect(next('0 9 * * *', 'America/New_York', '2026-03-07T00:00:00Z', 2)).toEqual([
        '2026-03-07T14:00:00.000Z', // 09:00 EST
        '2026-03-08T13:00:00.000Z', // 09:00 EDT
      ]);
    });
  });

  it('between() lists occurrences in a closed range, capped, and says when it was cut', () => {
    const c = CronExpression.parse('* * * * * *');
    const from = new Date('2026-01-01T00:00:00Z');
    const until = new Date('2026-01-01T00:00:04Z');
    expect(c.between(from, until, 10).instants.map(iso)).toEqual([
      '2026-01-01T00:00:00.000Z',
      '2026-01-01T00:00:01.000Z',
      '2026-01-01T00:00:02.000Z',
      '2026-01-01T00:00:03.000Z',
      '2026-01-01T00:00:04.000Z',
    ]);
    expect(c.between(from, until, 10).truncated).toBe(false);
    const cut = c.between(from, until, 3);
    expect(cut.instants).toHaveLength(3);
    expect(cut.truncated).toBe(true);
  });

  it('refuses a bad expression, a 7-field one, one that never fires and an unknown zone, naming which', () => {
    const fails = (expression: unknown, tz?: unknown): CronInputError => {
      try {
        CronExpression.parse(expression, tz);
      } catch (err) {
        if (err instanceof CronInputError) return err;
        throw err;
      }
      throw new Error(`parsed ${String(expression)}`);
    };
    expect(fails('bogus').field).toBe('cron');
    expect(fails('61 * * * *').field).toBe('cron');
    expect(fails('0 0 * * * * *').field).toBe('cron');
    expect(fails('0 0 31 2 *').problem).toMatch(/never fires/);
    expect(fails('').field).toBe('cron');
    expect(fails(42).field).toBe('cron');
    const zone = fails('0 3 * * *', 'Mars/Olympus_Mons');
    expect(zone.field).toBe('tz');
    expect(zone.problem).toContain('Mars/Olympus_Mons');
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('Nowhere/City')).toBe(false);
  });
});
