-- from: 0.11.0
-- The release before Recall 2.0: two turns of a conversation, and a recall weight the owner set.
INSERT INTO dionysus.memories (type, content, embedding, created_at)
SELECT 'episodic', t, dionysus.embed(t), '2023-05-08 13:56+00'
  FROM unnest(ARRAY['Caroline: I went to the support group yesterday', 'Melanie: I went to a pottery class yesterday']) t;
UPDATE dionysus.recall_config SET value = 0.2 WHERE key = 'weight_temporal';

CREATE TEMP TABLE before AS
SELECT string_agg(id::text || content || created_at::text, ',' ORDER BY id) AS state FROM dionysus.memories;
