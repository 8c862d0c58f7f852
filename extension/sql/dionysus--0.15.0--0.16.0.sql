-- Dionysus 0.15.0 → 0.16.0: a recall's commit waits for no disk, and long memories get sentence vectors.
-- The access log becomes unlogged: every recall wrote WAL for it, so its commit waited for an
-- fsync (a quarter of a millisecond of each recall here, more on a network disk) to keep usage
-- counts. A crash or a failover now empties the log, losing the hits since the last fold; a hot
-- standby cannot read an unlogged table, so memory_health counts the log through a function that
-- returns NULL there (recall_by_id counts without it there). Every row is kept.

ALTER TABLE memory_access_log SET UNLOGGED;
COMMENT ON TABLE memory_access_log IS
    'Recall hits not yet folded into memories.access_count by the worker. No foreign key, so that recall locks no memory: the rows of a memory since deleted go with the next fold. Unlogged, so that a recall''s commit waits for no disk: a crash or failover loses the hits since the last fold, and a hot standby cannot read it.';

-- The access log is unlogged, and an unlogged table cannot be read on a hot standby (the
-- planner refuses it): counted only where it can be. PL/pgSQL plans the count only if it runs.
CREATE FUNCTION dionysus_internal.pending_access_log() RETURNS bigint
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $$
BEGIN
    IF pg_is_in_recovery() THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT count(*) FROM dionysus.memory_access_log);
END $$;
COMMENT ON FUNCTION dionysus_internal.pending_access_log() IS
    'Recall hits not yet folded into access counts; NULL on a hot standby, which cannot read the unlogged log.';

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
    dionysus_internal.pending_access_log()                            AS pending_access_log,
    (SELECT count(*) FROM embedding_cache)                            AS cached_embeddings,
    l.refreshed_at                                                    AS lexicon_refreshed_at,
    dionysus_internal.table_bytes(ARRAY['memories', 'memory_neighborhoods', 'memory_access_log', 'embedding_cache', 'triples', 'episodes']) AS table_bytes
FROM worker_status w CROSS JOIN lexicon_stats l;

GRANT EXECUTE ON FUNCTION dionysus_internal.pending_access_log() TO dionysus_driver;

-- activated_themes answered on a hot standby and must go on doing so: it reads the (now
-- unlogged) log through a function that reads nothing there.
CREATE FUNCTION dionysus_internal.recently_recalled(since timestamptz, max_rows integer) RETURNS SETOF uuid
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $$
BEGIN
    IF pg_is_in_recovery() THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT l.memory_id FROM dionysus.memory_access_log l WHERE l.accessed_at > since
                  ORDER BY l.accessed_at DESC LIMIT max_rows;
END $$;
CREATE OR REPLACE FUNCTION activated_themes(max_items integer DEFAULT 5) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    WITH touched AS (
        (SELECT r.memory_id FROM dionysus_internal.recently_recalled(now() - interval '1 day', 200) AS r(memory_id))
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

-- Sentence vectors (sql/029_sentences.sql): a memory of several sentences gets a vector for
-- each from the maintenance pass, and recall raises a memory's vector score towards its closest
-- sentence's. The memories written before the update keep a NULL count (recall looks their
-- sentences up) and those that may have several are queued, oldest first. No memory row is
-- updated. A re-index swap to a new model now empties the sentence vectors and queues them again.

-- The count the trigger gives a changed text (extension/src/sentences).
CREATE FUNCTION dionysus_internal."sentence_count"(
	"content" TEXT /* & str */
) RETURNS smallint /* i16 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sentence_count_wrapper';

ALTER TABLE memories ADD COLUMN sentence_count smallint CHECK (sentence_count >= 1);

CREATE TABLE sentence_queue (
    memory_id  uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    queued_at  timestamptz NOT NULL DEFAULT now(),
    -- A batch that failed (the model down, a provider refusing a text) waits, doubling up to an
    -- hour, so the memories behind it go on; each of its memories is then tried on its own.
    attempts   integer NOT NULL DEFAULT 0,
    not_before timestamptz NOT NULL DEFAULT now(),
    last_error text
);
CREATE INDEX sentence_queue_order ON sentence_queue (queued_at, memory_id);

CREATE TABLE memory_sentences (
    memory_id uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    ord       smallint NOT NULL CHECK (ord >= 1),
    -- The store's model's vector (any width: a re-index swap empties the table first).
    embedding vector NOT NULL,
    PRIMARY KEY (memory_id, ord)
);

-- A memory's text changed: counted again, its old vectors gone, queued if it has several.
CREATE FUNCTION dionysus_internal.sentences_follow_content() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF NEW.content IS DISTINCT FROM OLD.content THEN
        NEW.sentence_count := dionysus_internal.sentence_count(NEW.content);
        DELETE FROM dionysus.memory_sentences s WHERE s.memory_id = NEW.id;
        IF NEW.sentence_count >= 2 THEN
            INSERT INTO dionysus.sentence_queue AS q (memory_id) VALUES (NEW.id)
            ON CONFLICT (memory_id) DO UPDATE SET queued_at = now(), attempts = 0, not_before = now(), last_error = NULL;
        END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER memories_sentences_follow_content BEFORE UPDATE OF content ON memories
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.sentences_follow_content();

INSERT INTO recall_config (key, value, description) VALUES
    ('sentence_share', 0.5,
     'how far a memory''s vector score is raised towards its closest sentence''s cosine, when that is higher (0: the whole text only; 1: its best sentence)');

INSERT INTO sentence_queue (memory_id, queued_at)
SELECT m.id, m.created_at FROM memories m WHERE m.content ~ '[.!?]';

-- CREATE OR REPLACE resets the function's settings: its search_path is set again as
-- sql/900_api.sql sets it.
CREATE OR REPLACE FUNCTION dionysus_internal.reindex_swap(run_id uuid) RETURNS jsonb
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
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION dionysus_internal.reindex_swap(uuid) SET search_path = pg_catalog, dionysus, %I',
                   (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'));
END $$;

-- The driver's role, as for the other derived tables: run_maintenance() in its name (a server
-- without the worker) makes sentence vectors, and remember in its name queues them.
GRANT SELECT, INSERT, UPDATE, DELETE ON memory_sentences, sentence_queue TO dionysus_driver;
GRANT EXECUTE ON FUNCTION dionysus_internal.sentence_count(text), dionysus_internal.sentences_follow_content(),
                          dionysus_internal.recently_recalled(timestamptz, integer) TO dionysus_driver;

COMMENT ON TABLE memory_sentences IS
    'A vector per sentence of a memory of several (at most 16, in runs of consecutive sentences), made by the maintenance pass with the store''s model; recall raises a memory''s vector score towards its closest sentence''s (recall_config.sentence_share). Emptied by a re-index swap, which queues them all again.';
COMMENT ON TABLE sentence_queue IS
    'Memories of several sentences waiting for their sentence vectors (the maintenance pass, oldest first).';
COMMENT ON COLUMN memories.sentence_count IS
    'How many sentences the text has for sentence vectors (1: none of its own, its vector is its sentence''s), counted when it is written or changed; NULL: written before 0.16.0.';
COMMENT ON FUNCTION dionysus_internal.sentence_count(text) IS
    'memories.sentence_count of a text: its sentences of three words or more, the "Name: " label aside, at most 16 (1 when fewer than two).';
COMMENT ON FUNCTION dionysus_internal.sentences_follow_content() IS
    'Trigger: a memory''s changed text is counted again, its old sentence vectors deleted, and queued when it has several.';
COMMENT ON FUNCTION dionysus_internal.recently_recalled(timestamptz, integer) IS
    'The memories recall touched since a time that the access log still holds, newest first; none on a hot standby (the log is unlogged).';
COMMENT ON FUNCTION run_maintenance IS
    'One maintenance pass in this session: up to 1000 neighborhoods, up to 64 memories split into sentence vectors, the access log, '
    'the lexicon (retention is prune_history(), which the worker runs and the driver''s role may not). '
    'Returns a summary with neighborhoods_remaining and sentences_remaining: call again while either is above zero.';
