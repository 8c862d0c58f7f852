-- Dionysus 0.7.0 → 0.8.0: memory that fades like a person's (021_decay.sql, seed 003 §8), and
-- censors, things not to do (022_censors.sql, seed 002).
-- Every row is kept. The memories gain a stage (fresh), a decay clock and a pin; the clock of
-- every memory already there starts now, at the update, so nothing fades on the day of the
-- update however old it is. recall() returns each memory's stage as a last column.

-- ---------------------------------------------------------------------------------------
-- A new organ, created whole as sql/021_decay.sql has it
-- ---------------------------------------------------------------------------------------
-- Memory that fades like a person's (seed 003 §8 with 002's detail levels; issue #13 §5).
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

CREATE TYPE decay_stage AS ENUM ('fresh', 'fading', 'distant');

-- Evaluated once for the rows already there (a stable default): an upgraded store's memories
-- start their clock at the upgrade, and an import's history at its import, not at its date.
ALTER TABLE memories
    ADD COLUMN stage         decay_stage NOT NULL DEFAULT 'fresh',
    ADD COLUMN reinforced_at timestamptz NOT NULL DEFAULT dionysus.clock_now() CHECK (isfinite(reinforced_at)),
    ADD COLUMN pinned        boolean NOT NULL DEFAULT false;

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
INSERT INTO decay_config DEFAULT VALUES;

-- New memories not yet compared with older ones (a mention resets their clocks).
CREATE TABLE decay_mentions (
    memory_id uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE
);

CREATE FUNCTION dionysus_internal.queue_decay_mentions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dionysus.decay_mentions (memory_id) SELECT n.id FROM new_memories n WHERE n.status = 'active'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
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
 CROSS JOIN dionysus.decay_config c
 CROSS JOIN LATERAL (
       SELECT (1 + c.recall_slowdown * ln(1 + m.access_count))
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

CREATE FUNCTION dionysus_internal.stage_rank(stage text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_position(ARRAY['fresh', 'fading', 'distant', 'forgotten'], stage)
$$;

-- Reinforcement: each queued new memory resets the clock of the older memories it repeats.
CREATE FUNCTION dionysus_internal.decay_reinforce(cfg dionysus.decay_config) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    k integer;
    fresh record;
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
        ), renewed AS (
            UPDATE dionysus.memories m SET reinforced_at = (SELECT greatest(said.reinforced_at, dionysus.clock_now()) FROM said)
              FROM near
             WHERE m.id = near.id AND m.reinforced_at < dionysus.clock_now()
               AND m.id IN (SELECT y.id FROM dionysus.memories y WHERE y.id = near.id FOR UPDATE SKIP LOCKED)
            RETURNING m.id, near.similarity, m.private_to IS NULL AS shared
        )
        INSERT INTO dionysus.decay_log (memory_id, event, inputs)
        SELECT r.id, 'mentioned', jsonb_build_object(
                   -- a shared memory renewed by someone's private words does not name them
                   'by_memory', CASE WHEN r.shared AND (SELECT said.private_to FROM said) IS NOT NULL THEN NULL ELSE fresh.memory_id END,
                   'similarity', round(r.similarity::numeric, 3), 'mention_similarity', cfg.mention_similarity)
          FROM renewed r;
        GET DIAGNOSTICS k = ROW_COUNT;
        n := n + k;
    END LOOP;
    RETURN n;
END $$;

-- Text clipped to at most n characters at a word boundary, marked as cut.
CREATE FUNCTION dionysus_internal.clip_words(words text, n integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN length(words) <= n THEN words
                ELSE coalesce(nullif(substring(left(words, n - 1) FROM '^(.*\S)\s'), ''), left(words, n - 1)) || '…' END
$$;

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
               x.content, x.summary, x.micro, x.access_count, x.importance, x.valence, x.source, x.type
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

-- A decay pass now (tests, servers without the worker), whatever the interval says. It waits
-- for a worker's pass to end (the lock is the session's, so decay_run's own try then holds).
CREATE FUNCTION decay_pass() RETURNS jsonb
    LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtextextended('dionysus.decay', 0));
    SELECT 1 FROM dionysus.decay_config WHERE id = 1 FOR UPDATE;
    SELECT dionysus_internal.decay_run();
$$;

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

-- The same for a person's own memory (an agent acting for them, 016): anyone else's is refused.
CREATE FUNCTION pin_own(person text, memory_id uuid, pinned boolean DEFAULT true) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM dionysus.memories m WHERE m.id = pin_own.memory_id FOR UPDATE;
    PERFORM dionysus_internal.require_own_memory(person, memory_id);
    RETURN dionysus.pin(memory_id, pinned);
END $$;

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

-- What the model sees to condense a memory: its words and the levels it has.
CREATE FUNCTION dionysus_internal.condense_source(memory_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('content', m.content, 'summary', m.summary, 'micro', m.micro, 'stage', m.stage)
      FROM dionysus.memories m WHERE m.id = condense_source.memory_id
$$;

INSERT INTO prompt_templates (key, version, temperature, note, template) VALUES
('condense_memory', 1, 0.2, 'decay (021): a memory''s summary and micro line, before it fades', $t$TASK: condense_memory
A memory is fading. Write the shorter forms it will live on in, keeping meaning and feeling and
losing specifics.
- summary: 1–3 sentences (50–100 tokens): what happened and what it meant.
- micro: one line (about 20 tokens): its gist and how it felt.
Use only what the memory says. Write in the memory's own voice and person.

The memory:
{{memory}}

Answer with JSON only: {"summary": "...", "micro": "..."}$t$);

-- ---------------------------------------------------------------------------------------
-- A new organ, created whole as sql/022_censors.sql has it
-- ---------------------------------------------------------------------------------------
-- Censors: things not to do (seed 002's censor registry; issue #13 §1).
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
    -- 'person': their own words; 'owner': set up by whoever runs Dionysus.
    origin                   text NOT NULL CHECK (origin IN ('person', 'owner')),
    learned_from_kind        text CHECK (learned_from_kind IN ('message', 'episode', 'heartbeat')),
    learned_from_id          uuid,
    activation_count         integer NOT NULL DEFAULT 0,
    activations_since_change integer NOT NULL DEFAULT 0,
    false_positive_count     integer NOT NULL DEFAULT 0,
    escalation_threshold     integer NOT NULL DEFAULT 3 CHECK (escalation_threshold BETWEEN 1 AND 1000),
    last_activated           timestamptz,
    status                   text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired')),
    created_at               timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    updated_at               timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    CHECK ((from_hour IS NULL AND to_hour IS NULL) OR (from_hour IS NOT NULL AND to_hour IS NOT NULL AND from_hour <> to_hour)),
    CHECK (NOT any_content OR kinds IS NOT NULL OR from_hour IS NOT NULL)
);
CREATE INDEX censors_active ON censors (person) WHERE status = 'active';
-- The same words are one censor per person.
CREATE UNIQUE INDEX censors_once ON censors (coalesce(person, ''), lower(btrim(trigger))) WHERE status = 'active';

CREATE TABLE censor_events (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    censor_id uuid NOT NULL REFERENCES censors (id) ON DELETE CASCADE,
    at        timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    event     text NOT NULL CHECK (event IN ('added', 'activated', 'escalated', 'de_escalated', 'false_positive', 'retired')),
    severity  censor_severity NOT NULL,
    context   jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX censor_events_censor ON censor_events (censor_id, id);

-- "never …", "don't ever …", "stop …ing": words that may ask for a censor (the fast model decides).
ALTER TABLE cue_phrases DROP CONSTRAINT cue_phrases_kind_check;
ALTER TABLE cue_phrases ADD CONSTRAINT cue_phrases_kind_check CHECK (kind IN ('north_star_explicit', 'north_star_maybe', 'censor_maybe'));
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

-- The model the store's vectors are made with now (020's embedding_store).
CREATE FUNCTION dionysus_internal.store_model_key() RETURNS text
    LANGUAGE sql STABLE AS $$ SELECT coalesce((SELECT s.model_key FROM dionysus.embedding_store s WHERE s.id = 1), '') $$;

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
        RAISE EXCEPTION 'dionysus: invalid argument "severity": % (warn, block or absolute)', coalesce(severity, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pattern IS NOT NULL THEN
        IF length(pattern) NOT BETWEEN 1 AND 200 THEN
            RAISE EXCEPTION 'dionysus: invalid argument "pattern": 1 to 200 characters' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        BEGIN
            PERFORM '' ~* pattern;
        EXCEPTION WHEN invalid_regular_expression THEN
            RAISE EXCEPTION 'dionysus: invalid argument "pattern": % is not a valid regular expression', quote_literal(pattern)
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
        RAISE EXCEPTION 'dionysus: invalid argument "learned_from_kind": % (message, episode or heartbeat)', learned_from_kind
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

-- The censors check_censors found, as the gate reports them (jsonb, in its order).
CREATE FUNCTION dionysus_internal.censor_hits(content text, kind text, person text) RETURNS jsonb
    LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('censor_id', h.censor_id, 'severity', h.severity, 'action', h.action,
                                                 'reason', h.reason, 'matched_by', h.matched_by,
                                                 'similarity', round(h.similarity::numeric, 3), 'personal', h.personal)), '[]')
      FROM dionysus.check_censors(content, kind, person) h
$$;

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
        RAISE EXCEPTION 'dionysus: invalid argument "kind": % (reply, reach_out or a heartbeat action''s name)', coalesce(kind, 'NULL')
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
REVOKE EXECUTE ON FUNCTION censor_record(text, text, jsonb, jsonb) FROM PUBLIC;

-- The gate the hooks call (reach-outs, contacts, replies): what holds, counted.
CREATE FUNCTION censor_gate(kind text, content text, person text DEFAULT NULL, context jsonb DEFAULT '{}')
    RETURNS jsonb LANGUAGE sql AS $$
    SELECT dionysus.censor_record(kind, person, dionysus_internal.censor_hits(content, kind, person), context)
$$;

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

INSERT INTO prompt_templates (key, version, temperature, note, template) VALUES
('censor_from_words', 1, 0.1, 'censors (022): a person''s "never …" read into a censor', $t$TASK: censor_from_words
The person may be asking you never to do something. Read their message and decide.
If they ask you not to do something (message them at some hours, mention a subject, use a
tone, send something), answer with the censor; otherwise answer {"censor": null}.

- trigger: what not to do, in a few words, as an action ("messaging them", "mentioning their ex").
- reason: why, in their words if they gave one, else what they asked.
- severity: "block" (do not do it); "absolute" only if they say never ever / under no circumstances.
- kinds: what it watches: ["reach_out"] for messages you start, ["reply"] for your replies,
  both when it is about anything you say; null for everything.
- hours: [from, to] whole local hours when it holds, to excluded: [0, 9] for "before 9",
  [22, 7] for "at night" (it wraps past midnight); null for always.
- any_content: true when it holds whatever is said (timing or kind only), else false.
- pattern: a case-insensitive regular expression of exact words that always mean it (a name,
  "\\mmarco\\M"), or null.
- acknowledgement: one short sentence back to them, confirming what you will not do.

Their message:
{{message}}

Answer with JSON only: {"censor": {"trigger": "...", "reason": "...", "severity": "block", "kinds": ["reach_out"], "hours": [0, 9], "any_content": true}, "acknowledgement": "..."} or {"censor": null}$t$),
('censored_reply', 1, 0.0, 'censors (022): what is sent when a reply is blocked twice', $t$I started to answer, but what I was about to say goes against something I was asked not to do. Could you put it another way?$t$);

-- ---------------------------------------------------------------------------------------
-- decide_contact lets the censors read a contact before the outbox (sql/014_proactive.sql)
-- ---------------------------------------------------------------------------------------
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
        RAISE EXCEPTION 'dionysus: invalid argument "decision": % (message or wait)', decision USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decided_by IS NULL OR decided_by NOT IN ('model', 'default', 'skipped') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": % (model, default or skipped)', decided_by USING ERRCODE = 'invalid_parameter_value';
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

-- ---------------------------------------------------------------------------------------
-- recall() returns the stage (a new result column: the function is created again)
-- ---------------------------------------------------------------------------------------
DROP FUNCTION dionysus.recall(text, integer, text[], timestamp with time zone, timestamp with time zone, double precision, uuid, text);
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
	"found_by" TEXT,  /* String */
	"stage" TEXT  /* String */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'recall_wrapper';

-- ---------------------------------------------------------------------------------------
-- complete_work stores a condense_memory item's levels and lets the censors read a reach-out
-- before the outbox (sql/007_work_queue.sql)
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
                       'levels') THEN
            RAISE EXCEPTION 'dionysus: argument "result": unknown key "%"', key USING ERRCODE = 'invalid_text_representation';
        END IF;
        IF key IN ('memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts', 'basis', 'objectives')
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
    -- A fading memory's summary and micro line (021_decay.sql).
    IF result ? 'levels' THEN
        made := made || jsonb_build_object('levels', dionysus_internal.store_levels(w, result -> 'levels'));
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
-- As sql/900_api.sql: search paths, comments, the driver's role
-- ---------------------------------------------------------------------------------------
DO $$
DECLARE
    vschema text := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'vector');
BEGIN
    EXECUTE format('ALTER FUNCTION dionysus_internal.decay_reinforce(dionysus.decay_config) SET search_path = pg_catalog, dionysus, %I', vschema);
    EXECUTE format('ALTER FUNCTION dionysus.check_censors(text, text, text, timestamp with time zone) SET search_path = pg_catalog, dionysus, %I', vschema);
END $$;

COMMENT ON FUNCTION recall IS
    'Hybrid recall of the k memories most relevant to a text: HNSW vector and BM25 lexical seeds, expanded '
    'through neighborhoods, graph edges and episode-adjacent turns, weighted by importance and recency '
    '(weights in dionysus.recall_config). Filters: types, since/until, min_importance, episode_id, and person '
    '(only what that person may see: nothing private to someone else). Returns each score component and found_by, '
    'the channel that found the memory, and stage: fresh, fading (its summary) or distant (its residue), sql/021_decay.sql.';
-- Memory that fades (021).
COMMENT ON TABLE decay_config IS
    'How memories fade (seed 003 §8): the stage thresholds in effective days, what slows fading (recall, importance, feeling), the mention similarity that resets a memory''s clock, the types that decay, the pass interval and batch, and the off switch (enabled). UPDATE to tune.';
COMMENT ON TABLE decay_mentions IS 'New memories not yet compared with older ones: a near repeat resets their decay clock (the next decay pass).';
COMMENT ON TABLE decay_log IS 'Every automatic decay step (mentioned, waiting for a level, fading, distant, forgotten) with its inputs; ids and numbers only, never words.';
COMMENT ON VIEW memory_decay IS 'The decay rule for every memory: its stage, effective days and slowdown, why it is exempt, and the stage its age calls for (due).';
COMMENT ON FUNCTION decay_pass() IS
    'Owner only: one decay pass now, after any running one ends (the maintenance worker runs one every decay_config.pass_interval): mentions reset clocks, then each memory due a later stage moves one stage, compressing (summary, then micro line, asked of the model when missing) before it is deleted. Returns what it did.';
COMMENT ON FUNCTION dionysus_internal.decay_run() IS 'A decay pass (decay_pass, decay_step); skips when another pass holds the decay lock (decay_pass takes it first, waiting).';
COMMENT ON FUNCTION dionysus_internal.decay_step() IS 'The maintenance worker''s decay step: a pass when the last one is decay_config.pass_interval old on the clock, else NULL.';
COMMENT ON FUNCTION dionysus_internal.decay_reinforce(dionysus.decay_config) IS
    'Resets the decay clock of older memories a newly made one repeats (at least mention_similarity near, as private or shared), logged as mentioned.';
COMMENT ON FUNCTION dionysus_internal.queue_decay_mentions() IS 'Trigger: a new active memory is queued to be compared with older ones (decay_mentions).';
COMMENT ON FUNCTION dionysus_internal.clip_words(text, integer) IS 'Text clipped to at most n characters at a word boundary, marked with an ellipsis (decay''s fallback when the model gives no shorter level).';
COMMENT ON FUNCTION dionysus_internal.stage_rank(text) IS 'The order of the stages: fresh 1, fading 2, distant 3, forgotten 4.';
COMMENT ON FUNCTION memory_stage(uuid) IS
    'Where a memory is in its life and why: stage, exemption, effective days and slowdown, the next stage and when it falls due, the level it waits for, and its decay history. A forgotten memory answers from its history.';
COMMENT ON FUNCTION pin(uuid, boolean) IS 'Pins a memory so it never decays (pinned false: unpins it); returns the new state.';
COMMENT ON FUNCTION pin_own(text, uuid, boolean) IS 'pin for one of the person''s own memories (an agent acting for them); anyone else''s is refused (42501).';
COMMENT ON FUNCTION dionysus_internal.store_levels(dionysus.work_queue, jsonb) IS
    'complete_work of a condense_memory item: its memory''s summary and micro line, where it has none yet.';
COMMENT ON FUNCTION dionysus_internal.condense_source(uuid) IS 'What a condense_memory item shows the model: the memory''s words, levels and stage.';

-- Censors (022).
COMMENT ON TABLE censor_config IS 'How near words must be to a censor''s trigger to match it (similarity), and how many active censors a person may have. UPDATE to tune.';
COMMENT ON TABLE censors IS
    'Things not to do (seed 002): a trigger (embedded, with the model that made it) and optional pattern, a scope (person, kinds, local hours from_hour to to_hour, any_content), a reason, a severity (warn, block, absolute), where it was learned, its activations and false positives, and its escalation threshold.';
COMMENT ON TABLE censor_events IS 'Every censor''s life: added, activated (with what was being done), escalated, de_escalated, false_positive, retired.';
COMMENT ON FUNCTION censor_cue(text) IS 'Whether words may ask for a censor ("never message me before 9"): cue_phrases of kind censor_maybe; the fast model then decides.';
COMMENT ON FUNCTION dionysus_internal.store_model_key() IS 'The model the store''s vectors are made with now (embedding_store.model_key).';
COMMENT ON FUNCTION dionysus_internal.censor_checked(text, text, text, text, text[], integer, integer, boolean) IS 'Validates a censor''s words and scope (22023 naming the argument); returns its severity.';
COMMENT ON FUNCTION add_censor(text, text, text, text, text, text[], integer, integer, boolean, text, uuid) IS
    'Owner only: adds a censor for a person, or for everyone (person NULL); the same words for the same person return the censor there is. kinds: reply, reach_out or heartbeat action names; from_hour/to_hour: the local hours it holds in, [from, to), wrapping past midnight when from > to; any_content: it holds whatever is said.';
COMMENT ON FUNCTION add_own_censor(text, text, text, text, text, text[], integer, integer, boolean, uuid) IS
    'A person''s own censor in their words (the driver, after the fast model read them), learned from their message (which must be theirs, 42501).';
COMMENT ON FUNCTION check_censors(text, text, text, timestamp with time zone) IS
    'The censors that hold for these words (the person''s and everyone''s; kind and local hour narrowing them): severity, action (warn or block), reason, matched_by (similarity, pattern or scope), similarity (to the words or their nearest sentence) and personal (a person''s own). Reads only.';
COMMENT ON FUNCTION dionysus_internal.censor_hits(text, text, text) IS 'check_censors as the JSON list censor_record takes.';
COMMENT ON FUNCTION censor_record(text, text, jsonb, jsonb) IS
    'Counts one operation''s censor hits (censor_hits): each activation written with what was being done, a warn raised to a block at its threshold, a trigger of an earlier model embedded again; returns {verdict: pass, warn or block, censors, reasons}.';
COMMENT ON FUNCTION censor_gate(text, text, text, jsonb) IS
    'The hooks'' gate (reach-outs, contacts, replies): censor_hits then censor_record; returns {verdict: pass, warn or block, censors, reasons}.';
COMMENT ON FUNCTION dionysus_internal.censor_of(uuid, text) IS 'The censor a person may change (their own; everyone''s only in a superuser''s session); the same 42501 whether or not it exists.';
COMMENT ON FUNCTION mark_censor_false_positive(uuid, text, text) IS
    'The person says a censor stopped something fine: counted, block steps down to warn, a warn retires; an absolute stays. Returns its state.';
COMMENT ON FUNCTION retire_censor(uuid, text) IS 'The person''s word lifts one of their censors (an absolute one too); everyone''s censors by the owner (person NULL).';
COMMENT ON FUNCTION person_censors(text) IS 'The active censors that hold for a person (theirs and everyone''s) with their scope and counts; never another person''s.';

GRANT SELECT, INSERT, UPDATE ON decay_config, decay_mentions, decay_log, memory_decay, censor_config, censors, censor_events TO dionysus_driver;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA dionysus TO dionysus_driver;
GRANT UPDATE (pinned) ON memories TO dionysus_driver;
GRANT EXECUTE ON FUNCTION dionysus_internal.queue_decay_mentions(), dionysus_internal.stage_rank(text), memory_stage(uuid), pin(uuid, boolean), pin_own(text, uuid, boolean), dionysus_internal.store_levels(dionysus.work_queue, jsonb), dionysus_internal.condense_source(uuid),
    dionysus.recall(text, integer, text[], timestamp with time zone, timestamp with time zone, double precision, uuid, text) TO dionysus_driver;
GRANT EXECUTE ON FUNCTION censor_cue(text), dionysus_internal.censor_checked(text, text, text, text, text[], integer, integer, boolean), add_own_censor(text, text, text, text, text, text[], integer, integer, boolean, uuid), check_censors(text, text, text, timestamp with time zone), censor_gate(text, text, text, jsonb), dionysus_internal.store_model_key(), dionysus_internal.censor_hits(text, text, text), censor_record(text, text, jsonb, jsonb), dionysus_internal.clip_words(text, integer), dionysus_internal.censor_of(uuid, text), mark_censor_false_positive(uuid, text, text), retire_censor(uuid, text), person_censors(text) TO dionysus_driver;
-- Decay: the person tunes it and the owner's worker runs it; the driver may pin and ask why.
REVOKE INSERT, UPDATE ON decay_config FROM dionysus_driver;
REVOKE INSERT, UPDATE ON decay_log FROM dionysus_driver;
REVOKE EXECUTE ON FUNCTION decay_pass(), dionysus_internal.decay_run(), dionysus_internal.decay_step(),
    dionysus_internal.decay_reinforce(dionysus.decay_config) FROM PUBLIC, dionysus_driver;
-- Censors: the driver reads them and goes through the gate and the functions that check whose
-- a censor is; it writes none directly, and everyone's are the owner's.
REVOKE INSERT, UPDATE ON censors, censor_events, censor_config FROM dionysus_driver;
REVOKE EXECUTE ON FUNCTION add_censor(text, text, text, text, text, text[], integer, integer, boolean, text, uuid) FROM PUBLIC, dionysus_driver;
