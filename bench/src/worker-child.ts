// Child process running one engine's worker, for the cases that need the worker in a process of
// its own:
// - memory: drains an existing backlog and reports its own RSS (baseline after setup, peak while
//   draining);
// - latency: runs idle workers and reports each step start (wall-clock time, sub-ms) so the
//   parent can time insert → start across processes; stops when told.
import { performance } from 'node:perf_hooks';
import { findAdapter } from './engines/lookup';
import type { CaseContext, Instance } from './engines/types';
import { sleep } from './engines/types';

export interface MemoryOutcome {
  baselineRssMb: number;
  peakRssMb: number;
  ms: number;
}

export interface ChildRequest {
  mode: 'memory' | 'latency';
  adapter: string;
  ctx: Omit<CaseContext, 'log'>;
  n: number;
  concurrency: number;
}

export type ChildMessage =
  | { ok: true; result: MemoryOutcome }
  | { ok: false; error: string }
  | { ready: true }
  | { start: number | undefined; t: number };

const mb = (b: number): number => b / (1024 * 1024);
const send = (m: ChildMessage, then: () => void = () => undefined): void => {
  process.send!(m, then);
};

async function memory(inst: Instance, req: ChildRequest): Promise<MemoryOutcome> {
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
  return { baselineRssMb: mb(baseline), peakRssMb: mb(peak), ms };
}

async function latency(inst: Instance, req: ChildRequest): Promise<void> {
  await inst.setup();
  await inst.start('job', req.concurrency, {
    onStart: (m) => send({ start: m, t: performance.timeOrigin + performance.now() }),
  });
  const stop = new Promise<void>((resolve) =>
    process.on('message', (m: { stop?: boolean }) => m.stop && resolve()),
  );
  send({ ready: true });
  await stop;
}

process.once('message', (req: ChildRequest) => {
  void (async () => {
    const adapter = findAdapter(req.adapter);
    const inst = await adapter.create({
      ...req.ctx,
      log: (m) => console.error(`  [${req.mode} ${req.adapter}] ${m}`),
    });
    try {
      if (req.mode === 'memory') {
        const result = await memory(inst, req);
        await inst.close();
        send({ ok: true, result }, () => process.exit(0));
      } else {
        await latency(inst, req);
        await inst.close();
        process.exit(0);
      }
    } catch (e) {
      await inst.close().catch(() => undefined);
      send({ ok: false, error: (e as Error).stack ?? String(e) }, () => process.exit(1));
    }
  })();
});
