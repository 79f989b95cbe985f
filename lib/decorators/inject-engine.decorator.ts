import { Inject } from '@nestjs/common';

import { getEngineToken } from '../engine/get-engine-token.util';

/** Injects the engine named `name` (the default engine when omitted). */
export function InjectEngine(name?: string): ParameterDecorator & PropertyDecorator {
  return Inject(getEngineToken(name));
}
