import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback proxy that makes one connection's startup end badly on purpose: it holds the
 * server's startup messages until ReadyForQuery, lets the test terminate that backend (its pid
 * is in BackendKeyData), waits for the server's FATAL, and hands the client the startup *and*
 * the FATAL in one TCP chunk — so node-postgres parses "ready" and "terminated" in the same
 * synchronous pass, while the pool is handing the brand-new client to its caller. Later
 * connections pass through untouched.
 */
export class HandoverProxy {
  private armed = true;
  private readonly sockets = new Set<Socket>();
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static start(
    targetPort: number,
    terminate: (pid: number) => Promise<void>,
  ): Promise<HandoverProxy> {
    return new Promise((resolve, reject) => {
      let proxy: HandoverProxy | undefined;
      const server = createServer((client) => proxy?.accept(client, targetPort, terminate));
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        proxy = new HandoverProxy(
          server,
          typeof address === 'object' && address ? address.port : 0,
        );
        resolve(proxy);
      });
    });
  }

  private accept(
    client: Socket,
    targetPort: number,
    terminate: (pid: number) => Promise<void>,
  ): void {
    const upstream = connect({ host: '127.0.0.1', port: targetPort });
    this.sockets.add(client);
    this.sockets.add(upstream);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
    client.on('data', (chunk) => upstream.write(chunk));
    if (!this.armed) {
      upstream.on('data', (chunk) => client.write(chunk));
      return;
    }
    this.armed = false;
    let held = Buffer.alloc(0);
    let phase: 'startup' | 'terminating' | 'passing' = 'startup';
    upstream.on('data', (chunk: Buffer) => {
      if (phase === 'passing') {
        client.write(chunk);
        return;
      }
      held = Buffer.concat([held, chunk]);
      if (phase === 'startup') {
        const pid = readyPid(held);
        if (pid === undefined) return;
        phase = 'terminating';
        void terminate(pid);
        return;
      }
      // The FATAL ErrorResponse has arrived: release everything as one chunk.
      if (held.includes(Buffer.from('57P01'))) {
        phase = 'passing';
        client.write(held);
      }
    });
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** The backend pid once the startup stream holds BackendKeyData and ReadyForQuery. */
function readyPid(buf: Buffer): number | undefined {
  let offset = 0;
  let pid: number | undefined;
  while (offset + 5 <= buf.length) {
    const type = String.fromCharCode(buf[offset]!);
    const length = buf.readInt32BE(offset + 1);
    if (offset + 1 + length > buf.length) return undefined;
    if (type === 'K') pid = buf.readInt32BE(offset + 5);
    if (type === 'Z') return pid;
    offset += 1 + length;
  }
  return undefined;
}
