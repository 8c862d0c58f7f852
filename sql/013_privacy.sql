-- Privacy between people, and the trust of what came from the web (Trust I).
--
-- One Dionysus talks with several people. What one person says in private never reaches
-- another: every memory, triple and goal carries `private_to`, the people whose private
-- words it holds (NULL: nobody's), and inherits it from what it was made of —
--   a turn                      → its person (log_message)
--   facts, triples, goals taken from a turn → that person (complete_work of extract_message)
--   what a heartbeat writes     → the people in its context (heartbeat_log.private_to) and in
--                                 the memories the driver showed the model (result.basis)
-- A person sees what is private to nobody but them (visible_to). Person-facing reads
-- (chat_context, recall(person => …), triples_about(…, person)) apply it; a reach-out to a
-- person is refused when its decision drew on someone else's private words.
--
-- Web pages are untrusted: what an inquiry brings back is stored with source 'web' at low
-- importance and confidence, and never becomes identity, worldview or a message to the
-- person on the web's word alone (web_only_basis).

-- 'discord:123456', 'terminal:me': one person across their channels on a platform.
CREATE FUNCTION person_key(platform text, author_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN lower(btrim(platform)) || ':' || btrim(author_id);
COMMENT ON FUNCTION person_key(text, text) IS 'The key of a person on a platform, ''platform:author_id'': what private_to lists.';

-- Whether `person` may see something private to `private_to` (NULL person: only what is
-- private to nobody).
CREATE FUNCTION dionysus_internal.visible_to(private_to text[], person text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN private_to IS NULL OR (person IS NOT NULL AND private_to <@ ARRAY[person]);
COMMENT ON FUNCTION dionysus_internal.visible_to(text[], text) IS
    'Whether a person may see something private to private_to: it is private to nobody, or to nobody but them.';

-- The triples about these entities that a person may see, found by index (001): by subject and
-- by object, each under the two privacy keys visible_to lets through (nobody's, theirs alone; a
-- stored private_to is NULL or sorted, distinct names: add_triple), checked by visible_to again.
-- (A row written otherwise, '{a,a}', could only be missed here, never shown to another.)
CREATE FUNCTION dionysus_internal.triples_seen(ents uuid[], viewer text) RETURNS SETOF dionysus.triples
    LANGUAGE sql STABLE AS $$
    SELECT u.* FROM (
        SELECT t.* FROM dionysus.triples t
         WHERE t.subject_id = ANY (ents) AND coalesce(t.private_to, '{}'::text[]) IN ('{}'::text[], ARRAY[viewer])
        UNION
        SELECT t.* FROM dionysus.triples t
         WHERE t.object_id = ANY (ents) AND coalesce(t.private_to, '{}'::text[]) IN ('{}'::text[], ARRAY[viewer])) u
     WHERE dionysus_internal.visible_to(u.private_to, viewer)
$$;
COMMENT ON FUNCTION dionysus_internal.triples_seen(uuid[], text) IS
    'The triples in which any of these entities is subject or object that the person may see (visible_to), found by index: a turn never reads other people''s private triples.';

-- The privacy of something made of two things: the people of both (NULL when neither is private).
CREATE FUNCTION dionysus_internal.privacy_union(a text[], b text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN a IS NULL AND b IS NULL THEN NULL
                ELSE (SELECT array_agg(DISTINCT p ORDER BY p) FROM unnest(coalesce(a, '{}') || coalesce(b, '{}')) p) END;
COMMENT ON FUNCTION dionysus_internal.privacy_union(text[], text[]) IS 'The privacy of something made of two things: the people of both, sorted; NULL if neither is private.';

-- The privacy of what was made from these memories.
CREATE FUNCTION dionysus_internal.memory_privacy(memory_ids uuid[]) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN (SELECT array_agg(DISTINCT p ORDER BY p)
              FROM dionysus.memories m, unnest(m.private_to) p WHERE m.id = ANY(memory_ids));
COMMENT ON FUNCTION dionysus_internal.memory_privacy(uuid[]) IS 'The people whose private words these memories hold (what is made from them is as private).';

-- Each memory with its circle: the people whose private words it carries, sorted (NULL:
-- nobody's). A model call that reads several memories reads one circle's (the driver's concept
-- batches), so what one person said never shapes what is made of another's memory.
CREATE FUNCTION memory_circles(ids uuid[]) RETURNS TABLE (id uuid, content text, circle text[])
    LANGUAGE sql STABLE AS $$
    SELECT m.id, m.content, dionysus_internal.privacy_union(m.private_to, NULL)
      FROM unnest(ids) WITH ORDINALITY i(id, n) JOIN dionysus.memories m ON m.id = i.id ORDER BY i.n
$$;
COMMENT ON FUNCTION memory_circles(uuid[]) IS
    'The memories of ids, in that order, each with its circle: the people whose private words it carries, sorted (NULL: nobody''s). A model call reads one circle''s memories at a time.';

-- True when the memories closest in meaning to `content` (cosine similarity ≥ 0.5, the five
-- nearest) exist and all came from the web: the web is then its only basis. Identity,
-- worldview and reach-outs must not rest on the web alone.
CREATE FUNCTION dionysus_internal.web_only_basis(content text) RETURNS boolean
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
COMMENT ON FUNCTION dionysus_internal.web_only_basis(text) IS
    'True when the active memories closest to a text (five nearest, similarity >= 0.5) exist and all came from the web: '
    'identity, worldview and reach-outs resting on it alone are refused.';

-- The person a reach-out goes to: the one named (who must have talked here), else whoever
-- wrote last. With the platform and author, so the driver can open their direct messages.
CREATE FUNCTION reach_out_target(person text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE m dionysus.messages;
BEGIN
    SELECT * INTO m FROM dionysus.messages x
     WHERE NOT x.is_bot AND x.person IS NOT NULL AND x.import_id IS NULL  -- an imported author is nobody to reach here
       AND (reach_out_target.person IS NULL OR x.person = reach_out_target.person)
     ORDER BY x.created_at DESC, x.id DESC LIMIT 1;
    IF NOT FOUND THEN
        IF person IS NOT NULL THEN
            RAISE EXCEPTION 'dionysus: argument "person": nobody called % has talked here', dionysus_internal.input_prefix(person) USING ERRCODE = 'no_data_found';
        END IF;
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('person', m.person, 'platform', m.platform, 'author_id', m.author_id);
END $$;
COMMENT ON FUNCTION reach_out_target(text) IS
    'Whom a reach-out goes to: the named person (who must have talked here), else whoever wrote last; {person, platform, author_id}.';

-- The people Dionysus talks with, for the heartbeat's context (whom a reach-out could go to).
CREATE FUNCTION known_people() RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('person', p.person, 'last_message_at', p.at) ORDER BY p.at DESC), '[]'::jsonb)
      FROM (SELECT person, max(created_at) AS at FROM dionysus.messages
             WHERE NOT is_bot AND person IS NOT NULL AND import_id IS NULL GROUP BY person ORDER BY max(created_at) DESC LIMIT 20) p
$$;
COMMENT ON FUNCTION known_people() IS 'The people who talk with Dionysus, most recent first (for the heartbeat''s context).';
