-- Memory for other agents (`dionysus mcp`): one person's memory, used as that person.
--
-- A person can give their other assistants (desktop chat apps, coding agents) the memory their
-- companion has. Every call acts as one person:
--   writes   are private to them (`private_to = {person}`), with `source = 'mcp:<client>'`;
--   reads    show what they may see (visible_to): their own and what is private to nobody;
--   changes  (forget, supersede) reach only their own memories: what is private to them alone.
--            Shared memories are the companion's, and other people's are not theirs to touch.
-- These functions hold that rule in the database, so psql, the driver and any client apply
-- the same one. forget_own is SECURITY DEFINER (the driver's role may not DELETE memories
-- itself) with a pinned search_path, executable by the driver's role and not by PUBLIC.

-- Refuses (42501, without saying whether it exists) a memory that is not the person's own.
-- No lock of its own: forget_own locks the row first, supersede in the global order (002); who
-- a memory is private to is fixed when it is written (the driver's role may not UPDATE it).
CREATE FUNCTION dionysus_internal.require_own_memory(person text, memory_id uuid) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF memory_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "memory_id": must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM dionysus.memories m
      WHERE m.id = require_own_memory.memory_id
        AND cardinality(m.private_to) > 0 AND m.private_to <@ ARRAY[require_own_memory.person];
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: invalid argument "memory_id": % is not one of %''s own memories', memory_id, person
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;
COMMENT ON FUNCTION dionysus_internal.require_own_memory(text, uuid) IS
    'Refuses (42501) a memory that is not the person''s own (private to them alone), without saying whether it exists.';

CREATE FUNCTION forget_own(person text, memory_id uuid) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- The row is locked before it is checked, so what is checked is what is deleted.
    PERFORM 1 FROM dionysus.memories m WHERE m.id = forget_own.memory_id FOR UPDATE;
    PERFORM dionysus_internal.require_own_memory(person, memory_id);
    RETURN dionysus.forget(memory_id);
END $$;
COMMENT ON FUNCTION forget_own(text, uuid) IS
    'Other agents (MCP): deletes one of the person''s own memories for good. Shared memories and other people''s are refused (42501). Runs with the extension owner''s rights; the driver''s role may call it, PUBLIC may not.';
REVOKE EXECUTE ON FUNCTION forget_own(text, uuid) FROM PUBLIC;

CREATE FUNCTION supersede_own(person text, memory_id uuid, new_content text, importance double precision DEFAULT NULL,
                              confidence double precision DEFAULT NULL, source text DEFAULT NULL)
    RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus_internal.require_own_memory(person, memory_id);
    RETURN dionysus.supersede(memory_id, new_content, importance => importance, confidence => confidence, source => source);
END $$;
COMMENT ON FUNCTION supersede_own(text, uuid, text, double precision, double precision, text) IS
    'Other agents (MCP): replaces one of the person''s own memories with what is true now (supersede); others'' and shared ones are refused (42501).';

-- The companion's open goals this person may see, the most pressing first (max_items NULL: all).
CREATE FUNCTION person_goals(for_person text, max_items integer DEFAULT 50)
    RETURNS TABLE (goal_id uuid, title text, description text, priority text, source text, last_touched timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT g.id, g.title, g.description, g.priority::text, g.source::text, g.last_touched
      FROM dionysus.goals g
     WHERE g.priority IN ('active', 'queued', 'backburner')
       AND dionysus_internal.visible_to(g.private_to, for_person)
     ORDER BY g.priority, g.last_touched DESC
     LIMIT CASE WHEN max_items IS NULL THEN NULL ELSE greatest(max_items, 0) END
$$;
COMMENT ON FUNCTION person_goals(text, integer) IS 'The companion''s active, queued and back-burner goals this person may see, the most pressing first.';

-- How the companion is doing, as one person may see it: energy and heartbeats (nobody's
-- private words), open goals visible to them, and the memories they may see and own.
CREATE FUNCTION person_status(for_person text) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'person', for_person,
        'extension_version', (SELECT e.extversion FROM pg_extension e WHERE e.extname = 'dionysus'),
        'energy', h.current_energy, 'heartbeats', h.total_heartbeats,
        'last_heartbeat', h.last_heartbeat, 'paused', h.paused,
        'open_goals', (SELECT count(*) FROM dionysus.person_goals(for_person, NULL)),
        'memories', (SELECT count(*) FROM dionysus.memories m
                      WHERE m.status = 'active' AND dionysus_internal.visible_to(m.private_to, for_person)),
        'own_memories', (SELECT count(*) FROM dionysus.memories m
                          WHERE m.status = 'active' AND cardinality(m.private_to) > 0 AND m.private_to <@ ARRAY[for_person]),
        'newest_memory_at', (SELECT max(m.created_at) FROM dionysus.memories m
                              WHERE m.status = 'active' AND dionysus_internal.visible_to(m.private_to, for_person)))
      FROM dionysus.heartbeat_health h
$$;
COMMENT ON FUNCTION person_status(text) IS
    'How the companion is doing as one person may see it: energy, heartbeats, their open goals, the memories they may see and own.';
