import type { Page } from 'playwright-core';

import { launchChromium, type TestBrowser } from './support/chromium';
import { freePort, type SampleProcess, startSample, stopSample } from './support/sample-process';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/streams.md "Assistant: streaming and approval": the sample's assistant streams its
// answer to a page in Chromium; the node is killed with SIGKILL mid-answer and started again
// with the same nodeId (docs/operations.md: it takes its claims back at boot), the answering
// step runs again, and the page — whose EventSource reconnects with Last-Event-ID — ends with
// every offset of the stream exactly once, the re-run's start marker among them. Approving
// through the signed URL the page shows finishes the instance.

jest.setTimeout(300_000);

const NODE_ID = 'assistant-browser-node';

/** The `data-offset` of each element `selector` matches on the page, in document order. */
async function offsetsOf(page: Page, selector: string): Promise<number[]> {
  const offsets: number[] = [];
  for (const item of await page.locator(selector).all()) {
    offsets.push(Number(await item.getAttribute('data-offset')));
  }
  return offsets;
}

/** The offsets the page listed, in the order it received them. */
const pageOffsets = (page: Page): Promise<number[]> => offsetsOf(page, '#chunks li[data-offset]');

const countOf = (page: Page, selector: string): Promise<number> => page.locator(selector).count();

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

describe('sample assistant in a browser, across a SIGKILL of its node', () => {
  let db: TestDatabase;
  let browser: TestBrowser;
  let port: number;
  let env: Record<string, string>;
  const samples: SampleProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    port = await freePort();
    env = {
      DATABASE_URL: db.url,
      SAMPLE_SEED: '0',
      SAMPLE_QUIET: '1',
      SAMPLE_PUBLIC_URL: `http://127.0.0.1:${port}`,
      GEN_DURABLE_NODE_ID: NODE_ID,
      // Slow enough that the kill below lands before the answer is complete.
      SAMPLE_ASSISTANT_TOKEN_MS: '150',
    };
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    for (const sample of samples) await stopSample(sample);
    await db?.drop();
  });

  const chunksInDatabase = async (id: string): Promise<number> =>
    (
      await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM gen_durable_streams WHERE instance_id = $1 AND name = 'answer'`,
        [id],
      )
    ).rows[0]!.n;

  it('resumes the page from its offset after kill -9, then finishes on approval', async () => {
    const first = await startSample(port, env);
    samples.push(first);
    const base = `http://127.0.0.1:${port}`;
    const started = await fetch(`${base}/assistant`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Why durable?' }),
    });
    expect(started.status).toBe(201);
    const { id, page: pagePath } = (await started.json()) as { id: string; page: string };

    const context = await browser.browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${base}${pagePath}`);
      await page.locator('#chunks li[data-type=token]').nth(4).waitFor({ timeout: 120_000 });

      // kill -9 mid-answer: the instance is still in its answering step.
      first.child.kill('SIGKILL');
      expect(await first.exited()).toEqual({ code: null, signal: 'SIGKILL' });
      const { rows } = await db.pool.query<{ step: string; status: string }>(
        'SELECT step, status FROM gen_durable WHERE id = $1',
        [id],
      );
      expect(rows[0]).toEqual({ step: 'answer', status: 'executing' });
      const beforeRestart = await pageOffsets(page);
      expect(beforeRestart).toEqual(range(beforeRestart.length));

      // The same node again, on the same port: the page's EventSource reconnects to it.
      samples.push(await startSample(port, env));
      await page.waitForSelector('#approval:not([hidden])', { timeout: 180_000 });

      // Every offset the database holds, each exactly once, in order: no gap, no duplicate.
      const offsets = await pageOffsets(page);
      expect(offsets).toEqual(range(await chunksInDatabase(id)));
      expect(offsets.length).toBeGreaterThan(beforeRestart.length);
      // Two runs of the answering step: the killed one's and the re-run's start markers, the
      // re-run's after every chunk the page had before the kill.
      const starts = await offsetsOf(page, '#chunks li[data-type=start]');
      expect(starts).toHaveLength(2);
      expect(starts[0]).toBe(0);
      expect(starts[1]).toBeGreaterThanOrEqual(beforeRestart.length);
      expect(await page.textContent('#runs')).toBe('2');
      // The re-run's whole answer follows its marker, and the page shows only that answer.
      const shown = (await page.textContent('#answer'))!.trim();
      expect(shown.split(' ')).toHaveLength(offsets.length - 1 - starts[1]! - 1);

      // Approve through the signed URL the page received.
      await page.click('#approve');
      await page.waitForSelector('#final[data-status=done]', { timeout: 60_000 });
      const final = JSON.parse((await page.textContent('#final'))!) as {
        status: string;
        result: { answer: string; approval: { approvedBy: string } };
      };
      expect(final.result).toEqual({
        answer: shown,
        approval: { approvedBy: 'the assistant page' },
      });
      expect(await page.textContent('#approval-result')).toMatch(/^200 /);
      await page.locator('#connection', { hasText: 'stream ended' }).waitFor({ timeout: 60_000 });
      // Informational: 1 when the browser's EventSource reconnected by itself (Last-Event-ID),
      // more when the page had to open a new one from its offset (?from=).
      console.log(
        `[assistant] ${(await pageOffsets(page)).length} chunks; EventSources the page opened: ${await page.locator('#connection').getAttribute('data-opened')}`,
      );
      const all = await pageOffsets(page);
      expect(all).toEqual(range(await chunksInDatabase(id)));
      expect(await countOf(page, '#chunks li[data-type=finished]')).toBe(1);
    } finally {
      await context.close();
    }
  });
});
