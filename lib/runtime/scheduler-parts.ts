import type { ResolvedOptions } from '../options/resolved-options';
import type { Telemetry } from '../telemetry/telemetry';
import type { ClaimBuffer } from './claim-buffer';
import type { ClaimFloor } from './claim-floor';
import type { LeaseKeeper } from './lease-keeper';
import type { Picker } from './picker';
import type { PrefetchPolicy } from './prefetch-policy';
import type { QueuePause } from './queue-pause';
import type { SoloRun } from './solo-run';
import type { StepLauncher } from './step-launcher';
import type { StepSlots } from './step-slots';
import type { SuspectHold } from './suspect-hold';

/** A scheduler's collaborators, built (`buildScheduler`). */
export interface SchedulerParts {
  readonly queue: string;
  readonly options: ResolvedOptions;
  readonly launcher: StepLauncher;
  readonly picker: Picker;
  readonly telemetry: Telemetry;
  /** The node's solo run of poison-pill suspects, shared by all its schedulers (§26.5). */
  readonly solo: SoloRun;
  readonly lease: LeaseKeeper;
  readonly prefetch: PrefetchPolicy;
  readonly slots: StepSlots;
  readonly suspects: SuspectHold;
  readonly pause: QueuePause;
  /** Claimed rows waiting for a slot, and their ways back to runnable. */
  readonly buffer: ClaimBuffer;
  /** The queue's claim floor (docs/design.md §5.3.1), shared by its claims and releases. */
  readonly floor: ClaimFloor;
}
