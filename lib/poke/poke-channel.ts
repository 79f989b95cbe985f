import { randomBytes } from 'node:crypto';

import type { FinishedAnnouncement, FinishedStatus } from '../fsm/durable-event';

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

/**
 * Announcements of ended instances share the poke channel: `|finished|<sender>|<JSON array of
 * [id, fsm, step, status]>`. The leading `|` makes an empty sender, which `parsePokePayload`
 * refuses, so a node that does not know this message ignores it.
 */
const FINISHED_PREFIX = '|finished|';

/** Largest payload one announcement carries, bytes (NOTIFY's limit is 8 000). */
const MAX_FINISHED_PAYLOAD_BYTES = 7_000;

/** The payloads announcing `ended` from `sender`, split to stay under the size limit. */
export function finishedPayloads(sender: string, ended: readonly FinishedAnnouncement[]): string[] {
  const payloads: string[] = [];
  const head = `${FINISHED_PREFIX}${sender}|`;
  let batch: string[] = [];
  let bytes = Buffer.byteLength(head) + 2;
  for (const f of ended) {
    const item = JSON.stringify([f.id, f.fsm, f.step, f.status]);
    const size = Buffer.byteLength(item) + 1;
    if (batch.length > 0 && bytes + size > MAX_FINISHED_PAYLOAD_BYTES) {
      payloads.push(`${head}[${batch.join(',')}]`);
      batch = [];
      bytes = Buffer.byteLength(head) + 2;
    }
    batch.push(item);
    bytes += size;
  }
  if (batch.length > 0) payloads.push(`${head}[${batch.join(',')}]`);
  return payloads;
}

const STATUSES: readonly string[] = ['done', 'failed', 'cancelled'];

/** The sender and endings of a finished announcement; null for any other payload or a malformed one. */
export function parseFinishedPayload(
  payload: string,
): { sender: string; ended: FinishedAnnouncement[] } | null {
  if (!payload.startsWith(FINISHED_PREFIX)) return null;
  const rest = payload.slice(FINISHED_PREFIX.length);
  const bar = rest.indexOf('|');
  if (bar <= 0) return null;
  let items: unknown;
  try {
    items = JSON.parse(rest.slice(bar + 1));
  } catch {
    return null;
  }
  if (!Array.isArray(items)) return null;
  const ended: FinishedAnnouncement[] = [];
  for (const item of items as unknown[]) {
    if (
      !Array.isArray(item) ||
      item.length !== 4 ||
      !item.every((v) => typeof v === 'string') ||
      !STATUSES.includes(item[3] as string)
    ) {
      return null;
    }
    const [id, fsm, step, status] = item as [string, string, string, FinishedStatus];
    ended.push({ id, fsm, step, status });
  }
  return { sender: rest.slice(0, bar), ended };
}
