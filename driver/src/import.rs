//! `dionysus import PATH`: a person's history from elsewhere into the message log, with its
//! original times and authors. Three inputs:
//! - a Discord data package (the folder with `messages/`, or `messages/` itself): every channel's
//!   `messages.json` (or the older `messages.csv`), all written by the package's owner;
//! - the Dionysus chat format (JSON, documented in the README);
//! - the LoCoMo layout (a list of samples, or one), each speaker's turns by that speaker.
//!
//! The whole input is read and checked before anything is written: a malformed file is refused
//! with its line and the reason; a turn the database could not take (an id that is not one, a
//! text of nothing but control characters, ...) is left out and reported with its file and line,
//! and control characters are taken out of texts and names. Then the turns go to
//! `dionysus.import_messages` in batches, in order; the database keeps the position, so a
//! second run of the same input resumes where the first stopped, and a finished one is not
//! imported twice (platform ids are unique too).
//! Extraction and summaries follow through the work queue, behind the live conversation.
use crate::config::Config;
use crate::db::Db;
use chrono::{DateTime, Datelike, NaiveDateTime, Utc};
use serde::de::{self, Deserializer};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Discord,
    Chat,
    Locomo,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Discord => "discord",
            Kind::Chat => "chat",
            Kind::Locomo => "locomo",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The person whose history it is: their words are extracted.
    Person,
    /// The companion's own turns.
    Bot,
    /// Anyone else in the conversation.
    Other,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    pub platform: String,
    pub id: String,
    pub channel: String,
    pub author: String,
    pub name: Option<String>,
    pub role: Role,
    pub text: String,
    pub at: DateTime<Utc>,
    /// Where it was read, for the report of what was left out or cleaned.
    pub file: PathBuf,
    pub line: Option<usize>,
}

impl Turn {
    fn item(&self) -> Value {
        let role = match self.role {
            Role::Person => "person",
            Role::Bot => "bot",
            Role::Other => "other",
        };
        json!({"platform": self.platform, "id": self.id, "channel": self.channel, "author": self.author, "name": self.name,
               "role": role, "text": self.text, "at": self.at.to_rfc3339()})
    }
}

/// An input read whole: whose it is and its turns, oldest first.
#[derive(Debug)]
pub struct History {
    pub kind: Kind,
    /// The person key every memory will be private to.
    pub person: String,
    pub turns: Vec<Turn>,
    /// Turns with nothing to keep (no text, no attachment).
    pub empty: usize,
    /// Turns left out: the database could not take them.
    pub skipped: Vec<Malformed>,
    /// Turns kept with control characters taken out of their text or name.
    pub cleaned: Vec<Malformed>,
}

impl History {
    /// Leaves out (and reports) the turns longer than the database's dionysus.max_content_length,
    /// as import_messages measures them: someone else's words with their name.
    pub fn fit(&mut self, longest: usize) {
        for t in std::mem::take(&mut self.turns) {
            let named = (t.role == Role::Other).then(|| t.name.as_deref().unwrap_or(&t.author).chars().count() + 2).unwrap_or(0);
            if named + t.text.chars().count() > longest {
                let reason = format!("turn {} of conversation {}: it is longer than the database's dionysus.max_content_length ({longest})", shown(&t.id), shown(&t.channel));
                self.skipped.push(Malformed { file: t.file, line: t.line, reason });
            } else {
                self.turns.push(t);
            }
        }
    }

    /// What identifies this input: the same turns for the same person resume the same import.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.person.as_bytes());
        for t in &self.turns {
            h.update(b"\n");
            h.update(t.item().to_string().as_bytes());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Why an input is refused: the file, the line when it is known, and the reason.
#[derive(Debug, PartialEq)]
pub struct Malformed {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub reason: String,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}, line {l}: {}", self.file.display(), self.reason),
            None => write!(f, "{}: {}", self.file.display(), self.reason),
        }
    }
}

fn malformed(file: &Path, line: Option<usize>, reason: impl Into<String>) -> Malformed {
    Malformed { file: file.to_path_buf(), line, reason: reason.into() }
}

/// serde_json's error as a refusal: its line, and its message without the position it repeats.
fn from_json_error(file: &Path, e: serde_json::Error) -> Malformed {
    let msg = e.to_string();
    let reason = msg.rsplit_once(" at line ").map_or(msg.as_str(), |(r, _)| r).to_string();
    malformed(file, (e.line() > 0).then_some(e.line()), reason)
}

/// Line numbers of byte offsets in a text.
struct Lines(Vec<usize>);

impl Lines {
    fn new(src: &str) -> Lines {
        Lines(src.match_indices('\n').map(|(i, _)| i).collect())
    }

    fn at(&self, offset: usize) -> usize {
        self.0.partition_point(|&n| n < offset) + 1
    }
}

/// Where each element of each array of a JSON text starts, by the array's path ("/conversations/0/messages",
/// "" for a top-level array): serde_json keeps no positions, and a turn left out is reported with
/// its line. `src` has been parsed already, so it is valid JSON.
fn element_offsets(src: &str) -> HashMap<String, Vec<usize>> {
    enum Frame {
        Object { path: String, key: String },
        Array { path: String, index: usize },
    }
    let b = src.as_bytes();
    let string_end = |mut i: usize| {
        i += 1;
        while i < b.len() && b[i] != b'"' {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        (i + 1).min(b.len())
    };
    let (mut out, mut stack): (HashMap<String, Vec<usize>>, Vec<Frame>) = (HashMap::new(), vec![]);
    let (mut i, mut want_key) = (0, false);
    while i < b.len() {
        match b[i] {
            b' ' | b'\n' | b'\r' | b'\t' | b':' => i += 1,
            b',' => {
                want_key = matches!(stack.last(), Some(Frame::Object { .. }));
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                want_key = false;
                i += 1;
            }
            b'"' if want_key => {
                let end = string_end(i);
                if let Some(Frame::Object { key, .. }) = stack.last_mut() {
                    *key = src.get(i + 1..end.saturating_sub(1)).unwrap_or_default().to_string();
                }
                want_key = false;
                i = end;
            }
            c => {
                // A value starts here.
                let path = match stack.last_mut() {
                    None => String::new(),
                    Some(Frame::Object { path, key }) => format!("{path}/{key}"),
                    Some(Frame::Array { path, index }) => {
                        out.entry(path.clone()).or_default().push(i);
                        *index += 1;
                        format!("{path}/{}", *index - 1)
                    }
                };
                match c {
                    b'{' => {
                        stack.push(Frame::Object { path, key: String::new() });
                        want_key = true;
                        i += 1;
                    }
                    b'[' => {
                        stack.push(Frame::Array { path, index: 0 });
                        i += 1;
                    }
                    b'"' => i = string_end(i),
                    _ => {
                        while i < b.len() && !b" \n\r\t,]}".contains(&b[i]) {
                            i += 1;
                        }
                    }
                }
            }
        }
    }
    out
}

/// The line of the `n`th element of the array at `path`, if the text has one there.
fn element_line(offsets: &HashMap<String, Vec<usize>>, lines: &Lines, path: &str, n: usize) -> Option<usize> {
    offsets.get(path).and_then(|o| o.get(n)).map(|&o| lines.at(o))
}

/// A value as a report shows it: quoted, escaped, and short.
fn shown(s: &str) -> String {
    let short: String = s.chars().take(60).collect();
    format!("\"{}{}\"", short.escape_debug(), if short.len() < s.len() { "..." } else { "" })
}

fn codes(cs: &BTreeSet<char>) -> String {
    cs.iter().map(|c| format!("U+{:04X}", *c as u32)).collect::<Vec<_>>().join(", ")
}

/// Control characters but line breaks and tabs: PostgreSQL cannot store NUL at all, and none of
/// them is words.
fn unwanted(c: char) -> bool {
    c.is_control() && !matches!(c, '\n' | '\r' | '\t')
}

/// A turn as the database takes it (control characters out of its text and name, with a note of
/// what was taken out), or why it is left out. Every check import_messages makes is made here:
/// a batch it refused would stop the import at that turn on every run.
fn check(mut t: Turn, kind: Kind, latest: DateTime<Utc>) -> Result<(Turn, Option<Malformed>), Malformed> {
    let at = format!("turn {} of conversation {}", shown(&t.id), shown(&t.channel));
    let report = |t: &Turn, reason: String| Malformed { file: t.file.clone(), line: t.line, reason: format!("{at}: {reason}") };
    for (what, v) in [("id", &t.id), ("conversation", &t.channel), ("author", &t.author)] {
        let bad: BTreeSet<char> = v.chars().filter(|c| c.is_control()).collect();
        if !bad.is_empty() {
            return Err(report(&t, format!("its {what} contains a control character ({})", codes(&bad))));
        }
        if v.trim().is_empty() {
            return Err(report(&t, format!("its {what} is empty")));
        }
        if v.chars().count() > 200 {
            return Err(report(&t, format!("its {what} is longer than 200 characters")));
        }
    }
    if kind == Kind::Discord && !(t.id.len() <= 20 && t.id.bytes().all(|b| b.is_ascii_digit())) {
        return Err(report(&t, format!("{} is not a Discord message id (a number)", shown(&t.id))));
    }
    let mut cleaned = vec![];
    let bad: BTreeSet<char> = t.text.chars().filter(|c| unwanted(*c)).collect();
    if !bad.is_empty() {
        t.text = t.text.chars().filter(|c| !unwanted(*c)).collect();
        if t.text.trim().is_empty() {
            return Err(report(&t, format!("its text is nothing but control characters and spaces ({})", codes(&bad))));
        }
        cleaned.push(format!("its text ({})", codes(&bad)));
    }
    if let Some(n) = &t.name {
        let bad: BTreeSet<char> = n.chars().filter(|c| c.is_control()).collect();
        if !bad.is_empty() {
            cleaned.push(format!("its display name ({})", codes(&bad)));
        }
        let n: String = n.chars().filter(|c| !c.is_control()).collect::<String>().trim().chars().take(100).collect();
        t.name = Some(n).filter(|n| !n.is_empty());
    }
    if t.text.chars().count() > LONGEST_TURN {
        return Err(report(&t, format!("it is longer than {LONGEST_TURN} characters")));
    }
    if t.at.year() < 1900 || t.at > latest {
        return Err(report(&t, format!("it is dated {}, before 1900 or in the future", t.at.to_rfc3339())));
    }
    let note = (!cleaned.is_empty()).then(|| report(&t, format!("control characters taken out of {}", cleaned.join(" and "))));
    Ok((t, note))
}

/// Who the input is about and how it is read.
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// The person key everything is private to (default: the author's own key on the input's platform).
    pub person: Option<String>,
    /// Which author is the person: a Discord user id (else the package's account/user.json),
    /// a LoCoMo speaker (else speaker_a). The chat format names its person itself.
    pub author: Option<String>,
}

/// The key of a person on a platform, as `dionysus.person_key` makes it.
pub fn person_key(platform: &str, author: &str) -> String {
    format!("{}:{}", platform.trim().to_lowercase(), author.trim())
}

/// Times as the inputs write them: RFC 3339, Discord's "2023-05-08 13:56:00[.ffffff][+00:00]";
/// without an offset, UTC.
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for f in ["%Y-%m-%d %H:%M:%S%.f%:z", "%Y-%m-%d %H:%M:%S%.f%#z", "%Y-%m-%dT%H:%M:%S%.f%#z"] {
        if let Ok(t) = DateTime::parse_from_str(s, f) {
            return Some(t.with_timezone(&Utc));
        }
    }
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
        .map(|t| t.and_utc())
}

fn time_field<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    let s = String::deserialize(d)?;
    parse_time(&s).ok_or_else(|| de::Error::custom(format!("\"{s}\" is not a time (RFC 3339, e.g. 2023-05-08T13:56:00Z)")))
}

/// An id as a string, whether the file wrote it as one or as a number (Discord's do both).
fn id_field<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(de::Error::custom(format!("an id must be a non-empty string or a number, not {other}"))),
    }
}

fn non_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s.trim().is_empty() {
        return Err(de::Error::custom("must not be empty"));
    }
    Ok(s.trim().to_string())
}

/// A file's text, without a byte-order mark (spreadsheet exports write one).
fn read_text(path: &Path) -> Result<String, Malformed> {
    let s = std::fs::read_to_string(path).map_err(|e| malformed(path, None, format!("cannot read it: {e}")))?;
    Ok(s.strip_prefix('\u{feff}').map(str::to_string).unwrap_or(s))
}

/// The longest turn the database takes (dionysus.max_content_length's default), with room for a name.
const LONGEST_TURN: usize = 99_000;

/// Reads an input (a Discord package folder, or a JSON file in the chat or LoCoMo layout).
pub fn read(path: &Path, opts: &Options) -> Result<History, Malformed> {
    let mut h = if path.is_dir() {
        discord(path, opts)?
    } else {
        let src = read_text(path)?;
        let v: Value = serde_json::from_str(&src).map_err(|e| from_json_error(path, e))?;
        let is_locomo = |s: &Value| s.get("conversation").is_some_and(Value::is_object);
        match &v {
            Value::Object(o) if o.contains_key("conversations") => chat(path, &src, opts)?,
            Value::Object(_) if is_locomo(&v) => locomo(path, &src, std::slice::from_ref(&v), opts)?,
            Value::Array(a) if !a.is_empty() && a.iter().all(is_locomo) => locomo(path, &src, a, opts)?,
            _ => {
                return Err(malformed(
                    path,
                    Some(1),
                    "neither the Dionysus chat format (an object with \"conversations\") nor the LoCoMo layout \
                     (samples with a \"conversation\"); a Discord data package is a folder",
                ))
            }
        }
    };
    // Whose it all is must be a key the database takes, or nothing can be imported.
    if h.person.chars().any(|c| c.is_control()) {
        return Err(malformed(path, None, format!("the person key {} contains a control character", shown(&h.person))));
    }
    // What the database would refuse half-way is left out now, before anything is written, and reported.
    let latest = Utc::now() + chrono::Duration::days(1);
    for t in std::mem::take(&mut h.turns) {
        match check(t, h.kind, latest) {
            Ok((t, note)) => {
                h.cleaned.extend(note);
                h.turns.push(t);
            }
            Err(m) => h.skipped.push(m),
        }
    }
    // Oldest first; equal times keep a fixed order, so the same input always reads the same.
    h.turns.sort_by(|a, b| (a.at, &a.channel, &a.id).cmp(&(b.at, &b.channel, &b.id)));
    // A turn twice in the input comes in once, as import_messages keys it: a Discord message by
    // its id, any other input's turn by its conversation and id (a file may number each chat's
    // turns 1, 2, ...).
    let mut seen = BTreeSet::new();
    let discord = h.kind == Kind::Discord;
    h.turns.retain(|t| seen.insert((t.platform.clone(), if discord { String::new() } else { t.channel.clone() }, t.id.clone())));
    Ok(h)
}

// ---------------------------------------------------------------------------------------
// The Dionysus chat format
// ---------------------------------------------------------------------------------------

#[derive(Deserialize)]
struct ChatFile {
    #[serde(default = "default_platform", deserialize_with = "non_empty")]
    platform: String,
    /// The author id of the person whose history it is.
    #[serde(deserialize_with = "id_field")]
    person: String,
    /// The author id of the companion's turns, if it took part.
    #[serde(default, deserialize_with = "optional_id")]
    bot: Option<String>,
    conversations: Vec<ChatConversation>,
}

fn default_platform() -> String {
    "import".into()
}

fn optional_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    id_field(d).map(Some)
}

#[derive(Deserialize)]
struct ChatConversation {
    #[serde(deserialize_with = "id_field")]
    channel: String,
    messages: Vec<ChatMessage>,
}

#[derive(Deserialize)]
struct ChatMessage {
    #[serde(deserialize_with = "id_field")]
    id: String,
    #[serde(deserialize_with = "id_field")]
    author: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(deserialize_with = "time_field")]
    time: DateTime<Utc>,
    text: String,
}

fn chat(path: &Path, src: &str, opts: &Options) -> Result<History, Malformed> {
    let f: ChatFile = serde_json::from_str(src).map_err(|e| from_json_error(path, e))?;
    if f.platform.chars().any(|c| c.is_control()) {
        return Err(malformed(path, Some(1), format!("the platform {} contains a control character", shown(&f.platform))));
    }
    let person = opts.person.clone().unwrap_or_else(|| person_key(&f.platform, &f.person));
    let mut turns = vec![];
    let mut empty = 0;
    let (offsets, lines) = (element_offsets(src), Lines::new(src));
    for (ci, c) in f.conversations.into_iter().enumerate() {
        let list = format!("/conversations/{ci}/messages");
        for (mi, m) in c.messages.into_iter().enumerate() {
            if m.text.trim().is_empty() {
                empty += 1;
                continue;
            }
            let role = if m.author == f.person {
                Role::Person
            } else if f.bot.as_deref() == Some(m.author.as_str()) {
                Role::Bot
            } else {
                Role::Other
            };
            let name = m.name.map(|n| n.trim().chars().take(100).collect::<String>()).filter(|n| !n.is_empty());
            let line = element_line(&offsets, &lines, &list, mi);
            turns.push(Turn { platform: f.platform.clone(), id: m.id, channel: c.channel.clone(), author: m.author, name, role, text: m.text, at: m.time,
                              file: path.to_path_buf(), line });
        }
    }
    Ok(History { kind: Kind::Chat, person, turns, empty, skipped: vec![], cleaned: vec![] })
}

// ---------------------------------------------------------------------------------------
// LoCoMo: {"sample_id", "conversation": {"speaker_a", "speaker_b", "session_N_date_time",
// "session_N": [{"speaker", "dia_id", "text", "blip_caption"?}]}}
// ---------------------------------------------------------------------------------------

#[derive(Deserialize)]
struct LocomoTurn {
    #[serde(deserialize_with = "non_empty")]
    speaker: String,
    #[serde(deserialize_with = "id_field")]
    dia_id: String,
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
}

/// The line where `needle` first appears after `from` (a byte offset; for errors found after parsing).
fn line_of(src: &str, from: usize, needle: &str) -> Option<usize> {
    let from = (0..=from.min(src.len())).rev().find(|i| src.is_char_boundary(*i)).unwrap_or(0);
    src[from..].find(needle).map(|i| src[..from + i].matches('\n').count() + 1)
}

fn locomo(path: &Path, src: &str, samples: &[Value], opts: &Options) -> Result<History, Malformed> {
    let mut turns = vec![];
    let mut empty = 0;
    let mut person: Option<String> = None;
    let (offsets, lines) = (element_offsets(src), Lines::new(src));
    let listed = src.trim_start().starts_with('[');
    for (i, s) in samples.iter().enumerate() {
        let sample = s.get("sample_id").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format!("sample-{}", i + 1));
        let conv = s.get("conversation").and_then(Value::as_object).expect("checked by read");
        // Where this sample starts in the file: its errors are looked for after it.
        let here = src.find(&format!("\"{sample}\"")).unwrap_or(0);
        let at_conv = || line_of(src, here, &format!("\"{sample}\"")).or_else(|| line_of(src, here, "\"conversation\""));
        let speakers: Vec<String> = ["speaker_a", "speaker_b"].iter().filter_map(|k| conv.get(*k)?.as_str()).map(|s| s.trim().to_string()).collect();
        if speakers.len() != 2 || speakers.iter().any(String::is_empty) {
            return Err(malformed(path, at_conv(), format!("sample {sample}: the conversation needs speaker_a and speaker_b")));
        }
        let me = opts.author.clone().unwrap_or_else(|| speakers[0].clone());
        if !speakers.contains(&me) {
            return Err(malformed(path, at_conv(), format!("sample {sample}: --author {me} is neither {} nor {}", speakers[0], speakers[1])));
        }
        let key = opts.person.clone().unwrap_or_else(|| person_key("locomo", &me));
        if person.get_or_insert_with(|| key.clone()) != &key {
            return Err(malformed(path, at_conv(), format!("sample {sample}: its person {key} differs from the first sample's; import them one by one")));
        }
        let mut sessions: Vec<(usize, &Value)> = conv.iter().filter_map(|(k, v)| Some((k.strip_prefix("session_")?.parse().ok()?, v))).collect();
        sessions.sort_by_key(|s| s.0);
        for (n, v) in sessions {
            let array = if listed { format!("/{i}/conversation/session_{n}") } else { format!("/conversation/session_{n}") };
            let at_session = || line_of(src, here, &format!("\"session_{n}\""));
            let when_key = format!("session_{n}_date_time");
            let when = conv.get(&when_key).and_then(Value::as_str).ok_or_else(|| {
                malformed(path, at_session(), format!("sample {sample}: session_{n} has no {when_key}"))
            })?;
            let start = NaiveDateTime::parse_from_str(when.trim(), "%I:%M %p on %d %B, %Y").map_err(|e| {
                malformed(path, line_of(src, here, &format!("\"{when_key}\"")), format!("sample {sample}: {when_key} \"{when}\" is not a time like \"1:56 pm on 8 May, 2023\": {e}"))
            })?;
            let list: Vec<LocomoTurn> = serde_json::from_value(v.clone())
                .map_err(|e| malformed(path, at_session(), format!("sample {sample}: session_{n} must be a list of turns with speaker, dia_id and text: {e}")))?;
            for (k, t) in list.into_iter().enumerate() {
                if !speakers.contains(&t.speaker) {
                    return Err(malformed(path, line_of(src, here, &format!("\"{}\"", t.dia_id)), format!("sample {sample}: turn {} is by {}, who is not a speaker", t.dia_id, t.speaker)));
                }
                let mut text = t.text.trim().to_string();
                if let Some(c) = t.blip_caption.as_deref().map(str::trim).filter(|c| !c.is_empty()) {
                    text = format!("{text} [shares a photo: {c}]").trim().to_string();
                }
                if text.is_empty() {
                    empty += 1;
                    continue;
                }
                let role = if t.speaker == me { Role::Person } else { Role::Other };
                // Turns keep their order within the session: a minute apart.
                let Some(at) = start.checked_add_signed(chrono::Duration::minutes(k as i64)) else {
                    return Err(malformed(path, at_session(), format!("sample {sample}: session_{n}'s turns run past the last representable time")));
                };
                let at = at.and_utc();
                turns.push(Turn { platform: "locomo".into(), id: format!("{sample}:{}", t.dia_id), channel: sample.clone(), author: t.speaker.clone(), name: Some(t.speaker), role, text, at,
                                  file: path.to_path_buf(), line: element_line(&offsets, &lines, &array, k) });
            }
        }
    }
    let person = person.ok_or_else(|| malformed(path, Some(1), "no samples"))?;
    Ok(History { kind: Kind::Locomo, person, turns, empty, skipped: vec![], cleaned: vec![] })
}

// ---------------------------------------------------------------------------------------
// A Discord data package: messages/c<channel id>/{channel.json, messages.json | messages.csv}
// (older packages: messages/<channel id>/ and messages.csv), account/user.json for the owner.
// ---------------------------------------------------------------------------------------

#[derive(Deserialize)]
struct DiscordMessage {
    #[serde(rename = "ID", deserialize_with = "id_field")]
    id: String,
    #[serde(rename = "Timestamp", deserialize_with = "time_field")]
    at: DateTime<Utc>,
    #[serde(rename = "Contents", default)]
    contents: Option<String>,
    #[serde(rename = "Attachments", default)]
    attachments: Option<String>,
}

#[derive(Deserialize)]
struct DiscordUser {
    #[serde(deserialize_with = "id_field")]
    id: String,
}

/// RFC 4180 CSV: quoted fields may hold commas, doubled quotes and newlines. Each record with
/// the line it starts on.
pub fn parse_csv(src: &str) -> Result<Vec<(usize, Vec<String>)>, (usize, String)> {
    let mut records = vec![];
    let (mut field, mut record) = (String::new(), vec![]);
    let (mut line, mut start) = (1, 1);
    let mut quoted = false;
    let mut chars = src.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        any = true;
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                '\n' => {
                    line += 1;
                    field.push(c);
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() => quoted = true,
            '"' => return Err((line, "a quote inside an unquoted field".into())),
            ',' => record.push(std::mem::take(&mut field)),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                record.push(std::mem::take(&mut field));
                records.push((start, std::mem::take(&mut record)));
                line += 1;
                start = line;
                any = false;
            }
            _ => field.push(c),
        }
    }
    if quoted {
        return Err((start, "a quoted field is never closed".into()));
    }
    if any {
        record.push(field);
        records.push((start, record));
    }
    Ok(records)
}

fn discord(root: &Path, opts: &Options) -> Result<History, Malformed> {
    let dir = if root.join("messages").is_dir() { root.join("messages") } else { root.to_path_buf() };
    let owner = match &opts.author {
        Some(a) => a.trim().to_string(),
        None => {
            let candidates = [root.join("account/user.json"), dir.join("../account/user.json")];
            let Some(file) = candidates.iter().find(|p| p.is_file()) else {
                return Err(malformed(root, None, "whose messages are these? give --author <your Discord user id> (the package's account/user.json has it)"));
            };
            let src = read_text(file)?;
            serde_json::from_str::<DiscordUser>(&src).map_err(|e| from_json_error(file, e))?.id
        }
    };
    let mut channels: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| malformed(&dir, None, format!("cannot read the folder: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && (p.join("messages.json").is_file() || p.join("messages.csv").is_file()))
        .collect();
    channels.sort();
    if channels.is_empty() {
        return Err(malformed(root, None, "not a Discord data package: no messages/<channel>/messages.json or messages.csv"));
    }
    let mut turns = vec![];
    let mut empty = 0;
    for c in channels {
        let folder = c.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let meta = c.join("channel.json");
        let channel = if meta.is_file() {
            let src = read_text(&meta)?;
            serde_json::from_str::<DiscordUser>(&src).map_err(|e| from_json_error(&meta, e))?.id
        } else {
            folder.strip_prefix('c').filter(|r| r.chars().all(|ch| ch.is_ascii_digit())).unwrap_or(&folder).to_string()
        };
        // Each message with the line it starts on.
        let (file, rows): (PathBuf, Vec<(Option<usize>, DiscordMessage)>) = if c.join("messages.json").is_file() {
            let file = c.join("messages.json");
            let src = read_text(&file)?;
            let rows: Vec<DiscordMessage> = serde_json::from_str(&src).map_err(|e| from_json_error(&file, e))?;
            let (offsets, lines) = (element_offsets(&src), Lines::new(&src));
            let rows = rows.into_iter().enumerate().map(|(k, m)| (element_line(&offsets, &lines, "", k), m)).collect();
            (file, rows)
        } else {
            let file = c.join("messages.csv");
            let src = read_text(&file)?;
            let records = parse_csv(&src).map_err(|(l, r)| malformed(&file, Some(l), r))?;
            let mut it = records.into_iter();
            let Some((_, header)) = it.next() else { continue };
            let col = |name: &str| header.iter().position(|h| h.trim().eq_ignore_ascii_case(name));
            let (Some(ci), Some(ct)) = (col("ID"), col("Timestamp")) else {
                return Err(malformed(&file, Some(1), "the header must name ID and Timestamp (and Contents, Attachments)"));
            };
            let (cc, ca) = (col("Contents"), col("Attachments"));
            let mut rows = vec![];
            for (line, r) in it {
                if r.len() == 1 && r[0].is_empty() {
                    continue;
                }
                let get = |i: Option<usize>| i.and_then(|i| r.get(i)).cloned();
                let id = get(Some(ci)).filter(|s| !s.trim().is_empty()).ok_or_else(|| malformed(&file, Some(line), "no ID"))?;
                let ts = get(Some(ct)).unwrap_or_default();
                let at = parse_time(&ts).ok_or_else(|| malformed(&file, Some(line), format!("\"{ts}\" is not a time")))?;
                rows.push((Some(line), DiscordMessage { id: id.trim().to_string(), at, contents: get(cc), attachments: get(ca) }));
            }
            (file, rows)
        };
        for (line, m) in rows {
            let words = m.contents.unwrap_or_default().trim().to_string();
            let files = m.attachments.unwrap_or_default().split_whitespace().map(|u| format!("[attachment: {u}]")).collect::<Vec<_>>().join(" ");
            let text = [words, files].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ");
            if text.is_empty() {
                empty += 1;
                continue;
            }
            turns.push(Turn { platform: "discord".into(), id: m.id, channel: channel.clone(), author: owner.clone(), name: None, role: Role::Person, text, at: m.at,
                              file: file.clone(), line });
        }
    }
    let person = opts.person.clone().unwrap_or_else(|| person_key("discord", &owner));
    Ok(History { kind: Kind::Discord, person, turns, empty, skipped: vec![], cleaned: vec![] })
}

// ---------------------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------------------

/// `begin_import(...)` and `import_messages(...)`: where an import stands (see their COMMENTs).
#[derive(Debug, Deserialize)]
struct Progress {
    import_id: Option<uuid::Uuid>,
    position: Option<i64>,
    imported: Option<i64>,
    duplicates: Option<i64>,
    /// `begin_import`'s only: when an earlier run finished this input.
    finished_at: Option<String>,
}

const USAGE: &str = "usage: dionysus import PATH [--person KEY] [--author ID] [--dry-run]
  PATH       a Discord data package (its folder), a chat file (the README's format) or LoCoMo JSON
  --person   the person key it all belongs to (default: the author's key on the input's platform,
             e.g. discord:<id>); use your live key to bring another platform's history to you
  --author   which author is you: a Discord user id (default: account/user.json), a LoCoMo speaker
  --dry-run  read and check the input, write nothing";

fn flag(args: &[String], name: &str) -> Result<Option<String>, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(None),
        Some(i) => args.get(i + 1).filter(|v| !v.starts_with("--")).cloned().map(Some).ok_or_else(|| format!("{name} needs a value")),
    }
}

fn thousands(n: i64) -> String {
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// `dionysus import ...` (args after the command word).
pub async fn run(config: &Config, args: &[String]) -> ExitCode {
    let (person, author) = match (flag(args, "--person"), flag(args, "--author")) {
        (Ok(p), Ok(a)) => (p, a),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("dionysus import: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let valued = ["--person", "--author"];
    let mut paths = vec![];
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
        } else if valued.contains(&a.as_str()) {
            skip = true;
        } else if !a.starts_with("--") {
            paths.push(a.clone());
        } else if a != "--dry-run" {
            eprintln!("dionysus import: unknown option {a}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    let [path] = paths.as_slice() else {
        eprintln!("dionysus import: give one input\n\n{USAGE}");
        return ExitCode::from(2);
    };
    let batch: usize = std::env::var("DIONYSUS_IMPORT_BATCH").ok().and_then(|v| v.parse().ok()).filter(|n| (1..=1000).contains(n)).unwrap_or(100);
    let opts = Options { person, author };
    let mut history = match read(Path::new(path), &opts) {
        Ok(h) => h,
        Err(m) => {
            eprintln!("dionysus import: refused: {m}\nnothing was imported");
            return ExitCode::from(2);
        }
    };
    let dry = args.iter().any(|a| a == "--dry-run");
    let db = Db::new(&config.database_url, "import").with_patience(std::time::Duration::from_secs(30));
    if !dry {
        // The database's own limit may be below its default: a turn over it is left out as well.
        match db.one::<i64>("SELECT to_jsonb(coalesce(nullif(current_setting('dionysus.max_content_length', true), '')::int, 100000))", &[]).await {
            Ok(v) => history.fit(usize::try_from(v).unwrap_or(100_000)),
            Err(e) => {
                eprintln!("dionysus import: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    // Every turn left out or cleaned, with its file, line and why (on every run: the input is read again).
    for m in &history.cleaned {
        eprintln!("dionysus import: cleaned {m}");
    }
    for m in &history.skipped {
        eprintln!("dionysus import: left out {m}");
    }
    let channels: BTreeSet<&str> = history.turns.iter().map(|t| t.channel.as_str()).collect();
    let span = match (history.turns.first(), history.turns.last()) {
        (Some(a), Some(b)) => format!(", {} to {}", a.at.format("%Y-%m-%d"), b.at.format("%Y-%m-%d")),
        _ => String::new(),
    };
    println!(
        "{}: {} turns in {} conversations{span}, for {}{}",
        history.kind.as_str(),
        thousands(history.turns.len() as i64),
        channels.len(),
        history.person,
        if history.empty > 0 { format!(" ({} empty ones left out)", history.empty) } else { String::new() }
    );
    if !history.skipped.is_empty() || !history.cleaned.is_empty() {
        println!(
            "left out (the database could not take them): {}; cleaned of control characters: {} (each listed above with its file and line)",
            thousands(history.skipped.len() as i64),
            thousands(history.cleaned.len() as i64)
        );
    }
    if dry {
        println!("dry run: nothing written");
        return ExitCode::SUCCESS;
    }
    let total = history.turns.len() as i32;
    let begun: Progress = match db
        .one("SELECT dionysus.begin_import($1, $2, $3, $4, $5)", &[&history.person, &history.kind.as_str(), &path.as_str(), &history.fingerprint(), &total])
        .await
    {
        Ok(v) => v,
        Err(e) => {
            eprintln!("dionysus import: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(id) = begun.import_id else {
        eprintln!("dionysus import: begin_import answered without an import id: {begun:?}");
        return ExitCode::FAILURE;
    };
    let mut position = begun.position.unwrap_or(0).clamp(0, total as i64) as usize;
    if begun.finished_at.is_some() {
        println!(
            "already imported ({} new turns, {} the log held already); nothing to do",
            thousands(begun.imported.unwrap_or(0)),
            thousands(begun.duplicates.unwrap_or(0))
        );
        return ExitCode::SUCCESS;
    }
    if position > 0 {
        println!("resuming at turn {} of {}", thousands(position as i64), thousands(total as i64));
    }
    let (mut added, mut dup) = (begun.imported.unwrap_or(0), begun.duplicates.unwrap_or(0));
    while position < history.turns.len() {
        let end = (position + batch).min(history.turns.len());
        let items = Value::Array(history.turns[position..end].iter().map(Turn::item).collect());
        // Safe to send again if the connection breaks: the database skips what it committed.
        let r: Progress = match db.one("SELECT dionysus.import_messages($1, $2, $3)", &[&id, &(position as i32), &items]).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("dionysus import: stopped at turn {position}: {e}\n(run the same command again to resume)");
                return ExitCode::FAILURE;
            }
        };
        added += r.imported.unwrap_or(0);
        dup += r.duplicates.unwrap_or(0);
        position = r.position.map_or(end, |p| p as usize);
        eprintln!(
            "import: {}/{} turns ({}%), {} new, {} already in the log",
            thousands(position as i64),
            thousands(total as i64),
            position * 100 / history.turns.len(),
            thousands(added),
            thousands(dup)
        );
    }
    println!(
        "imported: {} new turns, {} the log held already. Extraction, concepts and episode summaries follow \
         through the work queue behind the live conversation (`dionysus status` shows what is left).",
        thousands(added),
        thousands(dup)
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, body: &str) -> PathBuf {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
        p
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dionysus-import-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn csv_keeps_quoted_commas_quotes_and_newlines_with_their_lines() {
        let r = parse_csv("ID,Timestamp,Contents\n1,2020-01-01 10:00:00,\"a, \"\"b\"\"\nc\"\n2,2020-01-01 10:01:00,plain\n").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[1], (2, vec!["1".into(), "2020-01-01 10:00:00".into(), "a, \"b\"\nc".into()]));
        assert_eq!(r[2].0, 4);
        assert_eq!(parse_csv("ID\n\"never closed\n").unwrap_err().0, 2);
    }

    #[test]
    fn times_in_the_shapes_the_inputs_use() {
        let want = "2023-05-08T13:56:00+00:00";
        for s in ["2023-05-08T13:56:00Z", "2023-05-08 13:56:00", "2023-05-08 13:56:00.000000+00:00", "2023-05-08T15:56:00+02:00"] {
            assert_eq!(parse_time(s).map(|t| t.to_rfc3339()).as_deref(), Some(want), "{s}");
        }
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn a_discord_package_reads_json_and_csv_channels_as_the_owner() {
        let d = scratch("discord");
        write(&d, "account/user.json", r#"{"id": "4242", "username": "me"}"#);
        write(&d, "messages/c100/channel.json", r#"{"id": "100", "type": "DM"}"#);
        write(&d, "messages/c100/messages.json", r#"[{"ID": 2, "Timestamp": "2023-01-02 10:00:00", "Contents": "second", "Attachments": ""},
            {"ID": "1", "Timestamp": "2023-01-01 10:00:00", "Contents": "", "Attachments": "https://cdn/x.png"},
            {"ID": 3, "Timestamp": "2023-01-03 10:00:00", "Contents": "", "Attachments": ""}]"#);
        write(&d, "messages/200/messages.csv", "ID,Timestamp,Contents,Attachments\n7,2022-12-31 09:00:00+00:00,\"hello, old\nfriend\",\n");
        let h = read(&d, &Options::default()).unwrap();
        assert_eq!(h.person, "discord:4242");
        assert_eq!(h.empty, 1);
        let got: Vec<(&str, &str, &str)> = h.turns.iter().map(|t| (t.id.as_str(), t.channel.as_str(), t.text.as_str())).collect();
        assert_eq!(got, vec![("7", "200", "hello, old\nfriend"), ("1", "100", "[attachment: https://cdn/x.png]"), ("2", "100", "second")]);
        assert!(h.turns.iter().all(|t| t.role == Role::Person && t.author == "4242"));
        // Who the person is must be known.
        std::fs::remove_file(d.join("account/user.json")).unwrap();
        assert!(read(&d, &Options::default()).unwrap_err().reason.contains("--author"));
        assert_eq!(read(&d, &Options { author: Some("9".into()), ..Default::default() }).unwrap().person, "discord:9");
    }

    #[test]
    fn a_malformed_chat_file_is_refused_with_its_line() {
        let d = scratch("chat");
        let f = write(&d, "chat.json", "{\"platform\": \"whatsapp\", \"person\": \"ann\", \"conversations\": [\n  {\"channel\": \"fam\", \"messages\": [\n    {\"id\": \"1\", \"author\": \"ann\", \"time\": \"2023-05-08T13:56:00Z\", \"text\": \"hi\"},\n    {\"id\": \"2\", \"author\": \"bo\", \"time\": \"last tuesday\", \"text\": \"yo\"}\n]}]}\n");
        let e = read(&f, &Options::default()).unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.reason.contains("last tuesday") && e.reason.contains("not a time"), "{e}");
        let f = write(&d, "broken.json", "{\"person\": \"ann\",\n \"conversations\": [\n");
        assert_eq!(read(&f, &Options::default()).unwrap_err().line, Some(3));
        let f = write(&d, "missing.json", "{\"person\": \"ann\", \"conversations\": [{\"channel\": \"c\", \"messages\": [\n {\"id\": \"1\", \"time\": \"2023-05-08T13:56:00Z\", \"text\": \"x\"}]}]}");
        let e = read(&f, &Options::default()).unwrap_err();
        assert!(e.reason.contains("author") && e.line == Some(2), "{e}");
    }

    #[test]
    fn chat_roles_and_person_key() {
        let d = scratch("roles");
        let f = write(&d, "chat.json", r#"{"platform": "WhatsApp", "person": "ann", "bot": "dio", "conversations": [{"channel": "c", "messages": [
            {"id": "1", "author": "ann", "time": "2023-05-08T13:56:00Z", "text": "hi"},
            {"id": "2", "author": "dio", "time": "2023-05-08T13:57:00Z", "text": "hello"},
            {"id": "3", "author": "bo", "name": "Bo", "time": "2023-05-08T13:58:00Z", "text": "yo"}]}]}"#);
        let h = read(&f, &Options::default()).unwrap();
        assert_eq!(h.person, "whatsapp:ann");
        assert_eq!(h.turns.iter().map(|t| t.role).collect::<Vec<_>>(), vec![Role::Person, Role::Bot, Role::Other]);
        let again = read(&f, &Options::default()).unwrap();
        assert_eq!(h.fingerprint(), again.fingerprint());
        // Each chat numbering its turns from 1: both chats' turns are kept; a turn twice, once.
        let f = write(&d, "two.json", r#"{"person": "ann", "conversations": [
            {"channel": "a", "messages": [{"id": 1, "author": "ann", "time": "2023-05-08T13:56:00Z", "text": "in a"}]},
            {"channel": "b", "messages": [{"id": 1, "author": "ann", "time": "2023-05-08T13:57:00Z", "text": "in b"},
                                          {"id": 1, "author": "ann", "time": "2023-05-08T13:57:00Z", "text": "in b"}]}]}"#);
        let texts: Vec<String> = read(&f, &Options::default()).unwrap().turns.into_iter().map(|t| t.text).collect();
        assert_eq!(texts, vec!["in a", "in b"]);
        let other = read(&f, &Options { person: Some("discord:1".into()), ..Default::default() }).unwrap();
        assert_ne!(h.fingerprint(), other.fingerprint());
    }

    #[test]
    fn hostile_inputs_are_refused_or_cleaned_never_a_panic() {
        let d = scratch("hostile");
        let f = write(&d, "far.json", r#"{"sample_id": "s", "conversation": {"speaker_a": "A", "speaker_b": "B",
            "session_1_date_time": "11:59 pm on 31 December, 262142",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "x"}, {"speaker": "B", "dia_id": "D1:2", "text": "y"}]}}"#);
        assert!(read(&f, &Options::default()).is_err());
        let f = write(&d, "nul.json", "\u{feff}{\"person\": \"ann\", \"conversations\": [{\"channel\": \"c\", \"messages\": [\n {\"id\": 1, \"author\": \"ann\", \"time\": \"2020-01-01T00:00:00Z\", \"text\": \"a\\u0000b\"}]}]}");
        assert_eq!(read(&f, &Options::default()).unwrap().turns[0].text, "ab");
        let long = "x".repeat(LONGEST_TURN + 1);
        let f = write(&d, "long.json", &json!({"person": "ann", "conversations": [{"channel": "c", "messages": [
            {"id": 1, "author": "ann", "time": "2020-01-01T00:00:00Z", "text": long}]}]}).to_string());
        let h = read(&f, &Options::default()).unwrap();
        assert!(h.turns.is_empty() && h.skipped[0].reason.contains("longer than"), "{:?}", h.skipped);
        let f = write(&d, "old.json", r#"{"person": "ann", "conversations": [{"channel": "c", "messages": [
            {"id": 1, "author": "ann", "time": "1850-01-01T00:00:00Z", "text": "old"}]}]}"#);
        let h = read(&f, &Options::default()).unwrap();
        assert!(h.turns.is_empty() && h.skipped[0].reason.contains("before 1900"), "{:?}", h.skipped);
        let f = write(&d, "who.json", r#"{"platform": "x\u0001", "person": "ann", "conversations": []}"#);
        assert!(read(&f, &Options::default()).unwrap_err().reason.contains("platform"));
        let f = write(&d, "whose.json", r#"{"person": "a\u0000nn", "conversations": []}"#);
        assert!(read(&f, &Options::default()).unwrap_err().reason.contains("person key"));
    }

    #[test]
    fn what_the_database_cannot_take_is_left_out_or_cleaned_with_its_file_and_line() {
        let d = scratch("unstorable");
        // One message a line (message k on line k + 1); the database cannot store NUL at all.
        let msgs = [json!({"text": "fine"}), json!({"text": "\u{0}"}), json!({"text": "\u{0} \u{1b}"}), json!({"text": "a\u{0}b\u{7}"}),
                    json!({"name": "B\u{0}o"}), json!({"author": "b\u{0}o"})];
        let body: Vec<String> = msgs.iter().enumerate()
            .map(|(k, m)| {
                let mut v = json!({"id": format!("m{k}"), "author": "bo", "time": format!("2023-05-08T10:0{k}:00Z"), "text": "hi"});
                for (key, x) in m.as_object().unwrap() {
                    v[key] = x.clone();
                }
                v.to_string()
            })
            .collect();
        let f = write(&d, "c.json", &format!("{{\"person\": \"ann\", \"conversations\": [{{\"channel\": \"fam\", \"messages\": [\n{}\n]}}]}}", body.join(",\n")));
        let h = read(&f, &Options::default()).unwrap();
        let got: Vec<(&str, &str, Option<&str>)> = h.turns.iter().map(|t| (t.id.as_str(), t.text.as_str(), t.name.as_deref())).collect();
        assert_eq!(got, vec![("m0", "fine", None), ("m3", "ab", None), ("m4", "hi", Some("Bo"))]);
        let show = |v: &[Malformed]| v.iter().map(|m| (m.line, m.reason.clone())).collect::<Vec<_>>();
        assert_eq!(show(&h.skipped), vec![
            (Some(3), "turn \"m1\" of conversation \"fam\": its text is nothing but control characters and spaces (U+0000)".into()),
            (Some(4), "turn \"m2\" of conversation \"fam\": its text is nothing but control characters and spaces (U+0000, U+001B)".into()),
            (Some(7), "turn \"m5\" of conversation \"fam\": its author contains a control character (U+0000)".into()),
        ], "{:?}", h.skipped);
        assert_eq!(show(&h.cleaned), vec![
            (Some(5), "turn \"m3\" of conversation \"fam\": control characters taken out of its text (U+0000, U+0007)".into()),
            (Some(6), "turn \"m4\" of conversation \"fam\": control characters taken out of its display name (U+0000)".into()),
        ]);
        assert!(h.skipped.iter().chain(&h.cleaned).all(|m| m.file == f));

        // A Discord package's message ids are Discord's: a number, in JSON and in CSV.
        write(&d, "pkg/account/user.json", r#"{"id": "4242"}"#);
        let json = write(&d, "pkg/messages/c1/messages.json", "[\n{\"ID\": 10, \"Timestamp\": \"2023-01-01 10:00:00\", \"Contents\": \"ok\"},\n  {\"ID\": \"x1\", \"Timestamp\": \"2023-01-01 10:01:00\", \"Contents\": \"bad id\"},\n{\"ID\": 12, \"Timestamp\": \"2023-01-01 10:02:00\", \"Contents\": \"\\u0000\"}]");
        let csv = write(&d, "pkg/messages/c2/messages.csv", "ID,Timestamp,Contents\n20,2023-01-02 10:00:00,ok\n\"2-1\",2023-01-02 10:01:00,\"two\nlines\"\n");
        let h = read(&d.join("pkg"), &Options::default()).unwrap();
        assert_eq!(h.turns.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), vec!["10", "20"]);
        let got: Vec<(PathBuf, Option<usize>, String)> = h.skipped.iter().map(|m| (m.file.clone(), m.line, m.reason.clone())).collect();
        assert_eq!(got, vec![
            (json.clone(), Some(3), "turn \"x1\" of conversation \"1\": \"x1\" is not a Discord message id (a number)".into()),
            (json, Some(4), "turn \"12\" of conversation \"1\": its text is nothing but control characters and spaces (U+0000)".into()),
            (csv, Some(3), "turn \"2-1\" of conversation \"2\": \"2-1\" is not a Discord message id (a number)".into()),
        ]);
    }

    #[test]
    fn element_offsets_find_each_array_element_by_its_path() {
        let src = "{\"a\": [1, \"x]\\\"\", {\"b\": [[], {}]}],\n \"c\": {\"a\": [ true ]}, \"d\": [{}, \"e\"]}";
        let o = element_offsets(src);
        let at = |path: &str| o[path].iter().map(|&i| &src[i..i + 1]).collect::<String>();
        assert_eq!(at("/a"), "1\"{");
        assert_eq!(at("/a/2/b"), "[{");
        assert_eq!(at("/c/a"), "t");
        assert_eq!(at("/d"), "{\"");
        let lines = Lines::new(src);
        assert_eq!((element_line(&o, &lines, "/c/a", 0), element_line(&o, &lines, "/c/a", 1)), (Some(2), None));
    }

    #[test]
    fn locomo_sessions_become_timed_turns_of_each_speaker() {
        let d = scratch("locomo");
        let f = write(&d, "l.json", r#"[{"sample_id": "conv-1", "conversation": {"speaker_a": "Cara", "speaker_b": "Mel",
            "session_2_date_time": "9:00 am on 9 May, 2023", "session_2": [{"speaker": "Mel", "dia_id": "D2:1", "text": "later"}],
            "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [
              {"speaker": "Cara", "dia_id": "D1:1", "text": "hi"},
              {"speaker": "Mel", "dia_id": "D1:2", "text": "look", "blip_caption": "a dog"}]}}]"#);
        let h = read(&f, &Options::default()).unwrap();
        assert_eq!(h.person, "locomo:Cara");
        let got: Vec<(String, String, Role)> = h.turns.iter().map(|t| (t.id.clone(), t.at.to_rfc3339(), t.role)).collect();
        assert_eq!(got, vec![
            ("conv-1:D1:1".into(), "2023-05-08T13:56:00+00:00".into(), Role::Person),
            ("conv-1:D1:2".into(), "2023-05-08T13:57:00+00:00".into(), Role::Other),
            ("conv-1:D2:1".into(), "2023-05-09T09:00:00+00:00".into(), Role::Other),
        ]);
        assert_eq!(h.turns[1].text, "look [shares a photo: a dog]");
        let e = read(&f, &Options { author: Some("Zed".into()), ..Default::default() }).unwrap_err();
        assert!(e.reason.contains("Zed") && e.line.is_some(), "{e}");
    }
}
