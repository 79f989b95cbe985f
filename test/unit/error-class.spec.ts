import { connect, createServer } from 'node:net';

import { DatabaseError } from 'pg';

import {
  classifyError,
  type ErrorClass,
  isConnectionLevel,
  isTransient,
} from '../../lib/db/error-class';

// docs/reliability.md finding F-R8: the classifier read any string `code` as a SQLSTATE, so a
// reset link (ECONNRESET, EPIPE, ECONNREFUSED, ETIMEDOUT: Node's codes, in the same property)
// was "not a connection error" and a flush whose COMMIT had reached the server was never retried.

/** A server error as node-postgres builds it: a SQLSTATE in `code` and a `severity`. */
function serverError(code: string, severity = 'ERROR', message = `server said ${code}`): Error {
  const err = new DatabaseError(message, message.length, 'error');
  err.code = code;
  err.severity = severity;
  return err;
}

/** A socket error as Node builds it: its code in `code`, no severity. */
function socketError(code: string): Error {
  return Object.assign(new Error(`${code}: socket said so`), { code, errno: -1, syscall: 'read' });
}

const TABLE: readonly (readonly [string, unknown, ErrorClass])[] = [
  // Node's network codes (several are five characters long, like a SQLSTATE)
  ['ECONNRESET', socketError('ECONNRESET'), 'connection'],
  ['EPIPE', socketError('EPIPE'), 'connection'],
  ['ECONNREFUSED', socketError('ECONNREFUSED'), 'connection'],
  ['ETIMEDOUT', socketError('ETIMEDOUT'), 'connection'],
  ['ECONNABORTED', socketError('ECONNABORTED'), 'connection'],
  ['EHOSTUNREACH', socketError('EHOSTUNREACH'), 'connection'],
  ['ENETUNREACH', socketError('ENETUNREACH'), 'connection'],
  ['EAI_AGAIN', socketError('EAI_AGAIN'), 'connection'],
  ['ERR_STREAM_DESTROYED', socketError('ERR_STREAM_DESTROYED'), 'connection'],
  // node-postgres and executor messages with no code
  [
    'Connection terminated unexpectedly',
    new Error('Connection terminated unexpectedly'),
    'connection',
  ],
  [
    'Connection terminated due to connection timeout',
    new Error('Connection terminated due to connection timeout'),
    'connection',
  ],
  [
    'not queryable',
    new Error('Client has encountered a connection error and is not queryable'),
    'connection',
  ],
  ['query_timeout', new Error('Query read timeout'), 'connection'],
  ['pool connect timeout', new Error('timeout exceeded when trying to connect'), 'connection'],
  [
    'bounded checkout',
    new Error('timeout: no database connection within 300 ms (statementTimeout)'),
    'connection',
  ],
  // SQLSTATE class 08 and the shutdown / session-gone states
  ['08000', serverError('08000'), 'connection'],
  ['08003', serverError('08003'), 'connection'],
  ['08006', serverError('08006', 'FATAL'), 'connection'],
  ['08P01', serverError('08P01'), 'connection'],
  ['57P01 admin shutdown', serverError('57P01', 'FATAL'), 'connection'],
  ['57P02 crash shutdown', serverError('57P02', 'FATAL'), 'connection'],
  ['57P03 cannot connect now', serverError('57P03', 'FATAL'), 'connection'],
  ['25P03 idle in transaction timeout', serverError('25P03', 'FATAL'), 'connection'],
  // retryable on a live connection
  ['40001 serialization', serverError('40001'), 'transient'],
  ['40P01 deadlock', serverError('40P01'), 'transient'],
  ['55P03 lock_timeout', serverError('55P03'), 'transient'],
  ['57014 statement_timeout', serverError('57014'), 'transient'],
  // permanent
  ['23505 unique violation', serverError('23505'), 'permanent'],
  ['22P02 bad input', serverError('22P02'), 'permanent'],
  ['42P01 undefined table', serverError('42P01'), 'permanent'],
  ['57P04 database dropped', serverError('57P04', 'FATAL'), 'permanent'],
  // a SQLSTATE-looking code without severity is not a server error; a server error whose
  // message mentions a timeout is still read by its SQLSTATE
  ['ABCDE without severity', Object.assign(new Error('x'), { code: 'ABCDE' }), 'permanent'],
  [
    'server error mentioning terminated',
    serverError('P0001', 'ERROR', 'Connection terminated by a trigger'),
    'permanent',
  ],
  ['plain error', new Error('boom'), 'permanent'],
  ['timeout in an application message', new Error('upstream timeout'), 'permanent'],
  ['a string', 'ECONNRESET', 'permanent'],
  ['null', null, 'permanent'],
  ['undefined', undefined, 'permanent'],
];

describe('classifyError', () => {
  it.each(TABLE.map(([name, err, expected]) => [name, expected, err] as const))(
    '%s → %s',
    (_name, expected, err) => {
      expect(classifyError(err)).toBe(expected);
      expect(isConnectionLevel(err)).toBe(expected === 'connection');
      expect(isTransient(err)).toBe(expected !== 'permanent');
    },
  );

  it('classifies a real refused connection and a real reset as connection errors', async () => {
    const server = createServer((socket) => socket.resetAndDestroy());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const reset = await new Promise<Error>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.on('error', resolve);
      socket.on('connect', () => socket.write('hello'));
    });
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const refused = await new Promise<Error>((resolve) => {
      connect({ host: '127.0.0.1', port }).on('error', resolve);
    });
    expect((reset as { code?: string }).code).toBe('ECONNRESET');
    expect((refused as { code?: string }).code).toBe('ECONNREFUSED');
    expect(classifyError(reset)).toBe('connection');
    expect(classifyError(refused)).toBe('connection');
  });
});
