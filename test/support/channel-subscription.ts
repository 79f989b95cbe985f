import { channel, type Channel } from 'node:diagnostics_channel';

/**
 * Subscribes `onMessage` to each named diagnostics channel so that the subscription survives a
 * race in Node 20's channel registry.
 *
 * The registry holds channels weakly and removes a collected channel's entry from a
 * FinalizationRegistry callback. When an earlier test file in the same Jest worker created a
 * channel that has since been collected but not yet finalized, `subscribe(name)` makes a new
 * channel, and the late finalizer then deletes the entry for the new one: the engine's next
 * `channel(name)` makes a third object with no subscribers and every event is lost (a CI flake).
 *
 * So: subscribe, give pending finalizers a few turns of the event loop to run, and subscribe
 * again on whatever channel the registry answers now, until the registry answers the channel
 * that holds our subscription. A subscribed channel is held strongly, so once stable it stays.
 */
export async function subscribeChannels(
  names: readonly string[],
  onMessage: (message: unknown, name: string | symbol) => void,
): Promise<{ unsubscribe(): void }> {
  const subscribed = new Set<Channel>();
  const settle = () => new Promise<void>((resolve) => setTimeout(resolve, 10));
  for (let round = 0; round < 50; round++) {
    let changed = false;
    for (const name of names) {
      const current = channel(name);
      if (!subscribed.has(current)) {
        current.subscribe(onMessage);
        subscribed.add(current);
        changed = true;
      }
    }
    await settle();
    if (!changed && names.every((name) => subscribed.has(channel(name)))) break;
  }
  return {
    unsubscribe() {
      for (const ch of subscribed) ch.unsubscribe(onMessage);
      subscribed.clear();
    },
  };
}
