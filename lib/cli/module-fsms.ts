import { resolve } from 'node:path';

import type { ClientFsm } from '../client/client-options';
import { FsmMetadataAccessor } from '../discovery/fsm-metadata.accessor';
import { UsageError } from './exit-codes';

/** One `@DurableFsm` version found in a module, as `verify` and the client need it. */
export interface ModuleFsm extends ClientFsm {
  readonly name: string;
  readonly version: number;
  readonly queue: string;
  readonly steps: readonly string[];
  /** The class it was read from. */
  readonly className: string;
}

/** Nest's module metadata keys (`MODULE_METADATA` of @nestjs/common: plain strings). */
const IMPORTS = 'imports';
const PROVIDERS = 'providers';

type Ctor = abstract new (...args: never[]) => unknown;

/**
 * The `@DurableFsm` classes a compiled Nest module declares, read WITHOUT starting anything
 * (docs/cli.md "verify"): `file` is loaded with `require` (CommonJS; `file#Export` picks an
 * export, else `AppModule`, else the only export carrying module metadata). From that class on,
 * the walk reads Reflect metadata `imports` and `providers` of each module class; a provider is
 * a class or `{ provide, useClass }`; an import is a module class, a dynamic module
 * (`{ module, imports, providers }`) or a `forwardRef`. Each provider class with `@DurableFsm`
 * metadata is described through `FsmMetadataAccessor` with the defaults the engine's discovery
 * applies: name = `name` or the class name, version 1, queue `default`, a class with a
 * `perform()` method is a job (step `perform`), else its `@Step` names; initial `start`
 * (`perform` for a job). Factories (`useFactory`, `useValue`) are not run, so an FSM provided
 * only through one is not seen.
 */
export function readModuleFsms(file: string): ModuleFsm[] {
  const [path, exportName] = splitExport(file);
  // Decorator metadata lives on the global Reflect; the module's own imports load the polyfill,
  // loading it here too makes a module compiled without it readable.
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require('reflect-metadata');
  } catch {
    // The peer is absent: the module brings its own, or has no metadata to read.
  }
  let exported: Record<string, unknown>;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    exported = require(resolve(path)) as Record<string, unknown>;
  } catch (err) {
    throw new UsageError(
      `--module ${path}: cannot load it (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`,
    );
  }
  const root = pickModule(exported, path, exportName);
  const found = new Map<string, ModuleFsm>();
  const seen = new Set<unknown>();
  const walk = (entry: unknown): void => {
    const module = moduleOf(entry);
    if (module === undefined || seen.has(module.key)) return;
    seen.add(module.key);
    for (const provider of module.providers) {
      const cls = providerClass(provider);
      if (cls === undefined) continue;
      const fsm = describe(cls);
      if (fsm) found.set(`${fsm.name}@${fsm.version}`, fsm);
    }
    for (const imported of module.imports) walk(imported);
  };
  walk(root);
  return [...found.values()].sort((a, b) =>
    a.name === b.name ? a.version - b.version : a.name < b.name ? -1 : 1,
  );
}

/** The newest version of each FSM, as the client's `fsms` option (the newest answers inserts). */
export function clientFsmsOf(fsms: readonly ModuleFsm[]): Record<string, ClientFsm> {
  const out: Record<string, ModuleFsm> = {};
  for (const fsm of fsms) {
    const current = out[fsm.name];
    if (!current || current.version < fsm.version) out[fsm.name] = fsm;
  }
  return out;
}

function splitExport(file: string): [string, string | undefined] {
  const hash = file.lastIndexOf('#');
  return hash > 0 ? [file.slice(0, hash), file.slice(hash + 1)] : [file, undefined];
}

function isModuleClass(value: unknown): boolean {
  return (
    typeof value === 'function' &&
    (Reflect.getMetadata(IMPORTS, value) !== undefined ||
      Reflect.getMetadata(PROVIDERS, value) !== undefined)
  );
}

function pickModule(exported: Record<string, unknown>, path: string, name?: string): unknown {
  if (name !== undefined) {
    if (!isModuleClass(exported[name])) {
      throw new UsageError(`--module ${path}: export "${name}" is not a Nest module class`);
    }
    return exported[name];
  }
  if (isModuleClass(exported['AppModule'])) return exported['AppModule'];
  const modules = Object.entries(exported).filter(([, v]) => isModuleClass(v));
  if (modules.length === 1) return modules[0]?.[1];
  throw new UsageError(
    modules.length === 0
      ? `--module ${path}: exports no Nest module class (a class with @Module metadata)`
      : `--module ${path}: exports several modules (${modules.map(([k]) => k).join(', ')}): name one as ${path}#<export>`,
  );
}

/** A module class, a dynamic module or a forwardRef → its identity, providers and imports. */
function moduleOf(
  entry: unknown,
): { key: unknown; providers: readonly unknown[]; imports: readonly unknown[] } | undefined {
  if (entry === null || entry === undefined) return undefined;
  if (
    typeof entry === 'object' &&
    typeof (entry as { forwardRef?: unknown }).forwardRef === 'function'
  ) {
    return moduleOf((entry as { forwardRef: () => unknown }).forwardRef());
  }
  if (typeof entry === 'function') {
    return {
      key: entry,
      providers: listOf(Reflect.getMetadata(PROVIDERS, entry)),
      imports: listOf(Reflect.getMetadata(IMPORTS, entry)),
    };
  }
  if (typeof entry === 'object' && typeof (entry as { module?: unknown }).module === 'function') {
    const dynamic = entry as { module: unknown; providers?: unknown; imports?: unknown };
    const base = moduleOf(dynamic.module);
    return {
      key: entry,
      providers: [...(base?.providers ?? []), ...listOf(dynamic.providers)],
      imports: [...(base?.imports ?? []), ...listOf(dynamic.imports)],
    };
  }
  return undefined;
}

function listOf(value: unknown): readonly unknown[] {
  return Array.isArray(value) ? value : [];
}

function providerClass(provider: unknown): Ctor | undefined {
  if (typeof provider === 'function') return provider as Ctor;
  const useClass = (provider as { useClass?: unknown } | null)?.useClass;
  return typeof useClass === 'function' ? (useClass as Ctor) : undefined;
}

/** A `@DurableFsm` class as the engine's discovery would register it (its defaults). */
function describe(cls: Ctor): ModuleFsm | undefined {
  const meta = FsmMetadataAccessor.fsm(cls);
  if (!meta) return undefined;
  const isJob = typeof (cls.prototype as Record<string, unknown>)['perform'] === 'function';
  const steps = isJob ? ['perform'] : FsmMetadataAccessor.steps(cls).map(([name]) => name);
  return {
    name: meta.name ?? cls.name,
    version: meta.version ?? 1,
    queue: meta.queue ?? 'default',
    initial: meta.initial ?? (isJob ? 'perform' : 'start'),
    steps,
    cancelOn: meta.cancelOn ?? [],
    className: cls.name,
    ...(meta.stateCodec ? { stateCodec: meta.stateCodec } : {}),
  };
}
