'use strict';
// `npm run screenshots`: PNGs of every dashboard view at 1280 px and 390 px wide into
// docs/images/ (docs/dashboard.md shows them). Boots the browser specs' host app
// (test/browser/support/dashboard-app.ts) on a scratch database — on DATABASE_URL's server, or
// on an embedded PostgreSQL when none is set — seeds it, drives Debian's Chromium
// (/usr/bin/chromium, or CHROMIUM_PATH) through playwright-core, and drops the database.
const path = require('node:path');
const { randomBytes } = require('node:crypto');

const {
  ROOT,
  say,
  startPostgresHelper,
  ensureDatabase,
  dropDatabase,
} = require('./sample-support.cjs');

async function main() {
  let postgres;
  let serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    say('no DATABASE_URL: starting an embedded PostgreSQL');
    postgres = await startPostgresHelper({});
    serverUrl = postgres.url;
  }
  const database = `gd_screenshots_${randomBytes(4).toString('hex')}`;
  const url = await ensureDatabase(serverUrl, database);
  try {
    require(path.join(ROOT, 'test', 'support', 'ts-register.cjs'));
    const { takeScreenshots } = require(
      path.join(ROOT, 'test', 'browser', 'support', 'screenshots.ts'),
    );
    const files = await takeScreenshots(url);
    for (const file of files) say(`wrote ${path.relative(ROOT, file)}`);
  } finally {
    await dropDatabase(serverUrl, database).catch(() => undefined);
    if (postgres) await postgres.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
