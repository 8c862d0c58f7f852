-- The heartbeat organ's SQL functions: energy, goals, the work queue and outbox, sessions,
-- heartbeat_begin/finish, warnings and the scheduler's tick. heartbeat_commit (decision
-- validation and trimming) is in Rust: extension/src/heartbeat/.
--
-- Conventions: every rejection raises an SQLSTATE with a message naming the argument; every
-- function is one statement in the caller's transaction, so nothing is ever half-written.

-- ---------------------------------------------------------------------------------------
-- Configuration and energy (§2)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION heartbeat_setting(setting_key text) RETURNS double precision
    LANGUAGE plpgsql STABLE AS $$
DECLARE v double precision;
BEGIN
    SELECT value INTO v FROM dionysus.heartbeat_config WHERE key = setting_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: invalid argument "setting_key": no heartbeat_config key %', setting_key
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v;
END $$;

CREATE FUNCTION get_action_cost(action_name text) RETURNS double precision
    LANGUAGE plpgsql STABLE AS $$
DECLARE v double precision;
BEGIN
    IF action_name IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "action_name" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT value INTO v FROM dionysus.heartbeat_config WHERE key = 'cost_' || lower(btrim(action_name));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: invalid argument "action_name": unknown action %', action_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v;
END $$;

CREATE FUNCTION get_current_energy() RETURNS double precision
    LANGUAGE sql STABLE AS $$ SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1 $$;

-- Clamps to [min_energy, max_energy] under the state row's lock, and writes the ledger.
CREATE FUNCTION update_energy(delta double precision, heartbeat_id uuid DEFAULT NULL,
                              action text DEFAULT NULL, reason text DEFAULT NULL)
    RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE
    before double precision;
    after double precision;
BEGIN
    IF delta IS NULL OR delta = 'NaN'::float8 OR delta IN ('Infinity'::float8, '-Infinity'::float8) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "delta": % is not a finite number', delta
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT current_energy INTO before FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    after := greatest(dionysus.heartbeat_setting('min_energy'),
                      least(before + delta, dionysus.heartbeat_setting('max_energy')));
    UPDATE dionysus.heartbeat_state SET current_energy = after, updated_at = now() WHERE id = 1;
    INSERT INTO dionysus.energy_ledger (heartbeat_id, action, delta, energy_before, energy_after, reason)
    VALUES (update_energy.heartbeat_id, update_energy.action, after - before, before, after, update_energy.reason);
    RETURN after;
END $$;

-- ---------------------------------------------------------------------------------------
-- Goals (§4)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION goal_level(p dionysus.goal_priority) RETURNS integer
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE p WHEN 'active' THEN 3 WHEN 'queued' THEN 2 WHEN 'backburner' THEN 1 ELSE 0 END
$$;

-- Keeps the count limits: overflow is demoted one level (the least recently touched goal
-- first, never `keep`), and never dropped.
CREATE FUNCTION enforce_goal_limits(keep uuid DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    demoted integer := 0;
    over integer;
    g record;
BEGIN
    over := (SELECT count(*) FROM dionysus.goals WHERE priority = 'active') - dionysus.heartbeat_setting('max_active_goals');
    FOR g IN SELECT id FROM dionysus.goals WHERE priority = 'active' AND id IS DISTINCT FROM keep
             ORDER BY last_touched, created_at LIMIT greatest(over, 0) LOOP
        UPDATE dionysus.goals SET priority = 'queued',
               progress = progress || jsonb_build_array(jsonb_build_object('at', now(), 'note', 'demoted to queued: active limit reached'))
         WHERE id = g.id;
        demoted := demoted + 1;
    END LOOP;
    over := (SELECT count(*) FROM dionysus.goals WHERE priority = 'queued') - dionysus.heartbeat_setting('max_queued_goals');
    FOR g IN SELECT id FROM dionysus.goals WHERE priority = 'queued' AND id IS DISTINCT FROM keep
             ORDER BY last_touched, created_at LIMIT greatest(over, 0) LOOP
        UPDATE dionysus.goals SET priority = 'backburner',
               progress = progress || jsonb_build_array(jsonb_build_object('at', now(), 'note', 'demoted to backburner: queued limit reached'))
         WHERE id = g.id;
        demoted := demoted + 1;
    END LOOP;
    RETURN demoted;
END $$;

CREATE FUNCTION require_goal(goal_id uuid, arg text DEFAULT 'goal_id') RETURNS dionysus.goals
    LANGUAGE plpgsql AS $$
DECLARE g dionysus.goals;
BEGIN
    IF goal_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "%" must not be null', arg USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO g FROM dionysus.goals WHERE id = goal_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "%": no goal with id %', arg, goal_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN g;
END $$;

CREATE FUNCTION create_goal(title text, description text DEFAULT NULL, source text DEFAULT 'curiosity',
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
    IF source IS NULL OR lower(btrim(source)) NOT IN ('curiosity', 'user_request', 'identity', 'derived', 'external') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "source": unknown goal source % (expected curiosity, user_request, identity, derived, external)', source
            USING ERRCODE = 'invalid_parameter_value';
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
        parent := dionysus.require_goal(parent_goal_id, 'parent_goal_id');
        IF parent.priority IN ('completed', 'abandoned') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "parent_goal_id": goal % is %', parent_goal_id, parent.priority
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    -- Default priority by source (§4.5): user requests are active, derived goals inherit.
    IF priority IS NOT NULL THEN
        IF lower(btrim(priority)) NOT IN ('active', 'queued', 'backburner') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "priority": a new goal is active, queued or backburner, not %', priority
                USING ERRCODE = 'invalid_parameter_value';
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
        IF prio = 'active' AND (SELECT count(*) FROM dionysus.goals WHERE priority = 'active') >= dionysus.heartbeat_setting('max_active_goals') THEN
            prio := 'queued';
        END IF;
        IF prio = 'queued' AND (SELECT count(*) FROM dionysus.goals WHERE priority = 'queued') >= dionysus.heartbeat_setting('max_queued_goals') THEN
            prio := 'backburner';
        END IF;
    END IF;
    INSERT INTO dionysus.goals (title, description, priority, source, parent_goal_id, emotional_valence, blocked_by, private_to)
    VALUES (btrim(title), description, prio, src, parent_goal_id, emotional_valence, blocked_by,
            dionysus.privacy_union(private_to, NULL))
    RETURNING id INTO new_id;
    IF origin_memory_id IS NOT NULL THEN
        INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (new_id, origin_memory_id, 'origin');
    END IF;
    PERFORM dionysus.enforce_goal_limits(new_id);
    RETURN new_id;
END $$;

-- Allowed moves (§4.3): backburner ↔ queued ↔ active, active → completed, any open → abandoned.
CREATE FUNCTION change_goal_priority(goal_id uuid, new_priority text, reason text DEFAULT NULL)
    RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    g dionysus.goals;
    target dionysus.goal_priority;
BEGIN
    -- The goals lock before the goal's row: the global lock order (002_heartbeat.sql).
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    g := dionysus.require_goal(goal_id);
    IF new_priority IS NULL OR lower(btrim(new_priority)) NOT IN ('active', 'queued', 'backburner', 'completed', 'abandoned') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "new_priority": unknown priority %', new_priority
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
    IF target IN ('active', 'queued', 'backburner') AND abs(dionysus.goal_level(target) - dionysus.goal_level(g.priority)) <> 1 THEN
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
        PERFORM dionysus.complete_parent_goals(goal_id);
    END IF;
    PERFORM dionysus.enforce_goal_limits(goal_id);
    RETURN target::text;
END $$;

-- A parent completes when all its children have (§4.6), up the hierarchy.
CREATE FUNCTION complete_parent_goals(child uuid) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE p uuid;
BEGIN
    SELECT parent_goal_id INTO p FROM dionysus.goals WHERE id = child;
    WHILE p IS NOT NULL LOOP
        EXIT WHEN EXISTS (SELECT 1 FROM dionysus.goals WHERE parent_goal_id = p AND priority <> 'completed');
        EXIT WHEN (SELECT priority FROM dionysus.goals WHERE id = p) IN ('completed', 'abandoned');
        UPDATE dionysus.goals SET priority = 'completed', completed_at = now(), last_touched = now(),
               progress = progress || jsonb_build_array(jsonb_build_object('at', now(), 'note', 'completed: every sub-goal is done'))
         WHERE id = p;
        SELECT parent_goal_id INTO p FROM dionysus.goals WHERE id = p;
    END LOOP;
END $$;

CREATE FUNCTION add_goal_progress(goal_id uuid, note text, memory_id uuid DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE g dionysus.goals;
BEGIN
    g := dionysus.require_goal(goal_id);
    IF note IS NULL OR btrim(note) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "note": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.goals SET last_touched = now(),
           progress = progress || jsonb_build_array(jsonb_build_object('at', now(), 'note', note))
     WHERE id = goal_id;
    IF memory_id IS NOT NULL THEN
        PERFORM dionysus.link_goal_memory(goal_id, memory_id, 'progress');
    END IF;
END $$;

CREATE FUNCTION set_goal_blockers(goal_id uuid, blocked_by jsonb) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus.require_goal(goal_id);
    IF blocked_by IS NOT NULL AND jsonb_typeof(blocked_by) <> 'array' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "blocked_by": must be a JSON array of goal ids or texts'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.goals g
       SET blocked_by = CASE WHEN jsonb_array_length(coalesce(set_goal_blockers.blocked_by, '[]')) = 0 THEN NULL
                             ELSE set_goal_blockers.blocked_by END,
           last_touched = now()
     WHERE g.id = set_goal_blockers.goal_id;
END $$;

CREATE FUNCTION link_goal_memory(goal_id uuid, memory_id uuid, link_type text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus.require_goal(goal_id);
    IF memory_id IS NULL OR NOT EXISTS (SELECT 1 FROM dionysus.memories m WHERE m.id = memory_id) THEN
        RAISE EXCEPTION 'dionysus: argument "memory_id": no memory with id %', memory_id USING ERRCODE = 'no_data_found';
    END IF;
    IF link_type IS NULL OR link_type NOT IN ('origin', 'progress', 'completion', 'blocker') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "link_type": % (expected origin, progress, completion, blocker)', link_type
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (goal_id, memory_id, link_type)
    ON CONFLICT DO NOTHING;
END $$;

-- Unresolved blockers of a goal: free texts, and goal ids whose goal is not completed.
CREATE FUNCTION goal_open_blockers(g dionysus.goals) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(b), '[]'::jsonb)
    FROM jsonb_array_elements(coalesce(g.blocked_by, '[]'::jsonb)) AS b
    WHERE NOT (jsonb_typeof(b) = 'string'
               AND (b #>> '{}') ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
               AND EXISTS (SELECT 1 FROM dionysus.goals d WHERE d.id = (b #>> '{}')::uuid AND d.priority = 'completed'))
$$;

CREATE FUNCTION goal_brief(g dionysus.goals) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', g.id, 'title', g.title, 'description', g.description, 'priority', g.priority,
                              'source', g.source, 'parent_goal_id', g.parent_goal_id,
                              'last_touched', g.last_touched, 'emotional_valence', g.emotional_valence,
                              'last_progress', g.progress -> -1, 'open_blockers', dionysus.goal_open_blockers(g))
$$;

-- The assessment of §4.4: free, every heartbeat.
CREATE FUNCTION review_goals() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    stale_days double precision := dionysus.heartbeat_setting('stale_goal_days');
    active jsonb; queued jsonb; blocked jsonb; stale jsonb; candidates jsonb;
    n_active integer; n_queued integer; n_backburner integer;
BEGIN
    SELECT coalesce(jsonb_agg(dionysus.goal_brief(g) ORDER BY g.last_touched DESC), '[]'), count(*)
      INTO active, n_active FROM dionysus.goals g WHERE g.priority = 'active';
    SELECT coalesce(jsonb_agg(dionysus.goal_brief(g) ORDER BY g.last_touched DESC), '[]'), count(*)
      INTO queued, n_queued FROM dionysus.goals g WHERE g.priority = 'queued';
    SELECT count(*) INTO n_backburner FROM dionysus.goals WHERE priority = 'backburner';
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title, 'blocked_by', dionysus.goal_open_blockers(g))), '[]')
      INTO blocked FROM dionysus.goals g
     WHERE g.priority = 'active' AND jsonb_array_length(dionysus.goal_open_blockers(g)) > 0;
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title,
                    'days_untouched', round((extract(epoch FROM now() - g.last_touched) / 86400)::numeric, 1))), '[]')
      INTO stale FROM dionysus.goals g
     WHERE g.priority = 'active' AND g.last_touched < now() - make_interval(secs => stale_days * 86400);
    -- Queued goals that are unblocked, most recently touched (most relevant) first.
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', c.id, 'title', c.title)), '[]') INTO candidates
      FROM (SELECT g.id, g.title FROM dionysus.goals g
             WHERE g.priority = 'queued' AND jsonb_array_length(dionysus.goal_open_blockers(g)) = 0
             ORDER BY g.last_touched DESC LIMIT 3) c;
    RETURN jsonb_build_object(
        'active', active, 'queued', queued, 'backburner_count', n_backburner,
        'blocked', blocked, 'stale', stale, 'promotion_candidates', candidates,
        'needs_brainstorm', n_active + n_queued + n_backburner = 0,
        'suggest_promotion', CASE WHEN n_active = 0 AND jsonb_array_length(candidates) > 0 THEN candidates -> 0 END);
END $$;

CREATE VIEW active_goals AS
SELECT * FROM goals WHERE priority = 'active' ORDER BY last_touched DESC;

CREATE VIEW goal_backlog AS
SELECT priority, count(*) AS count, array_agg(title ORDER BY last_touched DESC) AS titles
FROM goals WHERE priority IN ('active', 'queued', 'backburner') GROUP BY priority;

-- ---------------------------------------------------------------------------------------
-- Identity and worldview (read by orient, written by reflect through complete_work)
-- ---------------------------------------------------------------------------------------
-- Shared checks of the self-model setters: a non-empty statement and a confidence in [0, 1].
CREATE FUNCTION check_self_model(arg text, statement text, confidence double precision) RETURNS void
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF statement IS NULL OR btrim(statement) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', arg USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF confidence IS NULL OR confidence = 'NaN'::float8 OR confidence < 0 OR confidence > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "confidence": % is outside [0, 1]', confidence USING ERRCODE = 'invalid_parameter_value';
    END IF;
END $$;

CREATE FUNCTION set_identity_aspect(aspect text, confidence double precision DEFAULT 0.5) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE r uuid;
BEGIN
    PERFORM dionysus.check_self_model('aspect', aspect, confidence);
    INSERT INTO dionysus.identity_aspects (aspect, confidence) VALUES (btrim(aspect), confidence)
    ON CONFLICT (aspect_key) DO UPDATE SET confidence = EXCLUDED.confidence, updated_at = now()
    RETURNING id INTO r;
    RETURN r;
END $$;

CREATE FUNCTION set_worldview_belief(belief text, confidence double precision DEFAULT 0.5) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE r uuid;
BEGIN
    PERFORM dionysus.check_self_model('belief', belief, confidence);
    INSERT INTO dionysus.worldview_beliefs (belief, confidence) VALUES (btrim(belief), confidence)
    ON CONFLICT (belief_key) DO UPDATE SET confidence = EXCLUDED.confidence, updated_at = now()
    RETURNING id INTO r;
    RETURN r;
END $$;

-- ---------------------------------------------------------------------------------------
-- Sessions (§5.3): heartbeats pause while the person is talking.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION session_start() RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET session_active = true,
           session_started_at = CASE WHEN session_active THEN session_started_at ELSE now() END,
           last_user_interaction_at = now(), updated_at = now() WHERE id = 1;
$$;

CREATE FUNCTION note_user_message() RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET last_user_interaction_at = now(), updated_at = now() WHERE id = 1;
$$;

CREATE FUNCTION request_heartbeat(reason text DEFAULT 'requested') RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dionysus.heartbeat_state SET requested_at = now(), request_reason = reason, updated_at = now() WHERE id = 1;
    PERFORM pg_notify('dionysus_heartbeat', jsonb_build_object('reason', reason, 'database', current_database())::text);
END $$;

CREATE FUNCTION session_end(significant boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dionysus.heartbeat_state SET session_active = false, updated_at = now() WHERE id = 1;
    IF significant THEN
        PERFORM dionysus.request_heartbeat('significant session');
    END IF;
END $$;

CREATE FUNCTION pause_heartbeats(paused boolean DEFAULT true) RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET paused = pause_heartbeats.paused, updated_at = now() WHERE id = 1;
$$;

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
                AND last_touched < now() - make_interval(secs => dionysus.heartbeat_setting('stale_goal_days') * 86400)) THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'stagnation',
             'goals', (SELECT jsonb_agg(title) FROM dionysus.goals WHERE priority = 'active'
                        AND last_touched < now() - make_interval(secs => dionysus.heartbeat_setting('stale_goal_days') * 86400)),
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


-- ---------------------------------------------------------------------------------------
-- The work queue: actions the driver performs (LLM, network). Claimed with SKIP LOCKED,
-- completed or failed exactly once; an expired lease hands the item back.
-- ---------------------------------------------------------------------------------------
-- Marks pending items claimed by a worker, with a lease: the one place a claim is made.
CREATE FUNCTION claim_rows(worker text, ids uuid[]) RETURNS SETOF work_queue
    LANGUAGE sql AS $$
    UPDATE dionysus.work_queue w SET status = 'claimed', attempts = w.attempts + 1, claimed_by = claim_rows.worker,
           claimed_at = now(), lease_token = gen_random_uuid(),
           lease_until = now() + make_interval(mins => dionysus.heartbeat_setting('work_lease_minutes')::int)
     WHERE w.id = ANY(claim_rows.ids) AND w.status = 'pending'
    RETURNING w.*
$$;

CREATE FUNCTION claim_work(worker text, actions text[] DEFAULT NULL, max_items integer DEFAULT 1,
                           heartbeat_id uuid DEFAULT NULL)
    RETURNS SETOF work_queue LANGUAGE plpgsql AS $$
BEGIN
    IF worker IS NULL OR btrim(worker) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "worker": must name the claimer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_items IS NULL OR max_items < 1 OR max_items > 1000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_items": % is outside [1, 1000]', max_items USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus.expire_work_leases();
    RETURN QUERY SELECT * FROM dionysus.claim_rows(worker, ARRAY(
        SELECT q.id FROM dionysus.work_queue q
         WHERE q.status = 'pending' AND q.available_at <= now()
           AND (actions IS NULL OR q.action = ANY(actions))
           AND (claim_work.heartbeat_id IS NULL OR q.heartbeat_id = claim_work.heartbeat_id)
         ORDER BY q.created_at, q.id LIMIT max_items FOR UPDATE SKIP LOCKED));
END $$;

-- Leases that ran out: back to pending, or failed once the attempts are used up (and then
-- the energy spent on them is refunded).
CREATE FUNCTION expire_work_leases() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer;
    w record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM dionysus.work_queue WHERE status = 'claimed' AND lease_until < now()) THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE; -- lock order: state before rows
    n := 0;
    FOR w IN UPDATE dionysus.work_queue
                SET status = CASE WHEN attempts >= max_attempts THEN 'failed'::dionysus.work_status ELSE 'pending' END,
                    last_error = 'lease expired (claimed by ' || coalesce(claimed_by, '?') || ')', lease_until = NULL,
                    completed_at = CASE WHEN attempts >= max_attempts THEN now() END
              WHERE status = 'claimed' AND lease_until < now()
          RETURNING * LOOP
        n := n + 1;
        IF w.status = 'failed' THEN
            PERFORM dionysus.refund_work(w.id);
        END IF;
    END LOOP;
    RETURN n;
END $$;

-- Gives back the energy a heartbeat spent on an action that failed for good (seed 000 §5.1:
-- the decision spends it; what never happened is refunded). Once: the cost is zeroed, the
-- ledger keeps the refund. The caller holds the state row (lock order).
CREATE FUNCTION refund_work(work_id uuid) RETURNS double precision
    LANGUAGE plpgsql AS $$
DECLARE
    cost double precision;
    hb uuid;
    act text;
BEGIN
    SELECT q.energy_cost, q.heartbeat_id, q.action INTO cost, hb, act
      FROM dionysus.work_queue q WHERE q.id = refund_work.work_id FOR UPDATE;
    IF NOT FOUND OR cost <= 0 THEN
        RETURN 0;
    END IF;
    UPDATE dionysus.work_queue q SET energy_cost = 0 WHERE q.id = refund_work.work_id;
    PERFORM dionysus.update_energy(cost, hb, act, 'refund: the action failed for good');
    RETURN cost;
END $$;

-- Claims one known item, whatever its available_at: the conversation extracts its own
-- message right after replying. NULL when it is not pending (someone else has it, or done).
CREATE FUNCTION claim_work_item(work_id uuid, worker text) RETURNS SETOF work_queue
    LANGUAGE plpgsql AS $$
BEGIN
    IF work_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "work_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF worker IS NULL OR btrim(worker) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "worker": must name the claimer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY SELECT * FROM dionysus.claim_rows(worker, ARRAY(
        SELECT q.id FROM dionysus.work_queue q WHERE q.id = claim_work_item.work_id AND q.status = 'pending'
           FOR UPDATE SKIP LOCKED));
END $$;

-- Hands a claimed item back without spending an attempt: the item was fine, the driver could
-- not work on it (LLM unreachable, shutting down). It becomes claimable after delay_seconds.
CREATE FUNCTION release_work(work_id uuid, reason text DEFAULT NULL, delay_seconds integer DEFAULT 60, lease uuid DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE w dionysus.work_queue;
BEGIN
    IF delay_seconds IS NULL OR delay_seconds < 0 OR delay_seconds > 86400 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "delay_seconds": % is outside [0, 86400]', delay_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    w := dionysus.require_claimed_work(work_id, lease);
    IF w.status <> 'claimed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "work_id": work item % is %, not claimed', work_id, w.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.work_queue SET status = 'pending', attempts = greatest(attempts - 1, 0), lease_until = NULL,
           last_error = coalesce(reason, last_error), available_at = now() + make_interval(secs => delay_seconds)
     WHERE id = w.id;
END $$;

-- The item, locked. With a lease (the token claim_work gave), the caller must still be its
-- holder: an item that was claimed again since is someone else's, and 55000 says so. A holder
-- whose lease lapsed while nobody else took the item still holds it.
CREATE FUNCTION require_claimed_work(work_id uuid, lease uuid DEFAULT NULL) RETURNS dionysus.work_queue
    LANGUAGE plpgsql AS $$
DECLARE w dionysus.work_queue;
BEGIN
    IF work_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "work_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO w FROM dionysus.work_queue WHERE id = work_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "work_id": no work item with id %', work_id USING ERRCODE = 'no_data_found';
    END IF;
    IF lease IS NOT NULL AND w.status IN ('claimed', 'pending') THEN
        IF w.lease_token IS DISTINCT FROM lease THEN
            RAISE EXCEPTION 'dionysus: argument "lease": work item % is no longer held by this lease (now claimed by %)',
                work_id, coalesce(w.claimed_by, 'nobody') USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        w.status := 'claimed'; -- the holder's lease lapsed, but nobody else took it
    END IF;
    RETURN w;
END $$;

-- Applies what the driver produced, then marks the item done. Completing a done item again
-- changes nothing and returns the first summary: a retried call never repeats its effects.
-- result keys (all optional): memories [{content, type, importance, valence}], facts
-- [{content, subject, category, confidence}], triples [{subject, predicate, object,
-- confidence}], goals [{title, description, source, priority}], goal_progress [{goal_id,
-- note}], identity [{aspect, confidence}], worldview [{belief, confidence}], concepts
-- [{memory_id, name, strength}], episode_summary (text, for summarize_episode), message
-- (text: the reach-out to deliver), summary (text: what was done, for the narrative), basis
-- (ids of the memories the model was shown), person (whom a reach-out is for).
-- Facts and triples from a conversation turn (params.memory_id) keep it as provenance.
-- Everything written is as private as what it was made of (sql/005_privacy.sql): the item's
-- person, its heartbeat's context and the basis. What an inquiry brought from the web is
-- stored as source 'web' (importance at most 0.3, confidence 0.5); identity, worldview and
-- reach-outs that rest on the web alone are refused, and so is a reach-out that drew on
-- someone else's private words (42501).
CREATE FUNCTION complete_work(work_id uuid, result jsonb DEFAULT '{}', lease uuid DEFAULT NULL) RETURNS jsonb
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
BEGIN
    -- Lock order: goals before the rows and the learn/episode locks remember and learn take.
    IF result ? 'goals' OR result ? 'goal_progress' THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    END IF;
    w := dionysus.require_claimed_work(work_id, lease);
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
                       'episode_summary', 'message', 'summary', 'basis', 'person', 'maintenance') THEN
            RAISE EXCEPTION 'dionysus: argument "result": unknown key "%"', key USING ERRCODE = 'invalid_text_representation';
        END IF;
        IF key IN ('memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts', 'basis')
           AND jsonb_typeof(result -> key) <> 'array' THEN
            RAISE EXCEPTION 'dionysus: argument "result.%": must be an array', key USING ERRCODE = 'invalid_text_representation';
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b
                WHERE jsonb_typeof(b) <> 'string'
                   OR (b #>> '{}') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN
        RAISE EXCEPTION 'dionysus: argument "result.basis": must be an array of memory ids' USING ERRCODE = 'invalid_text_representation';
    END IF;
    privacy := CASE WHEN w.params ->> 'person' IS NOT NULL THEN ARRAY[w.params ->> 'person'] END;
    privacy := dionysus.privacy_union(privacy, (SELECT h.private_to FROM dionysus.heartbeat_log h WHERE h.id = w.heartbeat_id));
    privacy := dionysus.privacy_union(privacy, dionysus.memory_privacy(
                   ARRAY(SELECT (b #>> '{}')::uuid FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b)));
    from_web := w.action IN ('inquire_shallow', 'inquire_deep');
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
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'goals', '[]')) LOOP
        new_id := dionysus.create_goal(item ->> 'title', item ->> 'description', coalesce(item ->> 'source', 'curiosity'),
                                       item ->> 'priority', (item ->> 'parent_goal_id')::uuid, private_to => privacy);
        made := jsonb_set(made, '{goals}', (made -> 'goals') || to_jsonb(new_id));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'goal_progress', '[]')) LOOP
        PERFORM dionysus.add_goal_progress((item ->> 'goal_id')::uuid, item ->> 'note');
    END LOOP;
    IF result ? 'maintenance' THEN
        made := made || jsonb_build_object('maintenance', dionysus.apply_maintenance(result -> 'maintenance', w.heartbeat_id, w.id));
    END IF;
    -- Who the agent is and what it believes never changes on the web's word alone.
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'identity', '[]')) LOOP
        IF from_web OR dionysus.web_only_basis(item ->> 'aspect') THEN
            refused := refused || jsonb_build_object('identity', item ->> 'aspect', 'reason', 'rests on web content alone');
            CONTINUE;
        END IF;
        PERFORM dionysus.set_identity_aspect(item ->> 'aspect', coalesce((item ->> 'confidence')::float8, 0.5));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'worldview', '[]')) LOOP
        IF from_web OR dionysus.web_only_basis(item ->> 'belief') THEN
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
        IF dionysus.web_only_basis(result ->> 'message') THEN
            RAISE EXCEPTION 'dionysus: reach-out refused: web content is its only basis' USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF w.action = 'reach_out_user' THEN
            -- Nobody has talked yet: the message goes to the home channel, and may hold nothing private.
            target := dionysus.reach_out_target(coalesce(result ->> 'person', w.params ->> 'person'));
            IF NOT dionysus.visible_to(privacy, target ->> 'person') THEN
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

-- Failing for good refunds the energy the heartbeat spent on it.
CREATE FUNCTION fail_work(work_id uuid, error text, retry boolean DEFAULT true, lease uuid DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE
    w dionysus.work_queue;
    next_status dionysus.work_status;
BEGIN
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE; -- lock order: state before rows (refund)
    w := dionysus.require_claimed_work(work_id, lease);
    IF w.status <> 'claimed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "work_id": work item % is %, not claimed', work_id, w.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    next_status := CASE WHEN retry AND w.attempts < w.max_attempts THEN 'pending' ELSE 'failed' END;
    -- Exponential back-off: work_retry_seconds × 2^(attempts − 1).
    UPDATE dionysus.work_queue SET status = next_status, last_error = error, lease_until = NULL,
           completed_at = CASE WHEN next_status = 'failed' THEN now() END,
           available_at = now() + make_interval(secs => dionysus.heartbeat_setting('work_retry_seconds')
                                                        * power(2, greatest(w.attempts - 1, 0)))
     WHERE id = w.id;
    IF next_status = 'pending' THEN
        PERFORM pg_notify('dionysus_work', w.id::text);
    ELSE
        PERFORM dionysus.refund_work(w.id);
    END IF;
    RETURN next_status::text;
END $$;

-- ---------------------------------------------------------------------------------------
-- Maintain (seed 000 §3.2.3): a belief, identity aspect or memory is loaded with what else is
-- known about it; the model judges whether it still holds (keep, update, retire);
-- complete_work applies the verdict and records it in memory_changes.
-- ---------------------------------------------------------------------------------------
-- The target: memory_id, else a belief or identity aspect named by target, else the memory
-- recall finds for target; with neither, the least confident belief, else the oldest fact not
-- confirmed for 30 days. With the memories most related to it (the evidence). NULL: nothing.
CREATE FUNCTION maintain_target(target text DEFAULT NULL, memory_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t jsonb;
    key text := lower(btrim(target));
BEGIN
    IF memory_id IS NOT NULL THEN
        SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                  'status', m.status, 'created_at', m.created_at)
          INTO t FROM dionysus.memories m WHERE m.id = maintain_target.memory_id;
        IF t IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "memory_id": no memory with id %', memory_id USING ERRCODE = 'no_data_found';
        END IF;
    ELSIF key IS NOT NULL AND key <> '' THEN
        SELECT jsonb_build_object('kind', 'belief', 'id', b.id, 'content', b.belief, 'confidence', b.confidence)
          INTO t FROM dionysus.worldview_beliefs b WHERE b.belief_key = key;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'identity', 'id', a.id, 'content', a.aspect, 'confidence', a.confidence)
              INTO t FROM dionysus.identity_aspects a WHERE a.aspect_key = key;
        END IF;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                      'status', m.status, 'created_at', m.created_at)
              INTO t FROM dionysus.recall(target, 1) r JOIN dionysus.memories m ON m.id = r.memory_id;
        END IF;
    ELSE
        SELECT jsonb_build_object('kind', 'belief', 'id', b.id, 'content', b.belief, 'confidence', b.confidence)
          INTO t FROM dionysus.worldview_beliefs b ORDER BY b.confidence, b.updated_at LIMIT 1;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                      'status', m.status, 'created_at', m.created_at)
              INTO t FROM dionysus.facts f JOIN dionysus.memories m ON m.id = f.memory_id
             WHERE f.state IN ('learned', 'confirmed') AND m.status = 'active'
               AND coalesce(f.last_confirmed, f.learned_at) < now() - interval '30 days'
             ORDER BY coalesce(f.last_confirmed, f.learned_at) LIMIT 1;
        END IF;
    END IF;
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN t || jsonb_build_object('evidence', coalesce((
        SELECT jsonb_agg(jsonb_build_object('id', r.memory_id, 'content', r.content, 'created_at', r.created_at,
                                            'source', m.source) ORDER BY r.score DESC)
          FROM dionysus.recall(t ->> 'content', 7) r JOIN dionysus.memories m ON m.id = r.memory_id
         WHERE r.memory_id::text IS DISTINCT FROM t ->> 'id'), '[]'::jsonb));
END $$;

-- Applies a maintain verdict {kind, id, verdict: keep|update|retire, confidence, content,
-- reason} and records it. A memory's new content supersedes it; a belief or aspect that is
-- retired is removed; a new text resting on the web alone is refused. Returns the change.
CREATE FUNCTION apply_maintenance(m jsonb, heartbeat_id uuid DEFAULT NULL, work_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    kind text := m ->> 'kind';
    target uuid;
    verdict text := lower(coalesce(m ->> 'verdict', ''));
    conf double precision;
    content text := nullif(btrim(m ->> 'content'), '');
    before jsonb;
    after jsonb;
    new_id uuid;
BEGIN
    IF jsonb_typeof(m) IS DISTINCT FROM 'object' OR kind IS NULL OR kind NOT IN ('memory', 'belief', 'identity') THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance": needs a kind (memory, belief or identity)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF verdict NOT IN ('keep', 'update', 'retire') THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.verdict": % is not keep, update or retire', quote_nullable(m ->> 'verdict')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (m ->> 'id') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.id": must be the target''s id' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    target := (m ->> 'id')::uuid;
    IF m ? 'confidence' AND jsonb_typeof(m -> 'confidence') = 'number' THEN
        conf := (m ->> 'confidence')::float8;
        IF conf < 0 OR conf > 1 THEN
            RAISE EXCEPTION 'dionysus: argument "result.maintenance.confidence": % is outside [0, 1]', conf USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF content IS NOT NULL AND kind <> 'memory' AND dionysus.web_only_basis(content) THEN
        RAISE EXCEPTION 'dionysus: maintenance refused: the new text rests on web content alone' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF kind = 'memory' THEN
        SELECT jsonb_build_object('content', x.content, 'confidence', x.confidence, 'status', x.status) INTO before
          FROM dionysus.memories x WHERE x.id = target;
    ELSIF kind = 'belief' THEN
        SELECT jsonb_build_object('content', x.belief, 'confidence', x.confidence) INTO before FROM dionysus.worldview_beliefs x WHERE x.id = target;
    ELSE
        SELECT jsonb_build_object('content', x.aspect, 'confidence', x.confidence) INTO before FROM dionysus.identity_aspects x WHERE x.id = target;
    END IF;
    IF before IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.id": no % with id %', kind, target USING ERRCODE = 'no_data_found';
    END IF;
    IF verdict = 'update' AND kind = 'memory' THEN
        IF content IS NOT NULL AND content <> before ->> 'content' THEN
            new_id := dionysus.supersede(target, content, confidence => conf);
            after := jsonb_build_object('superseded_by', new_id, 'content', content, 'confidence', coalesce(conf, (before ->> 'confidence')::float8));
        ELSIF conf IS NOT NULL THEN
            UPDATE dionysus.memories SET confidence = conf, updated_at = now() WHERE id = target;
            after := jsonb_build_object('confidence', conf);
        END IF;
    ELSIF verdict = 'update' THEN
        IF kind = 'belief' THEN
            UPDATE dionysus.worldview_beliefs SET confidence = coalesce(conf, confidence), belief = coalesce(content, belief), updated_at = now()
             WHERE id = target;
        ELSE
            UPDATE dionysus.identity_aspects SET confidence = coalesce(conf, confidence), aspect = coalesce(content, aspect), updated_at = now()
             WHERE id = target;
        END IF;
        after := jsonb_build_object('content', coalesce(content, before ->> 'content'), 'confidence', coalesce(conf, (before ->> 'confidence')::float8));
    ELSIF verdict = 'retire' THEN
        IF kind = 'memory' THEN
            PERFORM dionysus.archive(target);
            after := jsonb_build_object('status', 'archived');
        ELSIF kind = 'belief' THEN
            DELETE FROM dionysus.worldview_beliefs WHERE id = target;
            after := jsonb_build_object('removed', true);
        ELSE
            DELETE FROM dionysus.identity_aspects WHERE id = target;
            after := jsonb_build_object('removed', true);
        END IF;
    END IF;
    INSERT INTO dionysus.memory_changes (heartbeat_id, work_id, target_kind, target_id, verdict, before, after, reason)
    VALUES (apply_maintenance.heartbeat_id, apply_maintenance.work_id, kind, target, verdict, before, after, m ->> 'reason');
    RETURN jsonb_build_object('kind', kind, 'id', target, 'verdict', verdict, 'before', before, 'after', after);
END $$;

-- ---------------------------------------------------------------------------------------
-- The outbox: pending → sent | failed. Public messages need approve_outbox() first.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION pending_outbox(max_items integer DEFAULT 10) RETURNS SETOF outbox
    LANGUAGE sql STABLE AS $$
    SELECT * FROM dionysus.outbox
     WHERE status = 'pending' AND (NOT requires_approval OR approved_at IS NOT NULL)
     ORDER BY created_at, id LIMIT max_items
$$;

CREATE FUNCTION require_outbox(outbox_id uuid) RETURNS dionysus.outbox
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    SELECT * INTO o FROM dionysus.outbox WHERE id = outbox_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "outbox_id": no outbox message with id %', outbox_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN o;
END $$;

-- Marks a message sent exactly once: a second call for the same message is an error.
CREATE FUNCTION mark_outbox_sent(outbox_id uuid, platform_message_id text DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE; -- lock order: state before rows
    o := dionysus.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.requires_approval AND o.approved_at IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": public message % is not approved', outbox_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET status = 'sent', sent_at = now(), attempts = attempts + 1, reserved_until = NULL,
           platform_message_id = mark_outbox_sent.platform_message_id WHERE id = outbox_id;
    IF o.audience = 'user' AND o.work_id IS NOT NULL THEN
        UPDATE dionysus.heartbeat_state SET last_user_contact_at = now() WHERE id = 1;
    END IF;
END $$;

-- ---------------------------------------------------------------------------------------
-- Delivery, exactly once: reserve → send → confirm. A driver reserves a message (a lease,
-- committed at once, so nothing is locked while the platform is called), sends it part by
-- part — each part with a stable nonce (the message id and the part number) that the
-- platform uses to return the original message instead of posting it twice — records each
-- part as it goes, and confirms: the bot's turn is logged and the message marked sent in
-- one transaction. A driver that dies anywhere leaves a reservation that lapses; the next
-- one skips the parts already recorded and resends the one in flight under the same nonce.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION outbox_lease() RETURNS interval
    LANGUAGE sql STABLE AS $$ SELECT make_interval(secs => dionysus.heartbeat_setting('outbox_lease_seconds')) $$;

CREATE FUNCTION reserve_outbox(worker text, platform text, max_items integer DEFAULT 1) RETURNS SETOF outbox
    LANGUAGE plpgsql AS $$
BEGIN
    IF worker IS NULL OR btrim(worker) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "worker": must name the sender' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF platform IS NULL OR btrim(platform) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "platform": must name the platform' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_items IS NULL OR max_items < 1 OR max_items > 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_items": % is outside [1, 100]', max_items USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    -- A message for nobody in particular (the home channel) takes the platform that sends it.
    UPDATE dionysus.outbox o SET reserved_by = reserve_outbox.worker, reserved_until = now() + dionysus.outbox_lease(),
           platform = coalesce(o.platform, reserve_outbox.platform)
     WHERE o.id IN (SELECT x.id FROM dionysus.outbox x
                     WHERE x.status = 'pending' AND x.audience = 'user' AND (NOT x.requires_approval OR x.approved_at IS NOT NULL)
                       AND (x.platform IS NULL OR x.platform = reserve_outbox.platform)
                       AND (x.reserved_until IS NULL OR x.reserved_until < now())
                     ORDER BY x.created_at, x.id LIMIT max_items FOR UPDATE SKIP LOCKED)
    RETURNING o.*;
END $$;

-- The outbox row, locked, still reserved by this worker and unsent (or an error naming why not).
CREATE FUNCTION require_reserved_outbox(outbox_id uuid, worker text) RETURNS dionysus.outbox
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF o.reserved_by IS DISTINCT FROM worker THEN
        RAISE EXCEPTION 'dionysus: argument "worker": message % is reserved by %, not %', outbox_id, coalesce(o.reserved_by, 'nobody'), worker
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN o;
END $$;

-- One part delivered (parts are numbered from 0, in order); a repeat is a no-op. Renews the lease.
CREATE FUNCTION outbox_part_sent(outbox_id uuid, worker text, part integer, platform_message_id text) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    IF coalesce(btrim(platform_message_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "platform_message_id": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    o := dionysus.require_reserved_outbox(outbox_id, worker);
    IF part IS NULL OR part < 0 OR part > jsonb_array_length(o.sent_parts) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "part": % is not the next part (% recorded)', part, jsonb_array_length(o.sent_parts)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox x SET reserved_until = now() + dionysus.outbox_lease(),
           sent_parts = CASE WHEN outbox_part_sent.part = jsonb_array_length(x.sent_parts)
                             THEN x.sent_parts || to_jsonb(outbox_part_sent.platform_message_id)
                             ELSE x.sent_parts END
     WHERE x.id = outbox_part_sent.outbox_id;
END $$;

-- Every part is out: the bot's turn is logged (in the channel it went to) and the message
-- marked sent, in one transaction. A reach-out starts the contact cooldown only now.
CREATE FUNCTION confirm_outbox(outbox_id uuid, worker text, channel_id text, bot_author_id text) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE
    o dionysus.outbox;
    logged jsonb;
    last_part text;
BEGIN
    IF coalesce(btrim(channel_id), '') = '' OR coalesce(btrim(bot_author_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', CASE WHEN coalesce(btrim(channel_id), '') = '' THEN 'channel_id' ELSE 'bot_author_id' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO o FROM dionysus.outbox x WHERE x.id = outbox_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "outbox_id": no outbox message with id %', outbox_id USING ERRCODE = 'no_data_found';
    END IF;
    -- Lock order: the channel (log_message takes it again), the state row, then the row.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.channel:' || coalesce(o.platform, '') || ':' || channel_id, 0));
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    o := dionysus.require_reserved_outbox(outbox_id, worker);
    last_part := o.sent_parts ->> -1;
    IF last_part IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": no part of message % was recorded as sent', outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF o.platform IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % names no platform', outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    logged := dionysus.log_message(o.platform, last_part, channel_id, bot_author_id, o.content, true, o.work_id IS NOT NULL,
                                   o.reply_to, o.person);
    UPDATE dionysus.outbox x SET status = 'sent', sent_at = now(), attempts = x.attempts + 1, reserved_until = NULL,
           platform_message_id = last_part, channel_id = confirm_outbox.channel_id
     WHERE x.id = outbox_id;
    IF o.work_id IS NOT NULL THEN
        UPDATE dionysus.heartbeat_state SET last_user_contact_at = now() WHERE id = 1;
    END IF;
    RETURN (logged ->> 'message_id')::uuid;
END $$;

-- The channel could not take it: back to the outbox. `rejected`: the platform refused this
-- message (an attempt is spent; the fifth fails it); otherwise the channel was unavailable
-- and no attempt is spent.
CREATE FUNCTION release_outbox(outbox_id uuid, worker text, error text, rejected boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE
    o dionysus.outbox;
    st text;
BEGIN
    o := dionysus.require_reserved_outbox(outbox_id, worker);
    UPDATE dionysus.outbox x SET reserved_until = NULL, last_error = release_outbox.error,
           attempts = x.attempts + CASE WHEN rejected THEN 1 ELSE 0 END,
           status = CASE WHEN rejected AND x.attempts + 1 >= 5 THEN 'failed'::dionysus.outbox_status ELSE 'pending' END
     WHERE x.id = outbox_id
    RETURNING x.status::text INTO st;
    RETURN st;
END $$;

CREATE FUNCTION mark_outbox_failed(outbox_id uuid, error text, retry boolean DEFAULT true) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET attempts = attempts + 1, last_error = error,
           status = CASE WHEN retry AND attempts + 1 < 5 THEN 'pending'::dionysus.outbox_status ELSE 'failed' END
     WHERE id = outbox_id;
    RETURN (SELECT status::text FROM dionysus.outbox WHERE id = outbox_id);
END $$;

CREATE FUNCTION approve_outbox(outbox_id uuid) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET approved_at = coalesce(approved_at, now()) WHERE id = outbox_id;
    PERFORM pg_notify('dionysus_outbox', outbox_id::text);
END $$;

-- ---------------------------------------------------------------------------------------
-- The heartbeat: begin (regenerate, observe, orient) and finish (record).
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION heartbeat_interval_minutes() RETURNS integer
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('dionysus.heartbeat_interval', true), '')::integer, 60)
$$;

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

-- Themes recall has touched lately: concepts of memories accessed in the last day, else
-- the memories themselves.
CREATE FUNCTION activated_themes(max_items integer DEFAULT 5) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    WITH touched AS (
        (SELECT memory_id FROM dionysus.memory_access_log WHERE accessed_at > now() - interval '1 day'
          ORDER BY accessed_at DESC LIMIT 200)
        UNION
        (SELECT id FROM dionysus.memories WHERE last_accessed > now() - interval '1 day'
          ORDER BY last_accessed DESC LIMIT 200)),
    concepts AS (
        SELECT c.name, count(*) AS hits FROM touched t
          JOIN dionysus.memory_concepts mc ON mc.memory_id = t.memory_id JOIN dionysus.concepts c ON c.id = mc.concept_id
         GROUP BY c.name ORDER BY hits DESC, c.name LIMIT max_items)
    SELECT CASE WHEN EXISTS (SELECT 1 FROM concepts)
                THEN (SELECT jsonb_agg(jsonb_build_object('theme', name, 'hits', hits)) FROM concepts)
                ELSE coalesce((SELECT jsonb_agg(jsonb_build_object('memory', left(m.content, 160)))
                                 FROM (SELECT m.content FROM touched t JOIN dionysus.memories m ON m.id = t.memory_id
                                        ORDER BY m.last_accessed DESC NULLS LAST LIMIT max_items) m), '[]'::jsonb)
           END
$$;

CREATE FUNCTION action_costs() RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_object_agg(substr(key, 6), value ORDER BY value, key) FROM dionysus.heartbeat_config WHERE key LIKE 'cost\_%'
$$;

-- Starts a heartbeat, or returns the one in flight: exactly one at a time. Regenerates energy
-- (min(previous × carry_over + base_regeneration, max)), observes, orients, and returns the
-- whole context the decision needs.
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
    energy := least(st.current_energy * dionysus.heartbeat_setting('carry_over') + dionysus.heartbeat_setting('base_regeneration'),
                    dionysus.heartbeat_setting('max_energy'));
    -- The log row first: the ledger entry of the regeneration points at it.
    INSERT INTO dionysus.heartbeat_log (id, heartbeat_number, energy_start, last_alive_at) VALUES (hb, n, energy, now());
    PERFORM dionysus.update_energy(energy - st.current_energy, hb, 'regenerate', 'heartbeat start');
    env := dionysus.heartbeat_observe();
    goals := dionysus.review_goals();
    ctx := jsonb_build_object(
        'heartbeat_id', hb,
        'heartbeat_number', n,
        'energy', jsonb_build_object('available', energy, 'max', dionysus.heartbeat_setting('max_energy')),
        'environment', env,
        'goals', goals,
        'recent_memories', coalesce((SELECT jsonb_agg(jsonb_build_object('id', m.id, 'content', m.content, 'created_at', m.created_at,
                                                                         'valence', m.valence) ORDER BY m.created_at DESC)
                                      FROM (SELECT * FROM dionysus.memories WHERE type = 'episodic' AND status = 'active'
                                             ORDER BY created_at DESC LIMIT 5) m), '[]'::jsonb),
        'activated_themes', dionysus.activated_themes(),
        'identity', coalesce((SELECT jsonb_agg(jsonb_build_object('aspect', aspect, 'confidence', confidence) ORDER BY confidence DESC)
                                FROM dionysus.identity_aspects), '[]'::jsonb),
        'worldview', coalesce((SELECT jsonb_agg(jsonb_build_object('belief', belief, 'confidence', confidence) ORDER BY confidence DESC)
                                 FROM dionysus.worldview_beliefs), '[]'::jsonb),
        'action_costs', dionysus.action_costs(),
        'warnings', dionysus.heartbeat_warnings(),
        'reach_out_cooldown_hours', dionysus.heartbeat_setting('reach_out_cooldown_hours'),
        'people', dionysus.known_people());
    -- Whose private words this context holds: its memories (recent ones, and the recalled
    -- ones activated_themes may quote) and its goals. What the heartbeat writes inherits it.
    taint := dionysus.privacy_union(
        dionysus.memory_privacy(ARRAY(
            SELECT (e ->> 'id')::uuid FROM jsonb_array_elements(ctx -> 'recent_memories') e
            UNION (SELECT memory_id FROM dionysus.memory_access_log WHERE accessed_at > now() - interval '1 day'
                    ORDER BY accessed_at DESC LIMIT 200)
            UNION (SELECT id FROM dionysus.memories WHERE last_accessed > now() - interval '1 day'
                    ORDER BY last_accessed DESC LIMIT 200))),
        (SELECT array_agg(DISTINCT p) FROM dionysus.goals g, unnest(g.private_to) p WHERE g.priority IN ('active', 'queued')));
    UPDATE dionysus.heartbeat_log SET context = ctx, environment_snapshot = env, goals_snapshot = goals, private_to = taint
     WHERE id = hb;
    UPDATE dionysus.heartbeat_state SET in_flight = hb, heartbeat_count = n, requested_at = NULL, request_reason = NULL,
           updated_at = now() WHERE id = 1;
    RETURN ctx;
END $$;

-- The fallback of §9.6 for when the LLM fails: reflect, then rest.
CREATE FUNCTION heartbeat_default_decision() RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS $$
    SELECT '{"reasoning": "The decision could not be made (the language model failed or answered nonsense); reflecting on recent experience and resting instead.",
             "actions": [{"action": "reflect", "params": {"focus": "recent experience"}}, {"action": "rest", "params": {}}],
             "goal_changes": []}'::jsonb
$$;

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
                             private_to => dionysus.privacy_union(h.private_to,
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
           next_heartbeat_at = now() + make_interval(mins => dionysus.heartbeat_interval_minutes()), updated_at = now()
     WHERE id = 1;
    RETURN mem;
END $$;

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

-- A heartbeat whose driver fell silent (no touch for heartbeat_timeout_minutes): committed
-- with the fallback if need be, then finished with a plain narrative, so the schedule never
-- stalls. Each in its own subtransaction: one that cannot be closed normally is closed by
-- force with the reason, and never holds up the others or the rest of the tick.
CREATE FUNCTION recover_stalled_heartbeats() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    h dionysus.heartbeat_log;
    n integer := 0;
    why text;
BEGIN
    FOR h IN SELECT * FROM dionysus.heartbeat_log
              WHERE status IN ('in_flight', 'committed')
                AND coalesce(last_alive_at, started_at)
                    < now() - make_interval(secs => dionysus.heartbeat_setting('heartbeat_timeout_minutes') * 60)
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
                   next_heartbeat_at = now() + make_interval(mins => dionysus.heartbeat_interval_minutes()), updated_at = now()
             WHERE id = 1 AND in_flight = h.id;
            UPDATE dionysus.heartbeat_log SET status = 'recovered', ended_at = now(), recovery_error = why WHERE id = h.id;
        END;
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

CREATE FUNCTION heartbeat_due() RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT NOT s.paused AND NOT s.session_active AND s.in_flight IS NULL
           AND (s.requested_at IS NOT NULL OR s.next_heartbeat_at IS NULL OR s.next_heartbeat_at <= now())
      FROM dionysus.heartbeat_state s WHERE s.id = 1
$$;

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
BEGIN
    -- Each step in its own subtransaction: one that fails is reported, the others (and the
    -- NOTIFYs below) still happen.
    recovered := dionysus.recover_stalled_heartbeats();
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
                              'ended_session', ended_session, 'language_work_queued', language_work, 'errors', errors);
END $$;

-- ---------------------------------------------------------------------------------------
-- Retention: what only records the past is pruned after retention_days (default 90) by the
-- maintenance pass, a bounded batch per table per pass. The message log is never pruned
-- (it is what everything else can be rebuilt from), and neither are memories.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION prune_history(batch integer DEFAULT 10000) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    cutoff timestamptz := now() - make_interval(secs => dionysus.heartbeat_setting('retention_days') * 86400);
    pruned jsonb := '{}'::jsonb;
    n integer;
BEGIN
    IF batch IS NULL OR batch < 1 OR batch > 1000000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "batch": % is outside [1, 1000000]', batch USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM dionysus.energy_ledger WHERE id IN (SELECT id FROM dionysus.energy_ledger WHERE at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('energy_ledger', n);
    DELETE FROM dionysus.work_queue WHERE id IN (SELECT id FROM dionysus.work_queue WHERE status IN ('done', 'failed')
                                                   AND coalesce(completed_at, created_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('work_queue', n);
    DELETE FROM dionysus.outbox WHERE id IN (SELECT id FROM dionysus.outbox WHERE status IN ('sent', 'failed')
                                               AND coalesce(sent_at, created_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('outbox', n);
    DELETE FROM dionysus.heartbeat_log WHERE id IN (SELECT id FROM dionysus.heartbeat_log WHERE status IN ('finished', 'recovered')
                                                      AND coalesce(ended_at, started_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('heartbeat_log', n);
    DELETE FROM dionysus.memory_access_log WHERE ctid IN (SELECT ctid FROM dionysus.memory_access_log WHERE accessed_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('memory_access_log', n);
    DELETE FROM dionysus.embedding_cache WHERE (model, content_hash) IN
        (SELECT model, content_hash FROM dionysus.embedding_cache WHERE created_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('embedding_cache', n);
    RETURN pruned;
END $$;

-- Sizes of the tables that grow, in bytes (with their indexes and TOAST).
CREATE FUNCTION table_bytes(tables text[]) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_object_agg(t, pg_total_relation_size(('dionysus.' || quote_ident(t))::regclass) ORDER BY t) FROM unnest(tables) t
$$;

-- Appendix A, plus the queue, the outbox and the warnings.
CREATE VIEW heartbeat_health AS
SELECT
    s.heartbeat_count                                                       AS total_heartbeats,
    s.current_energy,
    s.last_heartbeat_at                                                     AS last_heartbeat,
    s.next_heartbeat_at                                                     AS next_heartbeat,
    s.in_flight,
    s.paused,
    s.session_active,
    (SELECT count(*) FROM goals WHERE priority = 'active')                  AS active_goals,
    (SELECT count(*) FROM goals WHERE priority = 'queued')                  AS queued_goals,
    (SELECT avg(energy_end - energy_start) FROM heartbeat_log
      WHERE started_at > now() - interval '24 hours')                       AS avg_energy_delta_24h,
    (SELECT count(*) FROM heartbeat_log h, jsonb_array_elements(h.actions_taken) a
      WHERE h.started_at > now() - interval '24 hours' AND a ->> 'action' = 'reach_out_user') AS reach_outs_24h,
    (SELECT count(*) FROM work_queue WHERE status IN ('pending', 'claimed')) AS queue_depth,
    (SELECT now() - min(created_at) FROM work_queue WHERE status = 'pending') AS oldest_pending_work,
    (SELECT count(*) FROM work_queue WHERE status = 'failed')               AS failed_work,
    (SELECT count(*) FROM outbox WHERE status = 'pending')                  AS outbox_backlog,
    (SELECT count(*) FROM outbox WHERE status = 'pending' AND requires_approval AND approved_at IS NULL) AS awaiting_approval,
    sc.last_tick_at                                                         AS last_scheduler_tick,
    sc.last_error                                                           AS last_scheduler_error,
    heartbeat_warnings()                                                    AS warnings,
    table_bytes(ARRAY['heartbeat_log', 'energy_ledger', 'work_queue', 'outbox', 'messages']) AS table_bytes
FROM heartbeat_state s CROSS JOIN scheduler_status sc WHERE s.id = 1;
