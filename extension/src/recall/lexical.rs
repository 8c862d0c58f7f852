//! BM25 over Postgres full-text search.
//!
//! `ts_rank` has no inverse document frequency, so a name that occurs in half the store
//! outweighs the one rare word that matters. Here the query's lexemes are weighted by IDF from
//! `dionysus.lexicon` (refreshed like ANALYZE), candidates are found through the GIN index by
//! the rarest lexemes only (bounded work), and scored with BM25 (k1, b from recall_config).
use super::{Config, Filters, FILTER_SQL, LABEL_SQL, LOCAL_SECONDS_SQL};
use crate::spi_util::{cosine_op, select_prepared, vector_type};
use pgrx::prelude::*;
use pgrx::Uuid;

/// A lexeme in at most this many memories is always matched, whatever share of the store it is.
const RARE_ENOUGH: f64 = 32.0;

/// A query lexeme with its document frequency.
struct Term {
    lexeme: String,
    ndoc: i64,
}

/// A lexical match: how much of the query's information it matches (BM25 over the query's own
/// IDF mass, in [0, 1]), and its cosine similarity to the query.
pub struct Match {
    pub id: Uuid,
    pub score: f64,
    pub similarity: f64,
    /// The start of its text (its "Name: " label) and its local time, for query::person_match
    /// and query::time_match.
    pub label: String,
    pub at: i64,
}

/// The best `n` lexical matches.
pub fn search(query: &str, qv: &[f32], n: i64, filters: &Filters, cfg: &Config) -> Vec<Match> {
    let rows = select_prepared(
        "SELECT l.lexeme, coalesce(x.ndoc, 0)::int8, s.n_docs, s.avg_length \
         FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme) \
         CROSS JOIN dionysus.lexicon_stats s LEFT JOIN dionysus.lexicon x ON x.lexeme = l.lexeme",
        &[query.into()],
        |t| Some((t.get::<String>(1).ok()??, t.get::<i64>(2).ok()??, t.get::<i64>(3).ok()??, t.get::<f64>(4).ok()??)),
    );
    let n_docs = rows.first().map(|r| r.2).unwrap_or(0).max(1) as f64;
    let avg_len = rows.first().map(|r| r.3).unwrap_or(1.0).max(1.0);
    let terms: Vec<Term> = rows.into_iter().map(|(lexeme, ndoc, _, _)| Term { lexeme, ndoc }).collect();
    let idf = |df: i64| (1.0 + (n_docs - df as f64 + 0.5).max(0.0) / (df as f64 + 0.5)).ln().max(1e-6);
    // What the query says, in information: every word it has counts, the common ones little,
    // a word the store has never seen much. A match is scored against this mass, not against
    // the best match of the moment: one shared everyday word is a small part of a question,
    // however alone it is in matching.
    let mass: f64 = terms.iter().map(|t| idf(t.ndoc)).sum::<f64>().max(1e-9);
    // Too common to tell memories apart: dropped (BM25 would give them almost no weight anyway).
    // A word in a handful of memories is never "common": in a young store a name the person
    // said twice is a quarter of everything, and it is exactly the word to match.
    let common = (cfg.lexical_max_df * n_docs).max(RARE_ENOUGH);
    let mut usable: Vec<Term> = terms.into_iter().filter(|t| (t.ndoc as f64) <= common).collect();
    if usable.is_empty() {
        return Vec::new();
    }
    usable.sort_by(|a, b| a.ndoc.cmp(&b.ndoc).then_with(|| a.lexeme.cmp(&b.lexeme)));
    // Candidates come from the rarest lexemes until their postings reach the budget.
    let mut budget = 0i64;
    let mut finders = Vec::new();
    for t in &usable {
        if !finders.is_empty() && budget + t.ndoc > cfg.lexical_candidates as i64 {
            break;
        }
        budget += t.ndoc;
        finders.push(tsquery_literal(&t.lexeme));
    }
    let tsquery = finders.join(" | ");
    let lexemes: Vec<String> = usable.iter().map(|t| t.lexeme.clone()).collect();
    let idfs: Vec<f64> = usable.iter().map(|t| idf(t.ndoc)).collect();
    let mut args = vec![tsquery.into()];
    args.extend(filters.args());
    args.extend([
        n.into(),
        lexemes.into(),
        idfs.into(),
        (cfg.lexical_candidates.max(1.0) as i64).into(),
        cfg.bm25_k1.into(),
        cfg.bm25_b.into(),
        avg_len.into(),
        qv.to_vec().into(),
    ]);
    let scored: Vec<Match> = select_prepared(
        &format!(
            "WITH q AS (SELECT * FROM unnest($9::text[], $10::float8[]) AS q(lexeme, idf)), \
             cand AS (SELECT m.id, m.search FROM dionysus.memories m \
                      WHERE m.search @@ $1::tsquery AND {FILTER_SQL} LIMIT $11), \
             scored AS ( \
               SELECT c.id, sum(q.idf * t.tf * ($12 + 1) / (t.tf + $12 * (1 - $13 + $13 * length(c.search) / $14))) AS score \
               FROM cand c \
               CROSS JOIN LATERAL (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1)::float8 AS tf \
                                   FROM unnest(c.search) u) t \
               JOIN q ON q.lexeme = t.lexeme \
               GROUP BY c.id ORDER BY score DESC, c.id LIMIT $8) \
             SELECT s.id, s.score, 1 - (m.embedding {op} $15::real[]::{vt}), {LABEL_SQL}, {LOCAL_SECONDS_SQL} \
             FROM scored s JOIN dionysus.memories m ON m.id = s.id \
             ORDER BY s.score DESC, s.id",
            op = cosine_op(),
            vt = vector_type()
        ),
        &args,
        |t| {
            Some(Match {
                id: t.get::<Uuid>(1).ok()??,
                score: t.get::<f64>(2).ok()??,
                similarity: t.get::<f64>(3).ok()??,
                label: t.get::<String>(4).ok()??,
                at: t.get::<i64>(5).ok()??,
            })
        },
    );
    // A word met once in a memory of average length counts its IDF once; more often or in a
    // shorter memory a little more (BM25's saturation), so the share is capped at 1.
    scored.into_iter().map(|m| Match { score: (m.score / mass).min(1.0), ..m }).collect()
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
}
