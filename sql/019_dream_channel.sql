-- The dream channel: a mirror of every autonomous activity — each reply,
-- check-in, extraction, heartbeat decision and dream proposal — posted, away from the
-- conversation, as a card the person can open (the full prompt), judge (feedback) and, for a
-- proposal, decide (approve, reject, discuss).
--
-- Principles kept here: the conversation never waits for the mirror (the driver records an
-- item after the fact and a separate task posts it, rate-limited; a failure only drops the
-- item); the mirror never shows one person's words to another (an item is as private as what
-- it mirrors, and is only ever claimed for, shown to and decided by someone it is visible to);
-- nothing of it enters the message log.
--
-- Locks: mirror_decide locks the item, then approve_proposal locks the proposal (5); claims
-- take pending items with SKIP LOCKED.

CREATE TABLE mirror_items (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind                text NOT NULL CHECK (kind IN ('reply', 'check_in', 'extraction', 'heartbeat', 'proposal', 'dream')),
    -- The activity it mirrors: the person's message (reply), the contact evaluation (check_in),
    -- the work item (extraction), the heartbeat, the proposal, the dream. Recorded once.
    subject_id          uuid NOT NULL,
    -- Whom it is about (feedback and decisions on it are theirs), and who may see it (NULL:
    -- nothing private in it).
    person              text,
    private_to          text[],
    card                jsonb NOT NULL CHECK (jsonb_typeof(card) = 'object'),
    prompt              text CHECK (length(prompt) <= 200000),
    status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'posted', 'dropped')),
    attempts            integer NOT NULL DEFAULT 0,
    reserved_by         text,
    reserved_until      timestamptz,
    channel_id          text,
    platform_message_id text,
    last_error          text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    posted_at           timestamptz,
    UNIQUE (kind, subject_id)
);
COMMENT ON TABLE mirror_items IS
    'The dream channel: each autonomous activity (reply, check-in, extraction, heartbeat, proposal, dream) as a card with its prompt, posted best effort and as private as what it mirrors.';
CREATE INDEX mirror_items_pending ON mirror_items (created_at) WHERE status = 'pending';
CREATE INDEX mirror_items_created ON mirror_items (created_at);

-- Feedback given through an item's Feedback button is about that item (feedback.about_mirror_item_id, 017).
ALTER TABLE feedback ADD CONSTRAINT feedback_about_mirror_item_id_fkey
    FOREIGN KEY (about_mirror_item_id) REFERENCES mirror_items (id) ON DELETE SET NULL;
-- Indexed, as every foreign key (001).
CREATE INDEX feedback_about_mirror_item_id ON feedback (about_mirror_item_id) WHERE about_mirror_item_id IS NOT NULL;

INSERT INTO proactive_config (key, value, description) VALUES
    ('mirror_retention_days', 14, 'dream-channel items (and their prompts) are kept this many days'),
    ('mirror_max_pending', 200, 'at most this many dream-channel items wait to be posted; older ones are dropped (the mirror is best effort)'),
    ('mirror_max_attempts', 5, 'a dream-channel item that failed to post this many times is dropped');

-- Adds an item (once per activity) and wakes the driver's mirror on dionysus_mirror. Keeps the
-- mirror bounded: expired items go, and the oldest pending beyond mirror_max_pending are dropped.
CREATE FUNCTION dionysus_internal.mirror_add(kind text, subject_id uuid, person text, private_to text[], card jsonb, prompt text)
    RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    made uuid;
BEGIN
    INSERT INTO dionysus.mirror_items (kind, subject_id, person, private_to, card, prompt)
    VALUES (kind, subject_id, person, private_to, card, left(prompt, 200000))
    ON CONFLICT ON CONSTRAINT mirror_items_kind_subject_id_key DO NOTHING
    RETURNING id INTO made;
    IF made IS NULL THEN
        SELECT m.id INTO made FROM dionysus.mirror_items m WHERE m.kind = mirror_add.kind AND m.subject_id = mirror_add.subject_id;
        RETURN made;
    END IF;
    -- An open proposal's card stays while it can still be decided from it.
    DELETE FROM dionysus.mirror_items m
     WHERE m.id IN (SELECT x.id FROM dionysus.mirror_items x
                     WHERE x.created_at < now() - make_interval(days => dionysus_internal.proactive_setting('mirror_retention_days')::int)
                       AND NOT (x.kind = 'proposal' AND EXISTS (SELECT 1 FROM dionysus.proposals p
                                                                 WHERE p.id = x.subject_id AND p.status IN ('pending', 'discussing')))
                     LIMIT 100);
    -- One being posted right now is left to finish.
    UPDATE dionysus.mirror_items m SET status = 'dropped', last_error = 'too many items waiting to be posted'
     WHERE m.id IN (SELECT x.id FROM dionysus.mirror_items x WHERE x.status = 'pending'
                     ORDER BY x.created_at DESC, x.id DESC
                    OFFSET dionysus_internal.proactive_setting('mirror_max_pending')::int)
       AND (m.reserved_until IS NULL OR m.reserved_until < now());
    PERFORM pg_notify('dionysus_mirror', made::text);
    RETURN made;
END $$;
COMMENT ON FUNCTION dionysus_internal.mirror_add(text, uuid, text, text[], jsonb, text) IS
    'Adds a dream-channel item once per activity, expires old ones, drops the oldest pending beyond mirror_max_pending, and NOTIFYs dionysus_mirror.';

-- Records one activity for the dream channel, after the fact (the conversation has already
-- answered). The card is made here from the activity's own rows, so an item shows only what
-- that activity was and is exactly as private; the driver adds the prompt it rendered, its
-- metrics (latency, model, tokens, recall scores) and the context it used. With `viewer` (the
-- dream channel's person), an activity they may not see is not recorded at all (NULL), and
-- neither is the extraction of an imported turn (history, not an activity).
CREATE FUNCTION mirror_record(kind text, subject_id uuid, prompt text DEFAULT NULL, metrics jsonb DEFAULT '{}',
                              context jsonb DEFAULT '{}', viewer text DEFAULT NULL) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE
    m dionysus.messages;
    c dionysus.contact_evaluations;
    w dionysus.work_queue;
    h dionysus.heartbeat_log;
    who text;
    privacy text[];
    sections jsonb;
    title text;
BEGIN
    IF kind IS NULL OR kind NOT IN ('reply', 'check_in', 'extraction', 'heartbeat') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "kind": % (expected reply, check_in, extraction or heartbeat; proposals are recorded by the dream)',
            quote_nullable(kind) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF subject_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "subject_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF length(prompt) > 200000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "prompt": % characters (at most 200000)', length(prompt) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    metrics := coalesce(metrics, '{}');
    context := coalesce(context, '{}');
    IF jsonb_typeof(metrics) <> 'object' OR jsonb_typeof(context) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must be a JSON object', CASE WHEN jsonb_typeof(metrics) <> 'object' THEN 'metrics' ELSE 'context' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_column_size(metrics) + pg_column_size(context) > 65536 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "context": metrics and context take at most 64 kB' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    CASE kind
    WHEN 'reply' THEN
        SELECT * INTO m FROM dionysus.messages x WHERE x.id = subject_id AND NOT x.is_bot AND x.import_id IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'dionysus: argument "subject_id": no live message of a person with id %', subject_id USING ERRCODE = 'no_data_found';
        END IF;
        who := m.person;
        privacy := ARRAY[coalesce(m.person, 'nobody:')];
        title := 'Reply';
        sections := jsonb_build_array(
            jsonb_build_object('name', 'Their message', 'value', m.content),
            jsonb_build_object('name', 'Response', 'value',
                coalesce((SELECT o.content FROM dionysus.outbox o WHERE o.reply_to = m.id), '(no reply was composed)')));
    WHEN 'check_in' THEN
        SELECT * INTO c FROM dionysus.contact_evaluations x WHERE x.id = subject_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'dionysus: argument "subject_id": no contact evaluation with id %', subject_id USING ERRCODE = 'no_data_found';
        END IF;
        who := c.person;
        privacy := ARRAY[c.person];
        title := 'Check-in';
        sections := jsonb_build_array(
            jsonb_build_object('name', 'Why now', 'value', c.explanation),
            jsonb_build_object('name', 'Decision', 'value', concat_ws(': ', coalesce(c.decision, 'undecided') || ' (' || coalesce(c.decided_by, '?') || ')', c.reason)),
            jsonb_build_object('name', 'Message', 'value',
                coalesce((SELECT o.content FROM dionysus.outbox o WHERE o.id = c.outbox_id), '(nothing sent)')));
    WHEN 'extraction' THEN
        SELECT * INTO w FROM dionysus.work_queue x WHERE x.id = subject_id AND x.action = 'extract_message';
        IF NOT FOUND OR w.status <> 'done' THEN
            RAISE EXCEPTION 'dionysus: argument "subject_id": no finished extraction with id %', subject_id USING ERRCODE = 'no_data_found';
        END IF;
        SELECT * INTO m FROM dionysus.messages x WHERE x.id = (w.params ->> 'message_id')::uuid;
        IF m.import_id IS NOT NULL THEN
            RETURN NULL;
        END IF;
        who := m.person;
        -- As private as what it wrote; and never less private than the turn it read.
        privacy := CASE WHEN jsonb_typeof(w.result -> 'applied' -> 'private_to') = 'array'
                        THEN ARRAY(SELECT jsonb_array_elements_text(w.result -> 'applied' -> 'private_to')) END;
        privacy := coalesce(privacy, ARRAY[coalesce(m.person, 'nobody:')]);
        title := 'Extraction';
        sections := jsonb_build_array(
            jsonb_build_object('name', 'Their message', 'value', coalesce(m.content, '(not in the log)')),
            jsonb_build_object('name', 'Facts', 'value', coalesce((SELECT string_agg('• ' || (f ->> 'content'), E'\n')
                                                                      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.result -> 'facts') = 'array' THEN w.result -> 'facts' ELSE '[]' END) f), '(none)')),
            jsonb_build_object('name', 'Triples', 'value', coalesce((SELECT string_agg(concat_ws(' ', '•', t ->> 'subject', t ->> 'predicate', t ->> 'object'), E'\n')
                                                                        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.result -> 'triples') = 'array' THEN w.result -> 'triples' ELSE '[]' END) t), '(none)')),
            jsonb_build_object('name', 'Objectives', 'value', coalesce((SELECT string_agg('• ' || (o ->> 'description'), E'\n')
                                                                           FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.result -> 'objectives') = 'array' THEN w.result -> 'objectives' ELSE '[]' END) o), '(none)')));
    WHEN 'heartbeat' THEN
        SELECT * INTO h FROM dionysus.heartbeat_log x WHERE x.id = subject_id;
        IF NOT FOUND OR h.status NOT IN ('finished', 'recovered') THEN
            RAISE EXCEPTION 'dionysus: argument "subject_id": no finished heartbeat with id %', subject_id USING ERRCODE = 'no_data_found';
        END IF;
        -- As private as its narrative: what the context held and what its work touched.
        privacy := dionysus_internal.privacy_union(h.private_to,
            (SELECT array_agg(DISTINCT p #>> '{}') FROM dionysus.work_queue q,
                    jsonb_array_elements(CASE WHEN jsonb_typeof(q.result -> 'applied' -> 'private_to') = 'array'
                                              THEN q.result -> 'applied' -> 'private_to' ELSE '[]' END) p
              WHERE q.heartbeat_id = h.id));
        who := CASE WHEN cardinality(privacy) = 1 THEN privacy[1] END;
        title := 'Heartbeat #' || h.heartbeat_number;
        sections := jsonb_build_array(
            jsonb_build_object('name', 'Reasoning', 'value', coalesce(h.decision_reasoning, '(none)')),
            jsonb_build_object('name', 'Actions', 'value', coalesce((SELECT string_agg('• ' || coalesce(a ->> 'action', a::text), E'\n')
                                                                        FROM jsonb_array_elements(h.actions_taken) a), '(none)')),
            jsonb_build_object('name', 'Narrative', 'value', coalesce(h.narrative, '(none)')));
    END CASE;
    IF viewer IS NOT NULL AND NOT dionysus_internal.visible_to(privacy, viewer) THEN
        RETURN NULL;
    END IF;
    RETURN dionysus_internal.mirror_add(kind, subject_id, who, privacy,
        jsonb_build_object('title', title, 'sections', sections, 'metrics', metrics, 'context', context, 'at', now()),
        prompt);
END $$;
COMMENT ON FUNCTION mirror_record(text, uuid, text, jsonb, jsonb, text) IS
    'Records a reply, check-in, extraction or heartbeat for the dream channel after the fact; the card comes from the activity''s rows, the driver adds the prompt, metrics and context used. NULL (nothing stored) when the viewer may not see it, or for an imported turn''s extraction.';

-- Up to `max` items waiting to be posted to the dream channel of `viewer` (a person key), oldest
-- first, reserved for a minute for `worker`. Only items the viewer may see are ever claimed;
-- an item that failed mirror_max_attempts times is dropped instead.
CREATE FUNCTION claim_mirror_items(viewer text, worker text, max integer DEFAULT 5)
    RETURNS TABLE (item_id uuid, kind text, card jsonb, has_prompt boolean, person text, status text, attempts integer)
    LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(btrim(viewer), '') = '' OR coalesce(btrim(worker), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', CASE WHEN coalesce(btrim(viewer), '') = '' THEN 'viewer' ELSE 'worker' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max IS NULL OR max < 1 OR max > 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max": % is outside [1, 100]', max USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.mirror_items m SET status = 'dropped', reserved_by = NULL, reserved_until = NULL
     WHERE m.status = 'pending' AND m.attempts >= dionysus_internal.proactive_setting('mirror_max_attempts')
       AND (m.reserved_until IS NULL OR m.reserved_until < now());
    RETURN QUERY
    UPDATE dionysus.mirror_items m SET reserved_by = worker, reserved_until = now() + interval '1 minute', attempts = m.attempts + 1
     WHERE m.id IN (SELECT x.id FROM dionysus.mirror_items x
                     WHERE x.status = 'pending' AND (x.reserved_until IS NULL OR x.reserved_until < now())
                       AND dionysus_internal.visible_to(x.private_to, viewer)
                     ORDER BY x.created_at, x.id LIMIT max FOR UPDATE SKIP LOCKED)
    RETURNING m.id, m.kind,
              m.card || jsonb_build_object('status', (SELECT p.status FROM dionysus.proposals p WHERE m.kind = 'proposal' AND p.id = m.subject_id)),
              m.prompt IS NOT NULL, m.person, m.status, m.attempts;
END $$;
COMMENT ON FUNCTION claim_mirror_items(text, text, integer) IS
    'Reserves (1 minute) the oldest dream-channel items waiting to be posted that the viewer may see; items that failed too often are dropped.';

-- The item went out (its platform id, for the buttons' later edits); or it did not: released
-- for another try (`retry`), else dropped. Only the worker holding it may settle it.
CREATE FUNCTION mirror_settle(item_id uuid, worker text, channel_id text DEFAULT NULL, platform_message_id text DEFAULT NULL,
                              error text DEFAULT NULL, retry boolean DEFAULT true) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF item_id IS NULL OR coalesce(btrim(worker), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', CASE WHEN item_id IS NULL THEN 'item_id' ELSE 'worker' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.mirror_items m
       SET status = CASE WHEN mirror_settle.platform_message_id IS NOT NULL THEN 'posted' WHEN retry THEN 'pending' ELSE 'dropped' END,
           channel_id = coalesce(mirror_settle.channel_id, m.channel_id),
           platform_message_id = coalesce(mirror_settle.platform_message_id, m.platform_message_id),
           posted_at = CASE WHEN mirror_settle.platform_message_id IS NOT NULL THEN now() END,
           last_error = left(mirror_settle.error, 1000), reserved_by = NULL, reserved_until = NULL
     WHERE m.id = mirror_settle.item_id AND m.status = 'pending' AND m.reserved_by = mirror_settle.worker;
    RETURN FOUND;
END $$;
COMMENT ON FUNCTION mirror_settle(uuid, text, text, text, text, boolean) IS
    'A claimed dream-channel item was posted (its platform id) or not (released to retry, or dropped); only its holder may settle it.';

-- An item as the person who pressed one of its buttons may see it: its card, its full prompt,
-- and for a proposal its state. Anyone it is not visible to gets 42501, and the same answer
-- whether or not the item exists.
CREATE FUNCTION mirror_view(item_id uuid, platform text, author_id text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    i dionysus.mirror_items;
    who text;
BEGIN
    IF coalesce(btrim(platform), '') = '' OR coalesce(btrim(author_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', CASE WHEN coalesce(btrim(platform), '') = '' THEN 'platform' ELSE 'author_id' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    who := dionysus.person_key(platform, author_id);
    SELECT * INTO i FROM dionysus.mirror_items x WHERE x.id = item_id;
    IF NOT FOUND OR NOT dionysus_internal.visible_to(i.private_to, who) THEN
        RAISE EXCEPTION 'dionysus: this dream-channel item is not yours to see' USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN jsonb_build_object('item_id', i.id, 'kind', i.kind, 'person', i.person, 'card', i.card, 'prompt', i.prompt,
                              'proposal_status', (SELECT p.status FROM dionysus.proposals p WHERE i.kind = 'proposal' AND p.id = i.subject_id));
END $$;
COMMENT ON FUNCTION mirror_view(uuid, text, text) IS
    'A dream-channel item with its full prompt, for the person who pressed View prompt; 42501 for anyone it is not visible to.';

-- Feedback through an item's Feedback button (a modal: sentiment and a comment), stored as the
-- person's feedback about what the item mirrors (source 'dream'), for the next dream to review.
-- One interaction is one feedback.
CREATE FUNCTION mirror_feedback(item_id uuid, platform text, author_id text, interaction_id text, sentiment text, comment text DEFAULT NULL)
    RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    i dionysus.mirror_items;
    who text;
    f dionysus.feedback;
    arg text;
BEGIN
    arg := CASE WHEN coalesce(btrim(platform), '') = '' THEN 'platform' WHEN coalesce(btrim(author_id), '') = '' THEN 'author_id'
                WHEN coalesce(btrim(interaction_id), '') = '' OR length(interaction_id) > 200 THEN 'interaction_id'
                WHEN sentiment IS NULL OR sentiment NOT IN ('positive', 'negative', 'neutral') THEN 'sentiment'
                WHEN length(comment) > 4000 THEN 'comment' END;
    IF arg IS NOT NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": % (sentiment: positive, negative or neutral; comment: at most 4000 characters)',
            arg, quote_nullable(CASE arg WHEN 'sentiment' THEN sentiment WHEN 'comment' THEN left(comment, 40) ELSE NULL END)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    who := dionysus.person_key(platform, author_id);
    SELECT * INTO i FROM dionysus.mirror_items x WHERE x.id = item_id;
    IF NOT FOUND OR NOT dionysus_internal.visible_to(i.private_to, who) THEN
        RAISE EXCEPTION 'dionysus: this dream-channel item is not yours to judge' USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO dionysus.feedback (person, platform, platform_message_id, about_message_id, about_outbox_id, about_proposal_id,
                                   about_mirror_item_id, content, sentiment, source, created_at)
    VALUES (who, platform, 'interaction:' || interaction_id,
            CASE WHEN i.kind IN ('reply', 'extraction') THEN (SELECT x.id FROM dionysus.messages x
                                                               WHERE x.id = CASE i.kind WHEN 'reply' THEN i.subject_id
                                                                                        ELSE (SELECT (q.params ->> 'message_id')::uuid FROM dionysus.work_queue q WHERE q.id = i.subject_id) END) END,
            CASE i.kind WHEN 'reply' THEN (SELECT o.id FROM dionysus.outbox o WHERE o.reply_to = i.subject_id)
                        WHEN 'check_in' THEN (SELECT c.outbox_id FROM dionysus.contact_evaluations c WHERE c.id = i.subject_id) END,
            CASE WHEN i.kind = 'proposal' THEN (SELECT p.id FROM dionysus.proposals p WHERE p.id = i.subject_id) END,
            i.id,
            coalesce(nullif(btrim(comment), ''), format('(%s, no comment) on the %s "%s"', sentiment, replace(i.kind, '_', '-'), i.card ->> 'title')),
            sentiment, 'dream', now())
    ON CONFLICT ON CONSTRAINT feedback_platform_platform_message_id_key DO NOTHING
    RETURNING * INTO f;
    IF f.id IS NULL THEN
        SELECT * INTO f FROM dionysus.feedback x WHERE x.platform = mirror_feedback.platform AND x.platform_message_id = 'interaction:' || interaction_id;
        RETURN jsonb_build_object('stored', true, 'feedback_id', f.id, 'duplicate', true, 'sentiment', f.sentiment);
    END IF;
    RETURN jsonb_build_object('stored', true, 'feedback_id', f.id, 'duplicate', false, 'sentiment', f.sentiment);
END $$;
COMMENT ON FUNCTION mirror_feedback(uuid, text, text, text, text, text) IS
    'Feedback from a dream-channel item''s Feedback modal (sentiment, comment), stored about what the item mirrors (source dream); one per interaction.';

-- The person's decision on a proposal item: approve (it takes effect), reject, or discuss (it
-- stays pending, marked 'discussing'; their note is kept as feedback for the next dream). Only
-- the person the dream was for decides, and only through their own button press.
CREATE FUNCTION mirror_decide(item_id uuid, platform text, author_id text, decision text, note text DEFAULT NULL, interaction_id text DEFAULT NULL)
    RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    i dionysus.mirror_items;
    who text;
    outcome jsonb;
BEGIN
    IF coalesce(btrim(platform), '') = '' OR coalesce(btrim(author_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', CASE WHEN coalesce(btrim(platform), '') = '' THEN 'platform' ELSE 'author_id' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decision IS NULL OR decision NOT IN ('approve', 'reject', 'discuss') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decision": % (expected approve, reject or discuss)', quote_nullable(decision)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(note) > 4000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "note": at most 4000 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    who := dionysus.person_key(platform, author_id);
    SELECT * INTO i FROM dionysus.mirror_items x WHERE x.id = item_id FOR UPDATE;
    IF NOT FOUND OR NOT dionysus_internal.visible_to(i.private_to, who) OR i.kind <> 'proposal' OR i.person IS DISTINCT FROM who THEN
        RAISE EXCEPTION 'dionysus: this proposal is not yours to decide' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF decision = 'approve' THEN
        outcome := dionysus.approve_proposal(i.subject_id, who);
    ELSE
        outcome := jsonb_build_object('decided', dionysus.reject_proposal(i.subject_id, who, nullif(btrim(note), ''), decision = 'discuss'));
        IF decision = 'discuss' AND coalesce(btrim(note), '') <> '' THEN
            PERFORM dionysus.mirror_feedback(item_id, platform, author_id, coalesce(interaction_id, gen_random_uuid()::text), 'neutral', note);
        END IF;
    END IF;
    RETURN outcome || jsonb_build_object('proposal_id', i.subject_id,
                                        'status', (SELECT p.status FROM dionysus.proposals p WHERE p.id = i.subject_id),
                                        'applied', (SELECT p.applied FROM dionysus.proposals p WHERE p.id = i.subject_id));
END $$;
COMMENT ON FUNCTION mirror_decide(uuid, text, text, text, text, text) IS
    'Approve, reject or discuss a proposal from its dream-channel card: only the person the dream was for; discuss keeps it pending and stores the note as feedback.';

-- A dream's proposals (and a dream that proposes nothing) are mirrored by record_dream itself:
-- they must reach the person whatever happens to the driver afterwards.
CREATE FUNCTION dionysus_internal.mirror_dream(dream_id uuid, proposals uuid[], prompt text) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    d dionysus.dreams;
    p dionysus.proposals;
BEGIN
    SELECT * INTO d FROM dionysus.dreams x WHERE x.id = dream_id;
    IF cardinality(proposals) = 0 THEN
        PERFORM dionysus_internal.mirror_add('dream', d.id, d.person, ARRAY[coalesce(d.person, 'nobody:')],
            jsonb_build_object('title', 'Dream of ' || d.local_date, 'at', now(),
                               'sections', jsonb_build_array(jsonb_build_object('name', 'Nothing proposed', 'value', coalesce(d.note, 'nothing worth proposing')))),
            prompt);
        RETURN;
    END IF;
    FOR p IN SELECT * FROM dionysus.proposals x WHERE x.id = ANY(proposals) ORDER BY x.created_at, x.id LOOP
        PERFORM dionysus_internal.mirror_add('proposal', p.id, d.person, ARRAY[coalesce(d.person, 'nobody:')],
            jsonb_build_object('title', format('Proposal: %s %s', replace(p.kind, '_', ' '), p.target), 'at', now(),
                               'sections', jsonb_build_array(
                                   jsonb_build_object('name', 'Rationale', 'value', p.rationale),
                                   jsonb_build_object('name', 'Evidence', 'value', left(p.evidence::text, 1000)),
                                   jsonb_build_object('name', 'Change', 'value',
                                       CASE WHEN p.kind = 'archetype' THEN p.proposal::text
                                            ELSE format('version %s of %s, replacing version %s', '(new)', p.target, coalesce(p.base_version::text, '?')) END))),
            -- View prompt shows the proposed text itself, then the prompt the dream was given.
            concat_ws(E'\n\n', CASE WHEN p.kind <> 'archetype' THEN '--- proposed ' || p.target || E' ---\n' || (p.proposal ->> 'template') END,
                      CASE WHEN prompt IS NOT NULL THEN E'--- the dream''s prompt ---\n' || prompt END));
    END LOOP;
END $$;
COMMENT ON FUNCTION dionysus_internal.mirror_dream(uuid, uuid[], text) IS
    'Mirrors a dream''s proposals (or its note that it proposes nothing) to the dream channel; called by record_dream.';
