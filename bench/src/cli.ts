// Command-line flags of `npm run bench -- …`.

export const SCENARIOS = [
  'drain',
  'fsm3',
  'enqueue',
  'latency',
  'latency-xproc',
  'signal',
  'scale',
  'memory',
  // Scripts of their own (bench/src/script-scenarios.ts), run only when named.
  'noisy-neighbour',
  'sequences',
] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface Options {
  quick: boolean;
  /** Engine ids / families and scenario names to run (empty = everything). */
  only: string[];
  repeats: number;
  concurrency: number[];
  /** Jobs per drain case. */
  n: number;
  /** Machines (3 steps each) per fsm3 case. */
  fsm3N: number;
  /** Awaited single inserts in the enqueue case. */
  enqueueSingleN: number;
  /** Jobs inserted in one bulk call in the enqueue case. */
  enqueueBulkN: number;
  latencyN: number;
  /** Parked instances signalled one by one in the signal case. */
  signalN: number;
  /** Sequential inserts in the cross-process latency case. */
  latencyXN: number;
  /** Total rows of the big table in the scale case (the small one has 10 000). */
  scaleRows: number;
  memoryN: number;
  /** Hard limit of one case in ms; a case over it is recorded as a timeout. */
  caseTimeoutMs: number;
  verbose: boolean;
  json: string | undefined;
  /**
   * drain and fsm3: after `repeats`, keep repeating (every engine once more, in alternating
   * order) until each paired gen-durable ratio moved by less than this fraction with the last
   * repeat, or `maxRepeats` is reached. Undefined = a fixed number of repeats.
   */
  untilStable: number | undefined;
  maxRepeats: number;
}

const HELP = `Usage: npm run bench -- [flags]

  --quick                 small N, 1 repeat, concurrency 50 (finishes in under 3 minutes)
  --only a,b              engines (id or family, e.g. raw, graphile-worker, bullmq:redis; the
                          tracing-cost variants gen-durable-otel run only when named) and/or
                          scenarios (${SCENARIOS.join(', ')}); several --only flags add up;
                          noisy-neighbour and sequences (gen-durable alone, minutes each) run
                          only when named
  --repeats N             repeats per case (default 3; --quick 1)
  --concurrency 10,50     worker concurrencies for drain and fsm3 (default 10,50; --quick 50)
  --n N                   jobs per drain case (default 20000; --quick 3000)
  --fsm3-n N              3-step machines per fsm3 case (default 5000; --quick 1000)
                          (slow engines are capped lower: see each adapter's maxN)
  --scale-rows N          rows of the big table in the scale case (default 1000000; --quick 200000)
  --memory-n N            backlog drained in the memory case (default 100000; --quick 20000)
  --enqueue-n N           awaited single inserts in the enqueue case (default 5000)
  --latency-n N           sequential inserts in each same-process latency case (default 300)
  --timeout-s S           hard limit of one case (default 240; --quick 60)
  --json PATH             where to write the JSON results (default bench/results/<timestamp>.json)
  --until-stable[=PCT]    drain and fsm3: after --repeats, repeat again until every paired
                          gen-durable ratio moved by less than PCT % (default 5) with the last
                          repeat, or --max-repeats is reached
  --max-repeats N         cap of --until-stable (default 7)
  --verbose               log every step of the harness

Every repeat runs each engine once, in alternating order (forward, then reversed), so ratios
are also reported paired: the median over repeats of gen-durable ÷ peer within one repeat.

Environment: DATABASE_URL (else an embedded PostgreSQL is started), REDIS_URL (else
127.0.0.1:6379, else a redis-server child on a free port, else BullMQ-on-Redis is skipped).`;

function intList(value: string, flag: string): number[] {
  const out = value.split(',').map((v) => Number(v.trim()));
  if (out.length === 0 || out.some((v) => !Number.isInteger(v) || v <= 0)) {
    throw new Error(`${flag}: expected positive integers separated by commas, got '${value}'`);
  }
  return out;
}

function posInt(value: string | undefined, flag: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new Error(`${flag}: expected a positive integer, got '${value}'`);
  return n;
}

export function parseArgs(argv: string[]): Options {
  const quick = argv.includes('--quick');
  const o: Options = {
    quick,
    only: [],
    repeats: quick ? 1 : 3,
    concurrency: quick ? [50] : [10, 50],
    n: quick ? 3000 : 20000,
    fsm3N: quick ? 1000 : 5000,
    enqueueSingleN: quick ? 1000 : 5000,
    enqueueBulkN: quick ? 5000 : 20000,
    latencyN: 300,
    latencyXN: quick ? 100 : 300,
    signalN: quick ? 100 : 300,
    scaleRows: quick ? 200_000 : 1_000_000,
    memoryN: quick ? 20_000 : 100_000,
    caseTimeoutMs: (quick ? 60 : 240) * 1000,
    verbose: false,
    json: undefined,
    untilStable: undefined,
    maxRepeats: 7,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [flag, inline] = a.includes('=')
      ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]
      : [a, undefined];
    const value = (): string => {
      if (inline !== undefined) return inline;
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case '--quick':
        break;
      case '--only':
        o.only.push(
          ...value()
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
        );
        break;
      case '--repeats':
        o.repeats = posInt(value(), flag);
        break;
      case '--concurrency':
        o.concurrency = intList(value(), flag);
        break;
      case '--n':
        o.n = posInt(value(), flag);
        break;
      case '--fsm3-n':
        o.fsm3N = posInt(value(), flag);
        break;
      case '--scale-rows':
        o.scaleRows = posInt(value(), flag);
        break;
      case '--memory-n':
        o.memoryN = posInt(value(), flag);
        break;
      case '--enqueue-n':
        o.enqueueSingleN = posInt(value(), flag);
        break;
      case '--latency-n':
        o.latencyN = posInt(value(), flag);
        break;
      case '--timeout-s':
        o.caseTimeoutMs = posInt(value(), flag) * 1000;
        break;
      case '--json':
        o.json = value();
        break;
      case '--verbose':
        o.verbose = true;
        break;
      case '--until-stable': {
        const pct = inline === undefined ? 5 : Number(inline);
        if (!Number.isFinite(pct) || pct <= 0) {
          throw new Error(`--until-stable: expected a positive percentage, got '${inline}'`);
        }
        o.untilStable = pct / 100;
        break;
      }
      case '--max-repeats':
        o.maxRepeats = posInt(value(), flag);
        break;
      case '-h':
      case '--help':
        console.log(HELP);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown flag '${a}'\n\n${HELP}`);
    }
  }
  return o;
}
