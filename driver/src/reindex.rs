//! `dionysus reindex`: rebuild everything derived from the message log (seed 004 §7). The
//! extension plans, stages and swaps (`sql/020_reindex.sql`); the running service extracts the
//! queued turns like any work; this command starts (or resumes) the run and shows its progress.
use crate::config::Config;
use crate::db::Db;
use serde_json::Value;
use std::process::ExitCode;
use std::time::Duration;

/// One line of progress.
pub fn progress_line(s: &Value) -> String {
    let n = |v: &Value| v.as_i64().unwrap_or(0);
    let ex = &s["extractions"];
    let mut line = format!(
        "{}: turns {}/{} read again",
        s["phase"].as_str().unwrap_or("?"),
        n(&ex["done"]) + n(&ex["failed"]),
        n(&ex["total"])
    );
    if n(&ex["failed"]) > 0 {
        line += &format!(" ({} failed: their old facts stay)", n(&ex["failed"]));
    }
    if s["vectors"].is_object() {
        line += &format!(", vectors {}/{}", n(&s["vectors"]["done"]), n(&s["vectors"]["total"]));
    }
    if let Some(note) = s["note"].as_str() {
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
        Some("--cancel") => "SELECT dionysus.reindex_cancel()",
        Some(other) => {
            eprintln!("dionysus reindex: unknown option {other} (--status, --cancel or --detach)");
            return ExitCode::from(2);
        }
    };
    let first = match db.json(sql, &[]).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("dionysus reindex: {e}");
            return ExitCode::FAILURE;
        }
    };
    match flag {
        Some("--cancel") => {
            println!("{}", if first["cancelled"] == true { "cancelled: the old index stays" } else { "no re-index is building" });
            return ExitCode::SUCCESS;
        }
        Some("--status") if first["status"] == "none" => {
            println!("no re-index has run");
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    println!(
        "{} run {}: model {} (was {}), extraction template v{}",
        if first["resumed"] == true { "resuming" } else if flag.is_none() || flag == Some("--detach") { "started" } else { "latest" },
        first["run_id"].as_str().unwrap_or("?"),
        first["model"].as_str().unwrap_or("?"),
        first["previous_model"].as_str().unwrap_or("?"),
        first["template_version"]
    );
    println!("{}", progress_line(&first));
    if flag.is_some() || first["status"] != "building" {
        if flag == Some("--detach") {
            println!("the running service extracts the turns; the maintenance worker embeds and swaps (see `dionysus reindex --status`)");
        }
        return ExitCode::SUCCESS;
    }
    // Watch until the swap: recall keeps answering from the old index meanwhile.
    let mut last = String::new();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let s = match db.json("SELECT dionysus.reindex_status()", &[]).await {
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
        match s["status"].as_str() {
            Some("swapped") => {
                println!("swapped: {}", s["result"]);
                return ExitCode::SUCCESS;
            }
            Some("building") => {}
            _ => {
                println!("the run ended {}", s["status"]);
                return ExitCode::FAILURE;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::progress_line;
    use serde_json::json;

    #[test]
    fn progress_names_the_phase_the_turns_and_the_vectors() {
        let s = json!({"phase": "embedding", "extractions": {"total": 10, "done": 7, "failed": 1, "waiting": 2},
                       "vectors": {"done": 30, "total": 120}, "note": null});
        assert_eq!(progress_line(&s), "embedding: turns 8/10 read again (1 failed: their old facts stay), vectors 30/120");
        let done = json!({"phase": "swapped", "extractions": {"total": 3, "done": 3, "failed": 0}, "vectors": null, "note": "x"});
        assert_eq!(progress_line(&done), "swapped: turns 3/3 read again — x");
    }
}
