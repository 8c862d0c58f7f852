//! Censors (sql/022_censors.sql): things not to do. The registry, matching and lifecycle are
//! SQL; this is how heartbeat_commit asks: each action is judged during the walk by reading
//! only (`censor_hits`), and the activations are counted after the walk (`censor_record`), so
//! the censors' rows are the last locks the commit takes (the global lock order, 002).
use pgrx::prelude::*;
use serde_json::{json, Map, Value};

/// What the censors say of one heartbeat action.
pub enum Verdict {
    Pass,
    /// Done, with these censors noted.
    Warn(Value),
    /// Not done: why (a person's own reasons stay theirs), and which censors.
    Block(String, Value),
}

/// One judged action, to be counted after the walk.
pub struct Judged {
    pub index: usize,
    pub kind: String,
    pub person: Option<String>,
    pub hits: Value,
}

/// The words a heartbeat action is judged by: its name and every text it carries.
pub fn action_words(name: &str, params: &Map<String, Value>) -> String {
    let mut words = vec![name.replace('_', " ")];
    let mut keys: Vec<&String> = params.keys().collect();
    keys.sort();
    for k in keys {
        match &params[k] {
            Value::String(s) if !s.trim().is_empty() => words.push(s.trim().to_string()),
            Value::Array(a) => words.extend(a.iter().filter_map(|v| v.as_str()).map(str::to_string)),
            _ => {}
        }
    }
    words.join(": ")
}

/// The verdict on hits as censor_hits gives them. The heartbeat's record (and its narrative,
/// which others may read) carries only everyone's reasons and the censors' ids: a person's own
/// reasons are theirs.
pub fn verdict(hits: &Value) -> Verdict {
    let list = hits.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return Verdict::Pass;
    }
    let shown: Value = list.iter().map(|h| json!({"censor_id": h["censor_id"], "severity": h["severity"], "action": h["action"]})).collect();
    if !list.iter().any(|h| h["action"] == "block") {
        return Verdict::Warn(shown);
    }
    let mut reasons: Vec<String> = list
        .iter()
        .filter(|h| h["action"] == "block")
        .map(|h| if h["personal"] == true { "a censor of the person's own".to_string() } else { h["reason"].as_str().unwrap_or("").to_string() })
        .collect();
    reasons.dedup();
    Verdict::Block(format!("censored: {}", reasons.join("; ")), shown)
}

/// Judges a heartbeat action by reading only. `person`: whom it concerns (a reach-out's addressee).
pub fn judge_action(index: usize, name: &str, params: &Map<String, Value>, person: Option<String>) -> Judged {
    let hits = Spi::get_one_with_args::<pgrx::JsonB>(
        "SELECT dionysus_internal.censor_hits($1, $2, $3)",
        &[action_words(name, params).into(), name.into(), person.clone().into()],
    )
    .expect("censor hits")
    .map(|j| j.0)
    .unwrap_or(Value::Null);
    Judged { index, kind: name.to_string(), person, hits }
}

/// Counts the walk's activations, once the rest of the commit is done.
pub fn record(heartbeat: pgrx::Uuid, judged: &[Judged]) {
    for j in judged.iter().filter(|j| j.hits.as_array().is_some_and(|a| !a.is_empty())) {
        let context = pgrx::JsonB(json!({"heartbeat_id": heartbeat.to_string(), "index": j.index}));
        Spi::run_with_args(
            "SELECT dionysus.censor_record($1, $2, $3, $4)",
            &[j.kind.clone().into(), j.person.clone().into(), pgrx::JsonB(j.hits.clone()).into(), context.into()],
        )
        .expect("censor record");
    }
}

#[cfg(test)]
mod unit {
    use super::{action_words, verdict, Verdict};
    use serde_json::json;

    #[test]
    fn an_action_is_judged_by_its_name_and_its_words_in_a_stable_order() {
        let p = json!({"person": "discord:1", "intent": "ask about the exam", "count": 3}).as_object().unwrap().clone();
        assert_eq!(action_words("reach_out_user", &p), "reach out user: ask about the exam: discord:1");
        assert_eq!(action_words("rest", &serde_json::Map::new()), "rest");
    }

    #[test]
    fn a_persons_own_reasons_never_reach_the_heartbeat_record() {
        let hits = json!([{"censor_id": "a", "severity": "block", "action": "block", "reason": "it still hurts", "personal": true},
                          {"censor_id": "b", "severity": "block", "action": "block", "reason": "no politics", "personal": false}]);
        let Verdict::Block(why, shown) = verdict(&hits) else { panic!("blocked") };
        assert_eq!(why, "censored: a censor of the person's own; no politics");
        assert!(!shown.to_string().contains("hurts"), "{shown}");
        assert!(matches!(verdict(&json!([{"action": "warn", "censor_id": "c"}])), Verdict::Warn(_)));
        assert!(matches!(verdict(&json!([])), Verdict::Pass));
    }
}
