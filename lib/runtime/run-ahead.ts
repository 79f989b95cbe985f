import { limitName } from '../fsm/limit-key';
import { gateHolder, type Limiter, type LimiterSlot } from '../limiter/limiter.interface';
import type { ResolvedOptions } from '../options/resolved-options';
import type { Telemetry } from '../telemetry/telemetry';
import type { ClaimedRow } from './claimed-row';
import type { FlushEntry, FlushReply, TransitionEntry } from './flush-entry';
import { emitThrottled } from './throttle-telemetry';

/** What the executor does after {@link RunAhead.advance}. */
export type RunAheadStep =
  /** Run this row (the next step, on the same claim) now. */
  | { readonly kind: 'continue'; readonly row: ClaimedRow }
  /** Not inlined: commit the `next` entry the normal way (the row is requeued). */
  | { readonly kind: 'requeue' }
  /** The chain ended here with this flusher reply (continue stale/failed, or a denied requeue). */
  | { readonly kind: 'ended'; readonly reply: FlushReply }
  /** An engine-internal failure after the continue committed: the crash path (docs/design.md §2.7). */
  | { readonly kind: 'crash'; readonly error: string };

/**
 * Inline execution (docs/design.md §7): a `next` whose FSM or outcome asks for it runs the following
 * step in the same executor, on the claim it already holds, instead of requeueing the row:
 *
 * 1. The guarded **continue** commits first, through the normal flusher: the row stays
 *    executing under the same worker and fencing token, its lease renewed; new step, state and
 *    rate key, attempt 0, awaited signals consumed, no slot credited. Stale ⇒ the chain ends and
 *    nothing is admitted. NOTE: commit-before-admit is a correctness invariant — the PostgreSQL
 *    admit stamps shards by id without a guard, so a chain that lost its claim must never reach it.
 * 2. Then admission, when the next step needs it: its rate token, or a slot for a newly adopted
 *    configured key. Denied ⇒ requeued by a normal `next` commit, which frees the held slot
 *    (`run_ahead:yield`, `throttled`).
 * 3. Admitted ⇒ the old slot is credited only if the key changed, the held row's slot is
 *    updated (heartbeats renew the right one), inbox and children are re-read (1 statement),
 *    `run_ahead:continue`, and the step runs.
 *
 * Key hand-off: kept — nothing; `null` — key and shard cleared, old slot credited; a new
 * configured key — provisional shard 0, admission stamps the drawn one; a new **unconfigured**
 * key is never inlined (an executing NULL-shard row could trip the K = 1 arbiter and abort the
 * shared flush): requeued, `run_ahead:yield` `contended`. A chain holds one slot and skips
 * priority re-evaluation until it yields; a rate token admitted for a step whose commit later
 * goes stale is not refunded.
 */
export class RunAhead {
  constructor(
    private readonly options: ResolvedOptions,
    private readonly telemetry: Telemetry,
    private readonly limiter: Limiter,
    private readonly enrich: (rows: readonly ClaimedRow[]) => Promise<void>,
    private readonly commit: (entry: FlushEntry) => Promise<FlushReply>,
  ) {}

  /**
   * Hands `entry` (an inline `next` of `current`) over to its next step. `held` is the row
   * object the scheduler holds in flight for this claim: its slot is kept current.
   */
  async advance(
    held: ClaimedRow,
    current: ClaimedRow,
    entry: TransitionEntry,
  ): Promise<RunAheadStep> {
    const nextStep = entry.nextStep as string;
    const keyChanged = entry.setKey && entry.concurrencyKey !== current.concurrencyKey;
    const key = keyChanged ? entry.concurrencyKey : current.concurrencyKey;
    const gated = key !== null && this.options.concurrencyLimits[limitName(key)] !== undefined;
    if (keyChanged && key !== null && !gated) {
      this.yielded(current, nextStep, 'contended');
      return { kind: 'requeue' };
    }

    // 1. continue, guarded, before anything is admitted
    // Object.assign, not a spread literal: the spread form is slow on Node 20 (see outcome-entry.ts).
    const cont: TransitionEntry = Object.assign({}, entry, {
      kind: 'continue' as const,
      setKey: keyChanged,
      slot: null,
      leaseMs: this.options.leaseTtl,
    });
    const reply = await this.commit(cont);
    if (reply === 'stale') {
      this.telemetry.emit(
        'outcome:stale',
        { count: 1 },
        { id: current.id, fsm: current.fsm, step: current.step, kind: 'next' },
      );
      return { kind: 'ended', reply };
    }
    if (reply === 'error') return { kind: 'crash', error: 'the inline continue commit failed' };
    if (reply === 'cancelled') {
      // A cancel was requested while the step ran: the continue committed the row cancelled
      // (docs/design.md §27.2), so the chain ends and the slot it held is returned.
      const held0 = current.slot ?? null;
      if (held0) await this.limiter.credit([held0]);
      held.slot = null;
      return { kind: 'ended', reply };
    }

    // 2. admission of what the next step needs that the chain does not hold yet
    const oldSlot = current.slot ?? null;
    let slot: LimiterSlot | null = keyChanged ? null : oldSlot;
    let shard = keyChanged ? (key === null ? null : 0) : current.concurrencyShard;
    const gateKey = keyChanged && gated ? key : null;
    if (gateKey !== null || entry.rateLimit !== null) {
      let admitted: { id: string; slot: LimiterSlot | null } | undefined;
      try {
        const result = await this.limiter.admit(
          [
            {
              id: current.id,
              gateKey,
              rateKey: entry.rateLimit,
              weight: entry.weight,
              holder: gateHolder(current.id, current.claimSeq),
            },
          ],
          current.queue,
        );
        emitThrottled(this.telemetry, result.throttled, current.queue);
        admitted = result.admitted.find((a) => a.id === current.id);
      } catch (err) {
        return { kind: 'crash', error: `inline admission failed: ${String(err)}` };
      }
      if (!admitted) {
        // Requeue through a normal next: the row becomes runnable at its new step (the key the
        // continue set is kept) and the slot the chain held is credited after that commit.
        this.yielded(current, nextStep, 'throttled');
        const requeue: TransitionEntry = Object.assign({}, entry, {
          kind: 'next' as const,
          setKey: false,
          awaitedIds: [],
          slot: oldSlot,
          inline: false,
          // The continue that moved the row recorded this step already (docs/design.md §28.1).
          history: 0 as const,
        });
        const requeued = await this.commit(requeue);
        if (requeued === 'stale') {
          this.telemetry.emit(
            'outcome:stale',
            { count: 1 },
            { id: current.id, fsm: current.fsm, step: nextStep, kind: 'next' },
          );
        }
        if (requeued === 'error') {
          return { kind: 'crash', error: 'the requeue commit of a throttled inline chain failed' };
        }
        return { kind: 'ended', reply: requeued };
      }
      if (gateKey !== null) {
        slot = admitted.slot;
        shard = admitted.slot?.shard ?? 0;
      }
    }

    // 3. hand the slot over, re-read inbox and children, run
    if (keyChanged && oldSlot) await this.limiter.credit([oldSlot]);
    held.slot = slot;
    const row: ClaimedRow = Object.assign({}, current, {
      step: nextStep,
      state: JSON.parse(entry.stateText as string) as Record<string, unknown>,
      attempt: 0,
      awaits: null,
      concurrencyKey: key,
      concurrencyShard: shard,
      rateLimit: entry.rateLimit,
      weight: entry.weight,
      gated: keyChanged ? gated : current.gated,
      slot,
      inbox: [],
      children: [],
    });
    try {
      await this.enrich([row]);
    } catch (err) {
      return { kind: 'crash', error: `inline re-enrichment failed: ${String(err)}` };
    }
    this.telemetry.emit(
      'run_ahead:continue',
      { count: 1 },
      { id: current.id, fsm: current.fsm, from: current.step, to: nextStep },
    );
    return { kind: 'continue', row };
  }

  private yielded(row: ClaimedRow, to: string, reason: 'throttled' | 'contended'): void {
    this.telemetry.emit(
      'run_ahead:yield',
      { count: 1 },
      { id: row.id, fsm: row.fsm, step: row.step, to, reason },
    );
  }
}
