-- Procedures: how-to knowledge as K-lines (Minsky's level-bands; issue #13 §2).
--
-- A procedure is what Dionysus knows about how to do something well with a person ("helping
-- Ada through exam nerves"): its goals (the upper fringe, weakly attached: what it is for),
-- its core (patterns, tools and concepts, strongly attached: how it goes) and its
-- implementation notes (the lower fringe, easily displaced). Its embedding is of the name, the
-- domain, the goals and the core: what a situation calling for it would resemble.
--
--   * Procedures are the owner's to write (store_procedure; for everyone, or for one person,
--     whose alone it then is) and to retire. Nothing here writes one on the system's own word.
--   * Activation loads a procedure into the person's working memory (025) and counts it once
--     per conversation episode: asked for by name (activate_procedure), or matched by the
--     meaning of the person's turn (chat_context, procedure_match_similarity, at most
--     procedure_match_max a turn). Every activation is written down with how it came about,
--     its similarity and its turn (procedure_activations).
--   * When the episode's outcome is known (its summary, 024), each procedure it activated
--     counts a success or a failure (mixed and neutral count neither); effectiveness is
--     (successes + 1) / (successes + failures + 2): an untried procedure is 0.5, and one outcome
--     moves it only so far.
--   * recall_all is the unified recall: memories and facts (recall), procedures, censors
--     and the person's own episodes in one list ranked by score, each with its kind marked.
--
-- Lock order: a procedure's row is an "other row" (8); activation happens under the person's
-- working-memory lock (9), after the episode's row.

INSERT INTO heartbeat_config (key, value, description) VALUES
    ('procedure_match_similarity', 0.4, 'a person''s turn this similar to a procedure (cosine) activates it'),
    ('procedure_match_max', 2, 'procedures a turn activates by meaning, at most');

CREATE TABLE procedures (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- NULL: everyone's; else one person's alone.
    person               text CHECK (person IS NULL OR length(btrim(person)) > 0),
    name                 text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    name_key             text NOT NULL,
    domain               text CHECK (domain IS NULL OR length(btrim(domain)) BETWEEN 1 AND 100),
    goals                text[] NOT NULL DEFAULT '{}',
    core_patterns        text[] NOT NULL DEFAULT '{}',
    core_tools           text[] NOT NULL DEFAULT '{}',
    core_concepts        text[] NOT NULL DEFAULT '{}',
    implementation_notes text[] NOT NULL DEFAULT '{}',
    -- Of any width, with the model that made it: after a re-index it is embedded again on the fly.
    embedding            vector NOT NULL,
    model_key            text NOT NULL,
    status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired')),
    activation_count     integer NOT NULL DEFAULT 0 CHECK (activation_count >= 0),
    success_count        integer NOT NULL DEFAULT 0 CHECK (success_count >= 0),
    failure_count        integer NOT NULL DEFAULT 0 CHECK (failure_count >= 0),
    effectiveness        double precision GENERATED ALWAYS AS ((success_count + 1)::float8 / (success_count + failure_count + 2)) STORED,
    last_activated       timestamptz,
    created_at           timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    updated_at           timestamptz NOT NULL DEFAULT dionysus.clock_now()
);
COMMENT ON TABLE procedures IS 'How-to knowledge (K-lines): name, domain, goals (upper fringe), core patterns, tools and concepts, implementation notes (lower fringe), for everyone or one person; activation, success and failure counts and effectiveness ((successes + 1) / (successes + failures + 2)).';
CREATE UNIQUE INDEX procedures_one_name ON procedures (coalesce(person, ''), name_key) WHERE status = 'active';

CREATE TABLE procedure_activations (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    procedure_id uuid NOT NULL REFERENCES procedures (id) ON DELETE CASCADE,
    person       text NOT NULL,
    -- The conversation episode it served (NULL: asked for outside one).
    episode_id   uuid REFERENCES episodes (id) ON DELETE CASCADE,
    message_id   uuid REFERENCES messages (id) ON DELETE SET NULL,
    how          text NOT NULL CHECK (how IN ('matched', 'asked')),
    similarity   double precision,
    activated_at timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    -- The episode's outcome, once its summary said it.
    outcome      text CHECK (outcome IN ('success', 'failure', 'mixed', 'neutral')),
    scored_at    timestamptz
);
COMMENT ON TABLE procedure_activations IS 'Every activation of a procedure: for whom, in which episode and turn, how (matched by meaning or asked for), its similarity, and the episode''s outcome once known. Once per procedure, episode and person.';
CREATE UNIQUE INDEX procedure_activations_once ON procedure_activations (procedure_id, episode_id, person) WHERE episode_id IS NOT NULL;
CREATE INDEX procedure_activations_unscored ON procedure_activations (episode_id) WHERE outcome IS NULL;
CREATE INDEX procedure_activations_procedure ON procedure_activations (procedure_id, activated_at DESC);
-- Its foreign keys, indexed (001).
CREATE INDEX procedure_activations_message_id ON procedure_activations (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX procedure_activations_episode_id ON procedure_activations (episode_id) WHERE episode_id IS NOT NULL;

ALTER TABLE working_memory_items ADD CONSTRAINT working_memory_items_procedure_fkey
    FOREIGN KEY (procedure_id) REFERENCES procedures (id) ON DELETE CASCADE;
CREATE INDEX working_memory_items_procedure ON working_memory_items (procedure_id) WHERE procedure_id IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- Writing them (the owner)
-- ---------------------------------------------------------------------------------------
-- A list argument: at most ten non-empty strings of at most 300 characters, trimmed.
CREATE FUNCTION dionysus_internal.procedure_list(items text[], arg text) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF items IS NULL THEN
        RETURN '{}';
    END IF;
    IF cardinality(items) > 10 OR EXISTS (SELECT 1 FROM unnest(items) x WHERE x IS NULL OR length(btrim(x)) NOT BETWEEN 1 AND 300) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": at most 10 non-empty strings of at most 300 characters', arg
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ARRAY(SELECT btrim(x) FROM unnest(items) x);
END $$;
COMMENT ON FUNCTION dionysus_internal.procedure_list(text[], text) IS 'A procedure''s list argument: at most 10 non-empty strings of at most 300 characters, trimmed (22023 naming it otherwise).';

-- What a procedure's embedding is of: what a situation calling for it would resemble.
CREATE FUNCTION dionysus_internal.procedure_text(name text, domain text, goals text[], core_patterns text[], core_concepts text[])
    RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT concat_ws('. ', name, domain, array_to_string(goals, '; '), array_to_string(core_patterns, '; '),
                     array_to_string(core_concepts, '; '))
$$;
COMMENT ON FUNCTION dionysus_internal.procedure_text(text, text, text[], text[], text[]) IS 'What a procedure''s embedding is of: name, domain, goals, core patterns and concepts.';

-- Stores a procedure (owner only): for everyone (person NULL) or for one person. The same name
-- for the same person rewrites its definition and keeps its counts. Returns its id.
CREATE FUNCTION store_procedure(name text, goals text[], core_patterns text[], domain text DEFAULT NULL,
                                core_tools text[] DEFAULT '{}', core_concepts text[] DEFAULT '{}',
                                implementation_notes text[] DEFAULT '{}', person text DEFAULT NULL)
    RETURNS uuid LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    g text[] := dionysus_internal.procedure_list(goals, 'goals');
    p text[] := dionysus_internal.procedure_list(core_patterns, 'core_patterns');
    t text[] := dionysus_internal.procedure_list(core_tools, 'core_tools');
    c text[] := dionysus_internal.procedure_list(core_concepts, 'core_concepts');
    n text[] := dionysus_internal.procedure_list(implementation_notes, 'implementation_notes');
    key text;
    id uuid;
    e vector;
BEGIN
    IF name IS NULL OR length(btrim(name)) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "name": 1 to 200 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF domain IS NOT NULL AND length(btrim(domain)) NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "domain": 1 to 100 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF person IS NOT NULL AND length(btrim(person)) = 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(g) + cardinality(p) = 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "core_patterns": a procedure needs goals or core patterns' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    key := dionysus_internal.thread_key(name);
    e := dionysus.embed(dionysus_internal.procedure_text(btrim(name), btrim(domain), g, p, c));
    INSERT INTO dionysus.procedures AS x (person, name, name_key, domain, goals, core_patterns, core_tools, core_concepts,
                                          implementation_notes, embedding, model_key)
    VALUES (store_procedure.person, btrim(store_procedure.name), key, btrim(store_procedure.domain), g, p, t, c, n, e,
            dionysus_internal.store_model_key())
    ON CONFLICT ((coalesce(person, '')), name_key) WHERE status = 'active' DO UPDATE
       SET name = EXCLUDED.name, domain = EXCLUDED.domain, goals = EXCLUDED.goals, core_patterns = EXCLUDED.core_patterns,
           core_tools = EXCLUDED.core_tools, core_concepts = EXCLUDED.core_concepts, implementation_notes = EXCLUDED.implementation_notes,
           embedding = EXCLUDED.embedding, model_key = EXCLUDED.model_key, updated_at = dionysus.clock_now()
    RETURNING x.id INTO id;
    RETURN id;
END $$;
COMMENT ON FUNCTION store_procedure(text, text[], text[], text, text[], text[], text[], text) IS
    'Owner only: stores a procedure for everyone (person NULL) or one person; the same name for the same person rewrites its definition and keeps its counts. Needs goals or core patterns. Returns its id.';

-- Retires a procedure (owner only): it is activated no more and leaves every working memory;
-- its record stays.
CREATE FUNCTION retire_procedure(procedure_id uuid) RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    hit uuid;
BEGIN
    IF procedure_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "procedure_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE dionysus.procedures p SET status = 'retired', updated_at = dionysus.clock_now()
     WHERE p.id = retire_procedure.procedure_id AND p.status = 'active' RETURNING p.id INTO hit;
    DELETE FROM dionysus.working_memory_items i WHERE i.procedure_id = hit;
    RETURN hit IS NOT NULL;
END $$;
COMMENT ON FUNCTION retire_procedure(uuid) IS 'Owner only: a procedure is activated no more and leaves every working memory; its record stays. False when it was not active.';

-- ---------------------------------------------------------------------------------------
-- Activation
-- ---------------------------------------------------------------------------------------
-- Activates one procedure for a person: counted once per episode (a later activation in the
-- same episode only refreshes it in working memory), written down with how it came about, and
-- loaded into the working memory wm (when there is one) at the given relevance. The caller
-- holds the person's working-memory lock. Returns whether it was counted now.
CREATE FUNCTION dionysus_internal.procedure_activate(proc uuid, for_person text, wm dionysus.working_memories, turn uuid,
                                                     activated_how text, sim double precision, load_relevance double precision)
    RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    counted boolean;
BEGIN
    INSERT INTO dionysus.procedure_activations (procedure_id, person, episode_id, message_id, how, similarity)
    VALUES (proc, for_person, wm.episode_id, turn, activated_how, sim)
    ON CONFLICT (procedure_id, episode_id, person) WHERE episode_id IS NOT NULL DO NOTHING;
    counted := FOUND;
    IF counted THEN
        UPDATE dionysus.procedures p SET activation_count = p.activation_count + 1, last_activated = dionysus.clock_now()
         WHERE p.id = proc;
    END IF;
    IF wm.id IS NOT NULL THEN
        INSERT INTO dionysus.working_memory_items AS i (working_memory_id, kind, procedure_id, relevance, loaded_turn, last_turn)
        VALUES (wm.id, 'procedure', proc, load_relevance, wm.turns, wm.turns)
        ON CONFLICT (working_memory_id, ref_id) DO UPDATE
           SET relevance = greatest(i.relevance, EXCLUDED.relevance), uses = i.uses + 1, last_turn = EXCLUDED.last_turn;
    END IF;
    RETURN counted;
END $$;
COMMENT ON FUNCTION dionysus_internal.procedure_activate(uuid, text, dionysus.working_memories, uuid, text, double precision, double precision) IS
    'Activates a procedure for a person: counted and recorded once per episode, loaded into the working memory given; the caller holds the person''s working-memory lock. True when counted now.';

-- A person's turn activates the procedures its meaning is near (working_memory_turn, under the
-- person's lock): theirs and everyone's, active, at least procedure_match_similarity, the
-- nearest procedure_match_max. Returns how many it activated.
CREATE FUNCTION dionysus_internal.match_procedures(m dionysus.messages, wm dionysus.working_memories) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    said vector;
    hit record;
    n integer := 0;
    near double precision := dionysus_internal.heartbeat_setting('procedure_match_similarity');
    most integer := dionysus_internal.heartbeat_setting('procedure_match_max')::int;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM dionysus.procedures p WHERE p.status = 'active' AND (p.person IS NULL OR p.person = m.person)) THEN
        RETURN 0; -- nothing to match: no vector read
    END IF;
    SELECT x.embedding INTO said FROM dionysus.memories x WHERE x.id = m.memory_id;
    IF said IS NULL THEN
        RETURN 0;
    END IF;
    -- The nearest, then activated in id order: procedure rows are locked by primary key (8).
    FOR hit IN
        WITH model AS (SELECT dionysus_internal.store_model_key() AS key),
        nearest AS (
            SELECT p.id, 1 - (e.v <=> said) AS sim
              FROM dionysus.procedures p CROSS JOIN model
             CROSS JOIN LATERAL (SELECT CASE WHEN p.model_key = model.key THEN p.embedding
                                             ELSE dionysus.embed(dionysus_internal.procedure_text(p.name, p.domain, p.goals, p.core_patterns, p.core_concepts))
                                        END AS v) e
             WHERE p.status = 'active' AND (p.person IS NULL OR p.person = m.person)
               AND 1 - (e.v <=> said) >= near
             ORDER BY 2 DESC, p.id
             LIMIT most)
        SELECT * FROM nearest ORDER BY id
    LOOP
        PERFORM dionysus_internal.procedure_activate(hit.id, m.person, wm, m.id, 'matched', hit.sim, hit.sim);
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;
COMMENT ON FUNCTION dionysus_internal.match_procedures(dionysus.messages, dionysus.working_memories) IS
    'The procedures a person''s turn calls for by meaning (theirs and everyone''s, at least procedure_match_similarity, the nearest procedure_match_max), activated into their working memory; returns how many.';

-- A procedure asked for by name (activate_procedure): the person's own by that name,
-- else everyone's. It serves the turn's episode (the turn must be the person's), or without a
-- turn their most recent session; it enters that working memory at full relevance. P0002 when
-- no active procedure has that name for them. Returns the procedure with its counts.
CREATE FUNCTION activate_procedure(name text, person text, message_id uuid DEFAULT NULL) RETURNS jsonb
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
COMMENT ON FUNCTION activate_procedure(text, text, uuid) IS
    'Seed 002''s activate_procedure: the person''s own procedure by that name, else everyone''s, activated for the turn''s episode (the turn must be theirs, 42501) or their latest session, at full relevance in its working memory. P0002 when there is none. Returns it with its counts.';

-- A procedure as a context and its reader show it.
CREATE FUNCTION dionysus_internal.procedure_json(p dionysus.procedures) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', p.id, 'name', p.name, 'domain', p.domain, 'goals', to_jsonb(p.goals),
                              'core_patterns', to_jsonb(p.core_patterns), 'core_tools', to_jsonb(p.core_tools),
                              'core_concepts', to_jsonb(p.core_concepts), 'implementation_notes', to_jsonb(p.implementation_notes),
                              'person', p.person, 'status', p.status, 'activations', p.activation_count,
                              'successes', p.success_count, 'failures', p.failure_count,
                              'effectiveness', round(p.effectiveness::numeric, 3), 'last_activated', p.last_activated)
$$;
COMMENT ON FUNCTION dionysus_internal.procedure_json(dionysus.procedures) IS 'A procedure as contexts and readers show it: its bands, counts and effectiveness.';

-- The procedures a person may be served (theirs and everyone's), the most effective first.
CREATE FUNCTION person_procedures(for_person text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF for_person IS NULL OR btrim(for_person) = '' THEN
        RAISE EXCEPTION 'dionysus: argument "for_person" must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN (SELECT coalesce(jsonb_agg(dionysus_internal.procedure_json(p) ORDER BY p.effectiveness DESC, p.activation_count DESC, p.name), '[]')
              FROM dionysus.procedures p
             WHERE p.status = 'active' AND (p.person IS NULL OR p.person = for_person));
END $$;
COMMENT ON FUNCTION person_procedures(text) IS 'The procedures a person may be served (theirs and everyone''s, active), the most effective first.';

-- ---------------------------------------------------------------------------------------
-- Effectiveness: an episode's outcome scores the procedures it activated (024's
-- store_episode_outcome), each once.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.score_procedures(episode_id uuid, outcome text) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    -- Procedure rows by primary key (8), before they are counted.
    PERFORM 1 FROM dionysus.procedures p
     WHERE p.id IN (SELECT a.procedure_id FROM dionysus.procedure_activations a
                     WHERE a.episode_id = score_procedures.episode_id AND a.outcome IS NULL)
     ORDER BY p.id FOR NO KEY UPDATE;
    WITH scored AS (
        UPDATE dionysus.procedure_activations a SET outcome = score_procedures.outcome, scored_at = dionysus.clock_now()
         WHERE a.episode_id = score_procedures.episode_id AND a.outcome IS NULL
        RETURNING a.procedure_id),
    once AS (SELECT DISTINCT s.procedure_id FROM scored s)
    UPDATE dionysus.procedures p
       SET success_count = p.success_count + (score_procedures.outcome = 'success')::int,
           failure_count = p.failure_count + (score_procedures.outcome = 'failure')::int,
           updated_at = dionysus.clock_now()
      FROM once WHERE p.id = once.procedure_id;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;
COMMENT ON FUNCTION dionysus_internal.score_procedures(uuid, text) IS 'An episode''s outcome scores the procedures it activated, each once (success or failure; mixed and neutral count neither); returns how many.';

-- ---------------------------------------------------------------------------------------
-- Unified recall: one list, ranked by score, each with its kind. Memories and
-- facts score as recall scores them; procedures, censors and episode summaries are found by
-- meaning alone and score as recall would score a memory with only that evidence
-- (weight_vector · similarity). Only what the person may see: their memories (recall's rule),
-- their procedures and censors and everyone's, the episodes they alone took part in; with
-- person NULL, only what is nobody's in particular.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION recall_all(query text, k integer DEFAULT 10, person text DEFAULT NULL)
    RETURNS TABLE (kind text, id uuid, content text, score double precision, detail jsonb)
    LANGUAGE plpgsql AS $$
DECLARE
    q vector;
    w double precision := dionysus_internal.recall_setting('weight_vector');
BEGIN
    IF query IS NULL OR btrim(query) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "query": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF k IS NULL OR k < 1 OR k > 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "k": % is outside [1, 100]', k USING ERRCODE = 'invalid_parameter_value';
    END IF;
    q := dionysus.embed(query);
    RETURN QUERY
    WITH model AS (SELECT dionysus_internal.store_model_key() AS key),
    mems AS (
        SELECT CASE WHEN f.memory_id IS NOT NULL THEN 'fact' ELSE 'memory' END AS kind, r.memory_id AS id, r.content, r.score,
               jsonb_build_object('type', r.type, 'found_by', r.found_by, 'created_at', r.created_at, 'subject', f.subject) AS detail
          FROM dionysus.recall(query, k, person => recall_all.person) r
          LEFT JOIN dionysus.facts f ON f.memory_id = r.memory_id),
    procs AS (
        SELECT 'procedure'::text, p.id, p.name || coalesce(': ' || array_to_string(p.goals, '; '), ''),
               w * (1 - (e.v <=> q)), dionysus_internal.procedure_json(p)
          FROM dionysus.procedures p CROSS JOIN model
         CROSS JOIN LATERAL (SELECT CASE WHEN p.model_key = model.key THEN p.embedding
                                         ELSE dionysus.embed(dionysus_internal.procedure_text(p.name, p.domain, p.goals, p.core_patterns, p.core_concepts))
                                    END AS v) e
         WHERE p.status = 'active' AND (p.person IS NULL OR p.person = recall_all.person)
         ORDER BY e.v <=> q, p.id LIMIT k),
    cens AS (
        SELECT 'censor'::text, c.id, c.trigger, w * (1 - (e.v <=> q)),
               jsonb_build_object('severity', c.severity, 'reason', c.reason, 'personal', c.person IS NOT NULL)
          FROM dionysus.censors c CROSS JOIN model
         CROSS JOIN LATERAL (SELECT CASE WHEN c.model_key = model.key THEN c.embedding ELSE dionysus.embed(c.trigger) END AS v) e
         WHERE c.status = 'active' AND NOT c.any_content AND (c.person IS NULL OR c.person = recall_all.person)
         ORDER BY e.v <=> q, c.id LIMIT k),
    eps AS (
        SELECT 'episode'::text, x.id, x.summary, w * (1 - (x.summary_embedding <=> q)),
               jsonb_build_object('started_at', x.started_at, 'ended_at', x.ended_at, 'outcome', x.outcome, 'lessons', to_jsonb(x.lessons))
          FROM dionysus.episodes x
         WHERE recall_all.person IS NOT NULL AND x.summary_embedding IS NOT NULL
           AND x.participants = ARRAY[recall_all.person]
         ORDER BY x.summary_embedding <=> q, x.id LIMIT k)
    SELECT u.kind, u.id, u.content, u.score, u.detail
      FROM (SELECT * FROM mems UNION ALL SELECT * FROM procs UNION ALL SELECT * FROM cens UNION ALL SELECT * FROM eps) u
     ORDER BY u.score DESC, u.kind, u.id
     LIMIT k;
END $$;
COMMENT ON FUNCTION recall_all(text, integer, text) IS
    'Seed 002''s unified recall: memories and facts (as recall scores them), procedures, censors and the person''s own episode summaries (weight_vector · similarity: found by meaning alone), one list ranked by score with kind and detail; only what the person may see.';
