//! `jsonb` arguments parsed by us, not by pgrx's `JsonB`.
//!
//! pgrx parses a `JsonB` argument before the function body runs and panics (XX000) on what
//! serde_json refuses, such as a document nested deeper than its recursion limit (128). A
//! `JsonArg` carries the jsonb's text; `parse` checks the nesting first and refuses with a
//! clean 22P02 that names the argument. PostgreSQL accepts far deeper jsonb than any
//! Dionysus document needs.
use crate::errors;
use pgrx::callconv::{Arg, ArgAbi};
use pgrx::nullable::Nullable;
use pgrx::pg_sys;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::FromDatum;

/// Deepest nesting of objects and arrays any argument may have.
pub const MAX_DEPTH: usize = 64;

/// The text of a `jsonb` argument, parsed on demand with `parse`.
pub struct JsonArg(String);

impl JsonArg {
    /// The document as a serde value; too deep or unreadable is 22P02 naming `arg`.
    pub fn parse(&self, arg: &str) -> serde_json::Value {
        if nesting_depth(&self.0) > MAX_DEPTH {
            errors::bad_json(arg, format!("is nested deeper than {MAX_DEPTH} levels"));
        }
        serde_json::from_str(&self.0).unwrap_or_else(|e| errors::bad_json(arg, e))
    }
}

/// The deepest nesting of `[` and `{` outside strings in a JSON text.
pub fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

impl FromDatum for JsonArg {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        // jsonb_out gives the canonical text; PostgreSQL has already validated the document.
        let text = unsafe {
            let cstr = pgrx::fcinfo::direct_function_call::<&std::ffi::CStr>(pg_sys::jsonb_out, &[Some(datum)])
                .expect("jsonb_out returns text for a jsonb");
            let s = cstr.to_string_lossy().into_owned();
            pg_sys::pfree(cstr.as_ptr() as *mut std::ffi::c_void);
            s
        };
        Some(JsonArg(text))
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for JsonArg {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| panic!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

unsafe impl SqlTranslatable for JsonArg {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(JsonArg);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("jsonb"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("jsonb")));
}

#[cfg(test)]
mod tests {
    #[test]
    fn depth_counts_only_structure_outside_strings() {
        assert_eq!(super::nesting_depth(r#"{"a": [1, {"b": "[[[{{{"}]}"#), 3);
        assert_eq!(super::nesting_depth(r#""\"[""#), 0);
        assert_eq!(super::nesting_depth(&"[".repeat(3000)), 3000);
    }
}
