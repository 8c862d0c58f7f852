-- Context budgets and detail levels: frame-adaptive budgets (issue #13 §4).
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
-- level, how many tokens each section took, and what the budget cut. The turns are kept
-- unbroken from the newest (a transcript has no holes). The budget shapes what the prompt
-- shows, not what the session holds: working memory (025) steps with everything recall found.

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
COMMENT ON TABLE context_budgets IS 'Token budgets by task (3K casual chat, 6K a deep conversation, 8K a heartbeat decision, 12K reflection or synthesis), each with the order its sections are served in; a context archetype names its task (budget_task).';
INSERT INTO context_budgets (task, tokens, sections, description) VALUES
    ('chat', 3000, DEFAULT, 'casual chat: a reply when nothing asks for more'),
    ('deep_conversation', 6000, ARRAY['memories', 'recent_turns', 'working_memory', 'people', 'triples', 'objectives', 'goals'],
     'a deep conversation: feelings, plans, questions about the past'),
    ('heartbeat', 8000, ARRAY['recent_memories', 'people', 'activated_themes', 'identity', 'worldview'],
     'a heartbeat decision'),
    ('reflection', 12000, ARRAY['recent_memories', 'memories', 'identity', 'worldview', 'activated_themes'],
     'reflection or synthesis');

-- The shipped tasks are what chat_context, heartbeat_begin and the driver's reflection ask
-- for by name: their budgets can be changed, not deleted.
CREATE FUNCTION dionysus_internal.keep_shipped_budgets() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.task IN ('chat', 'deep_conversation', 'heartbeat', 'reflection') THEN
        RAISE EXCEPTION 'dionysus: the context budget % is asked for by name; change its tokens instead of deleting it', OLD.task
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN OLD;
END $$;
COMMENT ON FUNCTION dionysus_internal.keep_shipped_budgets() IS 'Trigger: the four shipped context budgets (chat, deep_conversation, heartbeat, reflection) are asked for by name; they change, they are not deleted (23001).';
CREATE TRIGGER context_budgets_keep_shipped BEFORE DELETE ON context_budgets
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.keep_shipped_budgets();

-- An archetype's budget_task (017) names one of these; the key is added here, where the budgets are.
ALTER TABLE context_archetypes ADD CONSTRAINT context_archetypes_budget_task_fkey
    FOREIGN KEY (budget_task) REFERENCES context_budgets (task) ON UPDATE CASCADE;
-- Indexed, as every foreign key (001).
CREATE INDEX context_archetypes_budget_task ON context_archetypes (budget_task);

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
COMMENT ON FUNCTION dionysus_internal.fit_task_context(jsonb, text, integer) IS 'fit_context with a task''s budget and section order (budget tokens instead, when given).';

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
COMMENT ON FUNCTION fit_to_budget(text, jsonb) IS 'A context assembled by the caller (as chat_context''s or heartbeat_begin''s sections), fitted into a task''s budget (context_budgets); reports under context_budget.';

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
COMMENT ON FUNCTION dionysus_internal.enqueue_condense_levels() IS 'Queues condense_memory work for long fresh memories (over 100 characters, of the last 30 days) lacking a summary or micro line, ten a pass, newest first; returns how many.';

-- The condensing prompt serves long fresh memories too, not only fading ones: condense_memory's
-- version 2 (021).
