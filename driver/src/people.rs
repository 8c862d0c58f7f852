//! The person's own view of the people in their life (sql/023_people.sql): `/people` lists
//! them, numbered; `/who NAME` says what is known about someone and where it came from;
//! `/people forget N` forgets number N. Only ever their own people, and only in a direct
//! message: who is in their life, and what they said of them, is theirs.
use crate::Mind;
use serde_json::Value;
use uuid::Uuid;

/// True when the words were such a command (answered here, never a turn).
pub async fn command(mind: &Mind, channel_id: &str, author_id: &str, words: &str, nonce: &str, private: bool) -> bool {
    let words = words.trim();
    let ch = &mind.channel;
    let person = format!("{}:{}", ch.platform(), author_id);
    let ours = words == "/people" || words.starts_with("/people ") || words.starts_with("/who ");
    if ours && !private {
        let _ = ch.send(channel_id, "(ask me that in a direct message: who is in your life is yours)", nonce).await;
        return true;
    }
    let text = if words == "/people" || words.starts_with("/people ") {
        let rest = words["/people".len()..].trim();
        let listed = match mind.chat_db.json("SELECT dionysus.people_of($1)", &[&person]).await {
            Ok(v) => v.as_array().cloned().unwrap_or_default(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot list people");
                let _ = ch.send(channel_id, "(I couldn't read who is in your life just now)", nonce).await;
                return true;
            }
        };
        let forget = rest.strip_prefix("forget").map(str::trim).and_then(|n| n.parse::<usize>().ok());
        match (rest, forget.and_then(|i| listed.get(i.wrapping_sub(1)))) {
            ("", _) if listed.is_empty() => "(nobody yet: I learn who is in your life as you talk about them)".to_string(),
            ("", _) => listed.iter().enumerate().map(|(i, p)| format!("{}. {}", i + 1, short(p))).collect::<Vec<_>>().join("\n"),
            (_, Some(p)) => {
                let id = p["id"].as_str().and_then(|s| Uuid::parse_str(s).ok());
                match mind.chat_db.json("SELECT to_jsonb(dionysus.forget_known_person($1, $2))", &[&person, &id]).await {
                    Ok(Value::Bool(true)) => format!("(forgotten: {} — what you said stays in our conversation, but I no longer keep them as someone in your life)", p["name"].as_str().unwrap_or("")),
                    Ok(_) => "(already forgotten)".to_string(),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot forget a person");
                        "(I couldn't forget them just now)".to_string()
                    }
                }
            }
            _ => "(/people lists them, numbered; /people forget N; /who NAME)".to_string(),
        }
    } else if let Some(name) = words.strip_prefix("/who ").map(str::trim).filter(|n| !n.is_empty()) {
        match mind.chat_db.json("SELECT dionysus.person($1, $2)", &[&name, &person]).await {
            Ok(v) => v.as_array().into_iter().flatten().map(known).collect::<Vec<_>>().join("\n\n"),
            Err(e) if e.code() == Some("P0002") => format!("(I don't know anyone you call {name})"),
            Err(e) => {
                tracing::warn!(error = %e, "cannot look someone up");
                "(I couldn't look them up just now)".to_string()
            }
        }
    } else {
        return false;
    };
    let _ = ch.send(channel_id, &text, nonce).await;
    true
}

/// "Ana (mother), mentioned 3 times".
fn short(p: &Value) -> String {
    let rel = p["relation"].as_str().map(|r| format!(" ({r})")).unwrap_or_default();
    format!("{}{rel}, mentioned {} times", p["name"].as_str().unwrap_or(""), p["mentions"])
}

/// Everything known about one person, and where each thing came from.
fn known(p: &Value) -> String {
    let words = |key: &str| p[key].as_array().into_iter().flatten().filter_map(Value::as_str).collect::<Vec<_>>().join(", ");
    let mut out = vec![short(p)];
    let aliases = words("aliases");
    if !aliases.is_empty() {
        out.push(format!("also: {aliases}"));
    }
    if let Some(f) = p["feeling"].as_f64() {
        out.push(format!("how you feel about them: {f:+.1}"));
    }
    for (key, label) in [("traits", "traits"), ("topics", "comes up with")] {
        let w = words(key);
        if !w.is_empty() {
            out.push(format!("{label}: {w}"));
        }
    }
    for r in p["relations"].as_array().into_iter().flatten() {
        out.push(format!("{} {} {} ({})", if r["direction"] == "to" { "→" } else { "←" }, r["kind"].as_str().unwrap_or("").replace('_', " "),
                         r["with"].as_str().unwrap_or(""), r["source"].as_str().unwrap_or("")));
    }
    for s in p["sources"].as_array().into_iter().flatten().filter(|s| s["said"].is_string()).rev().take(3) {
        out.push(format!("from \"{}\"", s["said"].as_str().unwrap_or("").chars().take(120).collect::<String>()));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_known_person_reads_with_their_sources() {
        let p = json!({"name": "Ana", "relation": "mother", "mentions": 3, "aliases": ["Ana", "Mom"], "feeling": 0.56, "traits": ["worrier"], "topics": [],
                       "relations": [{"with": "Lea", "kind": "worries_about", "direction": "to", "source": "said"}],
                       "sources": [{"what": "named", "said": "My mom called"}, {"what": "merged", "said": "Ana is my mother"}, {"what": "alias", "said": null}]});
        assert_eq!(known(&p), "Ana (mother), mentioned 3 times\nalso: Ana, Mom\nhow you feel about them: +0.6\ntraits: worrier\n→ worries about Lea (said)\nfrom \"Ana is my mother\"\nfrom \"My mom called\"");
        assert_eq!(short(&json!({"name": "Tom", "mentions": 1})), "Tom, mentioned 1 times");
    }
}
