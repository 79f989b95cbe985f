import {
  awaitSignal,
  done,
  DurableFsm,
  InvalidInputError,
  Step,
  type StepContext,
  type Target,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// A target (docs/design.md §2.5) is a bare id (string or bigint), { id } or { correlationKey }
// for get, await, signal and the testing assertions; any other shape is InvalidInputError
// naming the argument — never a TypeError from inside the engine.

@DurableFsm({ name: 'parcel', queue: 'targets' })
class ParcelFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('picked', 'deliver', ctx.state);
  }
  @Step() deliver(ctx: StepContext) {
    return done({ by: ctx.awaited[0]?.payload });
  }
}

describe('targets: a bare id, { id } or { correlationKey }', () => {
  let db: TestDatabase;
  let h: Harness;
  let gd: GenDurableTesting;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [ParcelFsm], { queues: {}, reaper: false, gc: false, poke: 'none' });
    gd = GenDurableTesting.forEngine(h.engine);
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('get, await, signal and the assertions take every accepted shape', async () => {
    const id = await h.engine.insert(ParcelFsm, { correlationKey: 'parcel-1' });
    await gd.drain();
    const shapes: Target[] = [
      id,
      BigInt(id),
      { id },
      { id: BigInt(id) },
      { correlationKey: 'parcel-1' },
    ];
    for (const target of shapes) {
      expect((await h.engine.get(target))?.id).toBe(id);
      expect(await h.engine.await(target, { timeout: 0 })).toMatchObject({ kind: 'awaiting' });
      expect((await gd.assertAwaiting(target, 'picked')).id).toBe(id);
      expect((await gd.assertStatus(target, 'awaiting_signal')).id).toBe(id);
    }
    await h.engine.signal(id, 'picked', 'ada');
    await h.engine.signal(BigInt(id), 'picked', 'bob', { dedupKey: 'second' });
    await gd.drain();
    expect(await h.engine.await(id, { timeout: 0 })).toEqual({
      kind: 'done',
      result: { by: 'ada' },
    });
    await gd.assertDone(id, { by: 'ada' });
    await gd.assertDone(BigInt(id));
    await gd.assertDone({ correlationKey: 'parcel-1' });
    // A freed key: get finds the ended instance that carried it, await answers its outcome
    // (docs/identity.md "Finding an instance by key"); a key nobody carried finds nothing.
    expect((await h.engine.get({ correlationKey: 'parcel-1' }))?.id).toBe(id);
    expect(await h.engine.await({ correlationKey: 'parcel-1' }, { timeout: 0 })).toEqual({
      kind: 'done',
      result: { by: 'ada' },
    });
    expect(await h.engine.get({ correlationKey: 'parcel-2' })).toBeNull();
    expect(await h.engine.await({ correlationKey: 'parcel-2' }, { timeout: 0 })).toEqual({
      kind: 'not_found',
    });
  });

  it.each([
    ['a number', 42, 'number 42'],
    ['null', null, 'null'],
    ['an empty object', {}, 'an object with keys \\[\\]'],
    ['both keys', { id: '1', correlationKey: 'k' }, 'an object with keys \\[id, correlationKey\\]'],
    ['a foreign key', { key: 'k' }, 'an object with keys \\[key\\]'],
    ['an array', ['1'], 'an array'],
  ])('%s is InvalidInputError naming the argument', async (_label, target, shown) => {
    const bad = target as unknown as Target;
    const calls: [string, () => Promise<unknown>][] = [
      ['get.target', () => h.engine.get(bad)],
      ['await.target', () => h.engine.await(bad, { timeout: 0 })],
      ['signal.target', () => h.engine.signal(bad, 'picked')],
      ['target', () => gd.assertDone(bad)],
      ['target', () => gd.get(bad)],
    ];
    for (const [path, call] of calls) {
      const err: unknown = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).path).toBe(path);
      expect((err as Error).message).toMatch(new RegExp(`got ${shown}$`));
    }
  });

  it('a malformed id or key names the field', async () => {
    const cases: [Target, string][] = [
      ['abc', 'get.target'],
      ['0', 'get.target'],
      [-1n, 'get.target'],
      [{ id: 'x' }, 'get.target.id'],
      [{ correlationKey: '' }, 'get.target.correlationKey'],
    ];
    for (const [target, path] of cases) {
      await expect(h.engine.get(target)).rejects.toMatchObject({ path });
      await expect(h.engine.get(target)).rejects.toBeInstanceOf(InvalidInputError);
    }
  });
});
