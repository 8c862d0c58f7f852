-- Censors: things not to do (issue #13 §1).
--
-- A censor watches what Dionysus is about to do and says warn (do it, noted), block (do not)
-- or absolute (do not; only the person's word lifts it). It matches by meaning (its trigger
-- embedded, at least censor_config.similarity near the words or one of their sentences), by an exact pattern (a case-insensitive
-- regular expression), or by scope alone (any_content: "never message me before 9" holds
-- whatever the message says). Its scope narrows it: whose it is (person; NULL: everyone's),
-- what it watches (kinds: 'reply' a chat reply, 'reach_out' a message Dionysus starts, or a
-- heartbeat action's name; NULL: everything) and when (from_hour to to_hour of the person's
-- local day, wrapping past midnight when from_hour > to_hour).
--
-- Checked on: every heartbeat action in heartbeat_commit (its name and words), a reach-out's
-- words before they enter the outbox (complete_work of a heartbeat's reach-out, decide_contact
-- of the proactive mind), and the chat reply before it is sent (the driver: a blocked reply is
-- written again once with the censors' reasons, then falls back to the censored_reply line).
--
-- Lifecycle (each step in censor_events with what it saw): every activation counts;
-- escalation_threshold (3) activations since its last change, with no false positive marked in
-- between, raise a warn to a block (never further: absolute is only ever the person's or the
-- owner's word); a false positive the person marks lowers it a step (block → warn) and retires
-- a warn. An absolute censor is the person's line: marks are counted, never lower it; only
-- retire_censor does.
--
-- Who: the person adds theirs in words (a censor cue, then the fast model: add_own_censor) and
-- marks or retires only their own; the owner adds and tunes everyone's (add_censor, UPDATE).
-- The driver's role reads censors and calls the gate; it writes them only through the
-- functions that check whose they are (SECURITY DEFINER, pinned search path).
-- Lock order: censors' rows (8, any other row), by id, after whatever the caller holds.

CREATE TYPE censor_severity AS ENUM ('warn', 'block', 'absolute');

CREATE TABLE censor_config (
    id          integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    -- How near (cosine similarity) words must be to a censor's trigger to match it.
    similarity  double precision NOT NULL DEFAULT 0.45 CHECK (similarity > 0 AND similarity <= 1),
    -- At most this many active censors a person may have (their words add them).
    max_per_person integer NOT NULL DEFAULT 100 CHECK (max_per_person BETWEEN 1 AND 10000)
);
COMMENT ON TABLE censor_config IS 'How near words must be to a censor''s trigger to match it (similarity), and how many active censors a person may have. UPDATE to tune.';
INSERT INTO censor_config DEFAULT VALUES;

CREATE TABLE censors (
    id                       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    person                   text CHECK (person IS NULL OR length(btrim(person)) > 0),
    trigger                  text NOT NULL CHECK (length(btrim(trigger)) BETWEEN 1 AND 500),
    -- Of any width, with the model that made it: after a re-index to another model the trigger
    -- is embedded again (check_censors on the fly, censor_record for good).
    embedding                vector NOT NULL,
    model_key                text NOT NULL,
    pattern                  text CHECK (pattern IS NULL OR length(pattern) BETWEEN 1 AND 200),
    kinds                    text[] CHECK (kinds IS NULL OR cardinality(kinds) BETWEEN 1 AND 20),
    -- Local hours it holds in, [from_hour, to_hour); from_hour > to_hour wraps past midnight.
    from_hour                smallint CHECK (from_hour BETWEEN 0 AND 23),
    to_hour                  smallint CHECK (to_hour BETWEEN 0 AND 24),
    any_content              boolean NOT NULL DEFAULT false,
    reason                   text NOT NULL CHECK (length(btrim(reason)) BETWEEN 1 AND 500),
    severity                 censor_severity NOT NULL DEFAULT 'warn',
    -- 'person': their own words; 'owner': set up by whoever runs Dionysus; 'episode' (024) and
    -- 'heartbeat' (028): proposed from what went wrong, waiting for the person's word.
    origin                   text NOT NULL CHECK (origin IN ('person', 'owner', 'episode', 'heartbeat')),
    learned_from_kind        text CHECK (learned_from_kind IN ('message', 'episode', 'heartbeat')),
    learned_from_id          uuid,
    activation_count         integer NOT NULL DEFAULT 0,
    activations_since_change integer NOT NULL DEFAULT 0,
    false_positive_count     integer NOT NULL DEFAULT 0,
    escalation_threshold     integer NOT NULL DEFAULT 3 CHECK (escalation_threshold BETWEEN 1 AND 1000),
    last_activated           timestamptz,
    -- 'proposed': learned (024, 028), matching nothing until the person keeps it.
    status                   text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired', 'proposed')),
    created_at               timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    updated_at               timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    CHECK ((from_hour IS NULL AND to_hour IS NULL) OR (from_hour IS NOT NULL AND to_hour IS NOT NULL AND from_hour <> to_hour)),
    CHECK (NOT any_content OR kinds IS NOT NULL OR from_hour IS NOT NULL)
);
COMMENT ON TABLE censors IS
    'Things not to do: a trigger (embedded, with the model that made it) and optional pattern, a scope (person, kinds, local hours from_hour to to_hour, any_content), a reason, a severity (warn, block, absolute), where it was learned, its activations and false positives, and its escalation threshold.';
CREATE INDEX censors_active ON censors (person) WHERE status = 'active';
-- The same words are one censor per person.
CREATE UNIQUE INDEX censors_once ON censors (coalesce(person, ''), lower(btrim(trigger))) WHERE status = 'active';

CREATE TABLE censor_events (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    censor_id uuid NOT NULL REFERENCES censors (id) ON DELETE CASCADE,
    at        timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    event     text NOT NULL
        CHECK (event IN ('added', 'activated', 'escalated', 'de_escalated', 'false_positive', 'retired', 'proposed', 'accepted')),
    severity  censor_severity NOT NULL,
    context   jsonb NOT NULL DEFAULT '{}'::jsonb
);
COMMENT ON TABLE censor_events IS 'Every censor''s life: added, activated (with what was being done), escalated, de_escalated, false_positive, retired.';
CREATE INDEX censor_events_censor ON censor_events (censor_id, id);

-- "never …", "don't ever …", "stop …ing": words that may ask for a censor (the fast model decides).
INSERT INTO cue_phrases (kind, pattern, note) VALUES
    ('censor_maybe', '\mnever (message|text|write|call|contact|ping|mention|bring up|talk about|ask|say|tell|remind|send)\M', '"never message me before 9"'),
    ('censor_maybe', '\m(do not|don''t|dont) (ever )?(message|text|write to|call|contact|ping|mention|bring up|talk about|ask me|say|tell|remind me|send)\M', NULL),
    ('censor_maybe', '\mstop (messaging|texting|writing|mentioning|bringing up|talking about|asking|reminding|sending|calling)\M', NULL),
    ('censor_maybe', '\m(please )?(no|without) (messages|texts|emojis|reminders) (before|after|at|on|during)\M', NULL);

-- Whether the words may ask for a censor (then the fast model reads them).
CREATE FUNCTION censor_cue(words text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT words IS NOT NULL AND EXISTS (SELECT 1 FROM dionysus.cue_phrases c WHERE c.kind = 'censor_maybe' AND words ~* c.pattern)
$$;
COMMENT ON FUNCTION censor_cue(text) IS 'Whether words may ask for a censor ("never message me before 9"): cue_phrases of kind censor_maybe; the fast model then decides.';

-- The model the store's vectors are made with now (020's embedding_store).
CREATE FUNCTION dionysus_internal.store_model_key() RETURNS text
    LANGUAGE sql STABLE AS $$ SELECT coalesce((SELECT s.model_key FROM dionysus.embedding_store s WHERE s.id = 1), '') $$;
COMMENT ON FUNCTION dionysus_internal.store_model_key() IS 'The model the store''s vectors are made with now (embedding_store.model_key).';

-- Validates a censor's words and scope; its embedding is the trigger's.
CREATE FUNCTION dionysus_internal.censor_checked(trigger text, reason text, severity text, pattern text, kinds text[],
                                                 from_hour integer, to_hour integer, any_content boolean) RETURNS dionysus.censor_severity
    LANGUAGE plpgsql AS $$
BEGIN
    IF trigger IS NULL OR length(btrim(trigger)) NOT BETWEEN 1 AND 500 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "trigger": 1 to 500 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF reason IS NULL OR length(btrim(reason)) NOT BETWEEN 1 AND 500 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "reason": 1 to 500 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF severity IS NULL OR severity NOT IN ('warn', 'block', 'absolute') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "severity": % (warn, block or absolute)', dionysus_internal.input_prefix(severity)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pattern IS NOT NULL THEN
        IF length(pattern) NOT BETWEEN 1 AND 200 THEN
            RAISE EXCEPTION 'dionysus: invalid argument "pattern": 1 to 200 characters' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        BEGIN
            PERFORM '' ~* pattern;
        EXCEPTION WHEN invalid_regular_expression THEN
            RAISE EXCEPTION 'dionysus: invalid argument "pattern": % is not a valid regular expression', dionysus_internal.input_prefix(pattern)
                USING ERRCODE = 'invalid_parameter_value';
        END;
    END IF;
    IF kinds IS NOT NULL AND (cardinality(kinds) NOT BETWEEN 1 AND 20
                              OR EXISTS (SELECT 1 FROM unnest(kinds) k WHERE k IS NULL OR k !~ '^[a-z][a-z_]{0,39}$')) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "kinds": 1 to 20 names such as reply, reach_out or a heartbeat action''s'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (from_hour IS NULL) <> (to_hour IS NULL) OR from_hour NOT BETWEEN 0 AND 23 OR to_hour NOT BETWEEN 0 AND 24
       OR from_hour = to_hour OR (from_hour = 0 AND to_hour = 24) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "from_hour": from_hour (0–23) and to_hour (0–24), both or neither, not the whole day; from_hour > to_hour wraps past midnight'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(any_content, false) AND kinds IS NULL AND from_hour IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "any_content": a censor of every word needs kinds or hours to narrow it'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN severity::dionysus.censor_severity;
END $$;
COMMENT ON FUNCTION dionysus_internal.censor_checked(text, text, text, text, text[], integer, integer, boolean) IS 'Validates a censor''s words and scope (22023 naming the argument); returns its severity.';

-- Adds a censor (the owner: anyone's, or everyone's with person NULL). The same words for the
-- same person again return the censor there is.
CREATE FUNCTION add_censor(trigger text, reason text, severity text DEFAULT 'warn', person text DEFAULT NULL,
                           pattern text DEFAULT NULL, kinds text[] DEFAULT NULL, from_hour integer DEFAULT NULL, to_hour integer DEFAULT NULL,
                           any_content boolean DEFAULT false, learned_from_kind text DEFAULT NULL, learned_from_id uuid DEFAULT NULL)
    RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    sev dionysus.censor_severity := dionysus_internal.censor_checked(trigger, reason, severity, pattern, kinds, from_hour, to_hour, any_content);
    id uuid;
BEGIN
    IF person IS NOT NULL AND length(btrim(person)) = 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF learned_from_kind IS NOT NULL AND learned_from_kind NOT IN ('message', 'episode', 'heartbeat') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "learned_from_kind": % (message, episode or heartbeat)', dionysus_internal.input_prefix(learned_from_kind)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT c.id INTO id FROM dionysus.censors c
     WHERE coalesce(c.person, '') = coalesce(add_censor.person, '') AND lower(btrim(c.trigger)) = lower(btrim(add_censor.trigger))
       AND c.status = 'active';
    IF FOUND THEN
        RETURN id;
    END IF;
    IF person IS NOT NULL AND (SELECT count(*) FROM dionysus.censors c WHERE c.person = add_censor.person AND c.status = 'active')
                              >= (SELECT max_per_person FROM dionysus.censor_config WHERE censor_config.id = 1) THEN
        RAISE EXCEPTION 'dionysus: % has % active censors, the most censor_config.max_per_person allows', person,
            (SELECT max_per_person FROM dionysus.censor_config WHERE censor_config.id = 1) USING ERRCODE = 'program_limit_exceeded';
    END IF;
    INSERT INTO dionysus.censors (person, trigger, embedding, model_key, pattern, kinds, from_hour, to_hour, any_content, reason, severity,
                                  origin, learned_from_kind, learned_from_id)
    VALUES (person, btrim(trigger), dionysus.embed(btrim(trigger)), dionysus_internal.store_model_key(), pattern, kinds, from_hour, to_hour,
            coalesce(any_content, false), btrim(reason), sev,
            CASE WHEN person IS NULL THEN 'owner' ELSE 'person' END, learned_from_kind, learned_from_id)
    RETURNING censors.id INTO id;
    INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
    VALUES (id, 'added', sev, jsonb_build_object('origin', CASE WHEN person IS NULL THEN 'owner' ELSE 'person' END,
                                                 'learned_from', learned_from_kind, 'learned_from_id', learned_from_id));
    RETURN id;
END $$;
COMMENT ON FUNCTION add_censor(text, text, text, text, text, text[], integer, integer, boolean, text, uuid) IS
    'Owner only: adds a censor for a person, or for everyone (person NULL); the same words for the same person return the censor there is. kinds: reply, reach_out or heartbeat action names; from_hour/to_hour: the local hours it holds in, [from, to), wrapping past midnight when from > to; any_content: it holds whatever is said.';

-- A person's own censor, in their words (the driver, after the fast model read them): only
-- for that person, learned from their message.
CREATE FUNCTION add_own_censor(person text, trigger text, reason text, severity text DEFAULT 'block', pattern text DEFAULT NULL,
                               kinds text[] DEFAULT NULL, from_hour integer DEFAULT NULL, to_hour integer DEFAULT NULL,
                               any_content boolean DEFAULT false, message_id uuid DEFAULT NULL)
    RETURNS uuid LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF person IS NULL OR length(btrim(person)) = 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF message_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dionysus.messages m WHERE m.id = message_id AND m.person = add_own_censor.person
                                                                                 AND NOT m.is_bot) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "message_id": % is not a message % wrote', message_id, person
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN dionysus.add_censor(trigger, reason, severity, person, pattern, kinds, from_hour, to_hour, any_content,
                               CASE WHEN message_id IS NOT NULL THEN 'message' END, message_id);
END $$;
COMMENT ON FUNCTION add_own_censor(text, text, text, text, text, text[], integer, integer, boolean, uuid) IS
    'A person''s own censor in their words (the driver, after the fast model read them), learned from their message (which must be theirs, 42501).';
REVOKE EXECUTE ON FUNCTION add_own_censor(text, text, text, text, text, text[], integer, integer, boolean, uuid) FROM PUBLIC;

-- The censors that hold for these words, what they would do, and how they matched; reads
-- only. kind NULL: every censor whatever it watches; at NULL: the clock's now.
CREATE FUNCTION check_censors(content text, kind text DEFAULT NULL, person text DEFAULT NULL, at timestamptz DEFAULT NULL)
    RETURNS TABLE (censor_id uuid, severity text, action text, reason text, matched_by text, similarity double precision,
                   personal boolean)
    LANGUAGE plpgsql AS $$
DECLARE
    parts text[];
    local_hour integer;
    near double precision := (SELECT c.similarity FROM dionysus.censor_config c WHERE c.id = 1);
BEGIN
    IF content IS NULL OR btrim(content) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "content": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM dionysus.censors c WHERE c.status = 'active'
                      AND (c.person IS NULL OR c.person = check_censors.person)) THEN
        RETURN; -- nothing to hold: no embedding spent
    END IF;
    local_hour := extract(hour FROM coalesce(at, dionysus.clock_now())
                         AT TIME ZONE coalesce((SELECT p.time_zone FROM dionysus.people p WHERE p.person = check_censors.person), 'UTC'));
    -- Meaning is compared sentence by sentence (and whole): one sentence of a long reply that
    -- does what a censor forbids is not diluted by the rest. Only when a censor needs it.
    IF EXISTS (SELECT 1 FROM dionysus.censors c WHERE c.status = 'active' AND NOT c.any_content
                  AND (c.person IS NULL OR c.person = check_censors.person)) THEN
        parts := ARRAY(SELECT DISTINCT x FROM (
                          SELECT left(btrim(check_censors.content), 2000) AS x
                          UNION ALL
                          (SELECT btrim(s) FROM regexp_split_to_table(left(check_censors.content, 8000), '[.!?;\n]+\s*') s
                            WHERE length(btrim(s)) >= 3 LIMIT 20)) y);
    END IF;
    RETURN QUERY
    WITH said AS (SELECT b.embedding FROM dionysus.embed_batch(parts) b WHERE parts IS NOT NULL),
         model AS (SELECT dionysus_internal.store_model_key() AS key)
    SELECT c.id, c.severity::text, CASE WHEN c.severity = 'warn' THEN 'warn' ELSE 'block' END, c.reason,
           CASE WHEN c.any_content THEN 'scope'
                WHEN c.pattern IS NOT NULL AND check_censors.content ~* c.pattern THEN 'pattern'
                ELSE 'similarity' END,
           s.best, c.person IS NOT NULL
      FROM dionysus.censors c
     CROSS JOIN model
     -- a trigger embedded by another model (before a re-index) is embedded again here
     CROSS JOIN LATERAL (SELECT CASE WHEN c.any_content OR parts IS NULL THEN NULL
                                     WHEN c.model_key = model.key THEN c.embedding ELSE dionysus.embed(c.trigger) END AS e) t
     CROSS JOIN LATERAL (SELECT max(1 - (t.e <=> said.embedding))::double precision AS best FROM said WHERE t.e IS NOT NULL) s
     WHERE c.status = 'active'
       AND (c.person IS NULL OR c.person = check_censors.person)
       AND (c.kinds IS NULL OR check_censors.kind IS NULL OR check_censors.kind = ANY (c.kinds))
       AND (c.from_hour IS NULL
            OR (c.from_hour < c.to_hour AND local_hour >= c.from_hour AND local_hour < c.to_hour)
            OR (c.from_hour > c.to_hour AND (local_hour >= c.from_hour OR local_hour < c.to_hour)))
       AND (c.any_content
            OR (c.pattern IS NOT NULL AND check_censors.content ~* c.pattern)
            OR s.best >= near)
     ORDER BY c.severity DESC, s.best DESC NULLS FIRST, c.id;
END $$;
COMMENT ON FUNCTION check_censors(text, text, text, timestamp with time zone) IS
    'The censors that hold for these words (the person''s and everyone''s; kind and local hour narrowing them): severity, action (warn or block), reason, matched_by (similarity, pattern or scope), similarity (to the words or their nearest sentence) and personal (a person''s own). Reads only.';

-- The censors check_censors found, as the gate reports them (jsonb, in its order).
CREATE FUNCTION dionysus_internal.censor_hits(content text, kind text, person text) RETURNS jsonb
    LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('censor_id', h.censor_id, 'severity', h.severity, 'action', h.action,
                                                 'reason', h.reason, 'matched_by', h.matched_by,
                                                 'similarity', round(h.similarity::numeric, 3), 'personal', h.personal)), '[]')
      FROM dionysus.check_censors(content, kind, person) h
$$;
COMMENT ON FUNCTION dionysus_internal.censor_hits(text, text, text) IS 'check_censors as the JSON list censor_record takes.';

-- Counts what the censors hit (censor_hits of one operation): each activation written down with
-- what was being done (context, kept as given under its own key), a warn raised to a block at
-- its threshold; a trigger embedded by an earlier model is embedded again. Returns the verdict:
-- {verdict: pass, warn or block, censors, reasons}.
CREATE FUNCTION censor_record(kind text, person text, hits jsonb, context jsonb DEFAULT '{}')
    RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    hit jsonb;
    verdict text := 'pass';
    c dionysus.censors;
    raised boolean;
BEGIN
    IF kind IS NULL OR kind !~ '^[a-z][a-z_]{0,39}$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "kind": % (reply, reach_out or a heartbeat action''s name)', dionysus_internal.input_prefix(kind)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF context IS NULL OR jsonb_typeof(context) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "context": must be a JSON object' USING ERRCODE = 'invalid_text_representation';
    END IF;
    IF hits IS NULL OR jsonb_typeof(hits) <> 'array' OR EXISTS (
           SELECT 1 FROM jsonb_array_elements(hits) e
            WHERE jsonb_typeof(e) <> 'object' OR (e ->> 'censor_id') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "hits": an array of {censor_id, …} as censor_hits gives' USING ERRCODE = 'invalid_text_representation';
    END IF;
    -- Rows by id (the global lock order's last step): two gates never wait on each other in a cycle.
    PERFORM 1 FROM dionysus.censors x WHERE x.id IN (SELECT (e ->> 'censor_id')::uuid FROM jsonb_array_elements(hits) e)
     ORDER BY x.id FOR UPDATE;
    FOR hit IN SELECT * FROM jsonb_array_elements(hits) LOOP
        SELECT * INTO c FROM dionysus.censors x WHERE x.id = (hit ->> 'censor_id')::uuid AND x.status = 'active'
           AND (x.person IS NULL OR x.person = censor_record.person);
        CONTINUE WHEN NOT FOUND; -- retired meanwhile, or not this person's
        raised := c.severity = 'warn' AND c.activations_since_change + 1 >= c.escalation_threshold;
        UPDATE dionysus.censors x
           SET activation_count = x.activation_count + 1,
               activations_since_change = CASE WHEN raised THEN 0 ELSE x.activations_since_change + 1 END,
               severity = CASE WHEN raised THEN 'block' ELSE x.severity END,
               last_activated = dionysus.clock_now(), updated_at = dionysus.clock_now()
         WHERE x.id = c.id;
        INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
        VALUES (c.id, 'activated', c.severity,
                jsonb_build_object('kind', kind, 'person', person, 'matched_by', hit ->> 'matched_by',
                                   'similarity', hit -> 'similarity', 'context', censor_record.context));
        IF raised THEN
            INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
            VALUES (c.id, 'escalated', 'block', jsonb_build_object('from', c.severity, 'activations_since_change', c.activations_since_change + 1,
                                                                   'escalation_threshold', c.escalation_threshold));
        END IF;
        IF c.severity <> 'warn' THEN
            verdict := 'block';
        ELSIF verdict = 'pass' THEN
            verdict := 'warn';
        END IF;
    END LOOP;
    -- A re-index moved the store to another model: these triggers are embedded again for good.
    UPDATE dionysus.censors x SET embedding = dionysus.embed(x.trigger), model_key = dionysus_internal.store_model_key()
     WHERE x.id IN (SELECT (e ->> 'censor_id')::uuid FROM jsonb_array_elements(hits) e)
       AND x.model_key IS DISTINCT FROM dionysus_internal.store_model_key();
    RETURN jsonb_build_object('verdict', verdict, 'censors', hits,
                              'reasons', (SELECT coalesce(jsonb_agg(DISTINCT f ->> 'reason'), '[]') FROM jsonb_array_elements(hits) f));
END $$;
COMMENT ON FUNCTION censor_record(text, text, jsonb, jsonb) IS
    'Counts one operation''s censor hits (censor_hits): each activation written with what was being done, a warn raised to a block at its threshold, a trigger of an earlier model embedded again; returns {verdict: pass, warn or block, censors, reasons}.';
REVOKE EXECUTE ON FUNCTION censor_record(text, text, jsonb, jsonb) FROM PUBLIC;

-- The gate the hooks call (reach-outs, contacts, replies): what holds, counted.
CREATE FUNCTION censor_gate(kind text, content text, person text DEFAULT NULL, context jsonb DEFAULT '{}')
    RETURNS jsonb LANGUAGE sql AS $$
    SELECT dionysus.censor_record(kind, person, dionysus_internal.censor_hits(content, kind, person), context)
$$;
COMMENT ON FUNCTION censor_gate(text, text, text, jsonb) IS
    'The hooks'' gate (reach-outs, contacts, replies): censor_hits then censor_record; returns {verdict: pass, warn or block, censors, reasons}.';

-- The censor a person may change: their own, or (person NULL) everyone's, which only a
-- superuser's session may change (the owner's word, not the driver's).
CREATE FUNCTION dionysus_internal.censor_of(censor_id uuid, person text) RETURNS dionysus.censors
    LANGUAGE plpgsql AS $$
DECLARE
    c dionysus.censors;
BEGIN
    IF censor_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "censor_id": must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO c FROM dionysus.censors x WHERE x.id = censor_id FOR UPDATE;
    -- The same refusal whether or not it exists: nobody learns of another person's censors.
    IF NOT FOUND OR (c.person IS NOT NULL AND c.person IS DISTINCT FROM censor_of.person)
       OR (c.person IS NULL AND (person IS NOT NULL OR NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user))) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "censor_id": % is not a censor of %', censor_id, coalesce(person, 'everyone''s owner')
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN c;
END $$;
COMMENT ON FUNCTION dionysus_internal.censor_of(uuid, text) IS 'The censor a person may change (their own; everyone''s only in a superuser''s session); the same 42501 whether or not it exists.';

-- The person says a censor stopped something that was fine: counted; it steps down (block →
-- warn), a warn retires, an absolute stays (only retire_censor lifts it). Returns the censor's
-- state. person NULL: everyone's censor, by the owner.
CREATE FUNCTION mark_censor_false_positive(censor_id uuid, person text DEFAULT NULL, note text DEFAULT NULL)
    RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c dionysus.censors := dionysus_internal.censor_of(censor_id, person);
    lowered dionysus.censor_severity;
    retire boolean := false;
BEGIN
    IF length(note) > 1000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "note": at most 1,000 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF c.status <> 'active' THEN
        RETURN jsonb_build_object('censor_id', c.id, 'severity', c.severity, 'status', c.status);
    END IF;
    CASE c.severity
        WHEN 'block' THEN lowered := 'warn';
        WHEN 'warn' THEN retire := true;
        ELSE NULL; -- absolute: the person's line
    END CASE;
    UPDATE dionysus.censors x
       SET false_positive_count = x.false_positive_count + 1, activations_since_change = 0,
           severity = coalesce(lowered, x.severity), status = CASE WHEN retire THEN 'retired' ELSE x.status END,
           updated_at = dionysus.clock_now()
     WHERE x.id = c.id
    RETURNING * INTO c;
    INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
    VALUES (c.id, 'false_positive', c.severity, jsonb_build_object('person', person, 'note', note));
    IF lowered IS NOT NULL THEN
        INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
        VALUES (c.id, 'de_escalated', c.severity, jsonb_build_object('from', 'block', 'false_positives', c.false_positive_count));
    ELSIF retire THEN
        INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
        VALUES (c.id, 'retired', c.severity, jsonb_build_object('by', 'false positive', 'false_positives', c.false_positive_count));
    END IF;
    RETURN jsonb_build_object('censor_id', c.id, 'severity', c.severity, 'status', c.status, 'false_positives', c.false_positive_count);
END $$;
COMMENT ON FUNCTION mark_censor_false_positive(uuid, text, text) IS
    'The person says a censor stopped something fine: counted, block steps down to warn, a warn retires; an absolute stays. Returns its state.';
REVOKE EXECUTE ON FUNCTION mark_censor_false_positive(uuid, text, text) FROM PUBLIC;

-- The person's word lifts a censor (an absolute one too). person NULL: everyone's, by the owner.
CREATE FUNCTION retire_censor(censor_id uuid, person text DEFAULT NULL)
    RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c dionysus.censors := dionysus_internal.censor_of(censor_id, person);
BEGIN
    IF c.status = 'retired' THEN
        RETURN false;
    END IF;
    UPDATE dionysus.censors x SET status = 'retired', updated_at = dionysus.clock_now() WHERE x.id = c.id;
    INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
    VALUES (c.id, 'retired', c.severity, jsonb_build_object('by', coalesce(person, 'owner')));
    RETURN true;
END $$;
COMMENT ON FUNCTION retire_censor(uuid, text) IS 'The person''s word lifts one of their censors (an absolute one too); everyone''s censors by the owner (person NULL).';
REVOKE EXECUTE ON FUNCTION retire_censor(uuid, text) FROM PUBLIC;

-- The censors that hold for a person (theirs and everyone's), with their counts: what
-- /censors shows them. Never another person's.
CREATE FUNCTION person_censors(person text)
    RETURNS TABLE (censor_id uuid, trigger text, reason text, severity text, scope jsonb, own boolean,
                   activations integer, false_positives integer, last_activated timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT c.id, c.trigger, c.reason, c.severity::text,
           jsonb_strip_nulls(jsonb_build_object('kinds', c.kinds, 'from_hour', c.from_hour, 'to_hour', c.to_hour, 'pattern', c.pattern,
                                                'any_content', CASE WHEN c.any_content THEN true END)),
           c.person IS NOT NULL, c.activation_count, c.false_positive_count, c.last_activated
      FROM dionysus.censors c
     WHERE c.status = 'active' AND (c.person IS NULL OR c.person = person_censors.person)
     ORDER BY c.person IS NULL, c.created_at, c.id
$$;
COMMENT ON FUNCTION person_censors(text) IS 'The active censors that hold for a person (theirs and everyone''s) with their scope and counts; never another person''s.';

-- Texts: sql/prompts/<key>.txt, older versions sql/prompts/superseded/<key>.v<N>.txt; the newest
-- version of each is the active one.
INSERT INTO prompt_templates (key, version, temperature, note, active, template)
SELECT key, version, temperature, note, version = max(version) OVER (PARTITION BY key),
       dionysus_internal.shipped_prompt(key, version)
  FROM (VALUES
    ('censor_from_words', 1, 0.1, 'censors (022): a person''s "never …" read into a censor'),
    ('censor_from_words', 2, 0.1, 'censors (022): a person''s "never …" read into a censor; its shape in placeholders, no example values (#35)'),
    ('censored_reply', 1, 0.0, 'censors (022): what is sent when a reply is blocked twice')
  ) AS shipped (key, version, temperature, note);
