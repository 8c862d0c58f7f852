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
-- SQL functions, new or changed (as in sql/003, 004 and 005)
-- ---------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION person_key(platform text, author_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN lower(btrim(platform)) || ':' || btrim(author_id);

CREATE OR REPLACE FUNCTION visible_to(private_to text[], person text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN private_to IS NULL OR (person IS NOT NULL AND private_to <@ ARRAY[person]);

CREATE OR REPLACE FUNCTION privacy_union(a text[], b text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN a IS NULL AND b IS NULL THEN NULL
                ELSE (SELECT array_agg(DISTINCT p ORDER BY p) FROM unnest(coalesce(a, '{}') || coalesce(b, '{}')) p) END;

CREATE OR REPLACE FUNCTION memory_privacy(memory_ids uuid[]) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN (SELECT array_agg(DISTINCT p ORDER BY p)
              FROM dionysus.memories m, unnest(m.private_to) p WHERE m.id = ANY(memory_ids));

CREATE OR REPLACE FUNCTION web_only_basis(content text) RETURNS boolean
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
    IF parent_goal_id IS NOT NULL THEN
        parent := dionysus.require_goal(parent_goal_id, 'parent_goal_id');
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
    -- Goal limits are counted under one lock so concurrent creators cannot both overflow.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    -- A newcomer that does not fit takes the overflow itself, one level down at a time;
    -- only a user's request displaces the stalest active goal instead.
    IF src <> 'user_request' THEN
        IF prio = 'active' AND (SELECT count(*) FROM dionysus.goals WHERE priority = 'active') >= dionysus.heartbeat_setting('max_active_goals') THEN
            prio := 'queued';
        END IF;
        IF prio = 'queued' AND (SELECT count(*) FROM dionysus.goals WHERE priority = 'queued') >= dionysus.heartbeat_setting('max_queued_goals') THEN
            prio := 'backburner';
        END IF;
    END IF;
    INSERT INTO dionysus.goals (title, description, priority, source, parent_goal_id, emotional_valence, blocked_by, private_to)
    VALUES (btrim(title), description, prio, src, parent_goal_id, emotional_valence, blocked_by,
            dionysus.privacy_union(private_to, NULL))
    RETURNING id INTO new_id;
    IF origin_memory_id IS NOT NULL THEN
        INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (new_id, origin_memory_id, 'origin');
    END IF;
    PERFORM dionysus.enforce_goal_limits(new_id);
    RETURN new_id;
END $$;

CREATE OR REPLACE FUNCTION complete_work(work_id uuid, result jsonb DEFAULT '{}') RETURNS jsonb
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
    w := dionysus.require_claimed_work(work_id);
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
                       'episode_summary', 'message', 'summary', 'basis', 'person') THEN
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
    privacy := dionysus.privacy_union(privacy, (SELECT h.private_to FROM dionysus.heartbeat_log h WHERE h.id = w.heartbeat_id));
    privacy := dionysus.privacy_union(privacy, dionysus.memory_privacy(
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
                                    confidence => CASE WHEN from_web THEN 0.5 ELSE 1.0 END,
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
    -- Who the agent is and what it believes never changes on the web's word alone.
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'identity', '[]')) LOOP
        IF from_web OR dionysus.web_only_basis(item ->> 'aspect') THEN
            refused := refused || jsonb_build_object('identity', item ->> 'aspect', 'reason', 'rests on web content alone');
            CONTINUE;
        END IF;
        PERFORM dionysus.set_identity_aspect(item ->> 'aspect', coalesce((item ->> 'confidence')::float8, 0.5));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'worldview', '[]')) LOOP
        IF from_web OR dionysus.web_only_basis(item ->> 'belief') THEN
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
        IF dionysus.web_only_basis(result ->> 'message') THEN
            RAISE EXCEPTION 'dionysus: reach-out refused: web content is its only basis' USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF w.action = 'reach_out_user' THEN
            -- Nobody has talked yet: the message goes to the home channel, and may hold nothing private.
            target := dionysus.reach_out_target(coalesce(result ->> 'person', w.params ->> 'person'));
            IF NOT dionysus.visible_to(privacy, target ->> 'person') THEN
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
    energy := least(st.current_energy * dionysus.heartbeat_setting('carry_over') + dionysus.heartbeat_setting('base_regeneration'),
                    dionysus.heartbeat_setting('max_energy'));
    -- The log row first: the ledger entry of the regeneration points at it.
    INSERT INTO dionysus.heartbeat_log (id, heartbeat_number, energy_start) VALUES (hb, n, energy);
    PERFORM dionysus.update_energy(energy - st.current_energy, hb, 'regenerate', 'heartbeat start');
    env := dionysus.heartbeat_observe();
    goals := dionysus.review_goals();
    ctx := jsonb_build_object(
        'heartbeat_id', hb,
        'heartbeat_number', n,
        'energy', jsonb_build_object('available', energy, 'max', dionysus.heartbeat_setting('max_energy')),
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
        'reach_out_cooldown_hours', dionysus.heartbeat_setting('reach_out_cooldown_hours'),
        'people', dionysus.known_people());
    -- Whose private words this context holds: its memories (recent ones, and the recalled
    -- ones activated_themes may quote) and its goals. What the heartbeat writes inherits it.
    taint := dionysus.privacy_union(
        dionysus.memory_privacy(ARRAY(
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
    IF h.status <> 'committed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_id": heartbeat % is %, finish needs a committed one', h.heartbeat_number, h.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The narrative tells what the context and the work held: it is as private as both.
    mem := dionysus.remember(narrative, 'episodic', 0.5, emotional_valence,
                             jsonb_build_object('heartbeat', h.heartbeat_number, 'heartbeat_id', h.id), 'heartbeat',
                             private_to => dionysus.privacy_union(h.private_to,
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
           next_heartbeat_at = now() + make_interval(mins => dionysus.heartbeat_interval_minutes()), updated_at = now()
     WHERE id = 1;
    RETURN mem;
END $$;

CREATE OR REPLACE FUNCTION messages_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
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
                                  'memory_id', existing.memory_id,
                                  'replied', EXISTS (SELECT 1 FROM dionysus.messages r WHERE r.reply_to = existing.id AND r.is_bot),
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
    SELECT m.id INTO prev FROM dionysus.messages m
     WHERE m.platform = log_message.platform AND m.channel_id = log_message.channel_id
     ORDER BY m.created_at DESC, m.id DESC LIMIT 1;
    mem := dionysus.remember(content, 'episodic', CASE WHEN is_bot THEN 0.3 ELSE 0.5 END, 0.0,
                             jsonb_build_object('message_id', msg, 'platform', platform, 'channel_id', channel_id,
                                                'role', CASE WHEN is_bot THEN 'assistant' ELSE 'user' END,
                                                'proactive', is_proactive),
                             'conversation:' || platform || ':' || channel_id,
                             private_to => CASE WHEN who IS NULL THEN NULL ELSE ARRAY[who] END);
    INSERT INTO dionysus.messages (id, platform, platform_message_id, channel_id, author_id, is_bot, is_proactive, content,
                                   prev_message_id, reply_to, memory_id, person)
    VALUES (msg, platform, platform_message_id, channel_id, author_id, is_bot, is_proactive, content, prev, reply_to, mem, who);
    IF NOT is_bot THEN
        PERFORM dionysus.session_start();
        INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, available_at)
        VALUES ('extract_message:' || msg, 'extract_message',
                jsonb_build_object('message_id', msg, 'memory_id', mem, 'source', 'conversation:' || msg, 'person', who),
                dionysus.heartbeat_setting('work_max_attempts')::int, now() + interval '2 minutes')
        RETURNING id INTO work;
    END IF;
    RETURN jsonb_build_object('message_id', msg, 'duplicate', false, 'prev_message_id', prev, 'memory_id', mem, 'work_id', work,
                              'person', who);
END $$;

CREATE OR REPLACE FUNCTION outbox_reply(content text, person text, platform text, channel_id text) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE id uuid;
BEGIN
    IF content IS NULL OR btrim(content) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "content": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(btrim(person), '') = '' OR coalesce(btrim(platform), '') = '' OR coalesce(btrim(channel_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": a waiting reply needs its person, platform and channel',
            CASE WHEN coalesce(btrim(person), '') = '' THEN 'person' WHEN coalesce(btrim(platform), '') = '' THEN 'platform' ELSE 'channel_id' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO dionysus.outbox (audience, content, person, platform, channel_id)
    VALUES ('user', content, person, platform, channel_id) RETURNING outbox.id INTO id;
    PERFORM pg_notify('dionysus_outbox', id::text);
    RETURN id;
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
             WHERE (subject_id = ANY(ents) OR object_id = ANY(ents)) AND dionysus.visible_to(private_to, viewer)
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
                             FROM dionysus.goals g WHERE g.priority = 'active' AND dionysus.visible_to(g.private_to, viewer)),
                          '[]'::jsonb));
END $$;


-- goals gained a column: the view over goals.* is made again to show it.
CREATE OR REPLACE VIEW active_goals AS
SELECT * FROM goals WHERE priority = 'active' ORDER BY last_touched DESC;

-- Functions that compare vectors see pgvector's operators whatever the caller's search_path.

DO $$
DECLARE
    vschema text := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'vector');
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['dionysus.heartbeat_warnings()', 'dionysus.chat_context(uuid, integer, integer)',
                             'dionysus.web_only_basis(text)'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, dionysus, %I', f, vschema);
    END LOOP;
END $$;


-- ---------------------------------------------------------------------------------------
-- Documentation of what is new or was made again
-- ---------------------------------------------------------------------------------------

COMMENT ON FUNCTION remember IS
    'Stores a memory from plain text and returns its id. type: episodic (default), semantic, procedural, '
    'strategic. importance and confidence in [0,1], valence in [-1,1], metadata a JSON object, source names '
    'the conversation or channel (episodic memories of one source form episodes), created_at defaults to '
    'now() and may be set for imported history (finite, from 1900-01-01 to a day after now()); summary and micro are '
    'shorter detail levels; private_to lists the people whose private words it holds (person keys; NULL: nobody''s).';

COMMENT ON FUNCTION learn IS
    'Learns a fact (a semantic memory). If an active fact is at least 0.95 similar it is confirmed instead '
    '(state confirmed, confirmations + 1, confidence raised) and its id returned.';

COMMENT ON FUNCTION add_triple IS
    'Records subject–predicate–object over entities (created as needed). The same triple again updates '
    'confidence (the higher wins) and provenance. Returns the triple id.';

COMMENT ON FUNCTION triples_about IS
    'Triples where the named entity is subject or object; with person, only those that person may see.';

COMMENT ON FUNCTION recall IS
    'Hybrid recall of the k memories most relevant to a text: HNSW vector and BM25 lexical seeds, expanded '
    'through neighborhoods, graph edges and episode-adjacent turns, weighted by importance and recency '
    '(weights in dionysus.recall_config). Filters: types, since/until, min_importance, episode_id, and person '
    '(only what that person may see: nothing private to someone else). Returns each score component and found_by, '
    'the channel that found the memory.';

COMMENT ON FUNCTION create_goal IS
    'Adds a goal. Default priority by source (user_request → active, derived → the parent''s, else queued); over the '
    'limits a goal is demoted one level, never dropped (a user''s request displaces the stalest active goal).';

COMMENT ON FUNCTION complete_work(uuid, jsonb) IS
    'Applies a claimed work item''s result (memories, facts, triples, goals, goal_progress, identity, worldview, concepts, '
    'episode_summary, message, summary; basis: the memory ids the model was shown; person: whom a reach-out is for) and marks it done, '
    'in one transaction. What it writes is as private as the item''s person, its heartbeat''s context and the basis; what an inquiry '
    'brought is stored as web content; a reach-out that drew on someone else''s private words, or only on the web, is refused (42501). '
    'Completing again returns the first summary and repeats nothing.';

COMMENT ON FUNCTION log_message(text, text, text, text, text, boolean, boolean, uuid, text) IS
    'Logs one turn in one transaction: deduplicated by the platform''s message id, chained, remembered as an episodic memory '
    'private to the turn''s person (the author of a person''s turn; for the bot''s, person or the author of reply_to); '
    'a person''s turn also starts the session and queues its extraction. Returns {message_id, duplicate, prev_message_id, memory_id, work_id, person}.';

COMMENT ON FUNCTION chat_context(uuid, integer, integer) IS
    'Everything a reply needs: the last turns of the channel, recalled memories (turns in view left out; facts marked), '
    'triples about the entities named and the person, and the active goals; only what the message''s person may see.';

COMMENT ON FUNCTION outbox_reply(text, text, text, text) IS
    'Queues a reply the channel could not deliver, for its person, platform and channel; it goes out there when the channel is back.';

COMMENT ON FUNCTION person_key(text, text) IS 'The key of a person on a platform, ''platform:author_id'': what private_to lists.';

COMMENT ON FUNCTION visible_to(text[], text) IS
    'Whether a person may see something private to private_to: it is private to nobody, or to nobody but them.';

COMMENT ON FUNCTION privacy_union(text[], text[]) IS 'The privacy of something made of two things: the people of both, sorted; NULL if neither is private.';

COMMENT ON FUNCTION memory_privacy(uuid[]) IS 'The people whose private words these memories hold (what is made from them is as private).';

COMMENT ON FUNCTION web_only_basis(text) IS
    'True when the active memories closest to a text (five nearest, similarity >= 0.5) exist and all came from the web: '
    'identity, worldview and reach-outs resting on it alone are refused.';

COMMENT ON FUNCTION reach_out_target(text) IS
    'Whom a reach-out goes to: the named person (who must have talked here), else whoever wrote last; {person, platform, author_id}.';

COMMENT ON FUNCTION known_people() IS 'The people who talk with Dionysus, most recent first (for the heartbeat''s context).';


-- ---------------------------------------------------------------------------------------
-- The driver's role (least privilege). CREATE EXTENSION creates dionysus_driver (NOLOGIN;
-- give it LOGIN and a password to use it) and grants it what the driver's calls need: the
-- schema, every function, and rows — reading and writing the organs' tables, appending to
-- the message log and the ledger (never rewriting them), reading the configuration and the
-- prompt templates, and clearing the maintenance queues the `maintain` action works off.
-- No DDL, no TRUNCATE, no other schema, nothing outside this database.
-- Roles are cluster-wide: a second database's CREATE EXTENSION reuses the role.
-- ---------------------------------------------------------------------------------------
DO $$
BEGIN
    CREATE ROLE dionysus_driver NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created by another database's CREATE EXTENSION
END $$;
GRANT USAGE ON SCHEMA dionysus TO dionysus_driver;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA dionysus TO dionysus_driver;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA dionysus TO dionysus_driver;
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA dionysus TO dionysus_driver;
REVOKE INSERT, UPDATE ON heartbeat_config, recall_config, prompt_templates FROM dionysus_driver;
REVOKE UPDATE ON messages, energy_ledger FROM dionysus_driver;
GRANT DELETE ON memory_access_log, neighborhood_queue, lexicon, embedding_cache TO dionysus_driver;
