-- Grounding (#35): one check for every model-written thing that is stored. A model that cannot
-- follow instructions copies the prompt's own placeholders ("a person's name", "I am ...",
-- "<the fact>") and invents what nobody said ("user lives_in Lisbon"). What it writes is stored
-- only when it is not a placeholder and, for what claims to come from the person's turn (a
-- fact, triple, rule, person or alias; a goal is their request in the model's words; a censor's
-- trigger their request paraphrased, "texting them" for "don't message me"),
-- when its content words appear in that turn. A refused item is not stored; the refusal is
-- written down with its inputs. What the driver says back for the model (a rule's confirmation,
-- a censor's acknowledgement) passes the same check before anyone reads it.
--
-- The rule, in full (dionysus_internal.model_text_problem):
--   1. empty, or only punctuation: refused;
--   2. a placeholder marker: "<...>" (angle brackets around words) or an ellipsis ("..." or "…"):
--      refused;
--   3. text of a prompt template (any version; three words or more) is refused unless the
--      source grounds it (rule 4): the prompt's words, not the person's;
--   4. with a source (the person's turn), a fact, rule, person or alias needs at least
--      half of its content words in the source (a triple: its object's, what it says of its
--      subject; complete_work passes the object). Content words are the English stems
--      (to_tsvector('english')) less stop words and the generic words "user", "person",
--      "people", "name", "named", "called", "someone", "something", "thing": the case and the
--      inflection do not matter ("lives" is "live"), the words must.
-- Without a source (a reflection, a dream, a narrative) only rules 1 to 3 apply.

-- Every refusal, with what was refused and what it was checked against: every automatic
-- decision is recorded and explainable.
CREATE TABLE model_text_refusals (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    refused_at  timestamptz NOT NULL DEFAULT now(),
    kind        text NOT NULL,
    value       text,
    source      text,
    reason      text NOT NULL,
    work_id     uuid,
    private_to  text[]
);
COMMENT ON TABLE model_text_refusals IS
    'What the grounding check (check_model_text) refused to store: the kind (fact, triple, goal, objective, person, alias, thread, focus, level, narrative, identity, belief, rule, censor, proposal, summary, acknowledgement), the model''s text, the source it was checked against, why, the work item, and whom it is private to.';
CREATE INDEX model_text_refusals_at ON model_text_refusals (refused_at);

-- The English stems of a text that carry its meaning (rule 4's "content words").
CREATE FUNCTION dionysus_internal.content_words(t text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(w), '{}') FROM unnest(tsvector_to_array(to_tsvector('english', coalesce(t, '')))) w
     WHERE w <> ALL (tsvector_to_array(to_tsvector('english', 'user person people name named called someone something thing')))
$$;
COMMENT ON FUNCTION dionysus_internal.content_words(text) IS
    'The English stems of a text less stop words and generic words (user, person, name, called, something...): what the grounding check compares.';

-- Why a model's text may not be stored, or NULL when it may (the rule above).
CREATE FUNCTION dionysus_internal.model_text_problem(kind text, value text, source text) RETURNS text
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    v text := btrim(coalesce(value, ''));
    words text[] := dionysus_internal.content_words(value);
    said text[] := dionysus_internal.content_words(source);
    found integer;
    copied text;
    grounded boolean;
BEGIN
    IF v !~ '[[:alnum:]]' THEN
        RETURN 'empty';
    END IF;
    IF v ~ '<[^<>]*[[:alpha:]][^<>]*>' THEN
        RETURN 'a placeholder in angle brackets';
    END IF;
    IF v ~ '(\.\.\.|…)' THEN
        RETURN 'an ellipsis where words belong';
    END IF;
    found := (SELECT count(*) FROM unnest(words) w WHERE w = ANY(said));
    grounded := source IS NOT NULL AND cardinality(words) > 0 AND found * 2 >= cardinality(words);
    IF NOT grounded AND array_length(regexp_split_to_array(v, '\s+'), 1) >= 3 THEN
        SELECT t.key INTO copied FROM dionysus.prompt_templates t
         WHERE strpos(lower(t.template), lower(v)) > 0 LIMIT 1;
        IF copied IS NOT NULL THEN
            RETURN format('the words of the prompt template "%s", not the person''s', copied);
        END IF;
    END IF;
    IF source IS NOT NULL AND kind IN ('fact', 'triple', 'rule', 'person', 'alias') AND NOT grounded THEN
        RETURN format('not in the source turn: %s of its %s content words appear there (at least half must)', found, cardinality(words));
    END IF;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION dionysus_internal.model_text_problem(text, text, text) IS
    'Why a model-written text may not be stored (empty; a "<...>" or "..." placeholder; a prompt template''s words; for a fact, triple (its object), rule, person or alias with a source: under half its content words in it), or NULL.';

-- private_to: whose words the refusal may hold (export_person lists it for them, forget_person
-- takes it). The caller states it, as it states remember's: it runs as its caller, so only a
-- role that may already write memories private to anyone (the driver's) can record one; it
-- reaches no further than that role does.
CREATE FUNCTION check_model_text(kind text, value text, source text DEFAULT NULL, work_id uuid DEFAULT NULL,
                                 private_to text[] DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE why text;
BEGIN
    IF kind IS NULL OR kind NOT IN ('fact', 'triple', 'goal', 'objective', 'person', 'alias', 'thread', 'focus', 'level',
                                    'narrative', 'identity', 'belief', 'rule', 'censor', 'proposal', 'summary', 'acknowledgement') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "kind": % (fact, triple, goal, objective, person, alias, thread, focus, level, narrative, identity, belief, rule, censor, proposal, summary or acknowledgement)',
            quote_nullable(kind) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    why := dionysus_internal.model_text_problem(kind, value, source);
    IF why IS NOT NULL THEN
        INSERT INTO dionysus.model_text_refusals (kind, value, source, reason, work_id, private_to)
        VALUES (kind, value, source, why, check_model_text.work_id, check_model_text.private_to);
    END IF;
    RETURN why;
END $$;
COMMENT ON FUNCTION check_model_text(text, text, text, uuid, text[]) IS
    'The one grounding check for a model-written text about to be stored: NULL when it may be, else why not (the refusal is recorded in model_text_refusals with its inputs). '
    'source: the person''s words it claims to come from (NULL: none, only the placeholder rules apply).';

-- complete_work's part: the result less what the check refuses, item by item, and the
-- refusals ({kind, value, reason}). Items of another shape (not a string, or blank) are left
-- for the store functions to refuse with their own errors.
CREATE FUNCTION dionysus_internal.ground_result(w dionysus.work_queue, result jsonb, privacy text[]) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    turn text;
    refused jsonb := '[]'::jsonb;
    item jsonb;
    kept jsonb;
    why text;
    k text;
    aliases jsonb;
    alias jsonb;
    alias_why text;
    path text;
    checks CONSTANT jsonb := '{"facts": ["fact", "content"], "goals": ["goal", "title"], "objectives": ["objective", "description"],
                               "identity": ["identity", "aspect"], "worldview": ["belief", "belief"], "people": ["person", "name"]}';
BEGIN
    -- The turn as said by its person (their key's name part: a fact names the speaker, "Ada ...").
    SELECT m.content || coalesce(' (said by ' || m.person || ')', '') INTO turn FROM dionysus.messages m
     WHERE w.params ->> 'message_id' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
       AND m.id = (w.params ->> 'message_id')::uuid;
    -- Lists of objects whose one text field is checked.
    FOR k IN SELECT jsonb_object_keys(checks) LOOP
        CONTINUE WHEN jsonb_typeof(result -> k) IS DISTINCT FROM 'array';
        kept := '[]';
        FOR item IN SELECT * FROM jsonb_array_elements(result -> k) LOOP
            why := NULL;
            -- A person they told of before may be named by relation now ("my sister" for Lea).
            IF jsonb_typeof(item -> (checks -> k ->> 1)) = 'string' AND btrim(item ->> (checks -> k ->> 1)) <> ''
               AND NOT (k = 'people' AND EXISTS (SELECT 1 FROM dionysus.person_aliases pa WHERE pa.of_person = w.params ->> 'person'
                                                    AND lower(pa.alias) = lower(btrim(item ->> 'name')))) THEN
                why := dionysus.check_model_text(checks -> k ->> 0, item ->> (checks -> k ->> 1), turn, w.id, privacy);
            END IF;
            IF why IS NULL AND k = 'people' AND jsonb_typeof(item -> 'aliases') = 'array' THEN
                aliases := '[]';
                FOR alias IN SELECT * FROM jsonb_array_elements(item -> 'aliases') LOOP
                    alias_why := CASE WHEN jsonb_typeof(alias) = 'string' THEN dionysus.check_model_text('alias', alias #>> '{}', turn, w.id, privacy) END;
                    IF alias_why IS NULL THEN
                        aliases := aliases || jsonb_build_array(alias);
                    ELSE
                        refused := refused || jsonb_build_object('kind', 'alias', 'value', alias #>> '{}', 'reason', alias_why);
                    END IF;
                END LOOP;
                item := jsonb_set(item, '{aliases}', aliases);
            END IF;
            IF why IS NULL THEN
                kept := kept || jsonb_build_array(item);
            ELSE
                refused := refused || jsonb_build_object('kind', checks -> k ->> 0, 'value', item ->> (checks -> k ->> 1), 'reason', why);
            END IF;
        END LOOP;
        result := jsonb_set(result, ARRAY[k], kept);
    END LOOP;
    IF jsonb_typeof(result -> 'triples') = 'array' THEN
        kept := '[]';
        FOR item IN SELECT * FROM jsonb_array_elements(result -> 'triples') LOOP
            why := CASE WHEN jsonb_typeof(item -> 'object') = 'string' AND btrim(item ->> 'object') <> ''
                        THEN dionysus.check_model_text('triple', item ->> 'object', turn, w.id, privacy) END;
            IF why IS NULL THEN
                kept := kept || jsonb_build_array(item);
            ELSE
                refused := refused || jsonb_build_object('kind', 'triple', 'value', concat_ws(' ', item ->> 'subject', item ->> 'predicate', item ->> 'object'), 'reason', why);
            END IF;
        END LOOP;
        result := jsonb_set(result, '{triples}', kept);
    END IF;
    -- The session's focus and the threads a turn opened (those it closed name open ones).
    IF jsonb_typeof(result -> 'focus') = 'string' THEN
        why := dionysus.check_model_text('focus', result ->> 'focus', turn, w.id, privacy);
        IF why IS NOT NULL THEN
            refused := refused || jsonb_build_object('kind', 'focus', 'value', result ->> 'focus', 'reason', why);
            result := result - 'focus';
        END IF;
    END IF;
    IF jsonb_typeof(result #> '{threads,opened}') = 'array' THEN
        kept := '[]';
        FOR item IN SELECT * FROM jsonb_array_elements(result #> '{threads,opened}') LOOP
            why := CASE WHEN jsonb_typeof(item) = 'string' THEN dionysus.check_model_text('thread', item #>> '{}', turn, w.id, privacy) END;
            IF why IS NULL THEN
                kept := kept || jsonb_build_array(item);
            ELSE
                refused := refused || jsonb_build_object('kind', 'thread', 'value', item #>> '{}', 'reason', why);
            END IF;
        END LOOP;
        result := jsonb_set(result, '{threads,opened}', kept);
    END IF;
    -- A fading memory's shorter forms: both or neither, checked against the memory's words.
    IF jsonb_typeof(result -> 'levels') = 'object' THEN
        FOR k IN SELECT unnest(ARRAY['summary', 'micro']) LOOP
            CONTINUE WHEN jsonb_typeof(result -> 'levels' -> k) IS DISTINCT FROM 'string';
            why := dionysus.check_model_text('level', result -> 'levels' ->> k, NULL, w.id, privacy);
            IF why IS NOT NULL THEN
                refused := refused || jsonb_build_object('kind', 'level', 'value', result -> 'levels' ->> k, 'reason', why);
                result := result - 'levels';
                EXIT;
            END IF;
        END LOOP;
    END IF;
    IF jsonb_typeof(result -> 'episode_summary') = 'string' THEN
        why := dionysus.check_model_text('summary', result ->> 'episode_summary', NULL, w.id, privacy);
        IF why IS NOT NULL THEN
            refused := refused || jsonb_build_object('kind', 'summary', 'value', result ->> 'episode_summary', 'reason', why);
            result := result - 'episode_summary';
        END IF;
    END IF;
    -- Censors proposed to a person (an episode's lessons, a heartbeat's): trigger and reason are
    -- shown to them and held against what Dionysus says, so neither may be a placeholder.
    FOR path IN SELECT unnest(ARRAY['{censor_candidates}', '{episode,censor_candidates}']::text[]) LOOP
        CONTINUE WHEN jsonb_typeof(result #> path::text[]) IS DISTINCT FROM 'array';
        kept := '[]';
        FOR item IN SELECT * FROM jsonb_array_elements(result #> path::text[]) LOOP
            why := NULL;
            FOREACH k IN ARRAY ARRAY['trigger', 'reason'] LOOP
                IF why IS NULL AND jsonb_typeof(item -> k) = 'string' THEN
                    why := dionysus.check_model_text('censor', item ->> k, NULL, w.id, privacy);
                    IF why IS NOT NULL THEN
                        refused := refused || jsonb_build_object('kind', 'censor', 'value', item ->> k, 'reason', why);
                    END IF;
                END IF;
            END LOOP;
            IF why IS NULL THEN
                kept := kept || jsonb_build_array(item);
            END IF;
        END LOOP;
        result := jsonb_set(result, path::text[], kept);
    END LOOP;
    -- A dream's proposals: each says why in its own words.
    IF jsonb_typeof(result #> '{dream,proposals}') = 'array' THEN
        kept := '[]';
        FOR item IN SELECT * FROM jsonb_array_elements(result #> '{dream,proposals}') LOOP
            why := CASE WHEN jsonb_typeof(item -> 'rationale') = 'string'
                        THEN dionysus.check_model_text('proposal', item ->> 'rationale', NULL, w.id, privacy) END;
            IF why IS NULL THEN
                kept := kept || jsonb_build_array(item);
            ELSE
                refused := refused || jsonb_build_object('kind', 'proposal', 'value', item ->> 'rationale', 'reason', why);
            END IF;
        END LOOP;
        result := jsonb_set(result, '{dream,proposals}', kept);
    END IF;
    RETURN jsonb_build_object('result', result, 'refused', refused);
END $$;
COMMENT ON FUNCTION dionysus_internal.ground_result(dionysus.work_queue, jsonb, text[]) IS
    'complete_work''s grounding pass: the result less each fact, triple, goal, objective, person, alias, opened thread, focus, level, identity aspect, belief, episode summary, proposed censor and dream proposal check_model_text refuses (facts, triples, goals and people against the item''s turn), and the refusals.';

-- Every shipped template (inserted by its organ's file) gets its task's answer schema
-- (012's task_result_schema): here, after the last organ has inserted its own.
UPDATE prompt_templates SET result_schema = dionysus_internal.task_result_schema(key);
