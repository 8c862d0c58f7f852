-- Sentence vectors (issue #10): a memory of several sentences keeps a vector for each, so recall
-- can tell a turn that says the answer in one sentence among others ("Hey Mel! Thanks for the
-- card. Last weekend I joined a mentorship program.") from one that is merely near the question
-- as a whole. The whole text's vector averages its sentences; the answer's sentence is diluted
-- by the greeting around it.
--
-- Made by the maintenance pass, never on the write path: remember stays one embedding; it only
-- counts the sentences (memories.sentence_count, from the text alone) and queues a memory of two
-- or more. The pass embeds them and never updates the memory's row: an update that is not HOT
-- would put the memory into every index again, the HNSW graph included. NULL counts are the
-- memories written before 0.16.0 (recall looks their sentences up; the update queued those that
-- may have several). A re-index swap empties the table and queues them all again, so every
-- vector here is the store's model's (sql/020_reindex.sql). A changed text (decay's compression)
-- is counted again and queued by a trigger, its old sentence vectors gone.
--
-- Lock order: the pass takes its queue rows (FOR UPDATE SKIP LOCKED) and their memories' rows
-- (FOR KEY SHARE SKIP LOCKED: a memory being forgotten is skipped, and goes with its queue row
-- through the cascade) in one statement, never waiting, then writes sentence rows. A forget
-- that comes after waits for the batch (a few memories' embeddings). A text changed while a
-- pass embeds the old one queues the memory again once that pass is done (the trigger's insert
-- waits for the queue row the pass holds), so the old text's vectors are replaced.

CREATE TABLE sentence_queue (
    memory_id  uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    queued_at  timestamptz NOT NULL DEFAULT now(),
    -- A batch that failed (the model down, a provider refusing a text) waits, doubling up to an
    -- hour, so the memories behind it go on; each of its memories is then tried on its own.
    attempts   integer NOT NULL DEFAULT 0,
    not_before timestamptz NOT NULL DEFAULT now(),
    last_error text
);
COMMENT ON TABLE sentence_queue IS
    'Memories of several sentences waiting for their sentence vectors (the maintenance pass, oldest first).';
CREATE INDEX sentence_queue_order ON sentence_queue (queued_at, memory_id);

CREATE TABLE memory_sentences (
    memory_id uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    ord       smallint NOT NULL CHECK (ord >= 1),
    -- The store's model's vector (any width: a re-index swap empties the table first).
    embedding vector NOT NULL,
    PRIMARY KEY (memory_id, ord)
);
COMMENT ON TABLE memory_sentences IS
    'A vector per sentence of a memory of several (at most 16, in runs of consecutive sentences), made by the maintenance pass with the store''s model; recall raises a memory''s vector score towards its closest sentence''s (recall_config.sentence_share). Emptied by a re-index swap, which queues them all again.';

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
COMMENT ON FUNCTION dionysus_internal.sentences_follow_content() IS
    'Trigger: a memory''s changed text is counted again, its old sentence vectors deleted, and queued when it has several.';
CREATE TRIGGER memories_sentences_follow_content BEFORE UPDATE OF content ON memories
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.sentences_follow_content();

INSERT INTO recall_config (key, value, description) VALUES
    ('sentence_share', 0.5,
     'how far a memory''s vector score is raised towards its closest sentence''s cosine, when that is higher (0: the whole text only; 1: its best sentence)');
