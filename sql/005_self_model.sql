-- The self-model: identity aspects and worldview beliefs, read by orient and written by
-- reflect (through complete_work) or by the person.
--
-- Conventions: every rejection raises an SQLSTATE with a message naming the argument; every
-- function is one statement in the caller's transaction, so nothing is ever half-written.
-- Helpers nobody calls directly live in dionysus_internal (see 001_schema.sql).

-- ---------------------------------------------------------------------------------------
-- Identity and worldview (read by orient, written by reflect through complete_work)
-- ---------------------------------------------------------------------------------------
-- Shared checks of the self-model setters: a non-empty statement and a confidence in [0, 1].
CREATE FUNCTION dionysus_internal.check_self_model(arg text, statement text, confidence double precision) RETURNS void
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF statement IS NULL OR btrim(statement) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', arg USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF confidence IS NULL OR confidence = 'NaN'::float8 OR confidence < 0 OR confidence > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "confidence": % is outside [0, 1]', confidence USING ERRCODE = 'invalid_parameter_value';
    END IF;
END $$;
COMMENT ON FUNCTION dionysus_internal.check_self_model(text, text, double precision) IS
    'Internal: the shared checks of set_identity_aspect and set_worldview_belief (a statement, a confidence in [0, 1]).';

CREATE FUNCTION set_identity_aspect(aspect text, confidence double precision DEFAULT 0.5) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE r uuid;
BEGIN
    PERFORM dionysus_internal.check_self_model('aspect', aspect, confidence);
    INSERT INTO dionysus.identity_aspects (aspect, confidence) VALUES (btrim(aspect), confidence)
    ON CONFLICT (aspect_key) DO UPDATE SET confidence = EXCLUDED.confidence, updated_at = now()
    RETURNING id INTO r;
    RETURN r;
END $$;
COMMENT ON FUNCTION set_identity_aspect(text, double precision) IS
    'Adds an identity aspect (who the agent takes itself to be), or updates its confidence; returns its id (reflect writes these).';

CREATE FUNCTION set_worldview_belief(belief text, confidence double precision DEFAULT 0.5) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE r uuid;
BEGIN
    PERFORM dionysus_internal.check_self_model('belief', belief, confidence);
    INSERT INTO dionysus.worldview_beliefs (belief, confidence) VALUES (btrim(belief), confidence)
    ON CONFLICT (belief_key) DO UPDATE SET confidence = EXCLUDED.confidence, updated_at = now()
    RETURNING id INTO r;
    RETURN r;
END $$;
COMMENT ON FUNCTION set_worldview_belief(text, double precision) IS
    'Adds a worldview belief, or updates its confidence; returns its id (reflect writes these).';

-- Who the agent is and what it believes, as a reflection shows them: each aspect or belief
-- with its confidence ("curious (0.80)").
CREATE FUNCTION self_model() RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'identity', (SELECT coalesce(jsonb_agg(aspect || ' (' || round(confidence::numeric, 2) || ')'), '[]') FROM dionysus.identity_aspects),
        'worldview', (SELECT coalesce(jsonb_agg(belief || ' (' || round(confidence::numeric, 2) || ')'), '[]') FROM dionysus.worldview_beliefs))
$$;
COMMENT ON FUNCTION self_model() IS 'The agent''s identity aspects and worldview beliefs, each with its confidence: {identity: ["aspect (0.80)"], worldview: ["belief (0.60)"]}.';
