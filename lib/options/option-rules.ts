import { ConfigurationError } from '../errors/configuration.error';
import type { ResolvedOptions } from './resolved-options';

/**
 * Rules that relate several options, applied after each option is resolved on its own. A rule
 * throws a ConfigurationError naming the option to change, or returns the options it adjusts.
 */
export type OptionRule = (options: ResolvedOptions) => Partial<ResolvedOptions> | undefined;

export const OPTION_RULES: readonly OptionRule[] = [
  function heartbeatBelowLease({ heartbeatInterval, leaseTtl }) {
    if (heartbeatInterval >= leaseTtl) {
      throw new ConfigurationError(
        'heartbeatInterval',
        `must be below leaseTtl (${leaseTtl} ms); keep 3 × heartbeatInterval ≲ leaseTtl`,
      );
    }
    return undefined;
  },
  function pollCeilingAtLeastBase({ pollInterval, maxPollInterval }) {
    return maxPollInterval < pollInterval ? { maxPollInterval: pollInterval } : undefined;
  },
  function everyLocalQueueFlushed({ queues, flushers }) {
    for (const queue of Object.keys(queues)) {
      if (!flushers.some((f) => f.queues === 'all' || f.queues.includes(queue))) {
        throw new ConfigurationError('flushers', `no flusher covers local queue "${queue}"`);
      }
    }
    return undefined;
  },
];
