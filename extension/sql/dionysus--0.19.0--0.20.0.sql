-- dionysus 0.19.0 -> 0.20.0: one schema, one history (#34). Unreleased: may change until 0.20.0 is released.
-- Each section names its change; every catalog change a fresh 0.20.0 install has is here too.

-- H3a: the driver reads functions, not tables (#34 typed contract): status_report() for `dionysus status`,
-- heartbeat_outcome(id) for a heartbeat's narrative. Caller's rights; EXECUTE for the driver as a fresh install grants.
-- What a heartbeat did, for its narrative: the driver reads this, not the log and queue tables.
CREATE FUNCTION heartbeat_outcome(heartbeat_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE outcome jsonb;
BEGIN
    IF heartbeat_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT jsonb_build_object('reasoning', h.decision_reasoning, 'taken', h.actions_taken, 'rejected', h.actions_rejected,
               'work', (SELECT coalesce(jsonb_agg(jsonb_build_object('action', w.action, 'status', w.status,
                                   'summary', w.result ->> 'summary', 'error', w.last_error) ORDER BY w.created_at), '[]')
                          FROM dionysus.work_queue w WHERE w.heartbeat_id = h.id))
      INTO outcome
      FROM dionysus.heartbeat_log h WHERE h.id = heartbeat_outcome.heartbeat_id;
    IF outcome IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "heartbeat_id": no heartbeat with id %', heartbeat_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN outcome;
END $$;
COMMENT ON FUNCTION heartbeat_outcome(uuid) IS
    'What a heartbeat did: {reasoning (its decision''s, may be null), taken: [{action, ...}] (the actions it took), rejected: [...] '
    '(the actions refused, with why), work: [{action, status, summary, error}] (its queued work, oldest first)}. 02000 for an unknown id.';
-- What `dionysus status` shows, in one answer: the driver reads functions and views, never
-- the tables themselves. Runs with the caller's rights (it shows what the caller may read).
CREATE FUNCTION status_report() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN jsonb_build_object(
        'hb', (SELECT to_jsonb(h) FROM dionysus.heartbeat_health h),
        'goals', (SELECT coalesce(jsonb_agg(jsonb_build_object('title', g.title, 'priority', g.priority) ORDER BY g.priority, g.last_touched DESC), '[]')
                    FROM (SELECT * FROM dionysus.goals WHERE priority IN ('active', 'queued') ORDER BY priority, last_touched DESC LIMIT 8) g),
        'beats', (SELECT coalesce(jsonb_agg(b ORDER BY (b ->> 'n')::int DESC), '[]') FROM (
                    SELECT jsonb_build_object('n', heartbeat_number, 'status', status, 'started', started_at,
                           'energy_start', energy_start, 'energy_end', energy_end,
                           'actions', (SELECT coalesce(jsonb_agg(a ->> 'action'), '[]') FROM jsonb_array_elements(actions_taken) a),
                           'narrative', left(narrative, 140)) AS b
                      FROM dionysus.heartbeat_log ORDER BY heartbeat_number DESC LIMIT 5) x),
        'queue', (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM (SELECT status, count(*) AS n FROM dionysus.work_queue GROUP BY status) q),
        'messages', (SELECT jsonb_build_object('total', count(*), 'last', max(created_at)) FROM dionysus.messages),
        'memory', (SELECT to_jsonb(m) FROM dionysus.memory_health m),
        'mind', (SELECT to_jsonb(p) FROM dionysus.proactive_health p),
        'imports', dionysus.import_status(3),
        -- The people written with last: their local time and where their time zone came from.
        'people', (SELECT coalesce(jsonb_agg(jsonb_build_object('person', x.person, 'time_zone', x.time_zone, 'source', x.time_zone_source, 'source_said', dionysus_internal.time_zone_source_said(x.time_zone_source),
                                                                'local_time', to_char(dionysus.clock_now() AT TIME ZONE x.time_zone, 'Dy HH24:MI'),
                                                                'last_message_at', x.last_message_at)
                                             ORDER BY x.last_message_at DESC NULLS LAST, x.person), '[]')
                     FROM (SELECT * FROM dionysus.people ORDER BY last_message_at DESC NULLS LAST, person LIMIT 8) x),
        -- Intervals as seconds: their text form ("00:37:30.011953") is not for people.
        'waited_s', (SELECT jsonb_build_object('work', extract(epoch FROM h.oldest_pending_work), 'stale', extract(epoch FROM m.oldest_stale_age))
                       FROM dionysus.heartbeat_health h, dionysus.memory_health m),
        'now', now());
END $$;
COMMENT ON FUNCTION status_report() IS
    'What `dionysus status` shows: {hb: heartbeat_health''s row, goals: [{title, priority}] (the 8 first active and queued), '
    'beats: [{n, status, started, energy_start, energy_end, actions: [name], narrative (140 characters)}] (the last 5 heartbeats), '
    'queue: {status: count} of the work queue, messages: {total, last}, memory: memory_health''s row, mind: proactive_health''s row, '
    'imports: import_status(3), people: [{person, time_zone, source, source_said, local_time, last_message_at}] (the 8 written with last), waited_s: {work, stale} (the oldest pending work and stale neighbourhood, in seconds), now}. '
    'Runs with the caller''s rights.';
GRANT EXECUTE ON FUNCTION heartbeat_outcome(uuid), status_report() TO dionysus_driver;

-- H3b: the contact gates in one function (#34 one source of truth): dionysus_internal.contact_gates
-- writes every gate down for evaluate_contact and evaluate_requested_contact, and decide_contact checks
-- again those that time spent thinking can close from the same function; the "in flight" query (a crossing
-- undecided or a message pending in the outbox) and the open-requests count are written once. Behaviour unchanged.
CREATE FUNCTION dionysus_internal.ignored_after(p dionysus.people) RETURNS interval
    LANGUAGE sql STABLE AS $$
    SELECT make_interval(secs => greatest(dionysus_internal.proactive_setting('ignored_after_hours') * 3600,
                                          3 * coalesce(p.reply_seconds, 0)))
$$;

CREATE FUNCTION dionysus_internal.open_requests(who text) RETURNS bigint
    LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM dionysus.goals g
     WHERE g.source = 'user_request' AND g.priority IN ('active', 'queued') AND g.private_to = ARRAY[who]
$$;

CREATE FUNCTION dionysus_internal.contact_gates(p dionysus.people, t timestamptz, solicited boolean,
                                                deciding uuid DEFAULT NULL, over_threshold boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    gates jsonb := '[]'::jsonb;
    sig dionysus.person_signals;
    av record;
    local_hour int;
    quiet boolean;
    cooldown interval := make_interval(secs => dionysus_internal.heartbeat_setting('reach_out_cooldown_hours') * 3600);
    since_contact interval := t - p.last_contact_at;
    on_its_way boolean;
    energy double precision;
    cost double precision;
    muted boolean;
    new_cause boolean;
    today bigint;
    later record;
    better boolean;
    margin double precision;
BEGIN
    SELECT * INTO sig FROM dionysus.person_signals s
     WHERE s.person = p.person AND s.ended_at IS NULL AND (s.until IS NULL OR s.until > t) AND (NOT solicited OR s.kind <> 'stop_checkins')
     ORDER BY s.said_at DESC LIMIT 1;
    on_its_way := EXISTS (SELECT 1 FROM dionysus.contact_evaluations c
                           WHERE c.person = p.person AND c.outcome = 'opportunity' AND c.decision IS NULL AND c.id IS DISTINCT FROM deciding)
               OR EXISTS (SELECT 1 FROM dionysus.outbox o WHERE o.person = p.person AND o.contact_id IS NOT NULL AND o.status = 'pending');
    IF solicited THEN
        gates := gates || jsonb_build_object('gate', 'their_word', 'passed', sig.id IS NULL,
            'detail', CASE WHEN sig.id IS NULL THEN 'nothing said against it' ELSE format('they said "%s" (%s)', sig.words, sig.kind) END);
        gates := gates || jsonb_build_object('gate', 'in_flight', 'passed', NOT on_its_way,
            'detail', CASE WHEN NOT on_its_way THEN 'nothing on its way to them' ELSE 'a contact is already being decided or delivered' END);
        SELECT count(*) INTO today FROM dionysus.contact_evaluations c
         WHERE c.person = p.person AND c.solicited AND c.decision = 'message' AND c.decided_at > t - interval '1 day';
        gates := gates || jsonb_build_object('gate', 'daily_limit', 'passed', today < dionysus_internal.proactive_setting('solicited_per_day'),
            'detail', format('%s asked-for contacts in the last day (at most %s)', today, dionysus_internal.proactive_setting('solicited_per_day')));
        RETURN gates;
    END IF;
    gates := gates || jsonb_build_object('gate', 'their_word', 'passed', sig.id IS NULL,
        'detail', CASE WHEN sig.id IS NULL THEN 'nothing said against contact'
                       ELSE format('they said "%s" (%s%s)', sig.words, sig.kind,
                                   coalesce(' until ' || to_char(sig.until AT TIME ZONE p.time_zone, 'Dy HH24:MI'), ', until they write again')) END);
    SELECT * INTO av FROM dionysus_internal.availability(p.person, t);
    local_hour := extract(hour FROM t AT TIME ZONE p.time_zone)::int;
    -- Default quiet hours hold unless their learned rhythm, trusted enough, says they are up.
    quiet := CASE WHEN dionysus_internal.proactive_setting('quiet_start_hour') > dionysus_internal.proactive_setting('quiet_end_hour')
                  THEN local_hour >= dionysus_internal.proactive_setting('quiet_start_hour') OR local_hour < dionysus_internal.proactive_setting('quiet_end_hour')
                  ELSE local_hour >= dionysus_internal.proactive_setting('quiet_start_hour') AND local_hour < dionysus_internal.proactive_setting('quiet_end_hour') END;
    gates := gates || jsonb_build_object('gate', 'quiet_hours', 'passed', NOT (quiet AND (av.learned < 0.15 OR av.confidence < 0.5)),
        'detail', format('%s:00 their time; default quiet %s–%s, learned activity %s (confidence %s)', local_hour,
                         dionysus_internal.proactive_setting('quiet_start_hour'), dionysus_internal.proactive_setting('quiet_end_hour'),
                         round(av.learned::numeric, 2), round(av.confidence::numeric, 2)));
    gates := gates || jsonb_build_object('gate', 'availability', 'passed', av.belief >= dionysus_internal.proactive_setting('min_availability'),
        'detail', format('likely available %s (confidence %s)', round(av.belief::numeric, 2), round(av.confidence::numeric, 2)));
    gates := gates || jsonb_build_object('gate', 'cooldown', 'passed', p.last_contact_at IS NULL OR since_contact >= cooldown,
        'detail', CASE WHEN p.last_contact_at IS NULL THEN 'no contact started yet'
                       ELSE format('last contact %s ago (cooldown %s)', date_trunc('minute', since_contact), cooldown) END);
    -- One contact at a time: the last one is answered or counted as ignored before the next.
    gates := gates || jsonb_build_object('gate', 'waiting_on_them', 'passed', NOT p.awaiting_reply,
        'detail', CASE WHEN p.awaiting_reply THEN format('the last contact (%s ago) is not answered yet; it counts as ignored after %s',
                                                         date_trunc('minute', since_contact), date_trunc('minute', dionysus_internal.ignored_after(p)))
                       ELSE 'no contact waiting for an answer' END);
    gates := gates || jsonb_build_object('gate', 'in_flight', 'passed', NOT on_its_way,
        'detail', CASE WHEN NOT on_its_way THEN 'nothing on its way to them' ELSE 'a contact is already being decided or delivered' END);
    SELECT current_energy INTO energy FROM dionysus.heartbeat_state WHERE id = 1;
    cost := dionysus.get_action_cost('reach_out_user');
    gates := gates || jsonb_build_object('gate', 'energy', 'passed', energy >= cost,
        'detail', format('energy %s, a contact costs %s', round(energy::numeric, 1), cost));
    -- After repeated ignores, time alone (social debt) no longer opens the way: a new cause must
    -- (a request they made since, or something new to tell; not pressure grown by time).
    muted := p.ignored_in_row >= dionysus_internal.proactive_setting('ignores_before_pause');
    new_cause := NOT muted OR dionysus_internal.open_requests(p.person) > coalesce((p.cause_at_last_contact ->> 'open_requests')::int, 0)
                 OR p.curiosity > coalesce((p.cause_at_last_contact ->> 'curiosity')::float8, 0) + 0.05;
    gates := gates || jsonb_build_object('gate', 'ignored', 'passed', new_cause,
        'detail', CASE WHEN NOT muted THEN format('%s unanswered in a row', p.ignored_in_row)
                       ELSE format('%s contacts in a row went unanswered: only a new cause counts (%s)', p.ignored_in_row,
                                   CASE WHEN new_cause THEN 'there is one' ELSE 'there is none' END) END);
    -- A considerate friend who knows you are busy now and free tonight waits for tonight: when
    -- the rhythm says a clearly better hour comes within the look-ahead, the contact waits for it.
    IF over_threshold AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(gates) g WHERE NOT (g ->> 'passed')::boolean) THEN
        SELECT k, f.belief, f.confidence INTO later
          FROM generate_series(1, dionysus_internal.proactive_setting('better_moment_hours')::int) k,
               LATERAL dionysus_internal.availability(p.person, t + make_interval(hours => k)) f
         ORDER BY f.belief DESC, k LIMIT 1;
        -- The beliefs carry their confidence already (a prior, or what was learned); a rhythm
        -- that is trusted needs less of a difference to be waited for (down to half the margin),
        -- a prior alone all of it.
        margin := dionysus_internal.proactive_setting('better_moment_margin') * (1 - 0.5 * av.confidence);
        better := later.belief >= av.belief + margin;
        gates := gates || jsonb_build_object('gate', 'better_moment', 'passed', NOT better,
            'detail', CASE WHEN better THEN format('likely more available around %s:00 their time (%s against %s now)',
                                                   extract(hour FROM (t + make_interval(hours => later.k)) AT TIME ZONE p.time_zone),
                                                   round(later.belief::numeric, 2), round(av.belief::numeric, 2))
                           ELSE format('no clearly better hour in the next %s (at best %s more, %s needed)',
                                       dionysus_internal.proactive_setting('better_moment_hours'),
                                       round((later.belief - av.belief)::numeric, 2), round(margin::numeric, 2)) END);
    END IF;
    RETURN gates;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.evaluate_contact(who text) RETURNS dionysus.contact_evaluations
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    p dionysus.people;
    a dionysus.agent_state;
    av_belief double precision;
    av_confidence double precision;
    e dionysus.contact_evaluations;
    ins jsonb := '[]'::jsonb;
    gates jsonb;
    w record;
    v double precision;
    total double precision := 0;
    threshold double precision;
    task double precision;
    ignore_after interval;
    blocked text[];
    top record;
    words text;
    factor double precision;
    last_contact uuid;
    shyness double precision;
    independence double precision;
    empathy double precision;
BEGIN
    p := dionysus_internal.person_row(who);
    SELECT * INTO a FROM dionysus.agent_state WHERE id = 1;
    -- A contact nobody answered within their usual window counts as ignored.
    ignore_after := dionysus_internal.ignored_after(p);
    IF p.awaiting_reply AND t - p.last_contact_at > ignore_after THEN
        UPDATE dionysus.people x SET awaiting_reply = false, ignored_in_row = x.ignored_in_row + 1 WHERE x.person = who
        RETURNING * INTO p;
        PERFORM dionysus_internal.note_miss(who, p.last_contact_at, 1);
        -- Silence is feedback too: the reason it was sent for and the personality learn from it.
        SELECT c.id INTO last_contact FROM dionysus.contact_evaluations c
         WHERE c.person = who AND c.decision = 'message' AND c.feedback_at IS NULL AND NOT c.solicited
         ORDER BY c.decided_at DESC, c.recorded_at DESC LIMIT 1;
        IF last_contact IS NOT NULL THEN
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'silence', 'signal', -0.5), feedback_at = t
             WHERE c.id = last_contact;
            PERFORM dionysus_internal.learn_from_contact(who, last_contact, p.last_contact_at, -0.5,
                format('no answer within %s', date_trunc('minute', ignore_after)));
        END IF;
        PERFORM dionysus.push_event('internal', 'contact_ignored', 2, jsonb_build_object('ignored_in_row', p.ignored_in_row), who);
    END IF;
    -- A contact one of their own rules asked for (a reminder) is weighed on its own terms.
    IF p.contact_request IS NOT NULL THEN
        RETURN dionysus_internal.evaluate_requested_contact(p);
    END IF;
    -- Task pressure is state the rules move (015): open requests make it build over hours.
    task := p.task_pressure;
    -- Each weight with what their answers taught about it (015's person_contact_weights), in one read.
    FOR w IN SELECT cw.input, cw.weight, cw.description, coalesce(f.factor, 1) AS learned
               FROM dionysus.contact_weights cw
               LEFT JOIN dionysus.person_contact_weights f ON f.person = who AND f.input = cw.input
              ORDER BY cw.input LOOP
        v := CASE w.input
                 WHEN 'social_debt' THEN p.social_debt
                 WHEN 'acquaintance' THEN 1.0 / (1 + p.turns / dionysus_internal.proactive_setting('acquaintance_turns'))
                 WHEN 'task_pressure' THEN task
                 WHEN 'curiosity' THEN p.curiosity END;
        factor := w.learned;
        ins := ins || jsonb_build_object('input', w.input, 'value', round(v::numeric, 3), 'weight', round((w.weight * factor)::numeric, 3),
                                         'learned_factor', round(factor::numeric, 3),
                                         'contribution', round((v * w.weight * factor)::numeric, 3), 'why', w.description);
        total := total + v * w.weight * factor;
    END LOOP;
    -- Personality, vitality and their state move the threshold: shy waits longer, independent
    -- less; a tired agent needs more to act; restraint (the night rule) holds back; an
    -- empathetic one holds back after cold replies.
    SELECT dionysus_internal.trait('shyness'), dionysus_internal.trait('independence'), dionysus_internal.trait('empathy')
      INTO shyness, independence, empathy;
    threshold := dionysus_internal.proactive_setting('contact_threshold')
                 * (1 + 0.5 * (shyness - 0.5))
                 * (1 - 0.5 * (independence - 0.5))
                 * (1 + 0.3 * (1 - a.vitality))
                 * (1 + p.restraint)
                 * (1 + 0.5 * empathy * greatest(0, -p.mood));

    -- The gates (contact_gates), each written down whether it passed or not.
    gates := dionysus_internal.contact_gates(p, t, false, over_threshold => total >= threshold);
    SELECT coalesce(array_agg(g ->> 'gate'), '{}') INTO blocked FROM jsonb_array_elements(gates) g WHERE NOT (g ->> 'passed')::boolean;

    SELECT x ->> 'input' AS input, (x ->> 'value')::float8 AS value, (x ->> 'weight')::float8 AS weight,
           (x ->> 'contribution')::float8 AS contribution INTO top
      FROM jsonb_array_elements(ins) x ORDER BY (x ->> 'contribution')::float8 DESC LIMIT 1;
    words := format('pressure %s against threshold %s; %s was %s (weight %s, contributing %s)', round(total::numeric, 2),
                    round(threshold::numeric, 2), top.input, top.value, top.weight, top.contribution)
             || CASE WHEN p.restraint >= 0.05 THEN format('; restraint %s raised the threshold', round(p.restraint::numeric, 2)) ELSE '' END;
    e.outcome := CASE WHEN total < dionysus_internal.proactive_setting('signal_threshold') THEN 'below'
                      WHEN total < threshold THEN 'signal'
                      WHEN cardinality(blocked) > 0 THEN 'gated'
                      ELSE 'opportunity' END;
    IF e.outcome = 'opportunity' THEN
        SELECT f.belief, f.confidence INTO av_belief, av_confidence FROM dionysus_internal.availability(who, t) f;
    END IF;
    words := words || CASE e.outcome
        WHEN 'below' THEN '; nothing to say yet'
        WHEN 'signal' THEN '; an urge, not yet enough to write'
        WHEN 'gated' THEN '; enough to write, held back by ' || array_to_string(blocked, ', ')
        ELSE format('; %s — the person was likely available (%s, confidence %s)',
                    'over the threshold', round(av_belief::numeric, 2), round(av_confidence::numeric, 2)) END;
    INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, threshold_parts, gates, outcome, explanation)
    VALUES (who, t, ins, total, threshold,
            jsonb_build_object('base', dionysus_internal.proactive_setting('contact_threshold'), 'shyness', shyness,
                               'independence', independence, 'vitality', round(a.vitality::numeric, 3),
                               'restraint', round(p.restraint::numeric, 3), 'mood', round(p.mood::numeric, 3),
                               'empathy', empathy),
            gates, e.outcome, words)
    RETURNING * INTO e;
    UPDATE dionysus.people x SET last_pressure = total, last_evaluated_at = t,
           next_check_at = t + make_interval(secs => coalesce(x.check_interval_minutes, dionysus_internal.proactive_setting('check_interval_minutes')) * 60)
     WHERE x.person = who;
    IF e.outcome = 'signal' THEN
        PERFORM dionysus.push_event('internal', 'contact_urge', 3, jsonb_build_object('pressure', round(total::numeric, 3)), who);
    END IF;
    IF e.outcome = 'opportunity' THEN
        UPDATE dionysus.contact_evaluations c SET notified_at = now() WHERE c.id = e.id;
        -- Which evaluation, nothing more: any role that may connect can LISTEN (the driver reads the rest).
        PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', e.id)::text);
    END IF;
    RETURN e;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.evaluate_requested_contact(p dionysus.people) RETURNS dionysus.contact_evaluations
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    req jsonb := p.contact_request;
    e dionysus.contact_evaluations;
    gates jsonb;
    blocked text[];
    words text;
BEGIN
    IF (req ->> 'at')::timestamptz < t - make_interval(secs => dionysus_internal.proactive_setting('contact_request_hours') * 3600) THEN
        UPDATE dionysus.people x SET contact_request = NULL WHERE x.person = p.person;
        INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, gates, outcome, explanation, solicited, request)
        VALUES (p.person, t, '[]'::jsonb, 0, 1, '[]'::jsonb, 'gated',
                format('a contact their rule "%s" asked for (%s) could not go out within %s hours and lapsed', req ->> 'rule_name', req ->> 'about',
                       dionysus_internal.proactive_setting('contact_request_hours')), true, req)
        RETURNING * INTO e;
        RETURN e;
    END IF;
    gates := dionysus_internal.contact_gates(p, t, true);
    SELECT array_agg(g ->> 'gate') INTO blocked FROM jsonb_array_elements(gates) g WHERE NOT (g ->> 'passed')::boolean;
    words := format('they asked for this: %s (their rule "%s")', req ->> 'about', req ->> 'rule_name')
             || CASE WHEN blocked IS NULL THEN '' ELSE '; held back by ' || array_to_string(blocked, ', ') END;
    INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, gates, outcome, explanation, solicited, request)
    VALUES (p.person, t, jsonb_build_array(jsonb_build_object('input', 'request', 'value', 1, 'weight', 1, 'contribution', 1,
                                                              'why', req ->> 'about', 'rule', req -> 'rule')),
            1, 1, gates, CASE WHEN blocked IS NULL THEN 'opportunity' ELSE 'gated' END, words, true, req)
    RETURNING * INTO e;
    UPDATE dionysus.people x SET last_evaluated_at = t,
           next_check_at = t + make_interval(secs => dionysus_internal.proactive_setting('check_interval_minutes') * 60)
     WHERE x.person = p.person;
    IF e.outcome = 'opportunity' THEN
        UPDATE dionysus.contact_evaluations c SET notified_at = now() WHERE c.id = e.id;
        -- Which evaluation, nothing more: any role that may connect can LISTEN (the driver reads the rest).
        PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', e.id)::text);
    END IF;
    RETURN e;
END $$;

CREATE OR REPLACE FUNCTION decide_contact(evaluation_id uuid, decision text, message text DEFAULT NULL, reason text DEFAULT NULL,
                               decided_by text DEFAULT 'model') RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    e dionysus.contact_evaluations;
    p dionysus.people;
    t timestamptz := dionysus.clock_now();
    target jsonb;
    msg_id uuid;
    cost double precision;
    backoff double precision;
    censored jsonb;
    held jsonb := '{}'::jsonb;
    gates jsonb;
    gate text;
BEGIN
    IF decision IS NULL OR decision NOT IN ('message', 'wait') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decision": % (message or wait)', dionysus_internal.input_prefix(decision) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decided_by IS NULL OR decided_by NOT IN ('model', 'default', 'skipped') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": % (model, default or skipped)', dionysus_internal.input_prefix(decided_by) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decision = 'message' AND (coalesce(btrim(message), '') = '' OR length(message) > 4000) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "message": a contact needs the message to send, at most 4,000 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Lock order: the state row (energy), agent_state, then the evaluation and the person.
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    SELECT * INTO e FROM dionysus.contact_evaluations c WHERE c.id = evaluation_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "evaluation_id": no contact evaluation with id %', evaluation_id USING ERRCODE = 'no_data_found';
    END IF;
    IF e.outcome <> 'opportunity' THEN
        RAISE EXCEPTION 'dionysus: evaluation % was %, not an opportunity to contact', evaluation_id, e.outcome
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF e.decision IS NOT NULL THEN
        -- Decided already (a redelivered NOTIFY): the first decision stands.
        RETURN jsonb_build_object('decision', e.decision, 'outbox_id', e.outbox_id, 'duplicate', true);
    END IF;
    SELECT * INTO p FROM dionysus.people x WHERE x.person = e.person FOR UPDATE;
    -- Censors (022) read the words: a blocked message is decided as a wait (its activation
    -- counted), and takes the wait's path below.
    IF decision = 'message' THEN
        censored := dionysus.censor_gate('reach_out', message, e.person, jsonb_build_object('evaluation_id', e.id));
        IF censored ->> 'verdict' = 'block' THEN
            decision := 'wait';
            reason := left('censored: ' || (SELECT string_agg(r, '; ') FROM jsonb_array_elements_text(censored -> 'reasons') r), 1000);
            held := jsonb_build_object('censored', censored -> 'censors');
        END IF;
    END IF;
    IF decision = 'wait' AND e.solicited THEN
        -- A contact they asked for is not dropped for a "wait": it is weighed again at the next
        -- check, until it goes out or lapses.
        UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = decide_contact.decided_by, decided_at = t,
               reason = decide_contact.reason WHERE c.id = e.id;
        RETURN jsonb_build_object('decision', 'wait', 'next_check_at', p.next_check_at, 'duplicate', false) || held;
    ELSIF decision = 'wait' THEN
        -- Exponential back-off of the check-in cadence, longer for a patient personality.
        backoff := least(dionysus_internal.proactive_setting('check_backoff_max_minutes'),
                         coalesce(p.check_interval_minutes, dionysus_internal.proactive_setting('check_interval_minutes'))
                         * (1.5 + dionysus_internal.trait('patience')));
        UPDATE dionysus.people x SET check_interval_minutes = backoff, next_check_at = t + make_interval(secs => backoff * 60)
         WHERE x.person = e.person;
        UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = decide_contact.decided_by, decided_at = t,
               reason = decide_contact.reason WHERE c.id = e.id;
        UPDATE dionysus.agent_state SET model_calls = model_calls + CASE WHEN decide_contact.decided_by = 'model' THEN 1 ELSE 0 END,
               vitality = greatest(0, vitality - CASE WHEN decide_contact.decided_by = 'model' THEN dionysus_internal.proactive_setting('vitality_drain_model') ELSE 0 END)
         WHERE id = 1;
        RETURN jsonb_build_object('decision', 'wait', 'next_check_at', t + make_interval(secs => backoff * 60), 'duplicate', false) || held;
    END IF;
    -- The gates time spent thinking can close are checked again (contact_gates; a contact they
    -- asked for has no cooldown and is not held back by energy: it spends what there is).
    gates := dionysus_internal.contact_gates(p, t, e.solicited, deciding => e.id);
    FOREACH gate IN ARRAY ARRAY['in_flight', 'their_word', 'cooldown', 'energy'] LOOP
        IF EXISTS (SELECT 1 FROM jsonb_array_elements(gates) g WHERE g ->> 'gate' = gate AND NOT (g ->> 'passed')::boolean) THEN
            RAISE EXCEPTION 'dionysus: contact refused: %', CASE gate
                WHEN 'in_flight' THEN format('a message to %s is already on its way', e.person)
                WHEN 'their_word' THEN format('%s asked not to be contacted now', e.person)
                WHEN 'cooldown' THEN format('%s was contacted less than the cooldown ago', e.person)
                ELSE format('energy below the %s a contact costs', dionysus.get_action_cost('reach_out_user')) END
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
    END LOOP;
    cost := dionysus.get_action_cost('reach_out_user');
    IF e.solicited THEN
        cost := least(cost, greatest(0, (SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1)));
    END IF;
    IF dionysus_internal.web_only_basis(message) THEN
        RAISE EXCEPTION 'dionysus: contact refused: it rests on web content alone' USING ERRCODE = 'insufficient_privilege';
    END IF;
    target := dionysus.reach_out_target(e.person);
    PERFORM dionysus.update_energy(-cost, NULL, 'reach_out_user',
                                   CASE WHEN e.solicited THEN 'contact they asked for: ' ELSE 'contact born of pressure: ' END || left(e.explanation, 200));
    INSERT INTO dionysus.outbox (audience, content, person, platform, contact_id)
    VALUES ('user', message, target ->> 'person', target ->> 'platform', e.id)
    RETURNING id INTO msg_id;
    UPDATE dionysus.contact_evaluations c SET decision = 'message', decided_by = decide_contact.decided_by, decided_at = t,
           reason = decide_contact.reason, outbox_id = msg_id WHERE c.id = e.id;
    IF e.solicited THEN
        UPDATE dionysus.people x SET contact_request = NULL WHERE x.person = e.person;
    ELSE
        UPDATE dionysus.people x SET
            check_interval_minutes = dionysus_internal.proactive_setting('check_interval_minutes'),
            cause_at_last_contact = jsonb_build_object(
                'open_requests', dionysus_internal.open_requests(e.person),
                'task_pressure', x.task_pressure, 'curiosity', x.curiosity)
         WHERE x.person = e.person;
    END IF;
    -- Two model calls (decide, compose); one for a contact they asked for (compose only).
    UPDATE dionysus.agent_state SET model_calls = model_calls + CASE WHEN decide_contact.decided_by <> 'model' THEN 0 WHEN e.solicited THEN 1 ELSE 2 END,
           vitality = greatest(0, vitality - CASE WHEN decide_contact.decided_by <> 'model' THEN 0 WHEN e.solicited THEN 1 ELSE 2 END
                                             * dionysus_internal.proactive_setting('vitality_drain_model'))
     WHERE id = 1;
    PERFORM pg_notify('dionysus_outbox', msg_id::text);
    RETURN jsonb_build_object('decision', 'message', 'outbox_id', msg_id, 'duplicate', false);
END $$;

COMMENT ON FUNCTION dionysus_internal.ignored_after(dionysus.people) IS 'How long an unanswered contact with this person waits before it counts as ignored.';
COMMENT ON FUNCTION dionysus_internal.open_requests(text) IS 'How many of the person''s own requests (goals from their words) are still open.';
COMMENT ON FUNCTION dionysus_internal.contact_gates(dionysus.people, timestamptz, boolean, uuid, boolean) IS 'Every gate a contact with this person must pass now, as [{gate, passed, detail}]: the one home of the contact gates (evaluate_contact, evaluate_requested_contact, decide_contact).';
GRANT EXECUTE ON FUNCTION dionysus_internal.ignored_after(dionysus.people), dionysus_internal.open_requests(text),
    dionysus_internal.contact_gates(dionysus.people, timestamptz, boolean, uuid, boolean) TO dionysus_driver;

-- H2: one current schema (sql/ defines each object once, its COMMENT beside it, the shipped
-- prompts' texts as files of their own under sql/prompts/). A fresh install's rows of
-- prompt_templates now come from the library's copy of those files; an updated database has
-- the same rows already. The loader is the one catalog change.
CREATE FUNCTION dionysus_internal."shipped_prompt"(
	"key" TEXT, /* & str */
	"version" INT /* i32 */
) RETURNS TEXT /* & '_ str */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'shipped_prompt_wrapper';
COMMENT ON FUNCTION dionysus_internal.shipped_prompt(text, integer) IS
    'The text of a shipped version of a prompt template (sql/prompts/<key>.txt, older versions sql/prompts/superseded/<key>.v<N>.txt), compiled into the library: the rows of prompt_templates a fresh install inserts. 22023 for a version never shipped.';
GRANT EXECUTE ON FUNCTION dionysus_internal.shipped_prompt(text, integer) TO dionysus_driver;

-- H2: comments state the rule instead of citing design documents not in the repository
-- ('seed 00x §y'): eleven COMMENTs, and two functions whose bodies had such a comment.

COMMENT ON TABLE memory_neighborhoods IS 'Precomputed top-20 associations of each memory.';
COMMENT ON TABLE heartbeat_config IS
    'Energy parameters, action costs (cost_<action>), goal limits, cooldown and timeouts. '
    'Values must be finite and >= 0.';
COMMENT ON TABLE goals IS 'The goal backlog: active, queued, backburner, completed, abandoned.';
COMMENT ON TABLE messages IS
    'The immutable message log: every turn once per (platform, platform_message_id), chained to the '
    'previous turn of its channel, with the episodic memory it became.';
COMMENT ON FUNCTION enqueue_language_work() IS
    'Queues the worker''s language jobs for the driver: summaries of closed episodes, concepts of young memories, '
    'the summary and micro levels of long fresh memories (027). '
    'Closes episodes left open past the gap first. Returns how many were queued.';
COMMENT ON TABLE objectives IS 'The person''s objectives: what they are working toward, extracted from their turns; theirs, not Dionysus''s goals.';
COMMENT ON TABLE decay_config IS
    'How memories fade: the stage thresholds in effective days, what slows fading (recall, importance, feeling), the mention similarity that resets a memory''s clock, the types that decay, the pass interval and batch, and the off switch (enabled). UPDATE to tune.';
COMMENT ON TABLE censors IS
    'Things not to do: a trigger (embedded, with the model that made it) and optional pattern, a scope (person, kinds, local hours from_hour to to_hour, any_content), a reason, a severity (warn, block, absolute), where it was learned, its activations and false positives, and its escalation threshold.';
COMMENT ON TABLE procedures IS 'How-to knowledge (K-lines): name, domain, goals (upper fringe), core patterns, tools and concepts, implementation notes (lower fringe), for everyone or one person; activation, success and failure counts and effectiveness ((successes + 1) / (successes + failures + 2)).';
COMMENT ON TABLE context_budgets IS 'Token budgets by task (3K casual chat, 6K a deep conversation, 8K a heartbeat decision, 12K reflection or synthesis), each with the order its sections are served in; a context archetype names its task (budget_task).';
COMMENT ON FUNCTION action_schema() IS
    'The action taxonomy as jsonb: for each action its performer (database or driver) and its parameters '
    '(kind, required). heartbeat_commit validates against it; the driver builds its prompt from it.';

CREATE OR REPLACE FUNCTION dionysus_internal.note_person_message(who text, message_id uuid, words text) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    p dionysus.people;
    sig record;
    answered boolean := false;
    ack boolean := dionysus.is_acknowledgement(words);
    contact uuid;
    cue record;
    unsure uuid;
BEGIN
    -- Lock order: agent_state (push_event, feedback) before the person's row.
    PERFORM dionysus.push_event('communication', 'message_received', 1, jsonb_build_object('message_id', message_id), who);
    IF EXISTS (SELECT 1 FROM dionysus.people x WHERE x.person = who AND x.awaiting_reply) THEN
        answered := true;
        UPDATE dionysus.agent_state SET vitality = least(1, vitality + dionysus_internal.proactive_setting('vitality_feedback'))
         WHERE id = 1;
    END IF;
    p := dionysus_internal.person_row(who);
    SELECT * INTO sig FROM dionysus_internal.contact_signal(words, t, p.time_zone);
    -- Their rhythm: this hour of their week gained one message, unless the message says they
    -- are busy (then it is evidence against the hour: a miss); the rest fades a little.
    UPDATE dionysus.person_rhythm r SET activity = r.activity * 0.998, misses = r.misses * 0.998 WHERE r.person = who;
    INSERT INTO dionysus.person_rhythm AS r (person, hour_of_week, activity, misses)
    VALUES (who, dionysus_internal.hour_of_week(t, p.time_zone), CASE WHEN sig.kind = 'busy' THEN 0 ELSE 1 END,
            CASE WHEN sig.kind = 'busy' THEN 1 ELSE 0 END)
    ON CONFLICT (person, hour_of_week) DO UPDATE SET activity = r.activity + EXCLUDED.activity, misses = r.misses + EXCLUDED.misses;
    -- They wrote: a crossing still undecided is moot (the conversation is on).
    UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = 'skipped', decided_at = t, reason = 'they wrote first'
     WHERE c.person = who AND c.outcome = 'opportunity' AND c.decision IS NULL;
    -- Whatever they said before about not being available ends when they write again.
    UPDATE dionysus.person_signals s SET ended_at = t WHERE s.person = who AND s.ended_at IS NULL;
    IF sig.kind IS NOT NULL THEN
        INSERT INTO dionysus.person_signals (person, kind, said_at, until, message_id, words)
        VALUES (who, sig.kind, t, sig.until, message_id, left(words, 200));
    END IF;
    -- A contact answered only after an hour: that hour of their week is a poor one.
    IF answered AND t - p.last_contact_at > interval '1 hour' THEN
        PERFORM dionysus_internal.note_miss(who, p.last_contact_at, 0.5);
    END IF;
    -- How the contact landed, from cheap cues (latency, length, tone); the fast model is asked
    -- only when they disagree (contact_feedback). Learning is logged with its cause (015).
    IF answered THEN
        SELECT c.id INTO contact FROM dionysus.contact_evaluations c
         WHERE c.person = who AND c.decision = 'message' AND c.feedback_at IS NULL ORDER BY c.decided_at DESC, c.recorded_at DESC LIMIT 1;
        SELECT * INTO cue FROM dionysus_internal.reply_signal(words, extract(epoch FROM t - p.last_contact_at), p.reply_seconds);
        IF contact IS NOT NULL AND cue.unsure THEN
            unsure := contact;
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'cues', 'unsure', true, 'latency', round(cue.latency::numeric, 2),
                   'length', cue.length, 'tone', round(cue.tone::numeric, 2), 'signal', round(cue.signal::numeric, 3)) WHERE c.id = contact;
        ELSIF contact IS NOT NULL THEN
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'cues', 'latency', round(cue.latency::numeric, 2),
                   'length', cue.length, 'tone', round(cue.tone::numeric, 2), 'signal', round(cue.signal::numeric, 3)), feedback_at = t
             WHERE c.id = contact;
            PERFORM dionysus_internal.learn_from_contact(who, contact, p.last_contact_at, cue.signal,
                format('they answered after %s (latency %s, length %s, tone %s)', date_trunc('minute', t - p.last_contact_at),
                       round(cue.latency::numeric, 2), cue.length, round(cue.tone::numeric, 2)));
        END IF;
        PERFORM dionysus.push_event('communication', 'contact_answered', 2, jsonb_build_object('message_id', message_id), who);
    END IF;
    UPDATE dionysus.people x SET
        turns = x.turns + 1,
        first_message_at = coalesce(x.first_message_at, t),
        last_message_at = t,
        social_debt = x.social_debt * (1 - dionysus_internal.proactive_setting('debt_relief_on_message')),
        mood = dionysus_internal.proactive_setting('mood_memory') * x.mood
               + (1 - dionysus_internal.proactive_setting('mood_memory')) * dionysus_internal.message_tone(words),
        awaiting_reply = false,
        ignored_in_row = 0,
        reply_seconds = CASE WHEN answered THEN coalesce(0.7 * x.reply_seconds, 0)
                                                + CASE WHEN x.reply_seconds IS NULL THEN 1 ELSE 0.3 END
                                                  * extract(epoch FROM t - x.last_contact_at)
                             ELSE x.reply_seconds END,
        -- A message resets the check-in cadence (check_interval_minutes).
        check_interval_minutes = dionysus_internal.proactive_setting('check_interval_minutes'),
        next_check_at = t + make_interval(mins => dionysus_internal.proactive_setting('check_interval_minutes')::int),
        updated_at = now()
     WHERE x.person = who;
    RETURN jsonb_build_object('acknowledgement', ack, 'answered_contact', answered, 'signal', sig.kind, 'signal_until', sig.until,
                              'feedback_unsure', unsure);
END $$;

CREATE OR REPLACE FUNCTION proactive_tick() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz;
    a dionysus.agent_state;
    hours double precision;
    n_dropped bigint := 0;
    n_filtered bigint := 0;
    n_processed bigint := 0;
    over bigint;
    wake double precision;
    woke boolean := false;
    ev dionysus.events;
    gone record;
    who text;
    evaluated integer := 0;
    opportunities integer := 0;
    verdict dionysus.contact_evaluations;
    top_pressure double precision;
    tod double precision;
    interval_s double precision;
    new_mode text;
    local_hour int;
    new_memories bigint;
    agent_tz text;
    n_fired integer := 0;
BEGIN
    SELECT * INTO a FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    -- The clock is read once the state is ours: a tick that waited on another never writes an
    -- older time over the one it committed (the next would count those hours twice). On real
    -- time now() is when this transaction began, which may be before that tick committed.
    t := dionysus.clock_now();
    IF NOT EXISTS (SELECT 1 FROM dionysus.clock c WHERE c.id = 1 AND c.frozen_at IS NOT NULL) THEN
        t := greatest(t, a.last_tick_at);
    END IF;
    hours := greatest(0, extract(epoch FROM t - coalesce(a.last_tick_at, t)) / 3600.0);
    -- The agent keeps the day of the person it talked with last: it sleeps when they sleep.
    agent_tz := coalesce((SELECT x.time_zone FROM dionysus.people x ORDER BY x.last_message_at DESC NULLS LAST LIMIT 1), 'UTC');
    local_hour := extract(hour FROM t AT TIME ZONE agent_tz)::int;

    -- What a rule scheduled is queued when its time comes.
    UPDATE dionysus.events e SET status = 'queued', payload = e.payload || jsonb_build_object('scheduled_for', e.at), at = t
     WHERE e.status = 'scheduled' AND e.at <= t;
    -- Time-of-day boundaries arrive as events, in each person's own time: every full hour
    -- (time.hour) and morning, midday, evening, night (at most the last day's worth).
    IF a.last_tick_at IS NOT NULL AND t > a.last_tick_at THEN
        INSERT INTO dionysus.events (source, type, priority, person, payload, at)
        SELECT 'time', b.type, 2, x.person, jsonb_build_object('local_hour', extract(hour FROM h.local)::int), h.local AT TIME ZONE x.time_zone
          FROM dionysus.people x,
               LATERAL generate_series(date_trunc('hour', t AT TIME ZONE x.time_zone),
                                       greatest(date_trunc('hour', a.last_tick_at AT TIME ZONE x.time_zone),
                                                date_trunc('hour', t AT TIME ZONE x.time_zone) - interval '23 hours'),
                                       interval '-1 hour') AS h(local),
               LATERAL (VALUES ('time.hour'),
                               (CASE extract(hour FROM h.local)::int WHEN 7 THEN 'time.morning' WHEN 12 THEN 'time.midday'
                                                                     WHEN 18 THEN 'time.evening' WHEN 23 THEN 'time.night' END)) AS b(type)
         WHERE x.last_message_at IS NOT NULL AND b.type IS NOT NULL AND h.local > a.last_tick_at AT TIME ZONE x.time_zone;
    END IF;

    -- Overload, layer 2: old LOW and IDLE events are dropped; layer 3: above the limit the
    -- lowest priority goes first. CRITICAL is never dropped.
    FOR gone IN
        WITH d AS (
            UPDATE dionysus.events e SET status = 'dropped', handled_at = t, reason = 'too old for its priority'
             WHERE e.status = 'queued'
               AND ((e.priority >= 3 AND e.at < t - make_interval(secs => dionysus_internal.proactive_setting('event_drop_low_seconds')))
                 OR (e.priority = 4 AND e.at < t - make_interval(secs => dionysus_internal.proactive_setting('event_drop_idle_seconds'))))
            RETURNING e.priority)
        SELECT d.priority, count(*) AS n FROM d GROUP BY d.priority
    LOOP
        PERFORM dionysus_internal.count_event('dropped_age', gone.priority, gone.n);
        n_dropped := n_dropped + gone.n;
    END LOOP;
    SELECT count(*) - dionysus_internal.proactive_setting('event_queue_limit') INTO over FROM dionysus.events WHERE status = 'queued';
    IF over > 0 THEN
        FOR gone IN
            WITH d AS (
                UPDATE dionysus.events e SET status = 'dropped', handled_at = t, reason = 'queue over its limit'
                 WHERE e.id IN (SELECT x.id FROM dionysus.events x WHERE x.status = 'queued' AND x.priority > 0
                                 ORDER BY x.priority DESC, x.at LIMIT over)
                RETURNING e.priority)
            SELECT d.priority, count(*) AS n FROM d GROUP BY d.priority
        LOOP
            PERFORM dionysus_internal.count_event('dropped_overload', gone.priority, gone.n);
            n_dropped := n_dropped + gone.n;
        END LOOP;
    END IF;

    -- Relaxed filters LOW and IDLE, asleep everything but CRITICAL; what is filtered disturbs.
    -- The clock's own hours are not stimuli: never filtered (they carry the person's rules, a
    -- reminder at 07:00), they disturb nothing.
    FOR ev IN SELECT * FROM dionysus.events WHERE status = 'queued' ORDER BY priority, at, id LOOP
        IF ev.source <> 'time' AND ((a.mode = 'relaxed' AND ev.priority >= 3) OR (a.mode = 'asleep' AND ev.priority >= 1)) THEN
            UPDATE dionysus.events SET status = 'filtered', handled_at = t, reason = 'agent ' || a.mode WHERE id = ev.id;
            PERFORM dionysus_internal.count_event('filtered', ev.priority, 1);
            a.disturbance := a.disturbance + ev.merged * (ARRAY[1.0, 0.3, 0.1, 0.05, 0.01])[ev.priority + 1];
            n_filtered := n_filtered + 1;
            CONTINUE;
        END IF;
        IF ev.type IN ('reaction') AND ev.person IS NOT NULL THEN
            UPDATE dionysus.people SET social_debt = social_debt * 0.8 WHERE person = ev.person;
        END IF;
        UPDATE dionysus.events SET status = 'processed', handled_at = t WHERE id = ev.id;
        a.vitality := greatest(0, a.vitality - dionysus_internal.proactive_setting('vitality_drain_event'));
        n_processed := n_processed + 1;
        -- The rules this event triggers (015); they may move vitality, so it is handed over.
        IF EXISTS (SELECT 1 FROM dionysus.mind_rules m WHERE m.status = 'active' AND m.trigger = ev.type
                                                         AND (m.person IS NULL OR m.person = ev.person)) THEN
            UPDATE dionysus.agent_state SET vitality = a.vitality WHERE id = 1;
            n_fired := n_fired + dionysus_internal.run_rules(ev.type, ev.person, 0, ev);
            SELECT vitality INTO a.vitality FROM dionysus.agent_state WHERE id = 1;
        END IF;
    END LOOP;
    a.disturbance := a.disturbance * dionysus_internal.proactive_setting('disturbance_decay');
    wake := 0.5 * (1 + (1 - a.vitality));
    IF a.mode IN ('asleep', 'relaxed') AND a.disturbance > wake THEN
        woke := true;
        a.disturbance := 0;
    END IF;

    -- Vitality: spent by ticking, regained with time, twice as fast in the agent's night.
    a.vitality := least(1, greatest(0, a.vitality - dionysus_internal.proactive_setting('vitality_drain_tick')
        + hours * dionysus_internal.proactive_setting('vitality_recharge_hour')
                * CASE WHEN local_hour >= 23 OR local_hour < 7 THEN 2 ELSE 1 END));

    -- Each person's pressures move with time; contact is evaluated when their cadence is due.
    SELECT count(*) INTO new_memories FROM dionysus.memories m
     WHERE m.created_at > coalesce(a.last_tick_real_at, now()) AND m.type = 'semantic' AND m.status = 'active'
       AND m.private_to IS NULL; -- what anyone may hear of (nobody's private words)
    IF new_memories > 0 THEN
        UPDATE dionysus.people x SET
            curiosity = least(1, x.curiosity + least(5, new_memories) * dionysus_internal.proactive_setting('curiosity_per_new_memory')
                                               * 2 * dionysus_internal.trait('curiosity')),
            updated_at = now()
         WHERE x.last_message_at IS NOT NULL;
    END IF;
    -- The 'tick' rules move each person's state with the time that passed (social debt in
    -- silence, curiosity fading, task pressure, the night's restraint: 015's built-ins).
    UPDATE dionysus.agent_state SET vitality = a.vitality WHERE id = 1;
    n_fired := n_fired + dionysus_internal.run_rules_for('tick', ARRAY(SELECT x.person FROM dionysus.people x
                                                                       WHERE x.last_message_at IS NOT NULL ORDER BY x.person), hours);
    SELECT vitality INTO a.vitality FROM dionysus.agent_state WHERE id = 1;
    -- Learned rules decay by the day: looked at once an hour.
    IF a.last_tick_at IS NULL OR date_trunc('hour', a.last_tick_at) <> date_trunc('hour', t) THEN
        PERFORM dionysus_internal.decay_rules();
    END IF;
    -- A crossing nobody decided on (no driver running) does not wait forever
    -- (nor hold back the evaluations below).
    UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = 'skipped', decided_at = t,
           reason = 'no mind decided within 30 minutes'
     WHERE c.outcome = 'opportunity' AND c.decision IS NULL AND c.at < t - interval '30 minutes';
    FOR who IN SELECT x.person FROM dionysus.people x
                WHERE x.last_message_at IS NOT NULL AND (x.next_check_at IS NULL OR x.next_check_at <= t)
                ORDER BY x.person LOOP
        verdict := dionysus_internal.evaluate_contact(who);
        evaluated := evaluated + 1;
        IF verdict.outcome = 'opportunity' THEN
            opportunities := opportunities + 1;
        END IF;
    END LOOP;


    -- The next tick: interval = base × 1/pressure × time of day × vitality.
    SELECT greatest(0.05, coalesce(max(x.last_pressure), 0)) INTO top_pressure FROM dionysus.people x;
    tod := CASE WHEN local_hour >= 23 OR local_hour < 7 THEN 4 ELSE 1 END;
    interval_s := dionysus_internal.proactive_setting('base_tick_seconds') / top_pressure * tod * (1 + (1 - a.vitality));
    IF woke THEN
        interval_s := dionysus_internal.proactive_setting('min_tick_seconds');
    END IF;
    interval_s := least(dionysus_internal.proactive_setting('max_tick_seconds'),
                        greatest(dionysus_internal.proactive_setting('min_tick_seconds'), interval_s));
    new_mode := CASE WHEN interval_s < 60 THEN 'alert' WHEN interval_s < 900 THEN 'normal'
                     WHEN interval_s < 3600 THEN 'relaxed' ELSE 'asleep' END;
    -- The mode comes from the interval the state asks for; the tick itself never sleeps through
    -- a full hour, so the hour's rules (a reminder at 15:00) run on time.
    interval_s := least(interval_s, 1 + extract(epoch FROM ((date_trunc('hour', t AT TIME ZONE agent_tz) + interval '1 hour') AT TIME ZONE agent_tz) - t));
    UPDATE dionysus.agent_state SET vitality = a.vitality, disturbance = a.disturbance, mode = new_mode, pressure = top_pressure,
           tick_interval_seconds = interval_s, last_tick_at = t, last_tick_real_at = greatest(a.last_tick_real_at, now()),
           next_tick_at = t + make_interval(secs => interval_s),
           ticks = ticks + 1, updated_at = now()
     WHERE id = 1;
    RETURN jsonb_build_object('at', t, 'mode', new_mode, 'previous_mode', a.mode, 'woke', woke, 'vitality', round(a.vitality::numeric, 3),
                              'pressure', round(top_pressure::numeric, 3), 'interval_seconds', round(interval_s::numeric, 1),
                              'events_processed', n_processed, 'events_filtered', n_filtered, 'events_dropped', n_dropped,
                              'evaluated', evaluated, 'opportunities', opportunities, 'rules_fired', n_fired);
END $$;

-- H3b: pending_proposals(for_person): one person's proposals waiting for their word (`dionysus proposals` lists only
-- those the terminal's person may decide), not everyone's.
-- One person's pending and discussed proposals, oldest first: those only they may decide.
CREATE FUNCTION pending_proposals(for_person text)
    RETURNS TABLE (proposal_id uuid, kind text, target text, rationale text, evidence jsonb, proposal jsonb, status text, created_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT p.proposal_id, p.kind, p.target, p.rationale, p.evidence, p.proposal, p.status, p.created_at
      FROM dionysus.pending_proposals() p JOIN dionysus.proposals x ON x.id = p.proposal_id
     WHERE x.person = for_person ORDER BY p.created_at
$$;
COMMENT ON FUNCTION pending_proposals(text) IS 'One person''s proposals waiting for their word (pending or under discussion), oldest first: the rows of pending_proposals() whose dream was theirs, the only ones they may decide.';
GRANT EXECUTE ON FUNCTION pending_proposals(text) TO dionysus_driver;

-- H3a: the answers the driver reads into its structs say their keys in their COMMENTs.
COMMENT ON FUNCTION import_messages(uuid, integer, jsonb) IS
    'A batch of turns at first_position of an import, in one transaction: each into the message log once, at its own time, '
    'as a memory private to the person; their own turns queued for extraction at background priority. A batch sent again skips what is in. '
    'Returns {import_id, position, total, imported, duplicates, skipped, finished}: imported and duplicates are this batch''s.';
COMMENT ON FUNCTION forget_person(text) IS
    'Erases, in one transaction, everything one person said and everything derived from it (turns, memories, facts, triples, goals, sentence vectors, people in their life, north stars, objectives, feedback, censors, rules, evaluations, learning, dreams and their proposals, their own templates and archetypes, threads, working memory, work items, outbox, mirror items, re-index staging, tombstones); what mixed them with others is redacted (heartbeats) or re-derived (episodes: summary cleared and queued again); the embedding cache is emptied. Owner, or the driver on the person''s own confirmed request (/forgetme). Returns {person, forgotten: {kind: count erased}}. P0002 for a person of whom nothing is stored.';
COMMENT ON FUNCTION embedding_info IS
    'The embedding provider in use, its model and whether it loads: for diagnostics (dionysus doctor). '
    '{provider (local, http), model_key, dimensions, store_model_key (the model of the stored vectors, null before any), reindex_needed; '
    'local: model_path, loadable, error (when it does not load); http: url}.';

-- H3b: recall's defaults in one place, the recall_config table (#34 one source of truth): recall reads every knob from
-- it with no fallback value of its own (a missing key is 42704 naming it), and recall_all through recall_setting.
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
GRANT EXECUTE ON FUNCTION dionysus_internal.recall_setting(text) TO dionysus_driver;
CREATE OR REPLACE FUNCTION recall_all(query text, k integer DEFAULT 10, person text DEFAULT NULL)
    RETURNS TABLE (kind text, id uuid, content text, score double precision, detail jsonb)
    LANGUAGE plpgsql AS $$
DECLARE
    q vector;
    w double precision := dionysus_internal.recall_setting('weight_vector');
BEGIN
    IF query IS NULL OR btrim(query) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "query": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF k IS NULL OR k < 1 OR k > 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "k": % is outside [1, 100]', k USING ERRCODE = 'invalid_parameter_value';
    END IF;
    q := dionysus.embed(query);
    RETURN QUERY
    WITH model AS (SELECT dionysus_internal.store_model_key() AS key),
    mems AS (
        SELECT CASE WHEN f.memory_id IS NOT NULL THEN 'fact' ELSE 'memory' END AS kind, r.memory_id AS id, r.content, r.score,
               jsonb_build_object('type', r.type, 'found_by', r.found_by, 'created_at', r.created_at, 'subject', f.subject) AS detail
          FROM dionysus.recall(query, k, person => recall_all.person) r
          LEFT JOIN dionysus.facts f ON f.memory_id = r.memory_id),
    procs AS (
        SELECT 'procedure'::text, p.id, p.name || coalesce(': ' || array_to_string(p.goals, '; '), ''),
               w * (1 - (e.v <=> q)), dionysus_internal.procedure_json(p)
          FROM dionysus.procedures p CROSS JOIN model
         CROSS JOIN LATERAL (SELECT CASE WHEN p.model_key = model.key THEN p.embedding
                                         ELSE dionysus.embed(dionysus_internal.procedure_text(p.name, p.domain, p.goals, p.core_patterns, p.core_concepts))
                                    END AS v) e
         WHERE p.status = 'active' AND (p.person IS NULL OR p.person = recall_all.person)
         ORDER BY e.v <=> q, p.id LIMIT k),
    cens AS (
        SELECT 'censor'::text, c.id, c.trigger, w * (1 - (e.v <=> q)),
               jsonb_build_object('severity', c.severity, 'reason', c.reason, 'personal', c.person IS NOT NULL)
          FROM dionysus.censors c CROSS JOIN model
         CROSS JOIN LATERAL (SELECT CASE WHEN c.model_key = model.key THEN c.embedding ELSE dionysus.embed(c.trigger) END AS v) e
         WHERE c.status = 'active' AND NOT c.any_content AND (c.person IS NULL OR c.person = recall_all.person)
         ORDER BY e.v <=> q, c.id LIMIT k),
    eps AS (
        SELECT 'episode'::text, x.id, x.summary, w * (1 - (x.summary_embedding <=> q)),
               jsonb_build_object('started_at', x.started_at, 'ended_at', x.ended_at, 'outcome', x.outcome, 'lessons', to_jsonb(x.lessons))
          FROM dionysus.episodes x
         WHERE recall_all.person IS NOT NULL AND x.summary_embedding IS NOT NULL
           AND x.participants = ARRAY[recall_all.person]
         ORDER BY x.summary_embedding <=> q, x.id LIMIT k)
    SELECT u.kind, u.id, u.content, u.score, u.detail
      FROM (SELECT * FROM mems UNION ALL SELECT * FROM procs UNION ALL SELECT * FROM cens UNION ALL SELECT * FROM eps) u
     ORDER BY u.score DESC, u.kind, u.id
     LIMIT k;
END $$;
-- CREATE OR REPLACE drops the function's settings: pgvector's schema back on its search_path,
-- as a fresh install's 900_api.sql sets it.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION dionysus.recall_all(text, integer, text) SET search_path = pg_catalog, dionysus, %I',
                   (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'));
END $$;

-- H3b: the driver reads functions, not tables (#34 typed contract): the open contact opportunities, a person's local
-- time, the words a contact sent, the open goals, the self-model, a person's own latest turns, memories with their
-- shorter levels. Each runs with its caller's rights (the driver's role reads these tables today).
-- The crossings still waiting for the thinking layer's decision, oldest first (the driver
-- decides them; a wake-up may stand for several, or for none).
CREATE FUNCTION open_contact_opportunities(max_items integer DEFAULT 5) RETURNS SETOF uuid
    LANGUAGE sql STABLE AS $$
    SELECT c.id FROM dionysus.contact_evaluations c
     WHERE c.outcome = 'opportunity' AND c.decision IS NULL ORDER BY c.at LIMIT greatest(max_items, 0)
$$;
COMMENT ON FUNCTION open_contact_opportunities(integer) IS 'The ids of the contact opportunities not yet decided, oldest first, at most max_items: what decide_contact waits for.';
-- The person's local time, as a rule from their words reads it ("Sunday 2026-11-29 09:30"):
-- their time zone's (UTC while none is known).
CREATE FUNCTION person_local_time(person text) RETURNS text
    LANGUAGE sql STABLE AS $$
    SELECT to_char(dionysus.clock_now() AT TIME ZONE coalesce((SELECT p.time_zone FROM dionysus.people p WHERE p.person = person_local_time.person), 'UTC'),
                   'FMDay YYYY-MM-DD HH24:MI')
$$;
COMMENT ON FUNCTION person_local_time(text) IS 'The person''s local time now (the clock, in their time zone; UTC while none is known) as "Day YYYY-MM-DD HH24:MI".';
-- The words of the contact an evaluation sent (NULL when it sent none): what the person's
-- reply answers, for the fast model's reading of it.
CREATE FUNCTION contact_message(evaluation_id uuid) RETURNS text
    LANGUAGE sql STABLE AS $$
    SELECT o.content FROM dionysus.contact_evaluations c JOIN dionysus.outbox o ON o.id = c.outbox_id WHERE c.id = evaluation_id
$$;
COMMENT ON FUNCTION contact_message(uuid) IS 'The message a contact evaluation sent (its outbox row''s content), NULL when it sent none.';
-- The goals still open (active, queued, backburner), for brainstorm_goals: what the model
-- should not propose again.
CREATE FUNCTION open_goals() RETURNS TABLE (goal_id uuid, title text, priority text)
    LANGUAGE sql STABLE AS $$
    SELECT g.id, g.title, g.priority::text FROM dionysus.goals g WHERE g.priority IN ('active', 'queued', 'backburner')
$$;
COMMENT ON FUNCTION open_goals() IS 'The goals still open (active, queued or backburner): goal_id, title, priority.';
-- Who the agent is and what it believes, as a reflection shows them: each aspect or belief
-- with its confidence ("curious (0.80)").
CREATE FUNCTION self_model() RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'identity', (SELECT coalesce(jsonb_agg(aspect || ' (' || round(confidence::numeric, 2) || ')'), '[]') FROM dionysus.identity_aspects),
        'worldview', (SELECT coalesce(jsonb_agg(belief || ' (' || round(confidence::numeric, 2) || ')'), '[]') FROM dionysus.worldview_beliefs))
$$;
COMMENT ON FUNCTION self_model() IS 'The agent''s identity aspects and worldview beliefs, each with its confidence: {identity: ["aspect (0.80)"], worldview: ["belief (0.60)"]}.';
-- A person's own latest turns, oldest first: a message written to them sees only theirs.
CREATE FUNCTION person_turns(person text, max_turns integer DEFAULT 8) RETURNS TABLE (role text, content text)
    LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN m.is_bot THEN 'assistant' ELSE 'user' END, m.content
      FROM (SELECT x.is_bot, x.content, x.created_at FROM dionysus.messages x WHERE x.person = person_turns.person
             ORDER BY x.created_at DESC LIMIT max_turns) m
     ORDER BY m.created_at
$$;
COMMENT ON FUNCTION person_turns(text, integer) IS 'The person''s own latest turns (at most max_turns), oldest first: role (user or assistant) and content.';
-- Memories with their shorter levels, in the order of the ids given (a task then shows each
-- at the richest level its token budget fits); ids of memories gone are left out.
CREATE FUNCTION memory_levels(ids uuid[]) RETURNS TABLE (id uuid, content text, source text, summary text, micro text)
    LANGUAGE sql STABLE AS $$
    SELECT m.id, m.content, m.source, m.summary, m.micro
      FROM unnest(ids) WITH ORDINALITY i(id, n) JOIN dionysus.memories m ON m.id = i.id ORDER BY i.n
$$;
COMMENT ON FUNCTION memory_levels(uuid[]) IS 'The memories of ids, in that order, with their shorter levels: id, content, source, summary, micro.';
GRANT EXECUTE ON FUNCTION open_contact_opportunities(integer), person_local_time(text), contact_message(uuid), open_goals(), self_model(),
    person_turns(text, integer), memory_levels(uuid[]) TO dionysus_driver;

-- #35 grounding + #34 action table (helper B): what complete_work decides by an item's action is the
-- work_actions view's data; prompt templates carry their answer's JSON Schema (result_schema); one grounding
-- check (check_model_text, model_text_refusals) for every model-written thing complete_work stores.
CREATE VIEW work_actions AS
SELECT a.action,
       ARRAY['memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts', 'message', 'summary',
             'basis', 'person', 'maintenance', 'levels', 'episode', 'censor_candidates'] || a.carries AS result_keys,
       a.provenance, a.audience, a.person_turn, a.staged
  FROM (VALUES
    -- action             its own result keys                                                 provenance   audience  person_turn staged
    ('extract_message',   ARRAY['people', 'relations', 'objectives', 'focus', 'threads'],     'heartbeat', NULL,     true,       false),
    ('reindex_message',   ARRAY['people', 'relations', 'objectives', 'focus', 'threads'],     'heartbeat', NULL,     false,      true),
    ('summarize_episode', ARRAY['episode_summary'],                                           'heartbeat', NULL,     false,      false),
    ('condense_memory',   ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('heartbeat_censors', ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('extract_concepts',  ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('reflect',           ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('maintain',          ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('brainstorm_goals',  ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('inquire_shallow',   ARRAY[]::text[],                                                    'web',       NULL,     false,      false),
    ('inquire_deep',      ARRAY[]::text[],                                                    'web',       NULL,     false,      false),
    ('synthesize',        ARRAY[]::text[],                                                    'heartbeat', NULL,     false,      false),
    ('reach_out_user',    ARRAY[]::text[],                                                    'heartbeat', 'user',   false,      false),
    ('reach_out_public',  ARRAY[]::text[],                                                    'heartbeat', 'public', false,      false),
    ('dream',             ARRAY['dream'],                                                     'heartbeat', NULL,     false,      false)
  ) AS a (action, carries, provenance, audience, person_turn, staged);
COMMENT ON VIEW work_actions IS
    'What complete_work does by a work item''s action: the result keys it may carry (the common ones and its own), its provenance '
    '(web: what it brings is stored as low-trust web content, and never alone changes identity or beliefs), its audience (user or '
    'public: a reach-out, its message goes to the outbox; public ones wait for approval), person_turn (the extraction of a person''s '
    'turn: their people, objectives, focus and threads, and an imported history''s rules) and staged (a re-index''s: applied at the swap).';
GRANT SELECT, INSERT, UPDATE ON work_actions TO dionysus_driver;
ALTER TABLE prompt_templates ADD COLUMN result_schema jsonb CHECK (result_schema IS NULL OR jsonb_typeof(result_schema) = 'object');
COMMENT ON COLUMN prompt_templates.result_schema IS
    'The JSON Schema of the task''s answer (the driver sends it as the request''s response_format where the endpoint takes one); NULL for a free-text task.';
CREATE FUNCTION dionysus_internal.task_result_schema(key text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH t (s, n, a) AS (SELECT '{"type": "string"}'::jsonb, '{"type": "number"}'::jsonb, '{"type": "array", "items": {"type": "string"}}'::jsonb)
    SELECT jsonb_build_object('type', 'object', 'properties', p, 'required', to_jsonb(r)) FROM t, LATERAL (
        SELECT * FROM (VALUES
        ('extract_message', jsonb_build_object(
            'facts', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["content"]'::jsonb,
                'properties', jsonb_build_object('content', s, 'subject', s, 'confidence', n, 'category',
                    '{"enum": ["preference", "person", "event", "plan", "attribute", "other"]}'::jsonb))),
            'triples', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["subject", "predicate", "object"]'::jsonb,
                'properties', jsonb_build_object('subject', s, 'predicate', s, 'object', s, 'confidence', n))),
            'goals', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["title"]'::jsonb,
                'properties', jsonb_build_object('title', s, 'description', s))),
            'objectives', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["description"]'::jsonb,
                'properties', jsonb_build_object('description', s, 'saliency', n, 'status', '{"enum": ["pending", "completed"]}'::jsonb))),
            'people', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["name"]'::jsonb,
                'properties', jsonb_build_object('name', s, 'aliases', a, 'same_as', '{"type": ["string", "null"]}'::jsonb, 'relation', s,
                                                 'feeling', n, 'traits', a, 'topics', a, 'confidence', n))),
            'relations', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["a", "b", "kind"]'::jsonb,
                'properties', jsonb_build_object('a', s, 'b', s, 'kind', s, 'sentiment', n, 'confidence', n,
                                                 'source', '{"enum": ["said", "inferred"]}'::jsonb))),
            'focus', s,
            'threads', jsonb_build_object('type', 'object', 'properties', jsonb_build_object('opened', a, 'closed', a))),
         ARRAY['facts', 'triples', 'goals']),
        ('heartbeat_system', jsonb_build_object('reasoning', s,
            'actions', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["action"]'::jsonb,
                'properties', jsonb_build_object('action', s, 'params', '{"type": "object"}'::jsonb))),
            'goal_changes', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["goal_id", "change"]'::jsonb,
                'properties', jsonb_build_object('goal_id', s, 'reason', s,
                                                 'change', '{"enum": ["promote", "demote", "complete", "abandon", "activate"]}'::jsonb)))),
         ARRAY['reasoning', 'actions']),
        ('narrative', jsonb_build_object('narrative', s, 'emotional_valence', '{"type": "number", "minimum": -1, "maximum": 1}'::jsonb), ARRAY['narrative']),
        ('reflect', jsonb_build_object('insights', a,
            'identity', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["aspect"]'::jsonb,
                'properties', jsonb_build_object('aspect', s, 'confidence', n))),
            'worldview', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object', 'required', '["belief"]'::jsonb,
                'properties', jsonb_build_object('belief', s, 'confidence', n)))),
         ARRAY['insights', 'identity', 'worldview']),
        ('brainstorm_goals', jsonb_build_object('goals', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object',
            'required', '["title"]'::jsonb, 'properties', jsonb_build_object('title', s, 'description', s)))), ARRAY['goals']),
        ('inquire', jsonb_build_object('answer', s, 'sources', a), ARRAY['answer']),
        ('inquiry_queries', jsonb_build_object('queries', a), ARRAY['queries']),
        ('inquiry_confidence', jsonb_build_object('confidence', '{"type": "number", "minimum": 0, "maximum": 1}'::jsonb, 'caveats', s), ARRAY['confidence']),
        ('synthesize', jsonb_build_object('title', s, 'artifact', s), ARRAY['artifact']),
        ('reach_out', jsonb_build_object('message', s), ARRAY['message']),
        ('proactive_compose', jsonb_build_object('message', s), ARRAY['message']),
        ('proactive_decision', jsonb_build_object('decision', '{"enum": ["message", "wait"]}'::jsonb, 'reason', s, 'intent', s), ARRAY['decision']),
        ('maintain', jsonb_build_object('verdict', '{"enum": ["keep", "update", "retire"]}'::jsonb,
            'confidence', '{"type": "number", "minimum": 0, "maximum": 1}'::jsonb, 'content', s, 'reason', s), ARRAY['verdict']),
        ('dream', jsonb_build_object('note', s, 'proposals', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object',
            'required', '["kind", "target", "proposal", "rationale"]'::jsonb,
            'properties', jsonb_build_object('kind', '{"enum": ["prompt_template", "extraction", "archetype"]}'::jsonb, 'target', s,
                                             'proposal', '{"type": "object"}'::jsonb, 'rationale', s, 'evidence', a)))),
         ARRAY['proposals']),
        ('extract_concepts', jsonb_build_object('memories', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object',
            'required', '["id", "concepts"]'::jsonb, 'properties', jsonb_build_object('id', s, 'concepts', a)))), ARRAY['memories']),
        ('summarize_episode', jsonb_build_object('summary', s, 'outcome', '{"enum": ["success", "failure", "mixed", "neutral"]}'::jsonb,
            'surprise', '{"type": "number", "minimum": 0, "maximum": 1}'::jsonb, 'lessons', a,
            'censor_candidates', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object',
                'required', '["trigger", "reason"]'::jsonb, 'properties', jsonb_build_object('trigger', s, 'reason', s)))),
         ARRAY['summary']),
        ('condense_memory', jsonb_build_object('summary', s, 'micro', s), ARRAY['summary', 'micro']),
        ('heartbeat_censors', jsonb_build_object('censor_candidates', jsonb_build_object('type', 'array', 'items', jsonb_build_object('type', 'object',
            'required', '["trigger", "reason"]'::jsonb, 'properties', jsonb_build_object('trigger', s, 'reason', s)))), ARRAY['censor_candidates']),
        ('censor_from_words', jsonb_build_object('censor', '{"type": ["object", "null"]}'::jsonb, 'acknowledgement', s), ARRAY['censor']),
        ('rule_from_words', jsonb_build_object('rule', '{"type": ["object", "null"]}'::jsonb, 'confirmation', s), ARRAY['rule']),
        ('contact_feedback', jsonb_build_object('sentiment', '{"enum": ["positive", "neutral", "negative"]}'::jsonb, 'reason', s), ARRAY['sentiment']),
        ('north_star_check', jsonb_build_object('north_star', '{"type": "boolean"}'::jsonb, 'statement', s), ARRAY['north_star'])
        ) AS v (k, p, r) WHERE v.k = task_result_schema.key) x
$$;
COMMENT ON FUNCTION dionysus_internal.task_result_schema(text) IS
    'The JSON Schema of a shipped JSON task''s answer (extract_message, heartbeat_system''s decision, narrative, reflect, dream, ...), NULL for a free-text task: prompt_templates.result_schema of every version of that key.';
CREATE OR REPLACE FUNCTION prompt_template(key text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE t dionysus.prompt_templates;
BEGIN
    IF key IS NULL OR btrim(key) = '' THEN
        RAISE EXCEPTION 'dionysus: argument "key" must name a template' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO t FROM dionysus.prompt_templates p WHERE p.key = prompt_template.key AND p.active;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "key": no active prompt template "%"', key USING ERRCODE = 'no_data_found';
    END IF;
    RETURN jsonb_build_object('key', t.key, 'version', t.version, 'template', t.template, 'temperature', t.temperature,
                              'result_schema', t.result_schema);
END $$;
COMMENT ON FUNCTION prompt_template(text) IS 'The active version of a prompt template: {key, version, template, temperature, result_schema} (result_schema: the JSON Schema of the answer, null for free text).';
CREATE OR REPLACE FUNCTION set_prompt_template(key text, template text, temperature double precision DEFAULT NULL,
                                    note text DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    prev dionysus.prompt_templates;
    v integer;
BEGIN
    IF key IS NULL OR key !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "key": % must be lower_snake_case', quote_nullable(key)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF template IS NULL OR btrim(template) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "template": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF temperature IS NOT NULL AND (temperature = 'NaN'::float8 OR temperature < 0 OR temperature > 2) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "temperature": % is outside [0, 2]', temperature
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.prompt:' || key, 0));
    SELECT * INTO prev FROM dionysus.prompt_templates p WHERE p.key = set_prompt_template.key AND p.active;
    SELECT coalesce(max(version), 0) + 1 INTO v FROM dionysus.prompt_templates p WHERE p.key = set_prompt_template.key;
    UPDATE dionysus.prompt_templates p SET active = false WHERE p.key = set_prompt_template.key AND p.active;
    INSERT INTO dionysus.prompt_templates (key, version, template, temperature, note, result_schema)
    VALUES (key, v, template, coalesce(temperature, prev.temperature, 0.7), note,
            coalesce(prev.result_schema, dionysus_internal.task_result_schema(key)));
    RETURN v;
END $$;
COMMENT ON FUNCTION set_prompt_template(text, text, double precision, text) IS
    'Adds a new active version of a prompt template (the previous stays, inactive; the answer''s schema carries over); returns the version number.';
CREATE OR REPLACE FUNCTION dionysus_internal.ship_template(key text, follows_note text, note text, temperature double precision,
                                               template text) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    shipped boolean;
    next_version integer;
BEGIN
    SELECT coalesce(bool_and(NOT t.active OR (t.created_by = 'human' AND t.note = ship_template.follows_note)), true),
           coalesce(max(t.version), 0) + 1
      INTO shipped, next_version FROM dionysus.prompt_templates t WHERE t.key = ship_template.key;
    IF shipped THEN
        UPDATE dionysus.prompt_templates t SET active = false WHERE t.key = ship_template.key;
    ELSE
        RAISE NOTICE 'dionysus: your % template stays active; version % is new (activate_prompt_template to use it)', key, next_version;
    END IF;
    INSERT INTO dionysus.prompt_templates (key, version, temperature, note, active, template, result_schema)
    VALUES (key, next_version, temperature, note, shipped, template, dionysus_internal.task_result_schema(key));
    RETURN next_version;
END $$;
COMMENT ON FUNCTION dionysus_internal.ship_template(text, text, text, double precision, text) IS
    'Ships a new version of a prompt template: active where the shipped version it follows (by note) is active; beside the person''s own otherwise (a NOTICE names it). Returns the version.';
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
-- The shipped rows recorded before the new column are still the shipped ones.
UPDATE dionysus_internal.shipped_rows s SET row_hash = md5(to_jsonb(t)::text)
  FROM dionysus.prompt_templates t
 WHERE s.tbl = 'dionysus.prompt_templates'::regclass AND s.row_hash = md5((to_jsonb(t) - 'result_schema')::text);
SELECT pg_catalog.pg_extension_config_dump('dionysus.model_text_refusals', '');
GRANT SELECT, INSERT, UPDATE ON model_text_refusals TO dionysus_driver;
GRANT EXECUTE ON FUNCTION dionysus_internal.task_result_schema(text), dionysus_internal.content_words(text),
    dionysus_internal.model_text_problem(text, text, text), check_model_text(text, text, text, uuid, text[]),
    dionysus_internal.ground_result(dionysus.work_queue, jsonb, text[]) TO dionysus_driver;
CREATE OR REPLACE FUNCTION complete_work(work_id uuid, result jsonb DEFAULT '{}', lease uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    w dionysus.work_queue;
    item jsonb;
    made jsonb := jsonb_build_object('memories', '[]'::jsonb, 'facts', '[]'::jsonb, 'goals', '[]'::jsonb);
    new_id uuid;
    msg_id uuid;
    key text;
    privacy text[];
    from_web boolean;
    target jsonb;
    refused jsonb := '[]'::jsonb;
    history_at timestamptz;
    censored jsonb;
    act dionysus.work_actions;
    carriers text[];
    grounded jsonb;
BEGIN
    -- Lock order: goals before the rows and the learn/episode locks remember and learn take.
    IF result ? 'goals' OR result ? 'goal_progress' THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    END IF;
    w := dionysus_internal.require_claimed_work(work_id, lease);
    IF w.status = 'done' THEN
        RETURN w.result -> 'applied';
    END IF;
    IF w.status <> 'claimed' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "work_id": work item % is %, not claimed', work_id, w.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    result := coalesce(result, '{}'::jsonb);
    IF jsonb_typeof(result) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: argument "result": must be a JSON object' USING ERRCODE = 'invalid_text_representation';
    END IF;
    FOR key IN SELECT jsonb_object_keys(result) LOOP
        IF NOT EXISTS (SELECT 1 FROM dionysus.work_actions a WHERE key = ANY(a.result_keys)) THEN
            RAISE EXCEPTION 'dionysus: argument "result": unknown key "%"', key USING ERRCODE = 'invalid_text_representation';
        END IF;
        IF key IN ('memories', 'facts', 'triples', 'goals', 'goal_progress', 'identity', 'worldview', 'concepts', 'basis', 'objectives',
                   'people', 'relations')
           AND jsonb_typeof(result -> key) <> 'array' THEN
            RAISE EXCEPTION 'dionysus: argument "result.%": must be an array', key USING ERRCODE = 'invalid_text_representation';
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b
                WHERE jsonb_typeof(b) <> 'string'
                   OR (b #>> '{}') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN
        RAISE EXCEPTION 'dionysus: argument "result.basis": must be an array of memory ids' USING ERRCODE = 'invalid_text_representation';
    END IF;
    -- What this action does (work_actions); an action it does not name carries the common keys only.
    SELECT * INTO act FROM dionysus.work_actions a WHERE a.action = w.action;
    IF NOT FOUND THEN
        act := ROW(w.action, (SELECT a.result_keys FROM dionysus.work_actions a WHERE a.action = 'reflect'), 'heartbeat', NULL, false, false);
    END IF;
    -- A turn read again by a re-index (020): staged for the swap, nothing applied now.
    IF act.staged THEN
        made := dionysus_internal.reindex_stage(w, result);
        UPDATE dionysus.work_queue SET status = 'done', completed_at = now(), lease_until = NULL,
               result = complete_work.result || jsonb_build_object('applied', made)
         WHERE id = w.id;
        RETURN made;
    END IF;
    -- A key another action carries (present and not an empty list) is refused, naming who carries it.
    FOR key IN SELECT k FROM jsonb_object_keys(result) k
                WHERE k <> ALL(act.result_keys) AND result -> k IS DISTINCT FROM '[]'::jsonb LOOP
        carriers := ARRAY(SELECT a.action FROM dionysus.work_actions a WHERE key = ANY(a.result_keys) ORDER BY a.action);
        RAISE EXCEPTION 'dionysus: argument "result.%": a % item does not carry it; only % carry %', key, w.action,
            array_to_string(carriers, ', '),
            (SELECT string_agg('result.' || k, ', ' ORDER BY k) FROM (SELECT DISTINCT unnest(a.result_keys) k FROM dionysus.work_actions a) ks
              WHERE ARRAY(SELECT a.action FROM dionysus.work_actions a WHERE ks.k = ANY(a.result_keys) ORDER BY a.action) = carriers)
            USING ERRCODE = 'invalid_parameter_value';
    END LOOP;
    IF act.person_turn AND w.params ->> 'person' IS NULL
       AND EXISTS (SELECT 1 FROM jsonb_object_keys(result) k WHERE k IN ('people', 'relations', 'objectives', 'focus', 'threads')
                                                              AND result -> k IS DISTINCT FROM '[]'::jsonb) THEN
        RAISE EXCEPTION 'dionysus: argument "result.people": only the extraction of a person''s turn carries result.people, result.relations, result.objectives, result.focus and result.threads (params.person is missing)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    privacy := CASE WHEN w.params ->> 'person' IS NOT NULL THEN ARRAY[w.params ->> 'person'] END;
    privacy := dionysus_internal.privacy_union(privacy, (SELECT h.private_to FROM dionysus.heartbeat_log h WHERE h.id = w.heartbeat_id));
    privacy := dionysus_internal.privacy_union(privacy, dionysus_internal.memory_privacy(
                   ARRAY(SELECT (b #>> '{}')::uuid FROM jsonb_array_elements(coalesce(result -> 'basis', '[]')) b)));
    from_web := act.provenance = 'web';
    -- What the model wrote and the check refuses is not stored (032_grounding.sql); the refusals are recorded.
    grounded := dionysus_internal.ground_result(w, result, privacy);
    result := grounded -> 'result';
    refused := refused || (grounded -> 'refused');
    -- A turn of an imported history (018): what it asked was asked of someone else, not of us (no
    -- goals), and what it aimed at more than 30 days ago is the person's past: it neither adds
    -- objectives nor moves the ones they have now.
    IF act.person_turn THEN
        SELECT x.created_at INTO history_at FROM dionysus.messages x
         WHERE x.id = (w.params ->> 'message_id')::uuid AND x.import_id IS NOT NULL;
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'memories', '[]')) LOOP
        new_id := dionysus.remember(item ->> 'content', coalesce(item ->> 'type', 'semantic'),
                                    CASE WHEN from_web THEN least(coalesce((item ->> 'importance')::float8, 0.3), 0.3)
                                         ELSE coalesce((item ->> 'importance')::float8, 0.5) END,
                                    coalesce((item ->> 'valence')::float8, 0),
                                    jsonb_build_object('work_id', w.id, 'action', w.action, 'heartbeat_id', w.heartbeat_id,
                                                       'provenance', CASE WHEN from_web THEN 'web' ELSE 'heartbeat' END),
                                    CASE WHEN from_web THEN 'web' ELSE 'heartbeat' END,
                                    confidence => CASE WHEN from_web THEN least(coalesce((item ->> 'confidence')::float8, 0.5), 0.5)
                                                       ELSE coalesce((item ->> 'confidence')::float8, 1.0) END,
                                    private_to => privacy);
        made := jsonb_set(made, '{memories}', (made -> 'memories') || to_jsonb(new_id));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'facts', '[]')) LOOP
        new_id := dionysus.learn(item ->> 'content', item ->> 'subject', item ->> 'category',
                                 CASE WHEN from_web THEN least(coalesce((item ->> 'confidence')::float8, 0.5), 0.5)
                                      ELSE coalesce((item ->> 'confidence')::float8, 0.8) END,
                                 CASE WHEN from_web THEN 'web' ELSE coalesce(w.params ->> 'source', 'heartbeat:' || w.action) END,
                                 private_to => privacy);
        made := jsonb_set(made, '{facts}', (made -> 'facts') || to_jsonb(new_id));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'triples', '[]')) LOOP
        new_id := dionysus.add_triple(item ->> 'subject', item ->> 'predicate', item ->> 'object',
                                      coalesce((item ->> 'confidence')::float8, 0.8),
                                      CASE WHEN from_web THEN 'web' ELSE coalesce(w.params ->> 'source', 'heartbeat:' || w.action) END,
                                      (w.params ->> 'memory_id')::uuid, private_to => privacy);
        made := made || jsonb_build_object('triples', coalesce(made -> 'triples', '[]'::jsonb) || to_jsonb(new_id));
    END LOOP;
    -- The people in the person's life their turn speaks of (023_people.sql): theirs alone.
    IF jsonb_array_length(coalesce(result -> 'people', '[]')) + jsonb_array_length(coalesce(result -> 'relations', '[]')) > 0 THEN
        made := made || dionysus_internal.store_people(w.params ->> 'person', coalesce(result -> 'people', '[]'),
                                                       coalesce(result -> 'relations', '[]'), (w.params ->> 'message_id')::uuid);
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'concepts', '[]')) LOOP
        PERFORM dionysus.link_concept(coalesce((item ->> 'memory_id')::uuid, (w.params ->> 'memory_id')::uuid),
                                      item ->> 'name', coalesce((item ->> 'strength')::float8, 1.0));
        made := made || jsonb_build_object('concepts', coalesce((made ->> 'concepts')::int, 0) + 1);
    END LOOP;
    IF result ? 'episode_summary' THEN
        IF (w.params ->> 'episode_id') IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.episode_summary": the item names no episode (params.episode_id)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(btrim(result ->> 'episode_summary'), '') = '' THEN
            RAISE EXCEPTION 'dionysus: argument "result.episode_summary": must not be empty' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        UPDATE dionysus.episodes SET summary = result ->> 'episode_summary',
               summary_embedding = dionysus.embed(result ->> 'episode_summary'),
               participants = dionysus_internal.episode_participants(id)
         WHERE id = (w.params ->> 'episode_id')::uuid;
        made := made || jsonb_build_object('episode_id', w.params ->> 'episode_id');
    END IF;
    -- How it went, what it taught, and the censors a failure proposes (024_episodes.sql).
    IF result ? 'episode' THEN
        made := made || jsonb_build_object('episode', dionysus_internal.store_episode_outcome(w, result -> 'episode'));
    END IF;
    -- A fading memory's summary and micro line (021_decay.sql).
    IF result ? 'levels' THEN
        made := made || jsonb_build_object('levels', dionysus_internal.store_levels(w, result -> 'levels'));
    END IF;
    -- What a heartbeat the person found unwelcome proposes not to do again (028_heartbeat_lessons.sql).
    IF result ? 'censor_candidates' THEN
        made := made || jsonb_build_object('censors_proposed', dionysus_internal.propose_heartbeat_censors(w, result -> 'censor_candidates'));
    END IF;
    IF history_at IS NOT NULL AND jsonb_array_length(coalesce(result -> 'goals', '[]')) > 0 THEN
        refused := refused || jsonb_build_object('goals', jsonb_array_length(result -> 'goals'), 'reason', 'asked in an imported history');
        result := result - 'goals';
    END IF;
    IF history_at < now() - interval '30 days' AND jsonb_array_length(coalesce(result -> 'objectives', '[]')) > 0 THEN
        refused := refused || jsonb_build_object('objectives', jsonb_array_length(result -> 'objectives'), 'reason', 'the past of an imported history');
        result := result - 'objectives';
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'goals', '[]')) LOOP
        new_id := dionysus.create_goal(item ->> 'title', item ->> 'description', coalesce(item ->> 'source', 'curiosity'),
                                       item ->> 'priority', (item ->> 'parent_goal_id')::uuid, private_to => privacy);
        made := jsonb_set(made, '{goals}', (made -> 'goals') || to_jsonb(new_id));
    END LOOP;
    -- The person's objectives (017), from their own turn only: theirs, never someone else's.
    IF jsonb_array_length(coalesce(result -> 'objectives', '[]')) > 0 THEN
        FOR item IN SELECT * FROM jsonb_array_elements(result -> 'objectives') LOOP
            new_id := dionysus_internal.note_objective(w.params ->> 'person', item ->> 'description',
                                                       (item ->> 'saliency')::float8, item ->> 'status', (w.params ->> 'message_id')::uuid);
            IF new_id IS NOT NULL THEN
                made := made || jsonb_build_object('objectives', coalesce(made -> 'objectives', '[]'::jsonb) || to_jsonb(new_id));
            END IF;
        END LOOP;
    END IF;
    IF result ? 'dream' THEN
        IF (w.params ->> 'dream_id') IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "result.dream": the item names no dream (params.dream_id)' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        made := made || jsonb_build_object('dream', dionysus_internal.record_dream((w.params ->> 'dream_id')::uuid, result -> 'dream'));
    END IF;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'goal_progress', '[]')) LOOP
        PERFORM dionysus.add_goal_progress((item ->> 'goal_id')::uuid, item ->> 'note');
    END LOOP;
    IF result ? 'maintenance' THEN
        made := made || jsonb_build_object('maintenance', dionysus_internal.apply_maintenance(result -> 'maintenance', w.heartbeat_id, w.id));
    END IF;
    -- Who the agent is and what it believes never changes on the web's word alone.
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'identity', '[]')) LOOP
        IF from_web OR dionysus_internal.web_only_basis(item ->> 'aspect') THEN
            refused := refused || jsonb_build_object('identity', item ->> 'aspect', 'reason', 'rests on web content alone');
            CONTINUE;
        END IF;
        PERFORM dionysus.set_identity_aspect(item ->> 'aspect', coalesce((item ->> 'confidence')::float8, 0.5));
    END LOOP;
    FOR item IN SELECT * FROM jsonb_array_elements(coalesce(result -> 'worldview', '[]')) LOOP
        IF from_web OR dionysus_internal.web_only_basis(item ->> 'belief') THEN
            refused := refused || jsonb_build_object('worldview', item ->> 'belief', 'reason', 'rests on web content alone');
            CONTINUE;
        END IF;
        PERFORM dionysus.set_worldview_belief(item ->> 'belief', coalesce((item ->> 'confidence')::float8, 0.5));
    END LOOP;
    IF act.audience IS NOT NULL THEN
        IF coalesce(btrim(result ->> 'message'), '') = '' THEN
            RAISE EXCEPTION 'dionysus: argument "result.message": a reach-out needs the message to send'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF dionysus_internal.web_only_basis(result ->> 'message') THEN
            RAISE EXCEPTION 'dionysus: reach-out refused: web content is its only basis' USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF act.audience = 'user' THEN
            -- Nobody has talked yet: the message goes to the home channel, and may hold nothing private.
            target := dionysus.reach_out_target(coalesce(result ->> 'person', w.params ->> 'person'));
            IF NOT dionysus_internal.visible_to(privacy, target ->> 'person') THEN
                RAISE EXCEPTION 'dionysus: reach-out refused: it drew on what someone other than % said in private', target ->> 'person'
                    USING ERRCODE = 'insufficient_privilege';
            END IF;
        END IF;
        -- Censors (022) read the words before the outbox does: a blocked message is not sent,
        -- and the item is done (its activation stays counted; a retry would only repeat it).
        censored := dionysus.censor_gate('reach_out', result ->> 'message', target ->> 'person', jsonb_build_object('work_id', w.id));
        IF censored ->> 'verdict' = 'block' THEN
            refused := refused || jsonb_build_object('message', 'censored', 'reasons', censored -> 'reasons', 'censors', censored -> 'censors');
            -- What the heartbeat's narrative is told of this work (its summary): nothing was sent.
            -- Not why: a person's own reasons are theirs, and a narrative may be read by others.
            result := result || jsonb_build_object('summary', 'not sent: a censor held it back');
        ELSE
            IF censored ->> 'verdict' = 'warn' THEN
                made := made || jsonb_build_object('censor_warnings', censored -> 'censors');
            END IF;
            INSERT INTO dionysus.outbox (work_id, audience, content, requires_approval, person, platform)
            VALUES (w.id, act.audience, result ->> 'message', act.audience = 'public', target ->> 'person', target ->> 'platform')
            RETURNING id INTO msg_id;
            made := made || jsonb_build_object('outbox_id', msg_id);
            IF act.audience = 'user' THEN
                PERFORM pg_notify('dionysus_outbox', msg_id::text);
            END IF;
        END IF;
    END IF;
    -- The session's focus and the threads the turn opened or closed (025), last: the person's
    -- working-memory lock comes after every other lock (002's order).
    IF result ? 'focus' OR result ? 'threads' THEN
        made := made || jsonb_build_object('working_memory',
                    dionysus_internal.store_working_focus(w.params ->> 'person', (w.params ->> 'message_id')::uuid,
                                                          result -> 'focus', result -> 'threads'));
    END IF;
    made := made || jsonb_build_object('private_to', to_jsonb(privacy));
    IF jsonb_array_length(refused) > 0 THEN
        made := made || jsonb_build_object('refused', refused);
    END IF;
    UPDATE dionysus.work_queue SET status = 'done', completed_at = now(), lease_until = NULL,
           result = coalesce(complete_work.result, '{}') || jsonb_build_object('applied', made)
     WHERE id = w.id;
    RETURN made;
END $$;
COMMENT ON FUNCTION complete_work(uuid, jsonb, uuid) IS
    'Applies a claimed work item''s result (memories, facts, triples, goals, goal_progress, identity, worldview, concepts, '
    'episode_summary, message, summary; basis: the memory ids the model was shown; person: whom a reach-out is for; objectives: the person''s, '
    'from their turn''s extraction; people and relations: the people in their life the turn speaks of; focus and threads: their session''s focus and the threads the turn opened or closed; dream: a dream''s proposals, stored pending) and marks it done, '
    'in one transaction. What it writes is as private as the item''s person, its heartbeat''s context and the basis; what an inquiry '
    'brought is stored as web content; a reach-out that drew on someone else''s private words, or only on the web, is refused (42501). '
    'Completing again returns the first summary and repeats nothing. With lease (the claim''s lease_token), only its holder may: '
    'a driver whose lease lapsed and whose item was claimed again gets 55000.';
-- The newest versions of five prompts show the answer's shape in <placeholders> (#35).
SELECT dionysus_internal.ship_template('extract_message',
    'fast model: facts, triples, goals, objectives, people, and the session''s focus and open threads (seed 002 working memory)',
    'fast model: the same, its shape in placeholders no answer can pass as data (#35)', 0.1, dionysus_internal.shipped_prompt('extract_message', 5));
SELECT dionysus_internal.ship_template('reflect', 'heartbeat action: reflect',
    'heartbeat action: reflect, its shape in placeholders no answer can pass as data (#35)', 0.6, dionysus_internal.shipped_prompt('reflect', 2));
SELECT dionysus_internal.ship_template('brainstorm_goals', 'heartbeat action: brainstorm_goals',
    'heartbeat action: brainstorm_goals, its shape in placeholders no answer can pass as data (#35)', 0.8, dionysus_internal.shipped_prompt('brainstorm_goals', 2));
SELECT dionysus_internal.ship_template('narrative', 'heartbeat record: the narrative stored as an episodic memory',
    'heartbeat record: the narrative, its shape in placeholders no answer can pass as data (#35)', 0.5, dionysus_internal.shipped_prompt('narrative', 2));
SELECT dionysus_internal.ship_template('summarize_episode',
    'worker job §6.4: episode summary, outcome, surprise, lessons and censor candidates (seed 002)',
    'worker job: episode summary, outcome, surprise, lessons and censor candidates, its shape in placeholders (#35)', 0.3, dionysus_internal.shipped_prompt('summarize_episode', 3));
-- #35/#34 helper B: end

-- #36 lives: a mind that fits any life. Evidence beats the prior (availability reads the
-- rhythm by kind of day, weekday and any day; confidence from days known; a missed contact
-- lowers the belief itself; the prior is data per person: people.prior, set_person_prior);
-- each unanswered contact doubles the cooldown; rules keep their meaning (once, ends_on;
-- status done/ended; person_rules says which); each person's time zone with its source
-- (set_person_time_zone(person, zone, source), from their words in note_person_message);
-- session idleness on the driven clock (session_start, note_user_message).
UPDATE proactive_config SET value = 8, description = 'messages after which the learned rhythm is fully trusted (with rhythm_confident_days: both must be reached)'
 WHERE key = 'rhythm_confident_after' AND value = 25;
UPDATE proactive_config SET description = 'each missed contact at an hour of their week takes this share off the availability believed there, prior included (at most 0.8)'
 WHERE key = 'miss_weight';
INSERT INTO proactive_config (key, value, description) VALUES
    ('rhythm_confident_days', 3, 'days since their first message after which the learned rhythm is fully trusted: a routine shows in days, not in a count of messages');
ALTER TABLE people ADD COLUMN time_zone_source text NOT NULL DEFAULT 'default' CHECK (time_zone_source IN ('default', 'inferred', 'words', 'config')),
    ADD COLUMN prior jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(prior) = 'object');
ALTER TABLE mind_rules DROP CONSTRAINT mind_rules_status_check,
    ADD CONSTRAINT mind_rules_status_check CHECK (status IN ('active', 'forgotten', 'removed', 'done', 'ended')),
    ADD COLUMN once boolean NOT NULL DEFAULT false,
    ADD COLUMN ends_at timestamptz;

COMMENT ON TABLE mind_rules IS 'Rules as data: trigger (event type or tick), a declarative condition over named values, intents (adjust, create_objective, schedule_event, request_contact), weight and use; built-in, the person''s own, or learned (those strengthen with use, decay unused, are forgotten); once (a one-off retires itself when it fires) and ends_at (it stops then).';

CREATE OR REPLACE FUNCTION session_start() RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET session_active = true,
           session_started_at = CASE WHEN session_active THEN session_started_at ELSE now() END,
           last_user_interaction_at = dionysus.clock_now(), updated_at = now() WHERE id = 1;
$$;
COMMENT ON FUNCTION session_start() IS 'The person is talking: heartbeats pause.';

CREATE OR REPLACE FUNCTION note_user_message() RETURNS void LANGUAGE sql AS $$
    UPDATE dionysus.heartbeat_state SET last_user_interaction_at = dionysus.clock_now(), updated_at = now() WHERE id = 1;
$$;
COMMENT ON FUNCTION note_user_message() IS 'The person spoke (ends the reach-out cooldown).';

CREATE OR REPLACE FUNCTION dionysus_internal.proactive_config_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key IN ('debt_relief_on_message', 'debt_relief_on_contact', 'curiosity_per_new_memory',
                   'disturbance_decay', 'miss_weight', 'better_moment_margin', 'min_availability', 'contact_threshold',
                   'signal_threshold', 'vitality_drain_tick', 'vitality_drain_event', 'vitality_drain_model',
                   'vitality_recharge_hour', 'vitality_feedback', 'rule_strengthen', 'rule_decay_per_day', 'rule_forget_below',
                   'learn_timing_rate', 'learn_topic_rate', 'mood_memory', 'prior_free', 'prior_workday', 'prior_quiet')
       AND NEW.value > 1 THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be within [0, 1], not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('acquaintance_turns', 'rhythm_confident_after', 'rhythm_confident_days', 'rhythm_confidence_days', 'base_tick_seconds',
                   'min_tick_seconds', 'max_tick_seconds', 'check_interval_minutes', 'check_backoff_max_minutes', 'ignored_after_hours',
                   'ignores_before_pause', 'better_moment_hours', 'event_queue_limit', 'signal_busy_hours', 'rules_per_person',
                   'solicited_per_day', 'contact_request_hours')
       AND NEW.value <= 0 THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be above 0, not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('quiet_start_hour', 'quiet_end_hour', 'workday_start_hour', 'workday_end_hour') AND (NEW.value > 23 OR NEW.value <> trunc(NEW.value)) THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be a whole hour in [0, 23], not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.proactive_config_check() IS 'Trigger: proactive_config values within their ranges (shares in [0, 1], time constants above 0, whole hours).';

CREATE FUNCTION dionysus_internal.prior_setting(p dionysus.people, setting_key text) RETURNS double precision
    LANGUAGE sql STABLE AS $$
    SELECT coalesce((p.prior ->> setting_key)::float8, dionysus_internal.proactive_setting(setting_key))
$$;
COMMENT ON FUNCTION dionysus_internal.prior_setting(dionysus.people, text) IS 'One setting of the availability prior for a person: theirs (people.prior) or the deployment''s (proactive_config).';

CREATE FUNCTION dionysus_internal.in_quiet_hours(p dionysus.people, local_hour int) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    -- (No FROM: a body of one expression is inlined into its caller, a tenth of the cost.)
    SELECT CASE WHEN dionysus_internal.prior_setting(p, 'quiet_start_hour')::int > dionysus_internal.prior_setting(p, 'quiet_end_hour')::int
                THEN local_hour >= dionysus_internal.prior_setting(p, 'quiet_start_hour')::int OR local_hour < dionysus_internal.prior_setting(p, 'quiet_end_hour')::int
                ELSE local_hour >= dionysus_internal.prior_setting(p, 'quiet_start_hour')::int AND local_hour < dionysus_internal.prior_setting(p, 'quiet_end_hour')::int END
$$;
COMMENT ON FUNCTION dionysus_internal.in_quiet_hours(dionysus.people, integer) IS 'Whether an hour of the person''s day is in their quiet hours (their prior''s, else the deployment''s).';

CREATE OR REPLACE FUNCTION dionysus_internal.availability(who text, at timestamptz)
    RETURNS TABLE (belief double precision, confidence double precision, learned double precision, prior double precision)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    p dionysus.people;
    h smallint;
    hod int;
    weekend boolean;
    local_hour int;
    week_here double precision;
    week_peak double precision;
    day_here double precision;
    day_peak double precision;
    kind_here double precision;
    kind_peak double precision;
    total double precision;
    missed double precision;
    days_known double precision;
    -- Activity by hour of the day (index hour + 1): on any day, on days of this kind.
    any_day double precision[] := array_fill(0::float8, ARRAY[24]);
    this_kind double precision[] := array_fill(0::float8, ARRAY[24]);
    r record;
    near_any double precision;
    near_kind double precision;
BEGIN
    SELECT * INTO p FROM dionysus.people x WHERE x.person = who;
    p.time_zone := coalesce(p.time_zone, 'UTC');
    local_hour := extract(hour FROM at AT TIME ZONE p.time_zone)::int;
    weekend := extract(isodow FROM at AT TIME ZONE p.time_zone) > 5;
    prior := CASE WHEN dionysus_internal.in_quiet_hours(p, local_hour) THEN dionysus_internal.prior_setting(p, 'prior_quiet')
                  WHEN NOT weekend AND local_hour >= dionysus_internal.prior_setting(p, 'workday_start_hour')
                       AND local_hour < dionysus_internal.prior_setting(p, 'workday_end_hour')
                       THEN dionysus_internal.prior_setting(p, 'prior_workday')
                  ELSE dionysus_internal.prior_setting(p, 'prior_free') END;
    h := dionysus_internal.hour_of_week(at, p.time_zone);
    hod := h % 24;
    -- One pass over their (at most 168) hours for this hour of the week and the totals, one
    -- for the profiles by hour of the day; each profile's value here and its peak in a loop.
    SELECT max(x.activity), sum(x.activity),
           coalesce(sum(x.activity * CASE WHEN x.hour_of_week = h THEN 1.0 ELSE 0.5 END)
                    FILTER (WHERE x.hour_of_week IN (h, (h + 167) % 168, (h + 1) % 168)), 0),
           coalesce(sum(x.misses) FILTER (WHERE x.hour_of_week = h), 0)
           + 0.25 * coalesce(sum(x.misses) FILTER (WHERE x.hour_of_week % 24 = hod AND x.hour_of_week <> h), 0)
      INTO week_peak, total, week_here, missed
      FROM dionysus.person_rhythm x WHERE x.person = who;
    FOR r IN SELECT x.hour_of_week % 24 AS hr, x.hour_of_week >= 120 AS on_weekend, sum(x.activity) AS n
               FROM dionysus.person_rhythm x WHERE x.person = who GROUP BY 1, 2 LOOP
        any_day[r.hr + 1] := any_day[r.hr + 1] + r.n;
        IF r.on_weekend = weekend THEN
            this_kind[r.hr + 1] := this_kind[r.hr + 1] + r.n;
        END IF;
    END LOOP;
    day_peak := 0;
    kind_peak := 0;
    FOR i IN 0 .. 23 LOOP
        near_any := any_day[i + 1] + 0.5 * (any_day[(i + 23) % 24 + 1] + any_day[(i + 1) % 24 + 1]);
        near_kind := this_kind[i + 1] + 0.5 * (this_kind[(i + 23) % 24 + 1] + this_kind[(i + 1) % 24 + 1]);
        day_peak := greatest(day_peak, near_any);
        kind_peak := greatest(kind_peak, near_kind);
        IF i = hod THEN
            day_here := near_any;
            kind_here := near_kind;
        END IF;
    END LOOP;
    IF coalesce(kind_peak, 0) = 0 THEN
        kind_peak := day_peak;
        kind_here := day_here;
    END IF;
    learned := 0.6 * CASE WHEN coalesce(kind_peak, 0) > 0 THEN least(1.0, kind_here / kind_peak) ELSE 0 END
             + 0.2 * CASE WHEN coalesce(week_peak, 0) > 0 THEN least(1.0, week_here / week_peak) ELSE 0 END
             + 0.2 * CASE WHEN coalesce(day_peak, 0) > 0 THEN least(1.0, day_here / day_peak) ELSE 0 END;
    days_known := greatest(0, extract(epoch FROM at - coalesce(p.first_message_at, at)) / 86400.0);
    confidence := least(1.0, coalesce(total, 0) / dionysus_internal.proactive_setting('rhythm_confident_after'))
                  * least(1.0, days_known / dionysus_internal.proactive_setting('rhythm_confident_days'))
                  * power(0.5, least(1000, greatest(0, extract(epoch FROM at - coalesce(p.last_message_at, at)) / 86400.0)
                                           / dionysus_internal.proactive_setting('rhythm_confidence_days')));
    belief := (confidence * learned + (1 - confidence) * prior)
              * (1 - least(0.8, dionysus_internal.proactive_setting('miss_weight') * missed));
    RETURN NEXT;
END $$;
COMMENT ON FUNCTION dionysus_internal.availability(text, timestamptz) IS
    'The belief that a person is available at an instant: their learned rhythm (same kind of day, same weekday, any day) blended with their prior by the confidence in it (days known and messages), lowered where contacts were missed.';

CREATE OR REPLACE FUNCTION dionysus_internal.note_person_message(who text, message_id uuid, words text) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    p dionysus.people;
    sig record;
    answered boolean := false;
    ack boolean := dionysus.is_acknowledgement(words);
    contact uuid;
    cue record;
    unsure uuid;
    said_zone text;
    guessed_zone text;
BEGIN
    -- Lock order: agent_state (push_event, feedback) before the person's row.
    PERFORM dionysus.push_event('communication', 'message_received', 1, jsonb_build_object('message_id', message_id), who);
    IF EXISTS (SELECT 1 FROM dionysus.people x WHERE x.person = who AND x.awaiting_reply) THEN
        answered := true;
        UPDATE dionysus.agent_state SET vitality = least(1, vitality + dionysus_internal.proactive_setting('vitality_feedback'))
         WHERE id = 1;
    END IF;
    p := dionysus_internal.person_row(who);
    -- Their words may say where they are ("I'm in Berlin", "it's 3 am here").
    said_zone := dionysus_internal.time_zone_from_words(words, t);
    IF said_zone IS NOT NULL AND said_zone <> p.time_zone AND dionysus.set_person_time_zone(who, said_zone, 'words') THEN
        p := dionysus_internal.person_row(who);
    END IF;
    -- Nothing said or configured: when they write may show where their night is.
    IF p.time_zone_source IN ('default', 'inferred') THEN
        guessed_zone := dionysus_internal.infer_time_zone(p);
        IF guessed_zone IS NOT NULL AND dionysus.set_person_time_zone(who, guessed_zone, 'inferred') THEN
            p := dionysus_internal.person_row(who);
        END IF;
    END IF;
    SELECT * INTO sig FROM dionysus_internal.contact_signal(words, t, p.time_zone);
    -- Their rhythm: this hour of their week gained one message, unless the message says they
    -- are busy (then it is evidence against the hour: a miss); the rest fades a little.
    UPDATE dionysus.person_rhythm r SET activity = r.activity * 0.998, misses = r.misses * 0.998 WHERE r.person = who;
    INSERT INTO dionysus.person_rhythm AS r (person, hour_of_week, activity, misses)
    VALUES (who, dionysus_internal.hour_of_week(t, p.time_zone), CASE WHEN sig.kind = 'busy' THEN 0 ELSE 1 END,
            CASE WHEN sig.kind = 'busy' THEN 1 ELSE 0 END)
    ON CONFLICT (person, hour_of_week) DO UPDATE SET activity = r.activity + EXCLUDED.activity, misses = r.misses + EXCLUDED.misses;
    -- They wrote: a crossing still undecided is moot (the conversation is on).
    UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = 'skipped', decided_at = t, reason = 'they wrote first'
     WHERE c.person = who AND c.outcome = 'opportunity' AND c.decision IS NULL;
    -- Whatever they said before about not being available ends when they write again.
    UPDATE dionysus.person_signals s SET ended_at = t WHERE s.person = who AND s.ended_at IS NULL;
    IF sig.kind IS NOT NULL THEN
        INSERT INTO dionysus.person_signals (person, kind, said_at, until, message_id, words)
        VALUES (who, sig.kind, t, sig.until, message_id, left(words, 200));
    END IF;
    -- A contact answered only after an hour: that hour of their week is a poor one.
    IF answered AND t - p.last_contact_at > interval '1 hour' THEN
        PERFORM dionysus_internal.note_miss(who, p.last_contact_at, 0.5);
    END IF;
    -- How the contact landed, from cheap cues (latency, length, tone); the fast model is asked
    -- only when they disagree (contact_feedback). Learning is logged with its cause (015).
    IF answered THEN
        SELECT c.id INTO contact FROM dionysus.contact_evaluations c
         WHERE c.person = who AND c.decision = 'message' AND c.feedback_at IS NULL ORDER BY c.decided_at DESC, c.recorded_at DESC LIMIT 1;
        SELECT * INTO cue FROM dionysus_internal.reply_signal(words, extract(epoch FROM t - p.last_contact_at), p.reply_seconds);
        IF contact IS NOT NULL AND cue.unsure THEN
            unsure := contact;
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'cues', 'unsure', true, 'latency', round(cue.latency::numeric, 2),
                   'length', cue.length, 'tone', round(cue.tone::numeric, 2), 'signal', round(cue.signal::numeric, 3)) WHERE c.id = contact;
        ELSIF contact IS NOT NULL THEN
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'cues', 'latency', round(cue.latency::numeric, 2),
                   'length', cue.length, 'tone', round(cue.tone::numeric, 2), 'signal', round(cue.signal::numeric, 3)), feedback_at = t
             WHERE c.id = contact;
            PERFORM dionysus_internal.learn_from_contact(who, contact, p.last_contact_at, cue.signal,
                format('they answered after %s (latency %s, length %s, tone %s)', date_trunc('minute', t - p.last_contact_at),
                       round(cue.latency::numeric, 2), cue.length, round(cue.tone::numeric, 2)));
        END IF;
        PERFORM dionysus.push_event('communication', 'contact_answered', 2, jsonb_build_object('message_id', message_id), who);
    END IF;
    UPDATE dionysus.people x SET
        turns = x.turns + 1,
        first_message_at = coalesce(x.first_message_at, t),
        last_message_at = t,
        social_debt = x.social_debt * (1 - dionysus_internal.proactive_setting('debt_relief_on_message')),
        mood = dionysus_internal.proactive_setting('mood_memory') * x.mood
               + (1 - dionysus_internal.proactive_setting('mood_memory')) * dionysus_internal.message_tone(words),
        awaiting_reply = false,
        ignored_in_row = 0,
        reply_seconds = CASE WHEN answered THEN coalesce(0.7 * x.reply_seconds, 0)
                                                + CASE WHEN x.reply_seconds IS NULL THEN 1 ELSE 0.3 END
                                                  * extract(epoch FROM t - x.last_contact_at)
                             ELSE x.reply_seconds END,
        -- A message resets the check-in cadence (check_interval_minutes).
        check_interval_minutes = dionysus_internal.proactive_setting('check_interval_minutes'),
        next_check_at = t + make_interval(mins => dionysus_internal.proactive_setting('check_interval_minutes')::int),
        updated_at = now()
     WHERE x.person = who;
    RETURN jsonb_build_object('acknowledgement', ack, 'answered_contact', answered, 'signal', sig.kind, 'signal_until', sig.until,
                              'feedback_unsure', unsure);
END $$;
COMMENT ON FUNCTION dionysus_internal.note_person_message(text, uuid, text) IS 'A person wrote: rhythm, signals, social debt, an answered contact, the check-in cadence reset.';

CREATE OR REPLACE FUNCTION dionysus_internal.contact_gates(p dionysus.people, t timestamptz, solicited boolean,
                                                deciding uuid DEFAULT NULL, over_threshold boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    gates jsonb := '[]'::jsonb;
    sig dionysus.person_signals;
    av record;
    local_hour int;
    quiet boolean;
    -- Each contact they left unanswered doubles the wait before the next: silence is an answer.
    cooldown interval := make_interval(secs => dionysus_internal.heartbeat_setting('reach_out_cooldown_hours') * 3600
                                              * power(2, least(p.ignored_in_row, 6)));
    since_contact interval := t - p.last_contact_at;
    on_its_way boolean;
    energy double precision;
    cost double precision;
    muted boolean;
    new_cause boolean;
    today bigint;
    later record;
    better boolean;
    margin double precision;
BEGIN
    SELECT * INTO sig FROM dionysus.person_signals s
     WHERE s.person = p.person AND s.ended_at IS NULL AND (s.until IS NULL OR s.until > t) AND (NOT solicited OR s.kind <> 'stop_checkins')
     ORDER BY s.said_at DESC LIMIT 1;
    on_its_way := EXISTS (SELECT 1 FROM dionysus.contact_evaluations c
                           WHERE c.person = p.person AND c.outcome = 'opportunity' AND c.decision IS NULL AND c.id IS DISTINCT FROM deciding)
               OR EXISTS (SELECT 1 FROM dionysus.outbox o WHERE o.person = p.person AND o.contact_id IS NOT NULL AND o.status = 'pending');
    IF solicited THEN
        gates := gates || jsonb_build_object('gate', 'their_word', 'passed', sig.id IS NULL,
            'detail', CASE WHEN sig.id IS NULL THEN 'nothing said against it' ELSE format('they said "%s" (%s)', sig.words, sig.kind) END);
        gates := gates || jsonb_build_object('gate', 'in_flight', 'passed', NOT on_its_way,
            'detail', CASE WHEN NOT on_its_way THEN 'nothing on its way to them' ELSE 'a contact is already being decided or delivered' END);
        SELECT count(*) INTO today FROM dionysus.contact_evaluations c
         WHERE c.person = p.person AND c.solicited AND c.decision = 'message' AND c.decided_at > t - interval '1 day';
        gates := gates || jsonb_build_object('gate', 'daily_limit', 'passed', today < dionysus_internal.proactive_setting('solicited_per_day'),
            'detail', format('%s asked-for contacts in the last day (at most %s)', today, dionysus_internal.proactive_setting('solicited_per_day')));
        RETURN gates;
    END IF;
    gates := gates || jsonb_build_object('gate', 'their_word', 'passed', sig.id IS NULL,
        'detail', CASE WHEN sig.id IS NULL THEN 'nothing said against contact'
                       ELSE format('they said "%s" (%s%s)', sig.words, sig.kind,
                                   coalesce(' until ' || to_char(sig.until AT TIME ZONE p.time_zone, 'Dy HH24:MI'), ', until they write again')) END);
    SELECT * INTO av FROM dionysus_internal.availability(p.person, t);
    local_hour := extract(hour FROM t AT TIME ZONE p.time_zone)::int;
    -- Their quiet hours (their prior's) hold unless their learned rhythm, trusted enough, says they are up.
    quiet := dionysus_internal.in_quiet_hours(p, local_hour);
    gates := gates || jsonb_build_object('gate', 'quiet_hours', 'passed', NOT (quiet AND (av.learned < 0.15 OR av.confidence < 0.5)),
        'detail', format('%s:00 their time (%s, %s); quiet %s–%s, learned activity %s (confidence %s)', local_hour, p.time_zone,
                         dionysus_internal.time_zone_source_said(p.time_zone_source),
                         dionysus_internal.prior_setting(p, 'quiet_start_hour'), dionysus_internal.prior_setting(p, 'quiet_end_hour'),
                         round(av.learned::numeric, 2), round(av.confidence::numeric, 2)));
    gates := gates || jsonb_build_object('gate', 'availability', 'passed', av.belief >= dionysus_internal.proactive_setting('min_availability'),
        'detail', format('likely available %s (confidence %s)', round(av.belief::numeric, 2), round(av.confidence::numeric, 2)));
    gates := gates || jsonb_build_object('gate', 'cooldown', 'passed', p.last_contact_at IS NULL OR since_contact >= cooldown,
        'detail', CASE WHEN p.last_contact_at IS NULL THEN 'no contact started yet'
                       ELSE format('last contact %s ago (cooldown %s%s)', date_trunc('minute', since_contact), cooldown,
                                   CASE WHEN p.ignored_in_row > 0 THEN format(', doubled for each of %s unanswered', p.ignored_in_row) ELSE '' END) END);
    -- One contact at a time: the last one is answered or counted as ignored before the next.
    gates := gates || jsonb_build_object('gate', 'waiting_on_them', 'passed', NOT p.awaiting_reply,
        'detail', CASE WHEN p.awaiting_reply THEN format('the last contact (%s ago) is not answered yet; it counts as ignored after %s',
                                                         date_trunc('minute', since_contact), date_trunc('minute', dionysus_internal.ignored_after(p)))
                       ELSE 'no contact waiting for an answer' END);
    gates := gates || jsonb_build_object('gate', 'in_flight', 'passed', NOT on_its_way,
        'detail', CASE WHEN NOT on_its_way THEN 'nothing on its way to them' ELSE 'a contact is already being decided or delivered' END);
    SELECT current_energy INTO energy FROM dionysus.heartbeat_state WHERE id = 1;
    cost := dionysus.get_action_cost('reach_out_user');
    gates := gates || jsonb_build_object('gate', 'energy', 'passed', energy >= cost,
        'detail', format('energy %s, a contact costs %s', round(energy::numeric, 1), cost));
    -- After repeated ignores, time alone (social debt) no longer opens the way: a new cause must
    -- (a request they made since, or something new to tell; not pressure grown by time).
    muted := p.ignored_in_row >= dionysus_internal.proactive_setting('ignores_before_pause');
    new_cause := NOT muted OR dionysus_internal.open_requests(p.person) > coalesce((p.cause_at_last_contact ->> 'open_requests')::int, 0)
                 OR p.curiosity > coalesce((p.cause_at_last_contact ->> 'curiosity')::float8, 0) + 0.05;
    gates := gates || jsonb_build_object('gate', 'ignored', 'passed', new_cause,
        'detail', CASE WHEN NOT muted THEN format('%s unanswered in a row', p.ignored_in_row)
                       ELSE format('%s contacts in a row went unanswered: only a new cause counts (%s)', p.ignored_in_row,
                                   CASE WHEN new_cause THEN 'there is one' ELSE 'there is none' END) END);
    -- A considerate friend who knows you are busy now and free tonight waits for tonight: when
    -- the rhythm says a clearly better hour comes within the look-ahead, the contact waits for it.
    IF over_threshold AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(gates) g WHERE NOT (g ->> 'passed')::boolean) THEN
        SELECT k, f.belief, f.confidence INTO later
          FROM generate_series(1, dionysus_internal.proactive_setting('better_moment_hours')::int) k,
               LATERAL dionysus_internal.availability(p.person, t + make_interval(hours => k)) f
         ORDER BY f.belief DESC, k LIMIT 1;
        -- The beliefs carry their confidence already (a prior, or what was learned); a rhythm
        -- that is trusted needs less of a difference to be waited for (down to half the margin),
        -- a prior alone all of it.
        margin := dionysus_internal.proactive_setting('better_moment_margin') * (1 - 0.5 * av.confidence);
        better := later.belief >= av.belief + margin;
        gates := gates || jsonb_build_object('gate', 'better_moment', 'passed', NOT better,
            'detail', CASE WHEN better THEN format('likely more available around %s:00 their time (%s against %s now)',
                                                   extract(hour FROM (t + make_interval(hours => later.k)) AT TIME ZONE p.time_zone),
                                                   round(later.belief::numeric, 2), round(av.belief::numeric, 2))
                           ELSE format('no clearly better hour in the next %s (at best %s more, %s needed)',
                                       dionysus_internal.proactive_setting('better_moment_hours'),
                                       round((later.belief - av.belief)::numeric, 2), round(margin::numeric, 2)) END);
    END IF;
    RETURN gates;
END $$;
COMMENT ON FUNCTION dionysus_internal.contact_gates(dionysus.people, timestamptz, boolean, uuid, boolean) IS 'Every gate a contact with this person must pass now, as [{gate, passed, detail}]: the one home of the contact gates (evaluate_contact, evaluate_requested_contact, decide_contact).';

DROP FUNCTION set_person_time_zone(text, text);

CREATE FUNCTION set_person_time_zone(person text, time_zone text, source text DEFAULT 'config') RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    p dionysus.people;
    rank_of constant text[] := ARRAY['default', 'inferred', 'words', 'config'];
    shift int;
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF time_zone IS NULL OR NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = time_zone) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "time_zone": % is not a time zone name (e.g. Europe/Lisbon)', dionysus_internal.input_prefix(time_zone)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF source IS NULL OR source NOT IN ('inferred', 'words', 'config') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "source": % (config, words or inferred)', dionysus_internal.input_prefix(source)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p := dionysus_internal.person_row(person);
    IF array_position(rank_of, source) < array_position(rank_of, p.time_zone_source) THEN
        RETURN false;
    END IF;
    -- Hours between their old local time and the new one, now: the rhythm's hours move by it.
    shift := round(extract(epoch FROM (dionysus.clock_now() AT TIME ZONE set_person_time_zone.time_zone)
                                      - (dionysus.clock_now() AT TIME ZONE p.time_zone)) / 3600)::int;
    IF shift <> 0 THEN
        WITH old AS (DELETE FROM dionysus.person_rhythm r WHERE r.person = set_person_time_zone.person RETURNING r.*)
        INSERT INTO dionysus.person_rhythm (person, hour_of_week, activity, misses)
        SELECT o.person, ((o.hour_of_week + shift) % 168 + 168) % 168, sum(o.activity), sum(o.misses) FROM old o GROUP BY 1, 2;
    END IF;
    UPDATE dionysus.people x SET time_zone = set_person_time_zone.time_zone, time_zone_source = set_person_time_zone.source, updated_at = now()
     WHERE x.person = set_person_time_zone.person;
    RETURN true;
END $$;
COMMENT ON FUNCTION set_person_time_zone(text, text, text) IS
    'The person''s time zone (an IANA name) and its source (config, words, inferred; a weaker source never overrides a stronger one): their quiet hours, rhythm and rules are in their local time. Returns whether it was taken.';

CREATE FUNCTION dionysus_internal.time_zone_from_words(words text, at timestamptz) RETURNS text
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    w text := lower(words);
    place text;
    zone text;
    hh int;
    offset_hours int;
BEGIN
    -- The place: one or two words after "I'm in", "I live in", "based in" (a city a zone is named by).
    place := substring(w FROM '\m(?:i''m|i am|im|i live|we live|we''re|we are|living|based|here) (?:now |currently )?in ([a-z]+(?: [a-z]+)?)');
    IF place IS NOT NULL THEN
        SELECT z.name INTO zone FROM pg_timezone_names z
         WHERE lower(z.name) LIKE '%/' || replace(place, ' ', '\_')
            OR lower(z.name) LIKE '%/' || split_part(place, ' ', 1)
         ORDER BY z.name !~ '^(Africa|America|Asia|Atlantic|Australia|Europe|Indian|Pacific)/', lower(z.name) NOT LIKE '%/' || replace(place, ' ', '\_'), z.name LIMIT 1;
        IF zone IS NOT NULL THEN
            RETURN zone;
        END IF;
    END IF;
    hh := substring(w FROM '\mit''?s (?:already |now |almost |just )?(\d{1,2})(?::\d\d)? ?(?:am|pm|h|o''clock)? (?:here|where i am|for me)')::int;
    IF hh IS NULL OR hh > 23 THEN
        RETURN NULL;
    END IF;
    IF w ~ ('\m' || hh || '(:\d\d)? ?pm') AND hh < 12 THEN
        hh := hh + 12;
    ELSIF w ~ ('\m' || hh || '(:\d\d)? ?am') AND hh = 12 THEN
        hh := 0;
    END IF;
    offset_hours := ((hh - extract(hour FROM at AT TIME ZONE 'UTC')::int + 36) % 24) - 12;
    -- POSIX's sign is the other way round: Etc/GMT-1 is an hour ahead of UTC.
    RETURN CASE WHEN offset_hours = 0 THEN 'Etc/UTC' WHEN offset_hours > 0 THEN 'Etc/GMT-' || offset_hours ELSE 'Etc/GMT+' || -offset_hours END;
END $$;
COMMENT ON FUNCTION dionysus_internal.time_zone_from_words(text, timestamptz) IS
    'The time zone a person''s words give: a place named by a zone ("I''m in Berlin"), or their clock ("it''s 3 am here") as Etc/GMT±N; NULL if neither.';

CREATE FUNCTION set_person_prior(person text, prior jsonb) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    k text;
    v jsonb;
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF prior IS NULL OR jsonb_typeof(prior) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "prior": a JSON object of proactive_config''s prior keys' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(prior) LOOP
        IF k NOT IN ('quiet_start_hour', 'quiet_end_hour', 'workday_start_hour', 'workday_end_hour', 'prior_free', 'prior_workday', 'prior_quiet') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "prior": % is not a prior key (quiet_start_hour, quiet_end_hour, workday_start_hour, workday_end_hour, prior_free, prior_workday, prior_quiet)',
                dionysus_internal.input_prefix(k) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF jsonb_typeof(v) <> 'number' OR (k LIKE '%hour' AND ((v::text)::numeric NOT BETWEEN 0 AND 23 OR (v::text)::numeric <> trunc((v::text)::numeric)))
           OR (k LIKE 'prior%' AND (v::text)::numeric NOT BETWEEN 0 AND 1) THEN
            RAISE EXCEPTION 'dionysus: invalid argument "prior": "%" must be %', k,
                CASE WHEN k LIKE '%hour' THEN 'a whole hour in [0, 23]' ELSE 'within [0, 1]' END USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    PERFORM dionysus_internal.person_row(person);
    UPDATE dionysus.people x SET prior = set_person_prior.prior, updated_at = now() WHERE x.person = set_person_prior.person;
    RETURN prior;
END $$;
COMMENT ON FUNCTION set_person_prior(text, jsonb) IS
    'A person''s own availability prior (quiet and working hours, the belief in each), over the deployment''s proactive_config key by key; {} returns them to it.';

-- #36 the tick, cheaper (behaviour unchanged): the walk of run_rules_for's passes is the
-- library's (rule_passes), which reads every person's values in one statement (rule_values_of);
-- rule_holds, its conditions in PL/pgSQL, is the library's too.
DROP FUNCTION dionysus_internal.rule_holds(jsonb, jsonb);
CREATE FUNCTION dionysus_internal."rule_passes"(
	"on_trigger" TEXT, /* Option < & str > */
	"persons" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"hours" double precision, /* Option < f64 > */
	"event_id" bigint, /* Option < i64 > */
	"event_priority" smallint, /* Option < i16 > */
	"event_merged" INT /* Option < i32 > */
) RETURNS INT /* i32 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rule_passes_wrapper';
COMMENT ON FUNCTION dionysus_internal.rule_passes(text, text[], double precision, bigint, smallint, integer) IS
    'run_rules_for''s passes after its checks: for each person in turn (NULL: nobody in particular) the values read once, every condition checked, adjustments by weight, what the rules make, the uses counted, the passes written (write_rule_passes); the number of rules fired.';
GRANT EXECUTE ON FUNCTION dionysus_internal.rule_passes(text, text[], double precision, bigint, smallint, integer) TO dionysus_driver;
-- The values rules read, for each of several people (a NULL one: nobody in particular) at one
-- instant, in their order; the event's if one triggered the pass. One statement for a tick's
-- people (the rules' pass reads them all at once); rule_values is one person's.
CREATE FUNCTION dionysus_internal.rule_values_of(persons text[], t timestamptz, has_event boolean DEFAULT false,
                                                 event_priority smallint DEFAULT NULL, event_merged integer DEFAULT NULL)
    RETURNS TABLE (person text, vals jsonb) LANGUAGE plpgsql STABLE
    -- (One plan kept: the planner preferred a custom plan for each array of people, 0.25 ms a
    -- tick spent planning; a SQL function in FROM was planned again at every call too.)
    SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY
    SELECT u.who,
           jsonb_build_object('agent.vitality', a.vitality, 'agent.asleep', CASE WHEN a.mode = 'asleep' THEN 1 ELSE 0 END)
           || CASE WHEN has_event THEN jsonb_build_object('event.priority', event_priority, 'event.merged', event_merged) ELSE '{}' END
           || CASE WHEN p.person IS NULL THEN '{}' ELSE jsonb_strip_nulls(jsonb_build_object(
                  'person.social_debt', round(p.social_debt::numeric, 4), 'person.curiosity', round(p.curiosity::numeric, 4),
                  'person.task_pressure', round(p.task_pressure::numeric, 4), 'person.restraint', round(p.restraint::numeric, 4),
                  'person.mood', round(p.mood::numeric, 3),
                  'person.hours_since_message', round((extract(epoch FROM t - p.last_message_at) / 3600)::numeric, 2),
                  'person.hours_since_contact', round((extract(epoch FROM t - p.last_contact_at) / 3600)::numeric, 2),
                  'person.ignored_in_row', p.ignored_in_row, 'person.turns', p.turns,
                  'person.open_requests', (SELECT count(*) FROM dionysus.goals g
                                            WHERE g.source = 'user_request' AND g.priority IN ('active', 'queued') AND g.private_to = ARRAY[u.who]),
                  'person.open_objectives', (SELECT count(*) FROM dionysus.objectives o
                                              WHERE o.person = u.who AND o.status = 'pending' AND o.saliency >= 0.5),
                  'person.local_hour', extract(hour FROM t AT TIME ZONE p.time_zone)::int,
                  'person.local_dow', extract(isodow FROM t AT TIME ZONE p.time_zone)::int,
                  'person.local_day', extract(day FROM t AT TIME ZONE p.time_zone)::int)) END
      FROM unnest(persons) WITH ORDINALITY u(who, o)
      LEFT JOIN dionysus.agent_state a ON a.id = 1
      LEFT JOIN dionysus.people p ON p.person = u.who
     ORDER BY u.o;
END $$;
GRANT EXECUTE ON FUNCTION dionysus_internal.rule_values_of(text[], timestamptz, boolean, smallint, integer) TO dionysus_driver;
COMMENT ON FUNCTION dionysus_internal.rule_values_of(text[], timestamptz, boolean, smallint, integer) IS 'The values rules read for each of several people (a NULL one: nobody in particular) at an instant, in their order: the agent''s, the event''s, the person''s.';

-- The values a rule reads, for one person (or none) at one instant.
CREATE OR REPLACE FUNCTION dionysus_internal.rule_values(who text, t timestamptz, ev dionysus.events DEFAULT NULL) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT v.vals FROM dionysus_internal.rule_values_of(ARRAY[who], t, ev.id IS NOT NULL, ev.priority, ev.merged) v
$$;
COMMENT ON FUNCTION dionysus_internal.rule_values(text, timestamptz, dionysus.events) IS 'The values rules read for one person (or none) at an instant.';
-- Run the active rules of one trigger for each of several people in turn (a tick: everyone who
-- has written), or for nobody in particular: for each, read the values once, check every
-- condition against them, then apply the intents in a fixed order (adjust, create_objective,
-- schedule_event, request_contact) and write the pass down. One person after another exactly:
-- a rule everyone shares (a built-in) has counted its firing before the next person's
-- conditions read it. What the passes change is written once for all of them, a statement per
-- table (write_rule_passes), and before a rule makes something, so that what it makes sees
-- everything before it. The walk is the library's (rule_passes: in PL/pgSQL it was half of a
-- tick); its statements are these tables'. The caller holds agent_state.
CREATE FUNCTION dionysus_internal.run_rules_for(on_trigger text, persons text[], hours double precision DEFAULT 0,
                                                ev dionysus.events DEFAULT NULL)
    RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    -- (rule_passes refuses a NULL trigger or people, 22004, and a person given twice, 22023.)
    RETURN dionysus_internal.rule_passes(on_trigger, persons, hours, ev.id, ev.priority, ev.merged);
END $$;
COMMENT ON FUNCTION dionysus_internal.run_rules_for(text, text[], double precision, dionysus.events) IS
    'Runs the active rules of a trigger for each person in turn (a NULL person: nobody in particular): conditions read once, intents applied in a fixed order (adjust, create_objective, schedule_event, request_contact), each pass logged, rules counted and learned ones strengthened; a shared rule''s use counts before the next person; written a statement per table.';

-- What run_rules_for's passes changed, a statement per table: each person's moved values,
-- each used rule's count of firings (added to the row as it is then: a rule another session
-- removed or retuned meanwhile keeps that), the log in the order the passes ran.
CREATE FUNCTION dionysus_internal.write_rule_passes(t timestamptz, on_trigger text, event_id bigint, rule_ids bigint[],
                                                    fired_n integer[], moved_people text[], moved_values jsonb[],
                                                    log_people text[], log_inputs jsonb[], log_fired jsonb[])
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF cardinality(moved_people) > 0 THEN
        UPDATE dionysus.people x SET social_debt = (u.st ->> 'person.social_debt')::float8, curiosity = (u.st ->> 'person.curiosity')::float8,
               task_pressure = (u.st ->> 'person.task_pressure')::float8, restraint = (u.st ->> 'person.restraint')::float8
          FROM unnest(moved_people, moved_values) u(person, st)
         WHERE x.person = u.person;
    END IF;
    IF cardinality(rule_ids) > 0 THEN
        -- (A learned rule is one person's: it fires at most once a pass, so it strengthens once.)
        UPDATE dionysus.mind_rules m SET use_count = m.use_count + u.n, last_used_at = t,
               status = CASE WHEN m.once THEN 'done' ELSE m.status END, ended_at = CASE WHEN m.once THEN t ELSE m.ended_at END,
               weight = CASE WHEN m.learned THEN least(1, m.weight + dionysus_internal.proactive_setting('rule_strengthen') * (1 - m.weight)) ELSE m.weight END
          FROM unnest(rule_ids, fired_n) u(id, n)
         WHERE m.id = u.id;
    END IF;
    IF cardinality(log_people) > 0 THEN
        INSERT INTO dionysus.rule_firings (at, person, trigger, event_id, inputs, fired)
        SELECT t, u.person, on_trigger, event_id, u.inputs, u.fired
          FROM unnest(log_people, log_inputs, log_fired) WITH ORDINALITY u(person, inputs, fired, o)
         ORDER BY u.o;
    END IF;
END $$;
COMMENT ON FUNCTION dionysus_internal.write_rule_passes(timestamptz, text, bigint, bigint[], integer[], text[], jsonb[], text[], jsonb[], jsonb[]) IS
    'run_rules_for''s writes: the people''s moved values, the used rules (their firings added to the row as it is), the log; a statement each.';

-- Run the active rules of one trigger for one person (or for nobody in particular): run_rules_for.
CREATE OR REPLACE FUNCTION dionysus_internal.run_rules(on_trigger text, who text, hours double precision DEFAULT 0, ev dionysus.events DEFAULT NULL)
    RETURNS integer LANGUAGE sql AS $$
    SELECT dionysus_internal.run_rules_for(on_trigger, ARRAY[who], hours, ev)
$$;
COMMENT ON FUNCTION dionysus_internal.run_rules(text, text, double precision, dionysus.events) IS
    'Runs the active rules of a trigger for one person (NULL: nobody in particular), as run_rules_for does.';
GRANT EXECUTE ON FUNCTION dionysus_internal.run_rules_for(text, text[], double precision, dionysus.events),
    dionysus_internal.write_rule_passes(timestamptz, text, bigint, bigint[], integer[], text[], jsonb[], text[], jsonb[], jsonb[])
    TO dionysus_driver;

CREATE OR REPLACE FUNCTION dionysus_internal.decay_rules() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    n integer;
BEGIN
    UPDATE dionysus.mind_rules m
       SET weight = m.weight * CASE WHEN dionysus_internal.proactive_setting('rule_decay_per_day') >= 1 THEN 0
                                    -- (power() raises an error where it underflows: bounded.)
                                    ELSE exp(greatest(-700, ln(1 - dionysus_internal.proactive_setting('rule_decay_per_day'))
                                                            * extract(epoch FROM t - coalesce(m.decayed_at, m.last_used_at, m.created_at)) / 86400)) END,
           decayed_at = t
     WHERE m.status = 'active' AND m.learned AND coalesce(m.last_used_at, m.created_at) < t - interval '1 day'
       AND coalesce(m.decayed_at, m.last_used_at, m.created_at) < t - interval '1 day';
    UPDATE dionysus.mind_rules m SET status = 'forgotten', ended_at = t
     WHERE m.status = 'active' AND m.learned AND m.weight < dionysus_internal.proactive_setting('rule_forget_below');
    GET DIAGNOSTICS n = ROW_COUNT;
    -- "until May": past its end a rule is over (run_rules already skips it).
    UPDATE dionysus.mind_rules m SET status = 'ended', ended_at = m.ends_at WHERE m.status = 'active' AND m.ends_at <= t;
    RETURN n;
END $$;
COMMENT ON FUNCTION dionysus_internal.decay_rules() IS 'Learned rules unused for a day lose weight; below rule_forget_below they are forgotten; a rule past its ends_at is ended.';

CREATE OR REPLACE FUNCTION add_rule(person text, words text, rule jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    who text := btrim(add_rule.person);
    r dionysus.mind_rules;
    nm text;
    ends timestamptz;
BEGIN
    IF who IS NULL OR who = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF words IS NULL OR btrim(words) = '' OR length(words) > 2000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "words": the person''s words, 1 to 2,000 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rule IS NULL OR jsonb_typeof(rule) <> 'object' OR octet_length(rule::text) > 4096 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "rule": must be a JSON object of at most 4 kB' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(rule) k WHERE k NOT IN ('name', 'trigger', 'condition', 'intents', 'description', 'once', 'ends_on')) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "rule": only name, trigger, condition, intents, description, once and ends_on'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rule ? 'once' AND jsonb_typeof(rule -> 'once') NOT IN ('boolean', 'null') THEN
        RAISE EXCEPTION 'dionysus: invalid rule: once must be true (fires once) or false (repeats)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(rule -> 'ends_on') = 'string' AND rule ->> 'ends_on' ~ '^\d{4}-\d{2}-\d{2}$' THEN
        BEGIN
            ends := (rule ->> 'ends_on')::date::timestamp
                    AT TIME ZONE coalesce((SELECT x.time_zone FROM dionysus.people x WHERE x.person = who), 'UTC');
        EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
            ends := NULL;
        END;
    END IF;
    IF rule ? 'ends_on' AND jsonb_typeof(rule -> 'ends_on') <> 'null' AND (ends IS NULL OR ends <= dionysus.clock_now()) THEN
        RAISE EXCEPTION 'dionysus: invalid rule: ends_on must be a date to come, YYYY-MM-DD (the first day, their time, it no longer fires), not %',
            dionysus_internal.input_prefix(rule ->> 'ends_on') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(rule -> 'trigger') IS DISTINCT FROM 'string' OR NOT (dionysus.rule_vocabulary() -> 'triggers') ? (rule ->> 'trigger') THEN
        RAISE EXCEPTION 'dionysus: invalid rule: trigger "%" is not one of rule_vocabulary()''s triggers', rule ->> 'trigger'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.check_rule_condition(coalesce(rule -> 'condition', '{}'::jsonb));
    PERFORM dionysus_internal.check_rule_intents(rule -> 'intents');
    nm := left(btrim(coalesce(rule ->> 'name', rule ->> 'description', words)), 80);
    IF nm = '' THEN
        RAISE EXCEPTION 'dionysus: invalid rule: name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.person_row(who);
    IF (SELECT count(*) FROM dionysus.mind_rules m WHERE m.person = who AND m.status = 'active')
       >= dionysus_internal.proactive_setting('rules_per_person') THEN
        RAISE EXCEPTION 'dionysus: % has % rules already (rules_per_person); remove one first', who,
                        dionysus_internal.proactive_setting('rules_per_person') USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF EXISTS (SELECT 1 FROM dionysus.mind_rules m WHERE m.person = who AND m.status = 'active' AND m.name = nm) THEN
        RAISE EXCEPTION 'dionysus: % already has a rule named "%"', who, nm USING ERRCODE = 'unique_violation';
    END IF;
    INSERT INTO dionysus.mind_rules (name, person, trigger, condition, intents, origin, description, words, created_at, once, ends_at)
    VALUES (nm, who, rule ->> 'trigger', coalesce(rule -> 'condition', '{}'::jsonb), rule -> 'intents', 'person',
            left(coalesce(nullif(btrim(rule ->> 'description'), ''), nm), 300), left(words, 2000), dionysus.clock_now(),
            coalesce((rule ->> 'once')::boolean, false), ends)
    RETURNING * INTO r;
    RETURN jsonb_build_object('rule_id', r.id, 'name', r.name, 'trigger', r.trigger, 'condition', r.condition, 'intents', r.intents,
                              'description', r.description, 'once', r.once, 'ends_at', r.ends_at);
END $$;
COMMENT ON FUNCTION add_rule(text, text, jsonb) IS
    'A rule in the person''s words (as the fast model proposed it: name, trigger, condition, intents, and once or ends_on): checked against rule_vocabulary(), stored as theirs, acting only on them. Errors name the part that is wrong.';

DROP FUNCTION person_rules(text);

CREATE FUNCTION person_rules(for_person text)
    RETURNS TABLE (rule_id bigint, name text, origin text, status text, trigger text, condition jsonb, intents jsonb,
                   weight double precision, use_count bigint, last_used_at timestamptz, description text, words text,
                   repeats text)
    LANGUAGE sql STABLE AS $$
    SELECT m.id, m.name, m.origin, m.status, m.trigger, m.condition, m.intents, m.weight, m.use_count, m.last_used_at, m.description, m.words,
           CASE WHEN m.once THEN 'once'
                WHEN m.ends_at IS NOT NULL THEN 'until ' || to_char(m.ends_at AT TIME ZONE coalesce((SELECT x.time_zone FROM dionysus.people x WHERE x.person = m.person), 'UTC'), 'YYYY-MM-DD')
                ELSE 'repeats' END
      FROM dionysus.mind_rules m
     WHERE (m.person = for_person AND m.status <> 'removed') OR (m.person IS NULL AND m.status = 'active')
     ORDER BY m.person NULLS LAST, m.status, m.id
$$;
COMMENT ON FUNCTION person_rules(text) IS 'A person''s rules (active, done, ended, forgotten) and the built-ins that apply to everyone, with weight, use and whether each repeats (once, repeats, until YYYY-MM-DD: the first day it no longer fires, their time).';

-- (A person's own rule_from_words stays active; the new version waits beside it.)
SELECT dionysus_internal.ship_template('rule_from_words', 'proactive mind: a rule the person asked for in plain words, as data',
    'proactive mind: a rule the person asked for in plain words, as data; once, repeating or until a date, as they said', 0.0,
    dionysus_internal.shipped_prompt('rule_from_words', 2));
GRANT EXECUTE ON FUNCTION dionysus_internal.prior_setting(dionysus.people, text), dionysus_internal.in_quiet_hours(dionysus.people, integer),
    set_person_time_zone(text, text, text), dionysus_internal.time_zone_from_words(text, timestamptz), set_person_prior(text, jsonb),
    person_rules(text) TO dionysus_driver;

-- lead (#35 grounding x Trust III erasure): a person who leaves takes the grounding check's refusals of their
-- words with them (forget_person), and export_person lists them.
CREATE OR REPLACE FUNCTION forget_person(person text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    who text := dionysus_internal.require_known_person(person);
    msg_ids uuid[];
    sources text[];
    mem_ids uuid[];
    hb_ids uuid[];
    dream_ids uuid[];
    ep_ids uuid[];
    obj_ids uuid[];
    keys text[];
    work_ids uuid[];
    ent_ids uuid[];
    concept_ids uuid[];
    lexemes text[];
    r record;
    k bigint;
    gone jsonb := '{}';
BEGIN
    -- 0, 1: their imports, then each channel they talk in (in one order: erasures never wait
    -- on each other in a cycle), so no turn of theirs is logged while they are erased.
    PERFORM 1 FROM dionysus.imports i WHERE i.person = who ORDER BY i.id FOR UPDATE;
    FOR r IN SELECT DISTINCT m.platform, m.channel_id FROM dionysus.messages m WHERE m.person = who ORDER BY 1, 2 LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.channel:' || r.platform || ':' || r.channel_id, 0));
    END LOOP;
    -- 2-4.
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));

    -- What is theirs.
    msg_ids := ARRAY(SELECT m.id FROM dionysus.messages m WHERE m.person = who);
    sources := ARRAY(SELECT dionysus_internal.turn_source(m.id, m.import_id) FROM dionysus.messages m
                      WHERE m.person = who AND NOT m.is_bot);
    mem_ids := ARRAY(SELECT m.id FROM dionysus.memories m WHERE who = ANY (m.private_to)
                     UNION SELECT m.memory_id FROM dionysus.messages m WHERE m.id = ANY (msg_ids) AND m.memory_id IS NOT NULL
                     UNION SELECT m.id FROM dionysus.memories m WHERE m.source = ANY (sources)
                     UNION SELECT n.memory_id FROM dionysus.north_stars n WHERE n.person = who);
    dream_ids := ARRAY(SELECT d.id FROM dionysus.dreams d WHERE d.person = who);
    ep_ids := ARRAY(SELECT DISTINCT em.episode_id FROM dionysus.episode_memories em WHERE em.memory_id = ANY (mem_ids)
                    UNION SELECT e.id FROM dionysus.episodes e WHERE who = ANY (e.participants));
    obj_ids := ARRAY(SELECT o.id FROM dionysus.objectives o WHERE o.person = who);
    -- Everything of theirs an id in jsonb may point at.
    keys := ARRAY[who] || msg_ids::text[] || mem_ids::text[] || dream_ids::text[] || obj_ids::text[]
            || ARRAY(SELECT f.id::text FROM dionysus.feedback f WHERE f.person = who)
            || ARRAY(SELECT c.id::text FROM dionysus.contact_evaluations c WHERE c.person = who)
            || ARRAY(SELECT o.id::text FROM dionysus.outbox o WHERE o.person = who)
            || ARRAY(SELECT p.id::text FROM dionysus.proposals p WHERE p.dream_id = ANY (dream_ids) OR p.person = who)
            || ARRAY(SELECT c.id::text FROM dionysus.censors c WHERE c.person = who);
    -- Heartbeats that saw their words, or named them (whom a reach-out could go to).
    hb_ids := ARRAY(SELECT h.id FROM dionysus.heartbeat_log h
                     WHERE who = ANY (h.private_to) OR dionysus_internal.jsonb_mentions(h.context, keys)
                        OR dionysus_internal.jsonb_mentions(h.environment_snapshot, keys)
                        OR dionysus_internal.jsonb_mentions(h.goals_snapshot, keys)
                        OR dionysus_internal.jsonb_mentions(h.decision, keys)
                        OR dionysus_internal.jsonb_mentions(h.actions_taken, keys));
    keys := keys || hb_ids::text[];

    -- 5: their heartbeats keep their numbers, not their words; one still running is closed.
    PERFORM 1 FROM dionysus.heartbeat_log h WHERE h.id = ANY (hb_ids) ORDER BY h.id FOR UPDATE;
    UPDATE dionysus.heartbeat_state SET in_flight = NULL, last_heartbeat_at = now(),
           next_heartbeat_at = dionysus.clock_now() + make_interval(mins => dionysus_internal.heartbeat_interval_minutes()),
           updated_at = now()
     WHERE id = 1 AND in_flight = ANY (hb_ids);
    UPDATE dionysus.heartbeat_log h
       SET context = '{}', environment_snapshot = NULL, goals_snapshot = NULL, decision = NULL, decision_reasoning = NULL,
           actions_taken = '[]', actions_rejected = '[]', goals_modified = '[]', narrative = NULL,
           private_to = nullif(array_remove(h.private_to, who), '{}'),
           status = CASE WHEN h.status IN ('in_flight', 'committed') THEN 'recovered' ELSE h.status END,
           ended_at = coalesce(h.ended_at, now()),
           recovery_error = CASE WHEN h.status IN ('in_flight', 'committed') THEN 'erased: a person in its context left' END
     WHERE h.id = ANY (hb_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('heartbeats_redacted', k);
    work_ids := ARRAY(SELECT q.id FROM dionysus.work_queue q
                       WHERE q.heartbeat_id = ANY (hb_ids)
                          OR (q.action = 'summarize_episode' AND (q.params ->> 'episode_id') = ANY (ep_ids::text[]))
                          OR dionysus_internal.jsonb_mentions(q.params, keys)
                          OR dionysus_internal.jsonb_mentions(q.result, keys));
    PERFORM 1 FROM dionysus.work_queue q WHERE q.id = ANY (work_ids) ORDER BY q.id FOR UPDATE;
    DELETE FROM dionysus.work_queue q WHERE q.id = ANY (work_ids);
    gone := gone || jsonb_build_object('work_items', cardinality(work_ids));
    DELETE FROM dionysus.outbox o WHERE o.person = who OR o.reply_to = ANY (msg_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('outbox', k);
    DELETE FROM dionysus.contact_evaluations c WHERE c.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('contact_evaluations', k);
    -- What the grounding check refused of their turns or of work about them keeps their words
    -- (sql/032_grounding.sql): private to them, made by an item just erased, or checked against
    -- one of their turns.
    DELETE FROM dionysus.model_text_refusals x
     WHERE who = ANY (x.private_to) OR x.work_id = ANY (work_ids)
        OR x.source IN (SELECT m.content FROM dionysus.messages m WHERE m.id = ANY (msg_ids));
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('model_text_refusals', k);

    -- 6, 7.
    PERFORM 1 FROM dionysus.people p WHERE p.person = who FOR UPDATE;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.north_star:' || who, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.learn', 0));
    FOR r IN SELECT DISTINCT e.source FROM dionysus.episodes e WHERE e.id = ANY (ep_ids) ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.episode:' || r.source, 0));
    END LOOP;
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.people:' || who, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.objectives:' || who, 0));

    -- 8: rows. What only pointed at what goes is noted first.
    PERFORM 1 FROM dionysus.episodes e WHERE e.id = ANY (ep_ids) ORDER BY e.id FOR UPDATE;
    lexemes := ARRAY(SELECT DISTINCT l FROM dionysus.memories m, unnest(tsvector_to_array(m.search)) l WHERE m.id = ANY (mem_ids));
    concept_ids := ARRAY(SELECT DISTINCT mc.concept_id FROM dionysus.memory_concepts mc WHERE mc.memory_id = ANY (mem_ids));
    ent_ids := ARRAY(SELECT t.subject_id FROM dionysus.triples t WHERE who = ANY (t.private_to) OR t.source = ANY (sources)
                     UNION SELECT t.object_id FROM dionysus.triples t WHERE who = ANY (t.private_to) OR t.source = ANY (sources));

    -- Their north stars first: a memory that is one refuses to go otherwise (017).
    DELETE FROM dionysus.north_stars n WHERE n.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('north_stars', k);
    DELETE FROM dionysus.triples t WHERE who = ANY (t.private_to) OR t.source = ANY (sources);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('triples', k);
    DELETE FROM dionysus.entities x
     WHERE x.id = ANY (ent_ids)
       AND NOT EXISTS (SELECT 1 FROM dionysus.triples t WHERE t.subject_id = x.id OR t.object_id = x.id);
    DELETE FROM dionysus.goals g WHERE who = ANY (g.private_to);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('goals', k);
    DELETE FROM dionysus.memory_changes c
     WHERE c.target_id = ANY (mem_ids) OR c.heartbeat_id = ANY (hb_ids) OR c.work_id = ANY (work_ids)
        OR dionysus_internal.jsonb_mentions(c.before, keys) OR dionysus_internal.jsonb_mentions(c.after, keys);
    DELETE FROM dionysus.decay_log d WHERE d.memory_id = ANY (mem_ids);
    DELETE FROM dionysus.memories m WHERE m.id = ANY (mem_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('memories', k);
    DELETE FROM dionysus.memory_access_log l WHERE l.memory_id = ANY (mem_ids);
    DELETE FROM dionysus.concepts c
     WHERE c.id = ANY (concept_ids) AND NOT EXISTS (SELECT 1 FROM dionysus.memory_concepts mc WHERE mc.concept_id = c.id);
    -- Neighbourhoods that listed them are computed again.
    INSERT INTO dionysus.neighborhood_queue (memory_id)
    SELECT n.memory_id FROM dionysus.memory_neighborhoods n WHERE n.neighbor_ids && mem_ids;

    -- The turns themselves (and what was staged from them for a re-index, by cascade).
    DELETE FROM dionysus.messages m WHERE m.id = ANY (msg_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('messages', k);
    -- An import of theirs that brought in someone else's turns too keeps its row (the turns point at it).
    DELETE FROM dionysus.imports i
     WHERE i.person = who AND NOT EXISTS (SELECT 1 FROM dionysus.messages m WHERE m.import_id = i.id);

    -- Episodes: one with nothing left goes; one with other people's turns left forgets its
    -- summary and is summarised again from what remains.
    DELETE FROM dionysus.episodes e
     WHERE e.id = ANY (ep_ids) AND NOT EXISTS (SELECT 1 FROM dionysus.episode_memories em WHERE em.episode_id = e.id);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('episodes', k);
    UPDATE dionysus.episodes e
       SET summary = NULL, summary_embedding = NULL, lessons = '{}', outcome = NULL, surprise = NULL,
           participants = dionysus_internal.episode_participants(e.id),
           memory_count = (SELECT count(*) FROM dionysus.episode_memories em WHERE em.episode_id = e.id)
     WHERE e.id = ANY (ep_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('episodes_to_summarise_again', k);

    -- What the companion kept about them.
    DELETE FROM dionysus.objectives o WHERE o.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('objectives', k);
    DELETE FROM dionysus.feedback f WHERE f.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('feedback', k);
    DELETE FROM dionysus.censor_events e
     WHERE e.context ->> 'person' = who OR dionysus_internal.jsonb_mentions(e.context, keys);
    DELETE FROM dionysus.censors c
     WHERE c.person = who OR c.learned_from_id = ANY (msg_ids) OR c.learned_from_id = ANY (hb_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('censors', k);
    DELETE FROM dionysus.mind_rules x WHERE x.person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('rules', k);
    DELETE FROM dionysus.rule_firings x WHERE x.person = who OR dionysus_internal.jsonb_mentions(x.inputs, keys);
    DELETE FROM dionysus.learning_log x WHERE x.person = who;
    DELETE FROM dionysus.events x WHERE x.person = who OR dionysus_internal.jsonb_mentions(x.payload, keys);
    -- Their dreams' proposals, decided or not, and what an approval made theirs alone (017):
    -- their own template versions and archetypes.
    DELETE FROM dionysus.person_prompt_templates t WHERE t.person = who;
    DELETE FROM dionysus.context_archetypes a WHERE a.person = who;
    DELETE FROM dionysus.proposals p WHERE p.dream_id = ANY (dream_ids) OR p.person = who;
    DELETE FROM dionysus.dreams d WHERE d.id = ANY (dream_ids);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('dreams', k);
    DELETE FROM dionysus.mirror_items i
     WHERE i.person = who OR who = ANY (i.private_to) OR i.subject_id::text = ANY (keys)
        OR dionysus_internal.jsonb_mentions(i.card, keys);
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('mirror_items', k);
    DELETE FROM dionysus.known_persons x WHERE x.of_person = who;
    GET DIAGNOSTICS k = ROW_COUNT;
    gone := gone || jsonb_build_object('people_in_their_life', k);
    DELETE FROM dionysus.person_relations x WHERE x.of_person = who;
    DELETE FROM dionysus.person_aliases x WHERE x.of_person = who;
    DELETE FROM dionysus.procedure_activations x WHERE x.person = who;
    DELETE FROM dionysus.procedures x WHERE x.person = who;
    -- Re-index staging of what went: vectors of their memories, episodes and objectives, and
    -- the tombstones of their turns (and of this erasure's own deletions).
    DELETE FROM dionysus.reindex_vectors v
     WHERE (v.kind = 'memory' AND v.target_id = ANY (mem_ids)) OR (v.kind = 'episode' AND v.target_id = ANY (ep_ids))
        OR (v.kind = 'objective' AND v.target_id = ANY (obj_ids));
    DELETE FROM dionysus.reindex_tombstones t WHERE t.source = ANY (sources) OR t.txid = txid_current();
    -- A cache keyed by a hash of each text embedded: which of them were theirs is not recorded.
    DELETE FROM dionysus.embedding_cache;
    -- Their row last (rhythm, signals and contact weights go with it).
    DELETE FROM dionysus.people p WHERE p.person = who;

    -- 9: their working memory.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.working_memory:' || who, 0));
    DELETE FROM dionysus.working_memories x WHERE x.person = who;
    DELETE FROM dionysus.working_memory_sessions x WHERE x.person = who;
    DELETE FROM dionysus.open_threads x WHERE x.person = who;

    -- The lexicon forgets the words no memory has any more.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.lexicon', 0));
    UPDATE dionysus.lexicon x
       SET ndoc = (SELECT count(*) FROM dionysus.memories m WHERE m.status = 'active' AND m.search @@ quote_literal(x.lexeme)::tsquery)
     WHERE x.lexeme = ANY (lexemes);
    DELETE FROM dionysus.lexicon x WHERE x.lexeme = ANY (lexemes) AND x.ndoc = 0;
    RETURN jsonb_build_object('person', who, 'forgotten', gone);
END $$;

CREATE OR REPLACE FUNCTION export_person(person text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    who text := dionysus_internal.require_known_person(person);
    own text[] := ARRAY[who];
BEGIN
    RETURN jsonb_build_object(
        'person', who,
        'exported_at', now(),
        'profile', (SELECT to_jsonb(p) || jsonb_build_object(
                        'rhythm', (SELECT coalesce(jsonb_agg(to_jsonb(r) - 'person' ORDER BY r.hour_of_week), '[]') FROM dionysus.person_rhythm r WHERE r.person = who),
                        'signals', (SELECT coalesce(jsonb_agg(to_jsonb(s) - 'person' ORDER BY s.said_at), '[]') FROM dionysus.person_signals s WHERE s.person = who),
                        'contact_weights', (SELECT coalesce(jsonb_agg(to_jsonb(w) - 'person' ORDER BY w.input), '[]') FROM dionysus.person_contact_weights w WHERE w.person = who))
                      FROM dionysus.people p WHERE p.person = who),
        'messages', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'at', m.created_at, 'from', CASE WHEN m.is_bot THEN 'companion' ELSE 'them' END,
                                                                 'proactive', m.is_proactive, 'platform', m.platform, 'channel_id', m.channel_id,
                                                                 'content', m.content, 'imported', m.import_id IS NOT NULL)
                                               ORDER BY m.created_at, m.id), '[]')
                       FROM dionysus.messages m WHERE m.person = who),
        'memories', (SELECT coalesce(jsonb_agg(to_jsonb(m) - 'embedding' - 'search'
                                                 || jsonb_build_object('fact', (SELECT to_jsonb(f) - 'memory_id' FROM dionysus.facts f WHERE f.memory_id = m.id))
                                               ORDER BY m.created_at, m.id), '[]')
                       FROM dionysus.memories m WHERE m.private_to = own),
        'shared_memories', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'type', m.type, 'created_at', m.created_at,
                                                                        'shared_with', cardinality(m.private_to) - 1) ORDER BY m.created_at, m.id), '[]')
                              FROM dionysus.memories m WHERE who = ANY (m.private_to) AND m.private_to <> own),
        'triples', (SELECT coalesce(jsonb_agg(jsonb_build_object('subject', s.name, 'predicate', t.predicate, 'object', o.name,
                                                                'confidence', t.confidence, 'source', t.source, 'created_at', t.created_at)
                                              ORDER BY t.created_at, t.id), '[]')
                      FROM dionysus.triples t JOIN dionysus.entities s ON s.id = t.subject_id JOIN dionysus.entities o ON o.id = t.object_id
                     WHERE t.private_to = own),
        'goals', (SELECT coalesce(jsonb_agg(to_jsonb(g) ORDER BY g.created_at), '[]') FROM dionysus.goals g WHERE g.private_to = own),
        'people_in_their_life', (SELECT coalesce(jsonb_agg(dionysus_internal.person_json(k, true) ORDER BY k.seq), '[]')
                                   FROM dionysus.known_persons k WHERE k.of_person = who),
        'north_stars', (SELECT coalesce(jsonb_agg(to_jsonb(n) - 'person' ORDER BY n.created_at), '[]') FROM dionysus.north_stars n WHERE n.person = who),
        'objectives', (SELECT coalesce(jsonb_agg(to_jsonb(o) - 'person' - 'embedding' ORDER BY o.created_at), '[]') FROM dionysus.objectives o WHERE o.person = who),
        'feedback', (SELECT coalesce(jsonb_agg(to_jsonb(f) - 'person' ORDER BY f.created_at), '[]') FROM dionysus.feedback f WHERE f.person = who),
        'censors', (SELECT coalesce(jsonb_agg(to_jsonb(c) - 'person' - 'embedding' ORDER BY c.created_at), '[]') FROM dionysus.censors c WHERE c.person = who),
        'rules', (SELECT coalesce(jsonb_agg(to_jsonb(r) - 'person' ORDER BY r.created_at), '[]') FROM dionysus.mind_rules r WHERE r.person = who),
        -- Why each contact was made (or not): its inputs, threshold, gates, decision and how it landed.
        'contacts', (SELECT coalesce(jsonb_agg(to_jsonb(c) - 'person' ORDER BY c.at, c.recorded_at), '[]') FROM dionysus.contact_evaluations c WHERE c.person = who),
        'learning', (SELECT coalesce(jsonb_agg(to_jsonb(l) - 'person' ORDER BY l.at, l.id), '[]') FROM dionysus.learning_log l WHERE l.person = who),
        'episodes', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'started_at', e.started_at, 'ended_at', e.ended_at,
                                                                 'others', cardinality(array_remove(e.participants, who)),
                                                                 'summary', CASE WHEN e.participants <@ own THEN e.summary END,
                                                                 'lessons', CASE WHEN e.participants <@ own THEN to_jsonb(e.lessons) END,
                                                                 'outcome', e.outcome) ORDER BY e.started_at, e.id), '[]')
                       FROM dionysus.episodes e
                      WHERE who = ANY (e.participants)
                         OR EXISTS (SELECT 1 FROM dionysus.episode_memories em JOIN dionysus.messages m ON m.memory_id = em.memory_id
                                     WHERE em.episode_id = e.id AND m.person = who)),
        'open_threads', (SELECT coalesce(jsonb_agg(to_jsonb(t) - 'person' - 'embedding' ORDER BY t.opened_at), '[]') FROM dionysus.open_threads t WHERE t.person = who),
        'working_memory_sessions', (SELECT coalesce(jsonb_agg(to_jsonb(s) - 'person' ORDER BY s.started_at), '[]') FROM dionysus.working_memory_sessions s WHERE s.person = who),
        'procedures', (SELECT coalesce(jsonb_agg(to_jsonb(p) - 'person' - 'embedding' ORDER BY p.created_at), '[]') FROM dionysus.procedures p WHERE p.person = who),
        'dreams', (SELECT coalesce(jsonb_agg(to_jsonb(d) - 'person' ORDER BY d.local_date), '[]') FROM dionysus.dreams d WHERE d.person = who),
        'proposals', (SELECT coalesce(jsonb_agg(to_jsonb(p) - 'person' ORDER BY p.created_at), '[]') FROM dionysus.proposals p
                       WHERE p.person = who OR p.dream_id IN (SELECT d.id FROM dionysus.dreams d WHERE d.person = who)),
        'own_templates', (SELECT coalesce(jsonb_agg(to_jsonb(t) - 'person' ORDER BY t.key, t.version), '[]') FROM dionysus.person_prompt_templates t WHERE t.person = who),
        'own_archetypes', (SELECT coalesce(jsonb_agg(to_jsonb(a) - 'person' - 'centroid' ORDER BY a.name), '[]') FROM dionysus.context_archetypes a WHERE a.person = who),
        'imports', (SELECT coalesce(jsonb_agg(to_jsonb(i) - 'person' ORDER BY i.started_at), '[]') FROM dionysus.imports i WHERE i.person = who),
        'outbox', (SELECT coalesce(jsonb_agg(to_jsonb(o) - 'person' ORDER BY o.created_at), '[]') FROM dionysus.outbox o WHERE o.person = who),
        'events', (SELECT coalesce(jsonb_agg(to_jsonb(x) - 'person' ORDER BY x.at, x.id), '[]') FROM dionysus.events x WHERE x.person = who),
        -- What a model wrote from their words that the grounding check refused to store, and why.
        'refused_model_text', (SELECT coalesce(jsonb_agg(to_jsonb(r) - 'private_to' ORDER BY r.refused_at, r.id), '[]')
                                 FROM dionysus.model_text_refusals r WHERE r.private_to = own),
        'heartbeats_that_saw_their_words', (SELECT count(*) FROM dionysus.heartbeat_log h WHERE who = ANY (h.private_to)));
END $$;
COMMENT ON FUNCTION export_person(text) IS
    'Everything stored about one person, as JSON (dionysus export PERSON): profile, their turns and the companion''s to them, memories and facts private to them, triples, goals, the people in their life, north stars, objectives, feedback, censors, rules, every contact evaluation (why a contact was made), learning, episodes, threads, procedures, dreams, imports, outbox, events, model text the grounding check refused. What is private to them and others is listed without its words. P0002 for a person of whom nothing is stored.';


-- lead (#36): a session's idleness on the driven clock, as session_start now stamps it.
CREATE OR REPLACE FUNCTION end_idle_session() RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    st dionysus.heartbeat_state;
    turns bigint;
BEGIN
    SELECT * INTO st FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    -- The driven clock, as session_start and note_user_message stamp the last interaction.
    IF NOT st.session_active OR st.last_user_interaction_at >
       dionysus.clock_now() - make_interval(secs => dionysus_internal.heartbeat_setting('session_idle_minutes') * 60) THEN
        RETURN false;
    END IF;
    SELECT count(*) INTO turns FROM dionysus.messages
     WHERE NOT is_bot AND created_at >= coalesce(st.session_started_at, st.last_user_interaction_at);
    PERFORM dionysus.session_end(turns >= dionysus_internal.heartbeat_setting('significant_session_turns'));
    RETURN true;
END $$;

-- A person's own version of a template answers in the shared one's result_schema (#35).
CREATE OR REPLACE FUNCTION prompt_template(key text, person text) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    o dionysus.person_prompt_templates;
BEGIN
    SELECT * INTO o FROM dionysus.person_prompt_templates t
     WHERE t.person = prompt_template.person AND t.key = prompt_template.key AND t.active;
    IF NOT FOUND THEN
        RETURN dionysus.prompt_template(key);
    END IF;
    -- Her wording, the task's answer schema: the shape the driver checks does not change with the words.
    RETURN jsonb_build_object('key', o.key, 'version', o.version, 'template', o.template, 'temperature', o.temperature, 'person', o.person,
                              'result_schema', (SELECT p.result_schema FROM dionysus.prompt_templates p WHERE p.key = o.key AND p.active));
END $$;
COMMENT ON FUNCTION prompt_template(text, text) IS 'The template as used for a person: their own active version, else the shared one ({key, version, template, temperature, result_schema[, person]}; a person''s own version answers in the shared one''s result_schema).';

-- decay: a mention whose memory is held by another transaction stays queued (it was dropped).
-- Reinforcement: each queued new memory resets the clock of the older memories it repeats.
-- A repeated memory another transaction holds (the driver writing its levels, the worker
-- folding access counts) is not waited for: the mention stays queued for the next pass, so a
-- lock held a moment never loses it.
CREATE OR REPLACE FUNCTION dionysus_internal.decay_reinforce(cfg dionysus.decay_config) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    k integer;
    held integer;
    fresh record;
    later uuid[] := '{}';
BEGIN
    FOR fresh IN
        DELETE FROM dionysus.decay_mentions q
         WHERE q.memory_id IN (SELECT memory_id FROM dionysus.decay_mentions ORDER BY memory_id LIMIT greatest(cfg.batch * 5, 100))
        RETURNING q.memory_id
    LOOP
        WITH said AS (
            SELECT m.id, m.embedding, m.private_to, m.reinforced_at FROM dionysus.memories m WHERE m.id = fresh.memory_id
        ), near AS (
            SELECT o.id, 1 - (o.embedding <=> said.embedding) AS similarity
              FROM said CROSS JOIN LATERAL (
                   SELECT x.id, x.embedding, x.private_to FROM dionysus.memories x
                    WHERE x.id <> said.id AND x.status = 'active'
                    ORDER BY x.embedding <=> said.embedding LIMIT 8) o
             WHERE 1 - (o.embedding <=> said.embedding) >= cfg.mention_similarity
               -- a person's words renew only what is theirs or shared: never another's
               AND (o.private_to IS NULL OR coalesce(o.private_to, '{}') = coalesce(said.private_to, '{}'))
        ), due AS (
            SELECT near.id FROM near JOIN dionysus.memories m ON m.id = near.id WHERE m.reinforced_at < dionysus.clock_now()
        ), got AS (
            SELECT y.id FROM dionysus.memories y WHERE y.id IN (SELECT id FROM due) FOR UPDATE SKIP LOCKED
        ), renewed AS (
            UPDATE dionysus.memories m SET reinforced_at = (SELECT greatest(said.reinforced_at, dionysus.clock_now()) FROM said)
              FROM near
             WHERE m.id = near.id AND m.id IN (SELECT id FROM got)
            RETURNING m.id, near.similarity, m.private_to IS NULL AS shared
        ), logged AS (
            INSERT INTO dionysus.decay_log (memory_id, event, inputs)
            SELECT r.id, 'mentioned', jsonb_build_object(
                       -- a shared memory renewed by someone's private words does not name them
                       'by_memory', CASE WHEN r.shared AND (SELECT said.private_to FROM said) IS NOT NULL THEN NULL ELSE fresh.memory_id END,
                       'similarity', round(r.similarity::numeric, 3), 'mention_similarity', cfg.mention_similarity)
              FROM renewed r
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM logged), (SELECT count(*) FROM due) - (SELECT count(*) FROM got) INTO k, held;
        n := n + k;
        IF held > 0 THEN
            later := later || fresh.memory_id;
        END IF;
    END LOOP;
    INSERT INTO dionysus.decay_mentions (memory_id)
    SELECT l.id FROM unnest(later) AS l(id) WHERE EXISTS (SELECT 1 FROM dionysus.memories m WHERE m.id = l.id)
    ON CONFLICT DO NOTHING;
    RETURN n;
END $$;
COMMENT ON FUNCTION dionysus_internal.decay_reinforce(dionysus.decay_config) IS
    'Resets the decay clock of older memories a newly made one repeats (at least mention_similarity near, as private or shared), logged as mentioned; a repeated memory another transaction holds keeps the mention queued for the next pass.';
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION dionysus_internal.decay_reinforce(dionysus.decay_config) SET search_path = pg_catalog, dionysus, %I',
                   (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'));
END $$;

-- #36: a time zone inferred from when they write, for someone who never said theirs.
-- A time zone inferred from when they write, for someone who never said theirs: their
-- longest silence in the day is taken as their night, and the zone is the one that puts its
-- middle at the middle of their quiet hours (their prior's). It is the phase of their day, not
-- a place (a night owl in UTC gets a zone where their night is night), and the weakest source:
-- their words or the configuration replace it. NULL until the rhythm shows a night (the
-- rhythm's confidence: rhythm_confident_after messages over rhythm_confident_days days; a
-- silence of at least five hours), or when the zone it gives is within an hour of theirs.
CREATE FUNCTION dionysus_internal.infer_time_zone(p dionysus.people) RETURNS text
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    a double precision[] := array_fill(0::float8, ARRAY[24]);
    total double precision := 0;
    r record;
    quiet_len int;
    quiet_mid double precision;
    run int := 0;
    best_len int := 0;
    best_end int;
    night_mid double precision;
    shift int;
    now_offset int;
    new_offset int;
    qs int := dionysus_internal.prior_setting(p, 'quiet_start_hour')::int;
    qe int := dionysus_internal.prior_setting(p, 'quiet_end_hour')::int;
BEGIN
    IF p.time_zone_source NOT IN ('default', 'inferred') OR p.first_message_at IS NULL
       OR dionysus.clock_now() - p.first_message_at < make_interval(days => dionysus_internal.proactive_setting('rhythm_confident_days')::int) THEN
        RETURN NULL;
    END IF;
    FOR r IN SELECT x.hour_of_week % 24 AS hr, sum(x.activity) AS n FROM dionysus.person_rhythm x
              WHERE x.person = p.person GROUP BY 1 LOOP
        a[r.hr + 1] := r.n;
        total := total + r.n;
    END LOOP;
    IF total < dionysus_internal.proactive_setting('rhythm_confident_after') THEN
        RETURN NULL;
    END IF;
    -- The longest run of silent hours (at most 2 % of what they wrote), around the clock.
    FOR i IN 0 .. 47 LOOP
        IF a[i % 24 + 1] <= 0.02 * total THEN
            run := run + 1;
            IF run > best_len AND run <= 24 THEN
                best_len := run;
                best_end := i;
            END IF;
        ELSE
            run := 0;
        END IF;
    END LOOP;
    IF best_len < 5 OR best_len >= 24 THEN
        RETURN NULL;
    END IF;
    night_mid := best_end - (best_len - 1) / 2.0;
    quiet_len := ((qe - qs) % 24 + 24) % 24;
    quiet_mid := qs + quiet_len / 2.0;
    shift := round(quiet_mid - night_mid)::int;
    shift := ((shift % 24) + 36) % 24 - 12;
    IF abs(shift) <= 1 THEN
        RETURN NULL;
    END IF;
    now_offset := round(extract(epoch FROM (dionysus.clock_now() AT TIME ZONE p.time_zone) - (dionysus.clock_now() AT TIME ZONE 'UTC')) / 3600)::int;
    new_offset := ((now_offset + shift) % 24 + 35) % 24 - 11;   -- in [-11, 12]: the Etc zones there are
    -- POSIX's sign is the other way round: Etc/GMT-1 is an hour ahead of UTC.
    RETURN CASE WHEN new_offset = 0 THEN 'Etc/UTC' WHEN new_offset > 0 THEN 'Etc/GMT-' || new_offset ELSE 'Etc/GMT+' || -new_offset END;
END $$;
COMMENT ON FUNCTION dionysus_internal.infer_time_zone(dionysus.people) IS
    'The time zone when they write suggests (for a person whose zone is the default or was inferred): the one that puts the middle of their longest daily silence at the middle of their quiet hours, as Etc/GMT±N; NULL while the rhythm shows no night yet or it is within an hour of theirs.';
GRANT EXECUTE ON FUNCTION dionysus_internal.infer_time_zone(dionysus.people) TO dionysus_driver;

-- #36: one phrasing of where a time zone came from, for why and status.
-- Where a person's time zone came from, as `dionysus why` and `dionysus status` say it.
CREATE FUNCTION dionysus_internal.time_zone_source_said(source text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE source WHEN 'config' THEN 'configured' WHEN 'words' THEN 'from their words'
                       WHEN 'inferred' THEN 'inferred from when they write' ELSE 'not known yet: UTC' END
$$;
COMMENT ON FUNCTION dionysus_internal.time_zone_source_said(text) IS
    'Where a person''s time zone came from (people.time_zone_source), in words: the one phrasing of why and status.';
GRANT EXECUTE ON FUNCTION dionysus_internal.time_zone_source_said(text) TO dionysus_driver;

-- #35: the grounding check's refusals are pruned with the rest of the past (prune_history).
CREATE OR REPLACE FUNCTION prune_history(batch integer DEFAULT 10000) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    cutoff timestamptz := now() - make_interval(secs => dionysus_internal.heartbeat_setting('retention_days') * 86400);
    pruned jsonb := '{}'::jsonb;
    n integer;
BEGIN
    IF batch IS NULL OR batch < 1 OR batch > 1000000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "batch": % is outside [1, 1000000]', batch USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM dionysus.energy_ledger WHERE id IN (SELECT id FROM dionysus.energy_ledger WHERE at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('energy_ledger', n);
    DELETE FROM dionysus.work_queue WHERE id IN (SELECT id FROM dionysus.work_queue WHERE status IN ('done', 'failed')
                                                   AND coalesce(completed_at, created_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('work_queue', n);
    DELETE FROM dionysus.outbox WHERE id IN (SELECT id FROM dionysus.outbox WHERE status IN ('sent', 'failed')
                                               AND coalesce(sent_at, created_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('outbox', n);
    DELETE FROM dionysus.heartbeat_log WHERE id IN (SELECT id FROM dionysus.heartbeat_log WHERE status IN ('finished', 'recovered')
                                                      AND coalesce(ended_at, started_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('heartbeat_log', n);
    DELETE FROM dionysus.memory_access_log WHERE ctid IN (SELECT ctid FROM dionysus.memory_access_log WHERE accessed_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('memory_access_log', n);
    DELETE FROM dionysus.embedding_cache WHERE (model, content_hash) IN
        (SELECT model, content_hash FROM dionysus.embedding_cache WHERE created_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('embedding_cache', n);
    -- The proactive mind's past: handled events, and evaluations (by the clock it ran on).
    DELETE FROM dionysus.events WHERE id IN (SELECT id FROM dionysus.events WHERE status NOT IN ('queued', 'scheduled')
                                               AND at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('events', n);
    DELETE FROM dionysus.contact_evaluations WHERE id IN (SELECT id FROM dionysus.contact_evaluations
                                                            WHERE at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('contact_evaluations', n);
    DELETE FROM dionysus.rule_firings WHERE id IN (SELECT id FROM dionysus.rule_firings
                                                     WHERE at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('rule_firings', n);
    -- What the grounding check refused (032): it explains recent refusals, and holds a model's
    -- words about someone, so it goes with the rest of the past.
    DELETE FROM dionysus.model_text_refusals WHERE id IN (SELECT id FROM dionysus.model_text_refusals
                                                            WHERE refused_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('model_text_refusals', n);
    RETURN pruned;
END $$;
COMMENT ON FUNCTION prune_history(integer) IS
    'Retention: deletes, at most batch rows per table, ledger entries, finished heartbeats, finished work, sent messages of the outbox, '
    'access-log rows, cache entries, handled events, contact evaluations, rule firings and the grounding check''s refusals older than '
    'heartbeat_config.retention_days (90). Never the message log or memories. '
    'The maintenance pass calls it; returns the counts.';

-- #35: three more prompts show their answer's shape in <placeholders>, never example values
-- (a person's own version stays active; the new one waits beside it).
SELECT dionysus_internal.ship_template('condense_memory',
    'levels (027): a memory''s summary and micro line, for tight contexts and for when it fades',
    'levels (027): a memory''s summary and micro line; its shape in placeholders a model cannot pass off as a level (#35)', 0.2,
    dionysus_internal.shipped_prompt('condense_memory', 3));
SELECT dionysus_internal.ship_template('heartbeat_censors',
    'lessons (028): what not to do again, after a message sent on your own was unwelcome',
    'lessons (028): what not to do again, after a message sent on your own was unwelcome; its shape in placeholders (#35)', 0.2,
    dionysus_internal.shipped_prompt('heartbeat_censors', 2));
SELECT dionysus_internal.ship_template('censor_from_words',
    'censors (022): a person''s "never …" read into a censor',
    'censors (022): a person''s "never …" read into a censor; its shape in placeholders, no example values (#35)', 0.1,
    dionysus_internal.shipped_prompt('censor_from_words', 2));

-- #36: a trusted rhythm needs less of a difference for a contact to wait for a better hour
-- (contact_gates): the busy parent of `scripts/bench.sh lives` is no longer written to at 20:00
-- when she is free from 21:00.
UPDATE proactive_config SET description = 'how much more available an hour ahead must be believed to wait for it (a trusted rhythm needs less: half at full confidence)'
 WHERE key = 'better_moment_margin';

-- #36 the tick, cheaper (behaviour unchanged): proactive_setting is the library's, reading
-- proactive_config once a transaction (a statement trigger makes the transaction read it again
-- after changing it); a known person's row is one statement; evaluate_contact reads the traits
-- once and the availability only for its words at a crossing; run_rules walks intents by index.
CREATE OR REPLACE FUNCTION dionysus_internal."proactive_setting"(
	"setting_key" TEXT /* core::option::Option<&str> */
) RETURNS double precision /* f64 */
STABLE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'proactive_setting_wrapper';
COMMENT ON FUNCTION dionysus_internal.proactive_setting(text) IS
    'One value of proactive_config (42704 naming an unknown key, 22004 a null one), read once a transaction: a change made in the same transaction is read at once, another''s from the next transaction.';
CREATE FUNCTION dionysus_internal."forget_proactive_settings"() RETURNS void
VOLATILE STRICT PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'forget_proactive_settings_wrapper';
COMMENT ON FUNCTION dionysus_internal.forget_proactive_settings() IS
    'Forgets the proactive_config values this transaction read (the trigger proactive_config_changed calls it).';
GRANT EXECUTE ON FUNCTION dionysus_internal.forget_proactive_settings() TO dionysus_driver;
-- (Its own definer's: a role allowed to tune the table need not be allowed the library's functions.)
CREATE FUNCTION dionysus_internal.proactive_config_changed() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dionysus_internal.forget_proactive_settings();
    RETURN NULL;
END $$;
COMMENT ON FUNCTION dionysus_internal.proactive_config_changed() IS 'Trigger: proactive_config changed, so this transaction reads its values again (proactive_setting).';
GRANT EXECUTE ON FUNCTION dionysus_internal.proactive_config_changed() TO dionysus_driver;
CREATE TRIGGER proactive_config_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dionysus.proactive_config
    FOR EACH STATEMENT EXECUTE FUNCTION dionysus_internal.proactive_config_changed();
CREATE OR REPLACE FUNCTION dionysus_internal.person_row(who text) RETURNS dionysus.people
    LANGUAGE plpgsql AS $$
DECLARE p dionysus.people;
BEGIN
    -- Known people are the common case: one statement for them.
    SELECT * INTO p FROM dionysus.people WHERE person = who FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO dionysus.people (person) VALUES (who) ON CONFLICT (person) DO NOTHING;
        SELECT * INTO p FROM dionysus.people WHERE person = who FOR UPDATE;
    END IF;
    RETURN p;
END $$;

-- #36 the tick, cheaper: the clock and a trait are PL/pgSQL (their plans kept; an SQL function
-- with a subquery is planned on every call).
CREATE OR REPLACE FUNCTION dionysus.clock_now() RETURNS timestamptz
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT frozen_at FROM dionysus.clock WHERE id = 1), now());
END $$;
CREATE OR REPLACE FUNCTION dionysus_internal.trait(name text) RETURNS double precision
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- (PL/pgSQL: its plan is kept, where an SQL function with a subquery is planned on every call.)
    RETURN coalesce((SELECT p.value FROM dionysus.personality p WHERE p.trait = name), 0.5);
END $$;

-- #35: the fallback reply says why the model could not answer (it said "can't reach" when the
-- model was only slow, or had answered with an echo of its prompt).
SELECT dionysus_internal.ship_template('chat_unavailable',
    'the honest reply when the language model cannot be reached (no model call)',
    'the honest reply when the language model cannot answer, saying why: unreachable, too slow, or an answer it cannot use (#35; no model call)', 0.0,
    dionysus_internal.shipped_prompt('chat_unavailable', 2));

-- Found in CI: a concept batch mixed people's private memories; the driver asks one circle at a time.
-- Each memory with its circle: the people whose private words it carries, sorted (NULL:
-- nobody's). A model call that reads several memories reads one circle's (the driver's concept
-- batches), so what one person said never shapes what is made of another's memory.
CREATE FUNCTION memory_circles(ids uuid[]) RETURNS TABLE (id uuid, content text, circle text[])
    LANGUAGE sql STABLE AS $$
    SELECT m.id, m.content, dionysus_internal.privacy_union(m.private_to, NULL)
      FROM unnest(ids) WITH ORDINALITY i(id, n) JOIN dionysus.memories m ON m.id = i.id ORDER BY i.n
$$;
COMMENT ON FUNCTION memory_circles(uuid[]) IS
    'The memories of ids, in that order, each with its circle: the people whose private words it carries, sorted (NULL: nobody''s). A model call reads one circle''s memories at a time.';
GRANT EXECUTE ON FUNCTION memory_circles(uuid[]) TO dionysus_driver;

-- #36: a person's answer to a contact, and a contact left unanswered, read the last contact sent
-- to them through every evaluation of theirs kept (a quarter-hourly row for retention_days):
-- 10 ms at 13 weeks. The contacts sent, by person, newest first.
CREATE INDEX contact_evaluations_messages ON contact_evaluations (person, decided_at DESC, recorded_at DESC) WHERE decision = 'message';

-- #36 the tick, cheaper (behaviour unchanged): what a person's rhythm says of an hour is the
-- library's (rhythm_at); its loops were most of availability, run for each person a tick
-- evaluates and for each hour of the better moment's look-ahead.
CREATE FUNCTION dionysus_internal."rhythm_at"(
	"hours" smallint[], /* Vec < i16 > */
	"activity" double precision[], /* Vec < f64 > */
	"misses" double precision[], /* Vec < f64 > */
	"hour_of_week" INT, /* i32 */
	"weekend" bool /* bool */
) RETURNS double precision[] /* Vec < f64 > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rhythm_at_wrapper';
COMMENT ON FUNCTION dionysus_internal.rhythm_at(smallint[], double precision[], double precision[], integer, boolean) IS
    'What a person''s rhythm rows (hours of the week, activity, misses, in one order) say of one hour of their week: {learned in [0, 1], contacts missed there}. availability blends it with the prior.';
GRANT EXECUTE ON FUNCTION dionysus_internal.rhythm_at(smallint[], double precision[], double precision[], integer, boolean) TO dionysus_driver;
CREATE OR REPLACE FUNCTION dionysus_internal.availability(who text, at timestamptz)
    RETURNS TABLE (belief double precision, confidence double precision, learned double precision, prior double precision)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    p dionysus.people;
    weekend boolean;
    local_hour int;
    hours smallint[];
    activity double precision[];
    misses double precision[];
    total double precision;
    -- What their rhythm says of this hour (the library's rhythm_at): {learned, missed}.
    here double precision[];
    days_known double precision;
BEGIN
    SELECT * INTO p FROM dionysus.people x WHERE x.person = who;
    p.time_zone := coalesce(p.time_zone, 'UTC');
    local_hour := extract(hour FROM at AT TIME ZONE p.time_zone)::int;
    weekend := extract(isodow FROM at AT TIME ZONE p.time_zone) > 5;
    prior := CASE WHEN dionysus_internal.in_quiet_hours(p, local_hour) THEN dionysus_internal.prior_setting(p, 'prior_quiet')
                  WHEN NOT weekend AND local_hour >= dionysus_internal.prior_setting(p, 'workday_start_hour')
                       AND local_hour < dionysus_internal.prior_setting(p, 'workday_end_hour')
                       THEN dionysus_internal.prior_setting(p, 'prior_workday')
                  ELSE dionysus_internal.prior_setting(p, 'prior_free') END;
    -- Their (at most 168) hours in one read; the three arrays in one order (one aggregation).
    SELECT array_agg(x.hour_of_week), array_agg(x.activity), array_agg(x.misses), sum(x.activity)
      INTO hours, activity, misses, total
      FROM dionysus.person_rhythm x WHERE x.person = who;
    here := dionysus_internal.rhythm_at(hours, activity, misses, dionysus_internal.hour_of_week(at, p.time_zone), weekend);
    learned := coalesce(here[1], 0); -- (NULL: no rows, nothing learned)
    days_known := greatest(0, extract(epoch FROM at - coalesce(p.first_message_at, at)) / 86400.0);
    confidence := least(1.0, coalesce(total, 0) / dionysus_internal.proactive_setting('rhythm_confident_after'))
                  * least(1.0, days_known / dionysus_internal.proactive_setting('rhythm_confident_days'))
                  * power(0.5, least(1000, greatest(0, extract(epoch FROM at - coalesce(p.last_message_at, at)) / 86400.0)
                                           / dionysus_internal.proactive_setting('rhythm_confidence_days')));
    belief := (confidence * learned + (1 - confidence) * prior)
              * (1 - least(0.8, dionysus_internal.proactive_setting('miss_weight') * coalesce(here[2], 0)));
    RETURN NEXT;
END $$;

-- Every foreign key indexed (001): deleting a row a key points at (a person leaving, retention,
-- decay) read the referencing table once for each row deleted; forget_person of 2,500 turns in a
-- log of 50,000 took 28 s, most of it reading the log twice a turn (prev_message_id, reply_to).
CREATE INDEX memories_superseded_by ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX facts_source_episode ON facts (source_episode) WHERE source_episode IS NOT NULL;
CREATE INDEX triples_memory_id ON triples (memory_id) WHERE memory_id IS NOT NULL;
CREATE INDEX heartbeat_log_memory_id ON heartbeat_log (memory_id) WHERE memory_id IS NOT NULL;
CREATE INDEX messages_prev_message_id ON messages (prev_message_id) WHERE prev_message_id IS NOT NULL;
CREATE INDEX messages_reply_to ON messages (reply_to) WHERE reply_to IS NOT NULL;
CREATE INDEX contact_evaluations_outbox_id ON contact_evaluations (outbox_id) WHERE outbox_id IS NOT NULL;
CREATE INDEX north_stars_memory_id ON north_stars (memory_id);
CREATE INDEX north_stars_origin_message_id ON north_stars (origin_message_id) WHERE origin_message_id IS NOT NULL;
CREATE INDEX feedback_about_message_id ON feedback (about_message_id) WHERE about_message_id IS NOT NULL;
CREATE INDEX feedback_about_outbox_id ON feedback (about_outbox_id) WHERE about_outbox_id IS NOT NULL;
CREATE INDEX objectives_origin_message_id ON objectives (origin_message_id) WHERE origin_message_id IS NOT NULL;
CREATE INDEX dreams_work_id ON dreams (work_id) WHERE work_id IS NOT NULL;
CREATE INDEX proposals_dream_id ON proposals (dream_id) WHERE dream_id IS NOT NULL;
CREATE INDEX feedback_about_proposal_id ON feedback (about_proposal_id) WHERE about_proposal_id IS NOT NULL;
CREATE INDEX person_prompt_templates_proposal_id ON person_prompt_templates (proposal_id) WHERE proposal_id IS NOT NULL;
CREATE INDEX feedback_about_mirror_item_id ON feedback (about_mirror_item_id) WHERE about_mirror_item_id IS NOT NULL;
CREATE INDEX reindex_extractions_message_id ON reindex_extractions (message_id);
CREATE INDEX person_relations_message_id ON person_relations (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX person_sources_message_id ON person_sources (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX open_threads_closed_by ON open_threads (closed_by) WHERE closed_by IS NOT NULL;
CREATE INDEX open_threads_episode_id ON open_threads (episode_id) WHERE episode_id IS NOT NULL;
CREATE INDEX open_threads_opened_by ON open_threads (opened_by) WHERE opened_by IS NOT NULL;
CREATE INDEX working_memory_sessions_episode_id ON working_memory_sessions (episode_id) WHERE episode_id IS NOT NULL;
CREATE INDEX procedure_activations_message_id ON procedure_activations (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX procedure_activations_episode_id ON procedure_activations (episode_id) WHERE episode_id IS NOT NULL;
CREATE INDEX person_signals_person ON person_signals (person);
CREATE INDEX context_archetypes_budget_task ON context_archetypes (budget_task);

-- A turn's context read every triple about 'user' (all people's facts about themselves) and then
-- kept the ones its person may see, twice a turn: 3.6-5.7 ms a call at 14,000 triples of 50 people,
-- 49-59 ms at 100,000 of 250.
-- triples_seen finds the visible ones by index.
DROP INDEX triples_object;
CREATE INDEX triples_subject_seen ON triples (subject_id, (coalesce(private_to, '{}'::text[])));
CREATE INDEX triples_object_seen ON triples (object_id, (coalesce(private_to, '{}'::text[])));
-- The triples about these entities that a person may see, found by index (001): by subject and
-- by object, each under the two privacy keys visible_to lets through (nobody's, theirs alone; a
-- stored private_to is NULL or sorted, distinct names: add_triple), checked by visible_to again.
-- (A row written otherwise, '{a,a}', could only be missed here, never shown to another.)
CREATE FUNCTION dionysus_internal.triples_seen(ents uuid[], viewer text) RETURNS SETOF dionysus.triples
    LANGUAGE sql STABLE AS $$
    SELECT u.* FROM (
        SELECT t.* FROM dionysus.triples t
         WHERE t.subject_id = ANY (ents) AND coalesce(t.private_to, '{}'::text[]) IN ('{}'::text[], ARRAY[viewer])
        UNION
        SELECT t.* FROM dionysus.triples t
         WHERE t.object_id = ANY (ents) AND coalesce(t.private_to, '{}'::text[]) IN ('{}'::text[], ARRAY[viewer])) u
     WHERE dionysus_internal.visible_to(u.private_to, viewer)
$$;
COMMENT ON FUNCTION dionysus_internal.triples_seen(uuid[], text) IS
    'The triples in which any of these entities is subject or object that the person may see (visible_to), found by index: a turn never reads other people''s private triples.';
GRANT EXECUTE ON FUNCTION dionysus_internal.triples_seen(uuid[], text) TO dionysus_driver;
CREATE OR REPLACE FUNCTION chat_context(message_id uuid, max_memories integer DEFAULT 8, max_turns integer DEFAULT 12,
                             use_archetype boolean DEFAULT true, budget integer DEFAULT NULL)
    RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    m dionysus.messages;
    turns jsonb;
    in_view uuid[];
    mems jsonb;
    words text[];
    grams text[];
    ents uuid[];
    trips jsonb;
    viewer text;
    shape jsonb;
    threshold double precision;
    depth integer := 1;
    hop integer;
    wmem jsonb;
    -- A context with memories is a turn of the conversation (the extraction's asks for none),
    -- whatever an archetype narrows them to.
    steps boolean := coalesce(max_memories, 0) > 0;
    -- The budget's task (027): an archetype's, else casual chat.
    task text := 'chat';
BEGIN
    IF message_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "message_id" must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF max_memories IS NULL OR max_memories < 0 OR max_memories > 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_memories": % is outside [0, 100]', max_memories USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_turns IS NULL OR max_turns < 0 OR max_turns > 200 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_turns": % is outside [0, 200]', max_turns USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF budget IS NOT NULL AND (budget < 100 OR budget > 200000) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "budget": % tokens is outside [100, 200000]', budget USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO m FROM dionysus.messages x WHERE x.id = chat_context.message_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "message_id": no message with id %', message_id USING ERRCODE = 'no_data_found';
    END IF;
    viewer := coalesce(m.person, 'nobody:');
    -- The kind of message decides the shape of its context (017): its archetype's turns,
    -- memories, similarity threshold and triple depth, within the arguments (the operator's
    -- caps); the arguments alone when no archetype is near enough.
    IF use_archetype THEN
        shape := dionysus.match_archetype((SELECT x.embedding FROM dionysus.memories x WHERE x.id = m.memory_id), m.person);
        IF shape ->> 'name' IS NOT NULL THEN
            max_turns := least(max_turns, (shape ->> 'turns')::int);
            max_memories := least(max_memories, (shape ->> 'memories')::int);
            threshold := (shape ->> 'similarity_threshold')::float8;
            depth := (shape ->> 'triple_depth')::int;
            task := coalesce((SELECT a.budget_task FROM dionysus.context_archetypes a
                               WHERE a.name = shape ->> 'name' AND a.active AND (a.person IS NULL OR a.person = m.person)
                               ORDER BY a.person NULLS LAST LIMIT 1), task);
        END IF;
    END IF;

    -- The turns before it in its channel: a lived turn's are the lived ones and its person's own
    -- imported history; an imported turn's, its person's imported turns only (another person's
    -- import may use the same channel name). Someone else's words in a history are marked so.
    -- A turn's shorter levels are its memory's (027; a memory that faded already is one).
    SELECT coalesce(jsonb_agg(jsonb_build_object('role', CASE WHEN t.is_bot THEN 'assistant' WHEN t.other THEN 'other' ELSE 'user' END,
                                                 'content', t.content, 'at', t.created_at, 'proactive', t.is_proactive,
                                                 'summary', t.summary, 'micro', t.micro)
                              ORDER BY t.created_at, t.id), '[]'::jsonb),
           array_agg(t.memory_id) FILTER (WHERE t.memory_id IS NOT NULL)
      INTO turns, in_view
      FROM (SELECT x.id, x.is_bot, x.created_at, x.is_proactive, x.memory_id,
                   CASE WHEN x.import_id IS NULL THEN x.content ELSE coalesce(mm.content, x.content) END AS content,
                   x.import_id IS NOT NULL AND mm.metadata ->> 'role' = 'other' AS other,
                   CASE mm.stage WHEN 'fresh' THEN mm.summary WHEN 'fading' THEN mm.content END AS summary,
                   CASE mm.stage WHEN 'distant' THEN mm.content ELSE mm.micro END AS micro
              FROM dionysus.messages x
              LEFT JOIN dionysus.memories mm ON mm.id = x.memory_id
             WHERE x.platform = m.platform AND x.channel_id = m.channel_id AND x.id <> m.id
               AND (x.created_at, x.id) < (m.created_at, m.id)
               AND ((x.import_id IS NULL AND m.import_id IS NULL) OR (x.import_id IS NOT NULL AND x.person = m.person))
             ORDER BY x.created_at DESC, x.id DESC LIMIT max_turns) t;
    in_view := coalesce(in_view, '{}') || m.memory_id;

    IF max_memories > 0 THEN
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', r.memory_id, 'content', r.content, 'type', r.type, 'created_at', r.created_at,
                   'score', round(r.score::numeric, 4), 'found_by', r.found_by,
                   'fact', f.memory_id IS NOT NULL, 'subject', f.subject,
                   'role', x.role, 'stage', mm.stage, 'summary', mm.summary, 'micro', mm.micro) ORDER BY r.score DESC), '[]'::jsonb)
          INTO mems
          FROM (SELECT * FROM dionysus.recall(m.content, max_memories + cardinality(in_view), person => viewer)
                 WHERE NOT (memory_id = ANY(in_view))
                   -- What meaning alone found must be near enough; what words or links found stays.
                   AND (threshold IS NULL OR found_by <> 'vector' OR vector_score >= threshold)
                 ORDER BY score DESC LIMIT max_memories) r
          LEFT JOIN dionysus.facts f ON f.memory_id = r.memory_id
          LEFT JOIN dionysus.memories mm ON mm.id = r.memory_id
          LEFT JOIN LATERAL (SELECT CASE WHEN y.is_bot THEN 'assistant' ELSE 'user' END AS role
                               FROM dionysus.messages y WHERE y.memory_id = r.memory_id LIMIT 1) x ON true;
    ELSE
        mems := '[]'::jsonb;
    END IF;
    -- The session's working memory (025): a context with memories is a turn of the conversation
    -- and steps it; the extraction's (no memories) only reads it.
    wmem := dionysus_internal.working_memory_turn(m, mems, in_view, steps);

    -- Entities named in the message: its words, word pairs and triples, matched against the
    -- entities' normalised names; plus the subjects of recalled facts, and the person.
    words := array(SELECT w FROM regexp_split_to_table(lower(m.content), '[^[:alnum:]_''-]+') w WHERE w <> '');
    grams := words
          || array(SELECT words[i] || ' ' || words[i + 1] FROM generate_series(1, cardinality(words) - 1) i)
          || array(SELECT words[i] || ' ' || words[i + 1] || ' ' || words[i + 2] FROM generate_series(1, cardinality(words) - 2) i)
          || array(SELECT lower(btrim(e ->> 'subject')) FROM jsonb_array_elements(mems) e WHERE e ->> 'subject' IS NOT NULL)
          || ARRAY['user'];
    ents := array(SELECT id FROM dionysus.entities WHERE name_key = ANY(grams));
    -- Deeper archetypes follow the graph further: each hop adds the other ends of the triples found.
    FOR hop IN 2..depth LOOP
        ents := ents || array(SELECT DISTINCT CASE WHEN t.subject_id = ANY(ents) THEN t.object_id ELSE t.subject_id END
                                FROM dionysus_internal.triples_seen(ents, viewer) t
                               LIMIT 50);
    END LOOP;
    IF depth = 0 THEN
        ents := '{}';
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_build_object('subject', s.name, 'predicate', t.predicate, 'object', o.name,
                                                 'confidence', t.confidence) ORDER BY t.confidence DESC, t.updated_at DESC), '[]'::jsonb)
      INTO trips
      FROM (SELECT * FROM dionysus_internal.triples_seen(ents, viewer)
             ORDER BY confidence DESC, updated_at DESC LIMIT 20) t
      JOIN dionysus.entities s ON s.id = t.subject_id JOIN dionysus.entities o ON o.id = t.object_id;

    -- Within the task's budget (027): each item at the richest level that fits, the rest cut,
    -- and what was included and cut said under context_budget.
    RETURN dionysus_internal.fit_task_context(jsonb_build_object(
        'message', jsonb_build_object('id', m.id, 'content', m.content, 'at', m.created_at, 'channel_id', m.channel_id,
                                      'platform', m.platform, 'person', m.person),
        'now', now(),
        'recent_turns', turns,
        'memories', mems,
        'triples', trips,
        -- The people in their life the message names, with how they relate (023_people.sql).
        'people', CASE WHEN m.person IS NULL THEN '[]'::jsonb ELSE dionysus_internal.people_in_context(m.person, grams) END,
        'goals', coalesce((SELECT jsonb_agg(jsonb_build_object('id', g.id, 'title', g.title) ORDER BY g.last_touched DESC)
                             FROM dionysus.goals g WHERE g.priority = 'active' AND dionysus_internal.visible_to(g.private_to, viewer)),
                          '[]'::jsonb),
        -- What matters most to them (017), in every context; and what they are working toward.
        'north_stars', coalesce((SELECT jsonb_agg(n.content ORDER BY n.created_at) FROM dionysus.person_north_stars(viewer) n), '[]'::jsonb),
        'objectives', coalesce((SELECT jsonb_agg(jsonb_build_object('description', o.description, 'saliency', round(o.saliency::numeric, 2)))
                                  FROM (SELECT * FROM dionysus.person_objectives(viewer) LIMIT 5) o), '[]'::jsonb),
        'archetype', shape,
        -- What this session holds in mind: its focus, open threads, and what earlier turns
        -- brought up that this one did not (NULL outside a person's open session).
        'working_memory', wmem), task, budget);
END $$;

-- CREATE OR REPLACE dropped chat_context's settings: pgvector's schema back on its search_path (900_api.sql).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION dionysus.chat_context(uuid, integer, integer, boolean, integer) SET search_path = pg_catalog, dionysus, %I',
                   (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'));
END $$;

-- What runs every few seconds over history, by index: retention's pass (every 30 s) read each
-- history table whole, the scheduler's tick (every 10 s) every episode and every heartbeat, and
-- a message to a person (their latest turns) the message log.
CREATE INDEX energy_ledger_at ON energy_ledger (at);
CREATE INDEX heartbeat_log_open ON heartbeat_log (heartbeat_number) WHERE status IN ('in_flight', 'committed');
CREATE INDEX heartbeat_log_done ON heartbeat_log ((coalesce(ended_at, started_at))) WHERE status IN ('finished', 'recovered');
CREATE INDEX work_queue_done ON work_queue ((coalesce(completed_at, created_at))) WHERE status IN ('done', 'failed');
CREATE INDEX outbox_done ON outbox ((coalesce(sent_at, created_at))) WHERE status IN ('sent', 'failed');
CREATE INDEX events_handled ON events (at) WHERE status NOT IN ('queued', 'scheduled');
CREATE INDEX rule_firings_at ON rule_firings (at);
CREATE INDEX episodes_unsummarized ON episodes (ended_at) WHERE summary IS NULL AND ended_at IS NOT NULL AND memory_count > 0;
CREATE INDEX messages_person_at ON messages (person, created_at DESC);
CREATE INDEX contact_evaluations_at ON contact_evaluations (at);

-- Last of all (keep it last: a section added after it must come before it): the tables this
-- update created are marked for pg_dump as a fresh install marks them (sql/030_backup.sql), the
-- shipped ones with their restore trigger. Idempotent for the tables marked before.
SELECT dionysus_internal.mark_for_dump(ARRAY['dionysus.agent_state', 'dionysus.censor_config', 'dionysus.clock', 'dionysus.contact_weights', 'dionysus.context_archetypes', 'dionysus.context_budgets', 'dionysus.cue_phrases', 'dionysus.decay_config', 'dionysus.embedding_store', 'dionysus.event_patterns', 'dionysus.heartbeat_config', 'dionysus.heartbeat_state', 'dionysus.lexicon_stats', 'dionysus.mind_rules', 'dionysus.personality', 'dionysus.proactive_config', 'dionysus.prompt_templates', 'dionysus.recall_config', 'dionysus.relation_words']::regclass[]);
