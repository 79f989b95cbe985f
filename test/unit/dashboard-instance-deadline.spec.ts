import type { Explanation } from '../../lib/control/explanation';
import type { InstanceView } from '../../lib/instance/instance-view';
import { instanceView } from '../../lib/dashboard/views/instance.view';

// The dashboard's instance page shows the instance deadline (docs/operations-control.md
// "Instance deadlines") in its row table, as every other time: UTC, the ISO text as tooltip.

const at = new Date('2026-01-02T03:04:05.000Z');

function instance(deadline: Date | null): InstanceView {
  return {
    id: '7',
    fsm: 'checkout',
    fsmVersion: 1,
    step: 'start',
    status: 'awaiting_signal',
    state: {},
    result: null,
    lastError: null,
    attempt: 0,
    awaits: ['paid'],
    awaitDeadline: null,
    queue: 'default',
    priority: 0,
    eligibleAt: at,
    concurrencyKey: null,
    concurrencyShard: null,
    rateLimit: null,
    weight: 1,
    lockedBy: null,
    leaseExpiresAt: null,
    parentId: null,
    childrenPending: 0,
    correlationKey: null,
    correlationScope: [],
    claimSeq: '1',
    reaps: 0,
    cancelRequestedAt: null,
    cancelReason: null,
    insertedAt: at,
    updatedAt: at,
    progress: null,
    progressAt: null,
    forkedFrom: null,
    heldAt: null,
    heldReason: null,
    dedupUntil: null,
    deadline,
  };
}

function page(
  deadline: Date | null,
  explanation: Explanation | { readonly error: string } = { error: 'gone' },
): string {
  return instanceView(
    { base: '', csrf: 'token', canAct: false, engine: 'default' },
    {
      instance: instance(deadline),
      inbox: [],
      children: [],
      moreChildren: false,
      history: [],
      explanation,
      steps: [],
    },
  ).text;
}

describe('dashboard instance page: deadline', () => {
  it('shows the deadline row with the time, or a dash when none', () => {
    const deadline = new Date('2099-05-06T07:08:09.123Z');
    expect(page(deadline)).toMatch(
      /<th>deadline<\/th>\s*<td><time datetime="2099-05-06T07:08:09.123Z"[^>]*>2099-05-06 07:08:09<\/time>/,
    );
    expect(page(null)).toMatch(/<th>deadline<\/th>\s*<td><span class="muted">—<\/span>/);
  });

  it("shows explain's deadline reason among the reasons", () => {
    const deadline = new Date('2099-05-06T07:08:09.123Z');
    const text = `its deadline is ${deadline.toISOString()} (in 60 s): if it has not ended by then, it moves to step expired`;
    const html = page(deadline, {
      id: '1',
      fsm: 'order',
      version: 1,
      status: 'runnable',
      step: 'start',
      queue: 'default',
      at,
      reasons: [
        {
          code: 'deadline',
          text,
          blocking: false,
          details: { deadline, overdue: false, action: 'onDeadline', step: 'expired' },
        },
      ],
    });
    expect(html).toMatch(/<span class="badge"\s*>deadline<\/span\s*>/);
    expect(html).toContain('it moves to step expired');
  });
});
