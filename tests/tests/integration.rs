//! Every integration test, in one test binary: each file beside this one is a module (cargo's
//! `autotests` is off in tests/Cargo.toml). One binary links the driver and its dependencies once
//! instead of once per file (27 links and as many copies of the same generic code, most of a fresh
//! run's integration step), and its tests share the two test threads instead of each file waiting
//! for its slowest test. Run one file's tests with a filter: `cargo test -p dionysus-tests --test
//! integration recall::`.
//!
//! Tests of different files now run side by side on the shared cluster: a test that needs the
//! cluster to itself (stopping, restarting, reconfiguring it) starts one of its own
//! (`dionysus_tests::own_cluster`), as lifecycle.rs, replica.rs and driver.rs's restart test do.
mod alignment;
mod backup;
mod bounds;
mod bad_input;
mod censors;
mod concurrency_and_worker;
mod context_budget;
mod decay;
mod discord_wire;
mod dream_channel;
mod driver;
mod episodes;
mod erasure;
mod grounding;
mod heartbeat;
mod heartbeat_lessons;
mod http_embeddings;
mod import;
mod lifecycle;
mod lives;
mod mcp;
mod memory;
mod people;
mod proactive;
mod procedures;
mod recall;
mod real_models;
mod reindex;
mod replica;
mod trust;
mod upgrade;
mod web_security;
mod working_memory;
