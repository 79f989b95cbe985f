import { AlreadyStartedError } from '../errors/already-started.error';

/** Engine names running in this process (docs/design.md §2.1): a second start of a name fails. */
const running = new Set<string>();

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
