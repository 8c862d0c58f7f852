-- from: 0.13.0
-- The last release whose word search looked common words up two at a time, with its shipped
-- budget (1000 candidates): five memories with the same word and one turn of Mira's.
INSERT INTO dionysus.memories (type, content, embedding)
SELECT 'episodic', t, dionysus.embed(t)
  FROM (SELECT 'The garden needs weeding, note ' || i AS t FROM generate_series(0, 4) i
        UNION ALL SELECT 'Mira: I adopted a tortoise called Shelly') s;

CREATE TEMP TABLE before AS SELECT string_agg(id::text || content, ',' ORDER BY id) AS state FROM dionysus.memories;
