/** What the parent tells a node process (node-main.ts) to be. */
export interface NodeConfig {
  readonly role: 'web' | 'worker' | 'maintenance';
  readonly nodeId: string;
  readonly databaseUrl: string;
  readonly poke: 'local' | 'postgres' | 'none' | { redis: string };
  readonly pollInterval: number;
  readonly maxPollInterval: number;
  /** Worker concurrency of queue `dist`. */
  readonly concurrency: number;
  /**
   * Servers of a primary and its standbys: the DataSource connects through
   * `multiHostClient({ hosts })` to whichever is read-write (`databaseUrl` gives user and
   * database).
   */
  readonly hosts?: ReadonlyArray<{ readonly host: string; readonly port: number }>;
}

/** Parent → node requests; each is answered by one `reply` with the same `reqId`. */
export type NodeCommand = { readonly reqId: number } & (
  | {
      readonly cmd: 'insert';
      readonly count: number;
      readonly spacingMs: number;
      readonly sleepMs: number;
      readonly tag: string;
    }
  | {
      readonly cmd: 'insertAll';
      readonly count: number;
      readonly sleepMs: number;
      readonly tag: string;
    }
  | { readonly cmd: 'signal'; readonly ids: readonly string[]; readonly spacingMs: number }
  | { readonly cmd: 'shutdown' }
);

/** Distributive Omit, so a command can be written without its reqId. */
export type NodeRequest = NodeCommand extends infer C
  ? C extends NodeCommand
    ? Omit<C, 'reqId'>
    : never
  : never;

/** Node → parent messages. */
export type NodeMessage =
  | { readonly type: 'ready'; readonly pid: number; readonly listening: boolean | null }
  | { readonly type: 'fatal'; readonly error: string }
  | {
      readonly type: 'reply';
      readonly reqId: number;
      readonly ok: boolean;
      readonly result?: unknown;
      readonly error?: string;
    }
  | {
      readonly type: 'step';
      readonly id: string;
      readonly step: 'start' | 'finish';
      readonly attempt: number;
      readonly at: number;
      readonly node: string;
    }
  | {
      readonly type: 'event';
      readonly event: string;
      readonly measurements: Record<string, number>;
      readonly at: number;
    };
