// gen-durable/health: Terminus health checks (docs/design.md §21). A separate entry point so that apps
// without the optional peer @nestjs/terminus never load it.
export { GenDurableHealthModule } from './gen-durable-health.module';
export {
  GenDurableHealthIndicator,
  type LeaseBacklogOptions,
  type RunnableBacklogOptions,
  type ScheduleLagOptions,
  type SchedulerLivenessOptions,
} from './gen-durable-health.indicator';
