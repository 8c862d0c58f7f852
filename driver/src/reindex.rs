//! `dionysus reindex`: rebuild everything derived from the message log (new facts, triples and
//! vectors from the turns as said, under the current model and extraction template). The
//! extension plans, stages and swaps (`sql/020_reindex.sql`); the running service extracts the
//! queued turns like any work; this command starts (or resumes) the run and shows its progress.
use crate::config::Config;
use crate::db::Db;
use serde::Deserialize;
use serde_json::{json, Number, Value};
use std::process::ExitCode;
use std::time::Duration;

/// `reindex_status()` (and `reindex_start()`, which adds `resumed`): the latest run, or
/// `{"status": "none"}` when none has run.
#[derive(Debug, Deserialize)]
pub struct Run {
    pub status: String,
    pub run_id: Option<String>,
    pub model: Option<String>,
    pub previous_model: Option<String>,
    pub template_version: Option<Number>,
    /// Only `reindex_start`'s answer says it (absent: false).
    #[serde(default)]
    pub resumed: bool,
    pub phase: Option<String>,
    pub extractions: Option<Counts>,
    /// Only while building.
    pub vectors: Option<Counts>,
    pub note: Option<String>,
    pub result: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Counts {
    pub total: Option<i64>,
    pub done: Option<i64>,
    pub failed: Option<i64>,
}

/// `reindex_cancel()`.
#[derive(Debug, Deserialize)]
struct Cancelled {
    cancelled: bool,
}

/// One line of progress.
pub fn progress_line(s: &Run) -> String {
    let n = |v: Option<i64>| v.unwrap_or(0);
    let ex = s.extractions.clone().unwrap_or_default();
    let mut line = format!("{}: turns {}/{} read again", s.phase.as_deref().unwrap_or("?"), n(ex.done) + n(ex.failed), n(ex.total));
    if n(ex.failed) > 0 {
        line += &format!(" ({} failed: their old facts stay)", n(ex.failed));
    }
    if let Some(v) = &s.vectors {
        line += &format!(", vectors {}/{}", n(v.done), n(v.total));
    }
    if let Some(note) = &s.note {
        line += &format!(" — {note}");
    }
    line
}

/// `dionysus reindex [--status | --cancel | --detach]`.
pub async fn run(config: &Config, args: &[String]) -> ExitCode {
    let db = Db::new(&config.database_url, "reindex").with_patience(Duration::from_secs(30));
    let flag = args.iter().find(|a| a.starts_with("--")).map(String::as_str);
    let sql = match flag {
        None | Some("--detach") => "SELECT dionysus.reindex_start('cli')",
        Some("--status") => "SELECT dionysus.reindex_status()",
        Some("--cancel") => {
            return match db.one::<Cancelled>("SELECT dionysus.reindex_cancel()", &[]).await {
                Ok(c) => {
                    println!("{}", if c.cancelled { "cancelled: the old index stays" } else { "no re-index is building" });
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("dionysus reindex: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Some(other) => {
            eprintln!("dionysus reindex: unknown option {other} (--status, --cancel or --detach)");
            return ExitCode::from(2);
        }
    };
    let first: Run = match db.one(sql, &[]).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("dionysus reindex: {e}");
            return ExitCode::FAILURE;
        }
    };
    if flag == Some("--status") && first.status == "none" {
        println!("no re-index has run");
        return ExitCode::SUCCESS;
    }
    println!(
        "{} run {}: model {} (was {}), extraction template v{}",
        if first.resumed { "resuming" } else if flag.is_none() || flag == Some("--detach") { "started" } else { "latest" },
        first.run_id.as_deref().unwrap_or("?"),
        first.model.as_deref().unwrap_or("?"),
        first.previous_model.as_deref().unwrap_or("?"),
        json!(first.template_version)
    );
    println!("{}", progress_line(&first));
    if flag.is_some() || first.status != "building" {
        if flag == Some("--detach") {
            println!("the running service extracts the turns; the maintenance worker embeds and swaps (see `dionysus reindex --status`)");
        }
        return ExitCode::SUCCESS;
    }
    // Watch until the swap: recall keeps answering from the old index meanwhile.
    let mut last = String::new();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let s: Run = match db.one("SELECT dionysus.reindex_status()", &[]).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("dionysus reindex: {e} (the run goes on; `dionysus reindex` resumes watching)");
                return ExitCode::FAILURE;
            }
        };
        let line = progress_line(&s);
        if line != last {
            println!("{line}");
            last = line;
        }
        match s.status.as_str() {
            "swapped" => {
                println!("swapped: {}", s.result.unwrap_or(Value::Null));
                return ExitCode::SUCCESS;
            }
            "building" => {}
            // As JSON shows it, quoted.
            other => {
                println!("the run ended {}", json!(other));
                return ExitCode::FAILURE;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::progress_line;
    use serde_json::json;

    fn run(v: serde_json::Value) -> super::Run {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn progress_names_the_phase_the_turns_and_the_vectors() {
        let s = json!({"status": "building", "phase": "embedding", "extractions": {"total": 10, "done": 7, "failed": 1, "waiting": 2},
                       "vectors": {"done": 30, "total": 120}, "note": null});
        assert_eq!(progress_line(&run(s)), "embedding: turns 8/10 read again (1 failed: their old facts stay), vectors 30/120");
        let done = json!({"status": "swapped", "phase": "swapped", "extractions": {"total": 3, "done": 3, "failed": 0}, "vectors": null, "note": "x"});
        assert_eq!(progress_line(&run(done)), "swapped: turns 3/3 read again — x");
    }
}
