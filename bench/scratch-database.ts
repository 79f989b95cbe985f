/**
 * The set-up the scripts under bench/ that need one scratch database share: a database of its
 * own on DATABASE_URL's server (one it may CREATE DATABASE on) or, with no DATABASE_URL, on the
 * embedded PostgreSQL the project starts itself; dropped (and the embedded server stopped) when
 * the body ends, whether it succeeded or threw. `runScript` runs a script's main and sets its
 * exit code.
 */
import { Client } from 'pg';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startEmbeddedPostgres } = require('../scripts/embedded-postgres.cjs') as {
  startEmbeddedPostgres(): Promise<{ url: string; stop(): Promise<void> }>;
};

/** What the body of {@link withScratchDatabase} gets. */
export interface ScratchDatabase {
  /** The connection string of the new database. */
  readonly url: string;
  /** Its name (`<prefix>_<ms since epoch>`). */
  readonly name: string;
  /** A connection to the server's own database, open for the body's whole run. */
  readonly admin: Client;
  /** The server's connection string: DATABASE_URL's, or the embedded server's. */
  readonly server: string;
  /** True when the server is the embedded PostgreSQL (no DATABASE_URL). */
  readonly embedded: boolean;
}

/**
 * Creates `<prefix>_<now>` on the server, runs `body` with it, then drops it `WITH (FORCE)` (the
 * body's pools may still hold connections when it throws) and stops the embedded server if one
 * was started.
 */
export async function withScratchDatabase<T>(
  prefix: string,
  body: (db: ScratchDatabase) => Promise<T>,
): Promise<T> {
  const embedded = process.env['DATABASE_URL'] ? undefined : await startEmbeddedPostgres();
  const server = process.env['DATABASE_URL'] ?? embedded!.url;
  const name = `${prefix}_${Date.now()}`;
  const admin = new Client({ connectionString: server });
  try {
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(server);
    url.pathname = `/${name}`;
    try {
      return await body({ url: url.toString(), name, admin, server, embedded: !!embedded });
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    }
  } finally {
    await admin.end().catch(() => undefined);
    await embedded?.stop();
  }
}

/**
 * Runs a script's `main`: when it resolves, exits with `process.exitCode` (0 unless the script
 * set it, e.g. to report a violation it counted); when it rejects, 1 with the stack on stderr.
 */
export function runScript(main: () => Promise<void>): void {
  main().then(
    () => process.exit(),
    (err: unknown) => {
      process.stderr.write(`${String((err as Error).stack ?? err)}\n`);
      process.exit(1);
    },
  );
}
