import type { SqlExecutor } from '../db/sql-executor';
import { type AwaitUntil, awaitAnswer } from '../instance/await-answer';
import type { AwaitResult } from '../instance/instance-view';
import { readInstanceById } from '../sql/instance.sql';

/** The first pause between reads; each pause doubles up to {@link MAX_PAUSE_MS}. */
const FIRST_PAUSE_MS = 25;
const MAX_PAUSE_MS = 1_000;

/**
 * `await` for a face that runs no engine (the client, docs/client.md "Awaiting an instance"):
 * the answers of the engine's watcher (docs/design.md §9) from a primary-key read of the row,
 * re-read after a pause of 25 ms doubling to 1 s (capped at the time left), so a long wait costs
 * about one statement a second. The first read's errors reach the caller; once a snapshot
 * exists, a failed or hung re-read (a blip, a pool ended by `close()`) is skipped, and the
 * deadline answers `busy` with the last snapshot (at most one pause late).
 */
export async function pollAwait(
  sql: SqlExecutor,
  id: string,
  timeoutMs: number,
  until: AwaitUntil,
): Promise<AwaitResult> {
  const deadline = Date.now() + timeoutMs;
  let answer = awaitAnswer(await readInstanceById(sql, id), until);
  let pause = FIRST_PAUSE_MS;
  while (answer.kind === 'busy') {
    const remaining = deadline - Date.now();
    if (remaining <= 0) return answer;
    await sleep(Math.min(pause, remaining));
    pause = Math.min(pause * 2, MAX_PAUSE_MS);
    const read = await bounded(
      readInstanceById(sql, id),
      Math.max(deadline - Date.now(), 0) + MAX_PAUSE_MS,
    );
    if (read !== undefined) answer = awaitAnswer(read.row, until);
  }
  return answer;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The read's row, or undefined if it failed or did not settle within `ms`. */
function bounded<T>(read: Promise<T>, ms: number): Promise<{ row: T } | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    read.then(
      (row) => {
        clearTimeout(timer);
        resolve({ row });
      },
      () => {
        clearTimeout(timer);
        resolve(undefined);
      },
    );
  });
}
