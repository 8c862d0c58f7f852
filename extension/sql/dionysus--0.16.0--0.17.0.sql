-- Dionysus 0.16.0 → 0.17.0: recall counts leave the memory's row.
-- The worker folded the access log into memories.access_count / last_accessed. A memory's row
-- is 1.9 KB (its vector), its page has no room for a second version, and last_accessed was
-- indexed: every fold wrote each recalled memory as a new row into every index, the HNSW index
-- included (1 to 14 ms of the worker's time per memory at 100k, ten memories per recall), and
-- left a dead entry there that every kNN walked past until the next vacuum. The counts move to
-- memory_access, a narrow table beside memories; every count and time is kept.

CREATE TABLE memory_access (
    memory_id     uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    access_count  integer NOT NULL DEFAULT 0 CHECK (access_count >= 0),
    last_accessed timestamptz
);
CREATE INDEX memory_access_last ON memory_access (last_accessed DESC) WHERE last_accessed IS NOT NULL;
INSERT INTO memory_access (memory_id, access_count, last_accessed)
SELECT id, greatest(access_count, 0), last_accessed FROM memories WHERE access_count > 0 OR last_accessed IS NOT NULL;
GRANT SELECT, INSERT, UPDATE ON memory_access TO dionysus_driver;
COMMENT ON TABLE memory_access IS 'How often and how lately each memory was recalled (recall_by_id adds the hits not yet folded; decay slows with the count). Beside memories, not in it: changing a memory''s row puts it into every index again, the vector index included.';
COMMENT ON TABLE memory_access_log IS
    'Recall hits not yet folded into memory_access by the worker. No foreign key, so that recall locks no memory: the rows of a memory since deleted go with the next fold. Unlogged, so that a recall''s commit waits for no disk: a crash or failover loses the hits since the last fold, and a hot standby cannot read it.';

-- What read the counts in the memory's row reads them beside it.
CREATE OR REPLACE VIEW memory_decay AS
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

CREATE OR REPLACE FUNCTION dionysus_internal.decay_run() RETURNS jsonb
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

CREATE OR REPLACE FUNCTION activated_themes(max_items integer DEFAULT 5) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    WITH touched AS (
        (SELECT r.memory_id FROM dionysus_internal.recently_recalled(now() - interval '1 day', 200) AS r(memory_id))
        UNION
        (SELECT a.memory_id FROM dionysus.memory_access a WHERE a.last_accessed > now() - interval '1 day'
          ORDER BY a.last_accessed DESC LIMIT 200)),
    concepts AS (
        SELECT c.name, count(*) AS hits FROM touched t
          JOIN dionysus.memory_concepts mc ON mc.memory_id = t.memory_id JOIN dionysus.concepts c ON c.id = mc.concept_id
         GROUP BY c.name ORDER BY hits DESC, c.name LIMIT max_items)
    SELECT CASE WHEN EXISTS (SELECT 1 FROM concepts)
                THEN (SELECT jsonb_agg(jsonb_build_object('theme', name, 'hits', hits)) FROM concepts)
                ELSE coalesce((SELECT jsonb_agg(jsonb_build_object('memory', left(m.content, 160)))
                                 FROM (SELECT m.content FROM touched t JOIN dionysus.memories m ON m.id = t.memory_id
                                         LEFT JOIN dionysus.memory_access a ON a.memory_id = m.id
                                        ORDER BY a.last_accessed DESC NULLS LAST LIMIT max_items) m), '[]'::jsonb)
           END
$$;

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
            UNION (SELECT memory_id FROM dionysus.memory_access WHERE last_accessed > now() - interval '1 day'
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

DROP INDEX memories_last_accessed;
ALTER TABLE memories DROP COLUMN access_count, DROP COLUMN last_accessed;
