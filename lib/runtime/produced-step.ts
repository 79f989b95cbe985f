import type { FsmDefinition } from '../discovery/fsm-definition';
import type { StepContext } from '../fsm/step-context';
import type { StepSpan } from '../telemetry/otel-span-types';
import type { ClaimedRow } from './claimed-row';
import type { StepRun } from './step-run';
import type { StepTransaction } from './transactional-step';

/**
 * One step whose outcome the executor is producing: what each of its paths (returned at once,
 * a promise, stream writes, async schemas, a throw) needs, in one object (the executor's
 * `produce`, docs/design.md §2.7).
 */
export interface ProducedStep {
  readonly row: ClaimedRow;
  readonly definition: FsmDefinition;
  readonly txn: StepTransaction | undefined;
  readonly span: StepSpan | undefined;
  readonly run: StepRun;
  readonly awaitedIds: readonly string[];
  /** Built before the step is called; undefined when that failed. */
  ctx: StepContext<unknown> | undefined;
}
