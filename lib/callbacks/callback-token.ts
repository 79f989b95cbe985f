import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

import { CallbackTokenError } from '../errors/callback-token.error';

/** What a callback token carries, signed: whom to signal, with what, until when, how often. */
export interface CallbackClaims {
  /** The instance's id (a key target is resolved to its instance when the URL is made). */
  readonly id: string;
  readonly signal: string;
  /** Expiry, ms since the epoch. */
  readonly expiresAt: number;
  /** Single use: a second delivery is refused as `used`. */
  readonly once: boolean;
  /** Random, unique per token: the delivered signal's dedup key is derived from it. */
  readonly nonce: string;
}

const encode = (buf: Buffer): string => buf.toString('base64url');

function mac(secret: string, body: string): Buffer {
  return createHmac('sha256', secret).update(body).digest();
}

/** A fresh token for `claims` (nonce added): `<base64url JSON>.<base64url HMAC-SHA256>`. */
export function signCallbackToken(
  secret: string,
  claims: Omit<CallbackClaims, 'nonce'>,
): { token: string; nonce: string } {
  const nonce = encode(randomBytes(12));
  const body = encode(
    Buffer.from(
      JSON.stringify([claims.id, claims.signal, claims.expiresAt, claims.once ? 1 : 0, nonce]),
    ),
  );
  return { token: `${body}.${encode(mac(secret, body))}`, nonce };
}

/**
 * The claims of `token` if this `secret` signed it and it has not expired at `now`;
 * `CallbackTokenError` (`invalid`, `expired`) otherwise. The signature is compared in constant time.
 */
export function verifyCallbackToken(secret: string, token: string, now: number): CallbackClaims {
  const dot = token.indexOf('.');
  if (dot <= 0 || dot !== token.lastIndexOf('.')) throw new CallbackTokenError('invalid');
  const body = token.slice(0, dot);
  const given = Buffer.from(token.slice(dot + 1), 'base64url');
  const expected = mac(secret, body);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new CallbackTokenError('invalid');
  }
  let fields: unknown;
  try {
    fields = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    throw new CallbackTokenError('invalid');
  }
  if (
    !Array.isArray(fields) ||
    fields.length !== 5 ||
    typeof fields[0] !== 'string' ||
    typeof fields[1] !== 'string' ||
    typeof fields[2] !== 'number' ||
    typeof fields[4] !== 'string'
  ) {
    throw new CallbackTokenError('invalid');
  }
  const [id, signal, expiresAt, once, nonce] = fields as [string, string, number, number, string];
  if (now >= expiresAt) throw new CallbackTokenError('expired');
  return { id, signal, expiresAt, once: once === 1, nonce };
}

/** The dedup key a token's delivery is stored under: a retried POST is the duplicate it is. */
export function callbackDedupKey(nonce: string): string {
  return `callback:${nonce}`;
}
