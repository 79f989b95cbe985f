import type { ResolvedOptions } from '../../lib/options/resolved-options';
import { type ClaimHost, ClaimLoop } from '../../lib/runtime/claim-loop';
import type { ClaimedRow } from '../../lib/runtime/claimed-row';
import type { Picker } from '../../lib/runtime/picker';
import { Telemetry } from '../../lib/telemetry/telemetry';

// A poke on a fair queue (docs/many-tenants.md "Prefetch on a fair queue"): a busy queue whose
// refill is not due claims only its poke reserve, a small claim that answers sooner; an idle
// queue, or one whose refill is due anyway, claims its whole demand with the reserve.

class CountingPicker {
  readonly batches: number[] = [];
  /** The next claim stays in flight until `release` is called. */
  holdNext = false;
  release: (() => void) | undefined;
  async pickBatch(_queue: string, batch: number): Promise<{ rows: ClaimedRow[]; paused: boolean }> {
    this.batches.push(batch);
    if (this.holdNext) {
      this.holdNext = false;
      await new Promise<void>((resolve) => (this.release = resolve));
    }
    return { rows: [], paused: false };
  }
}

function fairHost(state: { holding: boolean; demand: number }): ClaimHost {
  return {
    queue: 'q',
    workerId: 'w',
    isRunning: () => true,
    demand: () => state.demand,
    capacity: () => 200,
    pokeReserve: () => 20,
    minDemand: () => 100,
    idle: () => !state.holding,
    holding: () => state.holding,
    paused: false,
    learnPause: () => Promise.resolve(),
    touched: () => undefined,
    accept: () => Promise.resolve(true),
    ticked: () => Promise.resolve(),
    refillDue: () => state.demand >= 100,
  };
}

async function settle(): Promise<void> {
  for (let k = 0; k < 10; k++) await Promise.resolve();
}

describe('ClaimLoop: a poke on a fair queue', () => {
  const options = { pollInterval: 1_000_000, maxPollInterval: 1_000_000 } as ResolvedOptions;

  function loopOf(picker: CountingPicker, state: { holding: boolean; demand: number }): ClaimLoop {
    return new ClaimLoop(fairHost(state), picker as unknown as Picker, options, new Telemetry('t'));
  }

  function pokeWith(state: { holding: boolean; demand: number }): CountingPicker {
    const picker = new CountingPicker();
    loopOf(picker, state).poke();
    return picker;
  }

  it('a poke owed while a poke claim is in flight takes no more than the room that claim left', async () => {
    const picker = new CountingPicker();
    picker.holdNext = true;
    const loop = loopOf(picker, { holding: true, demand: 5 });
    loop.poke(); // a poke claim of the reserve, held in flight
    await settle();
    loop.poke(); // owed: the poke claim is in flight
    loop.scheduleRefill();
    await new Promise((resolve) => setImmediate(resolve));
    await settle();
    // demand 5 + reserve 20 − 20 in flight: 5, not a second reserve of 20.
    expect(picker.batches).toEqual([20, 5]);
    picker.release?.();
    await settle();
  });

  it('a busy queue whose refill is not due claims only the reserve', async () => {
    const picker = pokeWith({ holding: true, demand: 30 });
    await settle();
    expect(picker.batches).toEqual([20]);
  });

  it('an idle queue claims its demand and the reserve', async () => {
    const picker = pokeWith({ holding: false, demand: 30 });
    await settle();
    expect(picker.batches).toEqual([50]);
  });

  it('a busy queue whose refill is due claims its demand and the reserve', async () => {
    const picker = pokeWith({ holding: true, demand: 120 });
    await settle();
    expect(picker.batches).toEqual([140]);
  });
});
