// gen-durable/testing: helpers for host-app tests (docs/design.md §23). A separate entry point.
export { GenDurableTesting, type DrainOptions } from './gen-durable-testing';
export type { DrainTally } from './drain-tally';
export type { TallyKind } from '../fsm/outcome-kinds';
export type { DurableStatus } from '../gen-durable.constants';
export type { InstanceView } from '../instance/instance-view';
export type { Target } from '../control/target';
