-- Episodes that end with what they meant (issue #13 §7): who took part, how it went
-- (outcome), how unexpected it was (surprise) and what it taught (lessons); and, after one
-- that went wrong, the censors it suggests.
--
-- When an episode closes (the gap rule or close_episode), the language pass queues its
-- summarize_episode item (012); the driver asks the fast model once for the summary and these,
-- and complete_work stores them (result.episode). Participants are not the model's word: they
-- are the people whose turns the episode holds.
--
-- Censor candidates are the system proposing something about itself, so they take effect only
-- with the person's word: a failed episode with one participant proposes up to three censors
-- for that person (status 'proposed', severity warn, learned from the episode); proposed
-- censors match nothing until the person keeps one (accept_censor, /censor keep N in chat) or
-- drops it (retire_censor, /censor drop N). A kept one is a warning like any other (three
-- activations in a row raise it to a block). An episode of several people proposes none: one
-- person's failure is not another's rule, and its words are theirs together; nor does an
-- imported history (its failures were another assistant's). Nothing is proposed twice (not
-- what holds, was proposed, or was dropped or lifted), and at most ten wait at once. Facts reach
-- memory through learn after every turn (extract_message, with learn's 0.95 confirm rule);
-- the episode does not learn them again, which would count the same words as a second
-- confirmation.
--
-- Lock order: the episode's row, then censors' rows (8).

-- The people whose turns an episode holds (its participants).
CREATE FUNCTION dionysus_internal.episode_participants(episode_id uuid) RETURNS text[]
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT m.person ORDER BY m.person), '{}')
      FROM dionysus.episode_memories em
      JOIN dionysus.messages m ON m.memory_id = em.memory_id
     WHERE em.episode_id = episode_participants.episode_id AND NOT m.is_bot AND m.person IS NOT NULL
$$;
COMMENT ON FUNCTION dionysus_internal.episode_participants(uuid) IS 'The people whose turns an episode holds.';

-- Proposes censors to one person (SECURITY DEFINER: the driver's role writes no censors; this
-- writes only proposals, for the person its callers name from the record, never the model's
-- word): at most three, each {trigger, reason}; nothing that holds for them, was proposed, or
-- was dropped or lifted; at most ten waiting for their word. `arg` names the argument in errors;
-- `origin` is what it was learned from (an episode, 024; a heartbeat, 028). Returns the ids.
CREATE FUNCTION dionysus_internal.propose_censor_candidates(person text, candidates jsonb, arg text, origin text,
                                                            learned_from_id uuid, context jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    item jsonb;
    sev dionysus.censor_severity;
    id uuid;
    made jsonb := '[]';
BEGIN
    IF jsonb_typeof(candidates) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'dionysus: argument "%": must be an array', arg USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF person IS NULL OR origin IS NULL OR origin NOT IN ('episode', 'heartbeat') THEN
        RAISE EXCEPTION 'dionysus: argument "%": proposed to no one, or learned from %', arg, quote_nullable(origin)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(candidates) LIMIT 3 LOOP
        IF jsonb_typeof(item) <> 'object' OR jsonb_typeof(item -> 'trigger') IS DISTINCT FROM 'string'
           OR jsonb_typeof(item -> 'reason') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'dionysus: argument "%": each must be {trigger, reason} strings', arg
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        sev := dionysus_internal.censor_checked(item ->> 'trigger', item ->> 'reason', 'warn', NULL, NULL, NULL, NULL, false);
        -- Nothing twice: not what holds for them, was proposed, or they dropped or lifted; and
        -- at most ten waiting for their word.
        CONTINUE WHEN EXISTS (SELECT 1 FROM dionysus.censors c
                               WHERE c.person = propose_censor_candidates.person AND lower(btrim(c.trigger)) = lower(btrim(item ->> 'trigger')))
                   OR (SELECT count(*) FROM dionysus.censors c WHERE c.person = propose_censor_candidates.person AND c.status = 'proposed') >= 10;
        INSERT INTO dionysus.censors (person, trigger, embedding, model_key, reason, severity, origin, learned_from_kind, learned_from_id, status)
        VALUES (propose_censor_candidates.person, btrim(item ->> 'trigger'), dionysus.embed(btrim(item ->> 'trigger')),
                dionysus_internal.store_model_key(), btrim(item ->> 'reason'), sev, origin, origin, learned_from_id, 'proposed')
        RETURNING censors.id INTO id;
        INSERT INTO dionysus.censor_events (censor_id, event, severity, context) VALUES (id, 'proposed', sev, context);
        made := made || to_jsonb(id);
    END LOOP;
    RETURN made;
END $$;
COMMENT ON FUNCTION dionysus_internal.propose_censor_candidates(text, jsonb, text, text, uuid, jsonb) IS
    'SECURITY DEFINER, not the driver''s: proposes up to three {trigger, reason} censors to one person (status proposed, severity warn, learned from an episode or a heartbeat), none that holds, was proposed, or was dropped or lifted for them, at most ten waiting; returns their ids.';

-- Proposes a failed episode's censors to its one participant. Returns the proposed censors' ids.
CREATE FUNCTION dionysus_internal.propose_censors(episode_id uuid, candidates jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    e dionysus.episodes;
    who text[];
BEGIN
    IF episode_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "episode_id" must not be null' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(candidates) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'dionysus: argument "result.episode.censor_candidates": must be an array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO e FROM dionysus.episodes x WHERE x.id = propose_censors.episode_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "episode_id": no episode with id %', episode_id USING ERRCODE = 'no_data_found';
    END IF;
    who := dionysus_internal.episode_participants(e.id);
    -- Only a failure here, of one person: an imported history's failures were someone else's
    -- (and its group chats are all the importer's turns).
    IF e.outcome IS DISTINCT FROM 'failure' OR cardinality(who) <> 1 OR e.source LIKE 'imported:%'
       OR EXISTS (SELECT 1 FROM dionysus.episode_memories em JOIN dionysus.messages m ON m.memory_id = em.memory_id
                   WHERE em.episode_id = e.id AND m.import_id IS NOT NULL) THEN
        RETURN '[]'::jsonb;
    END IF;
    RETURN dionysus_internal.propose_censor_candidates(who[1], candidates, 'result.episode.censor_candidates', 'episode', e.id,
        jsonb_build_object('learned_from', 'episode', 'learned_from_id', e.id, 'outcome', e.outcome));
END $$;
COMMENT ON FUNCTION dionysus_internal.propose_censors(uuid, jsonb) IS
    'A failed episode of one person (not an imported history''s) proposes up to three of its censor candidates to that person (propose_censor_candidates); returns their ids.';

-- complete_work's result.episode for a summarize_episode item: {outcome, surprise, lessons,
-- censor_candidates}. Writes the episode's participants (its people, not the model's word),
-- outcome, surprise and lessons; a failure proposes its censors.
CREATE FUNCTION dionysus_internal.store_episode_outcome(w dionysus.work_queue, v jsonb) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    eid uuid := (w.params ->> 'episode_id')::uuid;
    new_lessons text[];
    new_surprise double precision;
    proposed jsonb := '[]';
BEGIN
    IF w.action <> 'summarize_episode' OR eid IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "result.episode": only a summarize_episode item carries one' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(v) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: argument "result.episode": must be an object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (v ->> 'outcome') IS NULL OR (v ->> 'outcome') NOT IN ('success', 'failure', 'mixed', 'neutral') THEN
        RAISE EXCEPTION 'dionysus: argument "result.episode.outcome": success, failure, mixed or neutral' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    new_surprise := dionysus_internal.person_number(v -> 'surprise', 'result.episode.surprise', 0, 1);
    new_lessons := dionysus_internal.person_strings(v -> 'lessons', 'result.episode.lessons', 300);
    IF cardinality(new_lessons) > 5 THEN
        RAISE EXCEPTION 'dionysus: argument "result.episode.lessons": at most 5' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v ? 'censor_candidates' AND jsonb_typeof(v -> 'censor_candidates') <> 'array' THEN
        RAISE EXCEPTION 'dionysus: argument "result.episode.censor_candidates": must be an array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.episodes x
       SET participants = dionysus_internal.episode_participants(x.id), outcome = v ->> 'outcome',
           surprise = new_surprise, lessons = new_lessons
     WHERE x.id = eid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "work_id": its episode % no longer exists', eid USING ERRCODE = 'no_data_found';
    END IF;
    IF v ->> 'outcome' = 'failure' THEN
        proposed := dionysus_internal.propose_censors(eid, coalesce(v -> 'censor_candidates', '[]'));
    END IF;
    -- The procedures it activated count its outcome (026).
    RETURN jsonb_build_object('episode_id', eid, 'outcome', v ->> 'outcome', 'censors_proposed', proposed,
                              'procedures_scored', dionysus_internal.score_procedures(eid, v ->> 'outcome'));
END $$;
COMMENT ON FUNCTION dionysus_internal.store_episode_outcome(dionysus.work_queue, jsonb) IS
    'complete_work''s result.episode of a summarize_episode item: participants (the episode''s people), outcome, surprise, lessons; a failure proposes its censors.';

-- The person keeps a censor proposed to them: it holds from now on, as a warn (a false
-- positive lowers and retires it as any other). Only their own (the same 42501 otherwise).
CREATE FUNCTION accept_censor(censor_id uuid, person text)
    RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c dionysus.censors;
BEGIN
    IF person IS NULL OR length(btrim(person)) = 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    c := dionysus_internal.censor_of(censor_id, person);
    IF c.status <> 'proposed' THEN
        RETURN false;
    END IF;
    -- The same words already hold for them: the proposal is done with.
    IF EXISTS (SELECT 1 FROM dionysus.censors x WHERE x.person = c.person AND x.status = 'active'
                AND lower(btrim(x.trigger)) = lower(btrim(c.trigger))) THEN
        UPDATE dionysus.censors x SET status = 'retired', updated_at = dionysus.clock_now() WHERE x.id = c.id;
        INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
        VALUES (c.id, 'retired', c.severity, jsonb_build_object('by', person, 'why', 'the same words already hold'));
        RETURN false;
    END IF;
    IF (SELECT count(*) FROM dionysus.censors x WHERE x.person = c.person AND x.status = 'active')
       >= (SELECT max_per_person FROM dionysus.censor_config WHERE censor_config.id = 1) THEN
        RAISE EXCEPTION 'dionysus: % has % active censors, the most censor_config.max_per_person allows', person,
            (SELECT max_per_person FROM dionysus.censor_config WHERE censor_config.id = 1) USING ERRCODE = 'program_limit_exceeded';
    END IF;
    UPDATE dionysus.censors x SET status = 'active', updated_at = dionysus.clock_now() WHERE x.id = c.id;
    INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
    VALUES (c.id, 'accepted', c.severity, jsonb_build_object('by', person));
    RETURN true;
END $$;
COMMENT ON FUNCTION accept_censor(uuid, text) IS 'The person keeps a censor proposed to them: it holds from now on as a warn. Only their own (42501); false when it was not waiting.';
REVOKE EXECUTE ON FUNCTION accept_censor(uuid, text) FROM PUBLIC;

-- The censors proposed to a person and waiting for their word (/censors shows them after the
-- ones in force), with the episode each was learned from (NULL for a heartbeat's, 028).
CREATE FUNCTION proposed_censors(person text)
    RETURNS TABLE (censor_id uuid, trigger text, reason text, episode_id uuid, episode_summary text, proposed_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT c.id, c.trigger, c.reason, e.id, e.summary, c.created_at
      FROM dionysus.censors c
      LEFT JOIN dionysus.episodes e ON c.learned_from_kind = 'episode' AND e.id = c.learned_from_id
     WHERE c.status = 'proposed' AND c.person = proposed_censors.person
     ORDER BY c.created_at, c.id
$$;
COMMENT ON FUNCTION proposed_censors(text) IS 'The censors proposed to a person and waiting for their word, with the episode each was learned from.';

-- The episode summary asks for how it went and what it taught: summarize_episode's version 2 (012).
