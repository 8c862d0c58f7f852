//! What a question says beyond its words' meaning, read without a model: the people it names
//! and the times it asks about.
//!
//! A question about someone is nearly always answered by what that person said: on the LoCoMo
//! dev split, 96 % of the evidence for a question naming one speaker is that speaker's own
//! turns. Someone else's words are stored as "Name: text" (the import and the conversation log
//! write them so), so a turn's speaker is its label; a memory that only mentions the name is
//! about them.

/// Sentence openers that are capitalised only because they come first.
const OPENERS: [&str; 72] = [
    "what", "when", "where", "who", "whom", "whose", "which", "why", "how", "did", "does", "do", "is", "are", "was", "were",
    "has", "have", "had", "can", "could", "would", "should", "will", "shall", "may", "might", "the", "a", "an", "in", "on",
    "at", "if", "after", "before", "since", "tell", "remind", "according", "hey", "hi", "hello", "so", "then", "well",
    "yes", "no", "ok", "okay", "thanks", "thank", "oh", "and", "but", "also", "maybe", "please", "just", "now", "today",
    "yesterday", "wow", "great", "sure", "yeah", "sorry", "good", "nice", "my", "our", "we",
];

/// The names a query mentions, lowercased: capitalised words that are not sentence openers
/// ("I" and all-capital acronyms are not names).
pub fn names(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut sentence_start = true;
    let mut rest = query;
    while !rest.is_empty() {
        let at = rest.find(|c: char| c.is_alphanumeric()).unwrap_or(rest.len());
        // A sentence ends at . ! ? (or a line break): its next word is capitalised anyway.
        if rest[..at].contains(['.', '!', '?', '\n']) {
            sentence_start = true;
        }
        rest = &rest[at..];
        let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’' || c == '-')).unwrap_or(rest.len());
        let raw = &rest[..end];
        rest = &rest[end..];
        let word = raw.trim_matches(|c: char| c == '\'' || c == '’' || c == '-');
        // A possessive belongs to its name: "Caroline's" is Caroline.
        let word = word.strip_suffix("'s").or_else(|| word.strip_suffix("’s")).unwrap_or(word);
        if word.is_empty() {
            continue;
        }
        let first_upper = word.chars().next().is_some_and(char::is_uppercase);
        let has_lower = word.chars().any(char::is_lowercase);
        let lower = word.to_lowercase();
        let opener = sentence_start && OPENERS.contains(&lower.as_str());
        let month = month_of(word).is_some_and(|(_, needs_number)| !needs_number);
        // "I'm", "I've": the speaker, not a name.
        let contraction = word.contains(['\'', '’']);
        if first_upper && has_lower && !opener && !month && !contraction && word.chars().count() >= 2 && !out.contains(&lower) {
            out.push(lower);
        }
        sentence_start = false;
    }
    out.truncate(8);
    out
}

/// What a question asks about, for its embedding: the question without the people it names
/// and the dates it gives. Those are matched by who said a memory (person_match) and when it
/// was made (time_match); a stored turn's words say neither, so in the embedding they only
/// pull towards memories that mention the name or a date (on the LoCoMo dev split, R@10 0.769
/// with them, 0.793 without). The whole question when nothing else would be left.
pub fn topic(query: &str, names: &[String]) -> String {
    let bare = |w: &str| -> String {
        let t = w.trim_matches(|c: char| !c.is_alphanumeric());
        t.strip_suffix("'s").or_else(|| t.strip_suffix("’s")).unwrap_or(t).to_string()
    };
    let words: Vec<String> = query.split_whitespace().map(bare).collect();
    let month = |i: usize| words.get(i).is_some_and(|w| month_of(w).is_some());
    let kept: Vec<&str> = query
        .split_whitespace()
        .enumerate()
        .filter(|(i, _)| {
            let w = &words[*i];
            // Only as a name is written ("Will", not "will").
            let name = w.chars().next().is_some_and(char::is_uppercase) && names.contains(&w.to_lowercase());
            let date = year_of(w).is_some()
                    || month(*i)
                    || !iso_dates(w).0.is_empty()
                    || (day_of(w).is_some() && ((*i > 0 && month(i - 1)) || month(i + 1) || month(i + 2)));
            !(name || date)
        })
        .map(|(_, w)| w)
        .collect();
    if kept.iter().all(|w| w.chars().all(|c| !c.is_alphanumeric())) {
        return query.to_string();
    }
    kept.join(" ")
}

/// Who said a memory: the words of its "Name: " label, lowercased, when it has one (a label
/// is short and has no sentence punctuation).
fn speaker_words(content: &str) -> Vec<String> {
    let Some(at) = content.find(": ") else { return Vec::new() };
    let label = &content[..at];
    // A name is capitalised: "Shopping list: eggs" is not someone speaking.
    let capitalised = label.split_whitespace().all(|w| w.chars().next().is_some_and(char::is_uppercase));
    if label.is_empty() || label.chars().count() > 40 || label.contains(['.', '!', '?', ',', '\n']) || !capitalised {
        return Vec::new();
    }
    label.split_whitespace().map(str::to_lowercase).collect()
}

/// How much a memory is by or about the people the query names: 1 when one of them said it,
/// `mention` when it names one of them, else 0.
pub fn person_match(names: &[String], content: &str, mention: f64) -> f64 {
    if names.is_empty() {
        return 0.0;
    }
    let speaker = speaker_words(content);
    if names.iter().any(|n| speaker.contains(n)) {
        return 1.0;
    }
    if mention > 0.0 {
        let words: Vec<String> = content
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        if names.iter().any(|n| words.contains(n)) {
            return mention;
        }
    }
    0.0
}


/// A time a query asks about, in local wall-clock seconds (the session's TimeZone).
#[derive(Clone, Debug, PartialEq)]
pub enum When {
    /// From, until (exclusive).
    Span(i64, i64),
    /// A month, or a day of it, in whichever year ("in June", "on May 3").
    Annual { month: u32, day: Option<u32> },
}

const DAY: i64 = 86_400;
const MONTHS: [&str; 12] =
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];
const SHORT_MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/// Days since 1970-01-01 of a civil date (proleptic Gregorian; H. Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil year of a day count since 1970-01-01.
pub fn year_of_days(z: i64) -> i64 {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    yoe + era * 400 + if m <= 2 { 1 } else { 0 }
}

fn month_end(y: i64, m: u32) -> i64 {
    if m == 12 { days_from_civil(y + 1, 1, 1) } else { days_from_civil(y, m + 1, 1) }
}

fn days_in_month(m: u32) -> u32 {
    [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][(m as usize - 1).min(11)]
}

/// A month name: (month, whether it is only a month beside a day or year number). Written
/// whole it is one in any case, but "may" and "march" only capitalised (they are verbs too);
/// an abbreviation ("Sep", "Sept.", "Dec") only capitalised and beside a number ("Jan" alone
/// is a name).
fn month_of(raw: &str) -> Option<(u32, bool)> {
    let w = raw.to_lowercase();
    let w = w.trim_end_matches('.');
    let capitalised = raw.chars().next().is_some_and(char::is_uppercase);
    if let Some(i) = MONTHS.iter().position(|m| *m == w) {
        if (w == "may" || w == "march") && !capitalised {
            return None;
        }
        return Some((i as u32 + 1, false));
    }
    if capitalised {
        let w = if w == "sept" { "sep" } else { w };
        return SHORT_MONTHS.iter().position(|m| *m == w && w != "may").map(|i| (i as u32 + 1, true));
    }
    None
}

fn day_of(w: &str) -> Option<u32> {
    let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &w[digits.len()..];
    if digits.is_empty() || digits.len() > 2 || !["", "st", "nd", "rd", "th"].contains(&suffix.to_lowercase().as_str()) {
        return None;
    }
    digits.parse::<u32>().ok().filter(|d| (1..=31).contains(d))
}

fn year_of(w: &str) -> Option<i64> {
    (w.len() == 4).then(|| w.parse::<i64>().ok()).flatten().filter(|y| (1900..=2200).contains(y))
}

/// Whether the query needs the clock to be read (it says "yesterday", "last week", "ago").
pub fn is_relative(query: &str) -> bool {
    let q = query.to_lowercase();
    ["yesterday", "today", "last week", "last month", "last year", "last weekend", " ago", "this week", "this month", "this year"]
        .iter()
        .any(|p| q.contains(p))
}

/// The times a query asks about: dates ("October 13, 2023", "13 October 2023", "May 3"),
/// months ("in June", "July 2023"), years ("in 2022"), and, given the clock's local time,
/// relative ones ("yesterday", "last week", "last weekend", "last month", "last year",
/// "three days ago", "2 weeks ago"). At most four.
pub fn times(query: &str, now_local: Option<i64>) -> Vec<When> {
    // ISO dates ("2023-10-13") first, then blanked out: their year alone would be read as the
    // whole year, and every memory of that year would fit.
    let (isos, query) = iso_dates(query);
    let query = query.as_str();
    let words: Vec<&str> = query
        .split(|c: char| !(c.is_alphanumeric() || c == '.'))
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = isos;
    let mut used = vec![false; words.len()];
    for i in 0..words.len() {
        let Some((month, needs_number)) = month_of(words[i]) else { continue };
        let mut day = None;
        let mut year = None;
        // "13 October" / "13th of October"
        if i >= 1 && day_of(words[i - 1]).is_some() {
            day = day_of(words[i - 1]);
            used[i - 1] = true;
        } else if i >= 2 && words[i - 1].eq_ignore_ascii_case("of") && day_of(words[i - 2]).is_some() {
            day = day_of(words[i - 2]);
            used[i - 2] = true;
        }
        let mut j = i + 1;
        // "October 13"
        if day.is_none() && j < words.len() && day_of(words[j]).is_some() {
            day = day_of(words[j]);
            used[j] = true;
            j += 1;
        }
        if j < words.len() && year_of(words[j]).is_some() {
            year = year_of(words[j]);
            used[j] = true;
        }
        // A month alone is a time after a word that says so ("in June", "since May"), not
        // "May I ask" or "what did June say".
        let said_as_time = i >= 1
            && ["in", "on", "of", "during", "since", "until", "till", "by", "from", "last", "next", "this", "early", "late", "mid", "through"]
                .contains(&words[i - 1].to_lowercase().as_str());
        if day.is_none() && year.is_none() && (needs_number || !said_as_time) {
            continue;
        }
        used[i] = true;
        let day = day.filter(|d| *d <= days_in_month(month));
        out.push(match (year, day) {
            (Some(y), Some(d)) => {
                let at = days_from_civil(y, month, d);
                When::Span(at * DAY, (at + 1) * DAY)
            }
            (Some(y), None) => When::Span(days_from_civil(y, month, 1) * DAY, month_end(y, month) * DAY),
            (None, day) => When::Annual { month, day },
        });
    }
    for (i, w) in words.iter().enumerate() {
        if let (false, Some(y)) = (used[i], year_of(w)) {
            out.push(When::Span(days_from_civil(y, 1, 1) * DAY, days_from_civil(y + 1, 1, 1) * DAY));
        }
    }
    if let Some(now) = now_local {
        let today = now.div_euclid(DAY);
        let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
        let span = |from: i64, to: i64| When::Span(from * DAY, to * DAY);
        for (i, w) in lower.iter().enumerate() {
            let next = lower.get(i + 1).map(String::as_str);
            match (w.as_str(), next) {
                ("yesterday", _) => out.push(span(today - 1, today)),
                ("today", _) => out.push(span(today, today + 1)),
                // "last week": people mean anything from a few days to a fortnight back.
                ("last", Some("week")) => out.push(span(today - 14, today - 2)),
                ("last", Some("weekend")) => {
                    // The latest Saturday and Sunday before today (1970-01-01 was a Thursday).
                    let weekday = (today + 3).rem_euclid(7); // 0 Monday … 6 Sunday
                    let sunday = if weekday == 6 { today - 7 } else { today - weekday - 1 };
                    out.push(span(sunday - 1, sunday + 1));
                }
                ("last", Some("month")) | ("last", Some("year")) | ("this", Some("month")) | ("this", Some("year")) => {
                    let this_year = year_of_days(today);
                    let month = (1..=12u32).rev().find(|m| days_from_civil(this_year, *m, 1) <= today).unwrap_or(1);
                    out.push(match (w.as_str(), next) {
                        ("last", Some("month")) if month == 1 => span(days_from_civil(this_year - 1, 12, 1), days_from_civil(this_year, 1, 1)),
                        ("last", Some("month")) => span(days_from_civil(this_year, month - 1, 1), days_from_civil(this_year, month, 1)),
                        ("this", Some("month")) => span(days_from_civil(this_year, month, 1), today + 1),
                        ("last", _) => span(days_from_civil(this_year - 1, 1, 1), days_from_civil(this_year, 1, 1)),
                        _ => span(days_from_civil(this_year, 1, 1), today + 1),
                    });
                }
                ("this", Some("week")) => out.push(span(today - 6, today + 1)),
                ("ago", _) if i >= 2 => {
                    // "three days ago", "2 weeks ago", "a month ago".
                    let n = match lower[i - 2].as_str() {
                        "a" | "an" => Some(1),
                        w => NUMBER_WORDS.iter().position(|x| *x == w).map(|p| p as i64 + 1).or_else(|| w.parse::<i64>().ok()),
                    };
                    let unit = match lower[i - 1].trim_end_matches('s') {
                        "day" => Some(1),
                        "week" => Some(7),
                        "month" => Some(30),
                        "year" => Some(365),
                        _ => None,
                    };
                    if let (Some(n), Some(unit)) = (n.filter(|n| (1..=100).contains(n)), unit) {
                        // Around that day, as loosely as the unit: "three months ago" is a month wide.
                        let centre = today - n * unit;
                        out.push(span(centre - unit / 2, centre + unit / 2 + 1));
                    }
                }
                _ => {}
            }
        }
    }
    out.truncate(4);
    out
}

/// The ISO dates (YYYY-MM-DD) in a query as day spans, and the query with them blanked out.
fn iso_dates(query: &str) -> (Vec<When>, String) {
    let bytes = query.as_bytes();
    let mut out = Vec::new();
    let mut text = query.to_string();
    let digits = |from: usize, n: usize| -> Option<u32> {
        let part = bytes.get(from..from + n)?;
        part.iter().all(u8::is_ascii_digit).then(|| std::str::from_utf8(part).ok()?.parse().ok())?
    };
    let mut i = 0;
    while i + 10 <= bytes.len() {
        let starts_word = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let ends_word = bytes.get(i + 10).is_none_or(|b| !b.is_ascii_alphanumeric());
        if let (true, true, Some(y), b'-', Some(m), b'-', Some(d)) =
            (starts_word, ends_word, digits(i, 4), bytes[i + 4], digits(i + 5, 2), bytes[i + 7], digits(i + 8, 2))
        {
            let y = y as i64;
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let last = if m == 2 && !leap { 28 } else { days_in_month(m) };
            if (1900..=2200).contains(&y) && (1..=12).contains(&m) && d >= 1 && d <= last {
                let at = days_from_civil(y, m, d);
                out.push(When::Span(at * DAY, (at + 1) * DAY));
                // ASCII throughout, so the range is on char boundaries.
                text.replace_range(i..i + 10, "          ");
                i += 10;
                continue;
            }
        }
        i += 1;
    }
    (out, text)
}

const NUMBER_WORDS: [&str; 12] = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];

/// How well a memory made at `at` (local wall-clock seconds) fits the times asked about:
/// 1 within one, else halving with every `half_life` of the span's own width (at least three
/// days) it lies outside. 0 when the query names no time.
pub fn time_match(times: &[When], at: i64) -> f64 {
    let day = at.div_euclid(DAY);
    let fit = |from: i64, to: i64| fit_span(at, from, to);
    times
        .iter()
        .map(|w| {
            let (from, to) = match *w {
                When::Span(f, t) => (f, t),
                // The nearest of that month in the years around the memory ("in December"
                // and a memory of January 2: a few days after last December).
                When::Annual { month, day: d } => {
                    let y = year_of_days(day);
                    return (y - 1..=y + 1)
                        .map(|y| match d {
                            Some(d) => {
                                let at = days_from_civil(y, month, d.min(days_in_month(month)));
                                fit(at * DAY, (at + 1) * DAY)
                            }
                            None => fit(days_from_civil(y, month, 1) * DAY, month_end(y, month) * DAY),
                        })
                        .fold(0.0, f64::max);
                }
            };
            fit(from, to)
        })
        .fold(0.0, f64::max)
}

/// 1 within [from, to), else halving with every quarter of the span's width (at least three
/// days) outside it.
fn fit_span(at: i64, from: i64, to: i64) -> f64 {
    if at >= from && at < to {
        return 1.0;
    }
    let outside = if at < from { from - at } else { at - to + 1 } as f64 / DAY as f64;
    let half_life = (((to - from) / DAY) as f64 / 4.0).max(3.0);
    0.5f64.powf(outside / half_life)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_capitalised_words_that_are_not_openers() {
        assert_eq!(names("What did Caroline research?"), vec!["caroline"]);
        assert_eq!(names("Caroline's identity?"), vec!["caroline"]);
        assert_eq!(names("When did Melanie and Jon Smith go to the LGBTQ parade in May?"), vec!["melanie", "jon", "smith"]);
        assert!(names("what did i say about the trip?").is_empty());
        assert!(names("I went to the USA").is_empty());
    }

    #[test]
    fn dates_months_and_years_are_read() {
        let d = |y, m, d| days_from_civil(y, m, d) * DAY;
        assert_eq!(times("What painting did Melanie show on October 13, 2023?", None), vec![When::Span(d(2023, 10, 13), d(2023, 10, 14))]);
        assert_eq!(times("What did Gina find on 1 February, 2023?", None), vec![When::Span(d(2023, 2, 1), d(2023, 2, 2))]);
        assert_eq!(times("the 3rd of May 2023", None), vec![When::Span(d(2023, 5, 3), d(2023, 5, 4))]);
        assert_eq!(times("What setback did Melanie face in October 2023?", None), vec![When::Span(d(2023, 10, 1), d(2023, 11, 1))]);
        assert_eq!(times("When did Melanie go camping in June?", None), vec![When::Annual { month: 6, day: None }]);
        assert_eq!(times("How many times has she been to the beach in 2023?", None), vec![When::Span(d(2023, 1, 1), d(2024, 1, 1))]);
        assert_eq!(times("December 2023 and Dec 5", None).len(), 2);
        assert!(times("you may march on", None).is_empty());
        assert!(times("What did Jan say?", None).is_empty());
        assert_eq!(names("What did Jan say in June?"), vec!["jan"]);
        assert_eq!(times("we met in june", None), vec![When::Annual { month: 6, day: None }]);
        assert!(times("Nothing about time, just 12 apples and 31 pears", None).is_empty());
        assert_eq!(times("February 30", None), vec![When::Annual { month: 2, day: None }]);
        // An ISO date is that day, not its whole year; a malformed one is no date.
        assert_eq!(times("what happened on 2023-10-13?", None), vec![When::Span(d(2023, 10, 13), d(2023, 10, 14))]);
        assert_eq!(times("2023-10-13 and 2024-02-29", None).len(), 2);
        assert_eq!(times("on 2023-02-29", None), vec![When::Span(d(2023, 1, 1), d(2024, 1, 1))], "no 29 February in 2023");
        assert_eq!(times("ticket 2023-13-45", None), vec![When::Span(d(2023, 1, 1), d(2024, 1, 1))]);
        assert!(times("order 12023-10-134", None).is_empty());
        assert_eq!(times("é2023-10-13ü", None), vec![When::Span(d(2023, 10, 13), d(2023, 10, 14))]);
    }

    #[test]
    fn relative_times_need_the_clock() {
        let today = days_from_civil(2024, 3, 14); // a Thursday
        let now = Some(today * DAY + 15 * 3600);
        assert!(times("what did I do yesterday?", None).is_empty());
        assert_eq!(times("what did I do yesterday?", now), vec![When::Span((today - 1) * DAY, today * DAY)]);
        assert_eq!(times("last weekend", now), vec![When::Span(days_from_civil(2024, 3, 9) * DAY, days_from_civil(2024, 3, 11) * DAY)]);
        assert_eq!(times("last month", now), vec![When::Span(days_from_civil(2024, 2, 1) * DAY, days_from_civil(2024, 3, 1) * DAY)]);
        assert_eq!(times("three days ago", now), vec![When::Span((today - 3) * DAY, (today - 2) * DAY)]);
        assert_eq!(times("what did we talk about a week ago?", now), vec![When::Span((today - 10) * DAY, (today - 3) * DAY)]);
        assert!(times("a week ago", None).is_empty());
        assert_eq!(year_of_days(days_from_civil(2023, 12, 31)), 2023);
        assert_eq!(year_of_days(days_from_civil(2024, 1, 1)), 2024);
    }

    #[test]
    fn a_memory_fits_the_time_asked_about() {
        let d = |y, m, d| days_from_civil(y, m, d) * DAY;
        let october = vec![When::Span(d(2023, 10, 1), d(2023, 11, 1))];
        assert_eq!(time_match(&october, d(2023, 10, 20)), 1.0);
        let near = time_match(&october, d(2023, 11, 4));
        let far = time_match(&october, d(2024, 3, 1));
        assert!(near > 0.5 && near < 1.0 && far < 0.01, "{near} {far}");
        let june = vec![When::Annual { month: 6, day: None }];
        assert_eq!(time_match(&june, d(2021, 6, 30)), 1.0);
        let december = vec![When::Annual { month: 12, day: None }];
        assert!(time_match(&december, d(2024, 1, 2)) > 0.5, "a few days after last December");
        assert!(times("May I ask what Caroline painted?", None).is_empty());
        assert!(times("What did June say?", None).is_empty());
        // Month names are times, not names; sentence openers are not names either.
        assert_eq!(names("What did June say? Hey! So I'm off. Then Mira came."), vec!["mira"]);
        assert_eq!(time_match(&[], d(2021, 6, 30)), 0.0);
    }

    #[test]
    fn the_topic_is_the_question_without_its_people_and_dates() {
        let topic = |q: &str| topic(q, &names(q));
        assert_eq!(topic("What painting did Melanie show on October 13, 2023?"), "What painting did show on");
        assert_eq!(topic("What did Caroline's sister say on 2023-10-13?"), "What did sister say on");
        assert_eq!(topic("What did Jon and Gina do on the 3rd of May?"), "What did and do on the of");
        // Numbers that are not dates stay; a question of nothing but a name stays whole.
        assert_eq!(topic("Did I buy 12 apples?"), "Did I buy 12 apples?");
        assert_eq!(topic("Melanie?"), "Melanie?");
        assert_eq!(topic("you may march on"), "you may march on");
        // The name as written, not the same word in lower case.
        assert_eq!(topic("What will Will do?"), "What will do?");
    }

    #[test]
    fn a_turn_is_by_its_labelled_speaker() {
        let n = vec!["caroline".to_string()];
        assert_eq!(person_match(&n, "Caroline: I went to a support group", 0.5), 1.0);
        assert_eq!(person_match(&n, "Melanie: Wow, Caroline! That's great", 0.5), 0.5);
        assert_eq!(person_match(&n, "Melanie: Wow, Caroline! That's great", 0.0), 0.0);
        assert_eq!(person_match(&n, "Note: this is not said by anyone. Caroline", 0.0), 0.0);
        assert_eq!(person_match(&n, "Dinner was at 7: lovely", 0.0), 0.0);
        assert_eq!(person_match(&["update".to_string()], "Shopping update: eggs", 0.0), 0.0);
        assert_eq!(person_match(&[], "Caroline: hi", 0.5), 0.0);
    }
}
