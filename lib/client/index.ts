// The `gen-durable/client` entry (docs/design.md §32; docs/client.md): a Nest-free client of a
// gen-durable database. Nothing here loads NestJS, TypeORM or rxjs.
export { GenDurableClient, type ClientSchedules } from './gen-durable-client';
export type {
  ClientCancelOptions,
  ClientConnection,
  ClientFsm,
  ClientInsertOptions,
  ClientRetryOptions,
  GenDurableClientOptions,
} from './client-options';
export type {
  ControlSchedules,
  InboxSignal,
  InstanceControl,
  LiveFsmVersion,
  QueueBacklog,
  RegisteredFsm,
} from '../control/instance-control';
export type { Target } from '../control/target';
export type { ReadStreamOptions, StreamChunk, StreamInfo } from '../fsm/durable-stream';
export type { AwaitResult, InstanceView } from '../instance/instance-view';
export type { AwaitInstanceOptions } from '../control/await-options';
export type { AwaitUntil } from '../instance/await-answer';
export type {
  CountOptions,
  InstanceCount,
  InstanceFilter,
  ListPage,
  ListResult,
} from '../control/instance-filter';
export type { CancelResult } from '../control/cancel-options';
export type { HistoryEntry, HistoryPage } from '../instance/history-entry';
export type {
  CappedCount,
  PauseQueueResult,
  QueueStatus,
  ResumeQueueResult,
} from '../instance/queue-status';
export type { ScheduleView } from '../cron/schedule-spec';
export type { BulkResult, CancelAllOptions, RetryAllOptions } from '../control/bulk-options';
export type { CancelOptions } from '../control/cancel-options';
export type { RetryOptions } from '../control/retry-options';
export type { HoldOptions, HoldResult, ReleaseOptions } from '../control/hold-options';
export type {
  BlockedSequence,
  BlockedSequencesOptions,
  SequenceHeadStatus,
  SkipSequenceHeadResult,
} from '../control/blocked-sequence';
export type {
  FairnessHead,
  FairnessHeadsOptions,
  FairnessNextRow,
  FairQueueHeads,
} from '../control/fairness-head';
export type { PurgeAllOptions, PurgeAllResult, PurgeOptions } from '../control/purge-options';
export type { ForkOptions } from '../control/fork-options';
export type { Explanation } from '../control/explanation';
export type { LimiterStatus } from '../control/limiter-status';
export type { StatsOverview, StatsOverviewOptions } from '../control/stats-overview';
export type { FsmRef } from '../control/instance-control';
export type { FsmGraph } from '../fsm/fsm-graph';
export type { InsertOptions } from '../fsm/insert-options.interface';
export type { HistoryError, HistoryKind } from '../instance/history-entry';
export type { QueuePause } from '../instance/queue-status';
export type { DurableStatus } from '../gen-durable.constants';
export type { MissedPolicy, OverlapPolicy } from '../cron/schedule-spec';
export type { Schedules } from '../cron/schedules';
export * from '../errors';
