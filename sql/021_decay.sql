-- Memory that fades like a person's, through its detail levels (issue #13 §5).
--
-- A memory lives through stages by its *effective age*: the time since it was last met (made,
-- or mentioned again), on the one clock (clock_now), divided by how much it resists fading:
--
--   slowdown       = (1 + recall_slowdown × ln(1 + times recalled))
--                  × (1 + importance_slowdown × importance) × (1 + emotion_slowdown × |valence|)
--   effective days = days since reinforced_at / slowdown
--
--   fresh     (below fading_after_days, 7)    full detail
--   fading    (below distant_after_days, 30)  its summary only: the specifics are gone
--   distant   (below forget_after_days, 90)   its residue: the micro line, its emotional imprint
--                                             (importance, valence), its graph edges and triples
--   forgotten (from forget_after_days)        deleted, edges and triples it alone gave with it
--
-- Compress before deleting: a memory moves one stage per pass and never skips one, so nothing
-- is deleted that was not first a summary and then a residue. A level it lacks (its summary,
-- its micro line) is asked of the language model through the work queue ('condense_memory');
-- until the ask ends the memory waits where it is; if the model gives nothing shorter (or
-- cannot answer), the text is clipped to the level's length at a word, so fading never stalls. A level is
-- used when it is shorter than the text; text already as short as the level (280 / 120
-- characters) without one is its own level. A changed text is embedded
-- again, so a faded memory is found by what it still says, not by the details it lost.
--
-- Reinforcement: a new memory at least mention_similarity near an older one (as private, or
-- the older one shared) resets the older one's clock; being recalled (access_count) and being
-- important or emotional slow it. A mention never brings lost detail back: stages only move
-- forward, and the new memory carries the detail.
--
-- Never decayed: the immutable message log (it is not a memory: re-indexing stays possible),
-- north stars, facts the person confirmed (said again: state 'confirmed'), pinned memories,
-- memories of an open goal, and types not in decay_config.types (procedures and strategies
-- are skills and plans, not recollections). Archived and superseded memories are left as the
-- person left them.
--
-- Every automatic step is written to decay_log with its inputs (no words: a forgotten memory
-- leaves only its id and numbers); memory_stage(id) explains where a memory is and why.
-- The pass runs in the maintenance worker (decay_step) at most every interval on the clock;
-- decay_pass() runs it now. One pass at a time ('dionysus.decay': the worker tries it and
-- skips, decay_pass waits for it, so a pass asked for is never silently a no-op);
-- a memory another transaction holds is skipped until the next pass (SKIP LOCKED). While a
-- re-index run builds (020), a pass only renews clocks: no text changes under the run.

-- A memory's stage, clock and pin are its columns (memories.stage, reinforced_at, pinned in
-- 001, with the type decay_stage): an import's history starts its clock at its import.

-- The pass looks at memories old enough for their stage's next step, by stage and clock.
CREATE INDEX memories_decay_due ON memories (stage, reinforced_at) WHERE status = 'active' AND NOT pinned;

-- ---------------------------------------------------------------------------------------
-- Configuration: one row, every knob typed and checked.
-- ---------------------------------------------------------------------------------------
CREATE TABLE decay_config (
    id                  integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    enabled             boolean NOT NULL DEFAULT true,
    fading_after_days   double precision NOT NULL DEFAULT 7 CHECK (fading_after_days > 0),
    distant_after_days  double precision NOT NULL DEFAULT 30,
    forget_after_days   double precision NOT NULL DEFAULT 90,
    recall_slowdown     double precision NOT NULL DEFAULT 0.5 CHECK (recall_slowdown >= 0 AND recall_slowdown <= 100),
    importance_slowdown double precision NOT NULL DEFAULT 1.0 CHECK (importance_slowdown >= 0 AND importance_slowdown <= 100),
    emotion_slowdown    double precision NOT NULL DEFAULT 1.0 CHECK (emotion_slowdown >= 0 AND emotion_slowdown <= 100),
    mention_similarity  double precision NOT NULL DEFAULT 0.85 CHECK (mention_similarity > 0 AND mention_similarity <= 1),
    types               memory_type[] NOT NULL DEFAULT ARRAY['episodic', 'semantic']::memory_type[],
    pass_interval       interval NOT NULL DEFAULT '1 hour' CHECK (pass_interval >= interval '0'),
    batch               integer NOT NULL DEFAULT 200 CHECK (batch BETWEEN 1 AND 100000),
    -- The levels' lengths: text this short needs no model to be its own summary or micro line.
    summary_chars       integer NOT NULL DEFAULT 280 CHECK (summary_chars BETWEEN 20 AND 4000),
    micro_chars         integer NOT NULL DEFAULT 120 CHECK (micro_chars BETWEEN 10 AND 1000),
    log_days            integer NOT NULL DEFAULT 365 CHECK (log_days >= 1),
    last_pass_at        timestamptz,
    CHECK (distant_after_days > fading_after_days AND forget_after_days > distant_after_days),
    CHECK (micro_chars < summary_chars)
);
COMMENT ON TABLE decay_config IS
    'How memories fade: the stage thresholds in effective days, what slows fading (recall, importance, feeling), the mention similarity that resets a memory''s clock, the types that decay, the pass interval and batch, and the off switch (enabled). UPDATE to tune.';
INSERT INTO decay_config DEFAULT VALUES;

-- New memories not yet compared with older ones (a mention resets their clocks).
CREATE TABLE decay_mentions (
    memory_id uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE
);
COMMENT ON TABLE decay_mentions IS 'New memories not yet compared with older ones: a near repeat resets their decay clock (the next decay pass).';

CREATE FUNCTION dionysus_internal.queue_decay_mentions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF dionysus_internal.restoring() THEN
        RETURN NULL;   -- a restore brings its queue with it (sql/030_backup.sql)
    END IF;
    INSERT INTO dionysus.decay_mentions (memory_id) SELECT n.id FROM new_memories n WHERE n.status = 'active'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION dionysus_internal.queue_decay_mentions() IS 'Trigger: a new active memory is queued to be compared with older ones (decay_mentions).';
CREATE TRIGGER memories_queue_decay_mentions AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_memories FOR EACH STATEMENT EXECUTE FUNCTION dionysus_internal.queue_decay_mentions();

-- What decay did, with its inputs. No content: what was forgotten is not kept here.
CREATE TABLE decay_log (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    memory_id uuid NOT NULL,
    event     text NOT NULL CHECK (event IN ('mentioned', 'waiting', 'fading', 'distant', 'forgotten')),
    inputs    jsonb NOT NULL DEFAULT '{}'::jsonb
);
COMMENT ON TABLE decay_log IS 'Every automatic decay step (mentioned, waiting for a level, fading, distant, forgotten) with its inputs; ids and numbers only, never words.';
CREATE INDEX decay_log_memory ON decay_log (memory_id, id);
CREATE INDEX decay_log_at ON decay_log (at);

-- ---------------------------------------------------------------------------------------
-- The rule, in one place: every memory's effective age, why it is exempt, the stage its age
-- calls for. The pass and memory_stage() both read it, so the explanation is the rule.
-- ---------------------------------------------------------------------------------------
CREATE VIEW memory_decay AS
SELECT m.id AS memory_id,
       m.stage,
       m.reinforced_at,
       d.slowdown,
       d.effective_days,
       x.exempt,
       CASE WHEN x.exempt IS NOT NULL OR NOT c.enabled THEN m.stage::text
            WHEN d.effective_days >= c.forget_after_days THEN 'forgotten'
            WHEN d.effective_days >= c.distant_after_days THEN 'distant'
            WHEN d.effective_days >= c.fading_after_days THEN 'fading'
            ELSE 'fresh' END AS due,
       c.enabled
  FROM dionysus.memories m
  LEFT JOIN dionysus.memory_access a ON a.memory_id = m.id
 CROSS JOIN dionysus.decay_config c
 CROSS JOIN LATERAL (
       SELECT (1 + c.recall_slowdown * ln(1 + coalesce(a.access_count, 0)))
            * (1 + c.importance_slowdown * m.importance)
            * (1 + c.emotion_slowdown * abs(m.valence)) AS slowdown) s
 CROSS JOIN LATERAL (
       SELECT s.slowdown,
              greatest(extract(epoch FROM dionysus.clock_now() - m.reinforced_at) / 86400, 0) / s.slowdown AS effective_days) d
 CROSS JOIN LATERAL (
       SELECT CASE
           WHEN m.status <> 'active' THEN 'not active (' || m.status || ')'
           WHEN m.pinned THEN 'pinned'
           WHEN m.metadata ? 'north_star' THEN 'a north star'
           WHEN NOT (m.type = ANY (c.types)) THEN m.type || ' memories do not decay (decay_config.types)'
           WHEN EXISTS (SELECT 1 FROM dionysus.facts f WHERE f.memory_id = m.id AND f.state = 'confirmed')
               THEN 'a fact the person confirmed'
           WHEN EXISTS (SELECT 1 FROM dionysus.goal_memory_links l JOIN dionysus.goals g ON g.id = l.goal_id
                         WHERE l.memory_id = m.id AND g.priority IN ('active', 'queued', 'backburner'))
               THEN 'part of an open goal'
       END AS exempt) x
;
COMMENT ON VIEW memory_decay IS 'The decay rule for every memory: its stage, effective days and slowdown, why it is exempt, and the stage its age calls for (due).';

CREATE FUNCTION dionysus_internal.stage_rank(stage text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_position(ARRAY['fresh', 'fading', 'distant', 'forgotten'], stage)
$$;
COMMENT ON FUNCTION dionysus_internal.stage_rank(text) IS 'The order of the stages: fresh 1, fading 2, distant 3, forgotten 4.';

-- Reinforcement: each queued new memory resets the clock of the older memories it repeats.
-- A repeated memory another transaction holds (the driver writing its levels, the worker
-- folding access counts) is not waited for: the mention stays queued for the next pass, so a
-- lock held a moment never loses it.
CREATE FUNCTION dionysus_internal.decay_reinforce(cfg dionysus.decay_config) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    k integer;
    held integer;
    fresh record;
    later uuid[] := '{}';
BEGIN
    FOR fresh IN
        DELETE FROM dionysus.decay_mentions q
         WHERE q.memory_id IN (SELECT memory_id FROM dionysus.decay_mentions ORDER BY memory_id LIMIT greatest(cfg.batch * 5, 100))
        RETURNING q.memory_id
    LOOP
        WITH said AS (
            SELECT m.id, m.embedding, m.private_to, m.reinforced_at FROM dionysus.memories m WHERE m.id = fresh.memory_id
        ), near AS (
            SELECT o.id, 1 - (o.embedding <=> said.embedding) AS similarity
              FROM said CROSS JOIN LATERAL (
                   SELECT x.id, x.embedding, x.private_to FROM dionysus.memories x
                    WHERE x.id <> said.id AND x.status = 'active'
                    ORDER BY x.embedding <=> said.embedding LIMIT 8) o
             WHERE 1 - (o.embedding <=> said.embedding) >= cfg.mention_similarity
               -- a person's words renew only what is theirs or shared: never another's
               AND (o.private_to IS NULL OR coalesce(o.private_to, '{}') = coalesce(said.private_to, '{}'))
        ), due AS (
            SELECT near.id FROM near JOIN dionysus.memories m ON m.id = near.id WHERE m.reinforced_at < dionysus.clock_now()
        ), got AS (
            SELECT y.id FROM dionysus.memories y WHERE y.id IN (SELECT id FROM due) FOR UPDATE SKIP LOCKED
        ), renewed AS (
            UPDATE dionysus.memories m SET reinforced_at = (SELECT greatest(said.reinforced_at, dionysus.clock_now()) FROM said)
              FROM near
             WHERE m.id = near.id AND m.id IN (SELECT id FROM got)
            RETURNING m.id, near.similarity, m.private_to IS NULL AS shared
        ), logged AS (
            INSERT INTO dionysus.decay_log (memory_id, event, inputs)
            SELECT r.id, 'mentioned', jsonb_build_object(
                       -- a shared memory renewed by someone's private words does not name them
                       'by_memory', CASE WHEN r.shared AND (SELECT said.private_to FROM said) IS NOT NULL THEN NULL ELSE fresh.memory_id END,
                       'similarity', round(r.similarity::numeric, 3), 'mention_similarity', cfg.mention_similarity)
              FROM renewed r
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM logged), (SELECT count(*) FROM due) - (SELECT count(*) FROM got) INTO k, held;
        n := n + k;
        IF held > 0 THEN
            later := later || fresh.memory_id;
        END IF;
    END LOOP;
    INSERT INTO dionysus.decay_mentions (memory_id)
    SELECT l.id FROM unnest(later) AS l(id) WHERE EXISTS (SELECT 1 FROM dionysus.memories m WHERE m.id = l.id)
    ON CONFLICT DO NOTHING;
    RETURN n;
END $$;
COMMENT ON FUNCTION dionysus_internal.decay_reinforce(dionysus.decay_config) IS
    'Resets the decay clock of older memories a newly made one repeats (at least mention_similarity near, as private or shared), logged as mentioned; a repeated memory another transaction holds keeps the mention queued for the next pass.';

-- Text clipped to at most n characters at a word boundary, marked as cut.
CREATE FUNCTION dionysus_internal.clip_words(words text, n integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN length(words) <= n THEN words
                ELSE coalesce(nullif(substring(left(words, n - 1) FROM '^(.*\S)\s'), ''), left(words, n - 1)) || '…' END
$$;
COMMENT ON FUNCTION dionysus_internal.clip_words(text, integer) IS 'Text clipped to at most n characters at a word boundary, marked with an ellipsis (decay''s fallback when the model gives no shorter level).';

-- Memories with their shorter levels, in the order of the ids given (a task then shows each
-- at the richest level its token budget fits); ids of memories gone are left out.
CREATE FUNCTION memory_levels(ids uuid[]) RETURNS TABLE (id uuid, content text, source text, summary text, micro text)
    LANGUAGE sql STABLE AS $$
    SELECT m.id, m.content, m.source, m.summary, m.micro
      FROM unnest(ids) WITH ORDINALITY i(id, n) JOIN dionysus.memories m ON m.id = i.id ORDER BY i.n
$$;
COMMENT ON FUNCTION memory_levels(uuid[]) IS 'The memories of ids, in that order, with their shorter levels: id, content, source, summary, micro.';

-- One decay pass: mentions first (a memory just repeated must not fade this pass), then each
-- memory whose age calls for a later stage moves one stage, oldest first, at most batch.
CREATE FUNCTION dionysus_internal.decay_run() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    cfg dionysus.decay_config;
    cand record;
    m record;
    target text;
    level_chars integer;
    how text;
    new_text text;
    reinforced integer := 0;
    moved jsonb := jsonb_build_object('fading', 0, 'distant', 0, 'forgotten', 0, 'waiting', 0);
    asked integer := 0;
    inputs jsonb;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('dionysus.decay', 0)) THEN
        RETURN jsonb_build_object('skipped', 'another decay pass is running');
    END IF;
    -- The worker never waits for a person tuning decay_config (decay_pass already holds it).
    SELECT * INTO cfg FROM dionysus.decay_config WHERE id = 1 FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('skipped', 'decay_config is being changed');
    END IF;
    UPDATE dionysus.decay_config SET last_pass_at = dionysus.clock_now() WHERE id = 1;
    IF NOT cfg.enabled THEN
        RETURN jsonb_build_object('enabled', false);
    END IF;
    reinforced := dionysus_internal.decay_reinforce(cfg);
    -- A re-index run stages vectors from today's words: no text changes under it until its swap.
    IF EXISTS (SELECT 1 FROM dionysus.reindex_runs r WHERE r.status = 'building') THEN
        RETURN jsonb_build_object('enabled', true, 'mentions', reinforced, 'waiting', 'a re-index run is building');
    END IF;

    FOR cand IN
        SELECT d.memory_id, d.stage::text AS stage
          FROM dionysus.memories x
          JOIN dionysus.memory_decay d ON d.memory_id = x.id
          -- Only what is old enough on the clock alone can be due (the slowdown is at least 1):
          -- an index range per stage, not the whole store, is judged.
         WHERE x.status = 'active' AND NOT x.pinned
           AND ((x.stage = 'fresh' AND x.reinforced_at <= dionysus.clock_now() - make_interval(secs => cfg.fading_after_days * 86400))
             OR (x.stage = 'fading' AND x.reinforced_at <= dionysus.clock_now() - make_interval(secs => cfg.distant_after_days * 86400))
             OR (x.stage = 'distant' AND x.reinforced_at <= dionysus.clock_now() - make_interval(secs => cfg.forget_after_days * 86400)))
           AND d.exempt IS NULL AND dionysus_internal.stage_rank(d.due) > dionysus_internal.stage_rank(d.stage::text)
           -- a memory waiting on the model does not hold the batch's places
           AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q
                            WHERE q.idempotency_key IN ('condense_memory:' || d.memory_id || ':fading', 'condense_memory:' || d.memory_id || ':distant')
                              AND q.status IN ('pending', 'claimed'))
         ORDER BY d.effective_days DESC
         LIMIT cfg.batch
    LOOP
        -- Skipped when another transaction holds it (this pass waits on no one); once locked it
        -- is read again, so a memory pinned, archived, confirmed or changed meanwhile is judged
        -- as it is now.
        PERFORM 1 FROM dionysus.memories y WHERE y.id = cand.memory_id FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        SELECT d.memory_id, d.stage::text AS stage, d.due, d.effective_days, d.slowdown, d.reinforced_at,
               x.content, x.summary, x.micro,
               coalesce((SELECT a.access_count FROM dionysus.memory_access a WHERE a.memory_id = x.id), 0) AS access_count,
               x.importance, x.valence, x.source, x.type
          INTO m
          FROM dionysus.memory_decay d JOIN dionysus.memories x ON x.id = d.memory_id
         WHERE d.memory_id = cand.memory_id AND d.exempt IS NULL AND d.stage::text = cand.stage
           AND dionysus_internal.stage_rank(d.due) > dionysus_internal.stage_rank(d.stage::text);
        CONTINUE WHEN NOT FOUND;
        target := CASE m.stage WHEN 'fresh' THEN 'fading' WHEN 'fading' THEN 'distant' ELSE 'forgotten' END;
        inputs := jsonb_build_object('from', m.stage, 'due', m.due, 'effective_days', round(m.effective_days::numeric, 2),
                                     'slowdown', round(m.slowdown::numeric, 3), 'reinforced_at', m.reinforced_at,
                                     'clock', dionysus.clock_now(), 'recalled', m.access_count,
                                     'importance', m.importance, 'valence', m.valence);
        IF target = 'forgotten' THEN
            -- the residue's triples go with it (a triple another memory gave keeps that one)
            DELETE FROM dionysus.triples t WHERE t.memory_id = m.memory_id;
            PERFORM dionysus.forget(m.memory_id);
            -- Fading is not the person forgetting (020's tombstones): a re-index may read the
            -- turn again and learn its facts anew.
            DELETE FROM dionysus.reindex_tombstones t
             WHERE t.txid = txid_current() AND t.source = m.source AND t.content_md5 = dionysus_internal.fact_md5(m.content);
            INSERT INTO dionysus.decay_log (memory_id, event, inputs) VALUES (m.memory_id, 'forgotten', inputs);
            moved := jsonb_set(moved, '{forgotten}', to_jsonb((moved ->> 'forgotten')::int + 1));
            CONTINUE;
        END IF;
        level_chars := CASE target WHEN 'fading' THEN cfg.summary_chars ELSE cfg.micro_chars END;
        -- The level when it is there and shorter; else the text itself when it is already as short.
        new_text := CASE
            WHEN target = 'fading' AND length(btrim(m.summary)) BETWEEN 1 AND length(m.content) - 1 THEN btrim(m.summary)
            WHEN target = 'distant' AND length(btrim(m.micro)) BETWEEN 1 AND length(m.content) - 1 THEN btrim(m.micro)
            WHEN length(m.content) <= level_chars THEN m.content
        END;
        how := 'level';
        IF new_text IS NULL AND EXISTS (SELECT 1 FROM dionysus.work_queue q
                                         WHERE q.idempotency_key = 'condense_memory:' || m.memory_id || ':' || target
                                           AND q.status IN ('done', 'failed')) THEN
            -- The model was asked and gave nothing shorter (or could not answer): the text is
            -- clipped to the level's length at a word, so fading never stalls.
            new_text := dionysus_internal.clip_words(m.content, level_chars);
            how := 'clipped';
        END IF;
        IF new_text IS NULL THEN
            -- The level is missing: ask the model for it; the memory waits here.
            INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, priority)
            VALUES ('condense_memory:' || m.memory_id || ':' || target, 'condense_memory',
                    jsonb_build_object('memory_id', m.memory_id, 'level', CASE target WHEN 'fading' THEN 'summary' ELSE 'micro' END),
                    dionysus_internal.heartbeat_setting('work_max_attempts')::int, -1)
            ON CONFLICT (idempotency_key) DO NOTHING;
            IF FOUND THEN
                asked := asked + 1;
                INSERT INTO dionysus.decay_log (memory_id, event, inputs)
                VALUES (m.memory_id, 'waiting', inputs || jsonb_build_object('for', CASE target WHEN 'fading' THEN 'summary' ELSE 'micro' END));
            END IF;
            moved := jsonb_set(moved, '{waiting}', to_jsonb((moved ->> 'waiting')::int + 1));
            CONTINUE;
        END IF;
        UPDATE dionysus.memories x
           SET stage = target::dionysus.decay_stage,
               content = new_text,
               -- the text is now the richest level left: the summary (fading) or the micro line
               summary = NULL,
               embedding = CASE WHEN new_text = x.content THEN x.embedding ELSE dionysus.embed(new_text) END,
               updated_at = now()
         WHERE x.id = m.memory_id;
        IF new_text <> m.content THEN
            INSERT INTO dionysus.neighborhood_queue (memory_id) VALUES (m.memory_id);
        END IF;
        INSERT INTO dionysus.decay_log (memory_id, event, inputs)
        VALUES (m.memory_id, target, inputs || jsonb_build_object('chars_before', length(m.content), 'chars_after', length(new_text), 'by', how));
        moved := jsonb_set(moved, ARRAY[target], to_jsonb((moved ->> target)::int + 1));
    END LOOP;
    DELETE FROM dionysus.decay_log WHERE at < dionysus.clock_now() - make_interval(days => cfg.log_days);
    IF asked > 0 THEN
        PERFORM pg_notify('dionysus_work', jsonb_build_object('queued', asked)::text);
    END IF;
    RETURN jsonb_build_object('enabled', true, 'mentions', reinforced, 'condense_asked', asked) || moved;
END $$;
COMMENT ON FUNCTION dionysus_internal.decay_run() IS 'A decay pass (decay_pass, decay_step); skips when another pass holds the decay lock (decay_pass takes it first, waiting).';

-- The maintenance worker's step: a pass when the last one is pass_interval old on the clock.
CREATE FUNCTION dionysus_internal.decay_step() RETURNS jsonb
    LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM dionysus.decay_config c
                WHERE c.last_pass_at IS NOT NULL AND c.last_pass_at <= dionysus.clock_now()
                  AND c.last_pass_at + c.pass_interval > dionysus.clock_now()) THEN
        RETURN NULL;
    END IF;
    RETURN dionysus_internal.decay_run();
END $$;
COMMENT ON FUNCTION dionysus_internal.decay_step() IS 'The maintenance worker''s decay step: a pass when the last one is decay_config.pass_interval old on the clock, else NULL.';

-- A decay pass now (tests, servers without the worker), whatever the interval says. It waits
-- for a worker's pass to end (the lock is the session's, so decay_run's own try then holds).
CREATE FUNCTION decay_pass() RETURNS jsonb
    LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtextextended('dionysus.decay', 0));
    SELECT 1 FROM dionysus.decay_config WHERE id = 1 FOR UPDATE;
    SELECT dionysus_internal.decay_run();
$$;
COMMENT ON FUNCTION decay_pass() IS
    'Owner only: one decay pass now, after any running one ends (the maintenance worker runs one every decay_config.pass_interval): mentions reset clocks, then each memory due a later stage moves one stage, compressing (summary, then micro line, asked of the model when missing) before it is deleted. Returns what it did.';

-- Where a memory is in its life, and why.
CREATE FUNCTION memory_stage(memory_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    d record;
    cfg dionysus.decay_config;
    next_stage text;
    next_days double precision;
    history jsonb;
BEGIN
    IF memory_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "memory_id": must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO cfg FROM dionysus.decay_config WHERE id = 1;
    SELECT coalesce(jsonb_agg(jsonb_build_object('at', l.at, 'event', l.event, 'inputs', l.inputs) ORDER BY l.id), '[]')
      INTO history FROM dionysus.decay_log l WHERE l.memory_id = memory_stage.memory_id;
    SELECT * INTO d FROM dionysus.memory_decay v WHERE v.memory_id = memory_stage.memory_id;
    IF NOT FOUND THEN
        IF history @> '[{"event": "forgotten"}]' THEN
            RETURN jsonb_build_object('memory_id', memory_id, 'stage', 'forgotten', 'history', history,
                                      'why', 'decayed past forget_after_days and deleted');
        END IF;
        RAISE EXCEPTION 'dionysus: invalid argument "memory_id": no memory %', memory_id USING ERRCODE = 'no_data_found';
    END IF;
    next_stage := CASE d.stage WHEN 'fresh' THEN 'fading' WHEN 'fading' THEN 'distant' ELSE 'forgotten' END;
    next_days := CASE next_stage WHEN 'fading' THEN cfg.fading_after_days WHEN 'distant' THEN cfg.distant_after_days
                                 ELSE cfg.forget_after_days END;
    RETURN jsonb_build_object(
        'memory_id', memory_id,
        'stage', d.stage,
        'enabled', d.enabled,
        'exempt', d.exempt,
        'due', d.due,
        'effective_days', round(d.effective_days::numeric, 2),
        'slowdown', round(d.slowdown::numeric, 3),
        'reinforced_at', d.reinforced_at,
        'clock', dionysus.clock_now(),
        'next', CASE WHEN d.exempt IS NULL AND d.enabled THEN jsonb_build_object(
                    'stage', next_stage,
                    'after_effective_days', next_days,
                    'at', d.reinforced_at + make_interval(secs => next_days * d.slowdown * 86400)) END,
        'waiting_for', (SELECT q.params ->> 'level' FROM dionysus.work_queue q
                         WHERE q.action = 'condense_memory' AND q.params ->> 'memory_id' = memory_id::text
                           AND q.status IN ('pending', 'claimed') LIMIT 1),
        'why', CASE
            WHEN d.exempt IS NOT NULL THEN 'never decays: ' || d.exempt
            WHEN NOT d.enabled THEN 'decay is off (decay_config.enabled)'
            ELSE format('%s effective days (%s days since it was last met, slowed %s× by recall, importance and feeling)',
                        round(d.effective_days::numeric, 1),
                        round((d.effective_days * d.slowdown)::numeric, 1), round(d.slowdown::numeric, 2)) END,
        'history', history);
END $$;
COMMENT ON FUNCTION memory_stage(uuid) IS
    'Where a memory is in its life and why: stage, exemption, effective days and slowdown, the next stage and when it falls due, the level it waits for, and its decay history. A forgotten memory answers from its history.';

-- Pins a memory (it never decays) or unpins it; returns whether it is pinned now.
CREATE FUNCTION pin(memory_id uuid, pinned boolean DEFAULT true) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF memory_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "memory_id": must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pinned IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "pinned": must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.memories m SET pinned = pin.pinned WHERE m.id = pin.memory_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: invalid argument "memory_id": no memory %', memory_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN pinned;
END $$;
COMMENT ON FUNCTION pin(uuid, boolean) IS 'Pins a memory so it never decays (pinned false: unpins it); returns the new state.';

-- The same for a person's own memory (an agent acting for them, 016): anyone else's is refused.
CREATE FUNCTION pin_own(person text, memory_id uuid, pinned boolean DEFAULT true) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM dionysus.memories m WHERE m.id = pin_own.memory_id FOR UPDATE;
    PERFORM dionysus_internal.require_own_memory(person, memory_id);
    RETURN dionysus.pin(memory_id, pinned);
END $$;
COMMENT ON FUNCTION pin_own(text, uuid, boolean) IS 'pin for one of the person''s own memories (an agent acting for them); anyone else''s is refused (42501).';

-- Stores the levels a condense_memory item brought (complete_work): a level already there is
-- kept (the caller's own summary wins) unless it is no shorter than the text, and only the
-- item's own memory is written.
CREATE FUNCTION dionysus_internal.store_levels(w dionysus.work_queue, levels jsonb) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    s text;
    mi text;
    n integer;
BEGIN
    IF w.action <> 'condense_memory' OR (w.params ->> 'memory_id') IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "result.levels": only a condense_memory item carries levels'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(levels) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: argument "result.levels": must be an object {summary, micro}' USING ERRCODE = 'invalid_text_representation';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(levels) k WHERE k NOT IN ('summary', 'micro')) THEN
        RAISE EXCEPTION 'dionysus: argument "result.levels": only the keys summary and micro' USING ERRCODE = 'invalid_text_representation';
    END IF;
    IF (levels ? 'summary' AND jsonb_typeof(levels -> 'summary') <> 'string')
       OR (levels ? 'micro' AND jsonb_typeof(levels -> 'micro') <> 'string') THEN
        RAISE EXCEPTION 'dionysus: argument "result.levels": summary and micro must be strings' USING ERRCODE = 'invalid_text_representation';
    END IF;
    s := nullif(btrim(levels ->> 'summary'), '');
    mi := nullif(btrim(levels ->> 'micro'), '');
    IF length(s) > 2000 THEN
        RAISE EXCEPTION 'dionysus: argument "result.levels.summary": % characters, at most 2000', length(s)
            USING ERRCODE = 'string_data_right_truncation';
    END IF;
    IF length(mi) > 400 THEN
        RAISE EXCEPTION 'dionysus: argument "result.levels.micro": % characters, at most 400', length(mi)
            USING ERRCODE = 'string_data_right_truncation';
    END IF;
    -- A level already there stays, unless it is no shorter than the text (then it is no level).
    UPDATE dionysus.memories m
       SET summary = CASE WHEN m.stage = 'fresh' AND (m.summary IS NULL OR length(m.summary) >= length(m.content)) THEN coalesce(s, m.summary)
                          ELSE m.summary END,
           micro = CASE WHEN m.micro IS NULL OR length(m.micro) >= length(m.content) THEN coalesce(mi, m.micro) ELSE m.micro END,
           updated_at = now()
     WHERE m.id = (w.params ->> 'memory_id')::uuid AND m.stage <> 'distant'
       AND NOT (m.metadata ? 'north_star');
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;
COMMENT ON FUNCTION dionysus_internal.store_levels(dionysus.work_queue, jsonb) IS
    'complete_work of a condense_memory item: its memory''s summary and micro line, where it has none yet.';

-- What the model sees to condense a memory: its words and the levels it has.
CREATE FUNCTION dionysus_internal.condense_source(memory_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('content', m.content, 'summary', m.summary, 'micro', m.micro, 'stage', m.stage)
      FROM dionysus.memories m WHERE m.id = condense_source.memory_id
$$;
COMMENT ON FUNCTION dionysus_internal.condense_source(uuid) IS 'What a condense_memory item shows the model: the memory''s words, levels and stage.';

-- Version 2 serves long fresh memories too, for tight contexts (027).
-- Texts: sql/prompts/<key>.txt, older versions sql/prompts/superseded/<key>.v<N>.txt; the newest
-- version of each is the active one.
INSERT INTO prompt_templates (key, version, temperature, note, active, template)
SELECT key, version, temperature, note, version = max(version) OVER (PARTITION BY key),
       dionysus_internal.shipped_prompt(key, version)
  FROM (VALUES
    ('condense_memory', 1, 0.2, 'decay (021): a memory''s summary and micro line, before it fades'),
    ('condense_memory', 2, 0.2, 'levels (027): a memory''s summary and micro line, for tight contexts and for when it fades'),
    ('condense_memory', 3, 0.2, 'levels (027): a memory''s summary and micro line; its shape in placeholders a model cannot pass off as a level (#35)')
  ) AS shipped (key, version, temperature, note);
