import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import { type Browser, chromium } from 'playwright-core';

import { trackResource } from '../../support/open-resources';

// The one way a browser spec gets a browser: Debian's Chromium (never a downloaded build),
// headless, with a fresh profile (playwright's launch gives each browser a new temporary
// --user-data-dir and removes it on close) and no background networking. A missing Debian
// Chromium is installed by scripts/ensure-chromium.sh (as root, as the PgBouncer tests install
// theirs), so `npm test` sets up a fresh machine; otherwise the spec fails naming the package.

export const CHROMIUM_PATH = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

export interface TestBrowser {
  readonly browser: Browser;
  close(): Promise<void>;
}

export async function launchChromium(): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM_PATH) && process.env['CHROMIUM_PATH'] === undefined) {
    execFileSync('bash', [join(__dirname, '..', '..', '..', 'scripts', 'ensure-chromium.sh')], {
      stdio: 'inherit',
    });
  }
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium not found at ${CHROMIUM_PATH}: install Debian's package (apt-get install -y chromium) or set CHROMIUM_PATH`,
    );
  }
  const browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  let open = true;
  trackResource('chromium', () => open);
  return {
    browser,
    async close() {
      if (!open) return;
      open = false;
      await browser.close();
    },
  };
}
