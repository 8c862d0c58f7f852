-- Goals: at most a few active at once, a backlog, parents completed by their
-- children, blockers, progress notes and links to memories; review_goals() for orient.
--
-- Conventions: every rejection raises an SQLSTATE with a message naming the argument; every
-- function is one statement in the caller's transaction, so nothing is ever half-written.
-- Helpers nobody calls directly live in dionysus_internal (see 001_schema.sql).

-- ---------------------------------------------------------------------------------------
-- Goals (§4)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.goal_level(p dionysus.goal_priority) RETURNS integer
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE p WHEN 'active' THEN 3 WHEN 'queued' THEN 2 WHEN 'backburner' THEN 1 ELSE 0 END
$$;
COMMENT ON FUNCTION dionysus_internal.goal_level(dionysus.goal_priority) IS 'Internal: the rank of a priority (active 3, queued 2, backburner 1, closed 0).';

-- Keeps the count limits: overflow is demoted one level (the least recently touched goal
-- first, never `keep`), and never dropped.
CREATE FUNCTION dionysus_internal.enforce_goal_limits(keep uuid DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    demoted integer := 0;
    over integer;
    g record;
BEGIN
    over := (SELECT count(*) FROM dionysus.goals WHERE priority = 'active') - dionysus_internal.heartbeat_setting('max_active_goals');
    FOR g IN SELECT id FROM dionysus.goals WHERE priority = 'active' AND id IS DISTINCT FROM keep
             ORDER BY last_touched, created_at LIMIT greatest(over, 0) LOOP
        UPDATE dionysus.goals SET priority = 'queued',
               progress = progress || jsonb_build_array(jsonb_build_object('at', now(), 'note', 'demoted to queued: active limit reached'))
         WHERE id = g.id;
        demoted := demoted + 1;
    END LOOP;
    over := (SELECT count(*) FROM dionysus.goals WHERE priority = 'queued') - dionysus_internal.heartbeat_setting('max_queued_goals');
    FOR g IN SELECT id FROM dionysus.goals WHERE priority = 'queued' AND id IS DISTINCT FROM keep
             ORDER BY last_touched, created_at LIMIT greatest(over, 0) LOOP
        UPDATE dionysus.goals SET priority = 'backburner',
               progress = progress || jsonb_build_array(jsonb_build_object('at', now(), 'note', 'demoted to backburner: queued limit reached'))
         WHERE id = g.id;
        demoted := demoted + 1;
    END LOOP;
    RETURN demoted;
END $$;
COMMENT ON FUNCTION dionysus_internal.enforce_goal_limits(uuid) IS
    'Internal: keeps the goal limits (max_active_goals, max_queued_goals) by demoting the least recently touched overflow one level, never keep.';

CREATE FUNCTION dionysus_internal.require_goal(goal_id uuid, arg text DEFAULT 'goal_id') RETURNS dionysus.goals
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
COMMENT ON FUNCTION dionysus_internal.require_goal(uuid, text) IS 'Internal: the goal, locked, or an error naming the argument.';

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
    -- A title is a line, a description a paragraph (an agent may send a megabyte of either).
    PERFORM dionysus_internal.bounded_text('title', btrim(title), 200);
    PERFORM dionysus_internal.bounded_text('description', description, 4000);
    IF source IS NULL OR lower(btrim(source)) NOT IN ('curiosity', 'user_request', 'identity', 'derived', 'external') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "source": unknown goal source % (expected curiosity, user_request, identity, derived, external)',
            dionysus_internal.input_prefix(source) USING ERRCODE = 'invalid_parameter_value';
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
        parent := dionysus_internal.require_goal(parent_goal_id, 'parent_goal_id');
        IF parent.priority IN ('completed', 'abandoned') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "parent_goal_id": goal % is %', parent_goal_id, parent.priority
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    -- Default priority by source (§4.5): user requests are active, derived goals inherit.
    IF priority IS NOT NULL THEN
        IF lower(btrim(priority)) NOT IN ('active', 'queued', 'backburner') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "priority": a new goal is active, queued or backburner, not %',
                dionysus_internal.input_prefix(priority) USING ERRCODE = 'invalid_parameter_value';
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
        IF prio = 'active' AND (SELECT count(*) FROM dionysus.goals WHERE priority = 'active') >= dionysus_internal.heartbeat_setting('max_active_goals') THEN
            prio := 'queued';
        END IF;
        IF prio = 'queued' AND (SELECT count(*) FROM dionysus.goals WHERE priority = 'queued') >= dionysus_internal.heartbeat_setting('max_queued_goals') THEN
            prio := 'backburner';
        END IF;
    END IF;
    INSERT INTO dionysus.goals (title, description, priority, source, parent_goal_id, emotional_valence, blocked_by, private_to)
    VALUES (btrim(title), description, prio, src, parent_goal_id, emotional_valence, blocked_by,
            dionysus_internal.privacy_union(private_to, NULL))
    RETURNING id INTO new_id;
    IF origin_memory_id IS NOT NULL THEN
        INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (new_id, origin_memory_id, 'origin');
    END IF;
    PERFORM dionysus_internal.enforce_goal_limits(new_id);
    -- The proactive mind hears of it (an event; a goal one person asked for is about them).
    PERFORM dionysus.push_event('internal', 'goal_changed', 2,
        jsonb_build_object('goal_id', new_id, 'change', 'created', 'priority', prio, 'source', src),
        (SELECT CASE WHEN cardinality(g.private_to) = 1 THEN g.private_to[1] END FROM dionysus.goals g WHERE g.id = new_id));
    RETURN new_id;
END $$;
COMMENT ON FUNCTION create_goal IS
    'Adds a goal. Default priority by source (user_request → active, derived → the parent''s, else queued); over the '
    'limits a goal is demoted one level, never dropped (a user''s request displaces the stalest active goal). '
    'A title is at most 200 characters, a description 4000 (22001 naming the argument).';

-- Allowed moves (§4.3): backburner ↔ queued ↔ active, active → completed, any open → abandoned.
CREATE FUNCTION change_goal_priority(goal_id uuid, new_priority text, reason text DEFAULT NULL)
    RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    g dionysus.goals;
    target dionysus.goal_priority;
BEGIN
    -- The goals lock before the goal's row: the global lock order (002_heartbeat.sql).
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    g := dionysus_internal.require_goal(goal_id);
    IF new_priority IS NULL OR lower(btrim(new_priority)) NOT IN ('active', 'queued', 'backburner', 'completed', 'abandoned') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "new_priority": unknown priority %', dionysus_internal.input_prefix(new_priority)
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
    IF target IN ('active', 'queued', 'backburner') AND abs(dionysus_internal.goal_level(target) - dionysus_internal.goal_level(g.priority)) <> 1 THEN
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
        PERFORM dionysus_internal.complete_parent_goals(goal_id);
    END IF;
    PERFORM dionysus_internal.enforce_goal_limits(goal_id);
    PERFORM dionysus.push_event('internal', 'goal_changed', 2,
        jsonb_build_object('goal_id', goal_id, 'change', g.priority || ' → ' || target, 'priority', target, 'source', g.source),
        CASE WHEN cardinality(g.private_to) = 1 THEN g.private_to[1] END);
    RETURN target::text;
END $$;
COMMENT ON FUNCTION change_goal_priority(uuid, text, text) IS
    'Moves a goal: backburner ↔ queued ↔ active, active → completed, any open goal → abandoned (with a reason). '
    'A parent completes when all its children have.';

-- A parent completes when all its children have (§4.6), up the hierarchy.
CREATE FUNCTION dionysus_internal.complete_parent_goals(child uuid) RETURNS void
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
COMMENT ON FUNCTION dionysus_internal.complete_parent_goals(uuid) IS 'Internal: completes a goal''s parents, up the hierarchy, once all their children are completed (§4.6).';

CREATE FUNCTION add_goal_progress(goal_id uuid, note text, memory_id uuid DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE g dionysus.goals;
BEGIN
    g := dionysus_internal.require_goal(goal_id);
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
COMMENT ON FUNCTION add_goal_progress(uuid, text, uuid) IS 'Appends a progress note (and optionally links a memory); touches the goal.';

CREATE FUNCTION set_goal_blockers(goal_id uuid, blocked_by jsonb) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus_internal.require_goal(goal_id);
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
COMMENT ON FUNCTION set_goal_blockers(uuid, jsonb) IS 'Sets what blocks a goal: goal ids (resolved when they complete) or free texts.';

CREATE FUNCTION link_goal_memory(goal_id uuid, memory_id uuid, link_type text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus_internal.require_goal(goal_id);
    IF memory_id IS NULL OR NOT EXISTS (SELECT 1 FROM dionysus.memories m WHERE m.id = memory_id) THEN
        RAISE EXCEPTION 'dionysus: argument "memory_id": no memory with id %', memory_id USING ERRCODE = 'no_data_found';
    END IF;
    IF link_type IS NULL OR link_type NOT IN ('origin', 'progress', 'completion', 'blocker') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "link_type": % (expected origin, progress, completion, blocker)',
            dionysus_internal.input_prefix(link_type) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (goal_id, memory_id, link_type)
    ON CONFLICT DO NOTHING;
END $$;
COMMENT ON FUNCTION link_goal_memory(uuid, uuid, text) IS 'Links a goal and a memory (origin, progress, completion, blocker).';

-- Unresolved blockers of a goal: free texts, and goal ids whose goal is not completed.
CREATE FUNCTION dionysus_internal.goal_open_blockers(g dionysus.goals) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(b), '[]'::jsonb)
    FROM jsonb_array_elements(coalesce(g.blocked_by, '[]'::jsonb)) AS b
    WHERE NOT (jsonb_typeof(b) = 'string'
               AND (b #>> '{}') ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
               AND EXISTS (SELECT 1 FROM dionysus.goals d WHERE d.id = (b #>> '{}')::uuid AND d.priority = 'completed'))
$$;
COMMENT ON FUNCTION dionysus_internal.goal_open_blockers(dionysus.goals) IS 'Internal: a goal''s unresolved blockers: free texts, and ids of goals not completed.';

CREATE FUNCTION dionysus_internal.goal_brief(g dionysus.goals) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', g.id, 'title', g.title, 'description', g.description, 'priority', g.priority,
                              'source', g.source, 'parent_goal_id', g.parent_goal_id,
                              'last_touched', g.last_touched, 'emotional_valence', g.emotional_valence,
                              'last_progress', g.progress -> -1, 'open_blockers', dionysus_internal.goal_open_blockers(g))
$$;
COMMENT ON FUNCTION dionysus_internal.goal_brief(dionysus.goals) IS 'Internal: a goal as the heartbeat context shows it (with its last progress and open blockers).';

-- The assessment of §4.4: free, every heartbeat.
CREATE FUNCTION review_goals() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    stale_days double precision := dionysus_internal.heartbeat_setting('stale_goal_days');
    active jsonb; queued jsonb; blocked jsonb; stale jsonb; candidates jsonb;
    n_active integer; n_queued integer; n_backburner integer;
BEGIN
    SELECT coalesce(jsonb_agg(dionysus_internal.goal_brief(g) ORDER BY g.last_touched DESC), '[]'), count(*)
      INTO active, n_active FROM dionysus.goals g WHERE g.priority = 'active';
    SELECT coalesce(jsonb_agg(dionysus_internal.goal_brief(g) ORDER BY g.last_touched DESC), '[]'), count(*)
      INTO queued, n_queued FROM dionysus.goals g WHERE g.priority = 'queued';
    SELECT count(*) INTO n_backburner FROM dionysus.goals WHERE priority = 'backburner';
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title, 'blocked_by', dionysus_internal.goal_open_blockers(g))), '[]')
      INTO blocked FROM dionysus.goals g
     WHERE g.priority = 'active' AND jsonb_array_length(dionysus_internal.goal_open_blockers(g)) > 0;
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title,
                    'days_untouched', round((extract(epoch FROM now() - g.last_touched) / 86400)::numeric, 1))), '[]')
      INTO stale FROM dionysus.goals g
     WHERE g.priority = 'active' AND g.last_touched < now() - make_interval(secs => stale_days * 86400);
    -- Queued goals that are unblocked, most recently touched (most relevant) first.
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', c.id, 'title', c.title)), '[]') INTO candidates
      FROM (SELECT g.id, g.title FROM dionysus.goals g
             WHERE g.priority = 'queued' AND jsonb_array_length(dionysus_internal.goal_open_blockers(g)) = 0
             ORDER BY g.last_touched DESC LIMIT 3) c;
    RETURN jsonb_build_object(
        'active', active, 'queued', queued, 'backburner_count', n_backburner,
        'blocked', blocked, 'stale', stale, 'promotion_candidates', candidates,
        'needs_brainstorm', n_active + n_queued + n_backburner = 0,
        'suggest_promotion', CASE WHEN n_active = 0 AND jsonb_array_length(candidates) > 0 THEN candidates -> 0 END);
END $$;
COMMENT ON FUNCTION review_goals() IS
    'The goal assessment of §4.4: active, queued, blocked, stale, promotion candidates, whether to brainstorm, a promotion to suggest.';

-- The goals still open (active, queued, backburner), for brainstorm_goals: what the model
-- should not propose again.
CREATE FUNCTION open_goals() RETURNS TABLE (goal_id uuid, title text, priority text)
    LANGUAGE sql STABLE AS $$
    SELECT g.id, g.title, g.priority::text FROM dionysus.goals g WHERE g.priority IN ('active', 'queued', 'backburner')
$$;
COMMENT ON FUNCTION open_goals() IS 'The goals still open (active, queued or backburner): goal_id, title, priority.';

CREATE VIEW active_goals AS
SELECT * FROM goals WHERE priority = 'active' ORDER BY last_touched DESC;
COMMENT ON VIEW active_goals IS 'Active goals, most recently touched first.';

CREATE VIEW goal_backlog AS
SELECT priority, count(*) AS count, array_agg(title ORDER BY last_touched DESC) AS titles
FROM goals WHERE priority IN ('active', 'queued', 'backburner') GROUP BY priority;
COMMENT ON VIEW goal_backlog IS 'Open goals by priority.';
