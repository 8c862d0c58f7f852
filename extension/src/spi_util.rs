//! Small helpers over SPI shared by the organs.
use pgrx::prelude::*;
use pgrx::spi::quote_identifier;
use std::cell::OnceCell;

thread_local! {
    static VECTOR_SCHEMA: OnceCell<String> = const { OnceCell::new() };
}

/// The quoted schema pgvector lives in. Queries qualify its type and operators with it, so
/// they work whatever the caller's search_path is.
pub fn vector_schema() -> String {
    VECTOR_SCHEMA.with(|cell| {
        cell.get_or_init(|| {
            let s = first_or_none::<String>(
                "SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace \
                 WHERE e.extname = 'vector'",
                &[],
            )
            .unwrap_or_else(|| "public".to_string());
            quote_identifier(s)
        })
        .clone()
    })
}

/// `<schema>.vector`, for casts such as `$1::real[]::<schema>.vector`.
pub fn vector_type() -> String {
    format!("{}.vector", vector_schema())
}

thread_local! {
    static VECTOR_OID: std::cell::Cell<pg_sys::Oid> = const { std::cell::Cell::new(pg_sys::InvalidOid) };
}

/// A query vector as a parameter of pgvector's own type, built here in one allocation: a
/// statement compares it as it is, where `$1::real[]::vector` would convert an array of its
/// 384 floats (pgrx builds that array element by element) and then cast it, in every statement.
/// The value lives in the current memory context: build it for the statement that uses it (as
/// an argument list is built), never keep it beyond.
pub fn vector_arg(v: &[f32]) -> pgrx::datum::DatumWithOid<'static> {
    debug_assert!((1..=16_000).contains(&v.len()), "pgvector's dimensions");
    let oid = VECTOR_OID.with(|cell| {
        let cached = cell.get();
        let exists = |oid: pg_sys::Oid| unsafe {
            pg_sys::SearchSysCacheExists(
                pg_sys::SysCacheIdentifier::TYPEOID as _,
                pg_sys::Datum::from(oid),
                pg_sys::Datum::from(0),
                pg_sys::Datum::from(0),
                pg_sys::Datum::from(0),
            )
        };
        if cached != pg_sys::InvalidOid && exists(cached) {
            return cached;
        }
        // First use, or pgvector was dropped and created again in this session: the plans made
        // for the old type's parameters go with it.
        if cached != pg_sys::InvalidOid {
            PLANS.with(|plans| plans.borrow_mut().clear());
        }
        let oid = first_or_none::<pg_sys::Oid>(&format!("SELECT '{}'::regtype::oid", vector_type().replace('\'', "''")), &[])
            .expect("pgvector's vector type");
        cell.set(oid);
        oid
    });
    // pgvector's Vector: a 4-byte varlena header, int16 dim, int16 unused (zero), float4 x[dim].
    let size = 8 + 4 * v.len();
    unsafe {
        let p = pg_sys::palloc0(size) as *mut u8;
        pgrx::set_varsize_4b(p as *mut pg_sys::varlena, size as i32);
        std::ptr::write_unaligned(p.add(4) as *mut i16, v.len() as i16);
        std::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, p.add(8), 4 * v.len());
        pgrx::datum::DatumWithOid::new(pg_sys::Datum::from(p), oid)
    }
}

/// `OPERATOR(<schema>.<=>)`: cosine distance.
pub fn cosine_op() -> String {
    format!("OPERATOR({}.<=>)", vector_schema())
}

/// Runs `f` in an internal subtransaction: an ERROR inside rolls back only what `f` did and
/// comes back as `Err(message)`, so one bad row never aborts a whole maintenance pass.
pub fn in_subtransaction<T, F: FnOnce() -> T + std::panic::UnwindSafe>(f: F) -> Result<T, String> {
    let (old_ctx, old_owner) = unsafe { (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner) };
    unsafe { pg_sys::BeginInternalSubTransaction(std::ptr::null()) };
    let restore = move || unsafe {
        pg_sys::MemoryContextSwitchTo(old_ctx);
        pg_sys::CurrentResourceOwner = old_owner;
    };
    PgTryBuilder::new(move || {
        let out = f();
        unsafe { pg_sys::ReleaseCurrentSubTransaction() };
        restore();
        Ok(out)
    })
    .catch_others(move |e| {
        unsafe { pg_sys::RollbackAndReleaseCurrentSubTransaction() };
        restore();
        Err(match e {
            pg_sys::panic::CaughtError::PostgresError(r)
            | pg_sys::panic::CaughtError::ErrorReport(r) => r.message().to_string(),
            pg_sys::panic::CaughtError::RustPanic { ereport, .. } => ereport.message().to_string(),
        })
    })
    .execute()
}

/// Runs `f` with pgvector 0.8's iterative index scan switched on (relaxed order) and a wider
/// search list, so filtered kNN queries keep scanning until they have enough rows instead of
/// starving.
pub fn with_iterative_scan<T>(ef_search: i32, f: impl FnOnce() -> T) -> T {
    let ef = std::ffi::CString::new(ef_search.clamp(1, 1000).to_string()).expect("digits");
    with_settings(&[(c"hnsw.iterative_scan", c"relaxed_order"), (c"hnsw.ef_search", &ef)], f)
}

/// Runs `f` with these settings, scoped like a function's SET clause: a GUC nest level,
/// popped afterwards (and by the transaction machinery if `f` raises an error).
pub fn with_settings<T>(settings: &[(&std::ffi::CStr, &std::ffi::CStr)], f: impl FnOnce() -> T) -> T {
    let level = unsafe { pg_sys::NewGUCNestLevel() };
    for (name, value) in settings {
        set_guc(name, value);
    }
    let out = f();
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
    out
}

fn set_guc(name: &std::ffi::CStr, value: &std::ffi::CStr) {
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
    }
}

thread_local! {
    /// Plans of the hot read queries, prepared once per backend (SPI_keepplan). Postgres
    /// revalidates them itself when the tables they use change.
    static PLANS: std::cell::RefCell<std::collections::HashMap<String, pgrx::spi::OwnedPreparedStatement>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// Runs a read-only query through the backend's plan cache and maps its rows.
pub fn select_prepared<R>(
    query: &str,
    args: &[pgrx::datum::DatumWithOid<'_>],
    row: impl FnMut(pgrx::spi::SpiHeapTupleData) -> Option<R>,
) -> Vec<R> {
    run_cached(query, args, false, row)
}

/// Runs a statement that writes (INSERT/UPDATE/DELETE, RETURNING allowed) through the
/// backend's plan cache and maps the rows it returns.
pub fn write_prepared<R>(
    query: &str,
    args: &[pgrx::datum::DatumWithOid<'_>],
    row: impl FnMut(pgrx::spi::SpiHeapTupleData) -> Option<R>,
) -> Vec<R> {
    run_cached(query, args, true, row)
}

fn run_cached<R>(
    query: &str,
    args: &[pgrx::datum::DatumWithOid<'_>],
    mutating: bool,
    mut row: impl FnMut(pgrx::spi::SpiHeapTupleData) -> Option<R>,
) -> Vec<R> {
    Spi::connect_mut(|client| {
        // The plan is lent to the statement, not borrowed from the map while it runs: a
        // statement that calls back into a cached query (a function the statement runs) finds
        // the map free, and an error unwinding through here gives the plan back (never freed
        // in the middle of the error's cleanup).
        let taken = PLANS.with(|plans| plans.borrow_mut().remove_entry(query));
        let (key, taken) = match taken {
            Some((key, stmt)) => (key, Some(stmt)),
            None => (query.to_string(), None),
        };
        let lent = Lent(
            key,
            Some(taken.unwrap_or_else(|| {
                let oids: Vec<pgrx::PgOid> = args.iter().map(|a| pgrx::PgOid::from(a.oid())).collect();
                let stmt = if mutating { client.prepare_mut(query, &oids) } else { client.prepare(query, &oids) }
                    .unwrap_or_else(|e| pgrx::error!("dionysus: preparing a query: {e}"));
                stmt.keep()
            })),
        );
        let stmt = lent.1.as_ref().expect("a plan");
        let table = if mutating { client.update(stmt, None, args) } else { client.select(stmt, None, args) };
        table.unwrap_or_else(|e| pgrx::error!("dionysus: {e}")).filter_map(&mut row).collect()
    })
}

/// A cached plan lent to one statement: back in the map however the statement ends.
struct Lent(String, Option<pgrx::spi::OwnedPreparedStatement>);

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(stmt) = self.1.take() {
            PLANS.with(|plans| {
                if let Ok(mut plans) = plans.try_borrow_mut() {
                    plans.insert(std::mem::take(&mut self.0), stmt);
                }
            });
        }
    }
}

/// The first column of the first row, or None when the query returns no row (or NULL).
/// `Spi::get_one` treats "no row" as an error; here it is an ordinary answer. Reads go through
/// here or `select_prepared`, never `Spi::get_one`/`Spi::run`: pgrx runs those as writes and
/// assigns the transaction an id, which a hot standby refuses (and which burns ids on a primary).
pub fn first_or_none<T: FromDatum + IntoDatum>(query: &str, args: &[pgrx::datum::DatumWithOid<'_>]) -> Option<T> {
    Spi::connect(|c| {
        let rows = c.select(query, Some(1), args).unwrap_or_else(|e| pgrx::error!("dionysus: {e}"));
        rows.into_iter().next().and_then(|r| r.get::<T>(1).ok().flatten())
    })
}
