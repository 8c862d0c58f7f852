-- Dionysus 0.14.0 → 0.15.0: recall reads without taking locks or reading a pending list.
-- The access log loses its foreign key: its check locked every memory a recall returned
-- (FOR KEY SHARE, a write to the memory's row), so a forget waited for any open transaction that
-- had recalled the memory, and a reader and a writer of two memories could deadlock. A log row
-- whose memory is gone matches nothing in the fold and goes with it; forget deletes its own.
-- The GIN indexes recall reads (the words, the speakers) keep no pending list: every search read
-- through it until a vacuum merged it (0.7 ms of a recall at 100k memories); their pending
-- entries are merged now. Nothing else changes; every row is kept.

ALTER TABLE memory_access_log DROP CONSTRAINT memory_access_log_memory_id_fkey;
COMMENT ON TABLE memory_access_log IS
    'Recall hits not yet folded into memories.access_count by the worker. No foreign key, so that recall locks no memory: the rows of a memory since deleted go with the next fold.';

ALTER INDEX memories_search_gin SET (fastupdate = off);
ALTER INDEX memories_speaker_words SET (fastupdate = off);
SELECT gin_clean_pending_list('memories_search_gin'::regclass), gin_clean_pending_list('memories_speaker_words'::regclass);
