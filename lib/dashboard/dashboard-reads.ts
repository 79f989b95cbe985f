import type { EngineService } from '../engine/engine.service';
import { ALL_STATUSES, type DurableStatus } from '../gen-durable.constants';
import type { InstanceFilter } from '../instance/instance-filter';
import type { InstanceView } from '../instance/instance-view';
import type { CappedCount, QueueStatus } from '../instance/queue-status';
import type { ScheduleView } from '../cron/schedule-spec';
import { basicExplanation } from './basic-explanation';
import { READ_INBOX, type InboxSignal } from '../sql/dashboard.sql';
import {
  type DashboardGraph,
  type DashboardHistoryEntry,
  optionalFeature,
} from './dashboard-engine';

/** Counts shown per cell are capped here: a dashboard answers fast on any table size. */
export const COUNT_CAP = 10_000;
/** Instances per page of the instances view. */
export const PAGE_SIZE = 50;

/** One queue of the overview: its pause, its capped count per status, and the engine's extra figures. */
export interface OverviewQueue {
  readonly queue: string;
  readonly paused: boolean;
  readonly counts: Readonly<Record<DurableStatus, CappedCount>>;
}

export interface Overview {
  readonly queues: readonly OverviewQueue[];
  /** The engine's stats read (snapshot history, oldest runnable age), when it has one. */
  readonly stats: unknown;
}

export interface InstancesPage {
  readonly items: readonly InstanceView[];
  readonly next: string | undefined;
  readonly total: CappedCount;
}

/** A node of an instance's children tree (at most {@link TREE_LIMIT} nodes, {@link TREE_DEPTH} levels). */
export interface ChildNode {
  readonly instance: InstanceView;
  readonly children: readonly ChildNode[];
  /** More children than shown. */
  readonly more: boolean;
}

export interface InstanceDetail {
  readonly instance: InstanceView;
  readonly inbox: readonly InboxSignal[];
  readonly children: readonly ChildNode[];
  readonly moreChildren: boolean;
  /** Null when this engine has no `history`. */
  readonly history: readonly DashboardHistoryEntry[] | null;
  /** Null when this engine has no `explain`. */
  readonly explanation: unknown;
  /** Steps of the instance's FSM (for retry/fork), empty when it is not registered here. */
  readonly steps: readonly string[];
}

export interface FsmSummary {
  readonly name: string;
  readonly version: number;
  readonly kind: 'fsm' | 'job';
  readonly queue: string;
  readonly steps: readonly string[];
}

export interface FsmDetail extends FsmSummary {
  readonly graph: DashboardGraph | null;
  /** Live instances at each step (capped). */
  readonly liveByStep: Readonly<Record<string, CappedCount>>;
  readonly counts: Readonly<Record<DurableStatus, CappedCount>>;
}

const TREE_DEPTH = 3;
const TREE_LIMIT = 200;
const LIVE: readonly DurableStatus[] = ALL_STATUSES.filter(
  (s) => s !== 'done' && s !== 'failed' && s !== 'cancelled',
);

/**
 * Every read of the dashboard (docs/design.md §30), used by the pages and their JSON twins
 * alike, through the engine's public API (plus one inbox statement). State and result pass
 * through `redact` when the host gave one.
 */
export class DashboardReads {
  constructor(
    private readonly engine: EngineService,
    private readonly redact: ((fsm: string, state: unknown) => unknown) | undefined,
  ) {}

  /** An instance as shown: state and result through `redact`. */
  shown(instance: InstanceView): InstanceView {
    const redact = this.redact;
    if (redact === undefined) return instance;
    return {
      ...instance,
      state: redact(instance.fsm, instance.state) as Record<string, unknown>,
      result:
        instance.result === null
          ? null
          : (redact(instance.fsm, instance.result) as Record<string, unknown>),
    };
  }

  async overview(): Promise<Overview> {
    const queues = await this.engine.queueStatus(undefined, { cap: COUNT_CAP });
    const rows = await Promise.all(queues.map((q) => this.queueCounts(q)));
    const read = optionalFeature(this.engine, 'stats');
    return { queues: rows, stats: read ? await read({ minutes: 60, cap: COUNT_CAP }) : null };
  }

  private async queueCounts(q: QueueStatus): Promise<OverviewQueue> {
    return { queue: q.queue, paused: q.paused, counts: await this.countsBy({ queue: q.queue }) };
  }

  private async countsBy(filter: InstanceFilter): Promise<Record<DurableStatus, CappedCount>> {
    const counts = await Promise.all(
      ALL_STATUSES.map((status) => this.engine.count({ ...filter, status }, { cap: COUNT_CAP })),
    );
    return Object.fromEntries(ALL_STATUSES.map((s, i) => [s, counts[i]!])) as Record<
      DurableStatus,
      CappedCount
    >;
  }

  async instances(filter: InstanceFilter, after: string | undefined): Promise<InstancesPage> {
    const [page, total] = await Promise.all([
      this.engine.list(filter, { limit: PAGE_SIZE, ...(after ? { after } : {}) }),
      this.engine.count(filter, { cap: COUNT_CAP }),
    ]);
    return { items: page.items.map((i) => this.shown(i)), next: page.next, total };
  }

  /** Null when no instance has this id. */
  async instance(id: string): Promise<InstanceDetail | null> {
    const instance = await this.engine.get(id);
    if (instance === null) return null;
    const history = optionalFeature(this.engine, 'history');
    const explain = optionalFeature(this.engine, 'explain');
    const budget = { left: TREE_LIMIT };
    const [inbox, tree, entries, explained, queue] = await Promise.all([
      READ_INBOX.run(this.engine.runtime.sql, { id, limit: 100 }),
      this.childrenOf(id, TREE_DEPTH, budget),
      history ? history(id, { limit: 100 }) : Promise.resolve(null),
      explain
        ? explain(id).catch((err: unknown) => ({ error: String(err) }))
        : Promise.resolve(null),
      explain ? Promise.resolve([]) : this.engine.queueStatus(instance.queue, { cap: 1 }),
    ]);
    const registered = this.fsms().some((f) => f.name === instance.fsm);
    const explanation = explained ?? basicExplanation(instance, inbox, queue[0], registered);
    return {
      instance: this.shown(instance),
      inbox,
      children: tree.nodes,
      moreChildren: tree.more,
      history:
        entries?.map((e) =>
          this.redact && e.state != null ? { ...e, state: this.redact(instance.fsm, e.state) } : e,
        ) ?? null,
      explanation,
      steps: this.stepsOf(instance.fsm),
    };
  }

  private async childrenOf(
    id: string,
    depth: number,
    budget: { left: number },
  ): Promise<{ nodes: ChildNode[]; more: boolean }> {
    if (depth === 0 || budget.left <= 0) return { nodes: [], more: false };
    const limit = Math.min(50, budget.left);
    const page = await this.engine.list({ parentId: id }, { limit });
    budget.left -= page.items.length;
    const nodes: ChildNode[] = [];
    for (const child of page.items.reverse()) {
      const sub = await this.childrenOf(child.id, depth - 1, budget);
      nodes.push({ instance: this.shown(child), children: sub.nodes, more: sub.more });
    }
    return { nodes, more: page.next !== undefined };
  }

  private stepsOf(fsm: string): string[] {
    return (
      this.fsms()
        .find((f) => f.name === fsm)
        ?.steps.slice() ?? []
    );
  }

  /** The FSMs registered on this node (newest version of each name). */
  fsms(): FsmSummary[] {
    const newest = new Map<string, FsmSummary>();
    for (const d of this.engine.runtime.registry.all()) {
      const known = newest.get(d.name);
      if (known && known.version > d.version) continue;
      newest.set(d.name, {
        name: d.name,
        version: d.version,
        kind: d.kind,
        queue: d.queue,
        steps: [...d.steps.keys()],
      });
    }
    return [...newest.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Null when no FSM of this name is registered here. */
  async fsm(name: string): Promise<FsmDetail | null> {
    const summary = this.fsms().find((f) => f.name === name);
    if (!summary) return null;
    const graphOf = optionalFeature(this.engine, 'graph');
    const graph = graphOf ? graphOf(name) : null;
    const [perStep, counts] = await Promise.all([
      Promise.all(
        summary.steps.map((step) =>
          this.engine.count({ fsm: name, step, status: [...LIVE] }, { cap: COUNT_CAP }),
        ),
      ),
      this.countsBy({ fsm: name }),
    ]);
    const liveByStep = Object.fromEntries(summary.steps.map((s, i) => [s, perStep[i]!]));
    return { ...summary, graph, liveByStep, counts };
  }

  schedules(): Promise<ScheduleView[]> {
    return this.engine.schedules.list();
  }

  /** The engine's limiter status (gates and buckets), or null when it has none. */
  async limiters(): Promise<unknown> {
    const status = optionalFeature(this.engine, 'limiterStatus');
    return status ? status() : null;
  }

  queues(): Promise<QueueStatus[]> {
    return this.engine.queueStatus(undefined, { cap: COUNT_CAP });
  }
}
