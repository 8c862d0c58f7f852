//! `dionysus`: the thin driver beside PostgreSQL. It moves words between the LLM, the person
//! and the extension's SQL functions, and holds no memory logic of its own.
//!
//! Commands so far: `dionysus doctor` — checks the whole stack and says how to fix what is wrong.
mod config;
mod doctor;

use std::process::ExitCode;

const USAGE: &str = "usage: dionysus <command>

commands:
  doctor    check PostgreSQL, pgvector, the extension, the worker and the embedding model

configuration (environment):
  DIONYSUS_DATABASE_URL   libpq URL or key=value string (default postgresql://postgres@127.0.0.1:5433/dionysus)";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = config::Config::from_env();
    match args.first().map(String::as_str) {
        Some("doctor") => doctor::run(&config).await,
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("dionysus: unknown command '{other}'\n\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
