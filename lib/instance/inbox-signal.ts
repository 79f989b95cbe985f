/** One signal of an instance's inbox as `inbox()` answers it (docs/design.md §8.1, §30). */
export interface InboxSignal {
  readonly id: string;
  readonly name: string;
  readonly payload: unknown;
  readonly dedupKey: string | null;
  readonly consumedAt: Date | null;
  readonly insertedAt: Date;
}
