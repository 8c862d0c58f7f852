-- Every memory is kept and the shipped budget is lowered from 1000 to 200; recall on the updated
-- schema counts the query's words on a memory the word search did not look up, and reads the
-- question's name as a speaker through the speaker index the update brings.
SELECT 'nothing lost' AS check,
       (SELECT string_agg(id::text || content, ',' ORDER BY id) FROM dionysus.memories) = (SELECT state FROM before) AS ok,
       'memories changed' AS detail;
SELECT 'the word search''s budget is 200' AS check, value = 200 AS ok, value::text AS detail
  FROM dionysus.recall_config WHERE key = 'lexical_candidates';
SELECT dionysus.refresh_lexicon();
-- A budget below the word's five memories: it is not looked up, only counted.
UPDATE dionysus.recall_config SET value = 1 WHERE key = 'lexical_candidates';
SELECT 'every memory recalled has the query''s word counted' AS check, count(*) = 5 AS ok, count(*)::text AS detail
  FROM dionysus.recall('the garden', 5) WHERE lexical_score > 0;
SELECT 'the speaker index arrives with the update' AS check, to_regclass('dionysus.memories_speaker_words') IS NOT NULL AS ok, '' AS detail;
SELECT 'Mira''s turn comes first: her name is read as its speaker' AS check, person_score = 1.0 AS ok, content || ' ' || person_score AS detail
  FROM dionysus.recall('What pet did Mira adopt?', 1);
