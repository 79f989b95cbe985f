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
export type { InstanceView } from '../instance/instance-view';
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
export * from '../errors';
