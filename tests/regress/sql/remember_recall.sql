-- Remember and recall: the first two calls of Dionysus's memory.
-- Every file here starts from a fresh install, quietly, with times shown in UTC; the
-- maintenance worker is held off the database (scripts/regress.sh), so nothing moves
-- between two statements.
SET client_min_messages = warning; SET timezone = 'UTC'; SET datestyle = 'ISO';
DROP EXTENSION IF EXISTS dionysus; CREATE EXTENSION dionysus CASCADE;

-- Embeddings are made inside the database by a small local model: no service to call.
-- (Its int8 form where the CPU has AVX-512 VNNI: the key then ends in ':int8'.)
SELECT regexp_replace(info ->> 'model_key', ':int8$', '') AS model, info -> 'dimensions' AS dimensions
  FROM dionysus.embedding_info() AS info;

-- remember(content, type, importance, ...) stores plain text and returns the memory's id.
-- The type says what kind of memory it is: episodic (something that happened), semantic
-- (something known), procedural (how to), strategic (a plan).
SELECT dionysus.remember('The user prefers dark mode in every editor', 'semantic', importance => 0.8) IS NOT NULL AS stored;
SELECT dionysus.remember('We talked about the weather in Berlin', 'episodic') IS NOT NULL AS stored;
SELECT dionysus.remember('The user drinks green tea every morning', 'semantic') IS NOT NULL AS stored;

-- recall(query, k) finds memories by meaning, not by shared words: "UI theme" finds "dark
-- mode". Each row carries every part of its score (rounded here to one decimal: a float's last
-- digits may differ from one CPU to another), how it was found, and the memory's stage in its
-- fading life (see decay.sql).
SELECT content, type, round(score::numeric, 1) AS score, round(vector_score::numeric, 1) AS by_meaning,
       round(lexical_score::numeric, 1) AS by_words, found_by, stage
  FROM dionysus.recall('what UI theme does the user like?', 3)
 ORDER BY score DESC, content;

-- Filters narrow it: by type (here: not the episodic one), min_importance, time (since,
-- until), episode or person.
SELECT content FROM dionysus.recall('morning drink', 5, types => ARRAY['semantic'])
 ORDER BY score DESC, content;

-- recall_by_id reads one memory back whole.
SELECT type, content, round(importance::numeric, 2) AS importance, status
  FROM dionysus.recall_by_id((SELECT memory_id FROM dionysus.recall('dark mode', 1)));

-- remember_batch stores many at once, all or nothing, with one batched embedding.
SELECT ord, memory_id IS NOT NULL AS stored
  FROM dionysus.remember_batch('[{"content": "The user has a cat named Miso"},
                                 {"content": "The user is learning Portuguese", "type": "semantic"}]')
 ORDER BY ord;

-- recall_recent lists the newest first, without a query.
SELECT content, type FROM dionysus.recall_recent(2, types => ARRAY['semantic']) ORDER BY created_at DESC;

-- connect(from, to, relation, weight) draws a typed, weighted edge, and recall follows edges:
-- a memory tied to a good match comes along though its words are far from the query.
-- (psql's \gset keeps a column in a variable: :'tap' below.)
SELECT dionysus.remember('The kitchen tap is leaking again') AS tap \gset
SELECT dionysus.remember('Plumber Jonas charges 80 euros per visit', 'semantic') AS jonas \gset
SELECT dionysus.connect(:'tap', :'jonas', 'ASSOCIATED', 1.0);
-- The worker keeps each memory's neighbourhood; here it is asked for now.
SELECT dionysus.recompute_neighborhoods(100) > 0 AS neighbourhoods_computed;
SELECT content, found_by, association_score > 0 AS through_the_edge
  FROM dionysus.recall('dripping faucet', 2)
 ORDER BY score DESC, content;
