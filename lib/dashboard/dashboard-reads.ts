import type { BlockedSequence } from '../control/blocked-sequence';
import type { FairQueueHeads } from '../control/fairness-head';
import { ALL_STATUSES, type DurableStatus } from '../gen-durable.constants';
import type { Explanation } from '../control/explanation';
import type { InboxSignal, InstanceControl } from '../control/instance-control';
import type { InstanceFilter } from '../control/instance-filter';
import type { FsmGraph } from '../fsm/fsm-graph';
import type { HistoryEntry } from '../instance/history-entry';
import type { InstanceView } from '../instance/instance-view';
import type { CappedCount, QueueStatus } from '../instance/queue-status';
import type { LimiterStatus } from '../control/limiter-status';
import type { OverviewPoint, QueueOverviewCounts } from '../control/stats-overview';
import type { ScheduleView } from '../cron/schedule-spec';

/** Counts shown per cell are capped here: a dashboard answers fast on any table size. */
export const COUNT_CAP = 10_000;

/** The heads per queue the Fairness page lists. */
export const FAIRNESS_PAGE_LIMIT = 50;
/** Instances per page of the instances view. */
export const PAGE_SIZE = 50;

/** One queue of the overview: its pause and the stats snapshot's figures for it. */
export interface OverviewQueue {
  readonly queue: string;
  readonly paused: boolean;
  /**
   * Live rows by status from the snapshot (capped as it counted them), rows ended in the
   * snapshot's previous minute; from a live answer the live statuses counted now, capped, and
   * null for the ended ones.
   */
  readonly counts: QueueOverviewCounts;
  /** `eligible_at` of the oldest due runnable row (null: none due, or a live answer). */
  readonly oldestRunnableAt: Date | null;
  /** Rows ended per minute over the window, oldest first (empty in a live answer). */
  readonly series: readonly OverviewPoint[];
}

/** The overview (docs/dashboard.md "Overview"): `engine.stats()` plus each queue's pause. */
export interface Overview {
  /** `'snapshot'`: the newest stored minute of gen_durable_stats; `'live'`: none stored yet, counted now. */
  readonly source: 'snapshot' | 'live';
  /** The snapshot's minute (the database's current minute for a live answer). */
  readonly at: Date;
  /** How old the figures are when read: now − `at` (0 for a live answer). */
  readonly ageMs: number;
  /** The newest snapshot is more than two minutes old (no maintenance node writes them). */
  readonly stale: boolean;
  /** The sparkline window, minutes. */
  readonly minutes: number;
  readonly queues: readonly OverviewQueue[];
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
  readonly history: readonly HistoryEntry[];
  /** `engine.explain`, or the error it answered (the row went away since it was read). */
  readonly explanation: Explanation | { readonly error: string };
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
  readonly graph: FsmGraph;
  /** Live instances at each step (capped). */
  readonly liveByStep: Readonly<Record<string, CappedCount>>;
  readonly counts: Readonly<Record<DurableStatus, CappedCount>>;
}

const TREE_DEPTH = 3;
const TREE_LIMIT = 200;

/**
 * Every read of the dashboard (docs/design.md §30), used by the pages and their JSON twins
 * alike, through the engine's instance control (`InstanceControl`). State and result pass
 * through `redact` when the host gave one.
 */
export class DashboardReads {
  constructor(
    private readonly engine: InstanceControl,
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

  /**
   * The overview from `engine.stats()` — the once-a-minute snapshot, so no count of
   * gen_durable runs for it — and each queue's pause (`queueStatus` with its counts capped at
   * 1). Only while no snapshot is stored (`source: 'live'`) are the live statuses counted now,
   * each capped at {@link COUNT_CAP}.
   */
  async overview(): Promise<Overview> {
    const [stats, pauses] = await Promise.all([
      this.engine.stats({ minutes: 60, cap: COUNT_CAP }),
      this.engine.queueStatus(undefined, { cap: 1 }),
    ]);
    const paused = new Set(pauses.filter((q) => q.paused).map((q) => q.queue));
    const byQueue = new Map(stats.queues.map((q) => [q.queue, q]));
    const names = [...new Set([...byQueue.keys(), ...pauses.map((q) => q.queue)])].sort();
    const queues = await Promise.all(
      names.map(async (queue): Promise<OverviewQueue> => {
        const q = byQueue.get(queue);
        const counts = q?.counts ?? (await this.liveCounts(queue));
        return {
          queue,
          paused: paused.has(queue),
          counts:
            stats.source === 'live' && counts.awaitingSignal === null
              ? await this.parkedCounts(queue, counts)
              : counts,
          oldestRunnableAt: q?.oldestRunnableAt ?? null,
          series: q?.series ?? [],
        };
      }),
    );
    return {
      source: stats.source,
      at: stats.at,
      ageMs: stats.source === 'live' ? 0 : Math.max(0, Date.now() - stats.at.getTime()),
      stale: stats.stale,
      minutes: stats.minutes,
      queues,
    };
  }

  /** A queue the snapshot does not list (a pause without rows): its live statuses, capped. */
  private async liveCounts(queue: string): Promise<QueueOverviewCounts> {
    const zero: CappedCount = { count: 0, capped: false };
    const [runnable, executing] = await Promise.all([
      this.engine.count({ queue, status: 'runnable' }, { cap: COUNT_CAP }),
      this.engine.count({ queue, status: 'executing' }, { cap: COUNT_CAP }),
    ]);
    return {
      runnable,
      scheduled: zero,
      executing,
      awaitingSignal: null,
      awaitingChildren: null,
      done: null,
      failed: null,
      cancelled: null,
    };
  }

  /** A live answer's parked statuses (the engine's live read leaves them null), counted now, capped. */
  private async parkedCounts(
    queue: string,
    counts: QueueOverviewCounts,
  ): Promise<QueueOverviewCounts> {
    const [awaitingSignal, awaitingChildren] = await Promise.all([
      this.engine.count({ queue, status: 'awaiting_signal' }, { cap: COUNT_CAP }),
      this.engine.count({ queue, status: 'awaiting_children' }, { cap: COUNT_CAP }),
    ]);
    return { ...counts, awaitingSignal, awaitingChildren };
  }

  private async countsBy(filter: InstanceFilter): Promise<Record<DurableStatus, CappedCount>> {
    const counts: CappedCount[] = await Promise.all(
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
    const budget = { left: TREE_LIMIT };
    const [inbox, tree, entries, explanation] = await Promise.all([
      this.engine.inbox(id, { limit: 100 }),
      this.childrenOf(id, TREE_DEPTH, budget),
      this.engine.history(id, { limit: 100 }),
      this.engine.explain(id).catch((err: unknown) => ({ error: String(err) })),
    ]);
    return {
      instance: this.shown(instance),
      inbox,
      children: tree.nodes,
      moreChildren: tree.more,
      history: entries.map((e) =>
        this.redact && e.state != null ? { ...e, state: this.redact(instance.fsm, e.state) } : e,
      ),
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
    for (const d of this.engine.registeredFsms()) {
      const known = newest.get(d.name);
      if (known && known.version > d.version) continue;
      newest.set(d.name, d);
    }
    return [...newest.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Null when no FSM of this name is registered here. */
  async fsm(name: string): Promise<FsmDetail | null> {
    const summary = this.fsms().find((f) => f.name === name);
    if (!summary) return null;
    const graph = this.engine.graph(name);
    const [liveByStep, counts] = await Promise.all([
      this.engine.stepCounts(name, { cap: COUNT_CAP }),
      this.countsBy({ fsm: name }),
    ]);
    return { ...summary, graph, liveByStep, counts };
  }

  schedules(): Promise<ScheduleView[]> {
    return this.engine.schedules.list();
  }

  /** The engine's limiter status: declarations, and gates and buckets live (PostgreSQL or Redis). */
  limiters(): Promise<LimiterStatus> {
    return this.engine.limiterStatus();
  }

  /** The sequence keys with instances waiting behind their head (docs/sequences.md). */
  sequences(): Promise<BlockedSequence[]> {
    return this.engine.blockedSequences({ limit: 200 });
  }

  /**
   * The fairness heads of each fair queue, or of `queue` (docs/many-tenants.md "Seeing the
   * heads"): {@link FAIRNESS_PAGE_LIMIT} per queue, counts capped at 1 000.
   */
  fairness(queue: string | undefined): Promise<FairQueueHeads[]> {
    return this.engine.fairnessHeads({
      ...(queue !== undefined && { queue }),
      limit: FAIRNESS_PAGE_LIMIT,
      cap: 1_000,
    });
  }

  queues(): Promise<QueueStatus[]> {
    return this.engine.queueStatus(undefined, { cap: COUNT_CAP });
  }

  /** The queue names the instances filter offers (`queueStatus` with its counts capped at 1). */
  async queueNames(): Promise<string[]> {
    return (await this.engine.queueStatus(undefined, { cap: 1 })).map((q) => q.queue);
  }
}
