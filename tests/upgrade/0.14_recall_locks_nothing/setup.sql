-- from: 0.14.0
-- hook: a_forget_beside_an_open_recall
-- The last release whose access log locked what recall read (a foreign key to memories) and
-- whose word index kept a pending list: three memories and two recalls not yet folded. The
-- hook then shows 0.14.0's lock: a forget of the key's memory, beside a transaction still open
-- that logged a recall of it, waits for it (55P03 at lock_timeout).
-- Not the worker's to fold while this case watches the log (this session's lock, to the end).
SELECT pg_advisory_lock(hashtextextended('dionysus.fold_access_log', 0));
INSERT INTO dionysus.memories (type, content, embedding)
SELECT 'episodic', t, dionysus.embed(t)
  FROM unnest(ARRAY['The spare key is under the blue flowerpot', 'Mira: I adopted a tortoise called Shelly',
                    'The boiler is serviced every October']) t;
-- What 0.14.0's recall('where is the spare key?', 2) logged.
INSERT INTO dionysus.memory_access_log (memory_id)
SELECT id FROM dionysus.memories WHERE content LIKE 'The spare key%' OR content LIKE 'The boiler%';

CREATE TEMP TABLE before AS SELECT string_agg(id::text || content, ',' ORDER BY id) AS state FROM dionysus.memories;
