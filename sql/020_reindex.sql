-- Re-indexing from the raw log: everything derived from the immutable message
-- log is rebuilt with the current extraction template and the current embedding settings,
-- including a model of another width, while the old derived data keeps serving recall.
--
--   dionysus reindex  →  reindex_start()  →  one 'reindex_message' work item per person's turn
--                        (the driver extracts it as it would a new turn; complete_work stages
--                        the result in reindex_extractions instead of applying it)
--   the worker        →  reindex_step(): the run's model embeds every memory, episode summary
--                        and objective into reindex_vectors, a batch per pass; when nothing is
--                        left to extract or embed, reindex_swap() replaces it all in one
--                        transaction
--
-- What the swap replaces: every vector (memories, episode summaries, objectives; archetype
-- centroids are recomputed, the cache of the old model is dropped when the width changes), and
-- what the old extractions of the re-read turns made (their facts, triples and pending
-- objectives), by what the new extractions say. What it keeps: the message log (never
-- touched), the turn memories themselves (re-embedded), north stars, objectives the person
-- completed or archived, and the derived data of a turn whose re-extraction failed for good.
--
-- Which model embeds what: `embedding_store` records the model that made the stored vectors,
-- and every live write and query embeds with it, whatever a session's settings say (the
-- settings are used when they name that same model: a moved URL or model directory). When the
-- settings name another model, nothing changes until `dionysus reindex` (`embedding_info()`
-- and `dionysus doctor` say so); the run records the settings' model when it starts and builds
-- with it; the swap moves the store to it, for every session at once. A run's model comes only
-- from the settings, which only a superuser may set: nobody can point the database at a URL of
-- their own by starting a run. While a run builds, each transaction that embeds holds
-- 'dionysus.reindex_vectors' shared; the swap takes it exclusively (trying, never waiting), so
-- no vector of the old model is written once the swap has begun.
--
-- What the person decided stays decided: a turn whose facts they corrected (superseded),
-- archived or forgot (a tombstone, reindex_tombstones), or any of whose facts is no longer
-- plainly active, keeps what it has and its new reading is not applied; an objective they
-- completed or archived is never reopened or doubled.
--
-- Lock order: the swap runs in the maintenance pass and waits for nothing long: it takes
-- 'dionysus.reindex_vectors' (waiting 5 s at most, holding nothing else), tries
-- 'dionysus.learn', each staged person's 'dionysus.objectives:<person>' (7 in 002's order) and
-- then the tables it writes (memories, episodes, objectives, archetypes, entities, triples:
-- EXCLUSIVE; ACCESS EXCLUSIVE, with the cache, when the width changes or is not known yet), and
-- if any is held it says so in the run's note and tries again next pass. While it holds them, plain reads go on; recall (its access log's key check) and
-- writes wait for its commit.

-- ---------------------------------------------------------------------------------------
-- The model the stored vectors were made with (one row).
-- ---------------------------------------------------------------------------------------
CREATE TABLE embedding_store (
    id         integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    -- {provider, url, model, model_path}: what embedding_settings() says; never the API key.
    spec       jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
    model_key  text NOT NULL,
    dimensions integer NOT NULL CHECK (dimensions BETWEEN 1 AND 2000),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE embedding_store IS
    'The model that made the stored vectors ({provider, url, model, model_path}, never the API key) and their width; moved only by a re-index swap.';

-- ---------------------------------------------------------------------------------------
-- Runs: at most one building at a time.
-- ---------------------------------------------------------------------------------------
CREATE TABLE reindex_runs (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    status           text NOT NULL DEFAULT 'building' CHECK (status IN ('building', 'swapped', 'cancelled')),
    -- Filled from the settings when the run is created (reindex_runs_guard), never by the caller.
    target           jsonb NOT NULL DEFAULT '{}'::jsonb,
    target_key       text NOT NULL DEFAULT '',
    previous_key     text,
    -- The width of the run's vectors, known from its first batch.
    dimensions       integer CHECK (dimensions BETWEEN 1 AND 2000),
    template_version integer,
    requested_by     text,
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    -- Why the last swap attempt waited, or what it skipped.
    note             text,
    -- What the swap replaced (counts, turns whose staged result could not be applied).
    result           jsonb
);
COMMENT ON TABLE reindex_runs IS
    'Re-index runs (dionysus reindex): the model and extraction template each rebuilds with (taken from the settings, never the caller), its progress note and what its swap replaced.';
CREATE UNIQUE INDEX reindex_runs_one_building ON reindex_runs ((true)) WHERE status = 'building';
CREATE INDEX work_queue_reindex ON work_queue ((params ->> 'run_id'), status) WHERE action = 'reindex_message';

-- The new vectors, by what they belong to; the column is of no fixed width.
CREATE TABLE reindex_vectors (
    run_id    uuid NOT NULL REFERENCES reindex_runs (id) ON DELETE CASCADE,
    kind      text NOT NULL CHECK (kind IN ('memory', 'episode', 'objective')),
    target_id uuid NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (run_id, kind, target_id)
);
COMMENT ON TABLE reindex_vectors IS 'A building run''s new vectors (any width) for memories, episode summaries and objectives.';

-- The new extractions, by turn: what the swap will apply.
CREATE TABLE reindex_extractions (
    run_id     uuid NOT NULL REFERENCES reindex_runs (id) ON DELETE CASCADE,
    message_id uuid NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    -- The provenance the original extraction gave its facts and triples ('conversation:<id>',
    -- 'imported:<id>'): what the swap removes and writes again.
    source     text NOT NULL,
    result     jsonb NOT NULL CHECK (jsonb_typeof(result) = 'object'),
    PRIMARY KEY (run_id, message_id)
);
COMMENT ON TABLE reindex_extractions IS 'A building run''s new extractions of the person''s turns, applied by the swap.';
-- Its foreign keys, indexed (001).
CREATE INDEX reindex_extractions_message_id ON reindex_extractions (message_id);

-- Facts of a turn the person forgot: the turn's next reading, or another turn's, must not
-- bring them back. Only a hash of the words is kept: forgetting erases the text.
CREATE TABLE reindex_tombstones (
    source     text NOT NULL,
    content_md5 text NOT NULL,
    -- The transaction that deleted it (a swap removes the tombstones of its own deletions).
    txid       bigint NOT NULL DEFAULT txid_current(),
    deleted_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE reindex_tombstones IS 'Facts of a turn that were deleted (forgotten), as a hash of their words: a re-index keeps that turn as it is and learns none of them back from any turn.';
CREATE INDEX reindex_tombstones_source ON reindex_tombstones (source);

-- The words of a fact, normalised (case, spacing) and hashed.
CREATE FUNCTION dionysus_internal.fact_md5(content text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT md5(lower(regexp_replace(btrim(content), '\s+', ' ', 'g')))
$$;
COMMENT ON FUNCTION dionysus_internal.fact_md5(text) IS 'The words of a fact, normalised (case, spacing) and hashed: what a tombstone keeps.';

CREATE FUNCTION dionysus_internal.reindex_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dionysus.reindex_tombstones (source, content_md5) VALUES (OLD.source, dionysus_internal.fact_md5(OLD.content));
    RETURN OLD;
END $$;
COMMENT ON FUNCTION dionysus_internal.reindex_tombstone() IS 'Trigger: a deleted fact of a conversation or imported turn leaves a tombstone (reindex_tombstones).';
CREATE TRIGGER memories_reindex_tombstone AFTER DELETE ON memories FOR EACH ROW
    WHEN (OLD.type = 'semantic' AND (OLD.source LIKE 'conversation:%' OR OLD.source LIKE 'imported:%'))
    EXECUTE FUNCTION dionysus_internal.reindex_tombstone();

-- A run's model, width and history are the database's, not the caller's: the model is taken
-- from the settings when it is created, and a finished run never changes again.
CREATE FUNCTION dionysus_internal.reindex_runs_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    model jsonb;
BEGIN
    IF TG_OP = 'INSERT' AND dionysus_internal.restoring() THEN
        RETURN NEW;   -- a restored run, as it was (sql/030_backup.sql)
    END IF;
    IF TG_OP = 'INSERT' THEN
        model := dionysus.embedding_settings();
        NEW.target := model - 'model_key';
        NEW.target_key := model ->> 'model_key';
        NEW.previous_key := (SELECT s.model_key FROM dionysus.embedding_store s WHERE s.id = 1);
        NEW.status := 'building';
        NEW.dimensions := NULL;
        NEW.template_version := (SELECT t.version FROM dionysus.prompt_templates t WHERE t.key = 'extract_message' AND t.active);
        NEW.started_at := now();
        NEW.finished_at := NULL;
        NEW.note := NULL;
        NEW.result := NULL;
        RETURN NEW;
    END IF;
    IF NEW.target IS DISTINCT FROM OLD.target OR NEW.target_key IS DISTINCT FROM OLD.target_key
       OR NEW.previous_key IS DISTINCT FROM OLD.previous_key OR NEW.started_at IS DISTINCT FROM OLD.started_at
       OR (OLD.dimensions IS NOT NULL AND NEW.dimensions IS DISTINCT FROM OLD.dimensions)
       OR (OLD.status <> 'building' AND NEW IS DISTINCT FROM OLD) THEN
        RAISE EXCEPTION 'dionysus: re-index run %: its model, width and a finished run are not to be changed', OLD.id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- Only the swap, which writes the result (the driver's role cannot), ends a run as swapped.
    IF NEW.status = 'swapped' AND OLD.status = 'building'
       AND (NEW.result IS NULL OR NOT EXISTS (SELECT 1 FROM dionysus.embedding_store s WHERE s.model_key = NEW.target_key)) THEN
        RAISE EXCEPTION 'dionysus: re-index run % is swapped only by its swap', OLD.id USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.reindex_runs_guard() IS
    'Trigger: a run''s model comes from the settings when it is created; its model, width and a finished run never change; only its swap ends it as swapped.';
CREATE TRIGGER reindex_runs_guard BEFORE INSERT OR UPDATE ON reindex_runs
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.reindex_runs_guard();

-- ---------------------------------------------------------------------------------------
-- Starting, watching and cancelling
-- ---------------------------------------------------------------------------------------

-- The provenance a turn's extraction gives its facts and triples (012, 018).
CREATE FUNCTION dionysus_internal.turn_source(message_id uuid, import_id uuid) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN import_id IS NULL THEN 'conversation:' ELSE 'imported:' END || message_id
$$;
COMMENT ON FUNCTION dionysus_internal.turn_source(uuid, uuid) IS 'The provenance a turn''s extraction gives its facts and triples: conversation:<id>, or imported:<id> for an imported turn.';

-- Starts a run, or answers the one already building (a second `dionysus reindex` resumes it).
CREATE FUNCTION reindex_start(requested_by text DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    run_id uuid;
    queued integer;
BEGIN
    IF requested_by IS NOT NULL AND length(requested_by) > 200 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "requested_by": at most 200 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Two starts at once make one run.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.reindex_start', 0));
    SELECT r.id INTO run_id FROM dionysus.reindex_runs r WHERE r.status = 'building';
    IF FOUND THEN
        RETURN dionysus.reindex_status() || jsonb_build_object('resumed', true);
    END IF;
    INSERT INTO dionysus.reindex_runs (requested_by) VALUES (reindex_start.requested_by) RETURNING id INTO run_id;
    -- Every turn the person said themselves that still has its memory (a forgotten one stays
    -- forgotten; someone else's words in an imported chat are not theirs to read), read again
    -- as it was first read, unless its first reading is still waiting (that one reads with
    -- today's template anyway); below live work (0) and an import's (-1).
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, priority)
    SELECT 'reindex:' || run_id || ':' || m.id, 'reindex_message',
           jsonb_build_object('run_id', run_id, 'message_id', m.id, 'memory_id', m.memory_id, 'person', m.person,
                              'source', dionysus_internal.turn_source(m.id, m.import_id)),
           dionysus_internal.heartbeat_setting('work_max_attempts')::int, -2
      FROM dionysus.messages m JOIN dionysus.memories t ON t.id = m.memory_id
     WHERE NOT m.is_bot AND m.person IS NOT NULL AND t.metadata ->> 'role' = 'user'
       AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.idempotency_key = 'extract_message:' || m.id
                                                            AND q.status IN ('pending', 'claimed'))
     ORDER BY m.created_at, m.id;
    GET DIAGNOSTICS queued = ROW_COUNT;
    RETURN dionysus.reindex_status() || jsonb_build_object('resumed', false, 'queued', queued);
END $$;
COMMENT ON FUNCTION reindex_start(text) IS
    'Starts rebuilding everything derived from the message log with the current extraction template and embedding settings (one reindex_message work item per person''s turn, vectors by the maintenance pass), or answers the run already building. Returns reindex_status() with resumed and queued.';

-- The latest run and how far it is.
CREATE FUNCTION reindex_status() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    run dionysus.reindex_runs;
    ex jsonb;
    vectors_done bigint;
    vectors_total bigint;
BEGIN
    SELECT * INTO run FROM dionysus.reindex_runs r ORDER BY (r.status = 'building') DESC, r.started_at DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('status', 'none');
    END IF;
    SELECT jsonb_build_object('total', count(*), 'done', count(*) FILTER (WHERE q.status = 'done'),
                              'failed', count(*) FILTER (WHERE q.status = 'failed'),
                              'waiting', count(*) FILTER (WHERE q.status IN ('pending', 'claimed')))
      INTO ex FROM dionysus.work_queue q WHERE q.action = 'reindex_message' AND q.params ->> 'run_id' = run.id::text;
    IF run.status = 'building' THEN
        SELECT count(*) INTO vectors_done FROM dionysus.reindex_vectors v WHERE v.run_id = run.id;
        vectors_total := (SELECT count(*) FROM dionysus.memories) + (SELECT count(*) FROM dionysus.objectives)
                         + (SELECT count(*) FROM dionysus.episodes e WHERE e.summary IS NOT NULL);
    END IF;
    RETURN jsonb_build_object(
        'run_id', run.id, 'status', run.status, 'started_at', run.started_at, 'finished_at', run.finished_at,
        'model', run.target_key, 'previous_model', run.previous_key, 'dimensions', run.dimensions,
        'template_version', run.template_version, 'requested_by', run.requested_by,
        'extractions', ex,
        'vectors', CASE WHEN run.status = 'building' THEN jsonb_build_object('done', vectors_done, 'total', greatest(vectors_total, vectors_done)) END,
        'phase', CASE WHEN run.status <> 'building' THEN run.status
                      WHEN (ex ->> 'waiting')::bigint > 0 THEN 'extracting'
                      WHEN vectors_done < vectors_total THEN 'embedding'
                      ELSE 'swapping' END,
        'note', run.note, 'result', run.result);
END $$;
COMMENT ON FUNCTION reindex_status() IS
    'The latest re-index run: its model and width, extractions (total, done, failed, waiting), vectors made of how many, phase (extracting, embedding, swapping, swapped, cancelled), note and result.';

-- Stops the run that is building: its staged data goes, the old derived data stays.
CREATE FUNCTION reindex_cancel() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    cancelled uuid;
    dropped integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.reindex_start', 0));
    UPDATE dionysus.reindex_runs r SET status = 'cancelled', finished_at = now(), note = 'cancelled'
     WHERE r.status = 'building' RETURNING r.id INTO cancelled;
    IF cancelled IS NULL THEN
        RETURN jsonb_build_object('cancelled', false, 'reason', 'no re-index is building');
    END IF;
    UPDATE dionysus.work_queue q SET status = 'failed', last_error = 're-index cancelled', lease_until = NULL, completed_at = now()
     WHERE q.action = 'reindex_message' AND q.params ->> 'run_id' = cancelled::text AND q.status IN ('pending', 'claimed');
    GET DIAGNOSTICS dropped = ROW_COUNT;
    DELETE FROM dionysus.reindex_extractions x WHERE x.run_id = cancelled;
    RETURN jsonb_build_object('cancelled', true, 'run_id', cancelled, 'extractions_dropped', dropped);
END $$;
COMMENT ON FUNCTION reindex_cancel() IS 'Cancels the building re-index run: its waiting extractions fail, its staged data goes; the old derived data was never touched.';

-- ---------------------------------------------------------------------------------------
-- Staging (complete_work of a 'reindex_message' item)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.reindex_stage(w dionysus.work_queue, result jsonb) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    key text;
    staged jsonb := '{}'::jsonb;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM dionysus.reindex_runs r WHERE r.id = (w.params ->> 'run_id')::uuid AND r.status = 'building') THEN
        RETURN jsonb_build_object('staged', false, 'reason', 'the re-index run is no longer building');
    END IF;
    -- Only what an extraction of a turn rebuilds; each entry an object (the swap applies them).
    FOREACH key IN ARRAY ARRAY['facts', 'triples', 'objectives'] LOOP
        IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(result -> key, '[]')) e WHERE jsonb_typeof(e) <> 'object') THEN
            RAISE EXCEPTION 'dionysus: argument "result.%": every entry must be an object', key USING ERRCODE = 'invalid_text_representation';
        END IF;
        staged := staged || jsonb_build_object(key, coalesce(result -> key, '[]'));
    END LOOP;
    INSERT INTO dionysus.reindex_extractions (run_id, message_id, source, result)
    VALUES ((w.params ->> 'run_id')::uuid, (w.params ->> 'message_id')::uuid, w.params ->> 'source', staged)
    ON CONFLICT (run_id, message_id) DO UPDATE SET result = EXCLUDED.result;
    RETURN jsonb_build_object('staged', true, 'facts', jsonb_array_length(staged -> 'facts'),
                              'triples', jsonb_array_length(staged -> 'triples'), 'objectives', jsonb_array_length(staged -> 'objectives'));
END $$;
COMMENT ON FUNCTION dionysus_internal.reindex_stage(dionysus.work_queue, jsonb) IS
    'complete_work of a reindex_message item: its facts, triples and objectives (objects only) are kept for the swap, nothing is applied.';

-- ---------------------------------------------------------------------------------------
-- Embedding with the run's model (the maintenance pass)
-- ---------------------------------------------------------------------------------------

-- What has a vector, and the text it is made from (as remember, note_objective and an episode
-- summary embed it).
CREATE FUNCTION dionysus_internal.reindex_sources(kind text) RETURNS TABLE (id uuid, body text)
    LANGUAGE sql STABLE AS $$
    -- At most the longest text accepted now (a memory may be older than the limit).
    SELECT m.id, left(m.content, current_setting('dionysus.max_content_length')::int) FROM dionysus.memories m
     WHERE reindex_sources.kind = 'memory'
    UNION ALL
    SELECT e.id, left(e.summary, current_setting('dionysus.max_content_length')::int) FROM dionysus.episodes e
     WHERE reindex_sources.kind = 'episode' AND e.summary IS NOT NULL
    UNION ALL
    SELECT o.id, left(btrim(o.description), 1000) FROM dionysus.objectives o WHERE reindex_sources.kind = 'objective'
$$;
COMMENT ON FUNCTION dionysus_internal.reindex_sources(text) IS 'What has a vector (memory, episode, objective) and the text it is embedded from.';

-- Embeds up to max_items (NULL: all) of what has no new vector yet; returns how many.
CREATE FUNCTION dionysus_internal.reindex_embed_missing(run_id uuid, max_items integer) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    k text;
    ids uuid[];
    texts text[];
    done integer := 0;
    chunk integer;
BEGIN
    FOREACH k IN ARRAY ARRAY['memory', 'episode', 'objective'] LOOP
        LOOP
            chunk := least(64, coalesce(max_items - done, 64));
            EXIT WHEN chunk <= 0;
            SELECT array_agg(s.id ORDER BY s.id), array_agg(s.body ORDER BY s.id) INTO ids, texts
              FROM (SELECT s.id, s.body FROM dionysus_internal.reindex_sources(k) s
                     WHERE NOT EXISTS (SELECT 1 FROM dionysus.reindex_vectors v
                                        WHERE v.run_id = reindex_embed_missing.run_id AND v.kind = k AND v.target_id = s.id)
                     ORDER BY s.id LIMIT chunk) s;
            EXIT WHEN ids IS NULL;
            INSERT INTO dionysus.reindex_vectors (run_id, kind, target_id, embedding)
            SELECT reindex_embed_missing.run_id, k, ids[e.ord], e.embedding::vector
              FROM dionysus.reindex_embed_real(reindex_embed_missing.run_id, texts) e;
            -- The run's width is its first vector's; every later batch is checked against it.
            UPDATE dionysus.reindex_runs r
               SET dimensions = (SELECT vector_dims(v.embedding) FROM dionysus.reindex_vectors v
                                  WHERE v.run_id = reindex_embed_missing.run_id LIMIT 1)
             WHERE r.id = reindex_embed_missing.run_id AND r.dimensions IS NULL;
            done := done + cardinality(ids);
        END LOOP;
    END LOOP;
    RETURN done;
END $$;
COMMENT ON FUNCTION dionysus_internal.reindex_embed_missing(uuid, integer) IS
    'Embeds with the run''s model up to max_items (NULL: all) of what has no new vector yet; the run''s width is its first vector''s.';

-- The new vector of a row, for the swap's ALTER ... USING.
CREATE FUNCTION dionysus_internal.reindex_vector(run_id uuid, kind text, target_id uuid) RETURNS vector
    LANGUAGE sql STABLE AS $$
    SELECT v.embedding FROM dionysus.reindex_vectors v
     WHERE v.run_id = reindex_vector.run_id AND v.kind = reindex_vector.kind AND v.target_id = reindex_vector.target_id
$$;
COMMENT ON FUNCTION dionysus_internal.reindex_vector(uuid, text, uuid) IS 'A row''s new vector in a run (the swap''s ALTER ... USING).';

-- One step of the building run, from the maintenance pass: a batch of vectors, or, when all
-- are made and no extraction waits, the swap. NULL when no run is building.
CREATE FUNCTION dionysus_internal.reindex_step(batch integer DEFAULT 256) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    run dionysus.reindex_runs;
    embedded integer;
BEGIN
    -- What cancelled runs staged, a batch per step, whether or not a run builds now.
    DELETE FROM dionysus.reindex_vectors v
     WHERE (v.run_id, v.kind, v.target_id) IN (SELECT x.run_id, x.kind, x.target_id FROM dionysus.reindex_vectors x
                                                JOIN dionysus.reindex_runs r ON r.id = x.run_id AND r.status <> 'building' LIMIT 10000);
    SELECT * INTO run FROM dionysus.reindex_runs r WHERE r.status = 'building';
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtextextended('dionysus.reindex', 0)) THEN
        RETURN jsonb_build_object('run_id', run.id, 'skipped', 'another step holds the run');
    END IF;
    -- A failure is the run's news: written in its note (reindex_status shows it), tried again
    -- next pass.
    BEGIN
        embedded := dionysus_internal.reindex_embed_missing(run.id, greatest(coalesce(batch, 256), 1));
    EXCEPTION WHEN OTHERS THEN
        UPDATE dionysus.reindex_runs r SET note = left('embedding failed (tried again next pass): ' || SQLERRM, 1000)
         WHERE r.id = run.id AND r.status = 'building';
        RETURN jsonb_build_object('run_id', run.id, 'failed', SQLERRM);
    END;
    IF embedded > 0 THEN
        RETURN jsonb_build_object('run_id', run.id, 'embedded', embedded);
    END IF;
    BEGIN
        RETURN dionysus_internal.reindex_swap(run.id);
    EXCEPTION WHEN OTHERS THEN
        UPDATE dionysus.reindex_runs r SET note = left('swap failed (tried again next pass): ' || SQLERRM, 1000)
         WHERE r.id = run.id AND r.status = 'building';
        RETURN jsonb_build_object('run_id', run.id, 'failed', SQLERRM);
    END;
END $$;
COMMENT ON FUNCTION dionysus_internal.reindex_step(integer) IS
    'One maintenance step of the building run: up to batch new vectors, else the swap. NULL when nothing is building.';

-- ---------------------------------------------------------------------------------------
-- The swap: one transaction
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.reindex_swap(run_id uuid) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    run dionysus.reindex_runs;
    store dionysus.embedding_store;
    waiting bigint;
    who text;
    widen boolean;
    vtype text;
    st record;
    item jsonb;
    privacy text[];
    gone jsonb;
    removed jsonb := jsonb_build_object('facts', 0, 'triples', 0, 'objectives', 0);
    made jsonb := jsonb_build_object('facts', 0, 'triples', 0, 'objectives', 0);
    skipped jsonb := '[]'::jsonb;
    kept integer := 0;
    e vector;
    new_id uuid;
    -- What this swap wrote: a later turn's old reading may have been confirmed by an earlier
    -- turn's new one, and must not take it away.
    made_ids uuid[] := '{}';
    stragglers integer;
    requeued bigint;
    applied_turns integer := 0;
BEGIN
    SELECT * INTO run FROM dionysus.reindex_runs r WHERE r.id = reindex_swap.run_id AND r.status = 'building' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO waiting FROM dionysus.work_queue q
     WHERE q.action = 'reindex_message' AND q.params ->> 'run_id' = run.id::text AND q.status IN ('pending', 'claimed');
    IF waiting > 0 THEN
        UPDATE dionysus.reindex_runs r SET note = format('waiting for %s extractions', waiting) WHERE r.id = run.id;
        RETURN jsonb_build_object('run_id', run.id, 'waiting_for', waiting);
    END IF;
    SELECT * INTO store FROM dionysus.embedding_store s WHERE s.id = 1;
    -- Try every lock; wait for none (lock order above). A width not known yet may change.
    widen := run.dimensions IS NULL OR run.dimensions <> store.dimensions;
    -- The first lock, so waiting for it holds nothing up: queued, it stops new transactions from
    -- embedding with the old model until those already doing so end (5 s at most; then next pass).
    -- Every later wait in the swap is bounded as well.
    SET LOCAL lock_timeout = '5s';
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.reindex_vectors', 0));
    EXCEPTION WHEN lock_not_available THEN
        UPDATE dionysus.reindex_runs r SET note = 'swap waits: a transaction is still embedding with the old model' WHERE r.id = run.id;
        RETURN jsonb_build_object('run_id', run.id, 'busy', 'embedding');
    END;
    IF NOT pg_try_advisory_xact_lock(hashtextextended('dionysus.learn', 0)) THEN
        UPDATE dionysus.reindex_runs r SET note = 'swap waits: someone is learning' WHERE r.id = run.id;
        RETURN jsonb_build_object('run_id', run.id, 'busy', 'learn');
    END IF;
    FOR who IN SELECT DISTINCT m.person FROM dionysus.reindex_extractions x JOIN dionysus.messages m ON m.id = x.message_id
                WHERE x.run_id = run.id AND m.person IS NOT NULL ORDER BY 1 LOOP
        IF NOT pg_try_advisory_xact_lock(hashtextextended('dionysus.objectives:' || who, 0)) THEN
            UPDATE dionysus.reindex_runs r SET note = 'swap waits: objectives being noted' WHERE r.id = run.id;
            RETURN jsonb_build_object('run_id', run.id, 'busy', 'objectives');
        END IF;
    END LOOP;
    BEGIN
        IF widen THEN
            LOCK TABLE dionysus.memories, dionysus.episodes, dionysus.objectives, dionysus.embedding_cache, dionysus.context_archetypes
                IN ACCESS EXCLUSIVE MODE NOWAIT;
            LOCK TABLE dionysus.entities, dionysus.triples IN EXCLUSIVE MODE NOWAIT;
        ELSE
            LOCK TABLE dionysus.memories, dionysus.episodes, dionysus.objectives, dionysus.context_archetypes, dionysus.entities,
                       dionysus.triples IN EXCLUSIVE MODE NOWAIT;
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        UPDATE dionysus.reindex_runs r SET note = 'swap waits: the memories are being written' WHERE r.id = run.id;
        RETURN jsonb_build_object('run_id', run.id, 'busy', 'tables');
    END;
    -- What was written since the last step (nothing more can be now).
    stragglers := dionysus_internal.reindex_embed_missing(run.id, NULL);
    SELECT * INTO run FROM dionysus.reindex_runs r WHERE r.id = run.id;
    widen := run.dimensions IS NOT NULL AND run.dimensions <> store.dimensions;

    -- 1. The vectors.
    IF widen THEN
        vtype := format('%I.vector(%s)', (SELECT n.nspname FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace
                                           WHERE x.extname = 'vector'), run.dimensions);
        EXECUTE format('ALTER TABLE dionysus.memories ALTER COLUMN embedding TYPE %s USING dionysus_internal.reindex_vector(%L, %L, id)',
                       vtype, run.id, 'memory');
        EXECUTE format('ALTER TABLE dionysus.episodes ALTER COLUMN summary_embedding TYPE %s '
                       'USING CASE WHEN summary IS NULL THEN NULL ELSE dionysus_internal.reindex_vector(%L, %L, id) END',
                       vtype, run.id, 'episode');
        EXECUTE format('ALTER TABLE dionysus.objectives ALTER COLUMN embedding TYPE %s USING dionysus_internal.reindex_vector(%L, %L, id)',
                       vtype, run.id, 'objective');
        DELETE FROM dionysus.embedding_cache;
        EXECUTE format('ALTER TABLE dionysus.embedding_cache ALTER COLUMN embedding TYPE %s', vtype);
        EXECUTE format('ALTER TABLE dionysus.context_archetypes ALTER COLUMN centroid TYPE %s USING NULL', vtype);
    ELSE
        UPDATE dionysus.memories m SET embedding = v.embedding FROM dionysus.reindex_vectors v
         WHERE v.run_id = run.id AND v.kind = 'memory' AND v.target_id = m.id;
        UPDATE dionysus.episodes x SET summary_embedding = v.embedding FROM dionysus.reindex_vectors v
         WHERE v.run_id = run.id AND v.kind = 'episode' AND v.target_id = x.id;
        UPDATE dionysus.objectives o SET embedding = v.embedding FROM dionysus.reindex_vectors v
         WHERE v.run_id = run.id AND v.kind = 'objective' AND v.target_id = o.id;
        UPDATE dionysus.context_archetypes c SET centroid = NULL WHERE c.centroid IS NOT NULL;
    END IF;
    -- A new model: the sentence vectors are the old one's, so they go, and every memory that may
    -- have several sentences is queued for the maintenance pass, which embeds them with the new
    -- one (029). The same model (new extractions only) keeps them.
    IF run.target_key IS DISTINCT FROM store.model_key THEN
        DELETE FROM dionysus.memory_sentences;
        INSERT INTO dionysus.sentence_queue (memory_id)
        SELECT m.id FROM dionysus.memories m WHERE coalesce(m.sentence_count, 2) >= 2 AND m.content ~ '[.!?]'
        ON CONFLICT DO NOTHING;
    END IF;
    -- From here on, every session's writes and the new extractions embed with the run's model.
    UPDATE dionysus.embedding_store s SET spec = run.target, model_key = run.target_key,
           dimensions = coalesce(run.dimensions, s.dimensions), updated_at = now()
     WHERE s.id = 1;

    -- 2. Turn by turn, in the log's order: what the old reading made goes and the new reading's
    --    comes, together or not at all. The source is the log's, never the staged row's.
    FOR st IN SELECT x.result, dionysus_internal.turn_source(m.id, m.import_id) AS source, m.id AS message_id, m.person,
                     m.memory_id, m.created_at, m.import_id
                FROM dionysus.reindex_extractions x JOIN dionysus.messages m ON m.id = x.message_id
               WHERE x.run_id = run.id AND NOT m.is_bot AND m.person IS NOT NULL
               ORDER BY m.created_at, m.id LOOP
        -- The person has had their say on what this turn gave (a fact corrected, archived,
        -- retired or forgotten): it keeps what it has.
        IF EXISTS (SELECT 1 FROM dionysus.reindex_tombstones t WHERE t.source = st.source AND t.txid <> txid_current())
           OR EXISTS (SELECT 1 FROM dionysus.memories f JOIN dionysus.facts ff ON ff.memory_id = f.id
                       WHERE f.source = st.source
                         AND (f.status <> 'active' OR ff.state NOT IN ('learned', 'confirmed') OR f.superseded_by IS NOT NULL
                              OR EXISTS (SELECT 1 FROM dionysus.memories o WHERE o.superseded_by = f.id)
                              OR EXISTS (SELECT 1 FROM dionysus.north_stars n WHERE n.memory_id = f.id))) THEN
            kept := kept + 1;
            CONTINUE;
        END IF;
        BEGIN
            privacy := ARRAY[st.person];
            WITH f AS (DELETE FROM dionysus.memories m
                        WHERE m.source = st.source AND m.id IN (SELECT ff.memory_id FROM dionysus.facts ff) AND m.id <> ALL (made_ids)
                        RETURNING 1),
                 t AS (DELETE FROM dionysus.triples t WHERE t.source = st.source AND t.id <> ALL (made_ids) RETURNING 1),
                 o AS (DELETE FROM dionysus.objectives o
                        WHERE o.status = 'pending' AND o.origin_message_id = st.message_id AND o.id <> ALL (made_ids) RETURNING 1)
            SELECT jsonb_build_object('facts', (SELECT count(*) FROM f), 'triples', (SELECT count(*) FROM t), 'objectives', (SELECT count(*) FROM o))
              INTO gone;
            FOR item IN SELECT * FROM jsonb_array_elements(coalesce(st.result -> 'facts', '[]')) LOOP
                -- Not what the person forgot, corrected or archived, whichever turn said it first.
                IF coalesce(btrim(item ->> 'content'), '') <> '' THEN
                    CONTINUE WHEN EXISTS (SELECT 1 FROM dionysus.reindex_tombstones t
                                           WHERE t.content_md5 = dionysus_internal.fact_md5(item ->> 'content') AND t.txid <> txid_current());
                    e := dionysus.embed(btrim(item ->> 'content'));
                    CONTINUE WHEN EXISTS (SELECT 1 FROM dionysus.memories f JOIN dionysus.facts ff ON ff.memory_id = f.id
                                           WHERE (f.status <> 'active' OR ff.state NOT IN ('learned', 'confirmed') OR f.superseded_by IS NOT NULL)
                                             AND f.private_to IS NOT DISTINCT FROM privacy AND 1 - (f.embedding <=> e) >= 0.95);
                END IF;
                new_id := dionysus.learn(item ->> 'content', item ->> 'subject', item ->> 'category',
                                         coalesce((item ->> 'confidence')::float8, 0.8), st.source, private_to => privacy);
                made_ids := made_ids || new_id;
                made := jsonb_set(made, '{facts}', to_jsonb((made ->> 'facts')::int + 1));
            END LOOP;
            FOR item IN SELECT * FROM jsonb_array_elements(coalesce(st.result -> 'triples', '[]')) LOOP
                new_id := dionysus.add_triple(item ->> 'subject', item ->> 'predicate', item ->> 'object',
                                              coalesce((item ->> 'confidence')::float8, 0.8), st.source, st.memory_id, private_to => privacy);
                made_ids := made_ids || new_id;
                made := jsonb_set(made, '{triples}', to_jsonb((made ->> 'triples')::int + 1));
            END LOOP;
            -- As complete_work: an imported turn older than 30 days is the person's past. An
            -- objective the person completed or archived is never reopened or doubled.
            IF NOT (st.import_id IS NOT NULL AND st.created_at < now() - interval '30 days') THEN
                FOR item IN SELECT * FROM jsonb_array_elements(coalesce(st.result -> 'objectives', '[]')) LOOP
                    IF coalesce(btrim(item ->> 'description'), '') <> '' THEN
                        e := dionysus.embed(left(btrim(item ->> 'description'), 1000));
                        CONTINUE WHEN EXISTS (SELECT 1 FROM dionysus.objectives o
                                               WHERE o.person = st.person AND o.status IN ('completed', 'archived')
                                                 AND 1 - (o.embedding <=> e) >= 0.85);
                    END IF;
                    new_id := dionysus_internal.note_objective(st.person, item ->> 'description', (item ->> 'saliency')::float8,
                                                              item ->> 'status', st.message_id);
                    IF new_id IS NOT NULL THEN
                        made_ids := made_ids || new_id;
                        made := jsonb_set(made, '{objectives}', to_jsonb((made ->> 'objectives')::int + 1));
                    END IF;
                END LOOP;
            END IF;
            removed := jsonb_build_object('facts', (removed ->> 'facts')::int + (gone ->> 'facts')::int,
                                          'triples', (removed ->> 'triples')::int + (gone ->> 'triples')::int,
                                          'objectives', (removed ->> 'objectives')::int + (gone ->> 'objectives')::int);
            applied_turns := applied_turns + 1;
        EXCEPTION
            -- What the model produced cannot be stored: this turn keeps its old reading.
            -- Anything else (a dead embedding endpoint, a deadlock) fails the swap, tried again.
            WHEN invalid_parameter_value OR invalid_text_representation OR data_exception OR check_violation
                 OR not_null_violation OR null_value_not_allowed OR string_data_right_truncation
                 OR numeric_value_out_of_range OR program_limit_exceeded OR foreign_key_violation THEN
            skipped := skipped || jsonb_build_object('message_id', st.message_id, 'error', SQLERRM);
        END;
    END LOOP;
    -- The tombstones this swap's own deletions left.
    DELETE FROM dionysus.reindex_tombstones t WHERE t.txid = txid_current();

    -- 3. Every neighbourhood was computed from the old vectors.
    INSERT INTO dionysus.neighborhood_queue (memory_id)
    SELECT m.id FROM dionysus.memories m
     WHERE m.status = 'active' AND NOT EXISTS (SELECT 1 FROM dionysus.neighborhood_queue q WHERE q.memory_id = m.id);
    GET DIAGNOSTICS requeued = ROW_COUNT;

    UPDATE dionysus.reindex_runs r
       SET status = 'swapped', finished_at = now(), note = NULL,
           result = jsonb_build_object('removed', removed, 'made', made, 'turns_applied', applied_turns,
                                       'turns_kept_by_the_person', kept, 'turns_skipped', skipped,
                                       'extractions_failed', (SELECT count(*) FROM dionysus.work_queue q
                                                               WHERE q.action = 'reindex_message' AND q.params ->> 'run_id' = run.id::text
                                                                 AND q.status = 'failed'),
                                       'vectors', (SELECT count(*) FROM dionysus.reindex_vectors v WHERE v.run_id = run.id),
                                       'stragglers', stragglers, 'width_changed', widen, 'neighborhoods_requeued', requeued)
     WHERE r.id = run.id;
    DELETE FROM dionysus.reindex_vectors v WHERE v.run_id = run.id;
    DELETE FROM dionysus.reindex_extractions x WHERE x.run_id = run.id;
    RETURN jsonb_build_object('run_id', run.id, 'swapped', true) || (SELECT r.result FROM dionysus.reindex_runs r WHERE r.id = run.id);
END $$;
COMMENT ON FUNCTION dionysus_internal.reindex_swap(uuid) IS
    'When no extraction waits: in one transaction, every vector replaced (the columns retyped when the width changed), the store moved to the run''s model, each re-read turn''s old facts, triples and pending objectives replaced by its new reading (unless the person corrected, archived or forgot one of them; a completed or archived objective is never reopened), every neighbourhood requeued. Tries its locks and waits for none.';
