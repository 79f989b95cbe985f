import { AlreadyStartedError } from '../errors/already-started.error';
import { processWide } from '../util/process-wide';

/**
 * Engine names running in this process (docs/design.md §2.1): a second start of a name fails.
 * Process-wide, so the CommonJS and the ES-module build of the package share it.
 */
const running = processWide('gen-durable.running-engines', () => new Set<string>());

export const RunningEngines = {
  acquire(name: string): void {
    if (running.has(name)) throw new AlreadyStartedError(name);
    running.add(name);
  },
  release(name: string): void {
    running.delete(name);
  },
  names(): string[] {
    return [...running];
  },
} as const;
