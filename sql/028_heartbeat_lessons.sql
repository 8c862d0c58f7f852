-- The censors a heartbeat that went wrong proposes (issue #13 §1).
--
-- A heartbeat went wrong when the person says that what it did on its own was unwelcome:
-- negative feedback (/feedback right after it, or naming it; the words' tone or a given
-- sentiment) about a message a heartbeat's reach-out sent them. That feedback queues one 'heartbeat_censors' item; the driver shows the fast model
-- only what is the person's own (the message they got and what they said of it: never the
-- heartbeat's context, which may hold others' words) and asks what not to do again; the answer's
-- candidates are proposed to that person alone, as episodes' are (024): status 'proposed',
-- severity warn, learned from the heartbeat, matching nothing until the person keeps one
-- (/censor keep N, accept_censor) — nothing the system proposes about itself takes effect
-- without the person's word. Nothing is proposed twice, at most three a failure and ten waiting.
-- Feedback taken back (/undo) proposes nothing: before the work runs it asks no model, after it
-- the proposals it made and that still wait are withdrawn (retired, with the reason).
--
-- Lock order: the feedback's row is written first (its insert fires the queueing), then the
-- censors' rows (8) when the work completes.

-- The heartbeat's reach-out a feedback is about: its outbox row's id and the heartbeat's
-- (no row: not a heartbeat's doing). The outbox row it names, else the sent one whose bot turn it
-- names (/feedback without naming a message: Dionysus's last message to them).
CREATE FUNCTION dionysus_internal.feedback_reach_out(f dionysus.feedback, OUT outbox_id uuid, OUT heartbeat_id uuid)
    LANGUAGE sql STABLE AS $$
    SELECT o.id, w.heartbeat_id
      FROM dionysus.outbox o JOIN dionysus.work_queue w ON w.id = o.work_id
     WHERE o.person = f.person AND o.status = 'sent' AND w.heartbeat_id IS NOT NULL
       AND (o.id = f.about_outbox_id
            OR (f.about_outbox_id IS NULL AND o.platform = f.platform
                AND o.platform_message_id = (SELECT m.platform_message_id FROM dionysus.messages m WHERE m.id = f.about_message_id)))
     ORDER BY o.sent_at DESC, o.id
     LIMIT 1
$$;
COMMENT ON FUNCTION dionysus_internal.feedback_reach_out(dionysus.feedback) IS 'The heartbeat''s reach-out a feedback is about: its sent outbox row (the one it names, or the one whose bot turn it names) and the heartbeat; NULLs when no heartbeat sent it.';

CREATE FUNCTION dionysus_internal.queue_heartbeat_lesson() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sent uuid;
    hb uuid;
BEGIN
    IF NEW.sentiment <> 'negative' OR dionysus_internal.restoring() THEN
        RETURN NULL;   -- (a restore brings its queue with it: sql/030_backup.sql)
    END IF;
    SELECT x.outbox_id, x.heartbeat_id INTO sent, hb FROM dionysus_internal.feedback_reach_out(NEW) x;
    IF hb IS NOT NULL THEN
        -- Not the heartbeat's own work (its narrative is written): a lesson after it, the
        -- person's (what it writes is as private as they are).
        INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts)
        VALUES ('heartbeat_censors:' || NEW.id, 'heartbeat_censors',
                jsonb_build_object('feedback_id', NEW.id, 'outbox_id', sent, 'heartbeat_id', hb, 'person', NEW.person),
                dionysus_internal.heartbeat_setting('work_max_attempts')::int)
        ON CONFLICT (idempotency_key) DO NOTHING;
        PERFORM pg_notify('dionysus_work', jsonb_build_object('queued', 1)::text);
    END IF;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION dionysus_internal.queue_heartbeat_lesson() IS 'Trigger: negative feedback about a heartbeat''s reach-out queues a heartbeat_censors item (once per feedback).';
CREATE TRIGGER feedback_heartbeat_lesson AFTER INSERT ON feedback
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.queue_heartbeat_lesson();

-- What the model is shown for a heartbeat_censors item: the message the person got and their
-- words about it (NULL when the feedback was taken back).
CREATE FUNCTION dionysus_internal.heartbeat_lesson_source(work_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('message', o.content, 'feedback', f.content, 'sent_at', o.sent_at)
      FROM dionysus.work_queue w
      JOIN dionysus.feedback f ON f.id = (w.params ->> 'feedback_id')::uuid
      JOIN dionysus.outbox o ON o.id = (w.params ->> 'outbox_id')::uuid AND o.person = f.person
     WHERE w.id = heartbeat_lesson_source.work_id AND w.action = 'heartbeat_censors'
$$;
COMMENT ON FUNCTION dionysus_internal.heartbeat_lesson_source(uuid) IS 'What a heartbeat_censors item shows the model: the message the person got and their words about it; NULL once the feedback is taken back.';

-- complete_work's result.censor_candidates for a heartbeat_censors item: proposed to the
-- feedback's person (not the model's word), learned from the heartbeat. SECURITY DEFINER, as
-- propose_censors (024): the item is read again from the queue and must be claimed, and what
-- it names must agree with the record: its key is its feedback's, which is negative and about
-- the reach-out of the heartbeat it names. The feedback is held (FOR SHARE) so that an /undo
-- racing it waits, then withdraws what this proposed. Returns the proposed censors' ids.
CREATE FUNCTION dionysus_internal.propose_heartbeat_censors(w dionysus.work_queue, candidates jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f dionysus.feedback;
BEGIN
    SELECT * INTO w FROM dionysus.work_queue q WHERE q.id = w.id AND q.status = 'claimed';
    IF NOT FOUND OR w.action <> 'heartbeat_censors' THEN
        RAISE EXCEPTION 'dionysus: argument "result.censor_candidates": only a heartbeat_censors item carries them'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO f FROM dionysus.feedback x WHERE x.id = (w.params ->> 'feedback_id')::uuid FOR SHARE;
    IF NOT FOUND THEN
        RETURN '[]'::jsonb; -- taken back meanwhile
    END IF;
    IF f.sentiment <> 'negative' OR w.idempotency_key <> 'heartbeat_censors:' || f.id
       OR (SELECT x.heartbeat_id FROM dionysus_internal.feedback_reach_out(f) x) IS DISTINCT FROM (w.params ->> 'heartbeat_id')::uuid THEN
        RAISE EXCEPTION 'dionysus: argument "result.censor_candidates": work item % is not the lesson of its feedback', w.id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN dionysus_internal.propose_censor_candidates(f.person, candidates, 'result.censor_candidates', 'heartbeat',
        (w.params ->> 'heartbeat_id')::uuid, jsonb_build_object('learned_from', 'heartbeat', 'learned_from_id', w.params ->> 'heartbeat_id',
                                                                'feedback_id', f.id));
END $$;
COMMENT ON FUNCTION dionysus_internal.propose_heartbeat_censors(dionysus.work_queue, jsonb) IS
    'complete_work of a claimed heartbeat_censors item: its candidates proposed to the feedback''s person, learned from the heartbeat; nothing when the feedback was taken back; 22023 when the item is not the lesson of its negative feedback about that heartbeat''s reach-out. Returns their ids.';

-- Feedback taken back withdraws the proposals it made that still wait (SECURITY DEFINER: the
-- driver's role, which runs /undo, writes no censors).
CREATE FUNCTION dionysus_internal.withdraw_heartbeat_lesson() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT x.id, x.severity FROM dionysus.censors x
              WHERE x.status = 'proposed' AND x.person = OLD.person
                AND EXISTS (SELECT 1 FROM dionysus.censor_events e WHERE e.censor_id = x.id AND e.event = 'proposed'
                                                                    AND e.context ->> 'feedback_id' = OLD.id::text)
              ORDER BY x.id FOR UPDATE LOOP
        UPDATE dionysus.censors x SET status = 'retired', updated_at = dionysus.clock_now() WHERE x.id = c.id;
        INSERT INTO dionysus.censor_events (censor_id, event, severity, context)
        VALUES (c.id, 'retired', c.severity, jsonb_build_object('why', 'the feedback it was learned from was taken back', 'feedback_id', OLD.id));
    END LOOP;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION dionysus_internal.withdraw_heartbeat_lesson() IS 'Trigger: feedback taken back retires the censors its lesson proposed that still wait (with a retired event saying why).';
CREATE TRIGGER feedback_withdraw_heartbeat_lesson AFTER DELETE ON feedback
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.withdraw_heartbeat_lesson();

-- Texts: sql/prompts/<key>.txt, older versions sql/prompts/superseded/<key>.v<N>.txt; the newest
-- version of each is the active one.
INSERT INTO prompt_templates (key, version, temperature, note, active, template)
SELECT key, version, temperature, note, version = max(version) OVER (PARTITION BY key),
       dionysus_internal.shipped_prompt(key, version)
  FROM (VALUES
    ('heartbeat_censors', 1, 0.2, 'lessons (028): what not to do again, after a message sent on your own was unwelcome'),
    ('heartbeat_censors', 2, 0.2, 'lessons (028): what not to do again, after a message sent on your own was unwelcome; its shape in placeholders (#35)')
  ) AS shipped (key, version, temperature, note);
