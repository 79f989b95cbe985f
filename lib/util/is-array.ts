/**
 * `Array.isArray` without narrowing: for runtime checks of values typed as arrays that may
 * come from untyped callers (narrowing would widen their elements to `any`).
 */
export function isArray(value: unknown): boolean {
  return Array.isArray(value);
}
