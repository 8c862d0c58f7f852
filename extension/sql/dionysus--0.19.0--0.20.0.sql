-- dionysus 0.19.0 -> 0.20.0: one schema, one history (#34). Unreleased: may change until 0.20.0 is released.
-- Each section names its change; every catalog change a fresh 0.20.0 install has is here too.

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
