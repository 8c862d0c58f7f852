-- from: 0.16.0
-- The last release that folded recall counts into the memory's own row: the spare key's memory
-- recalled three times (folded: its access_count) and once more (not yet folded: the log).
-- Not the worker's to fold while this case watches the log (this session's lock, to the end).
SELECT pg_advisory_lock(hashtextextended('dionysus.fold_access_log', 0));
INSERT INTO dionysus.memories (type, content, embedding, access_count, last_accessed)
SELECT 'episodic', t, dionysus.embed(t), n, CASE WHEN n > 0 THEN now() END
  FROM (VALUES ('The spare key is under the blue flowerpot', 3), ('The boiler is serviced every October', 0)) v(t, n);
INSERT INTO dionysus.memory_access_log (memory_id) SELECT id FROM dionysus.memories WHERE content LIKE 'The spare key%';
CREATE TEMP TABLE key AS SELECT id FROM dionysus.memories WHERE content LIKE 'The spare key%';
