-- Dionysus schema: the memory store of one agent (one agent per database).
--
-- Loaded first by CREATE EXTENSION (pgrx `bootstrap`). The extension's own schema is
-- `dionysus` (see dionysus.control); pgvector's `vector` type resolves through the
-- search_path CREATE EXTENSION sets up for the script.
--
-- Two schemas: `dionysus` holds the API (every function a person or the driver calls, each
-- with its COMMENT, so `\df+ dionysus.*` is the reference) and the tables; `dionysus_internal`
-- holds the helpers the API is built from (checks, triggers, scheduler steps), kept apart as
-- pg_graphql keeps its internals. The driver's role may execute them (the API's functions run
-- as their caller) but nothing lists them as something to call.
--
-- Every foreign key has an index on its column, beside its table ("its foreign keys, indexed"):
-- deleting a row it points at (a person leaving, retention, decay) then finds the references by
-- index. Without them a person leaving read the message log twice for each of their turns (28 s
-- for 2,500 of 50,000 turns: scripts/bench.sh leave). A test holds every key to it (upgrade.rs).
--
-- Organisation:
--   enumerations · the clock · episodes · memories · episode membership · facts · entities/triples
--   graph edges · concepts · neighborhoods (+ their stale queue) · embedding cache
--   access log · recall configuration · worker status

CREATE SCHEMA dionysus_internal;
COMMENT ON SCHEMA dionysus_internal IS 'Dionysus internals: helpers of the API in schema dionysus; not for direct use, may change in any release.';

-- True while this session restores a dump (or runs an extension script) as a superuser: the
-- triggers that derive or stamp rows let a restored row in as it was (sql/030_backup.sql).
CREATE FUNCTION dionysus_internal.restoring() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT current_setting('check_function_bodies') = 'off'
       AND coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), false)
$$;
COMMENT ON FUNCTION dionysus_internal.restoring() IS
    'True while this session restores a dump (pg_dump''s scripts and pg_restore set check_function_bodies off, as extension scripts do) as a superuser: triggers that derive or stamp rows then let a restored row in as it was.';

-- ---------------------------------------------------------------------------------------
-- Enumerations
-- ---------------------------------------------------------------------------------------
CREATE TYPE memory_type AS ENUM ('episodic', 'semantic', 'procedural', 'strategic');
CREATE TYPE memory_status AS ENUM ('active', 'archived', 'superseded');
-- 002's fact lifecycle: learned → confirmed → superseded → deactivated.
CREATE TYPE fact_state AS ENUM ('learned', 'confirmed', 'superseded', 'deactivated');
CREATE TYPE edge_relation AS ENUM (
    'TEMPORAL_NEXT', 'CAUSES', 'DERIVED_FROM', 'CONTRADICTS',
    'SUPPORTS', 'INSTANCE_OF', 'PARENT_OF', 'ASSOCIATED'
);
-- Decay's stages of a memory (021): full detail, its summary only, its residue.
CREATE TYPE decay_stage AS ENUM ('fresh', 'fading', 'distant');

-- ---------------------------------------------------------------------------------------
-- The clock: one time source a test can drive, so days replay in minutes. The heartbeat's
-- schedule, the proactive mind (014) and decay (021) run on it; liveness and leases stay on
-- real time. First, as memories' decay clock (reinforced_at) starts on it.
-- ---------------------------------------------------------------------------------------
CREATE TABLE clock (
    id        integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    -- Set: time stands at this instant (tests replay days by advancing it).
    frozen_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE clock IS 'The one clock of the proactive mind: frozen_at set, time stands there (tests replay days by advancing it); NULL, it is now().';
INSERT INTO clock DEFAULT VALUES;

-- (PL/pgSQL: its plan is kept, where an SQL function with a subquery is planned on every call;
-- a tick asks the time some twenty times.)
CREATE FUNCTION clock_now() RETURNS timestamptz
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT frozen_at FROM dionysus.clock WHERE id = 1), now());
END $$;
COMMENT ON FUNCTION clock_now() IS 'The proactive mind''s time: the frozen test clock if set, else now().';

CREATE FUNCTION set_clock(at timestamptz) RETURNS timestamptz
    LANGUAGE plpgsql AS $$
BEGIN
    IF at IS NOT NULL AND NOT isfinite(at) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "at": % is not a finite time', at USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.clock SET frozen_at = at, updated_at = now() WHERE id = 1;
    RETURN dionysus.clock_now();
END $$;
COMMENT ON FUNCTION set_clock(timestamptz) IS 'Freezes the clock at an instant (NULL: real time again). For tests and replays; not granted to the driver.';

CREATE FUNCTION advance_clock(by_interval interval) RETURNS timestamptz
    LANGUAGE plpgsql AS $$
BEGIN
    IF by_interval IS NULL OR by_interval < interval '0' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "by_interval": % (time only moves forward)', by_interval
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.clock SET frozen_at = coalesce(frozen_at, now()) + by_interval, updated_at = now() WHERE id = 1;
    RETURN dionysus.clock_now();
END $$;
COMMENT ON FUNCTION advance_clock(interval) IS 'Moves the clock forward (freezing it at now() first if it ran in real time); returns the new time. Not granted to the driver.';

-- ---------------------------------------------------------------------------------------
-- Episodes: a run of episodic memories from one source without a long gap.
-- ---------------------------------------------------------------------------------------
CREATE TABLE episodes (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    source            text NOT NULL DEFAULT 'default',
    title             text,
    started_at        timestamptz NOT NULL DEFAULT now(),
    last_event_at     timestamptz NOT NULL DEFAULT now(),
    ended_at          timestamptz,
    memory_count      integer NOT NULL DEFAULT 0,
    -- Opened by open_episode(): the gap rule does not close it, close_episode() does.
    explicit          boolean NOT NULL DEFAULT false,
    summary           text,
    summary_embedding vector(384),
    metadata          jsonb NOT NULL DEFAULT '{}'::jsonb
        CHECK (jsonb_typeof(metadata) = 'object'),
    -- Whose words it holds apart from anyone else's: the one person its memories are private to
    -- (their own episode of the source), NULL for the source's shared one (episodes.rs).
    person            text,
    -- What the episode meant, written with its summary (024): the people whose turns it holds,
    -- how it went, how unexpected that was, and at most five lessons.
    participants      text[] NOT NULL DEFAULT '{}',
    outcome           text CHECK (outcome IN ('success', 'failure', 'mixed', 'neutral')),
    surprise          real CHECK (surprise BETWEEN 0 AND 1),
    lessons           text[] NOT NULL DEFAULT '{}' CHECK (cardinality(lessons) <= 5),
    CHECK (ended_at IS NULL OR ended_at >= started_at)
);
COMMENT ON TABLE episodes IS
    'Runs of episodic memories from one source; a gap over dionysus.episode_gap_minutes starts a new one. Once summarised: its participants (the people whose turns it holds), outcome, surprise and lessons (024).';
-- At most one open episode per source and person; writers of different sources never wait on each other.
CREATE UNIQUE INDEX episodes_one_open_per_source ON episodes (source, person) NULLS NOT DISTINCT WHERE ended_at IS NULL;
CREATE INDEX episodes_started ON episodes (started_at DESC);
-- Ended and not yet summarised: the scheduler looks for them every few seconds (012).
CREATE INDEX episodes_unsummarized ON episodes (ended_at) WHERE summary IS NULL AND ended_at IS NOT NULL AND memory_count > 0;

-- ---------------------------------------------------------------------------------------
-- Memories
-- ---------------------------------------------------------------------------------------
CREATE TABLE memories (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    type          memory_type NOT NULL,
    content       text NOT NULL CHECK (length(btrim(content)) > 0),
    -- 002's three detail levels: micro (~20 tokens), summary (50–100 tokens), content (full).
    summary       text,
    micro         text,
    embedding     vector(384) NOT NULL,
    importance    real NOT NULL DEFAULT 0.5 CHECK (importance >= 0 AND importance <= 1),
    confidence    real NOT NULL DEFAULT 1.0 CHECK (confidence >= 0 AND confidence <= 1),
    valence       real NOT NULL DEFAULT 0.0 CHECK (valence >= -1 AND valence <= 1),
    status        memory_status NOT NULL DEFAULT 'active',
    source        text,
    metadata      jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    superseded_by uuid REFERENCES memories (id) ON DELETE SET NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    -- The people whose private words this memory carries (person keys such as 'discord:123');
    -- NULL: nobody's. A person sees a memory only when it is private to nobody but them.
    private_to    text[],
    -- Lexical side of recall; 'simple' keeps every word, 'english' stems and drops stop words.
    search        tsvector GENERATED ALWAYS AS (
        to_tsvector('english'::regconfig, coalesce(summary, '') || ' ' || content)
    ) STORED,
    -- Decay (021): the stage it has faded to, when it was last met (made, or mentioned again) on
    -- the clock, and pinned: never decayed.
    stage         decay_stage NOT NULL DEFAULT 'fresh',
    reinforced_at timestamptz NOT NULL DEFAULT dionysus.clock_now() CHECK (isfinite(reinforced_at)),
    pinned        boolean NOT NULL DEFAULT false,
    -- Its sentences (029), counted from the text alone; NULL for memories written before 0.16.0.
    sentence_count smallint CHECK (sentence_count >= 1)
);
COMMENT ON TABLE memories IS
    'Every memory: episodic, semantic (facts), procedural, strategic. Embedded by the store''s model (embedding_store: '
    'all-MiniLM-L6-v2, vector(384), unless a re-index moved it; HNSW cosine) and indexed for full text (search, GIN).';
COMMENT ON COLUMN memories.sentence_count IS
    'How many sentences the text has for sentence vectors (1: none of its own, its vector is its sentence''s), counted when it is written or changed; NULL: written before 0.16.0.';
CREATE INDEX memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops);
-- The GIN indexes recall reads keep no pending list (fastupdate off): with one, every search
-- reads through all of it (up to gin_pending_list_limit, 4MB by default) until a vacuum merges
-- it, and recall's word search at 100k memories went from 0.03 to 0.7 ms. A memory is written
-- once and recalled many times, so the insert pays for the merge instead.
CREATE INDEX memories_search_gin ON memories USING gin (search) WITH (fastupdate = off);
-- Who said a memory, for recall's question whether a name the question has is someone who
-- speaks in the store (recall::speaks): the words of its "Name: " label, lowercased.
CREATE FUNCTION dionysus_internal.speaker_words(content text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN position(': ' IN left(content, 64)) > 0 AND char_length(split_part(left(content, 64), ': ', 1)) <= 40 AND split_part(left(content, 64), ': ', 1) !~ '[.!?,\n]' THEN regexp_split_to_array(lower(split_part(left(content, 64), ': ', 1)), '[\s\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+') END $$;
COMMENT ON FUNCTION dionysus_internal.speaker_words(text) IS
    'The words of a memory''s "Name: " label, lowercased (NULL without one, or with one longer than 40 characters or with sentence punctuation, which query.rs does not read as a speaker): the key of memories_speaker_words, which recall reads to tell a speaker from a place. recall writes the same expression inline (recall::SPEAKER_WORDS_SQL), so a caller needs no access to dionysus_internal.';
CREATE INDEX memories_speaker_words ON memories USING gin (dionysus_internal.speaker_words(content)) WITH (fastupdate = off)
    WHERE status = 'active';
CREATE INDEX memories_created ON memories (created_at DESC);
CREATE INDEX memories_type_status ON memories (type, status);
-- Its foreign keys, indexed (001).
CREATE INDEX memories_superseded_by ON memories (superseded_by) WHERE superseded_by IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- Episode membership, in order.
-- ---------------------------------------------------------------------------------------
CREATE TABLE episode_memories (
    episode_id     uuid NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    memory_id      uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    sequence_order integer NOT NULL CHECK (sequence_order > 0),
    PRIMARY KEY (episode_id, sequence_order),
    UNIQUE (memory_id)
);
COMMENT ON TABLE episode_memories IS 'Which episode each episodic memory belongs to, in order.';

-- ---------------------------------------------------------------------------------------
-- Facts: semantic memories with 002's lifecycle.
-- ---------------------------------------------------------------------------------------
CREATE TABLE facts (
    memory_id      uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    subject        text,
    category       text,
    state          fact_state NOT NULL DEFAULT 'learned',
    confirmations  integer NOT NULL DEFAULT 0,
    learned_at     timestamptz NOT NULL DEFAULT now(),
    last_confirmed timestamptz,
    source_episode uuid REFERENCES episodes (id) ON DELETE SET NULL
);
COMMENT ON TABLE facts IS 'Lifecycle of semantic memories learned as facts: learned, confirmed, superseded, deactivated.';
CREATE INDEX facts_subject ON facts (lower(subject)) WHERE state IN ('learned', 'confirmed');
-- Its foreign keys, indexed (001).
CREATE INDEX facts_source_episode ON facts (source_episode) WHERE source_episode IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- Entities and subject–predicate–object triples, with provenance.
-- ---------------------------------------------------------------------------------------
CREATE TABLE entities (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text NOT NULL CHECK (length(btrim(name)) > 0),
    -- Case- and space-insensitive identity, so "Alice" and " alice" are one entity.
    name_key   text GENERATED ALWAYS AS (lower(btrim(regexp_replace(name, '\s+', ' ', 'g')))) STORED UNIQUE,
    kind       text,
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE entities IS 'Things triples talk about; identity is case- and space-insensitive.';

CREATE TABLE triples (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    subject_id  uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    predicate   text NOT NULL CHECK (length(btrim(predicate)) > 0),
    object_id   uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    confidence  real NOT NULL DEFAULT 1.0 CHECK (confidence >= 0 AND confidence <= 1),
    source      text,
    memory_id   uuid REFERENCES memories (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    -- As memories.private_to: "user lives_in Lisbon" from one person is not another's.
    private_to  text[]
);
COMMENT ON TABLE triples IS 'Subject–predicate–object statements over entities, with provenance.';
-- One triple per statement and privacy.
CREATE UNIQUE INDEX triples_identity ON triples (subject_id, predicate, object_id, (coalesce(private_to, '{}'::text[])));
-- A turn's context reads the triples about the entities it names that its person may see
-- (triples_seen, 013): by subject or object, and privacy key, so one person's turn never reads
-- everyone's "user" triples (a person's own facts about themselves are all about 'user').
CREATE INDEX triples_subject_seen ON triples (subject_id, (coalesce(private_to, '{}'::text[])));
CREATE INDEX triples_object_seen ON triples (object_id, (coalesce(private_to, '{}'::text[])));
-- Its foreign keys, indexed (001).
CREATE INDEX triples_memory_id ON triples (memory_id) WHERE memory_id IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- The memory graph: typed, weighted, one edge per (from, to, relation).
-- ---------------------------------------------------------------------------------------
CREATE TABLE memory_edges (
    from_id    uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    to_id      uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    relation   edge_relation NOT NULL,
    weight     real NOT NULL DEFAULT 1.0 CHECK (weight >= 0 AND weight <= 1),
    properties jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(properties) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (from_id, to_id, relation),
    CHECK (from_id <> to_id)
);
COMMENT ON TABLE memory_edges IS 'The memory graph: typed, weighted edges, one per (from, to, relation).';
CREATE INDEX memory_edges_to ON memory_edges (to_id);

-- ---------------------------------------------------------------------------------------
-- Concepts: a hierarchy, and memory–concept links with strength.
-- ---------------------------------------------------------------------------------------
CREATE TABLE concepts (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL CHECK (length(btrim(name)) > 0),
    name_key    text GENERATED ALWAYS AS (lower(btrim(name))) STORED UNIQUE,
    parent_id   uuid REFERENCES concepts (id) ON DELETE SET NULL,
    description text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (parent_id IS NULL OR parent_id <> id)
);
COMMENT ON TABLE concepts IS 'Concepts, in a hierarchy (parent_id).';
CREATE INDEX concepts_parent ON concepts (parent_id);

CREATE TABLE memory_concepts (
    memory_id  uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    concept_id uuid NOT NULL REFERENCES concepts (id) ON DELETE CASCADE,
    strength   real NOT NULL DEFAULT 1.0 CHECK (strength >= 0 AND strength <= 1),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, concept_id)
);
COMMENT ON TABLE memory_concepts IS 'Memory–concept links with strength.';
CREATE INDEX memory_concepts_concept ON memory_concepts (concept_id);

-- ---------------------------------------------------------------------------------------
-- Neighborhoods: each memory's top-20 associations, precomputed.
-- ---------------------------------------------------------------------------------------
CREATE TABLE memory_neighborhoods (
    memory_id        uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    neighbor_ids     uuid[] NOT NULL DEFAULT '{}',
    neighbor_weights real[] NOT NULL DEFAULT '{}',
    computed_at      timestamptz,
    CHECK (cardinality(neighbor_ids) = cardinality(neighbor_weights))
);
COMMENT ON TABLE memory_neighborhoods IS 'Precomputed top-20 associations of each memory.';

-- Staleness is an append-only queue rather than a flag: marking never updates a shared row,
-- so concurrent writers never wait on or deadlock with each other or with the worker.
-- A memory is stale while it has rows here; recomputing deletes the rows it saw.
CREATE TABLE neighborhood_queue (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id  uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    queued_at  timestamptz NOT NULL DEFAULT now(),
    -- A row that failed waits (exponential back-off) so it never blocks the rest.
    attempts   integer NOT NULL DEFAULT 0,
    not_before timestamptz NOT NULL DEFAULT '-infinity',
    last_error text
);
COMMENT ON TABLE neighborhood_queue IS
    'Append-only queue of stale neighborhoods; rows that failed wait with back-off (not_before).';
CREATE INDEX neighborhood_queue_memory ON neighborhood_queue (memory_id);
CREATE INDEX neighborhood_queue_due ON neighborhood_queue (not_before, seq);

-- ---------------------------------------------------------------------------------------
-- Embedding cache: (model, sha256(content)) → vector.
-- ---------------------------------------------------------------------------------------
CREATE TABLE embedding_cache (
    model        text NOT NULL,
    content_hash bytea NOT NULL,
    embedding    vector(384) NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, content_hash)
);
COMMENT ON TABLE embedding_cache IS 'Embeddings by (model, sha256 of the text).';
CREATE INDEX embedding_cache_created ON embedding_cache (created_at);

-- ---------------------------------------------------------------------------------------
-- Access log: recall appends here instead of updating memories, so readers never take row
-- locks; the worker folds it into memory_access (below). No foreign key: its
-- check would lock each recalled memory (FOR KEY SHARE, a write to the memory's row, and a
-- multixact when two recalls meet), which is the row lock the log exists to avoid. A row for
-- a memory since deleted matches nothing and goes with the next fold.
-- Unlogged: writing WAL for it made every recall's commit wait for the disk (an fsync, a
-- quarter of a millisecond here, more on a VPS's network disk) to keep usage counts. A crash
-- or a failover empties it, losing the hits since the last fold (seconds to a minute of
-- access counts); a hot standby cannot read it (recall skips it there, and memory_health
-- and recall_by_id count without it).
-- ---------------------------------------------------------------------------------------
CREATE UNLOGGED TABLE memory_access_log (
    memory_id   uuid NOT NULL,
    accessed_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE memory_access_log IS 'Recall hits not yet folded into memory_access by the worker. No foreign key, so that recall locks no memory: the rows of a memory since deleted go with the next fold. Unlogged, so that a recall''s commit waits for no disk: a crash or failover loses the hits since the last fold, and a hot standby cannot read it.';
CREATE INDEX memory_access_log_memory ON memory_access_log (memory_id);
CREATE INDEX memory_access_log_at ON memory_access_log (accessed_at DESC);

-- How often and how lately each memory was recalled, as the worker folds the access log.
-- Beside memories, not in it: a memory's row is 1.9 KB (its vector), its page has no room for
-- a second version, so every change to its row is a new row in every index, HNSW included.
-- Folded into memories (until 0.17.0), each recalled memory went into the vector index again
-- (1 to 14 ms of the worker's time each at 100k memories, ten per recall) and left a dead
-- entry there that every kNN walked past until a vacuum. Here a fold changes a narrow row.
CREATE TABLE memory_access (
    memory_id     uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    access_count  integer NOT NULL DEFAULT 0 CHECK (access_count >= 0),
    last_accessed timestamptz
);
COMMENT ON TABLE memory_access IS 'How often and how lately each memory was recalled (recall_by_id adds the hits not yet folded; decay slows with the count). Beside memories, not in it: changing a memory''s row puts it into every index again, the vector index included.';
-- Recently recalled memories (activated themes of the heartbeat).
CREATE INDEX memory_access_last ON memory_access (last_accessed DESC) WHERE last_accessed IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- Recall configuration: every weight and knob of recall, in one place.
-- ---------------------------------------------------------------------------------------
CREATE TABLE recall_config (
    key         text PRIMARY KEY,
    value       double precision NOT NULL CHECK (value <> 'NaN'::float8 AND value >= 0),
    description text NOT NULL
);
COMMENT ON TABLE recall_config IS 'Every weight and knob of recall, in one place. UPDATE to tune.';
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
    ('lexical_candidates', 200,  'most memories the query''s words look up per recall: its rarest words search while their memories together fit, and the rest are counted on the memories found otherwise');

-- One value of recall_config: the table is the one home of recall's knobs (recall itself reads
-- them all at once), so no caller writes a default of its own.
CREATE FUNCTION dionysus_internal.recall_setting(setting_key text) RETURNS double precision
    LANGUAGE plpgsql STABLE AS $$
DECLARE v double precision;
BEGIN
    SELECT value INTO v FROM dionysus.recall_config WHERE key = setting_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: recall_config has no key "%"', setting_key USING ERRCODE = 'undefined_object';
    END IF;
    RETURN v;
END $$;
COMMENT ON FUNCTION dionysus_internal.recall_setting(text) IS 'One value of recall_config; an unknown key is an error naming it.';

-- ---------------------------------------------------------------------------------------
-- Worker status (singleton row per database), read by the health view.
-- ---------------------------------------------------------------------------------------
CREATE TABLE worker_status (
    id                   integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    last_run_at          timestamptz,
    last_success_at      timestamptz,
    last_error           text,
    last_error_at        timestamptz,
    consecutive_failures integer NOT NULL DEFAULT 0,
    neighborhoods_done   bigint NOT NULL DEFAULT 0,
    last_pass_ms         double precision
);
COMMENT ON TABLE worker_status IS 'The maintenance worker''s last pass in this database.';
INSERT INTO worker_status (id) VALUES (1);

-- ---------------------------------------------------------------------------------------
-- Lexicon: document frequencies for BM25-weighted lexical recall, refreshed like ANALYZE
-- (by the worker when the store has grown, or by refresh_lexicon()).
-- ---------------------------------------------------------------------------------------
CREATE TABLE lexicon (
    lexeme text PRIMARY KEY,
    ndoc   integer NOT NULL
);
COMMENT ON TABLE lexicon IS 'Document frequency of each lexeme, for BM25 (refresh_lexicon()).';
CREATE TABLE lexicon_stats (
    id           integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    n_docs       bigint NOT NULL DEFAULT 0,
    avg_length   double precision NOT NULL DEFAULT 1,
    refreshed_at timestamptz
);
INSERT INTO lexicon_stats (id) VALUES (1);
CREATE INDEX memory_neighborhoods_members ON memory_neighborhoods USING gin (neighbor_ids);

-- ---------------------------------------------------------------------------------------
-- Text from outside (a person, an agent over MCP, the driver): bounded where it comes in, and
-- quoted in an error message by a short prefix only, never whole.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.bounded_text(arg text, value text, max_len integer) RETURNS text
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF length(value) > max_len THEN
        RAISE EXCEPTION 'dionysus: argument "%" is % characters, over the limit of %', arg, length(value), max_len
            USING ERRCODE = 'string_data_right_truncation';
    END IF;
    RETURN value;
END $$;
COMMENT ON FUNCTION dionysus_internal.bounded_text(text, text, integer) IS
    'The text unchanged (NULL too), or 22001 string_data_right_truncation naming the argument, its length and the limit when it has more than max_len characters.';
CREATE FUNCTION dionysus_internal.input_prefix(value text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN value IS NULL THEN 'NULL'
                ELSE quote_literal(regexp_replace(left(value, 40), '[[:cntrl:]\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]', '?', 'g'))
                     || CASE WHEN length(value) > 40 THEN '… (' || length(value) || ' characters)' ELSE '' END
           END
$$;
COMMENT ON FUNCTION dionysus_internal.input_prefix(text) IS
    'Bad input as an error message quotes it: its first 40 characters, quoted, control and direction characters as ?, then "… (N characters)" when it was longer; NULL reads NULL.';
