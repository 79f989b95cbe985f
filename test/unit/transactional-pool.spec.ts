import type { FsmDefinition } from '../../lib/discovery/fsm-definition';
import { transactionalPoolWarning } from '../../lib/runtime/transactional-pool';

// docs/transactional-steps.md "Pool size": each running transactional step holds a pooled
// connection; the engine needs 2 more (heartbeat, flush).

function definition(queue: string, transactional: string[]): FsmDefinition {
  return {
    queue,
    transactional: new Set(transactional),
  } as Partial<FsmDefinition> as FsmDefinition;
}

describe('transactionalPoolWarning', () => {
  const defs = [
    definition('tx', ['charge']),
    definition('plain', []),
    definition('tx2', ['perform']),
  ];

  it('is silent when the transactional queues plus the engine fit in the pool', () => {
    expect(transactionalPoolWarning(defs, { tx: 4, tx2: 4, plain: 50 }, 10)).toBeUndefined();
  });

  it('warns naming the queues, the connections they may hold and the pool size', () => {
    const warning = transactionalPoolWarning(defs, { tx: 5, tx2: 4, plain: 50 }, 10);
    expect(warning).toContain('"tx", "tx2"');
    expect(warning).toContain('may hold 9 pooled connections');
    expect(warning).toContain('pool has 10');
  });

  it('counts only the queues this node runs, and only FSMs with transactional steps', () => {
    expect(transactionalPoolWarning(defs, { plain: 500 }, 10)).toBeUndefined();
    expect(transactionalPoolWarning(defs, { tx2: 9 }, 10)).toContain('"tx2"');
    expect(transactionalPoolWarning([], { tx: 100 }, 10)).toBeUndefined();
  });
});
