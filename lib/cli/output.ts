import type { CappedCount } from '../instance/queue-status';

/**
 * What a command prints: JSON (`--json`, one document on stdout) or text for a terminal.
 * Dates print as ISO text in both.
 */
export class Output {
  constructor(
    readonly json: boolean,
    private readonly write: (text: string) => void = (t) => process.stdout.write(t),
  ) {}

  /** Prints `value` as JSON, or `text()` without `--json`. */
  result(value: unknown, text: () => string): void {
    this.write(this.json ? `${JSON.stringify(value, null, 2)}\n` : `${text()}\n`);
  }
}

/** A fixed-width table: a header row, then rows; empty cells print as `-`. */
export function table(header: readonly string[], rows: readonly (readonly unknown[])[]): string {
  const cells = [header, ...rows.map((r) => r.map(cell))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : (c ?? '').padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function cell(value: unknown): string {
  if (value === null || value === undefined || value === '') return '-';
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return String(value);
  }
  return JSON.stringify(value) ?? '-';
}

/** A capped count as text: `10000+` when the count stopped at its cap. */
export function capped(count: CappedCount): string {
  return count.capped ? `${count.count}+` : String(count.count);
}

/** Milliseconds as a short duration (`850ms`, `12.3s`, `4m05s`, `2h10m`). */
export function duration(ms: number | null): string {
  if (ms === null) return '-';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}
