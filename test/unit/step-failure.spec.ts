import {
  describeThrown,
  MAX_ERROR_TEXT_BYTES,
  thrownErrorText,
} from '../../lib/runtime/step-failure';

// docs/design.md §28.1: the stored text of a thrown step error.

class Declined extends Error {}

describe('thrownErrorText', () => {
  it('keeps the class name (the constructor’s, even without its own name), message and frames', () => {
    const text = thrownErrorText(new Declined('card refused'));
    expect(text).toMatch(/^Declined: card refused\n\s+at /u);
    expect(text).not.toMatch(/^Declined: card refused\nError/u);
  });

  it('names a custom name next to the class, and an empty message as the class alone', () => {
    const err = new Error('');
    err.name = 'Custom';
    expect(thrownErrorText(err).split('\n')[0]).toBe('Error [Custom]');
    const plain = new TypeError('');
    plain.stack = 'TypeError';
    expect(thrownErrorText(plain)).toBe('TypeError');
  });

  it('stores a non-Error value as stop() would', () => {
    expect(thrownErrorText('just a string')).toBe('just a string');
    expect(thrownErrorText(undefined)).toBe('undefined');
    expect(thrownErrorText({ code: 7 })).toBe('{ code: 7 }');
  });

  it('cuts the frames first, at a line end, to at most 8 KiB of UTF-8', () => {
    const err = new Error('é'.repeat(100));
    err.stack = `Error: ${err.message}\n${Array.from({ length: 500 }, (_, i) => `    at frame${i} (/app/src/file-${i}.ts:1:1)`).join('\n')}`;
    const text = thrownErrorText(err);
    expect(Buffer.byteLength(text, 'utf8')).toBeLessThanOrEqual(MAX_ERROR_TEXT_BYTES);
    const lines = text.split('\n');
    expect(lines[0]).toBe(`Error: ${'é'.repeat(100)}`);
    expect(lines[1]).toBe('    at frame0 (/app/src/file-0.ts:1:1)');
    expect(lines.at(-1)).toBe('    … (trimmed)');
    for (const line of lines.slice(1, -1)) expect(line).toMatch(/^ {4}at frame\d+ \(.*:1:1\)$/u);
  });

  it('trims a message longer than the limit on a code point boundary', () => {
    const err = new Error('😀'.repeat(5000));
    const text = thrownErrorText(err);
    expect(Buffer.byteLength(text, 'utf8')).toBeLessThanOrEqual(MAX_ERROR_TEXT_BYTES);
    expect(text).not.toMatch(/[\uD800-\uDBFF]$/u);
    expect(text.startsWith('Error: 😀')).toBe(true);
  });

  it('describeThrown is the first line, at most 500 characters', () => {
    expect(describeThrown(new Declined('a\nb'))).toBe('Declined: a');
    expect(describeThrown('x'.repeat(600))).toBe(`${'x'.repeat(500)}…`);
  });
});
