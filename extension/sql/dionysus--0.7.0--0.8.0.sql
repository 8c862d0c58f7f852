-- Dionysus 0.7.0 → 0.8.0: memory that fades like a person's (021_decay.sql, seed 003 §8).
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
-- until it arrives the memory waits where it is, so a dead model loses nothing. A level is
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
-- decay_pass() runs it now. One pass at a time ('dionysus.decay', tried, never waited for);
-- a memory another transaction holds is skipped until the next pass (SKIP LOCKED). While a
-- re-index run builds (020), a pass only renews clocks: no text changes under the run.

CREATE TYPE decay_stage AS ENUM ('fresh', 'fading', 'distant');

-- Evaluated once for the rows already there (a stable default): an upgraded store's memories
-- start their clock at the upgrade, and an import's history at its import, not at its date.
ALTER TABLE memories
    ADD COLUMN stage         decay_stage NOT NULL DEFAULT 'fresh',
    ADD COLUMN reinforced_at timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    ADD COLUMN pinned        boolean NOT NULL DEFAULT false;

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
            RETURNING m.id, near.similarity
        )
        INSERT INTO dionysus.decay_log (memory_id, event, inputs)
        SELECT r.id, 'mentioned', jsonb_build_object('by_memory', fresh.memory_id, 'similarity', round(r.similarity::numeric, 3),
                                                     'mention_similarity', cfg.mention_similarity)
          FROM renewed r;
        GET DIAGNOSTICS k = ROW_COUNT;
        n := n + k;
    END LOOP;
    RETURN n;
END $$;

-- One decay pass: mentions first (a memory just repeated must not fade this pass), then each
-- memory whose age calls for a later stage moves one stage, oldest first, at most batch.
CREATE FUNCTION dionysus_internal.decay_run() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    cfg dionysus.decay_config;
    m record;
    target text;
    new_text text;
    reinforced integer := 0;
    moved jsonb := jsonb_build_object('fading', 0, 'distant', 0, 'forgotten', 0, 'waiting', 0);
    asked integer := 0;
    inputs jsonb;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('dionysus.decay', 0)) THEN
        RETURN jsonb_build_object('skipped', 'another decay pass is running');
    END IF;
    SELECT * INTO cfg FROM dionysus.decay_config WHERE id = 1;
    UPDATE dionysus.decay_config SET last_pass_at = dionysus.clock_now() WHERE id = 1;
    IF NOT cfg.enabled THEN
        RETURN jsonb_build_object('enabled', false);
    END IF;
    reinforced := dionysus_internal.decay_reinforce(cfg);
    -- A re-index run stages vectors from today's words: no text changes under it until its swap.
    IF EXISTS (SELECT 1 FROM dionysus.reindex_runs r WHERE r.status = 'building') THEN
        RETURN jsonb_build_object('enabled', true, 'mentions', reinforced, 'waiting', 'a re-index run is building');
    END IF;

    FOR m IN
        SELECT d.memory_id, d.stage::text AS stage, d.due, d.effective_days, d.slowdown, d.reinforced_at,
               x.content, x.summary, x.micro, x.access_count, x.importance, x.valence
          FROM dionysus.memory_decay d JOIN dionysus.memories x ON x.id = d.memory_id
         WHERE d.exempt IS NULL AND dionysus_internal.stage_rank(d.due) > dionysus_internal.stage_rank(d.stage::text)
         ORDER BY d.effective_days DESC
         LIMIT cfg.batch
    LOOP
        -- Skipped when another transaction holds it (this pass waits on no one).
        PERFORM 1 FROM dionysus.memories y WHERE y.id = m.memory_id FOR UPDATE SKIP LOCKED;
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
            INSERT INTO dionysus.decay_log (memory_id, event, inputs) VALUES (m.memory_id, 'forgotten', inputs);
            moved := jsonb_set(moved, '{forgotten}', to_jsonb((moved ->> 'forgotten')::int + 1));
            CONTINUE;
        END IF;
        -- The level when it is there and shorter; else the text itself when it is already as short.
        new_text := CASE
            WHEN target = 'fading' AND length(btrim(m.summary)) BETWEEN 1 AND length(m.content) - 1 THEN btrim(m.summary)
            WHEN target = 'distant' AND length(btrim(m.micro)) BETWEEN 1 AND length(m.content) - 1 THEN btrim(m.micro)
            WHEN length(m.content) <= CASE target WHEN 'fading' THEN cfg.summary_chars ELSE cfg.micro_chars END THEN m.content
        END;
        IF new_text IS NULL THEN
            -- The level is missing: ask the model for it; the memory waits here. An ask that
            -- ended a day ago without the level (failed, or answered without it) is asked again.
            DELETE FROM dionysus.work_queue q
             WHERE q.idempotency_key = 'condense_memory:' || m.memory_id || ':' || target
               AND q.status IN ('done', 'failed') AND coalesce(q.completed_at, q.created_at) < now() - interval '1 day';
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
        VALUES (m.memory_id, target, inputs || jsonb_build_object('chars_before', length(m.content), 'chars_after', length(new_text)));
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

-- A decay pass now (tests, servers without the worker), whatever the interval says.
CREATE FUNCTION decay_pass() RETURNS jsonb
    LANGUAGE sql AS $$ SELECT dionysus_internal.decay_run() $$;

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
-- kept (the caller's own summary wins), and only the item's own memory is written.
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
    UPDATE dionysus.memories m
       SET summary = CASE WHEN m.stage = 'fresh' THEN coalesce(m.summary, s) ELSE m.summary END,
           micro = coalesce(m.micro, mi), updated_at = now()
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
-- complete_work stores a condense_memory item's levels (sql/007_work_queue.sql)
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
        INSERT INTO dionysus.outbox (work_id, audience, content, requires_approval, person, platform)
        VALUES (w.id, CASE w.action WHEN 'reach_out_user' THEN 'user' ELSE 'public' END, result ->> 'message',
                w.action = 'reach_out_public', target ->> 'person', target ->> 'platform')
        RETURNING id INTO msg_id;
        made := made || jsonb_build_object('outbox_id', msg_id);
        IF w.action = 'reach_out_user' THEN
            PERFORM pg_notify('dionysus_outbox', msg_id::text);
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
    'Owner only: one decay pass now (the maintenance worker runs one every decay_config.pass_interval): mentions reset clocks, then each memory due a later stage moves one stage, compressing (summary, then micro line, asked of the model when missing) before it is deleted. Returns what it did.';
COMMENT ON FUNCTION dionysus_internal.decay_run() IS 'A decay pass (decay_pass, decay_step); skips when another pass runs.';
COMMENT ON FUNCTION dionysus_internal.decay_step() IS 'The maintenance worker''s decay step: a pass when the last one is decay_config.pass_interval old on the clock, else NULL.';
COMMENT ON FUNCTION dionysus_internal.decay_reinforce(dionysus.decay_config) IS
    'Resets the decay clock of older memories a newly made one repeats (at least mention_similarity near, as private or shared), logged as mentioned.';
COMMENT ON FUNCTION dionysus_internal.queue_decay_mentions() IS 'Trigger: a new active memory is queued to be compared with older ones (decay_mentions).';
COMMENT ON FUNCTION dionysus_internal.stage_rank(text) IS 'The order of the stages: fresh 1, fading 2, distant 3, forgotten 4.';
COMMENT ON FUNCTION memory_stage(uuid) IS
    'Where a memory is in its life and why: stage, exemption, effective days and slowdown, the next stage and when it falls due, the level it waits for, and its decay history. A forgotten memory answers from its history.';
COMMENT ON FUNCTION pin(uuid, boolean) IS 'Pins a memory so it never decays (pinned false: unpins it); returns the new state.';
COMMENT ON FUNCTION pin_own(text, uuid, boolean) IS 'pin for one of the person''s own memories (an agent acting for them); anyone else''s is refused (42501).';
COMMENT ON FUNCTION dionysus_internal.store_levels(dionysus.work_queue, jsonb) IS
    'complete_work of a condense_memory item: its memory''s summary and micro line, where it has none yet.';
COMMENT ON FUNCTION dionysus_internal.condense_source(uuid) IS 'What a condense_memory item shows the model: the memory''s words, levels and stage.';

GRANT SELECT, INSERT, UPDATE ON decay_config, decay_mentions, decay_log, memory_decay TO dionysus_driver;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA dionysus TO dionysus_driver;
GRANT UPDATE (stage, reinforced_at, pinned) ON memories TO dionysus_driver;
GRANT EXECUTE ON FUNCTION dionysus_internal.queue_decay_mentions(), dionysus_internal.stage_rank(text), memory_stage(uuid), pin(uuid, boolean), pin_own(text, uuid, boolean), dionysus_internal.store_levels(dionysus.work_queue, jsonb), dionysus_internal.condense_source(uuid),
    dionysus.recall(text, integer, text[], timestamp with time zone, timestamp with time zone, double precision, uuid, text) TO dionysus_driver;
-- Decay: the person tunes it and the owner's worker runs it; the driver may pin and ask why.
REVOKE INSERT, UPDATE ON decay_config FROM dionysus_driver;
REVOKE INSERT, UPDATE ON decay_log FROM dionysus_driver;
REVOKE EXECUTE ON FUNCTION decay_pass(), dionysus_internal.decay_run(), dionysus_internal.decay_step(),
    dionysus_internal.decay_reinforce(dionysus.decay_config) FROM PUBLIC, dionysus_driver;
