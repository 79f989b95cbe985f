import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * `pass` forwards; `latency` delays each chunk; `blackhole` stops forwarding in both
 * directions but keeps every socket open (a half-open peer: the pg-boss trick), new
 * connections included; `reset` is an action, not a mode (destroys every open pair).
 */
export type ProxyMode =
  { kind: 'pass' } | { kind: 'latency'; ms: number; jitterMs: number } | { kind: 'blackhole' };

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
  /** A reset is due once the server answers (its next ReadyForQuery). */
  resetOnReply?: boolean;
}

/** What an armed statement fault does once a client chunk holds one of its needles. */
export type StatementFaultKind = 'reset-after-reply' | 'blackhole-after-send';

/** A ReadyForQuery message (type 'Z', length 5) in a server chunk: the statement is answered. */
const READY_FOR_QUERY = Buffer.from([0x5a, 0, 0, 0, 5]);

/**
 * Needles for the statements a flush commits with: a simple COMMIT, the solo flush's bind (its
 * transitions statement, or FLUSH_DONE when every outcome is `done`).
 */
export const FLUSH_COMMIT_NEEDLES: readonly Buffer[] = [
  Buffer.from('COMMIT\0'),
  Buffer.from('/flush_transitions\0'),
  Buffer.from('/flush_done\0'),
];

/** Needles for statements that only run inside a flush transaction (they take row locks). */
export const IN_FLUSH_NEEDLES: readonly Buffer[] = [
  Buffer.from('/lock_flush_rows\0'),
  Buffer.from('/join_parents\0'),
  Buffer.from('/flush_parks\0'),
  Buffer.from('/fanout_lock_parents\0'),
  Buffer.from('/consume_signals\0'),
  Buffer.from('/consume_inboxes\0'),
];

/**
 * A loopback TCP fault proxy for one worker (docs/reliability.md §3.3): 127.0.0.1:<port> → the
 * target port on 127.0.0.1. Chunks are forwarded as they come unless the mode says
 * otherwise; a chunk dropped under `blackhole` is gone (the connection is then useless, as a
 * real half-open one is, until a client-side timeout destroys it).
 */
export class FaultProxy {
  private mode: ProxyMode = { kind: 'pass' };
  private armed:
    { kind: StatementFaultKind; needles: readonly Buffer[]; resolve(): void } | undefined;
  private readonly pairs = new Set<Pair>();
  private constructor(
    private readonly server: Server,
    readonly port: number,
    readonly targetPort: number,
    private readonly random: () => number,
  ) {}

  static start(targetPort: number, random: () => number = Math.random): Promise<FaultProxy> {
    return new Promise((resolve, reject) => {
      let proxy: FaultProxy | undefined;
      const server = createServer((client) => proxy?.accept(client));
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        const port = typeof address === 'object' && address ? address.port : 0;
        proxy = new FaultProxy(server, port, targetPort, random);
        resolve(proxy);
      });
    });
  }

  get current(): ProxyMode {
    return this.mode;
  }

  get connections(): number {
    return this.pairs.size;
  }

  setMode(mode: ProxyMode): void {
    this.mode = mode;
  }

  /**
   * Arms one statement fault (chunk-level, approximate: a needle is a statement name or text
   * in a client chunk): `reset-after-reply` lets the server run and answer the statement, then
   * resets the client's connection instead of delivering the answer (S-RESET: a COMMIT that
   * took effect, reported as a broken link); `blackhole-after-send` forwards the statement and
   * then switches the whole proxy to `blackhole` (S-FLUSHHOLE: the link dies inside a flush
   * transaction, holding its row locks). Resolves when it fired; `disarm` drops it.
   */
  arm(kind: StatementFaultKind, needles: readonly Buffer[]): Promise<void> {
    return new Promise((resolve) => {
      this.armed = { kind, needles, resolve };
    });
  }

  disarm(): void {
    this.armed = undefined;
  }

  /** Destroys both sides of every open connection (a reset). */
  reset(): number {
    const n = this.pairs.size;
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.upstream.destroy();
    }
    this.pairs.clear();
    return n;
  }

  close(): Promise<void> {
    this.reset();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const upstream = connect({ host: '127.0.0.1', port: this.targetPort });
    const pair: Pair = { client, upstream };
    this.pairs.add(pair);
    const end = (): void => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
    client.on('data', (chunk: Buffer) => {
      const armed = this.armed;
      const hit =
        armed !== undefined &&
        this.mode.kind === 'pass' &&
        armed.needles.some((n) => chunk.includes(n));
      this.forward(chunk, upstream);
      if (!hit) return;
      this.armed = undefined;
      armed.resolve();
      if (armed.kind === 'reset-after-reply') pair.resetOnReply = true;
      else this.mode = { kind: 'blackhole' };
    });
    upstream.on('data', (chunk: Buffer) => {
      if (pair.resetOnReply && chunk.includes(READY_FOR_QUERY)) {
        this.pairs.delete(pair);
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      this.forward(chunk, client);
    });
  }

  private forward(chunk: Buffer, to: Socket): void {
    const mode = this.mode;
    if (mode.kind === 'blackhole') return;
    if (mode.kind === 'latency') {
      // Chunks keep their order: each waits at least as long as the one before it.
      const delay = mode.ms + Math.floor(this.random() * mode.jitterMs);
      const previous = (to as Socket & { gdLast?: number }).gdLast ?? 0;
      const at = Math.max(Date.now() + delay, previous);
      (to as Socket & { gdLast?: number }).gdLast = at;
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, at - Date.now());
      return;
    }
    if (!to.destroyed) to.write(chunk);
  }
}
