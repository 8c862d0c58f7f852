-- from: 0.15.0
-- The last release whose access log was WAL-logged: two memories (the boiler's of two
-- sentences) and the two recalls of them not yet folded.
-- Not the worker's to fold while this case watches the log (this session's lock, to the end).
SELECT pg_advisory_lock(hashtextextended('dionysus.fold_access_log', 0));
INSERT INTO dionysus.memories (type, content, embedding)
SELECT 'episodic', t, dionysus.embed(t)
  FROM unnest(ARRAY['The spare key is under the blue flowerpot',
                    'The boiler is serviced every October. The plumber comes on a Tuesday morning.']) t;
-- What 0.15.0's recall('where is the spare key?', 2) logged.
INSERT INTO dionysus.memory_access_log (memory_id) SELECT id FROM dionysus.memories;
SELECT '0.15.0''s access log is logged' AS check, relpersistence = 'p' AS ok, relpersistence::text AS detail
  FROM pg_class WHERE oid = 'dionysus.memory_access_log'::regclass;
