-- Facts and triples: what Dionysus knows, and how it changes its mind.
-- A fresh install, quietly, with times shown in UTC (every file here starts so).
SET client_min_messages = warning; SET timezone = 'UTC'; SET datestyle = 'ISO';
DROP EXTENSION IF EXISTS dionysus; CREATE EXTENSION dionysus CASCADE;

-- learn(content, subject, category, confidence) stores a fact (a semantic memory).
SELECT dionysus.learn('The user is allergic to shellfish', subject => 'user', confidence => 0.6) AS allergy \gset
-- Told again in other words: a fact at least 0.95 similar is confirmed, not stored twice.
-- The same id comes back and its confidence rises.
SELECT dionysus.learn('The user is allergic to shellfish.', confidence => 0.9) = :'allergy' AS same_fact;
SELECT content, round(confidence::numeric, 2) AS confidence, status
  FROM dionysus.recall_by_id(:'allergy');

-- supersede(old, new words): the old fact is kept as history, the new one answers.
SELECT dionysus.learn('The user works at Acme', subject => 'user', category => 'work') AS acme \gset
SELECT dionysus.supersede(:'acme', 'The user works at Globex') AS globex \gset
SELECT content, status FROM dionysus.recall_by_id(:'acme')
UNION ALL
SELECT content, status FROM dionysus.recall_by_id(:'globex')
 ORDER BY status, content;
SELECT content FROM dionysus.recall('where does the user work?', 5)
 WHERE content LIKE '%works at%' ORDER BY content;

-- archive(id) keeps a memory but takes it out of recall; forget(id) deletes it.
SELECT dionysus.archive(:'globex');
SELECT count(*) AS recalled FROM dionysus.recall('where does the user work?', 5) WHERE memory_id = :'globex';
SELECT dionysus.forget(:'globex');
SELECT NOT EXISTS (SELECT 1 FROM dionysus.memories WHERE id = :'globex') AS gone;

-- add_triple(subject, predicate, object) records a relation between two entities, and
-- triples_about(entity) reads every triple it is part of, as subject or object.
SELECT dionysus.add_triple('Alice', 'works_at', 'Acme', confidence => 0.9) IS NOT NULL AS stored;
SELECT dionysus.add_triple('Bob', 'manages', 'Alice') IS NOT NULL AS stored;
SELECT dionysus.add_triple('Acme', 'based_in', 'Vienna') IS NOT NULL AS stored;
SELECT subject, predicate, object, round(confidence::numeric, 2) AS confidence
  FROM dionysus.triples_about('Alice')
 ORDER BY subject, predicate, object;

-- recall_all(query, k) is one ranked list of everything recall can find, each with its kind:
-- memories, facts, and (for a person) procedures, censors and episodes.
SELECT kind, content FROM dionysus.recall_all('food allergy', 1) ORDER BY score DESC, content;
