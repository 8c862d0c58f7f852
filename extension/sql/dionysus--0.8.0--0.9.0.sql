-- Dionysus 0.8.0 → 0.9.0: the people in a person's life (023_people.sql, seed 003 §9): known
-- persons with aliases, relation, feeling, traits and topics; how they relate to each other;
-- where each thing came from. Episodes that end with what they meant (024_episodes.sql, seed
-- 002): participants, outcome, surprise, lessons, and the censors a failure proposes. Every
-- row is kept; the people start empty and fill from the next turns, episodes gain outcomes
-- from their next summaries (the templates change where the shipped ones are active).

-- ---------------------------------------------------------------------------------------
-- A new organ, created whole as sql/023_people.sql has it
-- ---------------------------------------------------------------------------------------
-- The people in a person's life (seed 003 §9; issue #13 §6): whom they talk about, how they
-- relate to them and how those people relate to each other.
--
-- Every row is one person's (of_person, a person key): what Ada said about her mother is Ada's,
-- and nobody else's context, lookup or extraction ever reads it. Two people's "Mom" are two
-- rows.
--
-- Filled after each of their turns by the extraction (extract_message: result.people and
-- result.relations, complete_work), never by hand-written guesses. Entity resolution, in order:
--   1. a name or alias they used before ("Ana", "Ana Silva"; keys lower-cased, possessive and a
--      leading "my" dropped, so "my Ana's" and "ana" are one key);
--   2. a word for a relation ("mom", "my boss": relation_words, never stored as an alias) names
--      the one person they have in that relation, when there is exactly one;
--   3. the conversation says so: an item's name and same_as that mean two known people join
--      them into one ("Ana is my mom" merges "Ana" and "Mom"), keeping every alias, mention,
--      source and relation; a proper name said for a relation only one person has (mother,
--      boss) is whoever was known so far only by that word. A name that is only a relation
--      word gives way to a proper name. An alias is never merged on: a name stays with whom it
--      was first said of.
-- Every change is written to person_sources with the turn it came from: person(name) shows
-- what is known and where it came from.
--
-- chat_context brings in the people a message names (its words, word pairs and triples matched
-- as above) with their relations, so "dinner with my boss and my sister" carries what the
-- person said about how those two get along.
--
-- Lock order: a person's people lock 'dionysus.people:<person>' (level 7, after the learn lock
-- complete_work's facts take, before its objectives lock; see 002_heartbeat.sql), then
-- known_persons rows (level 8, by id when several).

-- Words that name a relation rather than a person: "mom" is whoever is their mother.
CREATE TABLE relation_words (
    word     text PRIMARY KEY CHECK (word = lower(btrim(word)) AND length(word) BETWEEN 1 AND 60),
    relation text NOT NULL CHECK (relation = lower(btrim(relation)) AND length(relation) BETWEEN 1 AND 60),
    -- A relation one usually has with one person only (mother, boss): someone known only as
    -- "Mom" is the "Ana" later said to be their mother.
    singular boolean NOT NULL DEFAULT false
);
INSERT INTO relation_words (word, relation) VALUES
    ('mom', 'mother'), ('mum', 'mother'), ('mother', 'mother'), ('mama', 'mother'), ('mommy', 'mother'), ('mummy', 'mother'), ('ma', 'mother'),
    ('dad', 'father'), ('father', 'father'), ('papa', 'father'), ('daddy', 'father'), ('pa', 'father'),
    ('sister', 'sister'), ('sis', 'sister'), ('brother', 'brother'), ('bro', 'brother'),
    ('wife', 'wife'), ('husband', 'husband'), ('partner', 'partner'), ('girlfriend', 'girlfriend'), ('boyfriend', 'boyfriend'),
    ('son', 'son'), ('daughter', 'daughter'),
    ('grandma', 'grandmother'), ('grandmother', 'grandmother'), ('granny', 'grandmother'), ('nan', 'grandmother'),
    ('grandpa', 'grandfather'), ('grandfather', 'grandfather'), ('granddad', 'grandfather'),
    ('aunt', 'aunt'), ('uncle', 'uncle'), ('cousin', 'cousin'), ('niece', 'niece'), ('nephew', 'nephew'),
    ('boss', 'boss'), ('manager', 'boss'), ('colleague', 'colleague'), ('coworker', 'colleague'), ('co-worker', 'colleague'),
    ('friend', 'friend'), ('best friend', 'best friend'), ('roommate', 'roommate'), ('flatmate', 'roommate'),
    ('neighbour', 'neighbour'), ('neighbor', 'neighbour'), ('therapist', 'therapist'), ('doctor', 'doctor'),
    ('teacher', 'teacher'), ('coach', 'coach'), ('ex', 'ex'), ('landlord', 'landlord'), ('mentor', 'mentor');
UPDATE relation_words SET singular = true
 WHERE relation IN ('mother', 'father', 'wife', 'husband', 'partner', 'girlfriend', 'boyfriend', 'boss', 'therapist', 'landlord');

CREATE TABLE known_persons (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The order people became known in (a merge keeps the one known first; a clock can stand still).
    seq                bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    -- Whose life this person is in (a person key): only they ever see this row.
    of_person          text NOT NULL CHECK (length(btrim(of_person)) > 0),
    name               text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    -- Their relation to the person (mother, boss, friend), as relation_words spells it.
    relation           text CHECK (relation IS NULL OR length(btrim(relation)) BETWEEN 1 AND 60),
    -- How the person feels about them, -1 … 1 (recent words weigh more).
    feeling            real CHECK (feeling BETWEEN -1 AND 1),
    traits             text[] NOT NULL DEFAULT '{}' CHECK (cardinality(traits) <= 20),
    topics             text[] NOT NULL DEFAULT '{}' CHECK (cardinality(topics) <= 20),
    mentions           integer NOT NULL DEFAULT 0 CHECK (mentions >= 0),
    confidence         real NOT NULL DEFAULT 0.5 CHECK (confidence BETWEEN 0 AND 1),
    first_mentioned_at timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    last_mentioned_at  timestamptz NOT NULL DEFAULT dionysus.clock_now()
);
-- Whose, in what relation: "my sister" is found in the index alone (id included).
CREATE INDEX known_persons_of ON known_persons (of_person, relation) INCLUDE (id);

CREATE TABLE person_aliases (
    known_person_id uuid NOT NULL REFERENCES known_persons (id) ON DELETE CASCADE,
    of_person       text NOT NULL,
    alias           text NOT NULL CHECK (length(btrim(alias)) BETWEEN 1 AND 200),
    alias_key       text NOT NULL CHECK (length(alias_key) > 0),
    -- One person per key in a person's life: resolution is never ambiguous.
    PRIMARY KEY (of_person, alias_key)
);
CREATE INDEX person_aliases_person ON person_aliases (known_person_id);

-- How two people in the person's life relate (the boss and the sister "don't get along").
CREATE TABLE person_relations (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    of_person   text NOT NULL,
    from_id     uuid NOT NULL REFERENCES known_persons (id) ON DELETE CASCADE,
    to_id       uuid NOT NULL REFERENCES known_persons (id) ON DELETE CASCADE,
    -- Lower case, words joined by '_' ("can't stand" → can_t_stand), any script.
    kind        text NOT NULL CHECK (length(kind) BETWEEN 1 AND 60 AND kind = lower(kind) AND kind !~ '\s'),
    sentiment   real NOT NULL DEFAULT 0 CHECK (sentiment BETWEEN -1 AND 1),
    confidence  real NOT NULL DEFAULT 0.7 CHECK (confidence BETWEEN 0 AND 1),
    -- 'said': the person said so; 'inferred': the model read it between the lines.
    source      text NOT NULL CHECK (source IN ('said', 'inferred')),
    message_id  uuid REFERENCES messages (id) ON DELETE SET NULL,
    updated_at  timestamptz NOT NULL DEFAULT dionysus.clock_now(),
    CHECK (from_id <> to_id),
    UNIQUE (from_id, to_id, kind)
);
CREATE INDEX person_relations_to ON person_relations (to_id);

-- Where each thing known about someone came from: the turn, and what it said.
CREATE TABLE person_sources (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    known_person_id uuid NOT NULL REFERENCES known_persons (id) ON DELETE CASCADE,
    what            text NOT NULL CHECK (what IN ('named', 'alias', 'relation', 'feeling', 'trait', 'topic', 'merged', 'related')),
    value           text,
    message_id      uuid REFERENCES messages (id) ON DELETE SET NULL,
    at              timestamptz NOT NULL DEFAULT dionysus.clock_now()
);
CREATE INDEX person_sources_person ON person_sources (known_person_id, at);

-- A name's key: lower case, single spaces, no surrounding punctuation, no possessive "'s", a
-- leading "my"/"our" dropped ("My Mother's," → "mother").
CREATE FUNCTION dionysus_internal.person_key(name text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT nullif(regexp_replace(regexp_replace(
               regexp_replace(lower(btrim(regexp_replace(name, '\s+', ' ', 'g'))), '^[^[:alnum:]]+|[^[:alnum:]]+$', '', 'g'),
               '[''’]s$', ''), '^(my|our) ', ''), '')
$$;

-- Whether a key is the person themselves (or Dionysus): never someone in their life.
CREATE FUNCTION dionysus_internal.is_self(k text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT k IN ('user', 'the user', 'me', 'i', 'myself', 'you', 'yourself')
$$;

-- The one person a name means in a person's life, or NULL: an alias they used, else a relation
-- word naming exactly one person they have in that relation. (Relation words are never
-- aliases, so "my friend" never sticks to the first friend named.)
CREATE FUNCTION dionysus_internal.resolve_person(of_person text, name text) RETURNS uuid
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    k text := dionysus_internal.person_key(name);
    hit uuid;
    rel text;
BEGIN
    IF k IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT a.known_person_id INTO hit FROM dionysus.person_aliases a
     WHERE a.of_person = resolve_person.of_person AND a.alias_key = k;
    IF hit IS NOT NULL THEN
        RETURN hit;
    END IF;
    SELECT w.relation INTO rel FROM dionysus.relation_words w WHERE w.word = k;
    IF rel IS NULL THEN
        RETURN NULL;
    END IF;
    -- Counted in the index (no LIMIT: with one, a cached generic plan would rather scan the
    -- table for the first two rows, and read all of it when there is only one).
    SELECT CASE WHEN count(*) = 1 THEN min(p.id::text)::uuid END INTO hit
      FROM dionysus.known_persons p WHERE p.of_person = resolve_person.of_person AND p.relation = rel;
    RETURN hit;
END $$;

-- A list of short strings from an extraction item (anything else: 22023 naming it).
CREATE FUNCTION dionysus_internal.person_strings(v jsonb, what text, max_len integer) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN '{}';
    END IF;
    IF jsonb_typeof(v) <> 'array' OR jsonb_array_length(v) > 20
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(v) e WHERE jsonb_typeof(e) <> 'string' OR length(btrim(e #>> '{}')) NOT BETWEEN 1 AND max_len) THEN
        RAISE EXCEPTION 'dionysus: argument "%": must be an array of at most 20 strings of 1 to % characters', what, max_len
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ARRAY(SELECT btrim(e #>> '{}') FROM jsonb_array_elements(v) e);
END $$;

-- A number from an extraction item within [lo, hi], or NULL (anything else: 22023 naming it).
CREATE FUNCTION dionysus_internal.person_number(v jsonb, what text, lo double precision, hi double precision) RETURNS double precision
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN NULL;
    END IF;
    -- Compared as numeric: 1e400 is out of range, not an overflow.
    IF jsonb_typeof(v) <> 'number' OR (v #>> '{}')::numeric NOT BETWEEN lo::numeric AND hi::numeric THEN
        RAISE EXCEPTION 'dionysus: argument "%": must be a number in [%, %]', what, lo, hi USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN (v #>> '{}')::float8;
END $$;

-- Gives a known person a name they were called. Never a relation word ("Mom" is whoever is
-- their mother, found by the relation) nor the person themselves, and never a key that is
-- already someone else's: a name stays with whom it was first said of.
CREATE FUNCTION dionysus_internal.person_alias(person_id uuid, of_person text, alias text, message_id uuid) RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    k text := dionysus_internal.person_key(alias);
BEGIN
    IF k IS NULL OR dionysus_internal.is_self(k) OR EXISTS (SELECT 1 FROM dionysus.relation_words w WHERE w.word = k) THEN
        RETURN false;
    END IF;
    INSERT INTO dionysus.person_aliases (known_person_id, of_person, alias, alias_key)
    VALUES (person_id, of_person, left(btrim(alias), 200), k) ON CONFLICT DO NOTHING;
    IF FOUND THEN
        INSERT INTO dionysus.person_sources (known_person_id, what, value, message_id) VALUES (person_id, 'alias', left(btrim(alias), 200), message_id);
    END IF;
    RETURN FOUND;
END $$;

-- Appends new words to a short list (most recent last, at most 20, no repeats by case).
CREATE FUNCTION dionysus_internal.person_list_add(list text[], more text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(array_agg(t ORDER BY n), '{}')
      FROM (SELECT t, n FROM (SELECT DISTINCT ON (lower(t)) t, n FROM unnest(list || more) WITH ORDINALITY u(t, n) ORDER BY lower(t), n DESC) d
             ORDER BY n DESC LIMIT 20) x
$$;

-- Folds one person into another (the conversation said they are one): aliases, sources,
-- relations, mentions, traits and topics move; a proper name wins over a relation word. Both
-- must be in the same person's life (42501 otherwise).
CREATE FUNCTION dionysus_internal.merge_persons(keep uuid, gone uuid, message_id uuid) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    g dionysus.known_persons;
    k dionysus.known_persons;
BEGIN
    -- Rows by id (lock order 8).
    PERFORM 1 FROM dionysus.known_persons x WHERE x.id IN (keep, gone) ORDER BY x.id FOR UPDATE;
    SELECT * INTO k FROM dionysus.known_persons WHERE id = keep;
    SELECT * INTO g FROM dionysus.known_persons WHERE id = gone;
    IF k.id IS NULL OR g.id IS NULL OR k.of_person <> g.of_person OR keep = gone THEN
        RAISE EXCEPTION 'dionysus: argument "gone": not another known person in the same person''s life' USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE dionysus.person_aliases SET known_person_id = keep WHERE known_person_id = gone;
    UPDATE dionysus.person_sources SET known_person_id = keep WHERE known_person_id = gone;
    -- A relation between the two goes; one both had with a third is kept once (keep's).
    DELETE FROM dionysus.person_relations r WHERE (r.from_id = gone AND r.to_id = keep) OR (r.from_id = keep AND r.to_id = gone);
    DELETE FROM dionysus.person_relations r
     WHERE r.from_id = gone AND EXISTS (SELECT 1 FROM dionysus.person_relations x WHERE x.from_id = keep AND x.to_id = r.to_id AND x.kind = r.kind);
    DELETE FROM dionysus.person_relations r
     WHERE r.to_id = gone AND EXISTS (SELECT 1 FROM dionysus.person_relations x WHERE x.to_id = keep AND x.from_id = r.from_id AND x.kind = r.kind);
    UPDATE dionysus.person_relations SET from_id = keep WHERE from_id = gone;
    UPDATE dionysus.person_relations SET to_id = keep WHERE to_id = gone;
    UPDATE dionysus.known_persons SET
           name = CASE WHEN EXISTS (SELECT 1 FROM dionysus.relation_words w WHERE w.word = dionysus_internal.person_key(k.name))
                        AND NOT EXISTS (SELECT 1 FROM dionysus.relation_words w WHERE w.word = dionysus_internal.person_key(g.name))
                       THEN g.name ELSE k.name END,
           relation = coalesce(k.relation, g.relation),
           feeling = CASE WHEN k.feeling IS NULL THEN g.feeling WHEN g.feeling IS NULL THEN k.feeling
                          WHEN g.last_mentioned_at > k.last_mentioned_at THEN g.feeling ELSE k.feeling END,
           traits = dionysus_internal.person_list_add(g.traits, k.traits),
           topics = dionysus_internal.person_list_add(g.topics, k.topics),
           mentions = k.mentions + g.mentions,
           confidence = greatest(k.confidence, g.confidence),
           first_mentioned_at = least(k.first_mentioned_at, g.first_mentioned_at),
           last_mentioned_at = greatest(k.last_mentioned_at, g.last_mentioned_at)
     WHERE id = keep;
    INSERT INTO dionysus.person_sources (known_person_id, what, value, message_id) VALUES (keep, 'merged', g.name, message_id);
    DELETE FROM dionysus.known_persons WHERE id = gone;
END $$;

-- One person from an extraction item, {name, aliases, same_as, relation, feeling, traits,
-- topics, confidence}, in of_person's life. Who they are: the person the name or same_as
-- already means (both: one person, merged); else, for a relation word ("my sister"), the one
-- person in that relation; else, for a proper name in a relation only one person has (mother,
-- boss: relation_words.singular), the one known so far only by that word ("Mom" becomes "Ana");
-- else someone new. Aliases are added where free, never merged on. Times are the turn's (an
-- imported history's old words do not become today's, nor outweigh today's feeling). Returns
-- their id (NULL for the person themselves: "user", "me"). The caller holds the people lock.
CREATE FUNCTION dionysus_internal.note_person(of_person text, item jsonb, message_id uuid) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE
    name text;
    same_as text;
    names text[];
    ids uuid[];
    keep uuid;
    other uuid;
    rel text;
    feel double precision;
    conf double precision;
    new_traits text[];
    new_topics text[];
    said_at timestamptz;
    p dionysus.known_persons;
    n text;
BEGIN
    IF jsonb_typeof(item) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'dionysus: argument "result.people": each item must be an object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(item -> 'name') IS DISTINCT FROM 'string' OR dionysus_internal.person_key(item ->> 'name') IS NULL
       OR length(btrim(item ->> 'name')) > 200 THEN
        RAISE EXCEPTION 'dionysus: argument "result.people.name": must be a name of 1 to 200 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    name := btrim(item ->> 'name');
    IF dionysus_internal.is_self(dionysus_internal.person_key(name)) THEN
        RETURN NULL;  -- the person themselves (or Dionysus) is not someone in their life
    END IF;
    IF item ? 'same_as' AND jsonb_typeof(item -> 'same_as') <> 'null' THEN
        IF jsonb_typeof(item -> 'same_as') <> 'string' OR length(btrim(item ->> 'same_as')) NOT BETWEEN 1 AND 200 THEN
            RAISE EXCEPTION 'dionysus: argument "result.people.same_as": must be a name of 1 to 200 characters' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        same_as := btrim(item ->> 'same_as');
    END IF;
    names := ARRAY[name] || dionysus_internal.person_strings(item -> 'aliases', 'result.people.aliases', 200)
             || CASE WHEN same_as IS NULL THEN '{}'::text[] ELSE ARRAY[same_as] END;
    IF item ? 'relation' AND jsonb_typeof(item -> 'relation') <> 'null' THEN
        IF jsonb_typeof(item -> 'relation') <> 'string' OR length(btrim(item ->> 'relation')) NOT BETWEEN 1 AND 60 THEN
            RAISE EXCEPTION 'dionysus: argument "result.people.relation": must be a word of 1 to 60 characters' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        rel := dionysus_internal.person_key(item ->> 'relation');
        rel := coalesce((SELECT w.relation FROM dionysus.relation_words w WHERE w.word = rel), rel);
    END IF;
    feel := dionysus_internal.person_number(item -> 'feeling', 'result.people.feeling', -1, 1);
    conf := coalesce(dionysus_internal.person_number(item -> 'confidence', 'result.people.confidence', 0, 1), 0.7);
    new_traits := dionysus_internal.person_strings(item -> 'traits', 'result.people.traits', 80);
    new_topics := dionysus_internal.person_strings(item -> 'topics', 'result.people.topics', 80);
    said_at := coalesce((SELECT x.created_at FROM dionysus.messages x WHERE x.id = note_person.message_id), dionysus.clock_now());
    -- A relation word alone ("Mom") says the relation too.
    IF rel IS NULL THEN
        SELECT w.relation INTO rel FROM dionysus.relation_words w
         WHERE w.word IN (dionysus_internal.person_key(name), dionysus_internal.person_key(same_as)) LIMIT 1;
    END IF;

    ids := ARRAY(SELECT DISTINCT r FROM unnest(ARRAY[name, same_as]) x, dionysus_internal.resolve_person(of_person, x) r
                  WHERE x IS NOT NULL AND r IS NOT NULL);
    -- A proper name in a relation one has with one person only is whoever was known so far
    -- only by that relation's word ("Mom", then "Ana, my mother").
    IF rel IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM dionysus.relation_words w WHERE w.word = dionysus_internal.person_key(name))
       AND EXISTS (SELECT 1 FROM dionysus.relation_words w WHERE w.relation = rel AND w.singular) THEN
        SELECT CASE WHEN count(*) = 1 THEN min(p2.id::text)::uuid END INTO other FROM dionysus.known_persons p2
         WHERE p2.of_person = note_person.of_person AND p2.relation = rel
           AND EXISTS (SELECT 1 FROM dionysus.relation_words w WHERE w.word = dionysus_internal.person_key(p2.name));
        IF other IS NOT NULL AND NOT other = ANY(ids) THEN
            ids := ids || other;
        END IF;
    END IF;
    IF cardinality(ids) = 0 THEN
        INSERT INTO dionysus.known_persons (of_person, name, confidence, first_mentioned_at, last_mentioned_at)
        VALUES (of_person, left(name, 200), conf, said_at, said_at) RETURNING id INTO keep;
        INSERT INTO dionysus.person_sources (known_person_id, what, value, message_id) VALUES (keep, 'named', name, message_id);
    ELSE
        -- The one known first keeps its id; the others fold into it.
        SELECT p2.id INTO keep FROM dionysus.known_persons p2 WHERE p2.id = ANY(ids) ORDER BY p2.seq LIMIT 1;
        FOR other IN SELECT p2.id FROM dionysus.known_persons p2 WHERE p2.id = ANY(ids) AND p2.id <> keep ORDER BY p2.seq LOOP
            PERFORM dionysus_internal.merge_persons(keep, other, message_id);
        END LOOP;
    END IF;
    FOREACH n IN ARRAY names LOOP
        PERFORM dionysus_internal.person_alias(keep, of_person, n, message_id);
    END LOOP;

    SELECT * INTO p FROM dionysus.known_persons x WHERE x.id = keep FOR UPDATE;
    -- A proper name replaces a relation word as their name ("Mom" → "Ana"); after a merge, the
    -- item's name is the one they go by now ("Ana", said the same as "Annie").
    IF NOT EXISTS (SELECT 1 FROM dionysus.relation_words w WHERE w.word = dionysus_internal.person_key(name))
       AND (cardinality(ids) > 1
            OR EXISTS (SELECT 1 FROM dionysus.relation_words w WHERE w.word = dionysus_internal.person_key(p.name))) THEN
        p.name := name;
    END IF;
    IF rel IS NOT NULL AND rel IS DISTINCT FROM p.relation THEN
        p.relation := rel;
        INSERT INTO dionysus.person_sources (known_person_id, what, value, message_id) VALUES (keep, 'relation', rel, message_id);
    END IF;
    IF feel IS NOT NULL THEN
        -- Recent words weigh more; older words (an imported history) only fill a gap.
        p.feeling := CASE WHEN p.feeling IS NULL THEN feel
                          WHEN said_at >= p.last_mentioned_at THEN 0.6 * p.feeling + 0.4 * feel
                          ELSE p.feeling END;
        INSERT INTO dionysus.person_sources (known_person_id, what, value, message_id) VALUES (keep, 'feeling', round(feel::numeric, 2)::text, message_id);
    END IF;
    INSERT INTO dionysus.person_sources (known_person_id, what, value, message_id)
    SELECT keep, 'trait', t, message_id FROM unnest(new_traits) t WHERE NOT lower(t) = ANY(SELECT lower(x) FROM unnest(p.traits) x)
    UNION ALL
    SELECT keep, 'topic', t, message_id FROM unnest(new_topics) t WHERE NOT lower(t) = ANY(SELECT lower(x) FROM unnest(p.topics) x);
    UPDATE dionysus.known_persons x SET
           name = left(p.name, 200), relation = p.relation, feeling = p.feeling,
           traits = dionysus_internal.person_list_add(p.traits, new_traits),
           topics = dionysus_internal.person_list_add(p.topics, new_topics),
           mentions = p.mentions + 1,
           -- Each mention firms up what is known: 1 - (1 - c)(1 - c'/2).
           confidence = least(1, 1 - (1 - p.confidence) * (1 - conf / 2))::real,
           first_mentioned_at = least(p.first_mentioned_at, said_at),
           last_mentioned_at = greatest(p.last_mentioned_at, said_at)
     WHERE x.id = keep;
    RETURN keep;
END $$;

-- How two people relate, from an extraction item {a, b, kind, sentiment, confidence, source
-- (said or inferred; inferred when missing)}. An end not known yet is someone new, by name. An
-- item that cannot be placed is skipped (NULL), never the turn: an end that is the person
-- themselves ("user", "you": how they relate to someone is that someone's relation), a relation
-- word with several people in it ("my friend" among two friends), the same person twice, a
-- kind with no letters.
CREATE FUNCTION dionysus_internal.note_relation(of_person text, item jsonb, message_id uuid) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE
    ends uuid[] := '{}';
    e text;
    k text;
    found_id uuid;
    rel_kind text;
    src text;
    rid uuid;
    rel_sentiment double precision;
    conf double precision;
BEGIN
    IF jsonb_typeof(item) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'dionysus: argument "result.relations": each item must be an object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH e IN ARRAY ARRAY['a', 'b', 'kind'] LOOP
        IF jsonb_typeof(item -> e) IS DISTINCT FROM 'string' OR length(btrim(item ->> e)) NOT BETWEEN 1 AND 200 THEN
            RAISE EXCEPTION 'dionysus: argument "result.relations.%": must be a string of 1 to 200 characters', e USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    src := coalesce(item ->> 'source', 'inferred');
    IF src NOT IN ('said', 'inferred') THEN
        RAISE EXCEPTION 'dionysus: argument "result.relations.source": must be said or inferred' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    rel_sentiment := coalesce(dionysus_internal.person_number(item -> 'sentiment', 'result.relations.sentiment', -1, 1), 0);
    conf := coalesce(dionysus_internal.person_number(item -> 'confidence', 'result.relations.confidence', 0, 1), CASE src WHEN 'said' THEN 0.8 ELSE 0.5 END);
    rel_kind := left(btrim(regexp_replace(lower(btrim(item ->> 'kind')), '[^[:alnum:]]+', '_', 'g'), '_'), 60);
    IF rel_kind = '' THEN
        RETURN NULL;
    END IF;
    FOREACH e IN ARRAY ARRAY[item ->> 'a', item ->> 'b'] LOOP
        k := dionysus_internal.person_key(e);
        IF k IS NULL OR dionysus_internal.is_self(k) THEN
            RETURN NULL;
        END IF;
        found_id := dionysus_internal.resolve_person(of_person, e);
        IF found_id IS NULL THEN
            -- A relation word nobody is in yet is someone new ("my sister"); with several, nobody in particular.
            IF EXISTS (SELECT 1 FROM dionysus.relation_words w JOIN dionysus.known_persons p
                                  ON p.of_person = note_relation.of_person AND p.relation = w.relation WHERE w.word = k) THEN
                RETURN NULL;
            END IF;
            found_id := dionysus_internal.note_person(of_person, jsonb_build_object('name', e), message_id);
        END IF;
        ends := ends || found_id;
    END LOOP;
    IF ends[1] = ends[2] THEN
        RETURN NULL;
    END IF;
    -- Said outweighs inferred: an inference never overwrites what the person said.
    INSERT INTO dionysus.person_relations AS r (of_person, from_id, to_id, kind, sentiment, confidence, source, message_id)
    VALUES (of_person, ends[1], ends[2], rel_kind, rel_sentiment, conf, src, message_id)
    ON CONFLICT (from_id, to_id, kind) DO UPDATE
       SET sentiment = CASE WHEN r.source = 'said' AND excluded.source = 'inferred' THEN r.sentiment ELSE excluded.sentiment END,
           confidence = CASE WHEN r.source = 'said' AND excluded.source = 'inferred' THEN r.confidence
                             ELSE greatest(r.confidence, excluded.confidence) END,
           source = CASE WHEN r.source = 'said' THEN 'said' ELSE excluded.source END,
           message_id = CASE WHEN r.source = 'said' AND excluded.source = 'inferred' THEN r.message_id ELSE excluded.message_id END,
           updated_at = dionysus.clock_now()
    RETURNING r.id INTO rid;
    INSERT INTO dionysus.person_sources (known_person_id, what, value, message_id)
    VALUES (ends[1], 'related', rel_kind || ' ' || (SELECT p.name FROM dionysus.known_persons p WHERE p.id = ends[2]), message_id);
    RETURN rid;
END $$;

-- complete_work's people and relations of a person's turn, under their people lock. The turn
-- must be theirs (42501 otherwise): one person's words never write another's people.
CREATE FUNCTION dionysus_internal.store_people(of_person text, people jsonb, relations jsonb, message_id uuid) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    item jsonb;
    ids jsonb := '[]';
    rels jsonb := '[]';
    skipped integer := 0;
    id uuid;
BEGIN
    IF jsonb_array_length(people) > 20 THEN
        RAISE EXCEPTION 'dionysus: argument "result.people": at most 20 people a turn' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_array_length(relations) > 20 THEN
        RAISE EXCEPTION 'dionysus: argument "result.relations": at most 20 relations a turn' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM dionysus.messages x WHERE x.id = store_people.message_id AND x.person IS DISTINCT FROM store_people.of_person) THEN
        RAISE EXCEPTION 'dionysus: argument "result.people": the turn is not %''s', of_person USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.people:' || of_person, 0));
    FOR item IN SELECT * FROM jsonb_array_elements(people) LOOP
        id := dionysus_internal.note_person(of_person, item, message_id);
        IF id IS NOT NULL THEN
            ids := ids || to_jsonb(id);
        END IF;
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(relations) LOOP
        id := dionysus_internal.note_relation(of_person, item, message_id);
        IF id IS NULL THEN
            skipped := skipped + 1;
        ELSE
            rels := rels || to_jsonb(id);
        END IF;
    END LOOP;
    RETURN jsonb_build_object('people', ids, 'relations', rels, 'relations_skipped', skipped);
END $$;

-- One known person as JSON: who they are to the person, their relations both ways, and (with
-- sources) where each thing came from.
CREATE FUNCTION dionysus_internal.person_json(p dionysus.known_persons, with_sources boolean) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN jsonb_build_object(
        'id', p.id, 'of', p.of_person, 'name', p.name, 'relation', p.relation,
        'feeling', round(p.feeling::numeric, 2), 'traits', to_jsonb(p.traits), 'topics', to_jsonb(p.topics),
        'mentions', p.mentions, 'confidence', round(p.confidence::numeric, 2),
        'first_mentioned_at', p.first_mentioned_at, 'last_mentioned_at', p.last_mentioned_at,
        'aliases', coalesce((SELECT jsonb_agg(a.alias ORDER BY a.alias) FROM dionysus.person_aliases a WHERE a.known_person_id = p.id), '[]'),
        -- The eight firmest relations: a prompt carries a few, never a life's worth.
        'relations', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                   'with', x.with_name, 'with_relation', x.with_relation, 'kind', x.kind, 'direction', x.direction,
                                   'sentiment', round(x.sentiment::numeric, 2), 'confidence', round(x.confidence::numeric, 2),
                                   'source', x.source, 'updated_at', x.updated_at) ORDER BY x.confidence DESC, x.updated_at DESC)
                                 FROM (SELECT r.kind, r.sentiment, r.confidence, r.source, r.updated_at, o.name AS with_name,
                                              o.relation AS with_relation, CASE WHEN r.from_id = p.id THEN 'to' ELSE 'from' END AS direction
                                         FROM dionysus.person_relations r
                                         JOIN dionysus.known_persons o ON o.id = CASE WHEN r.from_id = p.id THEN r.to_id ELSE r.from_id END
                                        WHERE r.from_id = p.id OR r.to_id = p.id
                                        ORDER BY r.confidence DESC, r.updated_at DESC LIMIT 8) x), '[]'))
     -- Where it came from: the last 30 things learned, each with the words of its turn.
     || CASE WHEN with_sources THEN jsonb_build_object('sources', coalesce((
            SELECT jsonb_agg(jsonb_build_object('what', y.what, 'value', y.value, 'at', y.at, 'message_id', y.message_id, 'said', y.said)
                             ORDER BY y.at, y.id)
              FROM (SELECT s.id, s.what, s.value, s.at, s.message_id, left(m.content, 200) AS said
                      FROM dionysus.person_sources s
                      LEFT JOIN dionysus.messages m ON m.id = s.message_id AND m.person = p.of_person
                     WHERE s.known_person_id = p.id ORDER BY s.at DESC, s.id DESC LIMIT 30) y), '[]'))
        ELSE '{}'::jsonb END;
END $$;

-- What is known about someone: every known person a name means (in one person's life with
-- of_person; in everyone's for the owner), with their relations and where each thing came from.
CREATE FUNCTION person(name text, of_person text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    k text := dionysus_internal.person_key(person.name);
    hits jsonb;
BEGIN
    IF k IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "name" must be a name' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Everyone's people at once is the owner's view (a superuser's session), never the driver's.
    IF person.of_person IS NULL AND NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user) THEN
        RAISE EXCEPTION 'dionysus: argument "of_person": whose life to look in (everyone''s is the owner''s view)'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT coalesce(jsonb_agg(dionysus_internal.person_json(p, true) ORDER BY p.of_person, p.mentions DESC), '[]')
      INTO hits
      FROM dionysus.known_persons p
     WHERE (person.of_person IS NULL OR p.of_person = person.of_person)
       AND (p.id = dionysus_internal.resolve_person(p.of_person, person.name)
            OR EXISTS (SELECT 1 FROM dionysus.person_aliases a WHERE a.known_person_id = p.id AND a.alias_key = k));
    IF hits = '[]'::jsonb THEN
        RAISE EXCEPTION 'dionysus: argument "name": nobody called % is known%', person.name,
            CASE WHEN person.of_person IS NULL THEN '' ELSE ' to ' || person.of_person END USING ERRCODE = 'no_data_found';
    END IF;
    RETURN hits;
END $$;

-- The people in one person's life, the most mentioned first (their /people).
CREATE FUNCTION people_of(of_person text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF of_person IS NULL OR btrim(of_person) = '' THEN
        RAISE EXCEPTION 'dionysus: argument "of_person" must be a person key' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN (SELECT coalesce(jsonb_agg(dionysus_internal.person_json(p, false) ORDER BY p.mentions DESC, p.seq), '[]')
              FROM dionysus.known_persons p WHERE p.of_person = people_of.of_person);
END $$;

-- The person's word: forget someone in their life, with every alias, relation and source.
-- Only their own (false for anyone else's, as for nobody: the same answer).
CREATE FUNCTION forget_known_person(of_person text, known_person_id uuid) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF of_person IS NULL OR btrim(of_person) = '' THEN
        RAISE EXCEPTION 'dionysus: argument "of_person" must be a person key' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF known_person_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "known_person_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.people:' || of_person, 0));
    DELETE FROM dionysus.known_persons p WHERE p.id = forget_known_person.known_person_id AND p.of_person = forget_known_person.of_person;
    RETURN FOUND;
END $$;

-- The people a message names (its words and word groups, as keys), in the viewer's life only,
-- with how they relate to each other; at most eight, the most mentioned first.
CREATE FUNCTION dionysus_internal.people_in_context(viewer text, grams text[]) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- plpgsql, not sql: its plan is cached for the session, where a sql function's CTEs are
    -- planned again at every call (most of the cost).
    -- Nobody known: nothing to look for. (Ordered by the index, so a cached generic plan reads
    -- the index rather than every person's rows looking for one that is not there.)
    PERFORM 1 FROM dionysus.known_persons p WHERE p.of_person = viewer ORDER BY p.of_person, p.relation LIMIT 1;
    IF NOT FOUND THEN
        RETURN '[]'::jsonb;
    END IF;
    RETURN (
    -- Set-based resolve_person: an alias key, else a relation word with exactly one person in it.
    -- chat_context's grams are lower-case words already: only those that could differ from
    -- their key pay for person_key's four expressions.
    WITH keys AS (SELECT DISTINCT CASE WHEN g ~ '^(my|our) |[''’]s$|^[^[:alnum:]]|[^[:alnum:]]$|[[:upper:]]|\s\s|[\t\n\r]'
                                       THEN dionysus_internal.person_key(g) ELSE g END AS k
                    FROM unnest(grams) g),
         by_alias AS (
            SELECT a.known_person_id AS id FROM dionysus.person_aliases a JOIN keys ON keys.k = a.alias_key
             WHERE a.of_person = viewer),
         -- One person in the relation is someone, several are nobody in particular (counted in
         -- the index, as resolve_person).
         by_relation AS (
            SELECT l.id
              FROM keys JOIN dionysus.relation_words w ON w.word = keys.k
             CROSS JOIN LATERAL (SELECT CASE WHEN count(*) = 1 THEN min(p.id::text)::uuid END AS id
                                   FROM dionysus.known_persons p WHERE p.of_person = viewer AND p.relation = w.relation) l
             WHERE l.id IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM dionysus.person_aliases a WHERE a.of_person = viewer AND a.alias_key = keys.k)),
         chosen AS (
            SELECT p.* FROM dionysus.known_persons p
             WHERE p.of_person = viewer AND p.id IN (SELECT id FROM by_alias UNION SELECT id FROM by_relation)
             ORDER BY p.mentions DESC, p.id LIMIT 8)
    SELECT coalesce(jsonb_agg(dionysus_internal.person_json(c::dionysus.known_persons, false) ORDER BY c.mentions DESC, c.id), '[]')
      FROM chosen c);
END $$;

-- Ships a new version of a prompt template: active where the shipped version it follows (its
-- note) is still the active one; where the person's own is active, theirs stays and the new
-- one waits beside it (a NOTICE names it; activate_prompt_template switches). Returns it.
CREATE FUNCTION dionysus_internal.ship_template(key text, follows_note text, note text, temperature double precision,
                                               template text) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    shipped boolean;
    next_version integer;
BEGIN
    SELECT coalesce(bool_and(NOT t.active OR (t.created_by = 'human' AND t.note = ship_template.follows_note)), true),
           coalesce(max(t.version), 0) + 1
      INTO shipped, next_version FROM dionysus.prompt_templates t WHERE t.key = ship_template.key;
    IF shipped THEN
        UPDATE dionysus.prompt_templates t SET active = false WHERE t.key = ship_template.key;
    ELSE
        RAISE NOTICE 'dionysus: your % template stays active; version % is new (activate_prompt_template to use it)', key, next_version;
    END IF;
    INSERT INTO dionysus.prompt_templates (key, version, temperature, note, active, template)
    VALUES (key, next_version, temperature, note, shipped, template);
    RETURN next_version;
END $$;

-- The prompt that turns a person's turn into memory now asks for the people in it too.
SELECT dionysus_internal.ship_template('extract_message',
    'fast model: facts, triples, requested goals and the person''s objectives (seed 004)',
    'fast model: facts, triples, requested goals, the person''s objectives and the people in their life (seed 003 §9)', 0.1,
    $t$TASK: extract
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
 "objectives": [{"description": "something the user is working toward in their own life (self-contained)", "saliency": 0.7, "status": "pending|completed"}],
 "people": [{"name": "how the user named them (a first name when known)", "aliases": ["other names the message uses for the same person, e.g. Mom"], "same_as": "an earlier name the message says is this person, or null", "relation": "their relation to the user: mother|father|sister|brother|partner|friend|boss|colleague|...", "feeling": 0.5, "traits": ["patient"], "topics": ["her garden"], "confidence": 0.9}],
 "relations": [{"a": "a person's name", "b": "another person's name", "kind": "siblings|married|works_with|friends|dislikes|...", "sentiment": -0.5, "source": "said|inferred", "confidence": 0.8}]}
Objectives are the user's own aims ("finish the thesis draft by Friday", "run a half marathon"), not
tasks for you; mark one "completed" when the message says it is done. People are the people in the
user's life this message speaks of (not the user, not you); feeling is how the user feels about
them (-1 to 1); relations are between two of those people, "said" when the user said it. Use empty
lists when there is nothing. Small talk yields nothing.$t$);

-- ---------------------------------------------------------------------------------------
-- Episodes that end with what they meant, created as sql/024_episodes.sql has it
-- ---------------------------------------------------------------------------------------
-- Episodes that end with what they meant (seed 002's episodic memory and auto-extraction;
-- issue #13 §7): who took part, how it went (outcome), how unexpected it was (surprise) and
-- what it taught (lessons); and, after one that went wrong, the censors it suggests.
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

ALTER TABLE episodes
    ADD COLUMN participants text[] NOT NULL DEFAULT '{}',
    ADD COLUMN outcome text CHECK (outcome IN ('success', 'failure', 'mixed', 'neutral')),
    ADD COLUMN surprise real CHECK (surprise BETWEEN 0 AND 1),
    ADD COLUMN lessons text[] NOT NULL DEFAULT '{}' CHECK (cardinality(lessons) <= 5);

-- Censors may wait for the person's word, and may be learned from an episode.
ALTER TABLE censors DROP CONSTRAINT censors_status_check,
    ADD CONSTRAINT censors_status_check CHECK (status IN ('active', 'retired', 'proposed'));
ALTER TABLE censors DROP CONSTRAINT censors_origin_check,
    ADD CONSTRAINT censors_origin_check CHECK (origin IN ('person', 'owner', 'episode'));
ALTER TABLE censor_events DROP CONSTRAINT censor_events_event_check,
    ADD CONSTRAINT censor_events_event_check
        CHECK (event IN ('added', 'activated', 'escalated', 'de_escalated', 'false_positive', 'retired', 'proposed', 'accepted'));

-- The people whose turns an episode holds (its participants).
CREATE FUNCTION dionysus_internal.episode_participants(episode_id uuid) RETURNS text[]
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT m.person ORDER BY m.person), '{}')
      FROM dionysus.episode_memories em
      JOIN dionysus.messages m ON m.memory_id = em.memory_id
     WHERE em.episode_id = episode_participants.episode_id AND NOT m.is_bot AND m.person IS NOT NULL
$$;
-- Episodes summarised before this release carry their participants too.
UPDATE episodes x SET participants = dionysus_internal.episode_participants(x.id) WHERE x.summary IS NOT NULL;

-- Proposes a failed episode's censors to its one participant (SECURITY DEFINER: the driver's
-- role writes no censors; this writes only proposals, only for the episode's own person, only
-- after a failure). Returns the proposed censors' ids.
CREATE FUNCTION dionysus_internal.propose_censors(episode_id uuid, candidates jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    e dionysus.episodes;
    who text[];
    item jsonb;
    sev dionysus.censor_severity;
    id uuid;
    made jsonb := '[]';
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
        RETURN made;
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(candidates) LIMIT 3 LOOP
        IF jsonb_typeof(item) <> 'object' OR jsonb_typeof(item -> 'trigger') IS DISTINCT FROM 'string'
           OR jsonb_typeof(item -> 'reason') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'dionysus: argument "result.episode.censor_candidates": each must be {trigger, reason} strings'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        sev := dionysus_internal.censor_checked(item ->> 'trigger', item ->> 'reason', 'warn', NULL, NULL, NULL, NULL, false);
        -- Nothing twice: not what holds for them, was proposed, or they dropped or lifted; and
        -- at most ten waiting for their word.
        CONTINUE WHEN EXISTS (SELECT 1 FROM dionysus.censors c
                               WHERE c.person = who[1] AND lower(btrim(c.trigger)) = lower(btrim(item ->> 'trigger')))
                   OR (SELECT count(*) FROM dionysus.censors c WHERE c.person = who[1] AND c.status = 'proposed') >= 10;
        INSERT INTO dionysus.censors (person, trigger, embedding, model_key, reason, severity, origin, learned_from_kind, learned_from_id, status)
        VALUES (who[1], btrim(item ->> 'trigger'), dionysus.embed(btrim(item ->> 'trigger')), dionysus_internal.store_model_key(),
                btrim(item ->> 'reason'), sev, 'episode', 'episode', e.id, 'proposed')
        RETURNING censors.id INTO id;
        INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
        VALUES (id, 'proposed', sev, jsonb_build_object('learned_from', 'episode', 'learned_from_id', e.id, 'outcome', e.outcome));
        made := made || to_jsonb(id);
    END LOOP;
    RETURN made;
END $$;

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
    RETURN jsonb_build_object('episode_id', eid, 'outcome', v ->> 'outcome', 'censors_proposed', proposed);
END $$;

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
REVOKE EXECUTE ON FUNCTION accept_censor(uuid, text) FROM PUBLIC;

-- The censors proposed to a person and waiting for their word (/censors shows them after the
-- ones in force), with the episode each was learned from.
CREATE FUNCTION proposed_censors(person text)
    RETURNS TABLE (censor_id uuid, trigger text, reason text, episode_id uuid, episode_summary text, proposed_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT c.id, c.trigger, c.reason, c.learned_from_id, e.summary, c.created_at
      FROM dionysus.censors c
      LEFT JOIN dionysus.episodes e ON c.learned_from_kind = 'episode' AND e.id = c.learned_from_id
     WHERE c.status = 'proposed' AND c.person = proposed_censors.person
     ORDER BY c.created_at, c.id
$$;

-- The episode summary now asks for how it went and what it taught (023's ship_template: the
-- person's own version stays theirs).
SELECT dionysus_internal.ship_template('summarize_episode', 'worker job §6.4: episode summary',
    'worker job §6.4: episode summary, outcome, surprise, lessons and censor candidates (seed 002)', 0.3,
    $t$TASK: summarize_episode
Summarize this episode in two or three sentences: who was involved, what happened, what matters
for the future. Then judge how it went for the person, from your side of the conversation.

Episode:
{{transcript}}

Answer with JSON only:
{"summary": "...",
 "outcome": "success|failure|mixed|neutral (failure: you let them down, upset them, got something wrong or did what they did not want)",
 "surprise": 0.0,
 "lessons": ["what you would do differently or keep doing, one short sentence each (at most 3)"],
 "censor_candidates": [{"trigger": "a thing not to do again, as an action in a few words", "reason": "why, from this episode"}]}
surprise is 0 for a conversation that went as expected, 1 for one that went nothing like it.
Give censor_candidates only for a failure (at most 3), else an empty list.$t$);

-- ---------------------------------------------------------------------------------------
-- complete_work stores a turn's people and relations (sql/007_work_queue.sql)
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
                       'levels', 'people', 'relations', 'episode') THEN
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
-- chat_context brings in the people a message names (sql/012_conversation.sql)
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
        'archetype', shape);
END $$;

-- ---------------------------------------------------------------------------------------
-- As sql/900_api.sql: search paths, comments, the driver's role
-- ---------------------------------------------------------------------------------------
DO $$
DECLARE
    vschema text := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'vector');
BEGIN
    EXECUTE format('ALTER FUNCTION dionysus.chat_context(uuid, integer, integer, boolean) SET search_path = pg_catalog, dionysus, %I', vschema);
END $$;

COMMENT ON FUNCTION complete_work(uuid, jsonb, uuid) IS
    'Applies a claimed work item''s result (memories, facts, triples, goals, goal_progress, identity, worldview, concepts, '
    'episode_summary, message, summary; basis: the memory ids the model was shown; person: whom a reach-out is for; objectives: the person''s, '
    'from their turn''s extraction; people and relations: the people in their life the turn speaks of; dream: a dream''s proposals, stored pending) and marks it done, '
    'in one transaction. What it writes is as private as the item''s person, its heartbeat''s context and the basis; what an inquiry '
    'brought is stored as web content; a reach-out that drew on someone else''s private words, or only on the web, is refused (42501). '
    'Completing again returns the first summary and repeats nothing. With lease (the claim''s lease_token), only its holder may: '
    'a driver whose lease lapsed and whose item was claimed again gets 55000.';
COMMENT ON FUNCTION chat_context(uuid, integer, integer, boolean) IS
    'Everything a reply needs: the last turns of the channel, recalled memories (turns in view left out; facts marked), '
    'triples about the entities named and the person, the people in their life it names with how they relate (people), the active goals, the person''s north stars and objectives; only what the message''s person may see. '
    'With use_archetype, the nearest context archetype sets the turns, memories, similarity threshold and triple depth (reported as archetype), '
    'within max_memories and max_turns (which alone apply when no archetype is near enough).';
COMMENT ON TABLE episodes IS
    'Runs of episodic memories from one source; a gap over dionysus.episode_gap_minutes starts a new one. Once summarised: its participants (the people whose turns it holds), outcome, surprise and lessons (024).';
-- The people in a person's life (023).
COMMENT ON TABLE relation_words IS 'Words that name a relation rather than a person ("mom" is whoever is their mother): word → relation. The owner''s to extend.';
COMMENT ON TABLE known_persons IS
    'The people in each person''s life (of_person: whose life; nobody else ever sees the row): name, relation to the person, how they feel about them (-1…1), traits, topics, mentions and confidence.';
COMMENT ON TABLE person_aliases IS 'Every name a person used for someone (keys lower-cased, a leading "my" dropped); one someone per key in a person''s life.';
COMMENT ON TABLE person_relations IS 'How two people in a person''s life relate: kind, sentiment −1…1, confidence, source (said or inferred: an inference never overwrites what was said), the turn it came from, last update.';
COMMENT ON TABLE person_sources IS 'Where each thing known about someone came from: what (named, alias, relation, feeling, trait, topic, merged, related), its value and the turn.';
COMMENT ON FUNCTION dionysus_internal.person_key(text) IS 'A name''s key: lower case, single spaces, no surrounding punctuation, no possessive ''s, a leading "my"/"our" dropped.';
COMMENT ON FUNCTION dionysus_internal.is_self(text) IS 'Whether a name key is the person themselves or Dionysus (user, me, you…): never someone in their life.';
COMMENT ON FUNCTION dionysus_internal.resolve_person(text, text) IS 'The one known person a name means in a person''s life (an alias, else a relation word naming exactly one person in that relation), or NULL.';
COMMENT ON FUNCTION dionysus_internal.person_strings(jsonb, text, integer) IS 'An extraction item''s list of short strings (22023 naming it otherwise).';
COMMENT ON FUNCTION dionysus_internal.person_number(jsonb, text, double precision, double precision) IS 'An extraction item''s number within bounds, or NULL (22023 naming it otherwise).';
COMMENT ON FUNCTION dionysus_internal.person_alias(uuid, text, text, uuid) IS 'Gives a known person a name they were called: never a relation word or the person themselves; a key already someone else''s stays theirs.';
COMMENT ON FUNCTION dionysus_internal.merge_persons(uuid, uuid, uuid) IS 'Folds one known person into another when the conversation says they are one: aliases, sources, relations, mentions, traits and topics move; a proper name wins over a relation word; 42501 across two people''s lives.';
COMMENT ON FUNCTION dionysus_internal.person_list_add(text[], text[]) IS 'A short list with new words added: no repeats by case, the 20 most recent.';
COMMENT ON FUNCTION dionysus_internal.note_person(text, jsonb, uuid) IS 'One person from an extraction item {name, aliases, same_as, relation, feeling, traits, topics, confidence}: resolved (name and same_as meaning two known people merge them; a proper name in a singular relation is the one known only by its word) or new; aliases added where free; times the turn''s; each change sourced to the turn.';
COMMENT ON FUNCTION dionysus_internal.note_relation(text, jsonb, uuid) IS 'How two people relate, from an extraction item {a, b, kind, sentiment, confidence, source}; either end may be new; an item that cannot be placed (the person themselves, an ambiguous relation word, one person twice, no letters) is skipped, never the turn.';
COMMENT ON FUNCTION dionysus_internal.store_people(text, jsonb, jsonb, uuid) IS 'complete_work''s people and relations of a person''s turn (which must be theirs, 42501), under their people lock (at most 20 of each); returns the people, the relations and how many relations were skipped.';
COMMENT ON FUNCTION dionysus_internal.person_json(dionysus.known_persons, boolean) IS 'A known person as JSON with their aliases and relations both ways; with sources, where each thing came from.';
COMMENT ON FUNCTION person(text, text) IS
    'What is known about someone: every known person the name means (in of_person''s life; in everyone''s when NULL, a superuser''s view only), with aliases, relation, feeling, traits, topics, relations and the turns each came from (the last 30). P0002 when nobody by that name is known.';
COMMENT ON FUNCTION people_of(text) IS 'The people in one person''s life (never anyone else''s), the most mentioned first, each with aliases and relations.';
COMMENT ON FUNCTION forget_known_person(text, uuid) IS 'The person''s word: forgets someone in their life with every alias, relation and source; false when that someone is not theirs (or nobody).';
COMMENT ON FUNCTION dionysus_internal.ship_template(text, text, text, double precision, text) IS
    'Ships a new version of a prompt template: active where the shipped version it follows (by note) is active; beside the person''s own otherwise (a NOTICE names it). Returns the version.';
COMMENT ON FUNCTION dionysus_internal.people_in_context(text, text[]) IS 'The people a message names (its word groups as keys, resolved in the viewer''s life only) with their relations; at most eight.';

-- Episodes that end with what they meant (024).
COMMENT ON FUNCTION dionysus_internal.episode_participants(uuid) IS 'The people whose turns an episode holds.';
COMMENT ON FUNCTION dionysus_internal.propose_censors(uuid, jsonb) IS
    'A failed episode''s censor candidates ({trigger, reason}, at most 3), proposed to its one participant (status proposed, warn, learned from the episode); none for a success or an episode of several people; nothing twice.';
COMMENT ON FUNCTION dionysus_internal.store_episode_outcome(dionysus.work_queue, jsonb) IS
    'complete_work''s result.episode of a summarize_episode item: participants (the episode''s people), outcome, surprise, lessons; a failure proposes its censors.';
COMMENT ON FUNCTION accept_censor(uuid, text) IS 'The person keeps a censor proposed to them: it holds from now on as a warn. Only their own (42501); false when it was not waiting.';
COMMENT ON FUNCTION proposed_censors(text) IS 'The censors proposed to a person and waiting for their word, with the episode each was learned from.';

GRANT SELECT, INSERT, UPDATE ON relation_words, known_persons, person_aliases, person_relations, person_sources TO dionysus_driver;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA dionysus TO dionysus_driver;
GRANT EXECUTE ON FUNCTION dionysus_internal.person_key(text), dionysus_internal.is_self(text), dionysus_internal.resolve_person(text, text), dionysus_internal.person_strings(jsonb, text, integer), dionysus_internal.person_number(jsonb, text, double precision, double precision), dionysus_internal.person_alias(uuid, text, text, uuid), dionysus_internal.merge_persons(uuid, uuid, uuid), dionysus_internal.person_list_add(text[], text[]), dionysus_internal.note_person(text, jsonb, uuid), dionysus_internal.note_relation(text, jsonb, uuid), dionysus_internal.store_people(text, jsonb, jsonb, uuid), dionysus_internal.person_json(dionysus.known_persons, boolean), person(text, text), dionysus_internal.people_in_context(text, text[]), dionysus_internal.ship_template(text, text, text, double precision, text), people_of(text), forget_known_person(text, uuid), dionysus_internal.episode_participants(uuid), dionysus_internal.propose_censors(uuid, jsonb), dionysus_internal.store_episode_outcome(dionysus.work_queue, jsonb), accept_censor(uuid, text), proposed_censors(text) TO dionysus_driver;
-- People: the driver's extraction writes them (complete_work, resolution merges and deletes);
-- the words for relations are the owner's.
-- Whose life a row is in is fixed when it is written.
GRANT DELETE ON known_persons, person_relations TO dionysus_driver;
REVOKE INSERT, UPDATE ON relation_words FROM dionysus_driver;
REVOKE UPDATE ON known_persons, person_aliases, person_relations FROM dionysus_driver;
GRANT UPDATE (name, relation, feeling, traits, topics, mentions, confidence, first_mentioned_at, last_mentioned_at) ON known_persons TO dionysus_driver;
GRANT UPDATE (known_person_id) ON person_aliases TO dionysus_driver;
GRANT UPDATE (from_id, to_id, sentiment, confidence, source, message_id, updated_at) ON person_relations TO dionysus_driver;
-- Episodes: a censor a failure proposes is written only through propose_censors (the driver
-- writes no censors); keeping one is the person's word (accept_censor).
REVOKE EXECUTE ON FUNCTION dionysus_internal.propose_censors(uuid, jsonb) FROM PUBLIC;
