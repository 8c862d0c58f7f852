-- The import organ (`dionysus import`): a person's history brought in from elsewhere (a Discord
-- data package, a JSON chat, a LoCoMo conversation) into the message log, with its original
-- times and authors. The driver reads the files; everything written happens here.
--
--   begin_import     one row per (person, input): where a second run of the same input resumes
--   import_messages  a batch, in order, at the position the import has reached: one transaction,
--                    and a batch sent again (its commit was never seen) skips what is done
--
-- What an imported turn becomes:
--   a message   immutable like every turn, marked with its import, at its original time;
--   a memory    episodic and private to the person, in episodes of its own times (source
--               'imported:["<person>", "<platform>", "<channel>"]': apart from the live conversation's
--               episodes and from anyone else's import of the same chat, so a summary is one person's);
--               someone else's turn is remembered as "Name: words";
--   work        the person's own turns are queued for extraction, every memory for concepts and
--               every episode for a summary (enqueue_language_work), all at background priority
--               (work_queue.priority -1), so the live conversation's work always goes first.
-- History is not the person speaking now: nothing of the proactive mind moves (no signals, no
-- session, no rhythm), and an imported author is never someone a reach-out can go to.
--
-- Lock order (002): the import's row before anything else (only another run of the same input
-- waits on it), then the batch's channel locks (1) in sorted order, then each turn's episode
-- lock (7, as remember takes it) before its episode row.

CREATE TABLE imports (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Whose history it is: every memory it makes is private to them.
    person      text NOT NULL CHECK (length(btrim(person)) > 0),
    kind        text NOT NULL CHECK (kind IN ('discord', 'chat', 'locomo')),
    -- What was imported, as the person named it (a path), for `dionysus status` and people.
    label       text NOT NULL,
    -- The SHA-256 of the parsed turns in their order: the same input resumes, a changed one is new.
    fingerprint text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    total       integer NOT NULL CHECK (total >= 0),
    -- How many of the turns, in order, are committed.
    position    integer NOT NULL DEFAULT 0 CHECK (position >= 0 AND position <= total),
    imported    integer NOT NULL DEFAULT 0 CHECK (imported >= 0),
    -- Turns the log already held (the live conversation logged them, or another import did).
    duplicates  integer NOT NULL DEFAULT 0 CHECK (duplicates >= 0),
    started_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    UNIQUE (person, fingerprint)
);
COMMENT ON TABLE imports IS
    'Histories brought in from elsewhere (dionysus import): whose, what, and how far; a rerun of the same input (person, fingerprint) resumes at position.';
ALTER TABLE messages ADD CONSTRAINT messages_import_id_fkey FOREIGN KEY (import_id) REFERENCES imports (id);
CREATE INDEX messages_import ON messages (import_id) WHERE import_id IS NOT NULL;

-- Starts an import, or finds the one this input began (same person, same fingerprint).
CREATE FUNCTION begin_import(person text, kind text, label text, fingerprint text, total integer) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE imp dionysus.imports;
BEGIN
    IF person IS NULL OR btrim(person) = '' OR person !~ '^[^:\s]+:\S' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": % is not a person key (platform:author, see person_key)', coalesce(person, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF kind IS NULL OR kind NOT IN ('discord', 'chat', 'locomo') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "kind": % is not discord, chat or locomo', coalesce(kind, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF fingerprint IS NULL OR fingerprint !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "fingerprint": must be a SHA-256 in hex' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF total IS NULL OR total < 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "total": % must be at least 0', coalesce(total::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- As person_key writes it (the platform in lower case), or the person would not find it.
    person := lower(split_part(btrim(person), ':', 1)) || ':' || btrim(substr(btrim(person), strpos(btrim(person), ':') + 1));
    INSERT INTO dionysus.imports (person, kind, label, fingerprint, total)
    VALUES (person, kind, left(coalesce(nullif(btrim(label), ''), kind), 500), fingerprint, total)
    ON CONFLICT ON CONSTRAINT imports_person_fingerprint_key DO UPDATE SET updated_at = dionysus.imports.updated_at
    RETURNING * INTO imp;
    IF imp.total <> total OR imp.kind <> kind THEN
        RAISE EXCEPTION 'dionysus: invalid argument "total": import % of this input has % turns of kind %, not %', imp.id, imp.total, imp.kind, total
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN jsonb_build_object('import_id', imp.id, 'position', imp.position, 'total', imp.total, 'imported', imp.imported,
                              'duplicates', imp.duplicates, 'started_at', imp.started_at, 'finished_at', imp.finished_at);
END $$;
COMMENT ON FUNCTION begin_import(text, text, text, text, integer) IS
    'Starts an import of total turns for a person, or finds the one this input (its fingerprint) began. Returns {import_id, position, total, imported, duplicates, started_at, finished_at}.';

-- An item's time, or a clear error naming it.
CREATE FUNCTION dionysus_internal.import_time(value text, arg text) RETURNS timestamptz
    LANGUAGE plpgsql STABLE AS $$
DECLARE at timestamptz;
BEGIN
    BEGIN
        at := value::timestamptz;
    EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_text_representation
                   OR invalid_parameter_value OR invalid_time_zone_displacement_value THEN
        at := NULL;
    END;
    IF at IS NULL OR at IN ('infinity', '-infinity') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": % is not a time', arg, coalesce(quote_literal(value), 'NULL')
            USING ERRCODE = 'invalid_datetime_format';
    END IF;
    IF at < '1900-01-01 00:00+00' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": % is before 1900', arg, value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF at > now() + interval '1 day' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": % is in the future', arg, value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN at;
END $$;
COMMENT ON FUNCTION dionysus_internal.import_time(text, text) IS 'An imported turn''s time, or 22007/22023 naming the argument (not a time, before 1900, or in the future).';

-- A batch of turns at `first_position` of the import: each goes into the log once (a turn the
-- log holds already is counted as a duplicate), in one transaction. Items:
--   {"platform", "id" (the platform's message id), "channel", "author", "name" (optional display
--    name), "role": "person" | "bot" | "other", "text", "at" (timestamptz)}
-- A Discord package's ids are Discord's own (the live log's turns are not doubled); any other
-- input's ids are only its own, so they are kept per person and channel: another person's file
-- numbering its turns 1, 2, … never collides with this one, nor with a live turn.
CREATE FUNCTION import_messages(import_id uuid, first_position integer, items jsonb) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    imp dionysus.imports;
    n integer;
    done integer;
    item jsonb;
    i integer;
    arg text;
    k text;
    longest integer := coalesce(nullif(current_setting('dionysus.max_content_length', true), '')::int, 100000);
    at timestamptz;
    plat text;
    pid text;
    body text;
    src text;
    msg uuid;
    mem uuid;
    prev uuid;
    role text;
    added integer := 0;
    dup integer := 0;
    extractions integer := 0;
    attempts integer := dionysus_internal.heartbeat_setting('work_max_attempts')::int;
BEGIN
    IF import_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "import_id": must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF first_position IS NULL OR first_position < 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "first_position": % must be at least 0', coalesce(first_position::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF items IS NULL OR jsonb_typeof(items) <> 'array' OR jsonb_array_length(items) NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "items": must be an array of 1 to 1000 turns' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    n := jsonb_array_length(items);
    SELECT * INTO imp FROM dionysus.imports x WHERE x.id = import_messages.import_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "import_id": no import with id %', import_id USING ERRCODE = 'no_data_found';
    END IF;
    IF first_position > imp.position THEN
        RAISE EXCEPTION 'dionysus: invalid argument "first_position": % is past where import % stands (%): batches go in order',
            first_position, import_id, imp.position USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF first_position + n > imp.total THEN
        RAISE EXCEPTION 'dionysus: invalid argument "items": % turns from position % run past the import''s % turns', n, first_position, imp.total
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A batch sent again after a commit its sender never saw: the part already in is skipped.
    done := least(imp.position - first_position, n);
    -- Every item is checked before anything is written, so an error names the first bad one.
    FOR item, i IN SELECT e.value, e.ordinality::int - 1 FROM jsonb_array_elements(items) WITH ORDINALITY e WHERE e.ordinality > done LOOP
        IF jsonb_typeof(item) <> 'object' THEN
            RAISE EXCEPTION 'dionysus: invalid argument "items[%]": must be an object', i USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOREACH k IN ARRAY ARRAY['platform', 'id', 'channel', 'author', 'text'] LOOP
            arg := format('items[%s].%s', i, k);
            IF jsonb_typeof(item -> k) IS DISTINCT FROM 'string' OR (item ->> k) ~ '^\s*$' THEN
                RAISE EXCEPTION 'dionysus: invalid argument "%": must be a non-empty string', arg USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF k <> 'text' AND length(item ->> k) > 200 THEN
                RAISE EXCEPTION 'dionysus: invalid argument "%": longer than 200 characters', arg USING ERRCODE = 'string_data_right_truncation';
            END IF;
        END LOOP;
        IF coalesce(item ->> 'role', '') NOT IN ('person', 'bot', 'other') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "items[%].role": must be person, bot or other', i USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF item ? 'name' AND item -> 'name' <> 'null' AND (jsonb_typeof(item -> 'name') <> 'string' OR length(item ->> 'name') > 100) THEN
            RAISE EXCEPTION 'dionysus: invalid argument "items[%].name": must be a string of at most 100 characters', i
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- What is remembered (someone else's words with their name) fits dionysus.max_content_length.
        body := CASE WHEN item ->> 'role' = 'other' THEN coalesce(nullif(btrim(item ->> 'name'), ''), item ->> 'author') || ': ' ELSE '' END
                || (item ->> 'text');
        IF length(body) > longest THEN
            RAISE EXCEPTION 'dionysus: invalid argument "items[%].text": longer than dionysus.max_content_length (%)', i, longest
                USING ERRCODE = 'string_data_right_truncation';
        END IF;
        -- A Discord package holds Discord's own messages: snowflake ids on platform discord.
        IF imp.kind = 'discord' AND (lower(btrim(item ->> 'platform')) <> 'discord' OR (item ->> 'id') !~ '^[0-9]{1,20}$') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "items[%].id": a Discord package''s turn is a Discord message (platform discord, a numeric id)', i
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM dionysus_internal.import_time(item ->> 'at', format('items[%s].at', i));
    END LOOP;
    -- The channels' locks up front, in one order (the global lock order's 1).
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.channel:' || c.platform || ':' || c.channel, 0))
       FROM (SELECT DISTINCT lower(btrim(e.value ->> 'platform')) AS platform, e.value ->> 'channel' AS channel
               FROM jsonb_array_elements(items) WITH ORDINALITY e WHERE e.ordinality > done ORDER BY 1, 2) c;
    FOR item, i IN SELECT e.value, e.ordinality::int - 1 FROM jsonb_array_elements(items) WITH ORDINALITY e WHERE e.ordinality > done
                    ORDER BY e.ordinality LOOP
        plat := lower(btrim(item ->> 'platform'));
        pid := CASE WHEN imp.kind = 'discord' THEN item ->> 'id'
                    ELSE jsonb_build_array(imp.person, item ->> 'channel', item ->> 'id')::text END;
        IF EXISTS (SELECT 1 FROM dionysus.messages x WHERE x.platform = plat AND x.platform_message_id = pid) THEN
            dup := dup + 1;
            CONTINUE;
        END IF;
        at := dionysus_internal.import_time(item ->> 'at', format('items[%s].at', i));
        role := item ->> 'role';
        msg := gen_random_uuid();
        -- One person's history of one chat (unambiguous, whatever its parts contain).
        src := 'imported:' || jsonb_build_array(imp.person, plat, item ->> 'channel')::text;
        body := CASE WHEN role = 'other' THEN coalesce(nullif(btrim(item ->> 'name'), ''), item ->> 'author') || ': ' || (item ->> 'text')
                     ELSE item ->> 'text' END;
        -- A turn older than the source's open episode (files need not be in order): that episode
        -- ends where it is, and remember opens one at this turn (its lock first: the order's 7).
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.episode:' || src, 0));
        UPDATE dionysus.episodes e SET ended_at = greatest(e.last_event_at, e.started_at)
         WHERE e.source = src AND e.ended_at IS NULL AND e.last_event_at > at;
        mem := dionysus.remember(body, 'episodic', CASE role WHEN 'bot' THEN 0.3 WHEN 'other' THEN 0.4 ELSE 0.5 END, 0.0,
                                 jsonb_build_object('message_id', msg, 'platform', plat, 'channel_id', item ->> 'channel',
                                                    'role', CASE role WHEN 'bot' THEN 'assistant' WHEN 'person' THEN 'user' ELSE 'other' END,
                                                    'author', coalesce(nullif(btrim(item ->> 'name'), ''), item ->> 'author'),
                                                    'import_id', imp.id),
                                 src, created_at => at, private_to => ARRAY[imp.person]);
        -- Chained to the person's turn before it in that chat.
        SELECT x.id INTO prev FROM dionysus.messages x
         WHERE x.platform = plat AND x.channel_id = item ->> 'channel' AND x.person = imp.person AND (x.created_at, x.id) < (at, msg)
         ORDER BY x.created_at DESC, x.id DESC LIMIT 1;
        INSERT INTO dionysus.messages (id, platform, platform_message_id, channel_id, author_id, is_bot, is_proactive, content,
                                       prev_message_id, memory_id, person, created_at, import_id)
        VALUES (msg, plat, pid, item ->> 'channel', item ->> 'author', role = 'bot', false, item ->> 'text',
                prev, mem, imp.person, at, imp.id);
        -- The person's own words are what extraction reads (facts, triples, objectives are theirs).
        IF role = 'person' THEN
            INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, priority)
            VALUES ('extract_message:' || msg, 'extract_message',
                    jsonb_build_object('message_id', msg, 'memory_id', mem, 'source', 'imported:' || msg, 'person', imp.person),
                    attempts, -1)
            ON CONFLICT (idempotency_key) DO NOTHING;
            extractions := extractions + 1;
        END IF;
        INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, priority)
        VALUES ('extract_concepts:' || mem, 'extract_concepts', jsonb_build_object('memory_id', mem), attempts, -1)
        ON CONFLICT (idempotency_key) DO NOTHING;
        added := added + 1;
    END LOOP;
    -- A late copy of an earlier batch never moves the import back.
    UPDATE dionysus.imports x SET position = greatest(x.position, first_position + n), imported = x.imported + added,
           duplicates = x.duplicates + dup, updated_at = now(),
           finished_at = coalesce(x.finished_at, CASE WHEN greatest(x.position, first_position + n) = x.total THEN now() END)
     WHERE x.id = imp.id
    RETURNING * INTO imp;
    IF added > 0 THEN
        PERFORM pg_notify('dionysus_work', jsonb_build_object('queued', added + extractions)::text);
    END IF;
    RETURN jsonb_build_object('import_id', imp.id, 'position', imp.position, 'total', imp.total, 'imported', added,
                              'duplicates', dup, 'skipped', greatest(done, 0), 'finished', imp.finished_at IS NOT NULL);
END $$;
COMMENT ON FUNCTION import_messages(uuid, integer, jsonb) IS
    'A batch of turns at first_position of an import, in one transaction: each into the message log once, at its own time, '
    'as a memory private to the person; their own turns queued for extraction at background priority. A batch sent again skips what is in. '
    'Returns {import_id, position, total, imported, duplicates, skipped, finished}: imported and duplicates are this batch''s.';

-- The imports, newest first, with what the queue still has to do for each (for `dionysus status`).
CREATE FUNCTION import_status(max_items integer DEFAULT 10) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(to_jsonb(s) ORDER BY s.started_at DESC), '[]'::jsonb)
      FROM (SELECT x.id AS import_id, x.person, x.kind, x.label, x.total, x.position, x.imported, x.duplicates,
                   x.started_at, x.finished_at,
                   (SELECT count(*) FROM dionysus.messages m JOIN dionysus.work_queue q
                                     ON q.idempotency_key = 'extract_message:' || m.id AND q.status IN ('pending', 'claimed')
                     WHERE m.import_id = x.id) AS extractions_waiting
              FROM dionysus.imports x
             ORDER BY x.started_at DESC
             LIMIT greatest(coalesce(max_items, 10), 0)) s
$$;
COMMENT ON FUNCTION import_status(integer) IS 'The latest imports with their progress and the extractions the queue still owes them.';
