import type { ClaimedRow } from '../../lib/runtime/claimed-row';
import { StepSlots, type Task } from '../../lib/runtime/step-slots';

// StepSlots counts running steps by fairness key for the tasks a fair queue starts (the slots
// kept for new keys ask whether a key runs, docs/many-tenants.md "A slot for new keys").

function task(id: string, key: string | null): Task {
  return {
    row: { id, fairnessKey: key } as unknown as ClaimedRow,
    startedAt: 0,
    done: Promise.resolve(),
    awaitingCommit: false,
  };
}

describe('StepSlots: running keys', () => {
  it('a key runs from its first start until its last step returns or finishes', () => {
    const slots = new StepSlots(4, 12);
    slots.start(task('1', 'A'), true);
    slots.start(task('2', 'A'), true);
    slots.start(task('3', null), true);
    expect(slots.keyRunning('A')).toBe(true);
    expect(slots.keyRunning(null)).toBe(true);
    expect(slots.keyRunning('B')).toBe(false);
    const freed = slots.keysFreedCount;

    slots.returned('1');
    expect(slots.keyRunning('A')).toBe(true);
    expect(slots.keysFreedCount).toBe(freed);
    slots.finish('1'); // awaiting commit: its key already stopped counting
    expect(slots.keyRunning('A')).toBe(true);

    slots.finish('2'); // the crash path: from running
    expect(slots.keyRunning('A')).toBe(false);
    expect(slots.keysFreedCount).toBe(freed + 1);
    slots.returned('3');
    expect(slots.keyRunning(null)).toBe(false);
    expect(slots.keysFreedCount).toBe(freed + 2);
    expect(slots.inFlight).toBe(0);
  });

  it('tasks started without countKey (a plain queue) are not counted', () => {
    const slots = new StepSlots(2, 6);
    slots.start(task('1', 'A'));
    expect(slots.keyRunning('A')).toBe(false);
    slots.returned('1');
    slots.finish('1');
    expect(slots.keysFreedCount).toBe(0);
    expect(slots.inFlight).toBe(0);
  });
});
