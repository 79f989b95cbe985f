import { DurableFsm, done, Step } from '../../lib';
import { postgresPokeChannel } from '../../lib/db/engine-namespace';
import { pokePayload } from '../../lib/poke/poke-channel';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §34: the NOTIFY channel names the schema, so an app on another schema of the same
// database (with the same engine name) never pokes this one.

@DurableFsm({ name: 'notify-ns', queue: 'nq' })
class NotifyNsJob {
  @Step() start() {
    return done({});
  }
}

describe('NOTIFY channel per schema (docs/design.md §34)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [NotifyNsJob], {
      poke: 'postgres',
      queues: { nq: 1, sentinel: 1 },
      pollInterval: 60_000,
      maxPollInterval: 60_000,
      reaper: false,
      gc: false,
    });
    await h.waitFor('scheduler:saturation');
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  /** Announces `queue` on `channel`, then `sentinel` on this engine's channel; was `nq` poked? */
  async function pokedBy(channel: string): Promise<boolean> {
    const schedulers = h.engine.runtime.schedulers;
    let poked = false;
    let sentinelPoked!: () => void;
    const sentinel = new Promise<void>((resolve) => (sentinelPoked = resolve));
    const nq = jest.spyOn(schedulers.get('nq')!, 'poke').mockImplementation(() => {
      poked = true;
    });
    const sp = jest.spyOn(schedulers.get('sentinel')!, 'poke').mockImplementation(() => {
      sentinelPoked();
    });
    try {
      // One session, two autocommits: notifications arrive in commit order.
      const client = await db.pool.connect();
      try {
        await client.query('SELECT pg_notify($1, $2)', [channel, pokePayload('other-0000', 'nq')]);
        await client.query('SELECT pg_notify($1, $2)', [
          postgresPokeChannel('GenDurable', 'public'),
          pokePayload('other-0000', 'sentinel'),
        ]);
      } finally {
        client.release();
      }
      await sentinel;
      return poked;
    } finally {
      nq.mockRestore();
      sp.mockRestore();
    }
  }

  it('hears an engine of the same name on its own schema, not one on another schema', async () => {
    expect(h.engine.runtime.pokeTransport?.listening).toBe(true);
    expect(await pokedBy(postgresPokeChannel('GenDurable', 'public'))).toBe(true);
    expect(await pokedBy(postgresPokeChannel('GenDurable', 'jobs'))).toBe(false);
    // The old channel, shared by every schema: no longer listened to.
    expect(await pokedBy('gen_durable:GenDurable:poke')).toBe(false);
  });
});
