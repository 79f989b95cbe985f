/**
 * The chunks of an assistant's `answer` stream (docs/streams.md), in the order a run writes them:
 * - `start`: a run of the answering step begins; a reader clears the answer it showed (a run
 *   after a crash appends a whole new answer after what the lost run wrote);
 * - `token`: the next piece of the answer;
 * - `approval`: the answer is complete and waits for approval at `url` (a signed callback URL,
 *   docs/callbacks.md: POST a JSON body to it to approve);
 * - `finished`: the approval arrived, with its body; the instance ends next.
 */
export type AnswerChunk =
  | { readonly type: 'start'; readonly attempt: number }
  | { readonly type: 'token'; readonly token: string }
  | { readonly type: 'approval'; readonly url: string }
  | { readonly type: 'finished'; readonly approval: unknown };

/** The name of the stream the assistant writes. */
export const ANSWER_STREAM = 'answer';
