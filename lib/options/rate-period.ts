import { ConfigurationError } from '../errors/configuration.error';
import { parsePositive } from './scalar-options';

const PERIOD_SECONDS: Readonly<Record<string, number>> = {
  second: 1,
  seconds: 1,
  minute: 60,
  minutes: 60,
  hour: 3600,
  hours: 3600,
  day: 86400,
  days: 86400,
};

/** A rate limit's `period` (seconds, or `[n, unit]`) in seconds, or a ConfigurationError at `path`. */
export function periodSeconds(raw: unknown, path: string): number {
  if (typeof raw === 'number') return parsePositive(raw, path);
  if (Array.isArray(raw) && raw.length === 2) {
    const [n, unit] = raw as unknown[];
    const factor = typeof unit === 'string' ? PERIOD_SECONDS[unit] : undefined;
    if (factor === undefined) {
      throw new ConfigurationError(`${path}[1]`, `unknown unit ${String(unit)}`);
    }
    return parsePositive(n, `${path}[0]`) * factor;
  }
  throw new ConfigurationError(path, 'must be seconds or [n, unit]');
}
