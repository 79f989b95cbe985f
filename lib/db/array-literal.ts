/**
 * PostgreSQL array literals for statement parameters, built with one `join` per array instead
 * of `pg`'s element-by-element concatenation, whose intermediate strings were the largest
 * allocation of a drain (the flush's parallel arrays; docs/performance.md "Issue 35: drain
 * against the raw floor"). The text PostgreSQL receives means the same: strings double-quoted
 * with `\` and `"` escaped, `NULL` for null and undefined, numbers, bigints and booleans as
 * their text.
 *
 * Arrays holding anything else (dates, objects, nested arrays, buffers) are answered as they
 * came, for `pg` to encode as before.
 */
export function arrayLiteral(values: readonly unknown[]): string | readonly unknown[] {
  const n = values.length;
  if (n === 0) return '{}';
  /** Every element a string needing no escape: one join. */
  let plain = true;
  /** Every element a number, bigint or boolean: one join, unquoted. */
  let scalar = true;
  /** Every element null or undefined. */
  let nulls = true;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (typeof v === 'string') {
      scalar = false;
      nulls = false;
      if (plain && (v.includes('"') || v.includes('\\'))) plain = false;
    } else if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') {
      plain = false;
      nulls = false;
    } else if (v === null || v === undefined) {
      plain = false;
      scalar = false;
    } else {
      return values;
    }
  }
  if (plain) return `{"${values.join('","')}"}`;
  if (scalar) return `{${values.join(',')}}`;
  if (nulls) return `{${'NULL,'.repeat(n - 1)}NULL}`;
  const parts = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (typeof v === 'string') parts[i] = quoted(v);
    else if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') {
      parts[i] = String(v);
    } else parts[i] = 'NULL';
  }
  return `{${parts.join(',')}}`;
}

function quoted(s: string): string {
  if (s.includes('"') || s.includes('\\')) {
    return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
  }
  return `"${s}"`;
}

/**
 * A statement's positional values with each top-level array as its literal (see
 * {@link arrayLiteral}); the same array when none is.
 */
export function withArrayLiterals(values: readonly unknown[]): readonly unknown[] {
  let out: unknown[] | undefined;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Array.isArray(v)) continue;
    const literal = arrayLiteral(v);
    if (literal === v) continue;
    out ??= values.slice();
    out[i] = literal;
  }
  return out ?? values;
}
