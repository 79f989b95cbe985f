import { MAX_ERROR_TEXT_BYTES, thrownErrorJson } from '../../lib/runtime/step-failure';

// A thrown error as a history row keeps it (docs/design.md §28.1): class name, message and
// stack frames, at most 8 KiB of text, the stack cut first.

describe('thrownErrorJson', () => {
  it('keeps the class name, the message and the frames', () => {
    class Declined extends Error {}
    const parsed = JSON.parse(thrownErrorJson(new Declined('card declined'))) as {
      name: string;
      message: string;
      stack: string;
    };
    expect(parsed.name).toBe('Declined');
    expect(parsed.message).toBe('card declined');
    expect(parsed.stack).toMatch(/^\s+at /);
  });

  it('trims a long stack to 8 KiB of text, and a non-Error is named by its type', () => {
    const err = new RangeError('x'.repeat(3000));
    err.stack = `RangeError: …\n${'    at frame (file.ts:1:1)\n'.repeat(2000)}`;
    const parsed = JSON.parse(thrownErrorJson(err)) as {
      name: string;
      message: string;
      stack: string;
    };
    const bytes = Buffer.byteLength(parsed.name + parsed.message + parsed.stack, 'utf8');
    expect(bytes).toBeLessThanOrEqual(MAX_ERROR_TEXT_BYTES);
    expect(parsed.message).toHaveLength(3000);
    expect(parsed.stack).toMatch(/… \(trimmed\)$/);
    expect(JSON.parse(thrownErrorJson('plain'))).toEqual({
      name: 'string',
      message: 'plain',
      stack: null,
    });
  });
});
