-- Episodes: memories grouped by what happened together, summarised when they end.
-- A fresh install, quietly, with times shown in UTC (every file here starts so).
SET client_min_messages = warning; SET timezone = 'UTC'; SET datestyle = 'ISO';
DROP EXTENSION IF EXISTS dionysus; CREATE EXTENSION dionysus CASCADE;

-- Memories of one source (a channel, a call, an agent) join its current episode; a gap of
-- more than 30 minutes (dionysus.episode_gap_minutes) starts a new one. created_at gives
-- each memory its own time, as an import would.
SELECT dionysus.remember('Alice: did you see the match yesterday?', source => 'chat', created_at => '2026-03-02 10:00+00') IS NOT NULL AS stored;
SELECT dionysus.remember('Bob: yes, the goalkeeper saved three penalties', source => 'chat', created_at => '2026-03-02 10:01+00') IS NOT NULL AS stored;
SELECT dionysus.remember('Alice: lunch tomorrow?', source => 'chat', created_at => '2026-03-02 10:45+00') IS NOT NULL AS stored;
SELECT e.started_at, count(*) AS memories
  FROM dionysus.episodes e JOIN dionysus.episode_memories em ON em.episode_id = e.id
 WHERE e.source = 'chat'
 GROUP BY e.id ORDER BY e.started_at;

-- open_episode(source, title, started_at) opens one explicitly; it lasts until it is closed.
SELECT dionysus.open_episode('call', 'Planning the move', '2026-03-02 09:00+00') AS move \gset
SELECT dionysus.remember('We need boxes by Friday', source => 'call', created_at => '2026-03-02 09:05+00') IS NOT NULL AS stored;
SELECT dionysus.remember('The van is booked for Saturday', source => 'call', created_at => '2026-03-02 09:10+00') IS NOT NULL AS stored;
SELECT dionysus.close_episode(:'move', '2026-03-02 09:30+00');

-- episode_transcript(id) reads it back in order.
SELECT t ->> 'at' AS at, t ->> 'content' AS content
  FROM jsonb_array_elements(dionysus.episode_transcript(:'move')) WITH ORDINALITY AS x(t, n)
 ORDER BY n;

-- A closed episode waits for its summary. The worker's language pass queues the job for the
-- driver (here asked for now), and the driver hands the fast model's answer to complete_work:
-- the summary, and how it went (outcome, surprise, lessons). Three wait: the two chat
-- episodes above are over too, the second idle for longer than the gap.
SELECT dionysus.enqueue_language_work() AS jobs_queued;
SELECT id AS job FROM dionysus.work_queue
 WHERE action = 'summarize_episode' AND params ->> 'episode_id' = :'move' \gset
SELECT action, status FROM dionysus.claim_work_item(:'job', 'regress');
SELECT (dionysus.complete_work(:'job', '{"episode_summary": "We planned the move: boxes by Friday, the van on Saturday.",
                                       "episode": {"outcome": "success", "surprise": 0.1,
                                                   "lessons": ["Book the van early"]}}') -> 'episode') - 'episode_id' AS stored;
SELECT title, summary, outcome, round(surprise::numeric, 2) AS surprise, lessons, started_at, ended_at
  FROM dionysus.episodes WHERE id = :'move';

-- recall can be narrowed to one episode.
SELECT content FROM dionysus.recall('moving day', 5, episode_id => :'move') ORDER BY content;
