//! Context budgets (sql/027_context_budget.sql; issue #13 §4, budgets that adapt to the
//! task): a context is assembled within a token budget chosen by its task, each item at the
//! richest of its detail levels (full → summary → micro) that fits, in rank order, and it says
//! what it included, at which level, and what the budget cut.
//!
//! Tokens are counted by the embedding model's own WordPiece tokenizer (tokenizer.json beside
//! the model) without its 256-token truncation: a fair estimate of what a chat model's tokenizer
//! makes of English. Without the file (an install that embeds over HTTP only) the count falls
//! back to the rule of thumb of four bytes a token, and the report says which was used.
use crate::{embed, errors};
use pgrx::prelude::*;
use serde_json::{json, Map, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::rc::Rc;
use tokenizers::Tokenizer;

/// The last resort of a long item without a micro line: its first words, marked as clipped.
const CLIP_WORDS: usize = 16;
/// At most this many cut items are listed by name in the report (all are counted).
const CUT_LISTED: usize = 20;
/// Token counts a backend remembers (by the text's hash): a conversation's turns, its working
/// memory and the memories it keeps coming back to are counted once, not every turn.
const COUNTS_KEPT: usize = 8192;

/// The sections a budget can rank, in the order used for those a budget row leaves out (so
/// nothing escapes the budget). sql/027's CHECK on context_budgets.sections names the same.
pub const SECTIONS: [&str; 11] = [
    "recent_turns", "memories", "recent_memories", "working_memory", "people", "triples", "objectives", "goals",
    "identity", "worldview", "activated_themes",
];

thread_local! {
    /// The backend's tokenizer, by the path it was read from (None: the file is not there).
    static TOKENIZER: RefCell<Option<(PathBuf, Option<Rc<Tokenizer>>)>> = const { RefCell::new(None) };
    /// The tokenizer's counts of texts seen, by hash (emptied when full or when the tokenizer changes).
    static COUNTS: RefCell<HashMap<u64, usize>> = RefCell::new(HashMap::new());
}

/// How tokens are counted here.
#[derive(Clone)]
pub enum Counter {
    WordPiece(Rc<Tokenizer>),
    Estimate,
}

/// The backend's counter: the model's tokenizer, read once (again when the path changes, or
/// when a file missing before has appeared).
pub fn counter() -> Counter {
    let path = embed::model_path().join("tokenizer.json");
    TOKENIZER.with(|cell| {
        if let Some((p, t)) = cell.borrow().as_ref() {
            if *p == path && (t.is_some() || !path.is_file()) {
                return t.clone().map_or(Counter::Estimate, Counter::WordPiece);
            }
        }
        let loaded = Tokenizer::from_file(&path).ok().and_then(|mut t| {
            t.with_truncation(None).ok()?;
            t.with_padding(None);
            Some(Rc::new(t))
        });
        *cell.borrow_mut() = Some((path, loaded.clone()));
        COUNTS.with(|c| c.borrow_mut().clear());
        loaded.map_or(Counter::Estimate, Counter::WordPiece)
    })
}

impl Counter {
    pub fn count(&self, text: &str) -> usize {
        match self {
            // Past a megabyte the rule of thumb is near enough, and bounds the tokenizer's memory.
            Counter::WordPiece(_) if text.len() > 1 << 20 => estimate(text),
            Counter::WordPiece(t) => {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                text.hash(&mut h);
                let key = h.finish();
                if let Some(n) = COUNTS.with(|c| c.borrow().get(&key).copied()) {
                    return n;
                }
                // Offsets are not needed to count: encode_fast skips them.
                let n = t.encode_fast(text, false).map(|e| e.len()).unwrap_or_else(|_| estimate(text));
                COUNTS.with(|c| {
                    let mut c = c.borrow_mut();
                    if c.len() >= COUNTS_KEPT {
                        c.clear();
                    }
                    c.insert(key, n);
                });
                n
            }
            Counter::Estimate => estimate(text),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Counter::WordPiece(_) => "wordpiece",
            Counter::Estimate => "estimate: 4 bytes a token (no tokenizer.json beside the model)",
        }
    }
}

fn estimate(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// The number of tokens in a text, by the model's WordPiece tokenizer, never truncated.
#[pg_extern(stable, parallel_safe)]
fn count_tokens(content: Option<&str>) -> i32 {
    let Some(text) = content else { errors::null_arg("content") };
    i32::try_from(counter().count(text)).unwrap_or(i32::MAX)
}

/// Chooses a level for each item. `costs[i]` are item i's levels' costs, richest first, each
/// cheaper than the one before. Mandatory items take their richest level whatever it costs.
/// Then, in rank order, every other item gets in at its smallest level while that fits
/// (breadth first: one long item cannot starve the rest), and then, in rank order again, each
/// one moves up to the richest level the rest of the budget allows. Items of one `chain` (the
/// turns, newest first) stop at the first that does not fit: a transcript has no holes.
/// Returns the chosen level of each item (None: cut) and the tokens used.
pub fn choose(costs: &[Vec<usize>], mandatory: &[bool], chain: &[Option<u8>], budget: usize) -> (Vec<Option<usize>>, usize) {
    let mut choice = vec![None; costs.len()];
    let mut used = 0usize;
    for (i, c) in costs.iter().enumerate() {
        if mandatory[i] && !c.is_empty() {
            choice[i] = Some(0);
            used += c[0];
        }
    }
    let mut broken: Vec<u8> = Vec::new();
    for (i, c) in costs.iter().enumerate() {
        if mandatory[i] || c.is_empty() || chain[i].is_some_and(|k| broken.contains(&k)) {
            continue;
        }
        if used + c[c.len() - 1] <= budget {
            choice[i] = Some(c.len() - 1);
            used += c[c.len() - 1];
        } else if let Some(k) = chain[i] {
            broken.push(k);
        }
    }
    for (i, c) in costs.iter().enumerate() {
        let Some(now) = choice[i].filter(|_| !mandatory[i]) else { continue };
        if let Some(better) = (0..now).find(|&l| used - c[now] + c[l] <= budget) {
            used = used - c[now] + c[better];
            choice[i] = Some(better);
        }
    }
    (choice, used)
}

/// The words an item shows: its string and number values, keys and ids left out (an `id`,
/// `…_id` or `…_at` value is a handle or a time the prompt renders its own way, if at all).
pub fn words(v: &Value) -> String {
    fn walk(v: &Value, key: &str, out: &mut Vec<String>) {
        if key == "id" || key == "at" || key.ends_with("_id") || key.ends_with("_at") {
            return;
        }
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Number(n) => out.push(n.to_string()),
            Value::Bool(_) | Value::Null => {}
            Value::Array(a) => a.iter().for_each(|x| walk(x, "", out)),
            Value::Object(o) => o.iter().for_each(|(k, x)| walk(x, k, out)),
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out.join(" ")
}

/// What a line of this section adds to its words in the prompt: the bullet, and a memory's
/// "[date, kind, said by …]" label.
fn overhead(section: &str) -> usize {
    match section {
        "memories" | "recent_memories" => 12,
        "recent_turns" => 3,
        _ => 4,
    }
}

/// One item of a context: where it is, its levels (name, text, cost; richest first), whether
/// the budget may cut it.
struct Item {
    section: &'static str,
    /// The array it is in (a JSON pointer into the context) and its index there.
    array: &'static str,
    index: usize,
    levels: Vec<(&'static str, String, usize)>,
    mandatory: bool,
    /// Its levels are a memory's (the chosen one replaces its content).
    leveled: bool,
    /// One chain: the turns, kept unbroken from the newest.
    chain: Option<u8>,
}

/// A memory-like item's levels: its content, summary and micro line, each kept only when it
/// is cheaper than the richer one; a long text without a micro line can be clipped to its
/// first words as the last resort.
fn memory_levels(counter: &Counter, o: &Map<String, Value>, extra: usize) -> Vec<(&'static str, String, usize)> {
    let mut out: Vec<(&'static str, String, usize)> = Vec::new();
    let mut offer = |name: &'static str, text: Option<&str>| {
        let Some(t) = text.map(str::trim).filter(|t| !t.is_empty()) else { return };
        let cost = counter.count(t) + extra;
        if out.last().is_none_or(|l| cost < l.2) {
            out.push((name, t.to_string(), cost));
        }
    };
    let content = o.get("content").and_then(Value::as_str);
    offer("full", content);
    offer("summary", o.get("summary").and_then(Value::as_str));
    offer("micro", o.get("micro").and_then(Value::as_str));
    if o.get("micro").and_then(Value::as_str).is_none_or(|m| m.trim().is_empty()) {
        if let Some(c) = content {
            let words: Vec<&str> = c.split_whitespace().collect();
            if words.len() > CLIP_WORDS {
                offer("clipped", Some(&format!("{} …", words[..CLIP_WORDS].join(" "))));
            }
        }
    }
    out
}

/// The arrays a section names (JSON pointers into the context), and whether their items are
/// memory-like (levels) or lines (one level: their words).
fn arrays_of(section: &str) -> &'static [(&'static str, bool)] {
    match section {
        "recent_turns" => &[("/recent_turns", true)],
        "memories" => &[("/memories", true)],
        "recent_memories" => &[("/recent_memories", true)],
        // what the session holds: its open threads, its procedures, what earlier turns brought up
        "working_memory" => &[("/working_memory/threads", false), ("/working_memory/procedures", false), ("/working_memory/items", true)],
        "people" => &[("/people", false)],
        "triples" => &[("/triples", false)],
        "objectives" => &[("/objectives", false)],
        "goals" => &[("/goals", false)],
        "identity" => &[("/identity", false)],
        "worldview" => &[("/worldview", false)],
        "activated_themes" => &[("/activated_themes", false)],
        _ => &[],
    }
}

/// What every context shows whatever the budget: the message, what matters most to the person
/// (north stars), the session's focus, and a heartbeat's goal review and surroundings.
const FIXED: [&str; 5] = ["/message/content", "/north_stars", "/working_memory/focus", "/goals", "/environment"];

/// Fits a context into `budget` tokens (see [`choose`]): sections in `order` first, the
/// others after in [`SECTIONS`] order. Items cut leave their arrays; an included memory-like
/// item's content is its chosen level, with `level` and `tokens` beside it (its other levels
/// are removed). The report goes under `context_budget`.
pub fn fit(mut ctx: Value, budget: usize, order: &[String], task: &str) -> Value {
    let counter = counter();
    let mut sections: Vec<&'static str> = Vec::new();
    for s in order.iter().filter_map(|o| SECTIONS.iter().find(|k| **k == o.as_str())).chain(SECTIONS.iter()) {
        if !sections.contains(s) {
            sections.push(s);
        }
    }
    let mut items: Vec<Item> = Vec::new();
    for pointer in FIXED {
        // The heartbeat's goals are a review (an object); a chat context's are a list, ranked below.
        let v = match ctx.pointer(pointer) {
            Some(v) if !(pointer == "/goals" && v.is_array()) && !v.is_null() => v,
            _ => continue,
        };
        let text = words(v);
        if !text.is_empty() {
            let cost = counter.count(&text) + 2;
            items.push(Item { section: "fixed", array: pointer_static(pointer), index: 0, levels: vec![("full", text, cost)], mandatory: true, leveled: false, chain: None });
        }
    }
    for section in &sections {
        for &(array, leveled) in arrays_of(section) {
            let Some(list) = ctx.pointer(array).and_then(Value::as_array) else { continue };
            let n = list.len();
            // The newest turns matter most: turns are ranked from the last one back.
            let ranked: Vec<usize> = if *section == "recent_turns" { (0..n).rev().collect() } else { (0..n).collect() };
            for index in ranked {
                pgrx::check_for_interrupts!();
                let v = &list[index];
                let levels = match (leveled, v.as_object()) {
                    (true, Some(o)) => memory_levels(&counter, o, overhead(section)),
                    _ => {
                        let text = words(v);
                        if text.is_empty() {
                            Vec::new()
                        } else {
                            vec![("full", text.clone(), counter.count(&text) + overhead(section))]
                        }
                    }
                };
                let chain = (*section == "recent_turns").then_some(0);
                items.push(Item { section, array, index, levels, mandatory: false, leveled: leveled && v.is_object(), chain });
            }
        }
    }
    let costs: Vec<Vec<usize>> = items.iter().map(|i| i.levels.iter().map(|l| l.2).collect()).collect();
    let mandatory: Vec<bool> = items.iter().map(|i| i.mandatory).collect();
    let chain: Vec<Option<u8>> = items.iter().map(|i| i.chain).collect();
    let (choice, used) = choose(&costs, &mandatory, &chain, budget);

    // The report, and the context rewritten: per array the indexes kept, with their levels.
    let mut report_sections = Map::new();
    let mut cut_listed = Vec::new();
    let mut fixed = 0usize;
    // Per array, the kept items by index: their chosen level (None: kept as they are).
    let mut keep: HashMap<(&'static str, usize), (Option<(&'static str, String, usize)>, bool)> = HashMap::new();
    for (item, chosen) in items.iter().zip(&choice) {
        if item.mandatory {
            fixed += chosen.map_or(0, |c| item.levels[c].2);
            continue;
        }
        if item.levels.is_empty() {
            // Nothing to show costs nothing and is not cut: it stays as it is.
            keep.insert((item.array, item.index), (None, false));
            continue;
        }
        let entry = report_sections
            .entry(item.section.to_string())
            .or_insert_with(|| json!({"offered": 0, "included": 0, "cut": 0, "tokens": 0, "levels": {}}));
        entry["offered"] = json!(entry["offered"].as_u64().unwrap_or(0) + 1);
        match chosen {
            Some(c) => {
                let (name, text, cost) = &item.levels[*c];
                entry["included"] = json!(entry["included"].as_u64().unwrap_or(0) + 1);
                entry["tokens"] = json!(entry["tokens"].as_u64().unwrap_or(0) + *cost as u64);
                if item.leveled {
                    entry["levels"][*name] = json!(entry["levels"][*name].as_u64().unwrap_or(0) + 1);
                }
                keep.insert((item.array, item.index), (Some((name, text.clone(), *cost)), item.leveled));
            }
            None => {
                entry["cut"] = json!(entry["cut"].as_u64().unwrap_or(0) + 1);
                if cut_listed.len() < CUT_LISTED {
                    let v = ctx.pointer(item.array).and_then(|a| a.get(item.index));
                    let handle = v.and_then(|v| v.get("id").or_else(|| v.get("at")).cloned()).unwrap_or(json!(item.index));
                    cut_listed.push(json!({"section": item.section, "item": handle,
                                           "smallest": item.levels.last().map_or(0, |l| l.2)}));
                }
            }
        }
    }
    for section in &sections {
        for &(array, _) in arrays_of(section) {
            let Some(list) = ctx.pointer_mut(array).and_then(Value::as_array_mut) else { continue };
            let old = std::mem::take(list);
            for (index, mut v) in old.into_iter().enumerate() {
                let Some((chosen, leveled)) = keep.get(&(array, index)) else { continue };
                if let (true, Some(o), Some((name, text, cost))) = (*leveled, v.as_object_mut(), chosen) {
                    o.insert("content".into(), json!(text));
                    o.insert("level".into(), json!(name));
                    o.insert("tokens".into(), json!(cost));
                    o.remove("summary");
                    o.remove("micro");
                }
                list.push(v);
            }
        }
    }
    // The order as served: the sections this context has.
    sections.retain(|s| arrays_of(s).iter().any(|(a, _)| ctx.pointer(a).is_some_and(Value::is_array)));
    if let Some(o) = ctx.as_object_mut() {
        o.insert(
            "context_budget".into(),
            json!({"task": task, "budget": budget, "used": used, "over": used > budget, "fixed": fixed,
                   "tokenizer": counter.name(), "order": sections, "sections": report_sections, "cut": cut_listed}),
        );
    }
    ctx
}

fn pointer_static(p: &str) -> &'static str {
    FIXED.iter().find(|f| **f == p).copied().unwrap_or("")
}

/// The SQL surface nobody calls directly (created in sql/001's schema of that name).
#[pg_schema]
mod dionysus_internal {
    use crate::errors;
    use crate::json_arg::JsonArg;
    use pgrx::prelude::*;

    /// A context fitted into a budget (sql/027): see [`super::fit`].
    #[pg_extern(stable, parallel_safe)]
    fn fit_context(context: Option<JsonArg>, budget: Option<i32>, sections: Option<Vec<Option<String>>>, task: Option<&str>) -> pgrx::JsonB {
        let Some(context) = context else { errors::null_arg("context") };
        // Parsed with the nesting bound every JSON argument has (22P02, never a panic).
        let ctx = context.parse("context");
        if !ctx.is_object() {
            errors::bad_json("context", "must be a JSON object");
        }
        let budget = match budget {
            None => errors::null_arg("budget"),
            Some(b) if b < 1 => errors::invalid_arg("budget", format!("{b} tokens; it must be positive")),
            Some(b) => b as usize,
        };
        let order: Vec<String> = sections.unwrap_or_default().into_iter().flatten().collect();
        pgrx::JsonB(super::fit(ctx, budget, &order, task.unwrap_or("custom")))
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn breadth_first_then_each_in_rank_order_up_to_the_richest_that_fits() {
        // full 100, summary 30, micro 10 each; 60 tokens: all three at micro first (30), then
        // the first moves up to its summary (50); the rest cannot move.
        let costs = vec![vec![100, 30, 10]; 3];
        let (choice, used) = choose(&costs, &[false; 3], &[None; 3], 60);
        assert_eq!(choice, vec![Some(1), Some(2), Some(2)]);
        assert_eq!(used, 50);
        // Room for everything: everything full.
        let (choice, used) = choose(&costs, &[false; 3], &[None; 3], 1000);
        assert_eq!(choice, vec![Some(0); 3]);
        assert_eq!(used, 300);
    }

    #[test]
    fn mandatory_items_are_always_in_and_what_does_not_fit_is_cut() {
        let costs = vec![vec![50], vec![40], vec![5]];
        let (choice, used) = choose(&costs, &[true, false, false], &[None; 3], 60);
        assert_eq!(choice, vec![Some(0), None, Some(0)]);
        assert_eq!(used, 55);
        // A mandatory item over the budget is still in: the report says "over".
        let (choice, used) = choose(&costs, &[true, false, false], &[None; 3], 10);
        assert_eq!(choice, vec![Some(0), None, None]);
        assert_eq!(used, 50);
    }

    #[test]
    fn a_chain_stops_at_its_first_item_that_does_not_fit() {
        // Turns newest first: 10, 50 (too long), 5. Unchained the 5 would get in after the cut.
        let costs = vec![vec![10], vec![50], vec![5]];
        assert_eq!(choose(&costs, &[false; 3], &[None; 3], 20).0, vec![Some(0), None, Some(0)]);
        assert_eq!(choose(&costs, &[false; 3], &[Some(0); 3], 20).0, vec![Some(0), None, None]);
    }

    #[test]
    fn words_leave_out_ids_and_times() {
        let v = json!({"id": "u-1", "name": "Ana", "relations": [{"with": "Lea", "person_id": "x", "at": "t", "opened_at": "t"}], "feeling": 0.6});
        let w = words(&v);
        let mut said: Vec<&str> = w.split(' ').collect();
        said.sort();
        assert_eq!(said, ["0.6", "Ana", "Lea"]);
    }
}
