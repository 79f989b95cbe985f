import type { SqlExecutor } from '../db/sql-executor';
import { UPSERT_BUCKET_CONFIGS } from '../sql/limiter.sql';
import type { LimitConfig } from './limiter.interface';

/**
 * Seeds this node's limit declarations into gen_durable_bucket_configs (docs/design.md §16.1), sorted by
 * (kind, name) so two nodes booting at once lock the config rows in the same order. Shared by
 * both limiter backends.
 */
export async function upsertLimitConfigs(
  sql: SqlExecutor,
  configs: readonly LimitConfig[],
): Promise<void> {
  if (configs.length === 0) return;
  const key = (c: LimitConfig) => `${c.kind}\u0000${c.name}`;
  const sorted = [...configs].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  await UPSERT_BUCKET_CONFIGS.run(sql, { configs: sorted });
}
