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
  pickBatch(_queue: string, batch: number): Promise<{ rows: ClaimedRow[]; paused: boolean }> {
    this.batches.push(batch);
    return Promise.resolve({ rows: [], paused: false });
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

  function pokeWith(state: { holding: boolean; demand: number }): CountingPicker {
    const picker = new CountingPicker();
    const loop = new ClaimLoop(
      fairHost(state),
      picker as unknown as Picker,
      options,
      new Telemetry('t'),
    );
    loop.poke();
    return picker;
  }

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
