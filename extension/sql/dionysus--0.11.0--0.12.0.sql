-- Dionysus 0.11.0 → 0.12.0: Recall 2.0 (issue #10). Lexical evidence is the share of the
-- query's information a memory matches (BM25 over the query's own IDF mass), not a share of the
-- best match of the moment; a neighbour inherits a share of its seed's meaning-relevance (the
-- most any one seed lends) and counts it beyond its own, so near-duplicates do not lift each
-- other; the people a question names (what they said) and the times it names (a day, a month,
-- a year, "last week") are components of their own, and named days and months are searched
-- directly. recall returns two more columns, person_score and time_score; the old signature is
-- replaced. Every row is kept. recall_config gains the new knobs; a lexical weight still at the
-- old default moves to the new scale's (a weight the owner set is theirs and stays).

-- ---------------------------------------------------------------------------------------
-- recall with its two new components (extension/src/recall)
-- ---------------------------------------------------------------------------------------
DROP FUNCTION recall(text, integer, text[], timestamp with time zone, timestamp with time zone, double precision, uuid, text);
CREATE  FUNCTION "recall"(
	"query" TEXT, /* Option < & str > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"types" TEXT[] DEFAULT NULL, /* :: std :: option :: Option < Vec < Option < String > > > */
	"since" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"until" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"min_importance" double precision DEFAULT NULL, /* Option < f64 > */
	"episode_id" uuid DEFAULT NULL, /* Option < Uuid > */
	"person" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"memory_id" uuid,  /* Uuid */
	"content" TEXT,  /* String */
	"type" TEXT,  /* String */
	"created_at" timestamp with time zone,  /* TimestampWithTimeZone */
	"score" double precision,  /* f64 */
	"vector_score" double precision,  /* f64 */
	"lexical_score" double precision,  /* f64 */
	"association_score" double precision,  /* f64 */
	"temporal_score" double precision,  /* f64 */
	"importance_score" double precision,  /* f64 */
	"recency_score" double precision,  /* f64 */
	"found_by" TEXT,  /* String */
	"stage" TEXT,  /* String */
	"person_score" double precision,  /* f64 */
	"time_score" double precision  /* f64 */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'recall_wrapper';

-- ---------------------------------------------------------------------------------------
-- recall_config: the new knobs, and the descriptions of the changed ones
-- ---------------------------------------------------------------------------------------
UPDATE recall_config SET value = 1.0 WHERE key = 'weight_lexical' AND value = 0.35;
INSERT INTO recall_config (key, value, description) VALUES
    ('weight_vector',      1.00, 'cosine similarity of the memory to the query'),
    ('weight_lexical',     1.00, 'BM25 match of the query words, as the share of the query''s information (IDF mass) matched'),
    ('lexical_corroboration', 0.30, 'cosine similarity from which a lexical match counts whole; below it, in proportion (shared words about another subject count little)'),
    ('weight_person',      0.40, 'said by someone the query names (its "Name: " label), or naming them in the share person_mention'),
    ('person_mention',     0,    'what a memory that only names someone the query names counts of weight_person (0: only their own words)'),
    ('weight_time',        0.30, 'made within the days, months or years the query names (halving with distance outside them)'),
    ('weight_association', 0.30, 'the share of a seed''s meaning-relevance lent through its precomputed neighborhood or graph edges'),
    ('weight_temporal',    0.35, 'the share of a seed''s meaning-relevance lent to the turns around it in its episode'),
    ('inherit_beyond_own', 0.50, 'how much of its own meaning-relevance a neighbour''s inheritance must exceed to count (1: only beyond it, so near-duplicates lift nothing; 0: all of it)'),
    ('weight_importance',  0.10, 'the memory''s importance'),
    ('weight_recency',     0.05, 'recency decay of the memory''s creation time'),
    ('recency_half_life_days', 30, 'age at which the recency component halves'),
    ('seed_multiplier',    4,    'vector and lexical seeds fetched per result asked for'),
    ('min_seeds',          40,   'fewest seeds fetched from each index'),
    ('expand_seeds',       10,   'how many of the best seeds are expanded through neighborhoods, edges and episodes'),
    ('temporal_window',    2,    'turns either side of a seed taken as episodic context'),
    ('temporal_decay',     0.5,  'factor per turn of distance from the seed'),
    ('bm25_k1',            1.2,  'BM25 term-frequency saturation'),
    ('bm25_b',             0.75, 'BM25 length normalisation'),
    ('lexical_max_df',     0.25, 'lexemes in more than this share of memories are not matched (too common to tell memories apart)'),
    ('lexical_candidates', 1000, 'most memories scored by BM25 per query (the rarest query words pick them)')
ON CONFLICT (key) DO UPDATE SET description = EXCLUDED.description;

COMMENT ON FUNCTION recall IS
    'Hybrid recall of the k memories most relevant to a text: HNSW vector seeds, the nearest within the days or months '
    'the text names, and BM25 lexical seeds scored as the share of the query''s information matched; the best expanded '
    'through neighborhoods, graph edges and episode-adjacent turns (a neighbour inherits a share of its seed''s relevance, '
    'beyond its own); the people the text names (what they said) and its dates count; weighted by importance and recency '
    '(weights in dionysus.recall_config). Filters: types, since/until, min_importance, episode_id, and person '
    '(only what that person may see: nothing private to someone else). Returns each score component and found_by, '
    'the channel that found the memory, and stage: fresh, fading (its summary) or distant (its residue), sql/021_decay.sql.';

GRANT EXECUTE ON FUNCTION recall(text, integer, text[], timestamp with time zone, timestamp with time zone, double precision, uuid, text)
    TO dionysus_driver;
