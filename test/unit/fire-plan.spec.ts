import { CronExpression } from '../../lib/cron/cron-expression';
import { MAX_COUNTED_OCCURRENCES, planFire } from '../../lib/cron/fire-plan';

// docs/design.md §29 "missed": what one tick fires for a due schedule, at fixed instants (no
// database, no clock).

const hourly = CronExpression.parse('0 * * * *');
const at = (iso: string) => new Date(iso);
const fires = (plan: ReturnType<typeof planFire>) =>
  plan.fires.map((f) => [f.at.toISOString(), f.missed]);

describe('planFire (docs/design.md §29)', () => {
  it('an on-time occurrence fires alone and the next fire is the following occurrence', () => {
    const plan = planFire(
      hourly,
      at('2026-01-01T10:00:00Z'),
      at('2026-01-01T10:00:00.400Z'),
      'skip',
      10,
      1000,
    );
    expect(fires(plan)).toEqual([['2026-01-01T10:00:00.000Z', 0]]);
    expect(plan.missed).toBe(0);
    expect(plan.next).toEqual(at('2026-01-01T11:00:00Z'));
  });

  it('nothing due (next fire still ahead) fires nothing', () => {
    const plan = planFire(
      hourly,
      at('2026-01-01T10:00:00Z'),
      at('2026-01-01T09:59:59Z'),
      'all',
      10,
      1000,
    );
    expect(plan.fires).toEqual([]);
    expect(plan.next).toEqual(at('2026-01-01T10:00:00Z'));
  });

  describe('after 3 missed occurrences and one on time', () => {
    const expected = at('2026-01-01T07:00:00Z');
    const now = at('2026-01-01T10:00:00.500Z');
    it('skip fires the on-time one only', () => {
      const plan = planFire(hourly, expected, now, 'skip', 10, 1000);
      expect(fires(plan)).toEqual([['2026-01-01T10:00:00.000Z', 0]]);
      expect(plan.missed).toBe(3);
    });
    it('once adds one catch-up for the latest missed, counting 3', () => {
      expect(fires(planFire(hourly, expected, now, 'once', 10, 1000))).toEqual([
        ['2026-01-01T09:00:00.000Z', 3],
        ['2026-01-01T10:00:00.000Z', 0],
      ]);
    });
    it('all fires each, capped by maxCatchup (the first fired counting the dropped)', () => {
      expect(fires(planFire(hourly, expected, now, 'all', 10, 1000))).toEqual([
        ['2026-01-01T07:00:00.000Z', 0],
        ['2026-01-01T08:00:00.000Z', 0],
        ['2026-01-01T09:00:00.000Z', 0],
        ['2026-01-01T10:00:00.000Z', 0],
      ]);
      expect(fires(planFire(hourly, expected, now, 'all', 1, 1000))).toEqual([
        ['2026-01-01T09:00:00.000Z', 2],
        ['2026-01-01T10:00:00.000Z', 0],
      ]);
    });
    it('a zero grace makes the last one missed too', () => {
      const plan = planFire(hourly, expected, now, 'skip', 10, 0);
      expect(plan.fires).toEqual([]);
      expect(plan.missed).toBe(4);
    });
  });

  it('a gap past the counting cap reports the cap and still fires the latest', () => {
    const everySecond = CronExpression.parse('* * * * * *');
    const plan = planFire(
      everySecond,
      at('2026-01-01T00:00:00Z'),
      at('2026-01-02T00:00:00.200Z'),
      'once',
      10,
      500,
    );
    expect(plan.missed).toBe(MAX_COUNTED_OCCURRENCES);
    expect(fires(plan)).toEqual([
      ['2026-01-01T23:59:59.000Z', MAX_COUNTED_OCCURRENCES],
      ['2026-01-02T00:00:00.000Z', 0],
    ]);
  });
});
