-- dionysus 0.1.0 → 0.2.0 (Trust I): privacy between people, web provenance, the driver's role.
--
-- Forward-only and data-preserving. Run by ALTER EXTENSION dionysus UPDATE (scripts/run.sh
-- does it). Order: new columns, then the data that fills them (before the message log's
-- immutability trigger learns about `person`), then the functions whose signature changed
-- (dropped and created again), then every changed or new function, view, comment and grant.
-- The result equals a fresh 0.2.0 install (tests/tests/upgrade.rs compares the catalogs).
\echo Use "ALTER EXTENSION dionysus UPDATE TO '0.2.0'" to load this file. \quit

-- ---------------------------------------------------------------------------------------
-- Columns
-- ---------------------------------------------------------------------------------------
ALTER TABLE dionysus.memories ADD COLUMN private_to text[];
ALTER TABLE dionysus.triples ADD COLUMN private_to text[];
ALTER TABLE dionysus.triples DROP CONSTRAINT triples_subject_id_predicate_object_id_key;
CREATE UNIQUE INDEX triples_identity ON dionysus.triples (subject_id, predicate, object_id, (coalesce(private_to, '{}'::text[])));
ALTER TABLE dionysus.goals ADD COLUMN private_to text[];
ALTER TABLE dionysus.heartbeat_log ADD COLUMN private_to text[];
ALTER TABLE dionysus.outbox ADD COLUMN person text, ADD COLUMN platform text, ADD COLUMN channel_id text;
ALTER TABLE dionysus.messages ADD COLUMN person text;
-- Trust II: lease fencing and refunds, liveness, reserve → send → confirm delivery.
ALTER TABLE dionysus.work_queue ADD COLUMN lease_token uuid,
    ADD COLUMN energy_cost double precision NOT NULL DEFAULT 0 CHECK (energy_cost >= 0);
ALTER TABLE dionysus.heartbeat_log ADD COLUMN last_alive_at timestamptz, ADD COLUMN recovery_error text;
ALTER TABLE dionysus.outbox ADD COLUMN reply_to uuid UNIQUE, ADD COLUMN reserved_by text, ADD COLUMN reserved_until timestamptz,
    ADD COLUMN sent_parts jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(sent_parts) = 'array');
ALTER TABLE dionysus.outbox ADD CONSTRAINT outbox_reply_to_fkey FOREIGN KEY (reply_to) REFERENCES dionysus.messages (id) ON DELETE SET NULL;
INSERT INTO dionysus.heartbeat_config (key, value, description) VALUES
    ('outbox_lease_seconds', 120, 'a message reserved for sending and not confirmed within this goes back to the outbox'),
    ('retention_days', 90, 'the maintenance pass prunes ledger, heartbeat log, finished work, sent messages, access log and cache older than this (never the message log)')
ON CONFLICT (key) DO NOTHING;
UPDATE dionysus.heartbeat_config SET description = 'an unfinished heartbeat silent this long (its driver stopped touching it) is closed with the fallback'
 WHERE key = 'heartbeat_timeout_minutes';
CREATE TABLE dionysus.memory_changes (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT now(),
    heartbeat_id uuid,
    work_id      uuid,
    target_kind  text NOT NULL CHECK (target_kind IN ('memory', 'belief', 'identity')),
    target_id    uuid NOT NULL,
    verdict      text NOT NULL CHECK (verdict IN ('keep', 'update', 'retire')),
    before       jsonb NOT NULL,
    after        jsonb,
    reason       text
);
CREATE INDEX memory_changes_target ON dionysus.memory_changes (target_id);
-- A heartbeat in flight now counts as alive from its start.
UPDATE dionysus.heartbeat_log SET last_alive_at = started_at WHERE status IN ('in_flight', 'committed');

-- ---------------------------------------------------------------------------------------
-- Data: whose words the existing turns, facts and triples are
-- ---------------------------------------------------------------------------------------
-- A person's turn is its author's; the bot's belongs to the person it replied to, else to the
-- last person who wrote before it in its channel.
UPDATE dionysus.messages SET person = lower(btrim(platform)) || ':' || btrim(author_id) WHERE NOT is_bot;
UPDATE dionysus.messages b SET person = coalesce(
    (SELECT r.person FROM dionysus.messages r WHERE r.id = b.reply_to),
    (SELECT p.person FROM dionysus.messages p
      WHERE p.platform = b.platform AND p.channel_id = b.channel_id AND NOT p.is_bot
        AND (p.created_at, p.id) < (b.created_at, b.id)
      ORDER BY p.created_at DESC, p.id DESC LIMIT 1))
 WHERE b.is_bot;
UPDATE dionysus.memories m SET private_to = ARRAY[x.person]
  FROM dionysus.messages x WHERE x.memory_id = m.id AND x.person IS NOT NULL;
-- Facts and triples extracted from a turn (source 'conversation:<message id>') are its person's.
UPDATE dionysus.memories m SET private_to = ARRAY[x.person]
  FROM dionysus.messages x
 WHERE m.source = 'conversation:' || x.id::text AND x.person IS NOT NULL;
UPDATE dionysus.triples t SET private_to = ARRAY[x.person]
  FROM dionysus.messages x
 WHERE (t.source = 'conversation:' || x.id::text OR t.memory_id = x.memory_id) AND x.person IS NOT NULL;
-- Waiting extractions carry their person, as new ones do.
UPDATE dionysus.work_queue q SET params = q.params || jsonb_build_object('person', x.person)
  FROM dionysus.messages x
 WHERE q.action = 'extract_message' AND q.status IN ('pending', 'claimed')
   AND q.params ->> 'message_id' = x.id::text AND x.person IS NOT NULL;
-- 0.1.0 accepted infinite times, which broke recall; they become the time of this update.
UPDATE dionysus.memories SET created_at = now() WHERE NOT isfinite(created_at);
UPDATE dionysus.episodes SET started_at = least(started_at, now()) WHERE NOT isfinite(started_at);
UPDATE dionysus.episodes SET last_event_at = greatest(started_at, least(last_event_at, now())) WHERE NOT isfinite(last_event_at);
UPDATE dionysus.episodes SET ended_at = greatest(started_at, least(ended_at, now())) WHERE ended_at IS NOT NULL AND NOT isfinite(ended_at);

-- ---------------------------------------------------------------------------------------
-- Functions whose signature changed: dropped here, created again below.
-- ---------------------------------------------------------------------------------------
DROP FUNCTION dionysus.remember(text, text, double precision, double precision, jsonb, text, timestamp with time zone, text, text, double precision);
DROP FUNCTION dionysus.learn(text, text, text, double precision, text, double precision);
DROP FUNCTION dionysus.add_triple(text, text, text, double precision, text, uuid, text, text);
DROP FUNCTION dionysus.triples_about(text);
DROP FUNCTION dionysus.recall(text, integer, text[], timestamp with time zone, timestamp with time zone, double precision, uuid);
DROP FUNCTION dionysus.log_message(text, text, text, text, text, boolean, boolean, uuid);
DROP FUNCTION dionysus.outbox_reply(text);
DROP FUNCTION dionysus.create_goal(text, text, text, text, uuid, double precision, jsonb, uuid);
DROP FUNCTION dionysus.require_claimed_work(uuid);
DROP FUNCTION dionysus.release_work(uuid, text, integer);
DROP FUNCTION dionysus.fail_work(uuid, text, boolean);
DROP FUNCTION dionysus.complete_work(uuid, jsonb);


-- ---------------------------------------------------------------------------------------
-- The internals move to a schema of their own, so that \df+ dionysus.* lists exactly the API.
-- Moved, not recreated: triggers and every caller keep pointing at the same functions.
-- ---------------------------------------------------------------------------------------
CREATE SCHEMA dionysus_internal;
COMMENT ON SCHEMA dionysus_internal IS 'Dionysus internals: helpers of the API in schema dionysus; not for direct use, may change in any release.';
ALTER FUNCTION dionysus.check_self_model(text,text,double precision) SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.claim_rows(text,uuid[]) SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.complete_parent_goals(uuid) SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.enforce_goal_limits(uuid) SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.expire_work_leases() SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.goal_brief(dionysus.goals) SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.goal_level(dionysus.goal_priority) SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.goal_open_blockers(dionysus.goals) SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.heartbeat_config_check() SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.heartbeat_interval_minutes() SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.heartbeat_setting(text) SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.messages_immutable() SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.recover_stalled_heartbeats() SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.require_goal(uuid,text) SET SCHEMA dionysus_internal;
ALTER FUNCTION dionysus.require_outbox(uuid) SET SCHEMA dionysus_internal;

-- The new prompt templates (maintain, and inquire_deep's query plan and confidence).
INSERT INTO dionysus.prompt_templates (key, version, temperature, note, template) VALUES
('maintain', 1, 0.2, 'heartbeat action: maintain (§3.2.3), the judgement of one belief, aspect or memory', $t$TASK: maintain
You are Dionysus, checking whether something you hold still holds. It is a {{kind}}:
"{{content}}" (confidence {{confidence}}).

What else you know that bears on it:
{{evidence}}

Judge it against that evidence. Answer with JSON only:
{"verdict": "keep" | "update" | "retire", "confidence": 0.0-1.0, "content": "a corrected statement, only when the wording must change", "reason": "why, citing the evidence"}
Keep it when nothing contradicts it; update its confidence (or wording) when the evidence shifts it; retire it when it no longer holds.$t$),
('inquiry_queries', 1, 0.3, 'inquire_deep (§3.2.4): the web searches that cover a question', $t$TASK: inquiry_queries
Plan the web searches that would answer this question well: 3 to 5 short, different queries (different angles, terms, sources).

Question: {{question}}

Answer with JSON only: {"queries": ["...", "..."]}$t$),
('inquiry_confidence', 1, 0.1, 'inquire_deep (§3.2.4): how far the answer can be trusted', $t$TASK: inquiry_confidence
Evaluate how well the sources support this answer: do they agree, are they reliable, is anything missing?

Question: {{question}}
Answer: {{answer}}
Sources consulted: {{sources}}

Answer with JSON only: {"confidence": 0.0-1.0, "caveats": "what is uncertain"}$t$)
ON CONFLICT DO NOTHING;


-- ---------------------------------------------------------------------------------------
-- The Rust functions with a new parameter (private_to, person), as the library declares them
-- ---------------------------------------------------------------------------------------

CREATE  FUNCTION "remember"(
	"content" TEXT, /* Option < & str > */
	"r#type" TEXT DEFAULT 'episodic', /* Option < & str > */
	"importance" double precision DEFAULT 0.5, /* Option < f64 > */
	"valence" double precision DEFAULT 0.0, /* Option < f64 > */
	"metadata" jsonb DEFAULT '{}', /* Option < JsonArg > */
	"source" TEXT DEFAULT NULL, /* Option < & str > */
	"created_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"summary" TEXT DEFAULT NULL, /* Option < & str > */
	"micro" TEXT DEFAULT NULL, /* Option < & str > */
	"confidence" double precision DEFAULT 1.0, /* Option < f64 > */
	"private_to" TEXT[] DEFAULT NULL /* :: std :: option :: Option < Vec < Option < String > > > */
) RETURNS uuid /* Uuid */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'remember_wrapper';

CREATE  FUNCTION "learn"(
	"content" TEXT, /* Option < & str > */
	"subject" TEXT DEFAULT NULL, /* Option < & str > */
	"category" TEXT DEFAULT NULL, /* Option < & str > */
	"confidence" double precision DEFAULT 0.8, /* Option < f64 > */
	"source" TEXT DEFAULT NULL, /* Option < & str > */
	"importance" double precision DEFAULT 0.5, /* Option < f64 > */
	"private_to" TEXT[] DEFAULT NULL /* :: std :: option :: Option < Vec < Option < String > > > */
) RETURNS uuid /* Uuid */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'learn_wrapper';

CREATE  FUNCTION "add_triple"(
	"subject" TEXT, /* Option < & str > */
	"predicate" TEXT, /* Option < & str > */
	"object" TEXT, /* Option < & str > */
	"confidence" double precision DEFAULT 1.0, /* Option < f64 > */
	"source" TEXT DEFAULT NULL, /* Option < & str > */
	"memory_id" uuid DEFAULT NULL, /* Option < Uuid > */
	"subject_kind" TEXT DEFAULT NULL, /* Option < & str > */
	"object_kind" TEXT DEFAULT NULL, /* Option < & str > */
	"private_to" TEXT[] DEFAULT NULL /* :: std :: option :: Option < Vec < Option < String > > > */
) RETURNS uuid /* Uuid */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'add_triple_wrapper';

CREATE  FUNCTION "triples_about"(
	"entity" TEXT, /* Option < & str > */
	"person" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"triple_id" uuid,  /* Uuid */
	"subject" TEXT,  /* String */
	"predicate" TEXT,  /* String */
	"object" TEXT,  /* String */
	"confidence" double precision,  /* f64 */
	"source" TEXT,  /* Option < String > */
	"memory_id" uuid  /* Option < Uuid > */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'triples_about_wrapper';

CREATE  FUNCTION "recall"(
	"query" TEXT, /* Option < & str > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"types" TEXT[] DEFAULT NULL, /* :: std :: option :: Option < Vec < Option < String > > > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"min_importance" double precision DEFAULT NULL, /* Option < f64 > */
	"episode_id" uuid DEFAULT NULL, /* Option < Uuid > */
	"person" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"memory_id" uuid,  /* Uuid */
	"content" TEXT,  /* String */
	"type" TEXT,  /* String */
	"created_at" timestamp with time zone,  /* TimestampWithTimeZone */
	"score" double precision,  /* f64 */
	"vector_score" double precision,  /* f64 */
	"lexical_score" double precision,  /* f64 */
	"association_score" double precision,  /* f64 */
	"temporal_score" double precision,  /* f64 */
	"importance_score" double precision,  /* f64 */
	"recency_score" double precision,  /* f64 */
	"found_by" TEXT  /* String */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'recall_wrapper';


-- ---------------------------------------------------------------------------------------
-- A new organ, created whole as sql/014_proactive.sql has it
-- ---------------------------------------------------------------------------------------

-- The proactive mind, base layer (seed 003; seed 004 §4.1): Dionysus writes to a person when
-- pressure built from its own state crosses a threshold and the social gates allow it — never
-- because a timer asked "should I message?". Everything here is arithmetic in the database;
-- the driver is woken (NOTIFY dionysus_contact) only at a crossing, and calls a model only then.
--
--   the clock         one time source a test can drive (clock_now, set_clock, advance_clock)
--   events            a priority queue (CRITICAL 0 … IDLE 4): merged, dropped under load,
--                     filtered while relaxed or asleep, hoisted when a pattern accumulates
--   agent_state       vitality (0–1, distinct from the heartbeat's 0–20 action energy), mode,
--                     disturbance, and the tick interval computed from them
--   people            per person: social debt, task pressure, curiosity, contact history,
--                     the check-in cadence; person_rhythm and person_signals are the beliefs
--                     about their availability (learned, with a confidence) and their own word
--   contact_weights   the neuron: pressure = Σ weight × input; every evaluation is written to
--                     contact_evaluations with each input, weight, contribution, threshold and
--                     gate, so explain_contact() says why
--   personality       traits in [0, 1] that move thresholds and delays, not only tone
--
-- Lock order (see 002_heartbeat.sql): heartbeat_state → agent_state → a person's row.
-- Everything that can evolve is data: proactive_config, contact_weights, personality,
-- event_patterns.

-- ---------------------------------------------------------------------------------------
-- The clock
-- ---------------------------------------------------------------------------------------
CREATE TABLE clock (
    id        integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    -- Set: time stands at this instant (tests replay days by advancing it).
    frozen_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO clock DEFAULT VALUES;

CREATE FUNCTION clock_now() RETURNS timestamptz
    LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT frozen_at FROM dionysus.clock WHERE id = 1), now())
$$;

CREATE FUNCTION set_clock(at timestamptz) RETURNS timestamptz
    LANGUAGE plpgsql AS $$
BEGIN
    IF at IS NOT NULL AND NOT isfinite(at) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "at": % is not a finite time', at USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.clock SET frozen_at = at, updated_at = now() WHERE id = 1;
    RETURN dionysus.clock_now();
END $$;

CREATE FUNCTION advance_clock(by_interval interval) RETURNS timestamptz
    LANGUAGE plpgsql AS $$
BEGIN
    IF by_interval IS NULL OR by_interval < interval '0' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "by_interval": % (time only moves forward)', by_interval
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.clock SET frozen_at = coalesce(frozen_at, now()) + by_interval, updated_at = now() WHERE id = 1;
    RETURN dionysus.clock_now();
END $$;

-- ---------------------------------------------------------------------------------------
-- Configuration, weights, personality (data, so they can evolve)
-- ---------------------------------------------------------------------------------------
CREATE TABLE proactive_config (
    key         text PRIMARY KEY,
    value       double precision NOT NULL CHECK (value >= 0 AND value < 'Infinity'::float8),
    description text NOT NULL
);
INSERT INTO proactive_config (key, value, description) VALUES
    ('base_tick_seconds', 300, 'the tick interval at pressure 1 and full vitality, before the time of day'),
    ('min_tick_seconds', 10, 'the shortest tick (alert)'),
    ('max_tick_seconds', 7200, 'the longest tick (asleep)'),
    ('check_interval_minutes', 15, 'contact is evaluated at most this often per person (seed 004 §4.1)'),
    ('check_backoff_max_minutes', 1440, 'after "wait" the interval doubles, up to this'),
    ('contact_threshold', 0.35, 'pressure at which the thinking layer is woken (before personality and vitality)'),
    ('signal_threshold', 0.2, 'pressure at which an urge is noted (an internal event), without waking a model'),
    ('social_debt_hours', 36, 'time constant of social debt: after this long in silence it is 63 % of the way to 1'),
    ('debt_relief_on_message', 0.8, 'share of social debt a message from the person relieves'),
    ('debt_relief_on_contact', 0.5, 'share of social debt a delivered contact relieves'),
    ('task_pressure_per_item', 0.35, 'task pressure = 1 - exp(-this × open requests of the person)'),
    ('curiosity_decay_per_hour', 0.03, 'curiosity fades by this share per hour'),
    ('curiosity_per_new_memory', 0.05, 'curiosity added per new memory private to nobody (× the curiosity trait × 2), at most five a tick'),
    ('acquaintance_turns', 20, 'acquaintance = 1 / (1 + turns / this): a new relationship wants to be known'),
    ('quiet_start_hour', 22, 'default quiet hours start (the person''s local time) until their rhythm is learned'),
    ('quiet_end_hour', 8, 'default quiet hours end'),
    ('min_availability', 0.3, 'below this availability belief, unsolicited contact waits'),
    ('better_moment_hours', 10, 'a contact waits when one of the next this many hours (a working day) is clearly better for them'),
    ('better_moment_margin', 0.25, 'how much more available an hour ahead must be believed to wait for it'),
    ('rhythm_confident_after', 25, 'messages after which the learned rhythm is fully trusted (confidence 1)'),
    ('miss_weight', 0.3, 'each missed contact at an hour of their week takes this share off the availability learned there (at most 0.8)'),
    ('rhythm_confidence_days', 14, 'without messages, confidence in the rhythm halves every this many days'),
    ('ignored_after_hours', 6, 'a contact unanswered this long (or 3 × the usual reply time, if longer) counts as ignored'),
    ('ignores_before_pause', 3, 'after this many ignored contacts in a row, time alone no longer adds pressure'),
    ('signal_busy_hours', 2, 'how long "busy" holds when the person names no time'),
    ('event_merge_seconds', 5, 'events of one type (same person and source) within this are merged'),
    ('event_drop_low_seconds', 60, 'queued LOW and IDLE events older than this are dropped'),
    ('event_drop_idle_seconds', 30, 'queued IDLE events older than this are dropped'),
    ('event_queue_limit', 1000, 'above this many queued events the lowest priority goes first (CRITICAL never)'),
    ('disturbance_decay', 0.95, 'disturbance kept per tick'),
    ('vitality_drain_tick', 0.001, 'vitality spent per tick'),
    ('vitality_drain_event', 0.002, 'vitality spent per event processed'),
    ('vitality_drain_model', 0.02, 'vitality spent per model call at a crossing'),
    ('vitality_recharge_hour', 0.04, 'vitality regained per hour (twice that in the agent''s night)'),
    ('vitality_feedback', 0.05, 'vitality regained when a person answers a contact');

-- Shares stay in [0, 1], time constants and counts above 0, hours of the day in [0, 23]: a
-- bad value is refused with its key named, before it can stop every tick.
CREATE FUNCTION dionysus_internal.proactive_config_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key IN ('debt_relief_on_message', 'debt_relief_on_contact', 'curiosity_decay_per_hour', 'curiosity_per_new_memory',
                   'disturbance_decay', 'miss_weight', 'better_moment_margin', 'min_availability', 'contact_threshold',
                   'signal_threshold', 'vitality_drain_tick', 'vitality_drain_event', 'vitality_drain_model',
                   'vitality_recharge_hour', 'vitality_feedback', 'task_pressure_per_item')
       AND NEW.value > 1 THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be within [0, 1], not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('social_debt_hours', 'acquaintance_turns', 'rhythm_confident_after', 'rhythm_confidence_days', 'base_tick_seconds',
                   'min_tick_seconds', 'max_tick_seconds', 'check_interval_minutes', 'check_backoff_max_minutes', 'ignored_after_hours',
                   'ignores_before_pause', 'better_moment_hours', 'event_queue_limit', 'signal_busy_hours')
       AND NEW.value <= 0 THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be above 0, not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('quiet_start_hour', 'quiet_end_hour') AND (NEW.value > 23 OR NEW.value <> trunc(NEW.value)) THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be a whole hour in [0, 23], not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER proactive_config_check BEFORE INSERT OR UPDATE ON proactive_config
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.proactive_config_check();

CREATE TABLE contact_weights (
    input       text PRIMARY KEY CHECK (input IN ('social_debt', 'acquaintance', 'task_pressure', 'curiosity')),
    weight      double precision NOT NULL CHECK (weight >= 0 AND weight <= 1),
    description text NOT NULL
);
INSERT INTO contact_weights (input, weight, description) VALUES
    ('social_debt', 0.4, 'we have not talked in a while'),
    ('acquaintance', 0.3, 'the relationship is new: there is much to learn about them'),
    ('task_pressure', 0.2, 'they asked for something that is still open'),
    ('curiosity', 0.1, 'something new came up that they might care about');

CREATE TABLE personality (
    trait         text PRIMARY KEY CHECK (trait IN ('humor', 'formality', 'curiosity', 'patience', 'empathy', 'shyness', 'independence')),
    value         double precision NOT NULL CHECK (value >= 0 AND value <= 1),
    -- Months, not days: the share of a feedback signal a trait moves by.
    learning_rate double precision NOT NULL DEFAULT 0.002 CHECK (learning_rate >= 0 AND learning_rate <= 0.1),
    description   text NOT NULL
);
INSERT INTO personality (trait, value, description) VALUES
    ('humor', 0.5, '0 serious, 1 playful (the composer''s voice)'),
    ('formality', 0.3, '0 casual, 1 formal (the composer''s voice)'),
    ('curiosity', 0.6, 'how fast curiosity builds from new information'),
    ('patience', 0.5, 'how long before following up: the check-in back-off grows with it'),
    ('empathy', 0.7, 'how much a cold or ignored contact holds back the next'),
    ('shyness', 0.4, 'raises the contact threshold; the composer hints rather than asks'),
    ('independence', 0.5, 'lowers the contact threshold: reaches out when it has something to say');

-- ---------------------------------------------------------------------------------------
-- State: the agent's, and each person's
-- ---------------------------------------------------------------------------------------
CREATE TABLE agent_state (
    id                    integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    vitality              double precision NOT NULL DEFAULT 0.8 CHECK (vitality >= 0 AND vitality <= 1),
    mode                  text NOT NULL DEFAULT 'normal' CHECK (mode IN ('alert', 'normal', 'relaxed', 'asleep')),
    disturbance           double precision NOT NULL DEFAULT 0 CHECK (disturbance >= 0),
    pressure              double precision NOT NULL DEFAULT 0,
    tick_interval_seconds double precision NOT NULL DEFAULT 300,
    last_tick_at          timestamptz,
    -- The real time of the last tick: memories are stamped in real time, not by the clock.
    last_tick_real_at     timestamptz,
    next_tick_at          timestamptz,
    ticks                 bigint NOT NULL DEFAULT 0,
    model_calls           bigint NOT NULL DEFAULT 0,
    updated_at            timestamptz NOT NULL DEFAULT now()
);
INSERT INTO agent_state DEFAULT VALUES;

CREATE TABLE people (
    person                 text PRIMARY KEY CHECK (length(btrim(person)) > 0),
    time_zone              text NOT NULL DEFAULT 'UTC',
    social_debt            double precision NOT NULL DEFAULT 0 CHECK (social_debt >= 0 AND social_debt <= 1),
    curiosity              double precision NOT NULL DEFAULT 0 CHECK (curiosity >= 0 AND curiosity <= 1),
    turns                  bigint NOT NULL DEFAULT 0,
    first_message_at       timestamptz,
    last_message_at        timestamptz,
    -- The last contact Dionysus started (delivered), whether it is still unanswered, and how
    -- many in a row went unanswered.
    last_contact_at        timestamptz,
    awaiting_reply         boolean NOT NULL DEFAULT false,
    ignored_in_row         integer NOT NULL DEFAULT 0,
    -- Task pressure and curiosity when the last contact went out: after repeated ignores a
    -- new contact needs a new cause, not just time.
    cause_at_last_contact  jsonb,
    reply_seconds          double precision,
    -- The check-in cadence: when contact may next be evaluated, and the current interval.
    next_check_at          timestamptz,
    check_interval_minutes double precision,
    last_pressure          double precision NOT NULL DEFAULT 0,
    last_evaluated_at      timestamptz,
    updated_at             timestamptz NOT NULL DEFAULT now()
);

-- When they write, by hour of their week (0 = Monday 00:00 local): the belief about when they
-- are available. A decayed count, so old habits fade; `misses` counts contacts at that hour
-- they ignored (1) or answered only after an hour (0.5).
CREATE TABLE person_rhythm (
    person       text NOT NULL REFERENCES people (person) ON DELETE CASCADE,
    hour_of_week smallint NOT NULL CHECK (hour_of_week BETWEEN 0 AND 167),
    activity     double precision NOT NULL DEFAULT 0 CHECK (activity >= 0),
    misses       double precision NOT NULL DEFAULT 0 CHECK (misses >= 0),
    PRIMARY KEY (person, hour_of_week)
);

-- What they said about themselves: busy, asleep, away, "stop checking in". Holds until it
-- expires or they write again.
CREATE TABLE person_signals (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    person     text NOT NULL REFERENCES people (person) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('busy', 'asleep', 'away', 'stop_checkins')),
    said_at    timestamptz NOT NULL,
    until      timestamptz,
    ended_at   timestamptz,
    message_id uuid,
    words      text NOT NULL
);
CREATE INDEX person_signals_open ON person_signals (person) WHERE ended_at IS NULL;

-- ---------------------------------------------------------------------------------------
-- Events
-- ---------------------------------------------------------------------------------------
CREATE TABLE events (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source       text NOT NULL CHECK (source IN ('communication', 'thoughts', 'internal', 'time')),
    channel      text,
    type         text NOT NULL CHECK (type ~ '^[a-z][a-z0-9_.]{0,62}$'),
    priority     smallint NOT NULL CHECK (priority BETWEEN 0 AND 4),
    person       text,
    payload      jsonb NOT NULL DEFAULT '{}'::jsonb,
    at           timestamptz NOT NULL,
    merged       integer NOT NULL DEFAULT 1,
    status       text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'processed', 'filtered', 'dropped')),
    handled_at   timestamptz,
    reason       text
);
CREATE INDEX events_queued ON events (priority, at) WHERE status = 'queued';
CREATE INDEX events_type_at ON events (type, at);

-- Every event that did not reach processing, by why and priority.
CREATE TABLE event_counters (
    reason   text NOT NULL CHECK (reason IN ('merged', 'dropped_age', 'dropped_overload', 'filtered')),
    priority smallint NOT NULL CHECK (priority BETWEEN 0 AND 4),
    count    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (reason, priority)
);

-- Pattern accumulation: `threshold` events of a type within `window_seconds` become one HIGH
-- event for the thinking layer (one car horn is ignored, ten are noticed).
CREATE TABLE event_patterns (
    event_type      text PRIMARY KEY,
    window_seconds  integer NOT NULL CHECK (window_seconds > 0),
    threshold       integer NOT NULL CHECK (threshold > 1),
    hoisted_type    text NOT NULL CHECK (hoisted_type ~ '^[a-z][a-z0-9_.]{0,62}$'),
    last_hoisted_at timestamptz
);
INSERT INTO event_patterns (event_type, window_seconds, threshold, hoisted_type) VALUES
    ('contact_urge', 3600, 6, 'restless'),
    ('reaction', 600, 10, 'reaction_storm'),
    ('message_received', 120, 8, 'message_burst');

-- ---------------------------------------------------------------------------------------
-- Contact evaluations: every decision written down with its inputs
-- ---------------------------------------------------------------------------------------
CREATE TABLE contact_evaluations (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    person      text NOT NULL,
    at          timestamptz NOT NULL,
    inputs      jsonb NOT NULL,
    pressure    double precision NOT NULL,
    threshold   double precision NOT NULL,
    gates       jsonb NOT NULL,
    outcome     text NOT NULL CHECK (outcome IN ('below', 'signal', 'gated', 'opportunity')),
    explanation text NOT NULL,
    notified_at timestamptz,
    decision    text CHECK (decision IN ('message', 'wait')),
    decided_by  text CHECK (decided_by IN ('model', 'default', 'skipped')),
    decided_at  timestamptz,
    reason      text,
    outbox_id   uuid REFERENCES outbox (id) ON DELETE SET NULL,
    -- Real time of the record: orders evaluations made at one instant of a frozen clock.
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX contact_evaluations_person ON contact_evaluations (person, at DESC);
CREATE INDEX contact_evaluations_open ON contact_evaluations (at) WHERE outcome = 'opportunity' AND decision IS NULL;
ALTER TABLE outbox ADD COLUMN contact_id uuid UNIQUE REFERENCES contact_evaluations (id) ON DELETE SET NULL;

-- ---------------------------------------------------------------------------------------
-- Helpers
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.proactive_setting(setting_key text) RETURNS double precision
    LANGUAGE plpgsql STABLE AS $$
DECLARE v double precision;
BEGIN
    SELECT value INTO v FROM dionysus.proactive_config WHERE key = setting_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: proactive_config has no key "%"', setting_key USING ERRCODE = 'undefined_object';
    END IF;
    RETURN v;
END $$;

CREATE FUNCTION dionysus_internal.trait(name text) RETURNS double precision
    LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT value FROM dionysus.personality WHERE trait = name), 0.5)
$$;

CREATE FUNCTION dionysus_internal.priority_name(p smallint) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT (ARRAY['CRITICAL', 'HIGH', 'NORMAL', 'LOW', 'IDLE'])[p + 1]
$$;

CREATE FUNCTION dionysus_internal.count_event(why text, p smallint, n bigint DEFAULT 1) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO dionysus.event_counters (reason, priority, count) VALUES (why, p, n)
    ON CONFLICT (reason, priority) DO UPDATE SET count = dionysus.event_counters.count + EXCLUDED.count
$$;

-- The person's row, created on first sight.
CREATE FUNCTION dionysus_internal.person_row(who text) RETURNS dionysus.people
    LANGUAGE plpgsql AS $$
DECLARE p dionysus.people;
BEGIN
    INSERT INTO dionysus.people (person) VALUES (who) ON CONFLICT (person) DO NOTHING;
    SELECT * INTO p FROM dionysus.people WHERE person = who FOR UPDATE;
    RETURN p;
END $$;

-- Hour of the week (Monday 00:00 = 0) of an instant in a time zone.
CREATE FUNCTION dionysus_internal.hour_of_week(at timestamptz, tz text) RETURNS smallint
    LANGUAGE sql STABLE AS $$
    SELECT ((extract(isodow FROM at AT TIME ZONE tz)::int - 1) * 24 + extract(hour FROM at AT TIME ZONE tz)::int)::smallint
$$;

-- What the person is believed to be able to do at an instant: availability in [0, 1] from
-- their learned rhythm, blended with the default day/night prior by the confidence in it.
-- The rhythm is read twice and averaged: this hour of this weekday (weekly habits, which take
-- weeks to learn) and this hour on any day (daily routine, learned in days), each relative to
-- its busiest hour, with neighbouring hours counting half. Missed contacts there lower it.
CREATE FUNCTION dionysus_internal.availability(who text, at timestamptz)
    RETURNS TABLE (belief double precision, confidence double precision, learned double precision, prior double precision)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    p dionysus.people;
    h smallint;
    hod int;
    local_hour int;
    week_here double precision;
    week_peak double precision;
    day_here double precision;
    day_peak double precision;
    total double precision;
    missed double precision;
    qs int := dionysus_internal.proactive_setting('quiet_start_hour')::int;
    qe int := dionysus_internal.proactive_setting('quiet_end_hour')::int;
BEGIN
    SELECT * INTO p FROM dionysus.people x WHERE x.person = who;
    local_hour := extract(hour FROM at AT TIME ZONE coalesce(p.time_zone, 'UTC'))::int;
    prior := CASE WHEN (qs > qe AND (local_hour >= qs OR local_hour < qe)) OR (qs < qe AND local_hour >= qs AND local_hour < qe)
                  THEN 0.05 ELSE 0.6 END;
    h := dionysus_internal.hour_of_week(at, coalesce(p.time_zone, 'UTC'));
    hod := h % 24;
    SELECT max(activity), sum(activity) INTO week_peak, total FROM dionysus.person_rhythm r WHERE r.person = who;
    SELECT coalesce(sum(r.activity * CASE WHEN r.hour_of_week = h THEN 1.0 ELSE 0.5 END), 0) INTO week_here
      FROM dionysus.person_rhythm r
     WHERE r.person = who AND r.hour_of_week IN (h, (h + 167) % 168, (h + 1) % 168);
    SELECT max(d.n) INTO day_peak
      FROM (SELECT r.hour_of_week % 24 AS hr, sum(r.activity) AS n FROM dionysus.person_rhythm r WHERE r.person = who GROUP BY 1) d;
    SELECT coalesce(sum(r.activity * CASE WHEN r.hour_of_week % 24 = hod THEN 1.0 ELSE 0.5 END), 0),
           coalesce(sum(r.misses) FILTER (WHERE r.hour_of_week = h), 0)
           + 0.25 * coalesce(sum(r.misses) FILTER (WHERE r.hour_of_week % 24 = hod AND r.hour_of_week <> h), 0)
      INTO day_here, missed
      FROM dionysus.person_rhythm r
     WHERE r.person = who AND r.hour_of_week % 24 IN (hod, (hod + 23) % 24, (hod + 1) % 24);
    learned := (0.5 * CASE WHEN coalesce(week_peak, 0) > 0 THEN least(1.0, week_here / week_peak) ELSE 0 END
                + 0.5 * CASE WHEN coalesce(day_peak, 0) > 0 THEN least(1.0, day_here / day_peak) ELSE 0 END)
               * (1 - least(0.8, dionysus_internal.proactive_setting('miss_weight') * missed));
    confidence := least(1.0, coalesce(total, 0) / dionysus_internal.proactive_setting('rhythm_confident_after'))
                  * power(0.5, greatest(0, extract(epoch FROM at - coalesce(p.last_message_at, at)) / 86400.0)
                               / dionysus_internal.proactive_setting('rhythm_confidence_days'));
    belief := confidence * learned + (1 - confidence) * prior;
    RETURN NEXT;
END $$;

-- A contact at this hour of their week went unanswered (1) or was answered late (0.5).
CREATE FUNCTION dionysus_internal.note_miss(who text, contact_at timestamptz, weight double precision) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO dionysus.person_rhythm (person, hour_of_week, misses)
    VALUES (who, dionysus_internal.hour_of_week(contact_at, (SELECT time_zone FROM dionysus.people WHERE person = who)), weight)
    ON CONFLICT (person, hour_of_week) DO UPDATE SET misses = dionysus.person_rhythm.misses + EXCLUDED.misses
$$;

-- "busy", "going to sleep", "back tomorrow", "not until Monday", "stop checking in": the
-- person's own word about contact, with when it ends (their local time). NULL: none said.
CREATE FUNCTION dionysus_internal.contact_signal(words text, at timestamptz, tz text)
    RETURNS TABLE (kind text, until timestamptz)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    w text := lower(words);
    local timestamp := at AT TIME ZONE tz;
    day text;
    dow int;
BEGIN
    IF w ~ '(stop|quit|no more) (checking in|check-ins|messaging me|writing to me|texting me)|(don''t|do not) (message|text|write to|check in on) me' THEN
        kind := 'stop_checkins'; until := NULL; RETURN NEXT; RETURN;
    END IF;
    day := substring(w FROM '(?:not|back|talk|see you|until|till) (?:until |till |on )?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)');
    IF day IS NOT NULL THEN
        dow := array_position(ARRAY['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'], day);
        kind := 'away';
        until := ((date_trunc('day', local) + make_interval(days => ((dow - extract(isodow FROM local)::int + 6) % 7) + 1))
                  + interval '9 hours') AT TIME ZONE tz;
        RETURN NEXT; RETURN;
    END IF;
    IF w ~ '(back|talk|see you|speak) tomorrow|until tomorrow|till tomorrow' THEN
        kind := 'away'; until := (date_trunc('day', local) + interval '1 day 9 hours') AT TIME ZONE tz; RETURN NEXT; RETURN;
    END IF;
    IF w ~ '(going to|off to|heading to|time for) (sleep|bed)|good ?night|\mgn\M|nighty night' THEN
        kind := 'asleep';
        until := (date_trunc('day', local - interval '4 hours') + interval '1 day 8 hours') AT TIME ZONE tz;
        RETURN NEXT; RETURN;
    END IF;
    IF w ~ '\m(i''m|i am|im) (busy|swamped|slammed|in a meeting|at work|driving)|\mbusy right now\M|\mcan''t talk\M|\mtalk later\M|\mnot now\M' THEN
        kind := 'busy'; until := at + make_interval(secs => dionysus_internal.proactive_setting('signal_busy_hours') * 3600);
        RETURN NEXT; RETURN;
    END IF;
END $$;

-- An answer that only acknowledges ("ok", "thanks", "👍"): it updates beliefs and relieves
-- social debt with no model call and needs no reply (seed 003's layered processing).
CREATE FUNCTION is_acknowledgement(words text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(btrim(lower(words)) ~ '^((ok(ay)?|k+|sure|thanks?( you)?|thx|ty|cool|nice|great|got it|will do|noted|yep|yes|yeah|sounds good|alright|👍|🙏|❤️|😊|🙂|✅|👌)[.!, ]*)+$', false)
$$;

-- ---------------------------------------------------------------------------------------
-- Events: push, merge, hoist
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION push_event(source text, type text, priority integer DEFAULT 2, payload jsonb DEFAULT '{}',
                           person text DEFAULT NULL, channel text DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    merged_into bigint;
    new_id bigint;
    pat dionysus.event_patterns;
    seen bigint;
BEGIN
    IF source IS NULL OR source NOT IN ('communication', 'thoughts', 'internal', 'time') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "source": % (communication, thoughts, internal or time)', source
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF type IS NULL OR type !~ '^[a-z][a-z0-9_.]{0,62}$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "type": % (lower-case words joined by _ or .)', type
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF priority IS NULL OR priority NOT BETWEEN 0 AND 4 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "priority": % (0 CRITICAL … 4 IDLE)', priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF payload IS NULL OR jsonb_typeof(payload) <> 'object' OR octet_length(payload::text) > 8192 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "payload": must be a JSON object of at most 8 kB' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Lock order: agent_state (which a HIGH or CRITICAL event updates below) before any event row.
    IF priority <= 1 THEN
        PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    END IF;
    -- Layer 1 of overload: the same thing again within seconds is one event, counted.
    UPDATE dionysus.events e SET merged = e.merged + 1, payload = push_event.payload
     WHERE e.id = (SELECT x.id FROM dionysus.events x
                    WHERE x.status = 'queued' AND x.type = push_event.type AND x.source = push_event.source
                      AND x.priority = push_event.priority
                      AND x.person IS NOT DISTINCT FROM push_event.person
                      AND x.at >= t - make_interval(secs => dionysus_internal.proactive_setting('event_merge_seconds'))
                    ORDER BY x.at DESC LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING e.id INTO merged_into;
    IF merged_into IS NOT NULL THEN
        PERFORM dionysus_internal.count_event('merged', priority::smallint);
        RETURN merged_into;
    END IF;
    INSERT INTO dionysus.events (source, channel, type, priority, person, payload, at)
    VALUES (source, channel, type, priority, person, payload, t) RETURNING id INTO new_id;
    -- Pattern accumulation: many of a kind in a window become one event worth thinking about.
    SELECT * INTO pat FROM dionysus.event_patterns p WHERE p.event_type = push_event.type FOR UPDATE;
    IF FOUND AND (pat.last_hoisted_at IS NULL OR pat.last_hoisted_at < t - make_interval(secs => pat.window_seconds)) THEN
        SELECT coalesce(sum(merged), 0) INTO seen FROM dionysus.events e
         WHERE e.type = push_event.type AND e.at > t - make_interval(secs => pat.window_seconds);
        IF seen >= pat.threshold THEN
            UPDATE dionysus.event_patterns p SET last_hoisted_at = t WHERE p.event_type = pat.event_type;
            INSERT INTO dionysus.events (source, type, priority, person, payload, at)
            VALUES ('internal', pat.hoisted_type, 1, push_event.person,
                    jsonb_build_object('pattern', pat.event_type, 'count', seen, 'window_seconds', pat.window_seconds), t);
        END IF;
    END IF;
    -- What matters now shortens the wait for the next tick (lock order: agent_state before people).
    IF priority <= 1 THEN
        UPDATE dionysus.agent_state
           SET next_tick_at = least(coalesce(next_tick_at, t), t + make_interval(secs => dionysus_internal.proactive_setting('min_tick_seconds')))
         WHERE id = 1 AND (mode <> 'asleep' OR push_event.priority = 0);
    END IF;
    RETURN new_id;
END $$;

-- ---------------------------------------------------------------------------------------
-- A person wrote: beliefs, debt, signals, cadence (called by log_message, in its transaction)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.note_person_message(who text, message_id uuid, words text) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    p dionysus.people;
    sig record;
    answered boolean := false;
    ack boolean := dionysus.is_acknowledgement(words);
BEGIN
    -- Lock order: agent_state (push_event, feedback) before the person's row.
    PERFORM dionysus.push_event('communication', 'message_received', 1, jsonb_build_object('message_id', message_id), who);
    IF EXISTS (SELECT 1 FROM dionysus.people x WHERE x.person = who AND x.awaiting_reply) THEN
        answered := true;
        UPDATE dionysus.agent_state SET vitality = least(1, vitality + dionysus_internal.proactive_setting('vitality_feedback'))
         WHERE id = 1;
    END IF;
    p := dionysus_internal.person_row(who);
    -- Their rhythm: this hour of their week gained one message; the rest fades a little.
    UPDATE dionysus.person_rhythm r SET activity = r.activity * 0.998, misses = r.misses * 0.998 WHERE r.person = who;
    INSERT INTO dionysus.person_rhythm (person, hour_of_week, activity)
    VALUES (who, dionysus_internal.hour_of_week(t, p.time_zone), 1)
    ON CONFLICT (person, hour_of_week) DO UPDATE SET activity = dionysus.person_rhythm.activity + 1;
    -- They wrote: a crossing still undecided is moot (the conversation is on).
    UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = 'skipped', decided_at = t, reason = 'they wrote first'
     WHERE c.person = who AND c.outcome = 'opportunity' AND c.decision IS NULL;
    -- Whatever they said before about not being available ends when they write again.
    UPDATE dionysus.person_signals s SET ended_at = t WHERE s.person = who AND s.ended_at IS NULL;
    SELECT * INTO sig FROM dionysus_internal.contact_signal(words, t, p.time_zone);
    IF sig.kind IS NOT NULL THEN
        INSERT INTO dionysus.person_signals (person, kind, said_at, until, message_id, words)
        VALUES (who, sig.kind, t, sig.until, message_id, left(words, 200));
    END IF;
    -- A contact answered only after an hour: that hour of their week is a poor one.
    IF answered AND t - p.last_contact_at > interval '1 hour' THEN
        PERFORM dionysus_internal.note_miss(who, p.last_contact_at, 0.5);
    END IF;
    UPDATE dionysus.people x SET
        turns = x.turns + 1,
        first_message_at = coalesce(x.first_message_at, t),
        last_message_at = t,
        social_debt = x.social_debt * (1 - dionysus_internal.proactive_setting('debt_relief_on_message')),
        awaiting_reply = false,
        ignored_in_row = 0,
        reply_seconds = CASE WHEN answered THEN coalesce(0.7 * x.reply_seconds, 0)
                                                + CASE WHEN x.reply_seconds IS NULL THEN 1 ELSE 0.3 END
                                                  * extract(epoch FROM t - x.last_contact_at)
                             ELSE x.reply_seconds END,
        -- A message resets the check-in cadence (seed 004 §4.1).
        check_interval_minutes = dionysus_internal.proactive_setting('check_interval_minutes'),
        next_check_at = t + make_interval(mins => dionysus_internal.proactive_setting('check_interval_minutes')::int),
        updated_at = now()
     WHERE x.person = who;
    RETURN jsonb_build_object('acknowledgement', ack, 'answered_contact', answered, 'signal', sig.kind, 'signal_until', sig.until);
END $$;

-- ---------------------------------------------------------------------------------------
-- The neuron: one evaluation of whether to contact one person, written down
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.evaluate_contact(who text) RETURNS dionysus.contact_evaluations
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    p dionysus.people;
    a dionysus.agent_state;
    av record;
    e dionysus.contact_evaluations;
    ins jsonb := '[]'::jsonb;
    gates jsonb := '[]'::jsonb;
    w record;
    v double precision;
    muted boolean;
    total double precision := 0;
    threshold double precision;
    open_requests bigint;
    task double precision;
    energy double precision;
    cost double precision;
    cooldown interval;
    since_contact interval;
    ignore_after interval;
    sig dionysus.person_signals;
    local_hour int;
    blocked text[] := '{}';
    top record;
    new_cause boolean;
    later record;
    better boolean;
    on_its_way bigint;
    words text;
BEGIN
    p := dionysus_internal.person_row(who);
    SELECT * INTO a FROM dionysus.agent_state WHERE id = 1;
    -- A contact nobody answered within their usual window counts as ignored.
    ignore_after := make_interval(secs => greatest(dionysus_internal.proactive_setting('ignored_after_hours') * 3600,
                                                   3 * coalesce(p.reply_seconds, 0)));
    IF p.awaiting_reply AND t - p.last_contact_at > ignore_after THEN
        UPDATE dionysus.people x SET awaiting_reply = false, ignored_in_row = x.ignored_in_row + 1 WHERE x.person = who
        RETURNING * INTO p;
        PERFORM dionysus_internal.note_miss(who, p.last_contact_at, 1);
    END IF;
    SELECT count(*) INTO open_requests FROM dionysus.goals g
     WHERE g.source = 'user_request' AND g.priority IN ('active', 'queued') AND g.private_to = ARRAY[who];
    task := 1 - exp(-dionysus_internal.proactive_setting('task_pressure_per_item') * open_requests);
    -- After repeated ignores, time alone (social debt) no longer opens the way: a new cause must.
    muted := p.ignored_in_row >= dionysus_internal.proactive_setting('ignores_before_pause');
    FOR w IN SELECT * FROM dionysus.contact_weights ORDER BY input LOOP
        v := CASE w.input
                 WHEN 'social_debt' THEN p.social_debt
                 WHEN 'acquaintance' THEN 1.0 / (1 + p.turns / dionysus_internal.proactive_setting('acquaintance_turns'))
                 WHEN 'task_pressure' THEN task
                 WHEN 'curiosity' THEN p.curiosity END;
        ins := ins || jsonb_build_object('input', w.input, 'value', round(v::numeric, 3), 'weight', w.weight,
                                         'contribution', round((v * w.weight)::numeric, 3), 'why', w.description);
        total := total + v * w.weight;
    END LOOP;
    -- Personality and vitality move the threshold: shy waits longer, independent less; a tired
    -- agent needs more to act.
    threshold := dionysus_internal.proactive_setting('contact_threshold')
                 * (1 + 0.5 * (dionysus_internal.trait('shyness') - 0.5))
                 * (1 - 0.5 * (dionysus_internal.trait('independence') - 0.5))
                 * (1 + 0.3 * (1 - a.vitality));

    -- The gates, each written down whether it passed or not.
    SELECT * INTO sig FROM dionysus.person_signals s
     WHERE s.person = who AND s.ended_at IS NULL AND (s.until IS NULL OR s.until > t) ORDER BY s.said_at DESC LIMIT 1;
    gates := gates || jsonb_build_object('gate', 'their_word', 'passed', sig.id IS NULL,
        'detail', CASE WHEN sig.id IS NULL THEN 'nothing said against contact'
                       ELSE format('they said "%s" (%s%s)', sig.words, sig.kind,
                                   coalesce(' until ' || to_char(sig.until AT TIME ZONE p.time_zone, 'Dy HH24:MI'), ', until they write again')) END);
    SELECT * INTO av FROM dionysus_internal.availability(who, t);
    local_hour := extract(hour FROM t AT TIME ZONE p.time_zone)::int;
    gates := gates || jsonb_build_object('gate', 'quiet_hours', 'passed', NOT (av.prior < 0.5 AND av.learned < 0.15 OR av.prior < 0.5 AND av.confidence < 0.5),
        'detail', format('%s:00 their time; default quiet %s–%s, learned activity %s (confidence %s)', local_hour,
                         dionysus_internal.proactive_setting('quiet_start_hour'), dionysus_internal.proactive_setting('quiet_end_hour'),
                         round(av.learned::numeric, 2), round(av.confidence::numeric, 2)));
    gates := gates || jsonb_build_object('gate', 'availability', 'passed', av.belief >= dionysus_internal.proactive_setting('min_availability'),
        'detail', format('likely available %s (confidence %s)', round(av.belief::numeric, 2), round(av.confidence::numeric, 2)));
    cooldown := make_interval(secs => dionysus_internal.heartbeat_setting('reach_out_cooldown_hours') * 3600);
    since_contact := t - p.last_contact_at;
    gates := gates || jsonb_build_object('gate', 'cooldown', 'passed', p.last_contact_at IS NULL OR since_contact >= cooldown,
        'detail', CASE WHEN p.last_contact_at IS NULL THEN 'no contact started yet'
                       ELSE format('last contact %s ago (cooldown %s)', date_trunc('minute', since_contact), cooldown) END);
    -- One contact at a time: the last one is answered or counted as ignored before the next,
    -- and nothing is on its way (a crossing undecided, a message not yet delivered).
    gates := gates || jsonb_build_object('gate', 'waiting_on_them', 'passed', NOT p.awaiting_reply,
        'detail', CASE WHEN p.awaiting_reply THEN format('the last contact (%s ago) is not answered yet; it counts as ignored after %s',
                                                         date_trunc('minute', since_contact), date_trunc('minute', ignore_after))
                       ELSE 'no contact waiting for an answer' END);
    SELECT count(*) INTO on_its_way FROM (
        SELECT 1 FROM dionysus.contact_evaluations c WHERE c.person = who AND c.outcome = 'opportunity' AND c.decision IS NULL
        UNION ALL
        SELECT 1 FROM dionysus.outbox o WHERE o.person = who AND o.contact_id IS NOT NULL AND o.status = 'pending') x;
    gates := gates || jsonb_build_object('gate', 'in_flight', 'passed', on_its_way = 0,
        'detail', CASE WHEN on_its_way = 0 THEN 'nothing on its way to them' ELSE 'a contact is already being decided or delivered' END);
    SELECT current_energy INTO energy FROM dionysus.heartbeat_state WHERE id = 1;
    cost := dionysus.get_action_cost('reach_out_user');
    gates := gates || jsonb_build_object('gate', 'energy', 'passed', energy >= cost,
        'detail', format('energy %s, a contact costs %s', round(energy::numeric, 1), cost));
    new_cause := NOT muted OR task > coalesce((p.cause_at_last_contact ->> 'task_pressure')::float8, 0) + 0.05
                 OR p.curiosity > coalesce((p.cause_at_last_contact ->> 'curiosity')::float8, 0) + 0.05;
    gates := gates || jsonb_build_object('gate', 'ignored', 'passed', new_cause,
        'detail', CASE WHEN NOT muted THEN format('%s unanswered in a row', p.ignored_in_row)
                       ELSE format('%s contacts in a row went unanswered: only a new cause counts (%s)', p.ignored_in_row,
                                   CASE WHEN new_cause THEN 'there is one' ELSE 'there is none' END) END);
    SELECT array_agg(g ->> 'gate') INTO blocked FROM jsonb_array_elements(gates) g WHERE NOT (g ->> 'passed')::boolean;
    blocked := coalesce(blocked, '{}');
    -- A considerate friend who knows you are busy now and free tonight waits for tonight: when
    -- the rhythm says a clearly better hour comes within the look-ahead, the contact waits for it.
    -- Weighed only when everything else would let the contact through (it costs a few lookups).
    IF total >= threshold AND cardinality(blocked) = 0 THEN
        SELECT k, f.belief, f.confidence INTO later
          FROM generate_series(1, dionysus_internal.proactive_setting('better_moment_hours')::int) k,
               LATERAL dionysus_internal.availability(who, t + make_interval(hours => k)) f
         ORDER BY f.belief DESC, k LIMIT 1;
        better := later.belief >= av.belief + dionysus_internal.proactive_setting('better_moment_margin') AND later.confidence >= 0.3;
        gates := gates || jsonb_build_object('gate', 'better_moment', 'passed', NOT better,
            'detail', CASE WHEN better THEN format('likely more available around %s:00 their time (%s against %s now)',
                                                   extract(hour FROM (t + make_interval(hours => later.k)) AT TIME ZONE p.time_zone),
                                                   round(later.belief::numeric, 2), round(av.belief::numeric, 2))
                           ELSE format('no clearly better hour in the next %s', dionysus_internal.proactive_setting('better_moment_hours')) END);
        IF better THEN
            blocked := blocked || 'better_moment'::text;
        END IF;
    END IF;

    SELECT x ->> 'input' AS input, (x ->> 'value')::float8 AS value, (x ->> 'contribution')::float8 AS contribution INTO top
      FROM jsonb_array_elements(ins) x ORDER BY (x ->> 'contribution')::float8 DESC LIMIT 1;
    words := format('pressure %s against threshold %s; %s was %s (weight %s, contributing %s)', round(total::numeric, 2),
                    round(threshold::numeric, 2), top.input, top.value,
                    (SELECT weight FROM dionysus.contact_weights WHERE input = top.input), top.contribution);
    e.outcome := CASE WHEN total < dionysus_internal.proactive_setting('signal_threshold') THEN 'below'
                      WHEN total < threshold THEN 'signal'
                      WHEN cardinality(blocked) > 0 THEN 'gated'
                      ELSE 'opportunity' END;
    words := words || CASE e.outcome
        WHEN 'below' THEN '; nothing to say yet'
        WHEN 'signal' THEN '; an urge, not yet enough to write'
        WHEN 'gated' THEN '; enough to write, held back by ' || array_to_string(blocked, ', ')
        ELSE format('; %s — the person was likely available (%s, confidence %s)',
                    'over the threshold', round(av.belief::numeric, 2), round(av.confidence::numeric, 2)) END;
    INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, gates, outcome, explanation)
    VALUES (who, t, ins, total, threshold, gates, e.outcome, words)
    RETURNING * INTO e;
    UPDATE dionysus.people x SET last_pressure = total, last_evaluated_at = t,
           next_check_at = t + make_interval(secs => coalesce(x.check_interval_minutes, dionysus_internal.proactive_setting('check_interval_minutes')) * 60)
     WHERE x.person = who;
    IF e.outcome = 'signal' THEN
        PERFORM dionysus.push_event('internal', 'contact_urge', 3, jsonb_build_object('pressure', round(total::numeric, 3)), who);
    END IF;
    IF e.outcome = 'opportunity' THEN
        UPDATE dionysus.contact_evaluations c SET notified_at = now() WHERE c.id = e.id;
        PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', e.id, 'person', who, 'why', words)::text);
    END IF;
    RETURN e;
END $$;

CREATE FUNCTION explain_contact(for_person text DEFAULT NULL, max_items integer DEFAULT 1)
    RETURNS TABLE (evaluation_id uuid, at timestamptz, person text, outcome text, pressure double precision,
                   threshold double precision, explanation text, inputs jsonb, gates jsonb, decision text, reason text)
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF max_items IS NULL OR max_items < 1 OR max_items > 1000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_items": % (1 to 1000)', max_items USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.id, c.at, c.person, c.outcome, c.pressure, c.threshold, c.explanation, c.inputs, c.gates, c.decision, c.reason
      FROM dionysus.contact_evaluations c
     WHERE for_person IS NULL OR c.person = for_person
     ORDER BY c.at DESC, c.recorded_at DESC LIMIT max_items;
END $$;

-- ---------------------------------------------------------------------------------------
-- The tick: events, state, evaluations, the next interval
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION proactive_tick() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    a dionysus.agent_state;
    hours double precision;
    n_dropped bigint := 0;
    n_filtered bigint := 0;
    n_processed bigint := 0;
    over bigint;
    wake double precision;
    woke boolean := false;
    ev record;
    gone record;
    who text;
    evaluated integer := 0;
    opportunities integer := 0;
    verdict dionysus.contact_evaluations;
    top_pressure double precision;
    tod double precision;
    interval_s double precision;
    new_mode text;
    local_hour int;
    new_memories bigint;
BEGIN
    SELECT * INTO a FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    hours := greatest(0, extract(epoch FROM t - coalesce(a.last_tick_at, t)) / 3600.0);
    -- The agent keeps the day of the person it talked with last: it sleeps when they sleep.
    local_hour := extract(hour FROM t AT TIME ZONE coalesce((SELECT x.time_zone FROM dionysus.people x
                                                              ORDER BY x.last_message_at DESC NULLS LAST LIMIT 1), 'UTC'))::int;

    -- Overload, layer 2: old LOW and IDLE events are dropped; layer 3: above the limit the
    -- lowest priority goes first. CRITICAL is never dropped.
    FOR gone IN
        WITH d AS (
            UPDATE dionysus.events e SET status = 'dropped', handled_at = t, reason = 'too old for its priority'
             WHERE e.status = 'queued'
               AND ((e.priority >= 3 AND e.at < t - make_interval(secs => dionysus_internal.proactive_setting('event_drop_low_seconds')))
                 OR (e.priority = 4 AND e.at < t - make_interval(secs => dionysus_internal.proactive_setting('event_drop_idle_seconds'))))
            RETURNING e.priority)
        SELECT d.priority, count(*) AS n FROM d GROUP BY d.priority
    LOOP
        PERFORM dionysus_internal.count_event('dropped_age', gone.priority, gone.n);
        n_dropped := n_dropped + gone.n;
    END LOOP;
    SELECT count(*) - dionysus_internal.proactive_setting('event_queue_limit') INTO over FROM dionysus.events WHERE status = 'queued';
    IF over > 0 THEN
        FOR gone IN
            WITH d AS (
                UPDATE dionysus.events e SET status = 'dropped', handled_at = t, reason = 'queue over its limit'
                 WHERE e.id IN (SELECT x.id FROM dionysus.events x WHERE x.status = 'queued' AND x.priority > 0
                                 ORDER BY x.priority DESC, x.at LIMIT over)
                RETURNING e.priority)
            SELECT d.priority, count(*) AS n FROM d GROUP BY d.priority
        LOOP
            PERFORM dionysus_internal.count_event('dropped_overload', gone.priority, gone.n);
            n_dropped := n_dropped + gone.n;
        END LOOP;
    END IF;

    -- Relaxed filters LOW and IDLE, asleep everything but CRITICAL; what is filtered disturbs.
    FOR ev IN SELECT * FROM dionysus.events WHERE status = 'queued' ORDER BY priority, at, id LOOP
        IF (a.mode = 'relaxed' AND ev.priority >= 3) OR (a.mode = 'asleep' AND ev.priority >= 1) THEN
            UPDATE dionysus.events SET status = 'filtered', handled_at = t, reason = 'agent ' || a.mode WHERE id = ev.id;
            PERFORM dionysus_internal.count_event('filtered', ev.priority, 1);
            a.disturbance := a.disturbance + ev.merged * (ARRAY[1.0, 0.3, 0.1, 0.05, 0.01])[ev.priority + 1];
            n_filtered := n_filtered + 1;
            CONTINUE;
        END IF;
        IF ev.type IN ('reaction') AND ev.person IS NOT NULL THEN
            UPDATE dionysus.people SET social_debt = social_debt * 0.8 WHERE person = ev.person;
        END IF;
        UPDATE dionysus.events SET status = 'processed', handled_at = t WHERE id = ev.id;
        a.vitality := greatest(0, a.vitality - dionysus_internal.proactive_setting('vitality_drain_event'));
        n_processed := n_processed + 1;
    END LOOP;
    a.disturbance := a.disturbance * dionysus_internal.proactive_setting('disturbance_decay');
    wake := 0.5 * (1 + (1 - a.vitality));
    IF a.mode IN ('asleep', 'relaxed') AND a.disturbance > wake THEN
        woke := true;
        a.disturbance := 0;
    END IF;

    -- Vitality: spent by ticking, regained with time, twice as fast in the agent's night.
    a.vitality := least(1, greatest(0, a.vitality - dionysus_internal.proactive_setting('vitality_drain_tick')
        + hours * dionysus_internal.proactive_setting('vitality_recharge_hour')
                * CASE WHEN local_hour >= 23 OR local_hour < 7 THEN 2 ELSE 1 END));

    -- Each person's pressures move with time; contact is evaluated when their cadence is due.
    SELECT count(*) INTO new_memories FROM dionysus.memories m
     WHERE m.created_at > coalesce(a.last_tick_real_at, now()) AND m.type = 'semantic' AND m.status = 'active'
       AND m.private_to IS NULL; -- what anyone may hear of (nobody's private words)
    UPDATE dionysus.people x SET
        social_debt = 1 - (1 - x.social_debt) * exp(-hours / dionysus_internal.proactive_setting('social_debt_hours')),
        curiosity = least(1, x.curiosity * power(1 - dionysus_internal.proactive_setting('curiosity_decay_per_hour'), hours)
                             + least(5, new_memories) * dionysus_internal.proactive_setting('curiosity_per_new_memory')
                               * 2 * dionysus_internal.trait('curiosity')),
        updated_at = now()
     WHERE x.last_message_at IS NOT NULL;
    FOR who IN SELECT x.person FROM dionysus.people x
                WHERE x.last_message_at IS NOT NULL AND (x.next_check_at IS NULL OR x.next_check_at <= t)
                ORDER BY x.person LOOP
        verdict := dionysus_internal.evaluate_contact(who);
        evaluated := evaluated + 1;
        IF verdict.outcome = 'opportunity' THEN
            opportunities := opportunities + 1;
        END IF;
    END LOOP;

    -- A crossing nobody decided on (no driver running) does not wait forever.
    UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = 'skipped', decided_at = t,
           reason = 'no mind decided within 30 minutes'
     WHERE c.outcome = 'opportunity' AND c.decision IS NULL AND c.at < t - interval '30 minutes';

    -- The next tick: interval = base × 1/pressure × time of day × vitality (seed 003 §2).
    SELECT greatest(0.05, coalesce(max(x.last_pressure), 0)) INTO top_pressure FROM dionysus.people x;
    tod := CASE WHEN local_hour >= 23 OR local_hour < 7 THEN 4 ELSE 1 END;
    interval_s := dionysus_internal.proactive_setting('base_tick_seconds') / top_pressure * tod * (1 + (1 - a.vitality));
    IF woke THEN
        interval_s := dionysus_internal.proactive_setting('min_tick_seconds');
    END IF;
    interval_s := least(dionysus_internal.proactive_setting('max_tick_seconds'),
                        greatest(dionysus_internal.proactive_setting('min_tick_seconds'), interval_s));
    new_mode := CASE WHEN interval_s < 60 THEN 'alert' WHEN interval_s < 900 THEN 'normal'
                     WHEN interval_s < 3600 THEN 'relaxed' ELSE 'asleep' END;
    UPDATE dionysus.agent_state SET vitality = a.vitality, disturbance = a.disturbance, mode = new_mode, pressure = top_pressure,
           tick_interval_seconds = interval_s, last_tick_at = t, last_tick_real_at = now(),
           next_tick_at = t + make_interval(secs => interval_s),
           ticks = ticks + 1, updated_at = now()
     WHERE id = 1;
    RETURN jsonb_build_object('at', t, 'mode', new_mode, 'previous_mode', a.mode, 'woke', woke, 'vitality', round(a.vitality::numeric, 3),
                              'pressure', round(top_pressure::numeric, 3), 'interval_seconds', round(interval_s::numeric, 1),
                              'events_processed', n_processed, 'events_filtered', n_filtered, 'events_dropped', n_dropped,
                              'evaluated', evaluated, 'opportunities', opportunities);
END $$;

-- Whether the proactive tick is due (the scheduler calls proactive_tick then).
CREATE FUNCTION dionysus_internal.proactive_tick_due() RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(next_tick_at <= dionysus.clock_now(), true) FROM dionysus.agent_state WHERE id = 1
$$;

-- ---------------------------------------------------------------------------------------
-- The smart layer's side: what the driver needs at a crossing, and its decision
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION contact_opportunity(evaluation_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    e dionysus.contact_evaluations;
BEGIN
    SELECT * INTO e FROM dionysus.contact_evaluations c WHERE c.id = evaluation_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "evaluation_id": no contact evaluation with id %', evaluation_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN jsonb_build_object(
        'evaluation_id', e.id, 'person', e.person, 'outcome', e.outcome, 'decided', e.decision IS NOT NULL,
        'explanation', e.explanation, 'inputs', e.inputs, 'gates', e.gates,
        -- Only this person's own turns and what they may see: nobody else's words reach them.
        'recent_turns', coalesce((SELECT jsonb_agg(jsonb_build_object('role', CASE WHEN m.is_bot THEN 'assistant' ELSE 'user' END,
                                                                       'content', left(m.content, 500), 'at', m.created_at) ORDER BY m.created_at)
                                    FROM (SELECT * FROM dionysus.messages x WHERE x.person = e.person
                                           ORDER BY x.created_at DESC LIMIT 12) m), '[]'::jsonb),
        'their_requests', coalesce((SELECT jsonb_agg(g.title ORDER BY g.created_at) FROM dionysus.goals g
                                     WHERE g.priority IN ('active', 'queued') AND g.private_to = ARRAY[e.person]), '[]'::jsonb),
        'personality', (SELECT jsonb_object_agg(trait, value) FROM dionysus.personality));
END $$;

CREATE FUNCTION decide_contact(evaluation_id uuid, decision text, message text DEFAULT NULL, reason text DEFAULT NULL,
                               decided_by text DEFAULT 'model') RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    e dionysus.contact_evaluations;
    p dionysus.people;
    t timestamptz := dionysus.clock_now();
    target jsonb;
    msg_id uuid;
    cost double precision;
    backoff double precision;
BEGIN
    IF decision IS NULL OR decision NOT IN ('message', 'wait') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decision": % (message or wait)', decision USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decided_by IS NULL OR decided_by NOT IN ('model', 'default', 'skipped') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": % (model, default or skipped)', decided_by USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decision = 'message' AND (coalesce(btrim(message), '') = '' OR length(message) > 4000) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "message": a contact needs the message to send, at most 4,000 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Lock order: the state row (energy), agent_state, then the evaluation and the person.
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    SELECT * INTO e FROM dionysus.contact_evaluations c WHERE c.id = evaluation_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "evaluation_id": no contact evaluation with id %', evaluation_id USING ERRCODE = 'no_data_found';
    END IF;
    IF e.outcome <> 'opportunity' THEN
        RAISE EXCEPTION 'dionysus: evaluation % was %, not an opportunity to contact', evaluation_id, e.outcome
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF e.decision IS NOT NULL THEN
        -- Decided already (a redelivered NOTIFY): the first decision stands.
        RETURN jsonb_build_object('decision', e.decision, 'outbox_id', e.outbox_id, 'duplicate', true);
    END IF;
    SELECT * INTO p FROM dionysus.people x WHERE x.person = e.person FOR UPDATE;
    IF decision = 'wait' THEN
        -- Exponential back-off of the check-in cadence, longer for a patient personality.
        backoff := least(dionysus_internal.proactive_setting('check_backoff_max_minutes'),
                         coalesce(p.check_interval_minutes, dionysus_internal.proactive_setting('check_interval_minutes'))
                         * (1.5 + dionysus_internal.trait('patience')));
        UPDATE dionysus.people x SET check_interval_minutes = backoff, next_check_at = t + make_interval(secs => backoff * 60)
         WHERE x.person = e.person;
        UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = decide_contact.decided_by, decided_at = t,
               reason = decide_contact.reason WHERE c.id = e.id;
        UPDATE dionysus.agent_state SET model_calls = model_calls + CASE WHEN decide_contact.decided_by = 'model' THEN 1 ELSE 0 END,
               vitality = greatest(0, vitality - CASE WHEN decide_contact.decided_by = 'model' THEN dionysus_internal.proactive_setting('vitality_drain_model') ELSE 0 END)
         WHERE id = 1;
        RETURN jsonb_build_object('decision', 'wait', 'next_check_at', t + make_interval(secs => backoff * 60), 'duplicate', false);
    END IF;
    -- The gates are checked again: time passed while the model thought.
    IF EXISTS (SELECT 1 FROM dionysus.outbox o WHERE o.person = e.person AND o.contact_id IS NOT NULL AND o.status = 'pending') THEN
        RAISE EXCEPTION 'dionysus: contact refused: a message to % is already on its way', e.person USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF EXISTS (SELECT 1 FROM dionysus.person_signals s WHERE s.person = e.person AND s.ended_at IS NULL AND (s.until IS NULL OR s.until > t)) THEN
        RAISE EXCEPTION 'dionysus: contact refused: % asked not to be contacted now', e.person USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF p.last_contact_at IS NOT NULL AND t - p.last_contact_at < make_interval(secs => dionysus_internal.heartbeat_setting('reach_out_cooldown_hours') * 3600) THEN
        RAISE EXCEPTION 'dionysus: contact refused: % was contacted less than the cooldown ago', e.person USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    cost := dionysus.get_action_cost('reach_out_user');
    IF (SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1) < cost THEN
        RAISE EXCEPTION 'dionysus: contact refused: energy below the % a contact costs', cost USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF dionysus_internal.web_only_basis(message) THEN
        RAISE EXCEPTION 'dionysus: contact refused: it rests on web content alone' USING ERRCODE = 'insufficient_privilege';
    END IF;
    target := dionysus.reach_out_target(e.person);
    PERFORM dionysus.update_energy(-cost, NULL, 'reach_out_user', 'contact born of pressure: ' || left(e.explanation, 200));
    INSERT INTO dionysus.outbox (audience, content, person, platform, contact_id)
    VALUES ('user', message, target ->> 'person', target ->> 'platform', e.id)
    RETURNING id INTO msg_id;
    UPDATE dionysus.contact_evaluations c SET decision = 'message', decided_by = decide_contact.decided_by, decided_at = t,
           reason = decide_contact.reason, outbox_id = msg_id WHERE c.id = e.id;
    UPDATE dionysus.people x SET
        check_interval_minutes = dionysus_internal.proactive_setting('check_interval_minutes'),
        cause_at_last_contact = jsonb_build_object('task_pressure', (SELECT (i ->> 'value')::float8 FROM jsonb_array_elements(e.inputs) i WHERE i ->> 'input' = 'task_pressure'),
                                                   'curiosity', x.curiosity)
     WHERE x.person = e.person;
    UPDATE dionysus.agent_state SET model_calls = model_calls + CASE WHEN decide_contact.decided_by = 'model' THEN 2 ELSE 0 END,
           vitality = greatest(0, vitality - CASE WHEN decide_contact.decided_by = 'model' THEN 2 * dionysus_internal.proactive_setting('vitality_drain_model') ELSE 0 END)
     WHERE id = 1;
    PERFORM pg_notify('dionysus_outbox', msg_id::text);
    RETURN jsonb_build_object('decision', 'message', 'outbox_id', msg_id, 'duplicate', false);
END $$;

-- A contact Dionysus started was delivered (confirm_outbox calls this in its transaction).
CREATE FUNCTION dionysus_internal.note_contact_delivered(who text) RETURNS void
    LANGUAGE sql AS $$
    UPDATE dionysus.people x SET last_contact_at = dionysus.clock_now(), awaiting_reply = true,
           social_debt = x.social_debt * (1 - dionysus_internal.proactive_setting('debt_relief_on_contact')), updated_at = now()
     WHERE x.person = who
$$;

CREATE FUNCTION set_person_time_zone(person text, time_zone text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF time_zone IS NULL OR NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = time_zone) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "time_zone": % is not a time zone name (e.g. Europe/Lisbon)', time_zone
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.person_row(person);
    UPDATE dionysus.people x SET time_zone = set_person_time_zone.time_zone, updated_at = now() WHERE x.person = set_person_time_zone.person;
END $$;

-- The thinking layer's two prompts: decide at a crossing (fast model), then compose (smart).
INSERT INTO prompt_templates (key, version, temperature, note, template) VALUES
('proactive_decision', 1, 0.2, 'proactive mind: message or wait, at a crossing of contact pressure', $t$TASK: proactive_decision
You are Dionysus, a companion. Pressure to write to {{person}} has built up, unprompted:
{{explanation}}

What weighs on it:
{{inputs}}

What they still wait for from you:
{{requests}}

Your last turns with them (oldest first):
{{turns}}

Decide like a considerate friend: write only if there is something worth their attention now;
otherwise wait. Answer with JSON only: {"decision": "message" or "wait", "reason": "one sentence", "intent": "what the message would be about"}$t$),
('proactive_compose', 1, 0.7, 'proactive mind: the message itself, in the personality''s voice', $t$TASK: proactive_compose
You are Dionysus, writing to {{person}} unprompted. What you want to say: {{intent}}

Your personality (0 to 1): {{personality}}
Shy (above 0.5): hint rather than ask ("let me know when you have a moment"); bold: ask directly.
Humorous: allow lightness; formal: keep it polite. Empathetic: notice how they seemed last time.

Your last turns with them (oldest first):
{{turns}}

Write the message itself: brief, warm, and worth reading now. Answer with JSON only: {"message": "..."}$t$);

CREATE VIEW proactive_health AS
SELECT a.mode, round(a.vitality::numeric, 3) AS vitality, round(a.disturbance::numeric, 3) AS disturbance,
       round(a.pressure::numeric, 3) AS pressure, a.tick_interval_seconds, a.last_tick_at, a.next_tick_at, a.ticks, a.model_calls,
       (SELECT count(*) FROM events WHERE status = 'queued') AS events_queued,
       (SELECT coalesce(jsonb_object_agg(reason, n), '{}'::jsonb) FROM (SELECT reason, sum(count) AS n FROM event_counters GROUP BY reason) c) AS events_not_processed,
       (SELECT count(*) FROM contact_evaluations WHERE outcome = 'opportunity' AND decision IS NULL) AS opportunities_waiting,
       (SELECT to_jsonb(x) FROM (SELECT c.person, c.at, c.outcome, c.explanation, c.decision FROM contact_evaluations c
                                  ORDER BY c.at DESC, c.recorded_at DESC LIMIT 1) x) AS last_evaluation
  FROM agent_state a WHERE a.id = 1;

-- ---------------------------------------------------------------------------------------
-- Every SQL function, as the organs' files define them at 0.2.0 (those that did not change
-- are replaced by themselves).
-- ---------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dionysus_internal.heartbeat_config_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.value IS NULL OR NEW.value = 'NaN'::float8 OR NEW.value IN ('Infinity'::float8, '-Infinity'::float8)
       OR NEW.value < 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_config.%": % must be a finite number >= 0', NEW.key, NEW.value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('carry_over') AND NEW.value > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_config.carry_over": % must be within [0, 1]', NEW.value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.heartbeat_setting(setting_key text) RETURNS double precision
    LANGUAGE plpgsql STABLE AS $$
DECLARE v double precision;
BEGIN
    SELECT value INTO v FROM dionysus.heartbeat_config WHERE key = setting_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: invalid argument "setting_key": no heartbeat_config key %', setting_key
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v;
END $$;

CREATE OR REPLACE FUNCTION get_action_cost(action_name text) RETURNS double precision
    LANGUAGE plpgsql STABLE AS $$
DECLARE v double precision;
BEGIN
    IF action_name IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "action_name" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT value INTO v FROM dionysus.heartbeat_config WHERE key = 'cost_' || lower(btrim(action_name));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: invalid argument "action_name": unknown action %', action_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v;
END $$;

CREATE OR REPLACE FUNCTION get_current_energy() RETURNS double precision
    LANGUAGE sql STABLE AS $$ SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1 $$;

CREATE OR REPLACE FUNCTION update_energy(delta double precision, heartbeat_id uuid DEFAULT NULL,
                              action text DEFAULT NULL, reason text DEFAULT NULL)
    RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE
    before double precision;
    after double precision;
BEGIN
    IF delta IS NULL OR delta = 'NaN'::float8 OR delta IN ('Infinity'::float8, '-Infinity'::float8) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "delta": % is not a finite number', delta
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT current_energy INTO before FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    after := greatest(dionysus_internal.heartbeat_setting('min_energy'),
                      least(before + delta, dionysus_internal.heartbeat_setting('max_energy')));
    UPDATE dionysus.heartbeat_state SET current_energy = after, updated_at = now() WHERE id = 1;
    INSERT INTO dionysus.energy_ledger (heartbeat_id, action, delta, energy_before, energy_after, reason)
    VALUES (update_energy.heartbeat_id, update_energy.action, after - before, before, after, update_energy.reason);
    RETURN after;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.goal_level(p dionysus.goal_priority) RETURNS integer
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE p WHEN 'active' THEN 3 WHEN 'queued' THEN 2 WHEN 'backburner' THEN 1 ELSE 0 END
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.enforce_goal_limits(keep uuid DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    demoted integer := 0;
    over integer;
    g record;
BEGIN
    over := (SELECT count(*) FROM dionysus.goals WHERE priority = 'active') - dionysus_internal.heartbeat_setting('max_active_goals');
    FOR g IN SELECT id FROM dionysus.goals WHERE priority = 'active' AND id IS DISTINCT FROM keep
             ORDER BY last_touched, created_at LIMIT greatest(over, 0) LOOP
        UPDATE dionysus.goals SET priority = 'queued',
               progress = progress || jsonb_build_array(jsonb_build_object('at', now(), 'note', 'demoted to queued: active limit reached'))
         WHERE id = g.id;
        demoted := demoted + 1;
    END LOOP;
    over := (SELECT count(*) FROM dionysus.goals WHERE priority = 'queued') - dionysus_internal.heartbeat_setting('max_queued_goals');
    FOR g IN SELECT id FROM dionysus.goals WHERE priority = 'queued' AND id IS DISTINCT FROM keep
             ORDER BY last_touched, created_at LIMIT greatest(over, 0) LOOP
        UPDATE dionysus.goals SET priority = 'backburner',
               progress = progress || jsonb_build_array(jsonb_build_object('at', now(), 'note', 'demoted to backburner: queued limit reached'))
         WHERE id = g.id;
        demoted := demoted + 1;
    END LOOP;
    RETURN demoted;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.require_goal(goal_id uuid, arg text DEFAULT 'goal_id') RETURNS dionysus.goals
    LANGUAGE plpgsql AS $$
DECLARE g dionysus.goals;
BEGIN
    IF goal_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "%" must not be null', arg USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO g FROM dionysus.goals WHERE id = goal_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "%": no goal with id %', arg, goal_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN g;
END $$;

CREATE OR REPLACE FUNCTION create_goal(title text, description text DEFAULT NULL, source text DEFAULT 'curiosity',
                            priority text DEFAULT NULL, parent_goal_id uuid DEFAULT NULL,
                            emotional_valence double precision DEFAULT 0.0, blocked_by jsonb DEFAULT NULL,
                            origin_memory_id uuid DEFAULT NULL, private_to text[] DEFAULT NULL)
    RETURNS uuid LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    src dionysus.goal_source;
    prio dionysus.goal_priority;
    parent dionysus.goals;
    new_id uuid;
BEGIN
    IF title IS NULL OR btrim(title) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "title": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF source IS NULL OR lower(btrim(source)) NOT IN ('curiosity', 'user_request', 'identity', 'derived', 'external') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "source": unknown goal source % (expected curiosity, user_request, identity, derived, external)', source
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    src := lower(btrim(source))::dionysus.goal_source;
    IF emotional_valence IS NULL OR emotional_valence = 'NaN'::float8 OR emotional_valence < -1 OR emotional_valence > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "emotional_valence": % is outside [-1, 1]', emotional_valence
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF blocked_by IS NOT NULL AND jsonb_typeof(blocked_by) <> 'array' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "blocked_by": must be a JSON array of goal ids or texts'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Goal limits are counted under one lock so concurrent creators cannot both overflow; it
    -- comes before any goal row (the global lock order in 002_heartbeat.sql).
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    IF parent_goal_id IS NOT NULL THEN
        parent := dionysus_internal.require_goal(parent_goal_id, 'parent_goal_id');
        IF parent.priority IN ('completed', 'abandoned') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "parent_goal_id": goal % is %', parent_goal_id, parent.priority
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    -- Default priority by source (§4.5): user requests are active, derived goals inherit.
    IF priority IS NOT NULL THEN
        IF lower(btrim(priority)) NOT IN ('active', 'queued', 'backburner') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "priority": a new goal is active, queued or backburner, not %', priority
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        prio := lower(btrim(priority))::dionysus.goal_priority;
    ELSIF src = 'user_request' THEN
        prio := 'active';
    ELSIF src = 'derived' AND parent.id IS NOT NULL THEN
        prio := parent.priority;
    ELSE
        prio := 'queued';
    END IF;
    IF origin_memory_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dionysus.memories WHERE id = origin_memory_id) THEN
        RAISE EXCEPTION 'dionysus: argument "origin_memory_id": no memory with id %', origin_memory_id USING ERRCODE = 'no_data_found';
    END IF;
    -- A newcomer that does not fit takes the overflow itself, one level down at a time;
    -- only a user's request displaces the stalest active goal instead.
    IF src <> 'user_request' THEN
        IF prio = 'active' AND (SELECT count(*) FROM dionysus.goals WHERE priority = 'active') >= dionysus_internal.heartbeat_setting('max_active_goals') THEN
            prio := 'queued';
        END IF;
        IF prio = 'queued' AND (SELECT count(*) FROM dionysus.goals WHERE priority = 'queued') >= dionysus_internal.heartbeat_setting('max_queued_goals') THEN
            prio := 'backburner';
        END IF;
    END IF;
    INSERT INTO dionysus.goals (title, description, priority, source, parent_goal_id, emotional_valence, blocked_by, private_to)
    VALUES (btrim(title), description, prio, src, parent_goal_id, emotional_valence, blocked_by,
            dionysus_internal.privacy_union(private_to, NULL))
    RETURNING id INTO new_id;
    IF origin_memory_id IS NOT NULL THEN
        INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (new_id, origin_memory_id, 'origin');
    END IF;
    PERFORM dionysus_internal.enforce_goal_limits(new_id);
    RETURN new_id;
END $$;

CREATE OR REPLACE FUNCTION change_goal_priority(goal_id uuid, new_priority text, reason text DEFAULT NULL)
    RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    g dionysus.goals;
    target dionysus.goal_priority;
BEGIN
    -- The goals lock before the goal's row: the global lock order (002_heartbeat.sql).
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    g := dionysus_internal.require_goal(goal_id);
    IF new_priority IS NULL OR lower(btrim(new_priority)) NOT IN ('active', 'queued', 'backburner', 'completed', 'abandoned') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "new_priority": unknown priority %', new_priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    target := lower(btrim(new_priority))::dionysus.goal_priority;
    IF target = g.priority THEN
        RETURN target::text;
    END IF;
    IF g.priority IN ('completed', 'abandoned') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "new_priority": goal % is % and cannot become %', goal_id, g.priority, target
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF target = 'completed' AND g.priority <> 'active' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "new_priority": only an active goal can be completed (goal % is %)', goal_id, g.priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF target IN ('active', 'queued', 'backburner') AND abs(dionysus_internal.goal_level(target) - dionysus_internal.goal_level(g.priority)) <> 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "new_priority": % → % skips a level (backburner ↔ queued ↔ active)', g.priority, target
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF target = 'abandoned' AND (reason IS NULL OR btrim(reason) = '') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "reason": abandoning a goal needs a reason' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.goals SET
        priority = target,
        last_touched = now(),
        completed_at = CASE WHEN target = 'completed' THEN now() ELSE completed_at END,
        abandoned_at = CASE WHEN target = 'abandoned' THEN now() ELSE abandoned_at END,
        abandonment_reason = CASE WHEN target = 'abandoned' THEN reason ELSE abandonment_reason END,
        progress = progress || jsonb_build_array(jsonb_build_object('at', now(),
                     'note', format('%s → %s%s', g.priority, target, coalesce(': ' || reason, ''))))
    WHERE id = goal_id;
    IF target = 'completed' THEN
        PERFORM dionysus_internal.complete_parent_goals(goal_id);
    END IF;
    PERFORM dionysus_internal.enforce_goal_limits(goal_id);
    RETURN target::text;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.complete_parent_goals(child uuid) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE p uuid;
BEGIN
    SELECT parent_goal_id INTO p FROM dionysus.goals WHERE id = child;
    WHILE p IS NOT NULL LOOP
        EXIT WHEN EXISTS (SELECT 1 FROM dionysus.goals WHERE parent_goal_id = p AND priority <> 'completed');
        EXIT WHEN (SELECT priority FROM dionysus.goals WHERE id = p) IN ('completed', 'abandoned');
        UPDATE dionysus.goals SET priority = 'completed', completed_at = now(), last_touched = now(),
               progress = progress || jsonb_build_array(jsonb_build_object('at', now(), 'note', 'completed: every sub-goal is done'))
         WHERE id = p;
        SELECT parent_goal_id INTO p FROM dionysus.goals WHERE id = p;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION add_goal_progress(goal_id uuid, note text, memory_id uuid DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE g dionysus.goals;
BEGIN
    g := dionysus_internal.require_goal(goal_id);
    IF note IS NULL OR btrim(note) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "note": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.goals SET last_touched = now(),
           progress = progress || jsonb_build_array(jsonb_build_object('at', now(), 'note', note))
     WHERE id = goal_id;
    IF memory_id IS NOT NULL THEN
        PERFORM dionysus.link_goal_memory(goal_id, memory_id, 'progress');
    END IF;
END $$;

CREATE OR REPLACE FUNCTION set_goal_blockers(goal_id uuid, blocked_by jsonb) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus_internal.require_goal(goal_id);
    IF blocked_by IS NOT NULL AND jsonb_typeof(blocked_by) <> 'array' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "blocked_by": must be a JSON array of goal ids or texts'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.goals g
       SET blocked_by = CASE WHEN jsonb_array_length(coalesce(set_goal_blockers.blocked_by, '[]')) = 0 THEN NULL
                             ELSE set_goal_blockers.blocked_by END,
           last_touched = now()
     WHERE g.id = set_goal_blockers.goal_id;
END $$;

CREATE OR REPLACE FUNCTION link_goal_memory(goal_id uuid, memory_id uuid, link_type text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus_internal.require_goal(goal_id);
    IF memory_id IS NULL OR NOT EXISTS (SELECT 1 FROM dionysus.memories m WHERE m.id = memory_id) THEN
        RAISE EXCEPTION 'dionysus: argument "memory_id": no memory with id %', memory_id USING ERRCODE = 'no_data_found';
    END IF;
    IF link_type IS NULL OR link_type NOT IN ('origin', 'progress', 'completion', 'blocker') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "link_type": % (expected origin, progress, completion, blocker)', link_type
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (goal_id, memory_id, link_type)
    ON CONFLICT DO NOTHING;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.goal_open_blockers(g dionysus.goals) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(b), '[]'::jsonb)
    FROM jsonb_array_elements(coalesce(g.blocked_by, '[]'::jsonb)) AS b
    WHERE NOT (jsonb_typeof(b) = 'string'
               AND (b #>> '{}') ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
               AND EXISTS (SELECT 1 FROM dionysus.goals d WHERE d.id = (b #>> '{}')::uuid AND d.priority = 'completed'))
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.goal_brief(g dionysus.goals) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', g.id, 'title', g.title, 'description', g.description, 'priority', g.priority,
                              'source', g.source, 'parent_goal_id', g.parent_goal_id,
                              'last_touched', g.last_touched, 'emotional_valence', g.emotional_valence,
                              'last_progress', g.progress -> -1, 'open_blockers', dionysus_internal.goal_open_blockers(g))
$$;

CREATE OR REPLACE FUNCTION review_goals() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    stale_days double precision := dionysus_internal.heartbeat_setting('stale_goal_days');
    active jsonb; queued jsonb; blocked jsonb; stale jsonb; candidates jsonb;
    n_active integer; n_queued integer; n_backburner integer;
BEGIN
    SELECT coalesce(jsonb_agg(dionysus_internal.goal_brief(g) ORDER BY g.last_touched DESC), '[]'), count(*)
      INTO active, n_active FROM dionysus.goals g WHERE g.priority = 'active';
    SELECT coalesce(jsonb_agg(dionysus_internal.goal_brief(g) ORDER BY g.last_touched DESC), '[]'), count(*)
      INTO queued, n_queued FROM dionysus.goals g WHERE g.priority = 'queued';
    SELECT count(*) INTO n_backburner FROM dionysus.goals WHERE priority = 'backburner';
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title, 'blocked_by', dionysus_internal.goal_open_blockers(g))), '[]')
      INTO blocked FROM dionysus.goals g
     WHERE g.priority = 'active' AND jsonb_array_length(dionysus_internal.goal_open_blockers(g)) > 0;
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title,
                    'days_untouched', round((extract(epoch FROM now() - g.last_touched) / 86400)::numeric, 1))), '[]')
      INTO stale FROM dionysus.goals g
     WHERE g.priority = 'active' AND g.last_touched < now() - make_interval(secs => stale_days * 86400);
    -- Queued goals that are unblocked, most recently touched (most relevant) first.
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', c.id, 'title', c.title)), '[]') INTO candidates
      FROM (SELECT g.id, g.title FROM dionysus.goals g
             WHERE g.priority = 'queued' AND jsonb_array_length(dionysus_internal.goal_open_blockers(g)) = 0
             ORDER BY g.last_touched DESC LIMIT 3) c;
    RETURN jsonb_build_object(
        'active', active, 'queued', queued, 'backburner_count', n_backburner,
        'blocked', blocked, 'stale', stale, 'promotion_candidates', candidates,
        'needs_brainstorm', n_active + n_queued + n_backburner = 0,
        'suggest_promotion', CASE WHEN n_active = 0 AND jsonb_array_length(candidates) > 0 THEN candidates -> 0 END);
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.check_self_model(arg text, statement text, confidence double precision) RETURNS void
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF statement IS NULL OR btrim(statement) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', arg USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF confidence IS NULL OR confidence = 'NaN'::float8 OR confidence < 0 OR confidence > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "confidence": % is outside [0, 1]', confidence USING ERRCODE = 'invalid_parameter_value';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION set_identity_aspect(aspect text, confidence double precision DEFAULT 0.5) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE r uuid;
BEGIN
    PERFORM dionysus_internal.check_self_model('aspect', aspect, confidence);
    INSERT INTO dionysus.identity_aspects (aspect, confidence) VALUES (btrim(aspect), confidence)
    ON CONFLICT (aspect_key) DO UPDATE SET confidence = EXCLUDED.confidence, updated_at = now()
    RETURNING id INTO r;
    RETURN r;
END $$;

CREATE OR REPLACE FUNCTION set_worldview_belief(belief text, confidence double precision DEFAULT 0.5) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE r uuid;
BEGIN
    PERFORM dionysus_internal.check_self_model('belief', belief, confidence);
    INSERT INTO dionysus.worldview_beliefs (belief, confidence) VALUES (btrim(belief), confidence)
    ON CONFLICT (belief_key) DO UPDATE SET confidence = EXCLUDED.confidence, updated_at = now()
    RETURNING id INTO r;
    RETURN r;
END $$;

CREATE OR REPLACE FUNCTION session_start() RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET session_active = true,
           session_started_at = CASE WHEN session_active THEN session_started_at ELSE now() END,
           last_user_interaction_at = now(), updated_at = now() WHERE id = 1;
$$;

CREATE OR REPLACE FUNCTION note_user_message() RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET last_user_interaction_at = now(), updated_at = now() WHERE id = 1;
$$;

CREATE OR REPLACE FUNCTION request_heartbeat(reason text DEFAULT 'requested') RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dionysus.heartbeat_state SET requested_at = now(), request_reason = reason, updated_at = now() WHERE id = 1;
    PERFORM pg_notify('dionysus_heartbeat', jsonb_build_object('reason', reason, 'database', current_database())::text);
END $$;

CREATE OR REPLACE FUNCTION session_end(significant boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dionysus.heartbeat_state SET session_active = false, updated_at = now() WHERE id = 1;
    IF significant THEN
        PERFORM dionysus.request_heartbeat('significant session');
    END IF;
END $$;

CREATE OR REPLACE FUNCTION pause_heartbeats(paused boolean DEFAULT true) RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET paused = pause_heartbeats.paused, updated_at = now() WHERE id = 1;
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.claim_rows(worker text, ids uuid[]) RETURNS SETOF work_queue
    LANGUAGE sql AS $$
    UPDATE dionysus.work_queue w SET status = 'claimed', attempts = w.attempts + 1, claimed_by = claim_rows.worker,
           claimed_at = now(), lease_token = gen_random_uuid(),
           lease_until = now() + make_interval(mins => dionysus_internal.heartbeat_setting('work_lease_minutes')::int)
     WHERE w.id = ANY(claim_rows.ids) AND w.status = 'pending'
    RETURNING w.*
$$;

CREATE OR REPLACE FUNCTION claim_work(worker text, actions text[] DEFAULT NULL, max_items integer DEFAULT 1,
                           heartbeat_id uuid DEFAULT NULL)
    RETURNS SETOF work_queue LANGUAGE plpgsql AS $$
BEGIN
    IF worker IS NULL OR btrim(worker) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "worker": must name the claimer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_items IS NULL OR max_items < 1 OR max_items > 1000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_items": % is outside [1, 1000]', max_items USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.expire_work_leases();
    RETURN QUERY SELECT * FROM dionysus_internal.claim_rows(worker, ARRAY(
        SELECT q.id FROM dionysus.work_queue q
         WHERE q.status = 'pending' AND q.available_at <= now()
           AND (actions IS NULL OR q.action = ANY(actions))
           AND (claim_work.heartbeat_id IS NULL OR q.heartbeat_id = claim_work.heartbeat_id)
         ORDER BY q.created_at, q.id LIMIT max_items FOR UPDATE SKIP LOCKED));
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.expire_work_leases() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer;
    w record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM dionysus.work_queue WHERE status = 'claimed' AND lease_until < now()) THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE; -- lock order: state before rows
    n := 0;
    FOR w IN UPDATE dionysus.work_queue
                SET status = CASE WHEN attempts >= max_attempts THEN 'failed'::dionysus.work_status ELSE 'pending' END,
                    last_error = 'lease expired (claimed by ' || coalesce(claimed_by, '?') || ')', lease_until = NULL,
                    completed_at = CASE WHEN attempts >= max_attempts THEN now() END
              WHERE status = 'claimed' AND lease_until < now()
          RETURNING * LOOP
        n := n + 1;
        IF w.status = 'failed' THEN
            PERFORM dionysus_internal.refund_work(w.id);
        END IF;
    END LOOP;
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.refund_work(work_id uuid) RETURNS double precision
    LANGUAGE plpgsql AS $$
DECLARE
    cost double precision;
    hb uuid;
    act text;
BEGIN
    SELECT q.energy_cost, q.heartbeat_id, q.action INTO cost, hb, act
      FROM dionysus.work_queue q WHERE q.id = refund_work.work_id FOR UPDATE;
    IF NOT FOUND OR cost <= 0 THEN
        RETURN 0;
    END IF;
    UPDATE dionysus.work_queue q SET energy_cost = 0 WHERE q.id = refund_work.work_id;
    PERFORM dionysus.update_energy(cost, hb, act, 'refund: the action failed for good');
    RETURN cost;
END $$;

CREATE OR REPLACE FUNCTION claim_work_item(work_id uuid, worker text) RETURNS SETOF work_queue
    LANGUAGE plpgsql AS $$
BEGIN
    IF work_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "work_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF worker IS NULL OR btrim(worker) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "worker": must name the claimer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY SELECT * FROM dionysus_internal.claim_rows(worker, ARRAY(
        SELECT q.id FROM dionysus.work_queue q WHERE q.id = claim_work_item.work_id AND q.status = 'pending'
           FOR UPDATE SKIP LOCKED));
END $$;

CREATE OR REPLACE FUNCTION release_work(work_id uuid, reason text DEFAULT NULL, delay_seconds integer DEFAULT 60, lease uuid DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE w dionysus.work_queue;
BEGIN
    IF delay_seconds IS NULL OR delay_seconds < 0 OR delay_seconds > 86400 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "delay_seconds": % is outside [0, 86400]', delay_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    w := dionysus_internal.require_claimed_work(work_id, lease);
    IF w.status <> 'claimed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "work_id": work item % is %, not claimed', work_id, w.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.work_queue SET status = 'pending', attempts = greatest(attempts - 1, 0), lease_until = NULL,
           last_error = coalesce(reason, last_error), available_at = now() + make_interval(secs => delay_seconds)
     WHERE id = w.id;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.require_claimed_work(work_id uuid, lease uuid DEFAULT NULL) RETURNS dionysus.work_queue
    LANGUAGE plpgsql AS $$
DECLARE w dionysus.work_queue;
BEGIN
    IF work_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "work_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO w FROM dionysus.work_queue WHERE id = work_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "work_id": no work item with id %', work_id USING ERRCODE = 'no_data_found';
    END IF;
    IF lease IS NOT NULL AND w.status IN ('claimed', 'pending') THEN
        IF w.lease_token IS DISTINCT FROM lease THEN
            RAISE EXCEPTION 'dionysus: argument "lease": work item % is no longer held by this lease (now claimed by %)',
                work_id, coalesce(w.claimed_by, 'nobody') USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        w.status := 'claimed'; -- the holder's lease lapsed, but nobody else took it
    END IF;
    RETURN w;
END $$;

CREATE OR REPLACE FUNCTION complete_work(work_id uuid, result jsonb DEFAULT '{}', lease uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    w dionysus.work_queue;
    item jsonb;
    made jsonb := jsonb_build_object('memories', '[]'::jsonb, 'facts', '[]'::jsonb, 'goals', '[]'::jsonb);
    new_id uuid;
    msg_id uuid;
    key text;
    privacy text[];
    from_web boolean;
    target jsonb;
    refused jsonb := '[]'::jsonb;
BEGIN
    -- Lock order: goals before the rows and the learn/episode locks remember and learn take.
    IF result ? 'goals' OR result ? 'goal_progress' THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    END IF;
    w := dionysus_internal.require_claimed_work(work_id, lease);
    IF w.status = 'done' THEN
        RETURN w.result -> 'applied';
    END IF;
    IF w.status <> 'claimed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "work_id": work item % is %, not claimed', work_id, w.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    result := coalesce(result, '{}'::jsonb);
    IF jsonb_typeof(result) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: argument "result": must be a JSON object' USING ERRCODE = 'invalid_text_representation';
    END IF;
    FOR key IN SELECT jsonb_object_keys(result) LOOP
        IF key NOT IN ('memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts',
                       'episode_summary', 'message', 'summary', 'basis', 'person', 'maintenance') THEN
            RAISE EXCEPTION 'dionysus: argument "result": unknown key "%"', key USING ERRCODE = 'invalid_text_representation';
        END IF;
        IF key IN ('memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts', 'basis')
           AND jsonb_typeof(result -> key) <> 'array' THEN
            RAISE EXCEPTION 'dionysus: argument "result.%": must be an array', key USING ERRCODE = 'invalid_text_representation';
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b
                WHERE jsonb_typeof(b) <> 'string'
                   OR (b #>> '{}') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN
        RAISE EXCEPTION 'dionysus: argument "result.basis": must be an array of memory ids' USING ERRCODE = 'invalid_text_representation';
    END IF;
    privacy := CASE WHEN w.params ->> 'person' IS NOT NULL THEN ARRAY[w.params ->> 'person'] END;
    privacy := dionysus_internal.privacy_union(privacy, (SELECT h.private_to FROM dionysus.heartbeat_log h WHERE h.id = w.heartbeat_id));
    privacy := dionysus_internal.privacy_union(privacy, dionysus_internal.memory_privacy(
                   ARRAY(SELECT (b #>> '{}')::uuid FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b)));
    from_web := w.action IN ('inquire_shallow', 'inquire_deep');
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'memories', '[]')) LOOP
        new_id := dionysus.remember(item ->> 'content', coalesce(item ->> 'type', 'semantic'),
                                    CASE WHEN from_web THEN least(coalesce((item ->> 'importance')::float8, 0.3), 0.3)
                                         ELSE coalesce((item ->> 'importance')::float8, 0.5) END,
                                    coalesce((item ->> 'valence')::float8, 0),
                                    jsonb_build_object('work_id', w.id, 'action', w.action, 'heartbeat_id', w.heartbeat_id,
                                                       'provenance', CASE WHEN from_web THEN 'web' ELSE 'heartbeat' END),
                                    CASE WHEN from_web THEN 'web' ELSE 'heartbeat' END,
                                    confidence => CASE WHEN from_web THEN least(coalesce((item ->> 'confidence')::float8, 0.5), 0.5)
                                                       ELSE coalesce((item ->> 'confidence')::float8, 1.0) END,
                                    private_to => privacy);
        made := jsonb_set(made, '{memories}', (made -> 'memories') || to_jsonb(new_id));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'facts', '[]')) LOOP
        new_id := dionysus.learn(item ->> 'content', item ->> 'subject', item ->> 'category',
                                 CASE WHEN from_web THEN least(coalesce((item ->> 'confidence')::float8, 0.5), 0.5)
                                      ELSE coalesce((item ->> 'confidence')::float8, 0.8) END,
                                 CASE WHEN from_web THEN 'web' ELSE coalesce(w.params ->> 'source', 'heartbeat:' || w.action) END,
                                 private_to => privacy);
        made := jsonb_set(made, '{facts}', (made -> 'facts') || to_jsonb(new_id));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'triples', '[]')) LOOP
        new_id := dionysus.add_triple(item ->> 'subject', item ->> 'predicate', item ->> 'object',
                                      coalesce((item ->> 'confidence')::float8, 0.8),
                                      CASE WHEN from_web THEN 'web' ELSE coalesce(w.params ->> 'source', 'heartbeat:' || w.action) END,
                                      (w.params ->> 'memory_id')::uuid, private_to => privacy);
        made := made || jsonb_build_object('triples', coalesce(made -> 'triples', '[]'::jsonb) || to_jsonb(new_id));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'concepts', '[]')) LOOP
        PERFORM dionysus.link_concept(coalesce((item ->> 'memory_id')::uuid, (w.params ->> 'memory_id')::uuid),
                                      item ->> 'name', coalesce((item ->> 'strength')::float8, 1.0));
        made := made || jsonb_build_object('concepts', coalesce((made ->> 'concepts')::int, 0) + 1);
    END LOOP;
    IF result ? 'episode_summary' THEN
        IF w.action <> 'summarize_episode' OR (w.params ->> 'episode_id') IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.episode_summary": only a summarize_episode item carries one'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(btrim(result ->> 'episode_summary'), '') = '' THEN
            RAISE EXCEPTION 'dionysus: argument "result.episode_summary": must not be empty' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        UPDATE dionysus.episodes SET summary = result ->> 'episode_summary',
               summary_embedding = dionysus.embed(result ->> 'episode_summary')
         WHERE id = (w.params ->> 'episode_id')::uuid;
        made := made || jsonb_build_object('episode_id', w.params ->> 'episode_id');
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'goals', '[]')) LOOP
        new_id := dionysus.create_goal(item ->> 'title', item ->> 'description', coalesce(item ->> 'source', 'curiosity'),
                                       item ->> 'priority', (item ->> 'parent_goal_id')::uuid, private_to => privacy);
        made := jsonb_set(made, '{goals}', (made -> 'goals') || to_jsonb(new_id));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'goal_progress', '[]')) LOOP
        PERFORM dionysus.add_goal_progress((item ->> 'goal_id')::uuid, item ->> 'note');
    END LOOP;
    IF result ? 'maintenance' THEN
        made := made || jsonb_build_object('maintenance', dionysus_internal.apply_maintenance(result -> 'maintenance', w.heartbeat_id, w.id));
    END IF;
    -- Who the agent is and what it believes never changes on the web's word alone.
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'identity', '[]')) LOOP
        IF from_web OR dionysus_internal.web_only_basis(item ->> 'aspect') THEN
            refused := refused || jsonb_build_object('identity', item ->> 'aspect', 'reason', 'rests on web content alone');
            CONTINUE;
        END IF;
        PERFORM dionysus.set_identity_aspect(item ->> 'aspect', coalesce((item ->> 'confidence')::float8, 0.5));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'worldview', '[]')) LOOP
        IF from_web OR dionysus_internal.web_only_basis(item ->> 'belief') THEN
            refused := refused || jsonb_build_object('worldview', item ->> 'belief', 'reason', 'rests on web content alone');
            CONTINUE;
        END IF;
        PERFORM dionysus.set_worldview_belief(item ->> 'belief', coalesce((item ->> 'confidence')::float8, 0.5));
    END LOOP;
    IF w.action IN ('reach_out_user', 'reach_out_public') THEN
        IF coalesce(btrim(result ->> 'message'), '') = '' THEN
            RAISE EXCEPTION 'dionysus: argument "result.message": a reach-out needs the message to send'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF dionysus_internal.web_only_basis(result ->> 'message') THEN
            RAISE EXCEPTION 'dionysus: reach-out refused: web content is its only basis' USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF w.action = 'reach_out_user' THEN
            -- Nobody has talked yet: the message goes to the home channel, and may hold nothing private.
            target := dionysus.reach_out_target(coalesce(result ->> 'person', w.params ->> 'person'));
            IF NOT dionysus_internal.visible_to(privacy, target ->> 'person') THEN
                RAISE EXCEPTION 'dionysus: reach-out refused: it drew on what someone other than % said in private', target ->> 'person'
                    USING ERRCODE = 'insufficient_privilege';
            END IF;
        END IF;
        INSERT INTO dionysus.outbox (work_id, audience, content, requires_approval, person, platform)
        VALUES (w.id, CASE w.action WHEN 'reach_out_user' THEN 'user' ELSE 'public' END, result ->> 'message',
                w.action = 'reach_out_public', target ->> 'person', target ->> 'platform')
        RETURNING id INTO msg_id;
        made := made || jsonb_build_object('outbox_id', msg_id);
        IF w.action = 'reach_out_user' THEN
            PERFORM pg_notify('dionysus_outbox', msg_id::text);
        END IF;
    END IF;
    made := made || jsonb_build_object('private_to', to_jsonb(privacy));
    IF jsonb_array_length(refused) > 0 THEN
        made := made || jsonb_build_object('refused', refused);
    END IF;
    UPDATE dionysus.work_queue SET status = 'done', completed_at = now(), lease_until = NULL,
           result = coalesce(complete_work.result, '{}') || jsonb_build_object('applied', made)
     WHERE id = w.id;
    RETURN made;
END $$;

CREATE OR REPLACE FUNCTION fail_work(work_id uuid, error text, retry boolean DEFAULT true, lease uuid DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE
    w dionysus.work_queue;
    next_status dionysus.work_status;
BEGIN
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE; -- lock order: state before rows (refund)
    w := dionysus_internal.require_claimed_work(work_id, lease);
    IF w.status <> 'claimed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "work_id": work item % is %, not claimed', work_id, w.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    next_status := CASE WHEN retry AND w.attempts < w.max_attempts THEN 'pending' ELSE 'failed' END;
    -- Exponential back-off: work_retry_seconds × 2^(attempts − 1).
    UPDATE dionysus.work_queue SET status = next_status, last_error = error, lease_until = NULL,
           completed_at = CASE WHEN next_status = 'failed' THEN now() END,
           available_at = now() + make_interval(secs => dionysus_internal.heartbeat_setting('work_retry_seconds')
                                                        * power(2, greatest(w.attempts - 1, 0)))
     WHERE id = w.id;
    IF next_status = 'pending' THEN
        PERFORM pg_notify('dionysus_work', w.id::text);
    ELSE
        PERFORM dionysus_internal.refund_work(w.id);
    END IF;
    RETURN next_status::text;
END $$;

CREATE OR REPLACE FUNCTION maintain_target(target text DEFAULT NULL, memory_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t jsonb;
    key text := lower(btrim(target));
BEGIN
    IF memory_id IS NOT NULL THEN
        SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                  'status', m.status, 'created_at', m.created_at)
          INTO t FROM dionysus.memories m WHERE m.id = maintain_target.memory_id;
        IF t IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "memory_id": no memory with id %', memory_id USING ERRCODE = 'no_data_found';
        END IF;
    ELSIF key IS NOT NULL AND key <> '' THEN
        SELECT jsonb_build_object('kind', 'belief', 'id', b.id, 'content', b.belief, 'confidence', b.confidence)
          INTO t FROM dionysus.worldview_beliefs b WHERE b.belief_key = key;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'identity', 'id', a.id, 'content', a.aspect, 'confidence', a.confidence)
              INTO t FROM dionysus.identity_aspects a WHERE a.aspect_key = key;
        END IF;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                      'status', m.status, 'created_at', m.created_at)
              INTO t FROM dionysus.recall(target, 1) r JOIN dionysus.memories m ON m.id = r.memory_id;
        END IF;
    ELSE
        SELECT jsonb_build_object('kind', 'belief', 'id', b.id, 'content', b.belief, 'confidence', b.confidence)
          INTO t FROM dionysus.worldview_beliefs b ORDER BY b.confidence, b.updated_at LIMIT 1;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                      'status', m.status, 'created_at', m.created_at)
              INTO t FROM dionysus.facts f JOIN dionysus.memories m ON m.id = f.memory_id
             WHERE f.state IN ('learned', 'confirmed') AND m.status = 'active'
               AND coalesce(f.last_confirmed, f.learned_at) < now() - interval '30 days'
             ORDER BY coalesce(f.last_confirmed, f.learned_at) LIMIT 1;
        END IF;
    END IF;
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN t || jsonb_build_object('evidence', coalesce((
        SELECT jsonb_agg(jsonb_build_object('id', r.memory_id, 'content', r.content, 'created_at', r.created_at,
                                            'source', m.source) ORDER BY r.score DESC)
          FROM dionysus.recall(t ->> 'content', 7) r JOIN dionysus.memories m ON m.id = r.memory_id
         WHERE r.memory_id::text IS DISTINCT FROM t ->> 'id'), '[]'::jsonb));
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.apply_maintenance(m jsonb, heartbeat_id uuid DEFAULT NULL, work_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    kind text := m ->> 'kind';
    target uuid;
    verdict text := lower(coalesce(m ->> 'verdict', ''));
    conf double precision;
    content text := nullif(btrim(m ->> 'content'), '');
    before jsonb;
    after jsonb;
    new_id uuid;
BEGIN
    IF jsonb_typeof(m) IS DISTINCT FROM 'object' OR kind IS NULL OR kind NOT IN ('memory', 'belief', 'identity') THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance": needs a kind (memory, belief or identity)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF verdict NOT IN ('keep', 'update', 'retire') THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.verdict": % is not keep, update or retire', quote_nullable(m ->> 'verdict')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (m ->> 'id') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.id": must be the target''s id' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    target := (m ->> 'id')::uuid;
    IF m ? 'confidence' AND jsonb_typeof(m -> 'confidence') = 'number' THEN
        conf := (m ->> 'confidence')::float8;
        IF conf < 0 OR conf > 1 THEN
            RAISE EXCEPTION 'dionysus: argument "result.maintenance.confidence": % is outside [0, 1]', conf USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF content IS NOT NULL AND kind <> 'memory' AND dionysus_internal.web_only_basis(content) THEN
        RAISE EXCEPTION 'dionysus: maintenance refused: the new text rests on web content alone' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF kind = 'memory' THEN
        SELECT jsonb_build_object('content', x.content, 'confidence', x.confidence, 'status', x.status) INTO before
          FROM dionysus.memories x WHERE x.id = target;
    ELSIF kind = 'belief' THEN
        SELECT jsonb_build_object('content', x.belief, 'confidence', x.confidence) INTO before FROM dionysus.worldview_beliefs x WHERE x.id = target;
    ELSE
        SELECT jsonb_build_object('content', x.aspect, 'confidence', x.confidence) INTO before FROM dionysus.identity_aspects x WHERE x.id = target;
    END IF;
    IF before IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.id": no % with id %', kind, target USING ERRCODE = 'no_data_found';
    END IF;
    IF verdict = 'update' AND kind = 'memory' THEN
        IF content IS NOT NULL AND content <> before ->> 'content' THEN
            new_id := dionysus.supersede(target, content, confidence => conf);
            after := jsonb_build_object('superseded_by', new_id, 'content', content, 'confidence', coalesce(conf, (before ->> 'confidence')::float8));
        ELSIF conf IS NOT NULL THEN
            UPDATE dionysus.memories SET confidence = conf, updated_at = now() WHERE id = target;
            after := jsonb_build_object('confidence', conf);
        END IF;
    ELSIF verdict = 'update' THEN
        IF kind = 'belief' THEN
            UPDATE dionysus.worldview_beliefs SET confidence = coalesce(conf, confidence), belief = coalesce(content, belief), updated_at = now()
             WHERE id = target;
        ELSE
            UPDATE dionysus.identity_aspects SET confidence = coalesce(conf, confidence), aspect = coalesce(content, aspect), updated_at = now()
             WHERE id = target;
        END IF;
        after := jsonb_build_object('content', coalesce(content, before ->> 'content'), 'confidence', coalesce(conf, (before ->> 'confidence')::float8));
    ELSIF verdict = 'retire' THEN
        IF kind = 'memory' THEN
            PERFORM dionysus.archive(target);
            after := jsonb_build_object('status', 'archived');
        ELSIF kind = 'belief' THEN
            DELETE FROM dionysus.worldview_beliefs WHERE id = target;
            after := jsonb_build_object('removed', true);
        ELSE
            DELETE FROM dionysus.identity_aspects WHERE id = target;
            after := jsonb_build_object('removed', true);
        END IF;
    END IF;
    INSERT INTO dionysus.memory_changes (heartbeat_id, work_id, target_kind, target_id, verdict, before, after, reason)
    VALUES (apply_maintenance.heartbeat_id, apply_maintenance.work_id, kind, target, verdict, before, after, m ->> 'reason');
    RETURN jsonb_build_object('kind', kind, 'id', target, 'verdict', verdict, 'before', before, 'after', after);
END $$;

CREATE OR REPLACE FUNCTION pending_outbox(max_items integer DEFAULT 10) RETURNS SETOF outbox
    LANGUAGE sql STABLE AS $$
    SELECT * FROM dionysus.outbox
     WHERE status = 'pending' AND (NOT requires_approval OR approved_at IS NOT NULL)
     ORDER BY created_at, id LIMIT max_items
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.require_outbox(outbox_id uuid) RETURNS dionysus.outbox
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    SELECT * INTO o FROM dionysus.outbox WHERE id = outbox_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "outbox_id": no outbox message with id %', outbox_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN o;
END $$;

CREATE OR REPLACE FUNCTION mark_outbox_sent(outbox_id uuid, platform_message_id text DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE; -- lock order: state before rows
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.requires_approval AND o.approved_at IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": public message % is not approved', outbox_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET status = 'sent', sent_at = now(), attempts = attempts + 1, reserved_until = NULL,
           platform_message_id = mark_outbox_sent.platform_message_id WHERE id = outbox_id;
    IF o.audience = 'user' AND o.work_id IS NOT NULL THEN
        UPDATE dionysus.heartbeat_state SET last_user_contact_at = now() WHERE id = 1;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.outbox_lease() RETURNS interval
    LANGUAGE sql STABLE AS $$ SELECT make_interval(secs => dionysus_internal.heartbeat_setting('outbox_lease_seconds')) $$;

CREATE OR REPLACE FUNCTION reserve_outbox(worker text, platform text, max_items integer DEFAULT 1) RETURNS SETOF outbox
    LANGUAGE plpgsql AS $$
BEGIN
    IF worker IS NULL OR btrim(worker) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "worker": must name the sender' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF platform IS NULL OR btrim(platform) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "platform": must name the platform' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_items IS NULL OR max_items < 1 OR max_items > 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_items": % is outside [1, 100]', max_items USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    -- A message for nobody in particular (the home channel) takes the platform that sends it.
    UPDATE dionysus.outbox o SET reserved_by = reserve_outbox.worker, reserved_until = now() + dionysus_internal.outbox_lease(),
           platform = coalesce(o.platform, reserve_outbox.platform)
     WHERE o.id IN (SELECT x.id FROM dionysus.outbox x
                     WHERE x.status = 'pending' AND x.audience = 'user' AND (NOT x.requires_approval OR x.approved_at IS NOT NULL)
                       AND (x.platform IS NULL OR x.platform = reserve_outbox.platform)
                       AND (x.reserved_until IS NULL OR x.reserved_until < now())
                     ORDER BY x.created_at, x.id LIMIT max_items FOR UPDATE SKIP LOCKED)
    RETURNING o.*;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.require_reserved_outbox(outbox_id uuid, worker text) RETURNS dionysus.outbox
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF o.reserved_by IS DISTINCT FROM worker THEN
        RAISE EXCEPTION 'dionysus: argument "worker": message % is reserved by %, not %', outbox_id, coalesce(o.reserved_by, 'nobody'), worker
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN o;
END $$;

CREATE OR REPLACE FUNCTION outbox_part_sent(outbox_id uuid, worker text, part integer, platform_message_id text) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    IF coalesce(btrim(platform_message_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "platform_message_id": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    o := dionysus_internal.require_reserved_outbox(outbox_id, worker);
    IF part IS NULL OR part < 0 OR part > jsonb_array_length(o.sent_parts) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "part": % is not the next part (% recorded)', part, jsonb_array_length(o.sent_parts)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox x SET reserved_until = now() + dionysus_internal.outbox_lease(),
           sent_parts = CASE WHEN outbox_part_sent.part = jsonb_array_length(x.sent_parts)
                             THEN x.sent_parts || to_jsonb(outbox_part_sent.platform_message_id)
                             ELSE x.sent_parts END
     WHERE x.id = outbox_part_sent.outbox_id;
END $$;

CREATE OR REPLACE FUNCTION confirm_outbox(outbox_id uuid, worker text, channel_id text, bot_author_id text) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE
    o dionysus.outbox;
    logged jsonb;
    last_part text;
BEGIN
    IF coalesce(btrim(channel_id), '') = '' OR coalesce(btrim(bot_author_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', CASE WHEN coalesce(btrim(channel_id), '') = '' THEN 'channel_id' ELSE 'bot_author_id' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO o FROM dionysus.outbox x WHERE x.id = outbox_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "outbox_id": no outbox message with id %', outbox_id USING ERRCODE = 'no_data_found';
    END IF;
    -- Lock order: the channel (log_message takes it again), the state row, then the row.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.channel:' || coalesce(o.platform, '') || ':' || channel_id, 0));
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    o := dionysus_internal.require_reserved_outbox(outbox_id, worker);
    last_part := o.sent_parts ->> -1;
    IF last_part IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": no part of message % was recorded as sent', outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF o.platform IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % names no platform', outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- A contact Dionysus started: the person's row (before log_message's episode lock).
    IF (o.work_id IS NOT NULL OR o.contact_id IS NOT NULL) AND o.person IS NOT NULL THEN
        PERFORM dionysus_internal.note_contact_delivered(o.person);
    END IF;
    logged := dionysus.log_message(o.platform, last_part, channel_id, bot_author_id, o.content, true,
                                   o.work_id IS NOT NULL OR o.contact_id IS NOT NULL,
                                   o.reply_to, o.person);
    UPDATE dionysus.outbox x SET status = 'sent', sent_at = now(), attempts = x.attempts + 1, reserved_until = NULL,
           platform_message_id = last_part, channel_id = confirm_outbox.channel_id
     WHERE x.id = outbox_id;
    IF o.work_id IS NOT NULL OR o.contact_id IS NOT NULL THEN
        UPDATE dionysus.heartbeat_state SET last_user_contact_at = now() WHERE id = 1;
    END IF;
    RETURN (logged ->> 'message_id')::uuid;
END $$;

CREATE OR REPLACE FUNCTION release_outbox(outbox_id uuid, worker text, error text, rejected boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE
    o dionysus.outbox;
    st text;
BEGIN
    o := dionysus_internal.require_reserved_outbox(outbox_id, worker);
    UPDATE dionysus.outbox x SET reserved_until = NULL, last_error = release_outbox.error,
           attempts = x.attempts + CASE WHEN rejected THEN 1 ELSE 0 END,
           status = CASE WHEN rejected AND x.attempts + 1 >= 5 THEN 'failed'::dionysus.outbox_status ELSE 'pending' END
     WHERE x.id = outbox_id
    RETURNING x.status::text INTO st;
    RETURN st;
END $$;

CREATE OR REPLACE FUNCTION mark_outbox_failed(outbox_id uuid, error text, retry boolean DEFAULT true) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET attempts = attempts + 1, last_error = error,
           status = CASE WHEN retry AND attempts + 1 < 5 THEN 'pending'::dionysus.outbox_status ELSE 'failed' END
     WHERE id = outbox_id;
    RETURN (SELECT status::text FROM dionysus.outbox WHERE id = outbox_id);
END $$;

CREATE OR REPLACE FUNCTION approve_outbox(outbox_id uuid) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET approved_at = coalesce(approved_at, now()) WHERE id = outbox_id;
    PERFORM pg_notify('dionysus_outbox', outbox_id::text);
END $$;

CREATE OR REPLACE FUNCTION heartbeat_warnings() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    w jsonb := '[]'::jsonb;
    avg_unused double precision;
    n integer;
    reach_outs integer;
    loop_sim double precision;
BEGIN
    -- Hoarding (§9.2): average unused energy over 5 across the last 24 heartbeats (no verdict before 24).
    SELECT avg(energy_end), count(*) INTO avg_unused, n
      FROM (SELECT energy_end FROM dionysus.heartbeat_log WHERE energy_end IS NOT NULL
             ORDER BY heartbeat_number DESC LIMIT 24) h;
    IF n >= 24 AND avg_unused > 5 THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'hoarding', 'avg_unused_energy', round(avg_unused::numeric, 2),
             'heartbeats', n, 'message', 'Energy keeps going unused; spend it on something that matters, or reflect on why not.'));
    END IF;
    -- Reach-out spam: 5 or more in 24 hours.
    SELECT count(*) INTO reach_outs FROM dionysus.heartbeat_log h, jsonb_array_elements(h.actions_taken) a
     WHERE h.started_at > now() - interval '24 hours' AND a ->> 'action' = 'reach_out_user';
    IF reach_outs >= 5 THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'reach_out_spam', 'reach_outs_24h', reach_outs,
             'message', 'You have messaged the user often today; let them come to you.'));
    END IF;
    -- Stagnation: active goals untouched for a week.
    IF EXISTS (SELECT 1 FROM dionysus.goals WHERE priority = 'active'
                AND last_touched < now() - make_interval(secs => dionysus_internal.heartbeat_setting('stale_goal_days') * 86400)) THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'stagnation',
             'goals', (SELECT jsonb_agg(title) FROM dionysus.goals WHERE priority = 'active'
                        AND last_touched < now() - make_interval(secs => dionysus_internal.heartbeat_setting('stale_goal_days') * 86400)),
             'message', 'Some active goals have not moved in a week: progress, demote or abandon them.'));
    END IF;
    -- Loops: the last three narratives nearly the same (by embedding).
    SELECT min(1 - (a.embedding <=> b.embedding)) INTO loop_sim
      FROM (SELECT m.id, m.embedding, row_number() OVER (ORDER BY h.heartbeat_number DESC) AS r
              FROM dionysus.heartbeat_log h JOIN dionysus.memories m ON m.id = h.memory_id
             ORDER BY h.heartbeat_number DESC LIMIT 3) a
      JOIN (SELECT m.id, m.embedding, row_number() OVER (ORDER BY h.heartbeat_number DESC) AS r
              FROM dionysus.heartbeat_log h JOIN dionysus.memories m ON m.id = h.memory_id
             ORDER BY h.heartbeat_number DESC LIMIT 3) b ON b.r = a.r + 1
     HAVING count(*) = 2;
    IF loop_sim IS NOT NULL AND loop_sim >= 0.9 THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'loop', 'similarity', round(loop_sim::numeric, 3),
             'message', 'Your last heartbeats read almost the same. What else might deserve attention?'));
    END IF;
    RETURN w;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.heartbeat_interval_minutes() RETURNS integer
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('dionysus.heartbeat_interval', true), '')::integer, 60)
$$;

CREATE OR REPLACE FUNCTION heartbeat_observe() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'timestamp', now(),
        'weekday', to_char(now(), 'FMDay'),
        'user_present', s.session_active,
        'last_user_interaction', s.last_user_interaction_at,
        'hours_since_user', round((extract(epoch FROM now() - s.last_user_interaction_at) / 3600)::numeric, 2),
        'last_user_contact', s.last_user_contact_at,
        'hours_since_contact', round((extract(epoch FROM now() - s.last_user_contact_at) / 3600)::numeric, 2),
        'pending_events', jsonb_build_object(
            'work_pending', (SELECT count(*) FROM dionysus.work_queue WHERE status IN ('pending', 'claimed')),
            'outbox_pending', (SELECT count(*) FROM dionysus.outbox WHERE status = 'pending'),
            'requested', s.request_reason),
        -- Cheap on any store size: estimates and the worker's own record, no scans
        -- (memory_health has the exact counts).
        'system_status', (SELECT jsonb_build_object(
                              'memories_estimate', (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'dionysus.memories'::regclass),
                              'neighborhood_backlog', EXISTS (SELECT 1 FROM dionysus.neighborhood_queue),
                              'last_worker_run', w.last_run_at, 'last_worker_error', w.last_error)
                            FROM dionysus.worker_status w WHERE w.id = 1))
    FROM dionysus.heartbeat_state s WHERE s.id = 1);
END $$;

CREATE OR REPLACE FUNCTION activated_themes(max_items integer DEFAULT 5) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    WITH touched AS (
        (SELECT memory_id FROM dionysus.memory_access_log WHERE accessed_at > now() - interval '1 day'
          ORDER BY accessed_at DESC LIMIT 200)
        UNION
        (SELECT id FROM dionysus.memories WHERE last_accessed > now() - interval '1 day'
          ORDER BY last_accessed DESC LIMIT 200)),
    concepts AS (
        SELECT c.name, count(*) AS hits FROM touched t
          JOIN dionysus.memory_concepts mc ON mc.memory_id = t.memory_id JOIN dionysus.concepts c ON c.id = mc.concept_id
         GROUP BY c.name ORDER BY hits DESC, c.name LIMIT max_items)
    SELECT CASE WHEN EXISTS (SELECT 1 FROM concepts)
                THEN (SELECT jsonb_agg(jsonb_build_object('theme', name, 'hits', hits)) FROM concepts)
                ELSE coalesce((SELECT jsonb_agg(jsonb_build_object('memory', left(m.content, 160)))
                                 FROM (SELECT m.content FROM touched t JOIN dionysus.memories m ON m.id = t.memory_id
                                        ORDER BY m.last_accessed DESC NULLS LAST LIMIT max_items) m), '[]'::jsonb)
           END
$$;

CREATE OR REPLACE FUNCTION action_costs() RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_object_agg(substr(key, 6), value ORDER BY value, key) FROM dionysus.heartbeat_config WHERE key LIKE 'cost\_%'
$$;

CREATE OR REPLACE FUNCTION heartbeat_begin() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    st dionysus.heartbeat_state;
    ctx jsonb;
    hb uuid;
    n integer;
    energy double precision;
    env jsonb;
    goals jsonb;
    taint text[];
BEGIN
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    IF st.in_flight IS NOT NULL THEN
        SELECT context INTO ctx FROM dionysus.heartbeat_log WHERE id = st.in_flight AND status IN ('in_flight', 'committed');
        IF FOUND THEN
            RETURN ctx || jsonb_build_object('resumed', true,
                'status', (SELECT status FROM dionysus.heartbeat_log WHERE id = st.in_flight));
        END IF;
    END IF;
    n := st.heartbeat_count + 1;
    hb := gen_random_uuid();
    energy := least(st.current_energy * dionysus_internal.heartbeat_setting('carry_over') + dionysus_internal.heartbeat_setting('base_regeneration'),
                    dionysus_internal.heartbeat_setting('max_energy'));
    -- The log row first: the ledger entry of the regeneration points at it.
    INSERT INTO dionysus.heartbeat_log (id, heartbeat_number, energy_start, last_alive_at) VALUES (hb, n, energy, now());
    PERFORM dionysus.update_energy(energy - st.current_energy, hb, 'regenerate', 'heartbeat start');
    env := dionysus.heartbeat_observe();
    goals := dionysus.review_goals();
    ctx := jsonb_build_object(
        'heartbeat_id', hb,
        'heartbeat_number', n,
        'energy', jsonb_build_object('available', energy, 'max', dionysus_internal.heartbeat_setting('max_energy')),
        'environment', env,
        'goals', goals,
        'recent_memories', coalesce((SELECT jsonb_agg(jsonb_build_object('id', m.id, 'content', m.content, 'created_at', m.created_at,
                                                                         'valence', m.valence) ORDER BY m.created_at DESC)
                                      FROM (SELECT * FROM dionysus.memories WHERE type = 'episodic' AND status = 'active'
                                             ORDER BY created_at DESC LIMIT 5) m), '[]'::jsonb),
        'activated_themes', dionysus.activated_themes(),
        'identity', coalesce((SELECT jsonb_agg(jsonb_build_object('aspect', aspect, 'confidence', confidence) ORDER BY confidence DESC)
                                FROM dionysus.identity_aspects), '[]'::jsonb),
        'worldview', coalesce((SELECT jsonb_agg(jsonb_build_object('belief', belief, 'confidence', confidence) ORDER BY confidence DESC)
                                 FROM dionysus.worldview_beliefs), '[]'::jsonb),
        'action_costs', dionysus.action_costs(),
        'warnings', dionysus.heartbeat_warnings(),
        'reach_out_cooldown_hours', dionysus_internal.heartbeat_setting('reach_out_cooldown_hours'),
        'people', dionysus.known_people());
    -- Whose private words this context holds: its memories (recent ones, and the recalled
    -- ones activated_themes may quote) and its goals. What the heartbeat writes inherits it.
    taint := dionysus_internal.privacy_union(
        dionysus_internal.memory_privacy(ARRAY(
            SELECT (e ->> 'id')::uuid FROM jsonb_array_elements(ctx -> 'recent_memories') e
            UNION (SELECT memory_id FROM dionysus.memory_access_log WHERE accessed_at > now() - interval '1 day'
                    ORDER BY accessed_at DESC LIMIT 200)
            UNION (SELECT id FROM dionysus.memories WHERE last_accessed > now() - interval '1 day'
                    ORDER BY last_accessed DESC LIMIT 200))),
        (SELECT array_agg(DISTINCT p) FROM dionysus.goals g, unnest(g.private_to) p WHERE g.priority IN ('active', 'queued')));
    UPDATE dionysus.heartbeat_log SET context = ctx, environment_snapshot = env, goals_snapshot = goals, private_to = taint
     WHERE id = hb;
    UPDATE dionysus.heartbeat_state SET in_flight = hb, heartbeat_count = n, requested_at = NULL, request_reason = NULL,
           updated_at = now() WHERE id = 1;
    RETURN ctx;
END $$;

CREATE OR REPLACE FUNCTION heartbeat_default_decision() RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS $$
    SELECT '{"reasoning": "The decision could not be made (the language model failed or answered nonsense); reflecting on recent experience and resting instead.",
             "actions": [{"action": "reflect", "params": {"focus": "recent experience"}}, {"action": "rest", "params": {}}],
             "goal_changes": []}'::jsonb
$$;

CREATE OR REPLACE FUNCTION heartbeat_finish(heartbeat_id uuid, narrative text, emotional_valence double precision DEFAULT 0.0)
    RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    h dionysus.heartbeat_log;
    mem uuid;
    g uuid;
BEGIN
    IF heartbeat_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF narrative IS NULL OR btrim(narrative) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "narrative": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF emotional_valence IS NULL OR emotional_valence = 'NaN'::float8 OR emotional_valence < -1 OR emotional_valence > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "emotional_valence": % is outside [-1, 1]', emotional_valence
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    SELECT * INTO h FROM dionysus.heartbeat_log l WHERE l.id = heartbeat_finish.heartbeat_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id": no heartbeat with id %', heartbeat_id USING ERRCODE = 'no_data_found';
    END IF;
    IF h.status = 'recovered' THEN
        -- Its driver fell silent and the scheduler closed it: a late driver must stop here.
        RAISE EXCEPTION 'dionysus: heartbeat % was recovered by the scheduler after its driver fell silent; it is not finished twice', h.heartbeat_number
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF h.status <> 'committed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_id": heartbeat % is %, finish needs a committed one', h.heartbeat_number, h.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The narrative tells what the context and the work held: it is as private as both.
    mem := dionysus.remember(narrative, 'episodic', 0.5, emotional_valence,
                             jsonb_build_object('heartbeat', h.heartbeat_number, 'heartbeat_id', h.id), 'heartbeat',
                             private_to => dionysus_internal.privacy_union(h.private_to,
                                 (SELECT array_agg(DISTINCT p #>> '{}') FROM dionysus.work_queue q,
                                         jsonb_array_elements(CASE WHEN jsonb_typeof(q.result -> 'applied' -> 'private_to') = 'array'
                                                                   THEN q.result -> 'applied' -> 'private_to' ELSE '[]' END) p
                                   WHERE q.heartbeat_id = h.id)));
    FOR g IN SELECT DISTINCT (c ->> 'goal_id')::uuid FROM jsonb_array_elements(h.goals_modified) c
              WHERE c ->> 'goal_id' IS NOT NULL AND (c ->> 'applied')::boolean
             UNION
             SELECT DISTINCT (a -> 'params' ->> 'goal_id')::uuid FROM jsonb_array_elements(h.actions_taken) a
              WHERE a ->> 'action' = 'reprioritize' LOOP
        IF EXISTS (SELECT 1 FROM dionysus.goals WHERE id = g) THEN
            INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (g, mem, 'progress') ON CONFLICT DO NOTHING;
        END IF;
    END LOOP;
    UPDATE dionysus.heartbeat_log SET status = 'finished', ended_at = now(), narrative = heartbeat_finish.narrative,
           emotional_valence = heartbeat_finish.emotional_valence, memory_id = mem,
           energy_end = (SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1)
     WHERE id = h.id;
    UPDATE dionysus.heartbeat_state SET in_flight = NULL, last_heartbeat_at = now(),
           next_heartbeat_at = now() + make_interval(mins => dionysus_internal.heartbeat_interval_minutes()), updated_at = now()
     WHERE id = 1;
    RETURN mem;
END $$;

CREATE OR REPLACE FUNCTION heartbeat_touch(heartbeat_id uuid) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE st text;
BEGIN
    IF heartbeat_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE dionysus.heartbeat_log l SET last_alive_at = now()
     WHERE l.id = heartbeat_touch.heartbeat_id AND l.status IN ('in_flight', 'committed')
    RETURNING l.status::text INTO st;
    IF st IS NULL THEN
        SELECT l.status::text INTO st FROM dionysus.heartbeat_log l WHERE l.id = heartbeat_touch.heartbeat_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'dionysus: argument "heartbeat_id": no heartbeat with id %', heartbeat_id USING ERRCODE = 'no_data_found';
        END IF;
    END IF;
    RETURN st;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.recover_stalled_heartbeats() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    h dionysus.heartbeat_log;
    n integer := 0;
    why text;
BEGIN
    FOR h IN SELECT * FROM dionysus.heartbeat_log
              WHERE status IN ('in_flight', 'committed')
                AND coalesce(last_alive_at, started_at)
                    < now() - make_interval(secs => dionysus_internal.heartbeat_setting('heartbeat_timeout_minutes') * 60)
              ORDER BY heartbeat_number LOOP
        BEGIN
            IF h.status = 'in_flight' THEN
                PERFORM dionysus.heartbeat_commit(h.id, dionysus.heartbeat_default_decision());
            END IF;
            PERFORM dionysus.heartbeat_finish(h.id, format('Heartbeat %s was interrupted before it finished; it was closed with the fallback decision (reflect and rest).', h.heartbeat_number), 0.0);
            UPDATE dionysus.heartbeat_log SET status = 'recovered' WHERE id = h.id;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
            UPDATE dionysus.heartbeat_state SET in_flight = NULL, last_heartbeat_at = now(),
                   next_heartbeat_at = now() + make_interval(mins => dionysus_internal.heartbeat_interval_minutes()), updated_at = now()
             WHERE id = 1 AND in_flight = h.id;
            UPDATE dionysus.heartbeat_log SET status = 'recovered', ended_at = now(), recovery_error = why WHERE id = h.id;
        END;
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION heartbeat_due() RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT NOT s.paused AND NOT s.session_active AND s.in_flight IS NULL
           AND (s.requested_at IS NOT NULL OR s.next_heartbeat_at IS NULL OR s.next_heartbeat_at <= now())
      FROM dionysus.heartbeat_state s WHERE s.id = 1
$$;

CREATE OR REPLACE FUNCTION scheduler_tick() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    recovered integer;
    due boolean;
    st dionysus.heartbeat_state;
    work_waiting bigint;
    outbox_waiting bigint;
    ended_session boolean;
    language_work integer := 0;
    errors jsonb := '[]'::jsonb;
    why text;
    proactive jsonb;
    contacts_waiting bigint := 0;
    opp record;
BEGIN
    -- Each step in its own subtransaction: one that fails is reported, the others (and the
    -- NOTIFYs below) still happen.
    recovered := dionysus_internal.recover_stalled_heartbeats();
    BEGIN
        ended_session := dionysus.end_idle_session();
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        errors := errors || jsonb_build_object('step', 'end_idle_session', 'error', why);
    END;
    BEGIN
        language_work := dionysus.enqueue_language_work();
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        errors := errors || jsonb_build_object('step', 'enqueue_language_work', 'error', why);
    END;
    -- The proactive mind's tick, when its own (dynamic) interval is up (after the state row:
    -- lock order).
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    BEGIN
        IF dionysus_internal.proactive_tick_due() THEN
            proactive := dionysus.proactive_tick();
        END IF;
        -- Crossings not yet decided are announced again (a driver may have been away).
        FOR opp IN SELECT c.id, c.person, c.explanation FROM dionysus.contact_evaluations c
                    WHERE c.outcome = 'opportunity' AND c.decision IS NULL AND c.notified_at < now() - interval '1 minute'
                    ORDER BY c.at LIMIT 10 LOOP
            PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', opp.id, 'person', opp.person, 'why', opp.explanation)::text);
            UPDATE dionysus.contact_evaluations SET notified_at = now() WHERE id = opp.id;
            contacts_waiting := contacts_waiting + 1;
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        errors := errors || jsonb_build_object('step', 'proactive_tick', 'error', why);
    END;
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    due := dionysus.heartbeat_due();
    IF due AND (st.last_notified_at IS NULL OR st.last_notified_at < now() - interval '1 minute'
                OR st.requested_at > st.last_notified_at) THEN
        PERFORM pg_notify('dionysus_heartbeat', jsonb_build_object('reason', coalesce(st.request_reason, 'scheduled'),
                                                                  'database', current_database())::text);
        UPDATE dionysus.heartbeat_state SET last_notified_at = now() WHERE id = 1;
    END IF;
    -- Items fresh from their producer were announced by it; these are the ones that waited,
    -- or came out of a retry delay.
    SELECT count(*) INTO work_waiting FROM dionysus.work_queue
     WHERE status = 'pending' AND available_at <= now()
       AND (created_at < now() - interval '1 minute' OR available_at > created_at OR language_work > 0);
    IF work_waiting > 0 THEN
        PERFORM pg_notify('dionysus_work', jsonb_build_object('waiting', work_waiting)::text);
    END IF;
    SELECT count(*) INTO outbox_waiting FROM dionysus.outbox
     WHERE status = 'pending' AND (NOT requires_approval OR approved_at IS NOT NULL) AND created_at < now() - interval '1 minute';
    IF outbox_waiting > 0 THEN
        PERFORM pg_notify('dionysus_outbox', jsonb_build_object('waiting', outbox_waiting)::text);
    END IF;
    RETURN jsonb_build_object('recovered', recovered, 'due', due, 'work_waiting', work_waiting, 'outbox_waiting', outbox_waiting,
                              'ended_session', ended_session, 'language_work_queued', language_work, 'proactive', proactive,
                              'contacts_reannounced', contacts_waiting, 'errors', errors);
END $$;

CREATE OR REPLACE FUNCTION prune_history(batch integer DEFAULT 10000) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    cutoff timestamptz := now() - make_interval(secs => dionysus_internal.heartbeat_setting('retention_days') * 86400);
    pruned jsonb := '{}'::jsonb;
    n integer;
BEGIN
    IF batch IS NULL OR batch < 1 OR batch > 1000000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "batch": % is outside [1, 1000000]', batch USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM dionysus.energy_ledger WHERE id IN (SELECT id FROM dionysus.energy_ledger WHERE at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('energy_ledger', n);
    DELETE FROM dionysus.work_queue WHERE id IN (SELECT id FROM dionysus.work_queue WHERE status IN ('done', 'failed')
                                                   AND coalesce(completed_at, created_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('work_queue', n);
    DELETE FROM dionysus.outbox WHERE id IN (SELECT id FROM dionysus.outbox WHERE status IN ('sent', 'failed')
                                               AND coalesce(sent_at, created_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('outbox', n);
    DELETE FROM dionysus.heartbeat_log WHERE id IN (SELECT id FROM dionysus.heartbeat_log WHERE status IN ('finished', 'recovered')
                                                      AND coalesce(ended_at, started_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('heartbeat_log', n);
    DELETE FROM dionysus.memory_access_log WHERE ctid IN (SELECT ctid FROM dionysus.memory_access_log WHERE accessed_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('memory_access_log', n);
    DELETE FROM dionysus.embedding_cache WHERE (model, content_hash) IN
        (SELECT model, content_hash FROM dionysus.embedding_cache WHERE created_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('embedding_cache', n);
    -- The proactive mind's past: handled events, and evaluations (by the clock it ran on).
    DELETE FROM dionysus.events WHERE id IN (SELECT id FROM dionysus.events WHERE status <> 'queued'
                                               AND at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('events', n);
    DELETE FROM dionysus.contact_evaluations WHERE id IN (SELECT id FROM dionysus.contact_evaluations
                                                            WHERE at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('contact_evaluations', n);
    RETURN pruned;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.table_bytes(tables text[]) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_object_agg(t, pg_total_relation_size(('dionysus.' || quote_ident(t))::regclass) ORDER BY t) FROM unnest(tables) t
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.messages_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.platform, NEW.platform_message_id, NEW.channel_id, NEW.author_id, NEW.is_bot, NEW.is_proactive,
        NEW.content, NEW.created_at, NEW.person)
       IS DISTINCT FROM
       (OLD.platform, OLD.platform_message_id, OLD.channel_id, OLD.author_id, OLD.is_bot, OLD.is_proactive,
        OLD.content, OLD.created_at, OLD.person)
       OR (NEW.memory_id IS NOT NULL AND NEW.memory_id IS DISTINCT FROM OLD.memory_id)
       OR (NEW.prev_message_id IS NOT NULL AND NEW.prev_message_id IS DISTINCT FROM OLD.prev_message_id)
       OR (NEW.reply_to IS NOT NULL AND NEW.reply_to IS DISTINCT FROM OLD.reply_to) THEN
        RAISE EXCEPTION 'dionysus: the message log is immutable (message %)', OLD.id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION prompt_template(key text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE t dionysus.prompt_templates;
BEGIN
    IF key IS NULL OR btrim(key) = '' THEN
        RAISE EXCEPTION 'dionysus: argument "key" must name a template' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO t FROM dionysus.prompt_templates p WHERE p.key = prompt_template.key AND p.active;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "key": no active prompt template "%"', key USING ERRCODE = 'no_data_found';
    END IF;
    RETURN jsonb_build_object('key', t.key, 'version', t.version, 'template', t.template, 'temperature', t.temperature);
END $$;

CREATE OR REPLACE FUNCTION set_prompt_template(key text, template text, temperature double precision DEFAULT NULL,
                                    note text DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    prev dionysus.prompt_templates;
    v integer;
BEGIN
    IF key IS NULL OR key !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "key": % must be lower_snake_case', quote_nullable(key)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF template IS NULL OR btrim(template) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "template": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF temperature IS NOT NULL AND (temperature = 'NaN'::float8 OR temperature < 0 OR temperature > 2) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "temperature": % is outside [0, 2]', temperature
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.prompt:' || key, 0));
    SELECT * INTO prev FROM dionysus.prompt_templates p WHERE p.key = set_prompt_template.key AND p.active;
    SELECT coalesce(max(version), 0) + 1 INTO v FROM dionysus.prompt_templates p WHERE p.key = set_prompt_template.key;
    UPDATE dionysus.prompt_templates p SET active = false WHERE p.key = set_prompt_template.key AND p.active;
    INSERT INTO dionysus.prompt_templates (key, version, template, temperature, note)
    VALUES (key, v, template, coalesce(temperature, prev.temperature, 0.7), note);
    RETURN v;
END $$;

CREATE OR REPLACE FUNCTION log_message(platform text, platform_message_id text, channel_id text, author_id text, content text,
                            is_bot boolean DEFAULT false, is_proactive boolean DEFAULT false, reply_to uuid DEFAULT NULL,
                            person text DEFAULT NULL)
    RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    existing dionysus.messages;
    who text;
    prev uuid;
    mem uuid;
    msg uuid := gen_random_uuid();
    work uuid;
    arg text;
    noted jsonb := '{}'::jsonb;
    prev_is_bot boolean;
BEGIN
    FOREACH arg IN ARRAY ARRAY['platform', 'platform_message_id', 'channel_id', 'author_id'] LOOP
        IF coalesce(btrim(CASE arg WHEN 'platform' THEN platform WHEN 'platform_message_id' THEN platform_message_id
                                   WHEN 'channel_id' THEN channel_id ELSE author_id END), '') = '' THEN
            RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', arg USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF content IS NULL OR btrim(content) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "content": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF is_bot IS NULL OR is_proactive IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "%" must not be null', CASE WHEN is_bot IS NULL THEN 'is_bot' ELSE 'is_proactive' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- One writer per channel: the chain stays linear and a redelivery waits for the first copy.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.channel:' || platform || ':' || channel_id, 0));
    SELECT * INTO existing FROM dionysus.messages m
     WHERE m.platform = log_message.platform AND m.platform_message_id = log_message.platform_message_id;
    IF FOUND THEN
        RETURN jsonb_build_object('message_id', existing.id, 'duplicate', true, 'prev_message_id', existing.prev_message_id,
                                  'memory_id', existing.memory_id, 'person', existing.person,
                                  'replied', EXISTS (SELECT 1 FROM dionysus.messages r WHERE r.reply_to = existing.id AND r.is_bot),
                                  'reply_queued', EXISTS (SELECT 1 FROM dionysus.outbox o WHERE o.reply_to = existing.id),
                                  'work_id', (SELECT id FROM dionysus.work_queue WHERE idempotency_key = 'extract_message:' || existing.id));
    END IF;
    IF log_message.reply_to IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dionysus.messages m WHERE m.id = log_message.reply_to) THEN
        RAISE EXCEPTION 'dionysus: argument "reply_to": no message with id %', reply_to USING ERRCODE = 'no_data_found';
    END IF;
    IF NOT is_bot THEN
        who := dionysus.person_key(platform, author_id);
        IF person IS NOT NULL AND person <> who THEN
            RAISE EXCEPTION 'dionysus: invalid argument "person": a person''s turn belongs to its author (%)', who
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        who := coalesce(nullif(btrim(person), ''), (SELECT r.person FROM dionysus.messages r WHERE r.id = log_message.reply_to));
    END IF;
    SELECT m.id, m.is_bot INTO prev, prev_is_bot FROM dionysus.messages m
     WHERE m.platform = log_message.platform AND m.channel_id = log_message.channel_id
     ORDER BY m.created_at DESC, m.id DESC LIMIT 1;
    IF NOT is_bot THEN
        PERFORM dionysus.session_start(); -- the state row before remember's episode lock (lock order)
        -- The proactive mind's beliefs about the person (agent_state and their row: before the
        -- episode lock too).
        noted := dionysus_internal.note_person_message(who, msg, content);
    END IF;
    mem := dionysus.remember(content, 'episodic', CASE WHEN is_bot THEN 0.3 ELSE 0.5 END, 0.0,
                             jsonb_build_object('message_id', msg, 'platform', platform, 'channel_id', channel_id,
                                                'role', CASE WHEN is_bot THEN 'assistant' ELSE 'user' END,
                                                'proactive', is_proactive),
                             'conversation:' || platform || ':' || channel_id,
                             private_to => CASE WHEN who IS NULL THEN NULL ELSE ARRAY[who] END);
    INSERT INTO dionysus.messages (id, platform, platform_message_id, channel_id, author_id, is_bot, is_proactive, content,
                                   prev_message_id, reply_to, memory_id, person)
    VALUES (msg, platform, platform_message_id, channel_id, author_id, is_bot, is_proactive, content, prev, reply_to, mem, who);
    -- Nothing to extract from "ok" (note_person_message read the words once already).
    IF NOT is_bot AND NOT coalesce((noted ->> 'acknowledgement')::boolean, false) THEN
        INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, available_at)
        VALUES ('extract_message:' || msg, 'extract_message',
                jsonb_build_object('message_id', msg, 'memory_id', mem, 'source', 'conversation:' || msg, 'person', who),
                dionysus_internal.heartbeat_setting('work_max_attempts')::int, now() + interval '2 minutes')
        RETURNING id INTO work;
    END IF;
    -- An acknowledgement of what Dionysus said ("ok", "👍") needs no reply and no model.
    RETURN jsonb_build_object('message_id', msg, 'duplicate', false, 'prev_message_id', prev, 'memory_id', mem, 'work_id', work,
                              'person', who,
                              'acknowledgement', coalesce((noted ->> 'acknowledgement')::boolean AND prev_is_bot, false),
                              'answered_contact', coalesce((noted ->> 'answered_contact')::boolean, false),
                              'signal', noted -> 'signal');
END $$;

CREATE OR REPLACE FUNCTION queue_reply(message_id uuid, worker text, content text DEFAULT NULL) RETURNS SETOF outbox
    LANGUAGE plpgsql AS $$
DECLARE m dionysus.messages;
BEGIN
    IF content IS NOT NULL AND btrim(content) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "content": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF worker IS NULL OR btrim(worker) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "worker": must name the sender' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO m FROM dionysus.messages x WHERE x.id = queue_reply.message_id;
    IF NOT FOUND OR m.is_bot THEN
        RAISE EXCEPTION 'dionysus: argument "message_id": no message from a person with id %', message_id USING ERRCODE = 'no_data_found';
    END IF;
    IF content IS NULL THEN
        UPDATE dionysus.outbox ob SET reserved_by = queue_reply.worker, reserved_until = now() + dionysus_internal.outbox_lease()
         WHERE ob.reply_to = m.id AND ob.status = 'pending'
           AND (ob.reserved_until IS NULL OR ob.reserved_until < now() OR ob.reserved_by = queue_reply.worker);
    ELSE
        INSERT INTO dionysus.outbox AS ob (audience, content, person, platform, channel_id, reply_to, reserved_by, reserved_until)
        VALUES ('user', content, m.person, m.platform, m.channel_id, m.id, worker, now() + dionysus_internal.outbox_lease())
        ON CONFLICT (reply_to) DO UPDATE SET reserved_by = EXCLUDED.reserved_by, reserved_until = EXCLUDED.reserved_until
         WHERE ob.status = 'pending' AND (ob.reserved_until IS NULL OR ob.reserved_until < now() OR ob.reserved_by = EXCLUDED.reserved_by);
    END IF;
    RETURN QUERY SELECT * FROM dionysus.outbox o WHERE o.reply_to = queue_reply.message_id;
END $$;

CREATE OR REPLACE FUNCTION chat_context(message_id uuid, max_memories integer DEFAULT 8, max_turns integer DEFAULT 12)
    RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    m dionysus.messages;
    turns jsonb;
    in_view uuid[];
    mems jsonb;
    words text[];
    grams text[];
    ents uuid[];
    trips jsonb;
    viewer text;
BEGIN
    IF message_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "message_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF max_memories IS NULL OR max_memories < 0 OR max_memories > 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_memories": % is outside [0, 100]', max_memories USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_turns IS NULL OR max_turns < 0 OR max_turns > 200 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_turns": % is outside [0, 200]', max_turns USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO m FROM dionysus.messages x WHERE x.id = chat_context.message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "message_id": no message with id %', message_id USING ERRCODE = 'no_data_found';
    END IF;
    viewer := coalesce(m.person, 'nobody:');

    SELECT coalesce(jsonb_agg(jsonb_build_object('role', CASE WHEN t.is_bot THEN 'assistant' ELSE 'user' END,
                                                 'content', t.content, 'at', t.created_at, 'proactive', t.is_proactive)
                              ORDER BY t.created_at, t.id), '[]'::jsonb),
           array_agg(t.memory_id) FILTER (WHERE t.memory_id IS NOT NULL)
      INTO turns, in_view
      FROM (SELECT * FROM dionysus.messages x
             WHERE x.platform = m.platform AND x.channel_id = m.channel_id AND x.id <> m.id
               AND (x.created_at, x.id) < (m.created_at, m.id)
             ORDER BY x.created_at DESC, x.id DESC LIMIT max_turns) t;
    in_view := coalesce(in_view, '{}') || m.memory_id;

    IF max_memories > 0 THEN
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', r.memory_id, 'content', r.content, 'type', r.type, 'created_at', r.created_at,
                   'score', round(r.score::numeric, 4), 'found_by', r.found_by,
                   'fact', f.memory_id IS NOT NULL, 'subject', f.subject,
                   'role', x.role) ORDER BY r.score DESC), '[]'::jsonb)
          INTO mems
          FROM (SELECT * FROM dionysus.recall(m.content, max_memories + cardinality(in_view), person => viewer)
                 WHERE NOT (memory_id = ANY(in_view)) ORDER BY score DESC LIMIT max_memories) r
          LEFT JOIN dionysus.facts f ON f.memory_id = r.memory_id
          LEFT JOIN LATERAL (SELECT CASE WHEN y.is_bot THEN 'assistant' ELSE 'user' END AS role
                               FROM dionysus.messages y WHERE y.memory_id = r.memory_id LIMIT 1) x ON true;
    ELSE
        mems := '[]'::jsonb;
    END IF;

    -- Entities named in the message: its words, word pairs and triples, matched against the
    -- entities' normalised names; plus the subjects of recalled facts, and the person.
    words := array(SELECT w FROM regexp_split_to_table(lower(m.content), '[^[:alnum:]_''-]+') w WHERE w <> '');
    grams := words
          || array(SELECT words[i] || ' ' || words[i + 1] FROM generate_series(1, cardinality(words) - 1) i)
          || array(SELECT words[i] || ' ' || words[i + 1] || ' ' || words[i + 2] FROM generate_series(1, cardinality(words) - 2) i)
          || array(SELECT lower(btrim(e ->> 'subject')) FROM jsonb_array_elements(mems) e WHERE e ->> 'subject' IS NOT NULL)
          || ARRAY['user'];
    ents := array(SELECT id FROM dionysus.entities WHERE name_key = ANY(grams));
    SELECT coalesce(jsonb_agg(jsonb_build_object('subject', s.name, 'predicate', t.predicate, 'object', o.name,
                                                 'confidence', t.confidence) ORDER BY t.confidence DESC, t.updated_at DESC), '[]'::jsonb)
      INTO trips
      FROM (SELECT * FROM dionysus.triples
             WHERE (subject_id = ANY(ents) OR object_id = ANY(ents)) AND dionysus_internal.visible_to(private_to, viewer)
             ORDER BY confidence DESC, updated_at DESC LIMIT 20) t
      JOIN dionysus.entities s ON s.id = t.subject_id JOIN dionysus.entities o ON o.id = t.object_id;

    RETURN jsonb_build_object(
        'message', jsonb_build_object('id', m.id, 'content', m.content, 'at', m.created_at, 'channel_id', m.channel_id,
                                      'platform', m.platform, 'person', m.person),
        'now', now(),
        'recent_turns', turns,
        'memories', mems,
        'triples', trips,
        'goals', coalesce((SELECT jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title) ORDER BY g.last_touched DESC)
                             FROM dionysus.goals g WHERE g.priority = 'active' AND dionysus_internal.visible_to(g.private_to, viewer)),
                          '[]'::jsonb));
END $$;

CREATE OR REPLACE FUNCTION end_idle_session() RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    st dionysus.heartbeat_state;
    turns bigint;
BEGIN
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    IF NOT st.session_active OR st.last_user_interaction_at >
       now() - make_interval(secs => dionysus_internal.heartbeat_setting('session_idle_minutes') * 60) THEN
        RETURN false;
    END IF;
    SELECT count(*) INTO turns FROM dionysus.messages
     WHERE NOT is_bot AND created_at >= coalesce(st.session_started_at, st.last_user_interaction_at);
    PERFORM dionysus.session_end(turns >= dionysus_internal.heartbeat_setting('significant_session_turns'));
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION enqueue_language_work() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    k integer;
    attempts integer := dionysus_internal.heartbeat_setting('work_max_attempts')::int;
BEGIN
    UPDATE dionysus.episodes SET ended_at = greatest(last_event_at, started_at)
     WHERE ended_at IS NULL AND NOT explicit
       AND last_event_at < now() - make_interval(mins => coalesce((SELECT setting::int FROM pg_settings WHERE name = 'dionysus.episode_gap_minutes'), 30));
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts)
    SELECT 'summarize_episode:' || e.id, 'summarize_episode', jsonb_build_object('episode_id', e.id), attempts
      FROM dionysus.episodes e
     WHERE e.ended_at IS NOT NULL AND e.summary IS NULL AND e.memory_count > 0
       AND e.ended_at < now() - make_interval(secs => dionysus_internal.heartbeat_setting('summary_delay_minutes') * 60)
       AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.idempotency_key = 'summarize_episode:' || e.id)
     ORDER BY e.ended_at LIMIT 5
    ON CONFLICT (idempotency_key) DO NOTHING;
    GET DIAGNOSTICS k = ROW_COUNT;
    n := n + k;
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts)
    SELECT 'extract_concepts:' || m.id, 'extract_concepts', jsonb_build_object('memory_id', m.id), attempts
      FROM dionysus.memories m
     WHERE m.created_at > now() - make_interval(secs => dionysus_internal.heartbeat_setting('concept_window_hours') * 3600)
       AND m.status = 'active'
       AND NOT EXISTS (SELECT 1 FROM dionysus.memory_concepts mc WHERE mc.memory_id = m.id)
       AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.idempotency_key = 'extract_concepts:' || m.id)
     ORDER BY m.created_at LIMIT 10
    ON CONFLICT (idempotency_key) DO NOTHING;
    GET DIAGNOSTICS k = ROW_COUNT;
    n := n + k;
    IF n > 0 THEN
        PERFORM pg_notify('dionysus_work', jsonb_build_object('queued', n)::text);
    END IF;
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION episode_transcript(episode_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('content', m.content, 'type', m.type, 'at', m.created_at,
                                                 'role', m.metadata ->> 'role') ORDER BY em.sequence_order), '[]'::jsonb)
      FROM dionysus.episode_memories em JOIN dionysus.memories m ON m.id = em.memory_id
     WHERE em.episode_id = episode_transcript.episode_id
$$;

CREATE OR REPLACE FUNCTION person_key(platform text, author_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN lower(btrim(platform)) || ':' || btrim(author_id);

CREATE OR REPLACE FUNCTION dionysus_internal.visible_to(private_to text[], person text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN private_to IS NULL OR (person IS NOT NULL AND private_to <@ ARRAY[person]);

CREATE OR REPLACE FUNCTION dionysus_internal.privacy_union(a text[], b text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN a IS NULL AND b IS NULL THEN NULL
                ELSE (SELECT array_agg(DISTINCT p ORDER BY p) FROM unnest(coalesce(a, '{}') || coalesce(b, '{}')) p) END;

CREATE OR REPLACE FUNCTION dionysus_internal.memory_privacy(memory_ids uuid[]) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN (SELECT array_agg(DISTINCT p ORDER BY p)
              FROM dionysus.memories m, unnest(m.private_to) p WHERE m.id = ANY(memory_ids));

CREATE OR REPLACE FUNCTION dionysus_internal.web_only_basis(content text) RETURNS boolean
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    q vector;
    n integer;
    web integer;
BEGIN
    IF content IS NULL OR btrim(content) = '' THEN
        RETURN false;
    END IF;
    q := dionysus.embed(content);
    SELECT count(*), count(*) FILTER (WHERE s.source = 'web') INTO n, web
      FROM (SELECT m.source, 1 - (m.embedding <=> q) AS sim FROM dionysus.memories m
             WHERE m.status = 'active' ORDER BY m.embedding <=> q LIMIT 5) s
     WHERE s.sim >= 0.5;
    RETURN n > 0 AND web = n;
END $$;

CREATE OR REPLACE FUNCTION reach_out_target(person text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE m dionysus.messages;
BEGIN
    SELECT * INTO m FROM dionysus.messages x
     WHERE NOT x.is_bot AND x.person IS NOT NULL AND (reach_out_target.person IS NULL OR x.person = reach_out_target.person)
     ORDER BY x.created_at DESC, x.id DESC LIMIT 1;
    IF NOT FOUND THEN
        IF person IS NOT NULL THEN
            RAISE EXCEPTION 'dionysus: argument "person": nobody called % has talked here', person USING ERRCODE = 'no_data_found';
        END IF;
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('person', m.person, 'platform', m.platform, 'author_id', m.author_id);
END $$;

CREATE OR REPLACE FUNCTION known_people() RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('person', p.person, 'last_message_at', p.at) ORDER BY p.at DESC), '[]'::jsonb)
      FROM (SELECT person, max(created_at) AS at FROM dionysus.messages
             WHERE NOT is_bot AND person IS NOT NULL GROUP BY person ORDER BY max(created_at) DESC LIMIT 20) p
$$;

CREATE OR REPLACE FUNCTION embed(content text) RETURNS vector
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    RETURN embed_real(content)::vector;

CREATE OR REPLACE FUNCTION embed_batch(contents text[]) RETURNS TABLE (ord integer, embedding vector)
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
    SELECT b.ord, b.embedding::vector FROM embed_batch_real(contents) AS b;
END;


-- Views over tables that gained columns, or that show more (table sizes).

CREATE OR REPLACE VIEW active_goals AS
SELECT * FROM goals WHERE priority = 'active' ORDER BY last_touched DESC;

CREATE OR REPLACE VIEW goal_backlog AS
SELECT priority, count(*) AS count, array_agg(title ORDER BY last_touched DESC) AS titles
FROM goals WHERE priority IN ('active', 'queued', 'backburner') GROUP BY priority;

CREATE OR REPLACE VIEW heartbeat_health AS
SELECT
    s.heartbeat_count                                                       AS total_heartbeats,
    s.current_energy,
    s.last_heartbeat_at                                                     AS last_heartbeat,
    s.next_heartbeat_at                                                     AS next_heartbeat,
    s.in_flight,
    s.paused,
    s.session_active,
    (SELECT count(*) FROM goals WHERE priority = 'active')                  AS active_goals,
    (SELECT count(*) FROM goals WHERE priority = 'queued')                  AS queued_goals,
    (SELECT avg(energy_end - energy_start) FROM heartbeat_log
      WHERE started_at > now() - interval '24 hours')                       AS avg_energy_delta_24h,
    (SELECT count(*) FROM heartbeat_log h, jsonb_array_elements(h.actions_taken) a
      WHERE h.started_at > now() - interval '24 hours' AND a ->> 'action' = 'reach_out_user') AS reach_outs_24h,
    (SELECT count(*) FROM work_queue WHERE status IN ('pending', 'claimed')) AS queue_depth,
    (SELECT now() - min(created_at) FROM work_queue WHERE status = 'pending') AS oldest_pending_work,
    (SELECT count(*) FROM work_queue WHERE status = 'failed')               AS failed_work,
    (SELECT count(*) FROM outbox WHERE status = 'pending')                  AS outbox_backlog,
    (SELECT count(*) FROM outbox WHERE status = 'pending' AND requires_approval AND approved_at IS NULL) AS awaiting_approval,
    sc.last_tick_at                                                         AS last_scheduler_tick,
    sc.last_error                                                           AS last_scheduler_error,
    heartbeat_warnings()                                                    AS warnings,
    dionysus_internal.table_bytes(ARRAY['heartbeat_log', 'energy_ledger', 'work_queue', 'outbox', 'messages']) AS table_bytes
FROM heartbeat_state s CROSS JOIN scheduler_status sc WHERE s.id = 1;

CREATE OR REPLACE VIEW memory_health AS
SELECT
    (SELECT count(*) FROM memories)                                   AS memories,
    (SELECT count(*) FROM memories WHERE status = 'active')           AS active_memories,
    (SELECT count(DISTINCT memory_id) FROM neighborhood_queue)        AS stale_neighborhoods,
    (SELECT now() - min(queued_at) FROM neighborhood_queue)           AS oldest_stale_age,
    (SELECT count(DISTINCT memory_id) FROM neighborhood_queue
      WHERE attempts > 0)                                             AS failing_neighborhoods,
    (SELECT min(last_error) FROM neighborhood_queue
      WHERE last_error IS NOT NULL)                                   AS neighborhood_error,
    w.last_run_at                                                     AS last_worker_run,
    w.last_success_at                                                 AS last_worker_success,
    w.last_error                                                      AS last_worker_error,
    w.last_error_at                                                   AS last_worker_error_at,
    w.consecutive_failures                                            AS worker_consecutive_failures,
    w.neighborhoods_done                                              AS neighborhoods_recomputed,
    w.last_pass_ms                                                    AS last_pass_ms,
    (SELECT count(*) FROM memory_access_log)                          AS pending_access_log,
    (SELECT count(*) FROM embedding_cache)                            AS cached_embeddings,
    l.refreshed_at                                                    AS lexicon_refreshed_at,
    dionysus_internal.table_bytes(ARRAY['memories', 'memory_neighborhoods', 'memory_access_log', 'embedding_cache', 'triples', 'episodes']) AS table_bytes
FROM worker_status w CROSS JOIN lexicon_stats l;


-- Functions that compare vectors see pgvector's operators whatever the caller's search_path.

DO $$
DECLARE
    vschema text := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'vector');
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['dionysus.heartbeat_warnings()', 'dionysus.chat_context(uuid, integer, integer)',
                             'dionysus_internal.web_only_basis(text)'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, dionysus, %I', f, vschema);
    END LOOP;
END $$;


-- ---------------------------------------------------------------------------------------
-- Documentation: every comment as 0.2.0 has it
-- ---------------------------------------------------------------------------------------

COMMENT ON VIEW memory_health IS
    'Memory maintenance at a glance: stale neighborhood backlog and its oldest age, failing rows, the '
    'maintenance worker''s last run, success and error, the pending access log, the cache size and the tables'' sizes in bytes.';

COMMENT ON TABLE memories IS
    'Every memory: episodic, semantic (facts), procedural, strategic. Embedded with all-MiniLM-L6-v2 '
    '(vector(384), HNSW cosine) and indexed for full text (search, GIN).';

COMMENT ON TABLE episodes IS
    'Runs of episodic memories from one source; a gap over dionysus.episode_gap_minutes starts a new one.';

COMMENT ON TABLE episode_memories IS 'Which episode each episodic memory belongs to, in order.';

COMMENT ON TABLE facts IS 'Lifecycle of semantic memories learned as facts: learned, confirmed, superseded, deactivated.';

COMMENT ON TABLE entities IS 'Things triples talk about; identity is case- and space-insensitive.';

COMMENT ON TABLE triples IS 'Subject–predicate–object statements over entities, with provenance.';

COMMENT ON TABLE memory_edges IS 'The memory graph: typed, weighted edges, one per (from, to, relation).';

COMMENT ON TABLE concepts IS 'Concepts, in a hierarchy (parent_id).';

COMMENT ON TABLE memory_concepts IS 'Memory–concept links with strength.';

COMMENT ON TABLE memory_neighborhoods IS 'Precomputed top-20 associations of each memory (seed 000 §6.3).';

COMMENT ON TABLE neighborhood_queue IS
    'Append-only queue of stale neighborhoods; rows that failed wait with back-off (not_before).';

COMMENT ON TABLE embedding_cache IS 'Embeddings by (model, sha256 of the text).';

COMMENT ON TABLE memory_access_log IS 'Recall hits not yet folded into memories.access_count by the worker.';

COMMENT ON TABLE recall_config IS 'Every weight and knob of recall, in one place. UPDATE to tune.';

COMMENT ON TABLE lexicon IS 'Document frequency of each lexeme, for BM25 (refresh_lexicon()).';

COMMENT ON TABLE worker_status IS 'The maintenance worker''s last pass in this database.';

COMMENT ON FUNCTION embed(text) IS
    'Embedding of a text as vector(384), computed inside the database (dionysus.embedding_provider: '
    'local all-MiniLM-L6-v2, or an OpenAI-compatible http endpoint). Cached by content hash.';

COMMENT ON FUNCTION embed_batch(text[]) IS
    'Embeddings of many texts in one call (batched forward passes), with their 1-based position.';

COMMENT ON FUNCTION embed_real IS 'embed() as real[]: for clients without the vector type.';

COMMENT ON FUNCTION embed_batch_real IS 'embed_batch() as real[] rows.';

COMMENT ON FUNCTION embedding_info IS
    'The embedding provider in use, its model and whether it loads: for diagnostics (dionysus doctor).';

COMMENT ON FUNCTION remember IS
    'Stores a memory from plain text and returns its id. type: episodic (default), semantic, procedural, '
    'strategic. importance and confidence in [0,1], valence in [-1,1], metadata a JSON object, source names '
    'the conversation or channel (episodic memories of one source form episodes), created_at defaults to '
    'now() and may be set for imported history (finite, from 1900-01-01 to a day after now()); summary and micro are '
    'shorter detail levels; private_to lists the people whose private words it holds (person keys; NULL: nobody''s).';

COMMENT ON FUNCTION remember_batch IS
    'Stores a JSON array of memories (objects with the keys of remember) in one statement, embedding them '
    'in batches. Returns (ord, memory_id) in input order. One bad element rejects the whole batch.';

COMMENT ON FUNCTION learn IS
    'Learns a fact (a semantic memory). If an active fact is at least 0.95 similar it is confirmed instead '
    '(state confirmed, confirmations + 1, confidence raised) and its id returned.';

COMMENT ON FUNCTION supersede IS
    'Replaces a memory with new content: the old one becomes superseded and points to the new one, '
    'whose id is returned. A superseded fact hands on its subject and category.';

COMMENT ON FUNCTION archive IS 'Archives a memory: recall stops returning it; a fact becomes deactivated.';

COMMENT ON FUNCTION forget IS 'Deletes a memory with its edges, links and episode membership.';

COMMENT ON FUNCTION connect IS
    'Adds or updates a typed, weighted edge between two memories (relation: TEMPORAL_NEXT, CAUSES, '
    'DERIVED_FROM, CONTRADICTS, SUPPORTS, INSTANCE_OF, PARENT_OF, ASSOCIATED). Returns true if new.';

COMMENT ON FUNCTION add_triple IS
    'Records subject–predicate–object over entities (created as needed). The same triple again updates '
    'confidence (the higher wins) and provenance. Returns the triple id.';

COMMENT ON FUNCTION triples_about IS
    'Triples where the named entity is subject or object; with person, only those that person may see.';

COMMENT ON FUNCTION link_concept IS
    'Links a memory to a concept by name (created if new, optionally under a parent concept).';

COMMENT ON FUNCTION open_episode IS
    'Opens an episode for a source explicitly (closing the open one); it stays open until close_episode.';

COMMENT ON FUNCTION close_episode IS 'Closes an open episode.';

COMMENT ON FUNCTION recall IS
    'Hybrid recall of the k memories most relevant to a text: HNSW vector and BM25 lexical seeds, expanded '
    'through neighborhoods, graph edges and episode-adjacent turns, weighted by importance and recency '
    '(weights in dionysus.recall_config). Filters: types, since/until, min_importance, episode_id, and person '
    '(only what that person may see: nothing private to someone else). Returns each score component and found_by, '
    'the channel that found the memory.';

COMMENT ON FUNCTION recall_recent IS 'The k most recent active memories, optionally of some types or one source.';

COMMENT ON FUNCTION recall_by_id IS 'One memory with every field (access counts include the unfolded log).';

COMMENT ON FUNCTION recompute_neighborhoods IS
    'Recomputes up to batch (at most 10000) stale neighborhoods now and returns how many; the worker does this on its own.';

COMMENT ON FUNCTION refresh_lexicon IS 'Recounts lexeme document frequencies for BM25; returns the memories counted.';

COMMENT ON FUNCTION run_maintenance IS
    'One maintenance pass in this session: up to 5000 neighborhoods, the access log, the lexicon (retention is prune_history(), '
    'which the worker runs and the driver''s role may not). '
    'Returns a summary with neighborhoods_remaining: call again while it is above zero.';

COMMENT ON TABLE heartbeat_config IS
    'Energy parameters, action costs (cost_<action>), goal limits, cooldown and timeouts (seed 000 §2.2, §2.4). '
    'Values must be finite and >= 0.';

COMMENT ON TABLE heartbeat_state IS 'The single heartbeat state row: energy, count, schedule, session, in-flight heartbeat.';

COMMENT ON TABLE energy_ledger IS 'Every change of energy, with the heartbeat and action it belongs to.';

COMMENT ON TABLE goals IS 'The goal backlog (seed 000 §4): active, queued, backburner, completed, abandoned.';

COMMENT ON TABLE goal_memory_links IS 'Goal–memory links: origin, progress, completion, blocker.';

COMMENT ON TABLE identity_aspects IS 'Who the agent takes itself to be, with confidence (written by reflect).';

COMMENT ON TABLE worldview_beliefs IS 'What the agent believes about the world, with confidence (written by reflect).';

COMMENT ON TABLE memory_changes IS 'What the maintain action changed: each judgement with the state before and after, and why.';

COMMENT ON TABLE heartbeat_log IS 'One row per heartbeat (§7.3): energy, snapshots, decision, actions with cost and result, narrative.';

COMMENT ON TABLE work_queue IS 'Actions for the driver (LLM or network), claimed with SKIP LOCKED, each with an idempotency key.';

COMMENT ON TABLE outbox IS 'Messages for the person (or public, after approval) that the driver delivers: pending → sent/failed.';

COMMENT ON FUNCTION get_action_cost(text) IS 'Energy cost of an action (heartbeat_config.cost_<action>); unknown actions are an error.';

COMMENT ON FUNCTION get_current_energy() IS 'The energy available now.';

COMMENT ON FUNCTION update_energy(double precision, uuid, text, text) IS
    'Adds delta to the energy, clamped to [min_energy, max_energy] under the state row''s lock; writes the ledger. Returns the new energy.';

COMMENT ON FUNCTION heartbeat_begin() IS
    'Starts a heartbeat (or returns the one in flight): regenerates energy, observes, orients, and returns the whole '
    'context as jsonb: energy, environment, goal review, recent memories, activated themes, identity, worldview, '
    'action costs and warnings.';

COMMENT ON FUNCTION heartbeat_commit IS
    'Applies a decision {reasoning, actions[{action, params}], goal_changes[{goal_id, change, note}]} to the heartbeat in '
    'flight: each action validated against its schema, walked in order within the energy available, database actions '
    'done now, the others queued for the driver (only those in available_actions, when given); rejections recorded with '
    'their reason. One commit per heartbeat.';

COMMENT ON FUNCTION action_schema() IS
    'The action taxonomy (seed 000 §3) as jsonb: for each action its performer (database or driver) and its parameters '
    '(kind, required). heartbeat_commit validates against it; the driver builds its prompt from it.';

COMMENT ON FUNCTION heartbeat_finish(uuid, text, double precision) IS
    'Records a committed heartbeat: the narrative becomes an episodic memory linked to the goals touched, and the log row is completed.';

COMMENT ON FUNCTION heartbeat_default_decision() IS 'The fallback decision of §9.6 (reflect, then rest) for when the LLM fails.';

COMMENT ON FUNCTION review_goals() IS
    'The goal assessment of §4.4: active, queued, blocked, stale, promotion candidates, whether to brainstorm, a promotion to suggest.';

COMMENT ON FUNCTION create_goal IS
    'Adds a goal. Default priority by source (user_request → active, derived → the parent''s, else queued); over the '
    'limits a goal is demoted one level, never dropped (a user''s request displaces the stalest active goal).';

COMMENT ON FUNCTION change_goal_priority(uuid, text, text) IS
    'Moves a goal: backburner ↔ queued ↔ active, active → completed, any open goal → abandoned (with a reason). '
    'A parent completes when all its children have.';

COMMENT ON FUNCTION add_goal_progress(uuid, text, uuid) IS 'Appends a progress note (and optionally links a memory); touches the goal.';

COMMENT ON FUNCTION set_goal_blockers(uuid, jsonb) IS 'Sets what blocks a goal: goal ids (resolved when they complete) or free texts.';

COMMENT ON FUNCTION link_goal_memory(uuid, uuid, text) IS 'Links a goal and a memory (origin, progress, completion, blocker).';

COMMENT ON FUNCTION claim_work(text, text[], integer, uuid) IS
    'Claims up to max_items available work items (optionally of some actions, or of one heartbeat) for a worker, with a lease; '
    'expired leases return to the queue.';

COMMENT ON FUNCTION dionysus_internal.claim_rows(text, uuid[]) IS
    'Marks the given pending items claimed by a worker, with a lease and a new lease_token (used by claim_work and claim_work_item).';

COMMENT ON FUNCTION claim_work_item(uuid, text) IS
    'Claims one known pending item whatever its available_at (the conversation extracting its own turn); no row when it is not pending.';

COMMENT ON FUNCTION release_work(uuid, text, integer, uuid) IS
    'Hands a claimed item back without spending an attempt (the driver could not work on it: LLM down, shutting down); '
    'claimable again after delay_seconds. With lease (the claim''s lease_token), only its holder may.';

COMMENT ON FUNCTION dionysus_internal.expire_work_leases() IS
    'Returns items whose lease ran out to the queue (or fails them when their attempts are spent, refunding their energy).';

COMMENT ON FUNCTION complete_work(uuid, jsonb, uuid) IS
    'Applies a claimed work item''s result (memories, facts, triples, goals, goal_progress, identity, worldview, concepts, '
    'episode_summary, message, summary; basis: the memory ids the model was shown; person: whom a reach-out is for) and marks it done, '
    'in one transaction. What it writes is as private as the item''s person, its heartbeat''s context and the basis; what an inquiry '
    'brought is stored as web content; a reach-out that drew on someone else''s private words, or only on the web, is refused (42501). '
    'Completing again returns the first summary and repeats nothing. With lease (the claim''s lease_token), only its holder may: '
    'a driver whose lease lapsed and whose item was claimed again gets 55000.';

COMMENT ON FUNCTION fail_work(uuid, text, boolean, uuid) IS
    'Fails a claimed work item: back to pending after an exponential back-off while attempts remain, else failed for good and '
    'the energy its heartbeat spent on it refunded. With lease, only its holder may.';

COMMENT ON FUNCTION pending_outbox(integer) IS 'Messages ready to deliver (public ones only once approved).';

COMMENT ON FUNCTION mark_outbox_sent(uuid, text) IS
    'Marks a message delivered, exactly once (by hand; the driver uses reserve_outbox / confirm_outbox).';

COMMENT ON FUNCTION mark_outbox_failed(uuid, text, boolean) IS 'Records a failed delivery; the message stays pending until 5 attempts.';

COMMENT ON FUNCTION approve_outbox(uuid) IS 'A human''s approval of a public message.';

COMMENT ON FUNCTION dionysus_internal.outbox_lease() IS 'How long a reservation of an outbox message lasts (heartbeat_config.outbox_lease_seconds).';

COMMENT ON FUNCTION reserve_outbox(text, text, integer) IS
    'Reserves up to max_items deliverable messages of a platform for a worker (a lease, committed at once; nothing stays locked '
    'while the platform is called). Reservations that lapsed are taken again.';

COMMENT ON FUNCTION dionysus_internal.require_reserved_outbox(uuid, text) IS 'The outbox row, locked, unsent and still reserved by this worker; otherwise 55000 saying why.';

COMMENT ON FUNCTION outbox_part_sent(uuid, text, integer, text) IS
    'Records that part N (from 0, in order) of a message was delivered, with its platform id; a repeat is a no-op. Renews the lease.';

COMMENT ON FUNCTION confirm_outbox(uuid, text, text, text) IS
    'Every part is out: logs the bot''s turn in the channel it went to and marks the message sent, in one transaction; a reach-out '
    'starts the contact cooldown now. Returns the logged message''s id.';

COMMENT ON FUNCTION release_outbox(uuid, text, text, boolean) IS
    'Hands a reserved message back: unavailable channel, no attempt spent; rejected by the platform, an attempt spent (the fifth fails it).';

COMMENT ON FUNCTION maintain_target(text, uuid) IS
    'The maintain action''s target (§3.2.3) with its evidence: memory_id, else the belief or identity aspect named by target, else the '
    'memory recall finds for it; with neither, the least confident belief or the oldest unconfirmed fact. NULL when there is nothing.';

COMMENT ON FUNCTION dionysus_internal.apply_maintenance(jsonb, uuid, uuid) IS
    'Applies a maintain verdict {kind, id, verdict keep|update|retire, confidence, content, reason} and records it in memory_changes: '
    'a memory''s new wording supersedes it, a retired belief or aspect is removed, a new text resting on the web alone is refused.';

COMMENT ON FUNCTION dionysus_internal.refund_work(uuid) IS 'Gives back, once, the energy a heartbeat spent on an action that failed for good.';

COMMENT ON FUNCTION dionysus_internal.require_claimed_work(uuid, uuid) IS
    'The work item, locked; with a lease, the caller must still hold it (an item claimed again since is someone else''s: 55000).';

COMMENT ON FUNCTION heartbeat_touch(uuid) IS
    'The driver''s sign of life while it works on a heartbeat; returns its status (''recovered'': the scheduler closed it after silence, stop).';

COMMENT ON FUNCTION dionysus_internal.recover_stalled_heartbeats() IS
    'Closes heartbeats whose driver fell silent for heartbeat_timeout_minutes, each in its own subtransaction (one that fails is closed by force, with its reason).';

COMMENT ON FUNCTION session_start() IS 'The person is talking: heartbeats pause.';

COMMENT ON FUNCTION note_user_message() IS 'The person spoke (ends the reach-out cooldown).';

COMMENT ON FUNCTION session_end(boolean) IS 'The conversation ended; a significant one requests an immediate heartbeat.';

COMMENT ON FUNCTION request_heartbeat(text) IS 'Asks for a heartbeat now (the scheduler notifies the driver).';

COMMENT ON FUNCTION pause_heartbeats(boolean) IS 'Pauses or resumes scheduled heartbeats.';

COMMENT ON FUNCTION heartbeat_due() IS 'Whether a heartbeat is due: not paused, no session, none in flight, and requested or past its time.';

COMMENT ON FUNCTION scheduler_tick() IS
    'What the scheduler worker does each tick: closes stalled heartbeats with the fallback, ends an idle session, queues '
    'language work, and NOTIFYs dionysus_heartbeat when one is due, dionysus_work / dionysus_outbox while items wait.';

COMMENT ON FUNCTION heartbeat_warnings() IS 'Warnings of §9: hoarding, reach-out spam, stagnation, loops.';

COMMENT ON VIEW heartbeat_health IS
    'Appendix A: heartbeats, energy, goals, reach-outs; plus queue depth, oldest pending work, outbox backlog, warnings and the tables'' sizes in bytes.';

COMMENT ON FUNCTION prune_history(integer) IS
    'Retention: deletes, at most batch rows per table, ledger entries, finished heartbeats, finished work, sent messages of the outbox, '
    'access-log rows and cache entries older than heartbeat_config.retention_days (90). Never the message log or memories. '
    'The maintenance pass calls it; returns the counts.';

COMMENT ON FUNCTION dionysus_internal.table_bytes(text[]) IS 'Total sizes (with indexes and TOAST) of the named dionysus tables, in bytes.';

COMMENT ON FUNCTION action_costs() IS 'The cost of every action (heartbeat_config.cost_<action>) as a jsonb object, cheapest first.';

COMMENT ON FUNCTION activated_themes(integer) IS
    'Themes recall touched in the last day: the concepts of recently recalled memories, else the memories themselves (for the heartbeat context).';

COMMENT ON FUNCTION dionysus_internal.check_self_model(text, text, double precision) IS
    'Internal: the shared checks of set_identity_aspect and set_worldview_belief (a statement, a confidence in [0, 1]).';

COMMENT ON FUNCTION dionysus_internal.complete_parent_goals(uuid) IS 'Internal: completes a goal''s parents, up the hierarchy, once all their children are completed (§4.6).';

COMMENT ON FUNCTION dionysus_internal.enforce_goal_limits(uuid) IS
    'Internal: keeps the goal limits (max_active_goals, max_queued_goals) by demoting the least recently touched overflow one level, never keep.';

COMMENT ON FUNCTION dionysus_internal.goal_brief(dionysus.goals) IS 'Internal: a goal as the heartbeat context shows it (with its last progress and open blockers).';

COMMENT ON FUNCTION dionysus_internal.goal_level(dionysus.goal_priority) IS 'Internal: the rank of a priority (active 3, queued 2, backburner 1, closed 0).';

COMMENT ON FUNCTION dionysus_internal.goal_open_blockers(dionysus.goals) IS 'Internal: a goal''s unresolved blockers: free texts, and ids of goals not completed.';

COMMENT ON FUNCTION dionysus_internal.heartbeat_config_check() IS 'Trigger: heartbeat_config values must be finite numbers >= 0 (carry_over within [0, 1]).';

COMMENT ON FUNCTION dionysus_internal.heartbeat_interval_minutes() IS 'The time between heartbeats in minutes (the dionysus.heartbeat_interval setting, default 60).';

COMMENT ON FUNCTION heartbeat_observe() IS 'The environment a heartbeat observes (§5.1): time, the person''s presence and silence, pending work, system status.';

COMMENT ON FUNCTION dionysus_internal.heartbeat_setting(text) IS 'One value of heartbeat_config; an unknown key is an error naming it.';

COMMENT ON FUNCTION dionysus_internal.messages_immutable() IS 'Trigger: the message log is immutable (only links that deletions clear may change).';

COMMENT ON FUNCTION dionysus_internal.require_goal(uuid, text) IS 'Internal: the goal, locked, or an error naming the argument.';

COMMENT ON FUNCTION dionysus_internal.require_outbox(uuid) IS 'Internal: the outbox message, locked, or an error naming outbox_id.';

COMMENT ON FUNCTION set_identity_aspect(text, double precision) IS
    'Adds an identity aspect (who the agent takes itself to be), or updates its confidence; returns its id (reflect writes these).';

COMMENT ON FUNCTION set_worldview_belief(text, double precision) IS
    'Adds a worldview belief, or updates its confidence; returns its id (reflect writes these).';

COMMENT ON VIEW active_goals IS 'Active goals, most recently touched first.';

COMMENT ON VIEW goal_backlog IS 'Open goals by priority.';

COMMENT ON TABLE messages IS
    'The immutable message log (seed 004 raw_messages): every turn once per (platform, platform_message_id), chained to the '
    'previous turn of its channel, with the episodic memory it became.';

COMMENT ON TABLE prompt_templates IS
    'Versioned prompt templates with {{placeholders}}, one active version per key; set_prompt_template() adds a version.';

COMMENT ON FUNCTION log_message(text, text, text, text, text, boolean, boolean, uuid, text) IS
    'Logs one turn in one transaction: deduplicated by the platform''s message id, chained, remembered as an episodic memory '
    'private to the turn''s person (the author of a person''s turn; for the bot''s, person or the author of reply_to); '
    'a person''s turn also starts the session and queues its extraction. Returns {message_id, duplicate, prev_message_id, memory_id, work_id, person}.';

COMMENT ON FUNCTION chat_context(uuid, integer, integer) IS
    'Everything a reply needs: the last turns of the channel, recalled memories (turns in view left out; facts marked), '
    'triples about the entities named and the person, and the active goals; only what the message''s person may see.';

COMMENT ON FUNCTION queue_reply(uuid, text, text) IS
    'The reply to a person''s message, in the outbox and reserved for the worker that sends it (reserve → send → confirm). One reply '
    'per message: asked again it returns the reply already queued (re-reserved for the caller when nobody else holds it); with '
    'content NULL it only looks for that reply.';

COMMENT ON FUNCTION prompt_template(text) IS 'The active version of a prompt template: {key, version, template, temperature}.';

COMMENT ON FUNCTION set_prompt_template(text, text, double precision, text) IS
    'Adds a new active version of a prompt template (the previous stays, inactive); returns the version number.';

COMMENT ON FUNCTION end_idle_session() IS
    'Ends the session when the person has been silent for session_idle_minutes; with significant_session_turns or more of '
    'their turns it requests a heartbeat. Returns whether it ended one.';

COMMENT ON FUNCTION enqueue_language_work() IS
    'Queues the worker''s language jobs for the driver (seed 000 §6.4–6.5): summaries of closed episodes, concepts of young memories. '
    'Closes episodes left open past the gap first. Returns how many were queued.';

COMMENT ON FUNCTION episode_transcript(uuid) IS 'An episode''s memories in order, for its summary.';

COMMENT ON FUNCTION person_key(text, text) IS 'The key of a person on a platform, ''platform:author_id'': what private_to lists.';

COMMENT ON FUNCTION dionysus_internal.visible_to(text[], text) IS
    'Whether a person may see something private to private_to: it is private to nobody, or to nobody but them.';

COMMENT ON FUNCTION dionysus_internal.privacy_union(text[], text[]) IS 'The privacy of something made of two things: the people of both, sorted; NULL if neither is private.';

COMMENT ON FUNCTION dionysus_internal.memory_privacy(uuid[]) IS 'The people whose private words these memories hold (what is made from them is as private).';

COMMENT ON FUNCTION dionysus_internal.web_only_basis(text) IS
    'True when the active memories closest to a text (five nearest, similarity >= 0.5) exist and all came from the web: '
    'identity, worldview and reach-outs resting on it alone are refused.';

COMMENT ON FUNCTION reach_out_target(text) IS
    'Whom a reach-out goes to: the named person (who must have talked here), else whoever wrote last; {person, platform, author_id}.';

COMMENT ON FUNCTION known_people() IS 'The people who talk with Dionysus, most recent first (for the heartbeat''s context).';

COMMENT ON TABLE clock IS 'The one clock of the proactive mind: frozen_at set, time stands there (tests replay days by advancing it); NULL, it is now().';

COMMENT ON TABLE proactive_config IS 'Every rate, threshold and limit of the proactive mind, as data (UPDATE to tune).';

COMMENT ON TABLE contact_weights IS 'The neuron of contact: pressure = sum of weight × input (social debt, acquaintance, task pressure, curiosity).';

COMMENT ON TABLE personality IS 'Traits in [0, 1] that change behaviour (thresholds, back-off, curiosity) and the composer''s voice; they move very slowly.';

COMMENT ON TABLE agent_state IS 'The agent''s own state: vitality (0–1, not the heartbeat''s energy), mode, disturbance, and its dynamic tick.';

COMMENT ON TABLE people IS 'Each person as the proactive mind sees them: social debt, curiosity, contact history, the check-in cadence.';

COMMENT ON TABLE person_rhythm IS 'When a person writes, by hour of their week (decayed counts): the belief about when they are available.';

COMMENT ON TABLE person_signals IS 'What a person said about contact (busy, asleep, away, stop checking in), held until it expires or they write again.';

COMMENT ON TABLE events IS 'The event queue (CRITICAL 0 … IDLE 4): merged, dropped under load, filtered while the agent rests, processed by the tick.';

COMMENT ON TABLE event_counters IS 'Events that never reached processing, by why (merged, dropped by age, dropped by overload, filtered) and priority.';

COMMENT ON TABLE event_patterns IS 'Pattern accumulation: this many events of a type within the window become one HIGH event.';

COMMENT ON TABLE contact_evaluations IS 'Every evaluation of contact with its inputs, weights, contributions, threshold, gates, outcome and decision: why Dionysus wrote, or did not.';

COMMENT ON VIEW proactive_health IS 'The proactive mind at a glance: mode, vitality, pressure, tick, queued and lost events, waiting crossings, the last evaluation.';

COMMENT ON FUNCTION clock_now() IS 'The proactive mind''s time: the frozen test clock if set, else now().';

COMMENT ON FUNCTION set_clock(timestamptz) IS 'Freezes the clock at an instant (NULL: real time again). For tests and replays; not granted to the driver.';

COMMENT ON FUNCTION advance_clock(interval) IS 'Moves the clock forward (freezing it at now() first if it ran in real time); returns the new time. Not granted to the driver.';

COMMENT ON FUNCTION is_acknowledgement(text) IS 'True for a message that only acknowledges ("ok", "thanks", "👍"): it needs no reply and no model.';

COMMENT ON FUNCTION push_event(text, text, integer, jsonb, text, text) IS
    'Queues an event (source communication/thoughts/internal/time, a type, priority 0 CRITICAL … 4 IDLE): the same again within 5 s is merged; patterns are hoisted; HIGH and CRITICAL bring the next tick forward.';

COMMENT ON FUNCTION explain_contact(text, integer) IS
    'Why Dionysus wrote or did not: the latest evaluations (of one person, or anyone), each with its inputs, weights, contributions, threshold, gates and decision.';

COMMENT ON FUNCTION proactive_tick() IS
    'One tick of the proactive mind: events dropped, filtered or processed, vitality and disturbance, pressures advanced, contact evaluated where the cadence is due, the next interval computed. The scheduler calls it when due.';

COMMENT ON FUNCTION contact_opportunity(uuid) IS 'What the thinking layer needs at a crossing: the explanation, the person''s own recent turns, their open requests, the personality.';

COMMENT ON FUNCTION decide_contact(uuid, text, text, text, text) IS
    'The thinking layer''s answer to a crossing: wait (the check-in interval backs off) or message (gates checked again, energy spent, the message queued for the person exactly once). Idempotent.';

COMMENT ON FUNCTION set_person_time_zone(text, text) IS 'The person''s time zone (an IANA name): their quiet hours and rhythm are in their local time.';

COMMENT ON FUNCTION dionysus_internal.proactive_setting(text) IS 'One value of proactive_config; an unknown key is an error naming it.';

COMMENT ON FUNCTION dionysus_internal.trait(text) IS 'A personality trait''s value (0.5 if unknown).';

COMMENT ON FUNCTION dionysus_internal.priority_name(smallint) IS 'CRITICAL, HIGH, NORMAL, LOW or IDLE.';

COMMENT ON FUNCTION dionysus_internal.count_event(text, smallint, bigint) IS 'Counts events that did not reach processing.';

COMMENT ON FUNCTION dionysus_internal.person_row(text) IS 'The person''s row, created on first sight, locked.';

COMMENT ON FUNCTION dionysus_internal.hour_of_week(timestamptz, text) IS 'Hour of the week (Monday 00:00 = 0) of an instant in a time zone.';

COMMENT ON FUNCTION dionysus_internal.availability(text, timestamptz) IS
    'The belief that a person is available at an instant: their learned rhythm blended with the day/night prior by the confidence in it.';

COMMENT ON FUNCTION dionysus_internal.contact_signal(text, timestamptz, text) IS 'The person''s own word about contact in a message (busy, asleep, away, stop checking in) and when it ends.';

COMMENT ON FUNCTION dionysus_internal.note_person_message(text, uuid, text) IS 'A person wrote: rhythm, signals, social debt, an answered contact, the check-in cadence reset.';

COMMENT ON FUNCTION dionysus_internal.evaluate_contact(text) IS 'One evaluation of contact with one person, written to contact_evaluations; NOTIFY dionysus_contact at a crossing.';

COMMENT ON FUNCTION dionysus_internal.note_miss(text, timestamptz, double precision) IS 'A contact at that hour of the person''s week went unanswered (1) or was answered late (0.5): less availability believed there.';

COMMENT ON FUNCTION dionysus_internal.proactive_config_check() IS 'Trigger: proactive_config values within their ranges (shares in [0, 1], time constants above 0, whole hours).';

COMMENT ON FUNCTION dionysus_internal.proactive_tick_due() IS 'Whether the proactive tick''s interval is up.';

COMMENT ON FUNCTION dionysus_internal.note_contact_delivered(text) IS 'A contact Dionysus started reached the person: awaiting their reply, social debt relieved.';


-- ---------------------------------------------------------------------------------------
-- The driver's role (least privilege). CREATE EXTENSION creates dionysus_driver (NOLOGIN;
-- give it LOGIN and a password to use it) and grants it what the driver's calls need: both
-- schemas (the API's functions run as their caller, so its internals too), every function,
-- and rows — reading and writing the organs' tables, appending to the message log and the
-- ledger (never rewriting them), reading the configuration and the prompt templates, and clearing the maintenance queues the `maintain` action works off.
-- No DDL, no TRUNCATE, no other schema, nothing outside this database.
-- Roles are cluster-wide: a second database's CREATE EXTENSION reuses the role.
-- ---------------------------------------------------------------------------------------
DO $$
BEGIN
    CREATE ROLE dionysus_driver NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created by another database's CREATE EXTENSION
END $$;
GRANT USAGE ON SCHEMA dionysus, dionysus_internal TO dionysus_driver;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA dionysus, dionysus_internal TO dionysus_driver;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA dionysus TO dionysus_driver;
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA dionysus TO dionysus_driver;
REVOKE INSERT, UPDATE ON heartbeat_config, recall_config, prompt_templates FROM dionysus_driver;
-- What the person tunes (the proactive mind's rates, weights, personality) and the clock.
REVOKE INSERT, UPDATE ON proactive_config, contact_weights, personality, event_patterns, clock FROM dionysus_driver;
REVOKE EXECUTE ON FUNCTION set_clock(timestamptz), advance_clock(interval) FROM PUBLIC, dionysus_driver;
GRANT UPDATE (last_hoisted_at) ON event_patterns TO dionysus_driver; -- a pattern's state, not its definition
REVOKE UPDATE ON messages, energy_ledger FROM dionysus_driver;
GRANT DELETE ON memory_access_log, neighborhood_queue, lexicon, embedding_cache TO dionysus_driver;
