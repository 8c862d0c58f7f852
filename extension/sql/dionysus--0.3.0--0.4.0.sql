-- Dionysus 0.3.0 → 0.4.0: memory for other agents (016_agents.sql, behind `dionysus mcp`) and
-- the alignment loop (017_alignment.sql: north stars, invisible feedback, the person's
-- objectives, context archetypes, the nightly dream and its proposals). Every row is kept.
-- chat_context gains use_archetype (the extraction asks for its fixed shape); the driver's
-- role may no longer rewrite whom a memory is private to.

DROP FUNCTION chat_context(uuid, integer, integer);


-- ---------------------------------------------------------------------------------------
-- A new organ, created whole as sql/016_agents.sql has it
-- ---------------------------------------------------------------------------------------

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

CREATE FUNCTION forget_own(person text, memory_id uuid) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- The row is locked before it is checked, so what is checked is what is deleted.
    PERFORM 1 FROM dionysus.memories m WHERE m.id = forget_own.memory_id FOR UPDATE;
    PERFORM dionysus_internal.require_own_memory(person, memory_id);
    RETURN dionysus.forget(memory_id);
END $$;
REVOKE EXECUTE ON FUNCTION forget_own(text, uuid) FROM PUBLIC;

CREATE FUNCTION supersede_own(person text, memory_id uuid, new_content text, importance double precision DEFAULT NULL,
                              confidence double precision DEFAULT NULL, source text DEFAULT NULL)
    RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus_internal.require_own_memory(person, memory_id);
    RETURN dionysus.supersede(memory_id, new_content, importance => importance, confidence => confidence, source => source);
END $$;

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

-- ---------------------------------------------------------------------------------------
-- A new organ, created whole as sql/017_alignment.sql has it
-- ---------------------------------------------------------------------------------------

-- The alignment loop (seed 004 §3 step 2, §4.2–4.3, §5): north stars, invisible feedback, the
-- person's objectives, context archetypes, and the nightly dream whose proposals wait for
-- the person's approval.
--
-- Principles kept here: the visible conversation is never polluted with feedback (feedback
-- lives in its own table, never in the message log); everything that can evolve is data
-- (cue phrases, archetypes, templates); nothing the system proposes about itself takes effect
-- until the person approves it (approve_proposal), and any template version can come back in
-- one call (activate_prompt_template).
--
-- Locks: set_north_star takes the person's north-star advisory lock (6) before learn's (7); approve_proposal
-- locks the proposal (5) before set_prompt_template's per-key advisory lock.

-- ---------------------------------------------------------------------------------------
-- Cue phrases: cheap recognition before any model is asked. Data, so they can evolve.
-- ---------------------------------------------------------------------------------------
CREATE TABLE cue_phrases (
    kind    text NOT NULL CHECK (kind IN ('north_star_explicit', 'north_star_maybe')),
    pattern text NOT NULL CHECK (length(btrim(pattern)) > 0),
    note    text,
    PRIMARY KEY (kind, pattern)
);
-- A pattern must be a valid case-insensitive regular expression.
CREATE FUNCTION dionysus_internal.cue_phrase_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM '' ~* NEW.pattern;
    RETURN NEW;
EXCEPTION WHEN invalid_regular_expression THEN
    RAISE EXCEPTION 'dionysus: invalid argument "pattern": % is not a valid regular expression', quote_literal(NEW.pattern)
        USING ERRCODE = 'invalid_parameter_value';
END $$;
CREATE TRIGGER cue_phrases_check BEFORE INSERT OR UPDATE ON cue_phrases FOR EACH ROW EXECUTE FUNCTION dionysus_internal.cue_phrase_check();
INSERT INTO cue_phrases (kind, pattern, note) VALUES
    ('north_star_explicit', '^\s*(/north_?star|north[ -]?star)\s*[:—–-]\s*', 'the explicit prefix: "North star: …", "/northstar …"'),
    ('north_star_maybe', '\mmy north[ -]?star\M', 'named in passing'),
    ('north_star_maybe', '\m(what|the thing that) matters most (to me|in my life)\M', NULL),
    ('north_star_maybe', '\mmost important thing (to|for) me\M', NULL),
    ('north_star_maybe', '\mmy (main|biggest|top|ultimate|overarching) (goal|priority|aim)\M', NULL),
    ('north_star_maybe', '\m(above all( else)?|more than anything)[, ]+i (want|need|hope)\M', NULL);

-- ---------------------------------------------------------------------------------------
-- North stars: what matters most to a person. A protected fact: it never decays, nothing
-- automatic supersedes, archives or deletes it; only the person's word retires it.
-- ---------------------------------------------------------------------------------------
CREATE TABLE north_stars (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    person            text NOT NULL CHECK (length(btrim(person)) > 0),
    content           text NOT NULL CHECK (length(btrim(content)) > 0 AND length(content) <= 1000),
    memory_id         uuid NOT NULL REFERENCES memories (id),
    origin_message_id uuid REFERENCES messages (id) ON DELETE SET NULL,
    status            text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired')),
    created_at        timestamptz NOT NULL DEFAULT now(),
    retired_at        timestamptz
);
CREATE UNIQUE INDEX north_stars_once ON north_stars (person, lower(btrim(content))) WHERE status = 'active';
CREATE INDEX north_stars_person ON north_stars (person) WHERE status = 'active';

-- The memory behind an active north star changes only by the person's word: retire_north_star
-- retires the north star first, and only then may its memory be archived.
CREATE FUNCTION dionysus_internal.protect_north_star() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM dionysus.north_stars n WHERE n.memory_id = OLD.id AND n.status = 'active') THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.content IS NOT DISTINCT FROM OLD.content AND NEW.status IS NOT DISTINCT FROM OLD.status
       AND NEW.confidence >= OLD.confidence AND NEW.metadata ? 'north_star' THEN
        RETURN NEW; -- access counts, neighbours, embeddings: not a change of what it says
    END IF;
    RAISE EXCEPTION 'dionysus: memory % is a north star: only the person''s word changes it (retire_north_star)', OLD.id
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER memories_protect_north_star BEFORE UPDATE OR DELETE ON memories
    FOR EACH ROW WHEN (OLD.metadata ? 'north_star') EXECUTE FUNCTION dionysus_internal.protect_north_star();

-- 'explicit' ("North star: …"), 'maybe' (a cue phrase: the fast model decides), or NULL.
CREATE FUNCTION north_star_cue(words text) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN words IS NULL OR btrim(words) = '' THEN NULL
        WHEN EXISTS (SELECT 1 FROM dionysus.cue_phrases c WHERE c.kind = 'north_star_explicit' AND words ~* c.pattern) THEN 'explicit'
        WHEN EXISTS (SELECT 1 FROM dionysus.cue_phrases c WHERE c.kind = 'north_star_maybe' AND words ~* c.pattern) THEN 'maybe'
    END
$$;

-- Stores a north star in the person's words (an explicit prefix is taken off), as a protected
-- fact private to them, and returns it with the acknowledgement to send (the north_star_ack
-- template). The same words twice are one north star.
CREATE FUNCTION set_north_star(person text, words text, origin_message_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    said text;
    existing dionysus.north_stars;
    mem uuid;
    star uuid;
    ack text;
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    said := btrim(coalesce(words, ''));
    said := btrim(regexp_replace(said, coalesce((SELECT string_agg('(' || c.pattern || ')', '|') FROM dionysus.cue_phrases c
                                                        WHERE c.kind = 'north_star_explicit'), '^$'), '', 'i'));
    IF said = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "words": a north star needs words after its prefix' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(said) > 1000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "words": a north star is at most 1000 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF origin_message_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dionysus.messages x WHERE x.id = origin_message_id AND x.person = set_north_star.person) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "origin_message_id": not a message of %', person USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.north_star:' || person, 0));
    SELECT * INTO existing FROM dionysus.north_stars n
     WHERE n.person = set_north_star.person AND n.status = 'active' AND lower(n.content) = lower(said);
    IF FOUND THEN
        star := existing.id;
        mem := existing.memory_id;
    ELSE
        mem := dionysus.learn(said, subject => person, category => 'north_star', confidence => 1.0, source => 'north_star',
                              importance => 1.0, private_to => ARRAY[person]);
        -- Near-identical words (learn merged them into a north star's fact): the same north star.
        SELECT * INTO existing FROM dionysus.north_stars n WHERE n.memory_id = mem AND n.status = 'active';
        IF FOUND THEN
            RETURN jsonb_build_object('north_star_id', existing.id, 'memory_id', mem, 'content', existing.content, 'duplicate', true,
                                      'ack', replace(coalesce((SELECT t.template FROM dionysus.prompt_templates t WHERE t.key = 'north_star_ack' AND t.active),
                                                              'Noted as your north star: {{north_star}}'), '{{north_star}}', existing.content));
        END IF;
        UPDATE dionysus.memories m SET metadata = m.metadata || jsonb_build_object('north_star', true), importance = 1.0
         WHERE m.id = mem;
        INSERT INTO dionysus.north_stars (person, content, memory_id, origin_message_id, created_at)
        VALUES (person, said, mem, origin_message_id, dionysus.clock_now())
        RETURNING id INTO star;
    END IF;
    ack := replace((SELECT t.template FROM dionysus.prompt_templates t WHERE t.key = 'north_star_ack' AND t.active), '{{north_star}}', said);
    RETURN jsonb_build_object('north_star_id', star, 'memory_id', mem, 'content', said, 'duplicate', existing.id IS NOT NULL,
                              'ack', coalesce(ack, 'Noted as your north star: ' || said));
END $$;

-- The person's word: a north star of theirs is retired (its memory archived, kept as history).
CREATE FUNCTION retire_north_star(person text, north_star_id uuid) RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    n dionysus.north_stars;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.north_star:' || person, 0));
    UPDATE dionysus.north_stars x SET status = 'retired', retired_at = dionysus.clock_now()
     WHERE x.id = north_star_id AND x.person = retire_north_star.person AND x.status = 'active'
    RETURNING * INTO n;
    IF n.id IS NULL THEN
        RETURN false;
    END IF;
    -- Retired first, so the memory is no longer protected (unless another active north star
    -- of theirs rests on it: then it stays).
    BEGIN
        UPDATE dionysus.memories m SET status = 'archived' WHERE m.id = n.memory_id;
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;
    END;
    RETURN true;
END $$;

CREATE FUNCTION person_north_stars(for_person text)
    RETURNS TABLE (north_star_id uuid, content text, created_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT n.id, n.content, n.created_at FROM dionysus.north_stars n
     WHERE n.person = for_person AND n.status = 'active' ORDER BY n.created_at
$$;

-- ---------------------------------------------------------------------------------------
-- Invisible feedback (seed 004 §3): a reply to one of Dionysus's messages is feedback, not
-- conversation. It never enters the message log and is never answered; it can be undone.
-- ---------------------------------------------------------------------------------------
CREATE TABLE feedback (
    id                        uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    person                    text NOT NULL,
    platform                  text NOT NULL,
    -- The person's own message that carried it (a Discord reply; a terminal line): a redelivery is one feedback.
    platform_message_id       text,
    -- What it is about: one of Dionysus's messages to them, or a dream proposal.
    about_message_id          uuid REFERENCES messages (id) ON DELETE SET NULL,
    about_outbox_id           uuid REFERENCES outbox (id) ON DELETE SET NULL,
    about_platform_message_id text,
    about_proposal_id         uuid,
    content                   text NOT NULL CHECK (length(btrim(content)) > 0 AND length(content) <= 4000),
    sentiment                 text NOT NULL CHECK (sentiment IN ('positive', 'negative', 'neutral')),
    source                    text NOT NULL CHECK (source IN ('reply', 'command', 'dream')),
    created_at                timestamptz NOT NULL DEFAULT now(),
    UNIQUE (platform, platform_message_id)
);
CREATE INDEX feedback_recent ON feedback (created_at DESC);
CREATE INDEX feedback_person ON feedback (person, created_at DESC);

-- Stores feedback about one of Dionysus's messages to this person: `about` is its platform id
-- (NULL: the last message Dionysus sent them). A message sent to someone else is not theirs to
-- judge (stored: false). Sentiment: as given, else from the words' tone.
CREATE FUNCTION give_feedback(platform text, platform_message_id text, author_id text, content text,
                              about text DEFAULT NULL, sentiment text DEFAULT NULL, source text DEFAULT 'reply')
    RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    who text;
    msg dionysus.messages;
    o dionysus.outbox;
    f dionysus.feedback;
    arg text;
    tone double precision;
BEGIN
    arg := CASE WHEN coalesce(btrim(platform), '') = '' THEN 'platform' WHEN coalesce(btrim(author_id), '') = '' THEN 'author_id'
                WHEN coalesce(btrim(content), '') = '' OR length(content) > 4000 THEN 'content'
                WHEN sentiment IS NOT NULL AND sentiment NOT IN ('positive', 'negative', 'neutral') THEN 'sentiment'
                WHEN source IS NULL OR source NOT IN ('reply', 'command') THEN 'source' END;
    IF arg IS NOT NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": % (content: 1–4000 characters; sentiment: positive, negative or neutral; source: reply or command)',
            arg, quote_nullable(CASE arg WHEN 'content' THEN left(content, 40) WHEN 'sentiment' THEN sentiment WHEN 'source' THEN source ELSE NULL END)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    who := dionysus.person_key(platform, author_id);
    IF platform_message_id IS NOT NULL THEN
        SELECT * INTO f FROM dionysus.feedback x WHERE x.platform = give_feedback.platform AND x.platform_message_id = give_feedback.platform_message_id;
        IF FOUND THEN
            RETURN jsonb_build_object('stored', true, 'feedback_id', f.id, 'duplicate', true, 'sentiment', f.sentiment);
        END IF;
    END IF;
    IF about IS NULL THEN
        SELECT * INTO msg FROM dionysus.messages x WHERE x.platform = give_feedback.platform AND x.is_bot AND x.person = who
         ORDER BY x.created_at DESC, x.id DESC LIMIT 1;
    ELSE
        SELECT * INTO msg FROM dionysus.messages x WHERE x.platform = give_feedback.platform AND x.platform_message_id = about AND x.is_bot;
        SELECT * INTO o FROM dionysus.outbox x
         WHERE x.platform = give_feedback.platform AND x.status = 'sent' AND (x.platform_message_id = about OR x.sent_parts ? about)
         ORDER BY x.sent_at DESC LIMIT 1;
    END IF;
    IF msg.id IS NULL AND o.id IS NULL THEN
        RETURN jsonb_build_object('stored', false, 'reason', 'not a message Dionysus sent');
    END IF;
    IF coalesce(msg.person, o.person) IS DISTINCT FROM who THEN
        RETURN jsonb_build_object('stored', false, 'reason', 'not a message Dionysus sent to them');
    END IF;
    -- Replying to a check-in or a reach-out is answering it: conversation, not feedback.
    IF source = 'reply' AND (coalesce(msg.is_proactive, false) OR o.contact_id IS NOT NULL OR o.work_id IS NOT NULL) THEN
        RETURN jsonb_build_object('stored', false, 'reason', 'a reply to a message Dionysus started is conversation');
    END IF;
    tone := dionysus_internal.message_tone(content);
    INSERT INTO dionysus.feedback (person, platform, platform_message_id, about_message_id, about_outbox_id, about_platform_message_id,
                                   content, sentiment, source, created_at)
    VALUES (who, platform, platform_message_id, msg.id, o.id, coalesce(about, msg.platform_message_id), btrim(content),
            coalesce(sentiment, CASE WHEN tone > 0.2 THEN 'positive' WHEN tone < -0.2 THEN 'negative' ELSE 'neutral' END),
            source, now())
    ON CONFLICT ON CONSTRAINT feedback_platform_platform_message_id_key DO NOTHING
    RETURNING * INTO f;
    IF f.id IS NULL THEN -- a concurrent redelivery stored it first
        SELECT * INTO f FROM dionysus.feedback x WHERE x.platform = give_feedback.platform AND x.platform_message_id = give_feedback.platform_message_id;
        RETURN jsonb_build_object('stored', true, 'feedback_id', f.id, 'duplicate', true, 'sentiment', f.sentiment);
    END IF;
    RETURN jsonb_build_object('stored', true, 'feedback_id', f.id, 'duplicate', false, 'sentiment', f.sentiment,
                              'about_message_id', f.about_message_id);
END $$;

-- Takes feedback back: the one carried by that message of theirs (NULL: their latest).
CREATE FUNCTION undo_feedback(platform text, author_id text, platform_message_id text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    gone dionysus.feedback;
BEGIN
    IF coalesce(btrim(platform), '') = '' OR coalesce(btrim(author_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', CASE WHEN coalesce(btrim(platform), '') = '' THEN 'platform' ELSE 'author_id' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM dionysus.feedback f
     WHERE f.id = (SELECT x.id FROM dionysus.feedback x
                    WHERE x.person = dionysus.person_key(undo_feedback.platform, undo_feedback.author_id)
                      AND x.platform = undo_feedback.platform
                      AND (undo_feedback.platform_message_id IS NULL OR x.platform_message_id = undo_feedback.platform_message_id)
                    ORDER BY x.created_at DESC LIMIT 1)
    RETURNING * INTO gone;
    RETURN jsonb_build_object('undone', gone.id IS NOT NULL, 'feedback_id', gone.id, 'platform_message_id', gone.platform_message_id);
END $$;

-- ---------------------------------------------------------------------------------------
-- The person's objectives (seed 004): what they are working toward, extracted after each
-- reply. Theirs, not Dionysus's goals; they feed check-ins and task pressure.
-- ---------------------------------------------------------------------------------------
CREATE TABLE objectives (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    person            text NOT NULL CHECK (length(btrim(person)) > 0),
    description       text NOT NULL CHECK (length(btrim(description)) > 0 AND length(description) <= 1000),
    embedding         vector(384) NOT NULL,
    saliency          double precision NOT NULL DEFAULT 0.5 CHECK (saliency >= 0 AND saliency <= 1),
    status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'completed', 'archived')),
    origin_message_id uuid REFERENCES messages (id) ON DELETE SET NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    last_updated      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX objectives_person ON objectives (person, status);

-- One objective from an extraction: the same objective said again (cosine similarity ≥ 0.85
-- to one of theirs) updates it — saliency, status — instead of adding a second.
CREATE FUNCTION dionysus_internal.note_objective(person text, description text, saliency double precision,
                                                 status text, origin_message_id uuid) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE
    e vector;
    hit uuid;
    id uuid;
BEGIN
    IF person IS NULL OR coalesce(btrim(description), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "result.objectives": each needs a description and a person' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF status IS NOT NULL AND status NOT IN ('pending', 'completed', 'archived') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "result.objectives.status": % (expected pending, completed or archived)', status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- One person's objectives are noted one at a time (no twin from two extractions at once).
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.objectives:' || person, 0));
    e := dionysus.embed(left(btrim(description), 1000));
    SELECT o.id INTO hit FROM dionysus.objectives o
     WHERE o.person = note_objective.person AND o.status <> 'archived' AND 1 - (o.embedding <=> e) >= 0.85
     ORDER BY o.embedding <=> e LIMIT 1;
    IF hit IS NOT NULL THEN
        UPDATE dionysus.objectives o
           SET saliency = greatest(o.saliency, least(greatest(coalesce(note_objective.saliency, o.saliency), 0), 1)),
               status = coalesce(note_objective.status, o.status), last_updated = dionysus.clock_now()
         WHERE o.id = hit;
        RETURN hit;
    END IF;
    IF status IN ('completed', 'archived') THEN
        RETURN NULL; -- the end of something never heard of: nothing to record
    END IF;
    INSERT INTO dionysus.objectives (person, description, embedding, saliency, origin_message_id, created_at, last_updated)
    VALUES (person, left(btrim(description), 1000), e, least(greatest(coalesce(saliency, 0.5), 0), 1), origin_message_id,
            dionysus.clock_now(), dionysus.clock_now())
    RETURNING objectives.id INTO id;
    RETURN id;
END $$;

CREATE FUNCTION person_objectives(for_person text, include_done boolean DEFAULT false)
    RETURNS TABLE (objective_id uuid, description text, saliency double precision, status text, last_updated timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT o.id, o.description, o.saliency, o.status, o.last_updated FROM dionysus.objectives o
     WHERE o.person = for_person AND (o.status = 'pending' OR (include_done AND o.status = 'completed'))
     ORDER BY o.status, o.saliency DESC, o.last_updated DESC
$$;

-- The person marks one of their objectives done or drops it.
CREATE FUNCTION set_objective_status(person text, objective_id uuid, status text) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF status IS NULL OR status NOT IN ('pending', 'completed', 'archived') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "status": % (expected pending, completed or archived)', quote_nullable(status)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.objectives o SET status = set_objective_status.status, last_updated = dionysus.clock_now()
     WHERE o.id = objective_id AND o.person = set_objective_status.person;
    RETURN FOUND;
END $$;

-- ---------------------------------------------------------------------------------------
-- Context archetypes (seed 004 §2.2, §3 step 4): the kind of message decides the shape of its
-- context. The centroid is computed in the database from the examples, and forgotten when
-- they change.
-- ---------------------------------------------------------------------------------------
CREATE TABLE context_archetypes (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name                 text NOT NULL UNIQUE CHECK (name ~ '^[a-z][a-z0-9_]*$'),
    description          text,
    example_messages     text[] NOT NULL CHECK (cardinality(example_messages) BETWEEN 1 AND 50),
    centroid             vector(384),
    context_turns        integer NOT NULL CHECK (context_turns BETWEEN 1 AND 20),
    context_memories     integer NOT NULL CHECK (context_memories BETWEEN 0 AND 15),
    similarity_threshold double precision NOT NULL CHECK (similarity_threshold BETWEEN 0.5 AND 0.9),
    triple_depth         integer NOT NULL CHECK (triple_depth BETWEEN 0 AND 3),
    active               boolean NOT NULL DEFAULT true,
    created_by           text NOT NULL DEFAULT 'human' CHECK (created_by IN ('human', 'ai_dream_cycle')),
    approved_by          text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    match_count          integer NOT NULL DEFAULT 0,
    avg_similarity       double precision
);
CREATE INDEX context_archetypes_active ON context_archetypes (active) WHERE active;

CREATE FUNCTION dionysus_internal.invalidate_centroid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR OLD.example_messages IS DISTINCT FROM NEW.example_messages THEN
        NEW.centroid := NULL;
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER context_archetypes_invalidate BEFORE INSERT OR UPDATE ON context_archetypes
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.invalidate_centroid();

-- The mean of the examples' embeddings.
CREATE FUNCTION dionysus_internal.archetype_centroid(examples text[]) RETURNS vector
    LANGUAGE sql STABLE AS $$
    SELECT avg(b.embedding) FROM dionysus.embed_batch(examples) b
$$;

-- The archetype whose centroid is nearest to a message's embedding, when it is at least
-- archetype_min_similarity near; its match is counted (not on a standby, which cannot write).
-- Centroids missing after a change of examples are computed first.
CREATE FUNCTION match_archetype(embedding vector) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    a dionysus.context_archetypes;
    sim double precision;
    floor double precision := dionysus_internal.proactive_setting('archetype_min_similarity');
    writable boolean := NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off';
BEGIN
    IF embedding IS NULL THEN
        RETURN NULL;
    END IF;
    IF writable THEN
        UPDATE dionysus.context_archetypes c SET centroid = dionysus_internal.archetype_centroid(c.example_messages)
         WHERE c.active AND c.centroid IS NULL;
    END IF;
    SELECT c.id, 1 - (coalesce(c.centroid, dionysus_internal.archetype_centroid(c.example_messages)) <=> embedding)
      INTO a.id, sim
      FROM dionysus.context_archetypes c WHERE c.active
     ORDER BY 2 DESC, c.name LIMIT 1;
    IF a.id IS NOT NULL THEN
        SELECT * INTO a FROM dionysus.context_archetypes c WHERE c.id = a.id;
    END IF;
    IF a.id IS NULL OR sim < floor THEN
        RETURN CASE WHEN a.id IS NULL THEN NULL
                    ELSE jsonb_build_object('name', NULL, 'nearest', a.name, 'similarity', round(sim::numeric, 4)) END;
    END IF;
    IF writable THEN
        UPDATE dionysus.context_archetypes c
           SET match_count = c.match_count + 1,
               avg_similarity = (coalesce(c.avg_similarity, 0) * c.match_count + sim) / (c.match_count + 1)
         WHERE c.id = a.id;
    END IF;
    RETURN jsonb_build_object('name', a.name, 'similarity', round(sim::numeric, 4), 'turns', a.context_turns,
                              'memories', a.context_memories, 'similarity_threshold', a.similarity_threshold,
                              'triple_depth', a.triple_depth);
END $$;

INSERT INTO context_archetypes (name, description, example_messages, context_turns, context_memories, similarity_threshold, triple_depth) VALUES
    ('small_talk', 'greetings and light chat: recent turns matter, memory little',
     ARRAY['hey, how are you?', 'good morning!', 'haha that''s funny', 'not much, just chilling', 'thanks, you too!', 'lol yes'],
     6, 2, 0.7, 0),
    ('personal_moment', 'feelings and what is going on in their life: their history and the people around them',
     ARRAY['I''m feeling really down today', 'my mom is in the hospital and I''m scared', 'I finally told her how I feel',
           'I''ve been so stressed about everything lately', 'I''m so happy, I got the job!', 'I miss my grandfather'],
     12, 8, 0.55, 1),
    ('planning_task', 'planning and working on something: their objectives, plans and the things involved',
     ARRAY['can you help me plan my week?', 'I need to finish the report by Friday', 'what should I do first for the move?',
           'let''s make a schedule for studying', 'remind me what''s left on the project', 'how do I break this task down?'],
     10, 6, 0.6, 2),
    ('past_question', 'a question about what was said or happened before: memory first, few turns',
     ARRAY['what did I tell you about my sister?', 'when did I start my new job?', 'do you remember the name of my dog?',
           'what was the restaurant I mentioned last month?', 'where did I say I went on holiday?', 'who did I meet at the conference?'],
     4, 12, 0.5, 2);

-- ---------------------------------------------------------------------------------------
-- The dreaming cycle (seed 004 §4.3): nightly, the smart model reviews the feedback and the
-- implicit signals since the last dream and proposes changes. Proposals wait for the person.
-- ---------------------------------------------------------------------------------------
CREATE TABLE dreams (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    local_date  date NOT NULL UNIQUE, -- one dream a night
    person      text,                 -- whose night it is (their time zone)
    since       timestamptz,
    work_id     uuid REFERENCES work_queue (id) ON DELETE SET NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    note        text                  -- what it found, or why it proposes nothing
);

CREATE TABLE proposals (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    dream_id    uuid REFERENCES dreams (id) ON DELETE SET NULL,
    kind        text NOT NULL CHECK (kind IN ('prompt_template', 'extraction', 'archetype')),
    target      text NOT NULL CHECK (target ~ '^[a-z][a-z0-9_]*$'),
    proposal    jsonb NOT NULL CHECK (jsonb_typeof(proposal) = 'object'),
    rationale   text NOT NULL CHECK (length(btrim(rationale)) > 0),
    evidence    jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(evidence) = 'array'),
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'discussing', 'approved', 'rejected')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    decided_at  timestamptz,
    decided_by  text,
    decision_note text,
    applied     jsonb,
    -- The template version the proposal was written against: approving it over a newer one is refused.
    base_version integer
);
CREATE INDEX proposals_pending ON proposals (created_at) WHERE status IN ('pending', 'discussing');
ALTER TABLE feedback ADD CONSTRAINT feedback_about_proposal_fkey FOREIGN KEY (about_proposal_id) REFERENCES proposals (id) ON DELETE SET NULL;

-- Queues tonight's dream when it is past dream_hour in the time zone of the person who wrote
-- last (once per local date). Called by the scheduler's language pass, which wakes the driver.
CREATE FUNCTION dionysus_internal.schedule_dream() RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    who text;
    tz text;
    local timestamp;
    last timestamptz;
    dream uuid;
    work uuid;
BEGIN
    IF dionysus_internal.proactive_setting('dream_enabled') < 0.5 THEN
        RETURN false;
    END IF;
    SELECT p.person, p.time_zone INTO who, tz FROM dionysus.people p ORDER BY p.last_message_at DESC NULLS LAST LIMIT 1;
    IF who IS NULL THEN
        RETURN false; -- nobody has talked yet: nothing to dream about
    END IF;
    local := t AT TIME ZONE coalesce(tz, 'UTC');
    IF extract(hour FROM local) < dionysus_internal.proactive_setting('dream_hour') THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM dionysus.dreams d WHERE d.local_date = local::date) THEN
        RETURN false;
    END IF;
    -- The window is on the wall clock, as the message log's times are.
    SELECT max(d.started_at) FILTER (WHERE d.finished_at IS NOT NULL) INTO last FROM dionysus.dreams d;
    last := coalesce(last, now() - interval '1 day');
    -- A quiet day is written down as such, without waking a model.
    IF NOT EXISTS (SELECT 1 FROM dionysus.messages x WHERE x.person = who AND x.created_at >= last)
       AND NOT EXISTS (SELECT 1 FROM dionysus.feedback f WHERE f.person = who AND f.created_at >= last) THEN
        INSERT INTO dionysus.dreams (local_date, person, since, started_at, finished_at, note)
        VALUES (local::date, who, last, now(), now(), 'a quiet day: nothing to review, nothing proposed')
        ON CONFLICT (local_date) DO NOTHING;
        RETURN false;
    END IF;
    INSERT INTO dionysus.dreams (local_date, person, since, started_at) VALUES (local::date, who, last, now())
    ON CONFLICT (local_date) DO NOTHING
    RETURNING id INTO dream;
    IF dream IS NULL THEN
        RETURN false;
    END IF;
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts)
    VALUES ('dream:' || local::date, 'dream', jsonb_build_object('dream_id', dream), 3)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id INTO work;
    UPDATE dionysus.dreams d SET work_id = work WHERE d.id = dream;
    RETURN true;
END $$;

-- What a dream reviews: the night's person's feedback since the last one, and the implicit
-- signals of their conversation (reply length, contacts answered or ignored, corrections),
-- and the templates and archetypes it may propose changes to. Nobody else's words.
CREATE FUNCTION dream_evidence(dream_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    d dionysus.dreams;
BEGIN
    SELECT * INTO d FROM dionysus.dreams x WHERE x.id = dream_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "dream_id": no dream with id %', dream_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN jsonb_build_object(
        'dream_id', d.id, 'since', d.since, 'until', d.started_at,
        'feedback', coalesce((SELECT jsonb_agg(jsonb_build_object('id', f.id, 'sentiment', f.sentiment, 'content', left(f.content, 500),
                                                                  'about', left(m.content, 300), 'source', f.source) ORDER BY f.created_at)
                                FROM dionysus.feedback f LEFT JOIN dionysus.messages m ON m.id = f.about_message_id
                               WHERE f.person = d.person AND f.created_at >= d.since AND f.created_at < d.started_at), '[]'),
        'replies', (SELECT jsonb_build_object('their_turns', count(*) FILTER (WHERE NOT x.is_bot),
                                              'our_turns', count(*) FILTER (WHERE x.is_bot),
                                              'avg_their_length', round(avg(length(x.content)) FILTER (WHERE NOT x.is_bot)),
                                              'avg_our_length', round(avg(length(x.content)) FILTER (WHERE x.is_bot)),
                                              'corrections', count(*) FILTER (WHERE NOT x.is_bot AND x.content ~* '\m(no,|that''s wrong|not what i|i said|actually,|you forgot|wrong)'))
                      FROM dionysus.messages x WHERE x.person = d.person AND x.created_at >= d.since AND x.created_at < d.started_at),
        'contacts', (SELECT jsonb_build_object('sent', count(*) FILTER (WHERE c.decision = 'message'),
                                               'answered', count(*) FILTER (WHERE c.feedback IS NOT NULL AND (c.feedback ->> 'signal')::float8 > -0.5),
                                               'ignored', count(*) FILTER (WHERE c.feedback ->> 'by' = 'silence'))
                       FROM dionysus.contact_evaluations c WHERE c.person = d.person AND c.at >= d.since AND c.at < d.started_at),
        'templates', (SELECT jsonb_object_agg(t.key, jsonb_build_object('version', t.version, 'template', t.template))
                        FROM dionysus.prompt_templates t WHERE t.active AND t.key IN ('chat_system', 'extract_message', 'contact_compose')),
        'archetypes', (SELECT jsonb_agg(jsonb_build_object('name', a.name, 'description', a.description, 'turns', a.context_turns,
                                                          'memories', a.context_memories, 'similarity_threshold', a.similarity_threshold,
                                                          'triple_depth', a.triple_depth, 'match_count', a.match_count,
                                                          'avg_similarity', a.avg_similarity) ORDER BY a.name)
                         FROM dionysus.context_archetypes a WHERE a.active),
        'pending_proposals', (SELECT count(*) FROM dionysus.proposals p WHERE p.status IN ('pending', 'discussing')));
END $$;

-- A proposal's shape is checked before it is stored: a template proposal names an existing
-- template and carries the new text; an archetype proposal carries a valid shape.
CREATE FUNCTION dionysus_internal.check_proposal(kind text, target text, proposal jsonb) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF kind IS NULL OR kind NOT IN ('prompt_template', 'extraction', 'archetype') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "proposals[].kind": % (expected prompt_template, extraction or archetype)', quote_nullable(kind)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF target IS NULL OR target !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "proposals[].target": % must be lower_snake_case', quote_nullable(target)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF proposal IS NULL OR jsonb_typeof(proposal) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "proposals[].proposal": must be an object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF kind IN ('prompt_template', 'extraction') THEN
        IF NOT EXISTS (SELECT 1 FROM dionysus.prompt_templates t WHERE t.key = target) THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].target": no prompt template "%"', target USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF kind = 'extraction' AND target <> 'extract_message' THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].target": an extraction proposal changes extract_message' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(btrim(proposal ->> 'template'), '') = '' OR length(proposal ->> 'template') > 20000 THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].proposal.template": 1–20000 characters of template' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF proposal ? 'temperature' AND (jsonb_typeof(proposal -> 'temperature') IS DISTINCT FROM 'number'
                                         OR (proposal ->> 'temperature')::numeric NOT BETWEEN 0 AND 2) THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].proposal.temperature": a number within [0, 2]' USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        IF jsonb_typeof(proposal -> 'example_messages') IS DISTINCT FROM 'array'
           OR jsonb_array_length(proposal -> 'example_messages') NOT BETWEEN 1 AND 50
           OR EXISTS (SELECT 1 FROM jsonb_array_elements(proposal -> 'example_messages') e
                       WHERE jsonb_typeof(e) <> 'string' OR btrim(e #>> '{}') = '' OR length(e #>> '{}') > 1000)
           OR NOT (proposal ?& ARRAY['turns', 'memories', 'similarity_threshold', 'triple_depth'])
           OR jsonb_typeof(proposal -> 'turns') <> 'number' OR jsonb_typeof(proposal -> 'memories') <> 'number'
           OR jsonb_typeof(proposal -> 'similarity_threshold') <> 'number' OR jsonb_typeof(proposal -> 'triple_depth') <> 'number'
           OR (proposal ->> 'turns')::numeric <> trunc((proposal ->> 'turns')::numeric)
           OR (proposal ->> 'memories')::numeric <> trunc((proposal ->> 'memories')::numeric)
           OR (proposal ->> 'triple_depth')::numeric <> trunc((proposal ->> 'triple_depth')::numeric)
           OR (proposal ->> 'turns')::numeric NOT BETWEEN 1 AND 20 OR (proposal ->> 'memories')::numeric NOT BETWEEN 0 AND 15
           OR (proposal ->> 'similarity_threshold')::numeric NOT BETWEEN 0.5 AND 0.9 OR (proposal ->> 'triple_depth')::numeric NOT BETWEEN 0 AND 3 THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].proposal": an archetype needs example_messages (1–50 non-empty texts), whole turns (1–20), memories (0–15) and triple_depth (0–3), and similarity_threshold (0.5–0.9)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
END $$;

-- Writes down what a dream found: its proposals (pending, announced on dionysus_dream) or,
-- with none, why it proposes nothing. Called through complete_work's `dream` result.
CREATE FUNCTION dionysus_internal.record_dream(dream_id uuid, result jsonb) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    item jsonb;
    made uuid[] := '{}';
    pid uuid;
    why text;
    refused jsonb := '[]';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM dionysus.dreams d WHERE d.id = dream_id) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "dream_id": no dream with id %', dream_id USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(result -> 'proposals') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "result.dream.proposals": must be an array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(result -> 'proposals') LOOP
        -- A proposal that does not hold is written down as refused; the others still count.
        BEGIN
            PERFORM dionysus_internal.check_proposal(item ->> 'kind', item ->> 'target', item -> 'proposal');
            IF coalesce(btrim(item ->> 'rationale'), '') = '' THEN
                RAISE EXCEPTION 'dionysus: invalid argument "proposals[].rationale": every proposal says why' USING ERRCODE = 'invalid_parameter_value';
            END IF;
        EXCEPTION WHEN invalid_parameter_value THEN
            GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
            refused := refused || jsonb_build_object('target', left(item ->> 'target', 100), 'reason', why);
            CONTINUE;
        END;
        INSERT INTO dionysus.proposals (dream_id, kind, target, proposal, rationale, evidence, created_at, base_version)
        VALUES (dream_id, item ->> 'kind', item ->> 'target', item -> 'proposal', left(item ->> 'rationale', 4000),
                CASE WHEN jsonb_typeof(item -> 'evidence') = 'array' THEN item -> 'evidence' ELSE '[]' END, dionysus.clock_now(),
                (SELECT t.version FROM dionysus.prompt_templates t WHERE t.key = item ->> 'target' AND t.active))
        RETURNING id INTO pid;
        made := made || pid;
        PERFORM pg_notify('dionysus_dream', pid::text);
    END LOOP;
    UPDATE dionysus.dreams d
       SET finished_at = now(),
           note = concat_ws(' ', CASE WHEN cardinality(made) = 0 THEN coalesce(nullif(btrim(result ->> 'note'), ''), 'nothing worth proposing tonight')
                                      ELSE nullif(btrim(result ->> 'note'), '') END,
                            CASE WHEN jsonb_array_length(refused) > 0 THEN '(refused: ' || refused::text || ')' END)
     WHERE d.id = dream_id;
    RETURN jsonb_build_object('dream_id', dream_id, 'proposals', to_jsonb(made), 'refused', refused);
END $$;

-- Pending and discussed proposals, oldest first.
CREATE FUNCTION pending_proposals()
    RETURNS TABLE (proposal_id uuid, kind text, target text, rationale text, evidence jsonb, proposal jsonb, status text, created_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT p.id, p.kind, p.target, p.rationale, p.evidence, p.proposal, p.status, p.created_at
      FROM dionysus.proposals p WHERE p.status IN ('pending', 'discussing') ORDER BY p.created_at
$$;

-- The person's approval: the proposal takes effect (a template becomes its new active version;
-- an archetype is added or retuned). The only way a dream changes anything.
-- It runs with the extension owner's rights (the driver's role may not write templates
-- itself, but relays the person's word: their button, their command); PUBLIC may not call it.
CREATE FUNCTION approve_proposal(proposal_id uuid, decided_by text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p dionysus.proposals;
    v integer;
    done jsonb;
BEGIN
    IF coalesce(btrim(decided_by), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": who approves must be named' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO p FROM dionysus.proposals x WHERE x.id = proposal_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "proposal_id": no proposal with id %', proposal_id USING ERRCODE = 'no_data_found';
    END IF;
    IF p.status NOT IN ('pending', 'discussing') THEN
        RETURN jsonb_build_object('approved', false, 'reason', 'already ' || p.status, 'applied', p.applied);
    END IF;
    PERFORM dionysus_internal.check_proposal(p.kind, p.target, p.proposal);
    IF p.kind IN ('prompt_template', 'extraction')
       AND p.base_version IS DISTINCT FROM (SELECT t.version FROM dionysus.prompt_templates t WHERE t.key = p.target AND t.active) THEN
        RETURN jsonb_build_object('approved', false,
            'reason', format('%s changed since this proposal (it was written against version %s): the next dream can propose again', p.target, p.base_version));
    END IF;
    IF p.kind IN ('prompt_template', 'extraction') THEN
        v := dionysus.set_prompt_template(p.target, p.proposal ->> 'template', (p.proposal ->> 'temperature')::float8,
                                          'dream proposal ' || p.id || ', approved by ' || decided_by);
        UPDATE dionysus.prompt_templates t SET created_by = 'ai_dream_cycle' WHERE t.key = p.target AND t.version = v;
        done := jsonb_build_object('template', p.target, 'version', v);
    ELSE
        INSERT INTO dionysus.context_archetypes AS c (name, description, example_messages, context_turns, context_memories,
                                                      similarity_threshold, triple_depth, created_by, approved_by)
        VALUES (p.target, p.proposal ->> 'description', ARRAY(SELECT jsonb_array_elements_text(p.proposal -> 'example_messages')),
                (p.proposal ->> 'turns')::int, (p.proposal ->> 'memories')::int, (p.proposal ->> 'similarity_threshold')::float8,
                (p.proposal ->> 'triple_depth')::int, 'ai_dream_cycle', decided_by)
        ON CONFLICT (name) DO UPDATE SET description = coalesce(EXCLUDED.description, c.description),
               example_messages = EXCLUDED.example_messages, context_turns = EXCLUDED.context_turns,
               context_memories = EXCLUDED.context_memories, similarity_threshold = EXCLUDED.similarity_threshold,
               triple_depth = EXCLUDED.triple_depth, approved_by = EXCLUDED.approved_by, active = true, updated_at = now();
        done := jsonb_build_object('archetype', p.target);
    END IF;
    UPDATE dionysus.proposals x SET status = 'approved', decided_at = dionysus.clock_now(), decided_by = approve_proposal.decided_by,
           applied = done
     WHERE x.id = p.id;
    RETURN jsonb_build_object('approved', true, 'applied', done);
END $$;
REVOKE EXECUTE ON FUNCTION approve_proposal(uuid, text) FROM PUBLIC;

-- The person declines (or wants to talk about it first: status 'discussing', still pending).
CREATE FUNCTION reject_proposal(proposal_id uuid, decided_by text, note text DEFAULT NULL, discuss boolean DEFAULT false) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(btrim(decided_by), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": who decides must be named' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.proposals x
       SET status = CASE WHEN discuss THEN 'discussing' ELSE 'rejected' END,
           decided_at = CASE WHEN discuss THEN NULL ELSE dionysus.clock_now() END,
           decided_by = reject_proposal.decided_by, decision_note = note
     WHERE x.id = proposal_id AND x.status IN ('pending', 'discussing');
    RETURN FOUND;
END $$;

-- Rolling back (or forward) to any version of a template is one call (the person's, relayed
-- by the driver as approve_proposal is).
CREATE FUNCTION activate_prompt_template(key text, version integer) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM dionysus.prompt_templates t WHERE t.key = activate_prompt_template.key AND t.version = activate_prompt_template.version) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "version": template "%" has no version %', key, version USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.prompt:' || key, 0));
    UPDATE dionysus.prompt_templates t SET active = false WHERE t.key = activate_prompt_template.key AND t.active;
    UPDATE dionysus.prompt_templates t SET active = true WHERE t.key = activate_prompt_template.key AND t.version = activate_prompt_template.version;
    RETURN true;
END $$;
REVOKE EXECUTE ON FUNCTION activate_prompt_template(text, integer) FROM PUBLIC;

INSERT INTO prompt_templates (key, version, temperature, note, template) VALUES
('north_star_ack', 1, 0.0, 'the acknowledgement of a north star (no model call)', $t$Noted as your north star: "{{north_star}}". I'll keep it in mind in everything we do.$t$),
('north_star_check', 1, 0.0, 'fast model: is a message a north-star declaration?', $t$TASK: north_star
A north star is what matters most to a person: a lasting, overarching aim or value they want
everything else to serve ("finish my thesis by June and stay healthy while doing it"). A passing
wish, a task for today or a question is not one.

Message:
{{message}}

Answer with JSON only: {"north_star": true or false, "statement": "the north star in their words, standing on its own (empty when false)"}$t$),
('dream', 1, 0.4, 'smart model: the nightly review that proposes changes (nothing changes until the person approves)', $t$TASK: dream
You are reviewing how your conversations with the person went since the last review, to propose
improvements to your own behaviour. Nothing you propose takes effect until the person approves it.

Evidence (feedback they gave, implicit signals, your current templates and context archetypes):
{{evidence}}

Propose only changes the evidence supports. Each proposal is one of:
- {"kind": "prompt_template", "target": "chat_system", "proposal": {"template": "the full new template text (keep its {{placeholders}})"}, ...}
- {"kind": "extraction", "target": "extract_message", "proposal": {"template": "the full new extraction template"}, ...}
- {"kind": "archetype", "target": "a_name", "proposal": {"description": "...", "example_messages": ["..."], "turns": 1-20, "memories": 0-15, "similarity_threshold": 0.5-0.9, "triple_depth": 0-3}, ...}
and each carries "rationale" (why) and "evidence" (a list of the feedback ids or signals it rests on).

Answer with JSON only: {"proposals": [...], "note": "what you noticed; if nothing is worth proposing, say so"}$t$);

-- The extraction learns the person's objectives, each turn de-contextualised first (pronouns
-- resolved against the turns before it). A new version, active only where the shipped one
-- still is: a template the person changed stays theirs (they can activate this one).
DO $$
DECLARE
    shipped boolean;
    next_version integer;
BEGIN
    SELECT count(*) = 1 AND bool_and(t.active AND t.version = 1 AND t.created_by = 'human'), max(t.version) + 1
      INTO shipped, next_version FROM dionysus.prompt_templates t WHERE t.key = 'extract_message';
    IF shipped THEN
        UPDATE dionysus.prompt_templates t SET active = false WHERE t.key = 'extract_message';
    END IF;
    INSERT INTO dionysus.prompt_templates (key, version, temperature, note, active, template)
    VALUES ('extract_message', next_version, 0.1, 'fast model: facts, triples, requested goals and the person''s objectives (seed 004)',
            shipped, $t$TASK: extract
Read the latest message from the person (the "user") in its conversation, and extract what is worth
remembering long-term. First restate the message so it stands on its own: resolve every pronoun
and reference ("it", "she", "that thing") against the conversation so far. Refer to the person as "user".

Conversation so far:
{{turns}}

Latest message from the user:
{{message}}

Answer with JSON only, in exactly this shape:
{"facts": [{"content": "a self-contained statement", "subject": "who or what it is about", "category": "preference|person|event|plan|attribute|other", "confidence": 0.9}],
 "triples": [{"subject": "user", "predicate": "lives_in", "object": "Lisbon", "confidence": 0.9}],
 "goals": [{"title": "something the user explicitly asked you to do or follow up on", "description": "details"}],
 "objectives": [{"description": "something the user is working toward in their own life (self-contained)", "saliency": 0.7, "status": "pending|completed"}]}
Objectives are the user's own aims ("finish the thesis draft by Friday", "run a half marathon"), not
tasks for you; mark one "completed" when the message says it is done. Use empty lists when there is
nothing. Small talk yields nothing.$t$);
END $$;

INSERT INTO proactive_config (key, value, description) VALUES
    ('dream_hour', 3, 'the hour (the person''s local time) after which the nightly dream runs, once a day'),
    ('dream_enabled', 1, '1: dream nightly; 0: never'),
    ('archetype_min_similarity', 0.35, 'a message takes an archetype''s context shape only when at least this near its centroid');

-- ---------------------------------------------------------------------------------------
-- Every SQL function, as the organs' files define them at 0.4.0 (those that did not change
-- are replaced by themselves).
-- ---------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dionysus_internal.heartbeat_config_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.value IS NULL OR NEW.value = 'NaN'::float8 OR NEW.value IN ('Infinity'::float8, '-Infinity'::float8)
       OR NEW.value < 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_config.%": % must be a finite number >= 0', NEW.key, NEW.value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('carry_over') AND NEW.value > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_config.carry_over": % must be within [0, 1]', NEW.value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION clock_now() RETURNS timestamptz
    LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT frozen_at FROM dionysus.clock WHERE id = 1), now())
$$;

CREATE OR REPLACE FUNCTION set_clock(at timestamptz) RETURNS timestamptz
    LANGUAGE plpgsql AS $$
BEGIN
    IF at IS NOT NULL AND NOT isfinite(at) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "at": % is not a finite time', at USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.clock SET frozen_at = at, updated_at = now() WHERE id = 1;
    RETURN dionysus.clock_now();
END $$;

CREATE OR REPLACE FUNCTION advance_clock(by_interval interval) RETURNS timestamptz
    LANGUAGE plpgsql AS $$
BEGIN
    IF by_interval IS NULL OR by_interval < interval '0' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "by_interval": % (time only moves forward)', by_interval
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.clock SET frozen_at = coalesce(frozen_at, now()) + by_interval, updated_at = now() WHERE id = 1;
    RETURN dionysus.clock_now();
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.heartbeat_setting(setting_key text) RETURNS double precision
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

CREATE OR REPLACE FUNCTION get_action_cost(action_name text) RETURNS double precision
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

CREATE OR REPLACE FUNCTION get_current_energy() RETURNS double precision
    LANGUAGE sql STABLE AS $$ SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1 $$;

CREATE OR REPLACE FUNCTION update_energy(delta double precision, heartbeat_id uuid DEFAULT NULL,
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

CREATE OR REPLACE FUNCTION dionysus_internal.goal_level(p dionysus.goal_priority) RETURNS integer
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE p WHEN 'active' THEN 3 WHEN 'queued' THEN 2 WHEN 'backburner' THEN 1 ELSE 0 END
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.enforce_goal_limits(keep uuid DEFAULT NULL) RETURNS integer
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

CREATE OR REPLACE FUNCTION dionysus_internal.require_goal(goal_id uuid, arg text DEFAULT 'goal_id') RETURNS dionysus.goals
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

CREATE OR REPLACE FUNCTION create_goal(title text, description text DEFAULT NULL, source text DEFAULT 'curiosity',
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
    IF source IS NULL OR lower(btrim(source)) NOT IN ('curiosity', 'user_request', 'identity', 'derived', 'external') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "source": unknown goal source % (expected curiosity, user_request, identity, derived, external)', source
            USING ERRCODE = 'invalid_parameter_value';
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
            RAISE EXCEPTION 'dionysus: invalid argument "priority": a new goal is active, queued or backburner, not %', priority
                USING ERRCODE = 'invalid_parameter_value';
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

CREATE OR REPLACE FUNCTION change_goal_priority(goal_id uuid, new_priority text, reason text DEFAULT NULL)
    RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    g dionysus.goals;
    target dionysus.goal_priority;
BEGIN
    -- The goals lock before the goal's row: the global lock order (002_heartbeat.sql).
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    g := dionysus_internal.require_goal(goal_id);
    IF new_priority IS NULL OR lower(btrim(new_priority)) NOT IN ('active', 'queued', 'backburner', 'completed', 'abandoned') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "new_priority": unknown priority %', new_priority
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

CREATE OR REPLACE FUNCTION dionysus_internal.complete_parent_goals(child uuid) RETURNS void
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

CREATE OR REPLACE FUNCTION add_goal_progress(goal_id uuid, note text, memory_id uuid DEFAULT NULL) RETURNS void
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

CREATE OR REPLACE FUNCTION set_goal_blockers(goal_id uuid, blocked_by jsonb) RETURNS void
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

CREATE OR REPLACE FUNCTION link_goal_memory(goal_id uuid, memory_id uuid, link_type text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus_internal.require_goal(goal_id);
    IF memory_id IS NULL OR NOT EXISTS (SELECT 1 FROM dionysus.memories m WHERE m.id = memory_id) THEN
        RAISE EXCEPTION 'dionysus: argument "memory_id": no memory with id %', memory_id USING ERRCODE = 'no_data_found';
    END IF;
    IF link_type IS NULL OR link_type NOT IN ('origin', 'progress', 'completion', 'blocker') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "link_type": % (expected origin, progress, completion, blocker)', link_type
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (goal_id, memory_id, link_type)
    ON CONFLICT DO NOTHING;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.goal_open_blockers(g dionysus.goals) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(b), '[]'::jsonb)
    FROM jsonb_array_elements(coalesce(g.blocked_by, '[]'::jsonb)) AS b
    WHERE NOT (jsonb_typeof(b) = 'string'
               AND (b #>> '{}') ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
               AND EXISTS (SELECT 1 FROM dionysus.goals d WHERE d.id = (b #>> '{}')::uuid AND d.priority = 'completed'))
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.goal_brief(g dionysus.goals) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', g.id, 'title', g.title, 'description', g.description, 'priority', g.priority,
                              'source', g.source, 'parent_goal_id', g.parent_goal_id,
                              'last_touched', g.last_touched, 'emotional_valence', g.emotional_valence,
                              'last_progress', g.progress -> -1, 'open_blockers', dionysus_internal.goal_open_blockers(g))
$$;

CREATE OR REPLACE FUNCTION review_goals() RETURNS jsonb
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

CREATE OR REPLACE FUNCTION dionysus_internal.check_self_model(arg text, statement text, confidence double precision) RETURNS void
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF statement IS NULL OR btrim(statement) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', arg USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF confidence IS NULL OR confidence = 'NaN'::float8 OR confidence < 0 OR confidence > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "confidence": % is outside [0, 1]', confidence USING ERRCODE = 'invalid_parameter_value';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION set_identity_aspect(aspect text, confidence double precision DEFAULT 0.5) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE r uuid;
BEGIN
    PERFORM dionysus_internal.check_self_model('aspect', aspect, confidence);
    INSERT INTO dionysus.identity_aspects (aspect, confidence) VALUES (btrim(aspect), confidence)
    ON CONFLICT (aspect_key) DO UPDATE SET confidence = EXCLUDED.confidence, updated_at = now()
    RETURNING id INTO r;
    RETURN r;
END $$;

CREATE OR REPLACE FUNCTION set_worldview_belief(belief text, confidence double precision DEFAULT 0.5) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE r uuid;
BEGIN
    PERFORM dionysus_internal.check_self_model('belief', belief, confidence);
    INSERT INTO dionysus.worldview_beliefs (belief, confidence) VALUES (btrim(belief), confidence)
    ON CONFLICT (belief_key) DO UPDATE SET confidence = EXCLUDED.confidence, updated_at = now()
    RETURNING id INTO r;
    RETURN r;
END $$;

CREATE OR REPLACE FUNCTION session_start() RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET session_active = true,
           session_started_at = CASE WHEN session_active THEN session_started_at ELSE now() END,
           last_user_interaction_at = now(), updated_at = now() WHERE id = 1;
$$;

CREATE OR REPLACE FUNCTION note_user_message() RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET last_user_interaction_at = now(), updated_at = now() WHERE id = 1;
$$;

CREATE OR REPLACE FUNCTION request_heartbeat(reason text DEFAULT 'requested') RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dionysus.heartbeat_state SET requested_at = now(), request_reason = reason, updated_at = now() WHERE id = 1;
    PERFORM pg_notify('dionysus_heartbeat', jsonb_build_object('reason', reason, 'database', current_database())::text);
END $$;

CREATE OR REPLACE FUNCTION session_end(significant boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dionysus.heartbeat_state SET session_active = false, updated_at = now() WHERE id = 1;
    IF significant THEN
        PERFORM dionysus.request_heartbeat('significant session');
    END IF;
END $$;

CREATE OR REPLACE FUNCTION pause_heartbeats(paused boolean DEFAULT true) RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET paused = pause_heartbeats.paused, updated_at = now() WHERE id = 1;
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.claim_rows(worker text, ids uuid[]) RETURNS SETOF work_queue
    LANGUAGE sql AS $$
    UPDATE dionysus.work_queue w SET status = 'claimed', attempts = w.attempts + 1, claimed_by = claim_rows.worker,
           claimed_at = now(), lease_token = gen_random_uuid(),
           lease_until = now() + make_interval(mins => dionysus_internal.heartbeat_setting('work_lease_minutes')::int)
     WHERE w.id = ANY(claim_rows.ids) AND w.status = 'pending'
    RETURNING w.*
$$;

CREATE OR REPLACE FUNCTION claim_work(worker text, actions text[] DEFAULT NULL, max_items integer DEFAULT 1,
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
         ORDER BY q.created_at, q.id LIMIT max_items FOR UPDATE SKIP LOCKED));
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.expire_work_leases() RETURNS integer
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

CREATE OR REPLACE FUNCTION dionysus_internal.refund_work(work_id uuid) RETURNS double precision
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

CREATE OR REPLACE FUNCTION claim_work_item(work_id uuid, worker text) RETURNS SETOF work_queue
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

CREATE OR REPLACE FUNCTION release_work(work_id uuid, reason text DEFAULT NULL, delay_seconds integer DEFAULT 60, lease uuid DEFAULT NULL)
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

CREATE OR REPLACE FUNCTION dionysus_internal.require_claimed_work(work_id uuid, lease uuid DEFAULT NULL) RETURNS dionysus.work_queue
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
                       'episode_summary', 'message', 'summary', 'basis', 'person', 'maintenance', 'objectives', 'dream') THEN
            RAISE EXCEPTION 'dionysus: argument "result": unknown key "%"', key USING ERRCODE = 'invalid_text_representation';
        END IF;
        IF key IN ('memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts', 'basis', 'objectives')
           AND jsonb_typeof(result -> key) <> 'array' THEN
            RAISE EXCEPTION 'dionysus: argument "result.%": must be an array', key USING ERRCODE = 'invalid_text_representation';
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b
                WHERE jsonb_typeof(b) <> 'string'
                   OR (b #>> '{}') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN
        RAISE EXCEPTION 'dionysus: argument "result.basis": must be an array of memory ids' USING ERRCODE = 'invalid_text_representation';
    END IF;
    privacy := CASE WHEN w.params ->> 'person' IS NOT NULL THEN ARRAY[w.params ->> 'person'] END;
    privacy := dionysus_internal.privacy_union(privacy, (SELECT h.private_to FROM dionysus.heartbeat_log h WHERE h.id = w.heartbeat_id));
    privacy := dionysus_internal.privacy_union(privacy, dionysus_internal.memory_privacy(
                   ARRAY(SELECT (b #>> '{}')::uuid FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b)));
    from_web := w.action IN ('inquire_shallow', 'inquire_deep');
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
               summary_embedding = dionysus.embed(result ->> 'episode_summary')
         WHERE id = (w.params ->> 'episode_id')::uuid;
        made := made || jsonb_build_object('episode_id', w.params ->> 'episode_id');
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
        INSERT INTO dionysus.outbox (work_id, audience, content, requires_approval, person, platform)
        VALUES (w.id, CASE w.action WHEN 'reach_out_user' THEN 'user' ELSE 'public' END, result ->> 'message',
                w.action = 'reach_out_public', target ->> 'person', target ->> 'platform')
        RETURNING id INTO msg_id;
        made := made || jsonb_build_object('outbox_id', msg_id);
        IF w.action = 'reach_out_user' THEN
            PERFORM pg_notify('dionysus_outbox', msg_id::text);
        END IF;
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

CREATE OR REPLACE FUNCTION fail_work(work_id uuid, error text, retry boolean DEFAULT true, lease uuid DEFAULT NULL) RETURNS text
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

CREATE OR REPLACE FUNCTION maintain_target(target text DEFAULT NULL, memory_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t jsonb;
    key text := lower(btrim(target));
BEGIN
    IF memory_id IS NOT NULL THEN
        SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                  'status', m.status, 'created_at', m.created_at)
          INTO t FROM dionysus.memories m WHERE m.id = maintain_target.memory_id;
        IF t IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "memory_id": no memory with id %', memory_id USING ERRCODE = 'no_data_found';
        END IF;
    ELSIF key IS NOT NULL AND key <> '' THEN
        SELECT jsonb_build_object('kind', 'belief', 'id', b.id, 'content', b.belief, 'confidence', b.confidence)
          INTO t FROM dionysus.worldview_beliefs b WHERE b.belief_key = key;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'identity', 'id', a.id, 'content', a.aspect, 'confidence', a.confidence)
              INTO t FROM dionysus.identity_aspects a WHERE a.aspect_key = key;
        END IF;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                      'status', m.status, 'created_at', m.created_at)
              INTO t FROM dionysus.recall(target, 1) r JOIN dionysus.memories m ON m.id = r.memory_id
             WHERE NOT (m.metadata ? 'north_star'); -- a north star is the person's to change
        END IF;
    ELSE
        SELECT jsonb_build_object('kind', 'belief', 'id', b.id, 'content', b.belief, 'confidence', b.confidence)
          INTO t FROM dionysus.worldview_beliefs b ORDER BY b.confidence, b.updated_at LIMIT 1;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                      'status', m.status, 'created_at', m.created_at)
              INTO t FROM dionysus.facts f JOIN dionysus.memories m ON m.id = f.memory_id
             WHERE f.state IN ('learned', 'confirmed') AND m.status = 'active' AND NOT (m.metadata ? 'north_star')
               AND coalesce(f.last_confirmed, f.learned_at) < now() - interval '30 days'
             ORDER BY coalesce(f.last_confirmed, f.learned_at) LIMIT 1;
        END IF;
    END IF;
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN t || jsonb_build_object('evidence', coalesce((
        SELECT jsonb_agg(jsonb_build_object('id', r.memory_id, 'content', r.content, 'created_at', r.created_at,
                                            'source', m.source) ORDER BY r.score DESC)
          FROM dionysus.recall(t ->> 'content', 7) r JOIN dionysus.memories m ON m.id = r.memory_id
         WHERE r.memory_id::text IS DISTINCT FROM t ->> 'id'), '[]'::jsonb));
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.apply_maintenance(m jsonb, heartbeat_id uuid DEFAULT NULL, work_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    kind text := m ->> 'kind';
    target uuid;
    verdict text := lower(coalesce(m ->> 'verdict', ''));
    conf double precision;
    content text := nullif(btrim(m ->> 'content'), '');
    before jsonb;
    after jsonb;
    new_id uuid;
BEGIN
    IF jsonb_typeof(m) IS DISTINCT FROM 'object' OR kind IS NULL OR kind NOT IN ('memory', 'belief', 'identity') THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance": needs a kind (memory, belief or identity)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF verdict NOT IN ('keep', 'update', 'retire') THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.verdict": % is not keep, update or retire', quote_nullable(m ->> 'verdict')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (m ->> 'id') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.id": must be the target''s id' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    target := (m ->> 'id')::uuid;
    IF m ? 'confidence' AND jsonb_typeof(m -> 'confidence') = 'number' THEN
        conf := (m ->> 'confidence')::float8;
        IF conf < 0 OR conf > 1 THEN
            RAISE EXCEPTION 'dionysus: argument "result.maintenance.confidence": % is outside [0, 1]', conf USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF content IS NOT NULL AND kind <> 'memory' AND dionysus_internal.web_only_basis(content) THEN
        RAISE EXCEPTION 'dionysus: maintenance refused: the new text rests on web content alone' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF kind = 'memory' THEN
        SELECT jsonb_build_object('content', x.content, 'confidence', x.confidence, 'status', x.status) INTO before
          FROM dionysus.memories x WHERE x.id = target;
    ELSIF kind = 'belief' THEN
        SELECT jsonb_build_object('content', x.belief, 'confidence', x.confidence) INTO before FROM dionysus.worldview_beliefs x WHERE x.id = target;
    ELSE
        SELECT jsonb_build_object('content', x.aspect, 'confidence', x.confidence) INTO before FROM dionysus.identity_aspects x WHERE x.id = target;
    END IF;
    IF before IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.id": no % with id %', kind, target USING ERRCODE = 'no_data_found';
    END IF;
    IF verdict = 'update' AND kind = 'memory' THEN
        IF content IS NOT NULL AND content <> before ->> 'content' THEN
            new_id := dionysus.supersede(target, content, confidence => conf);
            after := jsonb_build_object('superseded_by', new_id, 'content', content, 'confidence', coalesce(conf, (before ->> 'confidence')::float8));
        ELSIF conf IS NOT NULL THEN
            UPDATE dionysus.memories SET confidence = conf, updated_at = now() WHERE id = target;
            after := jsonb_build_object('confidence', conf);
        END IF;
    ELSIF verdict = 'update' THEN
        IF kind = 'belief' THEN
            UPDATE dionysus.worldview_beliefs SET confidence = coalesce(conf, confidence), belief = coalesce(content, belief), updated_at = now()
             WHERE id = target;
        ELSE
            UPDATE dionysus.identity_aspects SET confidence = coalesce(conf, confidence), aspect = coalesce(content, aspect), updated_at = now()
             WHERE id = target;
        END IF;
        after := jsonb_build_object('content', coalesce(content, before ->> 'content'), 'confidence', coalesce(conf, (before ->> 'confidence')::float8));
    ELSIF verdict = 'retire' THEN
        IF kind = 'memory' THEN
            PERFORM dionysus.archive(target);
            after := jsonb_build_object('status', 'archived');
        ELSIF kind = 'belief' THEN
            DELETE FROM dionysus.worldview_beliefs WHERE id = target;
            after := jsonb_build_object('removed', true);
        ELSE
            DELETE FROM dionysus.identity_aspects WHERE id = target;
            after := jsonb_build_object('removed', true);
        END IF;
    END IF;
    INSERT INTO dionysus.memory_changes (heartbeat_id, work_id, target_kind, target_id, verdict, before, after, reason)
    VALUES (apply_maintenance.heartbeat_id, apply_maintenance.work_id, kind, target, verdict, before, after, m ->> 'reason');
    RETURN jsonb_build_object('kind', kind, 'id', target, 'verdict', verdict, 'before', before, 'after', after);
END $$;

CREATE OR REPLACE FUNCTION pending_outbox(max_items integer DEFAULT 10) RETURNS SETOF outbox
    LANGUAGE sql STABLE AS $$
    SELECT * FROM dionysus.outbox
     WHERE status = 'pending' AND (NOT requires_approval OR approved_at IS NOT NULL)
     ORDER BY created_at, id LIMIT max_items
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.require_outbox(outbox_id uuid) RETURNS dionysus.outbox
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    SELECT * INTO o FROM dionysus.outbox WHERE id = outbox_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "outbox_id": no outbox message with id %', outbox_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN o;
END $$;

CREATE OR REPLACE FUNCTION mark_outbox_sent(outbox_id uuid, platform_message_id text DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE; -- lock order: state before rows
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.requires_approval AND o.approved_at IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": public message % is not approved', outbox_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET status = 'sent', sent_at = now(), attempts = attempts + 1, reserved_until = NULL,
           platform_message_id = mark_outbox_sent.platform_message_id WHERE id = outbox_id;
    IF o.audience = 'user' AND o.work_id IS NOT NULL THEN
        UPDATE dionysus.heartbeat_state SET last_user_contact_at = now() WHERE id = 1;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.outbox_lease() RETURNS interval
    LANGUAGE sql STABLE AS $$ SELECT make_interval(secs => dionysus_internal.heartbeat_setting('outbox_lease_seconds')) $$;

CREATE OR REPLACE FUNCTION reserve_outbox(worker text, platform text, max_items integer DEFAULT 1) RETURNS SETOF outbox
    LANGUAGE plpgsql AS $$
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
    RETURN QUERY
    -- A message for nobody in particular (the home channel) takes the platform that sends it.
    UPDATE dionysus.outbox o SET reserved_by = reserve_outbox.worker, reserved_until = now() + dionysus_internal.outbox_lease(),
           platform = coalesce(o.platform, reserve_outbox.platform)
     WHERE o.id IN (SELECT x.id FROM dionysus.outbox x
                     WHERE x.status = 'pending' AND x.audience = 'user' AND (NOT x.requires_approval OR x.approved_at IS NOT NULL)
                       AND (x.platform IS NULL OR x.platform = reserve_outbox.platform)
                       AND (x.reserved_until IS NULL OR x.reserved_until < now())
                     ORDER BY x.created_at, x.id LIMIT max_items FOR UPDATE SKIP LOCKED)
    RETURNING o.*;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.require_reserved_outbox(outbox_id uuid, worker text) RETURNS dionysus.outbox
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF o.reserved_by IS DISTINCT FROM worker THEN
        RAISE EXCEPTION 'dionysus: argument "worker": message % is reserved by %, not %', outbox_id, coalesce(o.reserved_by, 'nobody'), worker
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN o;
END $$;

CREATE OR REPLACE FUNCTION outbox_part_sent(outbox_id uuid, worker text, part integer, platform_message_id text) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    IF coalesce(btrim(platform_message_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "platform_message_id": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    o := dionysus_internal.require_reserved_outbox(outbox_id, worker);
    IF part IS NULL OR part < 0 OR part > jsonb_array_length(o.sent_parts) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "part": % is not the next part (% recorded)', part, jsonb_array_length(o.sent_parts)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox x SET reserved_until = now() + dionysus_internal.outbox_lease(),
           sent_parts = CASE WHEN outbox_part_sent.part = jsonb_array_length(x.sent_parts)
                             THEN x.sent_parts || to_jsonb(outbox_part_sent.platform_message_id)
                             ELSE x.sent_parts END
     WHERE x.id = outbox_part_sent.outbox_id;
END $$;

CREATE OR REPLACE FUNCTION confirm_outbox(outbox_id uuid, worker text, channel_id text, bot_author_id text) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE
    o dionysus.outbox;
    logged jsonb;
    last_part text;
BEGIN
    IF coalesce(btrim(channel_id), '') = '' OR coalesce(btrim(bot_author_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', CASE WHEN coalesce(btrim(channel_id), '') = '' THEN 'channel_id' ELSE 'bot_author_id' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO o FROM dionysus.outbox x WHERE x.id = outbox_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "outbox_id": no outbox message with id %', outbox_id USING ERRCODE = 'no_data_found';
    END IF;
    -- Lock order: the channel (log_message takes it again), the state row, then the row.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.channel:' || coalesce(o.platform, '') || ':' || channel_id, 0));
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    o := dionysus_internal.require_reserved_outbox(outbox_id, worker);
    last_part := o.sent_parts ->> -1;
    IF last_part IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": no part of message % was recorded as sent', outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF o.platform IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % names no platform', outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- A contact Dionysus started: the person's row (before log_message's episode lock).
    IF (o.work_id IS NOT NULL OR o.contact_id IS NOT NULL) AND o.person IS NOT NULL THEN
        PERFORM dionysus_internal.note_contact_delivered(o.person);
    END IF;
    logged := dionysus.log_message(o.platform, last_part, channel_id, bot_author_id, o.content, true,
                                   o.work_id IS NOT NULL OR o.contact_id IS NOT NULL,
                                   o.reply_to, o.person);
    UPDATE dionysus.outbox x SET status = 'sent', sent_at = now(), attempts = x.attempts + 1, reserved_until = NULL,
           platform_message_id = last_part, channel_id = confirm_outbox.channel_id
     WHERE x.id = outbox_id;
    IF o.work_id IS NOT NULL OR o.contact_id IS NOT NULL THEN
        UPDATE dionysus.heartbeat_state SET last_user_contact_at = now() WHERE id = 1;
    END IF;
    RETURN (logged ->> 'message_id')::uuid;
END $$;

CREATE OR REPLACE FUNCTION release_outbox(outbox_id uuid, worker text, error text, rejected boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE
    o dionysus.outbox;
    st text;
BEGIN
    o := dionysus_internal.require_reserved_outbox(outbox_id, worker);
    UPDATE dionysus.outbox x SET reserved_until = NULL, last_error = release_outbox.error,
           attempts = x.attempts + CASE WHEN rejected THEN 1 ELSE 0 END,
           status = CASE WHEN rejected AND x.attempts + 1 >= 5 THEN 'failed'::dionysus.outbox_status ELSE 'pending' END
     WHERE x.id = outbox_id
    RETURNING x.status::text INTO st;
    RETURN st;
END $$;

CREATE OR REPLACE FUNCTION mark_outbox_failed(outbox_id uuid, error text, retry boolean DEFAULT true) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET attempts = attempts + 1, last_error = error,
           status = CASE WHEN retry AND attempts + 1 < 5 THEN 'pending'::dionysus.outbox_status ELSE 'failed' END
     WHERE id = outbox_id;
    RETURN (SELECT status::text FROM dionysus.outbox WHERE id = outbox_id);
END $$;

CREATE OR REPLACE FUNCTION approve_outbox(outbox_id uuid) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET approved_at = coalesce(approved_at, now()) WHERE id = outbox_id;
    PERFORM pg_notify('dionysus_outbox', outbox_id::text);
END $$;

CREATE OR REPLACE FUNCTION heartbeat_warnings() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    w jsonb := '[]'::jsonb;
    avg_unused double precision;
    n integer;
    reach_outs integer;
    loop_sim double precision;
BEGIN
    -- Hoarding (§9.2): average unused energy over 5 across the last 24 heartbeats (no verdict before 24).
    SELECT avg(energy_end), count(*) INTO avg_unused, n
      FROM (SELECT energy_end FROM dionysus.heartbeat_log WHERE energy_end IS NOT NULL
             ORDER BY heartbeat_number DESC LIMIT 24) h;
    IF n >= 24 AND avg_unused > 5 THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'hoarding', 'avg_unused_energy', round(avg_unused::numeric, 2),
             'heartbeats', n, 'message', 'Energy keeps going unused; spend it on something that matters, or reflect on why not.'));
    END IF;
    -- Reach-out spam: 5 or more in 24 hours.
    SELECT count(*) INTO reach_outs FROM dionysus.heartbeat_log h, jsonb_array_elements(h.actions_taken) a
     WHERE h.started_at > now() - interval '24 hours' AND a ->> 'action' = 'reach_out_user';
    IF reach_outs >= 5 THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'reach_out_spam', 'reach_outs_24h', reach_outs,
             'message', 'You have messaged the user often today; let them come to you.'));
    END IF;
    -- Stagnation: active goals untouched for a week.
    IF EXISTS (SELECT 1 FROM dionysus.goals WHERE priority = 'active'
                AND last_touched < now() - make_interval(secs => dionysus_internal.heartbeat_setting('stale_goal_days') * 86400)) THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'stagnation',
             'goals', (SELECT jsonb_agg(title) FROM dionysus.goals WHERE priority = 'active'
                        AND last_touched < now() - make_interval(secs => dionysus_internal.heartbeat_setting('stale_goal_days') * 86400)),
             'message', 'Some active goals have not moved in a week: progress, demote or abandon them.'));
    END IF;
    -- Loops: the last three narratives nearly the same (by embedding).
    SELECT min(1 - (a.embedding <=> b.embedding)) INTO loop_sim
      FROM (SELECT m.id, m.embedding, row_number() OVER (ORDER BY h.heartbeat_number DESC) AS r
              FROM dionysus.heartbeat_log h JOIN dionysus.memories m ON m.id = h.memory_id
             ORDER BY h.heartbeat_number DESC LIMIT 3) a
      JOIN (SELECT m.id, m.embedding, row_number() OVER (ORDER BY h.heartbeat_number DESC) AS r
              FROM dionysus.heartbeat_log h JOIN dionysus.memories m ON m.id = h.memory_id
             ORDER BY h.heartbeat_number DESC LIMIT 3) b ON b.r = a.r + 1
     HAVING count(*) = 2;
    IF loop_sim IS NOT NULL AND loop_sim >= 0.9 THEN
        w := w || jsonb_build_array(jsonb_build_object('kind', 'loop', 'similarity', round(loop_sim::numeric, 3),
             'message', 'Your last heartbeats read almost the same. What else might deserve attention?'));
    END IF;
    RETURN w;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.heartbeat_interval_minutes() RETURNS integer
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('dionysus.heartbeat_interval', true), '')::integer, 60)
$$;

CREATE OR REPLACE FUNCTION heartbeat_observe() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'timestamp', now(),
        'weekday', to_char(now(), 'FMDay'),
        'user_present', s.session_active,
        'last_user_interaction', s.last_user_interaction_at,
        'hours_since_user', round((extract(epoch FROM now() - s.last_user_interaction_at) / 3600)::numeric, 2),
        'last_user_contact', s.last_user_contact_at,
        'hours_since_contact', round((extract(epoch FROM now() - s.last_user_contact_at) / 3600)::numeric, 2),
        'pending_events', jsonb_build_object(
            'work_pending', (SELECT count(*) FROM dionysus.work_queue WHERE status IN ('pending', 'claimed')),
            'outbox_pending', (SELECT count(*) FROM dionysus.outbox WHERE status = 'pending'),
            'requested', s.request_reason),
        -- Cheap on any store size: estimates and the worker's own record, no scans
        -- (memory_health has the exact counts).
        'system_status', (SELECT jsonb_build_object(
                              'memories_estimate', (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'dionysus.memories'::regclass),
                              'neighborhood_backlog', EXISTS (SELECT 1 FROM dionysus.neighborhood_queue),
                              'last_worker_run', w.last_run_at, 'last_worker_error', w.last_error)
                            FROM dionysus.worker_status w WHERE w.id = 1))
    FROM dionysus.heartbeat_state s WHERE s.id = 1);
END $$;

CREATE OR REPLACE FUNCTION activated_themes(max_items integer DEFAULT 5) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    WITH touched AS (
        (SELECT memory_id FROM dionysus.memory_access_log WHERE accessed_at > now() - interval '1 day'
          ORDER BY accessed_at DESC LIMIT 200)
        UNION
        (SELECT id FROM dionysus.memories WHERE last_accessed > now() - interval '1 day'
          ORDER BY last_accessed DESC LIMIT 200)),
    concepts AS (
        SELECT c.name, count(*) AS hits FROM touched t
          JOIN dionysus.memory_concepts mc ON mc.memory_id = t.memory_id JOIN dionysus.concepts c ON c.id = mc.concept_id
         GROUP BY c.name ORDER BY hits DESC, c.name LIMIT max_items)
    SELECT CASE WHEN EXISTS (SELECT 1 FROM concepts)
                THEN (SELECT jsonb_agg(jsonb_build_object('theme', name, 'hits', hits)) FROM concepts)
                ELSE coalesce((SELECT jsonb_agg(jsonb_build_object('memory', left(m.content, 160)))
                                 FROM (SELECT m.content FROM touched t JOIN dionysus.memories m ON m.id = t.memory_id
                                        ORDER BY m.last_accessed DESC NULLS LAST LIMIT max_items) m), '[]'::jsonb)
           END
$$;

CREATE OR REPLACE FUNCTION action_costs() RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_object_agg(substr(key, 6), value ORDER BY value, key) FROM dionysus.heartbeat_config WHERE key LIKE 'cost\_%'
$$;

CREATE OR REPLACE FUNCTION heartbeat_begin() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    st dionysus.heartbeat_state;
    ctx jsonb;
    hb uuid;
    n integer;
    energy double precision;
    env jsonb;
    goals jsonb;
    taint text[];
BEGIN
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    IF st.in_flight IS NOT NULL THEN
        SELECT context INTO ctx FROM dionysus.heartbeat_log WHERE id = st.in_flight AND status IN ('in_flight', 'committed');
        IF FOUND THEN
            RETURN ctx || jsonb_build_object('resumed', true,
                'status', (SELECT status FROM dionysus.heartbeat_log WHERE id = st.in_flight));
        END IF;
    END IF;
    n := st.heartbeat_count + 1;
    hb := gen_random_uuid();
    energy := least(st.current_energy * dionysus_internal.heartbeat_setting('carry_over') + dionysus_internal.heartbeat_setting('base_regeneration'),
                    dionysus_internal.heartbeat_setting('max_energy'));
    -- The log row first: the ledger entry of the regeneration points at it.
    INSERT INTO dionysus.heartbeat_log (id, heartbeat_number, energy_start, last_alive_at) VALUES (hb, n, energy, now());
    PERFORM dionysus.update_energy(energy - st.current_energy, hb, 'regenerate', 'heartbeat start');
    env := dionysus.heartbeat_observe();
    goals := dionysus.review_goals();
    ctx := jsonb_build_object(
        'heartbeat_id', hb,
        'heartbeat_number', n,
        'energy', jsonb_build_object('available', energy, 'max', dionysus_internal.heartbeat_setting('max_energy')),
        'environment', env,
        'goals', goals,
        'recent_memories', coalesce((SELECT jsonb_agg(jsonb_build_object('id', m.id, 'content', m.content, 'created_at', m.created_at,
                                                                         'valence', m.valence) ORDER BY m.created_at DESC)
                                      FROM (SELECT * FROM dionysus.memories WHERE type = 'episodic' AND status = 'active'
                                             ORDER BY created_at DESC LIMIT 5) m), '[]'::jsonb),
        'activated_themes', dionysus.activated_themes(),
        'identity', coalesce((SELECT jsonb_agg(jsonb_build_object('aspect', aspect, 'confidence', confidence) ORDER BY confidence DESC)
                                FROM dionysus.identity_aspects), '[]'::jsonb),
        'worldview', coalesce((SELECT jsonb_agg(jsonb_build_object('belief', belief, 'confidence', confidence) ORDER BY confidence DESC)
                                 FROM dionysus.worldview_beliefs), '[]'::jsonb),
        'action_costs', dionysus.action_costs(),
        'warnings', dionysus.heartbeat_warnings(),
        'reach_out_cooldown_hours', dionysus_internal.heartbeat_setting('reach_out_cooldown_hours'),
        'people', dionysus.known_people(),
        -- What matters most to the person it would reach out to (017, whoever wrote last): every
        -- heartbeat decision keeps it in view. Only theirs, so the heartbeat is tainted by no one else.
        'north_stars', coalesce((SELECT jsonb_agg(jsonb_build_object('person', n.person, 'north_star', n.content) ORDER BY n.created_at)
                                   FROM dionysus.north_stars n
                                  WHERE n.status = 'active'
                                    AND n.person = (SELECT p.person FROM dionysus.people p ORDER BY p.last_message_at DESC NULLS LAST LIMIT 1)), '[]'::jsonb));
    -- Whose private words this context holds: its memories (recent ones, and the recalled
    -- ones activated_themes may quote) and its goals. What the heartbeat writes inherits it.
    taint := dionysus_internal.privacy_union(
        dionysus_internal.memory_privacy(ARRAY(
            SELECT (e ->> 'id')::uuid FROM jsonb_array_elements(ctx -> 'recent_memories') e
            UNION (SELECT memory_id FROM dionysus.memory_access_log WHERE accessed_at > now() - interval '1 day'
                    ORDER BY accessed_at DESC LIMIT 200)
            UNION (SELECT id FROM dionysus.memories WHERE last_accessed > now() - interval '1 day'
                    ORDER BY last_accessed DESC LIMIT 200))),
        dionysus_internal.privacy_union(
            (SELECT array_agg(DISTINCT p) FROM dionysus.goals g, unnest(g.private_to) p WHERE g.priority IN ('active', 'queued')),
            (SELECT array_agg(DISTINCT e ->> 'person') FROM jsonb_array_elements(ctx -> 'north_stars') e)));
    UPDATE dionysus.heartbeat_log SET context = ctx, environment_snapshot = env, goals_snapshot = goals, private_to = taint
     WHERE id = hb;
    UPDATE dionysus.heartbeat_state SET in_flight = hb, heartbeat_count = n, requested_at = NULL, request_reason = NULL,
           updated_at = now() WHERE id = 1;
    RETURN ctx;
END $$;

CREATE OR REPLACE FUNCTION heartbeat_default_decision() RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS $$
    SELECT '{"reasoning": "The decision could not be made (the language model failed or answered nonsense); reflecting on recent experience and resting instead.",
             "actions": [{"action": "reflect", "params": {"focus": "recent experience"}}, {"action": "rest", "params": {}}],
             "goal_changes": []}'::jsonb
$$;

CREATE OR REPLACE FUNCTION heartbeat_finish(heartbeat_id uuid, narrative text, emotional_valence double precision DEFAULT 0.0)
    RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    h dionysus.heartbeat_log;
    mem uuid;
    g uuid;
BEGIN
    IF heartbeat_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF narrative IS NULL OR btrim(narrative) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "narrative": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF emotional_valence IS NULL OR emotional_valence = 'NaN'::float8 OR emotional_valence < -1 OR emotional_valence > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "emotional_valence": % is outside [-1, 1]', emotional_valence
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    SELECT * INTO h FROM dionysus.heartbeat_log l WHERE l.id = heartbeat_finish.heartbeat_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id": no heartbeat with id %', heartbeat_id USING ERRCODE = 'no_data_found';
    END IF;
    IF h.status = 'recovered' THEN
        -- Its driver fell silent and the scheduler closed it: a late driver must stop here.
        RAISE EXCEPTION 'dionysus: heartbeat % was recovered by the scheduler after its driver fell silent; it is not finished twice', h.heartbeat_number
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF h.status <> 'committed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_id": heartbeat % is %, finish needs a committed one', h.heartbeat_number, h.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The narrative tells what the context and the work held: it is as private as both.
    mem := dionysus.remember(narrative, 'episodic', 0.5, emotional_valence,
                             jsonb_build_object('heartbeat', h.heartbeat_number, 'heartbeat_id', h.id), 'heartbeat',
                             private_to => dionysus_internal.privacy_union(h.private_to,
                                 (SELECT array_agg(DISTINCT p #>> '{}') FROM dionysus.work_queue q,
                                         jsonb_array_elements(CASE WHEN jsonb_typeof(q.result -> 'applied' -> 'private_to') = 'array'
                                                                   THEN q.result -> 'applied' -> 'private_to' ELSE '[]' END) p
                                   WHERE q.heartbeat_id = h.id)));
    FOR g IN SELECT DISTINCT (c ->> 'goal_id')::uuid FROM jsonb_array_elements(h.goals_modified) c
              WHERE c ->> 'goal_id' IS NOT NULL AND (c ->> 'applied')::boolean
             UNION
             SELECT DISTINCT (a -> 'params' ->> 'goal_id')::uuid FROM jsonb_array_elements(h.actions_taken) a
              WHERE a ->> 'action' = 'reprioritize' LOOP
        IF EXISTS (SELECT 1 FROM dionysus.goals WHERE id = g) THEN
            INSERT INTO dionysus.goal_memory_links (goal_id, memory_id, link_type) VALUES (g, mem, 'progress') ON CONFLICT DO NOTHING;
        END IF;
    END LOOP;
    UPDATE dionysus.heartbeat_log SET status = 'finished', ended_at = now(), narrative = heartbeat_finish.narrative,
           emotional_valence = heartbeat_finish.emotional_valence, memory_id = mem,
           energy_end = (SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1)
     WHERE id = h.id;
    UPDATE dionysus.heartbeat_state SET in_flight = NULL, last_heartbeat_at = now(),
           next_heartbeat_at = dionysus.clock_now() + make_interval(mins => dionysus_internal.heartbeat_interval_minutes()), updated_at = now()
     WHERE id = 1;
    -- A beat of the clock for the proactive mind (source time: never filtered, never a disturbance).
    PERFORM dionysus.push_event('time', 'heartbeat', 2, jsonb_build_object('heartbeat_number', h.heartbeat_number, 'memory_id', mem));
    RETURN mem;
END $$;

CREATE OR REPLACE FUNCTION heartbeat_touch(heartbeat_id uuid) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE st text;
BEGIN
    IF heartbeat_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE dionysus.heartbeat_log l SET last_alive_at = now()
     WHERE l.id = heartbeat_touch.heartbeat_id AND l.status IN ('in_flight', 'committed')
    RETURNING l.status::text INTO st;
    IF st IS NULL THEN
        SELECT l.status::text INTO st FROM dionysus.heartbeat_log l WHERE l.id = heartbeat_touch.heartbeat_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'dionysus: argument "heartbeat_id": no heartbeat with id %', heartbeat_id USING ERRCODE = 'no_data_found';
        END IF;
    END IF;
    RETURN st;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.recover_stalled_heartbeats() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    h dionysus.heartbeat_log;
    n integer := 0;
    why text;
BEGIN
    FOR h IN SELECT * FROM dionysus.heartbeat_log
              WHERE status IN ('in_flight', 'committed')
                AND coalesce(last_alive_at, started_at)
                    < now() - make_interval(secs => dionysus_internal.heartbeat_setting('heartbeat_timeout_minutes') * 60)
              ORDER BY heartbeat_number LOOP
        BEGIN
            IF h.status = 'in_flight' THEN
                PERFORM dionysus.heartbeat_commit(h.id, dionysus.heartbeat_default_decision());
            END IF;
            PERFORM dionysus.heartbeat_finish(h.id, format('Heartbeat %s was interrupted before it finished; it was closed with the fallback decision (reflect and rest).', h.heartbeat_number), 0.0);
            UPDATE dionysus.heartbeat_log SET status = 'recovered' WHERE id = h.id;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
            UPDATE dionysus.heartbeat_state SET in_flight = NULL, last_heartbeat_at = now(),
                   next_heartbeat_at = dionysus.clock_now() + make_interval(mins => dionysus_internal.heartbeat_interval_minutes()), updated_at = now()
             WHERE id = 1 AND in_flight = h.id;
            UPDATE dionysus.heartbeat_log SET status = 'recovered', ended_at = now(), recovery_error = why WHERE id = h.id;
        END;
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION heartbeat_due() RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT NOT s.paused AND NOT s.session_active AND s.in_flight IS NULL
           AND (s.requested_at IS NOT NULL OR s.next_heartbeat_at IS NULL OR s.next_heartbeat_at <= dionysus.clock_now())
      FROM dionysus.heartbeat_state s WHERE s.id = 1
$$;

CREATE OR REPLACE FUNCTION scheduler_tick() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    recovered integer;
    due boolean;
    st dionysus.heartbeat_state;
    work_waiting bigint;
    outbox_waiting bigint;
    ended_session boolean;
    language_work integer := 0;
    errors jsonb := '[]'::jsonb;
    why text;
    proactive jsonb;
    contacts_waiting bigint := 0;
    opp record;
BEGIN
    -- Each step in its own subtransaction: one that fails is reported, the others (and the
    -- NOTIFYs below) still happen.
    recovered := dionysus_internal.recover_stalled_heartbeats();
    BEGIN
        ended_session := dionysus.end_idle_session();
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        errors := errors || jsonb_build_object('step', 'end_idle_session', 'error', why);
    END;
    BEGIN
        language_work := dionysus.enqueue_language_work();
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        errors := errors || jsonb_build_object('step', 'enqueue_language_work', 'error', why);
    END;
    -- The proactive mind's tick, when its own (dynamic) interval is up (after the state row:
    -- lock order).
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    BEGIN
        IF dionysus_internal.proactive_tick_due() THEN
            proactive := dionysus.proactive_tick();
        END IF;
        -- Crossings not yet decided are announced again (a driver may have been away).
        FOR opp IN SELECT c.id, c.person, c.explanation FROM dionysus.contact_evaluations c
                    WHERE c.outcome = 'opportunity' AND c.decision IS NULL AND c.notified_at < now() - interval '1 minute'
                    ORDER BY c.at LIMIT 10 LOOP
            PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', opp.id, 'person', opp.person, 'why', opp.explanation)::text);
            UPDATE dionysus.contact_evaluations SET notified_at = now() WHERE id = opp.id;
            contacts_waiting := contacts_waiting + 1;
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        errors := errors || jsonb_build_object('step', 'proactive_tick', 'error', why);
    END;
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    due := dionysus.heartbeat_due();
    IF due AND (st.last_notified_at IS NULL OR st.last_notified_at < now() - interval '1 minute'
                OR st.requested_at > st.last_notified_at) THEN
        PERFORM pg_notify('dionysus_heartbeat', jsonb_build_object('reason', coalesce(st.request_reason, 'scheduled'),
                                                                  'database', current_database())::text);
        UPDATE dionysus.heartbeat_state SET last_notified_at = now() WHERE id = 1;
    END IF;
    -- Items fresh from their producer were announced by it; these are the ones that waited,
    -- or came out of a retry delay.
    SELECT count(*) INTO work_waiting FROM dionysus.work_queue
     WHERE status = 'pending' AND available_at <= now()
       AND (created_at < now() - interval '1 minute' OR available_at > created_at OR language_work > 0);
    IF work_waiting > 0 THEN
        PERFORM pg_notify('dionysus_work', jsonb_build_object('waiting', work_waiting)::text);
    END IF;
    SELECT count(*) INTO outbox_waiting FROM dionysus.outbox
     WHERE status = 'pending' AND (NOT requires_approval OR approved_at IS NOT NULL) AND created_at < now() - interval '1 minute';
    IF outbox_waiting > 0 THEN
        PERFORM pg_notify('dionysus_outbox', jsonb_build_object('waiting', outbox_waiting)::text);
    END IF;
    RETURN jsonb_build_object('recovered', recovered, 'due', due, 'work_waiting', work_waiting, 'outbox_waiting', outbox_waiting,
                              'ended_session', ended_session, 'language_work_queued', language_work, 'proactive', proactive,
                              'contacts_reannounced', contacts_waiting, 'errors', errors);
END $$;

CREATE OR REPLACE FUNCTION prune_history(batch integer DEFAULT 10000) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    cutoff timestamptz := now() - make_interval(secs => dionysus_internal.heartbeat_setting('retention_days') * 86400);
    pruned jsonb := '{}'::jsonb;
    n integer;
BEGIN
    IF batch IS NULL OR batch < 1 OR batch > 1000000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "batch": % is outside [1, 1000000]', batch USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM dionysus.energy_ledger WHERE id IN (SELECT id FROM dionysus.energy_ledger WHERE at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('energy_ledger', n);
    DELETE FROM dionysus.work_queue WHERE id IN (SELECT id FROM dionysus.work_queue WHERE status IN ('done', 'failed')
                                                   AND coalesce(completed_at, created_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('work_queue', n);
    DELETE FROM dionysus.outbox WHERE id IN (SELECT id FROM dionysus.outbox WHERE status IN ('sent', 'failed')
                                               AND coalesce(sent_at, created_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('outbox', n);
    DELETE FROM dionysus.heartbeat_log WHERE id IN (SELECT id FROM dionysus.heartbeat_log WHERE status IN ('finished', 'recovered')
                                                      AND coalesce(ended_at, started_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('heartbeat_log', n);
    DELETE FROM dionysus.memory_access_log WHERE ctid IN (SELECT ctid FROM dionysus.memory_access_log WHERE accessed_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('memory_access_log', n);
    DELETE FROM dionysus.embedding_cache WHERE (model, content_hash) IN
        (SELECT model, content_hash FROM dionysus.embedding_cache WHERE created_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('embedding_cache', n);
    -- The proactive mind's past: handled events, and evaluations (by the clock it ran on).
    DELETE FROM dionysus.events WHERE id IN (SELECT id FROM dionysus.events WHERE status NOT IN ('queued', 'scheduled')
                                               AND at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('events', n);
    DELETE FROM dionysus.contact_evaluations WHERE id IN (SELECT id FROM dionysus.contact_evaluations
                                                            WHERE at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('contact_evaluations', n);
    DELETE FROM dionysus.rule_firings WHERE id IN (SELECT id FROM dionysus.rule_firings
                                                     WHERE at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('rule_firings', n);
    RETURN pruned;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.table_bytes(tables text[]) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_object_agg(t, pg_total_relation_size(('dionysus.' || quote_ident(t))::regclass) ORDER BY t) FROM unnest(tables) t
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.messages_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.platform, NEW.platform_message_id, NEW.channel_id, NEW.author_id, NEW.is_bot, NEW.is_proactive,
        NEW.content, NEW.created_at, NEW.person)
       IS DISTINCT FROM
       (OLD.platform, OLD.platform_message_id, OLD.channel_id, OLD.author_id, OLD.is_bot, OLD.is_proactive,
        OLD.content, OLD.created_at, OLD.person)
       OR (NEW.memory_id IS NOT NULL AND NEW.memory_id IS DISTINCT FROM OLD.memory_id)
       OR (NEW.prev_message_id IS NOT NULL AND NEW.prev_message_id IS DISTINCT FROM OLD.prev_message_id)
       OR (NEW.reply_to IS NOT NULL AND NEW.reply_to IS DISTINCT FROM OLD.reply_to) THEN
        RAISE EXCEPTION 'dionysus: the message log is immutable (message %)', OLD.id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION prompt_template(key text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE t dionysus.prompt_templates;
BEGIN
    IF key IS NULL OR btrim(key) = '' THEN
        RAISE EXCEPTION 'dionysus: argument "key" must name a template' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO t FROM dionysus.prompt_templates p WHERE p.key = prompt_template.key AND p.active;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "key": no active prompt template "%"', key USING ERRCODE = 'no_data_found';
    END IF;
    RETURN jsonb_build_object('key', t.key, 'version', t.version, 'template', t.template, 'temperature', t.temperature);
END $$;

CREATE OR REPLACE FUNCTION set_prompt_template(key text, template text, temperature double precision DEFAULT NULL,
                                    note text DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    prev dionysus.prompt_templates;
    v integer;
BEGIN
    IF key IS NULL OR key !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "key": % must be lower_snake_case', quote_nullable(key)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF template IS NULL OR btrim(template) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "template": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF temperature IS NOT NULL AND (temperature = 'NaN'::float8 OR temperature < 0 OR temperature > 2) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "temperature": % is outside [0, 2]', temperature
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.prompt:' || key, 0));
    SELECT * INTO prev FROM dionysus.prompt_templates p WHERE p.key = set_prompt_template.key AND p.active;
    SELECT coalesce(max(version), 0) + 1 INTO v FROM dionysus.prompt_templates p WHERE p.key = set_prompt_template.key;
    UPDATE dionysus.prompt_templates p SET active = false WHERE p.key = set_prompt_template.key AND p.active;
    INSERT INTO dionysus.prompt_templates (key, version, template, temperature, note)
    VALUES (key, v, template, coalesce(temperature, prev.temperature, 0.7), note);
    RETURN v;
END $$;

CREATE OR REPLACE FUNCTION log_message(platform text, platform_message_id text, channel_id text, author_id text, content text,
                            is_bot boolean DEFAULT false, is_proactive boolean DEFAULT false, reply_to uuid DEFAULT NULL,
                            person text DEFAULT NULL)
    RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    existing dionysus.messages;
    who text;
    prev uuid;
    mem uuid;
    msg uuid := gen_random_uuid();
    work uuid;
    arg text;
    noted jsonb := '{}'::jsonb;
    prev_is_bot boolean;
BEGIN
    FOREACH arg IN ARRAY ARRAY['platform', 'platform_message_id', 'channel_id', 'author_id'] LOOP
        IF coalesce(btrim(CASE arg WHEN 'platform' THEN platform WHEN 'platform_message_id' THEN platform_message_id
                                   WHEN 'channel_id' THEN channel_id ELSE author_id END), '') = '' THEN
            RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', arg USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF content IS NULL OR btrim(content) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "content": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF is_bot IS NULL OR is_proactive IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "%" must not be null', CASE WHEN is_bot IS NULL THEN 'is_bot' ELSE 'is_proactive' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- One writer per channel: the chain stays linear and a redelivery waits for the first copy.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.channel:' || platform || ':' || channel_id, 0));
    SELECT * INTO existing FROM dionysus.messages m
     WHERE m.platform = log_message.platform AND m.platform_message_id = log_message.platform_message_id;
    IF FOUND THEN
        RETURN jsonb_build_object('message_id', existing.id, 'duplicate', true, 'prev_message_id', existing.prev_message_id,
                                  'memory_id', existing.memory_id, 'person', existing.person,
                                  'replied', EXISTS (SELECT 1 FROM dionysus.messages r WHERE r.reply_to = existing.id AND r.is_bot),
                                  'reply_queued', EXISTS (SELECT 1 FROM dionysus.outbox o WHERE o.reply_to = existing.id),
                                  'work_id', (SELECT id FROM dionysus.work_queue WHERE idempotency_key = 'extract_message:' || existing.id));
    END IF;
    IF log_message.reply_to IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dionysus.messages m WHERE m.id = log_message.reply_to) THEN
        RAISE EXCEPTION 'dionysus: argument "reply_to": no message with id %', reply_to USING ERRCODE = 'no_data_found';
    END IF;
    IF NOT is_bot THEN
        who := dionysus.person_key(platform, author_id);
        IF person IS NOT NULL AND person <> who THEN
            RAISE EXCEPTION 'dionysus: invalid argument "person": a person''s turn belongs to its author (%)', who
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        who := coalesce(nullif(btrim(person), ''), (SELECT r.person FROM dionysus.messages r WHERE r.id = log_message.reply_to));
    END IF;
    SELECT m.id, m.is_bot INTO prev, prev_is_bot FROM dionysus.messages m
     WHERE m.platform = log_message.platform AND m.channel_id = log_message.channel_id
     ORDER BY m.created_at DESC, m.id DESC LIMIT 1;
    IF NOT is_bot THEN
        PERFORM dionysus.session_start(); -- the state row before remember's episode lock (lock order)
        -- The proactive mind's beliefs about the person (agent_state and their row: before the
        -- episode lock too).
        noted := dionysus_internal.note_person_message(who, msg, content);
    END IF;
    mem := dionysus.remember(content, 'episodic', CASE WHEN is_bot THEN 0.3 ELSE 0.5 END, 0.0,
                             jsonb_build_object('message_id', msg, 'platform', platform, 'channel_id', channel_id,
                                                'role', CASE WHEN is_bot THEN 'assistant' ELSE 'user' END,
                                                'proactive', is_proactive),
                             'conversation:' || platform || ':' || channel_id,
                             private_to => CASE WHEN who IS NULL THEN NULL ELSE ARRAY[who] END);
    INSERT INTO dionysus.messages (id, platform, platform_message_id, channel_id, author_id, is_bot, is_proactive, content,
                                   prev_message_id, reply_to, memory_id, person)
    VALUES (msg, platform, platform_message_id, channel_id, author_id, is_bot, is_proactive, content, prev, reply_to, mem, who);
    -- Nothing to extract from "ok" (note_person_message read the words once already).
    IF NOT is_bot AND NOT coalesce((noted ->> 'acknowledgement')::boolean, false) THEN
        INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, available_at)
        VALUES ('extract_message:' || msg, 'extract_message',
                jsonb_build_object('message_id', msg, 'memory_id', mem, 'source', 'conversation:' || msg, 'person', who),
                dionysus_internal.heartbeat_setting('work_max_attempts')::int, now() + interval '2 minutes')
        RETURNING id INTO work;
    END IF;
    -- An acknowledgement of what Dionysus said ("ok", "👍") needs no reply and no model.
    RETURN jsonb_build_object('message_id', msg, 'duplicate', false, 'prev_message_id', prev, 'memory_id', mem, 'work_id', work,
                              'person', who,
                              'acknowledgement', coalesce((noted ->> 'acknowledgement')::boolean AND prev_is_bot, false),
                              'answered_contact', coalesce((noted ->> 'answered_contact')::boolean, false),
                              'signal', noted -> 'signal',
                              -- A contact whose answer the cues could not judge: the fast model may (contact_feedback).
                              'feedback_unsure', noted -> 'feedback_unsure');
END $$;

CREATE OR REPLACE FUNCTION queue_reply(message_id uuid, worker text, content text DEFAULT NULL) RETURNS SETOF outbox
    LANGUAGE plpgsql AS $$
DECLARE m dionysus.messages;
BEGIN
    IF content IS NOT NULL AND btrim(content) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "content": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF worker IS NULL OR btrim(worker) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "worker": must name the sender' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO m FROM dionysus.messages x WHERE x.id = queue_reply.message_id;
    IF NOT FOUND OR m.is_bot THEN
        RAISE EXCEPTION 'dionysus: argument "message_id": no message from a person with id %', message_id USING ERRCODE = 'no_data_found';
    END IF;
    IF content IS NULL THEN
        UPDATE dionysus.outbox ob SET reserved_by = queue_reply.worker, reserved_until = now() + dionysus_internal.outbox_lease()
         WHERE ob.reply_to = m.id AND ob.status = 'pending'
           AND (ob.reserved_until IS NULL OR ob.reserved_until < now() OR ob.reserved_by = queue_reply.worker);
    ELSE
        INSERT INTO dionysus.outbox AS ob (audience, content, person, platform, channel_id, reply_to, reserved_by, reserved_until)
        VALUES ('user', content, m.person, m.platform, m.channel_id, m.id, worker, now() + dionysus_internal.outbox_lease())
        ON CONFLICT (reply_to) DO UPDATE SET reserved_by = EXCLUDED.reserved_by, reserved_until = EXCLUDED.reserved_until
         WHERE ob.status = 'pending' AND (ob.reserved_until IS NULL OR ob.reserved_until < now() OR ob.reserved_by = EXCLUDED.reserved_by);
    END IF;
    RETURN QUERY SELECT * FROM dionysus.outbox o WHERE o.reply_to = queue_reply.message_id;
END $$;

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

    SELECT coalesce(jsonb_agg(jsonb_build_object('role', CASE WHEN t.is_bot THEN 'assistant' ELSE 'user' END,
                                                 'content', t.content, 'at', t.created_at, 'proactive', t.is_proactive)
                              ORDER BY t.created_at, t.id), '[]'::jsonb),
           array_agg(t.memory_id) FILTER (WHERE t.memory_id IS NOT NULL)
      INTO turns, in_view
      FROM (SELECT * FROM dionysus.messages x
             WHERE x.platform = m.platform AND x.channel_id = m.channel_id AND x.id <> m.id
               AND (x.created_at, x.id) < (m.created_at, m.id)
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
        'goals', coalesce((SELECT jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title) ORDER BY g.last_touched DESC)
                             FROM dionysus.goals g WHERE g.priority = 'active' AND dionysus_internal.visible_to(g.private_to, viewer)),
                          '[]'::jsonb),
        -- What matters most to them (017), in every context; and what they are working toward.
        'north_stars', coalesce((SELECT jsonb_agg(n.content ORDER BY n.created_at) FROM dionysus.person_north_stars(viewer) n), '[]'::jsonb),
        'objectives', coalesce((SELECT jsonb_agg(jsonb_build_object('description', o.description, 'saliency', round(o.saliency::numeric, 2)))
                                  FROM (SELECT * FROM dionysus.person_objectives(viewer) LIMIT 5) o), '[]'::jsonb),
        'archetype', shape);
END $$;

CREATE OR REPLACE FUNCTION end_idle_session() RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    st dionysus.heartbeat_state;
    turns bigint;
BEGIN
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    IF NOT st.session_active OR st.last_user_interaction_at >
       now() - make_interval(secs => dionysus_internal.heartbeat_setting('session_idle_minutes') * 60) THEN
        RETURN false;
    END IF;
    SELECT count(*) INTO turns FROM dionysus.messages
     WHERE NOT is_bot AND created_at >= coalesce(st.session_started_at, st.last_user_interaction_at);
    PERFORM dionysus.session_end(turns >= dionysus_internal.heartbeat_setting('significant_session_turns'));
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION enqueue_language_work() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    k integer;
    attempts integer := dionysus_internal.heartbeat_setting('work_max_attempts')::int;
BEGIN
    UPDATE dionysus.episodes SET ended_at = greatest(last_event_at, started_at)
     WHERE ended_at IS NULL AND NOT explicit
       AND last_event_at < now() - make_interval(mins => coalesce((SELECT setting::int FROM pg_settings WHERE name = 'dionysus.episode_gap_minutes'), 30));
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts)
    SELECT 'summarize_episode:' || e.id, 'summarize_episode', jsonb_build_object('episode_id', e.id), attempts
      FROM dionysus.episodes e
     WHERE e.ended_at IS NOT NULL AND e.summary IS NULL AND e.memory_count > 0
       AND e.ended_at < now() - make_interval(secs => dionysus_internal.heartbeat_setting('summary_delay_minutes') * 60)
       AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.idempotency_key = 'summarize_episode:' || e.id)
     ORDER BY e.ended_at LIMIT 5
    ON CONFLICT (idempotency_key) DO NOTHING;
    GET DIAGNOSTICS k = ROW_COUNT;
    n := n + k;
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts)
    SELECT 'extract_concepts:' || m.id, 'extract_concepts', jsonb_build_object('memory_id', m.id), attempts
      FROM dionysus.memories m
     WHERE m.created_at > now() - make_interval(secs => dionysus_internal.heartbeat_setting('concept_window_hours') * 3600)
       AND m.status = 'active'
       AND NOT EXISTS (SELECT 1 FROM dionysus.memory_concepts mc WHERE mc.memory_id = m.id)
       AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.idempotency_key = 'extract_concepts:' || m.id)
     ORDER BY m.created_at LIMIT 10
    ON CONFLICT (idempotency_key) DO NOTHING;
    GET DIAGNOSTICS k = ROW_COUNT;
    n := n + k;
    -- The nightly dream (017), once a local date, after dream_hour.
    IF dionysus_internal.schedule_dream() THEN
        n := n + 1;
    END IF;
    IF n > 0 THEN
        PERFORM pg_notify('dionysus_work', jsonb_build_object('queued', n)::text);
    END IF;
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION episode_transcript(episode_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('content', m.content, 'type', m.type, 'at', m.created_at,
                                                 'role', m.metadata ->> 'role') ORDER BY em.sequence_order), '[]'::jsonb)
      FROM dionysus.episode_memories em JOIN dionysus.memories m ON m.id = em.memory_id
     WHERE em.episode_id = episode_transcript.episode_id
$$;

CREATE OR REPLACE FUNCTION person_key(platform text, author_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN lower(btrim(platform)) || ':' || btrim(author_id);

CREATE OR REPLACE FUNCTION dionysus_internal.visible_to(private_to text[], person text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN private_to IS NULL OR (person IS NOT NULL AND private_to <@ ARRAY[person]);

CREATE OR REPLACE FUNCTION dionysus_internal.privacy_union(a text[], b text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN a IS NULL AND b IS NULL THEN NULL
                ELSE (SELECT array_agg(DISTINCT p ORDER BY p) FROM unnest(coalesce(a, '{}') || coalesce(b, '{}')) p) END;

CREATE OR REPLACE FUNCTION dionysus_internal.memory_privacy(memory_ids uuid[]) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN (SELECT array_agg(DISTINCT p ORDER BY p)
              FROM dionysus.memories m, unnest(m.private_to) p WHERE m.id = ANY(memory_ids));

CREATE OR REPLACE FUNCTION dionysus_internal.web_only_basis(content text) RETURNS boolean
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    q vector;
    n integer;
    web integer;
BEGIN
    IF content IS NULL OR btrim(content) = '' THEN
        RETURN false;
    END IF;
    q := dionysus.embed(content);
    SELECT count(*), count(*) FILTER (WHERE s.source = 'web') INTO n, web
      FROM (SELECT m.source, 1 - (m.embedding <=> q) AS sim FROM dionysus.memories m
             WHERE m.status = 'active' ORDER BY m.embedding <=> q LIMIT 5) s
     WHERE s.sim >= 0.5;
    RETURN n > 0 AND web = n;
END $$;

CREATE OR REPLACE FUNCTION reach_out_target(person text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE m dionysus.messages;
BEGIN
    SELECT * INTO m FROM dionysus.messages x
     WHERE NOT x.is_bot AND x.person IS NOT NULL AND (reach_out_target.person IS NULL OR x.person = reach_out_target.person)
     ORDER BY x.created_at DESC, x.id DESC LIMIT 1;
    IF NOT FOUND THEN
        IF person IS NOT NULL THEN
            RAISE EXCEPTION 'dionysus: argument "person": nobody called % has talked here', person USING ERRCODE = 'no_data_found';
        END IF;
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('person', m.person, 'platform', m.platform, 'author_id', m.author_id);
END $$;

CREATE OR REPLACE FUNCTION known_people() RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('person', p.person, 'last_message_at', p.at) ORDER BY p.at DESC), '[]'::jsonb)
      FROM (SELECT person, max(created_at) AS at FROM dionysus.messages
             WHERE NOT is_bot AND person IS NOT NULL GROUP BY person ORDER BY max(created_at) DESC LIMIT 20) p
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.proactive_config_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key IN ('debt_relief_on_message', 'debt_relief_on_contact', 'curiosity_per_new_memory',
                   'disturbance_decay', 'miss_weight', 'better_moment_margin', 'min_availability', 'contact_threshold',
                   'signal_threshold', 'vitality_drain_tick', 'vitality_drain_event', 'vitality_drain_model',
                   'vitality_recharge_hour', 'vitality_feedback', 'rule_strengthen', 'rule_decay_per_day', 'rule_forget_below',
                   'learn_timing_rate', 'learn_topic_rate', 'mood_memory', 'prior_free', 'prior_workday', 'prior_quiet')
       AND NEW.value > 1 THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be within [0, 1], not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('acquaintance_turns', 'rhythm_confident_after', 'rhythm_confidence_days', 'base_tick_seconds',
                   'min_tick_seconds', 'max_tick_seconds', 'check_interval_minutes', 'check_backoff_max_minutes', 'ignored_after_hours',
                   'ignores_before_pause', 'better_moment_hours', 'event_queue_limit', 'signal_busy_hours', 'rules_per_person',
                   'solicited_per_day', 'contact_request_hours')
       AND NEW.value <= 0 THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be above 0, not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('quiet_start_hour', 'quiet_end_hour', 'workday_start_hour', 'workday_end_hour') AND (NEW.value > 23 OR NEW.value <> trunc(NEW.value)) THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be a whole hour in [0, 23], not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.proactive_setting(setting_key text) RETURNS double precision
    LANGUAGE plpgsql STABLE AS $$
DECLARE v double precision;
BEGIN
    SELECT value INTO v FROM dionysus.proactive_config WHERE key = setting_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: proactive_config has no key "%"', setting_key USING ERRCODE = 'undefined_object';
    END IF;
    RETURN v;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.trait(name text) RETURNS double precision
    LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT value FROM dionysus.personality WHERE trait = name), 0.5)
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.priority_name(p smallint) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT (ARRAY['CRITICAL', 'HIGH', 'NORMAL', 'LOW', 'IDLE'])[p + 1]
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.count_event(why text, p smallint, n bigint DEFAULT 1) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO dionysus.event_counters (reason, priority, count) VALUES (why, p, n)
    ON CONFLICT (reason, priority) DO UPDATE SET count = dionysus.event_counters.count + EXCLUDED.count
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.person_row(who text) RETURNS dionysus.people
    LANGUAGE plpgsql AS $$
DECLARE p dionysus.people;
BEGIN
    INSERT INTO dionysus.people (person) VALUES (who) ON CONFLICT (person) DO NOTHING;
    SELECT * INTO p FROM dionysus.people WHERE person = who FOR UPDATE;
    RETURN p;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.hour_of_week(at timestamptz, tz text) RETURNS smallint
    LANGUAGE sql STABLE AS $$
    SELECT ((extract(isodow FROM at AT TIME ZONE tz)::int - 1) * 24 + extract(hour FROM at AT TIME ZONE tz)::int)::smallint
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.availability(who text, at timestamptz)
    RETURNS TABLE (belief double precision, confidence double precision, learned double precision, prior double precision)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    p dionysus.people;
    h smallint;
    hod int;
    local_hour int;
    week_here double precision;
    week_peak double precision;
    day_here double precision;
    day_peak double precision;
    total double precision;
    missed double precision;
    qs int := dionysus_internal.proactive_setting('quiet_start_hour')::int;
    qe int := dionysus_internal.proactive_setting('quiet_end_hour')::int;
    ws int := dionysus_internal.proactive_setting('workday_start_hour')::int;
    we int := dionysus_internal.proactive_setting('workday_end_hour')::int;
BEGIN
    SELECT * INTO p FROM dionysus.people x WHERE x.person = who;
    local_hour := extract(hour FROM at AT TIME ZONE coalesce(p.time_zone, 'UTC'))::int;
    prior := CASE WHEN (qs > qe AND (local_hour >= qs OR local_hour < qe)) OR (qs < qe AND local_hour >= qs AND local_hour < qe)
                       THEN dionysus_internal.proactive_setting('prior_quiet')
                  WHEN extract(isodow FROM at AT TIME ZONE coalesce(p.time_zone, 'UTC')) <= 5 AND local_hour >= ws AND local_hour < we
                       THEN dionysus_internal.proactive_setting('prior_workday')
                  ELSE dionysus_internal.proactive_setting('prior_free') END;
    h := dionysus_internal.hour_of_week(at, coalesce(p.time_zone, 'UTC'));
    hod := h % 24;
    SELECT max(activity), sum(activity) INTO week_peak, total FROM dionysus.person_rhythm r WHERE r.person = who;
    SELECT coalesce(sum(r.activity * CASE WHEN r.hour_of_week = h THEN 1.0 ELSE 0.5 END), 0) INTO week_here
      FROM dionysus.person_rhythm r
     WHERE r.person = who AND r.hour_of_week IN (h, (h + 167) % 168, (h + 1) % 168);
    SELECT max(d.n) INTO day_peak
      FROM (SELECT r.hour_of_week % 24 AS hr, sum(r.activity) AS n FROM dionysus.person_rhythm r WHERE r.person = who GROUP BY 1) d;
    SELECT coalesce(sum(r.activity * CASE WHEN r.hour_of_week % 24 = hod THEN 1.0 ELSE 0.5 END), 0),
           coalesce(sum(r.misses) FILTER (WHERE r.hour_of_week = h), 0)
           + 0.25 * coalesce(sum(r.misses) FILTER (WHERE r.hour_of_week % 24 = hod AND r.hour_of_week <> h), 0)
      INTO day_here, missed
      FROM dionysus.person_rhythm r
     WHERE r.person = who AND r.hour_of_week % 24 IN (hod, (hod + 23) % 24, (hod + 1) % 24);
    learned := (0.5 * CASE WHEN coalesce(week_peak, 0) > 0 THEN least(1.0, week_here / week_peak) ELSE 0 END
                + 0.5 * CASE WHEN coalesce(day_peak, 0) > 0 THEN least(1.0, day_here / day_peak) ELSE 0 END)
               * (1 - least(0.8, dionysus_internal.proactive_setting('miss_weight') * missed));
    confidence := least(1.0, coalesce(total, 0) / dionysus_internal.proactive_setting('rhythm_confident_after'))
                  * power(0.5, greatest(0, extract(epoch FROM at - coalesce(p.last_message_at, at)) / 86400.0)
                               / dionysus_internal.proactive_setting('rhythm_confidence_days'));
    belief := confidence * learned + (1 - confidence) * prior;
    RETURN NEXT;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.note_miss(who text, contact_at timestamptz, weight double precision) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO dionysus.person_rhythm (person, hour_of_week, misses)
    VALUES (who, dionysus_internal.hour_of_week(contact_at, (SELECT time_zone FROM dionysus.people WHERE person = who)), weight)
    ON CONFLICT (person, hour_of_week) DO UPDATE SET misses = dionysus.person_rhythm.misses + EXCLUDED.misses
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.contact_signal(words text, at timestamptz, tz text)
    RETURNS TABLE (kind text, until timestamptz)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    w text := lower(words);
    local timestamp := at AT TIME ZONE tz;
    day text;
    dow int;
BEGIN
    IF w ~ '(stop|quit|no more) (checking in|check-ins|messaging me|writing to me|texting me)|(don''t|do not) (message|text|write to|check in on) me' THEN
        kind := 'stop_checkins'; until := NULL; RETURN NEXT; RETURN;
    END IF;
    day := substring(w FROM '(?:not|back|talk|see you|until|till) (?:until |till |on )?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)');
    IF day IS NOT NULL THEN
        dow := array_position(ARRAY['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'], day);
        kind := 'away';
        until := ((date_trunc('day', local) + make_interval(days => ((dow - extract(isodow FROM local)::int + 6) % 7) + 1))
                  + interval '9 hours') AT TIME ZONE tz;
        RETURN NEXT; RETURN;
    END IF;
    IF w ~ '(back|talk|see you|speak) tomorrow|until tomorrow|till tomorrow' THEN
        kind := 'away'; until := (date_trunc('day', local) + interval '1 day 9 hours') AT TIME ZONE tz; RETURN NEXT; RETURN;
    END IF;
    IF w ~ '(going to|off to|heading to|time for) (sleep|bed)|good ?night|\mgn\M|nighty night' THEN
        kind := 'asleep';
        until := (date_trunc('day', local - interval '4 hours') + interval '1 day 8 hours') AT TIME ZONE tz;
        RETURN NEXT; RETURN;
    END IF;
    IF w ~ '\m(i''m|i am|im) (busy|swamped|slammed|in a meeting|at work|driving)|\mbusy right now\M|\mcan''t talk\M|\mtalk later\M|\mnot now\M' THEN
        kind := 'busy'; until := at + make_interval(secs => dionysus_internal.proactive_setting('signal_busy_hours') * 3600);
        RETURN NEXT; RETURN;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION is_acknowledgement(words text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(btrim(lower(words)) ~ '^((ok(ay)?|k+|sure|thanks?( you)?|thx|ty|cool|nice|great|got it|will do|noted|yep|yes|yeah|sounds good|alright|👍|🙏|❤️|😊|🙂|✅|👌)[.!, ]*)+$', false)
$$;

CREATE OR REPLACE FUNCTION push_event(source text, type text, priority integer DEFAULT 2, payload jsonb DEFAULT '{}',
                           person text DEFAULT NULL, channel text DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    merged_into bigint;
    new_id bigint;
    pat dionysus.event_patterns;
    seen bigint;
BEGIN
    IF source IS NULL OR source NOT IN ('communication', 'thoughts', 'internal', 'time') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "source": % (communication, thoughts, internal or time)', source
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF type IS NULL OR type !~ '^[a-z][a-z0-9_.]{0,62}$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "type": % (lower-case words joined by _ or .)', type
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF priority IS NULL OR priority NOT BETWEEN 0 AND 4 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "priority": % (0 CRITICAL … 4 IDLE)', priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF payload IS NULL OR jsonb_typeof(payload) <> 'object' OR octet_length(payload::text) > 8192 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "payload": must be a JSON object of at most 8 kB' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Lock order: agent_state (which a HIGH or CRITICAL event updates below) before any event row.
    IF priority <= 1 THEN
        PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    END IF;
    -- Layer 1 of overload: the same thing again within seconds is one event, counted.
    UPDATE dionysus.events e SET merged = e.merged + 1, payload = push_event.payload
     WHERE e.id = (SELECT x.id FROM dionysus.events x
                    WHERE x.status = 'queued' AND x.type = push_event.type AND x.source = push_event.source
                      AND x.priority = push_event.priority
                      AND x.person IS NOT DISTINCT FROM push_event.person
                      AND x.at >= t - make_interval(secs => dionysus_internal.proactive_setting('event_merge_seconds'))
                    ORDER BY x.at DESC LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING e.id INTO merged_into;
    IF merged_into IS NOT NULL THEN
        PERFORM dionysus_internal.count_event('merged', priority::smallint);
        RETURN merged_into;
    END IF;
    INSERT INTO dionysus.events (source, channel, type, priority, person, payload, at)
    VALUES (source, channel, type, priority, person, payload, t) RETURNING id INTO new_id;
    -- Pattern accumulation: many of a kind in a window become one event worth thinking about.
    SELECT * INTO pat FROM dionysus.event_patterns p WHERE p.event_type = push_event.type FOR UPDATE;
    IF FOUND AND (pat.last_hoisted_at IS NULL OR pat.last_hoisted_at < t - make_interval(secs => pat.window_seconds)) THEN
        SELECT coalesce(sum(merged), 0) INTO seen FROM dionysus.events e
         WHERE e.type = push_event.type AND e.at > t - make_interval(secs => pat.window_seconds);
        IF seen >= pat.threshold THEN
            UPDATE dionysus.event_patterns p SET last_hoisted_at = t WHERE p.event_type = pat.event_type;
            INSERT INTO dionysus.events (source, type, priority, person, payload, at)
            VALUES ('internal', pat.hoisted_type, 1, push_event.person,
                    jsonb_build_object('pattern', pat.event_type, 'count', seen, 'window_seconds', pat.window_seconds), t);
        END IF;
    END IF;
    -- What matters now shortens the wait for the next tick (lock order: agent_state before people).
    IF priority <= 1 THEN
        UPDATE dionysus.agent_state
           SET next_tick_at = least(coalesce(next_tick_at, t), t + make_interval(secs => dionysus_internal.proactive_setting('min_tick_seconds')))
         WHERE id = 1 AND (mode <> 'asleep' OR push_event.priority = 0);
    END IF;
    RETURN new_id;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.note_person_message(who text, message_id uuid, words text) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    p dionysus.people;
    sig record;
    answered boolean := false;
    ack boolean := dionysus.is_acknowledgement(words);
    contact uuid;
    cue record;
    unsure uuid;
BEGIN
    -- Lock order: agent_state (push_event, feedback) before the person's row.
    PERFORM dionysus.push_event('communication', 'message_received', 1, jsonb_build_object('message_id', message_id), who);
    IF EXISTS (SELECT 1 FROM dionysus.people x WHERE x.person = who AND x.awaiting_reply) THEN
        answered := true;
        UPDATE dionysus.agent_state SET vitality = least(1, vitality + dionysus_internal.proactive_setting('vitality_feedback'))
         WHERE id = 1;
    END IF;
    p := dionysus_internal.person_row(who);
    SELECT * INTO sig FROM dionysus_internal.contact_signal(words, t, p.time_zone);
    -- Their rhythm: this hour of their week gained one message, unless the message says they
    -- are busy (then it is evidence against the hour: a miss); the rest fades a little.
    UPDATE dionysus.person_rhythm r SET activity = r.activity * 0.998, misses = r.misses * 0.998 WHERE r.person = who;
    INSERT INTO dionysus.person_rhythm AS r (person, hour_of_week, activity, misses)
    VALUES (who, dionysus_internal.hour_of_week(t, p.time_zone), CASE WHEN sig.kind = 'busy' THEN 0 ELSE 1 END,
            CASE WHEN sig.kind = 'busy' THEN 1 ELSE 0 END)
    ON CONFLICT (person, hour_of_week) DO UPDATE SET activity = r.activity + EXCLUDED.activity, misses = r.misses + EXCLUDED.misses;
    -- They wrote: a crossing still undecided is moot (the conversation is on).
    UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = 'skipped', decided_at = t, reason = 'they wrote first'
     WHERE c.person = who AND c.outcome = 'opportunity' AND c.decision IS NULL;
    -- Whatever they said before about not being available ends when they write again.
    UPDATE dionysus.person_signals s SET ended_at = t WHERE s.person = who AND s.ended_at IS NULL;
    IF sig.kind IS NOT NULL THEN
        INSERT INTO dionysus.person_signals (person, kind, said_at, until, message_id, words)
        VALUES (who, sig.kind, t, sig.until, message_id, left(words, 200));
    END IF;
    -- A contact answered only after an hour: that hour of their week is a poor one.
    IF answered AND t - p.last_contact_at > interval '1 hour' THEN
        PERFORM dionysus_internal.note_miss(who, p.last_contact_at, 0.5);
    END IF;
    -- How the contact landed, from cheap cues (latency, length, tone); the fast model is asked
    -- only when they disagree (contact_feedback). Learning is logged with its cause (015).
    IF answered THEN
        SELECT c.id INTO contact FROM dionysus.contact_evaluations c
         WHERE c.person = who AND c.decision = 'message' AND c.feedback_at IS NULL ORDER BY c.decided_at DESC, c.recorded_at DESC LIMIT 1;
        SELECT * INTO cue FROM dionysus_internal.reply_signal(words, extract(epoch FROM t - p.last_contact_at), p.reply_seconds);
        IF contact IS NOT NULL AND cue.unsure THEN
            unsure := contact;
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'cues', 'unsure', true, 'latency', round(cue.latency::numeric, 2),
                   'length', cue.length, 'tone', round(cue.tone::numeric, 2), 'signal', round(cue.signal::numeric, 3)) WHERE c.id = contact;
        ELSIF contact IS NOT NULL THEN
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'cues', 'latency', round(cue.latency::numeric, 2),
                   'length', cue.length, 'tone', round(cue.tone::numeric, 2), 'signal', round(cue.signal::numeric, 3)), feedback_at = t
             WHERE c.id = contact;
            PERFORM dionysus_internal.learn_from_contact(who, contact, p.last_contact_at, cue.signal,
                format('they answered after %s (latency %s, length %s, tone %s)', date_trunc('minute', t - p.last_contact_at),
                       round(cue.latency::numeric, 2), cue.length, round(cue.tone::numeric, 2)));
        END IF;
        PERFORM dionysus.push_event('communication', 'contact_answered', 2, jsonb_build_object('message_id', message_id), who);
    END IF;
    UPDATE dionysus.people x SET
        turns = x.turns + 1,
        first_message_at = coalesce(x.first_message_at, t),
        last_message_at = t,
        social_debt = x.social_debt * (1 - dionysus_internal.proactive_setting('debt_relief_on_message')),
        mood = dionysus_internal.proactive_setting('mood_memory') * x.mood
               + (1 - dionysus_internal.proactive_setting('mood_memory')) * dionysus_internal.message_tone(words),
        awaiting_reply = false,
        ignored_in_row = 0,
        reply_seconds = CASE WHEN answered THEN coalesce(0.7 * x.reply_seconds, 0)
                                                + CASE WHEN x.reply_seconds IS NULL THEN 1 ELSE 0.3 END
                                                  * extract(epoch FROM t - x.last_contact_at)
                             ELSE x.reply_seconds END,
        -- A message resets the check-in cadence (seed 004 §4.1).
        check_interval_minutes = dionysus_internal.proactive_setting('check_interval_minutes'),
        next_check_at = t + make_interval(mins => dionysus_internal.proactive_setting('check_interval_minutes')::int),
        updated_at = now()
     WHERE x.person = who;
    RETURN jsonb_build_object('acknowledgement', ack, 'answered_contact', answered, 'signal', sig.kind, 'signal_until', sig.until,
                              'feedback_unsure', unsure);
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.evaluate_contact(who text) RETURNS dionysus.contact_evaluations
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    p dionysus.people;
    a dionysus.agent_state;
    av record;
    e dionysus.contact_evaluations;
    ins jsonb := '[]'::jsonb;
    gates jsonb := '[]'::jsonb;
    w record;
    v double precision;
    muted boolean;
    total double precision := 0;
    threshold double precision;
    open_requests bigint;
    task double precision;
    energy double precision;
    cost double precision;
    cooldown interval;
    since_contact interval;
    ignore_after interval;
    sig dionysus.person_signals;
    local_hour int;
    blocked text[] := '{}';
    top record;
    new_cause boolean;
    later record;
    better boolean;
    on_its_way bigint;
    words text;
    factor double precision;
    last_contact uuid;
    quiet boolean;
BEGIN
    p := dionysus_internal.person_row(who);
    SELECT * INTO a FROM dionysus.agent_state WHERE id = 1;
    -- A contact nobody answered within their usual window counts as ignored.
    ignore_after := make_interval(secs => greatest(dionysus_internal.proactive_setting('ignored_after_hours') * 3600,
                                                   3 * coalesce(p.reply_seconds, 0)));
    IF p.awaiting_reply AND t - p.last_contact_at > ignore_after THEN
        UPDATE dionysus.people x SET awaiting_reply = false, ignored_in_row = x.ignored_in_row + 1 WHERE x.person = who
        RETURNING * INTO p;
        PERFORM dionysus_internal.note_miss(who, p.last_contact_at, 1);
        -- Silence is feedback too: the reason it was sent for and the personality learn from it.
        SELECT c.id INTO last_contact FROM dionysus.contact_evaluations c
         WHERE c.person = who AND c.decision = 'message' AND c.feedback_at IS NULL AND NOT c.solicited
         ORDER BY c.decided_at DESC, c.recorded_at DESC LIMIT 1;
        IF last_contact IS NOT NULL THEN
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'silence', 'signal', -0.5), feedback_at = t
             WHERE c.id = last_contact;
            PERFORM dionysus_internal.learn_from_contact(who, last_contact, p.last_contact_at, -0.5,
                format('no answer within %s', date_trunc('minute', ignore_after)));
        END IF;
        PERFORM dionysus.push_event('internal', 'contact_ignored', 2, jsonb_build_object('ignored_in_row', p.ignored_in_row), who);
    END IF;
    -- A contact one of their own rules asked for (a reminder) is weighed on its own terms.
    IF p.contact_request IS NOT NULL THEN
        RETURN dionysus_internal.evaluate_requested_contact(p);
    END IF;
    SELECT count(*) INTO open_requests FROM dionysus.goals g
     WHERE g.source = 'user_request' AND g.priority IN ('active', 'queued') AND g.private_to = ARRAY[who];
    -- Task pressure is state the rules move (015): open requests make it build over hours.
    task := p.task_pressure;
    -- After repeated ignores, time alone (social debt) no longer opens the way: a new cause must.
    muted := p.ignored_in_row >= dionysus_internal.proactive_setting('ignores_before_pause');
    FOR w IN SELECT * FROM dionysus.contact_weights ORDER BY input LOOP
        v := CASE w.input
                 WHEN 'social_debt' THEN p.social_debt
                 WHEN 'acquaintance' THEN 1.0 / (1 + p.turns / dionysus_internal.proactive_setting('acquaintance_turns'))
                 WHEN 'task_pressure' THEN task
                 WHEN 'curiosity' THEN p.curiosity END;
        -- What their answers taught about this reason to write (015's person_contact_weights).
        factor := coalesce((SELECT f.factor FROM dionysus.person_contact_weights f WHERE f.person = who AND f.input = w.input), 1);
        ins := ins || jsonb_build_object('input', w.input, 'value', round(v::numeric, 3), 'weight', round((w.weight * factor)::numeric, 3),
                                         'learned_factor', round(factor::numeric, 3),
                                         'contribution', round((v * w.weight * factor)::numeric, 3), 'why', w.description);
        total := total + v * w.weight * factor;
    END LOOP;
    -- Personality, vitality and their state move the threshold: shy waits longer, independent
    -- less; a tired agent needs more to act; restraint (the night rule) holds back; an
    -- empathetic one holds back after cold replies.
    threshold := dionysus_internal.proactive_setting('contact_threshold')
                 * (1 + 0.5 * (dionysus_internal.trait('shyness') - 0.5))
                 * (1 - 0.5 * (dionysus_internal.trait('independence') - 0.5))
                 * (1 + 0.3 * (1 - a.vitality))
                 * (1 + p.restraint)
                 * (1 + 0.5 * dionysus_internal.trait('empathy') * greatest(0, -p.mood));

    -- The gates, each written down whether it passed or not.
    SELECT * INTO sig FROM dionysus.person_signals s
     WHERE s.person = who AND s.ended_at IS NULL AND (s.until IS NULL OR s.until > t) ORDER BY s.said_at DESC LIMIT 1;
    gates := gates || jsonb_build_object('gate', 'their_word', 'passed', sig.id IS NULL,
        'detail', CASE WHEN sig.id IS NULL THEN 'nothing said against contact'
                       ELSE format('they said "%s" (%s%s)', sig.words, sig.kind,
                                   coalesce(' until ' || to_char(sig.until AT TIME ZONE p.time_zone, 'Dy HH24:MI'), ', until they write again')) END);
    SELECT * INTO av FROM dionysus_internal.availability(who, t);
    local_hour := extract(hour FROM t AT TIME ZONE p.time_zone)::int;
    -- Default quiet hours hold unless their learned rhythm, trusted enough, says they are up.
    quiet := CASE WHEN dionysus_internal.proactive_setting('quiet_start_hour') > dionysus_internal.proactive_setting('quiet_end_hour')
                  THEN local_hour >= dionysus_internal.proactive_setting('quiet_start_hour') OR local_hour < dionysus_internal.proactive_setting('quiet_end_hour')
                  ELSE local_hour >= dionysus_internal.proactive_setting('quiet_start_hour') AND local_hour < dionysus_internal.proactive_setting('quiet_end_hour') END;
    gates := gates || jsonb_build_object('gate', 'quiet_hours', 'passed', NOT (quiet AND (av.learned < 0.15 OR av.confidence < 0.5)),
        'detail', format('%s:00 their time; default quiet %s–%s, learned activity %s (confidence %s)', local_hour,
                         dionysus_internal.proactive_setting('quiet_start_hour'), dionysus_internal.proactive_setting('quiet_end_hour'),
                         round(av.learned::numeric, 2), round(av.confidence::numeric, 2)));
    gates := gates || jsonb_build_object('gate', 'availability', 'passed', av.belief >= dionysus_internal.proactive_setting('min_availability'),
        'detail', format('likely available %s (confidence %s)', round(av.belief::numeric, 2), round(av.confidence::numeric, 2)));
    cooldown := make_interval(secs => dionysus_internal.heartbeat_setting('reach_out_cooldown_hours') * 3600);
    since_contact := t - p.last_contact_at;
    gates := gates || jsonb_build_object('gate', 'cooldown', 'passed', p.last_contact_at IS NULL OR since_contact >= cooldown,
        'detail', CASE WHEN p.last_contact_at IS NULL THEN 'no contact started yet'
                       ELSE format('last contact %s ago (cooldown %s)', date_trunc('minute', since_contact), cooldown) END);
    -- One contact at a time: the last one is answered or counted as ignored before the next,
    -- and nothing is on its way (a crossing undecided, a message not yet delivered).
    gates := gates || jsonb_build_object('gate', 'waiting_on_them', 'passed', NOT p.awaiting_reply,
        'detail', CASE WHEN p.awaiting_reply THEN format('the last contact (%s ago) is not answered yet; it counts as ignored after %s',
                                                         date_trunc('minute', since_contact), date_trunc('minute', ignore_after))
                       ELSE 'no contact waiting for an answer' END);
    SELECT count(*) INTO on_its_way FROM (
        SELECT 1 FROM dionysus.contact_evaluations c WHERE c.person = who AND c.outcome = 'opportunity' AND c.decision IS NULL
        UNION ALL
        SELECT 1 FROM dionysus.outbox o WHERE o.person = who AND o.contact_id IS NOT NULL AND o.status = 'pending') x;
    gates := gates || jsonb_build_object('gate', 'in_flight', 'passed', on_its_way = 0,
        'detail', CASE WHEN on_its_way = 0 THEN 'nothing on its way to them' ELSE 'a contact is already being decided or delivered' END);
    SELECT current_energy INTO energy FROM dionysus.heartbeat_state WHERE id = 1;
    cost := dionysus.get_action_cost('reach_out_user');
    gates := gates || jsonb_build_object('gate', 'energy', 'passed', energy >= cost,
        'detail', format('energy %s, a contact costs %s', round(energy::numeric, 1), cost));
    -- A new cause: a request they made since, or something new to tell (not pressure grown by time).
    new_cause := NOT muted OR open_requests > coalesce((p.cause_at_last_contact ->> 'open_requests')::int, 0)
                 OR p.curiosity > coalesce((p.cause_at_last_contact ->> 'curiosity')::float8, 0) + 0.05;
    gates := gates || jsonb_build_object('gate', 'ignored', 'passed', new_cause,
        'detail', CASE WHEN NOT muted THEN format('%s unanswered in a row', p.ignored_in_row)
                       ELSE format('%s contacts in a row went unanswered: only a new cause counts (%s)', p.ignored_in_row,
                                   CASE WHEN new_cause THEN 'there is one' ELSE 'there is none' END) END);
    SELECT array_agg(g ->> 'gate') INTO blocked FROM jsonb_array_elements(gates) g WHERE NOT (g ->> 'passed')::boolean;
    blocked := coalesce(blocked, '{}');
    -- A considerate friend who knows you are busy now and free tonight waits for tonight: when
    -- the rhythm says a clearly better hour comes within the look-ahead, the contact waits for it.
    -- Weighed only when everything else would let the contact through (it costs a few lookups).
    IF total >= threshold AND cardinality(blocked) = 0 THEN
        SELECT k, f.belief, f.confidence INTO later
          FROM generate_series(1, dionysus_internal.proactive_setting('better_moment_hours')::int) k,
               LATERAL dionysus_internal.availability(who, t + make_interval(hours => k)) f
         ORDER BY f.belief DESC, k LIMIT 1;
        -- The beliefs carry their confidence already (a prior, or what was learned).
        better := later.belief >= av.belief + dionysus_internal.proactive_setting('better_moment_margin');
        gates := gates || jsonb_build_object('gate', 'better_moment', 'passed', NOT better,
            'detail', CASE WHEN better THEN format('likely more available around %s:00 their time (%s against %s now)',
                                                   extract(hour FROM (t + make_interval(hours => later.k)) AT TIME ZONE p.time_zone),
                                                   round(later.belief::numeric, 2), round(av.belief::numeric, 2))
                           ELSE format('no clearly better hour in the next %s', dionysus_internal.proactive_setting('better_moment_hours')) END);
        IF better THEN
            blocked := blocked || 'better_moment'::text;
        END IF;
    END IF;

    SELECT x ->> 'input' AS input, (x ->> 'value')::float8 AS value, (x ->> 'weight')::float8 AS weight,
           (x ->> 'contribution')::float8 AS contribution INTO top
      FROM jsonb_array_elements(ins) x ORDER BY (x ->> 'contribution')::float8 DESC LIMIT 1;
    words := format('pressure %s against threshold %s; %s was %s (weight %s, contributing %s)', round(total::numeric, 2),
                    round(threshold::numeric, 2), top.input, top.value, top.weight, top.contribution)
             || CASE WHEN p.restraint >= 0.05 THEN format('; restraint %s raised the threshold', round(p.restraint::numeric, 2)) ELSE '' END;
    e.outcome := CASE WHEN total < dionysus_internal.proactive_setting('signal_threshold') THEN 'below'
                      WHEN total < threshold THEN 'signal'
                      WHEN cardinality(blocked) > 0 THEN 'gated'
                      ELSE 'opportunity' END;
    words := words || CASE e.outcome
        WHEN 'below' THEN '; nothing to say yet'
        WHEN 'signal' THEN '; an urge, not yet enough to write'
        WHEN 'gated' THEN '; enough to write, held back by ' || array_to_string(blocked, ', ')
        ELSE format('; %s — the person was likely available (%s, confidence %s)',
                    'over the threshold', round(av.belief::numeric, 2), round(av.confidence::numeric, 2)) END;
    INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, threshold_parts, gates, outcome, explanation)
    VALUES (who, t, ins, total, threshold,
            jsonb_build_object('base', dionysus_internal.proactive_setting('contact_threshold'), 'shyness', dionysus_internal.trait('shyness'),
                               'independence', dionysus_internal.trait('independence'), 'vitality', round(a.vitality::numeric, 3),
                               'restraint', round(p.restraint::numeric, 3), 'mood', round(p.mood::numeric, 3),
                               'empathy', dionysus_internal.trait('empathy')),
            gates, e.outcome, words)
    RETURNING * INTO e;
    UPDATE dionysus.people x SET last_pressure = total, last_evaluated_at = t,
           next_check_at = t + make_interval(secs => coalesce(x.check_interval_minutes, dionysus_internal.proactive_setting('check_interval_minutes')) * 60)
     WHERE x.person = who;
    IF e.outcome = 'signal' THEN
        PERFORM dionysus.push_event('internal', 'contact_urge', 3, jsonb_build_object('pressure', round(total::numeric, 3)), who);
    END IF;
    IF e.outcome = 'opportunity' THEN
        UPDATE dionysus.contact_evaluations c SET notified_at = now() WHERE c.id = e.id;
        PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', e.id, 'person', who, 'why', words)::text);
    END IF;
    RETURN e;
END $$;

CREATE OR REPLACE FUNCTION explain_contact(for_person text DEFAULT NULL, max_items integer DEFAULT 1)
    RETURNS TABLE (evaluation_id uuid, at timestamptz, person text, outcome text, pressure double precision,
                   threshold double precision, explanation text, inputs jsonb, gates jsonb, decision text, reason text)
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF max_items IS NULL OR max_items < 1 OR max_items > 1000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_items": % (1 to 1000)', max_items USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.id, c.at, c.person, c.outcome, c.pressure, c.threshold, c.explanation, c.inputs, c.gates, c.decision, c.reason
      FROM dionysus.contact_evaluations c
     WHERE for_person IS NULL OR c.person = for_person
     ORDER BY c.at DESC, c.recorded_at DESC LIMIT max_items;
END $$;

CREATE OR REPLACE FUNCTION proactive_tick() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    a dionysus.agent_state;
    hours double precision;
    n_dropped bigint := 0;
    n_filtered bigint := 0;
    n_processed bigint := 0;
    over bigint;
    wake double precision;
    woke boolean := false;
    ev dionysus.events;
    gone record;
    who text;
    evaluated integer := 0;
    opportunities integer := 0;
    verdict dionysus.contact_evaluations;
    top_pressure double precision;
    tod double precision;
    interval_s double precision;
    new_mode text;
    local_hour int;
    new_memories bigint;
    agent_tz text;
    n_fired integer := 0;
BEGIN
    SELECT * INTO a FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    hours := greatest(0, extract(epoch FROM t - coalesce(a.last_tick_at, t)) / 3600.0);
    -- The agent keeps the day of the person it talked with last: it sleeps when they sleep.
    agent_tz := coalesce((SELECT x.time_zone FROM dionysus.people x ORDER BY x.last_message_at DESC NULLS LAST LIMIT 1), 'UTC');
    local_hour := extract(hour FROM t AT TIME ZONE agent_tz)::int;

    -- What a rule scheduled is queued when its time comes.
    UPDATE dionysus.events e SET status = 'queued', payload = e.payload || jsonb_build_object('scheduled_for', e.at), at = t
     WHERE e.status = 'scheduled' AND e.at <= t;
    -- Time-of-day boundaries arrive as events, in each person's own time: every full hour
    -- (time.hour) and morning, midday, evening, night (at most the last day's worth).
    IF a.last_tick_at IS NOT NULL AND t > a.last_tick_at THEN
        INSERT INTO dionysus.events (source, type, priority, person, payload, at)
        SELECT 'time', b.type, 2, x.person, jsonb_build_object('local_hour', extract(hour FROM h.local)::int), h.local AT TIME ZONE x.time_zone
          FROM dionysus.people x,
               LATERAL generate_series(date_trunc('hour', t AT TIME ZONE x.time_zone),
                                       greatest(date_trunc('hour', a.last_tick_at AT TIME ZONE x.time_zone),
                                                date_trunc('hour', t AT TIME ZONE x.time_zone) - interval '23 hours'),
                                       interval '-1 hour') AS h(local),
               LATERAL (VALUES ('time.hour'),
                               (CASE extract(hour FROM h.local)::int WHEN 7 THEN 'time.morning' WHEN 12 THEN 'time.midday'
                                                                     WHEN 18 THEN 'time.evening' WHEN 23 THEN 'time.night' END)) AS b(type)
         WHERE x.last_message_at IS NOT NULL AND b.type IS NOT NULL AND h.local > a.last_tick_at AT TIME ZONE x.time_zone;
    END IF;

    -- Overload, layer 2: old LOW and IDLE events are dropped; layer 3: above the limit the
    -- lowest priority goes first. CRITICAL is never dropped.
    FOR gone IN
        WITH d AS (
            UPDATE dionysus.events e SET status = 'dropped', handled_at = t, reason = 'too old for its priority'
             WHERE e.status = 'queued'
               AND ((e.priority >= 3 AND e.at < t - make_interval(secs => dionysus_internal.proactive_setting('event_drop_low_seconds')))
                 OR (e.priority = 4 AND e.at < t - make_interval(secs => dionysus_internal.proactive_setting('event_drop_idle_seconds'))))
            RETURNING e.priority)
        SELECT d.priority, count(*) AS n FROM d GROUP BY d.priority
    LOOP
        PERFORM dionysus_internal.count_event('dropped_age', gone.priority, gone.n);
        n_dropped := n_dropped + gone.n;
    END LOOP;
    SELECT count(*) - dionysus_internal.proactive_setting('event_queue_limit') INTO over FROM dionysus.events WHERE status = 'queued';
    IF over > 0 THEN
        FOR gone IN
            WITH d AS (
                UPDATE dionysus.events e SET status = 'dropped', handled_at = t, reason = 'queue over its limit'
                 WHERE e.id IN (SELECT x.id FROM dionysus.events x WHERE x.status = 'queued' AND x.priority > 0
                                 ORDER BY x.priority DESC, x.at LIMIT over)
                RETURNING e.priority)
            SELECT d.priority, count(*) AS n FROM d GROUP BY d.priority
        LOOP
            PERFORM dionysus_internal.count_event('dropped_overload', gone.priority, gone.n);
            n_dropped := n_dropped + gone.n;
        END LOOP;
    END IF;

    -- Relaxed filters LOW and IDLE, asleep everything but CRITICAL; what is filtered disturbs.
    -- The clock's own hours are not stimuli: never filtered (they carry the person's rules, a
    -- reminder at 07:00), they disturb nothing.
    FOR ev IN SELECT * FROM dionysus.events WHERE status = 'queued' ORDER BY priority, at, id LOOP
        IF ev.source <> 'time' AND ((a.mode = 'relaxed' AND ev.priority >= 3) OR (a.mode = 'asleep' AND ev.priority >= 1)) THEN
            UPDATE dionysus.events SET status = 'filtered', handled_at = t, reason = 'agent ' || a.mode WHERE id = ev.id;
            PERFORM dionysus_internal.count_event('filtered', ev.priority, 1);
            a.disturbance := a.disturbance + ev.merged * (ARRAY[1.0, 0.3, 0.1, 0.05, 0.01])[ev.priority + 1];
            n_filtered := n_filtered + 1;
            CONTINUE;
        END IF;
        IF ev.type IN ('reaction') AND ev.person IS NOT NULL THEN
            UPDATE dionysus.people SET social_debt = social_debt * 0.8 WHERE person = ev.person;
        END IF;
        UPDATE dionysus.events SET status = 'processed', handled_at = t WHERE id = ev.id;
        a.vitality := greatest(0, a.vitality - dionysus_internal.proactive_setting('vitality_drain_event'));
        n_processed := n_processed + 1;
        -- The rules this event triggers (015); they may move vitality, so it is handed over.
        IF EXISTS (SELECT 1 FROM dionysus.mind_rules m WHERE m.status = 'active' AND m.trigger = ev.type
                                                         AND (m.person IS NULL OR m.person = ev.person)) THEN
            UPDATE dionysus.agent_state SET vitality = a.vitality WHERE id = 1;
            n_fired := n_fired + dionysus_internal.run_rules(ev.type, ev.person, 0, ev);
            SELECT vitality INTO a.vitality FROM dionysus.agent_state WHERE id = 1;
        END IF;
    END LOOP;
    a.disturbance := a.disturbance * dionysus_internal.proactive_setting('disturbance_decay');
    wake := 0.5 * (1 + (1 - a.vitality));
    IF a.mode IN ('asleep', 'relaxed') AND a.disturbance > wake THEN
        woke := true;
        a.disturbance := 0;
    END IF;

    -- Vitality: spent by ticking, regained with time, twice as fast in the agent's night.
    a.vitality := least(1, greatest(0, a.vitality - dionysus_internal.proactive_setting('vitality_drain_tick')
        + hours * dionysus_internal.proactive_setting('vitality_recharge_hour')
                * CASE WHEN local_hour >= 23 OR local_hour < 7 THEN 2 ELSE 1 END));

    -- Each person's pressures move with time; contact is evaluated when their cadence is due.
    SELECT count(*) INTO new_memories FROM dionysus.memories m
     WHERE m.created_at > coalesce(a.last_tick_real_at, now()) AND m.type = 'semantic' AND m.status = 'active'
       AND m.private_to IS NULL; -- what anyone may hear of (nobody's private words)
    IF new_memories > 0 THEN
        UPDATE dionysus.people x SET
            curiosity = least(1, x.curiosity + least(5, new_memories) * dionysus_internal.proactive_setting('curiosity_per_new_memory')
                                               * 2 * dionysus_internal.trait('curiosity')),
            updated_at = now()
         WHERE x.last_message_at IS NOT NULL;
    END IF;
    -- The 'tick' rules move each person's state with the time that passed (social debt in
    -- silence, curiosity fading, task pressure, the night's restraint: 015's built-ins).
    UPDATE dionysus.agent_state SET vitality = a.vitality WHERE id = 1;
    FOR who IN SELECT x.person FROM dionysus.people x WHERE x.last_message_at IS NOT NULL ORDER BY x.person LOOP
        n_fired := n_fired + dionysus_internal.run_rules('tick', who, hours);
    END LOOP;
    SELECT vitality INTO a.vitality FROM dionysus.agent_state WHERE id = 1;
    -- Learned rules decay by the day: looked at once an hour.
    IF a.last_tick_at IS NULL OR date_trunc('hour', a.last_tick_at) <> date_trunc('hour', t) THEN
        PERFORM dionysus_internal.decay_rules();
    END IF;
    -- A crossing nobody decided on (no driver running) does not wait forever
    -- (nor hold back the evaluations below).
    UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = 'skipped', decided_at = t,
           reason = 'no mind decided within 30 minutes'
     WHERE c.outcome = 'opportunity' AND c.decision IS NULL AND c.at < t - interval '30 minutes';
    FOR who IN SELECT x.person FROM dionysus.people x
                WHERE x.last_message_at IS NOT NULL AND (x.next_check_at IS NULL OR x.next_check_at <= t)
                ORDER BY x.person LOOP
        verdict := dionysus_internal.evaluate_contact(who);
        evaluated := evaluated + 1;
        IF verdict.outcome = 'opportunity' THEN
            opportunities := opportunities + 1;
        END IF;
    END LOOP;


    -- The next tick: interval = base × 1/pressure × time of day × vitality (seed 003 §2).
    SELECT greatest(0.05, coalesce(max(x.last_pressure), 0)) INTO top_pressure FROM dionysus.people x;
    tod := CASE WHEN local_hour >= 23 OR local_hour < 7 THEN 4 ELSE 1 END;
    interval_s := dionysus_internal.proactive_setting('base_tick_seconds') / top_pressure * tod * (1 + (1 - a.vitality));
    IF woke THEN
        interval_s := dionysus_internal.proactive_setting('min_tick_seconds');
    END IF;
    interval_s := least(dionysus_internal.proactive_setting('max_tick_seconds'),
                        greatest(dionysus_internal.proactive_setting('min_tick_seconds'), interval_s));
    new_mode := CASE WHEN interval_s < 60 THEN 'alert' WHEN interval_s < 900 THEN 'normal'
                     WHEN interval_s < 3600 THEN 'relaxed' ELSE 'asleep' END;
    -- The mode comes from the interval the state asks for; the tick itself never sleeps through
    -- a full hour, so the hour's rules (a reminder at 15:00) run on time.
    interval_s := least(interval_s, 1 + extract(epoch FROM ((date_trunc('hour', t AT TIME ZONE agent_tz) + interval '1 hour') AT TIME ZONE agent_tz) - t));
    UPDATE dionysus.agent_state SET vitality = a.vitality, disturbance = a.disturbance, mode = new_mode, pressure = top_pressure,
           tick_interval_seconds = interval_s, last_tick_at = t, last_tick_real_at = now(),
           next_tick_at = t + make_interval(secs => interval_s),
           ticks = ticks + 1, updated_at = now()
     WHERE id = 1;
    RETURN jsonb_build_object('at', t, 'mode', new_mode, 'previous_mode', a.mode, 'woke', woke, 'vitality', round(a.vitality::numeric, 3),
                              'pressure', round(top_pressure::numeric, 3), 'interval_seconds', round(interval_s::numeric, 1),
                              'events_processed', n_processed, 'events_filtered', n_filtered, 'events_dropped', n_dropped,
                              'evaluated', evaluated, 'opportunities', opportunities, 'rules_fired', n_fired);
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.proactive_tick_due() RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(next_tick_at <= dionysus.clock_now(), true) FROM dionysus.agent_state WHERE id = 1
$$;

CREATE OR REPLACE FUNCTION contact_opportunity(evaluation_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    e dionysus.contact_evaluations;
BEGIN
    SELECT * INTO e FROM dionysus.contact_evaluations c WHERE c.id = evaluation_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "evaluation_id": no contact evaluation with id %', evaluation_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN jsonb_build_object(
        'evaluation_id', e.id, 'person', e.person, 'outcome', e.outcome, 'decided', e.decision IS NOT NULL,
        'solicited', e.solicited, 'request', e.request -> 'about',
        'explanation', e.explanation, 'inputs', e.inputs, 'gates', e.gates,
        -- Only this person's own turns and what they may see: nobody else's words reach them.
        'recent_turns', coalesce((SELECT jsonb_agg(jsonb_build_object('role', CASE WHEN m.is_bot THEN 'assistant' ELSE 'user' END,
                                                                       'content', left(m.content, 500), 'at', m.created_at) ORDER BY m.created_at)
                                    FROM (SELECT * FROM dionysus.messages x WHERE x.person = e.person
                                           ORDER BY x.created_at DESC LIMIT 12) m), '[]'::jsonb),
        'their_requests', coalesce((SELECT jsonb_agg(g.title ORDER BY g.created_at) FROM dionysus.goals g
                                     WHERE g.priority IN ('active', 'queued') AND g.private_to = ARRAY[e.person]), '[]'::jsonb),
        'personality', (SELECT jsonb_object_agg(trait, value) FROM dionysus.personality),
        -- What matters most to them and what they are working toward (017).
        'north_stars', coalesce((SELECT jsonb_agg(n.content ORDER BY n.created_at) FROM dionysus.person_north_stars(e.person) n), '[]'::jsonb),
        'objectives', coalesce((SELECT jsonb_agg(o.description) FROM (SELECT * FROM dionysus.person_objectives(e.person) LIMIT 5) o), '[]'::jsonb));
END $$;

CREATE OR REPLACE FUNCTION decide_contact(evaluation_id uuid, decision text, message text DEFAULT NULL, reason text DEFAULT NULL,
                               decided_by text DEFAULT 'model') RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    e dionysus.contact_evaluations;
    p dionysus.people;
    t timestamptz := dionysus.clock_now();
    target jsonb;
    msg_id uuid;
    cost double precision;
    backoff double precision;
BEGIN
    IF decision IS NULL OR decision NOT IN ('message', 'wait') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decision": % (message or wait)', decision USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decided_by IS NULL OR decided_by NOT IN ('model', 'default', 'skipped') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": % (model, default or skipped)', decided_by USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decision = 'message' AND (coalesce(btrim(message), '') = '' OR length(message) > 4000) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "message": a contact needs the message to send, at most 4,000 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Lock order: the state row (energy), agent_state, then the evaluation and the person.
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    SELECT * INTO e FROM dionysus.contact_evaluations c WHERE c.id = evaluation_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "evaluation_id": no contact evaluation with id %', evaluation_id USING ERRCODE = 'no_data_found';
    END IF;
    IF e.outcome <> 'opportunity' THEN
        RAISE EXCEPTION 'dionysus: evaluation % was %, not an opportunity to contact', evaluation_id, e.outcome
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF e.decision IS NOT NULL THEN
        -- Decided already (a redelivered NOTIFY): the first decision stands.
        RETURN jsonb_build_object('decision', e.decision, 'outbox_id', e.outbox_id, 'duplicate', true);
    END IF;
    SELECT * INTO p FROM dionysus.people x WHERE x.person = e.person FOR UPDATE;
    IF decision = 'wait' AND e.solicited THEN
        -- A contact they asked for is not dropped for a "wait": it is weighed again at the next
        -- check, until it goes out or lapses.
        UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = decide_contact.decided_by, decided_at = t,
               reason = decide_contact.reason WHERE c.id = e.id;
        RETURN jsonb_build_object('decision', 'wait', 'next_check_at', p.next_check_at, 'duplicate', false);
    ELSIF decision = 'wait' THEN
        -- Exponential back-off of the check-in cadence, longer for a patient personality.
        backoff := least(dionysus_internal.proactive_setting('check_backoff_max_minutes'),
                         coalesce(p.check_interval_minutes, dionysus_internal.proactive_setting('check_interval_minutes'))
                         * (1.5 + dionysus_internal.trait('patience')));
        UPDATE dionysus.people x SET check_interval_minutes = backoff, next_check_at = t + make_interval(secs => backoff * 60)
         WHERE x.person = e.person;
        UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = decide_contact.decided_by, decided_at = t,
               reason = decide_contact.reason WHERE c.id = e.id;
        UPDATE dionysus.agent_state SET model_calls = model_calls + CASE WHEN decide_contact.decided_by = 'model' THEN 1 ELSE 0 END,
               vitality = greatest(0, vitality - CASE WHEN decide_contact.decided_by = 'model' THEN dionysus_internal.proactive_setting('vitality_drain_model') ELSE 0 END)
         WHERE id = 1;
        RETURN jsonb_build_object('decision', 'wait', 'next_check_at', t + make_interval(secs => backoff * 60), 'duplicate', false);
    END IF;
    -- The gates are checked again: time passed while the model thought.
    IF EXISTS (SELECT 1 FROM dionysus.outbox o WHERE o.person = e.person AND o.contact_id IS NOT NULL AND o.status = 'pending') THEN
        RAISE EXCEPTION 'dionysus: contact refused: a message to % is already on its way', e.person USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF EXISTS (SELECT 1 FROM dionysus.person_signals s WHERE s.person = e.person AND s.ended_at IS NULL AND (s.until IS NULL OR s.until > t)
                                                           AND (NOT e.solicited OR s.kind <> 'stop_checkins')) THEN
        RAISE EXCEPTION 'dionysus: contact refused: % asked not to be contacted now', e.person USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- What they asked for (a reminder) has no cooldown and is not held back by energy: it
    -- spends what there is.
    IF NOT e.solicited AND p.last_contact_at IS NOT NULL AND t - p.last_contact_at < make_interval(secs => dionysus_internal.heartbeat_setting('reach_out_cooldown_hours') * 3600) THEN
        RAISE EXCEPTION 'dionysus: contact refused: % was contacted less than the cooldown ago', e.person USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    cost := dionysus.get_action_cost('reach_out_user');
    IF e.solicited THEN
        cost := least(cost, greatest(0, (SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1)));
    ELSIF (SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1) < cost THEN
        RAISE EXCEPTION 'dionysus: contact refused: energy below the % a contact costs', cost USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF dionysus_internal.web_only_basis(message) THEN
        RAISE EXCEPTION 'dionysus: contact refused: it rests on web content alone' USING ERRCODE = 'insufficient_privilege';
    END IF;
    target := dionysus.reach_out_target(e.person);
    PERFORM dionysus.update_energy(-cost, NULL, 'reach_out_user',
                                   CASE WHEN e.solicited THEN 'contact they asked for: ' ELSE 'contact born of pressure: ' END || left(e.explanation, 200));
    INSERT INTO dionysus.outbox (audience, content, person, platform, contact_id)
    VALUES ('user', message, target ->> 'person', target ->> 'platform', e.id)
    RETURNING id INTO msg_id;
    UPDATE dionysus.contact_evaluations c SET decision = 'message', decided_by = decide_contact.decided_by, decided_at = t,
           reason = decide_contact.reason, outbox_id = msg_id WHERE c.id = e.id;
    IF e.solicited THEN
        UPDATE dionysus.people x SET contact_request = NULL WHERE x.person = e.person;
    ELSE
        UPDATE dionysus.people x SET
            check_interval_minutes = dionysus_internal.proactive_setting('check_interval_minutes'),
            cause_at_last_contact = jsonb_build_object(
                'open_requests', (SELECT count(*) FROM dionysus.goals g WHERE g.source = 'user_request' AND g.priority IN ('active', 'queued')
                                                                          AND g.private_to = ARRAY[e.person]),
                'task_pressure', x.task_pressure, 'curiosity', x.curiosity)
         WHERE x.person = e.person;
    END IF;
    -- Two model calls (decide, compose); one for a contact they asked for (compose only).
    UPDATE dionysus.agent_state SET model_calls = model_calls + CASE WHEN decide_contact.decided_by <> 'model' THEN 0 WHEN e.solicited THEN 1 ELSE 2 END,
           vitality = greatest(0, vitality - CASE WHEN decide_contact.decided_by <> 'model' THEN 0 WHEN e.solicited THEN 1 ELSE 2 END
                                             * dionysus_internal.proactive_setting('vitality_drain_model'))
     WHERE id = 1;
    PERFORM pg_notify('dionysus_outbox', msg_id::text);
    RETURN jsonb_build_object('decision', 'message', 'outbox_id', msg_id, 'duplicate', false);
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.note_contact_delivered(who text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce((SELECT c.solicited FROM dionysus.contact_evaluations c WHERE c.person = who AND c.decision = 'message'
                  ORDER BY c.decided_at DESC, c.recorded_at DESC LIMIT 1), false) THEN
        UPDATE dionysus.people x SET social_debt = x.social_debt * (1 - dionysus_internal.proactive_setting('debt_relief_on_contact')),
               updated_at = now()
         WHERE x.person = who;
        RETURN;
    END IF;
    UPDATE dionysus.people x SET last_contact_at = dionysus.clock_now(), awaiting_reply = true,
           social_debt = x.social_debt * (1 - dionysus_internal.proactive_setting('debt_relief_on_contact')), updated_at = now()
     WHERE x.person = who;
END $$;

CREATE OR REPLACE FUNCTION set_person_time_zone(person text, time_zone text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF time_zone IS NULL OR NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = time_zone) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "time_zone": % is not a time zone name (e.g. Europe/Lisbon)', time_zone
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.person_row(person);
    UPDATE dionysus.people x SET time_zone = set_person_time_zone.time_zone, updated_at = now() WHERE x.person = set_person_time_zone.person;
END $$;

CREATE OR REPLACE FUNCTION rule_vocabulary() RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'triggers', jsonb_build_object(
            'tick', 'every tick of the base layer (minutes apart; up to an hour while asleep)',
            'time.hour', 'each full hour of the person''s day',
            'time.morning', '07:00 their time', 'time.midday', '12:00 their time',
            'time.evening', '18:00 their time', 'time.night', '23:00 their time',
            'message_received', 'the person wrote', 'contact_answered', 'they answered a contact',
            'contact_ignored', 'a contact went unanswered', 'reaction', 'they reacted to a message',
            'goal_changed', 'a goal or request was created or changed', 'heartbeat', 'a heartbeat finished'),
        'values', jsonb_build_object(
            'person.social_debt', '0–1: how long since we talked, felt',
            'person.curiosity', '0–1: new things they might care about',
            'person.task_pressure', '0–1: what they asked for that is still open, felt',
            'person.restraint', '0–1: holds contact back (raises the threshold)',
            'person.mood', '-1–1: their tone lately',
            'person.hours_since_message', 'hours since they last wrote',
            'person.hours_since_contact', 'hours since the last contact Dionysus started',
            'person.ignored_in_row', 'contacts in a row they did not answer',
            'person.turns', 'messages they have written',
            'person.open_requests', 'their open requests',
            'person.open_objectives', 'their pending objectives that matter (saliency at least 0.5)',
            'person.local_hour', '0–23, their time', 'person.local_dow', '1 Monday … 7 Sunday, their time',
            'person.local_day', 'day of the month, their time',
            'agent.vitality', '0–1', 'agent.asleep', '1 while the agent sleeps, else 0',
            'rule.hours_since_fired', 'hours since this rule last fired (a large number if never)',
            'rule.times_fired', 'how often this rule fired',
            'event.priority', '0 CRITICAL … 4 IDLE', 'event.merged', 'how many events were merged into this one'),
        'operators', jsonb_build_array('<', '<=', '>', '>=', '=', '!='),
        'condition', '{} (always), {"var": NAME, "op": OP, "value": NUMBER}, {"all": [...]}, {"any": [...]}, {"not": {...}}',
        'intents', jsonb_build_object(
            'adjust', '{"adjust": "person.social_debt|person.curiosity|person.task_pressure|person.restraint|agent.vitality", and one of "by": -1…1, "to": 0…1, or "toward": 0…1 with "per_hour": rate}',
            'create_objective', '{"create_objective": "what they want done"}',
            'schedule_event', '{"schedule_event": "type", "in_minutes": N, "priority": 0…4}',
            'request_contact', '{"request_contact": "what to write to them about"} (a contact they asked for: no cooldown)'))
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.check_rule_condition(cond jsonb, at_path text DEFAULT 'condition', depth integer DEFAULT 0)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    nodes integer := 1;
    c jsonb;
    i integer := 0;
    key text;
BEGIN
    IF depth > 6 THEN
        RAISE EXCEPTION 'dionysus: invalid rule: % is nested more than 6 deep', at_path USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cond IS NULL OR jsonb_typeof(cond) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: invalid rule: % must be a JSON object', at_path USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cond = '{}'::jsonb THEN
        RETURN 1;
    END IF;
    SELECT k INTO key FROM jsonb_object_keys(cond) k WHERE k IN ('all', 'any', 'not', 'var') LIMIT 1;
    IF key IN ('all', 'any') THEN
        IF (SELECT count(*) FROM jsonb_object_keys(cond)) <> 1 OR jsonb_typeof(cond -> key) <> 'array' OR jsonb_array_length(cond -> key) = 0 THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.% must be the only key, with a non-empty list', at_path, key USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR c IN SELECT * FROM jsonb_array_elements(cond -> key) LOOP
            nodes := nodes + dionysus_internal.check_rule_condition(c, format('%s.%s[%s]', at_path, key, i), depth + 1);
            i := i + 1;
        END LOOP;
    ELSIF key = 'not' THEN
        IF (SELECT count(*) FROM jsonb_object_keys(cond)) <> 1 THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.not must be the only key', at_path USING ERRCODE = 'invalid_parameter_value';
        END IF;
        nodes := nodes + dionysus_internal.check_rule_condition(cond -> 'not', at_path || '.not', depth + 1);
    ELSIF key = 'var' THEN
        IF NOT (dionysus.rule_vocabulary() -> 'values') ? (cond ->> 'var') THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.var "%" is not a value a rule can read (see rule_vocabulary())', at_path, cond ->> 'var'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(cond ->> 'op', '') NOT IN ('<', '<=', '>', '>=', '=', '!=') THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.op "%" is not one of < <= > >= = !=', at_path, cond ->> 'op' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF jsonb_typeof(cond -> 'value') IS DISTINCT FROM 'number' THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.value must be a number', at_path USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF (SELECT count(*) FROM jsonb_object_keys(cond)) <> 3 THEN
            RAISE EXCEPTION 'dionysus: invalid rule: % has keys other than var, op and value', at_path USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        RAISE EXCEPTION 'dionysus: invalid rule: % must be {}, or have one of all, any, not, var', at_path USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF depth = 0 AND nodes > 32 THEN
        RAISE EXCEPTION 'dionysus: invalid rule: % has % parts (at most 32)', at_path, nodes USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN nodes;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.check_rule_intents(intents jsonb) RETURNS void
    LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    it jsonb;
    i integer := 0;
    n integer;
    path text;
BEGIN
    IF intents IS NULL OR jsonb_typeof(intents) <> 'array' OR jsonb_array_length(intents) NOT BETWEEN 1 AND 8 THEN
        RAISE EXCEPTION 'dionysus: invalid rule: intents must be a list of 1 to 8 intents' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR it IN SELECT * FROM jsonb_array_elements(intents) LOOP
        path := format('intents[%s]', i);
        IF jsonb_typeof(it) <> 'object' THEN
            RAISE EXCEPTION 'dionysus: invalid rule: % must be an object', path USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF it ? 'adjust' THEN
            IF coalesce(it ->> 'adjust', '') NOT IN ('person.social_debt', 'person.curiosity', 'person.task_pressure', 'person.restraint', 'agent.vitality') THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.adjust "%" is not a value a rule can move', path, it ->> 'adjust' USING ERRCODE = 'invalid_parameter_value';
            END IF;
            n := (it ? 'by')::int + (it ? 'to')::int + (it ? 'toward')::int;
            IF n <> 1 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: % needs exactly one of by, to, toward', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'by' AND (jsonb_typeof(it -> 'by') <> 'number' OR abs((it ->> 'by')::float8) > 1) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.by must be a number in [-1, 1]', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'to' AND (jsonb_typeof(it -> 'to') <> 'number' OR (it ->> 'to')::float8 NOT BETWEEN 0 AND 1) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.to must be a number in [0, 1]', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'toward' AND (jsonb_typeof(it -> 'toward') <> 'number' OR (it ->> 'toward')::float8 NOT BETWEEN 0 AND 1
                                  OR jsonb_typeof(it -> 'per_hour') IS DISTINCT FROM 'number' OR (it ->> 'per_hour')::float8 <= 0
                                  OR (it ->> 'per_hour')::float8 > 10) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.toward must be in [0, 1], with per_hour in (0, 10]', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF it ? 'create_objective' THEN
            IF jsonb_typeof(it -> 'create_objective') <> 'string' OR length(btrim(it ->> 'create_objective')) NOT BETWEEN 1 AND 200 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.create_objective must be a text of 1 to 200 characters', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF it ? 'schedule_event' THEN
            IF jsonb_typeof(it -> 'schedule_event') <> 'string' OR (it ->> 'schedule_event') !~ '^[a-z][a-z0-9_.]{0,62}$'
               OR (it ->> 'schedule_event') LIKE 'time.%' THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.schedule_event must be an event type (lower-case words joined by _ or ., not time.*)', path
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF jsonb_typeof(it -> 'in_minutes') IS DISTINCT FROM 'number' OR (it ->> 'in_minutes')::float8 NOT BETWEEN 0 AND 527040 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.in_minutes must be a number of minutes up to a year', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'priority' AND (jsonb_typeof(it -> 'priority') <> 'number' OR (it ->> 'priority')::float8 NOT IN (0, 1, 2, 3, 4)) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.priority must be 0 … 4', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF it ? 'request_contact' THEN
            IF jsonb_typeof(it -> 'request_contact') <> 'string' OR length(btrim(it ->> 'request_contact')) NOT BETWEEN 1 AND 300 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.request_contact must be a text of 1 to 300 characters', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSE
            RAISE EXCEPTION 'dionysus: invalid rule: % must be one of adjust, create_objective, schedule_event, request_contact', path
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        i := i + 1;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.rule_holds(cond jsonb, vals jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    c jsonb;
    l double precision;
    r double precision;
BEGIN
    IF cond IS NULL OR cond = '{}'::jsonb THEN
        RETURN true;
    ELSIF cond ? 'all' THEN
        FOR c IN SELECT * FROM jsonb_array_elements(cond -> 'all') LOOP
            IF NOT dionysus_internal.rule_holds(c, vals) THEN RETURN false; END IF;
        END LOOP;
        RETURN true;
    ELSIF cond ? 'any' THEN
        FOR c IN SELECT * FROM jsonb_array_elements(cond -> 'any') LOOP
            IF dionysus_internal.rule_holds(c, vals) THEN RETURN true; END IF;
        END LOOP;
        RETURN false;
    ELSIF cond ? 'not' THEN
        RETURN NOT dionysus_internal.rule_holds(cond -> 'not', vals);
    END IF;
    l := (vals ->> (cond ->> 'var'))::float8;
    r := (cond ->> 'value')::float8;
    IF l IS NULL THEN
        RETURN false;
    END IF;
    RETURN CASE cond ->> 'op' WHEN '<' THEN l < r WHEN '<=' THEN l <= r WHEN '>' THEN l > r WHEN '>=' THEN l >= r
                              WHEN '=' THEN l = r WHEN '!=' THEN l <> r ELSE false END;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.rule_values(who text, t timestamptz, ev dionysus.events DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    p dionysus.people;
    a dionysus.agent_state;
    v jsonb;
    local timestamp;
BEGIN
    SELECT * INTO a FROM dionysus.agent_state WHERE id = 1;
    v := jsonb_build_object('agent.vitality', a.vitality, 'agent.asleep', CASE WHEN a.mode = 'asleep' THEN 1 ELSE 0 END);
    IF ev.id IS NOT NULL THEN
        v := v || jsonb_build_object('event.priority', ev.priority, 'event.merged', ev.merged);
    END IF;
    SELECT * INTO p FROM dionysus.people x WHERE x.person = who;
    IF FOUND THEN
        local := t AT TIME ZONE p.time_zone;
        v := v || jsonb_strip_nulls(jsonb_build_object(
            'person.social_debt', round(p.social_debt::numeric, 4), 'person.curiosity', round(p.curiosity::numeric, 4),
            'person.task_pressure', round(p.task_pressure::numeric, 4), 'person.restraint', round(p.restraint::numeric, 4),
            'person.mood', round(p.mood::numeric, 3),
            'person.hours_since_message', round((extract(epoch FROM t - p.last_message_at) / 3600)::numeric, 2),
            'person.hours_since_contact', round((extract(epoch FROM t - p.last_contact_at) / 3600)::numeric, 2),
            'person.ignored_in_row', p.ignored_in_row, 'person.turns', p.turns,
            'person.open_requests', (SELECT count(*) FROM dionysus.goals g
                                      WHERE g.source = 'user_request' AND g.priority IN ('active', 'queued') AND g.private_to = ARRAY[who]),
            'person.open_objectives', (SELECT count(*) FROM dionysus.objectives o
                                        WHERE o.person = who AND o.status = 'pending' AND o.saliency >= 0.5),
            'person.local_hour', extract(hour FROM local)::int, 'person.local_dow', extract(isodow FROM local)::int,
            'person.local_day', extract(day FROM local)::int));
    END IF;
    RETURN v;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.run_rules(on_trigger text, who text, hours double precision DEFAULT 0, ev dionysus.events DEFAULT NULL)
    RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    vals jsonb := dionysus_internal.rule_values(who, t, ev);
    r dionysus.mind_rules;
    rv jsonb;
    fired_rules dionysus.mind_rules[] := '{}';
    it jsonb;
    fired jsonb := '[]'::jsonb;
    effects jsonb;
    target text;
    before double precision;
    after double precision;
    w double precision;
    made uuid;
    requested boolean := false;
    has_person boolean := who IS NOT NULL AND vals ? 'person.turns';
    -- The values adjustments move, kept here and written back once.
    st jsonb;
    i integer;
BEGIN
    FOR r IN SELECT * FROM dionysus.mind_rules m
              WHERE m.status = 'active' AND m.trigger = on_trigger
                AND (m.person IS NULL OR m.person = who)
              ORDER BY m.weight DESC, m.id LOOP
        rv := vals || jsonb_build_object('rule.hours_since_fired', coalesce(round((extract(epoch FROM t - r.last_used_at) / 3600)::numeric, 2), 1000000),
                                         'rule.times_fired', r.use_count);
        IF dionysus_internal.rule_holds(r.condition, rv) THEN
            fired_rules := fired_rules || r;
        END IF;
    END LOOP;
    IF cardinality(fired_rules) = 0 THEN
        RETURN 0;
    END IF;
    -- Lock order: the goals lock (4) before the person's row (6), if a rule will make an objective.
    IF EXISTS (SELECT 1 FROM unnest(fired_rules) f, jsonb_array_elements(f.intents) x WHERE x ? 'create_objective') THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    END IF;
    -- Adjustments first, each scaled by the rule's weight, in weight order, on the values as
    -- the previous adjustment left them; written back in one statement.
    SELECT jsonb_build_object('person.social_debt', x.social_debt, 'person.curiosity', x.curiosity, 'person.task_pressure', x.task_pressure,
                              'person.restraint', x.restraint)
      INTO st FROM dionysus.people x WHERE x.person = who;
    st := coalesce(st, '{}'::jsonb) || jsonb_build_object('agent.vitality', (SELECT vitality FROM dionysus.agent_state WHERE id = 1));
    FOREACH r IN ARRAY fired_rules LOOP
        effects := '[]'::jsonb;
        w := r.weight;
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'adjust' LOOP
            target := it ->> 'adjust';
            IF NOT st ? target THEN
                CONTINUE; -- a person's value, and no person
            END IF;
            before := (st ->> target)::float8;
            after := least(1, greatest(0, CASE
                WHEN it ? 'by' THEN before + w * (it ->> 'by')::float8
                WHEN it ? 'to' THEN before + w * ((it ->> 'to')::float8 - before)
                ELSE (it ->> 'toward')::float8 + (before - (it ->> 'toward')::float8) * exp(-w * (it ->> 'per_hour')::float8 * hours) END));
            st := jsonb_set(st, ARRAY[target], to_jsonb(after));
            effects := effects || jsonb_build_object('adjust', target, 'before', round(before::numeric, 4), 'after', round(after::numeric, 4));
        END LOOP;
        fired := fired || jsonb_build_object('rule', r.id, 'name', r.name, 'weight', round(r.weight::numeric, 3), 'effects', effects);
    END LOOP;
    IF has_person THEN
        UPDATE dionysus.people x SET social_debt = (st ->> 'person.social_debt')::float8, curiosity = (st ->> 'person.curiosity')::float8,
               task_pressure = (st ->> 'person.task_pressure')::float8, restraint = (st ->> 'person.restraint')::float8
         WHERE x.person = who;
    END IF;
    UPDATE dionysus.agent_state SET vitality = (st ->> 'agent.vitality')::float8 WHERE id = 1 AND vitality <> (st ->> 'agent.vitality')::float8;
    -- Then what the rules make: objectives, scheduled events, a contact the person asked for.
    FOR i IN 1 .. cardinality(fired_rules) LOOP
        r := fired_rules[i];
        effects := fired[i - 1] -> 'effects';
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'create_objective' LOOP
            IF has_person THEN
                SELECT g.id INTO made FROM dionysus.goals g
                 WHERE g.title = btrim(it ->> 'create_objective') AND g.private_to = ARRAY[who] AND g.priority IN ('active', 'queued');
                IF made IS NULL THEN
                    made := dionysus.create_goal(btrim(it ->> 'create_objective'), 'set up by the rule "' || r.name || '"', 'user_request',
                                                 private_to => ARRAY[who]);
                END IF;
                effects := effects || jsonb_build_object('create_objective', it ->> 'create_objective', 'goal_id', made);
            END IF;
        END LOOP;
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'schedule_event' LOOP
            INSERT INTO dionysus.events (source, type, priority, person, payload, at, status)
            VALUES ('internal', it ->> 'schedule_event', coalesce((it ->> 'priority')::int, 2), who,
                    jsonb_build_object('rule', r.id), t + make_interval(secs => (it ->> 'in_minutes')::float8 * 60), 'scheduled');
            effects := effects || jsonb_build_object('schedule_event', it ->> 'schedule_event', 'in_minutes', (it ->> 'in_minutes')::float8);
        END LOOP;
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'request_contact' LOOP
            IF has_person AND NOT requested THEN
                requested := true;
                UPDATE dionysus.people x SET contact_request = jsonb_build_object('about', it ->> 'request_contact', 'rule', r.id, 'rule_name', r.name, 'at', t),
                       next_check_at = t
                 WHERE x.person = who;
                effects := effects || jsonb_build_object('request_contact', it ->> 'request_contact');
            END IF;
        END LOOP;
        fired := jsonb_set(fired, ARRAY[(i - 1)::text, 'effects'], effects);
    END LOOP;
    -- Used: learned rules strengthen; every rule counts its use.
    UPDATE dionysus.mind_rules m SET use_count = m.use_count + 1, last_used_at = t,
           weight = CASE WHEN m.learned THEN least(1, m.weight + dionysus_internal.proactive_setting('rule_strengthen') * (1 - m.weight)) ELSE m.weight END
     WHERE m.id IN (SELECT f.id FROM unnest(fired_rules) f);
    INSERT INTO dionysus.rule_firings (at, person, trigger, event_id, inputs, fired)
    VALUES (t, who, on_trigger, ev.id, vals, fired);
    RETURN cardinality(fired_rules);
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.decay_rules() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    n integer;
BEGIN
    UPDATE dionysus.mind_rules m
       SET weight = m.weight * power(1 - dionysus_internal.proactive_setting('rule_decay_per_day'),
                                     extract(epoch FROM t - coalesce(m.decayed_at, m.last_used_at, m.created_at)) / 86400),
           decayed_at = t
     WHERE m.status = 'active' AND m.learned AND coalesce(m.last_used_at, m.created_at) < t - interval '1 day'
       AND coalesce(m.decayed_at, m.last_used_at, m.created_at) < t - interval '1 day';
    UPDATE dionysus.mind_rules m SET status = 'forgotten', ended_at = t
     WHERE m.status = 'active' AND m.learned AND m.weight < dionysus_internal.proactive_setting('rule_forget_below');
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION add_rule(person text, words text, rule jsonb) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    who text := btrim(add_rule.person);
    r dionysus.mind_rules;
    nm text;
BEGIN
    IF who IS NULL OR who = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF words IS NULL OR btrim(words) = '' OR length(words) > 2000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "words": the person''s words, 1 to 2,000 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rule IS NULL OR jsonb_typeof(rule) <> 'object' OR octet_length(rule::text) > 4096 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "rule": must be a JSON object of at most 4 kB' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(rule) k WHERE k NOT IN ('name', 'trigger', 'condition', 'intents', 'description')) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "rule": only name, trigger, condition, intents and description'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(rule -> 'trigger') IS DISTINCT FROM 'string' OR NOT (dionysus.rule_vocabulary() -> 'triggers') ? (rule ->> 'trigger') THEN
        RAISE EXCEPTION 'dionysus: invalid rule: trigger "%" is not one of rule_vocabulary()''s triggers', rule ->> 'trigger'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.check_rule_condition(coalesce(rule -> 'condition', '{}'::jsonb));
    PERFORM dionysus_internal.check_rule_intents(rule -> 'intents');
    nm := left(btrim(coalesce(rule ->> 'name', rule ->> 'description', words)), 80);
    IF nm = '' THEN
        RAISE EXCEPTION 'dionysus: invalid rule: name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.person_row(who);
    IF (SELECT count(*) FROM dionysus.mind_rules m WHERE m.person = who AND m.status = 'active')
       >= dionysus_internal.proactive_setting('rules_per_person') THEN
        RAISE EXCEPTION 'dionysus: % has % rules already (rules_per_person); remove one first', who,
                        dionysus_internal.proactive_setting('rules_per_person') USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF EXISTS (SELECT 1 FROM dionysus.mind_rules m WHERE m.person = who AND m.status = 'active' AND m.name = nm) THEN
        RAISE EXCEPTION 'dionysus: % already has a rule named "%"', who, nm USING ERRCODE = 'unique_violation';
    END IF;
    INSERT INTO dionysus.mind_rules (name, person, trigger, condition, intents, origin, description, words, created_at)
    VALUES (nm, who, rule ->> 'trigger', coalesce(rule -> 'condition', '{}'::jsonb), rule -> 'intents', 'person',
            left(coalesce(nullif(btrim(rule ->> 'description'), ''), nm), 300), left(words, 2000), dionysus.clock_now())
    RETURNING * INTO r;
    RETURN jsonb_build_object('rule_id', r.id, 'name', r.name, 'trigger', r.trigger, 'condition', r.condition, 'intents', r.intents,
                              'description', r.description);
END $$;

CREATE OR REPLACE FUNCTION person_rules(for_person text)
    RETURNS TABLE (rule_id bigint, name text, origin text, status text, trigger text, condition jsonb, intents jsonb,
                   weight double precision, use_count bigint, last_used_at timestamptz, description text, words text)
    LANGUAGE sql STABLE AS $$
    SELECT m.id, m.name, m.origin, m.status, m.trigger, m.condition, m.intents, m.weight, m.use_count, m.last_used_at, m.description, m.words
      FROM dionysus.mind_rules m
     WHERE (m.person = for_person AND m.status <> 'removed') OR (m.person IS NULL AND m.status = 'active')
     ORDER BY m.person NULLS LAST, m.status, m.id
$$;

CREATE OR REPLACE FUNCTION remove_rule(person text, rule_id bigint) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF person IS NULL OR rule_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be NULL', CASE WHEN person IS NULL THEN 'person' ELSE 'rule_id' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.mind_rules m SET status = 'removed', ended_at = dionysus.clock_now()
     WHERE m.id = remove_rule.rule_id AND m.person = remove_rule.person AND m.status = 'active';
    RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.message_tone(words text) RETURNS double precision
    LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(-1, least(1,
          0.35 * (lower(words) ~ '\m(thanks?|thank you|love|loved|great|awesome|glad|haha|lol|wonderful|amazing|nice|yay|sweet|happy|perfect)\M')::int
        + 0.25 * (words ~ '(😊|🙂|😄|😁|❤️|🥰|😂|🙏|🎉|:\)|:D)')::int
        + 0.15 * (words ~ '!')::int
        + 0.4 * (lower(words) ~ '(thanks for (reminding|asking|checking|the reminder)|good timing|glad you (asked|wrote|reached)|was just thinking of you)')::int
        - 0.5 * (lower(words) ~ '(\mnot now\M|\mbusy\M|\mlater\M|leave me alone|\mstop\M|annoying|\mugh\M|go away|too many messages)')::int
        - 0.3 * (lower(words) ~ '\m(tired|sad|stressed|awful|terrible|bad day|exhausted|upset|angry)\M')::int))
$$;

CREATE OR REPLACE FUNCTION dionysus_internal.reply_signal(words text, latency_seconds double precision, usual_seconds double precision)
    RETURNS TABLE (signal double precision, unsure boolean, latency double precision, length double precision, tone double precision)
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    latency := greatest(-1, least(1, 1 - latency_seconds / greatest(600, coalesce(usual_seconds, 1800))));
    length := CASE WHEN dionysus.is_acknowledgement(words) THEN -0.3 WHEN char_length(words) < 15 THEN -0.1
                   WHEN char_length(words) < 60 THEN 0.2 ELSE 0.6 END;
    tone := dionysus_internal.message_tone(words);
    signal := greatest(-1, least(1, 0.35 * latency + 0.25 * length + 0.6 * tone));
    -- Mixed cues on a real message: the fast model is asked (contact_feedback).
    unsure := abs(signal) < 0.15 AND char_length(words) >= 20;
    RETURN NEXT;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.learn_from_contact(who text, contact uuid, contact_at timestamptz, signal double precision, cause text)
    RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    h smallint;
    rate double precision;
    before double precision;
    after double precision;
    top text;
    tr record;
    delta double precision;
    n integer := 0;
BEGIN
    IF signal IS NULL OR signal = 0 OR contact_at IS NULL THEN
        RETURN 0;
    END IF;
    -- Timing, fast: a warm, quick answer marks the hour as a good one; a cold or missing one as poor.
    h := dionysus_internal.hour_of_week(contact_at, (SELECT time_zone FROM dionysus.people WHERE person = who));
    rate := dionysus_internal.proactive_setting('learn_timing_rate');
    INSERT INTO dionysus.person_rhythm (person, hour_of_week) VALUES (who, h) ON CONFLICT DO NOTHING;
    IF signal > 0 THEN
        SELECT activity INTO before FROM dionysus.person_rhythm WHERE person = who AND hour_of_week = h;
        UPDATE dionysus.person_rhythm SET activity = activity + rate * signal WHERE person = who AND hour_of_week = h RETURNING activity INTO after;
        INSERT INTO dionysus.learning_log (at, person, contact_id, kind, target, before, after, signal, cause)
        VALUES (t, who, contact, 'timing', 'activity at hour ' || h, before, after, signal, cause);
    ELSE
        SELECT misses INTO before FROM dionysus.person_rhythm WHERE person = who AND hour_of_week = h;
        UPDATE dionysus.person_rhythm SET misses = misses + rate * abs(signal) WHERE person = who AND hour_of_week = h RETURNING misses INTO after;
        INSERT INTO dionysus.learning_log (at, person, contact_id, kind, target, before, after, signal, cause)
        VALUES (t, who, contact, 'timing', 'misses at hour ' || h, before, after, signal, cause);
    END IF;
    n := n + 1;
    -- Topic, moderate: the reason that weighed most in the contact gains or loses for this person.
    SELECT x ->> 'input' INTO top FROM dionysus.contact_evaluations c, jsonb_array_elements(c.inputs) x
     WHERE c.id = contact AND x ->> 'input' IN ('social_debt', 'acquaintance', 'task_pressure', 'curiosity')
     ORDER BY (x ->> 'contribution')::float8 DESC LIMIT 1;
    IF top IS NOT NULL THEN
        INSERT INTO dionysus.person_contact_weights (person, input) VALUES (who, top) ON CONFLICT DO NOTHING;
        SELECT factor INTO before FROM dionysus.person_contact_weights WHERE person = who AND input = top FOR UPDATE;
        after := least(1.5, greatest(0.5, before * (1 + dionysus_internal.proactive_setting('learn_topic_rate') * signal)));
        UPDATE dionysus.person_contact_weights SET factor = after WHERE person = who AND input = top;
        INSERT INTO dionysus.learning_log (at, person, contact_id, kind, target, before, after, signal, cause)
        VALUES (t, who, contact, 'topic', top, before, after, signal, cause);
        n := n + 1;
    END IF;
    -- Personality, very slowly (each trait's own learning rate): a cold welcome makes it shyer
    -- and less forward, a warm one bolder; silence teaches patience.
    FOR tr IN SELECT * FROM dionysus.personality WHERE trait IN ('shyness', 'independence', 'patience') ORDER BY trait FOR UPDATE LOOP
        delta := tr.learning_rate * CASE tr.trait WHEN 'shyness' THEN -signal WHEN 'independence' THEN signal
                                                  ELSE CASE WHEN signal < 0 THEN -signal ELSE 0 END END;
        IF delta <> 0 THEN
            after := least(1, greatest(0, tr.value + delta));
            UPDATE dionysus.personality SET value = after WHERE trait = tr.trait;
            INSERT INTO dionysus.learning_log (at, person, contact_id, kind, target, before, after, signal, cause)
            VALUES (t, who, contact, 'personality', tr.trait, tr.value, after, signal, cause);
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION contact_feedback(evaluation_id uuid, sentiment text, reason text DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    c dionysus.contact_evaluations;
    s double precision;
BEGIN
    IF sentiment IS NULL OR sentiment NOT IN ('positive', 'neutral', 'negative') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "sentiment": % (positive, neutral or negative)', sentiment USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Lock order, as everywhere learning happens: agent_state, the evaluation, the personality rows.
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    SELECT * INTO c FROM dionysus.contact_evaluations x WHERE x.id = evaluation_id AND x.decision = 'message' FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "evaluation_id": no contact that was sent has id %', evaluation_id USING ERRCODE = 'no_data_found';
    END IF;
    IF c.feedback_at IS NOT NULL THEN
        RETURN 0; -- judged once already
    END IF;
    s := CASE sentiment WHEN 'positive' THEN 0.6 WHEN 'negative' THEN -0.6 ELSE 0 END;
    UPDATE dionysus.contact_evaluations x
       SET feedback = jsonb_build_object('signal', s, 'by', 'model', 'sentiment', sentiment, 'reason', left(contact_feedback.reason, 300)),
           feedback_at = dionysus.clock_now()
     WHERE x.id = c.id;
    RETURN dionysus_internal.learn_from_contact(c.person, c.id, c.decided_at, s,
        'the fast model read their reply as ' || sentiment || coalesce(': ' || left(contact_feedback.reason, 200), ''));
END $$;

CREATE OR REPLACE FUNCTION explain_learning(for_person text DEFAULT NULL, max_items integer DEFAULT 20)
    RETURNS TABLE (at timestamptz, person text, kind text, target text, before double precision, after double precision,
                   signal double precision, cause text)
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF max_items IS NULL OR max_items < 1 OR max_items > 1000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_items": % (1 to 1000)', max_items USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY SELECT l.at, l.person, l.kind, l.target, l.before, l.after, l.signal, l.cause FROM dionysus.learning_log l
                  WHERE for_person IS NULL OR l.person = for_person ORDER BY l.at DESC, l.id DESC LIMIT max_items;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.evaluate_requested_contact(p dionysus.people) RETURNS dionysus.contact_evaluations
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    req jsonb := p.contact_request;
    e dionysus.contact_evaluations;
    gates jsonb := '[]'::jsonb;
    sig dionysus.person_signals;
    on_its_way bigint;
    today bigint;
    blocked text[];
    words text;
BEGIN
    IF (req ->> 'at')::timestamptz < t - make_interval(secs => dionysus_internal.proactive_setting('contact_request_hours') * 3600) THEN
        UPDATE dionysus.people x SET contact_request = NULL WHERE x.person = p.person;
        INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, gates, outcome, explanation, solicited, request)
        VALUES (p.person, t, '[]'::jsonb, 0, 1, '[]'::jsonb, 'gated',
                format('a contact their rule "%s" asked for (%s) could not go out within %s hours and lapsed', req ->> 'rule_name', req ->> 'about',
                       dionysus_internal.proactive_setting('contact_request_hours')), true, req)
        RETURNING * INTO e;
        RETURN e;
    END IF;
    SELECT * INTO sig FROM dionysus.person_signals s
     WHERE s.person = p.person AND s.ended_at IS NULL AND (s.until IS NULL OR s.until > t) AND s.kind <> 'stop_checkins'
     ORDER BY s.said_at DESC LIMIT 1;
    gates := gates || jsonb_build_object('gate', 'their_word', 'passed', sig.id IS NULL,
        'detail', CASE WHEN sig.id IS NULL THEN 'nothing said against it' ELSE format('they said "%s" (%s)', sig.words, sig.kind) END);
    SELECT count(*) INTO on_its_way FROM (
        SELECT 1 FROM dionysus.contact_evaluations c WHERE c.person = p.person AND c.outcome = 'opportunity' AND c.decision IS NULL
        UNION ALL
        SELECT 1 FROM dionysus.outbox o WHERE o.person = p.person AND o.contact_id IS NOT NULL AND o.status = 'pending') x;
    gates := gates || jsonb_build_object('gate', 'in_flight', 'passed', on_its_way = 0,
        'detail', CASE WHEN on_its_way = 0 THEN 'nothing on its way to them' ELSE 'a contact is already being decided or delivered' END);
    SELECT count(*) INTO today FROM dionysus.contact_evaluations c
     WHERE c.person = p.person AND c.solicited AND c.decision = 'message' AND c.decided_at > t - interval '1 day';
    gates := gates || jsonb_build_object('gate', 'daily_limit', 'passed', today < dionysus_internal.proactive_setting('solicited_per_day'),
        'detail', format('%s asked-for contacts in the last day (at most %s)', today, dionysus_internal.proactive_setting('solicited_per_day')));
    SELECT array_agg(g ->> 'gate') INTO blocked FROM jsonb_array_elements(gates) g WHERE NOT (g ->> 'passed')::boolean;
    words := format('they asked for this: %s (their rule "%s")', req ->> 'about', req ->> 'rule_name')
             || CASE WHEN blocked IS NULL THEN '' ELSE '; held back by ' || array_to_string(blocked, ', ') END;
    INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, gates, outcome, explanation, solicited, request)
    VALUES (p.person, t, jsonb_build_array(jsonb_build_object('input', 'request', 'value', 1, 'weight', 1, 'contribution', 1,
                                                              'why', req ->> 'about', 'rule', req -> 'rule')),
            1, 1, gates, CASE WHEN blocked IS NULL THEN 'opportunity' ELSE 'gated' END, words, true, req)
    RETURNING * INTO e;
    UPDATE dionysus.people x SET last_evaluated_at = t,
           next_check_at = t + make_interval(secs => dionysus_internal.proactive_setting('check_interval_minutes') * 60)
     WHERE x.person = p.person;
    IF e.outcome = 'opportunity' THEN
        UPDATE dionysus.contact_evaluations c SET notified_at = now() WHERE c.id = e.id;
        PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', e.id, 'person', p.person, 'why', words)::text);
    END IF;
    RETURN e;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.mind_rules_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus_internal.check_rule_condition(NEW.condition);
    PERFORM dionysus_internal.check_rule_intents(NEW.intents);
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION note_reaction(platform text, platform_message_id text, author_id text, emoji text) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    who text;
    t timestamptz := dionysus.clock_now();
    o dionysus.outbox;
    p dionysus.people;
    c dionysus.contact_evaluations;
    tone double precision;
    answered boolean := false;
    arg text;
BEGIN
    arg := CASE WHEN coalesce(btrim(platform), '') = '' THEN 'platform' WHEN coalesce(btrim(platform_message_id), '') = '' THEN 'platform_message_id'
                WHEN coalesce(btrim(author_id), '') = '' THEN 'author_id' WHEN coalesce(emoji, '') = '' OR length(emoji) > 64 THEN 'emoji' END;
    IF arg IS NOT NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must be a non-empty text (an emoji: at most 64 characters)', arg
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    who := dionysus.person_key(platform, author_id);
    SELECT * INTO o FROM dionysus.outbox x
     WHERE x.platform = note_reaction.platform AND x.status = 'sent'
       AND (x.platform_message_id = note_reaction.platform_message_id OR x.sent_parts ? note_reaction.platform_message_id)
     ORDER BY x.sent_at DESC LIMIT 1;
    IF NOT FOUND OR o.person IS DISTINCT FROM who THEN
        RETURN jsonb_build_object('noted', false, 'reason', 'not a message Dionysus sent to them');
    END IF;
    tone := CASE WHEN emoji ~ '(👍|❤|😊|🙏|😂|🥰|✅|👌|🎉|😄|🫶|💯|😍|🤗|☺)' THEN 0.5
                 WHEN emoji ~ '(👎|😠|😡|🙄|😒|😤|💢)' THEN -0.5 ELSE 0.2 END;
    -- Lock order: agent_state (vitality), the evaluation, then the person's row.
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    PERFORM dionysus.push_event('communication', 'reaction', 3, jsonb_build_object('emoji', left(emoji, 64), 'outbox_id', o.id), who);
    IF o.contact_id IS NOT NULL THEN
        SELECT * INTO c FROM dionysus.contact_evaluations x WHERE x.id = o.contact_id FOR UPDATE;
        p := dionysus_internal.person_row(who);
        IF p.awaiting_reply AND c.feedback_at IS NULL AND NOT c.solicited THEN
            answered := true;
            UPDATE dionysus.people x SET awaiting_reply = false, ignored_in_row = 0,
                   social_debt = x.social_debt * (1 - 0.5 * dionysus_internal.proactive_setting('debt_relief_on_message'))
             WHERE x.person = who;
            UPDATE dionysus.contact_evaluations x SET feedback = jsonb_build_object('by', 'reaction', 'emoji', left(emoji, 64), 'signal', tone), feedback_at = t
             WHERE x.id = c.id;
            IF tone > 0 THEN
                UPDATE dionysus.agent_state SET vitality = least(1, vitality + dionysus_internal.proactive_setting('vitality_feedback')) WHERE id = 1;
            END IF;
            PERFORM dionysus_internal.learn_from_contact(who, c.id, p.last_contact_at, tone, 'they reacted ' || left(emoji, 64));
        END IF;
    END IF;
    RETURN jsonb_build_object('noted', true, 'answered_contact', answered);
END $$;

CREATE OR REPLACE FUNCTION embed(content text) RETURNS vector
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    RETURN embed_real(content)::vector;

CREATE OR REPLACE FUNCTION embed_batch(contents text[]) RETURNS TABLE (ord integer, embedding vector)
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
    SELECT b.ord, b.embedding::vector FROM embed_batch_real(contents) AS b;
END;


-- Views, as 0.4.0 has them.

CREATE OR REPLACE VIEW active_goals AS
SELECT * FROM goals WHERE priority = 'active' ORDER BY last_touched DESC;

CREATE OR REPLACE VIEW goal_backlog AS
SELECT priority, count(*) AS count, array_agg(title ORDER BY last_touched DESC) AS titles
FROM goals WHERE priority IN ('active', 'queued', 'backburner') GROUP BY priority;

CREATE OR REPLACE VIEW heartbeat_health AS
SELECT
    s.heartbeat_count                                                       AS total_heartbeats,
    s.current_energy,
    s.last_heartbeat_at                                                     AS last_heartbeat,
    s.next_heartbeat_at                                                     AS next_heartbeat,
    s.in_flight,
    s.paused,
    s.session_active,
    (SELECT count(*) FROM goals WHERE priority = 'active')                  AS active_goals,
    (SELECT count(*) FROM goals WHERE priority = 'queued')                  AS queued_goals,
    (SELECT avg(energy_end - energy_start) FROM heartbeat_log
      WHERE started_at > now() - interval '24 hours')                       AS avg_energy_delta_24h,
    (SELECT count(*) FROM heartbeat_log h, jsonb_array_elements(h.actions_taken) a
      WHERE h.started_at > now() - interval '24 hours' AND a ->> 'action' = 'reach_out_user') AS reach_outs_24h,
    (SELECT count(*) FROM work_queue WHERE status IN ('pending', 'claimed')) AS queue_depth,
    (SELECT now() - min(created_at) FROM work_queue WHERE status = 'pending') AS oldest_pending_work,
    (SELECT count(*) FROM work_queue WHERE status = 'failed')               AS failed_work,
    (SELECT count(*) FROM outbox WHERE status = 'pending')                  AS outbox_backlog,
    (SELECT count(*) FROM outbox WHERE status = 'pending' AND requires_approval AND approved_at IS NULL) AS awaiting_approval,
    sc.last_tick_at                                                         AS last_scheduler_tick,
    sc.last_error                                                           AS last_scheduler_error,
    heartbeat_warnings()                                                    AS warnings,
    dionysus_internal.table_bytes(ARRAY['heartbeat_log', 'energy_ledger', 'work_queue', 'outbox', 'messages']) AS table_bytes
FROM heartbeat_state s CROSS JOIN scheduler_status sc WHERE s.id = 1;

CREATE OR REPLACE VIEW proactive_health AS
SELECT a.mode, round(a.vitality::numeric, 3) AS vitality, round(a.disturbance::numeric, 3) AS disturbance,
       round(a.pressure::numeric, 3) AS pressure, a.tick_interval_seconds, a.last_tick_at, a.next_tick_at, a.ticks, a.model_calls,
       (SELECT count(*) FROM events WHERE status = 'queued') AS events_queued,
       (SELECT coalesce(jsonb_object_agg(reason, n), '{}'::jsonb) FROM (SELECT reason, sum(count) AS n FROM event_counters GROUP BY reason) c) AS events_not_processed,
       (SELECT count(*) FROM contact_evaluations WHERE outcome = 'opportunity' AND decision IS NULL) AS opportunities_waiting,
       (SELECT to_jsonb(x) FROM (SELECT c.person, c.at, c.outcome, c.explanation, c.decision FROM contact_evaluations c
                                  ORDER BY c.at DESC, c.recorded_at DESC LIMIT 1) x) AS last_evaluation
  FROM agent_state a WHERE a.id = 1;

CREATE OR REPLACE VIEW memory_health AS
SELECT
    (SELECT count(*) FROM memories)                                   AS memories,
    (SELECT count(*) FROM memories WHERE status = 'active')           AS active_memories,
    (SELECT count(DISTINCT memory_id) FROM neighborhood_queue)        AS stale_neighborhoods,
    (SELECT now() - min(queued_at) FROM neighborhood_queue)           AS oldest_stale_age,
    (SELECT count(DISTINCT memory_id) FROM neighborhood_queue
      WHERE attempts > 0)                                             AS failing_neighborhoods,
    (SELECT min(last_error) FROM neighborhood_queue
      WHERE last_error IS NOT NULL)                                   AS neighborhood_error,
    w.last_run_at                                                     AS last_worker_run,
    w.last_success_at                                                 AS last_worker_success,
    w.last_error                                                      AS last_worker_error,
    w.last_error_at                                                   AS last_worker_error_at,
    w.consecutive_failures                                            AS worker_consecutive_failures,
    w.neighborhoods_done                                              AS neighborhoods_recomputed,
    w.last_pass_ms                                                    AS last_pass_ms,
    (SELECT count(*) FROM memory_access_log)                          AS pending_access_log,
    (SELECT count(*) FROM embedding_cache)                            AS cached_embeddings,
    l.refreshed_at                                                    AS lexicon_refreshed_at,
    dionysus_internal.table_bytes(ARRAY['memories', 'memory_neighborhoods', 'memory_access_log', 'embedding_cache', 'triples', 'episodes']) AS table_bytes
FROM worker_status w CROSS JOIN lexicon_stats l;

-- ---------------------------------------------------------------------------------------
-- The built-in rules, as 0.4.0 ships them: the person's objectives weigh on task pressure.
-- ---------------------------------------------------------------------------------------
UPDATE mind_rules SET condition = '{"all": [{"var": "person.open_requests", "op": "=", "value": 0}, {"var": "person.open_objectives", "op": "=", "value": 0}]}'
 WHERE name = 'done requests ease' AND origin = 'built_in';
INSERT INTO mind_rules (name, trigger, condition, intents, origin, description, created_at) VALUES
    ('their objectives press', 'tick', '{"all": [{"var": "person.open_objectives", "op": ">", "value": 0}, {"var": "person.open_requests", "op": "=", "value": 0}]}',
     '[{"adjust": "person.task_pressure", "toward": 0.4, "per_hour": 0.02}]', 'built_in',
     'what they are working toward weighs gently: task pressure drifts toward 0.4 over days', now());



-- Functions that compare vectors see pgvector's operators whatever the caller's search_path.

DO $$
DECLARE
    vschema text := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'vector');
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['dionysus.heartbeat_warnings()', 'dionysus.chat_context(uuid, integer, integer, boolean)',
                             'dionysus_internal.web_only_basis(text)', 'dionysus.match_archetype(vector)',
                             'dionysus_internal.archetype_centroid(text[])',
                             'dionysus_internal.note_objective(text, text, double precision, text, uuid)'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, dionysus, %I', f, vschema);
    END LOOP;
END $$;


-- ---------------------------------------------------------------------------------------
-- Documentation: every comment as 0.4.0 has it
-- ---------------------------------------------------------------------------------------

COMMENT ON VIEW memory_health IS
    'Memory maintenance at a glance: stale neighborhood backlog and its oldest age, failing rows, the '
    'maintenance worker''s last run, success and error, the pending access log, the cache size and the tables'' sizes in bytes.';

COMMENT ON TABLE memories IS
    'Every memory: episodic, semantic (facts), procedural, strategic. Embedded with all-MiniLM-L6-v2 '
    '(vector(384), HNSW cosine) and indexed for full text (search, GIN).';

COMMENT ON TABLE episodes IS
    'Runs of episodic memories from one source; a gap over dionysus.episode_gap_minutes starts a new one.';

COMMENT ON TABLE episode_memories IS 'Which episode each episodic memory belongs to, in order.';

COMMENT ON TABLE facts IS 'Lifecycle of semantic memories learned as facts: learned, confirmed, superseded, deactivated.';

COMMENT ON TABLE entities IS 'Things triples talk about; identity is case- and space-insensitive.';

COMMENT ON TABLE triples IS 'Subject–predicate–object statements over entities, with provenance.';

COMMENT ON TABLE memory_edges IS 'The memory graph: typed, weighted edges, one per (from, to, relation).';

COMMENT ON TABLE concepts IS 'Concepts, in a hierarchy (parent_id).';

COMMENT ON TABLE memory_concepts IS 'Memory–concept links with strength.';

COMMENT ON TABLE memory_neighborhoods IS 'Precomputed top-20 associations of each memory (seed 000 §6.3).';

COMMENT ON TABLE neighborhood_queue IS
    'Append-only queue of stale neighborhoods; rows that failed wait with back-off (not_before).';

COMMENT ON TABLE embedding_cache IS 'Embeddings by (model, sha256 of the text).';

COMMENT ON TABLE memory_access_log IS 'Recall hits not yet folded into memories.access_count by the worker.';

COMMENT ON TABLE recall_config IS 'Every weight and knob of recall, in one place. UPDATE to tune.';

COMMENT ON TABLE lexicon IS 'Document frequency of each lexeme, for BM25 (refresh_lexicon()).';

COMMENT ON TABLE worker_status IS 'The maintenance worker''s last pass in this database.';

COMMENT ON FUNCTION embed(text) IS
    'Embedding of a text as vector(384), computed inside the database (dionysus.embedding_provider: '
    'local all-MiniLM-L6-v2, or an OpenAI-compatible http endpoint). Cached by content hash.';

COMMENT ON FUNCTION embed_batch(text[]) IS
    'Embeddings of many texts in one call (batched forward passes), with their 1-based position.';

COMMENT ON FUNCTION embed_real IS 'embed() as real[]: for clients without the vector type.';

COMMENT ON FUNCTION embed_batch_real IS 'embed_batch() as real[] rows.';

COMMENT ON FUNCTION embedding_info IS
    'The embedding provider in use, its model and whether it loads: for diagnostics (dionysus doctor).';

COMMENT ON FUNCTION remember IS
    'Stores a memory from plain text and returns its id. type: episodic (default), semantic, procedural, '
    'strategic. importance and confidence in [0,1], valence in [-1,1], metadata a JSON object, source names '
    'the conversation or channel (episodic memories of one source form episodes), created_at defaults to '
    'now() and may be set for imported history (finite, from 1900-01-01 to a day after now()); summary and micro are '
    'shorter detail levels; private_to lists the people whose private words it holds (person keys; NULL: nobody''s).';

COMMENT ON FUNCTION remember_batch IS
    'Stores a JSON array of memories (objects with the keys of remember) in one statement, embedding them '
    'in batches. Returns (ord, memory_id) in input order. One bad element rejects the whole batch.';

COMMENT ON FUNCTION learn IS
    'Learns a fact (a semantic memory). If an active fact is at least 0.95 similar it is confirmed instead '
    '(state confirmed, confirmations + 1, confidence raised) and its id returned.';

COMMENT ON FUNCTION supersede IS
    'Replaces a memory with new content: the old one becomes superseded and points to the new one, '
    'whose id is returned. A superseded fact hands on its subject and category.';

COMMENT ON FUNCTION archive IS 'Archives a memory: recall stops returning it; a fact becomes deactivated.';

COMMENT ON FUNCTION forget IS 'Deletes a memory with its edges, links and episode membership.';

COMMENT ON FUNCTION connect IS
    'Adds or updates a typed, weighted edge between two memories (relation: TEMPORAL_NEXT, CAUSES, '
    'DERIVED_FROM, CONTRADICTS, SUPPORTS, INSTANCE_OF, PARENT_OF, ASSOCIATED). Returns true if new.';

COMMENT ON FUNCTION add_triple IS
    'Records subject–predicate–object over entities (created as needed). The same triple again updates '
    'confidence (the higher wins) and provenance. Returns the triple id.';

COMMENT ON FUNCTION triples_about IS
    'Triples where the named entity is subject or object; with person, only those that person may see.';

COMMENT ON FUNCTION link_concept IS
    'Links a memory to a concept by name (created if new, optionally under a parent concept).';

COMMENT ON FUNCTION open_episode IS
    'Opens an episode for a source explicitly (closing the open one); it stays open until close_episode.';

COMMENT ON FUNCTION close_episode IS 'Closes an open episode.';

COMMENT ON FUNCTION recall IS
    'Hybrid recall of the k memories most relevant to a text: HNSW vector and BM25 lexical seeds, expanded '
    'through neighborhoods, graph edges and episode-adjacent turns, weighted by importance and recency '
    '(weights in dionysus.recall_config). Filters: types, since/until, min_importance, episode_id, and person '
    '(only what that person may see: nothing private to someone else). Returns each score component and found_by, '
    'the channel that found the memory.';

COMMENT ON FUNCTION recall_recent IS 'The k most recent active memories, optionally of some types or one source.';

COMMENT ON FUNCTION recall_by_id IS 'One memory with every field (access counts include the unfolded log).';

COMMENT ON FUNCTION recompute_neighborhoods IS
    'Recomputes up to batch (at most 10000) stale neighborhoods now and returns how many; the worker does this on its own.';

COMMENT ON FUNCTION refresh_lexicon IS 'Recounts lexeme document frequencies for BM25; returns the memories counted.';

COMMENT ON FUNCTION run_maintenance IS
    'One maintenance pass in this session: up to 5000 neighborhoods, the access log, the lexicon (retention is prune_history(), '
    'which the worker runs and the driver''s role may not). '
    'Returns a summary with neighborhoods_remaining: call again while it is above zero.';

COMMENT ON TABLE heartbeat_config IS
    'Energy parameters, action costs (cost_<action>), goal limits, cooldown and timeouts (seed 000 §2.2, §2.4). '
    'Values must be finite and >= 0.';

COMMENT ON TABLE heartbeat_state IS 'The single heartbeat state row: energy, count, schedule, session, in-flight heartbeat.';

COMMENT ON TABLE energy_ledger IS 'Every change of energy, with the heartbeat and action it belongs to.';

COMMENT ON TABLE goals IS 'The goal backlog (seed 000 §4): active, queued, backburner, completed, abandoned.';

COMMENT ON TABLE goal_memory_links IS 'Goal–memory links: origin, progress, completion, blocker.';

COMMENT ON TABLE identity_aspects IS 'Who the agent takes itself to be, with confidence (written by reflect).';

COMMENT ON TABLE worldview_beliefs IS 'What the agent believes about the world, with confidence (written by reflect).';

COMMENT ON TABLE memory_changes IS 'What the maintain action changed: each judgement with the state before and after, and why.';

COMMENT ON TABLE heartbeat_log IS 'One row per heartbeat (§7.3): energy, snapshots, decision, actions with cost and result, narrative.';

COMMENT ON TABLE work_queue IS 'Actions for the driver (LLM or network), claimed with SKIP LOCKED, each with an idempotency key.';

COMMENT ON TABLE outbox IS 'Messages for the person (or public, after approval) that the driver delivers: pending → sent/failed.';

COMMENT ON FUNCTION get_action_cost(text) IS 'Energy cost of an action (heartbeat_config.cost_<action>); unknown actions are an error.';

COMMENT ON FUNCTION get_current_energy() IS 'The energy available now.';

COMMENT ON FUNCTION update_energy(double precision, uuid, text, text) IS
    'Adds delta to the energy, clamped to [min_energy, max_energy] under the state row''s lock; writes the ledger. Returns the new energy.';

COMMENT ON FUNCTION heartbeat_begin() IS
    'Starts a heartbeat (or returns the one in flight): regenerates energy, observes, orients, and returns the whole '
    'context as jsonb: energy, environment, goal review, recent memories, activated themes, identity, worldview, '
    'action costs and warnings.';

COMMENT ON FUNCTION heartbeat_commit IS
    'Applies a decision {reasoning, actions[{action, params}], goal_changes[{goal_id, change, note}]} to the heartbeat in '
    'flight: each action validated against its schema, walked in order within the energy available, database actions '
    'done now, the others queued for the driver (only those in available_actions, when given); rejections recorded with '
    'their reason. One commit per heartbeat.';

COMMENT ON FUNCTION action_schema() IS
    'The action taxonomy (seed 000 §3) as jsonb: for each action its performer (database or driver) and its parameters '
    '(kind, required). heartbeat_commit validates against it; the driver builds its prompt from it.';

COMMENT ON FUNCTION heartbeat_finish(uuid, text, double precision) IS
    'Records a committed heartbeat: the narrative becomes an episodic memory linked to the goals touched, and the log row is completed.';

COMMENT ON FUNCTION heartbeat_default_decision() IS 'The fallback decision of §9.6 (reflect, then rest) for when the LLM fails.';

COMMENT ON FUNCTION review_goals() IS
    'The goal assessment of §4.4: active, queued, blocked, stale, promotion candidates, whether to brainstorm, a promotion to suggest.';

COMMENT ON FUNCTION create_goal IS
    'Adds a goal. Default priority by source (user_request → active, derived → the parent''s, else queued); over the '
    'limits a goal is demoted one level, never dropped (a user''s request displaces the stalest active goal).';

COMMENT ON FUNCTION change_goal_priority(uuid, text, text) IS
    'Moves a goal: backburner ↔ queued ↔ active, active → completed, any open goal → abandoned (with a reason). '
    'A parent completes when all its children have.';

COMMENT ON FUNCTION add_goal_progress(uuid, text, uuid) IS 'Appends a progress note (and optionally links a memory); touches the goal.';

COMMENT ON FUNCTION set_goal_blockers(uuid, jsonb) IS 'Sets what blocks a goal: goal ids (resolved when they complete) or free texts.';

COMMENT ON FUNCTION link_goal_memory(uuid, uuid, text) IS 'Links a goal and a memory (origin, progress, completion, blocker).';

COMMENT ON FUNCTION claim_work(text, text[], integer, uuid) IS
    'Claims up to max_items available work items (optionally of some actions, or of one heartbeat) for a worker, with a lease; '
    'expired leases return to the queue.';

COMMENT ON FUNCTION dionysus_internal.claim_rows(text, uuid[]) IS
    'Marks the given pending items claimed by a worker, with a lease and a new lease_token (used by claim_work and claim_work_item).';

COMMENT ON FUNCTION claim_work_item(uuid, text) IS
    'Claims one known pending item whatever its available_at (the conversation extracting its own turn); no row when it is not pending.';

COMMENT ON FUNCTION release_work(uuid, text, integer, uuid) IS
    'Hands a claimed item back without spending an attempt (the driver could not work on it: LLM down, shutting down); '
    'claimable again after delay_seconds. With lease (the claim''s lease_token), only its holder may.';

COMMENT ON FUNCTION dionysus_internal.expire_work_leases() IS
    'Returns items whose lease ran out to the queue (or fails them when their attempts are spent, refunding their energy).';

COMMENT ON FUNCTION complete_work(uuid, jsonb, uuid) IS
    'Applies a claimed work item''s result (memories, facts, triples, goals, goal_progress, identity, worldview, concepts, '
    'episode_summary, message, summary; basis: the memory ids the model was shown; person: whom a reach-out is for; objectives: the person''s, '
    'from their turn''s extraction; dream: a dream''s proposals, stored pending) and marks it done, '
    'in one transaction. What it writes is as private as the item''s person, its heartbeat''s context and the basis; what an inquiry '
    'brought is stored as web content; a reach-out that drew on someone else''s private words, or only on the web, is refused (42501). '
    'Completing again returns the first summary and repeats nothing. With lease (the claim''s lease_token), only its holder may: '
    'a driver whose lease lapsed and whose item was claimed again gets 55000.';

COMMENT ON FUNCTION fail_work(uuid, text, boolean, uuid) IS
    'Fails a claimed work item: back to pending after an exponential back-off while attempts remain, else failed for good and '
    'the energy its heartbeat spent on it refunded. With lease, only its holder may.';

COMMENT ON FUNCTION pending_outbox(integer) IS 'Messages ready to deliver (public ones only once approved).';

COMMENT ON FUNCTION mark_outbox_sent(uuid, text) IS
    'Marks a message delivered, exactly once (by hand; the driver uses reserve_outbox / confirm_outbox).';

COMMENT ON FUNCTION mark_outbox_failed(uuid, text, boolean) IS 'Records a failed delivery; the message stays pending until 5 attempts.';

COMMENT ON FUNCTION approve_outbox(uuid) IS 'A human''s approval of a public message.';

COMMENT ON FUNCTION dionysus_internal.outbox_lease() IS 'How long a reservation of an outbox message lasts (heartbeat_config.outbox_lease_seconds).';

COMMENT ON FUNCTION reserve_outbox(text, text, integer) IS
    'Reserves up to max_items deliverable messages of a platform for a worker (a lease, committed at once; nothing stays locked '
    'while the platform is called). Reservations that lapsed are taken again.';

COMMENT ON FUNCTION dionysus_internal.require_reserved_outbox(uuid, text) IS 'The outbox row, locked, unsent and still reserved by this worker; otherwise 55000 saying why.';

COMMENT ON FUNCTION outbox_part_sent(uuid, text, integer, text) IS
    'Records that part N (from 0, in order) of a message was delivered, with its platform id; a repeat is a no-op. Renews the lease.';

COMMENT ON FUNCTION confirm_outbox(uuid, text, text, text) IS
    'Every part is out: logs the bot''s turn in the channel it went to and marks the message sent, in one transaction; a reach-out '
    'starts the contact cooldown now. Returns the logged message''s id.';

COMMENT ON FUNCTION release_outbox(uuid, text, text, boolean) IS
    'Hands a reserved message back: unavailable channel, no attempt spent; rejected by the platform, an attempt spent (the fifth fails it).';

COMMENT ON FUNCTION maintain_target(text, uuid) IS
    'The maintain action''s target (§3.2.3) with its evidence: memory_id, else the belief or identity aspect named by target, else the '
    'memory recall finds for it; with neither, the least confident belief or the oldest unconfirmed fact. NULL when there is nothing.';

COMMENT ON FUNCTION dionysus_internal.apply_maintenance(jsonb, uuid, uuid) IS
    'Applies a maintain verdict {kind, id, verdict keep|update|retire, confidence, content, reason} and records it in memory_changes: '
    'a memory''s new wording supersedes it, a retired belief or aspect is removed, a new text resting on the web alone is refused.';

COMMENT ON FUNCTION dionysus_internal.refund_work(uuid) IS 'Gives back, once, the energy a heartbeat spent on an action that failed for good.';

COMMENT ON FUNCTION dionysus_internal.require_claimed_work(uuid, uuid) IS
    'The work item, locked; with a lease, the caller must still hold it (an item claimed again since is someone else''s: 55000).';

COMMENT ON FUNCTION heartbeat_touch(uuid) IS
    'The driver''s sign of life while it works on a heartbeat; returns its status (''recovered'': the scheduler closed it after silence, stop).';

COMMENT ON FUNCTION dionysus_internal.recover_stalled_heartbeats() IS
    'Closes heartbeats whose driver fell silent for heartbeat_timeout_minutes, each in its own subtransaction (one that fails is closed by force, with its reason).';

COMMENT ON FUNCTION session_start() IS 'The person is talking: heartbeats pause.';

COMMENT ON FUNCTION note_user_message() IS 'The person spoke (ends the reach-out cooldown).';

COMMENT ON FUNCTION session_end(boolean) IS 'The conversation ended; a significant one requests an immediate heartbeat.';

COMMENT ON FUNCTION request_heartbeat(text) IS 'Asks for a heartbeat now (the scheduler notifies the driver).';

COMMENT ON FUNCTION pause_heartbeats(boolean) IS 'Pauses or resumes scheduled heartbeats.';

COMMENT ON FUNCTION heartbeat_due() IS 'Whether a heartbeat is due: not paused, no session, none in flight, and requested or past its time.';

COMMENT ON FUNCTION scheduler_tick() IS
    'What the scheduler worker does each tick: closes stalled heartbeats with the fallback, ends an idle session, queues '
    'language work, and NOTIFYs dionysus_heartbeat when one is due, dionysus_work / dionysus_outbox while items wait.';

COMMENT ON FUNCTION heartbeat_warnings() IS 'Warnings of §9: hoarding, reach-out spam, stagnation, loops.';

COMMENT ON VIEW heartbeat_health IS
    'Appendix A: heartbeats, energy, goals, reach-outs; plus queue depth, oldest pending work, outbox backlog, warnings and the tables'' sizes in bytes.';

COMMENT ON FUNCTION prune_history(integer) IS
    'Retention: deletes, at most batch rows per table, ledger entries, finished heartbeats, finished work, sent messages of the outbox, '
    'access-log rows and cache entries older than heartbeat_config.retention_days (90). Never the message log or memories. '
    'The maintenance pass calls it; returns the counts.';

COMMENT ON FUNCTION dionysus_internal.table_bytes(text[]) IS 'Total sizes (with indexes and TOAST) of the named dionysus tables, in bytes.';

COMMENT ON FUNCTION action_costs() IS 'The cost of every action (heartbeat_config.cost_<action>) as a jsonb object, cheapest first.';

COMMENT ON FUNCTION activated_themes(integer) IS
    'Themes recall touched in the last day: the concepts of recently recalled memories, else the memories themselves (for the heartbeat context).';

COMMENT ON FUNCTION dionysus_internal.check_self_model(text, text, double precision) IS
    'Internal: the shared checks of set_identity_aspect and set_worldview_belief (a statement, a confidence in [0, 1]).';

COMMENT ON FUNCTION dionysus_internal.complete_parent_goals(uuid) IS 'Internal: completes a goal''s parents, up the hierarchy, once all their children are completed (§4.6).';

COMMENT ON FUNCTION dionysus_internal.enforce_goal_limits(uuid) IS
    'Internal: keeps the goal limits (max_active_goals, max_queued_goals) by demoting the least recently touched overflow one level, never keep.';

COMMENT ON FUNCTION dionysus_internal.goal_brief(dionysus.goals) IS 'Internal: a goal as the heartbeat context shows it (with its last progress and open blockers).';

COMMENT ON FUNCTION dionysus_internal.goal_level(dionysus.goal_priority) IS 'Internal: the rank of a priority (active 3, queued 2, backburner 1, closed 0).';

COMMENT ON FUNCTION dionysus_internal.goal_open_blockers(dionysus.goals) IS 'Internal: a goal''s unresolved blockers: free texts, and ids of goals not completed.';

COMMENT ON FUNCTION dionysus_internal.heartbeat_config_check() IS 'Trigger: heartbeat_config values must be finite numbers >= 0 (carry_over within [0, 1]).';

COMMENT ON FUNCTION dionysus_internal.heartbeat_interval_minutes() IS 'The time between heartbeats in minutes (the dionysus.heartbeat_interval setting, default 60).';

COMMENT ON FUNCTION heartbeat_observe() IS 'The environment a heartbeat observes (§5.1): time, the person''s presence and silence, pending work, system status.';

COMMENT ON FUNCTION dionysus_internal.heartbeat_setting(text) IS 'One value of heartbeat_config; an unknown key is an error naming it.';

COMMENT ON FUNCTION dionysus_internal.messages_immutable() IS 'Trigger: the message log is immutable (only links that deletions clear may change).';

COMMENT ON FUNCTION dionysus_internal.require_goal(uuid, text) IS 'Internal: the goal, locked, or an error naming the argument.';

COMMENT ON FUNCTION dionysus_internal.require_outbox(uuid) IS 'Internal: the outbox message, locked, or an error naming outbox_id.';

COMMENT ON FUNCTION set_identity_aspect(text, double precision) IS
    'Adds an identity aspect (who the agent takes itself to be), or updates its confidence; returns its id (reflect writes these).';

COMMENT ON FUNCTION set_worldview_belief(text, double precision) IS
    'Adds a worldview belief, or updates its confidence; returns its id (reflect writes these).';

COMMENT ON VIEW active_goals IS 'Active goals, most recently touched first.';

COMMENT ON VIEW goal_backlog IS 'Open goals by priority.';

COMMENT ON TABLE messages IS
    'The immutable message log (seed 004 raw_messages): every turn once per (platform, platform_message_id), chained to the '
    'previous turn of its channel, with the episodic memory it became.';

COMMENT ON TABLE prompt_templates IS
    'Versioned prompt templates with {{placeholders}}, one active version per key; set_prompt_template() adds a version.';

COMMENT ON FUNCTION log_message(text, text, text, text, text, boolean, boolean, uuid, text) IS
    'Logs one turn in one transaction: deduplicated by the platform''s message id, chained, remembered as an episodic memory '
    'private to the turn''s person (the author of a person''s turn; for the bot''s, person or the author of reply_to); '
    'a person''s turn also starts the session and queues its extraction. Returns {message_id, duplicate, prev_message_id, memory_id, work_id, person}.';

COMMENT ON FUNCTION chat_context(uuid, integer, integer, boolean) IS
    'Everything a reply needs: the last turns of the channel, recalled memories (turns in view left out; facts marked), '
    'triples about the entities named and the person, the active goals, the person''s north stars and objectives; only what the message''s person may see. '
    'With use_archetype, the nearest context archetype sets the turns, memories, similarity threshold and triple depth (reported as archetype), '
    'within max_memories and max_turns (which alone apply when no archetype is near enough).';

COMMENT ON FUNCTION queue_reply(uuid, text, text) IS
    'The reply to a person''s message, in the outbox and reserved for the worker that sends it (reserve → send → confirm). One reply '
    'per message: asked again it returns the reply already queued (re-reserved for the caller when nobody else holds it); with '
    'content NULL it only looks for that reply.';

COMMENT ON FUNCTION prompt_template(text) IS 'The active version of a prompt template: {key, version, template, temperature}.';

COMMENT ON FUNCTION set_prompt_template(text, text, double precision, text) IS
    'Adds a new active version of a prompt template (the previous stays, inactive); returns the version number.';

COMMENT ON FUNCTION end_idle_session() IS
    'Ends the session when the person has been silent for session_idle_minutes; with significant_session_turns or more of '
    'their turns it requests a heartbeat. Returns whether it ended one.';

COMMENT ON FUNCTION enqueue_language_work() IS
    'Queues the worker''s language jobs for the driver (seed 000 §6.4–6.5): summaries of closed episodes, concepts of young memories. '
    'Closes episodes left open past the gap first. Returns how many were queued.';

COMMENT ON FUNCTION episode_transcript(uuid) IS 'An episode''s memories in order, for its summary.';

COMMENT ON FUNCTION person_key(text, text) IS 'The key of a person on a platform, ''platform:author_id'': what private_to lists.';

COMMENT ON FUNCTION dionysus_internal.visible_to(text[], text) IS
    'Whether a person may see something private to private_to: it is private to nobody, or to nobody but them.';

COMMENT ON FUNCTION dionysus_internal.privacy_union(text[], text[]) IS 'The privacy of something made of two things: the people of both, sorted; NULL if neither is private.';

COMMENT ON FUNCTION dionysus_internal.memory_privacy(uuid[]) IS 'The people whose private words these memories hold (what is made from them is as private).';

COMMENT ON FUNCTION dionysus_internal.web_only_basis(text) IS
    'True when the active memories closest to a text (five nearest, similarity >= 0.5) exist and all came from the web: '
    'identity, worldview and reach-outs resting on it alone are refused.';

COMMENT ON FUNCTION reach_out_target(text) IS
    'Whom a reach-out goes to: the named person (who must have talked here), else whoever wrote last; {person, platform, author_id}.';

COMMENT ON FUNCTION known_people() IS 'The people who talk with Dionysus, most recent first (for the heartbeat''s context).';

COMMENT ON TABLE clock IS 'The one clock of the proactive mind: frozen_at set, time stands there (tests replay days by advancing it); NULL, it is now().';

COMMENT ON TABLE proactive_config IS 'Every rate, threshold and limit of the proactive mind, as data (UPDATE to tune).';

COMMENT ON TABLE contact_weights IS 'The neuron of contact: pressure = sum of weight × input (social debt, acquaintance, task pressure, curiosity).';

COMMENT ON TABLE personality IS 'Traits in [0, 1] that change behaviour (thresholds, back-off, curiosity) and the composer''s voice; they move very slowly.';

COMMENT ON TABLE agent_state IS 'The agent''s own state: vitality (0–1, not the heartbeat''s energy), mode, disturbance, and its dynamic tick.';

COMMENT ON TABLE people IS 'Each person as the proactive mind sees them: social debt, curiosity, task pressure, restraint, mood, contact history, a contact their rule asked for, the check-in cadence.';

COMMENT ON TABLE person_rhythm IS 'When a person writes, by hour of their week (decayed counts): the belief about when they are available.';

COMMENT ON TABLE person_signals IS 'What a person said about contact (busy, asleep, away, stop checking in), held until it expires or they write again.';

COMMENT ON TABLE events IS 'The event queue (CRITICAL 0 … IDLE 4): merged, dropped under load, filtered while the agent rests, processed by the tick.';

COMMENT ON TABLE event_counters IS 'Events that never reached processing, by why (merged, dropped by age, dropped by overload, filtered) and priority.';

COMMENT ON TABLE event_patterns IS 'Pattern accumulation: this many events of a type within the window become one HIGH event.';

COMMENT ON TABLE contact_evaluations IS 'Every evaluation of contact with its inputs, weights, contributions, threshold, gates, outcome and decision: why Dionysus wrote, or did not.';

COMMENT ON VIEW proactive_health IS 'The proactive mind at a glance: mode, vitality, pressure, tick, queued and lost events, waiting crossings, the last evaluation.';

COMMENT ON FUNCTION clock_now() IS 'The proactive mind''s time: the frozen test clock if set, else now().';

COMMENT ON FUNCTION set_clock(timestamptz) IS 'Freezes the clock at an instant (NULL: real time again). For tests and replays; not granted to the driver.';

COMMENT ON FUNCTION advance_clock(interval) IS 'Moves the clock forward (freezing it at now() first if it ran in real time); returns the new time. Not granted to the driver.';

COMMENT ON FUNCTION is_acknowledgement(text) IS 'True for a message that only acknowledges ("ok", "thanks", "👍"): it needs no reply and no model.';

COMMENT ON FUNCTION push_event(text, text, integer, jsonb, text, text) IS
    'Queues an event (source communication/thoughts/internal/time, a type, priority 0 CRITICAL … 4 IDLE): the same again within 5 s is merged; patterns are hoisted; HIGH and CRITICAL bring the next tick forward.';

COMMENT ON FUNCTION explain_contact(text, integer) IS
    'Why Dionysus wrote or did not: the latest evaluations (of one person, or anyone), each with its inputs, weights, contributions, threshold, gates and decision.';

COMMENT ON FUNCTION proactive_tick() IS
    'One tick of the proactive mind: scheduled events released, the hour''s time events, events dropped, filtered or processed (with their rules), vitality and disturbance, the tick rules moving each person''s state, contact evaluated where the cadence is due, the next interval computed. The scheduler calls it when due.';

COMMENT ON FUNCTION contact_opportunity(uuid) IS 'What the thinking layer needs at a crossing: the explanation, the person''s own recent turns, their open requests, the personality.';

COMMENT ON FUNCTION decide_contact(uuid, text, text, text, text) IS
    'The thinking layer''s answer to a crossing: wait (the check-in interval backs off) or message (gates checked again, energy spent, the message queued for the person exactly once). Idempotent.';

COMMENT ON FUNCTION set_person_time_zone(text, text) IS 'The person''s time zone (an IANA name): their quiet hours and rhythm are in their local time.';

COMMENT ON FUNCTION dionysus_internal.proactive_setting(text) IS 'One value of proactive_config; an unknown key is an error naming it.';

COMMENT ON FUNCTION dionysus_internal.trait(text) IS 'A personality trait''s value (0.5 if unknown).';

COMMENT ON FUNCTION dionysus_internal.priority_name(smallint) IS 'CRITICAL, HIGH, NORMAL, LOW or IDLE.';

COMMENT ON FUNCTION dionysus_internal.count_event(text, smallint, bigint) IS 'Counts events that did not reach processing.';

COMMENT ON FUNCTION dionysus_internal.person_row(text) IS 'The person''s row, created on first sight, locked.';

COMMENT ON FUNCTION dionysus_internal.hour_of_week(timestamptz, text) IS 'Hour of the week (Monday 00:00 = 0) of an instant in a time zone.';

COMMENT ON FUNCTION dionysus_internal.availability(text, timestamptz) IS
    'The belief that a person is available at an instant: their learned rhythm blended with the day/night prior by the confidence in it.';

COMMENT ON FUNCTION dionysus_internal.contact_signal(text, timestamptz, text) IS 'The person''s own word about contact in a message (busy, asleep, away, stop checking in) and when it ends.';

COMMENT ON FUNCTION dionysus_internal.note_person_message(text, uuid, text) IS 'A person wrote: rhythm, signals, social debt, an answered contact, the check-in cadence reset.';

COMMENT ON FUNCTION dionysus_internal.evaluate_contact(text) IS 'One evaluation of contact with one person, written to contact_evaluations; NOTIFY dionysus_contact at a crossing.';

COMMENT ON FUNCTION dionysus_internal.note_miss(text, timestamptz, double precision) IS 'A contact at that hour of the person''s week went unanswered (1) or was answered late (0.5): less availability believed there.';

COMMENT ON FUNCTION dionysus_internal.proactive_config_check() IS 'Trigger: proactive_config values within their ranges (shares in [0, 1], time constants above 0, whole hours).';

COMMENT ON FUNCTION dionysus_internal.proactive_tick_due() IS 'Whether the proactive tick''s interval is up.';

COMMENT ON FUNCTION dionysus_internal.note_contact_delivered(text) IS 'A contact Dionysus started reached the person: awaiting their reply (unless they asked for it), social debt relieved.';

COMMENT ON TABLE mind_rules IS 'Rules as data: trigger (event type or tick), a declarative condition over named values, intents (adjust, create_objective, schedule_event, request_contact), weight and use; built-in, the person''s own, or learned (those strengthen with use, decay unused, are forgotten).';

COMMENT ON TABLE rule_firings IS 'Every rule pass that fired: the values the conditions read, and what each rule changed or made.';

COMMENT ON TABLE learning_log IS 'Every change learned from how a person answered or ignored a contact (timing, topic weight, personality), with before, after and cause.';

COMMENT ON TABLE person_contact_weights IS 'What a person''s answers taught about each reason to write to them: a factor in [0.5, 1.5] on the global contact weight.';

COMMENT ON FUNCTION rule_vocabulary() IS 'Everything a rule may use: triggers, values a condition reads, operators, the condition grammar and the intents. The fast model is given this; add_rule accepts nothing else.';

COMMENT ON FUNCTION add_rule(text, text, jsonb) IS
    'A rule in the person''s words (as the fast model proposed it: name, trigger, condition, intents): checked against rule_vocabulary(), stored as theirs, acting only on them. Errors name the part that is wrong.';

COMMENT ON FUNCTION person_rules(text) IS 'A person''s rules (active, forgotten) and the built-ins that apply to everyone, with weight and use.';

COMMENT ON FUNCTION remove_rule(text, bigint) IS 'The person takes one of their own rules back; false if it is not theirs or not active.';

COMMENT ON FUNCTION contact_feedback(uuid, text, text) IS 'The fast model''s reading (positive, neutral, negative) of a reply the cues could not judge; learned from once.';

COMMENT ON FUNCTION explain_learning(text, integer) IS 'What the proactive mind learned from answers and silences, newest first: what moved, from what to what, and why.';

COMMENT ON FUNCTION dionysus_internal.check_rule_condition(jsonb, text, integer) IS 'Checks a rule condition against the grammar and vocabulary (at most 32 parts, 6 deep); errors name the path.';

COMMENT ON FUNCTION dionysus_internal.check_rule_intents(jsonb) IS 'Checks a rule''s intents (1 to 8, each adjust, create_objective, schedule_event or request_contact with its bounds); errors name the intent.';

COMMENT ON FUNCTION dionysus_internal.rule_holds(jsonb, jsonb) IS 'Whether a checked condition holds for the values (an unknown value makes its comparison false).';

COMMENT ON FUNCTION dionysus_internal.rule_values(text, timestamptz, dionysus.events) IS 'The values rules read for one person (or none) at an instant.';

COMMENT ON FUNCTION dionysus_internal.run_rules(text, text, double precision, dionysus.events) IS
    'Runs the active rules of a trigger for a person: conditions read once, intents applied in a fixed order (adjust, create_objective, schedule_event, request_contact), the pass logged, learned rules strengthened.';

COMMENT ON FUNCTION dionysus_internal.decay_rules() IS 'Learned rules unused for a day lose weight; below rule_forget_below they are forgotten.';

COMMENT ON FUNCTION dionysus_internal.message_tone(text) IS 'The tone of a message in [-1, 1] from cheap cues (warm or cold words, emoji, exclamation).';

COMMENT ON FUNCTION dionysus_internal.reply_signal(text, double precision, double precision) IS 'How good a reply to a contact was (latency, length, tone) in [-1, 1], and whether the cues were too mixed to tell.';

COMMENT ON FUNCTION dionysus_internal.learn_from_contact(text, uuid, timestamptz, double precision, text) IS
    'Learns from one answered or ignored contact: its hour (fast), the reason it was sent for (moderate), shyness, independence and patience (very slow); every change logged.';

COMMENT ON FUNCTION dionysus_internal.evaluate_requested_contact(dionysus.people) IS 'Weighs a contact the person''s own rule asked for: their word, one at a time, a daily limit; lapses when it cannot go out in time.';

COMMENT ON FUNCTION note_reaction(text, text, text, text) IS
    'A person reacted to a message Dionysus sent them: an event, and on a contact still waiting, its answer (learned from by the emoji''s tone, no reply, no model). Reactions to messages sent to others are ignored.';

COMMENT ON FUNCTION dionysus_internal.mind_rules_check() IS 'Trigger: a rule''s condition and intents are checked however they arrive.';

COMMENT ON FUNCTION dionysus_internal.require_own_memory(text, uuid) IS
    'Refuses (42501) a memory that is not the person''s own (private to them alone), without saying whether it exists.';

COMMENT ON FUNCTION forget_own(text, uuid) IS
    'Other agents (MCP): deletes one of the person''s own memories for good. Shared memories and other people''s are refused (42501). Runs with the extension owner''s rights; the driver''s role may call it, PUBLIC may not.';

COMMENT ON FUNCTION supersede_own(text, uuid, text, double precision, double precision, text) IS
    'Other agents (MCP): replaces one of the person''s own memories with what is true now (supersede); others'' and shared ones are refused (42501).';

COMMENT ON FUNCTION person_goals(text, integer) IS 'The companion''s active, queued and back-burner goals this person may see, the most pressing first.';

COMMENT ON FUNCTION person_status(text) IS
    'How the companion is doing as one person may see it: energy, heartbeats, their open goals, the memories they may see and own.';

COMMENT ON TABLE cue_phrases IS 'Cheap recognition before any model: regular expressions (case-insensitive) for an explicit north star and for phrases that may declare one.';

COMMENT ON TABLE north_stars IS 'What matters most to each person: protected facts (never decayed, superseded or deleted by anything automatic), retired only by their word.';

COMMENT ON TABLE feedback IS 'Invisible feedback: a person''s reply to one of Dionysus''s messages (or a command, or a dream item''s button). Never in the message log, never answered.';

COMMENT ON TABLE objectives IS 'The person''s objectives (seed 004): what they are working toward, extracted from their turns; theirs, not Dionysus''s goals.';

COMMENT ON TABLE context_archetypes IS 'Kinds of message and the context shape each selects (turns, memories, similarity threshold, triple depth); the centroid of the examples is computed in the database.';

COMMENT ON TABLE dreams IS 'One nightly dream per local date: what it reviewed since, and what it found.';

COMMENT ON TABLE proposals IS 'What a dream proposes about Dionysus itself (a template, the extraction, an archetype), pending until the person approves or rejects it.';

COMMENT ON FUNCTION dionysus_internal.cue_phrase_check() IS 'Trigger: a cue phrase must be a valid regular expression (22023 otherwise).';

COMMENT ON FUNCTION dionysus_internal.protect_north_star() IS 'Trigger: the memory of a north star is not updated, archived, superseded or deleted except by retire_north_star (the person''s word).';

COMMENT ON FUNCTION north_star_cue(text) IS '''explicit'' for a north star with its prefix ("North star: …"), ''maybe'' for a cue phrase (the fast model decides), else NULL.';

COMMENT ON FUNCTION set_north_star(text, text, uuid) IS
    'Stores a person''s north star (prefix taken off) as a protected fact private to them; the same words twice are one. Returns {north_star_id, memory_id, content, duplicate, ack}.';

COMMENT ON FUNCTION retire_north_star(text, uuid) IS 'The person''s word: one of their north stars is retired and its memory archived; false if it is not theirs or not active.';

COMMENT ON FUNCTION person_north_stars(text) IS 'A person''s active north stars, oldest first.';

COMMENT ON FUNCTION give_feedback(text, text, text, text, text, text, text) IS
    'Stores invisible feedback about one of Dionysus''s messages to this person (about: its platform id; NULL: the last one), idempotent per carrying message. '
    'A message sent to someone else is refused (stored: false). Never touches the message log.';

COMMENT ON FUNCTION undo_feedback(text, text, text) IS 'Takes back the person''s feedback carried by that message of theirs (NULL: their latest).';

COMMENT ON FUNCTION dionysus_internal.note_objective(text, text, double precision, text, uuid) IS
    'One objective from an extraction: the same objective said again (cosine ≥ 0.85) updates saliency and status instead of adding a second.';

COMMENT ON FUNCTION person_objectives(text, boolean) IS 'A person''s pending objectives, most salient first (include_done: the completed too).';

COMMENT ON FUNCTION set_objective_status(text, uuid, text) IS 'The person marks one of their objectives pending, completed or archived; false if it is not theirs.';

COMMENT ON FUNCTION dionysus_internal.invalidate_centroid() IS 'Trigger: an archetype''s centroid is forgotten when its examples change (recomputed at the next match).';

COMMENT ON FUNCTION dionysus_internal.archetype_centroid(text[]) IS 'The mean embedding of an archetype''s example messages.';

COMMENT ON FUNCTION match_archetype(vector) IS
    'The active archetype nearest a message''s embedding with its context shape, when at least archetype_min_similarity near (else only the nearest name); counts the match unless on a standby.';

COMMENT ON FUNCTION dionysus_internal.schedule_dream() IS 'Queues tonight''s dream (a dream work item) once per local date after dream_hour, in the time zone of whoever wrote last.';

COMMENT ON FUNCTION dream_evidence(uuid) IS
    'What a dream reviews: feedback since the last dream, reply and contact signals, corrections, the templates and archetypes it may change.';

COMMENT ON FUNCTION dionysus_internal.check_proposal(text, text, jsonb) IS 'A proposal''s kind, target and content are checked (22023 naming the part) before it is stored or applied.';

COMMENT ON FUNCTION dionysus_internal.record_dream(uuid, jsonb) IS 'Stores a dream''s proposals as pending (NOTIFY dionysus_dream each), or its note that nothing is worth proposing.';

COMMENT ON FUNCTION pending_proposals() IS 'Proposals waiting for the person (pending or under discussion), oldest first.';

COMMENT ON FUNCTION approve_proposal(uuid, text) IS
    'The person''s approval: a template proposal becomes the template''s new active version, an archetype is added or retuned. The only way a dream changes anything.';

COMMENT ON FUNCTION reject_proposal(uuid, text, text, boolean) IS 'The person rejects a proposal (discuss: keeps it open as under discussion); false if it is no longer open.';

COMMENT ON FUNCTION activate_prompt_template(text, integer) IS 'Makes any stored version of a template the active one: rollback (or forward) in one call.';


-- ---------------------------------------------------------------------------------------
-- The driver's role (least privilege). CREATE EXTENSION creates dionysus_driver (NOLOGIN;
-- give it LOGIN and a password to use it) and grants it what the driver's calls need: both
-- schemas (the API's functions run as their caller, so its internals too), every function,
-- and rows — reading and writing the organs' tables, appending to the message log and the
-- ledger (never rewriting them), reading the configuration and the prompt templates, and clearing the maintenance queues the `maintain` action works off.
-- No DDL, no TRUNCATE, no other schema, nothing outside this database.
-- Roles are cluster-wide: a second database's CREATE EXTENSION reuses the role.
-- ---------------------------------------------------------------------------------------
DO $$
BEGIN
    CREATE ROLE dionysus_driver NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created by another database's CREATE EXTENSION
END $$;
GRANT USAGE ON SCHEMA dionysus, dionysus_internal TO dionysus_driver;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA dionysus, dionysus_internal TO dionysus_driver;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA dionysus TO dionysus_driver;
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA dionysus TO dionysus_driver;
REVOKE INSERT, UPDATE ON heartbeat_config, recall_config, prompt_templates FROM dionysus_driver;
-- What the person tunes (the proactive mind's rates, weights, personality) and the clock.
REVOKE INSERT, UPDATE ON proactive_config, contact_weights, personality, event_patterns, clock FROM dionysus_driver;
REVOKE EXECUTE ON FUNCTION set_clock(timestamptz), advance_clock(interval) FROM PUBLIC, dionysus_driver;
GRANT UPDATE (last_hoisted_at) ON event_patterns TO dionysus_driver; -- a pattern's state, not its definition
REVOKE UPDATE ON messages, energy_ledger, rule_firings, learning_log FROM dionysus_driver;
-- Learning moves a trait's value (slowly, logged, from the person's replies the driver logs);
-- its definition and learning rate stay the person's.
GRANT UPDATE (value) ON personality TO dionysus_driver;
GRANT DELETE ON memory_access_log, neighborhood_queue, lexicon, embedding_cache TO dionysus_driver;
-- Who a memory is private to is fixed when it is written (forget_own relies on it): the
-- driver's role may update a memory's other columns, never private_to.
REVOKE UPDATE ON memories FROM dionysus_driver;
DO $$
BEGIN
    EXECUTE (SELECT format('GRANT UPDATE (%s) ON dionysus.memories TO dionysus_driver', string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum))
               FROM pg_attribute a
              WHERE a.attrelid = 'dionysus.memories'::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attname NOT IN ('id', 'private_to'));
END $$;
-- Invisible feedback can be taken back (undo_feedback); cue phrases are the person's to tune.
GRANT DELETE ON feedback TO dionysus_driver;
REVOKE INSERT, UPDATE ON cue_phrases FROM dionysus_driver;
-- The alignment loop's records: the driver writes what its calls need and nothing the person
-- decides. A proposal's content cannot change after it was shown; archetypes change only by an
-- approval (approve_proposal runs as the owner); a north star only by retiring it.
REVOKE UPDATE ON proposals, north_stars, context_archetypes, dreams FROM dionysus_driver;
REVOKE INSERT ON context_archetypes, dreams FROM dionysus_driver;
GRANT UPDATE (status, decided_at, decided_by, decision_note) ON proposals TO dionysus_driver;
GRANT UPDATE (status, retired_at) ON north_stars TO dionysus_driver;
GRANT UPDATE (centroid, match_count, avg_similarity) ON context_archetypes TO dionysus_driver;
GRANT UPDATE (finished_at, note) ON dreams TO dionysus_driver;
