import {
  Body,
  ForbiddenException,
  GoneException,
  HttpCode,
  Inject,
  Param,
  PayloadTooLargeException,
  BadRequestException,
  Post,
} from '@nestjs/common';

import type { EngineService } from '../engine/engine.service';
import { CallbackTokenError } from '../errors/callback-token.error';
import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { PayloadTooLargeError } from '../errors/payload-too-large.error';

/** The injection token of the engine a callbacks mount delivers through. */
export const CALLBACKS_ENGINE = Symbol('GenDurableCallbacksEngine');

/**
 * `POST <path>/:token` (docs/callbacks.md): the JSON body is delivered as the token's signal,
 * once. 200 `{ delivered: true, duplicate }`; 403 for a token this engine did not sign; 410 for
 * an expired or used token, or an instance that ended; 400 / 413 for a body the engine refuses.
 * Mounted at its path by `GenDurableCallbacksModule.register`.
 */
export class CallbacksController {
  constructor(@Inject(CALLBACKS_ENGINE) private readonly engine: EngineService) {}

  @Post(':token')
  @HttpCode(200)
  async deliver(
    @Param('token') token: string,
    @Body() body: unknown,
  ): Promise<{ delivered: true; duplicate: boolean }> {
    try {
      const { duplicate } = await this.engine.deliverCallback(token, body ?? {});
      return { delivered: true, duplicate };
    } catch (err) {
      if (err instanceof CallbackTokenError) {
        if (err.reason === 'invalid') throw new ForbiddenException(err.message);
        throw new GoneException(err.message);
      }
      if (err instanceof NoTargetError) throw new GoneException(err.message);
      if (err instanceof PayloadTooLargeError) throw new PayloadTooLargeException(err.message);
      if (err instanceof InvalidInputError) throw new BadRequestException(err.message);
      throw err;
    }
  }
}
