'use strict';
// `npm run sample`: runs the sample app (sample/) against DATABASE_URL, or, when none is set,
// against an embedded PostgreSQL whose data stays in <repo>/.data/pg so restarts keep state.
// Builds with tsconfig.sample.json into dist-sample/ and runs `node dist-sample/sample/main.js`.
// Ctrl-C (or SIGTERM) stops the app through its shutdown hooks, then the database.
const path = require('node:path');

const {
  ROOT,
  say,
  sampleDataDir,
  startPostgresHelper,
  ensureDatabase,
  buildSample,
  spawnApp,
  stoppedCleanly,
} = require('./sample-support.cjs');

const SAMPLE_DATABASE = 'gen_durable_sample';
const OUT_DIR = path.join(ROOT, 'dist-sample');

async function main() {
  let postgres;
  let app;
  let stopSignal;
  const onSignal = (signal) => {
    stopSignal = stopSignal ?? signal;
    if (app) {
      app.stop(stopSignal);
    }
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, onSignal);
  }
  const stopPostgres = async () => {
    if (postgres) {
      say('stopping embedded PostgreSQL');
      await postgres.stop();
      postgres = undefined;
    }
  };

  try {
    let databaseUrl = process.env.DATABASE_URL;
    if (databaseUrl) {
      say('using DATABASE_URL');
    } else {
      const dataDir = sampleDataDir();
      say(`no DATABASE_URL: starting embedded PostgreSQL (data in ${dataDir})`);
      postgres = await startPostgresHelper({ dataDir, persistent: true });
      databaseUrl = await ensureDatabase(postgres.url, SAMPLE_DATABASE);
      say(`embedded PostgreSQL ready: ${databaseUrl}`);
    }
    if (stopSignal) {
      return 0;
    }

    say('building the sample (tsc -p tsconfig.sample.json)');
    await buildSample(OUT_DIR);
    if (stopSignal) {
      return 0;
    }

    app = spawnApp(path.join(OUT_DIR, 'sample', 'main.js'), {
      env: { DATABASE_URL: databaseUrl, SAMPLE_SEED: process.env.SAMPLE_SEED ?? '1' },
    });
    const result = await app.exited;
    if (stopSignal) {
      if (stoppedCleanly(result, stopSignal)) {
        say('sample stopped');
        return 0;
      }
      say(`sample did not stop cleanly (code ${result.code}, signal ${result.signal})`);
      return 1;
    }
    say(`sample exited (code ${result.code}, signal ${result.signal})`);
    return result.code ?? 1;
  } catch (err) {
    if (stopSignal) {
      return 0;
    }
    process.stderr.write(`[gen-durable] ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await stopPostgres();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
