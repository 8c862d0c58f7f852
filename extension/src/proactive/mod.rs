//! The proactive mind's settings, read once a transaction (014): `proactive_setting` is asked
//! some two hundred times a tick, and a query each time was a tenth of the tick. The values are
//! the table's as the transaction first read them; a change the transaction makes itself
//! (`proactive_config_changed`, a statement trigger) is read at once, and a subtransaction that
//! rolls back forgets what it read.
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::cell::RefCell;
use std::collections::HashMap;

thread_local! {
    static SETTINGS: RefCell<Option<HashMap<String, f64>>> = const { RefCell::new(None) };
}

fn forget() {
    // (Never borrowed across a call that could end the transaction; try_ keeps a panic out of C.)
    SETTINGS.with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            *s = None;
        }
    });
}

unsafe extern "C-unwind" fn on_xact(_event: pg_sys::XactEvent::Type, _arg: *mut core::ffi::c_void) {
    forget();
}

unsafe extern "C-unwind" fn on_subxact(
    event: pg_sys::SubXactEvent::Type,
    _sub: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut core::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        forget();
    }
}

/// Called once a backend, from `_PG_init`: every end of a transaction forgets the settings.
pub fn register() {
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_xact), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(on_subxact), std::ptr::null_mut());
    }
}

fn load() -> HashMap<String, f64> {
    Spi::connect(|c| {
        c.select("SELECT key, value FROM dionysus.proactive_config", None, &[])
            .expect("proactive_config")
            .filter_map(|t| Some((t.get::<String>(1).ok()??, t.get::<f64>(2).ok()??)))
            .collect()
    })
}

#[pg_schema]
pub mod dionysus_internal {
    use super::*;

    /// One value of proactive_config; an unknown key is an error naming it (42704), a null one
    /// 22004. Parallel restricted: a worker would read the table under a snapshot of its own.
    #[pg_extern(stable, parallel_restricted)]
    fn proactive_setting(setting_key: Option<&str>) -> f64 {
        let Some(key) = setting_key else { crate::errors::null_arg("setting_key") };
        if SETTINGS.with(|s| s.borrow().is_none()) {
            let read = load(); // (the query runs with nothing borrowed)
            SETTINGS.with(|s| *s.borrow_mut() = Some(read));
        }
        let v = SETTINGS.with(|s| s.borrow().as_ref().and_then(|m| m.get(key).copied()));
        v.unwrap_or_else(|| {
            crate::errors::raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                format!("dionysus: proactive_config has no key \"{key}\""),
                None,
            )
        })
    }

    /// proactive_config changed in this transaction: the next read reads the table again.
    #[pg_extern(volatile, parallel_restricted)]
    fn forget_proactive_settings() {
        super::forget();
    }
}
