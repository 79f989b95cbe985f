import { GenDurableError } from './gen-durable.error';

/** Why a callback token was refused. */
export type CallbackTokenRefusal = 'invalid' | 'expired' | 'used';

/**
 * A signed callback token (docs/callbacks.md) was refused: `invalid` (malformed, or not signed
 * with this engine's secret), `expired` (past its `ttlMs`) or `used` (a single-use token already
 * delivered). Nothing was delivered.
 */
export class CallbackTokenError extends GenDurableError {
  readonly code = 'GD_CALLBACK_TOKEN';
  constructor(readonly reason: CallbackTokenRefusal) {
    super(
      reason === 'invalid'
        ? 'callback token is malformed or not signed by this engine: nothing was delivered'
        : reason === 'expired'
          ? 'callback token has expired: nothing was delivered'
          : 'callback token was already used: nothing was delivered',
    );
  }
}
