import { Client, type ClientConfig } from 'pg';

import { ConfigurationError } from '../errors';
import { SESSION_ROLE } from '../sql/session.sql';

/** One server of a multi-host setup (a primary and its standbys). */
export interface HostAddress {
  readonly host: string;
  readonly port: number;
}

export interface MultiHostClientOptions {
  /** The servers, tried in this order (the last one that matched is tried first next time). */
  readonly hosts: readonly HostAddress[];
  /**
   * `'read-write'` (default): only a server that is not in recovery and whose
   * `default_transaction_read_only` is off; `'any'`: the first server that answers. As libpq's
   * `target_session_attrs`.
   */
  readonly targetSessionAttrs?: 'read-write' | 'any';
  /** ms a probe of one server may take (connect + one query); default 2 000. */
  readonly probeTimeoutMs?: number;
}

/**
 * The class multiHostClient returns: a subclass of pg's `Client`, for a TypeORM DataSource's
 * `extra: { Client }`. Typed without pg's declarations, so the package's types need no
 * `@types/pg`; for `new Pool({ Client })` cast it (`as unknown as typeof Client`).
 */
export type MultiHostClientClass = new (config?: string | object) => object;

/** Why a server was passed over, for the error when none matched. */
interface Miss {
  readonly address: string;
  readonly reason: string;
}

/**
 * libpq's multi-host connection strings (`host=a,b target_session_attrs=read-write`) for
 * node-postgres, which takes one host (docs/operations.md, "Failover"): a `pg.Client` class
 * that, on each connect, probes the servers in order with a short-lived client and connects
 * to the first that matches `targetSessionAttrs`. Give it to the DataSource as
 * `extra: { Client: multiHostClient({ hosts }) }`; the pool then reconnects to whichever server
 * is the primary after a failover, the engine's flush retry and reaper do the rest. The probe
 * costs one extra connection per pool connect (pools keep their connections, so rarely); a
 * server promoted or demoted between the probe and the connect is caught by the next statement
 * failing (a write on a standby is refused) and the pool reconnecting.
 */
export function multiHostClient(options: MultiHostClientOptions): MultiHostClientClass {
  const hosts = [...options.hosts];
  if (hosts.length === 0) {
    throw new ConfigurationError('multiHostClient.hosts', 'must name at least one server');
  }
  for (const [i, h] of hosts.entries()) {
    if (typeof h.host !== 'string' || h.host === '' || !Number.isInteger(h.port) || h.port <= 0) {
      throw new ConfigurationError(
        `multiHostClient.hosts[${i}]`,
        'must be { host: non-empty string, port: positive integer }',
      );
    }
  }
  const target = options.targetSessionAttrs ?? 'read-write';
  const probeTimeoutMs = options.probeTimeoutMs ?? 2_000;
  let preferred = 0;

  async function probe(config: ClientConfig, h: HostAddress): Promise<string | null> {
    const client = new Client({
      ...config,
      host: h.host,
      port: h.port,
      connectionTimeoutMillis: probeTimeoutMs,
      query_timeout: probeTimeoutMs,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      if (target === 'any') return null;
      const role = await SESSION_ROLE.run({
        // A bare probe client: no prepared names, no schema to render.
        queryResult: async (statement, values) => {
          const result = await client.query(statement.text, values as unknown[]);
          return { rows: result.rows, rowCount: result.rowCount };
        },
      });
      if (role.inRecovery) return 'in recovery (a standby)';
      if (role.readOnlyByDefault) return 'default_transaction_read_only is on';
      return null;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async function choose(config: ClientConfig): Promise<HostAddress> {
    const misses: Miss[] = [];
    for (let k = 0; k < hosts.length; k++) {
      const index = (preferred + k) % hosts.length;
      const h = hosts[index]!;
      const reason = await probe(config, h);
      if (reason === null) {
        preferred = index;
        return h;
      }
      misses.push({ address: `${h.host}:${h.port}`, reason });
    }
    throw new Error(
      `no server matched target_session_attrs=${target}: ${misses
        .map((m) => `${m.address} (${m.reason})`)
        .join('; ')}`,
    );
  }

  class MultiHostClient extends Client {
    private readonly probeConfig: ClientConfig;

    constructor(config?: string | ClientConfig) {
      super(config);
      // The probe connects to each host with this client's own settings; a connection string
      // would override the host and port, so its parsed fields are used instead.
      const rest: ClientConfig =
        typeof config === 'string' || config === undefined ? {} : { ...config };
      delete rest.connectionString;
      this.probeConfig = {
        ...rest,
        user: this.user,
        database: this.database,
        // pg-pool keeps the password non-enumerable; the client resolved it.
        password: this.password ?? (typeof config === 'object' ? config.password : undefined),
        ssl: typeof config === 'object' && config.ssl !== undefined ? config.ssl : this.ssl,
      };
    }

    override connect(): Promise<Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, c: Client) => void)): void;
    override connect(
      callback?: ((err: Error) => void) | ((err: null, c: Client) => void),
    ): Promise<Client> | void {
      const connected = choose(this.probeConfig).then((h) => {
        this.host = h.host;
        this.port = h.port;
        return super.connect();
      });
      if (!callback) return connected;
      connected.then(
        (c) => (callback as (err: null, c: Client) => void)(null, c),
        (err: unknown) =>
          (callback as (err: Error) => void)(err instanceof Error ? err : new Error(String(err))),
      );
    }
  }
  return MultiHostClient;
}
