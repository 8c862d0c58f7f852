-- The alignment loop: north stars, invisible feedback, the
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
    -- A north star declared (explicit) or perhaps (maybe); words that may ask for a censor (022).
    kind    text NOT NULL CHECK (kind IN ('north_star_explicit', 'north_star_maybe', 'censor_maybe')),
    pattern text NOT NULL CHECK (length(btrim(pattern)) > 0),
    note    text,
    PRIMARY KEY (kind, pattern)
);
COMMENT ON TABLE cue_phrases IS 'Cheap recognition before any model: regular expressions (case-insensitive) for an explicit north star and for phrases that may declare one.';
-- A pattern must be a valid case-insensitive regular expression.
CREATE FUNCTION dionysus_internal.cue_phrase_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM '' ~* NEW.pattern;
    RETURN NEW;
EXCEPTION WHEN invalid_regular_expression THEN
    RAISE EXCEPTION 'dionysus: invalid argument "pattern": % is not a valid regular expression', quote_literal(NEW.pattern)
        USING ERRCODE = 'invalid_parameter_value';
END $$;
COMMENT ON FUNCTION dionysus_internal.cue_phrase_check() IS 'Trigger: a cue phrase must be a valid regular expression (22023 otherwise).';
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
COMMENT ON TABLE north_stars IS 'What matters most to each person: protected facts (never decayed, superseded or deleted by anything automatic), retired only by their word.';
CREATE UNIQUE INDEX north_stars_once ON north_stars (person, lower(btrim(content))) WHERE status = 'active';
CREATE INDEX north_stars_person ON north_stars (person) WHERE status = 'active';
-- Its foreign keys, indexed (001).
CREATE INDEX north_stars_memory_id ON north_stars (memory_id);
CREATE INDEX north_stars_origin_message_id ON north_stars (origin_message_id) WHERE origin_message_id IS NOT NULL;

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
COMMENT ON FUNCTION dionysus_internal.protect_north_star() IS 'Trigger: the memory of a north star is not updated, archived, superseded or deleted except by retire_north_star (the person''s word).';
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
COMMENT ON FUNCTION north_star_cue(text) IS '''explicit'' for a north star with its prefix ("North star: …"), ''maybe'' for a cue phrase (the fast model decides), else NULL.';

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
COMMENT ON FUNCTION set_north_star(text, text, uuid) IS
    'Stores a person''s north star (prefix taken off) as a protected fact private to them; the same words twice are one. Returns {north_star_id, memory_id, content, duplicate, ack}.';

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
COMMENT ON FUNCTION retire_north_star(text, uuid) IS 'The person''s word: one of their north stars is retired and its memory archived; false if it is not theirs or not active.';

CREATE FUNCTION person_north_stars(for_person text)
    RETURNS TABLE (north_star_id uuid, content text, created_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT n.id, n.content, n.created_at FROM dionysus.north_stars n
     WHERE n.person = for_person AND n.status = 'active' ORDER BY n.created_at
$$;
COMMENT ON FUNCTION person_north_stars(text) IS 'A person''s active north stars, oldest first.';

-- ---------------------------------------------------------------------------------------
-- Invisible feedback: a reply to one of Dionysus's messages is feedback, not
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
    -- Feedback given through a dream-channel item's Feedback button is about that item (019,
    -- which adds the foreign key to mirror_items).
    about_mirror_item_id      uuid,
    UNIQUE (platform, platform_message_id)
);
COMMENT ON TABLE feedback IS 'Invisible feedback: a person''s reply to one of Dionysus''s messages (or a command, or a dream item''s button). Never in the message log, never answered.';
CREATE INDEX feedback_recent ON feedback (created_at DESC);
CREATE INDEX feedback_person ON feedback (person, created_at DESC);
-- Its foreign keys, indexed (001).
CREATE INDEX feedback_about_message_id ON feedback (about_message_id) WHERE about_message_id IS NOT NULL;
CREATE INDEX feedback_about_outbox_id ON feedback (about_outbox_id) WHERE about_outbox_id IS NOT NULL;

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
COMMENT ON FUNCTION give_feedback(text, text, text, text, text, text, text) IS
    'Stores invisible feedback about one of Dionysus''s messages to this person (about: its platform id; NULL: the last one), idempotent per carrying message. '
    'A message sent to someone else is refused (stored: false). Never touches the message log.';

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
COMMENT ON FUNCTION undo_feedback(text, text, text) IS 'Takes back the person''s feedback carried by that message of theirs (NULL: their latest).';

-- ---------------------------------------------------------------------------------------
-- The person's objectives: what they are working toward, extracted after each
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
COMMENT ON TABLE objectives IS 'The person''s objectives: what they are working toward, extracted from their turns; theirs, not Dionysus''s goals.';
CREATE INDEX objectives_person ON objectives (person, status);
-- Its foreign keys, indexed (001).
CREATE INDEX objectives_origin_message_id ON objectives (origin_message_id) WHERE origin_message_id IS NOT NULL;

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
COMMENT ON FUNCTION dionysus_internal.note_objective(text, text, double precision, text, uuid) IS
    'One objective from an extraction: the same objective said again (cosine ≥ 0.85) updates saliency and status instead of adding a second.';

CREATE FUNCTION person_objectives(for_person text, include_done boolean DEFAULT false)
    RETURNS TABLE (objective_id uuid, description text, saliency double precision, status text, last_updated timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT o.id, o.description, o.saliency, o.status, o.last_updated FROM dionysus.objectives o
     WHERE o.person = for_person AND (o.status = 'pending' OR (include_done AND o.status = 'completed'))
     ORDER BY o.status, o.saliency DESC, o.last_updated DESC
$$;
COMMENT ON FUNCTION person_objectives(text, boolean) IS 'A person''s pending objectives, most salient first (include_done: the completed too).';

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
COMMENT ON FUNCTION set_objective_status(text, uuid, text) IS 'The person marks one of their objectives pending, completed or archived; false if it is not theirs.';

-- ---------------------------------------------------------------------------------------
-- Context archetypes: the kind of message decides the shape of its
-- context. The centroid is computed in the database from the examples, and forgotten when
-- they change.
-- ---------------------------------------------------------------------------------------
CREATE TABLE context_archetypes (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name                 text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_]*$'),
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
    avg_similarity       double precision,
    -- Whose archetype it is: NULL, everyone's; a person's (an approved dream proposal of theirs) is
    -- matched only for their messages, and one of the same name stands in for the shared one.
    person               text,
    -- The task of its messages, so the kind of message chooses its context budget (027, which
    -- adds the foreign key to context_budgets).
    budget_task          text NOT NULL DEFAULT 'chat',
    CONSTRAINT context_archetypes_name_key UNIQUE NULLS NOT DISTINCT (name, person)
);
COMMENT ON TABLE context_archetypes IS 'Kinds of message and the context shape each selects (turns, memories, similarity threshold, triple depth); the centroid of the examples is computed in the database.';
COMMENT ON COLUMN context_archetypes.budget_task IS 'The context budget (context_budgets.task) of this kind of message.';
CREATE INDEX context_archetypes_active ON context_archetypes (active) WHERE active;

CREATE FUNCTION dionysus_internal.invalidate_centroid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF dionysus_internal.restoring() THEN
        RETURN NEW;   -- a restored archetype, as it was (sql/030_backup.sql)
    END IF;
    IF TG_OP = 'INSERT' OR OLD.example_messages IS DISTINCT FROM NEW.example_messages THEN
        NEW.centroid := NULL;
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.invalidate_centroid() IS 'Trigger: an archetype''s centroid is forgotten when its examples change (recomputed at the next match).';
CREATE TRIGGER context_archetypes_invalidate BEFORE INSERT OR UPDATE ON context_archetypes
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.invalidate_centroid();

-- The mean of the examples' embeddings.
CREATE FUNCTION dionysus_internal.archetype_centroid(examples text[]) RETURNS vector
    LANGUAGE sql STABLE AS $$
    SELECT avg(b.embedding) FROM dionysus.embed_batch(examples) b
$$;
COMMENT ON FUNCTION dionysus_internal.archetype_centroid(text[]) IS 'The mean embedding of an archetype''s example messages.';

-- The archetype whose centroid is nearest to a message's embedding, when it is at least
-- archetype_min_similarity near; its match is counted (not on a standby, which cannot write).
-- Centroids missing after a change of examples are computed first. Among the shared archetypes
-- and the person's own (theirs stands in for a shared one of the same name); nobody else's.
CREATE FUNCTION match_archetype(embedding vector, person text) RETURNS jsonb
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
      FROM dionysus.context_archetypes c
     WHERE c.active AND (c.person IS NULL OR c.person = match_archetype.person)
       AND NOT (c.person IS NULL AND EXISTS (SELECT 1 FROM dionysus.context_archetypes o
                                              WHERE o.active AND o.person = match_archetype.person AND o.name = c.name))
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
COMMENT ON FUNCTION match_archetype(vector, text) IS
    'The active archetype nearest a message''s embedding with its context shape, among the shared ones and the person''s own (theirs stands in for a shared one of its name), when at least archetype_min_similarity near (else only the nearest name); counts the match unless on a standby.';

-- The shared archetypes only (a message of nobody's).
CREATE FUNCTION match_archetype(embedding vector) RETURNS jsonb
    LANGUAGE sql AS $$ SELECT dionysus.match_archetype(embedding, NULL::text) $$;
COMMENT ON FUNCTION match_archetype(vector) IS 'match_archetype among the shared archetypes only (a message of nobody''s).';

INSERT INTO context_archetypes (name, description, example_messages, context_turns, context_memories, similarity_threshold, triple_depth,
                                budget_task) VALUES
    ('small_talk', 'greetings and light chat: recent turns matter, memory little',
     ARRAY['hey, how are you?', 'good morning!', 'haha that''s funny', 'not much, just chilling', 'thanks, you too!', 'lol yes'],
     6, 2, 0.7, 0, 'chat'),
    ('personal_moment', 'feelings and what is going on in their life: their history and the people around them',
     ARRAY['I''m feeling really down today', 'my mom is in the hospital and I''m scared', 'I finally told her how I feel',
           'I''ve been so stressed about everything lately', 'I''m so happy, I got the job!', 'I miss my grandfather'],
     12, 8, 0.55, 1, 'deep_conversation'),
    ('planning_task', 'planning and working on something: their objectives, plans and the things involved',
     ARRAY['can you help me plan my week?', 'I need to finish the report by Friday', 'what should I do first for the move?',
           'let''s make a schedule for studying', 'remind me what''s left on the project', 'how do I break this task down?'],
     10, 6, 0.6, 2, 'deep_conversation'),
    ('past_question', 'a question about what was said or happened before: memory first, few turns',
     ARRAY['what did I tell you about my sister?', 'when did I start my new job?', 'do you remember the name of my dog?',
           'what was the restaurant I mentioned last month?', 'where did I say I went on holiday?', 'who did I meet at the conference?'],
     4, 12, 0.5, 2, 'deep_conversation');

-- ---------------------------------------------------------------------------------------
-- The dreaming cycle: nightly, the smart model reviews the feedback and the
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
COMMENT ON TABLE dreams IS 'One nightly dream per local date: what it reviewed since, and what it found.';
-- Its foreign keys, indexed (001).
CREATE INDEX dreams_work_id ON dreams (work_id) WHERE work_id IS NOT NULL;

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
    base_version integer,
    -- Whose dream wrote it (record_dream): only they decide it, and what it changes is theirs alone.
    person      text,
    -- Their own version of the template it was written against (NULL: they had none).
    base_own_version integer
);
COMMENT ON TABLE proposals IS 'What a dream proposes about Dionysus itself (a template, the extraction, an archetype), pending until the person approves or rejects it.';
CREATE INDEX proposals_pending ON proposals (created_at) WHERE status IN ('pending', 'discussing');
-- Its foreign keys, indexed (001).
CREATE INDEX proposals_dream_id ON proposals (dream_id) WHERE dream_id IS NOT NULL;
-- Feedback (above) may be about a proposal: its key, now that proposals exist.
ALTER TABLE feedback ADD CONSTRAINT feedback_about_proposal_fkey FOREIGN KEY (about_proposal_id) REFERENCES proposals (id) ON DELETE SET NULL;
-- Indexed, as every foreign key (001).
CREATE INDEX feedback_about_proposal_id ON feedback (about_proposal_id) WHERE about_proposal_id IS NOT NULL;

-- A decision stands: status moves pending → discussing → approved | rejected, never back, and a
-- decided proposal's decision (who, when, what it applied) does not change afterwards, whoever
-- writes (the owner too). Its words may still be erased (forget_person).
CREATE FUNCTION dionysus_internal.proposal_one_way() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.person IS DISTINCT FROM OLD.person THEN
        RAISE EXCEPTION 'dionysus: proposal %: whose it is was fixed by its dream', OLD.id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (OLD.status IN ('approved', 'rejected')
        AND (NEW.status, NEW.decided_at, NEW.decided_by, NEW.applied)
            IS DISTINCT FROM (OLD.status, OLD.decided_at, OLD.decided_by, OLD.applied))
       OR (OLD.status = 'discussing' AND NEW.status = 'pending') THEN
        RAISE EXCEPTION 'dionysus: proposal % is % already: a decision is not taken back (a new dream can propose again)', OLD.id, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.proposal_one_way() IS 'Trigger: a proposal''s status moves one way and a decision stands, whoever writes (42501).';
CREATE TRIGGER proposals_one_way BEFORE UPDATE ON proposals FOR EACH ROW EXECUTE FUNCTION dionysus_internal.proposal_one_way();

-- A person's own version of a prompt template, made by approving a dream proposal of theirs: used
-- for them instead of the shared one (prompt_template(key, person)), and for nobody else. A
-- dream reads one person's words, so what it proposes may carry them: as a shared template it
-- would put them in everyone's prompts and in the next person's dream. Versions count per person.
CREATE TABLE person_prompt_templates (
    person      text NOT NULL CHECK (length(btrim(person)) > 0),
    key         text NOT NULL CHECK (key ~ '^[a-z][a-z0-9_]*$'),
    version     integer NOT NULL CHECK (version >= 1),
    template    text NOT NULL CHECK (length(btrim(template)) > 0),
    temperature double precision NOT NULL CHECK (temperature >= 0 AND temperature <= 2),
    active      boolean NOT NULL DEFAULT true,
    note        text,
    proposal_id uuid REFERENCES proposals (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (person, key, version)
);
COMMENT ON TABLE person_prompt_templates IS 'A person''s own versions of a prompt template (approved dream proposals of theirs): used for them instead of the shared one, for nobody else.';
CREATE UNIQUE INDEX person_prompt_templates_one_active ON person_prompt_templates (person, key) WHERE active;
-- Its foreign keys, indexed (001).
CREATE INDEX person_prompt_templates_proposal_id ON person_prompt_templates (proposal_id) WHERE proposal_id IS NOT NULL;

-- The template as used for this person: their own active version, else the shared one.
CREATE FUNCTION prompt_template(key text, person text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    o dionysus.person_prompt_templates;
BEGIN
    SELECT * INTO o FROM dionysus.person_prompt_templates t
     WHERE t.person = prompt_template.person AND t.key = prompt_template.key AND t.active;
    IF NOT FOUND THEN
        RETURN dionysus.prompt_template(key);
    END IF;
    -- Her wording, the task's answer schema: the shape the driver checks does not change with the words.
    RETURN jsonb_build_object('key', o.key, 'version', o.version, 'template', o.template, 'temperature', o.temperature, 'person', o.person,
                              'result_schema', (SELECT p.result_schema FROM dionysus.prompt_templates p WHERE p.key = o.key AND p.active));
END $$;
COMMENT ON FUNCTION prompt_template(text, text) IS 'The template as used for a person: their own active version, else the shared one ({key, version, template, temperature, result_schema[, person]}; a person''s own version answers in the shared one''s result_schema).';

-- The person's word: one of their own versions of a template becomes theirs again (version
-- NULL: none, the shared template is theirs again). Rollback in one call, relayed by the driver
-- as approve_proposal is; only their own versions.
CREATE FUNCTION activate_own_template(person text, key text, version integer) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF coalesce(btrim(person), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF version IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dionysus.person_prompt_templates t
                                            WHERE t.person = activate_own_template.person AND t.key = activate_own_template.key
                                              AND t.version = activate_own_template.version) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "version": % has no version % of template "%"', person, version, key
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.prompt:' || key || ':' || person, 0));
    UPDATE dionysus.person_prompt_templates t SET active = false
     WHERE t.person = activate_own_template.person AND t.key = activate_own_template.key AND t.active;
    UPDATE dionysus.person_prompt_templates t SET active = true
     WHERE t.person = activate_own_template.person AND t.key = activate_own_template.key AND t.version = activate_own_template.version;
    RETURN true;
END $$;
COMMENT ON FUNCTION activate_own_template(text, text, integer) IS 'Makes one of a person''s own versions of a template theirs again (version NULL: the shared one): rollback in one call.';
REVOKE EXECUTE ON FUNCTION activate_own_template(text, text, integer) FROM PUBLIC;

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
    -- At night: from dream_hour, and within the window after it (a machine that was off at 3:00
    -- catches up in the morning; a day that began at noon waits for the night).
    IF extract(hour FROM local) < dionysus_internal.proactive_setting('dream_hour')
       OR local >= date_trunc('day', local) + make_interval(hours => dionysus_internal.proactive_setting('dream_hour')::int)
                   + make_interval(hours => greatest(dionysus_internal.proactive_setting('dream_window_hours'), 1)::int) THEN
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
COMMENT ON FUNCTION dionysus_internal.schedule_dream() IS
    'Queues tonight''s dream (a dream work item) once per local date, from dream_hour to dream_window_hours after it, in the time zone of whoever wrote last.';

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
                                                                  'about', left(m.content, 300), 'source', f.source,
                                                                  'about_proposal', CASE WHEN p.id IS NOT NULL THEN p.kind || ' ' || p.target || ' (' || p.status || ')' END)
                                                ORDER BY f.created_at)
                                FROM dionysus.feedback f LEFT JOIN dionysus.messages m ON m.id = f.about_message_id
                                LEFT JOIN dionysus.proposals p ON p.id = f.about_proposal_id
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
        -- As used for this person (their own versions), and nobody else's.
        'templates', (SELECT jsonb_object_agg(k.key, jsonb_build_object('version', t -> 'version', 'template', t -> 'template'))
                        FROM unnest(ARRAY['chat_system', 'extract_message', 'proactive_compose']) k(key),
                             dionysus.prompt_template(k.key, d.person) t),
        'archetypes', (SELECT jsonb_agg(jsonb_build_object('name', a.name, 'description', a.description, 'turns', a.context_turns,
                                                          'memories', a.context_memories, 'similarity_threshold', a.similarity_threshold,
                                                          'triple_depth', a.triple_depth, 'match_count', a.match_count,
                                                          'avg_similarity', a.avg_similarity) ORDER BY a.name)
                         FROM dionysus.context_archetypes a
                        WHERE a.active AND (a.person IS NULL OR a.person = d.person)
                          AND NOT (a.person IS NULL AND EXISTS (SELECT 1 FROM dionysus.context_archetypes o
                                                                 WHERE o.active AND o.person = d.person AND o.name = a.name))),
        'pending_proposals', (SELECT count(*) FROM dionysus.proposals p WHERE p.status IN ('pending', 'discussing') AND p.person = d.person));
END $$;
COMMENT ON FUNCTION dream_evidence(uuid) IS
    'What a dream reviews: feedback since the last dream, reply and contact signals, corrections, the templates and archetypes it may change.';

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
        -- What an approval changes is the person's own version: only a template used for one person.
        IF target NOT IN ('chat_system', 'extract_message', 'proactive_compose') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "proposals[].target": "%" is not one person''s template (chat_system, extract_message or proactive_compose)', target
                USING ERRCODE = 'invalid_parameter_value';
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
COMMENT ON FUNCTION dionysus_internal.check_proposal(text, text, jsonb) IS 'A proposal''s kind, target and content are checked (22023 naming the part) before it is stored or applied.';

-- Writes down what a dream found: its proposals (pending, announced on dionysus_dream) or,
-- with none, why it proposes nothing. Called through complete_work's `dream` result.
-- The only writer of proposals (SECURITY DEFINER: the driver's role inserts none itself), and
-- only for a dream whose own work item is claimed and not yet recorded: each is the dream's
-- person's, for them alone to decide.
CREATE FUNCTION dionysus_internal.record_dream(dream_id uuid, result jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    night dionysus.dreams;
    item jsonb;
    made uuid[] := '{}';
    pid uuid;
    why text;
    refused jsonb := '[]';
BEGIN
    SELECT * INTO night FROM dionysus.dreams x WHERE x.id = dream_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: invalid argument "dream_id": no dream with id %', dream_id USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF night.finished_at IS NOT NULL OR night.person IS NULL
       OR NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.id = night.work_id AND q.status = 'claimed') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "dream_id": dream % is not waiting for its result (recorded already, or its work item is not claimed)', dream_id
            USING ERRCODE = 'invalid_parameter_value';
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
        INSERT INTO dionysus.proposals (dream_id, kind, target, proposal, rationale, evidence, created_at, base_version, person, base_own_version)
        VALUES (dream_id, item ->> 'kind', item ->> 'target', item -> 'proposal', left(item ->> 'rationale', 4000),
                CASE WHEN jsonb_typeof(item -> 'evidence') = 'array' THEN item -> 'evidence' ELSE '[]' END, dionysus.clock_now(),
                (SELECT t.version FROM dionysus.prompt_templates t WHERE t.key = item ->> 'target' AND t.active), night.person,
                (SELECT t.version FROM dionysus.person_prompt_templates t WHERE t.person = night.person AND t.key = item ->> 'target' AND t.active))
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
    -- Posted to the dream channel (019), with the prompt the driver passed as result.mirror.prompt;
    -- the mirror is best effort: its failure never loses the dream.
    BEGIN
        PERFORM dionysus_internal.mirror_dream(dream_id, made, left(result -> 'mirror' ->> 'prompt', 150000));
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        RAISE WARNING 'dionysus: the dream % was not mirrored to the dream channel: %', dream_id, why;
    END;
    RETURN jsonb_build_object('dream_id', dream_id, 'proposals', to_jsonb(made), 'refused', refused);
END $$;
COMMENT ON FUNCTION dionysus_internal.record_dream(uuid, jsonb) IS 'Stores a dream''s proposals as pending (NOTIFY dionysus_dream each), or its note that nothing is worth proposing.';
REVOKE EXECUTE ON FUNCTION dionysus_internal.record_dream(uuid, jsonb) FROM PUBLIC;

-- Pending and discussed proposals, oldest first.
CREATE FUNCTION pending_proposals()
    RETURNS TABLE (proposal_id uuid, kind text, target text, rationale text, evidence jsonb, proposal jsonb, status text, created_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT p.id, p.kind, p.target, p.rationale, p.evidence, p.proposal, p.status, p.created_at
      FROM dionysus.proposals p WHERE p.status IN ('pending', 'discussing') ORDER BY p.created_at
$$;
COMMENT ON FUNCTION pending_proposals() IS 'Proposals waiting for the person (pending or under discussion), oldest first.';

-- One person's pending and discussed proposals, oldest first: those only they may decide.
CREATE FUNCTION pending_proposals(for_person text)
    RETURNS TABLE (proposal_id uuid, kind text, target text, rationale text, evidence jsonb, proposal jsonb, status text, created_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT p.proposal_id, p.kind, p.target, p.rationale, p.evidence, p.proposal, p.status, p.created_at
      FROM dionysus.pending_proposals() p JOIN dionysus.proposals x ON x.id = p.proposal_id
     WHERE x.person = for_person ORDER BY p.created_at
$$;
COMMENT ON FUNCTION pending_proposals(text) IS 'One person''s proposals waiting for their word (pending or under discussion), oldest first: the rows of pending_proposals() whose dream was theirs, the only ones they may decide.';

-- The person's approval: the proposal takes effect for them (their own version of the template
-- becomes active; their own archetype is added or retuned). The only way a dream changes anything.
-- Only the person whose dream wrote it decides it (`decided_by`, their person key, as
-- mirror_decide's button press gives it); anyone else gets 42501. Nobody else's prompts or
-- dreams change: a dream reads one person's words, and what it proposes may carry them.
-- It runs with the extension owner's rights (the driver's role may not write templates
-- itself, but relays the person's word: their button, their command); PUBLIC may not call it.
CREATE FUNCTION approve_proposal(proposal_id uuid, decided_by text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p dionysus.proposals;
    v integer;
    done jsonb;
    used jsonb;
BEGIN
    IF coalesce(btrim(decided_by), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": who approves must be named' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO p FROM dionysus.proposals x WHERE x.id = proposal_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "proposal_id": no proposal with id %', proposal_id USING ERRCODE = 'no_data_found';
    END IF;
    IF p.person IS DISTINCT FROM btrim(decided_by) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": proposal % is not %''s to decide (only the person its dream was for decides it)',
            proposal_id, decided_by USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p.status NOT IN ('pending', 'discussing') THEN
        RETURN jsonb_build_object('approved', false, 'reason', 'already ' || p.status, 'applied', p.applied);
    END IF;
    PERFORM dionysus_internal.check_proposal(p.kind, p.target, p.proposal);
    IF p.kind IN ('prompt_template', 'extraction') THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.prompt:' || p.target || ':' || p.person, 0));
        -- Written against the template as it was for them then: their own version, else the shared one.
        v := (SELECT t.version FROM dionysus.person_prompt_templates t WHERE t.person = p.person AND t.key = p.target AND t.active);
        IF v IS DISTINCT FROM p.base_own_version
           OR (v IS NULL AND p.base_version IS DISTINCT FROM (SELECT t.version FROM dionysus.prompt_templates t WHERE t.key = p.target AND t.active)) THEN
            RETURN jsonb_build_object('approved', false,
                'reason', format('%s changed since this proposal (it was written against version %s): the next dream can propose again',
                                 p.target, coalesce(p.base_own_version, p.base_version)));
        END IF;
        used := dionysus.prompt_template(p.target, p.person);
        SELECT coalesce(max(t.version), 0) + 1 INTO v FROM dionysus.person_prompt_templates t WHERE t.person = p.person AND t.key = p.target;
        UPDATE dionysus.person_prompt_templates t SET active = false WHERE t.person = p.person AND t.key = p.target AND t.active;
        INSERT INTO dionysus.person_prompt_templates (person, key, version, template, temperature, note, proposal_id, created_at)
        VALUES (p.person, p.target, v, p.proposal ->> 'template', coalesce((p.proposal ->> 'temperature')::float8, (used ->> 'temperature')::float8, 0.7),
                'dream proposal ' || p.id || ', approved by ' || decided_by, p.id, dionysus.clock_now());
        done := jsonb_build_object('template', p.target, 'version', v, 'person', p.person);
    ELSE
        -- A retune of a shared archetype is their own copy of it (the shared one stays everyone else's).
        INSERT INTO dionysus.context_archetypes AS c (name, person, description, example_messages, context_turns, context_memories,
                                                      similarity_threshold, triple_depth, created_by, approved_by, budget_task)
        VALUES (p.target, p.person, p.proposal ->> 'description', ARRAY(SELECT jsonb_array_elements_text(p.proposal -> 'example_messages')),
                (p.proposal ->> 'turns')::int, (p.proposal ->> 'memories')::int, (p.proposal ->> 'similarity_threshold')::float8,
                (p.proposal ->> 'triple_depth')::int, 'ai_dream_cycle', decided_by,
                coalesce((SELECT s.budget_task FROM dionysus.context_archetypes s WHERE s.name = p.target AND s.person IS NULL), 'chat'))
        ON CONFLICT ON CONSTRAINT context_archetypes_name_key
        DO UPDATE SET description = coalesce(EXCLUDED.description, c.description),
               example_messages = EXCLUDED.example_messages, context_turns = EXCLUDED.context_turns,
               context_memories = EXCLUDED.context_memories, similarity_threshold = EXCLUDED.similarity_threshold,
               triple_depth = EXCLUDED.triple_depth, approved_by = EXCLUDED.approved_by, active = true, updated_at = now();
        done := jsonb_build_object('archetype', p.target, 'person', p.person);
    END IF;
    UPDATE dionysus.proposals x SET status = 'approved', decided_at = dionysus.clock_now(), decided_by = approve_proposal.decided_by,
           applied = done
     WHERE x.id = p.id;
    RETURN jsonb_build_object('approved', true, 'applied', done);
END $$;
COMMENT ON FUNCTION approve_proposal(uuid, text) IS
    'The person''s approval (decided_by: the person its dream was for, else 42501): a template proposal becomes their own active version of the template, an archetype their own. The only way a dream changes anything, and for nobody else.';
REVOKE EXECUTE ON FUNCTION approve_proposal(uuid, text) FROM PUBLIC;

-- The person declines (or wants to talk about it first: status 'discussing', still pending).
-- Only the person whose dream wrote it (42501 for anyone else); SECURITY DEFINER as
-- approve_proposal is, since the driver's role may not write a proposal's status itself.
CREATE FUNCTION reject_proposal(proposal_id uuid, decided_by text, note text DEFAULT NULL, discuss boolean DEFAULT false) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p dionysus.proposals;
BEGIN
    IF coalesce(btrim(decided_by), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": who decides must be named' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO p FROM dionysus.proposals x WHERE x.id = proposal_id FOR UPDATE;
    IF FOUND AND p.person IS DISTINCT FROM btrim(decided_by) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": proposal % is not %''s to decide (only the person its dream was for decides it)',
            proposal_id, decided_by USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE dionysus.proposals x
       SET status = CASE WHEN discuss THEN 'discussing' ELSE 'rejected' END,
           decided_at = CASE WHEN discuss THEN NULL ELSE dionysus.clock_now() END,
           decided_by = reject_proposal.decided_by, decision_note = note
     WHERE x.id = proposal_id AND x.status IN ('pending', 'discussing');
    RETURN FOUND;
END $$;
COMMENT ON FUNCTION reject_proposal(uuid, text, text, boolean) IS
    'The person rejects a proposal (decided_by: the person its dream was for, else 42501; discuss: keeps it open as under discussion); false if it is no longer open.';
REVOKE EXECUTE ON FUNCTION reject_proposal(uuid, text, text, boolean) FROM PUBLIC;

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
COMMENT ON FUNCTION activate_prompt_template(text, integer) IS 'Makes any stored version of a template the active one: rollback (or forward) in one call.';
REVOKE EXECUTE ON FUNCTION activate_prompt_template(text, integer) FROM PUBLIC;

-- Texts: sql/prompts/<key>.txt, older versions sql/prompts/superseded/<key>.v<N>.txt; the newest
-- version of each is the active one.
INSERT INTO prompt_templates (key, version, temperature, note, active, template)
SELECT key, version, temperature, note, version = max(version) OVER (PARTITION BY key),
       dionysus_internal.shipped_prompt(key, version)
  FROM (VALUES
    ('north_star_ack', 1, 0.0, 'the acknowledgement of a north star (no model call)'),
    ('north_star_check', 1, 0.0, 'fast model: is a message a north-star declaration?'),
    ('dream', 1, 0.4, 'smart model: the nightly review that proposes changes (nothing changes until the person approves)')
  ) AS shipped (key, version, temperature, note);

-- The extraction learns the person's objectives, each turn de-contextualised first (pronouns
-- resolved against the turns before it): extract_message's version 2 (012).

INSERT INTO proactive_config (key, value, description) VALUES
    ('dream_hour', 3, 'the hour (the person''s local time) after which the nightly dream runs, once a day'),
    ('dream_enabled', 1, '1: dream nightly; 0: never'),
    ('dream_window_hours', 3, 'a dream missed at dream_hour (the machine was off) still runs this many hours later, not after'),
    ('archetype_min_similarity', 0.35, 'a message takes an archetype''s context shape only when at least this near its centroid');
