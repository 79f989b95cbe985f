import {
  awaitSignal,
  done,
  DurableFsm,
  EngineService,
  next,
  Step,
  type StepContext,
  stop,
} from '../../lib';

import { ANSWER_STREAM, type AnswerChunk } from './answer-chunk';
import { FakeModel } from './fake-model';

export interface AssistantState {
  readonly prompt: string;
  /** The complete answer, once `answer` streamed it. */
  readonly answer?: string;
}

/** How long the approval link stays valid, and how long the instance waits for it: one hour. */
export const APPROVAL_TTL_MS = 60 * 60_000;

/**
 * An assistant that answers a prompt and waits for a human's approval:
 * 1. `answer` streams the fake model's answer token by token to the `answer` stream
 *    (docs/streams.md), after a `start` marker: a run after a crash writes its own marker and a
 *    whole new answer after what the lost run wrote, so a reader clears what it showed;
 * 2. `askApproval` mints a single-use signed callback URL for the `approved` signal
 *    (docs/callbacks.md), publishes it as an `approval` chunk, and parks on the signal;
 * 3. `finish` runs on the approval (or when the link expired, with nothing awaited): it writes
 *    a `finished` chunk with the approval's body and ends with it. The stream ends with the
 *    instance, and its SSE readers get `end`.
 */
@DurableFsm({ name: 'assistant', initial: 'answer' })
export class AssistantFsm {
  constructor(
    private readonly model: FakeModel,
    private readonly engine: EngineService,
  ) {}

  @Step({ next: ['askApproval'] }) async answer(ctx: StepContext<AssistantState>) {
    const stream = ctx.stream(ANSWER_STREAM);
    await stream.write({ type: 'start', attempt: ctx.attempt } satisfies AnswerChunk);
    let text = '';
    for await (const token of this.model.answer(ctx.state.prompt, ctx.signal)) {
      text += token;
      await stream.write({ type: 'token', token } satisfies AnswerChunk);
    }
    return next('askApproval', { ...ctx.state, answer: text.trim() });
  }

  @Step({ next: ['finish'] }) async askApproval(ctx: StepContext<AssistantState>) {
    const url = await this.engine.callbackUrl(ctx.id, 'approved', {
      ttlMs: APPROVAL_TTL_MS,
      once: true,
    });
    await ctx.stream(ANSWER_STREAM).write({ type: 'approval', url } satisfies AnswerChunk);
    return awaitSignal('approved', 'finish', ctx.state, { timeout: APPROVAL_TTL_MS });
  }

  @Step() async finish(ctx: StepContext<AssistantState>) {
    const approval = ctx.awaited[0];
    if (!approval) return stop('nobody approved the answer within an hour');
    await ctx
      .stream(ANSWER_STREAM)
      .write({ type: 'finished', approval: approval.payload } satisfies AnswerChunk);
    return done({ answer: ctx.state.answer ?? '', approval: approval.payload });
  }
}
