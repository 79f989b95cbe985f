import { DEFAULT_ENGINE_NAME } from '../gen-durable.constants';
import { EngineService } from './engine.service';

/**
 * The injection token of an engine: the `EngineService` class for the default engine,
 * `'GenDurableEngine:<name>'` for a named one.
 */
export function getEngineToken(name?: string): string | typeof EngineService {
  return name === undefined || name === DEFAULT_ENGINE_NAME
    ? EngineService
    : `GenDurableEngine:${name}`;
}
