-- A person can leave: forget_person and export_person (issue #33 §2).
--
-- Several people share one companion. forget_person(person) erases, in one transaction, what
-- that person said and everything derived from it; export_person(person) shows all of it first
-- (data portability, and what forget_person will remove).
--
-- Whose words a row holds is what the store already records:
--   their turns and the companion's turns to them    messages.person
--   what was made from their words                   private_to (memories, triples, goals,
--                                                    heartbeat_log, mirror_items; 013), and the
--                                                    provenance 'conversation:<their turn>'
--   what the companion keeps about them              a person / of_person column (people and
--                                                    their rhythm and signals, known persons,
--                                                    north stars, objectives, feedback, censors,
--                                                    rules, evaluations, learning, threads,
--                                                    working memory, procedures, dreams, imports)
--   what points at any of those                      by id, in jsonb (work items, mirror cards,
--                                                    memory changes, censor events, events)
-- What mixed several people is redacted or re-derived, never kept with their words in it:
--   - a memory, triple or goal private to them and someone else (a heartbeat that saw both)
--     cannot be split by person: it goes; what the others said is in their own turns.
--   - an episode that holds their turns and another's: their turns leave it, and its summary,
--     lessons, outcome and vector are cleared and its summary queued again (enqueue_language_work
--     re-summarises what remains); an episode with nothing left goes.
--   - a heartbeat whose context held their words keeps its number and energy, not its words
--     (context, decision, narrative); one still running is closed, so its late commit is refused.
--   - what only pointed at rows that went (entities and concepts no one else names, lexicon
--     words no memory has any more, staged re-index vectors and tombstones of their turns) goes.
--   - the embedding cache is keyed by a hash of each text embedded, their questions (recall,
--     MCP) among them, and which were theirs is not recorded: it is emptied (it refills).
-- Not theirs and kept: what other people said (their own turns may quote or answer them), the
-- companion's own self-model (identity, worldview), the shared templates and archetypes (a dream
-- changes only its person's own versions, which go with them).
--
-- Who may call it: the owner, and the driver's role on the person's own confirmed request
-- (`/forgetme`, then `/forgetme confirm`): SECURITY DEFINER with a pinned search_path, so the
-- driver's role needs no DELETE on the tables; not executable by PUBLIC.
--
-- Lock order (002): their imports' rows (0), the channels they talk in (1), the heartbeat state
-- (2), the agent state (3), the goals lock (4), their heartbeats, work items, outbox rows and
-- contact evaluations (5), their people row and north-star lock (6), the learn lock, the episode
-- locks of the episodes they are in, their people and objectives locks (7), rows (8), their
-- working-memory lock (9); the lexicon lock last (refresh_lexicon holds nothing else).

-- Whether anything of a person is stored (forget_person and export_person refuse a stranger).
CREATE FUNCTION dionysus_internal.person_is_known(who text) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM dionysus.people p WHERE p.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.messages m WHERE m.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.memories m WHERE who = ANY (m.private_to))
        OR EXISTS (SELECT 1 FROM dionysus.triples t WHERE who = ANY (t.private_to))
        OR EXISTS (SELECT 1 FROM dionysus.north_stars n WHERE n.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.objectives o WHERE o.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.feedback f WHERE f.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.censors c WHERE c.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.mind_rules r WHERE r.person = who)
        OR EXISTS (SELECT 1 FROM dionysus.known_persons k WHERE k.of_person = who)
        OR EXISTS (SELECT 1 FROM dionysus.imports i WHERE i.person = who)
$$;

-- The person argument, trimmed, or the error that names it.
CREATE FUNCTION dionysus_internal.require_known_person(person text) RETURNS text
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must name a person (such as discord:123)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT dionysus_internal.person_is_known(btrim(person)) THEN
        RAISE EXCEPTION 'dionysus: argument "person": nothing of % is stored here', quote_literal(btrim(person))
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN btrim(person);
END $$;

-- Whether a jsonb value holds, anywhere in it, a string equal to one of `keys` (ids, a person key).
CREATE FUNCTION dionysus_internal.jsonb_mentions(j jsonb, keys text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT j IS NOT NULL AND EXISTS (SELECT 1 FROM jsonb_path_query(j, 'strict $.**') v
                                      WHERE jsonb_typeof(v) = 'string' AND (v #>> '{}') = ANY (keys))
$$;

CREATE FUNCTION forget_person(person text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    who text := dionysus_internal.require_known_person(person);
    msg_ids uuid[];
    sources text[];
    mem_ids uuid[];
    hb_ids uuid[];
    dream_ids uuid[];
    ep_ids uuid[];
    obj_ids uuid[];
    keys text[];
    work_ids uuid[];
    ent_ids uuid[];
    concept_ids uuid[];
    lexemes text[];
    r record;
    k bigint;
    gone jsonb := '{}';
BEGIN
    -- 0, 1: their imports, then each channel they talk in (in one order: erasures never wait
    -- on each other in a cycle), so no turn of theirs is logged while they are erased.
    PERFORM 1 FROM dionysus.imports i WHERE i.person = who ORDER BY i.id FOR UPDATE;
    FOR r IN SELECT DISTINCT m.platform, m.channel_id FROM dionysus.messages m WHERE m.person = who ORDER BY 1, 2 LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.channel:' || r.platform || ':' || r.channel_id, 0));
    END LOOP;
    -- 2-4.
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));

    -- What is theirs.
    msg_ids := ARRAY(SELECT m.id FROM dionysus.messages m WHERE m.person = who);
    sources := ARRAY(SELECT dionysus_internal.turn_source(m.id, m.import_id) FROM dionysus.messages m
                      WHERE m.person = who AND NOT m.is_bot);
    mem_ids := ARRAY(SELECT m.id FROM dionysus.memories m WHERE who = ANY (m.private_to)
                     UNION SELECT m.memory_id FROM dionysus.messages m WHERE m.id = ANY (msg_ids) AND m.memory_id IS NOT NULL
                     UNION SELECT m.id FROM dionysus.memories m WHERE m.source = ANY (sources)
                     UNION SELECT n.memory_id FROM dionysus.north_stars n WHERE n.person = who);
    dream_ids := ARRAY(SELECT d.id FROM dionysus.dreams d WHERE d.person = who);
    ep_ids := ARRAY(SELECT DISTINCT em.episode_id FROM dionysus.episode_memories em WHERE em.memory_id = ANY (mem_ids)
                    UNION SELECT e.id FROM dionysus.episodes e WHERE who = ANY (e.participants));
    obj_ids := ARRAY(SELECT o.id FROM dionysus.objectives o WHERE o.person = who);
    -- Everything of theirs an id in jsonb may point at.
    keys := ARRAY[who] || msg_ids::text[] || mem_ids::text[] || dream_ids::text[] || obj_ids::text[]
            || ARRAY(SELECT f.id::text FROM dionysus.feedback f WHERE f.person = who)
            || ARRAY(SELECT c.id::text FROM dionysus.contact_evaluations c WHERE c.person = who)
            || ARRAY(SELECT o.id::text FROM dionysus.outbox o WHERE o.person = who)
            || ARRAY(SELECT p.id::text FROM dionysus.proposals p WHERE p.dream_id = ANY (dream_ids) OR p.person = who)
            || ARRAY(SELECT c.id::text FROM dionysus.censors c WHERE c.person = who);
    -- Heartbeats that saw their words, or named them (whom a reach-out could go to).
    hb_ids := ARRAY(SELECT h.id FROM dionysus.heartbeat_log h
                     WHERE who = ANY (h.private_to) OR dionysus_internal.jsonb_mentions(h.context, keys)
                        OR dionysus_internal.jsonb_mentions(h.environment_snapshot, keys)
                        OR dionysus_internal.jsonb_mentions(h.goals_snapshot, keys)
                        OR dionysus_internal.jsonb_mentions(h.decision, keys)
                        OR dionysus_internal.jsonb_mentions(h.actions_taken, keys));
    keys := keys || hb_ids::text[];

    -- 5: their heartbeats keep their numbers, not their words; one still running is closed.
    PERFORM 1 FROM dionysus.heartbeat_log h WHERE h.id = ANY (hb_ids) ORDER BY h.id FOR UPDATE;
    UPDATE dionysus.heartbeat_state SET in_flight = NULL, last_heartbeat_at = now(),
           next_heartbeat_at = dionysus.clock_now() + make_interval(mins => dionysus_internal.heartbeat_interval_minutes()),
           updated_at = now()
     WHERE id = 1 AND in_flight = ANY (hb_ids);
    UPDATE dionysus.heartbeat_log h
       SET context = '{}', environment_snapshot = NULL, goals_snapshot = NULL, decision = NULL, decision_reasoning = NULL,
           actions_taken = '[]', actions_rejected = '[]', goals_modified = '[]', narrative = NULL,
           private_to = nullif(array_remove(h.private_to, who), '{}'),
           status = CASE WHEN h.status IN ('in_flight', 'committed') THEN 'recovered' ELSE h.status END,
           ended_at = coalesce(h.ended_at, now()),
           recovery_error = CASE WHEN h.status IN ('in_flight', 'committed') THEN 'erased: a person in its context left' END
     WHERE h.id = ANY (hb_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('heartbeats_redacted', k);
    work_ids := ARRAY(SELECT q.id FROM dionysus.work_queue q
                       WHERE q.heartbeat_id = ANY (hb_ids)
                          OR (q.action = 'summarize_episode' AND (q.params ->> 'episode_id') = ANY (ep_ids::text[]))
                          OR dionysus_internal.jsonb_mentions(q.params, keys)
                          OR dionysus_internal.jsonb_mentions(q.result, keys));
    PERFORM 1 FROM dionysus.work_queue q WHERE q.id = ANY (work_ids) ORDER BY q.id FOR UPDATE;
    DELETE FROM dionysus.work_queue q WHERE q.id = ANY (work_ids);
    gone := gone || jsonb_build_object('work_items', cardinality(work_ids));
    DELETE FROM dionysus.outbox o WHERE o.person = who OR o.reply_to = ANY (msg_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('outbox', k);
    DELETE FROM dionysus.contact_evaluations c WHERE c.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('contact_evaluations', k);
    -- What the grounding check refused of their turns or of work about them keeps their words
    -- (sql/032_grounding.sql): private to them, made by an item just erased, or checked against
    -- one of their turns.
    DELETE FROM dionysus.model_text_refusals x
     WHERE who = ANY (x.private_to) OR x.work_id = ANY (work_ids)
        OR x.source IN (SELECT m.content FROM dionysus.messages m WHERE m.id = ANY (msg_ids));
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('model_text_refusals', k);

    -- 6, 7.
    PERFORM 1 FROM dionysus.people p WHERE p.person = who FOR UPDATE;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.north_star:' || who, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.learn', 0));
    FOR r IN SELECT DISTINCT e.source FROM dionysus.episodes e WHERE e.id = ANY (ep_ids) ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.episode:' || r.source, 0));
    END LOOP;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.people:' || who, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.objectives:' || who, 0));

    -- 8: rows. What only pointed at what goes is noted first.
    PERFORM 1 FROM dionysus.episodes e WHERE e.id = ANY (ep_ids) ORDER BY e.id FOR UPDATE;
    lexemes := ARRAY(SELECT DISTINCT l FROM dionysus.memories m, unnest(tsvector_to_array(m.search)) l WHERE m.id = ANY (mem_ids));
    concept_ids := ARRAY(SELECT DISTINCT mc.concept_id FROM dionysus.memory_concepts mc WHERE mc.memory_id = ANY (mem_ids));
    ent_ids := ARRAY(SELECT t.subject_id FROM dionysus.triples t WHERE who = ANY (t.private_to) OR t.source = ANY (sources)
                     UNION SELECT t.object_id FROM dionysus.triples t WHERE who = ANY (t.private_to) OR t.source = ANY (sources));

    -- Their north stars first: a memory that is one refuses to go otherwise (017).
    DELETE FROM dionysus.north_stars n WHERE n.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('north_stars', k);
    DELETE FROM dionysus.triples t WHERE who = ANY (t.private_to) OR t.source = ANY (sources);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('triples', k);
    DELETE FROM dionysus.entities x
     WHERE x.id = ANY (ent_ids)
       AND NOT EXISTS (SELECT 1 FROM dionysus.triples t WHERE t.subject_id = x.id OR t.object_id = x.id);
    DELETE FROM dionysus.goals g WHERE who = ANY (g.private_to);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('goals', k);
    DELETE FROM dionysus.memory_changes c
     WHERE c.target_id = ANY (mem_ids) OR c.heartbeat_id = ANY (hb_ids) OR c.work_id = ANY (work_ids)
        OR dionysus_internal.jsonb_mentions(c.before, keys) OR dionysus_internal.jsonb_mentions(c.after, keys);
    DELETE FROM dionysus.decay_log d WHERE d.memory_id = ANY (mem_ids);
    DELETE FROM dionysus.memories m WHERE m.id = ANY (mem_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('memories', k);
    DELETE FROM dionysus.memory_access_log l WHERE l.memory_id = ANY (mem_ids);
    DELETE FROM dionysus.concepts c
     WHERE c.id = ANY (concept_ids) AND NOT EXISTS (SELECT 1 FROM dionysus.memory_concepts mc WHERE mc.concept_id = c.id);
    -- Neighbourhoods that listed them are computed again.
    INSERT INTO dionysus.neighborhood_queue (memory_id)
    SELECT n.memory_id FROM dionysus.memory_neighborhoods n WHERE n.neighbor_ids && mem_ids;

    -- The turns themselves (and what was staged from them for a re-index, by cascade).
    DELETE FROM dionysus.messages m WHERE m.id = ANY (msg_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('messages', k);
    -- An import of theirs that brought in someone else's turns too keeps its row (the turns point at it).
    DELETE FROM dionysus.imports i
     WHERE i.person = who AND NOT EXISTS (SELECT 1 FROM dionysus.messages m WHERE m.import_id = i.id);

    -- Episodes: one with nothing left goes; one with other people's turns left forgets its
    -- summary and is summarised again from what remains.
    DELETE FROM dionysus.episodes e
     WHERE e.id = ANY (ep_ids) AND NOT EXISTS (SELECT 1 FROM dionysus.episode_memories em WHERE em.episode_id = e.id);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('episodes', k);
    UPDATE dionysus.episodes e
       SET summary = NULL, summary_embedding = NULL, lessons = '{}', outcome = NULL, surprise = NULL,
           participants = dionysus_internal.episode_participants(e.id),
           memory_count = (SELECT count(*) FROM dionysus.episode_memories em WHERE em.episode_id = e.id)
     WHERE e.id = ANY (ep_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('episodes_to_summarise_again', k);

    -- What the companion kept about them.
    DELETE FROM dionysus.objectives o WHERE o.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('objectives', k);
    DELETE FROM dionysus.feedback f WHERE f.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('feedback', k);
    DELETE FROM dionysus.censor_events e
     WHERE e.context ->> 'person' = who OR dionysus_internal.jsonb_mentions(e.context, keys);
    DELETE FROM dionysus.censors c
     WHERE c.person = who OR c.learned_from_id = ANY (msg_ids) OR c.learned_from_id = ANY (hb_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('censors', k);
    DELETE FROM dionysus.mind_rules x WHERE x.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('rules', k);
    DELETE FROM dionysus.rule_firings x WHERE x.person = who OR dionysus_internal.jsonb_mentions(x.inputs, keys);
    DELETE FROM dionysus.learning_log x WHERE x.person = who;
    DELETE FROM dionysus.events x WHERE x.person = who OR dionysus_internal.jsonb_mentions(x.payload, keys);
    -- Their dreams' proposals, decided or not, and what an approval made theirs alone (017):
    -- their own template versions and archetypes.
    DELETE FROM dionysus.person_prompt_templates t WHERE t.person = who;
    DELETE FROM dionysus.context_archetypes a WHERE a.person = who;
    DELETE FROM dionysus.proposals p WHERE p.dream_id = ANY (dream_ids) OR p.person = who;
    DELETE FROM dionysus.dreams d WHERE d.id = ANY (dream_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('dreams', k);
    DELETE FROM dionysus.mirror_items i
     WHERE i.person = who OR who = ANY (i.private_to) OR i.subject_id::text = ANY (keys)
        OR dionysus_internal.jsonb_mentions(i.card, keys);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('mirror_items', k);
    DELETE FROM dionysus.known_persons x WHERE x.of_person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('people_in_their_life', k);
    DELETE FROM dionysus.person_relations x WHERE x.of_person = who;
    DELETE FROM dionysus.person_aliases x WHERE x.of_person = who;
    DELETE FROM dionysus.procedure_activations x WHERE x.person = who;
    DELETE FROM dionysus.procedures x WHERE x.person = who;
    -- Re-index staging of what went: vectors of their memories, episodes and objectives, and
    -- the tombstones of their turns (and of this erasure's own deletions).
    DELETE FROM dionysus.reindex_vectors v
     WHERE (v.kind = 'memory' AND v.target_id = ANY (mem_ids)) OR (v.kind = 'episode' AND v.target_id = ANY (ep_ids))
        OR (v.kind = 'objective' AND v.target_id = ANY (obj_ids));
    DELETE FROM dionysus.reindex_tombstones t WHERE t.source = ANY (sources) OR t.txid = txid_current();
    -- A cache keyed by a hash of each text embedded: which of them were theirs is not recorded.
    DELETE FROM dionysus.embedding_cache;
    -- Their row last (rhythm, signals and contact weights go with it).
    DELETE FROM dionysus.people p WHERE p.person = who;

    -- 9: their working memory.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.working_memory:' || who, 0));
    DELETE FROM dionysus.working_memories x WHERE x.person = who;
    DELETE FROM dionysus.working_memory_sessions x WHERE x.person = who;
    DELETE FROM dionysus.open_threads x WHERE x.person = who;

    -- The lexicon forgets the words no memory has any more.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.lexicon', 0));
    UPDATE dionysus.lexicon x
       SET ndoc = (SELECT count(*) FROM dionysus.memories m WHERE m.status = 'active' AND m.search @@ quote_literal(x.lexeme)::tsquery)
     WHERE x.lexeme = ANY (lexemes);
    DELETE FROM dionysus.lexicon x WHERE x.lexeme = ANY (lexemes) AND x.ndoc = 0;
    RETURN jsonb_build_object('person', who, 'forgotten', gone);
END $$;
REVOKE EXECUTE ON FUNCTION forget_person(text) FROM PUBLIC;
COMMENT ON FUNCTION forget_person(text) IS
    'Erases, in one transaction, everything one person said and everything derived from it (turns, memories, facts, triples, goals, sentence vectors, people in their life, north stars, objectives, feedback, censors, rules, evaluations, learning, dreams and their proposals, their own templates and archetypes, threads, working memory, work items, outbox, mirror items, re-index staging, tombstones); what mixed them with others is redacted (heartbeats) or re-derived (episodes: summary cleared and queued again); the embedding cache is emptied. Owner, or the driver on the person''s own confirmed request (/forgetme). Returns {person, forgotten: {kind: count erased}}. P0002 for a person of whom nothing is stored.';
COMMENT ON FUNCTION dionysus_internal.person_is_known(text) IS 'Whether anything of a person is stored (their row, turns, memories, north stars, objectives, feedback, censors, rules, people, imports).';
COMMENT ON FUNCTION dionysus_internal.require_known_person(text) IS 'The person argument trimmed, or 22023 (empty) / P0002 (nothing of them stored), naming the argument.';
COMMENT ON FUNCTION dionysus_internal.jsonb_mentions(jsonb, text[]) IS 'Whether a jsonb value holds, at any depth, a string equal to one of the keys (an id, a person key).';

-- Everything the store holds about one person, as JSON (`dionysus export PERSON`): what they
-- said, what was learned from it, why each contact was made. What is private to them and
-- someone else is listed without its words (they are the other person's too); an episode they
-- shared shows who else took part, not its summary. The same rows forget_person removes.
CREATE FUNCTION export_person(person text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    who text := dionysus_internal.require_known_person(person);
    own text[] := ARRAY[who];
BEGIN
    RETURN jsonb_build_object(
        'person', who,
        'exported_at', now(),
        'profile', (SELECT to_jsonb(p) || jsonb_build_object(
                        'rhythm', (SELECT coalesce(jsonb_agg(to_jsonb(r) - 'person' ORDER BY r.hour_of_week), '[]') FROM dionysus.person_rhythm r WHERE r.person = who),
                        'signals', (SELECT coalesce(jsonb_agg(to_jsonb(s) - 'person' ORDER BY s.said_at), '[]') FROM dionysus.person_signals s WHERE s.person = who),
                        'contact_weights', (SELECT coalesce(jsonb_agg(to_jsonb(w) - 'person' ORDER BY w.input), '[]') FROM dionysus.person_contact_weights w WHERE w.person = who))
                      FROM dionysus.people p WHERE p.person = who),
        'messages', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'at', m.created_at, 'from', CASE WHEN m.is_bot THEN 'companion' ELSE 'them' END,
                                                                 'proactive', m.is_proactive, 'platform', m.platform, 'channel_id', m.channel_id,
                                                                 'content', m.content, 'imported', m.import_id IS NOT NULL)
                                               ORDER BY m.created_at, m.id), '[]')
                       FROM dionysus.messages m WHERE m.person = who),
        'memories', (SELECT coalesce(jsonb_agg(to_jsonb(m) - 'embedding' - 'search'
                                                 || jsonb_build_object('fact', (SELECT to_jsonb(f) - 'memory_id' FROM dionysus.facts f WHERE f.memory_id = m.id))
                                               ORDER BY m.created_at, m.id), '[]')
                       FROM dionysus.memories m WHERE m.private_to = own),
        'shared_memories', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'type', m.type, 'created_at', m.created_at,
                                                                        'shared_with', cardinality(m.private_to) - 1) ORDER BY m.created_at, m.id), '[]')
                              FROM dionysus.memories m WHERE who = ANY (m.private_to) AND m.private_to <> own),
        'triples', (SELECT coalesce(jsonb_agg(jsonb_build_object('subject', s.name, 'predicate', t.predicate, 'object', o.name,
                                                                'confidence', t.confidence, 'source', t.source, 'created_at', t.created_at)
                                              ORDER BY t.created_at, t.id), '[]')
                      FROM dionysus.triples t JOIN dionysus.entities s ON s.id = t.subject_id JOIN dionysus.entities o ON o.id = t.object_id
                     WHERE t.private_to = own),
        'goals', (SELECT coalesce(jsonb_agg(to_jsonb(g) ORDER BY g.created_at), '[]') FROM dionysus.goals g WHERE g.private_to = own),
        'people_in_their_life', (SELECT coalesce(jsonb_agg(dionysus_internal.person_json(k, true) ORDER BY k.seq), '[]')
                                   FROM dionysus.known_persons k WHERE k.of_person = who),
        'north_stars', (SELECT coalesce(jsonb_agg(to_jsonb(n) - 'person' ORDER BY n.created_at), '[]') FROM dionysus.north_stars n WHERE n.person = who),
        'objectives', (SELECT coalesce(jsonb_agg(to_jsonb(o) - 'person' - 'embedding' ORDER BY o.created_at), '[]') FROM dionysus.objectives o WHERE o.person = who),
        'feedback', (SELECT coalesce(jsonb_agg(to_jsonb(f) - 'person' ORDER BY f.created_at), '[]') FROM dionysus.feedback f WHERE f.person = who),
        'censors', (SELECT coalesce(jsonb_agg(to_jsonb(c) - 'person' - 'embedding' ORDER BY c.created_at), '[]') FROM dionysus.censors c WHERE c.person = who),
        'rules', (SELECT coalesce(jsonb_agg(to_jsonb(r) - 'person' ORDER BY r.created_at), '[]') FROM dionysus.mind_rules r WHERE r.person = who),
        -- Why each contact was made (or not): its inputs, threshold, gates, decision and how it landed.
        'contacts', (SELECT coalesce(jsonb_agg(to_jsonb(c) - 'person' ORDER BY c.at, c.recorded_at), '[]') FROM dionysus.contact_evaluations c WHERE c.person = who),
        'learning', (SELECT coalesce(jsonb_agg(to_jsonb(l) - 'person' ORDER BY l.at, l.id), '[]') FROM dionysus.learning_log l WHERE l.person = who),
        'episodes', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'started_at', e.started_at, 'ended_at', e.ended_at,
                                                                 'others', cardinality(array_remove(e.participants, who)),
                                                                 'summary', CASE WHEN e.participants <@ own THEN e.summary END,
                                                                 'lessons', CASE WHEN e.participants <@ own THEN to_jsonb(e.lessons) END,
                                                                 'outcome', e.outcome) ORDER BY e.started_at, e.id), '[]')
                       FROM dionysus.episodes e
                      WHERE who = ANY (e.participants)
                         OR EXISTS (SELECT 1 FROM dionysus.episode_memories em JOIN dionysus.messages m ON m.memory_id = em.memory_id
                                     WHERE em.episode_id = e.id AND m.person = who)),
        'open_threads', (SELECT coalesce(jsonb_agg(to_jsonb(t) - 'person' - 'embedding' ORDER BY t.opened_at), '[]') FROM dionysus.open_threads t WHERE t.person = who),
        'working_memory_sessions', (SELECT coalesce(jsonb_agg(to_jsonb(s) - 'person' ORDER BY s.started_at), '[]') FROM dionysus.working_memory_sessions s WHERE s.person = who),
        'procedures', (SELECT coalesce(jsonb_agg(to_jsonb(p) - 'person' - 'embedding' ORDER BY p.created_at), '[]') FROM dionysus.procedures p WHERE p.person = who),
        'dreams', (SELECT coalesce(jsonb_agg(to_jsonb(d) - 'person' ORDER BY d.local_date), '[]') FROM dionysus.dreams d WHERE d.person = who),
        'proposals', (SELECT coalesce(jsonb_agg(to_jsonb(p) - 'person' ORDER BY p.created_at), '[]') FROM dionysus.proposals p
                       WHERE p.person = who OR p.dream_id IN (SELECT d.id FROM dionysus.dreams d WHERE d.person = who)),
        'own_templates', (SELECT coalesce(jsonb_agg(to_jsonb(t) - 'person' ORDER BY t.key, t.version), '[]') FROM dionysus.person_prompt_templates t WHERE t.person = who),
        'own_archetypes', (SELECT coalesce(jsonb_agg(to_jsonb(a) - 'person' - 'centroid' ORDER BY a.name), '[]') FROM dionysus.context_archetypes a WHERE a.person = who),
        'imports', (SELECT coalesce(jsonb_agg(to_jsonb(i) - 'person' ORDER BY i.started_at), '[]') FROM dionysus.imports i WHERE i.person = who),
        'outbox', (SELECT coalesce(jsonb_agg(to_jsonb(o) - 'person' ORDER BY o.created_at), '[]') FROM dionysus.outbox o WHERE o.person = who),
        'events', (SELECT coalesce(jsonb_agg(to_jsonb(x) - 'person' ORDER BY x.at, x.id), '[]') FROM dionysus.events x WHERE x.person = who),
        -- What a model wrote from their words that the grounding check refused to store, and why.
        'refused_model_text', (SELECT coalesce(jsonb_agg(to_jsonb(r) - 'private_to' ORDER BY r.refused_at, r.id), '[]')
                                 FROM dionysus.model_text_refusals r WHERE r.private_to = own),
        'heartbeats_that_saw_their_words', (SELECT count(*) FROM dionysus.heartbeat_log h WHERE who = ANY (h.private_to)));
END $$;
COMMENT ON FUNCTION export_person(text) IS
    'Everything stored about one person, as JSON (dionysus export PERSON): profile, their turns and the companion''s to them, memories and facts private to them, triples, goals, the people in their life, north stars, objectives, feedback, censors, rules, every contact evaluation (why a contact was made), learning, episodes, threads, procedures, dreams, imports, outbox, events, model text the grounding check refused. What is private to them and others is listed without its words. P0002 for a person of whom nothing is stored.';
