import { expectTypeOf } from 'expect-type';
import { z } from 'zod';

import {
  type DurableStepInterceptor,
  type EngineService,
  type FsmSchemas,
  InvalidInputError,
  type SchemaResult,
  type SchemaStepContext,
  type StandardSchemaV1,
  type StepContext,
} from '../../lib';
import { validateWithSchema } from '../../lib/fsm/schema-validation';
import { interceptedStep } from '../../lib/runtime/intercepted-step';

// docs/schemas.md, docs/interceptors.md. The type assertions are checked by `tsc --noEmit`
// (npm run lint), which type-checks test/; the runtime cases run here without a database.

const orderSchemas = {
  state: z.object({ sku: z.string(), qty: z.number().default(1) }),
  signals: {
    paid: z.object({ amount: z.number() }),
    cancelled: z.object({ reason: z.string() }),
  },
  result: z.object({ total: z.number() }),
} satisfies FsmSchemas;

class OrderFsm {
  declare readonly '~schemas'?: typeof orderSchemas;
}

class PlainFsm {}

/** Never called: its body is what tsc checks. */
function typeChecks(engine: EngineService, ctx: SchemaStepContext<typeof orderSchemas>): void {
  expectTypeOf(ctx.state).toEqualTypeOf<{ sku: string; qty: number }>();
  expectTypeOf<SchemaResult<typeof orderSchemas>>().toEqualTypeOf<{ total: number }>();
  const signal = ctx.awaited[0]!;
  if (signal.name === 'paid') expectTypeOf(signal.payload).toEqualTypeOf<{ amount: number }>();
  else expectTypeOf(signal.payload).toEqualTypeOf<{ reason: string }>();
  expectTypeOf<SchemaStepContext<{ state: z.ZodObject<{ n: z.ZodNumber }> }>['awaited']>()
    .items.toHaveProperty('payload')
    .toBeUnknown();

  void engine.signal(OrderFsm, { id: '1' }, 'paid', { amount: 5 });
  // @ts-expect-error the payload of `paid` is { amount: number }
  void engine.signal(OrderFsm, { id: '1' }, 'paid', { amount: 'five' });
  // @ts-expect-error `refunded` is no declared signal of OrderFsm
  void engine.signal(OrderFsm, { id: '1' }, 'refunded', {});
  void engine.signal({ id: '1' }, 'anything', { free: true });

  void engine.insert(OrderFsm, { state: { sku: 'a' } });
  // @ts-expect-error `sku` is required by the state schema
  void engine.insert(OrderFsm, { state: { qty: 2 } });
  void engine.insert(PlainFsm, { state: { whatever: 1 } });
  void engine.insert('order', { state: { whatever: 1 } });
}

describe('typed schemas', () => {
  it('the type checks compile (tsc) and are a function here', () => {
    expect(typeof typeChecks).toBe('function');
  });

  it('answers the output and names the first issue path with every message', () => {
    expect(validateWithSchema(orderSchemas.state, { sku: 'a' }, 'insert.state')).toEqual({
      sku: 'a',
      qty: 1,
    });
    const items = z.object({ lines: z.array(z.object({ n: z.number() })), tag: z.string() });
    let caught: unknown;
    try {
      validateWithSchema(items, { lines: [{ n: 1 }, { n: 'x' }] }, 'signal.payload');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(InvalidInputError);
    const err = caught as InvalidInputError;
    expect(err.path).toBe('signal.payload.lines[1].n');
    expect(err.message).toMatch(
      /^invalid signal\.payload\.lines\[1\]\.n: .+; signal\.payload\.tag: .+$/,
    );
  });

  it('a schema answering a promise gives a promise', async () => {
    const slow: StandardSchemaV1<unknown, { ok: true }> = {
      '~standard': {
        version: 1,
        vendor: 'test',
        validate: (value) =>
          Promise.resolve(
            value === 'yes' ? { value: { ok: true } } : { issues: [{ message: 'say yes' }] },
          ),
      },
    };
    await expect(validateWithSchema(slow, 'yes', 'insert.state')).resolves.toEqual({ ok: true });
    await expect(validateWithSchema(slow, 'no', 'insert.state')).rejects.toThrow(
      'invalid insert.state: say yes',
    );
  });
});

describe('interceptedStep', () => {
  const ctx = { step: 's' } as StepContext<unknown>;
  const logging = (log: string[], label: string): DurableStepInterceptor => ({
    async intercept(_ctx, proceed) {
      log.push(`${label}>`);
      const value = await proceed();
      log.push(`${label}<`);
      return value;
    },
  });

  it('runs the first outermost and answers the step value', async () => {
    const log: string[] = [];
    const value = await interceptedStep([logging(log, 'a'), logging(log, 'b')], () => 42, ctx);
    expect(value).toBe(42);
    expect(log).toEqual(['a>', 'b>', 'b<', 'a<']);
  });

  it('turns a synchronous throw of an interceptor or the step into a rejection', async () => {
    const boom = new Error('boom');
    const throwing: DurableStepInterceptor = {
      intercept() {
        throw boom;
      },
    };
    const rejected = interceptedStep([throwing], () => 1, ctx);
    await expect(rejected).rejects.toBe(boom);
    const stepThrows = interceptedStep(
      [logging([], 'a')],
      () => {
        throw boom;
      },
      ctx,
    );
    await expect(stepThrows).rejects.toBe(boom);
  });
});
