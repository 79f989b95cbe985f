import type * as GenDurable from 'gen-durable';

export declare class EngineProbe {
  readonly byToken: unknown;
  readonly byClass: unknown;
}
/** The CommonJS build of gen-durable, as this library loaded it. */
export declare const genDurable: typeof GenDurable;
