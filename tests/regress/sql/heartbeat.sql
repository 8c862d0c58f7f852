-- The heartbeat: the autonomous loop. The database decides when and what it may cost; the
-- driver brings the model's decision and performs what needs language or the network.
-- A fresh install, quietly, with times shown in UTC (every file here starts so).
SET client_min_messages = warning; SET timezone = 'UTC'; SET datestyle = 'ISO';
DROP EXTENSION IF EXISTS dionysus; CREATE EXTENSION dionysus CASCADE;

-- Time comes from the extension's clock. Tests freeze it (set_clock) and move it on
-- (advance_clock), so a day replays in seconds; set_clock(NULL) gives real time back.
SELECT dionysus.set_clock('2026-03-02 09:00+00');
SELECT dionysus.remember('The user drinks green tea every morning', 'semantic') IS NOT NULL AS stored;

-- The scheduler wakes the driver (NOTIFY dionysus_heartbeat) when one is due.
SELECT dionysus.heartbeat_due();

-- heartbeat_begin() opens one (one at a time) and returns its context: energy, goals,
-- recent memories, people, what each action costs, the token budget it was fitted into.
SELECT hb ->> 'heartbeat_id' AS hb, hb -> 'heartbeat_number' AS heartbeat_number, hb -> 'energy' AS energy,
       hb -> 'action_costs' -> 'reflect' AS reflect_costs, hb -> 'action_costs' -> 'inquire_deep' AS inquire_deep_costs
  FROM dionysus.heartbeat_begin() AS hb \gset
SELECT :heartbeat_number AS heartbeat_number, :'energy' AS energy,
       :reflect_costs AS reflect_costs, :inquire_deep_costs AS inquire_deep_costs;

-- heartbeat_commit(id, decision) takes the model's decision: actions in order, within the
-- energy. The database runs its own (recall, connect, remember, rest) at once and queues the
-- rest for the driver (reflect, inquire_deep, reach_out_user, ...).
SELECT r -> 'energy_start' AS energy_start, r -> 'energy_end' AS energy_end,
       (SELECT jsonb_agg(jsonb_build_object('action', a ->> 'action', 'cost', a -> 'cost',
                                            'queued', coalesce(a -> 'result' -> 'queued', 'false')) ORDER BY (a ->> 'index')::int)
          FROM jsonb_array_elements(r -> 'actions_taken') a) AS taken,
       r -> 'actions_rejected' AS rejected
  FROM dionysus.heartbeat_commit(:'hb', '{"reasoning": "Nothing urgent: think the day over.",
         "actions": [{"action": "reflect", "params": {}},
                     {"action": "recall", "params": {"query": "morning habits"}},
                     {"action": "rest", "params": {}}]}') AS r;
SELECT action, status, energy_cost FROM dionysus.work_queue ORDER BY action;

-- heartbeat_finish(id, narrative, valence): the narrative becomes an episodic memory.
SELECT dionysus.heartbeat_finish(:'hb', 'I thought the day over and rested.', 0.2) IS NOT NULL AS remembered;
SELECT content, type FROM dionysus.recall('thought the day over', 1);

-- The next is due an hour later (dionysus.heartbeat_interval); energy regenerates by 10 a
-- heartbeat, up to 20.
SELECT dionysus.heartbeat_due() AS due_now, dionysus.get_current_energy() AS energy;
SELECT dionysus.advance_clock('1 hour');
SELECT dionysus.heartbeat_due() AS due_an_hour_later;
SELECT hb ->> 'heartbeat_id' AS hb, hb -> 'energy' AS energy FROM dionysus.heartbeat_begin() AS hb \gset
SELECT :'energy' AS energy;

-- What costs more than is left is rejected, with the reason; what was affordable is taken.
SELECT (SELECT jsonb_agg(a ->> 'action' ORDER BY (a ->> 'index')::int) FROM jsonb_array_elements(r -> 'actions_taken') a) AS taken,
       (SELECT jsonb_agg(jsonb_build_object('action', a ->> 'action', 'reason', a ->> 'reason'))
          FROM jsonb_array_elements(r -> 'actions_rejected') a) AS rejected,
       r -> 'energy_end' AS energy_end
  FROM dionysus.heartbeat_commit(:'hb', '{"actions": [
         {"action": "inquire_deep", "params": {"question": "What is a good tea for the evening?"}},
         {"action": "inquire_deep", "params": {"question": "How is green tea made?"}},
         {"action": "inquire_deep", "params": {"question": "Where does matcha come from?"}},
         {"action": "inquire_deep", "params": {"question": "Is rooibos a tea?"}}]}') AS r;
SELECT dionysus.heartbeat_finish(:'hb', 'I asked about tea.') IS NOT NULL AS remembered;
