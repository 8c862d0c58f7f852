-- Dionysus 0.18.0 → 0.19.0: Trust III (issue #33). Each section names what it mends.

-- Backups (§1): true while a superuser's session restores a dump; defined first, as the
-- triggers below may call it (the rest of §1 comes last).
CREATE FUNCTION dionysus_internal.restoring() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT current_setting('check_function_bodies') = 'off'
       AND coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), false)
$$;
COMMENT ON FUNCTION dionysus_internal.restoring() IS
    'True while this session restores a dump (pg_dump''s scripts and pg_restore set check_function_bodies off, as extension scripts do) as a superuser: triggers that derive or stamp rows then let a restored row in as it was.';

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
-- companion's own self-model (identity, worldview), the shared templates and archetypes (a dream
-- changes only its person's own versions, which go with them).
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
            || ARRAY(SELECT p.id::text FROM dionysus.proposals p WHERE p.dream_id = ANY (dream_ids) OR p.person = who)
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
    -- Their dreams' proposals, decided or not, and what an approval made theirs alone (017):
    -- their own template versions and archetypes.
    DELETE FROM dionysus.person_prompt_templates t WHERE t.person = who;
    DELETE FROM dionysus.context_archetypes a WHERE a.person = who;
    DELETE FROM dionysus.proposals p WHERE p.dream_id = ANY (dream_ids) OR p.person = who;
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
    'Erases, in one transaction, everything one person said and everything derived from it (turns, memories, facts, triples, goals, sentence vectors, people in their life, north stars, objectives, feedback, censors, rules, evaluations, learning, dreams and their proposals, their own templates and archetypes, threads, working memory, work items, outbox, mirror items, re-index staging, tombstones); what mixed them with others is redacted (heartbeats) or re-derived (episodes: summary cleared and queued again); the embedding cache is emptied. Owner, or the driver on the person''s own confirmed request (/forgetme). Returns counts. P0002 for a person of whom nothing is stored.';
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
        'dreams', (SELECT coalesce(jsonb_agg(to_jsonb(d) - 'person' ORDER BY d.local_date), '[]') FROM dionysus.dreams d WHERE d.person = who),
        'proposals', (SELECT coalesce(jsonb_agg(to_jsonb(p) - 'person' ORDER BY p.created_at), '[]') FROM dionysus.proposals p
                       WHERE p.person = who OR p.dream_id IN (SELECT d.id FROM dionysus.dreams d WHERE d.person = who)),
        'own_templates', (SELECT coalesce(jsonb_agg(to_jsonb(t) - 'person' ORDER BY t.key, t.version), '[]') FROM dionysus.person_prompt_templates t WHERE t.person = who),
        'own_archetypes', (SELECT coalesce(jsonb_agg(to_jsonb(a) - 'person' - 'centroid' ORDER BY a.name), '[]') FROM dionysus.context_archetypes a WHERE a.person = who),
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

-- ---------------------------------------------------------------------------------------
-- MCP and text arguments (§4): text from a person, an agent or the driver is bounded where it
-- comes in (22001 naming the argument and its limit: a goal's title 200 characters, its
-- description 4000, a name in person() 200), and an error quotes bad input by its first 40
-- characters only (dionysus_internal.input_prefix), never whole.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.bounded_text(arg text, value text, max_len integer) RETURNS text
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF length(value) > max_len THEN
        RAISE EXCEPTION 'dionysus: argument "%" is % characters, over the limit of %', arg, length(value), max_len
            USING ERRCODE = 'string_data_right_truncation';
    END IF;
    RETURN value;
END $$;
COMMENT ON FUNCTION dionysus_internal.bounded_text(text, text, integer) IS
    'The text unchanged (NULL too), or 22001 string_data_right_truncation naming the argument, its length and the limit when it has more than max_len characters.';
CREATE FUNCTION dionysus_internal.input_prefix(value text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN value IS NULL THEN 'NULL'
                ELSE quote_literal(regexp_replace(left(value, 40), '[[:cntrl:]\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]', '?', 'g'))
                     || CASE WHEN length(value) > 40 THEN '… (' || length(value) || ' characters)' ELSE '' END
           END
$$;
COMMENT ON FUNCTION dionysus_internal.input_prefix(text) IS
    'Bad input as an error message quotes it: its first 40 characters, quoted, control and direction characters as ?, then "… (N characters)" when it was longer; NULL reads NULL.';
GRANT EXECUTE ON FUNCTION dionysus_internal.bounded_text(text, text, integer), dionysus_internal.input_prefix(text) TO dionysus_driver;

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
    -- A title is a line, a description a paragraph (an agent may send a megabyte of either).
    PERFORM dionysus_internal.bounded_text('title', btrim(title), 200);
    PERFORM dionysus_internal.bounded_text('description', description, 4000);
    IF source IS NULL OR lower(btrim(source)) NOT IN ('curiosity', 'user_request', 'identity', 'derived', 'external') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "source": unknown goal source % (expected curiosity, user_request, identity, derived, external)',
            dionysus_internal.input_prefix(source) USING ERRCODE = 'invalid_parameter_value';
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
            RAISE EXCEPTION 'dionysus: invalid argument "priority": a new goal is active, queued or backburner, not %',
                dionysus_internal.input_prefix(priority) USING ERRCODE = 'invalid_parameter_value';
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
    -- The proactive mind hears of it (an event; a goal one person asked for is about them).
    PERFORM dionysus.push_event('internal', 'goal_changed', 2,
        jsonb_build_object('goal_id', new_id, 'change', 'created', 'priority', prio, 'source', src),
        (SELECT CASE WHEN cardinality(g.private_to) = 1 THEN g.private_to[1] END FROM dionysus.goals g WHERE g.id = new_id));
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
        RAISE EXCEPTION 'dionysus: invalid argument "new_priority": unknown priority %', dionysus_internal.input_prefix(new_priority)
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
    PERFORM dionysus.push_event('internal', 'goal_changed', 2,
        jsonb_build_object('goal_id', goal_id, 'change', g.priority || ' → ' || target, 'priority', target, 'source', g.source),
        CASE WHEN cardinality(g.private_to) = 1 THEN g.private_to[1] END);
    RETURN target::text;
END $$;

CREATE OR REPLACE FUNCTION link_goal_memory(goal_id uuid, memory_id uuid, link_type text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus_internal.require_goal(goal_id);
    IF memory_id IS NULL OR NOT EXISTS (SELECT 1 FROM dionysus.memories m WHERE m.id = memory_id) THEN
        RAISE EXCEPTION 'dionysus: argument "memory_id": no memory with id %', memory_id USING ERRCODE = 'no_data_found';
    END IF;
    IF link_type IS NULL OR link_type NOT IN ('origin', 'progress', 'completion', 'blocker') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "link_type": % (expected origin, progress, completion, blocker)',
            dionysus_internal.input_prefix(link_type) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (goal_id, memory_id, link_type)
    ON CONFLICT DO NOTHING;
END $$;

CREATE OR REPLACE FUNCTION reach_out_target(person text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE m dionysus.messages;
BEGIN
    SELECT * INTO m FROM dionysus.messages x
     WHERE NOT x.is_bot AND x.person IS NOT NULL AND x.import_id IS NULL  -- an imported author is nobody to reach here
       AND (reach_out_target.person IS NULL OR x.person = reach_out_target.person)
     ORDER BY x.created_at DESC, x.id DESC LIMIT 1;
    IF NOT FOUND THEN
        IF person IS NOT NULL THEN
            RAISE EXCEPTION 'dionysus: argument "person": nobody called % has talked here', dionysus_internal.input_prefix(person) USING ERRCODE = 'no_data_found';
        END IF;
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('person', m.person, 'platform', m.platform, 'author_id', m.author_id);
END $$;

CREATE OR REPLACE FUNCTION push_event(source text, type text, priority integer DEFAULT 2, payload jsonb DEFAULT '{}',
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
        RAISE EXCEPTION 'dionysus: invalid argument "source": % (communication, thoughts, internal or time)', dionysus_internal.input_prefix(source)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF type IS NULL OR type !~ '^[a-z][a-z0-9_.]{0,62}$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "type": % (lower-case words joined by _ or .)', dionysus_internal.input_prefix(type)
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

CREATE OR REPLACE FUNCTION decide_contact(evaluation_id uuid, decision text, message text DEFAULT NULL, reason text DEFAULT NULL,
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
    censored jsonb;
    held jsonb := '{}'::jsonb;
BEGIN
    IF decision IS NULL OR decision NOT IN ('message', 'wait') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decision": % (message or wait)', dionysus_internal.input_prefix(decision) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decided_by IS NULL OR decided_by NOT IN ('model', 'default', 'skipped') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": % (model, default or skipped)', dionysus_internal.input_prefix(decided_by) USING ERRCODE = 'invalid_parameter_value';
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
    -- Censors (022) read the words: a blocked message is decided as a wait (its activation
    -- counted), and takes the wait's path below.
    IF decision = 'message' THEN
        censored := dionysus.censor_gate('reach_out', message, e.person, jsonb_build_object('evaluation_id', e.id));
        IF censored ->> 'verdict' = 'block' THEN
            decision := 'wait';
            reason := left('censored: ' || (SELECT string_agg(r, '; ') FROM jsonb_array_elements_text(censored -> 'reasons') r), 1000);
            held := jsonb_build_object('censored', censored -> 'censors');
        END IF;
    END IF;
    IF decision = 'wait' AND e.solicited THEN
        -- A contact they asked for is not dropped for a "wait": it is weighed again at the next
        -- check, until it goes out or lapses.
        UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = decide_contact.decided_by, decided_at = t,
               reason = decide_contact.reason WHERE c.id = e.id;
        RETURN jsonb_build_object('decision', 'wait', 'next_check_at', p.next_check_at, 'duplicate', false) || held;
    ELSIF decision = 'wait' THEN
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
        RETURN jsonb_build_object('decision', 'wait', 'next_check_at', t + make_interval(secs => backoff * 60), 'duplicate', false) || held;
    END IF;
    -- The gates are checked again: time passed while the model thought.
    IF EXISTS (SELECT 1 FROM dionysus.outbox o WHERE o.person = e.person AND o.contact_id IS NOT NULL AND o.status = 'pending') THEN
        RAISE EXCEPTION 'dionysus: contact refused: a message to % is already on its way', e.person USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF EXISTS (SELECT 1 FROM dionysus.person_signals s WHERE s.person = e.person AND s.ended_at IS NULL AND (s.until IS NULL OR s.until > t)
                                                           AND (NOT e.solicited OR s.kind <> 'stop_checkins')) THEN
        RAISE EXCEPTION 'dionysus: contact refused: % asked not to be contacted now', e.person USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- What they asked for (a reminder) has no cooldown and is not held back by energy: it
    -- spends what there is.
    IF NOT e.solicited AND p.last_contact_at IS NOT NULL AND t - p.last_contact_at < make_interval(secs => dionysus_internal.heartbeat_setting('reach_out_cooldown_hours') * 3600) THEN
        RAISE EXCEPTION 'dionysus: contact refused: % was contacted less than the cooldown ago', e.person USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    cost := dionysus.get_action_cost('reach_out_user');
    IF e.solicited THEN
        cost := least(cost, greatest(0, (SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1)));
    ELSIF (SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1) < cost THEN
        RAISE EXCEPTION 'dionysus: contact refused: energy below the % a contact costs', cost USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF dionysus_internal.web_only_basis(message) THEN
        RAISE EXCEPTION 'dionysus: contact refused: it rests on web content alone' USING ERRCODE = 'insufficient_privilege';
    END IF;
    target := dionysus.reach_out_target(e.person);
    PERFORM dionysus.update_energy(-cost, NULL, 'reach_out_user',
                                   CASE WHEN e.solicited THEN 'contact they asked for: ' ELSE 'contact born of pressure: ' END || left(e.explanation, 200));
    INSERT INTO dionysus.outbox (audience, content, person, platform, contact_id)
    VALUES ('user', message, target ->> 'person', target ->> 'platform', e.id)
    RETURNING id INTO msg_id;
    UPDATE dionysus.contact_evaluations c SET decision = 'message', decided_by = decide_contact.decided_by, decided_at = t,
           reason = decide_contact.reason, outbox_id = msg_id WHERE c.id = e.id;
    IF e.solicited THEN
        UPDATE dionysus.people x SET contact_request = NULL WHERE x.person = e.person;
    ELSE
        UPDATE dionysus.people x SET
            check_interval_minutes = dionysus_internal.proactive_setting('check_interval_minutes'),
            cause_at_last_contact = jsonb_build_object(
                'open_requests', (SELECT count(*) FROM dionysus.goals g WHERE g.source = 'user_request' AND g.priority IN ('active', 'queued')
                                                                          AND g.private_to = ARRAY[e.person]),
                'task_pressure', x.task_pressure, 'curiosity', x.curiosity)
         WHERE x.person = e.person;
    END IF;
    -- Two model calls (decide, compose); one for a contact they asked for (compose only).
    UPDATE dionysus.agent_state SET model_calls = model_calls + CASE WHEN decide_contact.decided_by <> 'model' THEN 0 WHEN e.solicited THEN 1 ELSE 2 END,
           vitality = greatest(0, vitality - CASE WHEN decide_contact.decided_by <> 'model' THEN 0 WHEN e.solicited THEN 1 ELSE 2 END
                                             * dionysus_internal.proactive_setting('vitality_drain_model'))
     WHERE id = 1;
    PERFORM pg_notify('dionysus_outbox', msg_id::text);
    RETURN jsonb_build_object('decision', 'message', 'outbox_id', msg_id, 'duplicate', false);
END $$;

CREATE OR REPLACE FUNCTION set_person_time_zone(person text, time_zone text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF time_zone IS NULL OR NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = time_zone) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "time_zone": % is not a time zone name (e.g. Europe/Lisbon)', dionysus_internal.input_prefix(time_zone)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.person_row(person);
    UPDATE dionysus.people x SET time_zone = set_person_time_zone.time_zone, updated_at = now() WHERE x.person = set_person_time_zone.person;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.check_rule_condition(cond jsonb, at_path text DEFAULT 'condition', depth integer DEFAULT 0)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    nodes integer := 1;
    c jsonb;
    i integer := 0;
    key text;
BEGIN
    IF depth > 6 THEN
        RAISE EXCEPTION 'dionysus: invalid rule: % is nested more than 6 deep', at_path USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cond IS NULL OR jsonb_typeof(cond) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: invalid rule: % must be a JSON object', at_path USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cond = '{}'::jsonb THEN
        RETURN 1;
    END IF;
    SELECT k INTO key FROM jsonb_object_keys(cond) k WHERE k IN ('all', 'any', 'not', 'var') LIMIT 1;
    IF key IN ('all', 'any') THEN
        IF (SELECT count(*) FROM jsonb_object_keys(cond)) <> 1 OR jsonb_typeof(cond -> key) <> 'array' OR jsonb_array_length(cond -> key) = 0 THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.% must be the only key, with a non-empty list', at_path, key USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR c IN SELECT * FROM jsonb_array_elements(cond -> key) LOOP
            nodes := nodes + dionysus_internal.check_rule_condition(c, format('%s.%s[%s]', at_path, key, i), depth + 1);
            i := i + 1;
        END LOOP;
    ELSIF key = 'not' THEN
        IF (SELECT count(*) FROM jsonb_object_keys(cond)) <> 1 THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.not must be the only key', at_path USING ERRCODE = 'invalid_parameter_value';
        END IF;
        nodes := nodes + dionysus_internal.check_rule_condition(cond -> 'not', at_path || '.not', depth + 1);
    ELSIF key = 'var' THEN
        IF NOT (dionysus.rule_vocabulary() -> 'values') ? (cond ->> 'var') THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.var % is not a value a rule can read (see rule_vocabulary())', at_path, dionysus_internal.input_prefix(cond ->> 'var')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(cond ->> 'op', '') NOT IN ('<', '<=', '>', '>=', '=', '!=') THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.op % is not one of < <= > >= = !=', at_path, dionysus_internal.input_prefix(cond ->> 'op') USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF jsonb_typeof(cond -> 'value') IS DISTINCT FROM 'number' THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.value must be a number', at_path USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF (SELECT count(*) FROM jsonb_object_keys(cond)) <> 3 THEN
            RAISE EXCEPTION 'dionysus: invalid rule: % has keys other than var, op and value', at_path USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        RAISE EXCEPTION 'dionysus: invalid rule: % must be {}, or have one of all, any, not, var', at_path USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF depth = 0 AND nodes > 32 THEN
        RAISE EXCEPTION 'dionysus: invalid rule: % has % parts (at most 32)', at_path, nodes USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN nodes;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.check_rule_intents(intents jsonb) RETURNS void
    LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    it jsonb;
    i integer := 0;
    n integer;
    path text;
BEGIN
    IF intents IS NULL OR jsonb_typeof(intents) <> 'array' OR jsonb_array_length(intents) NOT BETWEEN 1 AND 8 THEN
        RAISE EXCEPTION 'dionysus: invalid rule: intents must be a list of 1 to 8 intents' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR it IN SELECT * FROM jsonb_array_elements(intents) LOOP
        path := format('intents[%s]', i);
        IF jsonb_typeof(it) <> 'object' THEN
            RAISE EXCEPTION 'dionysus: invalid rule: % must be an object', path USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF it ? 'adjust' THEN
            IF coalesce(it ->> 'adjust', '') NOT IN ('person.social_debt', 'person.curiosity', 'person.task_pressure', 'person.restraint', 'agent.vitality') THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.adjust % is not a value a rule can move', path, dionysus_internal.input_prefix(it ->> 'adjust') USING ERRCODE = 'invalid_parameter_value';
            END IF;
            n := (it ? 'by')::int + (it ? 'to')::int + (it ? 'toward')::int;
            IF n <> 1 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: % needs exactly one of by, to, toward', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'by' AND (jsonb_typeof(it -> 'by') <> 'number' OR abs((it ->> 'by')::float8) > 1) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.by must be a number in [-1, 1]', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'to' AND (jsonb_typeof(it -> 'to') <> 'number' OR (it ->> 'to')::float8 NOT BETWEEN 0 AND 1) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.to must be a number in [0, 1]', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'toward' AND (jsonb_typeof(it -> 'toward') <> 'number' OR (it ->> 'toward')::float8 NOT BETWEEN 0 AND 1
                                  OR jsonb_typeof(it -> 'per_hour') IS DISTINCT FROM 'number' OR (it ->> 'per_hour')::float8 <= 0
                                  OR (it ->> 'per_hour')::float8 > 10) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.toward must be in [0, 1], with per_hour in (0, 10]', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF it ? 'create_objective' THEN
            IF jsonb_typeof(it -> 'create_objective') <> 'string' OR length(btrim(it ->> 'create_objective')) NOT BETWEEN 1 AND 200 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.create_objective must be a text of 1 to 200 characters', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF it ? 'schedule_event' THEN
            IF jsonb_typeof(it -> 'schedule_event') <> 'string' OR (it ->> 'schedule_event') !~ '^[a-z][a-z0-9_.]{0,62}$'
               OR (it ->> 'schedule_event') LIKE 'time.%' THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.schedule_event must be an event type (lower-case words joined by _ or ., not time.*)', path
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF jsonb_typeof(it -> 'in_minutes') IS DISTINCT FROM 'number' OR (it ->> 'in_minutes')::float8 NOT BETWEEN 0 AND 527040 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.in_minutes must be a number of minutes up to a year', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'priority' AND (jsonb_typeof(it -> 'priority') <> 'number' OR (it ->> 'priority')::float8 NOT IN (0, 1, 2, 3, 4)) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.priority must be 0 … 4', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF it ? 'request_contact' THEN
            IF jsonb_typeof(it -> 'request_contact') <> 'string' OR length(btrim(it ->> 'request_contact')) NOT BETWEEN 1 AND 300 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.request_contact must be a text of 1 to 300 characters', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSE
            RAISE EXCEPTION 'dionysus: invalid rule: % must be one of adjust, create_objective, schedule_event, request_contact', path
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        i := i + 1;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION contact_feedback(evaluation_id uuid, sentiment text, reason text DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    c dionysus.contact_evaluations;
    s double precision;
BEGIN
    IF sentiment IS NULL OR sentiment NOT IN ('positive', 'neutral', 'negative') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "sentiment": % (positive, neutral or negative)', dionysus_internal.input_prefix(sentiment) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Lock order, as everywhere learning happens: agent_state, the evaluation, the personality rows.
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    SELECT * INTO c FROM dionysus.contact_evaluations x WHERE x.id = evaluation_id AND x.decision = 'message' FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "evaluation_id": no contact that was sent has id %', evaluation_id USING ERRCODE = 'no_data_found';
    END IF;
    IF c.feedback_at IS NOT NULL THEN
        RETURN 0; -- judged once already
    END IF;
    s := CASE sentiment WHEN 'positive' THEN 0.6 WHEN 'negative' THEN -0.6 ELSE 0 END;
    UPDATE dionysus.contact_evaluations x
       SET feedback = jsonb_build_object('signal', s, 'by', 'model', 'sentiment', sentiment, 'reason', left(contact_feedback.reason, 300)),
           feedback_at = dionysus.clock_now()
     WHERE x.id = c.id;
    RETURN dionysus_internal.learn_from_contact(c.person, c.id, c.decided_at, s,
        'the fast model read their reply as ' || sentiment || coalesce(': ' || left(contact_feedback.reason, 200), ''));
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.censor_checked(trigger text, reason text, severity text, pattern text, kinds text[],
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

CREATE OR REPLACE FUNCTION add_censor(trigger text, reason text, severity text DEFAULT 'warn', person text DEFAULT NULL,
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

CREATE OR REPLACE FUNCTION censor_record(kind text, person text, hits jsonb, context jsonb DEFAULT '{}')
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

CREATE OR REPLACE FUNCTION person(name text, of_person text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    -- Bounded before anything reads them: a name is at most 200 characters, as note_person keeps them.
    k text := dionysus_internal.person_key(dionysus_internal.bounded_text('name', person.name, 200));
    hits jsonb;
BEGIN
    PERFORM dionysus_internal.bounded_text('of_person', person.of_person, 200);
    IF k IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "name" must be a name' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Everyone's people at once is the owner's view (a superuser's session), never the driver's.
    IF person.of_person IS NULL AND NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user) THEN
        RAISE EXCEPTION 'dionysus: argument "of_person": whose life to look in (everyone''s is the owner''s view)'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT coalesce(jsonb_agg(dionysus_internal.person_json(p, true) ORDER BY p.of_person, p.mentions DESC), '[]')
      INTO hits
      FROM dionysus.known_persons p
     WHERE (person.of_person IS NULL OR p.of_person = person.of_person)
       AND (p.id = dionysus_internal.resolve_person(p.of_person, person.name)
            OR EXISTS (SELECT 1 FROM dionysus.person_aliases a WHERE a.known_person_id = p.id AND a.alias_key = k));
    IF hits = '[]'::jsonb THEN
        RAISE EXCEPTION 'dionysus: argument "name": nobody called % is known%', dionysus_internal.input_prefix(person.name),
            CASE WHEN person.of_person IS NULL THEN '' ELSE ' to ' || person.of_person END USING ERRCODE = 'no_data_found';
    END IF;
    RETURN hits;
END $$;

CREATE OR REPLACE FUNCTION activate_procedure(name text, person text, message_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    proc dionysus.procedures;
    turn dionysus.messages;
    ep uuid;
    wm dionysus.working_memories;
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "name": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO proc FROM dionysus.procedures p
     WHERE p.name_key = dionysus_internal.thread_key(activate_procedure.name) AND p.status = 'active'
       AND (p.person IS NULL OR p.person = activate_procedure.person)
     ORDER BY p.person IS NULL, p.id LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "name": no procedure % for %', dionysus_internal.input_prefix(name), person USING ERRCODE = 'no_data_found';
    END IF;
    IF message_id IS NOT NULL THEN
        SELECT * INTO turn FROM dionysus.messages x WHERE x.id = activate_procedure.message_id;
        IF NOT FOUND OR turn.person IS DISTINCT FROM activate_procedure.person THEN
            RAISE EXCEPTION 'dionysus: argument "message_id": the turn is not %''s', person USING ERRCODE = 'insufficient_privilege';
        END IF;
        ep := dionysus_internal.turn_episode(message_id, true);
    ELSE
        SELECT e.id INTO ep FROM dionysus.working_memories w JOIN dionysus.episodes e ON e.id = w.episode_id
         WHERE w.person = activate_procedure.person AND e.ended_at IS NULL
         ORDER BY w.last_turn_at DESC NULLS LAST, w.id LIMIT 1 FOR SHARE OF e;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.working_memory:' || person, 0));
    IF ep IS NOT NULL THEN
        wm := dionysus_internal.working_memory_of(person, ep);
    END IF;
    PERFORM dionysus_internal.procedure_activate(proc.id, person, wm, message_id, 'asked', NULL, 1.0);
    SELECT * INTO proc FROM dionysus.procedures p WHERE p.id = proc.id;
    RETURN dionysus_internal.procedure_json(proc) || jsonb_build_object('working_memory', wm.id IS NOT NULL);
END $$;

COMMENT ON FUNCTION create_goal IS
    'Adds a goal. Default priority by source (user_request → active, derived → the parent''s, else queued); over the '
    'limits a goal is demoted one level, never dropped (a user''s request displaces the stalest active goal). '
    'A title is at most 200 characters, a description 4000 (22001 naming the argument).';

COMMENT ON FUNCTION person(text, text) IS
    'What is known about someone: every known person the name means (in of_person''s life; in everyone''s when NULL, a superuser''s view only), with aliases, relation, feeling, traits, topics, relations and the turns each came from (the last 30). P0002 when nobody by that name is known; a name or of_person of more than 200 characters is 22001.';
-- (end of: MCP and text arguments)

-- ---------------------------------------------------------------------------------------
-- Backups (§1): every table with data marked for pg_dump (sql/030_backup.sql). Last of the
-- update, after every table the sections above add. Which rows are still as shipped is not
-- known here after years of tuning, and need not be: a restore goes into a fresh install, whose
-- record of its shipped rows decides what a restored row replaces.
-- ---------------------------------------------------------------------------------------

-- Backups: every table that holds data is in a pg_dump (issue #33 §1).
--
-- Every table here is a member of the extension, and pg_dump dumps a member table's rows only
-- when the extension marks it with pg_extension_config_dump: until 0.19.0 none was marked, so
-- a dump restored an empty mind. mark_for_dump() (called last by the install script and by the
-- update to 0.19.0) marks every member table and sequence but the few below, enumerating the
-- catalog, so a table added later is dumped without anyone remembering to say so.
--
-- Left out, on purpose: the unlogged access log (recalls since the last fold; a crash loses
-- them too), the embedding cache (a query's vector, made again on demand), the two status rows
-- of the workers (what the last pass did on that server) and shipped_rows below (the install's
-- own record, made again by CREATE EXTENSION).
--
-- Shipped rows (configuration, templates, rules, budgets, the singletons of state) are the
-- install's; a restore runs CREATE EXTENSION first, which writes them again. Every row is
-- dumped all the same (an untouched one carries its own install's timestamps), and on restore
-- restore_over_shipped lets a restored row that collides with a shipped row still as the fresh
-- install wrote it (its hash is in shipped_rows) replace that row in place: a tuned setting
-- comes back tuned, nothing is doubled. A shipped row the owner deleted comes back at its
-- install default (disable it instead, where a table has a flag for that).
--
-- How a restore is told apart: pg_dump's scripts and pg_restore set check_function_bodies off
-- (as the extension scripts themselves do), and a restore runs as a superuser (CREATE EXTENSION
-- dionysus needs one). The triggers that derive rows from others (decay's mentions, heartbeat
-- lessons) or stamp them (a re-index run's model, an archetype's centroid) then let a restored
-- row in as it was dumped: what they would derive is in the dump already. Nobody else can pass
-- for a restore: a role that sets check_function_bodies off is still not a superuser.

-- The rows an install shipped, by table and hash of the whole row (to_jsonb), as they were
-- written: what a restored row may replace. (A database updated from before 0.19.0 has none
-- recorded; it needs none, as a restore goes into a fresh install.)
CREATE TABLE dionysus_internal.shipped_rows (
    tbl      regclass NOT NULL,
    row_hash text NOT NULL,
    PRIMARY KEY (tbl, row_hash)
);

-- Whether a row (as to_jsonb) is one of its table's shipped rows, untouched.
CREATE FUNCTION dionysus_internal.is_shipped(tbl regclass, r jsonb) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM dionysus_internal.shipped_rows s
                    WHERE s.tbl = is_shipped.tbl AND s.row_hash = md5(is_shipped.r::text))
$$;
COMMENT ON FUNCTION dionysus_internal.is_shipped(regclass, jsonb) IS
    'Whether a row (to_jsonb) is one of its table''s shipped rows, still exactly as the install wrote it (dionysus_internal.shipped_rows).';

-- BEFORE INSERT on a table with shipped rows, during a restore only: a restored row that
-- collides (on the primary key or a unique constraint) with a shipped row still as installed
-- replaces it in place (an UPDATE: whatever refers to it keeps referring). A collision with a
-- row that is not pristine is left to fail as any duplicate would. Runs as its caller.
CREATE FUNCTION dionysus_internal.restore_over_shipped() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ix record;
    cond text;
    found_row jsonb;
    cols text;
BEGIN
    IF NOT dionysus_internal.restoring() THEN
        RETURN NEW;
    END IF;
    FOR ix IN SELECT i.indexrelid, array_agg(a.attname ORDER BY k.ord) AS names, i.indnullsnotdistinct AS nnd
                FROM pg_catalog.pg_index i
                CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
                JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
               WHERE i.indrelid = TG_RELID AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
                 AND i.indexprs IS NULL
               GROUP BY i.indexrelid, i.indisprimary, i.indnullsnotdistinct
               ORDER BY i.indisprimary DESC, i.indexrelid LOOP
        -- (NULLS NOT DISTINCT: a NULL collides with a NULL, as context_archetypes' (name, person).)
        SELECT string_agg(format(CASE WHEN ix.nnd THEN 't.%1$I IS NOT DISTINCT FROM ($1).%1$I' ELSE 't.%1$I = ($1).%1$I' END, n), ' AND ')
          INTO cond FROM unnest(ix.names) n;
        EXECUTE format('SELECT to_jsonb(t) FROM %I.%I t WHERE %s', TG_TABLE_SCHEMA, TG_TABLE_NAME, cond)
            INTO found_row USING NEW;
        CONTINUE WHEN found_row IS NULL;
        IF NOT dionysus_internal.is_shipped(TG_RELID, found_row) THEN
            RETURN NEW;   -- a real duplicate: the insert fails as it would have
        END IF;
        SELECT string_agg(format('%1$I = ($1).%1$I', a.attname), ', ' ORDER BY a.attnum) INTO cols
          FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = TG_RELID AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
           AND NOT (a.attidentity = 'a' AND a.attname = ANY (ix.names));   -- equal, and not to be set
        EXECUTE format('UPDATE %I.%I t SET %s WHERE %s', TG_TABLE_SCHEMA, TG_TABLE_NAME, cols, cond) USING NEW;
        RETURN NULL;
    END LOOP;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.restore_over_shipped() IS
    'BEFORE INSERT on a table with shipped rows, during a restore only: a restored row that collides with a still-pristine shipped row replaces it in place.';

-- The extension's member tables and sequences pg_dump leaves out, with why (the header).
CREATE FUNCTION dionysus_internal.left_out_of_dumps() RETURNS TABLE (rel regclass, why text)
    LANGUAGE sql STABLE AS $$
    VALUES ('dionysus.memory_access_log'::regclass, 'unlogged: the recalls since the last fold'),
           ('dionysus.embedding_cache'::regclass, 'a cache: made again on demand'),
           ('dionysus.worker_status'::regclass, 'what the last maintenance pass on that server did'),
           ('dionysus.scheduler_status'::regclass, 'what the last scheduler tick on that server did'),
           ('dionysus_internal.shipped_rows'::regclass, 'the install''s own record, written again by CREATE EXTENSION')
$$;
COMMENT ON FUNCTION dionysus_internal.left_out_of_dumps() IS
    'The extension''s member tables pg_dump leaves out on purpose, each with why (unlogged, cache, per-server status, the install''s own record).';

-- Marks every member table and sequence for pg_dump (only inside an extension script, as
-- pg_extension_config_dump requires). shipped: the tables that have shipped rows; NULL on a
-- fresh install, where they are the tables that hold rows now (their rows are recorded as
-- shipped). Idempotent: a table marked again gets the same condition.
CREATE FUNCTION dionysus_internal.mark_for_dump(shipped regclass[] DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    r record;
    has_rows boolean;
    order_by text;
BEGIN
    FOR r IN SELECT c.oid::regclass AS rel, format('%I.%I', n.nspname, c.relname) AS qname, c.relname, c.relkind
               FROM pg_catalog.pg_depend d
               JOIN pg_catalog.pg_class c ON c.oid = d.objid AND d.classid = 'pg_catalog.pg_class'::regclass
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e'
                AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'dionysus')
                AND c.relkind IN ('r', 'S')
                AND c.oid NOT IN (SELECT l.rel FROM dionysus_internal.left_out_of_dumps() l)
              ORDER BY c.oid LOOP
        IF r.relkind = 'S' THEN
            PERFORM pg_catalog.pg_extension_config_dump(r.rel, '');
            CONTINUE;
        END IF;
        IF shipped IS NULL THEN
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', r.qname) INTO has_rows;
        ELSE
            has_rows := r.rel = ANY (shipped);
        END IF;
        IF NOT has_rows THEN
            PERFORM pg_catalog.pg_extension_config_dump(r.rel, '');
            CONTINUE;
        END IF;
        IF shipped IS NULL THEN
            EXECUTE format('INSERT INTO dionysus_internal.shipped_rows (tbl, row_hash)
                            SELECT %L::regclass, md5(to_jsonb(t)::text) FROM %s t ON CONFLICT DO NOTHING', r.qname, r.qname);
        END IF;
        -- Rows outside a partial unique index's predicate first (a template version no longer
        -- active before the one that is): each lands without colliding with a fresh shipped
        -- row that the dump replaces only later.
        SELECT 'ORDER BY ' || string_agg(format('(%s) IS TRUE', pg_catalog.pg_get_expr(i.indpred, i.indrelid)), ', ')
          INTO order_by
          FROM pg_catalog.pg_index i WHERE i.indrelid = r.rel AND i.indisunique AND i.indpred IS NOT NULL;
        -- pg_dump reads the table as COPY (SELECT ... FROM ONLY schema.table <condition>).
        PERFORM pg_catalog.pg_extension_config_dump(r.rel, coalesce(order_by, ''));
        EXECUTE format('DROP TRIGGER IF EXISTS restore_over_shipped ON %s', r.qname);
        EXECUTE format('CREATE TRIGGER restore_over_shipped BEFORE INSERT ON %s
                        FOR EACH ROW EXECUTE FUNCTION dionysus_internal.restore_over_shipped()', r.qname);
    END LOOP;
END $$;
COMMENT ON FUNCTION dionysus_internal.mark_for_dump(regclass[]) IS
    'Marks every member table and sequence but those left out for pg_dump (pg_extension_config_dump; extension scripts only); records a fresh install''s shipped rows and gives their tables restore_over_shipped.';

CREATE OR REPLACE FUNCTION dionysus_internal.queue_decay_mentions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF dionysus_internal.restoring() THEN
        RETURN NULL;   -- a restore brings its queue with it (sql/030_backup.sql)
    END IF;
    INSERT INTO dionysus.decay_mentions (memory_id) SELECT n.id FROM new_memories n WHERE n.status = 'active'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION dionysus_internal.queue_heartbeat_lesson() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sent uuid;
    hb uuid;
BEGIN
    IF NEW.sentiment <> 'negative' OR dionysus_internal.restoring() THEN
        RETURN NULL;   -- (a restore brings its queue with it: sql/030_backup.sql)
    END IF;
    SELECT x.outbox_id, x.heartbeat_id INTO sent, hb FROM dionysus_internal.feedback_reach_out(NEW) x;
    IF hb IS NOT NULL THEN
        -- Not the heartbeat's own work (its narrative is written): a lesson after it, the
        -- person's (what it writes is as private as they are).
        INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts)
        VALUES ('heartbeat_censors:' || NEW.id, 'heartbeat_censors',
                jsonb_build_object('feedback_id', NEW.id, 'outbox_id', sent, 'heartbeat_id', hb, 'person', NEW.person),
                dionysus_internal.heartbeat_setting('work_max_attempts')::int)
        ON CONFLICT (idempotency_key) DO NOTHING;
        PERFORM pg_notify('dionysus_work', jsonb_build_object('queued', 1)::text);
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION dionysus_internal.reindex_runs_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    model jsonb;
BEGIN
    IF TG_OP = 'INSERT' AND dionysus_internal.restoring() THEN
        RETURN NEW;   -- a restored run, as it was (sql/030_backup.sql)
    END IF;
    IF TG_OP = 'INSERT' THEN
        model := dionysus.embedding_settings();
        NEW.target := model - 'model_key';
        NEW.target_key := model ->> 'model_key';
        NEW.previous_key := (SELECT s.model_key FROM dionysus.embedding_store s WHERE s.id = 1);
        NEW.status := 'building';
        NEW.dimensions := NULL;
        NEW.template_version := (SELECT t.version FROM dionysus.prompt_templates t WHERE t.key = 'extract_message' AND t.active);
        NEW.started_at := now();
        NEW.finished_at := NULL;
        NEW.note := NULL;
        NEW.result := NULL;
        RETURN NEW;
    END IF;
    IF NEW.target IS DISTINCT FROM OLD.target OR NEW.target_key IS DISTINCT FROM OLD.target_key
       OR NEW.previous_key IS DISTINCT FROM OLD.previous_key OR NEW.started_at IS DISTINCT FROM OLD.started_at
       OR (OLD.dimensions IS NOT NULL AND NEW.dimensions IS DISTINCT FROM OLD.dimensions)
       OR (OLD.status <> 'building' AND NEW IS DISTINCT FROM OLD) THEN
        RAISE EXCEPTION 'dionysus: re-index run %: its model, width and a finished run are not to be changed', OLD.id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- Only the swap, which writes the result (the driver's role cannot), ends a run as swapped.
    IF NEW.status = 'swapped' AND OLD.status = 'building'
       AND (NEW.result IS NULL OR NOT EXISTS (SELECT 1 FROM dionysus.embedding_store s WHERE s.model_key = NEW.target_key)) THEN
        RAISE EXCEPTION 'dionysus: re-index run % is swapped only by its swap', OLD.id USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION dionysus_internal.invalidate_centroid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF dionysus_internal.restoring() THEN
        RETURN NEW;   -- a restored archetype, as it was (sql/030_backup.sql)
    END IF;
    IF TG_OP = 'INSERT' OR OLD.example_messages IS DISTINCT FROM NEW.example_messages THEN
        NEW.centroid := NULL;
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END $$;
-- outbox.contact_id and contact_evaluations.outbox_id refer to each other: checked at commit,
-- so a restore (one table, then the other, in one transaction) can write a delivered contact.
ALTER TABLE dionysus.outbox ALTER CONSTRAINT outbox_contact_id_fkey DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE dionysus.contact_evaluations ALTER CONSTRAINT contact_evaluations_outbox_id_fkey DEFERRABLE INITIALLY DEFERRED;
GRANT EXECUTE ON FUNCTION dionysus_internal.restoring(), dionysus_internal.is_shipped(regclass, jsonb),
    dionysus_internal.restore_over_shipped(), dionysus_internal.left_out_of_dumps(),
    dionysus_internal.mark_for_dump(regclass[]) TO dionysus_driver;
SELECT dionysus_internal.mark_for_dump(ARRAY['dionysus.agent_state', 'dionysus.censor_config', 'dionysus.clock', 'dionysus.contact_weights', 'dionysus.context_archetypes', 'dionysus.context_budgets', 'dionysus.cue_phrases', 'dionysus.decay_config', 'dionysus.embedding_store', 'dionysus.event_patterns', 'dionysus.heartbeat_config', 'dionysus.heartbeat_state', 'dionysus.lexicon_stats', 'dionysus.mind_rules', 'dionysus.personality', 'dionysus.proactive_config', 'dionysus.prompt_templates', 'dionysus.recall_config', 'dionysus.relation_words']::regclass[]);

