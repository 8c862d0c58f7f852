-- Every memory is kept; the lexical weight still at its old default moves to the new scale,
-- while a weight the owner set stays theirs; the new knobs arrive; recall answers with its two
-- new components (person, time) as the driver's role.
SELECT 'nothing lost' AS check,
       (SELECT string_agg(id::text || content || created_at::text, ',' ORDER BY id) FROM dionysus.memories) = (SELECT state FROM before) AS ok,
       'memories changed' AS detail;
SELECT 'recall_config ' || key || ' = ' || want AS check, value = want AS ok, value::text AS detail
  FROM dionysus.recall_config
  JOIN (VALUES ('weight_lexical', 1.0::float8),   -- the old default, moved to the new scale
               ('weight_temporal', 0.2),          -- the owner's own weight stays
               ('weight_person', 0.4),
               ('inherit_beyond_own', 0.5)) AS w(k, want) ON key = k;
SELECT 'four recall knobs checked' AS check, count(*) = 4 AS ok, count(*)::text AS detail
  FROM dionysus.recall_config WHERE key IN ('weight_lexical', 'weight_temporal', 'weight_person', 'inherit_beyond_own');

SET ROLE dionysus_driver;
SELECT 'recall names Melanie''s turn first, by its person and its day' AS check,
       content LIKE 'Melanie:%' AND person_score = 1.0 AND time_score > 0.5 AS ok,
       content || ' person ' || person_score || ' time ' || time_score AS detail
  FROM dionysus.recall('What did Melanie do on May 7, 2023?', 1);
RESET ROLE;
