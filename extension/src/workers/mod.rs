//! Background maintenance: keeps memory healthy without anyone calling a function.
//!
//! A static *launcher* (registered only when `dionysus` is in `shared_preload_libraries`)
//! wakes every `dionysus.worker_interval` seconds, lists the connectable databases and starts
//! one short-lived *maintenance pass* per database, one after another. A pass connects, does
//! nothing if the extension is not installed there, and otherwise, for at most
//! `dionysus.worker_pass_seconds`: recomputes stale neighborhoods, folds the access log into
//! access counts, refreshes the BM25 lexicon when the store has grown, and prunes history past
//! its retention (prune_history). Passes exit when done, so no idle connection ever blocks DROP DATABASE.
//!
//! Errors are caught per step, recorded in `dionysus.worker_status` (shown by the
//! `memory_health` view) and followed by exponential back-off; a crash of a pass is a normal
//! worker exit, never a server restart. SIGTERM stops both cleanly.
use crate::neighborhoods;
use crate::recall::lexical;
use crate::settings::{SCHEDULER_INTERVAL, WORKER_ENABLED, WORKER_INTERVAL, WORKER_PASS_SECONDS, WORKER_PAUSED};
use crate::spi_util::in_subtransaction;
use pgrx::bgworkers::*;
use pgrx::prelude::*;
use std::time::{Duration, Instant};

const NEIGHBORHOOD_BATCH: i64 = 50;
/// Memories whose sentences are embedded per worker transaction (each up to 16 vectors, all in
/// one request to an HTTP provider).
const SENTENCE_BATCH: i64 = 8;

/// The two kinds of per-database pass a launcher starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Duty {
    Maintenance = 0,
    Scheduler = 1,
}

impl Duty {
    fn from_arg(arg: pg_sys::Datum) -> Duty {
        if arg.value() == 1 { Duty::Scheduler } else { Duty::Maintenance }
    }
    fn name(self) -> &'static str {
        match self {
            Duty::Maintenance => "maintenance",
            Duty::Scheduler => "scheduler",
        }
    }
    fn interval(self) -> Duration {
        let secs = match self {
            Duty::Maintenance => WORKER_INTERVAL.get(),
            Duty::Scheduler => SCHEDULER_INTERVAL.get(),
        };
        Duration::from_secs(secs.max(1) as u64)
    }
    /// The per-database status row of this duty (in the extension's schema).
    fn status_table(self) -> &'static str {
        match self {
            Duty::Maintenance => "worker_status",
            Duty::Scheduler => "scheduler_status",
        }
    }
    fn pass_function(self) -> &'static str {
        match self {
            Duty::Maintenance => "dionysus_maintenance_main",
            Duty::Scheduler => "dionysus_scheduler_main",
        }
    }
}

pub fn register_launcher_if_preloaded() {
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } || !WORKER_ENABLED.get() {
        return;
    }
    for duty in [Duty::Maintenance, Duty::Scheduler] {
        let name = if duty == Duty::Maintenance { "dionysus launcher".to_string() } else { "dionysus scheduler".to_string() };
        BackgroundWorkerBuilder::new(&name)
            .set_type(&name)
            .set_function("dionysus_launcher_main")
            .set_library("dionysus")
            .set_argument(Some(pg_sys::Datum::from(duty as i64)))
            .enable_spi_access()
            .set_start_time(BgWorkerStartTime::RecoveryFinished)
            .set_restart_time(Some(Duration::from_secs(10)))
            .load();
    }
}

/// SIGTERM (or the postmaster's death), once seen. pgrx clears its SIGTERM flag when it is read,
/// by `sigterm_received()` and inside `wait_latch()` alike, so it is remembered here: every
/// later check must see it too (a launcher that read it while waiting for a pass and forgot it
/// waited for its next interval forever, and the server never shut down).
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn stopping() -> bool {
    if BackgroundWorker::sigterm_received() {
        STOP.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    STOP.load(std::sync::atomic::Ordering::SeqCst)
}

/// Waits on the latch for at most `timeout`; false once the worker must stop.
fn wait(timeout: Duration) -> bool {
    if !BackgroundWorker::wait_latch(Some(timeout)) {
        STOP.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    !stopping()
}

fn reload_config_if_asked() {
    if BackgroundWorker::sighup_received() {
        unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
    }
}

#[pg_guard]
#[no_mangle]
pub extern "C-unwind" fn dionysus_launcher_main(arg: pg_sys::Datum) {
    let duty = Duty::from_arg(arg);
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // No database: the launcher only reads the shared catalog pg_database, so it runs whatever
    // databases exist (a cluster without "postgres" included) and runs no SQL anyone can shadow.
    BackgroundWorker::connect_worker_to_spi(None, None);
    log!("dionysus {} launcher started (interval {} s)", duty.name(), duty.interval().as_secs());
    let mut first = true;
    // The databases this launcher has started a pass for (a pass says once why it skips one).
    let mut visited = std::collections::HashSet::new();
    loop {
        let wait_for = if first { Duration::from_millis(500) } else { duty.interval() };
        first = false;
        if !wait(wait_for) {
            break;
        }
        reload_config_if_asked();
        for (oid, name) in BackgroundWorker::transaction(connectable_databases) {
            if stopping() {
                break;
            }
            run_pass(duty, oid, &name, visited.insert(oid.to_u32()));
        }
    }
    log!("dionysus {} launcher stopped", duty.name());
}

/// Databases that accept connections and are not templates, read from the shared catalog by a
/// heap scan (as autovacuum's launcher does): no database connection, no SQL.
fn connectable_databases() -> Vec<(pg_sys::Oid, String)> {
    let mut out = Vec::new();
    unsafe {
        let rel = pg_sys::table_open(pg_sys::DatabaseRelationId, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let scan = pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let db = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tuple);
            if (*db).datallowconn && !(*db).datistemplate {
                out.push(((*db).oid, pg_sys::name_data_to_str(&(*db).datname).to_string()));
            }
        }
        pg_sys::table_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    }
    out.sort_by_key(|(oid, _)| oid.to_u32());
    out
}

/// Starts one pass for a database (named by its oid in bgw_extra, with whether it is this
/// launcher's first there) and waits for it to end.
fn run_pass(duty: Duty, oid: pg_sys::Oid, db: &str, first_visit: bool) {
    let started = BackgroundWorkerBuilder::new(&format!("dionysus {} {db}", duty.name()))
        .set_type(&format!("dionysus {}", duty.name()))
        .set_function(duty.pass_function())
        .set_library("dionysus")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(None)
        .set_extra(&format!("{} {}", oid.to_u32(), u8::from(first_visit)))
        .set_notify_pid(unsafe { pg_sys::MyProcPid })
        .load_dynamic();
    let worker = match started {
        Ok(w) => w,
        Err(_) => {
            warning!("dionysus: could not start a maintenance pass for database {db} (raise max_worker_processes)");
            return;
        }
    };
    // Not WaitForBackgroundWorkerShutdown: it ignores our SIGTERM, and a pass registered while
    // the server shuts down never starts, so it would wait forever.
    loop {
        match worker.pid() {
            Err(BackgroundWorkerStatus::Stopped) | Err(BackgroundWorkerStatus::PostmasterDied) => return,
            Err(BackgroundWorkerStatus::Untracked { .. }) => return,
            Ok(_) | Err(BackgroundWorkerStatus::NotYetStarted) | Err(BackgroundWorkerStatus::Started) => {}
        }
        if !wait(Duration::from_millis(200)) {
            let _ = worker.terminate();
            return;
        }
    }
}

#[pg_guard]
#[no_mangle]
pub extern "C-unwind" fn dionysus_maintenance_main(_arg: pg_sys::Datum) {
    if open_pass(Duty::Maintenance).is_none() {
        return;
    }
    let begun = Instant::now();
    let deadline = begun + Duration::from_secs(WORKER_PASS_SECONDS.get().max(1) as u64);
    let mut done = 0i64;
    let mut errors: Vec<String> = Vec::new();
    // Neighborhoods first (they keep recall sharp), a batch per transaction.
    loop {
        if stopping() || Instant::now() >= deadline {
            break;
        }
        let outcome = BackgroundWorker::transaction(|| {
            in_subtransaction(|| neighborhoods::process_queue(NEIGHBORHOOD_BATCH, Some(deadline)))
        });
        match outcome {
            Ok(pass) => {
                done += pass.done;
                if let Some(e) = pass.last_error {
                    errors.push(e);
                }
                if pass.done + pass.failed == 0 {
                    break; // nothing due
                }
            }
            Err(e) => {
                errors.push(format!("neighborhoods: {e}"));
                break;
            }
        }
    }
    // Then sentence vectors (029): a batch of memories per transaction while the pass has time.
    while !stopping() && Instant::now() < deadline {
        match BackgroundWorker::transaction(|| in_subtransaction(|| crate::sentences::step(SENTENCE_BATCH))) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) => {
                errors.push(format!("sentences: {e}"));
                break;
            }
        }
    }
    // Decay after the access log is folded: being recalled slows fading.
    let steps: [(&str, fn()); 4] = [
        ("access log", fold_access_log),
        ("lexicon", refresh_lexicon_if_stale),
        ("retention", prune_history),
        ("decay", crate::decay::step),
    ];
    for (name, step) in steps {
        if stopping() {
            break;
        }
        if let Err(e) = BackgroundWorker::transaction(|| in_subtransaction(step)) {
            errors.push(format!("{name}: {e}"));
        }
    }
    // A re-index (sql/020_reindex.sql): a batch of new vectors per transaction until the pass's
    // time is up, at least one per pass however busy the rest was; then the swap.
    let mut first = true;
    while !stopping() && (first || Instant::now() < deadline) {
        first = false;
        match BackgroundWorker::transaction(|| in_subtransaction(reindex_step)) {
            Ok(Some(step)) if step.get("embedded").is_some() => continue,
            Ok(_) => break,
            Err(e) => {
                errors.push(format!("reindex: {e}"));
                break;
            }
        }
    }
    let elapsed_ms = begun.elapsed().as_secs_f64() * 1000.0;
    let error = if errors.is_empty() { None } else { Some(errors.join("; ")) };
    BackgroundWorker::transaction(|| record_pass(done, elapsed_ms, error));
}

/// One scheduler tick in a database: stalled heartbeats closed, the driver woken by NOTIFY
/// when a heartbeat is due or work waits (`scheduler_tick()`).
#[pg_guard]
#[no_mangle]
pub extern "C-unwind" fn dionysus_scheduler_main(_arg: pg_sys::Datum) {
    let Some(db) = open_pass(Duty::Scheduler) else {
        return;
    };
    // The tick and its record commit together: whoever hears the NOTIFY sees the tick. A
    // failed tick backs off; a step that failed inside a good tick is recorded, no back-off.
    let error = BackgroundWorker::transaction(|| {
        let (failed, error) = match in_subtransaction(|| Spi::get_one::<pgrx::JsonB>("SELECT scheduler_tick()")) {
            Ok(Ok(Some(pgrx::JsonB(tick)))) => {
                let steps = tick["errors"].as_array().filter(|e| !e.is_empty()).map(|e| serde_json::Value::Array(e.clone()).to_string());
                (false, steps)
            }
            Ok(Ok(None)) => (false, None),
            Ok(Err(e)) => (true, Some(e.to_string())),
            Err(e) => (true, Some(e)),
        };
        let _ = Spi::run_with_args(
            "UPDATE scheduler_status SET last_tick_at = now(), \
               last_error = coalesce($1, last_error), \
               last_error_at = CASE WHEN $1 IS NULL THEN last_error_at ELSE now() END, \
               consecutive_failures = CASE WHEN $2 THEN consecutive_failures + 1 ELSE 0 END \
             WHERE id = 1",
            &[error.clone().into(), failed.into()],
        );
        error
    });
    if let Some(e) = &error {
        warning!("dionysus scheduler in {db}: {e}");
    }
}

/// The start of every per-database pass: signals, the connection to the database whose oid is
/// in bgw_extra, and whether there is anything to do. Returns the database name when the pass
/// should go on, by then running as the extension's owner with a search_path of its own.
///
/// A database owner controls much of what a connection to their database sees: its
/// search_path (ALTER DATABASE … SET), the public schema, and any schema or table called
/// "dionysus" when the extension is not installed. So, before any SQL, search_path is pinned
/// to pg_catalog; the pass goes on only where pg_extension lists dionysus at this library's
/// version; and from then on it runs as the extension's owner, never as the bootstrap
/// superuser, with search_path = pg_catalog, <the extension's schema>, pg_temp.
fn open_pass(duty: Duty) -> Option<String> {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let extra = BackgroundWorker::get_extra();
    let (oid, first_visit) = extra.split_once(' ')?;
    let (oid, first_visit) = (oid.parse::<u32>().ok()?, first_visit == "1");
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(pg_sys::Oid::from(oid)), None);
    pin_search_path("pg_catalog, pg_temp");
    let installed = BackgroundWorker::transaction(|| {
        Spi::connect(|c| {
            let rows = c.select(
                "SELECT e.extowner, quote_ident(n.nspname::text), e.extversion::text, current_database()::text \
                 FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace \
                 WHERE e.extname OPERATOR(pg_catalog.=) 'dionysus'::pg_catalog.name",
                None,
                &[],
            );
            rows.ok()?.into_iter().next().and_then(|t| {
                Some((t.get::<pg_sys::Oid>(1).ok()??, t.get::<String>(2).ok()??, t.get::<String>(3).ok()??, t.get::<String>(4).ok()??))
            })
        })
    });
    let (owner, schema, version, db) = installed?;
    if WORKER_PAUSED.get() {
        // ALTER DATABASE … SET dionysus.worker_paused = on (a restore in progress, say).
        debug1!("dionysus {}: {db} is paused (dionysus.worker_paused); skipped", duty.name());
        return None;
    }
    if version != env!("CARGO_PKG_VERSION") {
        // The schema lags (or leads) this library, which serves only its own version: nothing
        // runs there until ALTER EXTENSION dionysus UPDATE. Said once (the maintenance
        // launcher's first visit since the server started), not every interval.
        let why = format!("dionysus: database {db} has dionysus {version}, the library is {}: its background passes are skipped until ALTER EXTENSION dionysus UPDATE", env!("CARGO_PKG_VERSION"));
        if first_visit && duty == Duty::Maintenance {
            log!("{why}");
        } else {
            debug1!("{why}");
        }
        return None;
    }
    unsafe { pg_sys::SetUserIdAndSecContext(owner, pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32) };
    pin_search_path(&format!("pg_catalog, {schema}, pg_temp"));
    if BackgroundWorker::transaction(|| in_back_off(duty)) {
        return None;
    }
    Some(db)
}

/// Sets search_path for the rest of this worker's session, over any per-database default.
fn pin_search_path(path: &str) {
    let value = std::ffi::CString::new(path).expect("no NUL in a search_path");
    unsafe {
        pg_sys::SetConfigOption(c"search_path".as_ptr(), value.as_ptr(), pg_sys::GucContext::PGC_SUSET, pg_sys::GucSource::PGC_S_OVERRIDE);
    }
}

/// After failures, passes wait 2^n intervals (at most an hour) before trying again.
/// The duty's status table has `consecutive_failures` and `last_error_at`.
fn in_back_off(duty: Duty) -> bool {
    Spi::get_one_with_args::<bool>(
        &format!(
            "SELECT consecutive_failures > 0 AND last_error_at IS NOT NULL \
                AND now() < last_error_at + make_interval(secs => least(power(2, consecutive_failures) * $1, 3600)) \
             FROM {} WHERE id = 1",
            duty.status_table()
        ),
        &[(duty.interval().as_secs() as f64).into()],
    )
    .ok()
    .flatten()
    .unwrap_or(false)
}

fn record_pass(done: i64, elapsed_ms: f64, error: Option<String>) {
    let failed = error.is_some();
    if failed {
        warning!("dionysus maintenance: {}", error.as_deref().unwrap_or_default());
    }
    let _ = Spi::run_with_args(
        "UPDATE worker_status SET last_run_at = now(), last_pass_ms = $2, \
           neighborhoods_done = neighborhoods_done + $1, \
           last_success_at = CASE WHEN $3 IS NULL THEN now() ELSE last_success_at END, \
           last_error = coalesce($3, last_error), \
           last_error_at = CASE WHEN $3 IS NULL THEN last_error_at ELSE now() END, \
           consecutive_failures = CASE WHEN $3 IS NULL THEN 0 ELSE consecutive_failures + 1 END \
         WHERE id = 1",
        &[done.into(), elapsed_ms.into(), error.into()],
    );
}

/// Folds recall's access log into memory_access (access_count, last_accessed).
pub fn fold_access_log() {
    // One fold at a time (the worker's, a run_maintenance() call's): two DELETEs of the same
    // log rows in different orders would deadlock; the other fold gets the rows next time.
    if !matches!(Spi::get_one::<bool>("SELECT pg_try_advisory_xact_lock(hashtextextended('dionysus.fold_access_log', 0))"), Ok(Some(true))) {
        return;
    }
    // A memory's row before its log rows, as forget takes them (the global lock order in
    // sql/002_heartbeat.sql); one another transaction holds for update or delete (a forget, a
    // decay step) is skipped, its recalls folded next time (FOR KEY SHARE: a plain update of its
    // other columns does not hold the fold up). The rows of a memory since deleted go. The
    // counts go to memory_access, never to the memory's own row (sql/001_schema.sql says why).
    let fold = "WITH held AS (SELECT m.id FROM dionysus.memories m \
                              WHERE m.id IN (SELECT DISTINCT memory_id FROM dionysus.memory_access_log) \
                              FOR KEY SHARE SKIP LOCKED), \
                    taken AS (DELETE FROM dionysus.memory_access_log l WHERE l.memory_id IN (SELECT id FROM held) \
                              RETURNING memory_id, accessed_at), \
                    agg AS (SELECT memory_id, count(*)::int AS n, max(accessed_at) AS at FROM taken GROUP BY memory_id) \
               INSERT INTO dionysus.memory_access AS a (memory_id, access_count, last_accessed) \
               SELECT memory_id, n, at FROM agg ORDER BY memory_id \
               ON CONFLICT (memory_id) DO UPDATE SET access_count = a.access_count + excluded.access_count, \
                      last_accessed = greatest(a.last_accessed, excluded.last_accessed)";
    Spi::run(fold).expect("fold access log");
    Spi::run(
        "DELETE FROM dionysus.memory_access_log l \
          WHERE NOT EXISTS (SELECT 1 FROM dionysus.memories m WHERE m.id = l.memory_id)",
    )
    .expect("drop the log rows of memories gone");
}

fn refresh_lexicon_if_stale() {
    if lexical::lexicon_is_stale() {
        lexical::refresh_lexicon();
    }
}

/// One step of a building re-index run: its answer, None when nothing is building.
fn reindex_step() -> Option<serde_json::Value> {
    Spi::get_one::<pgrx::JsonB>("SELECT dionysus_internal.reindex_step(64)").expect("reindex step").map(|j| j.0)
}

/// Retention (heartbeat_config.retention_days): the past that is only a record is pruned.
fn prune_history() {
    Spi::run("SELECT dionysus.prune_history()").expect("prune history");
}

/// Runs the worker's maintenance steps once, now, in this session (for tests and for servers
/// without the preloaded worker). Returns what was done, and how many stale neighborhoods and
/// memories not yet split into sentences remain (call again while either is above zero).
#[pg_extern(volatile, parallel_unsafe)]
fn run_maintenance() -> pgrx::JsonB {
    let pass = neighborhoods::process_queue(neighborhoods::MAINTENANCE_CALL_LIMIT, None);
    // (A model that fails leaves the sentences for later; the rest goes on.)
    let (split, sentence_error) = match in_subtransaction(|| crate::sentences::step(crate::sentences::MAINTENANCE_CALL_LIMIT)) {
        Ok(n) => (n, None),
        Err(e) => (0, Some(e)),
    };
    fold_access_log();
    refresh_lexicon_if_stale();
    pgrx::JsonB(serde_json::json!({
        "sentences_split": split,
        "sentences_remaining": crate::sentences::pending(),
        "sentences_error": sentence_error,
        "neighborhoods_recomputed": pass.done,
        "neighborhoods_failed": pass.failed,
        "neighborhoods_remaining": Spi::get_one::<i64>(
            "SELECT count(DISTINCT memory_id) FROM dionysus.neighborhood_queue WHERE not_before <= now()"
        ).ok().flatten().unwrap_or(0),
        "last_error": pass.last_error,
    }))
}
