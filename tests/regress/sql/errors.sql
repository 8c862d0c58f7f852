-- Errors: bad input gets a clear SQLSTATE and a message naming the argument, and writes
-- nothing. (psql keeps the last error's SQLSTATE in :LAST_ERROR_SQLSTATE.)
-- A fresh install, quietly, with times shown in UTC (every file here starts so).
SET client_min_messages = warning; SET timezone = 'UTC'; SET datestyle = 'ISO';
DROP EXTENSION IF EXISTS dionysus; CREATE EXTENSION dionysus CASCADE;
-- (The lines inside the functions that raised them are not part of the answer.)
\set SHOW_CONTEXT never

-- 22023 invalid_parameter_value: a value outside what the argument allows.
SELECT dionysus.remember('');
\echo :LAST_ERROR_SQLSTATE
SELECT dionysus.remember('I had a dream', 'dream');
\echo :LAST_ERROR_SQLSTATE
SELECT dionysus.remember('x', importance => 1.5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM dionysus.recall('tea', 0);
\echo :LAST_ERROR_SQLSTATE

-- 22004 null_value_not_allowed: a required argument missing.
SELECT dionysus.remember(NULL);
\echo :LAST_ERROR_SQLSTATE

-- P0002 no_data_found: an id that names nothing.
SELECT * FROM dionysus.recall_by_id('00000000-0000-0000-0000-000000000000');
\echo :LAST_ERROR_SQLSTATE

-- 22P02 invalid_text_representation: a JSON argument of the wrong shape, by its path.
SELECT * FROM dionysus.remember_batch('[{"content": "x", "typo": 1}]');
\echo :LAST_ERROR_SQLSTATE

-- Time only moves forward, even the test clock's.
SELECT dionysus.advance_clock('-1 hour');
\echo :LAST_ERROR_SQLSTATE

-- All or nothing: one bad item of a batch stores none of it.
SELECT * FROM dionysus.remember_batch('[{"content": "a good memory"}, {"content": ""}]');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS memories FROM dionysus.recall_recent(10);
