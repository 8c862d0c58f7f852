-- Dionysus 0.4.0 → 0.5.0: histories brought in from elsewhere (018_import.sql, behind
-- `dionysus import`), and background priority in the work queue so an import's extraction,
-- concepts and summaries wait for the live conversation's. Every row is kept: existing work
-- items get priority 0 (as before), existing turns no import. NOTIFY dionysus_contact carries
-- only the evaluation's id (any role that may connect can LISTEN).

ALTER TABLE work_queue ADD COLUMN priority smallint NOT NULL DEFAULT 0;
DROP INDEX work_queue_pending;
CREATE INDEX work_queue_pending ON work_queue (priority DESC, created_at, id) WHERE status IN ('pending', 'claimed');
ALTER TABLE messages ADD COLUMN import_id uuid;

-- ---------------------------------------------------------------------------------------
-- A new organ, created whole as sql/018_import.sql has it
-- ---------------------------------------------------------------------------------------

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

-- ---------------------------------------------------------------------------------------
-- Functions of the older organs that changed, as 0.5.0 has them
-- ---------------------------------------------------------------------------------------

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
         ORDER BY q.priority DESC, q.created_at, q.id LIMIT max_items FOR UPDATE SKIP LOCKED));
END $$;

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
-- ({proposals, note}, for a dream item: recorded as pending proposals).
-- Facts and triples from a conversation turn (params.memory_id) keep it as provenance.
-- Everything written is as private as what it was made of (sql/005_privacy.sql): the item's
-- person, its heartbeat's context and the basis. What an inquiry brought from the web is
-- stored as source 'web' (importance at most 0.3, confidence 0.5); identity, worldview and
-- reach-outs that rest on the web alone are refused, and so is a reach-out that drew on
-- someone else's private words (42501).
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

-- Turns are immutable: only the links that deletions clear may change.
CREATE OR REPLACE FUNCTION dionysus_internal.messages_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.platform, NEW.platform_message_id, NEW.channel_id, NEW.author_id, NEW.is_bot, NEW.is_proactive,
        NEW.content, NEW.created_at, NEW.person, NEW.import_id)
       IS DISTINCT FROM
       (OLD.platform, OLD.platform_message_id, OLD.channel_id, OLD.author_id, OLD.is_bot, OLD.is_proactive,
        OLD.content, OLD.created_at, OLD.person, OLD.import_id)
       OR (NEW.memory_id IS NOT NULL AND NEW.memory_id IS DISTINCT FROM OLD.memory_id)
       OR (NEW.prev_message_id IS NOT NULL AND NEW.prev_message_id IS DISTINCT FROM OLD.prev_message_id)
       OR (NEW.reply_to IS NOT NULL AND NEW.reply_to IS DISTINCT FROM OLD.reply_to) THEN
        RAISE EXCEPTION 'dionysus: the message log is immutable (message %)', OLD.id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
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
        'goals', coalesce((SELECT jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title) ORDER BY g.last_touched DESC)
                             FROM dionysus.goals g WHERE g.priority = 'active' AND dionysus_internal.visible_to(g.private_to, viewer)),
                          '[]'::jsonb),
        -- What matters most to them (017), in every context; and what they are working toward.
        'north_stars', coalesce((SELECT jsonb_agg(n.content ORDER BY n.created_at) FROM dionysus.person_north_stars(viewer) n), '[]'::jsonb),
        'objectives', coalesce((SELECT jsonb_agg(jsonb_build_object('description', o.description, 'saliency', round(o.saliency::numeric, 2)))
                                  FROM (SELECT * FROM dionysus.person_objectives(viewer) LIMIT 5) o), '[]'::jsonb),
        'archetype', shape);
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
    -- Five lived episodes a pass; twenty of an import's (018: source 'imported:…') besides, at
    -- background priority, so a long history is summarised without holding up the present.
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, priority)
    SELECT 'summarize_episode:' || e.id, 'summarize_episode', jsonb_build_object('episode_id', e.id), attempts, e.priority
      FROM (SELECT x.id, x.ended_at, CASE WHEN x.source LIKE 'imported:%' THEN -1 ELSE 0 END AS priority,
                   row_number() OVER (PARTITION BY x.source LIKE 'imported:%' ORDER BY x.ended_at) AS rank
              FROM dionysus.episodes x
             WHERE x.ended_at IS NOT NULL AND x.summary IS NULL AND x.memory_count > 0
               AND x.ended_at < now() - make_interval(secs => dionysus_internal.heartbeat_setting('summary_delay_minutes') * 60)
               AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.idempotency_key = 'summarize_episode:' || x.id)) e
     WHERE e.rank <= CASE WHEN e.priority < 0 THEN 20 ELSE 5 END
     ORDER BY e.ended_at
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

-- The person a reach-out goes to: the one named (who must have talked here), else whoever
-- wrote last. With the platform and author, so the driver can open their direct messages.
CREATE OR REPLACE FUNCTION reach_out_target(person text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE m dionysus.messages;
BEGIN
    SELECT * INTO m FROM dionysus.messages x
     WHERE NOT x.is_bot AND x.person IS NOT NULL AND x.import_id IS NULL  -- an imported author is nobody to reach here
       AND (reach_out_target.person IS NULL OR x.person = reach_out_target.person)
     ORDER BY x.created_at DESC, x.id DESC LIMIT 1;
    IF NOT FOUND THEN
        IF person IS NOT NULL THEN
            RAISE EXCEPTION 'dionysus: argument "person": nobody called % has talked here', person USING ERRCODE = 'no_data_found';
        END IF;
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('person', m.person, 'platform', m.platform, 'author_id', m.author_id);
END $$;

-- The people Dionysus talks with, for the heartbeat's context (whom a reach-out could go to).
CREATE OR REPLACE FUNCTION known_people() RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('person', p.person, 'last_message_at', p.at) ORDER BY p.at DESC), '[]'::jsonb)
      FROM (SELECT person, max(created_at) AS at FROM dionysus.messages
             WHERE NOT is_bot AND person IS NOT NULL AND import_id IS NULL GROUP BY person ORDER BY max(created_at) DESC LIMIT 20) p
$$;

-- One tick of the scheduler (the worker calls it): recovers stalled heartbeats, then wakes
-- the driver on 'dionysus_heartbeat' when one is due, and again on 'dionysus_work' /
-- 'dionysus_outbox' while work or messages wait, at most once a minute each.
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
            -- Which evaluation, nothing more: any role that may connect can LISTEN (the driver reads the rest).
            PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', opp.id)::text);
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
        -- Which evaluation, nothing more: any role that may connect can LISTEN (the driver reads the rest).
        PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', e.id)::text);
    END IF;
    RETURN e;
END $$;

-- Not pressure-born, so no threshold, cooldown, quiet hours or ignore count: they chose the
-- time. Their word still holds (busy, asleep, away; "stop checking in" is about check-ins, not
-- what they asked for), one contact at a time, and at most solicited_per_day a day. A request
-- that cannot go out within contact_request_hours lapses, written down.
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
        -- Which evaluation, nothing more: any role that may connect can LISTEN (the driver reads the rest).
        PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', e.id)::text);
    END IF;
    RETURN e;
END $$;

-- Queues tonight's dream when it is past dream_hour in the time zone of the person who wrote
-- last (once per local date). Called by the scheduler's language pass, which wakes the driver.
CREATE OR REPLACE FUNCTION dionysus_internal.schedule_dream() RETURNS boolean
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
                                    FROM (SELECT * FROM dionysus.messages x WHERE x.person = e.person AND x.import_id IS NULL
                                           ORDER BY x.created_at DESC LIMIT 12) m), '[]'::jsonb),
        'their_requests', coalesce((SELECT jsonb_agg(g.title ORDER BY g.created_at) FROM dionysus.goals g
                                     WHERE g.priority IN ('active', 'queued') AND g.private_to = ARRAY[e.person]), '[]'::jsonb),
        'personality', (SELECT jsonb_object_agg(trait, value) FROM dionysus.personality),
        -- What matters most to them and what they are working toward (017).
        'north_stars', coalesce((SELECT jsonb_agg(n.content ORDER BY n.created_at) FROM dionysus.person_north_stars(e.person) n), '[]'::jsonb),
        'objectives', coalesce((SELECT jsonb_agg(o.description) FROM (SELECT * FROM dionysus.person_objectives(e.person) LIMIT 5) o), '[]'::jsonb));
END $$;

COMMENT ON FUNCTION recompute_neighborhoods IS
    'Recomputes up to batch (at most 1000) stale neighborhoods now and returns how many; the worker does this on its own.';
COMMENT ON FUNCTION run_maintenance IS
    'One maintenance pass in this session: up to 1000 neighborhoods, the access log, the lexicon (retention is prune_history(), '
    'which the worker runs and the driver''s role may not). '
    'Returns a summary with neighborhoods_remaining: call again while it is above zero.';
COMMENT ON FUNCTION dionysus_internal.schedule_dream() IS
    'Queues tonight''s dream (a dream work item) once per local date, from dream_hour to dream_window_hours after it, in the time zone of whoever wrote last.';
-- The dream runs at night only: a day that began at noon waits for the night.
INSERT INTO proactive_config (key, value, description) VALUES
    ('dream_window_hours', 3, 'a dream missed at dream_hour (the machine was off) still runs this many hours later, not after')
ON CONFLICT (key) DO NOTHING;

-- CREATE OR REPLACE reset chat_context's search_path: every vector-comparing function gets it again.
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
-- Imports (018_import.sql)
-- ---------------------------------------------------------------------------------------
COMMENT ON TABLE imports IS
    'Histories brought in from elsewhere (dionysus import): whose, what, and how far; a rerun of the same input (person, fingerprint) resumes at position.';
COMMENT ON FUNCTION begin_import(text, text, text, text, integer) IS
    'Starts an import of total turns for a person, or finds the one this input (its fingerprint) began. Returns {import_id, position, total, imported, duplicates, started_at, finished_at}.';
COMMENT ON FUNCTION dionysus_internal.import_time(text, text) IS 'An imported turn''s time, or 22007/22023 naming the argument (not a time, before 1900, or in the future).';
COMMENT ON FUNCTION import_messages(uuid, integer, jsonb) IS
    'A batch of turns at first_position of an import, in one transaction: each into the message log once, at its own time, '
    'as a memory private to the person; their own turns queued for extraction at background priority. A batch sent again skips what is in.';
COMMENT ON FUNCTION import_status(integer) IS 'The latest imports with their progress and the extractions the queue still owes them.';

-- ---------------------------------------------------------------------------------------
-- The driver's role on what is new (as 900_api.sql grants it on a fresh install)
-- ---------------------------------------------------------------------------------------
GRANT EXECUTE ON FUNCTION begin_import(text, text, text, text, integer), import_messages(uuid, integer, jsonb),
      import_status(integer), dionysus_internal.import_time(text, text) TO dionysus_driver;
GRANT SELECT, INSERT ON imports TO dionysus_driver;
-- An import's person, input and size are fixed when it begins; only its progress moves.
GRANT UPDATE (position, imported, duplicates, updated_at, finished_at) ON imports TO dionysus_driver;
