-- from: 0.12.0
-- to: 0.13.0
-- hook: a_writer_holds_an_episode
-- The last release whose gap rule waited on a writer's episode: two sources, each with an
-- episode left open two hours ago. The hook then holds gap_b's episode in a writer's open
-- transaction and sees 0.12.0's enqueue_language_work wait for it (55P03 at lock_timeout).
-- The update goes to 0.13.0, the release that brought the change: a later one builds an index
-- on memories, which would wait for that writer like any CREATE INDEX.
INSERT INTO dionysus.memories (type, content, embedding, source, created_at)
SELECT 'episodic', 'the first turn of ' || s, dionysus.embed('the first turn of ' || s), s, now() - interval '2 hours'
  FROM unnest(ARRAY['gap_a', 'gap_b']) s;
INSERT INTO dionysus.episodes (source, started_at, last_event_at, memory_count)
SELECT source, created_at, created_at, 1 FROM dionysus.memories;
INSERT INTO dionysus.episode_memories (episode_id, memory_id, sequence_order)
SELECT e.id, m.id, 1 FROM dionysus.memories m JOIN dionysus.episodes e ON e.source = m.source;

CREATE TEMP TABLE before AS
SELECT string_agg(m.id::text || m.content || e.episode_id::text, ',' ORDER BY m.id) AS state
  FROM dionysus.memories m JOIN dionysus.episode_memories e ON e.memory_id = m.id;
