-- The driver's work queue: actions that need language or the network. Claimed with SKIP
-- LOCKED and a lease token, settled exactly once by the holder of the lease, refunded when
-- an action fails for good. What a finished item's result writes is in complete_work().
--
-- Conventions: every rejection raises an SQLSTATE with a message naming the argument; every
-- function is one statement in the caller's transaction, so nothing is ever half-written.
-- Helpers nobody calls directly live in dionysus_internal (see 001_schema.sql).

-- ---------------------------------------------------------------------------------------
-- The work queue: actions the driver performs (LLM, network). Claimed with SKIP LOCKED,
-- completed or failed exactly once; an expired lease hands the item back.
-- ---------------------------------------------------------------------------------------
-- Marks pending items claimed by a worker, with a lease: the one place a claim is made.
CREATE FUNCTION dionysus_internal.claim_rows(worker text, ids uuid[]) RETURNS SETOF work_queue
    LANGUAGE sql AS $$
    UPDATE dionysus.work_queue w SET status = 'claimed', attempts = w.attempts + 1, claimed_by = claim_rows.worker,
           claimed_at = now(), lease_token = gen_random_uuid(),
           lease_until = now() + make_interval(mins => dionysus_internal.heartbeat_setting('work_lease_minutes')::int)
     WHERE w.id = ANY(claim_rows.ids) AND w.status = 'pending'
    RETURNING w.*
$$;
COMMENT ON FUNCTION dionysus_internal.claim_rows(text, uuid[]) IS
    'Marks the given pending items claimed by a worker, with a lease and a new lease_token (used by claim_work and claim_work_item).';

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
    PERFORM dionysus_internal.expire_work_leases();
    RETURN QUERY SELECT * FROM dionysus_internal.claim_rows(worker, ARRAY(
        SELECT q.id FROM dionysus.work_queue q
         WHERE q.status = 'pending' AND q.available_at <= now()
           AND (actions IS NULL OR q.action = ANY(actions))
           AND (claim_work.heartbeat_id IS NULL OR q.heartbeat_id = claim_work.heartbeat_id)
         ORDER BY q.priority DESC, q.created_at, q.id LIMIT max_items FOR UPDATE SKIP LOCKED));
END $$;
COMMENT ON FUNCTION claim_work(text, text[], integer, uuid) IS
    'Claims up to max_items available work items (optionally of some actions, or of one heartbeat) for a worker, with a lease; '
    'expired leases return to the queue.';

-- Leases that ran out: back to pending, or failed once the attempts are used up (and then
-- the energy spent on them is refunded).
CREATE FUNCTION dionysus_internal.expire_work_leases() RETURNS integer
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
            PERFORM dionysus_internal.refund_work(w.id);
        END IF;
    END LOOP;
    RETURN n;
END $$;
COMMENT ON FUNCTION dionysus_internal.expire_work_leases() IS
    'Returns items whose lease ran out to the queue (or fails them when their attempts are spent, refunding their energy).';

-- Gives back the energy a heartbeat spent on an action that failed for good (the
-- decision spends it; what never happened is refunded). Once: the cost is zeroed, the
-- ledger keeps the refund. The caller holds the state row (lock order).
CREATE FUNCTION dionysus_internal.refund_work(work_id uuid) RETURNS double precision
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
COMMENT ON FUNCTION dionysus_internal.refund_work(uuid) IS 'Gives back, once, the energy a heartbeat spent on an action that failed for good.';

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
    RETURN QUERY SELECT * FROM dionysus_internal.claim_rows(worker, ARRAY(
        SELECT q.id FROM dionysus.work_queue q WHERE q.id = claim_work_item.work_id AND q.status = 'pending'
           FOR UPDATE SKIP LOCKED));
END $$;
COMMENT ON FUNCTION claim_work_item(uuid, text) IS
    'Claims one known pending item whatever its available_at (the conversation extracting its own turn); no row when it is not pending.';

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
    w := dionysus_internal.require_claimed_work(work_id, lease);
    IF w.status <> 'claimed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "work_id": work item % is %, not claimed', work_id, w.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.work_queue SET status = 'pending', attempts = greatest(attempts - 1, 0), lease_until = NULL,
           last_error = coalesce(reason, last_error), available_at = now() + make_interval(secs => delay_seconds)
     WHERE id = w.id;
END $$;
COMMENT ON FUNCTION release_work(uuid, text, integer, uuid) IS
    'Hands a claimed item back without spending an attempt (the driver could not work on it: LLM down, shutting down); '
    'claimable again after delay_seconds. With lease (the claim''s lease_token), only its holder may.';

-- The item, locked. With a lease (the token claim_work gave), the caller must still be its
-- holder: an item that was claimed again since is someone else's, and 55000 says so. A holder
-- whose lease lapsed while nobody else took the item still holds it.
CREATE FUNCTION dionysus_internal.require_claimed_work(work_id uuid, lease uuid DEFAULT NULL) RETURNS dionysus.work_queue
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
COMMENT ON FUNCTION dionysus_internal.require_claimed_work(uuid, uuid) IS
    'The work item, locked; with a lease, the caller must still hold it (an item claimed again since is someone else''s: 55000).';

-- ---------------------------------------------------------------------------------------
-- The work actions (#34: each action dispatched in one place). What complete_work decides by
-- an item's action is this table's data; the driver's actions.rs performs them (its match is
-- the driver's one switch). Every action's result may carry the common keys; only the
-- actions named here carry the others.
-- ---------------------------------------------------------------------------------------
CREATE VIEW work_actions AS
SELECT a.action,
       ARRAY['memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts', 'message', 'summary',
             'basis', 'person', 'maintenance', 'levels', 'episode', 'censor_candidates'] || a.carries AS result_keys,
       a.provenance, a.audience, a.person_turn, a.staged
  FROM (VALUES
    -- action             its own result keys                                                 provenance   audience  person_turn staged
    ('extract_message',   ARRAY['people', 'relations', 'objectives', 'focus', 'threads'],     'heartbeat', NULL,     true,       false),
    ('reindex_message',   ARRAY['people', 'relations', 'objectives', 'focus', 'threads'],     'heartbeat', NULL,     false,      true),
    ('summarize_episode', ARRAY['episode_summary'],                                           'heartbeat', NULL,     false,      false),
    ('condense_memory',   ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('heartbeat_censors', ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('extract_concepts',  ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('reflect',           ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('maintain',          ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('brainstorm_goals',  ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('inquire_shallow',   ARRAY[]::text[],                                                    'web',       NULL,     false,      false),
    ('inquire_deep',      ARRAY[]::text[],                                                    'web',       NULL,     false,      false),
    ('synthesize',        ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('reach_out_user',    ARRAY[]::text[],                                                    'heartbeat', 'user',   false,      false),
    ('reach_out_public',  ARRAY[]::text[],                                                    'heartbeat', 'public', false,      false),
    ('dream',             ARRAY['dream'],                                                     'heartbeat', NULL,     false,      false)
  ) AS a (action, carries, provenance, audience, person_turn, staged);
COMMENT ON VIEW work_actions IS
    'What complete_work does by a work item''s action: the result keys it may carry (the common ones and its own), its provenance '
    '(web: what it brings is stored as low-trust web content, and never alone changes identity or beliefs), its audience (user or '
    'public: a reach-out, its message goes to the outbox; public ones wait for approval), person_turn (the extraction of a person''s '
    'turn: their people, objectives, focus and threads, and an imported history''s rules) and staged (a re-index''s: applied at the swap).';

-- Applies what the driver produced, then marks the item done. Completing a done item again
-- changes nothing and returns the first summary: a retried call never repeats its effects.
-- result keys (all optional): memories [{content, type, importance, valence}], facts
-- [{content, subject, category, confidence}], triples [{subject, predicate, object,
-- confidence}], goals [{title, description, source, priority}], goal_progress [{goal_id,
-- note}], identity [{aspect, confidence}], worldview [{belief, confidence}], concepts
-- [{memory_id, name, strength}], episode_summary (text, for summarize_episode), message
-- (text: the reach-out to deliver), summary (text: what was done, for the narrative), basis
-- (ids of the memories the model was shown), person (whom a reach-out is for), objectives
-- [{description, saliency, status}] (the person's, from their turn's extraction), dream
-- ({proposals, note}, for a dream item: recorded as pending proposals), levels ({summary,
-- micro}, for a condense_memory item: a fading memory's shorter forms, sql/021_decay.sql),
-- people [{name, aliases, same_as, relation, feeling, traits, topics, confidence}] and
-- relations [{a, b, kind, sentiment, confidence, source}] (the people in the person's life
-- their turn speaks of, from its extraction: sql/023_people.sql), episode ({outcome,
-- surprise, lessons, censor_candidates}, for a summarize_episode item: sql/024_episodes.sql),
-- censor_candidates [{trigger, reason}] (for a heartbeat_censors item: sql/028_heartbeat_lessons.sql).
-- Facts and triples from a conversation turn (params.memory_id) keep it as provenance. A
-- re-index's 'reindex_message' item applies nothing: its facts, triples and objectives wait
-- for the swap (sql/020_reindex.sql).
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
    history_at timestamptz;
    censored jsonb;
    act dionysus.work_actions;
    carriers text[];
    grounded jsonb;
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
        IF NOT EXISTS (SELECT 1 FROM dionysus.work_actions a WHERE key = ANY(a.result_keys)) THEN
            RAISE EXCEPTION 'dionysus: argument "result": unknown key "%"', key USING ERRCODE = 'invalid_text_representation';
        END IF;
        IF key IN ('memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts', 'basis', 'objectives',
                   'people', 'relations')
           AND jsonb_typeof(result -> key) <> 'array' THEN
            RAISE EXCEPTION 'dionysus: argument "result.%": must be an array', key USING ERRCODE = 'invalid_text_representation';
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b
                WHERE jsonb_typeof(b) <> 'string'
                   OR (b #>> '{}') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN
        RAISE EXCEPTION 'dionysus: argument "result.basis": must be an array of memory ids' USING ERRCODE = 'invalid_text_representation';
    END IF;
    -- What this action does (work_actions); an action it does not name carries the common keys only.
    SELECT * INTO act FROM dionysus.work_actions a WHERE a.action = w.action;
    IF NOT FOUND THEN
        act := ROW(w.action, (SELECT a.result_keys FROM dionysus.work_actions a WHERE a.action = 'reflect'), 'heartbeat', NULL, false, false);
    END IF;
    -- A turn read again by a re-index (020): staged for the swap, nothing applied now.
    IF act.staged THEN
        made := dionysus_internal.reindex_stage(w, result);
        UPDATE dionysus.work_queue SET status = 'done', completed_at = now(), lease_until = NULL,
               result = complete_work.result || jsonb_build_object('applied', made)
         WHERE id = w.id;
        RETURN made;
    END IF;
    -- A key another action carries (present and not an empty list) is refused, naming who carries it.
    FOR key IN SELECT k FROM jsonb_object_keys(result) k
                WHERE k <> ALL(act.result_keys) AND result -> k IS DISTINCT FROM '[]'::jsonb LOOP
        carriers := ARRAY(SELECT a.action FROM dionysus.work_actions a WHERE key = ANY(a.result_keys) ORDER BY a.action);
        RAISE EXCEPTION 'dionysus: argument "result.%": a % item does not carry it; only % carry %', key, w.action,
            array_to_string(carriers, ', '),
            (SELECT string_agg('result.' || k, ', ' ORDER BY k) FROM (SELECT DISTINCT unnest(a.result_keys) k FROM dionysus.work_actions a) ks
              WHERE ARRAY(SELECT a.action FROM dionysus.work_actions a WHERE ks.k = ANY(a.result_keys) ORDER BY a.action) = carriers)
            USING ERRCODE = 'invalid_parameter_value';
    END LOOP;
    IF act.person_turn AND w.params ->> 'person' IS NULL
       AND EXISTS (SELECT 1 FROM jsonb_object_keys(result) k WHERE k IN ('people', 'relations', 'objectives', 'focus', 'threads')
                                                              AND result -> k IS DISTINCT FROM '[]'::jsonb) THEN
        RAISE EXCEPTION 'dionysus: argument "result.people": only the extraction of a person''s turn carries result.people, result.relations, result.objectives, result.focus and result.threads (params.person is missing)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    privacy := CASE WHEN w.params ->> 'person' IS NOT NULL THEN ARRAY[w.params ->> 'person'] END;
    privacy := dionysus_internal.privacy_union(privacy, (SELECT h.private_to FROM dionysus.heartbeat_log h WHERE h.id = w.heartbeat_id));
    privacy := dionysus_internal.privacy_union(privacy, dionysus_internal.memory_privacy(
                   ARRAY(SELECT (b #>> '{}')::uuid FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b)));
    from_web := act.provenance = 'web';
    -- What the model wrote and the check refuses is not stored (032_grounding.sql); the refusals are recorded.
    grounded := dionysus_internal.ground_result(w, result, privacy);
    result := grounded -> 'result';
    refused := refused || (grounded -> 'refused');
    -- A turn of an imported history (018): what it asked was asked of someone else, not of us (no
    -- goals), and what it aimed at more than 30 days ago is the person's past: it neither adds
    -- objectives nor moves the ones they have now.
    IF act.person_turn THEN
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
    -- The people in the person's life their turn speaks of (023_people.sql): theirs alone.
    IF jsonb_array_length(coalesce(result -> 'people', '[]')) + jsonb_array_length(coalesce(result -> 'relations', '[]')) > 0 THEN
        made := made || dionysus_internal.store_people(w.params ->> 'person', coalesce(result -> 'people', '[]'),
                                                       coalesce(result -> 'relations', '[]'), (w.params ->> 'message_id')::uuid);
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'concepts', '[]')) LOOP
        PERFORM dionysus.link_concept(coalesce((item ->> 'memory_id')::uuid, (w.params ->> 'memory_id')::uuid),
                                      item ->> 'name', coalesce((item ->> 'strength')::float8, 1.0));
        made := made || jsonb_build_object('concepts', coalesce((made ->> 'concepts')::int, 0) + 1);
    END LOOP;
    IF result ? 'episode_summary' THEN
        IF (w.params ->> 'episode_id') IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.episode_summary": the item names no episode (params.episode_id)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(btrim(result ->> 'episode_summary'), '') = '' THEN
            RAISE EXCEPTION 'dionysus: argument "result.episode_summary": must not be empty' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        UPDATE dionysus.episodes SET summary = result ->> 'episode_summary',
               summary_embedding = dionysus.embed(result ->> 'episode_summary'),
               participants = dionysus_internal.episode_participants(id)
         WHERE id = (w.params ->> 'episode_id')::uuid;
        made := made || jsonb_build_object('episode_id', w.params ->> 'episode_id');
    END IF;
    -- How it went, what it taught, and the censors a failure proposes (024_episodes.sql).
    IF result ? 'episode' THEN
        made := made || jsonb_build_object('episode', dionysus_internal.store_episode_outcome(w, result -> 'episode'));
    END IF;
    -- A fading memory's summary and micro line (021_decay.sql).
    IF result ? 'levels' THEN
        made := made || jsonb_build_object('levels', dionysus_internal.store_levels(w, result -> 'levels'));
    END IF;
    -- What a heartbeat the person found unwelcome proposes not to do again (028_heartbeat_lessons.sql).
    IF result ? 'censor_candidates' THEN
        made := made || jsonb_build_object('censors_proposed', dionysus_internal.propose_heartbeat_censors(w, result -> 'censor_candidates'));
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
        FOR item IN SELECT * FROM jsonb_array_elements(result -> 'objectives') LOOP
            new_id := dionysus_internal.note_objective(w.params ->> 'person', item ->> 'description',
                                                       (item ->> 'saliency')::float8, item ->> 'status', (w.params ->> 'message_id')::uuid);
            IF new_id IS NOT NULL THEN
                made := made || jsonb_build_object('objectives', coalesce(made -> 'objectives', '[]'::jsonb) || to_jsonb(new_id));
            END IF;
        END LOOP;
    END IF;
    IF result ? 'dream' THEN
        IF (w.params ->> 'dream_id') IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.dream": the item names no dream (params.dream_id)' USING ERRCODE = 'invalid_parameter_value';
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
    IF act.audience IS NOT NULL THEN
        IF coalesce(btrim(result ->> 'message'), '') = '' THEN
            RAISE EXCEPTION 'dionysus: argument "result.message": a reach-out needs the message to send'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF dionysus_internal.web_only_basis(result ->> 'message') THEN
            RAISE EXCEPTION 'dionysus: reach-out refused: web content is its only basis' USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF act.audience = 'user' THEN
            -- Nobody has talked yet: the message goes to the home channel, and may hold nothing private.
            target := dionysus.reach_out_target(coalesce(result ->> 'person', w.params ->> 'person'));
            IF NOT dionysus_internal.visible_to(privacy, target ->> 'person') THEN
                RAISE EXCEPTION 'dionysus: reach-out refused: it drew on what someone other than % said in private', target ->> 'person'
                    USING ERRCODE = 'insufficient_privilege';
            END IF;
        END IF;
        -- Censors (022) read the words before the outbox does: a blocked message is not sent,
        -- and the item is done (its activation stays counted; a retry would only repeat it).
        censored := dionysus.censor_gate('reach_out', result ->> 'message', target ->> 'person', jsonb_build_object('work_id', w.id));
        IF censored ->> 'verdict' = 'block' THEN
            refused := refused || jsonb_build_object('message', 'censored', 'reasons', censored -> 'reasons', 'censors', censored -> 'censors');
            -- What the heartbeat's narrative is told of this work (its summary): nothing was sent.
            -- Not why: a person's own reasons are theirs, and a narrative may be read by others.
            result := result || jsonb_build_object('summary', 'not sent: a censor held it back');
        ELSE
            IF censored ->> 'verdict' = 'warn' THEN
                made := made || jsonb_build_object('censor_warnings', censored -> 'censors');
            END IF;
            INSERT INTO dionysus.outbox (work_id, audience, content, requires_approval, person, platform)
            VALUES (w.id, act.audience, result ->> 'message', act.audience = 'public', target ->> 'person', target ->> 'platform')
            RETURNING id INTO msg_id;
            made := made || jsonb_build_object('outbox_id', msg_id);
            IF act.audience = 'user' THEN
                PERFORM pg_notify('dionysus_outbox', msg_id::text);
            END IF;
        END IF;
    END IF;
    -- The session's focus and the threads the turn opened or closed (025), last: the person's
    -- working-memory lock comes after every other lock (002's order).
    IF result ? 'focus' OR result ? 'threads' THEN
        made := made || jsonb_build_object('working_memory',
                    dionysus_internal.store_working_focus(w.params ->> 'person', (w.params ->> 'message_id')::uuid,
                                                          result -> 'focus', result -> 'threads'));
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
COMMENT ON FUNCTION complete_work(uuid, jsonb, uuid) IS
    'Applies a claimed work item''s result (memories, facts, triples, goals, goal_progress, identity, worldview, concepts, '
    'episode_summary, message, summary; basis: the memory ids the model was shown; person: whom a reach-out is for; objectives: the person''s, '
    'from their turn''s extraction; people and relations: the people in their life the turn speaks of; focus and threads: their session''s focus and the threads the turn opened or closed; dream: a dream''s proposals, stored pending) and marks it done, '
    'in one transaction. What it writes is as private as the item''s person, its heartbeat''s context and the basis; what an inquiry '
    'brought is stored as web content; a reach-out that drew on someone else''s private words, or only on the web, is refused (42501). '
    'Completing again returns the first summary and repeats nothing. With lease (the claim''s lease_token), only its holder may: '
    'a driver whose lease lapsed and whose item was claimed again gets 55000.';

-- Failing for good refunds the energy the heartbeat spent on it.
CREATE FUNCTION fail_work(work_id uuid, error text, retry boolean DEFAULT true, lease uuid DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE
    w dionysus.work_queue;
    next_status dionysus.work_status;
BEGIN
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE; -- lock order: state before rows (refund)
    w := dionysus_internal.require_claimed_work(work_id, lease);
    IF w.status <> 'claimed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "work_id": work item % is %, not claimed', work_id, w.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    next_status := CASE WHEN retry AND w.attempts < w.max_attempts THEN 'pending' ELSE 'failed' END;
    -- Exponential back-off: work_retry_seconds × 2^(attempts − 1).
    UPDATE dionysus.work_queue SET status = next_status, last_error = error, lease_until = NULL,
           completed_at = CASE WHEN next_status = 'failed' THEN now() END,
           available_at = now() + make_interval(secs => dionysus_internal.heartbeat_setting('work_retry_seconds')
                                                        * power(2, greatest(w.attempts - 1, 0)))
     WHERE id = w.id;
    IF next_status = 'pending' THEN
        PERFORM pg_notify('dionysus_work', w.id::text);
    ELSE
        PERFORM dionysus_internal.refund_work(w.id);
    END IF;
    RETURN next_status::text;
END $$;
COMMENT ON FUNCTION fail_work(uuid, text, boolean, uuid) IS
    'Fails a claimed work item: back to pending after an exponential back-off while attempts remain, else failed for good and '
    'the energy its heartbeat spent on it refunded. With lease, only its holder may.';
