// The public surface of gen-durable, and nothing else.
export { GenDurableModule } from './gen-durable.module';
export type { GenDurableModuleExtras } from './gen-durable.module-definition';
export { DEFAULT_ENGINE_NAME, type DurableStatus } from './gen-durable.constants';
export type * from './options/gen-durable-options.interface';
export {
  DurableFsm,
  type DurableFsmOptions,
  type StateCodec,
} from './decorators/durable-fsm.decorator';
export { Step, STEP_END, type StepOptions } from './decorators/step.decorator';
export { UseStepInterceptors } from './decorators/use-step-interceptors.decorator';
export type { DurableStepInterceptor } from './fsm/step-interceptor';
export type { DurableRequest } from './fsm/durable-request';
export type {
  FsmSchemas,
  InsertOptionsFor,
  SchemaResult,
  SchemaSignal,
  SchemaSignalInput,
  SchemaSignalName,
  SchemaState,
  SchemaStateInput,
  SchemaStepContext,
  SchemasOf,
  SchemaTyped,
  SchemaTypedClass,
  StandardSchemaV1,
} from './fsm/fsm-schemas';
export {
  OnDurableEvent,
  type OnDurableEventOptions,
} from './decorators/on-durable-event.decorator';
export type {
  DurableEvent,
  DurableEventKind,
  FinishedInstance,
  FinishedStatus,
} from './fsm/durable-event';
export type { FsmGraph, FsmGraphEdge, FsmGraphStep } from './fsm/fsm-graph';
export type {
  GateStatus,
  LimitDeclaration,
  LimiterStatus,
  RateBucketStatus,
} from './control/limiter-status';
export type { ExplainCode, ExplainDetail, ExplainReason, Explanation } from './control/explanation';
export type {
  OverviewPoint,
  QueueOverview,
  QueueOverviewCounts,
  StatsOverview,
  StatsOverviewOptions,
} from './control/stats-overview';
export { renderFsmGraphSvg, type StepCount } from './graph/fsm-graph-svg';
export { DurableCron } from './decorators/durable-cron.decorator';
export type {
  CronFireInfo,
  DurableCronOptions,
  MissedPolicy,
  OverlapPolicy,
  ScheduleFields,
  ScheduleSpec,
  ScheduleView,
} from './cron/schedule-spec';
export type { Schedules } from './cron/schedules';
export { InjectEngine } from './decorators/inject-engine.decorator';
export { EngineService } from './engine/engine.service';
export type {
  ControlSchedules,
  FsmRef,
  InstanceControl,
  InboxSignal,
  LiveFsmVersion,
  QueueBacklog,
  RegisteredFsm,
} from './control/instance-control';
export type { Target } from './control/target';
export type {
  CancelChildren,
  CancelMode,
  CancelOptions,
  CancelResult,
} from './control/cancel-options';
export type { RetryOptions } from './control/retry-options';
export type { HoldOptions, HoldResult, ReleaseOptions } from './control/hold-options';
export type {
  BlockedSequence,
  BlockedSequencesOptions,
  SequenceHeadStatus,
  SkipSequenceHeadResult,
} from './control/blocked-sequence';
export type {
  FairnessHead,
  FairnessHeadsOptions,
  FairnessNextRow,
  FairQueueHeads,
} from './control/fairness-head';
export type {
  BulkOptions,
  BulkResult,
  CancelAllOptions,
  RetryAllOptions,
} from './control/bulk-options';
export type { PurgeAllOptions, PurgeAllResult, PurgeOptions } from './control/purge-options';
export type { ForkOptions } from './control/fork-options';
export type { AwaitInstanceOptions } from './control/await-options';
export type { AwaitUntil } from './instance/await-answer';
export type {
  HistoryEntry,
  HistoryError,
  HistoryKind,
  HistoryLevel,
  HistoryPage,
} from './instance/history-entry';
export { getEngineToken } from './gen-durable.constants';
export type { InsertOptions } from './fsm/insert-options.interface';
export type { OnHeadFailure } from './fsm/sequence-policy';
export type { AwaitResult, InstanceView } from './instance/instance-view';
export type {
  CountOptions,
  InstanceCount,
  InstanceFilter,
  ListPage,
  ListResult,
} from './control/instance-filter';
export type {
  CappedCount,
  PauseQueueResult,
  QueuePause,
  QueueStatus,
  ResumeQueueResult,
} from './instance/queue-status';
export {
  awaitSignal,
  type ChildSpec,
  done,
  type LimitKey,
  next,
  type NextOptions,
  type Outcome,
  type OutcomeKind,
  retry,
  scheduleChildren,
  sleep,
  type SleepDuration,
  stop,
  throttle,
  type ThrottleOptions,
} from './fsm/outcome';
export {
  stepAbortReason,
  type StepAbortCause,
  type StepAbortReason,
  type StepAbortReasons,
} from './fsm/step-abort';
export { cancel, jobError, type JobResult } from './fsm/job-results';
export type { ChildView, Signal, StepContext, TransactionalStepContext } from './fsm/step-context';
export { GenDurableMigration } from './schema/gen-durable.migration';
export {
  type HostAddress,
  multiHostClient,
  type MultiHostClientClass,
  type MultiHostClientOptions,
} from './db/multi-host-client';
export type { MigrationOptions } from './schema/migrator';
export type {
  GenDurableEvent,
  GenDurableEventName,
  TelemetryCount,
  TelemetryNone,
  TelemetryPayloads,
  TelemetryRow,
  TypedGenDurableEvent,
} from './telemetry/telemetry-events';
export type { EntryKind } from './fsm/outcome-kinds';
export type { Retention, RetentionOverride } from './fsm/retention';
export * from './errors';
export {
  GenDurableCallbacksModule,
  type CallbacksModuleOptions,
} from './callbacks/callbacks.module';
export { GenDurableStreamsModule, type StreamsModuleOptions } from './streams/streams.module';
export type {
  DurableStream,
  ReadStreamOptions,
  StreamChunk,
  StreamInfo,
} from './fsm/durable-stream';
export {
  GenDurableExceptionFilter,
  type GenDurableErrorBody,
} from './http/gen-durable-exception.filter';
