import type { ResolvedOf } from './option-declaration';
import type { OptionTable } from './option-table';

export type {
  ResolvedConcurrencyLimit,
  ResolvedFlusher,
  ResolvedRateLimit,
} from './resolved-components';

/** Options after defaults and validation, typed from the option table; deeply frozen. */
export type ResolvedOptions = { readonly [K in keyof OptionTable]: ResolvedOf<OptionTable[K]> };
