import type { FsmDefinition } from '../discovery/fsm-definition';
import type { StepContext } from '../fsm/step-context';
import type { StepSpan } from '../telemetry/otel-span-types';
import type { ClaimedRow } from './claimed-row';
import type { StepRun } from './step-run';
import type { StepTransaction } from './transactional-step';

/**
 * One step whose outcome the executor is producing: what each of its paths (returned at once,
 * a promise, stream writes, async schemas, a throw) needs, in one object (the executor's
 * `produce`, docs/design.md §2.7). A class rather than an object literal: it carries no
 * allocation site for V8 to pretenure (docs/performance.md "Allocation per step").
 */
export class ProducedStep {
  /** Built before the step is called; undefined when that failed. */
  ctx: StepContext<unknown> | undefined = undefined;

  constructor(
    readonly row: ClaimedRow,
    readonly definition: FsmDefinition,
    readonly txn: StepTransaction | undefined,
    readonly span: StepSpan | undefined,
    readonly run: StepRun,
    readonly awaitedIds: readonly string[],
  ) {}
}
