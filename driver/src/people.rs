//! The person's own view of the people in their life (sql/023_people.sql): `/people` lists
//! them, numbered; `/who NAME` says what is known about someone and where it came from;
//! `/people forget N` forgets number N. Only ever their own people, and only in a direct
//! message: who is in their life, and what they said of them, is theirs.
use crate::Mind;
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

/// A known person in the person's life as `people_of(of_person)` and `person(name, of_person)`
/// answer (see their COMMENTs); `sources` only from `person`.
#[derive(Debug, Deserialize)]
struct Known {
    id: Uuid,
    name: String,
    relation: Option<String>,
    feeling: Option<f64>,
    mentions: i64,
    #[serde(default)]
    aliases: Vec<String>,
    #[serde(default)]
    traits: Vec<String>,
    #[serde(default)]
    topics: Vec<String>,
    #[serde(default)]
    relations: Vec<crate::api::PersonRelation>,
    #[serde(default)]
    sources: Vec<Source>,
}

/// Where one thing known about them came from: the words of its turn (none when not a turn's).
#[derive(Debug, Deserialize)]
struct Source {
    said: Option<String>,
}

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
        let listed = match mind.chat_db.one::<Vec<Known>>("SELECT dionysus.people_of($1)", &[&person]).await {
            Ok(v) => v,
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
                match mind.chat_db.json("SELECT to_jsonb(dionysus.forget_known_person($1, $2))", &[&person, &p.id]).await {
                    Ok(Value::Bool(true)) => format!("(forgotten: {} — what you said stays in our conversation, but I no longer keep them as someone in your life)", p.name),
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
        match mind.chat_db.one::<Vec<Known>>("SELECT dionysus.person($1, $2)", &[&name, &person]).await {
            Ok(v) => v.iter().map(known).collect::<Vec<_>>().join("\n\n"),
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
fn short(p: &Known) -> String {
    let rel = p.relation.as_deref().map(|r| format!(" ({r})")).unwrap_or_default();
    format!("{}{rel}, mentioned {} times", p.name, p.mentions)
}

/// Everything known about one person, and where each thing came from.
fn known(p: &Known) -> String {
    let mut out = vec![short(p)];
    if !p.aliases.is_empty() {
        out.push(format!("also: {}", p.aliases.join(", ")));
    }
    if let Some(f) = p.feeling {
        out.push(format!("how you feel about them: {f:+.1}"));
    }
    for (words, label) in [(&p.traits, "traits"), (&p.topics, "comes up with")] {
        if !words.is_empty() {
            out.push(format!("{label}: {}", words.join(", ")));
        }
    }
    for r in &p.relations {
        out.push(format!("{} {} {} ({})", if r.direction == "to" { "→" } else { "←" }, r.kind.replace('_', " "), r.with, r.source));
    }
    for said in p.sources.iter().filter_map(|s| s.said.as_deref()).rev().take(3) {
        out.push(format!("from \"{}\"", said.chars().take(120).collect::<String>()));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_known_person_reads_with_their_sources() {
        let p: Known = serde_json::from_value(json!({"id": Uuid::nil(), "name": "Ana", "relation": "mother", "mentions": 3, "aliases": ["Ana", "Mom"], "feeling": 0.56, "traits": ["worrier"], "topics": [],
                       "relations": [{"with": "Lea", "kind": "worries_about", "direction": "to", "source": "said"}],
                       "sources": [{"what": "named", "said": "My mom called"}, {"what": "merged", "said": "Ana is my mother"}, {"what": "alias", "said": null}]})).unwrap();
        assert_eq!(known(&p), "Ana (mother), mentioned 3 times\nalso: Ana, Mom\nhow you feel about them: +0.6\ntraits: worrier\n→ worries about Lea (said)\nfrom \"Ana is my mother\"\nfrom \"My mom called\"");
        assert_eq!(short(&serde_json::from_value(json!({"id": Uuid::nil(), "name": "Tom", "mentions": 1})).unwrap()), "Tom, mentioned 1 times");
    }
}
