#!/usr/bin/env node
'use strict';
// Shows that each docs/design.md §26 mechanism (and each engine fix of docs/reliability.md) has a test
// that fails without it: copies the working tree to a scratch folder, removes the mechanism
// there with one exact text edit, runs the tests that must catch it, and reports. The real
// tree is never touched. Usage: node test/chaos/mechanism-removal.cjs [name ...] (default all;
// needs DATABASE_URL/REDIS_URL like the jest suite). Prints one line per (mechanism, test).
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '../..');

/** name → { edits: [file, from, to][], tests: jest argument strings } */
const MECHANISMS = {
  'fencing token (§26.1)': {
    edits: [
      [
        'lib/sql/outcome.sql.ts',
        "g.locked_by = t.worker AND g.status = 'executing' AND g.claim_seq = t.seq",
        "g.locked_by = t.worker AND g.status = 'executing'",
      ],
    ],
    tests: ['test/chaos/races.spec.ts -t 26.1', 'test/chaos/fault-points.spec.ts -t S04'],
  },
  'stable node identity (§26.2)': {
    edits: [
      [
        'lib/options/option-table.ts',
        "process.env['GEN_DURABLE_NODE_ID'] ?? hostname()",
        "process.env['GEN_DURABLE_NODE_ID'] ?? `${hostname()}#${process.pid}`",
      ],
    ],
    tests: ['test/unit/node-identity.spec.ts'],
  },
  'flush retry (§26.3)': {
    edits: [
      [
        'lib/runtime/flusher.ts',
        '        if (!isTransient(err)) throw err;\n',
        '        throw err;\n',
      ],
    ],
    tests: ['test/chaos/fault-points.spec.ts -t S02'],
  },
  'statement timeout (§26.4)': {
    edits: [['lib/db/sql-executor.ts', 'query_timeout: this.options.statementTimeoutMs,\n', '']],
    tests: ['test/engine/statement-timeout.spec.ts'],
  },
  'poison pills end (§26.5)': {
    edits: [
      [
        'lib/sql/lease.sql.ts',
        "WHEN v.poisoned THEN 'failed' ELSE 'runnable' END",
        "WHEN false THEN 'failed' ELSE 'runnable' END",
      ],
    ],
    tests: ['test/chaos/poison-pill.spec.ts', 'test/chaos/model-regressions.spec.ts -t poison'],
  },
  'signal locks a live target first (§26.6)': {
    edits: [
      [
        'lib/sql/signal.sql.ts',
        "AND g.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')",
        '',
      ],
    ],
    tests: ['test/chaos/races.spec.ts -t 26.6'],
  },
  'dedup for the instance life (§26.7)': {
    edits: [
      [
        'lib/sql/signal.sql.ts',
        'WHERE $5::text IS NOT NULL AND s.target_id = r.id AND s.dedup_key = $5::text',
        'WHERE $5::text IS NOT NULL AND s.target_id = r.id AND s.dedup_key = $5::text AND s.consumed_at IS NULL',
      ],
    ],
    tests: ['test/chaos/model-regressions.spec.ts -t dedup'],
  },
  'input policies (§26.8)': {
    edits: [
      [
        'lib/serialization/json-value.ts',
        "if (value.includes('\\u0000')) return",
        'if (false) return',
      ],
    ],
    tests: ['test/chaos/bad-input-properties.spec.ts -t JSON'],
  },
  'Redis re-seed of gate holders (§26.9)': {
    edits: [
      [
        'lib/limiter/redis.limiter.ts',
        'const keys = [this.marker, ...holders.map((h) => gateKey(h.key))];\n        const args = holders.flatMap((h) => [h.id, Math.ceil(h.remainingMs)]);',
        'const keys = [this.marker];\n        const args: number[] = [];',
      ],
    ],
    tests: ['test/limits/redis-engine.spec.ts -t closed'],
  },
  'event-loop stalls visible (§26.10)': {
    edits: [
      [
        'lib/runtime/stall-detector.ts',
        "this.telemetry.emit('scheduler:stall', { durationMs: delay }, {});",
        '',
      ],
    ],
    tests: ['test/engine/stall.spec.ts'],
  },
  'group-commit inserts ack only committed ids (§26.11)': {
    edits: [
      [
        'lib/runtime/insert-batcher.ts',
        '        const id = byOrd.get(ord);',
        '        const id = byOrd.get(ord) ?? String(ord);',
      ],
    ],
    tests: ['test/distribution/group-commit-inserts.spec.ts'],
  },
  'lost-wakeup recheck (§8.4)': {
    edits: [
      [
        'lib/sql/outcome.sql.ts',
        "WHERE g.id = ANY ($1::bigint[]) AND g.status = 'awaiting_signal'",
        "WHERE false AND g.id = ANY ($1::bigint[]) AND g.status = 'awaiting_signal'",
      ],
    ],
    tests: ['test/chaos/races.spec.ts -t 8.4', 'test/chaos/model-regressions.spec.ts -t recheck'],
  },
  'parent locked mid-spawn (§10)': {
    edits: [
      [
        'lib/sql/outcome.sql.ts',
        '    ORDER BY g.id\n      FOR NO KEY UPDATE OF g`,',
        '    ORDER BY g.id`,',
      ],
    ],
    tests: ['test/chaos/races.spec.ts -t §10'],
  },
  'F-R1 error listener on checked-out clients': {
    edits: [
      [
        'lib/db/sql-executor.ts',
        "        client.on('error', onError);\n        resolve({",
        '        resolve({',
      ],
    ],
    tests: ['test/chaos/connection-faults.spec.ts'],
  },
  'F-R2 reaped-again rows spread': {
    edits: [
      [
        'lib/runtime/reaper.ts',
        '{ maxReaps: this.maxReaps, limit: BATCH, spreadMs: this.spreadMs }',
        '{ maxReaps: this.maxReaps, limit: BATCH, spreadMs: 0 }',
      ],
    ],
    tests: ['test/chaos/poison-pill.spec.ts -t spread'],
  },
  'F-R3 startup reclaim counts toward the cap': {
    edits: [
      [
        'lib/sql/lease.sql.ts',
        '        AND NOT ((reaps = 0 OR started_seq IS NOT DISTINCT FROM claim_seq) AND (suspect OR reaps + 1 >= $4))\n',
        '',
      ],
    ],
    tests: ['test/chaos/poison-pill.spec.ts -t reclaim'],
  },
  'F-R11 the started mark is cleared when the step returns': {
    edits: [
      [
        'lib/sql/lease.sql.ts',
        '      SET started_seq = NULL\n',
        '      SET started_seq = started_seq\n',
      ],
    ],
    tests: ['test/chaos/solo-run.spec.ts -t awaited the flush'],
  },
  'F-R11 a suspect runs alone before any verdict': {
    edits: [
      [
        'lib/sql/lease.sql.ts',
        'SELECT id, counts, counts AND suspect AS poisoned,',
        'SELECT id, counts, counts AND (suspect OR reaps + 1 >= $1) AS poisoned,',
      ],
    ],
    tests: [
      'test/chaos/solo-run.spec.ts -t becomes a suspect',
      'test/chaos/poison-pill.spec.ts -t solo run completes',
    ],
  },
  'F-R11 nothing else runs during a solo run': {
    edits: [
      [
        'lib/runtime/solo-run.ts',
        '    for (const m of this.members) if (m.busyCount > 0) return;\n',
        '',
      ],
    ],
    tests: ['test/chaos/solo-run.spec.ts -t nothing else runs'],
  },
  'F-R7 waiting for a connection is bounded': {
    edits: [
      [
        'lib/db/sql-executor.ts',
        '}, this.options.statementTimeoutMs);\n      this.pool.connect(',
        '}, 2 ** 31 - 1);\n      this.pool.connect(',
      ],
    ],
    tests: ['test/unit/half-open.spec.ts'],
  },
  'F-R8 socket codes are connection failures': {
    edits: [
      [
        'lib/db/error-class.ts',
        "if (typeof code === 'string' && typeof severity === 'string') {",
        "if (typeof code === 'string') {",
      ],
    ],
    tests: ['test/unit/error-class.spec.ts'],
  },
  'F-R9 transaction-local lock and idle timeouts': {
    edits: [
      [
        'lib/sql/transaction.sql.ts',
        "; SET LOCAL lock_timeout = {lockMs}; ' +\n    'SET LOCAL idle_in_transaction_session_timeout = {idleMs}'",
        "'",
      ],
    ],
    tests: ['test/chaos/link-faults.spec.ts -t blackholed'],
  },
  'F-R10 flush retried while the lease lasts': {
    edits: [
      [
        'lib/runtime/flusher.ts',
        'if (attempt >= MIN_FLUSH_ATTEMPTS && Date.now() + wait > deadline) throw err;',
        'if (attempt >= MIN_FLUSH_ATTEMPTS) throw err;',
      ],
    ],
    tests: ['test/chaos/link-faults.spec.ts -t stopped'],
  },
  'F-R5 sparse holes and typed arrays refused': {
    edits: [
      [
        'lib/serialization/json-value.ts',
        'for (let i = 0; i < items.length; i++) {',
        'for (const i of items.keys()) { if (!(i in items)) continue;',
      ],
      [
        'lib/serialization/json-value.ts',
        'if (ArrayBuffer.isView(object) || object instanceof ArrayBuffer) {',
        'if (false) {',
      ],
    ],
    tests: ['test/chaos/bad-input-properties.spec.ts -t pinned'],
  },
};

function run() {
  const wanted = process.argv.slice(2);
  const names =
    wanted.length > 0
      ? Object.keys(MECHANISMS).filter((n) => wanted.some((w) => n.includes(w)))
      : Object.keys(MECHANISMS);
  let allCaught = true;
  for (const name of names) {
    const { edits, tests } = MECHANISMS[name];
    const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gd-mechanism-'));
    try {
      execFileSync('rsync', [
        '-a',
        '--exclude',
        'node_modules',
        '--exclude',
        '.git',
        '--exclude',
        '.tmp',
        '--exclude',
        'bench',
        `${ROOT}/`,
        `${scratch}/`,
      ]);
      fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(scratch, 'node_modules'));
      for (const [file, from, to] of edits) {
        const target = path.join(scratch, file);
        const text = fs.readFileSync(target, 'utf8');
        if (!text.includes(from)) {
          throw new Error(
            `${name}: ${file} no longer contains the text to remove; update this script`,
          );
        }
        fs.writeFileSync(target, text.split(from).join(to));
      }
      for (const test of tests) {
        const [file, ...rest] = test.split(' ');
        const args = ['jest', '--rootDir', scratch, path.join(scratch, file)];
        if (rest[0] === '-t') args.push('-t', rest.slice(1).join(' '));
        const r = spawnSync('npx', args, { cwd: scratch, encoding: 'utf8', env: process.env });
        const summary =
          `${r.stdout}${r.stderr}`
            .split('\n')
            .filter((l) => l.startsWith('Tests:'))
            .pop() ?? '?';
        const caught = r.status !== 0;
        if (!caught) allCaught = false;
        process.stdout.write(
          `${caught ? 'caught ' : 'MISSED '} ${name} — ${test}: ${summary.replace(/\s+/g, ' ')}\n`,
        );
      }
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
    }
  }
  process.exit(allCaught ? 0 : 1);
}

run();
