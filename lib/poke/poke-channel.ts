import { randomBytes } from 'node:crypto';

/**
 * The sender token of one running engine: `<nodeId>-<8 hex>`, like a worker id's node part.
 * NOTE: a sender named by `nodeId` alone would not do: `nodeId` defaults to the hostname
 * (docs/design.md §26.2), so two processes on one host would then ignore each other's pokes and fall back to
 * their polls. The per-engine suffix keeps "ignore your own pokes" exact. `|` (the payload
 * separator) is replaced so the first `|` always ends the token.
 */
export function pokeSenderToken(nodeId: string): string {
  return `${nodeId.replace(/\|/g, '_')}-${randomBytes(4).toString('hex')}`;
}

/** The payload of one announcement: `<sender>|<queue>`. */
export function pokePayload(sender: string, queue: string): string {
  return `${sender}|${queue}`;
}

/** Splits a payload; null for anything malformed (another writer on the channel). */
export function parsePokePayload(payload: string): { sender: string; queue: string } | null {
  const bar = payload.indexOf('|');
  if (bar <= 0 || bar === payload.length - 1) return null;
  return { sender: payload.slice(0, bar), queue: payload.slice(bar + 1) };
}
