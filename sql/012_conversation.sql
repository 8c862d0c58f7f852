-- The conversation organ: the immutable message
-- log, the prompt templates, the context a reply needs, sessions that end when idle, and the
-- language jobs (extraction, episode summaries, concepts) the driver runs from the queue.
--
-- The driver only moves words: everything it needs to build a prompt comes from
-- chat_context(), and everything the model produced goes back through complete_work().

-- ---------------------------------------------------------------------------------------
-- The message log: every canonical turn once, chained to the turn before it in its channel.
-- ---------------------------------------------------------------------------------------
CREATE TABLE messages (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    platform            text NOT NULL CHECK (length(btrim(platform)) > 0),
    -- The platform's own id (Discord snowflake, terminal line id): a redelivery is a duplicate.
    platform_message_id text NOT NULL CHECK (length(btrim(platform_message_id)) > 0),
    channel_id          text NOT NULL CHECK (length(btrim(channel_id)) > 0),
    author_id           text NOT NULL CHECK (length(btrim(author_id)) > 0),
    is_bot              boolean NOT NULL DEFAULT false,
    -- Bot-initiated (a reach-out) rather than a reply.
    is_proactive        boolean NOT NULL DEFAULT false,
    content             text NOT NULL CHECK (length(btrim(content)) > 0),
    prev_message_id     uuid REFERENCES messages (id) ON DELETE SET NULL,
    reply_to            uuid REFERENCES messages (id) ON DELETE SET NULL,
    -- The episodic memory this turn became (recall finds turns through it).
    memory_id           uuid REFERENCES memories (id) ON DELETE SET NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    -- The person whose conversation this turn belongs to: the author of a person's turn, the
    -- person addressed by the bot's. Its memory is private to them.
    person              text,
    -- The import that brought this turn in from elsewhere (018), NULL for a turn lived here.
    import_id           uuid,
    UNIQUE (platform, platform_message_id)
);
COMMENT ON TABLE messages IS
    'The immutable message log: every turn once per (platform, platform_message_id), chained to the '
    'previous turn of its channel, with the episodic memory it became.';
CREATE INDEX messages_channel ON messages (platform, channel_id, created_at DESC, id DESC);
ALTER TABLE outbox ADD CONSTRAINT outbox_reply_to_fkey FOREIGN KEY (reply_to) REFERENCES messages (id) ON DELETE SET NULL;
CREATE INDEX messages_memory ON messages (memory_id);
CREATE INDEX messages_person ON messages (created_at) WHERE NOT is_bot;
-- A person's turns, newest first (their latest turns for a message to them, a contact's context).
CREATE INDEX messages_person_at ON messages (person, created_at DESC);
-- Its foreign keys, indexed (001).
CREATE INDEX messages_prev_message_id ON messages (prev_message_id) WHERE prev_message_id IS NOT NULL;
CREATE INDEX messages_reply_to ON messages (reply_to) WHERE reply_to IS NOT NULL;

-- Turns are immutable: only the links that deletions clear may change.
CREATE FUNCTION dionysus_internal.messages_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.platform, NEW.platform_message_id, NEW.channel_id, NEW.author_id, NEW.is_bot, NEW.is_proactive,
        NEW.content, NEW.created_at, NEW.person, NEW.import_id)
       IS DISTINCT FROM
       (OLD.platform, OLD.platform_message_id, OLD.channel_id, OLD.author_id, OLD.is_bot, OLD.is_proactive,
        OLD.content, OLD.created_at, OLD.person, OLD.import_id)
       OR (NEW.memory_id IS NOT NULL AND NEW.memory_id IS DISTINCT FROM OLD.memory_id)
       OR (NEW.prev_message_id IS NOT NULL AND NEW.prev_message_id IS DISTINCT FROM OLD.prev_message_id)
       OR (NEW.reply_to IS NOT NULL AND NEW.reply_to IS DISTINCT FROM OLD.reply_to) THEN
        RAISE EXCEPTION 'dionysus: the message log is immutable (message %)', OLD.id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.messages_immutable() IS 'Trigger: the message log is immutable (only links that deletions clear may change).';
CREATE TRIGGER messages_immutable BEFORE UPDATE ON messages FOR EACH ROW EXECUTE FUNCTION dionysus_internal.messages_immutable();

-- ---------------------------------------------------------------------------------------
-- Prompt templates: versioned, one active version per key. {{name}} placeholders are filled
-- by the driver. created_by leaves room for the dreaming cycle's proposals (017).
-- ---------------------------------------------------------------------------------------
CREATE TABLE prompt_templates (
    key         text NOT NULL CHECK (key ~ '^[a-z][a-z0-9_]*$'),
    version     integer NOT NULL CHECK (version >= 1),
    template    text NOT NULL CHECK (length(btrim(template)) > 0),
    temperature double precision NOT NULL DEFAULT 0.7 CHECK (temperature >= 0 AND temperature <= 2),
    active      boolean NOT NULL DEFAULT true,
    note        text,
    created_by  text NOT NULL DEFAULT 'human',
    created_at  timestamptz NOT NULL DEFAULT now(),
    result_schema jsonb CHECK (result_schema IS NULL OR jsonb_typeof(result_schema) = 'object'),
    PRIMARY KEY (key, version)
);
COMMENT ON TABLE prompt_templates IS
    'Versioned prompt templates with {{placeholders}}, one active version per key; set_prompt_template() adds a version.';
COMMENT ON COLUMN prompt_templates.result_schema IS
    'The JSON Schema of the task''s answer (the driver sends it as the request''s response_format where the endpoint takes one); NULL for a free-text task.';
CREATE UNIQUE INDEX prompt_templates_one_active ON prompt_templates (key) WHERE active;

-- The JSON Schema of each shipped JSON task's answer (NULL: a free-text task): the shape the
-- prompts ask for, as data a server can turn into a grammar. Every version of a key has it.
CREATE FUNCTION dionysus_internal.task_result_schema(key text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH t (s, n, a) AS (SELECT '{"type": "string"}'::jsonb, '{"type": "number"}'::jsonb, '{"type": "array", "items": {"type": "string"}}'::jsonb)
    SELECT jsonb_build_object('type', 'object', 'properties', p, 'required', to_jsonb(r)) FROM t, LATERAL (
        SELECT * FROM (VALUES
        ('extract_message', jsonb_build_object(
            'facts', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["content"]'::jsonb,
                'properties', jsonb_build_object('content', s, 'subject', s, 'confidence', n, 'category',
                    '{"enum": ["preference", "person", "event", "plan", "attribute", "other"]}'::jsonb))),
            'triples', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["subject", "predicate", "object"]'::jsonb,
                'properties', jsonb_build_object('subject', s, 'predicate', s, 'object', s, 'confidence', n))),
            'goals', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["title"]'::jsonb,
                'properties', jsonb_build_object('title', s, 'description', s))),
            'objectives', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["description"]'::jsonb,
                'properties', jsonb_build_object('description', s, 'saliency', n, 'status', '{"enum": ["pending", "completed"]}'::jsonb))),
            'people', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["name"]'::jsonb,
                'properties', jsonb_build_object('name', s, 'aliases', a, 'same_as', '{"type": ["string", "null"]}'::jsonb, 'relation', s,
                                                 'feeling', n, 'traits', a, 'topics', a, 'confidence', n))),
            'relations', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["a", "b", "kind"]'::jsonb,
                'properties', jsonb_build_object('a', s, 'b', s, 'kind', s, 'sentiment', n, 'confidence', n,
                                                 'source', '{"enum": ["said", "inferred"]}'::jsonb))),
            'focus', s,
            'threads', jsonb_build_object('type', 'object', 'properties', jsonb_build_object('opened', a, 'closed', a))),
         ARRAY['facts', 'triples', 'goals']),
        ('heartbeat_system', jsonb_build_object('reasoning', s,
            'actions', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["action"]'::jsonb,
                'properties', jsonb_build_object('action', s, 'params', '{"type": "object"}'::jsonb))),
            'goal_changes', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["goal_id", "change"]'::jsonb,
                'properties', jsonb_build_object('goal_id', s, 'reason', s,
                                                 'change', '{"enum": ["promote", "demote", "complete", "abandon", "activate"]}'::jsonb)))),
         ARRAY['reasoning', 'actions']),
        ('narrative', jsonb_build_object('narrative', s, 'emotional_valence', '{"type": "number", "minimum": -1, "maximum": 1}'::jsonb), ARRAY['narrative']),
        ('reflect', jsonb_build_object('insights', a,
            'identity', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["aspect"]'::jsonb,
                'properties', jsonb_build_object('aspect', s, 'confidence', n))),
            'worldview', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["belief"]'::jsonb,
                'properties', jsonb_build_object('belief', s, 'confidence', n)))),
         ARRAY['insights', 'identity', 'worldview']),
        ('brainstorm_goals', jsonb_build_object('goals', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object',
            'required', '["title"]'::jsonb, 'properties', jsonb_build_object('title', s, 'description', s)))), ARRAY['goals']),
        ('inquire', jsonb_build_object('answer', s, 'sources', a), ARRAY['answer']),
        ('inquiry_queries', jsonb_build_object('queries', a), ARRAY['queries']),
        ('inquiry_confidence', jsonb_build_object('confidence', '{"type": "number", "minimum": 0, "maximum": 1}'::jsonb, 'caveats', s), ARRAY['confidence']),
        ('synthesize', jsonb_build_object('title', s, 'artifact', s), ARRAY['artifact']),
        ('reach_out', jsonb_build_object('message', s), ARRAY['message']),
        ('proactive_compose', jsonb_build_object('message', s), ARRAY['message']),
        ('proactive_decision', jsonb_build_object('decision', '{"enum": ["message", "wait"]}'::jsonb, 'reason', s, 'intent', s), ARRAY['decision']),
        ('maintain', jsonb_build_object('verdict', '{"enum": ["keep", "update", "retire"]}'::jsonb,
            'confidence', '{"type": "number", "minimum": 0, "maximum": 1}'::jsonb, 'content', s, 'reason', s), ARRAY['verdict']),
        ('dream', jsonb_build_object('note', s, 'proposals', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object',
            'required', '["kind", "target", "proposal", "rationale"]'::jsonb,
            'properties', jsonb_build_object('kind', '{"enum": ["prompt_template", "extraction", "archetype"]}'::jsonb, 'target', s,
                                             'proposal', '{"type": "object"}'::jsonb, 'rationale', s, 'evidence', a)))),
         ARRAY['proposals']),
        ('extract_concepts', jsonb_build_object('memories', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object',
            'required', '["id", "concepts"]'::jsonb, 'properties', jsonb_build_object('id', s, 'concepts', a)))), ARRAY['memories']),
        ('summarize_episode', jsonb_build_object('summary', s, 'outcome', '{"enum": ["success", "failure", "mixed", "neutral"]}'::jsonb,
            'surprise', '{"type": "number", "minimum": 0, "maximum": 1}'::jsonb, 'lessons', a,
            'censor_candidates', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object',
                'required', '["trigger", "reason"]'::jsonb, 'properties', jsonb_build_object('trigger', s, 'reason', s)))),
         ARRAY['summary']),
        ('condense_memory', jsonb_build_object('summary', s, 'micro', s), ARRAY['summary', 'micro']),
        ('heartbeat_censors', jsonb_build_object('censor_candidates', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object',
            'required', '["trigger", "reason"]'::jsonb, 'properties', jsonb_build_object('trigger', s, 'reason', s)))), ARRAY['censor_candidates']),
        ('censor_from_words', jsonb_build_object('censor', '{"type": ["object", "null"]}'::jsonb, 'acknowledgement', s), ARRAY['censor']),
        ('rule_from_words', jsonb_build_object('rule', '{"type": ["object", "null"]}'::jsonb, 'confirmation', s), ARRAY['rule']),
        ('contact_feedback', jsonb_build_object('sentiment', '{"enum": ["positive", "neutral", "negative"]}'::jsonb, 'reason', s), ARRAY['sentiment']),
        ('north_star_check', jsonb_build_object('north_star', '{"type": "boolean"}'::jsonb, 'statement', s), ARRAY['north_star'])
        ) AS v (k, p, r) WHERE v.k = task_result_schema.key) x
$$;
COMMENT ON FUNCTION dionysus_internal.task_result_schema(text) IS
    'The JSON Schema of a shipped JSON task''s answer (extract_message, heartbeat_system''s decision, narrative, reflect, dream, ...), NULL for a free-text task: prompt_templates.result_schema of every version of that key.';

CREATE FUNCTION prompt_template(key text) RETURNS jsonb
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
    RETURN jsonb_build_object('key', t.key, 'version', t.version, 'template', t.template, 'temperature', t.temperature,
                              'result_schema', t.result_schema);
END $$;
COMMENT ON FUNCTION prompt_template(text) IS 'The active version of a prompt template: {key, version, template, temperature, result_schema} (result_schema: the JSON Schema of the answer, null for free text).';

CREATE FUNCTION set_prompt_template(key text, template text, temperature double precision DEFAULT NULL,
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
    INSERT INTO dionysus.prompt_templates (key, version, template, temperature, note, result_schema)
    VALUES (key, v, template, coalesce(temperature, prev.temperature, 0.7), note,
            coalesce(prev.result_schema, dionysus_internal.task_result_schema(key)));
    RETURN v;
END $$;
COMMENT ON FUNCTION set_prompt_template(text, text, double precision, text) IS
    'Adds a new active version of a prompt template (the previous stays, inactive; the answer''s schema carries over); returns the version number.';

-- Ships a new version of a prompt template: active where the shipped version it follows (its
-- note) is still the active one; where the person's own is active, theirs stays and the new
-- one waits beside it (a NOTICE names it; activate_prompt_template switches). Returns it.
-- For an update script's new version (a fresh install inserts every version below).
CREATE FUNCTION dionysus_internal.ship_template(key text, follows_note text, note text, temperature double precision,
                                               template text) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    shipped boolean;
    next_version integer;
BEGIN
    SELECT coalesce(bool_and(NOT t.active OR (t.created_by = 'human' AND t.note = ship_template.follows_note)), true),
           coalesce(max(t.version), 0) + 1
      INTO shipped, next_version FROM dionysus.prompt_templates t WHERE t.key = ship_template.key;
    IF shipped THEN
        UPDATE dionysus.prompt_templates t SET active = false WHERE t.key = ship_template.key;
    ELSE
        RAISE NOTICE 'dionysus: your % template stays active; version % is new (activate_prompt_template to use it)', key, next_version;
    END IF;
    INSERT INTO dionysus.prompt_templates (key, version, temperature, note, active, template, result_schema)
    VALUES (key, next_version, temperature, note, shipped, template, dionysus_internal.task_result_schema(key));
    RETURN next_version;
END $$;
COMMENT ON FUNCTION dionysus_internal.ship_template(text, text, text, double precision, text) IS
    'Ships a new version of a prompt template: active where the shipped version it follows (by note) is active; beside the person''s own otherwise (a NOTICE names it). Returns the version.';

-- ---------------------------------------------------------------------------------------
-- Logging a turn. One call, one transaction: the turn, its memory, the
-- session, and for the person's turns the extraction job (claimable by other workers only
-- after a grace period, so the conversation extracts its own turn right after replying).
-- Every turn belongs to one person (person_key(platform, author) for theirs; for the bot's,
-- the person given, else the author of the turn it replies to) and its memory is private
-- to them.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION log_message(platform text, platform_message_id text, channel_id text, author_id text, content text,
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
                              'signal', noted -> 'signal',
                              -- A contact whose answer the cues could not judge: the fast model may (contact_feedback).
                              'feedback_unsure', noted -> 'feedback_unsure');
END $$;
COMMENT ON FUNCTION log_message(text, text, text, text, text, boolean, boolean, uuid, text) IS
    'Logs one turn in one transaction: deduplicated by the platform''s message id, chained, remembered as an episodic memory '
    'private to the turn''s person (the author of a person''s turn; for the bot''s, person or the author of reply_to); '
    'a person''s turn also starts the session and queues its extraction. Returns {message_id, duplicate, prev_message_id, memory_id, work_id, person}.';

-- The reply to a person's message, reserved for the worker that will send it (reserve →
-- send → confirm, see the outbox in 003). One reply per message: asked again (a redelivery,
-- a retry after a crash) it returns the reply already queued, re-reserved for the caller if
-- nobody else holds it, so the caller resends that one (same nonces) instead of a new one.
-- With content NULL it only looks for (and re-reserves) the reply already queued.
CREATE FUNCTION queue_reply(message_id uuid, worker text, content text DEFAULT NULL) RETURNS SETOF outbox
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
COMMENT ON FUNCTION queue_reply(uuid, text, text) IS
    'The reply to a person''s message, in the outbox and reserved for the worker that sends it (reserve → send → confirm). One reply '
    'per message: asked again it returns the reply already queued (re-reserved for the caller when nobody else holds it); with '
    'content NULL it only looks for that reply.';

-- ---------------------------------------------------------------------------------------
-- The context of a reply: the last turns of the channel, what recall
-- finds for the message (turns already in view left out), the facts among them, the triples
-- around the entities the message names (and the person), and the active goals. Memories,
-- triples and goals are only those the message's person may see: nothing another person
-- said in private (a turn of unknown person sees only what is private to nobody). All of it
-- within a token budget (027): the archetype's task's, or budget tokens when given.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION chat_context(message_id uuid, max_memories integer DEFAULT 8, max_turns integer DEFAULT 12,
                             use_archetype boolean DEFAULT true, budget integer DEFAULT NULL)
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
    shape jsonb;
    threshold double precision;
    depth integer := 1;
    hop integer;
    wmem jsonb;
    -- A context with memories is a turn of the conversation (the extraction's asks for none),
    -- whatever an archetype narrows them to.
    steps boolean := coalesce(max_memories, 0) > 0;
    -- The budget's task (027): an archetype's, else casual chat.
    task text := 'chat';
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
    IF budget IS NOT NULL AND (budget < 100 OR budget > 200000) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "budget": % tokens is outside [100, 200000]', budget USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO m FROM dionysus.messages x WHERE x.id = chat_context.message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "message_id": no message with id %', message_id USING ERRCODE = 'no_data_found';
    END IF;
    viewer := coalesce(m.person, 'nobody:');
    -- The kind of message decides the shape of its context (017): its archetype's turns,
    -- memories, similarity threshold and triple depth, within the arguments (the operator's
    -- caps); the arguments alone when no archetype is near enough.
    IF use_archetype THEN
        shape := dionysus.match_archetype((SELECT x.embedding FROM dionysus.memories x WHERE x.id = m.memory_id), m.person);
        IF shape ->> 'name' IS NOT NULL THEN
            max_turns := least(max_turns, (shape ->> 'turns')::int);
            max_memories := least(max_memories, (shape ->> 'memories')::int);
            threshold := (shape ->> 'similarity_threshold')::float8;
            depth := (shape ->> 'triple_depth')::int;
            task := coalesce((SELECT a.budget_task FROM dionysus.context_archetypes a
                               WHERE a.name = shape ->> 'name' AND a.active AND (a.person IS NULL OR a.person = m.person)
                               ORDER BY a.person NULLS LAST LIMIT 1), task);
        END IF;
    END IF;

    -- The turns before it in its channel: a lived turn's are the lived ones and its person's own
    -- imported history; an imported turn's, its person's imported turns only (another person's
    -- import may use the same channel name). Someone else's words in a history are marked so.
    -- A turn's shorter levels are its memory's (027; a memory that faded already is one).
    SELECT coalesce(jsonb_agg(jsonb_build_object('role', CASE WHEN t.is_bot THEN 'assistant' WHEN t.other THEN 'other' ELSE 'user' END,
                                                 'content', t.content, 'at', t.created_at, 'proactive', t.is_proactive,
                                                 'summary', t.summary, 'micro', t.micro)
                              ORDER BY t.created_at, t.id), '[]'::jsonb),
           array_agg(t.memory_id) FILTER (WHERE t.memory_id IS NOT NULL)
      INTO turns, in_view
      FROM (SELECT x.id, x.is_bot, x.created_at, x.is_proactive, x.memory_id,
                   CASE WHEN x.import_id IS NULL THEN x.content ELSE coalesce(mm.content, x.content) END AS content,
                   x.import_id IS NOT NULL AND mm.metadata ->> 'role' = 'other' AS other,
                   CASE mm.stage WHEN 'fresh' THEN mm.summary WHEN 'fading' THEN mm.content END AS summary,
                   CASE mm.stage WHEN 'distant' THEN mm.content ELSE mm.micro END AS micro
              FROM dionysus.messages x
              LEFT JOIN dionysus.memories mm ON mm.id = x.memory_id
             WHERE x.platform = m.platform AND x.channel_id = m.channel_id AND x.id <> m.id
               AND (x.created_at, x.id) < (m.created_at, m.id)
               AND ((x.import_id IS NULL AND m.import_id IS NULL) OR (x.import_id IS NOT NULL AND x.person = m.person))
             ORDER BY x.created_at DESC, x.id DESC LIMIT max_turns) t;
    in_view := coalesce(in_view, '{}') || m.memory_id;

    IF max_memories > 0 THEN
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', r.memory_id, 'content', r.content, 'type', r.type, 'created_at', r.created_at,
                   'score', round(r.score::numeric, 4), 'found_by', r.found_by,
                   'fact', f.memory_id IS NOT NULL, 'subject', f.subject,
                   'role', x.role, 'stage', mm.stage, 'summary', mm.summary, 'micro', mm.micro) ORDER BY r.score DESC), '[]'::jsonb)
          INTO mems
          FROM (SELECT * FROM dionysus.recall(m.content, max_memories + cardinality(in_view), person => viewer)
                 WHERE NOT (memory_id = ANY(in_view))
                   -- What meaning alone found must be near enough; what words or links found stays.
                   AND (threshold IS NULL OR found_by <> 'vector' OR vector_score >= threshold)
                 ORDER BY score DESC LIMIT max_memories) r
          LEFT JOIN dionysus.facts f ON f.memory_id = r.memory_id
          LEFT JOIN dionysus.memories mm ON mm.id = r.memory_id
          LEFT JOIN LATERAL (SELECT CASE WHEN y.is_bot THEN 'assistant' ELSE 'user' END AS role
                               FROM dionysus.messages y WHERE y.memory_id = r.memory_id LIMIT 1) x ON true;
    ELSE
        mems := '[]'::jsonb;
    END IF;
    -- The session's working memory (025): a context with memories is a turn of the conversation
    -- and steps it; the extraction's (no memories) only reads it.
    wmem := dionysus_internal.working_memory_turn(m, mems, in_view, steps);

    -- Entities named in the message: its words, word pairs and triples, matched against the
    -- entities' normalised names; plus the subjects of recalled facts, and the person.
    words := array(SELECT w FROM regexp_split_to_table(lower(m.content), '[^[:alnum:]_''-]+') w WHERE w <> '');
    grams := words
          || array(SELECT words[i] || ' ' || words[i + 1] FROM generate_series(1, cardinality(words) - 1) i)
          || array(SELECT words[i] || ' ' || words[i + 1] || ' ' || words[i + 2] FROM generate_series(1, cardinality(words) - 2) i)
          || array(SELECT lower(btrim(e ->> 'subject')) FROM jsonb_array_elements(mems) e WHERE e ->> 'subject' IS NOT NULL)
          || ARRAY['user'];
    ents := array(SELECT id FROM dionysus.entities WHERE name_key = ANY(grams));
    -- Deeper archetypes follow the graph further: each hop adds the other ends of the triples found.
    FOR hop IN 2..depth LOOP
        ents := ents || array(SELECT DISTINCT CASE WHEN t.subject_id = ANY(ents) THEN t.object_id ELSE t.subject_id END
                                FROM dionysus_internal.triples_seen(ents, viewer) t
                               LIMIT 50);
    END LOOP;
    IF depth = 0 THEN
        ents := '{}';
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_build_object('subject', s.name, 'predicate', t.predicate, 'object', o.name,
                                                 'confidence', t.confidence) ORDER BY t.confidence DESC, t.updated_at DESC), '[]'::jsonb)
      INTO trips
      FROM (SELECT * FROM dionysus_internal.triples_seen(ents, viewer)
             ORDER BY confidence DESC, updated_at DESC LIMIT 20) t
      JOIN dionysus.entities s ON s.id = t.subject_id JOIN dionysus.entities o ON o.id = t.object_id;

    -- Within the task's budget (027): each item at the richest level that fits, the rest cut,
    -- and what was included and cut said under context_budget.
    RETURN dionysus_internal.fit_task_context(jsonb_build_object(
        'message', jsonb_build_object('id', m.id, 'content', m.content, 'at', m.created_at, 'channel_id', m.channel_id,
                                      'platform', m.platform, 'person', m.person),
        'now', now(),
        'recent_turns', turns,
        'memories', mems,
        'triples', trips,
        -- The people in their life the message names, with how they relate (023_people.sql).
        'people', CASE WHEN m.person IS NULL THEN '[]'::jsonb ELSE dionysus_internal.people_in_context(m.person, grams) END,
        'goals', coalesce((SELECT jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title) ORDER BY g.last_touched DESC)
                             FROM dionysus.goals g WHERE g.priority = 'active' AND dionysus_internal.visible_to(g.private_to, viewer)),
                          '[]'::jsonb),
        -- What matters most to them (017), in every context; and what they are working toward.
        'north_stars', coalesce((SELECT jsonb_agg(n.content ORDER BY n.created_at) FROM dionysus.person_north_stars(viewer) n), '[]'::jsonb),
        'objectives', coalesce((SELECT jsonb_agg(jsonb_build_object('description', o.description, 'saliency', round(o.saliency::numeric, 2)))
                                  FROM (SELECT * FROM dionysus.person_objectives(viewer) LIMIT 5) o), '[]'::jsonb),
        'archetype', shape,
        -- What this session holds in mind: its focus, open threads, and what earlier turns
        -- brought up that this one did not (NULL outside a person's open session).
        'working_memory', wmem), task, budget);
END $$;
COMMENT ON FUNCTION chat_context(uuid, integer, integer, boolean, integer) IS
    'Everything a reply needs: the last turns of the channel, recalled memories (turns in view left out; facts marked), '
    'triples about the entities named and the person, the people in their life it names with how they relate (people), the active goals, the person''s north stars and objectives; only what the message''s person may see. '
    'With use_archetype, the nearest context archetype sets the turns, memories, similarity threshold and triple depth (reported as archetype), '
    'within max_memories and max_turns (which alone apply when no archetype is near enough). '
    'working_memory: the session''s focus, open threads and what earlier turns brought up (a context with memories steps it once per turn; NULL outside a person''s open session). '
    'All within a token budget (027): the archetype''s task''s (casual chat''s without one), or budget tokens (100 to 200000); each item at the richest level that fits '
    '(a memory''s or turn''s content is that level''s text, with level and tokens), the rest cut; context_budget reports what was included at which level and what was cut.';

-- ---------------------------------------------------------------------------------------
-- Sessions end when idle; a significant one requests a heartbeat.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION end_idle_session() RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    st dionysus.heartbeat_state;
    turns bigint;
BEGIN
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    -- The driven clock, as session_start and note_user_message stamp the last interaction.
    IF NOT st.session_active OR st.last_user_interaction_at >
       dionysus.clock_now() - make_interval(secs => dionysus_internal.heartbeat_setting('session_idle_minutes') * 60) THEN
        RETURN false;
    END IF;
    SELECT count(*) INTO turns FROM dionysus.messages
     WHERE NOT is_bot AND created_at >= coalesce(st.session_started_at, st.last_user_interaction_at);
    PERFORM dionysus.session_end(turns >= dionysus_internal.heartbeat_setting('significant_session_turns'));
    RETURN true;
END $$;
COMMENT ON FUNCTION end_idle_session() IS
    'Ends the session when the person has been silent for session_idle_minutes; with significant_session_turns or more of '
    'their turns it requests a heartbeat. Returns whether it ended one.';

-- ---------------------------------------------------------------------------------------
-- Language jobs of the worker, queued for the driver: summaries of
-- episodes closed a while ago, concepts for young memories, the shorter levels of long ones. Idempotency keys make a
-- second enqueue of the same job a no-op. Episodes left open past the gap are closed first.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION enqueue_language_work() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    k integer;
    attempts integer := dionysus_internal.heartbeat_setting('work_max_attempts')::int;
BEGIN
    -- An episode a writer holds is left for the next pass (SKIP LOCKED): a batch that appends to
    -- several sources' episodes holds their rows, and waiting here for one while holding another
    -- was a deadlock (40P01, found by a 100k fill beside the scheduler).
    UPDATE dionysus.episodes SET ended_at = greatest(last_event_at, started_at)
     WHERE id IN (SELECT x.id FROM dionysus.episodes x
                   WHERE x.ended_at IS NULL AND NOT x.explicit
                     AND x.last_event_at < now() - make_interval(mins => coalesce((SELECT setting::int FROM pg_settings WHERE name = 'dionysus.episode_gap_minutes'), 30))
                   ORDER BY x.id FOR UPDATE SKIP LOCKED);
    -- Five lived episodes a pass; twenty of an import's (018: source 'imported:…') besides, at
    -- background priority, so a long history is summarised without holding up the present.
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, priority)
    SELECT 'summarize_episode:' || e.id, 'summarize_episode', jsonb_build_object('episode_id', e.id), attempts, e.priority
      FROM (SELECT x.id, x.ended_at, CASE WHEN x.source LIKE 'imported:%' THEN -1 ELSE 0 END AS priority,
                   row_number() OVER (PARTITION BY x.source LIKE 'imported:%' ORDER BY x.ended_at) AS rank
              FROM dionysus.episodes x
             WHERE x.ended_at IS NOT NULL AND x.summary IS NULL AND x.memory_count > 0
               AND x.ended_at < now() - make_interval(secs => dionysus_internal.heartbeat_setting('summary_delay_minutes') * 60)
               AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.idempotency_key = 'summarize_episode:' || x.id)) e
     WHERE e.rank <= CASE WHEN e.priority < 0 THEN 20 ELSE 5 END
     ORDER BY e.ended_at
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
    -- The detail levels of long memories (027), ahead of the contexts that need them.
    n := n + dionysus_internal.enqueue_condense_levels();
    -- The nightly dream (017), once a local date, after dream_hour.
    IF dionysus_internal.schedule_dream() THEN
        n := n + 1;
    END IF;
    IF n > 0 THEN
        PERFORM pg_notify('dionysus_work', jsonb_build_object('queued', n)::text);
    END IF;
    RETURN n;
END $$;
COMMENT ON FUNCTION enqueue_language_work() IS
    'Queues the worker''s language jobs for the driver: summaries of closed episodes, concepts of young memories, '
    'the summary and micro levels of long fresh memories (027). '
    'Closes episodes left open past the gap first. Returns how many were queued.';

-- What a summary needs: the episode's memories in order.
CREATE FUNCTION episode_transcript(episode_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('content', m.content, 'type', m.type, 'at', m.created_at,
                                                 'role', m.metadata ->> 'role') ORDER BY em.sequence_order), '[]'::jsonb)
      FROM dionysus.episode_memories em JOIN dionysus.memories m ON m.id = em.memory_id
     WHERE em.episode_id = episode_transcript.episode_id
$$;
COMMENT ON FUNCTION episode_transcript(uuid) IS 'An episode''s memories in order, for its summary.';

-- A person's own latest turns, oldest first: a message written to them sees only theirs.
CREATE FUNCTION person_turns(person text, max_turns integer DEFAULT 8) RETURNS TABLE (role text, content text)
    LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN m.is_bot THEN 'assistant' ELSE 'user' END, m.content
      FROM (SELECT x.is_bot, x.content, x.created_at FROM dionysus.messages x WHERE x.person = person_turns.person
             ORDER BY x.created_at DESC LIMIT max_turns) m
     ORDER BY m.created_at
$$;
COMMENT ON FUNCTION person_turns(text, integer) IS 'The person''s own latest turns (at most max_turns), oldest first: role (user or assistant) and content.';

-- ---------------------------------------------------------------------------------------
-- The default prompts. Each begins with a "TASK:" line, so a log (or a scripted test model)
-- can tell them apart. Edit with set_prompt_template(); the old version is kept. Every version
-- of a template is inserted here, in the organ that first shipped it: extract_message's
-- versions 2 to 4 add objectives (017), the people in the person's life (023), the focus and
-- open threads (025); summarize_episode's version 2 adds outcome, surprise, lessons and censor
-- candidates (024). The newest versions (#35) show the answer's shape in <placeholders> the
-- grounding check refuses (032), never in plausible values a small model copies as data.
-- ---------------------------------------------------------------------------------------
-- Texts: sql/prompts/<key>.txt, older versions sql/prompts/superseded/<key>.v<N>.txt; the newest
-- version of each is the active one.
INSERT INTO prompt_templates (key, version, temperature, note, active, template)
SELECT key, version, temperature, note, version = max(version) OVER (PARTITION BY key),
       dionysus_internal.shipped_prompt(key, version)
  FROM (VALUES
    ('chat_system', 1, 0.7, 'system prompt of a conversational reply'),
    ('chat_unavailable', 1, 0.0, 'the honest reply when the language model cannot be reached (no model call)'),
    ('chat_unavailable', 2, 0.0, 'the honest reply when the language model cannot answer, saying why: unreachable, too slow, or an answer it cannot use (#35; no model call)'),
    ('extract_message', 1, 0.1, 'fast model: facts, triples and requested goals from the person''s latest turn'),
    ('extract_message', 2, 0.1, 'fast model: facts, triples, requested goals and the person''s objectives (seed 004)'),
    ('extract_message', 3, 0.1, 'fast model: facts, triples, requested goals, the person''s objectives and the people in their life (seed 003 §9)'),
    ('extract_message', 4, 0.1, 'fast model: facts, triples, goals, objectives, people, and the session''s focus and open threads (seed 002 working memory)'),
    ('extract_message', 5, 0.1, 'fast model: the same, its shape in placeholders no answer can pass as data (#35)'),
    ('heartbeat_system', 1, 0.6, 'seed 000 §5.2 system prompt'),
    ('heartbeat_user', 1, 0.6, 'seed 000 §5.2 user prompt'),
    ('reflect', 1, 0.6, 'heartbeat action: reflect'),
    ('reflect', 2, 0.6, 'heartbeat action: reflect, its shape in placeholders no answer can pass as data (#35)'),
    ('brainstorm_goals', 1, 0.8, 'heartbeat action: brainstorm_goals'),
    ('brainstorm_goals', 2, 0.8, 'heartbeat action: brainstorm_goals, its shape in placeholders no answer can pass as data (#35)'),
    ('inquire', 1, 0.3, 'heartbeat action: inquire_shallow / inquire_deep'),
    ('maintain', 1, 0.2, 'heartbeat action: maintain (§3.2.3), the judgement of one belief, aspect or memory'),
    ('inquiry_queries', 1, 0.3, 'inquire_deep (§3.2.4): the web searches that cover a question'),
    ('inquiry_confidence', 1, 0.1, 'inquire_deep (§3.2.4): how far the answer can be trusted'),
    ('synthesize', 1, 0.7, 'heartbeat action: synthesize'),
    ('reach_out', 1, 0.7, 'heartbeat action: reach_out_user'),
    ('narrative', 1, 0.5, 'heartbeat record: the narrative stored as an episodic memory'),
    ('narrative', 2, 0.5, 'heartbeat record: the narrative, its shape in placeholders no answer can pass as data (#35)'),
    ('summarize_episode', 1, 0.3, 'worker job §6.4: episode summary'),
    ('summarize_episode', 2, 0.3, 'worker job §6.4: episode summary, outcome, surprise, lessons and censor candidates (seed 002)'),
    ('summarize_episode', 3, 0.3, 'worker job: episode summary, outcome, surprise, lessons and censor candidates, its shape in placeholders (#35)'),
    ('extract_concepts', 1, 0.2, 'worker job §6.5: concepts of young memories')
  ) AS shipped (key, version, temperature, note);
