import { Pool } from 'pg';

import { GenDurableClient } from '../client/gen-durable-client';
import type { ClientFsm } from '../client/client-options';
import { UnreachableError, UsageError, isUnreachable } from './exit-codes';

/** The options every command takes (docs/cli.md "Global options"). */
export interface GlobalOptions {
  readonly url?: string;
  readonly schema: string;
  readonly name: string;
  readonly json: boolean;
  readonly verbose: boolean;
}

/** PostgreSQL's "database does not exist". */
const INVALID_CATALOG_NAME = '3D000';

/** How long the CLI waits for a connection before it reports the database unreachable, ms. */
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * One command's connection: a pool on `--url` or `DATABASE_URL` (one connection is enough),
 * the client over it, and the host and port an unreachable database is reported with.
 */
export class CliContext {
  readonly pool: Pool;
  readonly client: GenDurableClient;
  readonly where: string;

  constructor(
    readonly options: GlobalOptions,
    fsms: Readonly<Record<string, ClientFsm>> = {},
  ) {
    const url = options.url ?? process.env['DATABASE_URL'];
    if (url === undefined || url.length === 0) {
      throw new UsageError('no database: set DATABASE_URL or pass --url <connection string>');
    }
    this.where = hostAndPort(url);
    this.pool = new Pool({
      connectionString: url,
      max: 2,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      application_name: 'gen-durable-cli',
    });
    // An idle client's connection error (the server going away) must not crash the CLI.
    this.pool.on('error', () => undefined);
    this.client = new GenDurableClient(this.pool, {
      schema: options.schema,
      name: options.name,
      fsms,
    });
  }

  /** Opens one connection first, so an unreachable database is one clear line (exit 3). */
  async connect(): Promise<void> {
    try {
      const probe = await this.pool.connect();
      probe.release();
    } catch (err) {
      if (isUnreachable(err)) throw this.unreachable(err);
      throw err;
    }
  }

  /**
   * The one-line error of an unreachable database, naming host and port; a database the server
   * does not have says so, in the server's words (`database "x" does not exist`).
   */
  unreachable(err: unknown): UnreachableError {
    const e = err as { code?: unknown; message?: unknown };
    if (e.code === INVALID_CATALOG_NAME && typeof e.message === 'string') {
      return new UnreachableError(`${e.message} on the server at ${this.where}`);
    }
    const why = typeof e.code === 'string' ? e.code : String(e.message ?? err);
    return new UnreachableError(`cannot reach the database at ${this.where} (${why})`);
  }

  async close(): Promise<void> {
    await this.client.close();
    await this.pool.end();
  }
}

/** `host:port` of a connection string (PG* variables and libpq defaults where it is silent). */
export function hostAndPort(url: string): string {
  let host = process.env['PGHOST'] ?? 'localhost';
  let port = process.env['PGPORT'] ?? '5432';
  try {
    const u = new URL(url);
    if (u.hostname) host = decodeURIComponent(u.hostname);
    if (u.port) port = u.port;
    const hostParam = u.searchParams.get('host');
    if (hostParam) host = hostParam;
  } catch {
    // A key=value connection string: read host and port from it.
    const h = /(?:^|\s)host=(\S+)/.exec(url);
    const p = /(?:^|\s)port=(\S+)/.exec(url);
    if (h?.[1]) host = h[1];
    if (p?.[1]) port = p[1];
  }
  return `${host}:${port}`;
}
