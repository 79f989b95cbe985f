import type { LiveFsmVersion } from '../instance/live-fsm-version';
import { noParams, sql } from './statement';

/**
 * The (fsm, fsm_version) pairs of live instances, with their counts (the CLI's `verify`, a
 * deploy gate: docs/cli.md). No index covers every live status, so this is one sequential scan
 * of gen_durable, run once per deploy rather than on any hot path.
 */
export const LIVE_FSM_VERSIONS = sql(
  'live_fsm_versions',
  `SELECT fsm, fsm_version, count(*)::int AS instances
     FROM {schema}.gen_durable
    WHERE status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
    GROUP BY fsm, fsm_version
    ORDER BY fsm, fsm_version`,
  {
    params: noParams,
    decode: (
      rows: readonly { fsm: string; fsm_version: number; instances: number }[],
    ): LiveFsmVersion[] =>
      rows.map((r) => ({ fsm: r.fsm, version: r.fsm_version, instances: r.instances })),
  },
);
