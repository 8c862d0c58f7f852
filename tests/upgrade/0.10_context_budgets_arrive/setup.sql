-- from: 0.10.0
-- The release before context budgets: a long memory of Ada's and her question, as 0.10.0 wrote them.
INSERT INTO dionysus.memories (type, content, embedding, importance, source, private_to)
SELECT 'episodic', t, dionysus.embed(t), 0.6, 'seed', ARRAY['test:ada']
  FROM (SELECT 'The user described their whole first week at the new job: '
               || repeat('meetings about the roadmap, a lunch with the team, a bug hunt that ran late, and a quiet walk home. ', 8) AS t) s;
INSERT INTO dionysus.memories (type, content, embedding, importance, source, private_to, metadata)
SELECT 'episodic', t, dionysus.embed(t), 0.5, 'conversation:test:dm:ada', ARRAY['test:ada'], '{"role": "user", "platform": "test", "channel_id": "dm:ada"}'
  FROM (SELECT 'How was my first week at the new job again?' AS t) s;
INSERT INTO dionysus.messages (platform, platform_message_id, channel_id, author_id, content, memory_id, person)
SELECT 'test', 'a1', 'dm:ada', 'ada', content, id, 'test:ada' FROM dionysus.memories WHERE content LIKE 'How was%';

CREATE TEMP TABLE before AS
SELECT (SELECT string_agg(id::text || content || coalesce(summary, '-'), ',' ORDER BY id) FROM dionysus.memories)
       || (SELECT string_agg(id::text || content, ',' ORDER BY id) FROM dionysus.messages)
       || (SELECT string_agg(name || similarity_threshold, ',' ORDER BY name) FROM dionysus.context_archetypes) AS state;
