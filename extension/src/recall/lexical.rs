//! BM25 over Postgres full-text search.
//!
//! `ts_rank` has no inverse document frequency, so a name that occurs in half the store
//! outweighs the one rare word that matters. Here the query's lexemes are weighted by IDF from
//! `dionysus.lexicon` (refreshed like ANALYZE), candidates are found through the GIN index by
//! the rarest lexemes only (bounded work), and scored with BM25 (k1, b from recall_config)
//! in Rust, off each candidate's tsvector.
use super::tsvector::Lexemes;
use super::{Config, Filters, FILTER_SQL};
use crate::spi_util::select_prepared;
use pgrx::prelude::*;
use pgrx::Uuid;

/// A lexeme in at most this many memories is always matched, whatever share of the store it is.
const RARE_ENOUGH: f64 = 32.0;

/// A query lexeme with its document frequency and inverse document frequency.
struct Term {
    lexeme: String,
    ndoc: i64,
    idf: f64,
}

/// BM25 for one query: its usable lexemes weighted by IDF, and the query's information mass
/// a match is measured against. Built once per recall, it scores any memory's tsvector, so
/// every candidate (found by meaning, by time, by its words or through a neighbour) has its
/// words counted the same way.
pub struct Scorer {
    /// Rarest first.
    terms: Vec<Term>,
    mass: f64,
    k1: f64,
    b: f64,
    avg_len: f64,
}

impl Scorer {
    /// The query's lexemes against the store's lexicon; None when none is usable.
    pub fn new(query: &str, cfg: &Config) -> Option<Scorer> {
        let rows = select_prepared(
            "SELECT l.lexeme, coalesce(x.ndoc, 0)::int8, s.n_docs, s.avg_length \
             FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme) \
             CROSS JOIN dionysus.lexicon_stats s LEFT JOIN dionysus.lexicon x ON x.lexeme = l.lexeme",
            &[query.into()],
            |t| Some((t.get::<String>(1).ok()??, t.get::<i64>(2).ok()??, t.get::<i64>(3).ok()??, t.get::<f64>(4).ok()??)),
        );
        let n_docs = rows.first().map(|r| r.2).unwrap_or(0).max(1) as f64;
        let avg_len = rows.first().map(|r| r.3).unwrap_or(1.0).max(1.0);
        let idf = |df: i64| (1.0 + (n_docs - df as f64 + 0.5).max(0.0) / (df as f64 + 0.5)).ln().max(1e-6);
        let terms: Vec<Term> = rows.into_iter().map(|(lexeme, ndoc, _, _)| Term { idf: idf(ndoc), lexeme, ndoc }).collect();
        // What the query says, in information: every word it has counts, the common ones little,
        // a word the store has never seen much. A match is scored against this mass, not against
        // the best match of the moment: one shared everyday word is a small part of a question,
        // however alone it is in matching.
        let mass: f64 = terms.iter().map(|t| t.idf).sum::<f64>().max(1e-9);
        // Too common to tell memories apart: dropped (BM25 would give them almost no weight anyway).
        // A word in a handful of memories is never "common": in a young store a name the person
        // said twice is a quarter of everything, and it is exactly the word to match.
        let common = (cfg.lexical_max_df * n_docs).max(RARE_ENOUGH);
        let mut terms: Vec<Term> = terms.into_iter().filter(|t| (t.ndoc as f64) <= common).collect();
        if terms.is_empty() {
            return None;
        }
        terms.sort_by(|a, b| a.ndoc.cmp(&b.ndoc).then_with(|| a.lexeme.cmp(&b.lexeme)));
        Some(Scorer { terms, mass, k1: cfg.bm25_k1, b: cfg.bm25_b, avg_len })
    }

    /// How much of the query's information a memory's words match: its BM25 over the query's
    /// IDF mass, in [0, 1]. A word met once in a memory of average length counts its IDF once;
    /// more often or in a shorter memory a little more (BM25's saturation), so it is capped at 1.
    pub fn share(&self, lexemes: &Lexemes) -> f64 {
        let saturation = self.k1 * (1.0 - self.b + self.b * lexemes.len() as f64 / self.avg_len);
        let bm25: f64 = self
            .terms
            .iter()
            .map(|t| match lexemes.frequency(t.lexeme.as_bytes()) as f64 {
                0.0 => 0.0,
                tf => t.idf * tf * (self.k1 + 1.0) / (tf + saturation),
            })
            .sum();
        (bm25 / self.mass).min(1.0)
    }
}

/// The best `n` memories found by the query's words (finder_query says which words search),
/// with the share of the query's information each matches (Scorer::share), best first.
pub fn search(scorer: &Scorer, n: i64, filters: &Filters, cfg: &Config) -> Vec<(Uuid, f64)> {
    let postings: Vec<(&str, i64)> = scorer.terms.iter().map(|t| (t.lexeme.as_str(), t.ndoc)).collect();
    let tsquery = finder_query(&postings, cfg.lexical_candidates as i64);
    if tsquery.is_empty() {
        return Vec::new();
    }
    // Candidates with their lexemes, scored here: BM25 needs each matched lexeme's frequency,
    // which Rust reads off the tsvector in a few comparisons (tsvector.rs) where SQL would
    // unnest every candidate's lexemes and join them to the query's. The rest of a memory
    // (its meaning, label, time) is read for the best only, by the caller.
    let mut args = vec![tsquery.into()];
    args.extend(filters.args());
    args.push((cfg.lexical_candidates.max(1.0) as i64).into());
    let candidates = select_prepared(
        &format!("SELECT m.id, m.search FROM dionysus.memories m WHERE m.search @@ $1::tsquery AND {FILTER_SQL} LIMIT $8"),
        &args,
        |t| Some((t.get::<Uuid>(1).ok()??, t.get::<Lexemes>(2).ok()??)),
    );
    let mut best: Vec<(Uuid, f64)> = candidates
        .iter()
        .map(|(id, lexemes)| (*id, scorer.share(lexemes)))
        .filter(|(_, score)| *score > 0.0)
        .collect();
    best.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.as_bytes().cmp(y.0.as_bytes())));
    best.truncate(n.max(0) as usize);
    best
}

/// The tsquery that finds lexical candidates: the usable lexemes, rarest first, as long as
/// all their memories together fit the budget (how many memories each is in, `lexemes`).
/// Empty when even the rarest is in more than the budget.
///
/// A word beyond the budget is common enough that a memory it alone would find scores a small
/// part of the question's information: such memories are reached by their meaning, by rarer
/// words or through a neighbour, and their common words are counted there (Scorer::share),
/// not looked up. (Taking any thousand of the memories with one common word, as a limit
/// without order would, is a sample, not a search.)
pub fn finder_query(lexemes: &[(&str, i64)], budget: i64) -> String {
    let mut spent = 0i64;
    let mut finders = Vec::new();
    for (lexeme, ndoc) in lexemes {
        if spent + ndoc > budget {
            break;
        }
        spent += ndoc;
        finders.push(tsquery_literal(lexeme));
    }
    finders.join(" | ")
}

/// A lexeme quoted for the tsquery input syntax.
fn tsquery_literal(lexeme: &str) -> String {
    format!("'{}'", lexeme.replace('\\', "\\\\").replace('\'', "''"))
}

/// Recounts document frequencies for BM25 (the worker does this when the store has grown
/// by a tenth). Returns the number of active memories counted.
#[pg_extern(volatile, parallel_unsafe)]
pub fn refresh_lexicon() -> i64 {
    Spi::run("SELECT pg_advisory_xact_lock(hashtextextended('dionysus.lexicon', 0))").expect("lexicon lock");
    Spi::run("DELETE FROM dionysus.lexicon").expect("clear lexicon");
    Spi::run(
        "INSERT INTO dionysus.lexicon (lexeme, ndoc) \
         SELECT word, ndoc FROM ts_stat('SELECT search FROM dionysus.memories WHERE status = ''active''')",
    )
    .expect("count lexemes");
    Spi::get_one::<i64>(
        "UPDATE dionysus.lexicon_stats SET \
           (n_docs, avg_length, refreshed_at) = (SELECT count(*), coalesce(avg(length(search)), 1), now() \
                                                 FROM dionysus.memories WHERE status = 'active') \
         RETURNING n_docs",
    )
    .expect("lexicon stats")
    .unwrap_or(0)
}

/// Whether the lexicon is out of date: the number of active memories moved by more than a
/// tenth (any change at all while the store is small, where a refresh costs nothing).
pub fn lexicon_is_stale() -> bool {
    Spi::get_one::<bool>(
        "SELECT abs((SELECT count(*) FROM dionysus.memories WHERE status = 'active') - n_docs) > n_docs / 10 \
         FROM dionysus.lexicon_stats",
    )
    .ok()
    .flatten()
    .unwrap_or(false)
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// The rarest words search while their memories together fit the budget; the rest do not.
    #[test]
    fn the_rarest_words_search_while_their_memories_fit_the_budget() {
        use super::finder_query;
        assert_eq!(finder_query(&[("tortois", 3), ("mira", 40)], 1000), "'tortois' | 'mira'");
        assert_eq!(finder_query(&[("tortois", 3), ("famili", 600), ("reunion", 620), ("adopt", 650)], 1000), "'tortois' | 'famili'");
        assert_eq!(finder_query(&[("new", 0), ("tortois", 3), ("famili", 600)], 200), "'new' | 'tortois'");
        assert_eq!(finder_query(&[("famili", 4000)], 1000), "");
        assert_eq!(finder_query(&[], 1000), "");
    }

    #[pg_test]
    fn lexemes_are_quoted_for_tsquery() {
        assert_eq!(super::tsquery_literal("o'neil"), "'o''neil'");
        let q = format!("{} | {}", super::tsquery_literal("o'neil"), super::tsquery_literal("back\\slash"));
        assert_eq!(Spi::get_one::<bool>(&format!("SELECT '{}'::tsquery IS NOT NULL", q.replace('\'', "''"))), Ok(Some(true)));
    }

    /// In a young store the max-df cut must not drop the very words asked about: here "mira"
    /// is in two of four memories (half the store), yet it is what the question is about.
    #[pg_test]
    fn a_young_store_still_matches_a_name_said_twice() {
        for text in ["Ada's sister is called Mira", "Do you remember my sister Mira?", "Lunch was pasta", "The weather is mild"] {
            Spi::run(&format!("SELECT dionysus.remember('{}')", text.replace('\'', "''"))).unwrap();
        }
        Spi::run("SELECT dionysus.refresh_lexicon()").unwrap();
        let found = Spi::get_one::<String>(
            "SELECT found_by FROM dionysus.recall('is Mira my sister?', 5) WHERE content = 'Ada''s sister is called Mira'",
        );
        assert!(matches!(&found, Ok(Some(f)) if f.contains("lexical")), "{found:?}");
    }

    #[pg_test]
    fn rare_words_outweigh_common_ones() {
        for i in 0..30 {
            Spi::run(&format!("SELECT dionysus.remember('Caroline said hello number {i}')")).unwrap();
        }
        Spi::run("SELECT dionysus.remember('Caroline adopted a tortoise')").unwrap();
        Spi::run("SELECT dionysus.refresh_lexicon()").unwrap();
        let top = Spi::get_one::<String>(
            "SELECT content FROM dionysus.recall('Caroline tortoise', 1)",
        );
        assert_eq!(top, Ok(Some("Caroline adopted a tortoise".to_string())));
        let ndoc = Spi::get_one::<i32>("SELECT ndoc FROM dionysus.lexicon WHERE lexeme = 'carolin'");
        assert_eq!(ndoc, Ok(Some(31)));
    }

    /// The BM25 computed in Rust off each tsvector is the one SQL defines over unnest (as the
    /// scoring was written before, and as the LoCoMo bench's baseline still is): each memory's
    /// lexical_score is its BM25 over the query's whole IDF mass.
    #[pg_test]
    fn lexical_scores_are_bm25_over_the_querys_information() {
        for text in [
            "Mira adopted a tortoise named Shelly",
            "The tortoise sleeps; the tortoise eats; the tortoise is slow",
            "Mira's brother fixes bicycles on weekends",
            "A long note about gardening, tomatoes, basil, weeding, watering and a tortoise in the shade",
            "Lunch was pasta",
            "The weather is mild",
        ] {
            Spi::run(&format!("SELECT dionysus.remember('{}')", text.replace('\'', "''"))).unwrap();
        }
        Spi::run("SELECT dionysus.refresh_lexicon()").unwrap();
        let q = "did Mira's tortoise ever meet the neighbours?";
        let off = Spi::get_one::<f64>(&format!(
            "WITH s AS (SELECT n_docs::float8 AS n, avg_length AS avg FROM dionysus.lexicon_stats), \
             q AS (SELECT l.lexeme, ln(1 + greatest(s.n - coalesce(x.ndoc, 0) + 0.5, 0) / (coalesce(x.ndoc, 0) + 0.5)) AS idf \
                   FROM unnest(tsvector_to_array(to_tsvector('english', '{q}'))) l(lexeme) CROSS JOIN s \
                   LEFT JOIN dionysus.lexicon x ON x.lexeme = l.lexeme), \
             bm25 AS (SELECT m.content, least(1, sum(q.idf * t.tf * 2.2 / (t.tf + 1.2 * (0.25 + 0.75 * length(m.search) / s.avg))) \
                                               / (SELECT sum(idf) FROM q)) AS share \
                      FROM dionysus.memories m CROSS JOIN s \
                      CROSS JOIN LATERAL (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1)::float8 AS tf FROM unnest(m.search) u) t \
                      JOIN q ON q.lexeme = t.lexeme GROUP BY m.content, s.avg) \
             SELECT max(abs(b.share - r.lexical_score)) FROM bm25 b JOIN dionysus.recall('{q}', 10) r ON r.content = b.content \
             WHERE r.lexical_score > 0",
            q = q.replace('\'', "''")
        ));
        assert!(matches!(off, Ok(Some(d)) if d < 1e-9), "{off:?}");
        // Three memories say "tortoise", two "Mira", one both: all four are matched.
        let matched = Spi::get_one::<i64>(&format!("SELECT count(*) FROM dionysus.recall('{}', 10) WHERE lexical_score > 0", q.replace('\'', "''")));
        assert_eq!(matched, Ok(Some(4)));
    }

    /// When the question's words are all common (beyond the budget, so not looked up), the
    /// memory that has two of them has both counted where it is found otherwise (here among the
    /// vector seeds), not lost among a sample of the memories that have one (the answer is
    /// written last, where a limit without order over one word's memories ends).
    #[pg_test]
    fn a_memory_with_two_common_words_has_them_counted_beyond_the_budget() {
        Spi::run("UPDATE dionysus.recall_config SET value = 30 WHERE key = 'lexical_candidates'").unwrap();
        Spi::run("UPDATE dionysus.recall_config SET value = 1 WHERE key = 'lexical_max_df'").unwrap();
        for i in 0..40 {
            Spi::run(&format!("SELECT dionysus.remember('The garden needs water, day {i}')")).unwrap();
            Spi::run(&format!("SELECT dionysus.remember('Violin practice went fine, day {i}')")).unwrap();
        }
        Spi::run("SELECT dionysus.remember('We carried the violin out into the garden')").unwrap();
        Spi::run("SELECT dionysus.refresh_lexicon()").unwrap();
        let lexical = Spi::get_one::<f64>(
            "SELECT lexical_score FROM dionysus.recall('violin garden', 50) \
             WHERE content = 'We carried the violin out into the garden'",
        );
        assert!(matches!(lexical, Ok(Some(s)) if s > 0.5), "{lexical:?}");
    }

    /// Every memory recall considers has the query's words counted, however it was found: here
    /// "garden" (in 26 of 51 memories) is in more memories than the budget, so it is not looked
    /// up (the question's other word, "happen", is in none), and the memories that have it are
    /// found by meaning. (Until 0.14.0 only the memories the word search
    /// found had a lexical score: all of these had 0.)
    #[pg_test]
    fn a_memory_found_by_meaning_has_its_words_counted() {
        Spi::run("UPDATE dionysus.recall_config SET value = 10 WHERE key = 'lexical_candidates'").unwrap();
        for i in 0..25 {
            Spi::run(&format!("SELECT dionysus.remember('The garden needs weeding, note {i}')")).unwrap();
            Spi::run(&format!("SELECT dionysus.remember('The kettle is boiling, note {i}')")).unwrap();
        }
        Spi::run("SELECT dionysus.remember('We had a picnic in the garden')").unwrap();
        Spi::run("SELECT dionysus.refresh_lexicon()").unwrap();
        let scored = Spi::get_one::<i64>(
            "SELECT count(*) FROM dionysus.recall('what happened in the garden?', 5) WHERE lexical_score > 0 AND found_by = 'vector'",
        );
        assert_eq!(scored, Ok(Some(5)));
    }

    /// Recall plans its own queries generically; the caller's setting is back once it returns.
    #[pg_test]
    fn recall_leaves_the_callers_plan_setting_alone() {
        Spi::run("SELECT dionysus.remember('The tortoise is called Shelly')").unwrap();
        Spi::run("SET LOCAL plan_cache_mode = force_custom_plan").unwrap();
        Spi::run("SELECT count(*) FROM dionysus.recall('tortoise')").unwrap();
        assert_eq!(Spi::get_one::<String>("SELECT current_setting('plan_cache_mode')"), Ok(Some("force_custom_plan".into())));
    }
}
