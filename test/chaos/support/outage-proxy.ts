import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback proxy in front of PostgreSQL that can play a database outage: `down()` drops every
 * open connection and closes each new one as soon as it is accepted (what a client sees while
 * the server restarts), `up()` forwards again. The server itself keeps running, so the other
 * test files on it are not disturbed.
 */
export class OutageProxy {
  private isDown = false;
  private readonly sockets = new Set<Socket>();
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static start(targetPort: number): Promise<OutageProxy> {
    return new Promise((resolve, reject) => {
      let proxy: OutageProxy | undefined;
      const server = createServer((client) => proxy?.accept(client, targetPort));
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        proxy = new OutageProxy(server, typeof address === 'object' && address ? address.port : 0);
        resolve(proxy);
      });
    });
  }

  /** `url` with its host and port replaced by this proxy's. */
  urlFor(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  down(): void {
    this.isDown = true;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  up(): void {
    this.isDown = false;
  }

  close(): Promise<void> {
    this.down();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, targetPort: number): void {
    if (this.isDown) {
      client.destroy();
      return;
    }
    const upstream = connect({ host: '127.0.0.1', port: targetPort });
    this.sockets.add(client);
    this.sockets.add(upstream);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
