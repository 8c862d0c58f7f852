-- Dionysus 0.10.0 → 0.11.0: context budgets and detail levels (027_context_budget.sql, seed
-- 002): chat_context, the heartbeat's context and reflection are assembled within a token budget
-- chosen by the task (context_budgets: 3K casual chat, 6K a deep conversation, 8K a heartbeat,
-- 12K reflection; an archetype names its task), each item at the richest of its levels that
-- fits, counted by the model's WordPiece tokenizer, with a report of what was included and cut;
-- the language queue fills the summary and micro levels of long fresh memories. Every row is
-- kept; chat_context gains a budget argument (the old signature is replaced). A heartbeat's
-- reach-out the person found unwelcome proposes censors to them (028_heartbeat_lessons.sql).

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
	"context" jsonb, /* Option < JsonArg > */
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
CREATE TRIGGER context_budgets_keep_shipped BEFORE DELETE ON context_budgets
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.keep_shipped_budgets();

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
-- Censor proposals, shared by episodes and heartbeats (sql/024_episodes.sql)
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION dionysus_internal.propose_censor_candidates(person text, candidates jsonb, arg text, origin text,
                                                            learned_from_id uuid, context jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    item jsonb;
    sev dionysus.censor_severity;
    id uuid;
    made jsonb := '[]';
BEGIN
    IF jsonb_typeof(candidates) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'dionysus: argument "%": must be an array', arg USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF person IS NULL OR origin IS NULL OR origin NOT IN ('episode', 'heartbeat') THEN
        RAISE EXCEPTION 'dionysus: argument "%": proposed to no one, or learned from %', arg, quote_nullable(origin)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(candidates) LIMIT 3 LOOP
        IF jsonb_typeof(item) <> 'object' OR jsonb_typeof(item -> 'trigger') IS DISTINCT FROM 'string'
           OR jsonb_typeof(item -> 'reason') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'dionysus: argument "%": each must be {trigger, reason} strings', arg
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        sev := dionysus_internal.censor_checked(item ->> 'trigger', item ->> 'reason', 'warn', NULL, NULL, NULL, NULL, false);
        -- Nothing twice: not what holds for them, was proposed, or they dropped or lifted; and
        -- at most ten waiting for their word.
        CONTINUE WHEN EXISTS (SELECT 1 FROM dionysus.censors c
                               WHERE c.person = propose_censor_candidates.person AND lower(btrim(c.trigger)) = lower(btrim(item ->> 'trigger')))
                   OR (SELECT count(*) FROM dionysus.censors c WHERE c.person = propose_censor_candidates.person AND c.status = 'proposed') >= 10;
        INSERT INTO dionysus.censors (person, trigger, embedding, model_key, reason, severity, origin, learned_from_kind, learned_from_id, status)
        VALUES (propose_censor_candidates.person, btrim(item ->> 'trigger'), dionysus.embed(btrim(item ->> 'trigger')),
                dionysus_internal.store_model_key(), btrim(item ->> 'reason'), sev, origin, origin, learned_from_id, 'proposed')
        RETURNING censors.id INTO id;
        INSERT INTO dionysus.censor_events (censor_id, event, severity, context) VALUES (id, 'proposed', sev, context);
        made := made || to_jsonb(id);
    END LOOP;
    RETURN made;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.propose_censors(episode_id uuid, candidates jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    e dionysus.episodes;
    who text[];
BEGIN
    IF episode_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "episode_id" must not be null' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(candidates) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'dionysus: argument "result.episode.censor_candidates": must be an array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO e FROM dionysus.episodes x WHERE x.id = propose_censors.episode_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "episode_id": no episode with id %', episode_id USING ERRCODE = 'no_data_found';
    END IF;
    who := dionysus_internal.episode_participants(e.id);
    -- Only a failure here, of one person: an imported history's failures were someone else's
    -- (and its group chats are all the importer's turns).
    IF e.outcome IS DISTINCT FROM 'failure' OR cardinality(who) <> 1 OR e.source LIKE 'imported:%'
       OR EXISTS (SELECT 1 FROM dionysus.episode_memories em JOIN dionysus.messages m ON m.memory_id = em.memory_id
                   WHERE em.episode_id = e.id AND m.import_id IS NOT NULL) THEN
        RETURN '[]'::jsonb;
    END IF;
    RETURN dionysus_internal.propose_censor_candidates(who[1], candidates, 'result.episode.censor_candidates', 'episode', e.id,
        jsonb_build_object('learned_from', 'episode', 'learned_from_id', e.id, 'outcome', e.outcome));
END $$;

CREATE OR REPLACE FUNCTION proposed_censors(person text)
    RETURNS TABLE (censor_id uuid, trigger text, reason text, episode_id uuid, episode_summary text, proposed_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT c.id, c.trigger, c.reason, e.id, e.summary, c.created_at
      FROM dionysus.censors c
      LEFT JOIN dionysus.episodes e ON c.learned_from_kind = 'episode' AND e.id = c.learned_from_id
     WHERE c.status = 'proposed' AND c.person = proposed_censors.person
     ORDER BY c.created_at, c.id
$$;

-- ---------------------------------------------------------------------------------------
-- What an unwelcome heartbeat proposes, created whole as sql/028_heartbeat_lessons.sql has it
-- ---------------------------------------------------------------------------------------
-- The censors a heartbeat that went wrong proposes (seed 002's auto-extraction; issue #13 §1).
--
-- A heartbeat went wrong when the person says that what it did on its own was unwelcome:
-- negative feedback (/feedback right after it, or naming it; the words' tone or a given
-- sentiment) about a message a heartbeat's reach-out sent them. That feedback queues one 'heartbeat_censors' item; the driver shows the fast model
-- only what is the person's own (the message they got and what they said of it: never the
-- heartbeat's context, which may hold others' words) and asks what not to do again; the answer's
-- candidates are proposed to that person alone, as episodes' are (024): status 'proposed',
-- severity warn, learned from the heartbeat, matching nothing until the person keeps one
-- (/censor keep N, accept_censor) — nothing the system proposes about itself takes effect
-- without the person's word. Nothing is proposed twice, at most three a failure and ten waiting.
-- Feedback taken back (/undo) proposes nothing: before the work runs it asks no model, after it
-- the proposals it made and that still wait are withdrawn (retired, with the reason).
--
-- Lock order: the feedback's row is written first (its insert fires the queueing), then the
-- censors' rows (8) when the work completes.

ALTER TABLE censors DROP CONSTRAINT censors_origin_check,
    ADD CONSTRAINT censors_origin_check CHECK (origin IN ('person', 'owner', 'episode', 'heartbeat'));

-- The heartbeat's reach-out a feedback is about: its outbox row's id and the heartbeat's
-- (no row: not a heartbeat's doing). The outbox row it names, else the sent one whose bot turn it
-- names (/feedback without naming a message: Dionysus's last message to them).
CREATE FUNCTION dionysus_internal.feedback_reach_out(f dionysus.feedback, OUT outbox_id uuid, OUT heartbeat_id uuid)
    LANGUAGE sql STABLE AS $$
    SELECT o.id, w.heartbeat_id
      FROM dionysus.outbox o JOIN dionysus.work_queue w ON w.id = o.work_id
     WHERE o.person = f.person AND o.status = 'sent' AND w.heartbeat_id IS NOT NULL
       AND (o.id = f.about_outbox_id
            OR (f.about_outbox_id IS NULL AND o.platform = f.platform
                AND o.platform_message_id = (SELECT m.platform_message_id FROM dionysus.messages m WHERE m.id = f.about_message_id)))
     ORDER BY o.sent_at DESC, o.id
     LIMIT 1
$$;

CREATE FUNCTION dionysus_internal.queue_heartbeat_lesson() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sent uuid;
    hb uuid;
BEGIN
    IF NEW.sentiment <> 'negative' THEN
        RETURN NULL;
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
CREATE TRIGGER feedback_heartbeat_lesson AFTER INSERT ON feedback
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.queue_heartbeat_lesson();

-- What the model is shown for a heartbeat_censors item: the message the person got and their
-- words about it (NULL when the feedback was taken back).
CREATE FUNCTION dionysus_internal.heartbeat_lesson_source(work_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('message', o.content, 'feedback', f.content, 'sent_at', o.sent_at)
      FROM dionysus.work_queue w
      JOIN dionysus.feedback f ON f.id = (w.params ->> 'feedback_id')::uuid
      JOIN dionysus.outbox o ON o.id = (w.params ->> 'outbox_id')::uuid AND o.person = f.person
     WHERE w.id = heartbeat_lesson_source.work_id AND w.action = 'heartbeat_censors'
$$;

-- complete_work's result.censor_candidates for a heartbeat_censors item: proposed to the
-- feedback's person (not the model's word), learned from the heartbeat. SECURITY DEFINER, as
-- propose_censors (024): the item is read again from the queue and must be claimed, and what
-- it names must agree with the record: its key is its feedback's, which is negative and about
-- the reach-out of the heartbeat it names. The feedback is held (FOR SHARE) so that an /undo
-- racing it waits, then withdraws what this proposed. Returns the proposed censors' ids.
CREATE FUNCTION dionysus_internal.propose_heartbeat_censors(w dionysus.work_queue, candidates jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f dionysus.feedback;
BEGIN
    SELECT * INTO w FROM dionysus.work_queue q WHERE q.id = w.id AND q.status = 'claimed';
    IF NOT FOUND OR w.action <> 'heartbeat_censors' THEN
        RAISE EXCEPTION 'dionysus: argument "result.censor_candidates": only a heartbeat_censors item carries them'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO f FROM dionysus.feedback x WHERE x.id = (w.params ->> 'feedback_id')::uuid FOR SHARE;
    IF NOT FOUND THEN
        RETURN '[]'::jsonb; -- taken back meanwhile
    END IF;
    IF f.sentiment <> 'negative' OR w.idempotency_key <> 'heartbeat_censors:' || f.id
       OR (SELECT x.heartbeat_id FROM dionysus_internal.feedback_reach_out(f) x) IS DISTINCT FROM (w.params ->> 'heartbeat_id')::uuid THEN
        RAISE EXCEPTION 'dionysus: argument "result.censor_candidates": work item % is not the lesson of its feedback', w.id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN dionysus_internal.propose_censor_candidates(f.person, candidates, 'result.censor_candidates', 'heartbeat',
        (w.params ->> 'heartbeat_id')::uuid, jsonb_build_object('learned_from', 'heartbeat', 'learned_from_id', w.params ->> 'heartbeat_id',
                                                                'feedback_id', f.id));
END $$;

-- Feedback taken back withdraws the proposals it made that still wait (SECURITY DEFINER: the
-- driver's role, which runs /undo, writes no censors).
CREATE FUNCTION dionysus_internal.withdraw_heartbeat_lesson() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT x.id, x.severity FROM dionysus.censors x
              WHERE x.status = 'proposed' AND x.person = OLD.person
                AND EXISTS (SELECT 1 FROM dionysus.censor_events e WHERE e.censor_id = x.id AND e.event = 'proposed'
                                                                    AND e.context ->> 'feedback_id' = OLD.id::text)
              ORDER BY x.id FOR UPDATE LOOP
        UPDATE dionysus.censors x SET status = 'retired', updated_at = dionysus.clock_now() WHERE x.id = c.id;
        INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
        VALUES (c.id, 'retired', c.severity, jsonb_build_object('why', 'the feedback it was learned from was taken back', 'feedback_id', OLD.id));
    END LOOP;
    RETURN NULL;
END $$;
CREATE TRIGGER feedback_withdraw_heartbeat_lesson AFTER DELETE ON feedback
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.withdraw_heartbeat_lesson();

INSERT INTO prompt_templates (key, version, temperature, note, template) VALUES
('heartbeat_censors', 1, 0.2, 'lessons (028): what not to do again, after a message sent on your own was unwelcome', $t$TASK: heartbeat_censors
You sent the person a message on your own initiative, and they told you it was unwelcome.
Propose at most three things not to do again, each a short description of the kind of action
or message to avoid (the trigger, matched by meaning against what you are about to do) and why
(in their terms). Be specific to what they objected to; do not generalise to never contacting
them. If their words give no lesson, answer with an empty list. They will be asked to keep or
drop each one.

The message you sent:
{{message}}

What they said about it:
{{feedback}}

Answer with JSON only: {"censor_candidates": [{"trigger": "...", "reason": "..."}]}$t$);

-- ---------------------------------------------------------------------------------------
-- complete_work takes a heartbeat lesson's candidates (sql/007_work_queue.sql)
-- ---------------------------------------------------------------------------------------
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
    history_at timestamptz;
    censored jsonb;
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
                       'episode_summary', 'message', 'summary', 'basis', 'person', 'maintenance', 'objectives', 'dream',
                       'levels', 'people', 'relations', 'episode', 'focus', 'threads', 'censor_candidates') THEN
            RAISE EXCEPTION 'dionysus: argument "result": unknown key "%"', key USING ERRCODE = 'invalid_text_representation';
        END IF;
        IF key IN ('memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts', 'basis', 'objectives',
                   'people', 'relations')
           AND jsonb_typeof(result -> key) <> 'array' THEN
            RAISE EXCEPTION 'dionysus: argument "result.%": must be an array', key USING ERRCODE = 'invalid_text_representation';
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b
                WHERE jsonb_typeof(b) <> 'string'
                   OR (b #>> '{}') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN
        RAISE EXCEPTION 'dionysus: argument "result.basis": must be an array of memory ids' USING ERRCODE = 'invalid_text_representation';
    END IF;
    -- A turn read again by a re-index (020): staged for the swap, nothing applied now.
    IF w.action = 'reindex_message' THEN
        made := dionysus_internal.reindex_stage(w, result);
        UPDATE dionysus.work_queue SET status = 'done', completed_at = now(), lease_until = NULL,
               result = complete_work.result || jsonb_build_object('applied', made)
         WHERE id = w.id;
        RETURN made;
    END IF;
    privacy := CASE WHEN w.params ->> 'person' IS NOT NULL THEN ARRAY[w.params ->> 'person'] END;
    privacy := dionysus_internal.privacy_union(privacy, (SELECT h.private_to FROM dionysus.heartbeat_log h WHERE h.id = w.heartbeat_id));
    privacy := dionysus_internal.privacy_union(privacy, dionysus_internal.memory_privacy(
                   ARRAY(SELECT (b #>> '{}')::uuid FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b)));
    from_web := w.action IN ('inquire_shallow', 'inquire_deep');
    -- A turn of an imported history (018): what it asked was asked of someone else, not of us (no
    -- goals), and what it aimed at more than 30 days ago is the person's past: it neither adds
    -- objectives nor moves the ones they have now.
    IF w.action = 'extract_message' THEN
        SELECT x.created_at INTO history_at FROM dionysus.messages x
         WHERE x.id = (w.params ->> 'message_id')::uuid AND x.import_id IS NOT NULL;
    END IF;
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
    -- The people in the person's life their turn speaks of (023_people.sql): theirs alone.
    IF jsonb_array_length(coalesce(result -> 'people', '[]')) + jsonb_array_length(coalesce(result -> 'relations', '[]')) > 0 THEN
        IF w.action <> 'extract_message' OR w.params ->> 'person' IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.people": only the extraction of a person''s turn carries people or relations'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        made := made || dionysus_internal.store_people(w.params ->> 'person', coalesce(result -> 'people', '[]'),
                                                       coalesce(result -> 'relations', '[]'), (w.params ->> 'message_id')::uuid);
    END IF;
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
               summary_embedding = dionysus.embed(result ->> 'episode_summary'),
               participants = dionysus_internal.episode_participants(id)
         WHERE id = (w.params ->> 'episode_id')::uuid;
        made := made || jsonb_build_object('episode_id', w.params ->> 'episode_id');
    END IF;
    -- How it went, what it taught, and the censors a failure proposes (024_episodes.sql).
    IF result ? 'episode' THEN
        made := made || jsonb_build_object('episode', dionysus_internal.store_episode_outcome(w, result -> 'episode'));
    END IF;
    -- A fading memory's summary and micro line (021_decay.sql).
    IF result ? 'levels' THEN
        made := made || jsonb_build_object('levels', dionysus_internal.store_levels(w, result -> 'levels'));
    END IF;
    -- What a heartbeat the person found unwelcome proposes not to do again (028_heartbeat_lessons.sql).
    IF result ? 'censor_candidates' THEN
        made := made || jsonb_build_object('censors_proposed', dionysus_internal.propose_heartbeat_censors(w, result -> 'censor_candidates'));
    END IF;
    IF history_at IS NOT NULL AND jsonb_array_length(coalesce(result -> 'goals', '[]')) > 0 THEN
        refused := refused || jsonb_build_object('goals', jsonb_array_length(result -> 'goals'), 'reason', 'asked in an imported history');
        result := result - 'goals';
    END IF;
    IF history_at < now() - interval '30 days' AND jsonb_array_length(coalesce(result -> 'objectives', '[]')) > 0 THEN
        refused := refused || jsonb_build_object('objectives', jsonb_array_length(result -> 'objectives'), 'reason', 'the past of an imported history');
        result := result - 'objectives';
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'goals', '[]')) LOOP
        new_id := dionysus.create_goal(item ->> 'title', item ->> 'description', coalesce(item ->> 'source', 'curiosity'),
                                       item ->> 'priority', (item ->> 'parent_goal_id')::uuid, private_to => privacy);
        made := jsonb_set(made, '{goals}', (made -> 'goals') || to_jsonb(new_id));
    END LOOP;
    -- The person's objectives (017), from their own turn only: theirs, never someone else's.
    IF jsonb_array_length(coalesce(result -> 'objectives', '[]')) > 0 THEN
        IF w.action <> 'extract_message' OR w.params ->> 'person' IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.objectives": only the extraction of a person''s turn carries them'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR item IN SELECT * FROM jsonb_array_elements(result -> 'objectives') LOOP
            new_id := dionysus_internal.note_objective(w.params ->> 'person', item ->> 'description',
                                                       (item ->> 'saliency')::float8, item ->> 'status', (w.params ->> 'message_id')::uuid);
            IF new_id IS NOT NULL THEN
                made := made || jsonb_build_object('objectives', coalesce(made -> 'objectives', '[]'::jsonb) || to_jsonb(new_id));
            END IF;
        END LOOP;
    END IF;
    IF result ? 'dream' THEN
        IF w.action <> 'dream' OR (w.params ->> 'dream_id') IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.dream": only a dream item carries one' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        made := made || jsonb_build_object('dream', dionysus_internal.record_dream((w.params ->> 'dream_id')::uuid, result -> 'dream'));
    END IF;
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
        -- Censors (022) read the words before the outbox does: a blocked message is not sent,
        -- and the item is done (its activation stays counted; a retry would only repeat it).
        censored := dionysus.censor_gate('reach_out', result ->> 'message', target ->> 'person', jsonb_build_object('work_id', w.id));
        IF censored ->> 'verdict' = 'block' THEN
            refused := refused || jsonb_build_object('message', 'censored', 'reasons', censored -> 'reasons', 'censors', censored -> 'censors');
            -- What the heartbeat's narrative is told of this work (its summary): nothing was sent.
            -- Not why: a person's own reasons are theirs, and a narrative may be read by others.
            result := result || jsonb_build_object('summary', 'not sent: a censor held it back');
        ELSE
            IF censored ->> 'verdict' = 'warn' THEN
                made := made || jsonb_build_object('censor_warnings', censored -> 'censors');
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
    END IF;
    -- The session's focus and the threads the turn opened or closed (025), last: the person's
    -- working-memory lock comes after every other lock (002's order).
    IF result ? 'focus' OR result ? 'threads' THEN
        IF w.action <> 'extract_message' OR w.params ->> 'person' IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.threads": only the extraction of a person''s turn carries a focus or threads'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        made := made || jsonb_build_object('working_memory',
                    dionysus_internal.store_working_focus(w.params ->> 'person', (w.params ->> 'message_id')::uuid,
                                                          result -> 'focus', result -> 'threads'));
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
COMMENT ON FUNCTION dionysus_internal.propose_censors(uuid, jsonb) IS
    'A failed episode of one person (not an imported history''s) proposes up to three of its censor candidates to that person (propose_censor_candidates); returns their ids.';
COMMENT ON FUNCTION dionysus_internal.propose_censor_candidates(text, jsonb, text, text, uuid, jsonb) IS
    'SECURITY DEFINER, not the driver''s: proposes up to three {trigger, reason} censors to one person (status proposed, severity warn, learned from an episode or a heartbeat), none that holds, was proposed, or was dropped or lifted for them, at most ten waiting; returns their ids.';
-- Context budgets and detail levels (027).
COMMENT ON TABLE context_budgets IS 'Token budgets by task (seed 002: 3K casual chat, 6K a deep conversation, 8K a heartbeat decision, 12K reflection or synthesis), each with the order its sections are served in; a context archetype names its task (budget_task).';
COMMENT ON COLUMN context_archetypes.budget_task IS 'The context budget (context_budgets.task) of this kind of message.';
COMMENT ON FUNCTION count_tokens(text) IS 'The tokens of a text by the embedding model''s WordPiece tokenizer, never truncated (four bytes a token without tokenizer.json).';
COMMENT ON FUNCTION dionysus_internal.fit_context(jsonb, integer, text[], text) IS
    'Fits a context into a budget: the message, north stars, focus and a heartbeat''s goals and surroundings always; then, sections in the order given (the rest after), every item at its smallest level while it fits, then each in rank order up to the richest that fits (full, summary, micro, clipped); cut items leave; the report goes under context_budget.';
COMMENT ON FUNCTION dionysus_internal.fit_task_context(jsonb, text, integer) IS 'fit_context with a task''s budget and section order (budget tokens instead, when given).';
COMMENT ON FUNCTION fit_to_budget(text, jsonb) IS 'A context assembled by the caller (as chat_context''s or heartbeat_begin''s sections), fitted into a task''s budget (context_budgets); reports under context_budget.';
COMMENT ON FUNCTION dionysus_internal.keep_shipped_budgets() IS 'Trigger: the four shipped context budgets (chat, deep_conversation, heartbeat, reflection) are asked for by name; they change, they are not deleted (23001).';
COMMENT ON FUNCTION dionysus_internal.enqueue_condense_levels() IS 'Queues condense_memory work for long fresh memories (over 100 characters, of the last 30 days) lacking a summary or micro line, ten a pass, newest first; returns how many.';

-- The censors an unwelcome heartbeat proposes (028).
COMMENT ON FUNCTION dionysus_internal.feedback_reach_out(dionysus.feedback) IS 'The heartbeat''s reach-out a feedback is about: its sent outbox row (the one it names, or the one whose bot turn it names) and the heartbeat; NULLs when no heartbeat sent it.';
COMMENT ON FUNCTION dionysus_internal.withdraw_heartbeat_lesson() IS 'Trigger: feedback taken back retires the censors its lesson proposed that still wait (with a retired event saying why).';
COMMENT ON FUNCTION dionysus_internal.queue_heartbeat_lesson() IS 'Trigger: negative feedback about a heartbeat''s reach-out queues a heartbeat_censors item (once per feedback).';
COMMENT ON FUNCTION dionysus_internal.heartbeat_lesson_source(uuid) IS 'What a heartbeat_censors item shows the model: the message the person got and their words about it; NULL once the feedback is taken back.';
COMMENT ON FUNCTION dionysus_internal.propose_heartbeat_censors(dionysus.work_queue, jsonb) IS
    'complete_work of a claimed heartbeat_censors item: its candidates proposed to the feedback''s person, learned from the heartbeat; nothing when the feedback was taken back; 22023 when the item is not the lesson of its negative feedback about that heartbeat''s reach-out. Returns their ids.';

GRANT SELECT, INSERT, UPDATE ON context_budgets TO dionysus_driver;
GRANT EXECUTE ON FUNCTION count_tokens(text), dionysus_internal.fit_context(jsonb, integer, text[], text),
    dionysus_internal.fit_task_context(jsonb, text, integer), fit_to_budget(text, jsonb),
    dionysus_internal.enqueue_condense_levels(), chat_context(uuid, integer, integer, boolean, integer),
    dionysus_internal.keep_shipped_budgets(), dionysus_internal.feedback_reach_out(dionysus.feedback),
    dionysus_internal.withdraw_heartbeat_lesson(),
    dionysus_internal.queue_heartbeat_lesson(), dionysus_internal.heartbeat_lesson_source(uuid),
    dionysus_internal.propose_heartbeat_censors(dionysus.work_queue, jsonb) TO dionysus_driver;
REVOKE EXECUTE ON FUNCTION dionysus_internal.propose_censor_candidates(text, jsonb, text, text, uuid, jsonb) FROM PUBLIC, dionysus_driver;
REVOKE EXECUTE ON FUNCTION dionysus_internal.propose_heartbeat_censors(dionysus.work_queue, jsonb) FROM PUBLIC;
-- Context budgets: the owner's settings, like heartbeat_config; the driver only reads them.
REVOKE INSERT, UPDATE ON context_budgets FROM dionysus_driver;
