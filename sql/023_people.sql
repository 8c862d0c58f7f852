-- The people in a person's life (issue #13 §6): whom they talk about, how they
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
COMMENT ON TABLE relation_words IS 'Words that name a relation rather than a person ("mom" is whoever is their mother): word → relation. The owner''s to extend.';
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
COMMENT ON TABLE known_persons IS
    'The people in each person''s life (of_person: whose life; nobody else ever sees the row): name, relation to the person, how they feel about them (-1…1), traits, topics, mentions and confidence.';
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
COMMENT ON TABLE person_aliases IS 'Every name a person used for someone (keys lower-cased, a leading "my" dropped); one someone per key in a person''s life.';
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
COMMENT ON TABLE person_relations IS 'How two people in a person''s life relate: kind, sentiment −1…1, confidence, source (said or inferred: an inference never overwrites what was said), the turn it came from, last update.';
CREATE INDEX person_relations_to ON person_relations (to_id);
-- Its foreign keys, indexed (001).
CREATE INDEX person_relations_message_id ON person_relations (message_id) WHERE message_id IS NOT NULL;

-- Where each thing known about someone came from: the turn, and what it said.
CREATE TABLE person_sources (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    known_person_id uuid NOT NULL REFERENCES known_persons (id) ON DELETE CASCADE,
    what            text NOT NULL CHECK (what IN ('named', 'alias', 'relation', 'feeling', 'trait', 'topic', 'merged', 'related')),
    value           text,
    message_id      uuid REFERENCES messages (id) ON DELETE SET NULL,
    at              timestamptz NOT NULL DEFAULT dionysus.clock_now()
);
COMMENT ON TABLE person_sources IS 'Where each thing known about someone came from: what (named, alias, relation, feeling, trait, topic, merged, related), its value and the turn.';
CREATE INDEX person_sources_person ON person_sources (known_person_id, at);
-- Its foreign keys, indexed (001).
CREATE INDEX person_sources_message_id ON person_sources (message_id) WHERE message_id IS NOT NULL;

-- A name's key: lower case, single spaces, no surrounding punctuation, no possessive "'s", a
-- leading "my"/"our" dropped ("My Mother's," → "mother").
CREATE FUNCTION dionysus_internal.person_key(name text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT nullif(regexp_replace(regexp_replace(
               regexp_replace(lower(btrim(regexp_replace(name, '\s+', ' ', 'g'))), '^[^[:alnum:]]+|[^[:alnum:]]+$', '', 'g'),
               '[''’]s$', ''), '^(my|our) ', ''), '')
$$;
COMMENT ON FUNCTION dionysus_internal.person_key(text) IS 'A name''s key: lower case, single spaces, no surrounding punctuation, no possessive ''s, a leading "my"/"our" dropped.';

-- Whether a key is the person themselves (or Dionysus): never someone in their life.
CREATE FUNCTION dionysus_internal.is_self(k text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT k IN ('user', 'the user', 'me', 'i', 'myself', 'you', 'yourself')
$$;
COMMENT ON FUNCTION dionysus_internal.is_self(text) IS 'Whether a name key is the person themselves or Dionysus (user, me, you…): never someone in their life.';

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
COMMENT ON FUNCTION dionysus_internal.resolve_person(text, text) IS 'The one known person a name means in a person''s life (an alias, else a relation word naming exactly one person in that relation), or NULL.';

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
COMMENT ON FUNCTION dionysus_internal.person_strings(jsonb, text, integer) IS 'An extraction item''s list of short strings (22023 naming it otherwise).';

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
COMMENT ON FUNCTION dionysus_internal.person_number(jsonb, text, double precision, double precision) IS 'An extraction item''s number within bounds, or NULL (22023 naming it otherwise).';

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
COMMENT ON FUNCTION dionysus_internal.person_alias(uuid, text, text, uuid) IS 'Gives a known person a name they were called: never a relation word or the person themselves; a key already someone else''s stays theirs.';

-- Appends new words to a short list (most recent last, at most 20, no repeats by case).
CREATE FUNCTION dionysus_internal.person_list_add(list text[], more text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(array_agg(t ORDER BY n), '{}')
      FROM (SELECT t, n FROM (SELECT DISTINCT ON (lower(t)) t, n FROM unnest(list || more) WITH ORDINALITY u(t, n) ORDER BY lower(t), n DESC) d
             ORDER BY n DESC LIMIT 20) x
$$;
COMMENT ON FUNCTION dionysus_internal.person_list_add(text[], text[]) IS 'A short list with new words added: no repeats by case, the 20 most recent.';

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
COMMENT ON FUNCTION dionysus_internal.merge_persons(uuid, uuid, uuid) IS 'Folds one known person into another when the conversation says they are one: aliases, sources, relations, mentions, traits and topics move; a proper name wins over a relation word; 42501 across two people''s lives.';

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
COMMENT ON FUNCTION dionysus_internal.note_person(text, jsonb, uuid) IS 'One person from an extraction item {name, aliases, same_as, relation, feeling, traits, topics, confidence}: resolved (name and same_as meaning two known people merge them; a proper name in a singular relation is the one known only by its word) or new; aliases added where free; times the turn''s; each change sourced to the turn.';

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
COMMENT ON FUNCTION dionysus_internal.note_relation(text, jsonb, uuid) IS 'How two people relate, from an extraction item {a, b, kind, sentiment, confidence, source}; either end may be new; an item that cannot be placed (the person themselves, an ambiguous relation word, one person twice, no letters) is skipped, never the turn.';

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
COMMENT ON FUNCTION dionysus_internal.store_people(text, jsonb, jsonb, uuid) IS 'complete_work''s people and relations of a person''s turn (which must be theirs, 42501), under their people lock (at most 20 of each); returns the people, the relations and how many relations were skipped.';

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
COMMENT ON FUNCTION dionysus_internal.person_json(dionysus.known_persons, boolean) IS 'A known person as JSON with their aliases and relations both ways; with sources, where each thing came from.';

-- What is known about someone: every known person a name means (in one person's life with
-- of_person; in everyone's for the owner), with their relations and where each thing came from.
CREATE FUNCTION person(name text, of_person text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    -- Bounded before anything reads them: a name is at most 200 characters, as note_person keeps them.
    k text := dionysus_internal.person_key(dionysus_internal.bounded_text('name', person.name, 200));
    hits jsonb;
BEGIN
    PERFORM dionysus_internal.bounded_text('of_person', person.of_person, 200);
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
        RAISE EXCEPTION 'dionysus: argument "name": nobody called % is known%', dionysus_internal.input_prefix(person.name),
            CASE WHEN person.of_person IS NULL THEN '' ELSE ' to ' || person.of_person END USING ERRCODE = 'no_data_found';
    END IF;
    RETURN hits;
END $$;
COMMENT ON FUNCTION person(text, text) IS
    'What is known about someone: every known person the name means (in of_person''s life; in everyone''s when NULL, a superuser''s view only), with aliases, relation, feeling, traits, topics, relations and the turns each came from (the last 30). P0002 when nobody by that name is known; a name or of_person of more than 200 characters is 22001.';

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
COMMENT ON FUNCTION people_of(text) IS 'The people in one person''s life (never anyone else''s), the most mentioned first, each with aliases and relations.';

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
COMMENT ON FUNCTION forget_known_person(text, uuid) IS 'The person''s word: forgets someone in their life with every alias, relation and source; false when that someone is not theirs (or nobody).';

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
COMMENT ON FUNCTION dionysus_internal.people_in_context(text, text[]) IS 'The people a message names (its word groups as keys, resolved in the viewer''s life only) with their relations; at most eight.';

-- The prompt that turns a person's turn into memory asks for the people in it too:
-- extract_message's version 3 (012).
