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
        -- Intervals as seconds: their text form ("00:37:30.011953") is not for people.
        'waited_s', (SELECT jsonb_build_object('work', extract(epoch FROM h.oldest_pending_work), 'stale', extract(epoch FROM m.oldest_stale_age))
                       FROM dionysus.heartbeat_health h, dionysus.memory_health m),
        'now', now());
END $$;
COMMENT ON FUNCTION status_report() IS
    'What `dionysus status` shows: {hb: heartbeat_health''s row, goals: [{title, priority}] (the 8 first active and queued), '
    'beats: [{n, status, started, energy_start, energy_end, actions: [name], narrative (140 characters)}] (the last 5 heartbeats), '
    'queue: {status: count} of the work queue, messages: {total, last}, memory: memory_health''s row, mind: proactive_health''s row, '
    'imports: import_status(3), waited_s: {work, stale} (the oldest pending work and stale neighbourhood, in seconds), now}. '
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
        -- The beliefs carry their confidence already (a prior, or what was learned).
        better := later.belief >= av.belief + dionysus_internal.proactive_setting('better_moment_margin');
        gates := gates || jsonb_build_object('gate', 'better_moment', 'passed', NOT better,
            'detail', CASE WHEN better THEN format('likely more available around %s:00 their time (%s against %s now)',
                                                   extract(hour FROM (t + make_interval(hours => later.k)) AT TIME ZONE p.time_zone),
                                                   round(later.belief::numeric, 2), round(av.belief::numeric, 2))
                           ELSE format('no clearly better hour in the next %s', dionysus_internal.proactive_setting('better_moment_hours')) END);
    END IF;
    RETURN gates;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.evaluate_contact(who text) RETURNS dionysus.contact_evaluations
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    p dionysus.people;
    a dionysus.agent_state;
    av record;
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
    FOR w IN SELECT * FROM dionysus.contact_weights ORDER BY input LOOP
        v := CASE w.input
                 WHEN 'social_debt' THEN p.social_debt
                 WHEN 'acquaintance' THEN 1.0 / (1 + p.turns / dionysus_internal.proactive_setting('acquaintance_turns'))
                 WHEN 'task_pressure' THEN task
                 WHEN 'curiosity' THEN p.curiosity END;
        -- What their answers taught about this reason to write (015's person_contact_weights).
        factor := coalesce((SELECT f.factor FROM dionysus.person_contact_weights f WHERE f.person = who AND f.input = w.input), 1);
        ins := ins || jsonb_build_object('input', w.input, 'value', round(v::numeric, 3), 'weight', round((w.weight * factor)::numeric, 3),
                                         'learned_factor', round(factor::numeric, 3),
                                         'contribution', round((v * w.weight * factor)::numeric, 3), 'why', w.description);
        total := total + v * w.weight * factor;
    END LOOP;
    -- Personality, vitality and their state move the threshold: shy waits longer, independent
    -- less; a tired agent needs more to act; restraint (the night rule) holds back; an
    -- empathetic one holds back after cold replies.
    threshold := dionysus_internal.proactive_setting('contact_threshold')
                 * (1 + 0.5 * (dionysus_internal.trait('shyness') - 0.5))
                 * (1 - 0.5 * (dionysus_internal.trait('independence') - 0.5))
                 * (1 + 0.3 * (1 - a.vitality))
                 * (1 + p.restraint)
                 * (1 + 0.5 * dionysus_internal.trait('empathy') * greatest(0, -p.mood));

    -- The gates (contact_gates), each written down whether it passed or not.
    SELECT * INTO av FROM dionysus_internal.availability(who, t);
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
    words := words || CASE e.outcome
        WHEN 'below' THEN '; nothing to say yet'
        WHEN 'signal' THEN '; an urge, not yet enough to write'
        WHEN 'gated' THEN '; enough to write, held back by ' || array_to_string(blocked, ', ')
        ELSE format('; %s — the person was likely available (%s, confidence %s)',
                    'over the threshold', round(av.belief::numeric, 2), round(av.confidence::numeric, 2)) END;
    INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, threshold_parts, gates, outcome, explanation)
    VALUES (who, t, ins, total, threshold,
            jsonb_build_object('base', dionysus_internal.proactive_setting('contact_threshold'), 'shyness', dionysus_internal.trait('shyness'),
                               'independence', dionysus_internal.trait('independence'), 'vitality', round(a.vitality::numeric, 3),
                               'restraint', round(p.restraint::numeric, 3), 'mood', round(p.mood::numeric, 3),
                               'empathy', dionysus_internal.trait('empathy')),
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
    t timestamptz := dionysus.clock_now();
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
    FOR who IN SELECT x.person FROM dionysus.people x WHERE x.last_message_at IS NOT NULL ORDER BY x.person LOOP
        n_fired := n_fired + dionysus_internal.run_rules('tick', who, hours);
    END LOOP;
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
           tick_interval_seconds = interval_s, last_tick_at = t, last_tick_real_at = now(),
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
    SELECT CASE WHEN qs > qe THEN local_hour >= qs OR local_hour < qe ELSE local_hour >= qs AND local_hour < qe END
      FROM (SELECT dionysus_internal.prior_setting(p, 'quiet_start_hour')::int AS qs, dionysus_internal.prior_setting(p, 'quiet_end_hour')::int AS qe) q
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
    -- One pass over their (at most 168) hours: each profile's value here and its peak.
    WITH r AS (SELECT x.hour_of_week AS how, x.hour_of_week % 24 AS hr, x.hour_of_week >= 120 AS we, x.activity, x.misses
                 FROM dionysus.person_rhythm x WHERE x.person = who),
         by_hour AS (SELECT hr, we, sum(activity) AS n FROM r GROUP BY hr, we),
         near AS (SELECT d.hr, (SELECT sum(b.n * CASE WHEN b.hr = d.hr THEN 1.0 ELSE 0.5 END) FROM by_hour b
                                 WHERE b.hr IN (d.hr, (d.hr + 23) % 24, (d.hr + 1) % 24)) AS all_n,
                         (SELECT sum(b.n * CASE WHEN b.hr = d.hr THEN 1.0 ELSE 0.5 END) FROM by_hour b
                           WHERE b.we = weekend AND b.hr IN (d.hr, (d.hr + 23) % 24, (d.hr + 1) % 24)) AS kind_n
                    FROM generate_series(0, 23) d(hr))
    SELECT (SELECT max(activity) FROM r), (SELECT sum(activity) FROM r),
           (SELECT coalesce(sum(activity * CASE WHEN how = h THEN 1.0 ELSE 0.5 END), 0) FROM r
             WHERE how IN (h, (h + 167) % 168, (h + 1) % 168)),
           (SELECT max(all_n) FROM near), (SELECT coalesce(all_n, 0) FROM near WHERE near.hr = hod),
           (SELECT max(kind_n) FROM near), (SELECT coalesce(kind_n, 0) FROM near WHERE near.hr = hod),
           (SELECT coalesce(sum(misses) FILTER (WHERE how = h), 0) + 0.25 * coalesce(sum(misses) FILTER (WHERE hr = hod AND how <> h), 0) FROM r)
      INTO week_peak, total, week_here, day_peak, day_here, kind_peak, kind_here, missed;
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
                         CASE p.time_zone_source WHEN 'config' THEN 'configured' WHEN 'words' THEN 'from their words'
                                                 WHEN 'inferred' THEN 'guessed' ELSE 'none known yet' END,
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
        -- The beliefs carry their confidence already (a prior, or what was learned).
        better := later.belief >= av.belief + dionysus_internal.proactive_setting('better_moment_margin');
        gates := gates || jsonb_build_object('gate', 'better_moment', 'passed', NOT better,
            'detail', CASE WHEN better THEN format('likely more available around %s:00 their time (%s against %s now)',
                                                   extract(hour FROM (t + make_interval(hours => later.k)) AT TIME ZONE p.time_zone),
                                                   round(later.belief::numeric, 2), round(av.belief::numeric, 2))
                           ELSE format('no clearly better hour in the next %s', dionysus_internal.proactive_setting('better_moment_hours')) END);
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

CREATE OR REPLACE FUNCTION dionysus_internal.run_rules(on_trigger text, who text, hours double precision DEFAULT 0, ev dionysus.events DEFAULT NULL)
    RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    vals jsonb := dionysus_internal.rule_values(who, t, ev);
    r dionysus.mind_rules;
    rv jsonb;
    fired_rules dionysus.mind_rules[] := '{}';
    it jsonb;
    fired jsonb := '[]'::jsonb;
    effects jsonb;
    target text;
    before double precision;
    after double precision;
    w double precision;
    made uuid;
    requested boolean := false;
    has_person boolean := who IS NOT NULL AND vals ? 'person.turns';
    -- The values adjustments move, kept here and written back once.
    st jsonb;
    i integer;
BEGIN
    FOR r IN SELECT * FROM dionysus.mind_rules m
              WHERE m.status = 'active' AND m.trigger = on_trigger
                AND (m.person IS NULL OR m.person = who) AND (m.ends_at IS NULL OR m.ends_at > t)
              ORDER BY m.weight DESC, m.id LOOP
        rv := vals || jsonb_build_object('rule.hours_since_fired', coalesce(round((extract(epoch FROM t - r.last_used_at) / 3600)::numeric, 2), 1000000),
                                         'rule.times_fired', r.use_count);
        IF dionysus_internal.rule_holds(r.condition, rv) THEN
            fired_rules := fired_rules || r;
        END IF;
    END LOOP;
    IF cardinality(fired_rules) = 0 THEN
        RETURN 0;
    END IF;
    -- Lock order: the goals lock (4) before the person's row (6), if a rule will make an objective.
    IF EXISTS (SELECT 1 FROM unnest(fired_rules) f, jsonb_array_elements(f.intents) x WHERE x ? 'create_objective') THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    END IF;
    -- Adjustments first, each scaled by the rule's weight, in weight order, on the values as
    -- the previous adjustment left them; written back in one statement.
    SELECT jsonb_build_object('person.social_debt', x.social_debt, 'person.curiosity', x.curiosity, 'person.task_pressure', x.task_pressure,
                              'person.restraint', x.restraint)
      INTO st FROM dionysus.people x WHERE x.person = who;
    st := coalesce(st, '{}'::jsonb) || jsonb_build_object('agent.vitality', (SELECT vitality FROM dionysus.agent_state WHERE id = 1));
    FOREACH r IN ARRAY fired_rules LOOP
        effects := '[]'::jsonb;
        w := r.weight;
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'adjust' LOOP
            target := it ->> 'adjust';
            IF NOT st ? target THEN
                CONTINUE; -- a person's value, and no person
            END IF;
            before := (st ->> target)::float8;
            after := least(1, greatest(0, CASE
                WHEN it ? 'by' THEN before + w * (it ->> 'by')::float8
                WHEN it ? 'to' THEN before + w * ((it ->> 'to')::float8 - before)
                -- (The exponent bounded: exp() raises an error where it underflows, so a tick after
                -- two months without one, the server down, failed, and failed again every tick.)
                ELSE (it ->> 'toward')::float8 + (before - (it ->> 'toward')::float8)
                     * exp(-least(700, greatest(-700, w * (it ->> 'per_hour')::float8 * hours))) END));
            st := jsonb_set(st, ARRAY[target], to_jsonb(after));
            effects := effects || jsonb_build_object('adjust', target, 'before', round(before::numeric, 4), 'after', round(after::numeric, 4));
        END LOOP;
        fired := fired || jsonb_build_object('rule', r.id, 'name', r.name, 'weight', round(r.weight::numeric, 3), 'effects', effects);
    END LOOP;
    IF has_person THEN
        UPDATE dionysus.people x SET social_debt = (st ->> 'person.social_debt')::float8, curiosity = (st ->> 'person.curiosity')::float8,
               task_pressure = (st ->> 'person.task_pressure')::float8, restraint = (st ->> 'person.restraint')::float8
         WHERE x.person = who;
    END IF;
    UPDATE dionysus.agent_state SET vitality = (st ->> 'agent.vitality')::float8 WHERE id = 1 AND vitality <> (st ->> 'agent.vitality')::float8;
    -- Then what the rules make: objectives, scheduled events, a contact the person asked for.
    FOR i IN 1 .. cardinality(fired_rules) LOOP
        r := fired_rules[i];
        effects := fired[i - 1] -> 'effects';
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'create_objective' LOOP
            IF has_person THEN
                SELECT g.id INTO made FROM dionysus.goals g
                 WHERE g.title = btrim(it ->> 'create_objective') AND g.private_to = ARRAY[who] AND g.priority IN ('active', 'queued');
                IF made IS NULL THEN
                    made := dionysus.create_goal(btrim(it ->> 'create_objective'), 'set up by the rule "' || r.name || '"', 'user_request',
                                                 private_to => ARRAY[who]);
                END IF;
                effects := effects || jsonb_build_object('create_objective', it ->> 'create_objective', 'goal_id', made);
            END IF;
        END LOOP;
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'schedule_event' LOOP
            INSERT INTO dionysus.events (source, type, priority, person, payload, at, status)
            VALUES ('internal', it ->> 'schedule_event', coalesce((it ->> 'priority')::int, 2), who,
                    jsonb_build_object('rule', r.id), t + make_interval(secs => (it ->> 'in_minutes')::float8 * 60), 'scheduled');
            effects := effects || jsonb_build_object('schedule_event', it ->> 'schedule_event', 'in_minutes', (it ->> 'in_minutes')::float8);
        END LOOP;
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'request_contact' LOOP
            IF has_person AND NOT requested THEN
                requested := true;
                UPDATE dionysus.people x SET contact_request = jsonb_build_object('about', it ->> 'request_contact', 'rule', r.id, 'rule_name', r.name, 'at', t),
                       next_check_at = t
                 WHERE x.person = who;
                effects := effects || jsonb_build_object('request_contact', it ->> 'request_contact');
            END IF;
        END LOOP;
        fired := jsonb_set(fired, ARRAY[(i - 1)::text, 'effects'], effects);
    END LOOP;
    -- Used: learned rules strengthen; every rule counts its use; a one-off is done.
    UPDATE dionysus.mind_rules m SET use_count = m.use_count + 1, last_used_at = t,
           status = CASE WHEN m.once THEN 'done' ELSE m.status END, ended_at = CASE WHEN m.once THEN t ELSE m.ended_at END,
           weight = CASE WHEN m.learned THEN least(1, m.weight + dionysus_internal.proactive_setting('rule_strengthen') * (1 - m.weight)) ELSE m.weight END
     WHERE m.id IN (SELECT f.id FROM unnest(fired_rules) f);
    INSERT INTO dionysus.rule_firings (at, person, trigger, event_id, inputs, fired)
    VALUES (t, who, on_trigger, ev.id, vals, fired);
    RETURN cardinality(fired_rules);
END $$;
COMMENT ON FUNCTION dionysus_internal.run_rules(text, text, double precision, dionysus.events) IS
    'Runs the active rules of a trigger for a person: conditions read once, intents applied in a fixed order (adjust, create_objective, schedule_event, request_contact), the pass logged, learned rules strengthened.';

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

INSERT INTO prompt_templates (key, version, temperature, note, active, template)
VALUES ('rule_from_words', 2, 0.0, 'proactive mind: a rule the person asked for in plain words, as data; once, repeating or until a date, as they said', false,
        dionysus_internal.shipped_prompt('rule_from_words', 2));
UPDATE prompt_templates SET active = false WHERE key = 'rule_from_words' AND version <> 2;
UPDATE prompt_templates SET active = true WHERE key = 'rule_from_words' AND version = 2;
GRANT EXECUTE ON FUNCTION dionysus_internal.prior_setting(dionysus.people, text), dionysus_internal.in_quiet_hours(dionysus.people, integer),
    set_person_time_zone(text, text, text), dionysus_internal.time_zone_from_words(text, timestamptz), set_person_prior(text, jsonb),
    person_rules(text) TO dionysus_driver;
