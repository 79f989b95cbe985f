TYPE gen_durable_status ENUM (runnable, executing, awaiting_signal, awaiting_children, done, failed, cancelled)

TABLE gen_durable  -- comment: 19
  id bigint NOT NULL IDENTITY(d)
  fsm text NOT NULL
  fsm_version integer NOT NULL DEFAULT 1
  step text NOT NULL
  status gen_durable_status NOT NULL DEFAULT 'runnable'::gen_durable_status
  state jsonb NOT NULL DEFAULT '{}'::jsonb
  result jsonb
  last_error text
  attempt integer NOT NULL DEFAULT 0
  awaits text[]
  await_deadline timestamp with time zone
  queue text NOT NULL DEFAULT 'default'::text
  priority smallint NOT NULL DEFAULT 0
  eligible_at timestamp with time zone NOT NULL DEFAULT now()
  concurrency_key text
  concurrency_name text GENERATED AS (split_part(concurrency_key, ':'::text, 1)) STORED
  concurrency_shard smallint
  rate_limit text
  weight double precision NOT NULL DEFAULT 1
  locked_by text
  lease_expires_at timestamp with time zone
  parent_id bigint
  children_pending integer NOT NULL DEFAULT 0
  correlation_key text
  correlation_scope gen_durable_status[] NOT NULL DEFAULT '{}'::gen_durable_status[]
  correlation_guard text GENERATED AS (
CASE
    WHEN ((correlation_key IS NOT NULL) AND (status = ANY (correlation_scope))) THEN correlation_key
    ELSE NULL::text
END) STORED
  claim_seq bigint NOT NULL DEFAULT 0
  reaps integer NOT NULL DEFAULT 0
  inserted_at timestamp with time zone NOT NULL DEFAULT now()
  updated_at timestamp with time zone NOT NULL DEFAULT now()
  signaled boolean NOT NULL DEFAULT false
  started_seq bigint
  cancel_requested_at timestamp with time zone
  cancel_reason text
  suspect boolean NOT NULL DEFAULT false
  progress jsonb
  progress_at timestamp with time zone
  forked_from bigint
  trace_context text
  held_at timestamp with time zone
  held_reason text
  dedup_until timestamp with time zone
  deadline_at timestamp with time zone
  fairness_key text
  fairness_weight integer NOT NULL DEFAULT 1
  sequence_key text
  on_head_failure text
  CONSTRAINT gen_durable_on_head_failure_check CHECK ((on_head_failure = ANY (ARRAY['block'::text, 'skip'::text])))
  CONSTRAINT gen_durable_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES gen_durable(id) ON DELETE SET NULL
  CONSTRAINT gen_durable_pkey PRIMARY KEY (id)
  CONSTRAINT gen_durable_state_is_object CHECK ((jsonb_typeof(state) = 'object'::text))
  INDEX ON gen_durable USING btree (await_deadline) WHERE ((status = 'awaiting_signal'::gen_durable_status) AND (await_deadline IS NOT NULL))  -- gen_durable_await_deadline
  INDEX UNIQUE ON gen_durable USING btree (concurrency_key) WHERE ((status = 'executing'::gen_durable_status) AND (concurrency_key IS NOT NULL) AND (concurrency_shard IS NULL))  -- gen_durable_concurrency_active
  INDEX UNIQUE ON gen_durable USING btree (correlation_guard) WHERE (correlation_guard IS NOT NULL)  -- gen_durable_correlation
  INDEX ON gen_durable USING btree (deadline_at) WHERE ((deadline_at IS NOT NULL) AND (status = ANY (ARRAY['runnable'::gen_durable_status, 'executing'::gen_durable_status, 'awaiting_signal'::gen_durable_status, 'awaiting_children'::gen_durable_status])))  -- gen_durable_deadline
  INDEX ON gen_durable USING btree (correlation_key, dedup_until) WHERE (dedup_until IS NOT NULL)  -- gen_durable_dedup
  INDEX ON gen_durable USING btree (correlation_key, updated_at) WHERE ((status <> ALL (ARRAY['runnable'::gen_durable_status, 'executing'::gen_durable_status, 'awaiting_signal'::gen_durable_status, 'awaiting_children'::gen_durable_status])) AND (correlation_key IS NOT NULL))  -- gen_durable_ended_key
  INDEX ON gen_durable USING btree (id) WHERE (status = 'failed'::gen_durable_status)  -- gen_durable_failed
  INDEX ON gen_durable USING btree (queue, fairness_key, status) WHERE ((fairness_key IS NOT NULL) AND (status = ANY (ARRAY['executing'::gen_durable_status, 'awaiting_signal'::gen_durable_status, 'awaiting_children'::gen_durable_status])))  -- gen_durable_fair_live
  INDEX ON gen_durable USING btree (queue, fairness_key, priority, eligible_at) WHERE ((status = 'runnable'::gen_durable_status) AND (fairness_key IS NOT NULL))  -- gen_durable_fair_pick
  INDEX ON gen_durable USING btree (updated_at) WHERE (status <> ALL (ARRAY['runnable'::gen_durable_status, 'executing'::gen_durable_status, 'awaiting_signal'::gen_durable_status, 'awaiting_children'::gen_durable_status]))  -- gen_durable_gc
  INDEX ON gen_durable USING btree (lease_expires_at) WHERE (status = 'executing'::gen_durable_status)  -- gen_durable_lease
  INDEX ON gen_durable USING btree (parent_id) WHERE (parent_id IS NOT NULL)  -- gen_durable_parent
  INDEX ON gen_durable USING btree (queue, status) WHERE (status = ANY (ARRAY['awaiting_signal'::gen_durable_status, 'awaiting_children'::gen_durable_status]))  -- gen_durable_parked
  INDEX ON gen_durable USING btree (queue, priority, eligible_at) WHERE (status = 'runnable'::gen_durable_status)  -- gen_durable_pick
  INDEX UNIQUE ON gen_durable USING btree (id)  -- gen_durable_pkey
  INDEX ON gen_durable USING btree (sequence_key, id) WHERE ((sequence_key IS NOT NULL) AND ((status = ANY (ARRAY['runnable'::gen_durable_status, 'executing'::gen_durable_status, 'awaiting_signal'::gen_durable_status, 'awaiting_children'::gen_durable_status])) OR ((status = 'failed'::gen_durable_status) AND (on_head_failure = 'block'::text))))  -- gen_durable_sequence

TABLE gen_durable_archive_partitions
  suffix text NOT NULL
  from_at timestamp with time zone NOT NULL
  to_at timestamp with time zone NOT NULL
  CONSTRAINT gen_durable_archive_partitions_pkey PRIMARY KEY (suffix)
  CONSTRAINT gen_durable_archive_partitions_range CHECK ((from_at < to_at))
  INDEX UNIQUE ON gen_durable_archive_partitions USING btree (suffix)  -- gen_durable_archive_partitions_pkey

TABLE gen_durable_bucket_configs
  kind text NOT NULL
  name text NOT NULL
  rate double precision
  capacity double precision NOT NULL
  shards integer NOT NULL DEFAULT 1
  updated_at timestamp with time zone NOT NULL DEFAULT now()
  CONSTRAINT gen_durable_bucket_configs_kind_check CHECK ((kind = ANY (ARRAY['rate'::text, 'conc'::text])))
  CONSTRAINT gen_durable_bucket_configs_pkey PRIMARY KEY (kind, name)
  INDEX UNIQUE ON gen_durable_bucket_configs USING btree (kind, name)  -- gen_durable_bucket_configs_pkey

TABLE gen_durable_buckets
  kind text NOT NULL
  key text NOT NULL
  shard integer NOT NULL
  capacity double precision NOT NULL
  available double precision NOT NULL
  last_refill timestamp with time zone
  CONSTRAINT gen_durable_buckets_check CHECK (((available >= (0)::double precision) AND (available <= capacity)))
  CONSTRAINT gen_durable_buckets_pkey PRIMARY KEY (kind, key, shard)
  INDEX UNIQUE ON gen_durable_buckets USING btree (kind, key, shard)  -- gen_durable_buckets_pkey

TABLE gen_durable_fair_keys
  queue text NOT NULL
  fairness_key text NOT NULL
  vtime double precision NOT NULL DEFAULT 0
  CONSTRAINT gen_durable_fair_keys_pkey PRIMARY KEY (queue, fairness_key)
  INDEX UNIQUE ON gen_durable_fair_keys USING btree (queue, fairness_key)  -- gen_durable_fair_keys_pkey
  INDEX ON gen_durable_fair_keys USING btree (queue, vtime)  -- gen_durable_fair_keys_walk

TABLE gen_durable_history
  id bigint NOT NULL IDENTITY(d)
  instance_id bigint NOT NULL
  at timestamp with time zone NOT NULL DEFAULT now()
  kind text NOT NULL
  step text
  next_step text
  attempt integer
  claim_seq bigint
  worker text
  outcome text
  error jsonb
  state jsonb
  actor text
  CONSTRAINT gen_durable_history_instance_id_fkey FOREIGN KEY (instance_id) REFERENCES gen_durable(id) ON DELETE CASCADE
  CONSTRAINT gen_durable_history_pkey PRIMARY KEY (id)
  INDEX ON gen_durable_history USING btree (instance_id, id)  -- gen_durable_history_instance
  INDEX UNIQUE ON gen_durable_history USING btree (id)  -- gen_durable_history_pkey

TABLE gen_durable_index_builds
  name text NOT NULL
  version integer NOT NULL
  started_at timestamp with time zone NOT NULL
  finished_at timestamp with time zone
  attempts integer NOT NULL
  error text
  CONSTRAINT gen_durable_index_builds_pkey PRIMARY KEY (name)
  INDEX UNIQUE ON gen_durable_index_builds USING btree (name)  -- gen_durable_index_builds_pkey

TABLE gen_durable_paused_queues
  queue text NOT NULL
  reason text
  paused_at timestamp with time zone NOT NULL DEFAULT now()
  CONSTRAINT gen_durable_paused_queues_pkey PRIMARY KEY (queue)
  INDEX UNIQUE ON gen_durable_paused_queues USING btree (queue)  -- gen_durable_paused_queues_pkey

TABLE gen_durable_schedules
  name text NOT NULL
  fsm text NOT NULL
  cron text NOT NULL
  tz text NOT NULL DEFAULT 'UTC'::text
  next_fire_at timestamp with time zone NOT NULL
  last_fire_at timestamp with time zone
  paused boolean NOT NULL DEFAULT false
  missed text NOT NULL DEFAULT 'skip'::text
  overlap text NOT NULL DEFAULT 'allow'::text
  state jsonb NOT NULL DEFAULT '{}'::jsonb
  options jsonb NOT NULL DEFAULT '{}'::jsonb
  definition_hash text NOT NULL
  declared boolean NOT NULL DEFAULT false
  updated_at timestamp with time zone NOT NULL DEFAULT now()
  CONSTRAINT gen_durable_schedules_missed_check CHECK ((missed = ANY (ARRAY['skip'::text, 'once'::text, 'all'::text])))
  CONSTRAINT gen_durable_schedules_options_is_object CHECK ((jsonb_typeof(options) = 'object'::text))
  CONSTRAINT gen_durable_schedules_overlap_check CHECK ((overlap = ANY (ARRAY['skip'::text, 'allow'::text])))
  CONSTRAINT gen_durable_schedules_pkey PRIMARY KEY (name)
  CONSTRAINT gen_durable_schedules_state_is_object CHECK ((jsonb_typeof(state) = 'object'::text))
  INDEX ON gen_durable_schedules USING btree (next_fire_at) WHERE (NOT paused)  -- gen_durable_schedules_due
  INDEX UNIQUE ON gen_durable_schedules USING btree (name)  -- gen_durable_schedules_pkey

TABLE gen_durable_signals
  id bigint NOT NULL IDENTITY(d)
  target_id bigint NOT NULL
  name text NOT NULL
  payload jsonb NOT NULL DEFAULT '{}'::jsonb
  dedup_key text
  consumed_at timestamp with time zone
  inserted_at timestamp with time zone NOT NULL DEFAULT now()
  trace_context text
  CONSTRAINT gen_durable_signals_pkey PRIMARY KEY (id)
  CONSTRAINT gen_durable_signals_target_dedup UNIQUE (target_id, dedup_key)
  CONSTRAINT gen_durable_signals_target_id_fkey FOREIGN KEY (target_id) REFERENCES gen_durable(id) ON DELETE CASCADE
  INDEX ON gen_durable_signals USING btree (target_id, id) WHERE (consumed_at IS NULL)  -- gen_durable_signals_inbox
  INDEX UNIQUE ON gen_durable_signals USING btree (id)  -- gen_durable_signals_pkey
  INDEX ON gen_durable_signals USING btree (target_id, name)  -- gen_durable_signals_target
  INDEX UNIQUE ON gen_durable_signals USING btree (target_id, dedup_key)  -- gen_durable_signals_target_dedup

TABLE gen_durable_stats
  at timestamp with time zone NOT NULL
  queue text NOT NULL
  counts jsonb NOT NULL DEFAULT '{}'::jsonb
  oldest_runnable_at timestamp with time zone
  CONSTRAINT gen_durable_stats_pkey PRIMARY KEY (at, queue)
  INDEX UNIQUE ON gen_durable_stats USING btree (at, queue)  -- gen_durable_stats_pkey

TABLE gen_durable_stream_heads
  instance_id bigint NOT NULL
  name text NOT NULL
  next_seq bigint NOT NULL
  claim_seq bigint NOT NULL
  batch text NOT NULL
  updated_at timestamp with time zone NOT NULL DEFAULT now()
  CONSTRAINT gen_durable_stream_heads_instance_id_fkey FOREIGN KEY (instance_id) REFERENCES gen_durable(id) ON DELETE CASCADE
  CONSTRAINT gen_durable_stream_heads_pkey PRIMARY KEY (instance_id, name)
  INDEX UNIQUE ON gen_durable_stream_heads USING btree (instance_id, name)  -- gen_durable_stream_heads_pkey

TABLE gen_durable_streams
  instance_id bigint NOT NULL
  name text NOT NULL
  seq bigint NOT NULL
  chunk jsonb NOT NULL
  claim_seq bigint NOT NULL
  created_at timestamp with time zone NOT NULL DEFAULT now()
  CONSTRAINT gen_durable_streams_instance_id_fkey FOREIGN KEY (instance_id) REFERENCES gen_durable(id) ON DELETE CASCADE
  CONSTRAINT gen_durable_streams_pkey PRIMARY KEY (instance_id, name, seq)
  INDEX UNIQUE ON gen_durable_streams USING btree (instance_id, name, seq)  -- gen_durable_streams_pkey

TRIGGER gen_durable_fair_head_insert AFTER INSERT ON gen_durable FOR EACH ROW WHEN ((new.fairness_key IS NOT NULL)) EXECUTE FUNCTION gen_durable_fair_head()

TRIGGER gen_durable_fair_head_update AFTER UPDATE OF status, queue ON gen_durable FOR EACH ROW WHEN (((new.fairness_key IS NOT NULL) AND ((new.status)::text = 'runnable'::text) AND (((old.status)::text = ANY (ARRAY['done'::text, 'failed'::text, 'cancelled'::text])) OR (old.queue IS DISTINCT FROM new.queue)))) EXECUTE FUNCTION gen_durable_fair_head()

TRIGGER gen_durable_mark_signaled AFTER INSERT ON gen_durable_signals FOR EACH ROW EXECUTE FUNCTION gen_durable_mark_signaled()

FUNCTION gen_durable_archive_drop(before timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
     DECLARE
       r record;
       dropped integer := 0;
     BEGIN
       LOCK TABLE gen_durable_archive_partitions IN SHARE ROW EXCLUSIVE MODE;
       PERFORM set_config('lock_timeout', '100ms', true);
       FOR r IN SELECT p.suffix FROM gen_durable_archive_partitions p
                 WHERE p.to_at <= before ORDER BY p.from_at LOOP
         BEGIN
           EXECUTE format('DROP TABLE IF EXISTS %I, %I, %I',
                          'gen_durable_archive_' || r.suffix,
                          'gen_durable_history_archive_' || r.suffix,
                          'gen_durable_streams_archive_' || r.suffix);
           DELETE FROM gen_durable_archive_partitions WHERE suffix = r.suffix;
           dropped := dropped + 1;
         EXCEPTION WHEN lock_not_available THEN
           EXIT;
         END;
       END LOOP;
       RETURN dropped;
     END
     $function$

FUNCTION gen_durable_archive_extend(upto timestamp with time zone, grain text)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
     DECLARE
       s timestamptz := date_trunc(grain, now(), 'UTC');
       e timestamptz;
       taken timestamptz;
       suffix text;
       made integer := 0;
     BEGIN
       IF grain NOT IN ('hour', 'day') THEN
         RAISE EXCEPTION 'gen_durable_archive_extend: grain must be hour or day, got %', grain;
       END IF;
       LOCK TABLE gen_durable_archive_partitions IN SHARE ROW EXCLUSIVE MODE;
       WHILE s < upto LOOP
         SELECT max(p.to_at) INTO taken FROM gen_durable_archive_partitions p
          WHERE p.from_at <= s AND p.to_at > s;
         IF taken IS NOT NULL THEN
           s := taken;
           CONTINUE;
         END IF;
         e := s + ('1 ' || grain)::interval;
         SELECT min(p.from_at) INTO taken FROM gen_durable_archive_partitions p
          WHERE p.from_at > s AND p.from_at < e;
         IF taken IS NOT NULL THEN
           e := taken;
         END IF;
         suffix := to_char(s AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI');
         EXECUTE format('CREATE TABLE %I PARTITION OF gen_durable_archive
                           FOR VALUES FROM (%L) TO (%L)', 'gen_durable_archive_' || suffix, s, e);
         EXECUTE format('CREATE TABLE %I PARTITION OF gen_durable_history_archive
                           FOR VALUES FROM (%L) TO (%L)', 'gen_durable_history_archive_' || suffix, s, e);
         EXECUTE format('CREATE TABLE %I PARTITION OF gen_durable_streams_archive
                           FOR VALUES FROM (%L) TO (%L)', 'gen_durable_streams_archive_' || suffix, s, e);
         INSERT INTO gen_durable_archive_partitions (suffix, from_at, to_at)
           VALUES (suffix, s, e);
         made := made + 1;
         s := e;
       END LOOP;
       RETURN made;
     END
     $function$

FUNCTION gen_durable_fair_head()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
     BEGIN
       LOOP
         PERFORM 1 FROM gen_durable_fair_keys f
           WHERE f.queue = NEW.queue AND f.fairness_key = NEW.fairness_key FOR KEY SHARE;
         EXIT WHEN FOUND;
         INSERT INTO gen_durable_fair_keys (queue, fairness_key, vtime)
           SELECT NEW.queue, NEW.fairness_key,
                  COALESCE((SELECT min(m.vtime) FROM gen_durable_fair_keys m WHERE m.queue = NEW.queue), 0)
           ON CONFLICT DO NOTHING;
       END LOOP;
       RETURN NULL;
     END
     $function$

FUNCTION gen_durable_mark_signaled()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
     BEGIN
       UPDATE gen_durable SET signaled = true WHERE id = NEW.target_id AND NOT signaled;
       RETURN NULL;
     END
     $function$
