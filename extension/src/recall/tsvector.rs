//! A `tsvector` read in Rust: how often a lexeme occurs and how many lexemes there are.
//!
//! BM25 needs each matched lexeme's term frequency. In SQL that is `unnest(search)` joined to
//! the query's lexemes, per candidate: an executor node per row, most of lexical recall's time.
//! Reading the value's own layout (src/include/tsearch/ts_type.h) is a few comparisons.
//!
//! Layout: int32 varlena header, int32 size, `size` WordEntry words (bit 0 haspos, bits 1-11
//! len, bits 12-31 pos, as GCC packs the bitfield on a little-endian machine), then the
//! lexemes; after each lexeme with positions, at an even offset, a uint16 count and the positions.
use pgrx::prelude::*;

#[cfg(target_endian = "big")]
compile_error!("tsvector::Lexemes reads WordEntry bitfields as a little-endian machine lays them out");

/// A copy of one `tsvector` value (header included).
pub struct Lexemes(Vec<u8>);

const HEADER: usize = 8;

impl Lexemes {
    fn u32_at(&self, at: usize) -> Option<u32> {
        Some(u32::from_ne_bytes(self.0.get(at..at + 4)?.try_into().ok()?))
    }

    /// The number of distinct lexemes (SQL `length(tsvector)`).
    pub fn len(&self) -> usize {
        self.u32_at(4).unwrap_or(0) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How often `lexeme` occurs: its number of positions, 1 for a lexeme stored without
    /// positions, 0 when absent (or if the value is not laid out as expected).
    pub fn frequency(&self, lexeme: &[u8]) -> u32 {
        let size = self.len();
        let strings = HEADER + size * 4;
        if strings > self.0.len() {
            return 0;
        }
        for i in 0..size {
            let Some(entry) = self.u32_at(HEADER + i * 4) else { return 0 };
            let has_positions = entry & 1 == 1;
            let len = ((entry >> 1) & 0x7ff) as usize;
            let pos = (entry >> 12) as usize;
            if len != lexeme.len() || self.0.get(strings + pos..strings + pos + len) != Some(lexeme) {
                continue;
            }
            if !has_positions {
                return 1;
            }
            let at = strings + ((pos + len + 1) & !1);
            return match self.0.get(at..at + 2) {
                Some(n) => u16::from_ne_bytes([n[0], n[1]]).max(1) as u32,
                None => 0,
            };
        }
        0
    }
}

impl FromDatum for Lexemes {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        // Detoasted to a plain 4-byte header (a short value is stored with a 1-byte one).
        let value = pg_sys::pg_detoast_datum(datum.cast_mut_ptr());
        let len = pgrx::varsize(value);
        Some(Lexemes(std::slice::from_raw_parts(value as *const u8, len).to_vec()))
    }
}

impl IntoDatum for Lexemes {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        unsafe {
            let copy = pg_sys::palloc(self.0.len()) as *mut u8;
            std::ptr::copy_nonoverlapping(self.0.as_ptr(), copy, self.0.len());
            Some(pg_sys::Datum::from(copy))
        }
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::TSVECTOROID
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use super::Lexemes;
    use pgrx::prelude::*;

    fn read(sql: &str) -> Lexemes {
        Spi::connect(|c| c.select(sql, None, &[]).unwrap().first().get_one::<Lexemes>().unwrap().unwrap())
    }

    /// The frequencies and the length agree with what SQL's own unnest and length say.
    #[pg_test]
    fn frequencies_and_length_agree_with_sql() {
        let text = "Cats chase cats; a cat naps. Dogs bark at the cats and the postman, who runs.";
        let v = read(&format!("SELECT to_tsvector('english', '{text}')"));
        let sql: Vec<(String, i32)> = Spi::connect(|c| {
            c.select(
                &format!("SELECT lexeme, coalesce(array_length(positions, 1), 1) FROM unnest(to_tsvector('english', '{text}'))"),
                None,
                &[],
            )
            .unwrap()
            .map(|r| (r.get::<String>(1).unwrap().unwrap(), r.get::<i32>(2).unwrap().unwrap()))
            .collect()
        });
        assert_eq!(v.len(), sql.len());
        assert!(sql.iter().any(|(l, n)| l == "cat" && *n == 4), "{sql:?}");
        for (lexeme, n) in &sql {
            assert_eq!(v.frequency(lexeme.as_bytes()), *n as u32, "{lexeme}");
        }
        assert_eq!(v.frequency(b"postmen"), 0);
        assert_eq!(v.frequency(b""), 0);
    }

    /// A stored vector too long to stay inline (compressed or out of line in TOAST) reads the same.
    #[pg_test]
    fn a_stored_long_vector_reads_like_a_short_one() {
        Spi::run(
            "SELECT dionysus.remember((SELECT string_agg('lexeme' || g || 'x', ' ') || ' ember ember ember' FROM generate_series(1, 700) g))",
        )
        .unwrap();
        let stored = Spi::get_one::<i32>("SELECT pg_column_size(search) FROM dionysus.memories").unwrap().unwrap();
        let whole = Spi::get_one::<i32>("SELECT octet_length(search::text) FROM dionysus.memories").unwrap().unwrap();
        assert!(stored < whole, "stored compressed: {stored} of {whole} bytes");
        let v = read("SELECT search FROM dionysus.memories");
        assert_eq!(v.len(), 701);
        assert_eq!((v.frequency(b"ember"), v.frequency(b"lexeme350x"), v.frequency(b"lexeme701x")), (3, 1, 0));
    }

    /// Lexemes stored without positions (strip) count once; an empty vector has none.
    #[pg_test]
    fn stripped_and_empty_vectors() {
        let v = read("SELECT strip(to_tsvector('english', 'rain rain rain, go away'))");
        let n = Spi::get_one::<i32>("SELECT length(to_tsvector('english', 'rain rain rain, go away'))").unwrap().unwrap();
        assert_eq!((v.len(), v.frequency(b"rain"), v.frequency(b"away")), (n as usize, 1, 1));
        let e = read("SELECT ''::tsvector");
        assert_eq!((e.len(), e.frequency(b"rain")), (0, 0));
    }
}
