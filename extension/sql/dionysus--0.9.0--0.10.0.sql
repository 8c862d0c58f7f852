-- Dionysus 0.9.0 → 0.10.0: working memory (025_working_memory.sql, seed 002): per person per
-- conversation episode, the focus, the open threads and the items recall brought up, each with
-- a relevance that fades by the turn; capacity-limited; cleared when the episode closes, with
-- its record kept and its open threads carried into the person's next session. Procedures
-- (026_procedures.sql, seed 002's K-lines): the owner's how-to knowledge, activated into
-- working memory by a turn's meaning or by name, scored by the outcomes of the episodes that
-- used them; recall_all, the unified recall. Every row is kept; working memories begin with
-- the next turns (the extraction template changes where the shipped one is active). A censor's
-- hours are judged again when a reach-out is sent; a censored reach-out's work says it was not sent.

-- ---------------------------------------------------------------------------------------
-- The settings' check knows the new keys (sql/002_heartbeat.sql)
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION dionysus_internal.heartbeat_config_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.value IS NULL OR NEW.value = 'NaN'::float8 OR NEW.value IN ('Infinity'::float8, '-Infinity'::float8)
       OR NEW.value < 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_config.%": % must be a finite number >= 0', NEW.key, NEW.value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('carry_over', 'working_memory_turn_decay', 'working_memory_min_relevance', 'procedure_match_similarity') AND NEW.value > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_config.%": % must be within [0, 1]', NEW.key, NEW.value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (NEW.key = 'working_memory_capacity' AND (NEW.value < 1 OR NEW.value > 200 OR NEW.value <> trunc(NEW.value)))
       OR (NEW.key = 'procedure_match_max' AND (NEW.value > 10 OR NEW.value <> trunc(NEW.value)))
       OR (NEW.key = 'open_thread_days' AND NEW.value > 3650) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_config.%": % must be %within [%, %]', NEW.key, NEW.value,
            CASE WHEN NEW.key = 'open_thread_days' THEN '' ELSE 'a whole number ' END,
            CASE NEW.key WHEN 'working_memory_capacity' THEN 1 ELSE 0 END,
            CASE NEW.key WHEN 'procedure_match_max' THEN 10 WHEN 'open_thread_days' THEN 3650 ELSE 200 END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END $$;

-- ---------------------------------------------------------------------------------------
-- A new organ, created whole as sql/025_working_memory.sql has it
-- ---------------------------------------------------------------------------------------
-- Working memory (seed 002; issue #13 §3): what a conversation is holding in mind right now.
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
CREATE UNIQUE INDEX open_threads_one_open ON open_threads (person, thread_key) WHERE status = 'open';
CREATE INDEX open_threads_of_person ON open_threads (person, touched_at DESC) WHERE status = 'open';

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
CREATE INDEX working_memory_sessions_person ON working_memory_sessions (person, ended_at DESC);

-- ---------------------------------------------------------------------------------------
-- Helpers
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.thread_key(words text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT btrim(regexp_replace(lower(words), '[^[:alnum:]]+', ' ', 'g'))
$$;

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

-- The prompt that turns a person's turn into memory also names the conversation's focus and
-- the threads the turn opened or closed ({{threads}}: the person's open threads, listed).
SELECT dionysus_internal.ship_template('extract_message',
    'fast model: facts, triples, requested goals, the person''s objectives and the people in their life (seed 003 §9)',
    'fast model: facts, triples, goals, objectives, people, and the session''s focus and open threads (seed 002 working memory)', 0.1,
    $t$TASK: extract
Read the latest message from the person (the "user") in its conversation, and extract what is worth
remembering long-term. First restate the message so it stands on its own: resolve every pronoun
and reference ("it", "she", "that thing") against the conversation so far. Refer to the person as "user".

Conversation so far:
{{turns}}

Threads still open with the user:
{{threads}}

Latest message from the user:
{{message}}

Answer with JSON only, in exactly this shape:
{"facts": [{"content": "a self-contained statement", "subject": "who or what it is about", "category": "preference|person|event|plan|attribute|other", "confidence": 0.9}],
 "triples": [{"subject": "user", "predicate": "lives_in", "object": "Lisbon", "confidence": 0.9}],
 "goals": [{"title": "something the user explicitly asked you to do or follow up on", "description": "details"}],
 "objectives": [{"description": "something the user is working toward in their own life (self-contained)", "saliency": 0.7, "status": "pending|completed"}],
 "people": [{"name": "how the user named them (a first name when known)", "aliases": ["other names the message uses for the same person, e.g. Mom"], "same_as": "an earlier name the message says is this person, or null", "relation": "their relation to the user: mother|father|sister|brother|partner|friend|boss|colleague|...", "feeling": 0.5, "traits": ["patient"], "topics": ["her garden"], "confidence": 0.9}],
 "relations": [{"a": "a person's name", "b": "another person's name", "kind": "siblings|married|works_with|friends|dislikes|...", "sentiment": -0.5, "source": "said|inferred", "confidence": 0.8}],
 "focus": "what the conversation is about right now, in a few words",
 "threads": {"opened": ["something left unresolved that should be picked up later, self-contained"], "closed": ["a thread listed above, word for word, that this message resolves"]}}
Objectives are the user's own aims ("finish the thesis draft by Friday", "run a half marathon"), not
tasks for you; mark one "completed" when the message says it is done. People are the people in the
user's life this message speaks of (not the user, not you); feeling is how the user feels about
them (-1 to 1); relations are between two of those people, "said" when the user said it. A thread is
what is still open between you ("the job interview on Friday: ask how it went"); close one only
when the message settles it. Use empty lists when there is nothing. Small talk yields nothing.$t$);

-- ---------------------------------------------------------------------------------------
-- Procedures, created whole as sql/026_procedures.sql has them
-- ---------------------------------------------------------------------------------------
-- Procedures: how-to knowledge as K-lines (seed 002, Minsky's level-bands; issue #13 §2).
--
-- A procedure is what Dionysus knows about how to do something well with a person ("helping
-- Ada through exam nerves"): its goals (the upper fringe, weakly attached: what it is for),
-- its core (patterns, tools and concepts, strongly attached: how it goes) and its
-- implementation notes (the lower fringe, easily displaced). Its embedding is of the name, the
-- domain, the goals and the core: what a situation calling for it would resemble.
--
--   * Procedures are the owner's to write (store_procedure; for everyone, or for one person,
--     whose alone it then is) and to retire. Nothing here writes one on the system's own word.
--   * Activation loads a procedure into the person's working memory (025) and counts it once
--     per conversation episode: asked for by name (activate_procedure), or matched by the
--     meaning of the person's turn (chat_context, procedure_match_similarity, at most
--     procedure_match_max a turn). Every activation is written down with how it came about,
--     its similarity and its turn (procedure_activations).
--   * When the episode's outcome is known (its summary, 024), each procedure it activated
--     counts a success or a failure (mixed and neutral count neither); effectiveness is
--     (successes + 1) / (successes + failures + 2): an untried procedure is 0.5, and one outcome
--     moves it only so far.
--   * recall_all is seed 002's unified recall: memories and facts (recall), procedures, censors
--     and the person's own episodes in one list ranked by score, each with its kind marked.
--
-- Lock order: a procedure's row is an "other row" (8); activation happens under the person's
-- working-memory lock (9), after the episode's row.

INSERT INTO heartbeat_config (key, value, description) VALUES
    ('procedure_match_similarity', 0.4, 'a person''s turn this similar to a procedure (cosine) activates it'),
    ('procedure_match_max', 2, 'procedures a turn activates by meaning, at most');

CREATE TABLE procedures (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- NULL: everyone's; else one person's alone.
    person               text CHECK (person IS NULL OR length(btrim(person)) > 0),
    name                 text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    name_key             text NOT NULL,
    domain               text CHECK (domain IS NULL OR length(btrim(domain)) BETWEEN 1 AND 100),
    goals                text[] NOT NULL DEFAULT '{}',
    core_patterns        text[] NOT NULL DEFAULT '{}',
    core_tools           text[] NOT NULL DEFAULT '{}',
    core_concepts        text[] NOT NULL DEFAULT '{}',
    implementation_notes text[] NOT NULL DEFAULT '{}',
    -- Of any width, with the model that made it: after a re-index it is embedded again on the fly.
    embedding            vector NOT NULL,
    model_key            text NOT NULL,
    status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired')),
    activation_count     integer NOT NULL DEFAULT 0 CHECK (activation_count >= 0),
    success_count        integer NOT NULL DEFAULT 0 CHECK (success_count >= 0),
    failure_count        integer NOT NULL DEFAULT 0 CHECK (failure_count >= 0),
    effectiveness        double precision GENERATED ALWAYS AS ((success_count + 1)::float8 / (success_count + failure_count + 2)) STORED,
    last_activated       timestamptz,
    created_at           timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    updated_at           timestamptz NOT NULL DEFAULT dionysus.clock_now()
);
CREATE UNIQUE INDEX procedures_one_name ON procedures (coalesce(person, ''), name_key) WHERE status = 'active';

CREATE TABLE procedure_activations (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    procedure_id uuid NOT NULL REFERENCES procedures (id) ON DELETE CASCADE,
    person       text NOT NULL,
    -- The conversation episode it served (NULL: asked for outside one).
    episode_id   uuid REFERENCES episodes (id) ON DELETE CASCADE,
    message_id   uuid REFERENCES messages (id) ON DELETE SET NULL,
    how          text NOT NULL CHECK (how IN ('matched', 'asked')),
    similarity   double precision,
    activated_at timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    -- The episode's outcome, once its summary said it.
    outcome      text CHECK (outcome IN ('success', 'failure', 'mixed', 'neutral')),
    scored_at    timestamptz
);
CREATE UNIQUE INDEX procedure_activations_once ON procedure_activations (procedure_id, episode_id, person) WHERE episode_id IS NOT NULL;
CREATE INDEX procedure_activations_unscored ON procedure_activations (episode_id) WHERE outcome IS NULL;
CREATE INDEX procedure_activations_procedure ON procedure_activations (procedure_id, activated_at DESC);

ALTER TABLE working_memory_items ADD CONSTRAINT working_memory_items_procedure_fkey
    FOREIGN KEY (procedure_id) REFERENCES procedures (id) ON DELETE CASCADE;
CREATE INDEX working_memory_items_procedure ON working_memory_items (procedure_id) WHERE procedure_id IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- Writing them (the owner)
-- ---------------------------------------------------------------------------------------
-- A list argument: at most ten non-empty strings of at most 300 characters, trimmed.
CREATE FUNCTION dionysus_internal.procedure_list(items text[], arg text) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF items IS NULL THEN
        RETURN '{}';
    END IF;
    IF cardinality(items) > 10 OR EXISTS (SELECT 1 FROM unnest(items) x WHERE x IS NULL OR length(btrim(x)) NOT BETWEEN 1 AND 300) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": at most 10 non-empty strings of at most 300 characters', arg
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ARRAY(SELECT btrim(x) FROM unnest(items) x);
END $$;

-- What a procedure's embedding is of: what a situation calling for it would resemble.
CREATE FUNCTION dionysus_internal.procedure_text(name text, domain text, goals text[], core_patterns text[], core_concepts text[])
    RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT concat_ws('. ', name, domain, array_to_string(goals, '; '), array_to_string(core_patterns, '; '),
                     array_to_string(core_concepts, '; '))
$$;

-- Stores a procedure (owner only): for everyone (person NULL) or for one person. The same name
-- for the same person rewrites its definition and keeps its counts. Returns its id.
CREATE FUNCTION store_procedure(name text, goals text[], core_patterns text[], domain text DEFAULT NULL,
                                core_tools text[] DEFAULT '{}', core_concepts text[] DEFAULT '{}',
                                implementation_notes text[] DEFAULT '{}', person text DEFAULT NULL)
    RETURNS uuid LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    g text[] := dionysus_internal.procedure_list(goals, 'goals');
    p text[] := dionysus_internal.procedure_list(core_patterns, 'core_patterns');
    t text[] := dionysus_internal.procedure_list(core_tools, 'core_tools');
    c text[] := dionysus_internal.procedure_list(core_concepts, 'core_concepts');
    n text[] := dionysus_internal.procedure_list(implementation_notes, 'implementation_notes');
    key text;
    id uuid;
    e vector;
BEGIN
    IF name IS NULL OR length(btrim(name)) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "name": 1 to 200 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF domain IS NOT NULL AND length(btrim(domain)) NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "domain": 1 to 100 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF person IS NOT NULL AND length(btrim(person)) = 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(g) + cardinality(p) = 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "core_patterns": a procedure needs goals or core patterns' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    key := dionysus_internal.thread_key(name);
    e := dionysus.embed(dionysus_internal.procedure_text(btrim(name), btrim(domain), g, p, c));
    INSERT INTO dionysus.procedures AS x (person, name, name_key, domain, goals, core_patterns, core_tools, core_concepts,
                                          implementation_notes, embedding, model_key)
    VALUES (store_procedure.person, btrim(store_procedure.name), key, btrim(store_procedure.domain), g, p, t, c, n, e,
            dionysus_internal.store_model_key())
    ON CONFLICT ((coalesce(person, '')), name_key) WHERE status = 'active' DO UPDATE
       SET name = EXCLUDED.name, domain = EXCLUDED.domain, goals = EXCLUDED.goals, core_patterns = EXCLUDED.core_patterns,
           core_tools = EXCLUDED.core_tools, core_concepts = EXCLUDED.core_concepts, implementation_notes = EXCLUDED.implementation_notes,
           embedding = EXCLUDED.embedding, model_key = EXCLUDED.model_key, updated_at = dionysus.clock_now()
    RETURNING x.id INTO id;
    RETURN id;
END $$;

-- Retires a procedure (owner only): it is activated no more and leaves every working memory;
-- its record stays.
CREATE FUNCTION retire_procedure(procedure_id uuid) RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    hit uuid;
BEGIN
    IF procedure_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "procedure_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE dionysus.procedures p SET status = 'retired', updated_at = dionysus.clock_now()
     WHERE p.id = retire_procedure.procedure_id AND p.status = 'active' RETURNING p.id INTO hit;
    DELETE FROM dionysus.working_memory_items i WHERE i.procedure_id = hit;
    RETURN hit IS NOT NULL;
END $$;

-- ---------------------------------------------------------------------------------------
-- Activation
-- ---------------------------------------------------------------------------------------
-- Activates one procedure for a person: counted once per episode (a later activation in the
-- same episode only refreshes it in working memory), written down with how it came about, and
-- loaded into the working memory wm (when there is one) at the given relevance. The caller
-- holds the person's working-memory lock. Returns whether it was counted now.
CREATE FUNCTION dionysus_internal.procedure_activate(proc uuid, for_person text, wm dionysus.working_memories, turn uuid,
                                                     activated_how text, sim double precision, load_relevance double precision)
    RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    counted boolean;
BEGIN
    INSERT INTO dionysus.procedure_activations (procedure_id, person, episode_id, message_id, how, similarity)
    VALUES (proc, for_person, wm.episode_id, turn, activated_how, sim)
    ON CONFLICT (procedure_id, episode_id, person) WHERE episode_id IS NOT NULL DO NOTHING;
    counted := FOUND;
    IF counted THEN
        UPDATE dionysus.procedures p SET activation_count = p.activation_count + 1, last_activated = dionysus.clock_now()
         WHERE p.id = proc;
    END IF;
    IF wm.id IS NOT NULL THEN
        INSERT INTO dionysus.working_memory_items AS i (working_memory_id, kind, procedure_id, relevance, loaded_turn, last_turn)
        VALUES (wm.id, 'procedure', proc, load_relevance, wm.turns, wm.turns)
        ON CONFLICT (working_memory_id, ref_id) DO UPDATE
           SET relevance = greatest(i.relevance, EXCLUDED.relevance), uses = i.uses + 1, last_turn = EXCLUDED.last_turn;
    END IF;
    RETURN counted;
END $$;

-- A person's turn activates the procedures its meaning is near (working_memory_turn, under the
-- person's lock): theirs and everyone's, active, at least procedure_match_similarity, the
-- nearest procedure_match_max. Returns how many it activated.
CREATE FUNCTION dionysus_internal.match_procedures(m dionysus.messages, wm dionysus.working_memories) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    said vector;
    hit record;
    n integer := 0;
    near double precision := dionysus_internal.heartbeat_setting('procedure_match_similarity');
    most integer := dionysus_internal.heartbeat_setting('procedure_match_max')::int;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM dionysus.procedures p WHERE p.status = 'active' AND (p.person IS NULL OR p.person = m.person)) THEN
        RETURN 0; -- nothing to match: no vector read
    END IF;
    SELECT x.embedding INTO said FROM dionysus.memories x WHERE x.id = m.memory_id;
    IF said IS NULL THEN
        RETURN 0;
    END IF;
    -- The nearest, then activated in id order: procedure rows are locked by primary key (8).
    FOR hit IN
        WITH model AS (SELECT dionysus_internal.store_model_key() AS key),
        nearest AS (
            SELECT p.id, 1 - (e.v <=> said) AS sim
              FROM dionysus.procedures p CROSS JOIN model
             CROSS JOIN LATERAL (SELECT CASE WHEN p.model_key = model.key THEN p.embedding
                                             ELSE dionysus.embed(dionysus_internal.procedure_text(p.name, p.domain, p.goals, p.core_patterns, p.core_concepts))
                                        END AS v) e
             WHERE p.status = 'active' AND (p.person IS NULL OR p.person = m.person)
               AND 1 - (e.v <=> said) >= near
             ORDER BY 2 DESC, p.id
             LIMIT most)
        SELECT * FROM nearest ORDER BY id
    LOOP
        PERFORM dionysus_internal.procedure_activate(hit.id, m.person, wm, m.id, 'matched', hit.sim, hit.sim);
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

-- A procedure asked for by name (seed 002's activate_procedure): the person's own by that name,
-- else everyone's. It serves the turn's episode (the turn must be the person's), or without a
-- turn their most recent session; it enters that working memory at full relevance. P0002 when
-- no active procedure has that name for them. Returns the procedure with its counts.
CREATE FUNCTION activate_procedure(name text, person text, message_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    proc dionysus.procedures;
    turn dionysus.messages;
    ep uuid;
    wm dionysus.working_memories;
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "name": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO proc FROM dionysus.procedures p
     WHERE p.name_key = dionysus_internal.thread_key(activate_procedure.name) AND p.status = 'active'
       AND (p.person IS NULL OR p.person = activate_procedure.person)
     ORDER BY p.person IS NULL, p.id LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "name": no procedure % for %', name, person USING ERRCODE = 'no_data_found';
    END IF;
    IF message_id IS NOT NULL THEN
        SELECT * INTO turn FROM dionysus.messages x WHERE x.id = activate_procedure.message_id;
        IF NOT FOUND OR turn.person IS DISTINCT FROM activate_procedure.person THEN
            RAISE EXCEPTION 'dionysus: argument "message_id": the turn is not %''s', person USING ERRCODE = 'insufficient_privilege';
        END IF;
        ep := dionysus_internal.turn_episode(message_id, true);
    ELSE
        SELECT e.id INTO ep FROM dionysus.working_memories w JOIN dionysus.episodes e ON e.id = w.episode_id
         WHERE w.person = activate_procedure.person AND e.ended_at IS NULL
         ORDER BY w.last_turn_at DESC NULLS LAST, w.id LIMIT 1 FOR SHARE OF e;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.working_memory:' || person, 0));
    IF ep IS NOT NULL THEN
        wm := dionysus_internal.working_memory_of(person, ep);
    END IF;
    PERFORM dionysus_internal.procedure_activate(proc.id, person, wm, message_id, 'asked', NULL, 1.0);
    SELECT * INTO proc FROM dionysus.procedures p WHERE p.id = proc.id;
    RETURN dionysus_internal.procedure_json(proc) || jsonb_build_object('working_memory', wm.id IS NOT NULL);
END $$;

-- A procedure as a context and its reader show it.
CREATE FUNCTION dionysus_internal.procedure_json(p dionysus.procedures) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', p.id, 'name', p.name, 'domain', p.domain, 'goals', to_jsonb(p.goals),
                              'core_patterns', to_jsonb(p.core_patterns), 'core_tools', to_jsonb(p.core_tools),
                              'core_concepts', to_jsonb(p.core_concepts), 'implementation_notes', to_jsonb(p.implementation_notes),
                              'person', p.person, 'status', p.status, 'activations', p.activation_count,
                              'successes', p.success_count, 'failures', p.failure_count,
                              'effectiveness', round(p.effectiveness::numeric, 3), 'last_activated', p.last_activated)
$$;

-- The procedures a person may be served (theirs and everyone's), the most effective first.
CREATE FUNCTION person_procedures(for_person text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF for_person IS NULL OR btrim(for_person) = '' THEN
        RAISE EXCEPTION 'dionysus: argument "for_person" must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN (SELECT coalesce(jsonb_agg(dionysus_internal.procedure_json(p) ORDER BY p.effectiveness DESC, p.activation_count DESC, p.name), '[]')
              FROM dionysus.procedures p
             WHERE p.status = 'active' AND (p.person IS NULL OR p.person = for_person));
END $$;

-- ---------------------------------------------------------------------------------------
-- Effectiveness: an episode's outcome scores the procedures it activated (024's
-- store_episode_outcome), each once.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.score_procedures(episode_id uuid, outcome text) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    -- Procedure rows by primary key (8), before they are counted.
    PERFORM 1 FROM dionysus.procedures p
     WHERE p.id IN (SELECT a.procedure_id FROM dionysus.procedure_activations a
                     WHERE a.episode_id = score_procedures.episode_id AND a.outcome IS NULL)
     ORDER BY p.id FOR NO KEY UPDATE;
    WITH scored AS (
        UPDATE dionysus.procedure_activations a SET outcome = score_procedures.outcome, scored_at = dionysus.clock_now()
         WHERE a.episode_id = score_procedures.episode_id AND a.outcome IS NULL
        RETURNING a.procedure_id),
    once AS (SELECT DISTINCT s.procedure_id FROM scored s)
    UPDATE dionysus.procedures p
       SET success_count = p.success_count + (score_procedures.outcome = 'success')::int,
           failure_count = p.failure_count + (score_procedures.outcome = 'failure')::int,
           updated_at = dionysus.clock_now()
      FROM once WHERE p.id = once.procedure_id;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

-- ---------------------------------------------------------------------------------------
-- Unified recall (seed 002): one list, ranked by score, each with its kind. Memories and
-- facts score as recall scores them; procedures, censors and episode summaries are found by
-- meaning alone and score as recall would score a memory with only that evidence
-- (weight_vector · similarity). Only what the person may see: their memories (recall's rule),
-- their procedures and censors and everyone's, the episodes they alone took part in; with
-- person NULL, only what is nobody's in particular.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION recall_all(query text, k integer DEFAULT 10, person text DEFAULT NULL)
    RETURNS TABLE (kind text, id uuid, content text, score double precision, detail jsonb)
    LANGUAGE plpgsql AS $$
DECLARE
    q vector;
    w double precision := coalesce((SELECT c.value FROM dionysus.recall_config c WHERE c.key = 'weight_vector'), 1.0);
BEGIN
    IF query IS NULL OR btrim(query) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "query": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF k IS NULL OR k < 1 OR k > 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "k": % is outside [1, 100]', k USING ERRCODE = 'invalid_parameter_value';
    END IF;
    q := dionysus.embed(query);
    RETURN QUERY
    WITH model AS (SELECT dionysus_internal.store_model_key() AS key),
    mems AS (
        SELECT CASE WHEN f.memory_id IS NOT NULL THEN 'fact' ELSE 'memory' END AS kind, r.memory_id AS id, r.content, r.score,
               jsonb_build_object('type', r.type, 'found_by', r.found_by, 'created_at', r.created_at, 'subject', f.subject) AS detail
          FROM dionysus.recall(query, k, person => recall_all.person) r
          LEFT JOIN dionysus.facts f ON f.memory_id = r.memory_id),
    procs AS (
        SELECT 'procedure'::text, p.id, p.name || coalesce(': ' || array_to_string(p.goals, '; '), ''),
               w * (1 - (e.v <=> q)), dionysus_internal.procedure_json(p)
          FROM dionysus.procedures p CROSS JOIN model
         CROSS JOIN LATERAL (SELECT CASE WHEN p.model_key = model.key THEN p.embedding
                                         ELSE dionysus.embed(dionysus_internal.procedure_text(p.name, p.domain, p.goals, p.core_patterns, p.core_concepts))
                                    END AS v) e
         WHERE p.status = 'active' AND (p.person IS NULL OR p.person = recall_all.person)
         ORDER BY e.v <=> q, p.id LIMIT k),
    cens AS (
        SELECT 'censor'::text, c.id, c.trigger, w * (1 - (e.v <=> q)),
               jsonb_build_object('severity', c.severity, 'reason', c.reason, 'personal', c.person IS NOT NULL)
          FROM dionysus.censors c CROSS JOIN model
         CROSS JOIN LATERAL (SELECT CASE WHEN c.model_key = model.key THEN c.embedding ELSE dionysus.embed(c.trigger) END AS v) e
         WHERE c.status = 'active' AND NOT c.any_content AND (c.person IS NULL OR c.person = recall_all.person)
         ORDER BY e.v <=> q, c.id LIMIT k),
    eps AS (
        SELECT 'episode'::text, x.id, x.summary, w * (1 - (x.summary_embedding <=> q)),
               jsonb_build_object('started_at', x.started_at, 'ended_at', x.ended_at, 'outcome', x.outcome, 'lessons', to_jsonb(x.lessons))
          FROM dionysus.episodes x
         WHERE recall_all.person IS NOT NULL AND x.summary_embedding IS NOT NULL
           AND x.participants = ARRAY[recall_all.person]
         ORDER BY x.summary_embedding <=> q, x.id LIMIT k)
    SELECT u.kind, u.id, u.content, u.score, u.detail
      FROM (SELECT * FROM mems UNION ALL SELECT * FROM procs UNION ALL SELECT * FROM cens UNION ALL SELECT * FROM eps) u
     ORDER BY u.score DESC, u.kind, u.id
     LIMIT k;
END $$;

-- ---------------------------------------------------------------------------------------
-- An episode's outcome scores its procedures (sql/024_episodes.sql)
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION dionysus_internal.store_episode_outcome(w dionysus.work_queue, v jsonb) RETURNS jsonb
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

-- ---------------------------------------------------------------------------------------
-- A censor's hours are judged when a message is sent too (sql/009_outbox.sql)
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION dionysus_internal.held_at_this_hour(content text, person text) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF person IS NULL OR NOT EXISTS (SELECT 1 FROM dionysus.censors c
                                      WHERE c.status = 'active' AND c.from_hour IS NOT NULL
                                        AND (c.person IS NULL OR c.person = held_at_this_hour.person)
                                        AND (c.kinds IS NULL OR 'reach_out' = ANY (c.kinds))) THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM dionysus.check_censors(content, 'reach_out', person) h
                     JOIN dionysus.censors c ON c.id = h.censor_id
                    WHERE h.action = 'block' AND c.from_hour IS NOT NULL);
END $$;

CREATE OR REPLACE FUNCTION reserve_outbox(worker text, platform text, max_items integer DEFAULT 1) RETURNS SETOF outbox
    LANGUAGE plpgsql AS $$
DECLARE
    x dionysus.outbox;
    n integer := 0;
    waiting constant text := 'waiting: a censor holds at this hour';
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
    -- Oldest first; rows are locked as they are read, so a message held by its hour does not
    -- keep the ones behind it waiting.
    FOR x IN SELECT * FROM dionysus.outbox o
              WHERE o.status = 'pending' AND o.audience = 'user' AND (NOT o.requires_approval OR o.approved_at IS NOT NULL)
                AND (o.platform IS NULL OR o.platform = reserve_outbox.platform)
                AND (o.reserved_until IS NULL OR o.reserved_until < now())
              ORDER BY o.created_at, o.id FOR UPDATE SKIP LOCKED LOOP
        IF x.reply_to IS NULL AND dionysus_internal.held_at_this_hour(x.content, x.person) THEN
            -- Written down once, with what held it; sent when the hour has passed.
            IF x.last_error IS DISTINCT FROM waiting THEN
                UPDATE dionysus.outbox o SET last_error = waiting WHERE o.id = x.id;
            END IF;
            CONTINUE;
        END IF;
        -- A message for nobody in particular (the home channel) takes the platform that sends it.
        RETURN QUERY
        UPDATE dionysus.outbox o SET reserved_by = reserve_outbox.worker, reserved_until = now() + dionysus_internal.outbox_lease(),
               platform = coalesce(o.platform, reserve_outbox.platform),
               last_error = CASE WHEN o.last_error = waiting THEN NULL ELSE o.last_error END
         WHERE o.id = x.id
        RETURNING o.*;
        n := n + 1;
        EXIT WHEN n >= max_items;
    END LOOP;
END $$;

-- ---------------------------------------------------------------------------------------
-- complete_work stores a turn's focus and threads, and tells a censored reach-out's heartbeat
-- that nothing was sent (sql/007_work_queue.sql)
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION complete_work(work_id uuid, result jsonb DEFAULT '{}', lease uuid DEFAULT NULL) RETURNS jsonb
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
        IF key NOT IN ('memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts',
                       'episode_summary', 'message', 'summary', 'basis', 'person', 'maintenance', 'objectives', 'dream',
                       'levels', 'people', 'relations', 'episode', 'focus', 'threads') THEN
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
    -- A turn read again by a re-index (020): staged for the swap, nothing applied now.
    IF w.action = 'reindex_message' THEN
        made := dionysus_internal.reindex_stage(w, result);
        UPDATE dionysus.work_queue SET status = 'done', completed_at = now(), lease_until = NULL,
               result = complete_work.result || jsonb_build_object('applied', made)
         WHERE id = w.id;
        RETURN made;
    END IF;
    privacy := CASE WHEN w.params ->> 'person' IS NOT NULL THEN ARRAY[w.params ->> 'person'] END;
    privacy := dionysus_internal.privacy_union(privacy, (SELECT h.private_to FROM dionysus.heartbeat_log h WHERE h.id = w.heartbeat_id));
    privacy := dionysus_internal.privacy_union(privacy, dionysus_internal.memory_privacy(
                   ARRAY(SELECT (b #>> '{}')::uuid FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b)));
    from_web := w.action IN ('inquire_shallow', 'inquire_deep');
    -- A turn of an imported history (018): what it asked was asked of someone else, not of us (no
    -- goals), and what it aimed at more than 30 days ago is the person's past: it neither adds
    -- objectives nor moves the ones they have now.
    IF w.action = 'extract_message' THEN
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
        IF w.action <> 'extract_message' OR w.params ->> 'person' IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.people": only the extraction of a person''s turn carries people or relations'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        made := made || dionysus_internal.store_people(w.params ->> 'person', coalesce(result -> 'people', '[]'),
                                                       coalesce(result -> 'relations', '[]'), (w.params ->> 'message_id')::uuid);
    END IF;
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
        IF w.action <> 'extract_message' OR w.params ->> 'person' IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.objectives": only the extraction of a person''s turn carries them'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR item IN SELECT * FROM jsonb_array_elements(result -> 'objectives') LOOP
            new_id := dionysus_internal.note_objective(w.params ->> 'person', item ->> 'description',
                                                       (item ->> 'saliency')::float8, item ->> 'status', (w.params ->> 'message_id')::uuid);
            IF new_id IS NOT NULL THEN
                made := made || jsonb_build_object('objectives', coalesce(made -> 'objectives', '[]'::jsonb) || to_jsonb(new_id));
            END IF;
        END LOOP;
    END IF;
    IF result ? 'dream' THEN
        IF w.action <> 'dream' OR (w.params ->> 'dream_id') IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.dream": only a dream item carries one' USING ERRCODE = 'invalid_parameter_value';
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
    IF w.action IN ('reach_out_user', 'reach_out_public') THEN
        IF coalesce(btrim(result ->> 'message'), '') = '' THEN
            RAISE EXCEPTION 'dionysus: argument "result.message": a reach-out needs the message to send'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF dionysus_internal.web_only_basis(result ->> 'message') THEN
            RAISE EXCEPTION 'dionysus: reach-out refused: web content is its only basis' USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF w.action = 'reach_out_user' THEN
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
            VALUES (w.id, CASE w.action WHEN 'reach_out_user' THEN 'user' ELSE 'public' END, result ->> 'message',
                    w.action = 'reach_out_public', target ->> 'person', target ->> 'platform')
            RETURNING id INTO msg_id;
            made := made || jsonb_build_object('outbox_id', msg_id);
            IF w.action = 'reach_out_user' THEN
                PERFORM pg_notify('dionysus_outbox', msg_id::text);
            END IF;
        END IF;
    END IF;
    -- The session's focus and the threads the turn opened or closed (025), last: the person's
    -- working-memory lock comes after every other lock (002's order).
    IF result ? 'focus' OR result ? 'threads' THEN
        IF w.action <> 'extract_message' OR w.params ->> 'person' IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.threads": only the extraction of a person''s turn carries a focus or threads'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
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

-- ---------------------------------------------------------------------------------------
-- chat_context steps and returns the session's working memory (sql/012_conversation.sql)
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION chat_context(message_id uuid, max_memories integer DEFAULT 8, max_turns integer DEFAULT 12,
                             use_archetype boolean DEFAULT true)
    RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    m dionysus.messages;
    turns jsonb;
    in_view uuid[];
    mems jsonb;
    words text[];
    grams text[];
    ents uuid[];
    trips jsonb;
    viewer text;
    shape jsonb;
    threshold double precision;
    depth integer := 1;
    hop integer;
    wmem jsonb;
    -- A context with memories is a turn of the conversation (the extraction's asks for none),
    -- whatever an archetype narrows them to.
    steps boolean := coalesce(max_memories, 0) > 0;
BEGIN
    IF message_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "message_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF max_memories IS NULL OR max_memories < 0 OR max_memories > 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_memories": % is outside [0, 100]', max_memories USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_turns IS NULL OR max_turns < 0 OR max_turns > 200 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_turns": % is outside [0, 200]', max_turns USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO m FROM dionysus.messages x WHERE x.id = chat_context.message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "message_id": no message with id %', message_id USING ERRCODE = 'no_data_found';
    END IF;
    viewer := coalesce(m.person, 'nobody:');
    -- The kind of message decides the shape of its context (017): its archetype's turns,
    -- memories, similarity threshold and triple depth, within the arguments (the operator's
    -- caps); the arguments alone when no archetype is near enough.
    IF use_archetype THEN
        shape := dionysus.match_archetype((SELECT x.embedding FROM dionysus.memories x WHERE x.id = m.memory_id));
        IF shape ->> 'name' IS NOT NULL THEN
            max_turns := least(max_turns, (shape ->> 'turns')::int);
            max_memories := least(max_memories, (shape ->> 'memories')::int);
            threshold := (shape ->> 'similarity_threshold')::float8;
            depth := (shape ->> 'triple_depth')::int;
        END IF;
    END IF;

    -- The turns before it in its channel: a lived turn's are the lived ones and its person's own
    -- imported history; an imported turn's, its person's imported turns only (another person's
    -- import may use the same channel name). Someone else's words in a history are marked so.
    SELECT coalesce(jsonb_agg(jsonb_build_object('role', CASE WHEN t.is_bot THEN 'assistant' WHEN t.other THEN 'other' ELSE 'user' END,
                                                 'content', t.content, 'at', t.created_at, 'proactive', t.is_proactive)
                              ORDER BY t.created_at, t.id), '[]'::jsonb),
           array_agg(t.memory_id) FILTER (WHERE t.memory_id IS NOT NULL)
      INTO turns, in_view
      FROM (SELECT x.id, x.is_bot, x.created_at, x.is_proactive, x.memory_id,
                   CASE WHEN x.import_id IS NULL THEN x.content ELSE coalesce(mm.content, x.content) END AS content,
                   x.import_id IS NOT NULL AND mm.metadata ->> 'role' = 'other' AS other
              FROM dionysus.messages x
              LEFT JOIN dionysus.memories mm ON x.import_id IS NOT NULL AND mm.id = x.memory_id
             WHERE x.platform = m.platform AND x.channel_id = m.channel_id AND x.id <> m.id
               AND (x.created_at, x.id) < (m.created_at, m.id)
               AND ((x.import_id IS NULL AND m.import_id IS NULL) OR (x.import_id IS NOT NULL AND x.person = m.person))
             ORDER BY x.created_at DESC, x.id DESC LIMIT max_turns) t;
    in_view := coalesce(in_view, '{}') || m.memory_id;

    IF max_memories > 0 THEN
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', r.memory_id, 'content', r.content, 'type', r.type, 'created_at', r.created_at,
                   'score', round(r.score::numeric, 4), 'found_by', r.found_by,
                   'fact', f.memory_id IS NOT NULL, 'subject', f.subject,
                   'role', x.role) ORDER BY r.score DESC), '[]'::jsonb)
          INTO mems
          FROM (SELECT * FROM dionysus.recall(m.content, max_memories + cardinality(in_view), person => viewer)
                 WHERE NOT (memory_id = ANY(in_view))
                   -- What meaning alone found must be near enough; what words or links found stays.
                   AND (threshold IS NULL OR found_by <> 'vector' OR vector_score >= threshold)
                 ORDER BY score DESC LIMIT max_memories) r
          LEFT JOIN dionysus.facts f ON f.memory_id = r.memory_id
          LEFT JOIN LATERAL (SELECT CASE WHEN y.is_bot THEN 'assistant' ELSE 'user' END AS role
                               FROM dionysus.messages y WHERE y.memory_id = r.memory_id LIMIT 1) x ON true;
    ELSE
        mems := '[]'::jsonb;
    END IF;
    -- The session's working memory (025): a context with memories is a turn of the conversation
    -- and steps it; the extraction's (no memories) only reads it.
    wmem := dionysus_internal.working_memory_turn(m, mems, in_view, steps);

    -- Entities named in the message: its words, word pairs and triples, matched against the
    -- entities' normalised names; plus the subjects of recalled facts, and the person.
    words := array(SELECT w FROM regexp_split_to_table(lower(m.content), '[^[:alnum:]_''-]+') w WHERE w <> '');
    grams := words
          || array(SELECT words[i] || ' ' || words[i + 1] FROM generate_series(1, cardinality(words) - 1) i)
          || array(SELECT words[i] || ' ' || words[i + 1] || ' ' || words[i + 2] FROM generate_series(1, cardinality(words) - 2) i)
          || array(SELECT lower(btrim(e ->> 'subject')) FROM jsonb_array_elements(mems) e WHERE e ->> 'subject' IS NOT NULL)
          || ARRAY['user'];
    ents := array(SELECT id FROM dionysus.entities WHERE name_key = ANY(grams));
    -- Deeper archetypes follow the graph further: each hop adds the other ends of the triples found.
    FOR hop IN 2..depth LOOP
        ents := ents || array(SELECT DISTINCT CASE WHEN t.subject_id = ANY(ents) THEN t.object_id ELSE t.subject_id END
                                FROM dionysus.triples t
                               WHERE (t.subject_id = ANY(ents) OR t.object_id = ANY(ents)) AND dionysus_internal.visible_to(t.private_to, viewer)
                               LIMIT 50);
    END LOOP;
    IF depth = 0 THEN
        ents := '{}';
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_build_object('subject', s.name, 'predicate', t.predicate, 'object', o.name,
                                                 'confidence', t.confidence) ORDER BY t.confidence DESC, t.updated_at DESC), '[]'::jsonb)
      INTO trips
      FROM (SELECT * FROM dionysus.triples
             WHERE (subject_id = ANY(ents) OR object_id = ANY(ents)) AND dionysus_internal.visible_to(private_to, viewer)
             ORDER BY confidence DESC, updated_at DESC LIMIT 20) t
      JOIN dionysus.entities s ON s.id = t.subject_id JOIN dionysus.entities o ON o.id = t.object_id;

    RETURN jsonb_build_object(
        'message', jsonb_build_object('id', m.id, 'content', m.content, 'at', m.created_at, 'channel_id', m.channel_id,
                                      'platform', m.platform, 'person', m.person),
        'now', now(),
        'recent_turns', turns,
        'memories', mems,
        'triples', trips,
        -- The people in their life the message names, with how they relate (023_people.sql).
        'people', CASE WHEN m.person IS NULL THEN '[]'::jsonb ELSE dionysus_internal.people_in_context(m.person, grams) END,
        'goals', coalesce((SELECT jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title) ORDER BY g.last_touched DESC)
                             FROM dionysus.goals g WHERE g.priority = 'active' AND dionysus_internal.visible_to(g.private_to, viewer)),
                          '[]'::jsonb),
        -- What matters most to them (017), in every context; and what they are working toward.
        'north_stars', coalesce((SELECT jsonb_agg(n.content ORDER BY n.created_at) FROM dionysus.person_north_stars(viewer) n), '[]'::jsonb),
        'objectives', coalesce((SELECT jsonb_agg(jsonb_build_object('description', o.description, 'saliency', round(o.saliency::numeric, 2)))
                                  FROM (SELECT * FROM dionysus.person_objectives(viewer) LIMIT 5) o), '[]'::jsonb),
        'archetype', shape,
        -- What this session holds in mind: its focus, open threads, and what earlier turns
        -- brought up that this one did not (NULL outside a person's open session).
        'working_memory', wmem);
END $$;

-- ---------------------------------------------------------------------------------------
-- As sql/900_api.sql: search paths, comments, the driver's role
-- ---------------------------------------------------------------------------------------
DO $$
DECLARE
    vschema text := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'vector');
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['dionysus.chat_context(uuid, integer, integer, boolean)',
                             'dionysus_internal.store_working_focus(text, uuid, jsonb, jsonb)',
                             'dionysus_internal.match_procedures(dionysus.messages, dionysus.working_memories)',
                             'dionysus.recall_all(text, integer, text)',
                             'dionysus.store_procedure(text, text[], text[], text, text[], text[], text[], text)'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, dionysus, %I', f, vschema);
    END LOOP;
END $$;

COMMENT ON FUNCTION reserve_outbox(text, text, integer) IS
    'Reserves up to max_items deliverable messages of a platform for a worker (a lease, committed at once; nothing stays locked '
    'while the platform is called). Reservations that lapsed are taken again. A message Dionysus starts that a censor with hours '
    'blocks now waits (last_error says so) and goes once the hours have passed.';
COMMENT ON FUNCTION dionysus_internal.held_at_this_hour(text, text) IS
    'Whether a censor with hours (the person''s or everyone''s, watching reach-outs) blocks these words for this person now, in their own time; false at once when they have none.';
COMMENT ON FUNCTION complete_work(uuid, jsonb, uuid) IS
    'Applies a claimed work item''s result (memories, facts, triples, goals, goal_progress, identity, worldview, concepts, '
    'episode_summary, message, summary; basis: the memory ids the model was shown; person: whom a reach-out is for; objectives: the person''s, '
    'from their turn''s extraction; people and relations: the people in their life the turn speaks of; focus and threads: their session''s focus and the threads the turn opened or closed; dream: a dream''s proposals, stored pending) and marks it done, '
    'in one transaction. What it writes is as private as the item''s person, its heartbeat''s context and the basis; what an inquiry '
    'brought is stored as web content; a reach-out that drew on someone else''s private words, or only on the web, is refused (42501). '
    'Completing again returns the first summary and repeats nothing. With lease (the claim''s lease_token), only its holder may: '
    'a driver whose lease lapsed and whose item was claimed again gets 55000.';
COMMENT ON FUNCTION chat_context(uuid, integer, integer, boolean) IS
    'Everything a reply needs: the last turns of the channel, recalled memories (turns in view left out; facts marked), '
    'triples about the entities named and the person, the people in their life it names with how they relate (people), the active goals, the person''s north stars and objectives; only what the message''s person may see. '
    'With use_archetype, the nearest context archetype sets the turns, memories, similarity threshold and triple depth (reported as archetype), '
    'within max_memories and max_turns (which alone apply when no archetype is near enough). '
    'working_memory: the session''s focus, open threads and what earlier turns brought up (a context with memories steps it once per turn; NULL outside a person''s open session).';
COMMENT ON FUNCTION dionysus_internal.heartbeat_config_check() IS 'Trigger: heartbeat_config values must be finite numbers >= 0 (carry_over, the working-memory decay and floor and procedure_match_similarity within [0, 1]; working_memory_capacity a whole number within [1, 200], procedure_match_max within [0, 10]).';
COMMENT ON FUNCTION dionysus_internal.store_episode_outcome(dionysus.work_queue, jsonb) IS
    'complete_work''s result.episode of a summarize_episode item: participants (the episode''s people), outcome, surprise, lessons; a failure proposes its censors.';
-- Working memory (025).
COMMENT ON TABLE open_threads IS 'What a person''s conversations left unresolved (the extraction''s threads.opened), theirs until a turn or the person closes it; carried into their next session while younger than open_thread_days.';
COMMENT ON TABLE working_memories IS 'One per person per open conversation episode: focus, turns stepped, the last turn, evictions. Cleared when the episode closes (its record goes to working_memory_sessions).';
COMMENT ON TABLE working_memory_items IS 'What a working memory holds: memories and facts recall brought up, and open threads, each with a relevance that fades every turn that does not bring it up again; capacity-limited, the least relevant leaves first.';
COMMENT ON TABLE working_memory_sessions IS 'The record of each cleared working memory: focus, turns, the items it held at the end (kind, id, relevance, uses), the threads left open, evictions.';
COMMENT ON FUNCTION dionysus_internal.thread_key(text) IS 'A thread''s words lower-cased with punctuation and spacing folded: the same words are the same thread.';
COMMENT ON FUNCTION dionysus_internal.turn_episode(uuid, boolean) IS 'The open episode a turn belongs to, or NULL; with lock, its row FOR SHARE (a close waits for the turn''s working memory, and clears it).';
COMMENT ON FUNCTION dionysus_internal.working_memory_of(text, uuid) IS 'A person''s working memory of an episode, begun when missing with the threads their last sessions left open (at most five); the caller holds their working-memory lock.';
COMMENT ON FUNCTION dionysus_internal.working_memory_evict(uuid) IS 'Drops what fell below working_memory_min_relevance, then the least relevant past working_memory_capacity; counts them; returns how many left.';
COMMENT ON FUNCTION dionysus_internal.working_memory_json(dionysus.working_memories, uuid[]) IS 'A working memory as a context shows it: focus, turn, evictions, open threads, and the items not in view (active, still the person''s to see), most relevant first.';
COMMENT ON FUNCTION dionysus_internal.working_memory_turn(dionysus.messages, jsonb, uuid[], boolean) IS
    'chat_context''s step: a person''s lived turn in an open episode moves their working memory once (what recall found enters or is refreshed, the rest fades, the least relevant leave) and returns it; moves = false or a standby only reads; NULL without a session.';
COMMENT ON FUNCTION dionysus_internal.store_working_focus(text, uuid, jsonb, jsonb) IS
    'complete_work''s result.focus and result.threads ({opened, closed}: at most five strings each) of a person''s turn (which must be theirs, 42501): threads closed by their words or the nearest open one (0.8), opened (the same thread touched at 0.85), the session''s focus set; an imported turn has none.';
COMMENT ON FUNCTION dionysus_internal.end_working_memories() IS 'Trigger: an episode that closes clears its working memories, each recorded in working_memory_sessions first (open threads stay open).';
COMMENT ON FUNCTION working_memory(text) IS 'A person''s working memories now (one per open conversation): focus, turn, open threads and items, most relevant first. Theirs only.';
COMMENT ON FUNCTION person_open_threads(text) IS 'The threads still open with a person, the most recently touched first.';
COMMENT ON FUNCTION close_open_thread(text, uuid) IS 'The person''s word closes one of their open threads (it leaves their working memories); false when it is not theirs or not open.';

-- Procedures (026).
COMMENT ON TABLE procedures IS 'How-to knowledge (seed 002''s K-lines): name, domain, goals (upper fringe), core patterns, tools and concepts, implementation notes (lower fringe), for everyone or one person; activation, success and failure counts and effectiveness ((successes + 1) / (successes + failures + 2)).';
COMMENT ON TABLE procedure_activations IS 'Every activation of a procedure: for whom, in which episode and turn, how (matched by meaning or asked for), its similarity, and the episode''s outcome once known. Once per procedure, episode and person.';
COMMENT ON FUNCTION dionysus_internal.procedure_list(text[], text) IS 'A procedure''s list argument: at most 10 non-empty strings of at most 300 characters, trimmed (22023 naming it otherwise).';
COMMENT ON FUNCTION dionysus_internal.procedure_text(text, text, text[], text[], text[]) IS 'What a procedure''s embedding is of: name, domain, goals, core patterns and concepts.';
COMMENT ON FUNCTION store_procedure(text, text[], text[], text, text[], text[], text[], text) IS
    'Owner only: stores a procedure for everyone (person NULL) or one person; the same name for the same person rewrites its definition and keeps its counts. Needs goals or core patterns. Returns its id.';
COMMENT ON FUNCTION retire_procedure(uuid) IS 'Owner only: a procedure is activated no more and leaves every working memory; its record stays. False when it was not active.';
COMMENT ON FUNCTION dionysus_internal.procedure_activate(uuid, text, dionysus.working_memories, uuid, text, double precision, double precision) IS
    'Activates a procedure for a person: counted and recorded once per episode, loaded into the working memory given; the caller holds the person''s working-memory lock. True when counted now.';
COMMENT ON FUNCTION dionysus_internal.match_procedures(dionysus.messages, dionysus.working_memories) IS
    'The procedures a person''s turn calls for by meaning (theirs and everyone''s, at least procedure_match_similarity, the nearest procedure_match_max), activated into their working memory; returns how many.';
COMMENT ON FUNCTION activate_procedure(text, text, uuid) IS
    'Seed 002''s activate_procedure: the person''s own procedure by that name, else everyone''s, activated for the turn''s episode (the turn must be theirs, 42501) or their latest session, at full relevance in its working memory. P0002 when there is none. Returns it with its counts.';
COMMENT ON FUNCTION dionysus_internal.procedure_json(dionysus.procedures) IS 'A procedure as contexts and readers show it: its bands, counts and effectiveness.';
COMMENT ON FUNCTION person_procedures(text) IS 'The procedures a person may be served (theirs and everyone''s, active), the most effective first.';
COMMENT ON FUNCTION dionysus_internal.score_procedures(uuid, text) IS 'An episode''s outcome scores the procedures it activated, each once (success or failure; mixed and neutral count neither); returns how many.';
COMMENT ON FUNCTION recall_all(text, integer, text) IS
    'Seed 002''s unified recall: memories and facts (as recall scores them), procedures, censors and the person''s own episode summaries (weight_vector · similarity: found by meaning alone), one list ranked by score with kind and detail; only what the person may see.';

GRANT SELECT, INSERT, UPDATE ON open_threads, working_memories, working_memory_items, working_memory_sessions,
    procedures, procedure_activations TO dionysus_driver;
GRANT EXECUTE ON FUNCTION dionysus_internal.thread_key(text), dionysus_internal.turn_episode(uuid, boolean), dionysus_internal.working_memory_of(text, uuid), dionysus_internal.working_memory_evict(uuid), dionysus_internal.working_memory_json(dionysus.working_memories, uuid[]), dionysus_internal.working_memory_turn(dionysus.messages, jsonb, uuid[], boolean), dionysus_internal.store_working_focus(text, uuid, jsonb, jsonb), dionysus_internal.end_working_memories(), working_memory(text), person_open_threads(text), close_open_thread(text, uuid), dionysus_internal.procedure_list(text[], text), dionysus_internal.procedure_text(text, text, text[], text[], text[]), dionysus_internal.procedure_activate(uuid, text, dionysus.working_memories, uuid, text, double precision, double precision), dionysus_internal.match_procedures(dionysus.messages, dionysus.working_memories), activate_procedure(text, text, uuid), dionysus_internal.procedure_json(dionysus.procedures), person_procedures(text), dionysus_internal.score_procedures(uuid, text), recall_all(text, integer, text), dionysus_internal.held_at_this_hour(text, text) TO dionysus_driver;
-- Working memory: written through chat_context and complete_work; whose a row is, and what a
-- session record says, are fixed when written.
GRANT DELETE ON working_memories, working_memory_items TO dionysus_driver;
REVOKE UPDATE ON working_memories, working_memory_items, open_threads, working_memory_sessions FROM dionysus_driver;
GRANT UPDATE (focus, focus_at, turns, last_message_id, last_turn_at, evicted) ON working_memories TO dionysus_driver;
GRANT UPDATE (relevance, uses, last_turn) ON working_memory_items TO dionysus_driver;
GRANT UPDATE (status, touched_at, closed_at, closed_by) ON open_threads TO dionysus_driver;
-- Procedures: the owner writes and retires them; the driver's calls activate and score them.
REVOKE INSERT, UPDATE ON procedures FROM dionysus_driver;
GRANT UPDATE (activation_count, success_count, failure_count, last_activated, updated_at) ON procedures TO dionysus_driver;
REVOKE UPDATE ON procedure_activations FROM dionysus_driver;
GRANT UPDATE (outcome, scored_at) ON procedure_activations TO dionysus_driver;
REVOKE EXECUTE ON FUNCTION store_procedure(text, text[], text[], text, text[], text[], text[], text), retire_procedure(uuid)
    FROM PUBLIC, dionysus_driver;
