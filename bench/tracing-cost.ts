/**
 * `npm run bench:tracing`: the tracing cost (docs/performance.md, "Tracing cost") in ONE run —
 * the bench's drain case (bench/src/scenarios.ts `drainCase`: N jobs inserted in bulk, a
 * worker with concurrency C drains them, timed from the first step start to the last row
 * finished) over the three gen-durable tracing variants of bench/src/engines/gen-durable.ts:
 *
 *   gen-durable:otel-off  `otel: { enabled: false }`: @opentelemetry/api never loaded
 *   gen-durable:otel-api  the API loaded, no provider registered (tracing off)
 *   gen-durable:otel-sdk  an SDK tracer provider registered (a span per step and per insert)
 *
 * plus `otel-off (A/A)`, the baseline run a second time in each repeat: its ratio to the
 * baseline is the noise floor of the machine. Repeats interleave the variants (repeat k starts
 * at the k-th variant and goes round), and each ratio is paired: the median over repeats of
 * the variant's rate ÷ otel-off's rate in the same repeat, so a load drift of the machine
 * cancels out. The full harness runs the same variants with
 * `npm run bench -- --only gen-durable-otel --only drain` (it needs the peers' dependencies);
 * this script needs only the repository's.
 *
 *   N=20000 C=50 REPEATS=5 KIND=job npm run bench:tracing
 */
import 'reflect-metadata';

import { parseArgs } from './src/cli';
import { genDurableOtelApi, genDurableOtelOff, genDurableOtelSdk } from './src/engines/gen-durable';
import { startInfra } from './src/infra';
import { drainCase, type RunCtx } from './src/scenarios';
import { median } from './src/stats';

const N = Number(process.env['N'] ?? 20_000);
const C = Number(process.env['C'] ?? 50);
const REPEATS = Number(process.env['REPEATS'] ?? 5);
const KIND = process.env['KIND'] === 'fsm3' ? 'fsm3' : 'job';

async function main(): Promise<void> {
  const control = { ...genDurableOtelOff, id: 'gen-durable:otel-off (A/A)' };
  const variants = [genDurableOtelOff, genDurableOtelApi, genDurableOtelSdk, control];
  const infra = await startInfra((m) => console.log(m));
  const rc: RunCtx = {
    infra,
    opts: { ...parseArgs([]), caseTimeoutMs: 240_000 },
    log: (m) => console.log(m),
    vlog: () => undefined,
  };
  const rates = new Map<string, number[]>(variants.map((v) => [v.id, []]));
  // The worker process's CPU ms per 1 000 steps: less sensitive than the rate to what else the
  // machine runs (the tracing cost is CPU in the worker).
  const cpu = new Map<string, number[]>(variants.map((v) => [v.id, []]));
  const steps = KIND === 'fsm3' ? 3 * N : N;
  try {
    for (let rep = 0; rep < REPEATS; rep++) {
      const order = variants.map((_, i) => variants[(i + rep) % variants.length]!);
      for (const v of order) {
        const out = await drainCase(rc, v, KIND, C, N);
        rates.get(v.id)!.push(out.rate);
        const cpuPer1k = (out.cpu.workerMs / steps) * 1000;
        cpu.get(v.id)!.push(cpuPer1k);
        console.log(
          `repeat ${rep + 1} ${v.id}: ${out.rate.toFixed(0)} steps/s, worker CPU ${cpuPer1k.toFixed(0)} ms / 1 000 steps`,
        );
      }
    }
  } finally {
    await infra.stop();
  }
  const base = rates.get(genDurableOtelOff.id)!;
  const baseCpu = cpu.get(genDurableOtelOff.id)!;
  console.log(`\n${KIND} drain, N=${N}, C=${C}, ${REPEATS} interleaved repeats`);
  for (const v of variants) {
    const mine = rates.get(v.id)!;
    const ratios = mine.map((r, i) => r / base[i]!);
    const myCpu = cpu.get(v.id)!;
    const cpuRatios = myCpu.map((c, i) => c / baseCpu[i]!);
    console.log(
      `${v.id.padEnd(27)} median ${median(mine).toFixed(0)} steps/s; paired ÷ otel-off: median ${median(ratios).toFixed(3)} (min ${Math.min(...ratios).toFixed(3)}, max ${Math.max(...ratios).toFixed(3)})`,
    );
    console.log(
      `${''.padEnd(27)} worker CPU median ${median(myCpu).toFixed(0)} ms / 1 000 steps; paired ÷ otel-off: median ${median(cpuRatios).toFixed(3)} (min ${Math.min(...cpuRatios).toFixed(3)}, max ${Math.max(...cpuRatios).toFixed(3)})`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
