import { reasonText } from '../fsm/outcome';

/** The most a thrown error's stored text takes in `last_error`, UTF-8 bytes (docs/design.md §28.1). */
export const MAX_ERROR_TEXT_BYTES = 8192;

const TRIMMED = '\n    … (trimmed)';

/**
 * The stored text of a value a step threw: for an `Error`, its class name and message on the
 * first line (the class name is the constructor's, so `class Declined extends Error` is named
 * even without its own `name`), then its stack frames; anything else as `stop()` would store
 * it. At most {@link MAX_ERROR_TEXT_BYTES}: the frames are cut first, at a line end.
 */
export function thrownErrorText(err: unknown): string {
  if (!(err instanceof Error)) return trimToBytes(reasonText(err), MAX_ERROR_TEXT_BYTES);
  const head = errorHead(err);
  const frames = stackFrames(err);
  const text = frames === '' ? head : `${head}\n${frames}`;
  if (Buffer.byteLength(text, 'utf8') <= MAX_ERROR_TEXT_BYTES) return text;
  const headBytes = Buffer.byteLength(head, 'utf8');
  const room = MAX_ERROR_TEXT_BYTES - headBytes - Buffer.byteLength(TRIMMED, 'utf8') - 1;
  if (room <= 0) return trimToBytes(head, MAX_ERROR_TEXT_BYTES);
  const kept = trimToBytes(frames, room);
  const cut = kept.lastIndexOf('\n');
  return `${head}\n${cut > 0 ? kept.slice(0, cut) : kept}${TRIMMED}`;
}

/**
 * A thrown value as a history row keeps it (docs/design.md §28.1): JSON text of
 * `{ name, message, stack }` — the class name (as {@link errorHead} names it), the message and
 * the stack frames — at most {@link MAX_ERROR_TEXT_BYTES} of text: the stack is cut first, then
 * the message. A thrown non-Error is `{ name: typeof value, message: its text, stack: null }`.
 */
export function thrownErrorJson(err: unknown): string {
  if (!(err instanceof Error)) {
    return JSON.stringify({
      name: err === null ? 'null' : typeof err,
      message: trimToBytes(reasonText(err), MAX_ERROR_TEXT_BYTES),
      stack: null,
    });
  }
  const head = errorHead(err);
  const colon = err.message === '' ? -1 : head.indexOf(': ');
  const name = colon < 0 ? head : head.slice(0, colon);
  const message = trimToBytes(err.message, MAX_ERROR_TEXT_BYTES / 2);
  const room =
    MAX_ERROR_TEXT_BYTES - Buffer.byteLength(name, 'utf8') - Buffer.byteLength(message, 'utf8');
  const frames = stackFrames(err);
  let stack: string | null = frames === '' ? null : frames;
  if (stack !== null && Buffer.byteLength(stack, 'utf8') > room) {
    const kept = trimToBytes(stack, Math.max(0, room - Buffer.byteLength(TRIMMED, 'utf8')));
    const cut = kept.lastIndexOf('\n');
    stack = `${cut > 0 ? kept.slice(0, cut) : kept}${TRIMMED}`;
  }
  return JSON.stringify({ name, message, stack });
}

/** `Class: message` (or `Class` alone for an empty message): the first line of the stored text. */
export function errorHead(err: Error): string {
  const ctor: unknown = (err as { constructor?: unknown }).constructor;
  const className = typeof ctor === 'function' && ctor.name !== '' ? ctor.name : err.name;
  const name =
    err.name !== 'Error' && err.name !== className ? `${className} [${err.name}]` : className;
  return err.message === '' ? name : `${name}: ${err.message}`;
}

/** The first line of a thrown value's stored text, for log lines (at most 500 characters). */
export function describeThrown(err: unknown): string {
  const head = err instanceof Error ? errorHead(err) : reasonText(err);
  const line = head.split('\n')[0] ?? '';
  return line.length > 500 ? `${line.slice(0, 500)}…` : line;
}

/** The `at …` lines of the stack (V8 starts a stack with `name: message`, which is dropped). */
function stackFrames(err: Error): string {
  const stack = typeof err.stack === 'string' ? err.stack : '';
  const lines = stack.split('\n');
  const first = lines.findIndex((line) => /^\s+at /.test(line));
  return first < 0 ? '' : lines.slice(first).join('\n');
}

function trimToBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  // Code point by code point, so a surrogate pair is never split.
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char, 'utf8');
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += char.length;
  }
  return text.slice(0, end);
}
