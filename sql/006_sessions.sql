-- Sessions: heartbeats pause while the person is talking, and a session
-- that ends with enough said asks for a heartbeat.
--
-- Conventions: every rejection raises an SQLSTATE with a message naming the argument; every
-- function is one statement in the caller's transaction, so nothing is ever half-written.
-- Helpers nobody calls directly live in dionysus_internal (see 001_schema.sql).

-- ---------------------------------------------------------------------------------------
-- Sessions (§5.3): heartbeats pause while the person is talking.
-- ---------------------------------------------------------------------------------------
-- The last interaction is on the driven clock (001_schema.sql's clock_now), as end_idle_session
-- measures idleness by it; the start stays in real time, as the messages it counts are stamped.
CREATE FUNCTION session_start() RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET session_active = true,
           session_started_at = CASE WHEN session_active THEN session_started_at ELSE now() END,
           last_user_interaction_at = dionysus.clock_now(), updated_at = now() WHERE id = 1;
$$;
COMMENT ON FUNCTION session_start() IS 'The person is talking: heartbeats pause.';

CREATE FUNCTION note_user_message() RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET last_user_interaction_at = dionysus.clock_now(), updated_at = now() WHERE id = 1;
$$;
COMMENT ON FUNCTION note_user_message() IS 'The person spoke (ends the reach-out cooldown).';

CREATE FUNCTION request_heartbeat(reason text DEFAULT 'requested') RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dionysus.heartbeat_state SET requested_at = now(), request_reason = reason, updated_at = now() WHERE id = 1;
    PERFORM pg_notify('dionysus_heartbeat', jsonb_build_object('reason', reason, 'database', current_database())::text);
END $$;
COMMENT ON FUNCTION request_heartbeat(text) IS 'Asks for a heartbeat now (the scheduler notifies the driver).';

CREATE FUNCTION session_end(significant boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dionysus.heartbeat_state SET session_active = false, updated_at = now() WHERE id = 1;
    IF significant THEN
        PERFORM dionysus.request_heartbeat('significant session');
    END IF;
END $$;
COMMENT ON FUNCTION session_end(boolean) IS 'The conversation ended; a significant one requests an immediate heartbeat.';

CREATE FUNCTION pause_heartbeats(paused boolean DEFAULT true) RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET paused = pause_heartbeats.paused, updated_at = now() WHERE id = 1;
$$;
COMMENT ON FUNCTION pause_heartbeats(boolean) IS 'Pauses or resumes scheduled heartbeats.';
