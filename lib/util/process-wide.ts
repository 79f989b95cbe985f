/**
 * One value per process under `Symbol.for(key)` on `globalThis`, created on first use. The
 * package ships a CommonJS and an ES-module build, and a process can load both (an ESM app whose
 * dependency `require`s the package): state kept here is shared by every loaded copy, where a
 * module-level variable would exist once per copy (docs/testing.md, "Module formats").
 */
export function processWide<T>(key: string, create: () => T): T {
  const slots = globalThis as unknown as Record<symbol, T | undefined>;
  const symbol = Symbol.for(key);
  return (slots[symbol] ??= create());
}
