/**
 * The text form of a W3C trace context as `gen_durable.trace_context` and
 * `gen_durable_signals.trace_context` store it (docs/design.md §31): the `traceparent` header
 * value, then a space and the `tracestate` header value when there is one. Pure: no
 * OpenTelemetry import.
 */

/** What a stored trace context holds (the fields of an OpenTelemetry SpanContext). */
export interface StoredTraceContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
  /** The `tracestate` header value, when there was one. */
  readonly traceState: string | undefined;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** The stored text of a span context, or null for an invalid one (all-zero ids). */
export function formatTraceContext(
  traceId: string,
  spanId: string,
  traceFlags: number,
  traceState: string | undefined,
): string | null {
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return null;
  if (!/^[0-9a-f]{32}$/.test(traceId) || !/^[0-9a-f]{16}$/.test(spanId)) return null;
  const flags = (traceFlags & 0xff).toString(16).padStart(2, '0');
  const parent = `00-${traceId}-${spanId}-${flags}`;
  return traceState ? `${parent} ${traceState}` : parent;
}

/** The trace context a stored text names, or null when it is not one (never throws). */
export function parseTraceContext(text: string): StoredTraceContext | null {
  const space = text.indexOf(' ');
  const parent = space < 0 ? text : text.slice(0, space);
  const match = TRACEPARENT.exec(parent);
  if (!match) return null;
  const [, traceId, spanId, flags] = match as unknown as [string, string, string, string];
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return null;
  const state = space < 0 ? '' : text.slice(space + 1).trim();
  return {
    traceId,
    spanId,
    traceFlags: parseInt(flags, 16),
    traceState: state.length > 0 ? state : undefined,
  };
}
