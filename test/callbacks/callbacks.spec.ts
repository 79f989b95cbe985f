import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';

import {
  awaitSignal,
  CallbackTokenError,
  ConfigurationError,
  done,
  DurableFsm,
  EngineService,
  GenDurableCallbacksModule,
  GenDurableModule,
  Step,
  type StepContext,
} from '../../lib';
import { signCallbackToken } from '../../lib/callbacks/callback-token';
import { FAST } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Signed callback URLs (docs/callbacks.md): engine.callbackUrl mints an HMAC-signed URL for
// (instance, signal); GenDurableCallbacksModule serves POST <path>/:token, delivering the JSON
// body as that signal once (the token's nonce is the dedup key); 403 for a forged token, 410 for
// an expired or used one or an ended instance. Over HTTP, on Express, on real PostgreSQL.

const SECRET = 'a-test-secret-that-is-long-enough-0123456789';

@DurableFsm({ name: 'approval', queue: 'approval' })
class ApprovalFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('approved', 'decide', ctx.state);
  }
  @Step() decide(ctx: StepContext) {
    return done({ decision: ctx.awaited.map((s) => s.payload) });
  }
}

describe('signed callback URLs', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let engine: EngineService;
  let open = false;

  beforeAll(async () => {
    db = await createTestDatabase();
    const dataSource = await db.dataSource();
    const moduleRef = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource,
          ...FAST,
          queues: { approval: 2 },
          callbacks: { secret: SECRET, baseUrl: 'https://api.example.com/hooks/' },
        }),
        GenDurableCallbacksModule.register({ path: 'hooks' }),
      ],
      providers: [ApprovalFsm],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    open = true;
    trackResource('callbacks app', () => open);
    engine = app.get(EngineService);
  });
  afterAll(async () => {
    if (open) await app.close();
    open = false;
    await db.drop();
  });

  const parked = async (): Promise<string> => {
    const id = await engine.insert(ApprovalFsm, {});
    await engine.await(id, { timeout: 15_000 });
    return id;
  };
  const pathOf = (url: string): string => new URL(url).pathname;

  it('delivers a single-use callback once; a second POST is 410', async () => {
    const id = await parked();
    const url = await engine.callbackUrl(id, 'approved', { once: true, ttlMs: 60_000 });
    expect(url).toMatch(/^https:\/\/api\.example\.com\/hooks\/[\w-]+\.[\w-]+$/);
    const first = await request(app.getHttpServer()).post(pathOf(url)).send({ ok: true });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ delivered: true, duplicate: false });
    expect(await engine.await(id, { until: 'terminal', timeout: 15_000 })).toEqual({
      kind: 'done',
      result: { decision: [{ ok: true }] },
    });
    const again = await request(app.getHttpServer()).post(pathOf(url)).send({ ok: false });
    expect(again.status).toBe(410);
  });

  it('a reusable token delivers once too: a retried POST answers duplicate', async () => {
    const id = await parked();
    const url = await engine.callbackUrl({ id }, 'approved');
    const [a, b] = await Promise.all([
      request(app.getHttpServer()).post(pathOf(url)).send({ n: 1 }),
      request(app.getHttpServer()).post(pathOf(url)).send({ n: 1 }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect([a.body.duplicate, b.body.duplicate].sort()).toEqual([false, true]);
    expect(await engine.await(id, { until: 'terminal', timeout: 15_000 })).toEqual({
      kind: 'done',
      result: { decision: [{ n: 1 }] },
    });
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM gen_durable_signals WHERE target_id = $1`,
      [id],
    );
    expect(rows[0].n).toBe(1);
  });

  it('refuses a forged token (403) and an expired one (410), delivering nothing', async () => {
    const id = await parked();
    const forged = signCallbackToken('another-secret-that-is-long-enough-012345', {
      id,
      signal: 'approved',
      expiresAt: Date.now() + 60_000,
      once: false,
    }).token;
    expect((await request(app.getHttpServer()).post(`/hooks/${forged}`).send({})).status).toBe(403);
    const url = await engine.callbackUrl(id, 'approved', { ttlMs: 1 });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect((await request(app.getHttpServer()).post(pathOf(url)).send({})).status).toBe(410);
    await expect(engine.deliverCallback(forged, {})).rejects.toBeInstanceOf(CallbackTokenError);
    expect((await engine.get(id))?.status).toBe('awaiting_signal');
  });

  it('answers 410 once the instance ended, and refuses bad arguments with typed errors', async () => {
    const id = await parked();
    const url = await engine.callbackUrl(id, 'approved');
    await engine.cancel(id);
    expect((await request(app.getHttpServer()).post(pathOf(url)).send({})).status).toBe(410);
    await expect(engine.callbackUrl(id, '')).rejects.toThrow(/callbackUrl\.signal/);
    await expect(engine.callbackUrl(id, 'approved', { ttlMs: 0 })).rejects.toThrow(
      /callbackUrl\.ttlMs/,
    );
    await expect(engine.callbackUrl({ correlationKey: 'nobody' }, 'approved')).rejects.toThrow(
      /no callback URL was made/,
    );
  });

  it('refuses to mint without a configured secret', async () => {
    const other = await createTestDatabase();
    const dataSource = await other.dataSource();
    const moduleRef = await Test.createTestingModule({
      imports: [GenDurableModule.forRoot({ dataSource, ...FAST, name: 'plain', queues: {} })],
    }).compile();
    await moduleRef.init();
    try {
      const plain = moduleRef.get<EngineService>('GenDurableEngine:plain');
      await expect(plain.callbackUrl('1', 'x')).rejects.toBeInstanceOf(ConfigurationError);
    } finally {
      await moduleRef.close();
      await other.drop();
    }
  });
});
