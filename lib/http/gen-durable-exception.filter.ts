import { type ArgumentsHost, Catch, type ExceptionFilter, HttpStatus } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';

import { DuplicateError } from '../errors/duplicate.error';
import type { GenDurableError } from '../errors/gen-durable.error';
import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { PayloadTooLargeError } from '../errors/payload-too-large.error';
import { UnknownStepError } from '../errors/unknown-step.error';

/** The HTTP status of each error class this filter answers for. */
const STATUS_OF = new Map<abstract new (...args: never[]) => GenDurableError, HttpStatus>([
  [NoTargetError, HttpStatus.NOT_FOUND],
  [DuplicateError, HttpStatus.CONFLICT],
  [InvalidInputError, HttpStatus.BAD_REQUEST],
  [UnknownStepError, HttpStatus.BAD_REQUEST],
  [PayloadTooLargeError, HttpStatus.PAYLOAD_TOO_LARGE],
]);

/** The body the filter answers: the status, the error's stable `code`, its message; no stack. */
export interface GenDurableErrorBody {
  readonly statusCode: number;
  readonly error: string;
  readonly message: string;
}

/**
 * Opt-in HTTP mapping of the engine's caller errors (README "Errors over HTTP"): `NoTargetError`
 * → 404, `DuplicateError` → 409, `InvalidInputError` and `UnknownStepError` → 400,
 * `PayloadTooLargeError` → 413, answered as {@link GenDurableErrorBody} through the platform's
 * `HttpAdapterHost` (Express and Fastify alike). `@Catch` names only those classes, so Nest never
 * hands this filter any other error: those keep the host's own handling. Register it as
 * `{ provide: APP_FILTER, useClass: GenDurableExceptionFilter }`, `@UseFilters(GenDurableExceptionFilter)`
 * or `app.useGlobalFilters(new GenDurableExceptionFilter(app.get(HttpAdapterHost)))`.
 */
@Catch(NoTargetError, DuplicateError, InvalidInputError, UnknownStepError, PayloadTooLargeError)
export class GenDurableExceptionFilter implements ExceptionFilter<GenDurableError> {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(error: GenDurableError, host: ArgumentsHost): void {
    if (host.getType() !== 'http') throw error;
    const adapter = this.adapterHost.httpAdapter;
    const status = statusOf(error);
    const body: GenDurableErrorBody = {
      statusCode: status,
      error: error.code,
      message: error.message,
    };
    const response: unknown = host.switchToHttp().getResponse();
    if (adapter.isHeadersSent(response)) adapter.end(response);
    else adapter.reply(response, body, status);
  }
}

function statusOf(error: GenDurableError): HttpStatus {
  for (const [errorClass, status] of STATUS_OF) {
    if (error instanceof errorClass) return status;
  }
  return HttpStatus.INTERNAL_SERVER_ERROR;
}
