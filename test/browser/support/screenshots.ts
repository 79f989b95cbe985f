import 'reflect-metadata';

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { Client } from 'pg';
import { DataSource } from 'typeorm';

import { StatsSnapshot } from '../../../lib/runtime/stats-snapshot';
import { migrateUp } from '../../../lib/schema/migrator';
import { Telemetry } from '../../../lib/telemetry/telemetry';
import { launchChromium } from './chromium';
import {
  bootDashboardApp,
  DASHBOARD_TOKEN,
  DashChargeFsm,
  DashOrderFsm,
  latch,
  seedDashboard,
} from './dashboard-app';

// `npm run screenshots` (scripts/screenshots.cjs) runs this on a scratch database: the
// browser specs' host app, seeded with every status, a fan-out tree and a schedule, and a PNG
// of each dashboard view at 1280 px and 390 px wide into docs/images/.

const OUT = join(__dirname, '..', '..', '..', 'docs', 'images');
const WIDTHS = [1280, 390] as const;

export async function takeScreenshots(databaseUrl: string): Promise<string[]> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await migrateUp({ query: (text, params) => client.query(text, params), inTransaction: false });
  } finally {
    await client.end();
  }
  const dataSource = new DataSource({ type: 'postgres', url: databaseUrl });
  await dataSource.initialize();
  const host = await bootDashboardApp({ dataSource: () => Promise.resolve(dataSource) }, 'express');
  const written: string[] = [];
  const browser = await launchChromium();
  try {
    const seeded = await seedDashboard(host.engine, 'screenshots');
    for (let i = 0; i < 12; i++) {
      await host.engine.insert(DashChargeFsm, {
        state: { card: `4000-${i}`, fail: i % 4 === 0 },
        rateLimit: 'charge',
      });
    }
    await host.engine.insert(DashOrderFsm, {
      state: { order: 'C-3', lines: ['book', 'mug'] },
      correlationKey: 'order:C-3',
    });
    await host.engine.pauseQueue('reports', { reason: 'month-end freeze' });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // the overview as it usually is: read from a stats snapshot (this minute's, unless the
    // engine's own maintenance already wrote it)
    await new StatsSnapshot(
      host.engine.runtime.sql,
      { interval: 60_000, retention: 86_400_000, cap: 10_000 },
      new Telemetry('screenshots'),
    ).take();
    const base = `${host.url}/durable`;
    const views: [string, string][] = [
      ['overview', ''],
      ['instances', '/instances'],
      ['instance', `/instances/${seeded.tree}`],
      ['fsm', '/fsms/dash-order'],
      ['schedules', '/schedules'],
      ['limiters', '/limiters'],
      ['queues', '/queues'],
      ['bulk', '/bulk?action=retry&fsm=dash-charge&status=failed'],
    ];
    mkdirSync(OUT, { recursive: true });
    for (const width of WIDTHS) {
      const context = await browser.browser.newContext({
        viewport: { width, height: 900 },
        extraHTTPHeaders: { 'x-dashboard-token': DASHBOARD_TOKEN },
      });
      const page = await context.newPage();
      for (const [name, path] of views) {
        await page.goto(`${base}${path}`);
        await page.waitForLoadState('networkidle');
        const file = join(OUT, `dashboard-${name}-${width}.png`);
        await page.screenshot({ path: file, fullPage: true });
        written.push(file);
      }
      await context.close();
    }
  } finally {
    latch.open('screenshots');
    await browser.close();
    await host.close();
    await dataSource.destroy();
  }
  return written;
}
