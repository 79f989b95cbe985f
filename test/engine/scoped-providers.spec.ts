import { Inject, Injectable, Scope } from '@nestjs/common';
import {
  ContextIdFactory,
  type ContextId,
  type ContextIdStrategy,
  type HostComponentInfo,
  REQUEST,
} from '@nestjs/core';

import {
  ConfigurationError,
  done,
  type DurableRequest,
  DurableFsm,
  next,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/scoped-providers.md: a request-scoped FSM class is resolved per step run, with the run as
// its request; a durable one shares a sub-tree chosen by a host ContextIdStrategy (per tenant).

/** A singleton the scoped classes depend on: DI works as for any provider. */
@Injectable()
class Ledger {
  readonly runs: {
    id: string;
    step: string;
    requestId: string;
    self: object;
    tenantService?: object;
  }[] = [];
}

@Injectable({ scope: Scope.REQUEST })
@DurableFsm({ name: 'scoped-order' })
class ScopedOrder {
  constructor(
    private readonly ledger: Ledger,
    @Inject(REQUEST) private readonly request: DurableRequest,
  ) {}
  @Step() start(ctx: StepContext<Record<string, never>>) {
    this.ledger.runs.push({
      id: ctx.id,
      step: ctx.step,
      requestId: this.request.instanceId,
      self: this,
    });
    return next('finish', ctx.state);
  }
  @Step() finish(ctx: StepContext<Record<string, never>>) {
    this.ledger.runs.push({
      id: ctx.id,
      step: ctx.step,
      requestId: this.request.instanceId,
      self: this,
    });
    return done({ step: this.request.step });
  }
}

/** One instance per tenant sub-tree (durable). */
@Injectable({ scope: Scope.REQUEST, durable: true })
class TenantService {}

@Injectable({ scope: Scope.REQUEST, durable: true })
@DurableFsm({ name: 'tenant-job' })
class TenantJob {
  constructor(
    private readonly ledger: Ledger,
    private readonly tenant: TenantService,
    @Inject(REQUEST) private readonly request: DurableRequest,
  ) {}
  perform(state: { tenant: string }, ctx: StepContext<{ tenant: string }>) {
    this.ledger.runs.push({
      id: ctx.id,
      step: ctx.step,
      requestId: this.request.instanceId,
      self: this,
      tenantService: this.tenant,
    });
    return { tenant: state.tenant };
  }
}

/** Durable providers of one tenant share a sub-tree, keyed by the run's `state.tenant`. */
class TenantStrategy implements ContextIdStrategy<DurableRequest> {
  private readonly tenants = new Map<string, ContextId>();
  attach(contextId: ContextId, request: DurableRequest) {
    const tenant = (request.state as { tenant?: unknown } | null)?.tenant;
    if (typeof tenant !== 'string') return () => contextId;
    let tenantId = this.tenants.get(tenant);
    if (!tenantId) {
      tenantId = ContextIdFactory.create();
      this.tenants.set(tenant, tenantId);
    }
    return {
      resolve: (info: HostComponentInfo) => (info.isTreeDurable ? tenantId : contextId),
      payload: request,
    };
  }
}

describe('request- and durable-scoped FSM providers (docs/scoped-providers.md)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    ContextIdFactory.apply(new TenantStrategy());
    db = await createTestDatabase();
    h = await bootEngine(db, [Ledger, ScopedOrder, TenantService, TenantJob]);
  });
  afterAll(async () => {
    await h?.close();
    await db?.drop();
    // The strategy is process-wide: put Nest's default back for the next test file.
    (ContextIdFactory as unknown as { strategy?: ContextIdStrategy }).strategy = undefined;
  });

  it('a request-scoped FSM gets a fresh instance per step run, its REQUEST the run', async () => {
    const ledger = h.app.get(Ledger);
    const id = await h.engine.insert(ScopedOrder);
    expect(await h.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { step: 'finish' },
    });
    const runs = ledger.runs.filter((r) => r.id === id);
    expect(runs.map((r) => [r.step, r.requestId])).toEqual([
      ['start', id],
      ['finish', id],
    ]);
    expect(runs[0]!.self).not.toBe(runs[1]!.self);
  });

  it('durable providers are shared per tenant, as the host ContextIdStrategy picks', async () => {
    const ledger = h.app.get(Ledger);
    const ids = await h.engine.insertAll(TenantJob, [
      { state: { tenant: 'a' } },
      { state: { tenant: 'a' } },
      { state: { tenant: 'b' } },
    ]);
    for (const id of ids) {
      expect((await h.engine.await(id, { until: 'terminal' })).kind).toBe('done');
    }
    // insertAll orders rows by key, not by entry: map each run to its tenant through the row.
    const tenantOf = async (id: string) =>
      ((await h.engine.get(id))?.state as { tenant: string }).tenant;
    const services = new Map<string, Set<object>>();
    for (const r of ledger.runs.filter((x) => ids.includes(x.id))) {
      const t = await tenantOf(r.id);
      services.set(t, (services.get(t) ?? new Set()).add(r.tenantService!));
    }
    const runs = ledger.runs.filter((x) => ids.includes(x.id));
    expect(runs).toHaveLength(3);
    // A durable sub-tree is built once per tenant: the FSM instance itself is shared, and its
    // REQUEST is the run that built it (tenant-level data; the run is ctx).
    const selves = new Map<string, Set<object>>();
    for (const r of runs) {
      const t = await tenantOf(r.id);
      selves.set(t, (selves.get(t) ?? new Set()).add(r.self));
    }
    expect(selves.get('a')?.size).toBe(1);
    expect(services.get('a')?.size).toBe(1);
    expect(services.get('b')?.size).toBe(1);
    expect([...services.get('a')!][0]).not.toBe([...services.get('b')!][0]);
  });

  it('a transient-scoped FSM class is refused at boot, naming it', async () => {
    @Injectable({ scope: Scope.TRANSIENT })
    @DurableFsm({ name: 'transient-fsm' })
    class TransientFsm {
      @Step() start() {
        return done({});
      }
    }
    const other = await createTestDatabase();
    try {
      await expect(bootEngine(other, [TransientFsm], { name: 'transient-check' })).rejects.toThrow(
        ConfigurationError,
      );
      await expect(bootEngine(other, [TransientFsm], { name: 'transient-check' })).rejects.toThrow(
        /fsm TransientFsm.*transient-scoped/,
      );
    } finally {
      await other.drop();
    }
  });
});
