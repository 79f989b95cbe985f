/** One FSM version that live instances run on, with how many do (`liveFsmVersions()`, the CLI's `verify`). */
export interface LiveFsmVersion {
  readonly fsm: string;
  readonly version: number;
  readonly instances: number;
}
