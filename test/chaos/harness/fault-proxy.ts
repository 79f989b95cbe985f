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
}

/**
 * A loopback TCP fault proxy for one worker (docs/reliability.md §3.3): 127.0.0.1:<port> → the
 * target port on 127.0.0.1. Chunks are forwarded as they come unless the mode says
 * otherwise; a chunk dropped under `blackhole` is gone (the connection is then useless, as a
 * real half-open one is, until a client-side timeout destroys it).
 */
export class FaultProxy {
  private mode: ProxyMode = { kind: 'pass' };
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
    client.on('data', (chunk) => this.forward(chunk, upstream));
    upstream.on('data', (chunk) => this.forward(chunk, client));
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
