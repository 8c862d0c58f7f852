-- Dionysus 0.18.0 → 0.19.0: Trust III (issue #33). Each section names what it mends.

-- ---------------------------------------------------------------------------------------
-- Approval belongs to the person (issue #33 §3): proposals are written only by the dream
-- (record_dream, as the owner) and carry their person; only that person approves or rejects
-- (42501 for anyone else); a decision stands (a trigger); what an approval changes is the
-- person's own (their own template versions, their own archetypes), never everyone's. The
-- driver's role adds only a person's own mind rules and changes no built-in. Episodes are kept
-- apart by person as well as source.
-- ---------------------------------------------------------------------------------------
-- Proposals: whose, and one way.
ALTER TABLE proposals ADD COLUMN person text, ADD COLUMN base_own_version integer;
UPDATE proposals p SET person = d.person FROM dreams d WHERE d.id = p.dream_id;
CREATE OR REPLACE FUNCTION dionysus_internal.proposal_one_way() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.person IS DISTINCT FROM OLD.person THEN
        RAISE EXCEPTION 'dionysus: proposal %: whose it is was fixed by its dream', OLD.id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (OLD.status IN ('approved', 'rejected')
        AND (NEW.status, NEW.decided_at, NEW.decided_by, NEW.applied)
            IS DISTINCT FROM (OLD.status, OLD.decided_at, OLD.decided_by, OLD.applied))
       OR (OLD.status = 'discussing' AND NEW.status = 'pending') THEN
        RAISE EXCEPTION 'dionysus: proposal % is % already: a decision is not taken back (a new dream can propose again)', OLD.id, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
GRANT EXECUTE ON FUNCTION dionysus_internal.proposal_one_way() TO dionysus_driver;
CREATE TRIGGER proposals_one_way BEFORE UPDATE ON proposals FOR EACH ROW EXECUTE FUNCTION dionysus_internal.proposal_one_way();

-- A person's own template versions.
CREATE TABLE person_prompt_templates (
    person      text NOT NULL CHECK (length(btrim(person)) > 0),
    key         text NOT NULL CHECK (key ~ '^[a-z][a-z0-9_]*$'),
    version     integer NOT NULL CHECK (version >= 1),
    template    text NOT NULL CHECK (length(btrim(template)) > 0),
    temperature double precision NOT NULL CHECK (temperature >= 0 AND temperature <= 2),
    active      boolean NOT NULL DEFAULT true,
    note        text,
    proposal_id uuid REFERENCES proposals (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (person, key, version)
);
CREATE UNIQUE INDEX person_prompt_templates_one_active ON person_prompt_templates (person, key) WHERE active;
GRANT SELECT ON person_prompt_templates TO dionysus_driver;
CREATE OR REPLACE FUNCTION prompt_template(key text, person text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    o dionysus.person_prompt_templates;
BEGIN
    SELECT * INTO o FROM dionysus.person_prompt_templates t
     WHERE t.person = prompt_template.person AND t.key = prompt_template.key AND t.active;
    IF NOT FOUND THEN
        RETURN dionysus.prompt_template(key);
    END IF;
    RETURN jsonb_build_object('key', o.key, 'version', o.version, 'template', o.template, 'temperature', o.temperature, 'person', o.person);
END $$;
GRANT EXECUTE ON FUNCTION prompt_template(text, text) TO dionysus_driver;
CREATE OR REPLACE FUNCTION activate_own_template(person text, key text, version integer) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF coalesce(btrim(person), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF version IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dionysus.person_prompt_templates t
                                            WHERE t.person = activate_own_template.person AND t.key = activate_own_template.key
                                              AND t.version = activate_own_template.version) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "version": % has no version % of template "%"', person, version, key
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.prompt:' || key || ':' || person, 0));
    UPDATE dionysus.person_prompt_templates t SET active = false
     WHERE t.person = activate_own_template.person AND t.key = activate_own_template.key AND t.active;
    UPDATE dionysus.person_prompt_templates t SET active = true
     WHERE t.person = activate_own_template.person AND t.key = activate_own_template.key AND t.version = activate_own_template.version;
    RETURN true;
END $$;
REVOKE EXECUTE ON FUNCTION activate_own_template(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION activate_own_template(text, text, integer) TO dionysus_driver;

-- Archetypes: a person's own.
ALTER TABLE context_archetypes DROP CONSTRAINT context_archetypes_name_key;
ALTER TABLE context_archetypes ADD COLUMN person text,
    ADD CONSTRAINT context_archetypes_name_key UNIQUE NULLS NOT DISTINCT (name, person);
CREATE OR REPLACE FUNCTION match_archetype(embedding vector, person text) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    a dionysus.context_archetypes;
    sim double precision;
    floor double precision := dionysus_internal.proactive_setting('archetype_min_similarity');
    writable boolean := NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off';
BEGIN
    IF embedding IS NULL THEN
        RETURN NULL;
    END IF;
    IF writable THEN
        UPDATE dionysus.context_archetypes c SET centroid = dionysus_internal.archetype_centroid(c.example_messages)
         WHERE c.active AND c.centroid IS NULL;
    END IF;
    SELECT c.id, 1 - (coalesce(c.centroid, dionysus_internal.archetype_centroid(c.example_messages)) <=> embedding)
      INTO a.id, sim
      FROM dionysus.context_archetypes c
     WHERE c.active AND (c.person IS NULL OR c.person = match_archetype.person)
       AND NOT (c.person IS NULL AND EXISTS (SELECT 1 FROM dionysus.context_archetypes o
                                              WHERE o.active AND o.person = match_archetype.person AND o.name = c.name))
     ORDER BY 2 DESC, c.name LIMIT 1;
    IF a.id IS NOT NULL THEN
        SELECT * INTO a FROM dionysus.context_archetypes c WHERE c.id = a.id;
    END IF;
    IF a.id IS NULL OR sim < floor THEN
        RETURN CASE WHEN a.id IS NULL THEN NULL
                    ELSE jsonb_build_object('name', NULL, 'nearest', a.name, 'similarity', round(sim::numeric, 4)) END;
    END IF;
    IF writable THEN
        UPDATE dionysus.context_archetypes c
           SET match_count = c.match_count + 1,
               avg_similarity = (coalesce(c.avg_similarity, 0) * c.match_count + sim) / (c.match_count + 1)
         WHERE c.id = a.id;
    END IF;
    RETURN jsonb_build_object('name', a.name, 'similarity', round(sim::numeric, 4), 'turns', a.context_turns,
                              'memories', a.context_memories, 'similarity_threshold', a.similarity_threshold,
                              'triple_depth', a.triple_depth);
END $$;
CREATE OR REPLACE FUNCTION match_archetype(embedding vector) RETURNS jsonb
    LANGUAGE sql AS $$ SELECT dionysus.match_archetype(embedding, NULL::text) $$;
GRANT EXECUTE ON FUNCTION match_archetype(vector, text) TO dionysus_driver;
CREATE OR REPLACE FUNCTION chat_context(message_id uuid, max_memories integer DEFAULT 8, max_turns integer DEFAULT 12,
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
                                FROM dionysus.triples t
                               WHERE (t.subject_id = ANY(ents) OR t.object_id = ANY(ents)) AND dionysus_internal.visible_to(t.private_to, viewer)
                               LIMIT 50);
    END LOOP;
    IF depth = 0 THEN
        ents := '{}';
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_build_object('subject', s.name, 'predicate', t.predicate, 'object', o.name,
                                                 'confidence', t.confidence) ORDER BY t.confidence DESC, t.updated_at DESC), '[]'::jsonb)
      INTO trips
      FROM (SELECT * FROM dionysus.triples
             WHERE (subject_id = ANY(ents) OR object_id = ANY(ents)) AND dionysus_internal.visible_to(private_to, viewer)
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
DO $$
DECLARE
    vschema text := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'vector');
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['dionysus.match_archetype(vector)', 'dionysus.match_archetype(vector, text)',
                             'dionysus.chat_context(uuid, integer, integer, boolean, integer)'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, dionysus, %I', f, vschema);
    END LOOP;
END $$;

-- The dream and the decisions.
CREATE OR REPLACE FUNCTION dream_evidence(dream_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    d dionysus.dreams;
BEGIN
    SELECT * INTO d FROM dionysus.dreams x WHERE x.id = dream_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "dream_id": no dream with id %', dream_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN jsonb_build_object(
        'dream_id', d.id, 'since', d.since, 'until', d.started_at,
        'feedback', coalesce((SELECT jsonb_agg(jsonb_build_object('id', f.id, 'sentiment', f.sentiment, 'content', left(f.content, 500),
                                                                  'about', left(m.content, 300), 'source', f.source,
                                                                  'about_proposal', CASE WHEN p.id IS NOT NULL THEN p.kind || ' ' || p.target || ' (' || p.status || ')' END)
                                                ORDER BY f.created_at)
                                FROM dionysus.feedback f LEFT JOIN dionysus.messages m ON m.id = f.about_message_id
                                LEFT JOIN dionysus.proposals p ON p.id = f.about_proposal_id
                               WHERE f.person = d.person AND f.created_at >= d.since AND f.created_at < d.started_at), '[]'),
        'replies', (SELECT jsonb_build_object('their_turns', count(*) FILTER (WHERE NOT x.is_bot),
                                              'our_turns', count(*) FILTER (WHERE x.is_bot),
                                              'avg_their_length', round(avg(length(x.content)) FILTER (WHERE NOT x.is_bot)),
                                              'avg_our_length', round(avg(length(x.content)) FILTER (WHERE x.is_bot)),
                                              'corrections', count(*) FILTER (WHERE NOT x.is_bot AND x.content ~* '\m(no,|that''s wrong|not what i|i said|actually,|you forgot|wrong)'))
                      FROM dionysus.messages x WHERE x.person = d.person AND x.created_at >= d.since AND x.created_at < d.started_at),
        'contacts', (SELECT jsonb_build_object('sent', count(*) FILTER (WHERE c.decision = 'message'),
                                               'answered', count(*) FILTER (WHERE c.feedback IS NOT NULL AND (c.feedback ->> 'signal')::float8 > -0.5),
                                               'ignored', count(*) FILTER (WHERE c.feedback ->> 'by' = 'silence'))
                       FROM dionysus.contact_evaluations c WHERE c.person = d.person AND c.at >= d.since AND c.at < d.started_at),
        -- As used for this person (their own versions), and nobody else's.
        'templates', (SELECT jsonb_object_agg(k.key, jsonb_build_object('version', t -> 'version', 'template', t -> 'template'))
                        FROM unnest(ARRAY['chat_system', 'extract_message', 'proactive_compose']) k(key),
                             dionysus.prompt_template(k.key, d.person) t),
        'archetypes', (SELECT jsonb_agg(jsonb_build_object('name', a.name, 'description', a.description, 'turns', a.context_turns,
                                                          'memories', a.context_memories, 'similarity_threshold', a.similarity_threshold,
                                                          'triple_depth', a.triple_depth, 'match_count', a.match_count,
                                                          'avg_similarity', a.avg_similarity) ORDER BY a.name)
                         FROM dionysus.context_archetypes a
                        WHERE a.active AND (a.person IS NULL OR a.person = d.person)
                          AND NOT (a.person IS NULL AND EXISTS (SELECT 1 FROM dionysus.context_archetypes o
                                                                 WHERE o.active AND o.person = d.person AND o.name = a.name))),
        'pending_proposals', (SELECT count(*) FROM dionysus.proposals p WHERE p.status IN ('pending', 'discussing') AND p.person = d.person));
END $$;
CREATE OR REPLACE FUNCTION dionysus_internal.check_proposal(kind text, target text, proposal jsonb) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF kind IS NULL OR kind NOT IN ('prompt_template', 'extraction', 'archetype') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "proposals[].kind": % (expected prompt_template, extraction or archetype)', quote_nullable(kind)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF target IS NULL OR target !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "proposals[].target": % must be lower_snake_case', quote_nullable(target)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF proposal IS NULL OR jsonb_typeof(proposal) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "proposals[].proposal": must be an object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF kind IN ('prompt_template', 'extraction') THEN
        IF NOT EXISTS (SELECT 1 FROM dionysus.prompt_templates t WHERE t.key = target) THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].target": no prompt template "%"', target USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- What an approval changes is the person's own version: only a template used for one person.
        IF target NOT IN ('chat_system', 'extract_message', 'proactive_compose') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].target": "%" is not one person''s template (chat_system, extract_message or proactive_compose)', target
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF kind = 'extraction' AND target <> 'extract_message' THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].target": an extraction proposal changes extract_message' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(btrim(proposal ->> 'template'), '') = '' OR length(proposal ->> 'template') > 20000 THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].proposal.template": 1–20000 characters of template' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF proposal ? 'temperature' AND (jsonb_typeof(proposal -> 'temperature') IS DISTINCT FROM 'number'
                                         OR (proposal ->> 'temperature')::numeric NOT BETWEEN 0 AND 2) THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].proposal.temperature": a number within [0, 2]' USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        IF jsonb_typeof(proposal -> 'example_messages') IS DISTINCT FROM 'array'
           OR jsonb_array_length(proposal -> 'example_messages') NOT BETWEEN 1 AND 50
           OR EXISTS (SELECT 1 FROM jsonb_array_elements(proposal -> 'example_messages') e
                       WHERE jsonb_typeof(e) <> 'string' OR btrim(e #>> '{}') = '' OR length(e #>> '{}') > 1000)
           OR NOT (proposal ?& ARRAY['turns', 'memories', 'similarity_threshold', 'triple_depth'])
           OR jsonb_typeof(proposal -> 'turns') <> 'number' OR jsonb_typeof(proposal -> 'memories') <> 'number'
           OR jsonb_typeof(proposal -> 'similarity_threshold') <> 'number' OR jsonb_typeof(proposal -> 'triple_depth') <> 'number'
           OR (proposal ->> 'turns')::numeric <> trunc((proposal ->> 'turns')::numeric)
           OR (proposal ->> 'memories')::numeric <> trunc((proposal ->> 'memories')::numeric)
           OR (proposal ->> 'triple_depth')::numeric <> trunc((proposal ->> 'triple_depth')::numeric)
           OR (proposal ->> 'turns')::numeric NOT BETWEEN 1 AND 20 OR (proposal ->> 'memories')::numeric NOT BETWEEN 0 AND 15
           OR (proposal ->> 'similarity_threshold')::numeric NOT BETWEEN 0.5 AND 0.9 OR (proposal ->> 'triple_depth')::numeric NOT BETWEEN 0 AND 3 THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].proposal": an archetype needs example_messages (1–50 non-empty texts), whole turns (1–20), memories (0–15) and triple_depth (0–3), and similarity_threshold (0.5–0.9)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
END $$;
CREATE OR REPLACE FUNCTION dionysus_internal.record_dream(dream_id uuid, result jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    night dionysus.dreams;
    item jsonb;
    made uuid[] := '{}';
    pid uuid;
    why text;
    refused jsonb := '[]';
BEGIN
    SELECT * INTO night FROM dionysus.dreams x WHERE x.id = dream_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: invalid argument "dream_id": no dream with id %', dream_id USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF night.finished_at IS NOT NULL OR night.person IS NULL
       OR NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.id = night.work_id AND q.status = 'claimed') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "dream_id": dream % is not waiting for its result (recorded already, or its work item is not claimed)', dream_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(result -> 'proposals') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "result.dream.proposals": must be an array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(result -> 'proposals') LOOP
        -- A proposal that does not hold is written down as refused; the others still count.
        BEGIN
            PERFORM dionysus_internal.check_proposal(item ->> 'kind', item ->> 'target', item -> 'proposal');
            IF coalesce(btrim(item ->> 'rationale'), '') = '' THEN
                RAISE EXCEPTION 'dionysus: invalid argument "proposals[].rationale": every proposal says why' USING ERRCODE = 'invalid_parameter_value';
            END IF;
        EXCEPTION WHEN invalid_parameter_value THEN
            GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
            refused := refused || jsonb_build_object('target', left(item ->> 'target', 100), 'reason', why);
            CONTINUE;
        END;
        INSERT INTO dionysus.proposals (dream_id, kind, target, proposal, rationale, evidence, created_at, base_version, person, base_own_version)
        VALUES (dream_id, item ->> 'kind', item ->> 'target', item -> 'proposal', left(item ->> 'rationale', 4000),
                CASE WHEN jsonb_typeof(item -> 'evidence') = 'array' THEN item -> 'evidence' ELSE '[]' END, dionysus.clock_now(),
                (SELECT t.version FROM dionysus.prompt_templates t WHERE t.key = item ->> 'target' AND t.active), night.person,
                (SELECT t.version FROM dionysus.person_prompt_templates t WHERE t.person = night.person AND t.key = item ->> 'target' AND t.active))
        RETURNING id INTO pid;
        made := made || pid;
        PERFORM pg_notify('dionysus_dream', pid::text);
    END LOOP;
    UPDATE dionysus.dreams d
       SET finished_at = now(),
           note = concat_ws(' ', CASE WHEN cardinality(made) = 0 THEN coalesce(nullif(btrim(result ->> 'note'), ''), 'nothing worth proposing tonight')
                                      ELSE nullif(btrim(result ->> 'note'), '') END,
                            CASE WHEN jsonb_array_length(refused) > 0 THEN '(refused: ' || refused::text || ')' END)
     WHERE d.id = dream_id;
    -- Posted to the dream channel (019), with the prompt the driver passed as result.mirror.prompt;
    -- the mirror is best effort: its failure never loses the dream.
    BEGIN
        PERFORM dionysus_internal.mirror_dream(dream_id, made, left(result -> 'mirror' ->> 'prompt', 150000));
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        RAISE WARNING 'dionysus: the dream % was not mirrored to the dream channel: %', dream_id, why;
    END;
    RETURN jsonb_build_object('dream_id', dream_id, 'proposals', to_jsonb(made), 'refused', refused);
END $$;
CREATE OR REPLACE FUNCTION approve_proposal(proposal_id uuid, decided_by text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p dionysus.proposals;
    v integer;
    done jsonb;
    used jsonb;
BEGIN
    IF coalesce(btrim(decided_by), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": who approves must be named' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO p FROM dionysus.proposals x WHERE x.id = proposal_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "proposal_id": no proposal with id %', proposal_id USING ERRCODE = 'no_data_found';
    END IF;
    IF p.person IS DISTINCT FROM btrim(decided_by) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": proposal % is not %''s to decide (only the person its dream was for decides it)',
            proposal_id, decided_by USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p.status NOT IN ('pending', 'discussing') THEN
        RETURN jsonb_build_object('approved', false, 'reason', 'already ' || p.status, 'applied', p.applied);
    END IF;
    PERFORM dionysus_internal.check_proposal(p.kind, p.target, p.proposal);
    IF p.kind IN ('prompt_template', 'extraction') THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.prompt:' || p.target || ':' || p.person, 0));
        -- Written against the template as it was for them then: their own version, else the shared one.
        v := (SELECT t.version FROM dionysus.person_prompt_templates t WHERE t.person = p.person AND t.key = p.target AND t.active);
        IF v IS DISTINCT FROM p.base_own_version
           OR (v IS NULL AND p.base_version IS DISTINCT FROM (SELECT t.version FROM dionysus.prompt_templates t WHERE t.key = p.target AND t.active)) THEN
            RETURN jsonb_build_object('approved', false,
                'reason', format('%s changed since this proposal (it was written against version %s): the next dream can propose again',
                                 p.target, coalesce(p.base_own_version, p.base_version)));
        END IF;
        used := dionysus.prompt_template(p.target, p.person);
        SELECT coalesce(max(t.version), 0) + 1 INTO v FROM dionysus.person_prompt_templates t WHERE t.person = p.person AND t.key = p.target;
        UPDATE dionysus.person_prompt_templates t SET active = false WHERE t.person = p.person AND t.key = p.target AND t.active;
        INSERT INTO dionysus.person_prompt_templates (person, key, version, template, temperature, note, proposal_id, created_at)
        VALUES (p.person, p.target, v, p.proposal ->> 'template', coalesce((p.proposal ->> 'temperature')::float8, (used ->> 'temperature')::float8, 0.7),
                'dream proposal ' || p.id || ', approved by ' || decided_by, p.id, dionysus.clock_now());
        done := jsonb_build_object('template', p.target, 'version', v, 'person', p.person);
    ELSE
        -- A retune of a shared archetype is their own copy of it (the shared one stays everyone else's).
        INSERT INTO dionysus.context_archetypes AS c (name, person, description, example_messages, context_turns, context_memories,
                                                      similarity_threshold, triple_depth, created_by, approved_by, budget_task)
        VALUES (p.target, p.person, p.proposal ->> 'description', ARRAY(SELECT jsonb_array_elements_text(p.proposal -> 'example_messages')),
                (p.proposal ->> 'turns')::int, (p.proposal ->> 'memories')::int, (p.proposal ->> 'similarity_threshold')::float8,
                (p.proposal ->> 'triple_depth')::int, 'ai_dream_cycle', decided_by,
                coalesce((SELECT s.budget_task FROM dionysus.context_archetypes s WHERE s.name = p.target AND s.person IS NULL), 'chat'))
        ON CONFLICT ON CONSTRAINT context_archetypes_name_key
        DO UPDATE SET description = coalesce(EXCLUDED.description, c.description),
               example_messages = EXCLUDED.example_messages, context_turns = EXCLUDED.context_turns,
               context_memories = EXCLUDED.context_memories, similarity_threshold = EXCLUDED.similarity_threshold,
               triple_depth = EXCLUDED.triple_depth, approved_by = EXCLUDED.approved_by, active = true, updated_at = now();
        done := jsonb_build_object('archetype', p.target, 'person', p.person);
    END IF;
    UPDATE dionysus.proposals x SET status = 'approved', decided_at = dionysus.clock_now(), decided_by = approve_proposal.decided_by,
           applied = done
     WHERE x.id = p.id;
    RETURN jsonb_build_object('approved', true, 'applied', done);
END $$;
CREATE OR REPLACE FUNCTION reject_proposal(proposal_id uuid, decided_by text, note text DEFAULT NULL, discuss boolean DEFAULT false) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p dionysus.proposals;
BEGIN
    IF coalesce(btrim(decided_by), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": who decides must be named' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO p FROM dionysus.proposals x WHERE x.id = proposal_id FOR UPDATE;
    IF FOUND AND p.person IS DISTINCT FROM btrim(decided_by) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": proposal % is not %''s to decide (only the person its dream was for decides it)',
            proposal_id, decided_by USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE dionysus.proposals x
       SET status = CASE WHEN discuss THEN 'discussing' ELSE 'rejected' END,
           decided_at = CASE WHEN discuss THEN NULL ELSE dionysus.clock_now() END,
           decided_by = reject_proposal.decided_by, decision_note = note
     WHERE x.id = proposal_id AND x.status IN ('pending', 'discussing');
    RETURN FOUND;
END $$;
REVOKE EXECUTE ON FUNCTION dionysus_internal.record_dream(uuid, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION reject_proposal(uuid, text, text, boolean) FROM PUBLIC;
REVOKE INSERT, UPDATE ON proposals FROM dionysus_driver;

-- Mind rules: a person's own only; the built-ins are the owner's.
CREATE OR REPLACE FUNCTION add_rule(person text, words text, rule jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    who text := btrim(add_rule.person);
    r dionysus.mind_rules;
    nm text;
BEGIN
    IF who IS NULL OR who = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF words IS NULL OR btrim(words) = '' OR length(words) > 2000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "words": the person''s words, 1 to 2,000 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rule IS NULL OR jsonb_typeof(rule) <> 'object' OR octet_length(rule::text) > 4096 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "rule": must be a JSON object of at most 4 kB' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(rule) k WHERE k NOT IN ('name', 'trigger', 'condition', 'intents', 'description')) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "rule": only name, trigger, condition, intents and description'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(rule -> 'trigger') IS DISTINCT FROM 'string' OR NOT (dionysus.rule_vocabulary() -> 'triggers') ? (rule ->> 'trigger') THEN
        RAISE EXCEPTION 'dionysus: invalid rule: trigger "%" is not one of rule_vocabulary()''s triggers', rule ->> 'trigger'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.check_rule_condition(coalesce(rule -> 'condition', '{}'::jsonb));
    PERFORM dionysus_internal.check_rule_intents(rule -> 'intents');
    nm := left(btrim(coalesce(rule ->> 'name', rule ->> 'description', words)), 80);
    IF nm = '' THEN
        RAISE EXCEPTION 'dionysus: invalid rule: name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.person_row(who);
    IF (SELECT count(*) FROM dionysus.mind_rules m WHERE m.person = who AND m.status = 'active')
       >= dionysus_internal.proactive_setting('rules_per_person') THEN
        RAISE EXCEPTION 'dionysus: % has % rules already (rules_per_person); remove one first', who,
                        dionysus_internal.proactive_setting('rules_per_person') USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF EXISTS (SELECT 1 FROM dionysus.mind_rules m WHERE m.person = who AND m.status = 'active' AND m.name = nm) THEN
        RAISE EXCEPTION 'dionysus: % already has a rule named "%"', who, nm USING ERRCODE = 'unique_violation';
    END IF;
    INSERT INTO dionysus.mind_rules (name, person, trigger, condition, intents, origin, description, words, created_at)
    VALUES (nm, who, rule ->> 'trigger', coalesce(rule -> 'condition', '{}'::jsonb), rule -> 'intents', 'person',
            left(coalesce(nullif(btrim(rule ->> 'description'), ''), nm), 300), left(words, 2000), dionysus.clock_now())
    RETURNING * INTO r;
    RETURN jsonb_build_object('rule_id', r.id, 'name', r.name, 'trigger', r.trigger, 'condition', r.condition, 'intents', r.intents,
                              'description', r.description);
END $$;
REVOKE EXECUTE ON FUNCTION add_rule(text, text, jsonb) FROM PUBLIC;
CREATE OR REPLACE FUNCTION dionysus_internal.protect_built_in_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.weight, NEW.status, NEW.ended_at, NEW.decayed_at) IS DISTINCT FROM (OLD.weight, OLD.status, OLD.ended_at, OLD.decayed_at)
       AND NOT has_table_privilege('dionysus.mind_rules', 'INSERT') THEN
        RAISE EXCEPTION 'dionysus: rule % is a built-in: only the owner changes it', OLD.id USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
GRANT EXECUTE ON FUNCTION dionysus_internal.protect_built_in_rules() TO dionysus_driver;
CREATE TRIGGER mind_rules_built_in BEFORE UPDATE ON mind_rules
    FOR EACH ROW WHEN (OLD.person IS NULL) EXECUTE FUNCTION dionysus_internal.protect_built_in_rules();
REVOKE INSERT, UPDATE ON mind_rules FROM dionysus_driver;
GRANT UPDATE (use_count, last_used_at, weight, decayed_at, status, ended_at) ON mind_rules TO dionysus_driver;

-- Episodes: by person as well as source. An open episode of one person's words takes their
-- person (their next memory joins it); one that holds several people's words is closed, and
-- theirs go on apart. A conversation's channel stays its people's shared episode.
DROP INDEX episodes_one_open_per_source;
ALTER TABLE episodes ADD COLUMN person text;
WITH whose AS (
    SELECT e.id, array_agg(DISTINCT CASE WHEN cardinality(m.private_to) = 1 THEN m.private_to[1] END) AS people
      FROM episodes e JOIN episode_memories em ON em.episode_id = e.id JOIN memories m ON m.id = em.memory_id
     WHERE e.ended_at IS NULL AND e.source NOT LIKE 'conversation:%'
     GROUP BY e.id)
UPDATE episodes e SET person = CASE WHEN cardinality(w.people) = 1 THEN w.people[1] END,
       ended_at = CASE WHEN cardinality(w.people) > 1 THEN greatest(e.last_event_at, e.started_at) END
  FROM whose w WHERE w.id = e.id;
CREATE UNIQUE INDEX episodes_one_open_per_source ON episodes (source, person) NULLS NOT DISTINCT WHERE ended_at IS NULL;

COMMENT ON FUNCTION match_archetype(vector, text) IS
    'The active archetype nearest a message''s embedding with its context shape, among the shared ones and the person''s own (theirs stands in for a shared one of its name), when at least archetype_min_similarity near (else only the nearest name); counts the match unless on a standby.';
COMMENT ON FUNCTION match_archetype(vector) IS 'match_archetype among the shared archetypes only (a message of nobody''s).';
COMMENT ON FUNCTION approve_proposal(uuid, text) IS
    'The person''s approval (decided_by: the person its dream was for, else 42501): a template proposal becomes their own active version of the template, an archetype their own. The only way a dream changes anything, and for nobody else.';
COMMENT ON FUNCTION reject_proposal(uuid, text, text, boolean) IS
    'The person rejects a proposal (decided_by: the person its dream was for, else 42501; discuss: keeps it open as under discussion); false if it is no longer open.';
COMMENT ON TABLE person_prompt_templates IS 'A person''s own versions of a prompt template (approved dream proposals of theirs): used for them instead of the shared one, for nobody else.';
COMMENT ON FUNCTION prompt_template(text, text) IS 'The template as used for a person: their own active version, else the shared one ({key, version, template, temperature[, person]}).';
COMMENT ON FUNCTION activate_own_template(text, text, integer) IS 'Makes one of a person''s own versions of a template theirs again (version NULL: the shared one): rollback in one call.';
COMMENT ON FUNCTION dionysus_internal.proposal_one_way() IS 'Trigger: a proposal''s status moves one way and a decision stands, whoever writes (42501).';
COMMENT ON FUNCTION dionysus_internal.protect_built_in_rules() IS 'Trigger: a built-in rule''s weight and status change only by a role that may write rules (the owner), not the driver''s (42501).';

-- ---------------------------------------------------------------------------------------
-- A person can leave (§2): forget_person erases everything one person said and what was derived from it;
-- export_person shows it all first (sql/031_erasure.sql, copied whole).
-- ---------------------------------------------------------------------------------------
-- A person can leave: forget_person and export_person (issue #33 §2).
--
-- Several people share one companion. forget_person(person) erases, in one transaction, what
-- that person said and everything derived from it; export_person(person) shows all of it first
-- (data portability, and what forget_person will remove).
--
-- Whose words a row holds is what the store already records:
--   their turns and the companion's turns to them    messages.person
--   what was made from their words                   private_to (memories, triples, goals,
--                                                    heartbeat_log, mirror_items; 013), and the
--                                                    provenance 'conversation:<their turn>'
--   what the companion keeps about them              a person / of_person column (people and
--                                                    their rhythm and signals, known persons,
--                                                    north stars, objectives, feedback, censors,
--                                                    rules, evaluations, learning, threads,
--                                                    working memory, procedures, dreams, imports)
--   what points at any of those                      by id, in jsonb (work items, mirror cards,
--                                                    memory changes, censor events, events)
-- What mixed several people is redacted or re-derived, never kept with their words in it:
--   - a memory, triple or goal private to them and someone else (a heartbeat that saw both)
--     cannot be split by person: it goes; what the others said is in their own turns.
--   - an episode that holds their turns and another's: their turns leave it, and its summary,
--     lessons, outcome and vector are cleared and its summary queued again (enqueue_language_work
--     re-summarises what remains); an episode with nothing left goes.
--   - a heartbeat whose context held their words keeps its number and energy, not its words
--     (context, decision, narrative); one still running is closed, so its late commit is refused.
--   - what only pointed at rows that went (entities and concepts no one else names, lexicon
--     words no memory has any more, staged re-index vectors and tombstones of their turns) goes.
--   - the embedding cache is keyed by a hash of each text embedded, their questions (recall,
--     MCP) among them, and which were theirs is not recorded: it is emptied (it refills).
-- Not theirs and kept: what other people said (their own turns may quote or answer them), the
-- companion's own self-model (identity, worldview), templates and archetypes a dream proposal
-- changed once approved (the proposal's rationale and evidence are erased).
--
-- Who may call it: the owner, and the driver's role on the person's own confirmed request
-- (`/forgetme`, then `/forgetme confirm`): SECURITY DEFINER with a pinned search_path, so the
-- driver's role needs no DELETE on the tables; not executable by PUBLIC.
--
-- Lock order (002): their imports' rows (0), the channels they talk in (1), the heartbeat state
-- (2), the agent state (3), the goals lock (4), their heartbeats, work items, outbox rows and
-- contact evaluations (5), their people row and north-star lock (6), the learn lock, the episode
-- locks of the episodes they are in, their people and objectives locks (7), rows (8), their
-- working-memory lock (9); the lexicon lock last (refresh_lexicon holds nothing else).

-- Whether anything of a person is stored (forget_person and export_person refuse a stranger).
CREATE FUNCTION dionysus_internal.person_is_known(who text) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM dionysus.people p WHERE p.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.messages m WHERE m.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.memories m WHERE who = ANY (m.private_to))
        OR EXISTS (SELECT 1 FROM dionysus.triples t WHERE who = ANY (t.private_to))
        OR EXISTS (SELECT 1 FROM dionysus.north_stars n WHERE n.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.objectives o WHERE o.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.feedback f WHERE f.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.censors c WHERE c.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.mind_rules r WHERE r.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.known_persons k WHERE k.of_person = who)
        OR EXISTS (SELECT 1 FROM dionysus.imports i WHERE i.person = who)
$$;

-- The person argument, trimmed, or the error that names it.
CREATE FUNCTION dionysus_internal.require_known_person(person text) RETURNS text
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must name a person (such as discord:123)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT dionysus_internal.person_is_known(btrim(person)) THEN
        RAISE EXCEPTION 'dionysus: argument "person": nothing of % is stored here', quote_literal(btrim(person))
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN btrim(person);
END $$;

-- Whether a jsonb value holds, anywhere in it, a string equal to one of `keys` (ids, a person key).
CREATE FUNCTION dionysus_internal.jsonb_mentions(j jsonb, keys text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT j IS NOT NULL AND EXISTS (SELECT 1 FROM jsonb_path_query(j, 'strict $.**') v
                                      WHERE jsonb_typeof(v) = 'string' AND (v #>> '{}') = ANY (keys))
$$;

CREATE FUNCTION forget_person(person text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    who text := dionysus_internal.require_known_person(person);
    msg_ids uuid[];
    sources text[];
    mem_ids uuid[];
    hb_ids uuid[];
    dream_ids uuid[];
    ep_ids uuid[];
    obj_ids uuid[];
    keys text[];
    work_ids uuid[];
    ent_ids uuid[];
    concept_ids uuid[];
    lexemes text[];
    r record;
    k bigint;
    gone jsonb := '{}';
BEGIN
    -- 0, 1: their imports, then each channel they talk in (in one order: erasures never wait
    -- on each other in a cycle), so no turn of theirs is logged while they are erased.
    PERFORM 1 FROM dionysus.imports i WHERE i.person = who ORDER BY i.id FOR UPDATE;
    FOR r IN SELECT DISTINCT m.platform, m.channel_id FROM dionysus.messages m WHERE m.person = who ORDER BY 1, 2 LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.channel:' || r.platform || ':' || r.channel_id, 0));
    END LOOP;
    -- 2-4.
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));

    -- What is theirs.
    msg_ids := ARRAY(SELECT m.id FROM dionysus.messages m WHERE m.person = who);
    sources := ARRAY(SELECT dionysus_internal.turn_source(m.id, m.import_id) FROM dionysus.messages m
                      WHERE m.person = who AND NOT m.is_bot);
    mem_ids := ARRAY(SELECT m.id FROM dionysus.memories m WHERE who = ANY (m.private_to)
                     UNION SELECT m.memory_id FROM dionysus.messages m WHERE m.id = ANY (msg_ids) AND m.memory_id IS NOT NULL
                     UNION SELECT m.id FROM dionysus.memories m WHERE m.source = ANY (sources)
                     UNION SELECT n.memory_id FROM dionysus.north_stars n WHERE n.person = who);
    dream_ids := ARRAY(SELECT d.id FROM dionysus.dreams d WHERE d.person = who);
    ep_ids := ARRAY(SELECT DISTINCT em.episode_id FROM dionysus.episode_memories em WHERE em.memory_id = ANY (mem_ids)
                    UNION SELECT e.id FROM dionysus.episodes e WHERE who = ANY (e.participants));
    obj_ids := ARRAY(SELECT o.id FROM dionysus.objectives o WHERE o.person = who);
    -- Everything of theirs an id in jsonb may point at.
    keys := ARRAY[who] || msg_ids::text[] || mem_ids::text[] || dream_ids::text[] || obj_ids::text[]
            || ARRAY(SELECT f.id::text FROM dionysus.feedback f WHERE f.person = who)
            || ARRAY(SELECT c.id::text FROM dionysus.contact_evaluations c WHERE c.person = who)
            || ARRAY(SELECT o.id::text FROM dionysus.outbox o WHERE o.person = who)
            || ARRAY(SELECT p.id::text FROM dionysus.proposals p WHERE p.dream_id = ANY (dream_ids))
            || ARRAY(SELECT c.id::text FROM dionysus.censors c WHERE c.person = who);
    -- Heartbeats that saw their words, or named them (whom a reach-out could go to).
    hb_ids := ARRAY(SELECT h.id FROM dionysus.heartbeat_log h
                     WHERE who = ANY (h.private_to) OR dionysus_internal.jsonb_mentions(h.context, keys)
                        OR dionysus_internal.jsonb_mentions(h.environment_snapshot, keys)
                        OR dionysus_internal.jsonb_mentions(h.goals_snapshot, keys)
                        OR dionysus_internal.jsonb_mentions(h.decision, keys)
                        OR dionysus_internal.jsonb_mentions(h.actions_taken, keys));
    keys := keys || hb_ids::text[];

    -- 5: their heartbeats keep their numbers, not their words; one still running is closed.
    PERFORM 1 FROM dionysus.heartbeat_log h WHERE h.id = ANY (hb_ids) ORDER BY h.id FOR UPDATE;
    UPDATE dionysus.heartbeat_state SET in_flight = NULL, last_heartbeat_at = now(),
           next_heartbeat_at = dionysus.clock_now() + make_interval(mins => dionysus_internal.heartbeat_interval_minutes()),
           updated_at = now()
     WHERE id = 1 AND in_flight = ANY (hb_ids);
    UPDATE dionysus.heartbeat_log h
       SET context = '{}', environment_snapshot = NULL, goals_snapshot = NULL, decision = NULL, decision_reasoning = NULL,
           actions_taken = '[]', actions_rejected = '[]', goals_modified = '[]', narrative = NULL,
           private_to = nullif(array_remove(h.private_to, who), '{}'),
           status = CASE WHEN h.status IN ('in_flight', 'committed') THEN 'recovered' ELSE h.status END,
           ended_at = coalesce(h.ended_at, now()),
           recovery_error = CASE WHEN h.status IN ('in_flight', 'committed') THEN 'erased: a person in its context left' END
     WHERE h.id = ANY (hb_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('heartbeats_redacted', k);
    work_ids := ARRAY(SELECT q.id FROM dionysus.work_queue q
                       WHERE q.heartbeat_id = ANY (hb_ids)
                          OR (q.action = 'summarize_episode' AND (q.params ->> 'episode_id') = ANY (ep_ids::text[]))
                          OR dionysus_internal.jsonb_mentions(q.params, keys)
                          OR dionysus_internal.jsonb_mentions(q.result, keys));
    PERFORM 1 FROM dionysus.work_queue q WHERE q.id = ANY (work_ids) ORDER BY q.id FOR UPDATE;
    DELETE FROM dionysus.work_queue q WHERE q.id = ANY (work_ids);
    gone := gone || jsonb_build_object('work_items', cardinality(work_ids));
    DELETE FROM dionysus.outbox o WHERE o.person = who OR o.reply_to = ANY (msg_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('outbox', k);
    DELETE FROM dionysus.contact_evaluations c WHERE c.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('contact_evaluations', k);

    -- 6, 7.
    PERFORM 1 FROM dionysus.people p WHERE p.person = who FOR UPDATE;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.north_star:' || who, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.learn', 0));
    FOR r IN SELECT DISTINCT e.source FROM dionysus.episodes e WHERE e.id = ANY (ep_ids) ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.episode:' || r.source, 0));
    END LOOP;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.people:' || who, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.objectives:' || who, 0));

    -- 8: rows. What only pointed at what goes is noted first.
    PERFORM 1 FROM dionysus.episodes e WHERE e.id = ANY (ep_ids) ORDER BY e.id FOR UPDATE;
    lexemes := ARRAY(SELECT DISTINCT l FROM dionysus.memories m, unnest(tsvector_to_array(m.search)) l WHERE m.id = ANY (mem_ids));
    concept_ids := ARRAY(SELECT DISTINCT mc.concept_id FROM dionysus.memory_concepts mc WHERE mc.memory_id = ANY (mem_ids));
    ent_ids := ARRAY(SELECT t.subject_id FROM dionysus.triples t WHERE who = ANY (t.private_to) OR t.source = ANY (sources)
                     UNION SELECT t.object_id FROM dionysus.triples t WHERE who = ANY (t.private_to) OR t.source = ANY (sources));

    -- Their north stars first: a memory that is one refuses to go otherwise (017).
    DELETE FROM dionysus.north_stars n WHERE n.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('north_stars', k);
    DELETE FROM dionysus.triples t WHERE who = ANY (t.private_to) OR t.source = ANY (sources);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('triples', k);
    DELETE FROM dionysus.entities x
     WHERE x.id = ANY (ent_ids)
       AND NOT EXISTS (SELECT 1 FROM dionysus.triples t WHERE t.subject_id = x.id OR t.object_id = x.id);
    DELETE FROM dionysus.goals g WHERE who = ANY (g.private_to);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('goals', k);
    DELETE FROM dionysus.memory_changes c
     WHERE c.target_id = ANY (mem_ids) OR c.heartbeat_id = ANY (hb_ids) OR c.work_id = ANY (work_ids)
        OR dionysus_internal.jsonb_mentions(c.before, keys) OR dionysus_internal.jsonb_mentions(c.after, keys);
    DELETE FROM dionysus.decay_log d WHERE d.memory_id = ANY (mem_ids);
    DELETE FROM dionysus.memories m WHERE m.id = ANY (mem_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('memories', k);
    DELETE FROM dionysus.memory_access_log l WHERE l.memory_id = ANY (mem_ids);
    DELETE FROM dionysus.concepts c
     WHERE c.id = ANY (concept_ids) AND NOT EXISTS (SELECT 1 FROM dionysus.memory_concepts mc WHERE mc.concept_id = c.id);
    -- Neighbourhoods that listed them are computed again.
    INSERT INTO dionysus.neighborhood_queue (memory_id)
    SELECT n.memory_id FROM dionysus.memory_neighborhoods n WHERE n.neighbor_ids && mem_ids;

    -- The turns themselves (and what was staged from them for a re-index, by cascade).
    DELETE FROM dionysus.messages m WHERE m.id = ANY (msg_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('messages', k);
    -- An import of theirs that brought in someone else's turns too keeps its row (the turns point at it).
    DELETE FROM dionysus.imports i
     WHERE i.person = who AND NOT EXISTS (SELECT 1 FROM dionysus.messages m WHERE m.import_id = i.id);

    -- Episodes: one with nothing left goes; one with other people's turns left forgets its
    -- summary and is summarised again from what remains.
    DELETE FROM dionysus.episodes e
     WHERE e.id = ANY (ep_ids) AND NOT EXISTS (SELECT 1 FROM dionysus.episode_memories em WHERE em.episode_id = e.id);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('episodes', k);
    UPDATE dionysus.episodes e
       SET summary = NULL, summary_embedding = NULL, lessons = '{}', outcome = NULL, surprise = NULL,
           participants = dionysus_internal.episode_participants(e.id),
           memory_count = (SELECT count(*) FROM dionysus.episode_memories em WHERE em.episode_id = e.id)
     WHERE e.id = ANY (ep_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('episodes_to_summarise_again', k);

    -- What the companion kept about them.
    DELETE FROM dionysus.objectives o WHERE o.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('objectives', k);
    DELETE FROM dionysus.feedback f WHERE f.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('feedback', k);
    DELETE FROM dionysus.censor_events e
     WHERE e.context ->> 'person' = who OR dionysus_internal.jsonb_mentions(e.context, keys);
    DELETE FROM dionysus.censors c
     WHERE c.person = who OR c.learned_from_id = ANY (msg_ids) OR c.learned_from_id = ANY (hb_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('censors', k);
    DELETE FROM dionysus.mind_rules x WHERE x.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('rules', k);
    DELETE FROM dionysus.rule_firings x WHERE x.person = who OR dionysus_internal.jsonb_mentions(x.inputs, keys);
    DELETE FROM dionysus.learning_log x WHERE x.person = who;
    DELETE FROM dionysus.events x WHERE x.person = who OR dionysus_internal.jsonb_mentions(x.payload, keys);
    -- Dream proposals made from their night: one already applied keeps what it changed, not why.
    UPDATE dionysus.proposals p SET rationale = '(erased: its person left)', evidence = '[]', decision_note = NULL
     WHERE p.dream_id = ANY (dream_ids) AND p.status = 'approved';
    DELETE FROM dionysus.proposals p WHERE p.dream_id = ANY (dream_ids) AND p.status <> 'approved';
    DELETE FROM dionysus.dreams d WHERE d.id = ANY (dream_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('dreams', k);
    DELETE FROM dionysus.mirror_items i
     WHERE i.person = who OR who = ANY (i.private_to) OR i.subject_id::text = ANY (keys)
        OR dionysus_internal.jsonb_mentions(i.card, keys);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('mirror_items', k);
    DELETE FROM dionysus.known_persons x WHERE x.of_person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('people_in_their_life', k);
    DELETE FROM dionysus.person_relations x WHERE x.of_person = who;
    DELETE FROM dionysus.person_aliases x WHERE x.of_person = who;
    DELETE FROM dionysus.procedure_activations x WHERE x.person = who;
    DELETE FROM dionysus.procedures x WHERE x.person = who;
    -- Re-index staging of what went: vectors of their memories, episodes and objectives, and
    -- the tombstones of their turns (and of this erasure's own deletions).
    DELETE FROM dionysus.reindex_vectors v
     WHERE (v.kind = 'memory' AND v.target_id = ANY (mem_ids)) OR (v.kind = 'episode' AND v.target_id = ANY (ep_ids))
        OR (v.kind = 'objective' AND v.target_id = ANY (obj_ids));
    DELETE FROM dionysus.reindex_tombstones t WHERE t.source = ANY (sources) OR t.txid = txid_current();
    -- A cache keyed by a hash of each text embedded: which of them were theirs is not recorded.
    DELETE FROM dionysus.embedding_cache;
    -- Their row last (rhythm, signals and contact weights go with it).
    DELETE FROM dionysus.people p WHERE p.person = who;

    -- 9: their working memory.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.working_memory:' || who, 0));
    DELETE FROM dionysus.working_memories x WHERE x.person = who;
    DELETE FROM dionysus.working_memory_sessions x WHERE x.person = who;
    DELETE FROM dionysus.open_threads x WHERE x.person = who;

    -- The lexicon forgets the words no memory has any more.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.lexicon', 0));
    UPDATE dionysus.lexicon x
       SET ndoc = (SELECT count(*) FROM dionysus.memories m WHERE m.status = 'active' AND m.search @@ quote_literal(x.lexeme)::tsquery)
     WHERE x.lexeme = ANY (lexemes);
    DELETE FROM dionysus.lexicon x WHERE x.lexeme = ANY (lexemes) AND x.ndoc = 0;
    RETURN jsonb_build_object('person', who, 'forgotten', gone);
END $$;
REVOKE EXECUTE ON FUNCTION forget_person(text) FROM PUBLIC;
COMMENT ON FUNCTION forget_person(text) IS
    'Erases, in one transaction, everything one person said and everything derived from it (turns, memories, facts, triples, goals, sentence vectors, people in their life, north stars, objectives, feedback, censors, rules, evaluations, learning, dreams, threads, working memory, work items, outbox, mirror items, re-index staging, tombstones); what mixed them with others is redacted (heartbeats) or re-derived (episodes: summary cleared and queued again); the embedding cache is emptied. Owner, or the driver on the person''s own confirmed request (/forgetme). Returns counts. P0002 for a person of whom nothing is stored.';
COMMENT ON FUNCTION dionysus_internal.person_is_known(text) IS 'Whether anything of a person is stored (their row, turns, memories, north stars, objectives, feedback, censors, rules, people, imports).';
COMMENT ON FUNCTION dionysus_internal.require_known_person(text) IS 'The person argument trimmed, or 22023 (empty) / P0002 (nothing of them stored), naming the argument.';
COMMENT ON FUNCTION dionysus_internal.jsonb_mentions(jsonb, text[]) IS 'Whether a jsonb value holds, at any depth, a string equal to one of the keys (an id, a person key).';

-- Everything the store holds about one person, as JSON (`dionysus export PERSON`): what they
-- said, what was learned from it, why each contact was made. What is private to them and
-- someone else is listed without its words (they are the other person's too); an episode they
-- shared shows who else took part, not its summary. The same rows forget_person removes.
CREATE FUNCTION export_person(person text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    who text := dionysus_internal.require_known_person(person);
    own text[] := ARRAY[who];
BEGIN
    RETURN jsonb_build_object(
        'person', who,
        'exported_at', now(),
        'profile', (SELECT to_jsonb(p) || jsonb_build_object(
                        'rhythm', (SELECT coalesce(jsonb_agg(to_jsonb(r) - 'person' ORDER BY r.hour_of_week), '[]') FROM dionysus.person_rhythm r WHERE r.person = who),
                        'signals', (SELECT coalesce(jsonb_agg(to_jsonb(s) - 'person' ORDER BY s.said_at), '[]') FROM dionysus.person_signals s WHERE s.person = who),
                        'contact_weights', (SELECT coalesce(jsonb_agg(to_jsonb(w) - 'person' ORDER BY w.input), '[]') FROM dionysus.person_contact_weights w WHERE w.person = who))
                      FROM dionysus.people p WHERE p.person = who),
        'messages', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'at', m.created_at, 'from', CASE WHEN m.is_bot THEN 'companion' ELSE 'them' END,
                                                                 'proactive', m.is_proactive, 'platform', m.platform, 'channel_id', m.channel_id,
                                                                 'content', m.content, 'imported', m.import_id IS NOT NULL)
                                               ORDER BY m.created_at, m.id), '[]')
                       FROM dionysus.messages m WHERE m.person = who),
        'memories', (SELECT coalesce(jsonb_agg(to_jsonb(m) - 'embedding' - 'search'
                                                 || jsonb_build_object('fact', (SELECT to_jsonb(f) - 'memory_id' FROM dionysus.facts f WHERE f.memory_id = m.id))
                                               ORDER BY m.created_at, m.id), '[]')
                       FROM dionysus.memories m WHERE m.private_to = own),
        'shared_memories', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'type', m.type, 'created_at', m.created_at,
                                                                        'shared_with', cardinality(m.private_to) - 1) ORDER BY m.created_at, m.id), '[]')
                              FROM dionysus.memories m WHERE who = ANY (m.private_to) AND m.private_to <> own),
        'triples', (SELECT coalesce(jsonb_agg(jsonb_build_object('subject', s.name, 'predicate', t.predicate, 'object', o.name,
                                                                'confidence', t.confidence, 'source', t.source, 'created_at', t.created_at)
                                              ORDER BY t.created_at, t.id), '[]')
                      FROM dionysus.triples t JOIN dionysus.entities s ON s.id = t.subject_id JOIN dionysus.entities o ON o.id = t.object_id
                     WHERE t.private_to = own),
        'goals', (SELECT coalesce(jsonb_agg(to_jsonb(g) ORDER BY g.created_at), '[]') FROM dionysus.goals g WHERE g.private_to = own),
        'people_in_their_life', (SELECT coalesce(jsonb_agg(dionysus_internal.person_json(k, true) ORDER BY k.seq), '[]')
                                   FROM dionysus.known_persons k WHERE k.of_person = who),
        'north_stars', (SELECT coalesce(jsonb_agg(to_jsonb(n) - 'person' ORDER BY n.created_at), '[]') FROM dionysus.north_stars n WHERE n.person = who),
        'objectives', (SELECT coalesce(jsonb_agg(to_jsonb(o) - 'person' - 'embedding' ORDER BY o.created_at), '[]') FROM dionysus.objectives o WHERE o.person = who),
        'feedback', (SELECT coalesce(jsonb_agg(to_jsonb(f) - 'person' ORDER BY f.created_at), '[]') FROM dionysus.feedback f WHERE f.person = who),
        'censors', (SELECT coalesce(jsonb_agg(to_jsonb(c) - 'person' - 'embedding' ORDER BY c.created_at), '[]') FROM dionysus.censors c WHERE c.person = who),
        'rules', (SELECT coalesce(jsonb_agg(to_jsonb(r) - 'person' ORDER BY r.created_at), '[]') FROM dionysus.mind_rules r WHERE r.person = who),
        -- Why each contact was made (or not): its inputs, threshold, gates, decision and how it landed.
        'contacts', (SELECT coalesce(jsonb_agg(to_jsonb(c) - 'person' ORDER BY c.at, c.recorded_at), '[]') FROM dionysus.contact_evaluations c WHERE c.person = who),
        'learning', (SELECT coalesce(jsonb_agg(to_jsonb(l) - 'person' ORDER BY l.at, l.id), '[]') FROM dionysus.learning_log l WHERE l.person = who),
        'episodes', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'started_at', e.started_at, 'ended_at', e.ended_at,
                                                                 'others', cardinality(array_remove(e.participants, who)),
                                                                 'summary', CASE WHEN e.participants <@ own THEN e.summary END,
                                                                 'lessons', CASE WHEN e.participants <@ own THEN to_jsonb(e.lessons) END,
                                                                 'outcome', e.outcome) ORDER BY e.started_at, e.id), '[]')
                       FROM dionysus.episodes e
                      WHERE who = ANY (e.participants)
                         OR EXISTS (SELECT 1 FROM dionysus.episode_memories em JOIN dionysus.messages m ON m.memory_id = em.memory_id
                                     WHERE em.episode_id = e.id AND m.person = who)),
        'open_threads', (SELECT coalesce(jsonb_agg(to_jsonb(t) - 'person' - 'embedding' ORDER BY t.opened_at), '[]') FROM dionysus.open_threads t WHERE t.person = who),
        'working_memory_sessions', (SELECT coalesce(jsonb_agg(to_jsonb(s) - 'person' ORDER BY s.started_at), '[]') FROM dionysus.working_memory_sessions s WHERE s.person = who),
        'procedures', (SELECT coalesce(jsonb_agg(to_jsonb(p) - 'person' - 'embedding' ORDER BY p.created_at), '[]') FROM dionysus.procedures p WHERE p.person = who),
        'dreams', (SELECT coalesce(jsonb_agg(to_jsonb(d) - 'person' || jsonb_build_object('proposals',
                                                (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.created_at), '[]') FROM dionysus.proposals p WHERE p.dream_id = d.id))
                                             ORDER BY d.local_date), '[]') FROM dionysus.dreams d WHERE d.person = who),
        'imports', (SELECT coalesce(jsonb_agg(to_jsonb(i) - 'person' ORDER BY i.started_at), '[]') FROM dionysus.imports i WHERE i.person = who),
        'outbox', (SELECT coalesce(jsonb_agg(to_jsonb(o) - 'person' ORDER BY o.created_at), '[]') FROM dionysus.outbox o WHERE o.person = who),
        'events', (SELECT coalesce(jsonb_agg(to_jsonb(x) - 'person' ORDER BY x.at, x.id), '[]') FROM dionysus.events x WHERE x.person = who),
        'heartbeats_that_saw_their_words', (SELECT count(*) FROM dionysus.heartbeat_log h WHERE who = ANY (h.private_to)));
END $$;
COMMENT ON FUNCTION export_person(text) IS
    'Everything stored about one person, as JSON (dionysus export PERSON): profile, their turns and the companion''s to them, memories and facts private to them, triples, goals, the people in their life, north stars, objectives, feedback, censors, rules, every contact evaluation (why a contact was made), learning, episodes, threads, procedures, dreams, imports, outbox, events. What is private to them and others is listed without its words. P0002 for a person of whom nothing is stored.';

-- 900_api.sql grants a fresh install these; an updated one needs them here.
GRANT EXECUTE ON FUNCTION forget_person(text), export_person(text), dionysus_internal.person_is_known(text),
    dionysus_internal.require_known_person(text), dionysus_internal.jsonb_mentions(jsonb, text[]) TO dionysus_driver;
-- (end of: A person can leave)
