import { Inject } from '@nestjs/common';

import { getEngineToken } from '../gen-durable.constants';

/** Injects the engine named `name` (the default engine when omitted). */
export function InjectEngine(name?: string): ParameterDecorator & PropertyDecorator {
  return Inject(getEngineToken(name));
}
