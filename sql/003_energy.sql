-- Energy: the heartbeat's settings, the cost of each action, and the energy
-- balance with its ledger. Every change of energy goes through update_energy().
--
-- Conventions: every rejection raises an SQLSTATE with a message naming the argument; every
-- function is one statement in the caller's transaction, so nothing is ever half-written.
-- Helpers nobody calls directly live in dionysus_internal (see 001_schema.sql).

-- ---------------------------------------------------------------------------------------
-- Configuration and energy (§2)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.heartbeat_setting(setting_key text) RETURNS double precision
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
COMMENT ON FUNCTION dionysus_internal.heartbeat_setting(text) IS 'One value of heartbeat_config; an unknown key is an error naming it.';

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
COMMENT ON FUNCTION get_action_cost(text) IS 'Energy cost of an action (heartbeat_config.cost_<action>); unknown actions are an error.';

CREATE FUNCTION get_current_energy() RETURNS double precision
    LANGUAGE sql STABLE AS $$ SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1 $$;
COMMENT ON FUNCTION get_current_energy() IS 'The energy available now.';

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
    after := greatest(dionysus_internal.heartbeat_setting('min_energy'),
                      least(before + delta, dionysus_internal.heartbeat_setting('max_energy')));
    UPDATE dionysus.heartbeat_state SET current_energy = after, updated_at = now() WHERE id = 1;
    INSERT INTO dionysus.energy_ledger (heartbeat_id, action, delta, energy_before, energy_after, reason)
    VALUES (update_energy.heartbeat_id, update_energy.action, after - before, before, after, update_energy.reason);
    RETURN after;
END $$;
COMMENT ON FUNCTION update_energy(double precision, uuid, text, text) IS
    'Adds delta to the energy, clamped to [min_energy, max_energy] under the state row''s lock; writes the ledger. Returns the new energy.';
