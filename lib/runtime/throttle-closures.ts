import { InvalidInputError } from '../errors/invalid-input.error';
import { type LimitKey, limitKeyText, limitName } from '../fsm/limit-key';
import { MAX_DELAY_MS } from '../fsm/outcome';
import type { LimitClosure } from '../limiter/limiter.interface';
import type { ResolvedOptions } from '../options/resolved-options';
import type { ClaimedRow } from './claimed-row';

type LimitOptions = Pick<ResolvedOptions, 'rateLimits' | 'concurrencyLimits'>;

/**
 * The limits a `throttle({ limit, key, retryAfterMs })` outcome closes (docs/design.md §16.5).
 * Each name must be configured — `limit` a rate limit, `key` a concurrency limit — or the
 * outcome is refused with an `InvalidInputError` naming it (routed to `onError` like any
 * invalid outcome).
 */
export function throttleClosures(
  options: LimitOptions,
  limit: LimitKey | undefined,
  key: LimitKey | undefined,
  ms: number,
): LimitClosure[] {
  const closes: LimitClosure[] = [];
  if (limit !== undefined) {
    const text = limitKeyText(limit, 'throttle.limit');
    if (options.rateLimits[limitName(text)] === undefined) {
      throw new InvalidInputError(
        'throttle.limit',
        `"${limitName(text)}" is not a configured rate limit (rateLimits)`,
      );
    }
    closes.push({ kind: 'rate', key: text, ms });
  }
  if (key !== undefined) {
    const text = limitKeyText(key, 'throttle.key');
    if (options.concurrencyLimits[limitName(text)] === undefined) {
      throw new InvalidInputError(
        'throttle.key',
        `"${limitName(text)}" is not a configured concurrency limit (concurrencyLimits)`,
      );
    }
    closes.push({ kind: 'conc', key: text, ms });
  }
  return closes;
}

/**
 * A thrown error's back-off (docs/jobs.md, "Backing off on 429"): its own numeric
 * `retryAfterMs` property, finite and ≥ 0, rounded up to whole ms within 1 … MAX_DELAY_MS;
 * undefined when it has none (the throw goes to `onError` as usual).
 */
export function thrownRetryAfterMs(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null || !('retryAfterMs' in err)) return undefined;
  const ms = err.retryAfterMs;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) return undefined;
  return Math.min(MAX_DELAY_MS, Math.max(1, Math.ceil(ms)));
}

/**
 * What a thrown `retryAfterMs` closes: the row's own rate limit, and its concurrency key when
 * that names a configured concurrency limit (an unconfigured key is K = 1, settled by the
 * claim, docs/design.md §16.1); unknown names are skipped (such a row is never admitted anyway).
 */
export function rowClosures(row: ClaimedRow, options: LimitOptions, ms: number): LimitClosure[] {
  const closes: LimitClosure[] = [];
  if (row.rateLimit !== null && options.rateLimits[limitName(row.rateLimit)] !== undefined) {
    closes.push({ kind: 'rate', key: row.rateLimit, ms });
  }
  const ck = row.concurrencyKey;
  if (ck !== null && options.concurrencyLimits[limitName(ck)] !== undefined) {
    closes.push({ kind: 'conc', key: ck, ms });
  }
  return closes;
}
