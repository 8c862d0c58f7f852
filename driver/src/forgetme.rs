//! `/forgetme`: a person leaves (issue #33 §2, sql/031_erasure.sql). It asks first; `/forgetme
//! confirm` within five minutes erases everything the speaking person said and everything
//! derived from it (dionysus.forget_person), theirs only, on Discord and the terminal alike.
//! Never a turn: neither command is logged or answered by the model. `dionysus export PERSON`
//! writes everything stored about a person as JSON (dionysus.export_person): what they may take
//! with them, and what `/forgetme` would erase.
use crate::config::Config;
use crate::db::Db;
use crate::Mind;
use std::process::ExitCode;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an ask waits for its confirmation.
pub const CONFIRM_WITHIN: Duration = Duration::from_secs(300);

/// Who asked, by database and person, and when: a confirmation counts only after an ask by the
/// same person (a restart forgets the ask, and they ask again).
/// `forget_person(person)`: `{person, forgotten}`, the counts erased by kind (logged as they are).
#[derive(Debug, serde::Deserialize)]
struct Forgotten {
    forgotten: serde_json::Value,
}

static ASKED: Mutex<Option<HashMap<(String, String), Instant>>> = Mutex::new(None);

pub const ASK: &str = "This erases everything you have said to me and everything I learned from it, for good: \
our conversations, what I remember about you, the people in your life, your north stars, objectives, feedback, \
rules and reminders. Reply /forgetme confirm within 5 minutes to go ahead.";
pub const DONE: &str = "(done: everything you said to me, and everything I learned from it, is erased. Goodbye.)";
pub const NOT_ASKED: &str = "(ask with /forgetme first, then reply /forgetme confirm within 5 minutes)";

/// Whether a confirmation at `now` follows an ask in time.
pub fn confirmed(asked_at: Option<Instant>, now: Instant) -> bool {
    asked_at.is_some_and(|t| now.saturating_duration_since(t) <= CONFIRM_WITHIN)
}

/// True when the words were `/forgetme` or `/forgetme confirm` (answered here, never a turn).
pub async fn command(mind: &Mind, channel_id: &str, author_id: &str, words: &str, nonce: &str) -> bool {
    let Some(rest) = words.trim().strip_prefix("/forgetme").filter(|r| r.is_empty() || r.starts_with(char::is_whitespace)) else {
        return false;
    };
    let ch = &mind.channel;
    let person = format!("{}:{}", ch.platform(), author_id);
    let key = (mind.config.database_url.clone(), person.clone());
    let text = match rest.trim() {
        "" => {
            ASKED.lock().unwrap().get_or_insert_with(HashMap::new).insert(key, Instant::now());
            ASK.to_string()
        }
        "confirm" => {
            let asked_at = ASKED.lock().unwrap().get_or_insert_with(HashMap::new).remove(&key);
            if !confirmed(asked_at, Instant::now()) {
                NOT_ASKED.to_string()
            } else {
                match mind.chat_db.one::<Forgotten>("SELECT dionysus.forget_person($1)", &[&person]).await {
                    Ok(v) => {
                        tracing::info!(%person, forgotten = %v.forgotten, "a person left: everything of theirs erased");
                        DONE.to_string()
                    }
                    Err(e) if e.code() == Some("P0002") => "(nothing of yours is stored here)".to_string(),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot erase a person");
                        "(I couldn't erase it just now, and nothing was changed; ask again with /forgetme)".to_string()
                    }
                }
            }
        }
        _ => "(/forgetme erases everything of yours, once you confirm with /forgetme confirm)".to_string(),
    };
    let _ = ch.send(channel_id, &text, nonce).await;
    true
}

/// `dionysus export PERSON [--out FILE]`: pretty JSON on stdout, or in FILE (readable by its
/// owner only: it is one person's whole record).
pub async fn export(config: &Config, args: &[String]) -> ExitCode {
    let mut args = args.to_vec();
    let out = match args.iter().position(|a| a == "--out") {
        Some(i) if i + 1 < args.len() => {
            let f = args.remove(i + 1);
            args.remove(i);
            Some(f)
        }
        Some(_) => {
            eprintln!("dionysus export: --out needs a file name");
            return ExitCode::from(2);
        }
        None => None,
    };
    let [person] = args.as_slice() else {
        eprintln!("usage: dionysus export PERSON [--out FILE]   (e.g. discord:1234 or terminal:you)");
        return ExitCode::from(2);
    };
    let db = Db::new(&config.database_url, "export").with_patience(std::time::Duration::from_secs(5));
    let v = match db.json("SELECT dionysus.export_person($1)", &[person]).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("dionysus export: {e}");
            return ExitCode::FAILURE;
        }
    };
    let text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
    match out {
        None => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Some(path) => {
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
            match opts.open(&path).and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes())) {
                Ok(()) => {
                    eprintln!("dionysus export: everything stored about {person} written to {path}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("dionysus export: cannot write {path}: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confirmation_counts_only_after_an_ask_within_five_minutes() {
        let now = Instant::now() + Duration::from_secs(3600);
        assert!(!confirmed(None, now), "a confirmation without an ask");
        assert!(confirmed(Some(now - Duration::from_secs(10)), now));
        assert!(confirmed(Some(now - CONFIRM_WITHIN), now));
        assert!(!confirmed(Some(now - CONFIRM_WITHIN - Duration::from_secs(1)), now), "an ask older than five minutes");
    }
}
