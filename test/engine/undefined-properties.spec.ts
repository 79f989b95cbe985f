import {
  awaitSignal,
  done,
  DurableFsm,
  InvalidInputError,
  next,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §26.8: an object property whose value is `undefined` is stored as absent, as JSON
// writes it (`{ a: body.a }` with `a` unset), in insert states, signal payloads, `next` states,
// results and progress; `undefined` where JSON would change the value (an array element, the
// whole value) is still refused with InvalidInputError naming the path.

interface Body {
  note?: string;
  coupon?: string;
}
const body: Body = { note: 'leave at the door' };

/** Holds `start` after its progress report until the test has read it. */
let releaseStart: () => void = () => undefined;
const startHeld = new Promise<void>((resolve) => (releaseStart = resolve));

@DurableFsm({ name: 'optional-fields' })
class OptionalFieldsFsm {
  @Step() async start(ctx: StepContext<{ note?: string; coupon?: string }>) {
    ctx.progress({ done: 1, of: undefined });
    await startHeld;
    return next('wait', { ...ctx.state, seen: ctx.state.coupon });
  }
  @Step() wait(ctx: StepContext) {
    return awaitSignal('paid', 'finish', ctx.state);
  }
  @Step() finish(ctx: StepContext) {
    return done({ paid: ctx.awaited.map((s) => s.payload), refund: undefined });
  }
}

describe('undefined object properties are stored absent (docs/design.md §26.8)', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [OptionalFieldsFsm]);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('insert, next, signal, progress and done drop undefined properties; the stored JSON has no such key', async () => {
    const id = await t.engine.insert(OptionalFieldsFsm, {
      state: { note: body.note, coupon: body.coupon, nested: { a: 1, b: undefined } },
    });
    const inserted = await db.pool.query<{ state: string; has_coupon: boolean }>(
      `SELECT state::text AS state, state ? 'coupon' AS has_coupon FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(inserted.rows[0]).toEqual({
      state: '{"note": "leave at the door", "nested": {"a": 1}}',
      has_coupon: false,
    });

    await eventually(async () => {
      const { rows } = await db.pool.query<{ progress: string | null }>(
        `SELECT (progress -> 'value')::text AS progress FROM gen_durable WHERE id = $1`,
        [id],
      );
      return rows[0]?.progress === '{"done": 1}';
    });
    releaseStart();
    expect(await t.engine.await(id)).toMatchObject({
      kind: 'awaiting',
      snapshot: { status: 'awaiting_signal', step: 'finish' },
    });
    const parked = await db.pool.query<{ state: string }>(
      `SELECT state::text AS state FROM gen_durable WHERE id = $1`,
      [id],
    );
    // `seen: ctx.state.coupon` was undefined: absent from the next state too.
    expect(parked.rows[0]?.state).toBe('{"note": "leave at the door", "nested": {"a": 1}}');

    await t.engine.signal({ id }, 'paid', { amount: 100, voucher: undefined });
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { paid: [{ amount: 100 }] },
    });
    const finished = await db.pool.query<{ result: string; has_refund: boolean }>(
      `SELECT result::text AS result, result ? 'refund' AS has_refund FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(finished.rows[0]).toEqual({ result: '{"paid": [{"amount": 100}]}', has_refund: false });
  });

  it('undefined where JSON would change the value is still refused, naming the path', async () => {
    const refused = async (run: () => Promise<unknown>): Promise<InvalidInputError> => {
      const error = await run().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InvalidInputError);
      return error as InvalidInputError;
    };
    // JSON would write null for an array's undefined element.
    const inArray = await refused(() =>
      t.engine.insert(OptionalFieldsFsm, { state: { list: [1, undefined, 3] } }),
    );
    expect(inArray.path).toBe('insert.state.list[1]');
    expect(inArray.message).toMatch(/is undefined, which JSON would store as null/);
    // Functions and symbols are still refused as property values.
    const fn = await refused(() =>
      t.engine.insert(OptionalFieldsFsm, { state: { callback: () => 1 } }),
    );
    expect(fn.path).toBe('insert.state.callback');
    const id = await t.engine.insert(OptionalFieldsFsm);
    const whole = await refused(() => t.engine.signal({ id }, 'paid', [undefined]));
    expect(whole.path).toBe('signal.payload[0]');
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM gen_durable WHERE state ? 'list' OR state ? 'callback'`,
    );
    expect(rows[0]).toEqual({ n: 0 });
  });
});
