import type { DurableStatus } from '../gen-durable.constants';
import { sql } from './statement';

/** One `ctx.stream(name).write(chunk)` as STREAM_APPEND takes it. */
export interface StreamAppendWrite {
  readonly id: string;
  /** The fencing token of the step run's claim (docs/design.md §26.1). */
  readonly claimSeq: string;
  /** The worker id that holds the claim. */
  readonly worker: string;
  readonly name: string;
  /** The chunk as JSON text (checked by toJsonText). */
  readonly chunk: string;
}

interface AppendRecord {
  ord: string;
  seq: string | null;
}

/**
 * Appends a batch of stream writes (docs/streams.md), one statement for any number of writes of
 * any number of streams; answers, per write in `$2..$6` order, the chunk's offset, or null when
 * the write was refused. Per stream of the batch, in (instance, name) order:
 * - `owned`: the writes whose claim is still current — the row is `executing`, locked by their
 *   worker, under their `claim_seq` (PK probe of gen_durable, the statement's snapshot). Only
 *   one claim of an instance is current, so a stream has one claim here.
 * - `prior`: a retried statement ($1 is the batch's token, the same on every attempt): a stream
 *   whose head already carries the token was appended to by an attempt that committed (its
 *   answer was lost); its chunks are answered from the head, not written again.
 * - `moved`: the head row (gen_durable_stream_heads, PK) is created or advanced by the
 *   stream's count, under its row lock: the appends to one stream are serialized there, and
 *   each one's offsets continue from the `next_seq` it found, so the offsets of a stream are
 *   dense and every snapshot sees a prefix 0..n-1 of them. A head a newer claim already
 *   advanced (`claim_seq` above the write's: the step ran again since) is not moved: the
 *   writes of the older claim are refused, so a stream holds the chunks of one run after
 *   another, never interleaved.
 * - the chunks are inserted at `first + rank` (rank by write order within the stream).
 */
export const STREAM_APPEND = sql(
  'stream_append',
  `WITH w AS (
     SELECT w.instance_id, w.claim_seq, w.worker, w.name, w.chunk, w.ord
       FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[])
            WITH ORDINALITY AS w(instance_id, claim_seq, worker, name, chunk, ord)
   ), owned AS (
     SELECT w.instance_id, w.name, w.claim_seq, w.worker, count(*) AS n
       FROM w JOIN {schema}.gen_durable g
         ON g.id = w.instance_id AND g.claim_seq = w.claim_seq AND g.locked_by = w.worker
        AND g.status = 'executing'
      GROUP BY w.instance_id, w.name, w.claim_seq, w.worker
   ), prior AS (
     SELECT o.instance_id, o.name, o.claim_seq, o.worker, h.next_seq - o.n AS first
       FROM owned o JOIN {schema}.gen_durable_stream_heads h
         ON h.instance_id = o.instance_id AND h.name = o.name
      WHERE h.batch = $1
   ), moved AS (
     INSERT INTO {schema}.gen_durable_stream_heads AS h (instance_id, name, next_seq, claim_seq, batch)
     SELECT o.instance_id, o.name, o.n, o.claim_seq, $1 FROM owned o
      WHERE NOT EXISTS (SELECT 1 FROM prior p WHERE p.instance_id = o.instance_id AND p.name = o.name)
      ORDER BY o.instance_id, o.name
     ON CONFLICT (instance_id, name) DO UPDATE
        SET next_seq = h.next_seq + excluded.next_seq, claim_seq = excluded.claim_seq,
            batch = excluded.batch, updated_at = now()
      WHERE h.claim_seq <= excluded.claim_seq
     RETURNING h.instance_id, h.name, h.next_seq
   ), starts AS (
     SELECT m.instance_id, m.name, o.claim_seq, o.worker, m.next_seq - o.n AS first, true AS fresh
       FROM moved m JOIN owned o ON o.instance_id = m.instance_id AND o.name = m.name
     UNION ALL
     SELECT instance_id, name, claim_seq, worker, first, false FROM prior
   ), placed AS (
     SELECT w.ord, w.instance_id, w.name, w.claim_seq, w.chunk, s.fresh,
            s.first + row_number() OVER (PARTITION BY w.instance_id, w.name ORDER BY w.ord) - 1 AS seq
       FROM w JOIN starts s
         ON s.instance_id = w.instance_id AND s.name = w.name AND s.claim_seq = w.claim_seq
        AND s.worker = w.worker
   ), inserted AS (
     INSERT INTO {schema}.gen_durable_streams (instance_id, name, seq, chunk, claim_seq)
     SELECT instance_id, name, seq, chunk::jsonb, claim_seq FROM placed WHERE fresh
   )
   SELECT w.ord, p.seq FROM w LEFT JOIN placed p ON p.ord = w.ord ORDER BY w.ord`,
  {
    params: (i: { readonly batch: string; readonly writes: readonly StreamAppendWrite[] }) => {
      const n = i.writes.length;
      const ids = new Array<string>(n);
      const seqs = new Array<string>(n);
      const workers = new Array<string>(n);
      const names = new Array<string>(n);
      const chunks = new Array<string>(n);
      for (let k = 0; k < n; k++) {
        const w = i.writes[k]!;
        ids[k] = w.id;
        seqs[k] = w.claimSeq;
        workers[k] = w.worker;
        names[k] = w.name;
        chunks[k] = w.chunk;
      }
      return [i.batch, ids, seqs, workers, names, chunks];
    },
    decode: (rows: readonly AppendRecord[], i): (number | null)[] => {
      const out = new Array<number | null>(i.writes.length).fill(null);
      for (const r of rows) if (r.seq !== null) out[Number(r.ord) - 1] = Number(r.seq);
      return out;
    },
  },
);

/** One committed chunk of a stream: its offset and its value. */
export interface StreamChunkRow {
  readonly offset: number;
  readonly chunk: unknown;
}

/** What STREAM_READ answers: the instance's status (null: no such row), the stream's length, chunks. */
export interface StreamPage {
  readonly status: DurableStatus | null;
  /** How many chunks the stream holds (the next offset), 0 for a stream never written. */
  readonly length: number;
  readonly chunks: StreamChunkRow[];
}

interface ReadRecord {
  status: DurableStatus | null;
  length: string;
  seq: string | null;
  chunk: unknown;
}

/**
 * A stream's length for its readers: its head's `next_seq` (alias `h`), or for an archived
 * instance, whose heads the move let go (docs/archive.md), one past the last archived chunk
 * (gen_durable_streams_archive_read, read backwards: one probe per partition), else 0.
 */
function streamLength(instance: string, name: string): string {
  return `coalesce(h.next_seq, (SELECT z.seq + 1 FROM {schema}.gen_durable_streams_archive z
       WHERE z.instance_id = ${instance} AND z.name = ${name} ORDER BY z.seq DESC LIMIT 1), 0)`;
}

/**
 * One page of a stream for its readers (docs/streams.md): the chunks from offset `$3` on, in
 * offset order, at most `$4` of them and, beyond the first, while the chunks before them stay
 * under `$5` bytes as stored (the first always comes: `$5` ≥ 1), with the instance's status and the stream's length, all from
 * one snapshot. A stream's appends commit their chunks and its head together, so the page is
 * a gap-free run of offsets, and an instance seen ended here shows every chunk its steps
 * wrote (a step's writes commit before its outcome). A range scan of gen_durable_streams_pkey;
 * the instance and the head by primary key. Always one row at least (the LEFT JOINs).
 */
export const STREAM_READ = sql(
  'stream_read',
  `SELECT g.status, ${streamLength('$1', '$2')} AS length, c.seq, c.chunk
     FROM (SELECT 1) AS one
     LEFT JOIN LATERAL (
       SELECT a.status FROM {schema}.gen_durable_all a WHERE a.id = $1 LIMIT 1) g ON true
     LEFT JOIN {schema}.gen_durable_stream_heads h ON h.instance_id = $1 AND h.name = $2
     LEFT JOIN LATERAL (
       SELECT p.seq, p.chunk FROM (
         SELECT s.seq, s.chunk,
                sum(pg_column_size(s.chunk)) OVER (ORDER BY s.seq) - pg_column_size(s.chunk) AS before
           FROM {schema}.gen_durable_streams_all s
          WHERE s.instance_id = $1 AND s.name = $2 AND s.seq >= $3
          ORDER BY s.seq
          LIMIT $4
       ) p
        WHERE p.before < $5
     ) c ON true
    ORDER BY c.seq`,
  {
    params: (i: {
      readonly id: string;
      readonly name: string;
      readonly from: number;
      readonly limit: number;
      readonly maxBytes: number;
    }) => [i.id, i.name, i.from, i.limit, i.maxBytes],
    decode: (rows: readonly ReadRecord[]): StreamPage => {
      const first = rows[0];
      const chunks: StreamChunkRow[] = [];
      for (const r of rows) {
        if (r.seq !== null) chunks.push({ offset: Number(r.seq), chunk: r.chunk });
      }
      return {
        status: first?.status ?? null,
        length: first ? Number(first.length) : 0,
        chunks,
      };
    },
  },
);

/** A followed stream as STREAM_PROBE answers it. */
export interface StreamProbe {
  /** The instance's status; null when the row is gone (or never was). */
  readonly status: DurableStatus | null;
  /** How many chunks the stream holds now. */
  readonly length: number;
}

interface ProbeRecord {
  ord: string;
  status: DurableStatus | null;
  length: string;
}

/**
 * The followers' probe (docs/streams.md): for many (instance, stream) pairs at once, the
 * stream's length and the instance's status, answered in input order — one batched statement
 * per probe period for all the readers a node has waiting, however many; `streamInfo` asks it
 * for one. Primary-key probes of gen_durable and gen_durable_stream_heads.
 */
export const STREAM_PROBE = sql(
  'stream_probe',
  `SELECT w.ord, g.status, ${streamLength('w.instance_id', 'w.name')} AS length
     FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS w(instance_id, name, ord)
     LEFT JOIN LATERAL (
       SELECT a.status FROM {schema}.gen_durable_all a WHERE a.id = w.instance_id LIMIT 1) g ON true
     LEFT JOIN {schema}.gen_durable_stream_heads h
       ON h.instance_id = w.instance_id AND h.name = w.name`,
  {
    params: (i: {
      readonly streams: readonly { readonly id: string; readonly name: string }[];
    }) => [i.streams.map((s) => s.id), i.streams.map((s) => s.name)],
    decode: (rows: readonly ProbeRecord[], i): StreamProbe[] => {
      const out = new Array<StreamProbe>(i.streams.length);
      for (const r of rows) out[Number(r.ord) - 1] = { status: r.status, length: Number(r.length) };
      return out;
    },
  },
);
