-- Censors: things not to do. Each says warn (done, noted), block (not done) or absolute (not
-- done; only the person's word lifts it), and matches by meaning, by a pattern, or by scope.
-- A fresh install, quietly, with times shown in UTC (every file here starts so).
SET client_min_messages = warning; SET timezone = 'UTC'; SET datestyle = 'ISO';
DROP EXTENSION IF EXISTS dionysus; CREATE EXTENSION dionysus CASCADE;
SELECT dionysus.set_clock('2026-03-02 09:00+00');

-- add_censor(trigger, reason, severity, ...) is the owner's, for everyone or for one person.
-- By meaning: the trigger is embedded; words at least 0.45 similar match.
SELECT dionysus.add_censor('suggesting diets or weight loss', 'they asked never to be told what to eat') AS diets \gset
-- By pattern: a case-insensitive regular expression, for names.
SELECT dionysus.add_censor('Bob', 'never mention Bob to anyone', 'absolute', pattern => '\mBob\M') IS NOT NULL AS added;
-- By scope alone: one person, one kind of act (a reach-out), local hours 22 to 7.
SELECT dionysus.add_censor('at night', 'no messages at night', 'block', person => 'test:ada', kinds => ARRAY['reach_out'],
                           from_hour => 22, to_hour => 7, any_content => true) IS NOT NULL AS added;

-- check_censors(words, kind, person, at) asks, and changes nothing.
SELECT severity, action, reason, matched_by, round(similarity::numeric, 2) AS similarity
  FROM dionysus.check_censors('Which low carb diet makes you lose weight fastest?') ORDER BY reason;
SELECT count(*) AS matches FROM dionysus.check_censors('How do bees survive the winter?');
SELECT severity, action, reason, matched_by FROM dionysus.check_censors('Say hi to bob from me', 'reply', 'test:ada') ORDER BY reason;
SELECT severity, action, reason, matched_by, personal
  FROM dionysus.check_censors('Good night!', 'reach_out', 'test:ada', at => '2026-03-02 23:00+00') ORDER BY reason;
SELECT count(*) AS matches FROM dionysus.check_censors('Good morning!', 'reach_out', 'test:ada', at => '2026-03-02 09:00+00');

-- censor_gate(kind, words, person) is what runs before every act: it asks and counts. Three
-- activations in a row without a false positive raise a warn to a block (never further):
-- the fourth time, the same words are blocked.
SELECT g ->> 'verdict' AS verdict, g -> 'reasons' AS reasons
  FROM dionysus.censor_gate('reply', 'Try a low carb diet to lose weight', 'test:ada') AS g;
SELECT dionysus.censor_gate('reply', 'Try a low carb diet to lose weight', 'test:ada') ->> 'verdict' AS second;
SELECT dionysus.censor_gate('reply', 'Try a low carb diet to lose weight', 'test:ada') ->> 'verdict' AS third;
SELECT dionysus.censor_gate('reply', 'Try a low carb diet to lose weight', 'test:ada') ->> 'verdict' AS fourth;

-- A false positive marked lowers a block to a warn (and retires a warn).
SELECT r ->> 'severity' AS severity, r ->> 'status' AS status
  FROM dionysus.mark_censor_false_positive(:'diets', note => 'it was about recipes') AS r;

-- person_censors(person) lists what holds for a person: everyone's and their own.
SELECT trigger, reason, severity, scope, own, activations, false_positives, last_activated
  FROM dionysus.person_censors('test:ada') ORDER BY trigger;

-- A person adds their own in their words (the driver reads them into a censor) and may lift
-- only their own; retire_censor lifts it.
SELECT dionysus.add_own_censor('test:ada', 'talking about work on weekends', 'I want my weekends off') AS own \gset
SELECT dionysus.retire_censor(:'own', person => 'test:ada');
SELECT trigger FROM dionysus.person_censors('test:ada') WHERE own ORDER BY trigger;
