//! One library, one schema: a database whose dionysus is at another version than this library
//! refuses the library's functions with a clear error (55000 and the hint to update), before
//! any argument is read.
//!
//! An older release's SQL declares some functions with other arguments than this library reads:
//! 0.1.0's remember() under a newer library failed with XX000 ("unboxing private_to_ argument
//! failed") and a changed type could be read as another. The check sits in PostgreSQL's
//! function-manager hook, so it holds for every C function of this library, whatever its SQL
//! declaration says: needs_fmgr_hook answers for a function when it is one of ours and the
//! installed version differs; only those calls go through fmgr_hook, which raises at their start.
//! A matching database pays one catalog look-up when a plan first looks one of our functions up,
//! nothing per call. Extension scripts (CREATE EXTENSION … VERSION, ALTER EXTENSION UPDATE) run
//! unchecked: a step of an update runs with the version it updates from.
//!
//! `dionysus.allow_old_schema` (superuser only, off) lets a session call an older schema's
//! functions anyway: the update tests fill an old release that way before updating it.
use crate::errors;
use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;
use std::ffi::CStr;

/// pg_language's oid of C (ClanguageId, a macro of pg_language_d.h not in the bindings).
const CLANGUAGE_ID: u32 = 13;

static mut PREV_NEEDS: pg_sys::needs_fmgr_hook_type = None;
static mut PREV_HOOK: pg_sys::fmgr_hook_type = None;

/// Installs the hooks (from _PG_init, once per process that loads the library).
pub fn install() {
    unsafe {
        PREV_NEEDS = pg_sys::needs_fmgr_hook;
        PREV_HOOK = pg_sys::fmgr_hook;
        pg_sys::needs_fmgr_hook = Some(needs_hook);
        pg_sys::fmgr_hook = Some(hook);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn needs_hook(fn_oid: pg_sys::Oid) -> bool {
    if let Some(prev) = PREV_NEEDS {
        if prev(fn_oid) {
            return true;
        }
    }
    refused(fn_oid)
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn hook(event: pg_sys::FmgrHookEventType::Type, flinfo: *mut pg_sys::FmgrInfo, arg: *mut pg_sys::Datum) {
    if event == pg_sys::FmgrHookEventType::FHET_START && !flinfo.is_null() && refused((*flinfo).fn_oid) {
        let installed = installed_version().unwrap_or_default();
        errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "dionysus: this database has dionysus {installed}, the server's library is {}: its functions are not this library's",
                env!("CARGO_PKG_VERSION")
            ),
            Some("Run ALTER EXTENSION dionysus UPDATE in this database (as its owner or a superuser).".into()),
        );
    }
    if let Some(prev) = PREV_HOOK {
        prev(event, flinfo, arg);
    }
}

/// Whether a call of this function must be refused: a C function of this library, outside an
/// extension script, in a database whose installed version is not the library's.
unsafe fn refused(fn_oid: pg_sys::Oid) -> bool {
    if pg_sys::creating_extension || !ours(fn_oid) || crate::settings::ALLOW_OLD_SCHEMA.get() {
        return false;
    }
    installed_version().is_some_and(|v| v != env!("CARGO_PKG_VERSION"))
}

/// A C-language function whose library is this one ('$libdir/dionysus', the control file's
/// module_pathname).
unsafe fn ours(fn_oid: pg_sys::Oid) -> bool {
    let tup = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::PROCOID as _, pg_sys::Datum::from(fn_oid));
    if tup.is_null() {
        return false;
    }
    let form = pg_sys::GETSTRUCT(tup) as pg_sys::Form_pg_proc;
    let mut result = false;
    if (*form).prolang == pg_sys::Oid::from(CLANGUAGE_ID) {
        let mut isnull = false;
        let probin = pg_sys::SysCacheGetAttr(
            pg_sys::SysCacheIdentifier::PROCOID as _,
            tup,
            pg_sys::Anum_pg_proc_probin as _,
            &mut isnull,
        );
        if !isnull {
            let text = pg_sys::text_to_cstring(probin.cast_mut_ptr());
            result = CStr::from_ptr(text).to_bytes() == b"$libdir/dionysus";
            pg_sys::pfree(text.cast());
        }
    }
    pg_sys::ReleaseSysCache(tup);
    result
}

/// pg_extension's extversion of dionysus in this database (None: not installed).
unsafe fn installed_version() -> Option<String> {
    let rel = pg_sys::table_open(pg_sys::ExtensionRelationId, pg_sys::AccessShareLock as _);
    let scan = pg_sys::systable_beginscan(rel, pg_sys::InvalidOid, false, std::ptr::null_mut(), 0, std::ptr::null_mut());
    let mut found = None;
    loop {
        let tup = pg_sys::systable_getnext(scan);
        if tup.is_null() {
            break;
        }
        let form = pg_sys::GETSTRUCT(tup) as pg_sys::Form_pg_extension;
        if CStr::from_ptr((*form).extname.data.as_ptr()).to_bytes() != b"dionysus" {
            continue;
        }
        let mut isnull = false;
        let v = pg_sys::heap_getattr(tup, pg_sys::Anum_pg_extension_extversion as _, (*rel).rd_att, &mut isnull);
        if !isnull {
            let text = pg_sys::text_to_cstring(v.cast_mut_ptr());
            found = Some(CStr::from_ptr(text).to_string_lossy().into_owned());
            pg_sys::pfree(text.cast());
        }
        break;
    }
    pg_sys::systable_endscan(scan);
    pg_sys::table_close(rel, pg_sys::AccessShareLock as _);
    found
}
