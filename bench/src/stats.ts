// Order statistics over repeats and samples.

export function sorted(xs: readonly number[]): number[] {
  return [...xs].sort((a, b) => a - b);
}

export function median(xs: readonly number[]): number {
  const s = sorted(xs);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * The `p`-th percentile (0–100) of `xs` by nearest rank; NaN when there are none. The one
 * definition the bench, the soak and the tests' harnesses (chaos, distribution) share.
 */
export function percentile(xs: readonly number[], p: number): number {
  const s = sorted(xs);
  if (s.length === 0) return NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[Math.min(rank, s.length) - 1]!;
}

export function summary(xs: readonly number[]): { min: number; median: number; max: number } {
  const s = sorted(xs);
  return { min: s[0] ?? NaN, median: median(s), max: s[s.length - 1] ?? NaN };
}
