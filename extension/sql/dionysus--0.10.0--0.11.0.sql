-- Dionysus 0.10.0 → 0.11.0: context budgets and detail levels (027_context_budget.sql, seed
-- 002): chat_context, the heartbeat's context and reflection are assembled within a token budget
-- chosen by the task (context_budgets: 3K casual chat, 6K a deep conversation, 8K a heartbeat,
-- 12K reflection; an archetype names its task), each item at the richest of its levels that
-- fits, counted by the model's WordPiece tokenizer, with a report of what was included and cut;
-- the language queue fills the summary and micro levels of long fresh memories. Every row is
-- kept; chat_context gains a budget argument (the old signature is replaced).

-- ---------------------------------------------------------------------------------------
-- The Rust core: token counts and the fit (extension/src/context)
-- ---------------------------------------------------------------------------------------
CREATE  FUNCTION "count_tokens"(
	"content" TEXT /* Option < & str > */
) RETURNS INT /* i32 */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'count_tokens_wrapper';

CREATE  FUNCTION dionysus_internal."fit_context"(
	"context" jsonb, /* Option < pgrx :: JsonB > */
	"budget" INT, /* Option < i32 > */
	"sections" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"task" TEXT /* Option < & str > */
) RETURNS jsonb /* pgrx :: JsonB */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'fit_context_wrapper';

-- ---------------------------------------------------------------------------------------
-- The new organ, created whole as sql/027_context_budget.sql has it
-- ---------------------------------------------------------------------------------------
-- Context budgets and detail levels (seed 002's frame-adaptive budgets; issue #13 §4).
--
-- A context is assembled within a token budget chosen by its task: 3K for casual chat, 6K for a
-- deep conversation, 8K for a heartbeat decision, 12K for reflection or synthesis. The budgets
-- are data (context_budgets); a context archetype (017) names the task its messages are, so the
-- kind of message chooses its budget; chat_context(…, budget => n) overrides both.
--
-- Every memory has three detail levels: micro (about 20 tokens), summary (50–100 tokens) and
-- full (its content). The language-work queue fills the two shorter ones for long memories that
-- lack them (enqueue_condense_levels, the same condense_memory work decay asks for; 021), and a
-- memory that has faded already is its summary or its micro line.
--
-- The fit (dionysus_internal.fit_context, Rust: extension/src/context): tokens are counted with
-- the embedding model's own WordPiece tokenizer, never truncated (count_tokens). What every
-- context shows whatever the budget is counted first: the message, the person's north stars,
-- the session's focus, a heartbeat's goal review and surroundings. Then the budget's sections in
-- its order, each item in its section's rank (recall's order; the newest turns first): first
-- every item gets in at its smallest level while that fits, so one long memory cannot starve the
-- rest, then each moves up, in rank order, to the richest level the rest of the budget allows.
-- A long item without a micro line can still get in as its first words, marked 'clipped'. Cut
-- items leave the context; the context says, under context_budget, what it included at which
-- level, how many tokens each section took, and what the budget cut.

CREATE TABLE context_budgets (
    task        text PRIMARY KEY CHECK (task ~ '^[a-z][a-z0-9_]*$'),
    tokens      integer NOT NULL CHECK (tokens BETWEEN 500 AND 200000),
    -- The sections in the order the budget serves them; those left out come after, so nothing
    -- escapes the budget (the names are extension/src/context's SECTIONS).
    sections    text[] NOT NULL DEFAULT ARRAY['recent_turns', 'memories', 'working_memory', 'people', 'triples', 'objectives', 'goals']
                CHECK (sections <@ ARRAY['recent_turns', 'memories', 'recent_memories', 'working_memory', 'people', 'triples',
                                         'objectives', 'goals', 'identity', 'worldview', 'activated_themes']),
    description text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO context_budgets (task, tokens, sections, description) VALUES
    ('chat', 3000, DEFAULT, 'casual chat: a reply when nothing asks for more'),
    ('deep_conversation', 6000, ARRAY['memories', 'recent_turns', 'working_memory', 'people', 'triples', 'objectives', 'goals'],
     'a deep conversation: feelings, plans, questions about the past'),
    ('heartbeat', 8000, ARRAY['recent_memories', 'people', 'activated_themes', 'identity', 'worldview'],
     'a heartbeat decision'),
    ('reflection', 12000, ARRAY['recent_memories', 'memories', 'identity', 'worldview', 'activated_themes'],
     'reflection or synthesis');

-- The task of an archetype's messages, so the kind of message chooses its budget.
ALTER TABLE context_archetypes
    ADD COLUMN budget_task text NOT NULL DEFAULT 'chat' REFERENCES context_budgets (task) ON UPDATE CASCADE;
UPDATE context_archetypes SET budget_task = 'deep_conversation'
 WHERE name IN ('personal_moment', 'planning_task', 'past_question') AND created_by = 'human';

-- A context fitted into its task's budget (or into budget tokens when given).
CREATE FUNCTION dionysus_internal.fit_task_context(context jsonb, task text, budget integer DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    b dionysus.context_budgets;
BEGIN
    SELECT * INTO b FROM dionysus.context_budgets x WHERE x.task = fit_task_context.task;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "task": no context budget named %', task USING ERRCODE = 'no_data_found';
    END IF;
    RETURN dionysus_internal.fit_context(context, coalesce(budget, b.tokens), b.sections, b.task);
END $$;

-- A context a caller assembled (the driver's reflection), fitted into a task's budget.
CREATE FUNCTION fit_to_budget(task text, context jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF task IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "task" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF context IS NULL OR jsonb_typeof(context) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: argument "context": must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN dionysus_internal.fit_task_context(context, task);
END $$;

-- ---------------------------------------------------------------------------------------
-- The language queue fills the levels (enqueue_language_work, 012): long fresh memories without
-- a summary or micro line are condensed ahead of need, ten a pass at background priority, the
-- newest first (what recall brings up now). The work is decay's own ('condense_memory:<id>:fading',
-- 021), so when the memory fades its summary is ready, and a model that could not condense it
-- is not asked twice. North stars keep their words (store_levels leaves them). Text of 100
-- characters or less (about 25 tokens) needs no levels: the index holds only what might.
-- ---------------------------------------------------------------------------------------
CREATE INDEX memories_lacking_levels ON memories (created_at DESC)
    WHERE status = 'active' AND stage = 'fresh' AND (summary IS NULL OR micro IS NULL) AND length(content) > 100;

CREATE FUNCTION dionysus_internal.enqueue_condense_levels() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    cfg dionysus.decay_config;
    n integer;
BEGIN
    SELECT * INTO cfg FROM dionysus.decay_config WHERE id = 1;
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, priority)
    SELECT 'condense_memory:' || m.id || ':fading', 'condense_memory', jsonb_build_object('memory_id', m.id, 'level', 'summary'),
           dionysus_internal.heartbeat_setting('work_max_attempts')::int, -1
      FROM dionysus.memories m
     WHERE m.status = 'active' AND m.stage = 'fresh' AND (m.summary IS NULL OR m.micro IS NULL) AND length(m.content) > 100
       AND NOT (m.metadata ? 'north_star')
       AND ((m.summary IS NULL AND length(m.content) > cfg.summary_chars) OR (m.micro IS NULL AND length(m.content) > cfg.micro_chars))
       AND m.created_at > now() - interval '30 days'
       AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.idempotency_key = 'condense_memory:' || m.id || ':fading')
     ORDER BY m.created_at DESC LIMIT 10
    ON CONFLICT (idempotency_key) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

-- The condensing prompt now serves long fresh memories too, not only fading ones.
SELECT dionysus_internal.ship_template('condense_memory',
    'decay (021): a memory''s summary and micro line, before it fades',
    'levels (027): a memory''s summary and micro line, for tight contexts and for when it fades', 0.2,
    $t$TASK: condense_memory
Write a memory's shorter forms: they are shown when a context has little room, and the memory
lives on in them when it fades. Keep meaning and feeling; lose specifics.
- summary: 1–3 sentences (50–100 tokens): what happened and what it meant.
- micro: one line (about 20 tokens): its gist and how it felt.
Use only what the memory says. Write in the memory's own voice and person.

The memory:
{{memory}}

Answer with JSON only: {"summary": "...", "micro": "..."}$t$);

-- ---------------------------------------------------------------------------------------
-- The language queue asks for the levels (sql/012_conversation.sql)
-- ---------------------------------------------------------------------------------------
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

-- ---------------------------------------------------------------------------------------
-- chat_context keeps to its budget and takes one (sql/012_conversation.sql): a new argument,
-- so the old signature goes
-- ---------------------------------------------------------------------------------------
DROP FUNCTION chat_context(uuid, integer, integer, boolean);
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
        shape := dionysus.match_archetype((SELECT x.embedding FROM dionysus.memories x WHERE x.id = m.memory_id));
        IF shape ->> 'name' IS NOT NULL THEN
            max_turns := least(max_turns, (shape ->> 'turns')::int);
            max_memories := least(max_memories, (shape ->> 'memories')::int);
            threshold := (shape ->> 'similarity_threshold')::float8;
            depth := (shape ->> 'triple_depth')::int;
            task := coalesce((SELECT a.budget_task FROM dionysus.context_archetypes a WHERE a.name = shape ->> 'name'), task);
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

-- ---------------------------------------------------------------------------------------
-- The heartbeat's context keeps to its budget (sql/010_heartbeat_cycle.sql)
-- ---------------------------------------------------------------------------------------
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
                                                                         'valence', m.valence, 'summary', m.summary, 'micro', m.micro)
                                                      ORDER BY m.created_at DESC)
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
        'people', dionysus.known_people(),
        -- What matters most to the person it would reach out to (017, whoever wrote last): every
        -- heartbeat decision keeps it in view. Only theirs, so the heartbeat is tainted by no one else.
        'north_stars', coalesce((SELECT jsonb_agg(jsonb_build_object('person', n.person, 'north_star', n.content) ORDER BY n.created_at)
                                   FROM dionysus.north_stars n
                                  WHERE n.status = 'active'
                                    AND n.person = (SELECT p.person FROM dionysus.people p ORDER BY p.last_message_at DESC NULLS LAST LIMIT 1)), '[]'::jsonb));
    -- Within the heartbeat's budget (027), saying what it included and what it cut.
    ctx := dionysus_internal.fit_task_context(ctx, 'heartbeat');
    -- Whose private words this context holds: its memories (recent ones, and the recalled
    -- ones activated_themes may quote) and its goals. What the heartbeat writes inherits it.
    taint := dionysus_internal.privacy_union(
        dionysus_internal.memory_privacy(ARRAY(
            SELECT (e ->> 'id')::uuid FROM jsonb_array_elements(ctx -> 'recent_memories') e
            UNION (SELECT memory_id FROM dionysus.memory_access_log WHERE accessed_at > now() - interval '1 day'
                    ORDER BY accessed_at DESC LIMIT 200)
            UNION (SELECT id FROM dionysus.memories WHERE last_accessed > now() - interval '1 day'
                    ORDER BY last_accessed DESC LIMIT 200))),
        dionysus_internal.privacy_union(
            (SELECT array_agg(DISTINCT p) FROM dionysus.goals g, unnest(g.private_to) p WHERE g.priority IN ('active', 'queued')),
            (SELECT array_agg(DISTINCT e ->> 'person') FROM jsonb_array_elements(ctx -> 'north_stars') e)));
    UPDATE dionysus.heartbeat_log SET context = ctx, environment_snapshot = env, goals_snapshot = goals, private_to = taint
     WHERE id = hb;
    UPDATE dionysus.heartbeat_state SET in_flight = hb, heartbeat_count = n, requested_at = NULL, request_reason = NULL,
           updated_at = now() WHERE id = 1;
    RETURN ctx;
END $$;

-- ---------------------------------------------------------------------------------------
-- As sql/900_api.sql: search paths, comments, the driver's role
-- ---------------------------------------------------------------------------------------
DO $$
DECLARE
    vschema text := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'vector');
BEGIN
    EXECUTE format('ALTER FUNCTION dionysus.chat_context(uuid, integer, integer, boolean, integer) SET search_path = pg_catalog, dionysus, %I', vschema);
END $$;

COMMENT ON FUNCTION chat_context(uuid, integer, integer, boolean, integer) IS
    'Everything a reply needs: the last turns of the channel, recalled memories (turns in view left out; facts marked), '
    'triples about the entities named and the person, the people in their life it names with how they relate (people), the active goals, the person''s north stars and objectives; only what the message''s person may see. '
    'With use_archetype, the nearest context archetype sets the turns, memories, similarity threshold and triple depth (reported as archetype), '
    'within max_memories and max_turns (which alone apply when no archetype is near enough). '
    'working_memory: the session''s focus, open threads and what earlier turns brought up (a context with memories steps it once per turn; NULL outside a person''s open session). '
    'All within a token budget (027): the archetype''s task''s (casual chat''s without one), or budget tokens (100 to 200000); each item at the richest level that fits '
    '(a memory''s or turn''s content is that level''s text, with level and tokens), the rest cut; context_budget reports what was included at which level and what was cut.';
COMMENT ON FUNCTION heartbeat_begin() IS
    'Starts a heartbeat (or returns the one in flight): regenerates energy, observes, orients, and returns the whole '
    'context as jsonb: energy, environment, goal review, recent memories, activated themes, identity, worldview, '
    'action costs and warnings, within the heartbeat''s token budget (027; what it cut is under context_budget).';
COMMENT ON FUNCTION enqueue_language_work() IS
    'Queues the worker''s language jobs for the driver (seed 000 §6.4–6.5): summaries of closed episodes, concepts of young memories, '
    'the summary and micro levels of long fresh memories (027). '
    'Closes episodes left open past the gap first. Returns how many were queued.';
-- Context budgets and detail levels (027).
COMMENT ON TABLE context_budgets IS 'Token budgets by task (seed 002: 3K casual chat, 6K a deep conversation, 8K a heartbeat decision, 12K reflection or synthesis), each with the order its sections are served in; a context archetype names its task (budget_task).';
COMMENT ON COLUMN context_archetypes.budget_task IS 'The context budget (context_budgets.task) of this kind of message.';
COMMENT ON FUNCTION count_tokens(text) IS 'The tokens of a text by the embedding model''s WordPiece tokenizer, never truncated (four bytes a token without tokenizer.json).';
COMMENT ON FUNCTION dionysus_internal.fit_context(jsonb, integer, text[], text) IS
    'Fits a context into a budget: the message, north stars, focus and a heartbeat''s goals and surroundings always; then, sections in the order given (the rest after), every item at its smallest level while it fits, then each in rank order up to the richest that fits (full, summary, micro, clipped); cut items leave; the report goes under context_budget.';
COMMENT ON FUNCTION dionysus_internal.fit_task_context(jsonb, text, integer) IS 'fit_context with a task''s budget and section order (budget tokens instead, when given).';
COMMENT ON FUNCTION fit_to_budget(text, jsonb) IS 'A context assembled by the caller (as chat_context''s or heartbeat_begin''s sections), fitted into a task''s budget (context_budgets); reports under context_budget.';
COMMENT ON FUNCTION dionysus_internal.enqueue_condense_levels() IS 'Queues condense_memory work for long fresh memories (over 100 characters, of the last 30 days) lacking a summary or micro line, ten a pass, newest first; returns how many.';

GRANT SELECT, INSERT, UPDATE ON context_budgets TO dionysus_driver;
GRANT EXECUTE ON FUNCTION count_tokens(text), dionysus_internal.fit_context(jsonb, integer, text[], text),
    dionysus_internal.fit_task_context(jsonb, text, integer), fit_to_budget(text, jsonb),
    dionysus_internal.enqueue_condense_levels(), chat_context(uuid, integer, integer, boolean, integer) TO dionysus_driver;
-- Context budgets: the owner's settings, like heartbeat_config; the driver only reads them.
REVOKE INSERT, UPDATE ON context_budgets FROM dionysus_driver;
