import type { DurableStatus } from '../gen-durable.constants';

/**
 * A validated instance filter as the list, count and bulk statements take it: every field
 * present, null when it does not narrow (built by `resolveInstanceFilter` in lib/control).
 */
export interface ResolvedFilter {
  readonly fsms: readonly string[] | null;
  readonly statuses: readonly DurableStatus[] | null;
  readonly queue: string | null;
  readonly step: string | null;
  readonly correlationKey: string | null;
  readonly correlationKeyPrefix: string | null;
  readonly parentId: string | null;
  readonly createdAfter: Date | null;
  readonly createdBefore: Date | null;
  readonly updatedAfter: Date | null;
  readonly updatedBefore: Date | null;
  readonly errorContains: string | null;
}
