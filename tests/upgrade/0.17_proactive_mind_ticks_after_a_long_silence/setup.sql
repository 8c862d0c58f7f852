-- from: 0.17.0
-- The last release whose proactive tick failed for good after a long gap: Alice wrote, a tick
-- ran, then the clock went ten weeks without one, and 0.17.0's tick fails (exp() underflowing
-- in a rule's "toward" step; a failed tick moves nothing, so the next one fails the same way).
SELECT dionysus.set_clock('2026-03-02 10:00+00');
-- What 0.17.0's log_message('test', 'm1', 'dm:alice', 'alice', 'Good morning! How are you today?')
-- wrote of the turn and of its person (its memory aside).
INSERT INTO dionysus.messages (id, platform, platform_message_id, channel_id, author_id, content, person)
VALUES ('5e1f0000-0000-4000-8000-000000000001', 'test', 'm1', 'dm:alice', 'alice', 'Good morning! How are you today?', 'test:alice');
SELECT dionysus.session_start();
SELECT dionysus_internal.note_person_message('test:alice', '5e1f0000-0000-4000-8000-000000000001', 'Good morning! How are you today?');
SELECT dionysus.proactive_tick();
SELECT dionysus.set_clock('2026-05-12 10:00+00');
CREATE TEMP TABLE failed_tick (sqlstate text);
DO $$
BEGIN
    PERFORM dionysus.proactive_tick();
    INSERT INTO failed_tick VALUES ('none');
EXCEPTION WHEN OTHERS THEN
    INSERT INTO failed_tick VALUES (SQLSTATE);
END $$;
SELECT '0.17.0''s tick after ten weeks fails (22003, numeric value out of range)' AS check, sqlstate = '22003' AS ok, sqlstate AS detail
  FROM failed_tick;
