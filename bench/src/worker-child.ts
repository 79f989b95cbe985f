// Child process of the memory case: runs one engine's worker on an existing backlog and reports
// its own RSS (baseline after setup, peak while draining) to the parent over IPC.
import { performance } from 'node:perf_hooks';
import { findAdapter } from './engines/lookup';
import type { CaseContext } from './engines/types';
import { sleep } from './engines/types';
import type { MemoryOutcome } from './scenarios';

interface Request {
  adapter: string;
  ctx: Omit<CaseContext, 'log'>;
  n: number;
  concurrency: number;
}

const mb = (b: number): number => b / (1024 * 1024);

process.once('message', (req: Request) => {
  void (async () => {
    const adapter = findAdapter(req.adapter);
    const inst = await adapter.create({ ...req.ctx, log: (m) => console.error(`  [memory ${req.adapter}] ${m}`) });
    try {
      await inst.setup();
      global.gc?.();
      const baseline = process.memoryUsage().rss;
      let peak = baseline;
      const timer = setInterval(() => {
        peak = Math.max(peak, process.memoryUsage().rss);
      }, 20);
      let finals = 0;
      let allDone!: () => void;
      const all = new Promise<void>((r) => (allDone = r));
      const t0 = performance.now();
      await inst.start('job', req.concurrency, {
        onFinal: () => {
          if (++finals >= req.n) allDone();
        },
      });
      await all;
      while ((await inst.remaining('job')) > 0) await sleep(50);
      const ms = performance.now() - t0;
      clearInterval(timer);
      peak = Math.max(peak, process.memoryUsage().rss);
      const result: MemoryOutcome = { baselineRssMb: mb(baseline), peakRssMb: mb(peak), ms };
      await inst.close();
      process.send!({ ok: true, result }, () => process.exit(0));
    } catch (e) {
      await inst.close().catch(() => undefined);
      process.send!({ ok: false, error: (e as Error).stack ?? String(e) }, () => process.exit(1));
    }
  })();
});
