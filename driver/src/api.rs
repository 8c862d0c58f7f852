//! The extension's answers that more than one part of the driver reads, as Rust shapes. Each
//! mirrors the SQL function's `COMMENT` (`\df+ dionysus.*`); only the keys the driver reads are
//! named, an `Option` where the answer may hold null. [`crate::db::Db::one`] reads an answer into
//! its shape, and a mismatch is an error naming the call, never a silent default.
use serde::{Deserialize, Serialize};
use serde_json::Number;

/// One turn of a conversation as a context shows it (`chat_context`'s `recent_turns`, and the
/// contexts built on it). `level`: the shorter level a tight token budget shows it at
/// ("summary", "micro"); absent or "full" when these are the words said.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Turn {
    /// "user", "assistant", or "other" (someone else's words in an imported history).
    pub role: String,
    pub content: String,
    pub at: Option<String>,
    pub level: Option<String>,
}

impl Turn {
    /// Whether this is the turn's own words, not a shorter level of it.
    pub fn is_full(&self) -> bool {
        self.level.as_deref().is_none_or(|l| l == "full")
    }
}

/// `chat_context(message_id, ...)`: everything a reply needs (see its COMMENT).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChatContext {
    pub message: Option<ContextMessage>,
    pub now: Option<String>,
    pub recent_turns: Vec<Turn>,
    pub memories: Vec<RecalledMemory>,
    pub triples: Vec<Triple>,
    pub people: Vec<PersonInLife>,
    pub goals: Vec<GoalTitle>,
    /// The person's north stars, oldest first.
    pub north_stars: Vec<String>,
    pub objectives: Vec<Objective>,
    /// The nearest context archetype (`name` null when none is near enough).
    pub archetype: Option<Archetype>,
    /// The session's working memory; null outside a person's open session.
    pub working_memory: Option<WorkingMemory>,
    pub context_budget: Option<ContextBudget>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContextMessage {
    pub id: Option<String>,
    pub content: String,
}

/// A memory recall found for a context (`chat_context`'s `memories`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RecalledMemory {
    pub content: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub created_at: Option<String>,
    pub score: Option<Number>,
    /// How recall found it: "vector", "lexical", "graph", or several joined.
    pub found_by: Option<String>,
    /// Whether it is a fact (not a turn's memory).
    pub fact: bool,
    /// Who said it, when it is a turn's memory: "user" or "assistant".
    pub role: Option<String>,
    pub level: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Triple {
    pub subject: String,
    pub predicate: String,
    pub object: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct GoalTitle {
    pub title: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Objective {
    pub description: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Archetype {
    pub name: Option<String>,
    pub nearest: Option<String>,
}

/// A person in the life of the one who wrote, as a context names them (`people_in_context`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PersonInLife {
    pub name: String,
    pub relation: Option<String>,
    /// How the person feels about them, -1 to 1.
    pub feeling: Option<f64>,
    #[serde(default)]
    pub traits: Vec<String>,
    #[serde(default)]
    pub topics: Vec<String>,
    #[serde(default)]
    pub relations: Vec<PersonRelation>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PersonRelation {
    pub with: String,
    pub kind: String,
    /// "to" (this person relates to `with`) or "from".
    pub direction: String,
    pub source: String,
    pub sentiment: Option<f64>,
}

/// A session's working memory (`chat_context`'s `working_memory`, 025_working_memory.sql).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct WorkingMemory {
    pub turn: Option<i64>,
    pub focus: Option<String>,
    #[serde(default)]
    pub threads: Vec<OpenThread>,
    /// What earlier turns brought up that this one did not.
    #[serde(default)]
    pub items: Vec<WorkingMemoryItem>,
    #[serde(default)]
    pub procedures: Vec<Procedure>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct OpenThread {
    pub content: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct WorkingMemoryItem {
    pub kind: Option<String>,
    pub content: Option<String>,
    pub created_at: Option<String>,
}

/// A learned procedure in working memory (`procedure_json`, 026_procedures.sql).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Procedure {
    pub name: String,
    pub domain: Option<String>,
    pub successes: Option<i64>,
    pub failures: Option<i64>,
    pub effectiveness: Option<f64>,
    #[serde(default)]
    pub goals: Vec<String>,
    #[serde(default)]
    pub core_patterns: Vec<String>,
    #[serde(default)]
    pub core_tools: Vec<String>,
    #[serde(default)]
    pub core_concepts: Vec<String>,
    #[serde(default)]
    pub implementation_notes: Vec<String>,
}

/// What the token budget (027) allowed and cut (`context_budget` of a context).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContextBudget {
    pub task: Option<String>,
    pub budget: Option<Number>,
    pub used: Option<Number>,
    /// Per section: how many of its items were cut.
    #[serde(default)]
    pub sections: std::collections::BTreeMap<String, BudgetSection>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct BudgetSection {
    pub cut: Option<u64>,
}


/// A text and, when it is a turn's, who said it ("user", "assistant"): the shape of the
/// lists a prompt quotes (`heartbeat_begin`'s `recent_memories`, …).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Content {
    pub content: String,
    pub role: Option<String>,
}

/// `approve_proposal(proposal_id, decided_by)`'s answer, and `mirror_decide(...)`'s, which adds the
/// proposal's `status` after any decision (a reject or discuss answers `decided` instead of
/// `approved`). See their COMMENTs.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProposalDecision {
    pub approved: Option<bool>,
    pub decided: Option<bool>,
    /// Why it was not approved.
    pub reason: Option<String>,
    pub status: Option<String>,
    /// What the approval changed (free-form, shown as it is).
    #[serde(default)]
    pub applied: serde_json::Value,
}
