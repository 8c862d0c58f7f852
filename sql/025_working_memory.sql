-- Working memory (issue #13 §3): what a conversation is holding in mind right now.
--
-- A session is a person's part of a conversation episode (012: a channel's turns without a
-- long gap). Each has one working memory: its focus (what the conversation is on now), the
-- open threads (what is unresolved: "the interview on Friday", "ask your sister") and items
-- (memories and facts recall brought up in earlier turns), each with a relevance.
--
--   * Every turn of the person's (chat_context with memories) is a step: what recall finds
--     enters at its score squashed into [0, 1) (1 - e^-score: recall's scores are sums of
--     weighted evidence, above 1 for the strongest, and their order is kept), or refreshes what
--     is there; everything else fades by
--     working_memory_turn_decay; what falls under working_memory_min_relevance leaves, and past
--     working_memory_capacity the least relevant leaves first (the eviction is counted).
--     A context asked again for the same turn (a retry) is not a second step.
--   * The turn's extraction (extract_message) names the focus and the threads it opened or
--     closed (result.focus, result.threads); a thread is the person's until it is closed, so
--     one left open is carried into their next session.
--   * chat_context returns the working memory (the focus, the open threads, and what earlier
--     turns brought up that this turn's recall did not), so the reply keeps the thread of a
--     conversation that has moved past the words that found it.
--   * When the episode closes (the gap rule, close_episode, a new episode), its working
--     memories are cleared. What is worth keeping goes first: open threads stay open in
--     open_threads, and the session's record (focus, turns, the items it held with how often
--     each came back, evictions) goes to working_memory_sessions. The items themselves are
--     long-term memories already (a working memory holds references, never copies).
--
-- One person's working memory holds only what recall found for them, and a group chat gives
-- each participant their own: nothing of one person's session reaches another's.
-- A hot standby (pg_is_in_recovery) reads the working memory and never moves it.
--
-- Lock order: a person's working-memory lock 'dionysus.working_memory:<person>' comes last
-- (002's list): the episode lock of a close may be held before it, and nothing is taken after
-- it but the rows of working memory and open threads.

INSERT INTO heartbeat_config (key, value, description) VALUES
    ('working_memory_capacity', 16, 'items a session''s working memory holds; past it the least relevant leaves'),
    ('working_memory_turn_decay', 0.8, 'share of its relevance an item keeps at each turn that does not bring it up again'),
    ('working_memory_min_relevance', 0.05, 'an item whose relevance falls below this leaves working memory'),
    ('open_thread_days', 14, 'open threads younger than this are carried into a person''s next session');

-- ---------------------------------------------------------------------------------------
-- Open threads: what a person's conversation left unresolved, theirs until closed.
-- ---------------------------------------------------------------------------------------
CREATE TABLE open_threads (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    person      text NOT NULL CHECK (length(btrim(person)) > 0),
    content     text NOT NULL CHECK (length(btrim(content)) BETWEEN 1 AND 300),
    -- content lower-cased, punctuation and spacing folded: "the same words" means the same thread.
    thread_key  text NOT NULL,
    -- Of any width, with the model that made it: after a re-index it is embedded again on the fly.
    embedding   vector NOT NULL,
    model_key   text NOT NULL,
    -- Where it was opened: the conversation (an episode's source) and its episode. A thread is
    -- carried only into a later session of the same conversation: what was said in private
    -- is not brought up in a group.
    source      text NOT NULL,
    episode_id  uuid REFERENCES episodes (id) ON DELETE SET NULL,
    status      text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    opened_at   timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    opened_by   uuid REFERENCES messages (id) ON DELETE SET NULL,
    -- The last turn that spoke of it (opening it again counts).
    touched_at  timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    closed_at   timestamptz,
    closed_by   uuid REFERENCES messages (id) ON DELETE SET NULL,
    CHECK ((status = 'closed') = (closed_at IS NOT NULL))
);
COMMENT ON TABLE open_threads IS 'What a person''s conversations left unresolved (the extraction''s threads.opened), theirs until a turn or the person closes it; carried into their next session while younger than open_thread_days.';
CREATE UNIQUE INDEX open_threads_one_open ON open_threads (person, thread_key) WHERE status = 'open';
CREATE INDEX open_threads_of_person ON open_threads (person, touched_at DESC) WHERE status = 'open';
-- Its foreign keys, indexed (001).
CREATE INDEX open_threads_closed_by ON open_threads (closed_by) WHERE closed_by IS NOT NULL;
CREATE INDEX open_threads_episode_id ON open_threads (episode_id) WHERE episode_id IS NOT NULL;
CREATE INDEX open_threads_opened_by ON open_threads (opened_by) WHERE opened_by IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- Working memories: one per person per episode while it is open.
-- ---------------------------------------------------------------------------------------
CREATE TABLE working_memories (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    episode_id      uuid NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    person          text NOT NULL CHECK (length(btrim(person)) > 0),
    focus           text CHECK (length(focus) <= 200),
    -- The turn the focus was named for (a late extraction of an older turn does not override it).
    focus_at        timestamptz,
    -- Turns stepped so far; the last one (a context asked again for it is not a new step).
    turns           integer NOT NULL DEFAULT 0 CHECK (turns >= 0),
    last_message_id uuid,
    last_turn_at    timestamptz,
    evicted         integer NOT NULL DEFAULT 0 CHECK (evicted >= 0),
    started_at      timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    UNIQUE (episode_id, person)
);
COMMENT ON TABLE working_memories IS 'One per person per open conversation episode: focus, turns stepped, the last turn, evictions. Cleared when the episode closes (its record goes to working_memory_sessions).';
CREATE INDEX working_memories_person ON working_memories (person);

CREATE TABLE working_memory_items (
    working_memory_id uuid NOT NULL REFERENCES working_memories (id) ON DELETE CASCADE,
    kind              text NOT NULL CHECK (kind IN ('memory', 'fact', 'thread', 'procedure')),
    -- What it refers to: a memory (a memory or a fact), an open thread or a procedure (026
    -- adds its foreign key); forgetting any takes it out of every working memory.
    memory_id         uuid REFERENCES memories (id) ON DELETE CASCADE,
    thread_id         uuid REFERENCES open_threads (id) ON DELETE CASCADE,
    procedure_id      uuid,
    ref_id            uuid GENERATED ALWAYS AS (coalesce(memory_id, thread_id, procedure_id)) STORED,
    relevance         double precision NOT NULL CHECK (relevance >= 0 AND relevance <= 1),
    -- Turns that brought it up (one for the turn that loaded it).
    uses              integer NOT NULL DEFAULT 1 CHECK (uses >= 1),
    loaded_turn       integer NOT NULL,
    last_turn         integer NOT NULL,
    CHECK ((kind = 'thread') = (thread_id IS NOT NULL) AND (kind = 'procedure') = (procedure_id IS NOT NULL)
           AND (kind IN ('memory', 'fact')) = (memory_id IS NOT NULL)),
    PRIMARY KEY (working_memory_id, ref_id)
);
COMMENT ON TABLE working_memory_items IS 'What a working memory holds: memories and facts recall brought up, and open threads, each with a relevance that fades every turn that does not bring it up again; capacity-limited, the least relevant leaves first.';
CREATE INDEX working_memory_items_memory ON working_memory_items (memory_id) WHERE memory_id IS NOT NULL;
CREATE INDEX working_memory_items_thread ON working_memory_items (thread_id) WHERE thread_id IS NOT NULL;

-- What each cleared session kept: the explanation of a working memory after it is gone.
CREATE TABLE working_memory_sessions (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    person       text NOT NULL,
    episode_id   uuid REFERENCES episodes (id) ON DELETE SET NULL,
    started_at   timestamptz NOT NULL,
    ended_at     timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    turns        integer NOT NULL,
    focus        text,
    -- [{kind, id, relevance, uses}] most relevant first; and the threads still open at the end.
    items        jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(items) = 'array'),
    open_threads uuid[] NOT NULL DEFAULT '{}',
    evicted      integer NOT NULL DEFAULT 0
);
COMMENT ON TABLE working_memory_sessions IS 'The record of each cleared working memory: focus, turns, the items it held at the end (kind, id, relevance, uses), the threads left open, evictions.';
CREATE INDEX working_memory_sessions_person ON working_memory_sessions (person, ended_at DESC);
-- Its foreign keys, indexed (001).
CREATE INDEX working_memory_sessions_episode_id ON working_memory_sessions (episode_id) WHERE episode_id IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- Helpers
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.thread_key(words text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT btrim(regexp_replace(lower(words), '[^[:alnum:]]+', ' ', 'g'))
$$;
COMMENT ON FUNCTION dionysus_internal.thread_key(text) IS 'A thread''s words lower-cased with punctuation and spacing folded: the same words are the same thread.';

-- The open episode a turn belongs to (NULL when it has ended or the turn has no memory). With
-- lock, its row is held FOR SHARE: an episode closing waits for the turn's working memory to be
-- written (and then clears it), and a turn of an episode that closed meanwhile sees it ended.
CREATE FUNCTION dionysus_internal.turn_episode(message_id uuid, lock boolean) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE
    ep uuid;
BEGIN
    SELECT em.episode_id INTO ep
      FROM dionysus.messages x JOIN dionysus.episode_memories em ON em.memory_id = x.memory_id
     WHERE x.id = turn_episode.message_id LIMIT 1;
    IF lock THEN
        SELECT e.id INTO ep FROM dionysus.episodes e WHERE e.id = ep AND e.ended_at IS NULL FOR SHARE;
    ELSE
        SELECT e.id INTO ep FROM dionysus.episodes e WHERE e.id = ep AND e.ended_at IS NULL;
    END IF;
    RETURN ep;
END $$;
COMMENT ON FUNCTION dionysus_internal.turn_episode(uuid, boolean) IS 'The open episode a turn belongs to, or NULL; with lock, its row FOR SHARE (a close waits for the turn''s working memory, and clears it).';

-- The person's working memory of an episode, begun when missing: a new session starts with the
-- threads their last sessions of the same conversation left open (the newest few, within
-- open_thread_days; never a private conversation's in a group's), as relevant
-- as when they were opened: the start of a conversation is when they are picked up. The caller
-- holds the person's working-memory lock.
CREATE FUNCTION dionysus_internal.working_memory_of(person text, episode_id uuid) RETURNS dionysus.working_memories
    LANGUAGE plpgsql AS $$
DECLARE
    wm dionysus.working_memories;
BEGIN
    SELECT * INTO wm FROM dionysus.working_memories w
     WHERE w.episode_id = working_memory_of.episode_id AND w.person = working_memory_of.person;
    IF FOUND THEN
        RETURN wm;
    END IF;
    INSERT INTO dionysus.working_memories (episode_id, person) VALUES (working_memory_of.episode_id, working_memory_of.person)
    RETURNING * INTO wm;
    INSERT INTO dionysus.working_memory_items (working_memory_id, kind, thread_id, relevance, loaded_turn, last_turn)
    SELECT wm.id, 'thread', t.id, 1.0, 0, 0
      FROM dionysus.open_threads t
     WHERE t.person = working_memory_of.person AND t.status = 'open'
       AND t.source = (SELECT e.source FROM dionysus.episodes e WHERE e.id = working_memory_of.episode_id)
       AND t.touched_at > dionysus.clock_now() - make_interval(secs => dionysus_internal.heartbeat_setting('open_thread_days') * 86400)
     ORDER BY t.touched_at DESC LIMIT 5;
    RETURN wm;
END $$;
COMMENT ON FUNCTION dionysus_internal.working_memory_of(text, uuid) IS 'A person''s working memory of an episode, begun when missing with the threads their last sessions left open (at most five); the caller holds their working-memory lock.';

-- Drops what fell below the floor, then the least relevant past the capacity (the oldest
-- first among equals); counts what left.
CREATE FUNCTION dionysus_internal.working_memory_evict(wm_id uuid) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    gone integer;
    floor_ double precision := dionysus_internal.heartbeat_setting('working_memory_min_relevance');
    capacity integer := dionysus_internal.heartbeat_setting('working_memory_capacity')::int;
BEGIN
    WITH ranked AS (
        SELECT i.ref_id, i.relevance,
               row_number() OVER (ORDER BY i.relevance DESC, i.last_turn DESC, i.ref_id) AS rank
          FROM dionysus.working_memory_items i WHERE i.working_memory_id = wm_id)
    DELETE FROM dionysus.working_memory_items i USING ranked r
     WHERE i.working_memory_id = wm_id AND i.ref_id = r.ref_id
       AND (r.relevance < floor_ OR r.rank > capacity);
    GET DIAGNOSTICS gone = ROW_COUNT;
    IF gone > 0 THEN
        UPDATE dionysus.working_memories SET evicted = evicted + gone WHERE id = wm_id;
    END IF;
    RETURN gone;
END $$;
COMMENT ON FUNCTION dionysus_internal.working_memory_evict(uuid) IS 'Drops what fell below working_memory_min_relevance, then the least relevant past working_memory_capacity; counts them; returns how many left.';

-- A working memory as a context shows it: its focus, its open threads, its procedures, and the
-- items not already in view (this turn's recall and the recent turns), most relevant first; a memory
-- that is no longer active or no longer the person's to see is left out.
CREATE FUNCTION dionysus_internal.working_memory_json(wm dionysus.working_memories, in_view uuid[]) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'focus', wm.focus,
        'turn', wm.turns,
        'evicted', wm.evicted,
        'threads', coalesce((SELECT jsonb_agg(jsonb_build_object('id', t.id, 'content', t.content, 'opened_at', t.opened_at,
                                                                 'relevance', round(i.relevance::numeric, 3))
                                              ORDER BY i.relevance DESC, t.touched_at DESC)
                               FROM dionysus.working_memory_items i JOIN dionysus.open_threads t ON t.id = i.thread_id
                              WHERE i.working_memory_id = wm.id AND t.status = 'open' AND t.person = wm.person), '[]'),
        'items', coalesce((SELECT jsonb_agg(jsonb_build_object('kind', i.kind, 'id', m.id, 'content', m.content,
                                                               'created_at', m.created_at,
                                                               'relevance', round(i.relevance::numeric, 3), 'uses', i.uses,
                                                               'since_turn', i.loaded_turn)
                                            ORDER BY i.relevance DESC, i.last_turn DESC, m.id)
                             FROM dionysus.working_memory_items i JOIN dionysus.memories m ON m.id = i.memory_id
                            WHERE i.working_memory_id = wm.id AND m.status = 'active'
                              AND dionysus_internal.visible_to(m.private_to, wm.person)
                              AND NOT (m.id = ANY (coalesce(in_view, '{}')))), '[]'),
        -- The procedures it holds (026): how this kind of conversation goes well.
        'procedures', coalesce((SELECT jsonb_agg(dionysus_internal.procedure_json(p) || jsonb_build_object('relevance', round(i.relevance::numeric, 3))
                                                 ORDER BY i.relevance DESC, p.id)
                                  FROM dionysus.working_memory_items i JOIN dionysus.procedures p ON p.id = i.procedure_id
                                 WHERE i.working_memory_id = wm.id AND p.status = 'active'
                                   AND (p.person IS NULL OR p.person = wm.person)), '[]'))
$$;
COMMENT ON FUNCTION dionysus_internal.working_memory_json(dionysus.working_memories, uuid[]) IS 'A working memory as a context shows it: focus, turn, evictions, open threads, and the items not in view (active, still the person''s to see), most relevant first.';

-- ---------------------------------------------------------------------------------------
-- A turn (chat_context): steps the person's working memory with what recall found for it, and
-- returns it. NULL where there is no session: a turn of nobody's, the assistant's, an imported
-- one, or one whose episode has ended. moves = false (the extraction's context, a standby)
-- only reads.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.working_memory_turn(m dionysus.messages, recalled jsonb, in_view uuid[], moves boolean)
    RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    ep uuid;
    wm dionysus.working_memories;
    new_turn boolean;
    shown uuid[];
    fade double precision;
BEGIN
    IF m.person IS NULL OR m.is_bot OR m.import_id IS NOT NULL THEN
        RETURN NULL;
    END IF;
    moves := moves AND NOT pg_is_in_recovery();
    ep := dionysus_internal.turn_episode(m.id, moves);
    IF ep IS NULL THEN
        RETURN NULL;
    END IF;
    shown := coalesce(in_view, '{}') || ARRAY(SELECT (e ->> 'id')::uuid FROM jsonb_array_elements(coalesce(recalled, '[]')) e);
    IF NOT moves THEN
        SELECT * INTO wm FROM dionysus.working_memories w WHERE w.episode_id = ep AND w.person = m.person;
        RETURN CASE WHEN FOUND THEN dionysus_internal.working_memory_json(wm, shown) END;
    END IF;

    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.working_memory:' || m.person, 0));
    wm := dionysus_internal.working_memory_of(m.person, ep);
    -- A step per turn, in the turns' order: a retry of this turn, or a context of an older turn
    -- asked late, changes nothing.
    new_turn := wm.last_message_id IS DISTINCT FROM m.id
                AND (wm.last_turn_at IS NULL OR (m.created_at, m.id) > (wm.last_turn_at, wm.last_message_id));
    IF NOT new_turn THEN
        RETURN dionysus_internal.working_memory_json(wm, shown);
    END IF;
    UPDATE dionysus.working_memories w SET turns = w.turns + 1, last_message_id = m.id, last_turn_at = m.created_at
     WHERE w.id = wm.id RETURNING * INTO wm;
    fade := dionysus_internal.heartbeat_setting('working_memory_turn_decay');
    UPDATE dionysus.working_memory_items i SET relevance = i.relevance * fade WHERE i.working_memory_id = wm.id;
    INSERT INTO dionysus.working_memory_items AS i (working_memory_id, kind, memory_id, relevance, loaded_turn, last_turn)
    SELECT wm.id, CASE WHEN (e ->> 'fact')::boolean THEN 'fact' ELSE 'memory' END, (e ->> 'id')::uuid,
           1 - exp(-greatest(coalesce((e ->> 'score')::float8, 0), 0)), wm.turns, wm.turns
      FROM jsonb_array_elements(coalesce(recalled, '[]')) e
     WHERE EXISTS (SELECT 1 FROM dionysus.memories x WHERE x.id = (e ->> 'id')::uuid)
    ON CONFLICT (working_memory_id, ref_id) DO UPDATE
       SET relevance = greatest(i.relevance, EXCLUDED.relevance), uses = i.uses + 1, last_turn = EXCLUDED.last_turn;
    -- The procedures the turn's meaning calls for (026).
    PERFORM dionysus_internal.match_procedures(m, wm);
    PERFORM dionysus_internal.working_memory_evict(wm.id);
    SELECT * INTO wm FROM dionysus.working_memories w WHERE w.id = wm.id;
    RETURN dionysus_internal.working_memory_json(wm, shown);
END $$;
COMMENT ON FUNCTION dionysus_internal.working_memory_turn(dionysus.messages, jsonb, uuid[], boolean) IS
    'chat_context''s step: a person''s lived turn in an open episode moves their working memory once (what recall found enters or is refreshed, the rest fades, the least relevant leave) and returns it; moves = false or a standby only reads; NULL without a session.';

-- ---------------------------------------------------------------------------------------
-- The extraction's part (complete_work: result.focus, result.threads of an extract_message):
-- the focus of the person's session, the threads their turn opened, and those it closed (by
-- their words as listed, else the nearest open thread of theirs by meaning, 0.8 or more).
-- A thread opened again in other words (0.85 or more) is the same thread, touched.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.store_working_focus(person text, message_id uuid, focus jsonb, threads jsonb)
    RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    turn dionysus.messages;
    ep uuid;
    src text;
    wm dionysus.working_memories;
    opened_words text[];
    opened_vecs vector[];
    closed_words text[];
    closed_vecs vector[];
    mk text := dionysus_internal.store_model_key();
    i integer;
    hit uuid;
    opened jsonb := '[]';
    closed jsonb := '[]';
    unmatched integer := 0;
    focus_set boolean := false;
    said text;
BEGIN
    IF focus IS NOT NULL AND jsonb_typeof(focus) NOT IN ('string', 'null') THEN
        RAISE EXCEPTION 'dionysus: argument "result.focus": must be a string' USING ERRCODE = 'invalid_text_representation';
    END IF;
    threads := coalesce(threads, '{}');
    IF jsonb_typeof(threads) <> 'object' OR EXISTS (SELECT 1 FROM jsonb_object_keys(threads) k WHERE k NOT IN ('opened', 'closed')) THEN
        RAISE EXCEPTION 'dionysus: argument "result.threads": must be an object with "opened" and "closed" lists'
            USING ERRCODE = 'invalid_text_representation';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(ARRAY['opened', 'closed']) k
                WHERE threads ? k AND (jsonb_typeof(threads -> k) <> 'array'
                                       OR jsonb_array_length(threads -> k) > 5
                                       OR EXISTS (SELECT 1 FROM jsonb_array_elements(threads -> k) x WHERE jsonb_typeof(x) <> 'string'))) THEN
        RAISE EXCEPTION 'dionysus: argument "result.threads": "opened" and "closed" are lists of at most 5 strings'
            USING ERRCODE = 'invalid_text_representation';
    END IF;
    SELECT * INTO turn FROM dionysus.messages x WHERE x.id = store_working_focus.message_id;
    IF NOT FOUND OR turn.person IS DISTINCT FROM store_working_focus.person THEN
        RAISE EXCEPTION 'dionysus: argument "result.threads": the turn is not %''s', person USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF turn.import_id IS NOT NULL THEN
        -- An imported history's threads were another conversation's, long closed or not.
        RETURN jsonb_build_object('refused', 'an imported turn has no session');
    END IF;
    -- The words are embedded before any lock is taken: the model never runs while the
    -- conversation's next turn waits on its episode.
    opened_words := ARRAY(SELECT DISTINCT left(btrim(x #>> '{}'), 300) FROM jsonb_array_elements(coalesce(threads -> 'opened', '[]')) x
                           WHERE dionysus_internal.thread_key(x #>> '{}') <> '');
    closed_words := ARRAY(SELECT DISTINCT btrim(x #>> '{}') FROM jsonb_array_elements(coalesce(threads -> 'closed', '[]')) x
                           WHERE dionysus_internal.thread_key(x #>> '{}') <> '');
    opened_vecs := ARRAY(SELECT b.embedding FROM dionysus.embed_batch(opened_words) b ORDER BY b.ord);
    closed_vecs := ARRAY(SELECT b.embedding FROM dionysus.embed_batch(closed_words) b ORDER BY b.ord);
    src := 'conversation:' || turn.platform || ':' || turn.channel_id;

    ep := dionysus_internal.turn_episode(message_id, true);
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.working_memory:' || person, 0));
    IF ep IS NOT NULL THEN
        wm := dionysus_internal.working_memory_of(person, ep);
    END IF;

    FOR i IN 1..coalesce(cardinality(closed_words), 0) LOOP
        SELECT t.id INTO hit FROM dionysus.open_threads t
         WHERE t.person = store_working_focus.person AND t.status = 'open' AND t.thread_key = dionysus_internal.thread_key(closed_words[i]);
        IF NOT FOUND THEN
            SELECT t.id INTO hit
              FROM dionysus.open_threads t
             CROSS JOIN LATERAL (SELECT CASE WHEN t.model_key = mk THEN t.embedding ELSE dionysus.embed(t.content) END AS v) e
             WHERE t.person = store_working_focus.person AND t.status = 'open' AND 1 - (e.v <=> closed_vecs[i]) >= 0.8
             ORDER BY e.v <=> closed_vecs[i], t.id LIMIT 1;
        END IF;
        IF hit IS NULL THEN
            unmatched := unmatched + 1;
            CONTINUE;
        END IF;
        UPDATE dionysus.open_threads SET status = 'closed', closed_at = dionysus.clock_now(), closed_by = message_id WHERE id = hit;
        DELETE FROM dionysus.working_memory_items x WHERE x.thread_id = hit;
        closed := closed || to_jsonb(hit);
        hit := NULL;
    END LOOP;

    FOR i IN 1..coalesce(cardinality(opened_words), 0) LOOP
        SELECT t.id INTO hit
          FROM dionysus.open_threads t
         CROSS JOIN LATERAL (SELECT CASE WHEN t.model_key = mk THEN t.embedding ELSE dionysus.embed(t.content) END AS v) e
         WHERE t.person = store_working_focus.person AND t.status = 'open'
           AND (t.thread_key = dionysus_internal.thread_key(opened_words[i]) OR 1 - (e.v <=> opened_vecs[i]) >= 0.85)
         ORDER BY t.thread_key = dionysus_internal.thread_key(opened_words[i]) DESC, e.v <=> opened_vecs[i], t.id LIMIT 1;
        IF FOUND THEN
            UPDATE dionysus.open_threads SET touched_at = dionysus.clock_now() WHERE id = hit;
        ELSE
            INSERT INTO dionysus.open_threads (person, content, thread_key, embedding, model_key, source, episode_id, opened_by)
            VALUES (person, opened_words[i], dionysus_internal.thread_key(opened_words[i]), opened_vecs[i], mk, src, ep, message_id)
            RETURNING id INTO hit;
        END IF;
        IF wm.id IS NOT NULL THEN
            INSERT INTO dionysus.working_memory_items AS x (working_memory_id, kind, thread_id, relevance, loaded_turn, last_turn)
            VALUES (wm.id, 'thread', hit, 1.0, wm.turns, wm.turns)
            ON CONFLICT (working_memory_id, ref_id) DO UPDATE SET relevance = 1.0, uses = x.uses + 1, last_turn = EXCLUDED.last_turn;
        END IF;
        opened := opened || to_jsonb(hit);
        hit := NULL;
    END LOOP;

    -- The focus of the latest turn named stands: a late extraction of an older turn leaves it.
    said := left(btrim(focus #>> '{}'), 200);
    IF wm.id IS NOT NULL AND coalesce(said, '') <> '' AND turn.created_at >= coalesce(wm.focus_at, '-infinity') THEN
        UPDATE dionysus.working_memories SET focus = said, focus_at = turn.created_at WHERE id = wm.id;
        focus_set := true;
    END IF;
    IF wm.id IS NOT NULL THEN
        PERFORM dionysus_internal.working_memory_evict(wm.id);
    END IF;
    RETURN jsonb_build_object('focus', focus_set, 'opened', opened, 'closed', closed, 'unmatched', unmatched,
                              'session', ep IS NOT NULL);
END $$;
COMMENT ON FUNCTION dionysus_internal.store_working_focus(text, uuid, jsonb, jsonb) IS
    'complete_work''s result.focus and result.threads ({opened, closed}: at most five strings each) of a person''s turn (which must be theirs, 42501): threads closed by their words or the nearest open one (0.8), opened (the same thread touched at 0.85), the session''s focus set; an imported turn has none.';

-- ---------------------------------------------------------------------------------------
-- Session end: an episode that closes clears its working memories, each recorded first.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.end_working_memories() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    wm dionysus.working_memories;
    who text;
BEGIN
    FOR who IN SELECT w.person FROM dionysus.working_memories w WHERE w.episode_id = NEW.id ORDER BY w.person LOOP
        -- Locked, then read: a turn stepping it meanwhile is in the record.
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.working_memory:' || who, 0));
        SELECT * INTO wm FROM dionysus.working_memories w WHERE w.episode_id = NEW.id AND w.person = who;
        INSERT INTO dionysus.working_memory_sessions (person, episode_id, started_at, turns, focus, items, open_threads, evicted)
        SELECT wm.person, wm.episode_id, wm.started_at, wm.turns, wm.focus,
               coalesce((SELECT jsonb_agg(jsonb_build_object('kind', i.kind, 'id', i.ref_id, 'relevance', round(i.relevance::numeric, 3),
                                                             'uses', i.uses) ORDER BY i.relevance DESC, i.ref_id)
                           FROM dionysus.working_memory_items i WHERE i.working_memory_id = wm.id), '[]'),
               -- the threads opened in this session and still open, then those it carried and left open
               ARRAY(SELECT t.id FROM dionysus.open_threads t
                      WHERE t.person = wm.person AND t.status = 'open' AND t.episode_id = wm.episode_id ORDER BY t.opened_at, t.id)
               || ARRAY(SELECT i.thread_id FROM dionysus.working_memory_items i JOIN dionysus.open_threads t ON t.id = i.thread_id
                         WHERE i.working_memory_id = wm.id AND t.status = 'open' AND t.episode_id IS DISTINCT FROM wm.episode_id
                         ORDER BY t.opened_at, t.id),
               wm.evicted;
        DELETE FROM dionysus.working_memories WHERE id = wm.id;
    END LOOP;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION dionysus_internal.end_working_memories() IS 'Trigger: an episode that closes clears its working memories, each recorded in working_memory_sessions first (open threads stay open).';
CREATE TRIGGER episodes_end_working_memory AFTER UPDATE OF ended_at ON episodes
    FOR EACH ROW WHEN (OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL)
    EXECUTE FUNCTION dionysus_internal.end_working_memories();

-- ---------------------------------------------------------------------------------------
-- Reading and the person's word
-- ---------------------------------------------------------------------------------------
-- The person's working memories now (one per conversation they are in), for psql and /focus.
CREATE FUNCTION working_memory(person text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: argument "person" must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN coalesce((SELECT jsonb_agg(dionysus_internal.working_memory_json(w, '{}')
                                      || jsonb_build_object('episode_id', w.episode_id, 'started_at', w.started_at,
                                                            'source', e.source)
                                      ORDER BY w.last_turn_at DESC NULLS LAST, w.id)
                       FROM dionysus.working_memories w JOIN dionysus.episodes e ON e.id = w.episode_id
                      WHERE w.person = working_memory.person), '[]');
END $$;
COMMENT ON FUNCTION working_memory(text) IS 'A person''s working memories now (one per open conversation): focus, turn, open threads and items, most relevant first. Theirs only.';

CREATE FUNCTION person_open_threads(for_person text)
    RETURNS TABLE (id uuid, content text, opened_at timestamptz, touched_at timestamptz)
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF for_person IS NULL OR btrim(for_person) = '' THEN
        RAISE EXCEPTION 'dionysus: argument "for_person" must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY SELECT t.id, t.content, t.opened_at, t.touched_at FROM dionysus.open_threads t
                  WHERE t.person = for_person AND t.status = 'open' ORDER BY t.touched_at DESC, t.id;
END $$;
COMMENT ON FUNCTION person_open_threads(text) IS 'The threads still open with a person, the most recently touched first.';

-- The person says a thread is done (or was never one): it leaves every working memory of theirs.
CREATE FUNCTION close_open_thread(person text, thread_id uuid) RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    hit uuid;
BEGIN
    IF person IS NULL OR thread_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "%" must not be null', CASE WHEN person IS NULL THEN 'person' ELSE 'thread_id' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.working_memory:' || person, 0));
    UPDATE dionysus.open_threads t SET status = 'closed', closed_at = dionysus.clock_now()
     WHERE t.id = close_open_thread.thread_id AND t.person = close_open_thread.person AND t.status = 'open'
    RETURNING t.id INTO hit;
    DELETE FROM dionysus.working_memory_items i WHERE i.thread_id = hit;
    RETURN hit IS NOT NULL;
END $$;
COMMENT ON FUNCTION close_open_thread(text, uuid) IS 'The person''s word closes one of their open threads (it leaves their working memories); false when it is not theirs or not open.';

-- The prompt that turns a person's turn into memory also names the conversation's focus and
-- the threads the turn opened or closed ({{threads}}: the person's open threads, listed):
-- extract_message's version 4 (012).
