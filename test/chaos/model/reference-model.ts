/**
 * The reference model of the status machine (docs/reliability.md §6.1): what every instance row
 * should look like after each engine operation, written from docs/design.md §2.4, §4, §5.3, §6.3, §8,
 * §10, §17 and §18 without looking at the SQL. The model-based test drives the production
 * statements and compares the database with this model after every command.
 */

export type Status =
  | 'runnable'
  | 'executing'
  | 'awaiting_signal'
  | 'awaiting_children'
  | 'done'
  | 'failed'
  | 'cancelled';
export const LIVE: readonly Status[] = [
  'runnable',
  'executing',
  'awaiting_signal',
  'awaiting_children',
];

export interface MSignal {
  readonly id: string;
  readonly name: string;
  readonly dedup: string | null;
  consumed: boolean;
}

export interface MRow {
  readonly id: string;
  status: Status;
  step: string;
  /** state.seq: bumped by every committed state write, so a rewind or double apply shows. */
  seq: number;
  attempt: number;
  claimSeq: number;
  worker: string | null;
  leaseExpired: boolean;
  awaits: string[] | null;
  deadline: 'none' | 'future' | 'past';
  /** eligible_at ≤ now (meaningful for runnable rows). */
  eligible: boolean;
  inbox: MSignal[];
  parent: string | null;
  childrenPending: number;
  readonly key: string | null;
  readonly corrKey: string | null;
  reaps: number;
  /** At the poison-pill cap: the next counted loss (its solo run) fails it (§26.5). */
  suspect: boolean;
  aged: boolean;
  /** Signal ids presented to the step that parked (excluded from the lost-wakeup recheck). */
  presented: string[];
  /** A cancel reached it (docs/design.md §27.2): asked of its running step, or cancelled. */
  cancelRequested: boolean;
}

/** What `cancel` answers (docs/operations-control.md "Cancelling"), ids in id order. */
export interface MCancelAnswer {
  readonly cancelled: string[];
  readonly requested: string[];
  readonly alreadyTerminal: string[];
}

/** What `retry` does (docs/design.md §27.3): runs it again, or refuses (and why). */
export type MRetryVerdict = 'retried' | 'status' | 'parent' | 'duplicate';

/** One claim a worker believes it holds: the token is (worker, id, claimSeq). */
export interface MClaim {
  readonly id: string;
  readonly worker: string;
  readonly claimSeq: number;
}

export type OutcomeKind =
  | 'next'
  | 'retry'
  | 'retryLater'
  | 'await'
  | 'awaitTimeout'
  | 'spawn0'
  | 'spawn2'
  | 'done'
  | 'stop';

export const MAX_REAPS = 3;

export class ReferenceModel {
  readonly rows = new Map<string, MRow>();

  isLive(id: string | null): boolean {
    if (id === null) return false;
    const r = this.rows.get(id);
    return r !== undefined && LIVE.includes(r.status);
  }

  liveByCorrKey(key: string): MRow | undefined {
    return [...this.rows.values()].find((r) => r.corrKey === key && LIVE.includes(r.status));
  }

  executingKeys(): Set<string> {
    return new Set(
      [...this.rows.values()]
        .filter((r) => r.status === 'executing' && r.key !== null)
        .map((r) => r.key as string),
    );
  }

  insert(
    id: string,
    options: {
      key: string | null;
      corrKey: string | null;
      eligible: boolean;
      parent?: string | null;
    },
  ): void {
    this.rows.set(id, {
      id,
      status: 'runnable',
      step: 'start',
      seq: 0,
      attempt: 0,
      claimSeq: 0,
      worker: null,
      leaseExpired: false,
      awaits: null,
      deadline: 'none',
      eligible: options.eligible,
      inbox: [],
      parent: options.parent ?? null,
      childrenPending: 0,
      key: options.key,
      corrKey: options.corrKey,
      reaps: 0,
      suspect: false,
      aged: false,
      presented: [],
      cancelRequested: false,
    });
  }

  /** Rows a claim may take now (docs/design.md §5.3): runnable, due, key not executing. */
  claimable(): MRow[] {
    const busy = this.executingKeys();
    return [...this.rows.values()].filter(
      (r) => r.status === 'runnable' && r.eligible && (r.key === null || !busy.has(r.key)),
    );
  }

  adoptClaim(id: string, worker: string, claimSeq: number): void {
    const r = this.must(id);
    r.status = 'executing';
    r.worker = worker;
    r.claimSeq = claimSeq;
    r.leaseExpired = false;
  }

  /** The ownership guard plus the fencing token (docs/design.md §6.1, §26.1). */
  owns(claim: MClaim): boolean {
    const r = this.rows.get(claim.id);
    return (
      r !== undefined &&
      r.status === 'executing' &&
      r.worker === claim.worker &&
      r.claimSeq === claim.claimSeq
    );
  }

  /**
   * Applies a committed outcome (docs/design.md §2.4 table, §6.3). `presented` = the awaited signal ids
   * of the claim; `children` = ids of the children that landed (spawn).
   */
  applyOutcome(
    claim: MClaim,
    kind: OutcomeKind,
    presented: readonly string[],
    children: readonly string[],
  ): void {
    const r = this.must(claim.id);
    const clearClaim = (): void => {
      r.worker = null;
      r.leaseExpired = false;
      r.reaps = 0;
      r.suspect = false;
      r.deadline = 'none';
    };
    if (this.commitsAs(claim.id, kind) === 'cancel') {
      // docs/design.md §27.2: a requested cancel turns a non-terminal outcome into `cancelled`,
      // keeping step, state and attempt; the step's own outcome is dropped.
      r.status = 'cancelled';
      r.awaits = null;
      clearClaim();
      this.terminate(r);
      return;
    }
    switch (kind) {
      case 'next':
        r.status = 'runnable';
        r.step = nextStepOf(r.step);
        r.attempt = 0;
        r.seq += 1;
        r.awaits = null;
        r.eligible = true;
        this.consume(r, presented);
        clearClaim();
        return;
      case 'retry':
      case 'retryLater':
        r.status = 'runnable';
        r.attempt += 1;
        r.seq += 1;
        r.eligible = kind === 'retry';
        clearClaim();
        return;
      case 'await':
      case 'awaitTimeout': {
        r.status = 'awaiting_signal';
        r.step = 'b';
        r.attempt = 0;
        r.seq += 1;
        r.awaits = kind === 'await' ? ['x'] : ['x', 'y'];
        r.eligible = true;
        clearClaim();
        r.deadline = kind === 'awaitTimeout' ? 'future' : 'none';
        r.presented = [...presented];
        // The lost-wakeup recheck (§8.4): an unconsumed, unpresented signal it awaits wakes it.
        const awaits = r.awaits;
        if (
          r.inbox.some((s) => !s.consumed && awaits.includes(s.name) && !presented.includes(s.id))
        ) {
          r.status = 'runnable';
          r.deadline = 'none';
        }
        return;
      }
      case 'spawn0':
      case 'spawn2':
        r.status = children.length > 0 ? 'awaiting_children' : 'runnable';
        r.step = 'c';
        r.attempt = 0;
        r.seq += 1;
        r.awaits = null;
        r.childrenPending = children.length;
        r.eligible = true;
        this.consume(r, presented);
        clearClaim();
        for (const child of children) {
          this.insert(child, { key: null, corrKey: null, eligible: true, parent: r.id });
        }
        return;
      case 'done':
      case 'stop':
        r.status = kind === 'done' ? 'done' : 'failed';
        r.awaits = null;
        clearClaim();
        this.terminate(r);
        return;
    }
  }

  /** What an outcome commits as: its own kind, or `cancel` for a requested row (done and stop win). */
  commitsAs(id: string, kind: OutcomeKind): OutcomeKind | 'cancel' {
    const r = this.must(id);
    return r.cancelRequested && kind !== 'done' && kind !== 'stop' ? 'cancel' : kind;
  }

  /**
   * `cancel(target, { children: 'cascade', mode })` (docs/design.md §27.2): an ended target is
   * answered `alreadyTerminal`; otherwise every live row of its tree (descendants through ended
   * rows too) is cancelled now, or, executing without `fence`, asked to stop. A fenced claim is
   * bumped. Rows cancelled now have their inbox consumed (their awaits stay); the target's
   * parent, when the target was cancelled now, counts it as ended in its join.
   */
  cancel(id: string, fence: boolean): MCancelAnswer | null {
    const t = this.rows.get(id);
    if (!t) return null;
    if (!LIVE.includes(t.status)) return { cancelled: [], requested: [], alreadyTerminal: [id] };
    const tree = [t];
    for (let i = 0; i < tree.length; i++) {
      for (const c of this.rows.values()) if (c.parent === tree[i]!.id) tree.push(c);
    }
    const cancelled: string[] = [];
    const requested: string[] = [];
    for (const r of tree.sort(byId)) {
      if (!LIVE.includes(r.status)) continue;
      r.cancelRequested = true;
      if (r.status === 'executing' && !fence) {
        requested.push(r.id);
        continue;
      }
      if (r.status === 'executing') r.claimSeq += 1;
      // A parked row keeps its awaits and deadline for a retry to park it again (§27.3).
      if (r.status !== 'awaiting_signal') {
        r.awaits = null;
        r.deadline = 'none';
      }
      r.status = 'cancelled';
      r.worker = null;
      r.leaseExpired = false;
      for (const s of r.inbox) s.consumed = true;
      cancelled.push(r.id);
    }
    if (t.parent !== null && cancelled.includes(t.id)) this.join(t.parent);
    return { cancelled, requested, alreadyTerminal: [] };
  }

  /**
   * `retry(target)` (docs/design.md §27.3): a failed or cancelled row runs again at its step,
   * due now, attempt and reaps 0, its cancel request cleared (suspicion kept); a parent still
   * awaiting children counts it again; a parent that moved on refuses it; a correlation key a
   * live row holds meanwhile refuses it as a duplicate. A row that ended parked (it kept its
   * awaits) is parked again on them, a deadline re-armed for its original (far) timeout, unless
   * an unconsumed signal it awaits is in its inbox (then runnable, as the park's recheck).
   */
  retry(id: string): MRetryVerdict {
    const r = this.must(id);
    if (r.status !== 'failed' && r.status !== 'cancelled') return 'status';
    const parent = r.parent === null ? undefined : this.rows.get(r.parent);
    if (r.parent !== null && parent?.status !== 'awaiting_children') return 'parent';
    if (r.corrKey !== null && this.liveByCorrKey(r.corrKey)) return 'duplicate';
    const awaits = r.awaits;
    const early = awaits !== null && r.inbox.some((s) => !s.consumed && awaits.includes(s.name));
    r.status = awaits !== null && !early ? 'awaiting_signal' : 'runnable';
    r.attempt = 0;
    r.reaps = 0;
    r.eligible = true;
    r.deadline = r.status === 'awaiting_signal' && r.deadline !== 'none' ? 'future' : 'none';
    r.cancelRequested = false;
    r.worker = null;
    r.leaseExpired = false;
    // Live again: its retention counts from its next end (updated_at is refreshed).
    r.aged = false;
    if (parent) parent.childrenPending += 1;
    return 'retried';
  }

  /** A child ended: its parent's join counts it (docs/design.md §10). */
  private join(parentId: string): void {
    const p = this.rows.get(parentId);
    if (!p) return;
    p.childrenPending -= 1;
    if (p.status === 'awaiting_children' && p.childrenPending <= 0) {
      p.status = 'runnable';
      p.eligible = true;
    }
  }

  /** Terminal: whole inbox consumed, parent joined (docs/design.md §6.3 steps 4–5). */
  private terminate(r: MRow): void {
    for (const s of r.inbox) s.consumed = true;
    if (r.parent !== null) this.join(r.parent);
  }

  private consume(r: MRow, presented: readonly string[]): void {
    for (const s of r.inbox) if (presented.includes(s.id)) s.consumed = true;
  }

  /** Heartbeat: the claims still owned are renewed. */
  heartbeat(claims: readonly MClaim[]): string[] {
    const renewed = claims.filter((c) => this.owns(c)).map((c) => c.id);
    for (const id of renewed) this.must(id).leaseExpired = false;
    return renewed;
  }

  /** Reaper sweep (docs/design.md §17.2, §26.5, §8.5). */
  reap(): { reaped: string[]; poisoned: string[]; timeouts: string[]; cancelled: string[] } {
    const reaped: string[] = [];
    const poisoned: string[] = [];
    const cancelled: string[] = [];
    for (const r of [...this.rows.values()].sort(byId)) {
      if (r.status !== 'executing' || !r.leaseExpired) continue;
      r.worker = null;
      r.leaseExpired = false;
      // A requested cancel whose step never returned: its lease ends it (§27.2), attempt,
      // reaps and suspicion unchanged.
      if (r.cancelRequested) {
        r.status = 'cancelled';
        r.awaits = null;
        cancelled.push(r.id);
        continue;
      }
      r.reaps += 1;
      // Every model claim runs its step (Pick marks it), so every reap counts: the one that
      // reaches the cap makes the row a suspect, the next one (its solo run) fails it.
      if (r.suspect) {
        r.status = 'failed';
        r.awaits = null;
        poisoned.push(r.id);
      } else {
        if (r.reaps >= MAX_REAPS) r.suspect = true;
        r.status = 'runnable';
        r.attempt += 1;
        reaped.push(r.id);
      }
    }
    for (const id of [...poisoned, ...cancelled].sort((a, b) => byId({ id: a }, { id: b }))) {
      this.terminate(this.must(id));
    }
    const timeouts: string[] = [];
    for (const r of this.rows.values()) {
      if (r.status === 'awaiting_signal' && r.deadline === 'past') {
        r.status = 'runnable';
        r.eligible = true;
        r.deadline = 'none';
        timeouts.push(r.id);
      }
    }
    return { reaped, poisoned, timeouts, cancelled };
  }

  /**
   * Startup reclaim (docs/design.md §17.3) with margin 0: expired claims under the prefix, no attempt
   * bump; counts toward the poison-pill cap, and a row that would reach it, or a suspect, is
   * left for the reaper (finding F-R3).
   */
  reclaim(prefix: string): string[] {
    const out: string[] = [];
    for (const r of this.rows.values()) {
      if (
        r.status === 'executing' &&
        r.leaseExpired &&
        r.worker !== null &&
        r.worker.startsWith(prefix) &&
        r.reaps + 1 < MAX_REAPS &&
        !r.suspect &&
        !r.cancelRequested
      ) {
        r.status = 'runnable';
        r.worker = null;
        r.leaseExpired = false;
        r.reaps += 1;
        out.push(r.id);
      }
    }
    return out;
  }

  /**
   * Delivery (docs/design.md §8.1, §8.2, §26.6, §26.7): refused unless live; a dedup key stored for
   * the instance's life (consumed or not) is a duplicate that wakes nothing. A target that is no
   * longer live but still exists answers a retry of a stored dedup key as that duplicate, not as
   * no target (docs/reliability.md, "After an ambiguous answer"); by correlation key a finished
   * instance holds no key, so the caller resolves no target there.
   */
  deliver(
    target: string | null,
    name: string,
    dedup: string | null,
  ): 'no_target' | 'duplicate' | 'stored' {
    const r = target === null ? undefined : this.rows.get(target);
    if (target === null || r === undefined) return 'no_target';
    const seen = dedup !== null && r.inbox.some((s) => s.dedup === dedup);
    if (!this.isLive(target)) return seen ? 'duplicate' : 'no_target';
    if (seen) return 'duplicate';
    if (r.status === 'awaiting_signal' && r.awaits?.includes(name)) {
      r.status = 'runnable';
      r.eligible = true;
      r.deadline = 'none';
    }
    return 'stored';
  }

  addSignal(target: string, signal: MSignal): void {
    this.must(target).inbox.push(signal);
  }

  /** GC (docs/design.md §18.1): aged terminal rows, sparing children of live parents. */
  gc(): string[] {
    const gone = [...this.rows.values()]
      .filter((r) => !LIVE.includes(r.status) && r.aged && !this.isLive(r.parent))
      .map((r) => r.id);
    for (const id of gone) this.rows.delete(id);
    for (const r of this.rows.values()) {
      if (r.parent !== null && gone.includes(r.parent)) r.parent = null;
    }
    return gone;
  }

  must(id: string): MRow {
    const r = this.rows.get(id);
    if (!r) throw new Error(`model has no row ${id}`);
    return r;
  }
}

export function nextStepOf(step: string): string {
  return step === 'b' ? 'c' : 'b';
}

export function byId(a: { id: string }, b: { id: string }): number {
  return a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}
