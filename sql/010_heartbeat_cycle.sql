-- The heartbeat itself: warnings, begin (regenerate, observe,
-- orient), finish, liveness and stall recovery, and the scheduler's tick.
-- heartbeat_commit (validating and trimming a decision) is Rust: extension/src/heartbeat/.
--
-- Conventions: every rejection raises an SQLSTATE with a message naming the argument; every
-- function is one statement in the caller's transaction, so nothing is ever half-written.
-- Helpers nobody calls directly live in dionysus_internal (see 001_schema.sql).

-- ---------------------------------------------------------------------------------------
-- Warnings (§9)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION heartbeat_warnings() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    w jsonb := '[]'::jsonb;
    avg_unused double precision;
    n integer;
    reach_outs integer;
    loop_sim double precision;
BEGIN
    -- Hoarding (§9.2): average unused energy over 5 across the last 24 heartbeats (no verdict before 24).
    SELECT avg(energy_end), count(*) INTO avg_unused, n
      FROM (SELECT energy_end FROM dionysus.heartbeat_log WHERE energy_end IS NOT NULL
             ORDER BY heartbeat_number DESC LIMIT 24) h;
    IF n >= 24 AND avg_unused > 5 THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'hoarding', 'avg_unused_energy', round(avg_unused::numeric, 2),
             'heartbeats', n, 'message', 'Energy keeps going unused; spend it on something that matters, or reflect on why not.'));
    END IF;
    -- Reach-out spam: 5 or more in 24 hours.
    SELECT count(*) INTO reach_outs FROM dionysus.heartbeat_log h, jsonb_array_elements(h.actions_taken) a
     WHERE h.started_at > now() - interval '24 hours' AND a ->> 'action' = 'reach_out_user';
    IF reach_outs >= 5 THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'reach_out_spam', 'reach_outs_24h', reach_outs,
             'message', 'You have messaged the user often today; let them come to you.'));
    END IF;
    -- Stagnation: active goals untouched for a week.
    IF EXISTS (SELECT 1 FROM dionysus.goals WHERE priority = 'active'
                AND last_touched < now() - make_interval(secs => dionysus_internal.heartbeat_setting('stale_goal_days') * 86400)) THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'stagnation',
             'goals', (SELECT jsonb_agg(title) FROM dionysus.goals WHERE priority = 'active'
                        AND last_touched < now() - make_interval(secs => dionysus_internal.heartbeat_setting('stale_goal_days') * 86400)),
             'message', 'Some active goals have not moved in a week: progress, demote or abandon them.'));
    END IF;
    -- Loops: the last three narratives nearly the same (by embedding).
    SELECT min(1 - (a.embedding <=> b.embedding)) INTO loop_sim
      FROM (SELECT m.id, m.embedding, row_number() OVER (ORDER BY h.heartbeat_number DESC) AS r
              FROM dionysus.heartbeat_log h JOIN dionysus.memories m ON m.id = h.memory_id
             ORDER BY h.heartbeat_number DESC LIMIT 3) a
      JOIN (SELECT m.id, m.embedding, row_number() OVER (ORDER BY h.heartbeat_number DESC) AS r
              FROM dionysus.heartbeat_log h JOIN dionysus.memories m ON m.id = h.memory_id
             ORDER BY h.heartbeat_number DESC LIMIT 3) b ON b.r = a.r + 1
     HAVING count(*) = 2;
    IF loop_sim IS NOT NULL AND loop_sim >= 0.9 THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'loop', 'similarity', round(loop_sim::numeric, 3),
             'message', 'Your last heartbeats read almost the same. What else might deserve attention?'));
    END IF;
    RETURN w;
END $$;
COMMENT ON FUNCTION heartbeat_warnings() IS 'Warnings of §9: hoarding, reach-out spam, stagnation, loops.';

-- ---------------------------------------------------------------------------------------
-- The heartbeat: begin (regenerate, observe, orient) and finish (record).
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.heartbeat_interval_minutes() RETURNS integer
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('dionysus.heartbeat_interval', true), '')::integer, 60)
$$;
COMMENT ON FUNCTION dionysus_internal.heartbeat_interval_minutes() IS 'The time between heartbeats in minutes (the dionysus.heartbeat_interval setting, default 60).';

CREATE FUNCTION heartbeat_observe() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'timestamp', now(),
        'weekday', to_char(now(), 'FMDay'),
        'user_present', s.session_active,
        'last_user_interaction', s.last_user_interaction_at,
        'hours_since_user', round((extract(epoch FROM now() - s.last_user_interaction_at) / 3600)::numeric, 2),
        'last_user_contact', s.last_user_contact_at,
        'hours_since_contact', round((extract(epoch FROM now() - s.last_user_contact_at) / 3600)::numeric, 2),
        'pending_events', jsonb_build_object(
            'work_pending', (SELECT count(*) FROM dionysus.work_queue WHERE status IN ('pending', 'claimed')),
            'outbox_pending', (SELECT count(*) FROM dionysus.outbox WHERE status = 'pending'),
            'requested', s.request_reason),
        -- Cheap on any store size: estimates and the worker's own record, no scans
        -- (memory_health has the exact counts).
        'system_status', (SELECT jsonb_build_object(
                              'memories_estimate', (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'dionysus.memories'::regclass),
                              'neighborhood_backlog', EXISTS (SELECT 1 FROM dionysus.neighborhood_queue),
                              'last_worker_run', w.last_run_at, 'last_worker_error', w.last_error)
                            FROM dionysus.worker_status w WHERE w.id = 1))
    FROM dionysus.heartbeat_state s WHERE s.id = 1);
END $$;
COMMENT ON FUNCTION heartbeat_observe() IS 'The environment a heartbeat observes (§5.1): time, the person''s presence and silence, pending work, system status.';

-- The memories recall touched since `since` that the access log still holds (not yet folded),
-- newest first; none on a hot standby, which cannot read the unlogged log (0.16.0).
CREATE FUNCTION dionysus_internal.recently_recalled(since timestamptz, max_rows integer) RETURNS SETOF uuid
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $$
BEGIN
    IF pg_is_in_recovery() THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT l.memory_id FROM dionysus.memory_access_log l WHERE l.accessed_at > since
                  ORDER BY l.accessed_at DESC LIMIT max_rows;
END $$;
COMMENT ON FUNCTION dionysus_internal.recently_recalled(timestamptz, integer) IS
    'The memories recall touched since a time that the access log still holds, newest first; none on a hot standby (the log is unlogged).';

-- Themes recall has touched lately: concepts of memories accessed in the last day, else
-- the memories themselves.
CREATE FUNCTION activated_themes(max_items integer DEFAULT 5) RETURNS jsonb
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
COMMENT ON FUNCTION activated_themes(integer) IS
    'Themes recall touched in the last day: the concepts of recently recalled memories, else the memories themselves (for the heartbeat context).';

CREATE FUNCTION action_costs() RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_object_agg(substr(key, 6), value ORDER BY value, key) FROM dionysus.heartbeat_config WHERE key LIKE 'cost\_%'
$$;
COMMENT ON FUNCTION action_costs() IS 'The cost of every action (heartbeat_config.cost_<action>) as a jsonb object, cheapest first.';

-- Starts a heartbeat, or returns the one in flight: exactly one at a time. Regenerates energy
-- (min(previous × carry_over + base_regeneration, max)), observes, orients, and returns the
-- whole context the decision needs, within the heartbeat's token budget (027).
CREATE FUNCTION heartbeat_begin() RETURNS jsonb
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
COMMENT ON FUNCTION heartbeat_begin() IS
    'Starts a heartbeat (or returns the one in flight): regenerates energy, observes, orients, and returns the whole '
    'context as jsonb: energy, environment, goal review, recent memories, activated themes, identity, worldview, '
    'action costs and warnings, within the heartbeat''s token budget (027; what it cut is under context_budget).';

-- The fallback of §9.6 for when the LLM fails: reflect, then rest.
CREATE FUNCTION heartbeat_default_decision() RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS $$
    SELECT '{"reasoning": "The decision could not be made (the language model failed or answered nonsense); reflecting on recent experience and resting instead.",
             "actions": [{"action": "reflect", "params": {"focus": "recent experience"}}, {"action": "rest", "params": {}}],
             "goal_changes": []}'::jsonb
$$;
COMMENT ON FUNCTION heartbeat_default_decision() IS 'The fallback decision of §9.6 (reflect, then rest) for when the LLM fails.';

-- Records the heartbeat: the narrative becomes an episodic memory linked to the goals it
-- touched, and the log row is completed (§7.3).
CREATE FUNCTION heartbeat_finish(heartbeat_id uuid, narrative text, emotional_valence double precision DEFAULT 0.0)
    RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    h dionysus.heartbeat_log;
    mem uuid;
    g uuid;
BEGIN
    IF heartbeat_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF narrative IS NULL OR btrim(narrative) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "narrative": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF emotional_valence IS NULL OR emotional_valence = 'NaN'::float8 OR emotional_valence < -1 OR emotional_valence > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "emotional_valence": % is outside [-1, 1]', emotional_valence
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    SELECT * INTO h FROM dionysus.heartbeat_log l WHERE l.id = heartbeat_finish.heartbeat_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id": no heartbeat with id %', heartbeat_id USING ERRCODE = 'no_data_found';
    END IF;
    IF h.status = 'recovered' THEN
        -- Its driver fell silent and the scheduler closed it: a late driver must stop here.
        RAISE EXCEPTION 'dionysus: heartbeat % was recovered by the scheduler after its driver fell silent; it is not finished twice', h.heartbeat_number
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF h.status <> 'committed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_id": heartbeat % is %, finish needs a committed one', h.heartbeat_number, h.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The narrative tells what the context and the work held: it is as private as both.
    mem := dionysus.remember(narrative, 'episodic', 0.5, emotional_valence,
                             jsonb_build_object('heartbeat', h.heartbeat_number, 'heartbeat_id', h.id), 'heartbeat',
                             private_to => dionysus_internal.privacy_union(h.private_to,
                                 (SELECT array_agg(DISTINCT p #>> '{}') FROM dionysus.work_queue q,
                                         jsonb_array_elements(CASE WHEN jsonb_typeof(q.result -> 'applied' -> 'private_to') = 'array'
                                                                   THEN q.result -> 'applied' -> 'private_to' ELSE '[]' END) p
                                   WHERE q.heartbeat_id = h.id)));
    FOR g IN SELECT DISTINCT (c ->> 'goal_id')::uuid FROM jsonb_array_elements(h.goals_modified) c
              WHERE c ->> 'goal_id' IS NOT NULL AND (c ->> 'applied')::boolean
             UNION
             SELECT DISTINCT (a -> 'params' ->> 'goal_id')::uuid FROM jsonb_array_elements(h.actions_taken) a
              WHERE a ->> 'action' = 'reprioritize' LOOP
        IF EXISTS (SELECT 1 FROM dionysus.goals WHERE id = g) THEN
            INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (g, mem, 'progress') ON CONFLICT DO NOTHING;
        END IF;
    END LOOP;
    UPDATE dionysus.heartbeat_log SET status = 'finished', ended_at = now(), narrative = heartbeat_finish.narrative,
           emotional_valence = heartbeat_finish.emotional_valence, memory_id = mem,
           energy_end = (SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1)
     WHERE id = h.id;
    UPDATE dionysus.heartbeat_state SET in_flight = NULL, last_heartbeat_at = now(),
           next_heartbeat_at = dionysus.clock_now() + make_interval(mins => dionysus_internal.heartbeat_interval_minutes()), updated_at = now()
     WHERE id = 1;
    -- A beat of the clock for the proactive mind (source time: never filtered, never a disturbance).
    PERFORM dionysus.push_event('time', 'heartbeat', 2, jsonb_build_object('heartbeat_number', h.heartbeat_number, 'memory_id', mem));
    RETURN mem;
END $$;
COMMENT ON FUNCTION heartbeat_finish(uuid, text, double precision) IS
    'Records a committed heartbeat: the narrative becomes an episodic memory linked to the goals touched, and the log row is completed.';

-- The driver's sign of life while it works on a heartbeat (several model calls with
-- retries can take long). Returns the heartbeat's status: a driver that reads 'recovered'
-- was silent too long and the scheduler closed its heartbeat; it must stop, not commit.
CREATE FUNCTION heartbeat_touch(heartbeat_id uuid) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE st text;
BEGIN
    IF heartbeat_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE dionysus.heartbeat_log l SET last_alive_at = now()
     WHERE l.id = heartbeat_touch.heartbeat_id AND l.status IN ('in_flight', 'committed')
    RETURNING l.status::text INTO st;
    IF st IS NULL THEN
        SELECT l.status::text INTO st FROM dionysus.heartbeat_log l WHERE l.id = heartbeat_touch.heartbeat_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'dionysus: argument "heartbeat_id": no heartbeat with id %', heartbeat_id USING ERRCODE = 'no_data_found';
        END IF;
    END IF;
    RETURN st;
END $$;
COMMENT ON FUNCTION heartbeat_touch(uuid) IS
    'The driver''s sign of life while it works on a heartbeat; returns its status (''recovered'': the scheduler closed it after silence, stop).';

-- What a heartbeat did, for its narrative: the driver reads this, not the log and queue tables.
CREATE FUNCTION heartbeat_outcome(heartbeat_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE outcome jsonb;
BEGIN
    IF heartbeat_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT jsonb_build_object('reasoning', h.decision_reasoning, 'taken', h.actions_taken, 'rejected', h.actions_rejected,
               'work', (SELECT coalesce(jsonb_agg(jsonb_build_object('action', w.action, 'status', w.status,
                                   'summary', w.result ->> 'summary', 'error', w.last_error) ORDER BY w.created_at), '[]')
                          FROM dionysus.work_queue w WHERE w.heartbeat_id = h.id))
      INTO outcome
      FROM dionysus.heartbeat_log h WHERE h.id = heartbeat_outcome.heartbeat_id;
    IF outcome IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id": no heartbeat with id %', heartbeat_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN outcome;
END $$;
COMMENT ON FUNCTION heartbeat_outcome(uuid) IS
    'What a heartbeat did: {reasoning (its decision''s, may be null), taken: [{action, ...}] (the actions it took), rejected: [...] '
    '(the actions refused, with why), work: [{action, status, summary, error}] (its queued work, oldest first)}. 02000 for an unknown id.';

-- A heartbeat whose driver fell silent (no touch for heartbeat_timeout_minutes): committed
-- with the fallback if need be, then finished with a plain narrative, so the schedule never
-- stalls. Each in its own subtransaction: one that cannot be closed normally is closed by
-- force with the reason, and never holds up the others or the rest of the tick.
CREATE FUNCTION dionysus_internal.recover_stalled_heartbeats() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    h dionysus.heartbeat_log;
    n integer := 0;
    why text;
BEGIN
    FOR h IN SELECT * FROM dionysus.heartbeat_log
              WHERE status IN ('in_flight', 'committed')
                AND coalesce(last_alive_at, started_at)
                    < now() - make_interval(secs => dionysus_internal.heartbeat_setting('heartbeat_timeout_minutes') * 60)
              ORDER BY heartbeat_number LOOP
        BEGIN
            IF h.status = 'in_flight' THEN
                PERFORM dionysus.heartbeat_commit(h.id, dionysus.heartbeat_default_decision());
            END IF;
            PERFORM dionysus.heartbeat_finish(h.id, format('Heartbeat %s was interrupted before it finished; it was closed with the fallback decision (reflect and rest).', h.heartbeat_number), 0.0);
            UPDATE dionysus.heartbeat_log SET status = 'recovered' WHERE id = h.id;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
            UPDATE dionysus.heartbeat_state SET in_flight = NULL, last_heartbeat_at = now(),
                   next_heartbeat_at = dionysus.clock_now() + make_interval(mins => dionysus_internal.heartbeat_interval_minutes()), updated_at = now()
             WHERE id = 1 AND in_flight = h.id;
            UPDATE dionysus.heartbeat_log SET status = 'recovered', ended_at = now(), recovery_error = why WHERE id = h.id;
        END;
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;
COMMENT ON FUNCTION dionysus_internal.recover_stalled_heartbeats() IS
    'Closes heartbeats whose driver fell silent for heartbeat_timeout_minutes, each in its own subtransaction (one that fails is closed by force, with its reason).';

CREATE FUNCTION heartbeat_due() RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT NOT s.paused AND NOT s.session_active AND s.in_flight IS NULL
           AND (s.requested_at IS NOT NULL OR s.next_heartbeat_at IS NULL OR s.next_heartbeat_at <= dionysus.clock_now())
      FROM dionysus.heartbeat_state s WHERE s.id = 1
$$;
COMMENT ON FUNCTION heartbeat_due() IS 'Whether a heartbeat is due: not paused, no session, none in flight, and requested or past its time.';

-- One tick of the scheduler (the worker calls it): recovers stalled heartbeats, then wakes
-- the driver on 'dionysus_heartbeat' when one is due, and again on 'dionysus_work' /
-- 'dionysus_outbox' while work or messages wait, at most once a minute each.
CREATE FUNCTION scheduler_tick() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    recovered integer;
    due boolean;
    st dionysus.heartbeat_state;
    work_waiting bigint;
    outbox_waiting bigint;
    ended_session boolean;
    language_work integer := 0;
    errors jsonb := '[]'::jsonb;
    why text;
    proactive jsonb;
    contacts_waiting bigint := 0;
    opp record;
BEGIN
    -- Each step in its own subtransaction: one that fails is reported, the others (and the
    -- NOTIFYs below) still happen.
    recovered := dionysus_internal.recover_stalled_heartbeats();
    BEGIN
        ended_session := dionysus.end_idle_session();
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        errors := errors || jsonb_build_object('step', 'end_idle_session', 'error', why);
    END;
    BEGIN
        language_work := dionysus.enqueue_language_work();
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        errors := errors || jsonb_build_object('step', 'enqueue_language_work', 'error', why);
    END;
    -- The proactive mind's tick, when its own (dynamic) interval is up (after the state row:
    -- lock order).
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    BEGIN
        IF dionysus_internal.proactive_tick_due() THEN
            proactive := dionysus.proactive_tick();
        END IF;
        -- Crossings not yet decided are announced again (a driver may have been away).
        FOR opp IN SELECT c.id, c.person, c.explanation FROM dionysus.contact_evaluations c
                    WHERE c.outcome = 'opportunity' AND c.decision IS NULL AND c.notified_at < now() - interval '1 minute'
                    ORDER BY c.at LIMIT 10 LOOP
            -- Which evaluation, nothing more: any role that may connect can LISTEN (the driver reads the rest).
            PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', opp.id)::text);
            UPDATE dionysus.contact_evaluations SET notified_at = now() WHERE id = opp.id;
            contacts_waiting := contacts_waiting + 1;
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        errors := errors || jsonb_build_object('step', 'proactive_tick', 'error', why);
    END;
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    due := dionysus.heartbeat_due();
    IF due AND (st.last_notified_at IS NULL OR st.last_notified_at < now() - interval '1 minute'
                OR st.requested_at > st.last_notified_at) THEN
        PERFORM pg_notify('dionysus_heartbeat', jsonb_build_object('reason', coalesce(st.request_reason, 'scheduled'),
                                                                  'database', current_database())::text);
        UPDATE dionysus.heartbeat_state SET last_notified_at = now() WHERE id = 1;
    END IF;
    -- Items fresh from their producer were announced by it; these are the ones that waited,
    -- or came out of a retry delay.
    SELECT count(*) INTO work_waiting FROM dionysus.work_queue
     WHERE status = 'pending' AND available_at <= now()
       AND (created_at < now() - interval '1 minute' OR available_at > created_at OR language_work > 0);
    IF work_waiting > 0 THEN
        PERFORM pg_notify('dionysus_work', jsonb_build_object('waiting', work_waiting)::text);
    END IF;
    SELECT count(*) INTO outbox_waiting FROM dionysus.outbox
     WHERE status = 'pending' AND (NOT requires_approval OR approved_at IS NOT NULL) AND created_at < now() - interval '1 minute';
    IF outbox_waiting > 0 THEN
        PERFORM pg_notify('dionysus_outbox', jsonb_build_object('waiting', outbox_waiting)::text);
    END IF;
    RETURN jsonb_build_object('recovered', recovered, 'due', due, 'work_waiting', work_waiting, 'outbox_waiting', outbox_waiting,
                              'ended_session', ended_session, 'language_work_queued', language_work, 'proactive', proactive,
                              'contacts_reannounced', contacts_waiting, 'errors', errors);
END $$;
COMMENT ON FUNCTION scheduler_tick() IS
    'What the scheduler worker does each tick: closes stalled heartbeats with the fallback, ends an idle session, queues '
    'language work, and NOTIFYs dionysus_heartbeat when one is due, dionysus_work / dionysus_outbox while items wait.';
