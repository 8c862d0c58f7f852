//! The mind's rules, run (015's `run_rules_for`): for each person in turn, read the values once,
//! check every condition, apply the adjustments, make what the rules make, write the pass down.
//! The statements are 015's; the walk between them is here because, in PL/pgSQL, walking eight
//! rules for seven people took half of a tick (2.6 ms of 5). Every number that reaches a row is
//! rounded as PostgreSQL rounds it (`numeric_text`), so the log and the state are the same as
//! the PL/pgSQL pass wrote.
use pgrx::datum::{DatumWithOid, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::Uuid;
use serde_json::{Map, Value};

/// One rule of the pass, as the passes change it (use, strength, a one-off done).
struct Rule {
    id: i64,
    name: String,
    person: Option<String>,
    condition: Value,
    intents: Vec<Value>,
    weight: f64,
    active: bool,
    once: bool,
    learned: bool,
    use_count: i64,
    /// Microseconds from its last firing to the pass's instant (None: never fired).
    micros_since_used: Option<i64>,
}

impl Rule {
    fn makes(&self) -> bool {
        self.intents.iter().any(|i| ["create_objective", "schedule_event", "request_contact"].iter().any(|k| has(i, k)))
    }
}

fn has(v: &Value, key: &str) -> bool {
    v.as_object().is_some_and(|o| o.contains_key(key))
}

/// `j ->> key`: a string as itself, anything else but null as its JSON text.
fn text_of(v: &Value, key: &str) -> Option<String> {
    match v.as_object()?.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// `text::float8`, or the error PostgreSQL gives for text that is not a number.
fn parse_float8(s: &str) -> Result<f64, String> {
    s.trim().parse::<f64>().map_err(|_| format!("invalid input syntax for type double precision: \"{s}\""))
}

/// `text::float8` in a pass: a value that is not a number is an error (22P02), as in SQL.
fn float8(s: &str) -> f64 {
    parse_float8(s).unwrap_or_else(|e| crate::errors::raise(pgrx::PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION, e, None))
}

/// Whether a checked condition holds for the values, with SQL's three values (as 015's
/// PL/pgSQL `rule_holds` did): an unknown value makes its comparison false; NULL is neither.
/// (Pure, errors returned: the unit tests run without a server.)
fn holds(cond: &Value, get: &dyn Fn(&str) -> Option<f64>) -> Result<Option<bool>, String> {
    let Some(o) = cond.as_object() else { return Ok(Some(false)) };
    if o.is_empty() {
        return Ok(Some(true));
    }
    let parts = |key: &str| -> Result<Vec<Value>, String> {
        match &o[key] {
            Value::Array(a) => Ok(a.clone()),
            Value::Null => Ok(vec![]),
            _ => Err(format!("cannot extract elements from a condition's \"{key}\" that is not an array")),
        }
    };
    if o.contains_key("all") {
        for c in parts("all")? {
            if holds(&c, get)? == Some(false) {
                return Ok(Some(false));
            }
        }
        return Ok(Some(true));
    }
    if o.contains_key("any") {
        for c in parts("any")? {
            if holds(&c, get)? == Some(true) {
                return Ok(Some(true));
            }
        }
        return Ok(Some(false));
    }
    if o.contains_key("not") {
        return Ok(holds(&o["not"], get)?.map(|b| !b));
    }
    let Some(l) = text_of(cond, "var").and_then(|var| get(&var)) else { return Ok(Some(false)) };
    let Some(r) = text_of(cond, "value").map(|s| parse_float8(&s)).transpose()? else { return Ok(None) };
    Ok(Some(match text_of(cond, "op").as_deref() {
        Some("<") => l < r,
        Some("<=") => l <= r,
        Some(">") => l > r,
        Some(">=") => l >= r,
        Some("=") => l == r,
        Some("!=") => l != r,
        _ => false,
    }))
}

/// `round(x::numeric, places)` as text: float8 to numeric keeps 15 significant digits, then
/// half away from zero (round(0.00004999999999999999::float8::numeric, 4) is 0.0001).
pub fn numeric_text(x: f64, places: u32) -> String {
    let s = format!("{:.14e}", x.abs());
    let (mantissa, exp) = s.split_once('e').expect("exponent");
    let m: u128 = mantissa.replace('.', "").parse().expect("digits");
    let k = exp.parse::<i32>().expect("exponent") - 14 + places as i32;
    let r: u128 = if k >= 0 {
        m * 10u128.pow(k.min(20) as u32)
    } else if k <= -17 {
        0
    } else {
        let d = 10u128.pow((-k) as u32);
        (m + d / 2) / d
    };
    let scale = 10u128.pow(places);
    let sign = if x < 0.0 && r != 0 { "-" } else { "" };
    if places == 0 {
        format!("{sign}{r}")
    } else {
        format!("{sign}{}.{:0width$}", r / scale, r % scale, width = places as usize)
    }
}

/// `to_jsonb(float8)`: the shortest text that reads back as the same double.
fn float_json(x: f64) -> String {
    format!("{x}")
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string")
}

/// 015's statements, each through the backend's plan cache (spi_util::write_prepared).
const STATEMENTS: [&str; 12] = [
    // 0: the rules of the trigger these people may fire, in firing order
    "SELECT m.id, m.name, m.person, m.condition::text, m.intents::text, m.weight, m.once, m.learned, m.use_count, \
            (extract(epoch FROM $1 - m.last_used_at) * 1000000)::int8 \
       FROM dionysus.mind_rules m \
      WHERE m.status = 'active' AND m.trigger = $2 AND (m.person IS NULL OR m.person = ANY ($3)) \
        AND (m.ends_at IS NULL OR m.ends_at > $1) \
      ORDER BY m.weight DESC, m.id",
    // 1: the values rules read for each person (and the event), in their order; the agent's vitality
    "SELECT v.vals::text, (SELECT a.vitality FROM dionysus.agent_state a WHERE a.id = 1) \
       FROM dionysus_internal.rule_values_of($1, $2, $3, $4, $5) WITH ORDINALITY v ORDER BY v.ordinality",
    // 2: a person's values with the agent's vitality as an earlier person's pass left it
    "SELECT ($1::jsonb || jsonb_build_object('agent.vitality', $2::float8))::text",
    // 3: vitality at once (the next person's values read it)
    "UPDATE dionysus.agent_state SET vitality = $1 WHERE id = 1 AND vitality <> $1",
    // 4: the passes so far
    "SELECT dionysus_internal.write_rule_passes($1, $2, $3, $4, $5, $6, $7::jsonb[], $8, $9::jsonb[], $10::jsonb[])",
    // 5: lock order: the goals lock (4) before the person's row (6)
    "SELECT pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0))",
    // 6: the person's objective of that title, if open
    "SELECT g.id FROM dionysus.goals g WHERE g.title = btrim($1) AND g.private_to = ARRAY[$2] AND g.priority IN ('active', 'queued') LIMIT 1",
    // 7: else a new one
    "SELECT dionysus.create_goal(btrim($1), 'set up by the rule \"' || $3 || '\"', 'user_request', private_to => ARRAY[$2])",
    // 8: a scheduled event
    "INSERT INTO dionysus.events (source, type, priority, person, payload, at, status) \
     VALUES ('internal', $1, coalesce($2::int, 2), $3, jsonb_build_object('rule', $4::int8), \
             $5 + make_interval(secs => $6::float8 * 60), 'scheduled')",
    // 9: a contact the person asked for
    "UPDATE dionysus.people x SET contact_request = jsonb_build_object('about', $1::text, 'rule', $2::int8, 'rule_name', $3::text, 'at', $4::timestamptz), \
            next_check_at = $4 \
      WHERE x.person = $5",
    // 10: the values adjustments move (by the index: a join to the function's rows read the table whole)
    "SELECT x.person, x.social_debt, x.curiosity, x.task_pressure, x.restraint FROM dionysus.people x WHERE x.person = ANY ($1)",
    // 11: the pass's instant
    "SELECT dionysus.clock_now()",
];

/// Runs statement `i` through the plan cache and maps its rows.
fn run<R>(i: usize, args: &[DatumWithOid<'_>], mut row: impl FnMut(pgrx::spi::SpiHeapTupleData) -> R) -> Vec<R> {
    crate::spi_util::write_prepared(STATEMENTS[i], args, |r| Some(row(r)))
}

fn col<T: FromDatum + IntoDatum>(t: &pgrx::spi::SpiHeapTupleData, i: usize) -> Option<T> {
    t.get::<T>(i).unwrap_or_else(|e| pgrx::error!("dionysus: {e}"))
}

/// One person's values as the pass reads them: the rules' (rule_values_of, as text), whether
/// they have a row, its social debt, curiosity, task pressure and restraint, the agent's vitality.
struct Values {
    vals: String,
    found: bool,
    person: [Option<f64>; 4],
    vitality: Option<f64>,
}

/// What the passes wrote since the last write (015's write_rule_passes takes them).
#[derive(Default)]
struct Pending {
    used_ids: Vec<i64>,
    used_n: Vec<i32>,
    moved_people: Vec<Option<String>>,
    moved_values: Vec<String>,
    log_people: Vec<Option<String>>,
    log_inputs: Vec<String>,
    log_fired: Vec<String>,
}

impl Pending {
    fn write(&mut self, t: TimestampWithTimeZone, on_trigger: &str, event_id: Option<i64>) {
        let p = std::mem::take(self);
        run(
            4,
            &[
                t.into(),
                on_trigger.into(),
                event_id.into(),
                p.used_ids.into(),
                p.used_n.into(),
                p.moved_people.into(),
                p.moved_values.into(),
                p.log_people.into(),
                p.log_inputs.into(),
                p.log_fired.into(),
            ],
            |_| (),
        );
    }
}

#[pg_schema]
pub mod dionysus_internal {
    use super::*;

    /// 015's `run_rules_for` after its checks: each person in turn (a NULL one: nobody in
    /// particular), the event's id, priority and merged count if an event triggered the pass.
    /// Returns how many rules fired.
    #[pg_extern(volatile, parallel_unsafe)]
    fn rule_passes(
        on_trigger: Option<&str>,
        persons: Option<Vec<Option<String>>>,
        hours: Option<f64>,
        event_id: Option<i64>,
        event_priority: Option<i16>,
        event_merged: Option<i32>,
    ) -> i32 {
        let Some(on_trigger) = on_trigger else { crate::errors::null_arg("on_trigger") };
        let Some(persons) = persons else { crate::errors::null_arg("persons") };
        if persons.iter().enumerate().any(|(i, p)| persons[..i].contains(p)) {
            crate::errors::invalid_arg("persons", "each person once");
        }
        super::passes(on_trigger, persons, hours, event_id, event_priority, event_merged)
    }
}

fn passes(
    on_trigger: &str,
    persons: Vec<Option<String>>,
    hours: Option<f64>,
    event_id: Option<i64>,
    event_priority: Option<i16>,
    event_merged: Option<i32>,
) -> i32 {
    let t: TimestampWithTimeZone = run(11, &[], |r| col::<TimestampWithTimeZone>(&r, 1))
        .into_iter()
        .flatten()
        .next()
        .unwrap_or_else(|| pgrx::error!("dionysus: the clock gave no time"));
    let named: Vec<String> = persons.iter().flatten().cloned().collect();
    let mut rules: Vec<Rule> = run(0, &[t.into(), on_trigger.into(), named.into()], |r| Rule {
        id: col(&r, 1).unwrap_or_default(),
        name: col(&r, 2).unwrap_or_default(),
        person: col(&r, 3),
        condition: serde_json::from_str(&col::<String>(&r, 4).unwrap_or_default()).unwrap_or(Value::Null),
        intents: match serde_json::from_str(&col::<String>(&r, 5).unwrap_or_default()) {
            Ok(Value::Array(a)) => a,
            _ => vec![],
        },
        weight: col(&r, 6).unwrap_or_default(),
        active: true,
        once: col(&r, 7).unwrap_or(false),
        learned: col(&r, 8).unwrap_or(false),
        use_count: col(&r, 9).unwrap_or_default(),
        micros_since_used: col(&r, 10),
    });
    if rules.is_empty() {
        return 0;
    }
    let strengthen = super::setting("rule_strengthen");
    let mut pending = Pending::default();
    let mut n = 0i32;
    // Every person's values in one read, again after a rule made something (what it made is
    // theirs alone, but a new goal may move another's); the agent's vitality as the passes
    // before left it.
    let read = |from: usize| -> Vec<Values> {
        let rest = persons[from..].to_vec();
        let named: Vec<String> = rest.iter().flatten().cloned().collect();
        let rows: Vec<(Option<String>, [Option<f64>; 4])> = run(10, &[named.into()], |r| {
            (col::<String>(&r, 1), [col::<f64>(&r, 2), col::<f64>(&r, 3), col::<f64>(&r, 4), col::<f64>(&r, 5)])
        });
        let vals = run(1, &[rest.clone().into(), t.into(), event_id.is_some().into(), event_priority.into(), event_merged.into()], |r| {
            (col::<String>(&r, 1).unwrap_or_else(|| "{}".into()), col::<f64>(&r, 2))
        });
        if vals.len() != rest.len() {
            pgrx::error!("dionysus: the rules' values lack a person");
        }
        rest.iter()
            .zip(vals)
            .map(|(who, (vals, vitality))| {
                let row = rows.iter().find(|(p, _)| p.is_some() && p == who);
                Values { vals, found: row.is_some(), person: row.map_or([None; 4], |r| r.1), vitality }
            })
            .collect()
    };
    let mut batch = read(0);
    let mut batch_from = 0;
    let mut vitality = batch.first().and_then(|v| v.vitality);
    for (i, who) in persons.iter().cloned().enumerate() {
        let Some(mine) = batch.get(i - batch_from) else { pgrx::error!("dionysus: the rules' values lack a person") };
        let vals_text = match (vitality, mine.vitality) {
            (Some(now), Some(then)) if now.to_bits() != then.to_bits() => {
                run(2, &[mine.vals.clone().into(), now.into()], |r| col::<String>(&r, 1)).into_iter().flatten().next().unwrap_or_default()
            }
            _ => mine.vals.clone(),
        };
        let vals: Map<String, Value> = match serde_json::from_str(&vals_text) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let has_person = who.is_some() && vals.contains_key("person.turns");
        let mut reread = false;
        let mut fired: Vec<usize> = vec![];
        let (mut makes, mut makes_objective) = (false, false);
        for (k, r) in rules.iter().enumerate() {
            if !r.active || (r.person.is_some() && r.person != who) {
                continue;
            }
            // rule.hours_since_fired: round(extract(epoch ...) / 3600, 2), exact from microseconds.
            let since = match r.micros_since_used {
                None => 1_000_000.0,
                Some(us) => {
                    let (d, q) = (36_000_000i128, us as i128);
                    let c = if q >= 0 { (q + d / 2) / d } else { -((-q + d / 2) / d) };
                    c as f64 / 100.0
                }
            };
            let get = |var: &str| -> Option<f64> {
                match var {
                    "rule.hours_since_fired" => Some(since),
                    "rule.times_fired" => Some(r.use_count as f64),
                    _ => match vals.get(var)? {
                        Value::Null => None,
                        Value::String(s) => Some(float8(s)),
                        Value::Number(x) => x.as_f64(),
                        other => Some(float8(&other.to_string())),
                    },
                }
            };
            let held = holds(&r.condition, &get)
                .unwrap_or_else(|e| crate::errors::raise(pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("dionysus: rule {}: {e}", r.id), None));
            if held == Some(true) {
                fired.push(k);
                if r.makes() {
                    makes = true;
                    makes_objective |= r.intents.iter().any(|i| has(i, "create_objective"));
                }
            }
        }
        if fired.is_empty() {
            continue;
        }
        if makes_objective {
            run(5, &[], |_| ());
        }
        // Adjustments first, each scaled by the rule's weight, in weight order, on the values as
        // the previous adjustment left them.
        let mut st: Vec<(&str, Option<f64>)> = vec![];
        if mine.found {
            let [debt, curiosity, task, restraint] = mine.person;
            st.extend([
                ("person.social_debt", debt),
                ("person.curiosity", curiosity),
                ("person.task_pressure", task),
                ("person.restraint", restraint),
            ]);
        }
        st.push(("agent.vitality", vitality));
        let mut effects: Vec<Vec<String>> = vec![];
        for &k in &fired {
            let r = &rules[k];
            let w = r.weight;
            let mut e = vec![];
            for it in &r.intents {
                let Some(target) = (if has(it, "adjust") { text_of(it, "adjust") } else { None }) else { continue };
                let Some(slot) = st.iter_mut().find(|(name, _)| *name == target) else { continue };
                let Some(before) = slot.1 else { continue };
                let num = |key: &str| text_of(it, key).map(|s| float8(&s));
                let moved = if has(it, "by") {
                    num("by").map(|by| before + w * by)
                } else if has(it, "to") {
                    num("to").map(|to| before + w * (to - before))
                } else {
                    // (The exponent bounded: exp() raises an error where it underflows.)
                    match (num("toward"), num("per_hour"), hours) {
                        (Some(toward), Some(per_hour), Some(hours)) => {
                            Some(toward + (before - toward) * (-pg_least(700.0, pg_greatest(-700.0, w * per_hour * hours))).exp())
                        }
                        _ => None,
                    }
                };
                // least(1, greatest(0, x)): NULL is passed over, NaN is the largest.
                let after = moved.map_or(0.0, |x| pg_least(1.0, pg_greatest(0.0, x)));
                slot.1 = Some(after);
                e.push(format!(
                    "{{\"adjust\": {}, \"before\": {}, \"after\": {}}}",
                    json_str(&target),
                    numeric_text(before, 4),
                    numeric_text(after, 4)
                ));
            }
            effects.push(e);
        }
        let st_text = format!(
            "{{{}}}",
            st.iter()
                .map(|(k, v)| format!("{}: {}", json_str(k), v.map_or("null".into(), float_json)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if has_person {
            pending.moved_people.push(who.clone());
            pending.moved_values.push(st_text);
        }
        // Vitality at once: the next person's values read it.
        if let Some(&(_, Some(v))) = st.iter().find(|(k, _)| *k == "agent.vitality") {
            if vitality.map(f64::to_bits) != Some(v.to_bits()) {
                run(3, &[v.into()], |_| ());
            }
            vitality = Some(v);
        }
        if makes {
            // What a rule makes sees everything before it: the passes so far are written first.
            pending.write(t, on_trigger, event_id);
            reread = true;
            let mut requested = false;
            for (i, &k) in fired.iter().enumerate() {
                let r = &rules[k];
                if !r.makes() {
                    continue;
                }
                for it in &r.intents {
                    let Some(title) = text_of(it, "create_objective") else { continue };
                    if !has_person {
                        continue;
                    }
                    let mut made: Option<Uuid> =
                        run(6, &[title.clone().into(), who.clone().into()], |row| col::<Uuid>(&row, 1)).into_iter().flatten().next();
                    if made.is_none() {
                        made = run(7, &[title.clone().into(), who.clone().into(), r.name.clone().into()], |row| col::<Uuid>(&row, 1))
                            .into_iter()
                            .flatten()
                            .next();
                    }
                    effects[i].push(format!(
                        "{{\"create_objective\": {}, \"goal_id\": {}}}",
                        json_str(&title),
                        made.map_or("null".into(), |u| json_str(&u.to_string()))
                    ));
                }
                for it in &r.intents {
                    if !has(it, "schedule_event") {
                        continue;
                    }
                    let kind = text_of(it, "schedule_event");
                    let minutes = text_of(it, "in_minutes");
                    run(
                        8,
                        &[kind.clone().into(), text_of(it, "priority").into(), who.clone().into(), r.id.into(), t.into(), minutes.clone().into()],
                        |_| (),
                    );
                    effects[i].push(format!(
                        "{{\"schedule_event\": {}, \"in_minutes\": {}}}",
                        kind.as_deref().map_or("null".into(), json_str),
                        minutes.as_deref().map_or("null".into(), |m| float_json(float8(m)))
                    ));
                }
                for it in &r.intents {
                    let Some(about) = (if has(it, "request_contact") { Some(text_of(it, "request_contact")) } else { None }) else {
                        continue;
                    };
                    if !has_person || requested {
                        continue;
                    }
                    requested = true;
                    run(9, &[about.clone().into(), r.id.into(), r.name.clone().into(), t.into(), who.clone().into()], |_| ());
                    effects[i].push(format!("{{\"request_contact\": {}}}", about.as_deref().map_or("null".into(), json_str)));
                }
            }
        }
        let fired_text = format!(
            "[{}]",
            fired
                .iter()
                .zip(&effects)
                .map(|(&k, e)| {
                    let r = &rules[k];
                    format!(
                        "{{\"rule\": {}, \"name\": {}, \"weight\": {}, \"effects\": [{}]}}",
                        r.id,
                        json_str(&r.name),
                        numeric_text(r.weight, 3),
                        e.join(", ")
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        // Used: every rule counts its use; learned rules strengthen; a one-off is done (as the
        // next person reads them).
        for &k in &fired {
            let r = &mut rules[k];
            r.use_count += 1;
            r.micros_since_used = Some(0);
            if r.once {
                r.active = false;
            }
            if r.learned {
                r.weight = pg_least(1.0, r.weight + strengthen * (1.0 - r.weight));
            }
            match pending.used_ids.iter().position(|&id| id == r.id) {
                Some(p) => pending.used_n[p] += 1,
                None => {
                    pending.used_ids.push(r.id);
                    pending.used_n.push(1);
                }
            }
        }
        pending.log_people.push(who);
        pending.log_inputs.push(vals_text);
        pending.log_fired.push(fired_text);
        n += fired.len() as i32;
        if reread && i + 1 < persons.len() {
            batch = read(i + 1);
            batch_from = i + 1;
            vitality = batch.first().and_then(|v| v.vitality);
        }
    }
    pending.write(t, on_trigger, event_id);
    n
}

/// SQL's greatest and least on float8: NaN is larger than every number.
fn pg_greatest(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn pg_least(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() {
        a
    } else {
        a.min(b)
    }
}

#[cfg(test)]
mod tests {
    use super::{holds, numeric_text};
    use serde_json::json;

    #[test]
    fn numbers_round_as_postgres_rounds_them() {
        assert_eq!(numeric_text(0.5, 4), "0.5000");
        assert_eq!(numeric_text(0.0, 4), "0.0000");
        assert_eq!(numeric_text(1.0, 3), "1.000");
        assert_eq!(numeric_text(0.99995, 4), "1.0000");
        // float8 -> numeric keeps 15 digits first: 0.0000500000000000 rounds up.
        assert_eq!(numeric_text(0.00004999999999999999, 4), "0.0001");
        assert_eq!(numeric_text(0.00004, 4), "0.0000");
        assert_eq!(numeric_text(0.123456789, 4), "0.1235");
        assert_eq!(numeric_text(-0.00001, 4), "0.0000");
        assert_eq!(numeric_text(-0.25, 1), "-0.3");
        assert_eq!(numeric_text(12345.678, 2), "12345.68");
        assert_eq!(numeric_text(1e-300, 4), "0.0000");
    }

    #[test]
    fn conditions_hold_with_three_values() {
        let vals = |v: &str| match v {
            "a" => Some(1.0),
            "b" => Some(0.2),
            _ => None,
        };
        assert_eq!(holds(&json!({}), &vals), Ok(Some(true)));
        assert_eq!(holds(&json!({"var": "a", "op": ">", "value": 0}), &vals), Ok(Some(true)));
        assert_eq!(holds(&json!({"var": "zz", "op": ">", "value": 0}), &vals), Ok(Some(false)));
        assert_eq!(holds(&json!({"all": [{"var": "a", "op": "=", "value": 1}, {"var": "b", "op": "<", "value": 0.25}]}), &vals), Ok(Some(true)));
        assert_eq!(holds(&json!({"all": [{"var": "a", "op": "=", "value": 1}, {"var": "b", "op": ">=", "value": 0.25}]}), &vals), Ok(Some(false)));
        assert_eq!(holds(&json!({"any": [{"var": "a", "op": "<", "value": 0}, {"var": "b", "op": "!=", "value": 0.2}]}), &vals), Ok(Some(false)));
        assert_eq!(holds(&json!({"not": {"var": "a", "op": "<", "value": 0}}), &vals), Ok(Some(true)));
        // A comparison with no value is NULL: neither holds nor fails inside "all".
        assert_eq!(holds(&json!({"var": "a", "op": "<"}), &vals), Ok(None));
        assert_eq!(holds(&json!({"all": [{"var": "a", "op": "<"}]}), &vals), Ok(Some(true)));
        assert_eq!(holds(&json!({"var": "a", "op": "~", "value": 1}), &vals), Ok(Some(false)));
        assert!(holds(&json!({"var": "a", "op": "<", "value": "many"}), &vals).is_err());
        assert!(holds(&json!({"all": {"var": "a"}}), &vals).is_err());
    }
}
