import { retryWhileUnreachable } from '../../lib/db/retry-while-unreachable';

// The boot retry (docs/operations.md, "Boot"): only connection-level errors are retried, within
// the time budget; anything else is thrown on the first try.

const refused = (): Error =>
  Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
const missingSchema = (): Error =>
  Object.assign(new Error('relation "gen_durable_meta" does not exist'), {
    code: '42P01',
    severity: 'ERROR',
  });

describe('retryWhileUnreachable', () => {
  it('retries connection-level errors until the call succeeds', async () => {
    let calls = 0;
    const retried: string[] = [];
    const answer = await retryWhileUnreachable(
      'probe',
      async () => {
        calls++;
        if (calls < 3) throw refused();
        return 'ok';
      },
      { timeoutMs: 10_000, firstPauseMs: 1, onRetry: (what) => retried.push(what) },
    );
    expect(answer).toBe('ok');
    expect(calls).toBe(3);
    expect(retried).toEqual(['probe', 'probe']);
  });

  it('throws any other error at once', async () => {
    let calls = 0;
    await expect(
      retryWhileUnreachable(
        'probe',
        async () => {
          calls++;
          throw missingSchema();
        },
        { timeoutMs: 10_000, firstPauseMs: 1 },
      ),
    ).rejects.toThrow('does not exist');
    expect(calls).toBe(1);
  });

  it('throws the connection error once the budget is spent', async () => {
    let calls = 0;
    await expect(
      retryWhileUnreachable(
        'probe',
        async () => {
          calls++;
          throw refused();
        },
        { timeoutMs: 0, firstPauseMs: 1 },
      ),
    ).rejects.toThrow('ECONNREFUSED');
    expect(calls).toBe(1);
  });
});
