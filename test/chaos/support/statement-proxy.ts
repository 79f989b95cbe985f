import { connect, createServer, type Server, type Socket } from 'node:net';

/** One frontend (client → server) protocol message, as the proxy saw it. */
export interface FrontendMessage {
  /** The message type: 'Q' simple query, 'P' parse, 'B' bind, 'X' terminate, … */
  readonly type: string;
  /** The body as latin1 text: statement names and SQL are readable in it. */
  readonly text: string;
}

/**
 * What to do when a frontend message matches:
 * - `reset-after-reply`: forward it, let the server execute it and answer (ReadyForQuery),
 *   then drop the answer and reset the client's TCP connection (RST): the statement (a COMMIT,
 *   an autocommit UPDATE) took effect, the client only learns that its link was reset.
 * - `reset-after-send`: forward it and reset both connections at once: the server may or may
 *   not have read it (a reset drops unread data), the client cannot know which.
 * - `blackhole-after-send`: forward it, then forward nothing more in either direction on any
 *   connection, old or new, keeping every socket open (a half-open link), until `heal()`.
 */
export type StatementFault = 'reset-after-reply' | 'reset-after-send' | 'blackhole-after-send';

interface Rule {
  readonly match: (message: FrontendMessage) => boolean;
  readonly fault: StatementFault;
  remaining: number;
}

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
}

/**
 * A loopback TCP proxy that reads the PostgreSQL frontend protocol (no TLS) and injects a fault
 * right after a chosen statement — at the protocol step where a real network fault is
 * ambiguous for the client (test/chaos/link-faults.spec.ts). Everything else passes untouched.
 */
export class StatementProxy {
  private readonly rules: Rule[] = [];
  private readonly pairs = new Set<Pair>();
  private dark = false;
  /** How many times a rule fired. */
  fired = 0;
  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly targetPort: number,
  ) {}

  static start(targetPort: number): Promise<StatementProxy> {
    return new Promise((resolve, reject) => {
      let proxy: StatementProxy | undefined;
      const server = createServer((client) => proxy?.accept(client));
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        proxy = new StatementProxy(
          server,
          typeof address === 'object' && address ? address.port : 0,
          targetPort,
        );
        resolve(proxy);
      });
    });
  }

  /** Arms a fault for the next `times` messages that match. */
  arm(fault: StatementFault, match: (message: FrontendMessage) => boolean, times = 1): void {
    this.rules.push({ match, fault, remaining: times });
  }

  get isDark(): boolean {
    return this.dark;
  }

  /** Ends a blackhole: the half-open connections are reset, new ones pass. */
  heal(): void {
    this.dark = false;
    for (const pair of this.pairs) {
      pair.client.resetAndDestroy();
      pair.upstream.destroy();
    }
    this.pairs.clear();
  }

  close(): Promise<void> {
    this.rules.length = 0;
    this.heal();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const upstream = connect({ host: '127.0.0.1', port: this.targetPort });
    const pair: Pair = { client, upstream };
    this.pairs.add(pair);
    const end = (): void => {
      this.pairs.delete(pair);
      if (!client.destroyed) client.destroy();
      if (!upstream.destroyed) upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
    let frontend = Buffer.alloc(0);
    let startup = true;
    let faulted = false;
    /** Set once a reset-after-reply rule fired on this pair: the server's reply is withheld. */
    let resetPending = false;
    let backend = Buffer.alloc(0);

    client.on('data', (chunk: Buffer) => {
      if (this.dark) return;
      frontend = Buffer.concat([frontend, chunk]);
      let fault: StatementFault | undefined;
      for (;;) {
        if (startup) {
          if (frontend.length < 4) break;
          const length = frontend.readInt32BE(0);
          if (frontend.length < length) break;
          frontend = frontend.subarray(length);
          startup = false;
          continue;
        }
        if (frontend.length < 5) break;
        const length = frontend.readInt32BE(1);
        if (frontend.length < 1 + length) break;
        const message: FrontendMessage = {
          type: String.fromCharCode(frontend[0]!),
          text: frontend.subarray(5, 1 + length).toString('latin1'),
        };
        frontend = frontend.subarray(1 + length);
        // One fault per connection: a statement's Parse and Bind may come in two chunks.
        if (!faulted) {
          fault = this.take(message);
          faulted = fault !== undefined;
        }
      }
      if (!upstream.destroyed) upstream.write(chunk);
      if (fault === 'reset-after-reply') {
        resetPending = true;
        backend = Buffer.alloc(0);
      } else if (fault === 'reset-after-send') {
        this.pairs.delete(pair);
        client.resetAndDestroy();
        upstream.resetAndDestroy();
      } else if (fault === 'blackhole-after-send') {
        this.dark = true;
      }
    });

    upstream.on('data', (chunk: Buffer) => {
      if (this.dark) return;
      if (!resetPending) {
        if (!client.destroyed) client.write(chunk);
        return;
      }
      backend = Buffer.concat([backend, chunk]);
      if (readyForQueryIn(backend)) {
        // The server answered (its work is done and committed): the client never hears it.
        this.pairs.delete(pair);
        client.resetAndDestroy();
        upstream.destroy();
      }
    });
  }

  private take(message: FrontendMessage): StatementFault | undefined {
    const rule = this.rules.find((r) => r.remaining > 0 && r.match(message));
    if (!rule) return undefined;
    rule.remaining--;
    this.fired++;
    return rule.fault;
  }
}

/** True when the backend stream holds a complete ReadyForQuery message. */
function readyForQueryIn(buf: Buffer): boolean {
  let offset = 0;
  while (offset + 5 <= buf.length) {
    const length = buf.readInt32BE(offset + 1);
    if (offset + 1 + length > buf.length) return false;
    if (buf[offset] === 0x5a) return true; // 'Z'
    offset += 1 + length;
  }
  return false;
}

/** Matches a statement by its prepared name (Parse or Bind) or a simple query's text. */
export function statementNamed(name: string): (m: FrontendMessage) => boolean {
  return (m) => (m.type === 'P' || m.type === 'B') && m.text.includes(`/${name}\0`);
}

/** Matches a simple query that starts with `sql` (COMMIT, BEGIN, …). */
export function simpleQuery(sql: string): (m: FrontendMessage) => boolean {
  return (m) => m.type === 'Q' && m.text.startsWith(sql);
}
