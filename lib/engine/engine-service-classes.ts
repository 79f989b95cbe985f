import type { Type } from '@nestjs/common';

import { processWide } from '../util/process-wide';
import { EngineService } from './engine.service';

/**
 * The `EngineService` class of every copy of the package loaded in this process (its CommonJS and
 * ES-module builds are two copies, hence two classes). The default engine is also provided under
 * each of them, so a provider that injects `EngineService` by type gets the one engine whichever
 * build it imported.
 */
const engineClasses = processWide('gen-durable.engine-service-classes', () => new Set<Type>());
engineClasses.add(EngineService);

/** @internal the `EngineService` classes loaded so far, this copy's first. */
export function engineServiceClasses(): Type[] {
  return [EngineService, ...[...engineClasses].filter((c) => c !== EngineService)];
}
