'use strict';
// `npm run api:check` / `npm run api:update`: the public surface of every entry point of the
// package (package.json `exports`), rolled up from the built declarations in dist/cjs by API
// Extractor into api/<entry>.api.md (docs/development.md, "The API report").
//
//   api:check   builds, then fails when a report differs from the committed one, printing the
//               difference (CI runs it): a change of the public types shows up in review.
//   api:update  builds, then rewrites the reports; commit them with the change.
//
// A type a public declaration reaches but no entry exports ("forgotten export") is a leak; the
// report lists it as a warning in the file, so it is reviewed like any other change.
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Extractor, ExtractorConfig } = require('@microsoft/api-extractor');

const ROOT = path.resolve(__dirname, '..');
const API = path.join(ROOT, 'api');
const update = process.argv.includes('--update');

/** Entry point name → its declaration file in dist/cjs. */
const ENTRIES = {
  'gen-durable': 'dist/cjs/index.d.ts',
  testing: 'dist/cjs/testing/index.d.ts',
  health: 'dist/cjs/health/index.d.ts',
  client: 'dist/cjs/client/index.d.ts',
  dashboard: 'dist/cjs/dashboard/index.d.ts',
};

if (!process.argv.includes('--no-build')) {
  const built = spawnSync(process.execPath, [path.join(ROOT, 'scripts/build.cjs')], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  if (built.status !== 0) process.exit(built.status ?? 1);
}

const temp = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'gd-api-'));
let failed = false;
for (const [name, entry] of Object.entries(ENTRIES)) {
  const reportFile = `${name}.api.md`;
  const config = ExtractorConfig.prepare({
    configObject: {
      projectFolder: ROOT,
      mainEntryPointFilePath: path.join(ROOT, entry),
      compiler: { tsconfigFilePath: path.join(ROOT, 'tsconfig.json') },
      apiReport: {
        enabled: true,
        reportFileName: reportFile,
        reportFolder: API,
        reportTempFolder: temp,
      },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        compilerMessageReporting: { default: { logLevel: 'warning' } },
        extractorMessageReporting: {
          default: { logLevel: 'none', addToApiReportFile: true },
          'ae-missing-release-tag': { logLevel: 'none', addToApiReportFile: false },
        },
        tsdocMessageReporting: { default: { logLevel: 'none', addToApiReportFile: false } },
      },
    },
    configObjectFullPath: path.join(ROOT, 'api', `${name}.api-extractor.json`),
    packageJsonFullPath: path.join(ROOT, 'package.json'),
  });
  const result = Extractor.invoke(config, {
    localBuild: update,
    showVerboseMessages: false,
    messageCallback: (message) => {
      // Compiler notes about the project's own tsconfig are not about the surface.
      if (message.category === 'Compiler') message.handled = true;
    },
  });
  if (result.apiReportChanged) {
    if (update) {
      console.log(`api/${reportFile}: updated`);
    } else {
      failed = true;
      const fresh = path.join(temp, reportFile);
      console.error(`api/${reportFile} differs from the built surface (run npm run api:update):`);
      spawnSync('diff', ['-u', path.join(API, reportFile), fresh], { stdio: 'inherit' });
    }
  } else {
    console.log(`api/${reportFile}: unchanged`);
  }
}
fs.rmSync(temp, { recursive: true, force: true });
if (failed) process.exit(1);
