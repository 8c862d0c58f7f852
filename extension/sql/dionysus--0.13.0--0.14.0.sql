-- Dionysus 0.13.0 → 0.14.0: every candidate's words are counted, and the word search is bounded.
-- Recall scores the query's words (BM25 over the query's information) on every memory it
-- considers: the ones found by meaning, by time, by their words or through a neighbour. So the
-- word search only has to find what nothing else finds: the memories with the query's rarer
-- words, as long as their memories together fit lexical_candidates. Common words are no longer
-- looked up two at a time (a sample at a large store, and the slowest part of recall); they are
-- counted on the memories found otherwise. The budget's default falls from 1000 to 200: a person
-- who tuned it keeps their value. And whether a name the question has is someone who speaks in
-- the store is an index lookup (memories_speaker_words), not a look through the memories that
-- mention the name. Nothing else changes; every row is kept.

UPDATE recall_config
   SET value = 200,
       description = 'most memories the query''s words look up per recall: its rarest words search while their memories together fit, and the rest are counted on the memories found otherwise'
 WHERE key = 'lexical_candidates' AND value = 1000;
UPDATE recall_config
   SET description = 'most memories the query''s words look up per recall: its rarest words search while their memories together fit, and the rest are counted on the memories found otherwise'
 WHERE key = 'lexical_candidates';

CREATE FUNCTION dionysus_internal.speaker_words(content text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN position(': ' IN left(content, 64)) > 0 AND char_length(split_part(left(content, 64), ': ', 1)) <= 40 AND split_part(left(content, 64), ': ', 1) !~ '[.!?,\n]' THEN regexp_split_to_array(lower(split_part(left(content, 64), ': ', 1)), '[\s\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+') END $$;
COMMENT ON FUNCTION dionysus_internal.speaker_words(text) IS
    'The words of a memory''s "Name: " label, lowercased (NULL without one, or with one longer than 40 characters or with sentence punctuation, which query.rs does not read as a speaker): the key of memories_speaker_words, which recall reads to tell a speaker from a place. recall writes the same expression inline (recall::SPEAKER_WORDS_SQL), so a caller needs no access to dionysus_internal.';
CREATE INDEX memories_speaker_words ON memories USING gin (dionysus_internal.speaker_words(content)) WHERE status = 'active';
GRANT EXECUTE ON FUNCTION dionysus_internal.speaker_words(text) TO dionysus_driver;
