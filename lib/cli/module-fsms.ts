import { resolve } from 'node:path';

import type { ClientFsm } from '../client/client-options';
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

/**
 * The `@DurableFsm` classes a compiled Nest module registers, read WITHOUT starting anything
 * (docs/cli.md "verify"): `file` is loaded with `require` (CommonJS; `file#Export` picks an
 * export, else `AppModule`, else the only export carrying module metadata). That module is
 * opened as a Nest application context in preview mode — Nest scans the module graph (imports,
 * dynamic modules, `forwardRef`s, class and `useClass` providers) and instantiates nothing: no
 * constructor, factory or lifecycle hook runs, no connection opens. The engine's own discovery
 * (`FsmExplorer`, with its defaults and its checks) then reads the providers, so `verify` sees
 * exactly what the engine would register; a definition the engine would refuse is the engine's
 * `ConfigurationError`. Providers made by `useFactory` or `useValue` are not run, so an FSM
 * provided only through one is not seen.
 */
export async function readModuleFsms(file: string): Promise<ModuleFsm[]> {
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
  // Loaded here, not at the top: the other commands need no Nest.
  const [{ DiscoveryService, ModulesContainer, NestFactory }, { FsmExplorer }] = await Promise.all([
    import('@nestjs/core'),
    import('../discovery/fsm.explorer'),
  ]);
  let context: Awaited<ReturnType<typeof NestFactory.createApplicationContext>>;
  try {
    context = await NestFactory.createApplicationContext(root, {
      preview: true,
      abortOnError: false,
      logger: false,
    });
  } catch (err) {
    throw new UsageError(
      `--module ${path}: Nest cannot scan it (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`,
    );
  }
  try {
    const discovery = new DiscoveryService(context.get(ModulesContainer));
    const registry = new FsmExplorer(discovery).explore(undefined);
    return registry
      .all()
      .map((d): ModuleFsm => ({
        name: d.name,
        version: d.version,
        queue: d.queue,
        initial: d.initial,
        steps: [...d.steps.keys()],
        cancelOn: [...d.cancelOn],
        ...(d.deadline?.ms != null ? { deadlineMs: d.deadline.ms } : {}),
        className: d.metatype.name,
        ...(d.codec ? { stateCodec: d.codec } : {}),
      }))
      .sort((a, b) => (a.name === b.name ? a.version - b.version : a.name < b.name ? -1 : 1));
  } finally {
    await context.close();
  }
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

/** Nest's module metadata keys (`MODULE_METADATA` of @nestjs/common: plain strings). */
const IMPORTS = 'imports';
const PROVIDERS = 'providers';

type ModuleClass = new (...args: never[]) => unknown;

function isModuleClass(value: unknown): value is ModuleClass {
  return (
    typeof value === 'function' &&
    (Reflect.getMetadata(IMPORTS, value) !== undefined ||
      Reflect.getMetadata(PROVIDERS, value) !== undefined)
  );
}

function pickModule(exported: Record<string, unknown>, path: string, name?: string): ModuleClass {
  if (name !== undefined) {
    const named = exported[name];
    if (!isModuleClass(named)) {
      throw new UsageError(`--module ${path}: export "${name}" is not a Nest module class`);
    }
    return named;
  }
  const app = exported['AppModule'];
  if (isModuleClass(app)) return app;
  const modules = Object.entries(exported).filter((e): e is [string, ModuleClass] =>
    isModuleClass(e[1]),
  );
  const [only] = modules;
  if (modules.length === 1 && only) return only[1];
  throw new UsageError(
    modules.length === 0
      ? `--module ${path}: exports no Nest module class (a class with @Module metadata)`
      : `--module ${path}: exports several modules (${modules.map(([k]) => k).join(', ')}): name one as ${path}#<export>`,
  );
}
