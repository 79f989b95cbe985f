import type { SchemaIncrement } from './schema-increment';
import { V001 } from './v001';
import { V002 } from './v002';
import { V003 } from './v003';
import { V004 } from './v004';
import { V005 } from './v005';
import { V006 } from './v006';
import { V007 } from './v007';
import { V008 } from './v008';
import { V009 } from './v009';
import { V010 } from './v010';
import { V011 } from './v011';
import { V012 } from './v012';
import { V013 } from './v013';
import { V014 } from './v014';
import { V015 } from './v015';
import { V016 } from './v016';
import { V017 } from './v017';
import { V018 } from './v018';
import { V019 } from './v019';

/** Every shipped increment, in version order. */
export const SCHEMA_INCREMENTS: readonly SchemaIncrement[] = [
  V001,
  V002,
  V003,
  V004,
  V005,
  V006,
  V007,
  V008,
  V009,
  V010,
  V011,
  V012,
  V013,
  V014,
  V015,
  V016,
  V017,
  V018,
  V019,
];

/** The schema version this build of the library needs. */
export const CURRENT_SCHEMA_VERSION = SCHEMA_INCREMENTS.length;
