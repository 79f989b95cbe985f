import {
  Body,
  Controller,
  type INestApplication,
  Param,
  Post,
  type Provider,
  type Type,
  UseFilters,
} from '@nestjs/common';
import { APP_FILTER, HttpAdapterHost } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';

import {
  done,
  DurableFsm,
  EngineService,
  GenDurableExceptionFilter,
  GenDurableModule,
  Step,
} from '../../lib';
import { FAST } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// README "Errors over HTTP": GenDurableExceptionFilter maps the engine's caller errors to 404,
// 409, 400 and 413 with { statusCode, error, message } on Express and Fastify, however it is
// registered; any other error keeps the host's own handling (Nest's 500).

@DurableFsm({ name: 'http-order', queue: 'http' })
class OrderFsm {
  @Step() start() {
    return done({});
  }
}

interface OrderBody {
  key?: string;
  step?: string;
  priority?: number;
  note?: string;
}

function routes(engine: EngineService) {
  return {
    insert: (body: OrderBody) =>
      engine.insert(OrderFsm, {
        correlationKey: body.key,
        step: body.step,
        priority: body.priority,
        state: { note: body.note },
      }),
    signal: (id: string, body: Record<string, unknown>) => engine.signal({ id }, 'paid', body),
  };
}

@Controller('orders')
class OrdersController {
  constructor(private readonly engine: EngineService) {}
  @Post()
  async insert(@Body() body: OrderBody) {
    return { id: await routes(this.engine).insert(body) };
  }
  @Post(':id/paid')
  async paid(@Param('id') id: string, @Body() body: Record<string, unknown>) {
    await routes(this.engine).signal(id, body);
    return { ok: true };
  }
  @Post('boom')
  boom(): never {
    throw new Error('a bug of the host, with a stack');
  }
}

@Controller('filtered')
@UseFilters(GenDurableExceptionFilter)
class FilteredController extends OrdersController {}

describe('GenDurableExceptionFilter (README "Errors over HTTP")', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  async function boot(
    platform: 'express' | 'fastify',
    registration: 'APP_FILTER' | 'useGlobalFilters' | 'UseFilters',
  ): Promise<INestApplication> {
    const dataSource = await db.dataSource();
    const providers: Provider[] = [OrderFsm];
    if (registration === 'APP_FILTER') {
      providers.push({ provide: APP_FILTER, useClass: GenDurableExceptionFilter });
    }
    const controller: Type = registration === 'UseFilters' ? FilteredController : OrdersController;
    const moduleRef = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource,
          ...FAST,
          queues: {},
          reaper: false,
          gc: false,
          poke: 'none',
          maxStateBytes: 1024,
        }),
      ],
      controllers: [controller],
      providers,
    }).compile();
    const app =
      platform === 'fastify'
        ? moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), {
            logger: false,
          })
        : moduleRef.createNestApplication({ logger: false });
    if (registration === 'useGlobalFilters') {
      app.useGlobalFilters(new GenDurableExceptionFilter(app.get(HttpAdapterHost)));
    }
    await app.init();
    if (platform === 'fastify') {
      await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
    }
    return app;
  }

  for (const [platform, registration] of [
    ['express', 'APP_FILTER'],
    ['fastify', 'useGlobalFilters'],
    ['express', 'UseFilters'],
    ['fastify', 'UseFilters'],
  ] as const) {
    it(`${platform}, ${registration}: 404, 409, 400, 413 from the engine; other errors stay 500`, async () => {
      const app = await boot(platform, registration);
      try {
        const base = registration === 'UseFilters' ? '/filtered' : '/orders';
        const server = app.getHttpServer() as Parameters<typeof request>[0];
        const key = `${platform}-${registration}`;

        const created = await request(server).post(base).send({ key });
        expect(created.status).toBe(201);

        const expectError = async (
          response: request.Response,
          statusCode: number,
          error: string,
          message: RegExp,
        ): Promise<void> => {
          expect(response.status).toBe(statusCode);
          expect(response.body).toEqual({ statusCode, error, message: expect.any(String) });
          expect((response.body as { message: string }).message).toMatch(message);
          expect(JSON.stringify(response.body)).not.toMatch(/\n\s+at /);
        };
        // A second insert on an occupied key: DuplicateError.
        await expectError(
          await request(server).post(base).send({ key }),
          409,
          'GD_DUPLICATE',
          new RegExp(key),
        );
        // A signal to an instance that does not exist: NoTargetError.
        await expectError(
          await request(server).post(`${base}/999999/paid`).send({ amount: 1 }),
          404,
          'GD_NO_TARGET',
          /no live instance for id 999999/,
        );
        // A priority outside smallint: InvalidInputError naming it.
        await expectError(
          await request(server).post(base).send({ priority: 1e9 }),
          400,
          'GD_INVALID_INPUT',
          /priority/,
        );
        // A step the FSM does not define: UnknownStepError.
        await expectError(
          await request(server).post(base).send({ step: 'nope' }),
          400,
          'GD_UNKNOWN_STEP',
          /nope/,
        );
        // A state over maxStateBytes (1 KiB): PayloadTooLargeError.
        await expectError(
          await request(server)
            .post(base)
            .send({ note: 'x'.repeat(2000) }),
          413,
          'GD_PAYLOAD_TOO_LARGE',
          /maxStateBytes/,
        );
        // Not an engine error: the host's own handling, Nest's 500.
        const boom = await request(server).post(`${base}/boom`).send({});
        expect(boom.status).toBe(500);
        expect(boom.body).toEqual({ statusCode: 500, message: 'Internal server error' });
      } finally {
        await app.close();
      }
    });
  }
});
