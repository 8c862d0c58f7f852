//! Dionysus: long-term memory for an AI companion, inside PostgreSQL.
//!
//! One module per organ:
//! - [`embed`]: text → vector (384 wide for the local model), in-process (candle) or over HTTP, with a cache
//! - [`memory`]: the store — memories, episodes, facts, triples, graph, concepts
//! - [`recall`]: hybrid retrieval (vector + lexical + association + temporal + importance/recency)
//! - [`neighborhoods`]: precomputed associations, recomputed from a lock-free stale queue
//! - [`sentences`]: a vector per sentence of a long memory, made by the maintenance pass (029)
//! - [`heartbeat`]: energy, actions, goals and the heartbeat (commit in Rust, the rest in SQL)
//! - [`workers`]: the background launchers and their per-database passes (maintenance, scheduler)
//! - [`decay`], [`censors`], [`people`], [`working_memory`]: SQL organs (021, 022, 023, 025), their unit tests here
//! - [`proactive`]: the proactive mind's settings, read once a transaction (014)
//! - [`context`]: token counts and the fit of a context into its task's budget (027)
//! - [`prompts`]: the shipped prompt templates' texts, one file each under `../sql/prompts`
//!
//! The schema itself is hand-written SQL under `../sql`, one file per organ, loaded by
//! `extension_sql_file!`. The API lives in the `dionysus` schema; helpers nobody calls directly
//! live in `dionysus_internal`, so `\df+ dionysus.*` lists exactly the API.
use pgrx::prelude::*;

::pgrx::pg_module_magic!(name, version);

pub mod censors;
pub mod context;
pub mod decay;
pub mod embed;
pub mod errors;
pub mod heartbeat;
pub mod json_arg;
pub mod memory;
pub mod neighborhoods;
pub mod people;
pub mod proactive;
pub mod prompts;
pub mod recall;
pub mod sentences;
pub mod settings;
pub mod spi_util;
pub mod version_guard;
pub mod workers;
pub mod working_memory;

// Tables, types, indexes: before every generated function.
pgrx::extension_sql_file!("../../sql/001_schema.sql", name = "schema", bootstrap);
// The heartbeat organ: its tables (and the global lock order), then one file per organ.
pgrx::extension_sql_file!("../../sql/002_heartbeat.sql", name = "heartbeat_schema", requires = ["schema"]);
pgrx::extension_sql_file!("../../sql/003_energy.sql", name = "energy", requires = ["heartbeat_schema"]);
pgrx::extension_sql_file!("../../sql/004_goals.sql", name = "goals", requires = ["energy"]);
pgrx::extension_sql_file!("../../sql/005_self_model.sql", name = "self_model", requires = ["goals"]);
pgrx::extension_sql_file!("../../sql/006_sessions.sql", name = "sessions", requires = ["self_model"]);
pgrx::extension_sql_file!("../../sql/007_work_queue.sql", name = "work_queue", requires = ["sessions"]);
pgrx::extension_sql_file!("../../sql/008_maintain.sql", name = "maintain", requires = ["work_queue"]);
pgrx::extension_sql_file!("../../sql/009_outbox.sql", name = "outbox", requires = ["maintain"]);
pgrx::extension_sql_file!("../../sql/010_heartbeat_cycle.sql", name = "heartbeat_cycle", requires = ["outbox"]);
pgrx::extension_sql_file!("../../sql/011_retention.sql", name = "retention", requires = ["heartbeat_cycle"]);
// The conversation organ: message log, prompt templates, chat context, language jobs.
// (Its shipped prompts' texts come from sql/prompts/ through prompts::shipped_prompt, created first.)
pgrx::extension_sql_file!("../../sql/012_conversation.sql", name = "conversation",
                          requires = ["retention", prompts::dionysus_internal::shipped_prompt]);
// Privacy between people and the trust of web content.
pgrx::extension_sql_file!("../../sql/013_privacy.sql", name = "privacy", requires = ["conversation"]);
// The proactive mind's base layer: events, state, beliefs about people, contact pressure.
// (Its settings are read through proactive::proactive_setting, created first.)
pgrx::extension_sql_file!("../../sql/014_proactive.sql", name = "proactive",
                          requires = ["privacy", proactive::dionysus_internal::proactive_setting, proactive::dionysus_internal::forget_proactive_settings]);
// The proactive mind's rules and what it learns from how people answer.
pgrx::extension_sql_file!("../../sql/015_mind_rules.sql", name = "mind_rules", requires = ["proactive"]);
// Memory for other agents (MCP): one person's memory, used as that person.
pgrx::extension_sql_file!("../../sql/016_agents.sql", name = "agents", requires = ["mind_rules"]);
// The alignment loop: north stars, invisible feedback, objectives, archetypes, the nightly dream.
pgrx::extension_sql_file!("../../sql/017_alignment.sql", name = "alignment", requires = ["agents"]);
// A person's history brought in from elsewhere (dionysus import).
pgrx::extension_sql_file!("../../sql/018_import.sql", name = "import", requires = ["alignment"]);
// The dream channel: every autonomous activity mirrored as a card to open, judge and decide.
pgrx::extension_sql_file!("../../sql/019_dream_channel.sql", name = "dream_channel", requires = ["import"]);
// Re-indexing from the message log: the store's model, runs, staging, the swap.
pgrx::extension_sql_file!("../../sql/020_reindex.sql", name = "reindex", requires = ["dream_channel"]);
// Memory that fades: stages by effective age, reinforcement, compress before delete.
pgrx::extension_sql_file!("../../sql/021_decay.sql", name = "decay", requires = ["reindex"]);
// Censors: things not to do, checked before actions, reach-outs and replies.
pgrx::extension_sql_file!("../../sql/022_censors.sql", name = "censors", requires = ["decay"]);
// The people in a person's life: known persons, aliases, relations, sources.
pgrx::extension_sql_file!("../../sql/023_people.sql", name = "people", requires = ["censors"]);
// Episodes that end with what they meant: participants, outcome, surprise, lessons, censor candidates.
pgrx::extension_sql_file!("../../sql/024_episodes.sql", name = "episodes", requires = ["people"]);
// Working memory: a session's focus, open threads and the items it holds, by relevance.
pgrx::extension_sql_file!("../../sql/025_working_memory.sql", name = "working_memory", requires = ["episodes"]);
// Procedures: how-to knowledge (goals, core, implementation notes), activated, scored by episodes.
pgrx::extension_sql_file!("../../sql/026_procedures.sql", name = "procedures", requires = ["working_memory"]);
// Context budgets and detail levels (issue #13 §4): 3K chat, 6K deep, 8K heartbeat, 12K reflection.
pgrx::extension_sql_file!("../../sql/027_context_budget.sql", name = "context_budget", requires = ["procedures"]);
// What an unwelcome heartbeat proposes not to do again (issue #13 §1).
pgrx::extension_sql_file!("../../sql/028_heartbeat_lessons.sql", name = "heartbeat_lessons", requires = ["context_budget"]);
// Sentence vectors (issue #10): a vector per sentence of a long memory, made by the maintenance pass.
pgrx::extension_sql_file!("../../sql/029_sentences.sql", name = "sentences", requires = ["heartbeat_lessons"]);
// Backups (issue #33): every table with data marked for pg_dump, shipped rows a restore keeps tuned.
pgrx::extension_sql_file!("../../sql/030_backup.sql", name = "backup", requires = ["sentences"]);
// A person can leave (issue #33): everything they said and what was derived from it, erased or exported.
pgrx::extension_sql_file!("../../sql/031_erasure.sql", name = "erasure", requires = ["backup"]);
// Grounding (issue #35): what a model writes is stored only when it is not a placeholder and what the person said grounds it.
pgrx::extension_sql_file!("../../sql/032_grounding.sql", name = "grounding", requires = ["erasure"]);
// After every organ and the Rust functions: vector wrappers, the Rust functions' COMMENTs, the grants.
pgrx::extension_sql_file!("../../sql/900_api.sql", name = "api", finalize);

#[pg_guard]
#[allow(non_snake_case)]
pub extern "C-unwind" fn _PG_init() {
    // pgrx's panic hook captures a Rust backtrace into the DETAIL of every ERROR that passes
    // through Rust whenever RUST_BACKTRACE is set in the server's environment (a developer's
    // shell often has it). People get one clean line; the backtrace is never theirs to read.
    // Set before any thread exists and before the first capture caches the setting.
    unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    settings::register();
    proactive::register();
    version_guard::install();
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        embed::preload_in_postmaster();
    }
    workers::register_launcher_if_preloaded();
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'dionysus'", "dionysus.worker_interval = 1"]
    }
}
