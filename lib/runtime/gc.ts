import { Logger } from '@nestjs/common';

import type { SqlExecutor } from '../db/sql-executor';
import { GC_DELETE, GC_SELECT_TERMINAL } from '../sql/maintenance.sql';
import type { Telemetry } from '../telemetry/telemetry';

/**
 * Every `gc.interval`: deletes up to `batch` terminal rows older than `retention`, sparing
 * children of live parents; a full batch sweeps again at once (SPEC §18 step 1).
 */
export class GarbageCollector {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private readonly logger = new Logger('GenDurable');
  lastSweepAt = 0;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly config: { readonly interval: number; readonly retention: number; readonly batch: number },
    private readonly telemetry: Telemetry,
  ) {}

  start(): void {
    this.lastSweepAt = Date.now();
    this.timer = setInterval(() => {
      if (!this.running) this.running = this.sweep().finally(() => (this.running = undefined));
    }, this.config.interval);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.stopping = true;
    await this.running;
  }

  private stopping = false;

  /** Sweeps until a batch comes back short; returns rows deleted. */
  async sweep(): Promise<number> {
    let count = 0;
    try {
      for (;;) {
        const ids = (await this.sql.query<{ id: string }>(GC_SELECT_TERMINAL, [this.config.retention, this.config.batch])).map((r) => r.id);
        if (ids.length > 0) count += (await this.sql.queryResult(GC_DELETE, [ids])).rowCount ?? 0;
        if (ids.length < this.config.batch || this.stopping) break;
      }
      if (count > 0) this.telemetry.emit('gc:swept', { count, buckets: 0, gates: 0 });
      this.lastSweepAt = Date.now();
    } catch (err) {
      this.logger.error(`GC sweep failed: ${String(err)}`);
    }
    return count;
  }
}
