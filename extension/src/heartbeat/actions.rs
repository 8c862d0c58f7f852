//! The action taxonomy: who performs each action (the database or the driver), and its parameter schema.
use serde_json::{Map, Value};

/// Who carries an action out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Performer {
    /// Inside heartbeat_commit, in the database.
    Database,
    /// Queued for the driver (needs the LLM or the network).
    Driver,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Text,
    Uuid,
    Number { min: f64, max: f64 },
    Integer { min: i64, max: i64 },
    UuidList,
}

pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
}

pub struct Action {
    pub name: &'static str,
    pub performer: Performer,
    pub params: &'static [Param],
}

const fn p(name: &'static str, kind: Kind, required: bool) -> Param {
    Param { name, kind, required }
}

const UNIT: Kind = Kind::Number { min: 0.0, max: 1.0 };

pub const ACTIONS: &[Action] = &[
    Action { name: "observe", performer: Performer::Database, params: &[] },
    Action { name: "review_goals", performer: Performer::Database, params: &[] },
    Action {
        name: "remember",
        performer: Performer::Database,
        params: &[p("content", Kind::Text, true), p("type", Kind::Text, false), p("importance", UNIT, false)],
    },
    Action {
        name: "recall",
        performer: Performer::Database,
        params: &[p("query", Kind::Text, true), p("k", Kind::Integer { min: 1, max: 50 }, false)],
    },
    Action {
        name: "connect",
        performer: Performer::Database,
        params: &[
            p("from_id", Kind::Uuid, true),
            p("to_id", Kind::Uuid, true),
            p("relation", Kind::Text, false),
            p("weight", UNIT, false),
        ],
    },
    Action {
        name: "reprioritize",
        performer: Performer::Database,
        params: &[p("goal_id", Kind::Uuid, true), p("priority", Kind::Text, true), p("reason", Kind::Text, false)],
    },
    Action { name: "reflect", performer: Performer::Driver, params: &[p("focus", Kind::Text, false)] },
    Action {
        name: "maintain",
        performer: Performer::Driver,
        params: &[p("target", Kind::Text, false), p("memory_id", Kind::Uuid, false)],
    },
    Action { name: "brainstorm_goals", performer: Performer::Driver, params: &[p("focus", Kind::Text, false)] },
    Action { name: "inquire_shallow", performer: Performer::Driver, params: &[p("question", Kind::Text, true)] },
    Action {
        name: "synthesize",
        performer: Performer::Driver,
        params: &[p("topic", Kind::Text, true), p("memory_ids", Kind::UuidList, false)],
    },
    Action {
        name: "reach_out_user",
        performer: Performer::Driver,
        // person: the key of whom to write to (the heartbeat context lists them); default the last to write.
        params: &[p("intent", Kind::Text, false), p("content", Kind::Text, false), p("person", Kind::Text, false)],
    },
    Action { name: "inquire_deep", performer: Performer::Driver, params: &[p("question", Kind::Text, true)] },
    Action {
        name: "reach_out_public",
        performer: Performer::Driver,
        params: &[p("content", Kind::Text, true), p("platform", Kind::Text, false)],
    },
    Action { name: "rest", performer: Performer::Database, params: &[] },
];

/// Parses the canonical 8-4-4-4-12 hex form.
pub fn parse_uuid(s: &str) -> Option<pgrx::Uuid> {
    if !is_uuid(s) {
        return None;
    }
    let hex: Vec<u8> = s.bytes().filter(|c| *c != b'-').collect();
    let mut bytes = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        bytes[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(pgrx::Uuid::from_bytes(bytes))
}

pub fn find(name: &str) -> Option<&'static Action> {
    ACTIONS.iter().find(|a| a.name == name)
}

pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| if [8, 13, 18, 23].contains(&i) { *c == b'-' } else { c.is_ascii_hexdigit() })
}

/// Checks params against the action's schema; the error says which parameter and why.
pub fn validate(action: &Action, params: &Map<String, Value>) -> Result<(), String> {
    if let Some(k) = params.keys().find(|k| !action.params.iter().any(|p| p.name == k.as_str())) {
        let known: Vec<&str> = action.params.iter().map(|p| p.name).collect();
        return Err(format!(
            "unknown parameter \"{k}\" for {} (known: {})",
            action.name,
            if known.is_empty() { "none".to_string() } else { known.join(", ") }
        ));
    }
    for p in action.params {
        let v = match params.get(p.name) {
            None | Some(Value::Null) if p.required => return Err(format!("parameter \"{}\" is required", p.name)),
            None | Some(Value::Null) => continue,
            Some(v) => v,
        };
        let bad = |why: &str| Err(format!("parameter \"{}\" {why}", p.name));
        match p.kind {
            Kind::Text => match v.as_str() {
                Some(s) if !s.trim().is_empty() && s.chars().count() <= 10_000 => {}
                Some(s) if s.trim().is_empty() => return bad("must not be empty"),
                Some(_) => return bad("is longer than 10000 characters"),
                None => return bad("must be a string"),
            },
            Kind::Uuid => match v.as_str() {
                Some(s) if is_uuid(s) => {}
                _ => return bad("must be a uuid"),
            },
            Kind::UuidList => match v.as_array() {
                Some(a) if a.len() <= 100 && a.iter().all(|x| x.as_str().is_some_and(is_uuid)) => {}
                _ => return bad("must be an array of at most 100 uuids"),
            },
            Kind::Number { min, max } => match v.as_f64() {
                Some(x) if x.is_finite() && x >= min && x <= max => {}
                _ => return bad(&format!("must be a number within [{min}, {max}]")),
            },
            Kind::Integer { min, max } => match v.as_i64() {
                Some(x) if x >= min && x <= max => {}
                _ => return bad(&format!("must be an integer within [{min}, {max}]")),
            },
        }
    }
    if action.name == "reach_out_user" && !params.contains_key("intent") && !params.contains_key("content") {
        return Err("reach_out_user needs an \"intent\" or a \"content\"".into());
    }
    Ok(())
}

impl Kind {
    /// How a prompt names the kind: "text", "uuid", "number 0–1", "integer 1–50", "[uuid, …]".
    pub fn describe(self) -> String {
        match self {
            Kind::Text => "text".into(),
            Kind::Uuid => "uuid".into(),
            Kind::UuidList => "[uuid, …]".into(),
            Kind::Number { min, max } => format!("number {min}–{max}"),
            Kind::Integer { min, max } => format!("integer {min}–{max}"),
        }
    }
}

/// The taxonomy as data: each action's performer and parameters. The driver builds the
/// decision prompt's parameter hints from it, so the schema lives in one place.
pub fn schema() -> Value {
    let actions: Map<String, Value> = ACTIONS
        .iter()
        .map(|a| {
            let params: Map<String, Value> = a
                .params
                .iter()
                .map(|p| (p.name.to_string(), serde_json::json!({"kind": p.kind.describe(), "required": p.required})))
                .collect();
            let performer = match a.performer {
                Performer::Database => "database",
                Performer::Driver => "driver",
            };
            (a.name.to_string(), serde_json::json!({"performer": performer, "params": params}))
        })
        .collect();
    Value::Object(actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_schema_describes_every_action() {
        let s = schema();
        assert_eq!(s.as_object().unwrap().len(), ACTIONS.len());
        assert_eq!(s["recall"]["params"]["k"], json!({"kind": "integer 1–50", "required": false}));
        assert_eq!(s["connect"]["params"]["weight"]["kind"], json!("number 0–1"));
        assert_eq!(s["reflect"]["performer"], json!("driver"));
        assert_eq!(s["rest"]["params"], json!({}));
    }

    fn check(action: &str, params: Value) -> Result<(), String> {
        validate(find(action).unwrap(), params.as_object().unwrap())
    }

    #[test]
    fn schemas_accept_good_and_name_bad_parameters() {
        assert!(check("recall", json!({"query": "the schema", "k": 4})).is_ok());
        assert!(check("recall", json!({})).unwrap_err().contains("\"query\" is required"));
        assert!(check("recall", json!({"query": "x", "k": 0})).unwrap_err().contains("\"k\""));
        assert!(check("connect", json!({"from_id": "nope", "to_id": "x"})).unwrap_err().contains("uuid"));
        assert!(check("rest", json!({"why": 1})).unwrap_err().contains("unknown parameter \"why\""));
        assert!(check("reach_out_user", json!({})).is_err());
        assert!(check("reach_out_user", json!({"intent": "share the article"})).is_ok());
        assert!(check("remember", json!({"content": "x", "importance": 1.5})).is_err());
    }

    #[test]
    fn every_costed_action_of_the_seed_is_known() {
        for a in [
            "observe", "review_goals", "remember", "recall", "connect", "reprioritize", "reflect", "maintain",
            "brainstorm_goals", "inquire_shallow", "synthesize", "reach_out_user", "inquire_deep", "reach_out_public", "rest",
        ] {
            assert!(find(a).is_some(), "{a}");
        }
    }
}
