import { Injectable } from '@nestjs/common';

/** The fixed answer of the fake model, whatever the prompt (a deterministic demo). */
const ANSWER =
  'A durable engine keeps the state of every step in PostgreSQL, so a node that dies in the ' +
  'middle of a step loses nothing that was committed: another run of the step starts from the ' +
  'last committed state, and a stream keeps every chunk it wrote with its offset, so a reader ' +
  'that reconnects from its last offset misses nothing and sees nothing twice. This answer ' +
  'arrives one word at a time to show it.';

/** ms between two tokens: `SAMPLE_ASSISTANT_TOKEN_MS`, default 100. */
function tokenDelayMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = Number(env['SAMPLE_ASSISTANT_TOKEN_MS'] ?? 100);
  return Number.isFinite(raw) && raw >= 0 ? raw : 100;
}

/**
 * Stands in for a model's streaming API: yields the words of a fixed text (each with its
 * trailing space) with a pause before each, so an answer takes a few seconds and a node can be
 * killed in the middle of one. Stops early when `signal` aborts (the step was cancelled).
 */
@Injectable()
export class FakeModel {
  private readonly delayMs = tokenDelayMs();

  async *answer(prompt: string, signal: AbortSignal): AsyncIterable<string> {
    void prompt;
    for (const word of ANSWER.split(' ')) {
      if (signal.aborted) return;
      await new Promise((resolve) => setTimeout(resolve, this.delayMs));
      yield `${word} `;
    }
  }
}
