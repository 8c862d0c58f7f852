//! The embedding organ: `dionysus.embed(text) → vector(384)`.
//!
//! Every function that takes text embeds through [`embed_texts`], so callers never handle
//! vectors. Results are cached per (model, sha256(content)) in `dionysus.embedding_cache`.
mod encoder;
pub mod http;
pub mod local;

use crate::errors;
use crate::settings::{self, EMBEDDING_API_KEY, EMBEDDING_MODEL, EMBEDDING_PRECISION, EMBEDDING_PROVIDER, EMBEDDING_TIMEOUT_MS, EMBEDDING_URL, MODEL_PATH};
use pgrx::prelude::*;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

pub use local::DIMENSIONS;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Provider {
    Local,
    Http,
}

pub fn provider() -> Provider {
    match settings::string(&EMBEDDING_PROVIDER).trim().to_ascii_lowercase().as_str() {
        "" | "local" => Provider::Local,
        "http" => Provider::Http,
        other => errors::invalid_arg(
            "dionysus.embedding_provider",
            format!("unknown provider '{other}' (expected 'local' or 'http')"),
        ),
    }
}

/// Where the local model is looked for.
pub fn model_path() -> PathBuf {
    let configured = settings::string(&MODEL_PATH);
    if !configured.trim().is_empty() {
        return PathBuf::from(configured.trim());
    }
    let mut buf = vec![0 as std::ffi::c_char; pg_sys::MAXPGPATH as usize];
    unsafe { pg_sys::get_share_path(std::ptr::addr_of!(pg_sys::my_exec_path).cast(), buf.as_mut_ptr()) };
    let share = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned();
    PathBuf::from(share).join("dionysus").join("all-MiniLM-L6-v2")
}

/// Which model makes vectors: a provider and its model, never the API key (that stays a
/// superuser-only setting). Recorded as JSON in `embedding_store` (what the stored vectors
/// are) and in a re-index run (what they are being rebuilt with).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spec {
    pub provider: String,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub model_path: String,
    /// The local model's int8 form ("int8"), or the model as published (empty: every spec
    /// written before int8 existed, and f32 now, serialise as they did).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub precision: String,
}

/// The precision `dionysus.embedding_precision` names for the local model ("" for f32).
/// `auto`, the default, never makes a store's model look out of date: it is the local store's
/// own precision, and for a store not made yet (CREATE EXTENSION) int8 where this CPU has
/// VNNI, where int8 is fast (about 2.4× f32), f32 elsewhere (int8 would be no faster there).
/// `stored` gives the local store's precision (None: no local store), asked only for `auto`.
fn precision_setting(stored: impl FnOnce() -> Option<String>) -> String {
    match settings::string(&EMBEDDING_PRECISION).trim().to_ascii_lowercase().as_str() {
        "f32" => String::new(),
        "int8" => "int8".into(),
        "" | "auto" => match stored() {
            Some(p) => p,
            None if local::int8_is_fast() => "int8".into(),
            None => String::new(),
        },
        other => errors::invalid_arg("dionysus.embedding_precision", format!("unknown precision '{other}' (expected 'auto', 'f32' or 'int8')")),
    }
}

/// The local store's precision, read from embedding_store (None: no store, or not local).
fn stored_precision() -> Option<String> {
    crate::spi_util::select_prepared(
        "SELECT coalesce(spec ->> 'precision', '') FROM dionysus.embedding_store WHERE id = 1 AND spec ->> 'provider' = 'local'",
        &[],
        |row| row.get::<String>(1).ok().flatten(),
    )
    .into_iter()
    .next()
}

/// The same of a store's spec already read (live() has it: no second query on the hot path).
fn precision_of(spec: &serde_json::Value) -> Option<String> {
    (spec["provider"] == "local").then(|| spec["precision"].as_str().unwrap_or_default().to_string())
}

impl Spec {
    /// The model the `dionysus.embedding_*` settings name.
    pub fn from_settings() -> Spec {
        Spec::from_settings_with(stored_precision)
    }

    /// As from_settings, `stored` giving the local store's precision when `auto` asks.
    fn from_settings_with(stored: impl FnOnce() -> Option<String>) -> Spec {
        match provider() {
            Provider::Local => Spec {
                provider: "local".into(),
                url: String::new(),
                model: String::new(),
                model_path: model_path().display().to_string(),
                precision: precision_setting(stored),
            },
            Provider::Http => Spec {
                provider: "http".into(),
                url: settings::string(&EMBEDDING_URL),
                model: settings::string(&EMBEDDING_MODEL),
                model_path: String::new(),
                precision: String::new(),
            },
        }
    }

    /// The cache key's model part: provider plus model identity.
    pub fn key(&self) -> String {
        match self.provider.as_str() {
            "local" => {
                let name = PathBuf::from(&self.model_path).file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                if self.precision.is_empty() { format!("local:{name}") } else { format!("local:{name}:{}", self.precision) }
            }
            _ => format!("http:{}", self.model),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("a spec is JSON");
        v["model_key"] = self.key().into();
        v
    }
}

/// The cache key of the model the settings name.
pub fn model_key() -> String {
    Spec::from_settings().key()
}

/// The model live writes and queries embed with, and the width the store's columns hold: the
/// model that made the stored vectors (`embedding_store`), so no session, whatever its
/// settings, ever puts a vector of another model beside them. The settings are used when they
/// name that same model (a moved URL or model directory still applies); when they name
/// another, it takes `dionysus reindex` (sql/020_reindex.sql), and `embedding_info()` says so.
///
/// While a run builds, each transaction that embeds holds the run's lock shared until it ends,
/// and the swap takes it exclusively: a vector made with the old model is either written
/// before the swap (and replaced by it) or not at all.
fn live() -> (Spec, usize) {
    let mut store = read_store(false);
    let settings = Spec::from_settings_with(|| store.as_ref().and_then(|(_, _, pgrx::JsonB(spec), _)| precision_of(spec)));
    if let Some((_, _, _, true)) = store {
        let free = crate::spi_util::first_or_none::<bool>(
            "SELECT pg_try_advisory_xact_lock_shared(hashtextextended('dionysus.reindex_vectors', 0))",
            &[],
        )
        .unwrap_or(false);
        if !free {
            // A swap holds it: once it is done, the store may hold another model (read again,
            // in a snapshot taken after the wait).
            crate::spi_util::first_or_none::<String>(
                "SELECT pg_advisory_xact_lock_shared(hashtextextended('dionysus.reindex_vectors', 0))::text",
                &[],
            );
            store = read_store(true);
        }
    }
    let Some((dims, key, pgrx::JsonB(spec), _)) = store else {
        return (settings, DIMENSIONS);
    };
    if settings.key() == key {
        return (settings, dims as usize);
    }
    match serde_json::from_value::<Spec>(spec) {
        Ok(s) => (s, dims as usize),
        Err(e) => errors::embedding_failed(format!("embedding_store.spec is not a model spec: {e}")),
    }
}

/// The store's row and whether a run builds: (width, model key, spec, building). `fresh` reads
/// in a new snapshot (a read-only SPI query keeps the statement's).
fn read_store(fresh: bool) -> Option<(i32, String, pgrx::JsonB, bool)> {
    let query = "SELECT s.dimensions, s.model_key, s.spec, EXISTS (SELECT 1 FROM dionysus.reindex_runs r WHERE r.status = 'building') \
                   FROM dionysus.embedding_store s WHERE s.id = 1";
    let row = |row: pgrx::spi::SpiHeapTupleData| {
        Some((row.get::<i32>(1).ok()??, row.get::<String>(2).ok()??, row.get::<pgrx::JsonB>(3).ok()??, row.get::<bool>(4).ok()??))
    };
    let rows = if fresh { crate::spi_util::write_prepared(query, &[], row) } else { crate::spi_util::select_prepared(query, &[], row) };
    rows.into_iter().next()
}

/// In the postmaster, while `shared_preload_libraries` loads: loads the local model once so
/// every backend inherits the weights copy-on-write instead of holding its own copy. Nothing
/// is computed here, so no thread pool exists before the fork. Failure is only logged: the
/// backends then load lazily and report the problem to whoever embeds.
pub fn preload_in_postmaster() {
    if settings::string(&EMBEDDING_PROVIDER).trim().to_ascii_lowercase() != "local" {
        return;
    }
    let configured = settings::string(&MODEL_PATH);
    let path = if configured.trim().is_empty() { model_path() } else { PathBuf::from(configured.trim()) };
    match local::model(&path) {
        Ok(_) => pgrx::log!("dionysus: embedding model loaded from {} (shared with every backend)", path.display()),
        Err(e) => pgrx::log!("dionysus: embedding model not preloaded ({e:?}); backends will load it on first use"),
    }
}

/// Computes embeddings with the live model, without the cache.
pub fn compute(texts: &[&str]) -> Vec<Vec<f32>> {
    let (spec, dims) = live();
    compute_with(&spec, texts, Some(dims))
}

/// Computes embeddings with a given model, without the cache; every vector must be `expected`
/// wide when given, else as wide as the first.
pub fn compute_with(spec: &Spec, texts: &[&str], expected: Option<usize>) -> Vec<Vec<f32>> {
    if texts.is_empty() {
        return Vec::new();
    }
    let (vectors, name) = match spec.provider.as_str() {
        "local" => {
            let path = PathBuf::from(&spec.model_path);
            let model = local::model(&path).unwrap_or_else(|e| match e {
                local::LoadError::Missing { path, file } => errors::model_missing(
                    format!("embedding model not found: {} has no {file}", path.display()),
                    format!(
                        "Run scripts/fetch-model.sh (or: scripts/fetch-model.sh {}) to fetch all-MiniLM-L6-v2, \
                         or point dionysus.model_path at a directory holding model.safetensors, tokenizer.json and config.json.",
                        path.display()
                    ),
                ),
                local::LoadError::Broken { path, reason } => errors::model_missing(
                    format!("embedding model at {} cannot be loaded: {reason}", path.display()),
                    "Fetch it again with scripts/fetch-model.sh.",
                ),
            });
            let precision = match spec.precision.as_str() {
                "" => local::Precision::F32,
                "int8" => local::Precision::Int8,
                other => errors::embedding_failed(format!("the model spec names an unknown precision '{other}'")),
            };
            (model.embed(texts, precision).unwrap_or_else(|e| errors::embedding_failed(format!("local embedding failed: {e}"))), "local")
        }
        "http" => {
            // The key is the settings' endpoint's: never sent to another host (the store's
            // old endpoint while a run moves to a new one).
            let key = if spec.url == settings::string(&EMBEDDING_URL) { settings::string(&EMBEDDING_API_KEY) } else { String::new() };
            let ep = http::Endpoint {
                url: &spec.url,
                model: &spec.model,
                api_key: Some(key.as_str()),
                timeout: Duration::from_millis(EMBEDDING_TIMEOUT_MS.get().max(1) as u64),
            };
            (http::embed(&ep, texts).unwrap_or_else(|e| errors::embedding_failed(e)), "http")
        }
        other => errors::embedding_failed(format!("unknown embedding provider '{other}' in a recorded model spec")),
    };
    let width = expected.unwrap_or_else(|| vectors.first().map_or(0, Vec::len));
    for v in &vectors {
        if v.len() != width || v.is_empty() {
            errors::dimension_mismatch(v.len(), width, name);
        }
        if v.iter().any(|x| !x.is_finite()) {
            errors::embedding_failed(format!("the {name} embedding provider returned a non-finite value"));
        }
    }
    vectors
}

fn content_hash(text: &str) -> Vec<u8> {
    Sha256::digest(text.as_bytes()).to_vec()
}

fn can_write() -> bool {
    unsafe { !pg_sys::XactReadOnly && !pg_sys::RecoveryInProgress() }
}

/// Embeds texts through the cache: hits are read, misses computed in one batch and stored.
pub fn embed_texts(texts: &[&str]) -> Vec<Vec<f32>> {
    if texts.is_empty() {
        return Vec::new();
    }
    let (spec, dims) = live();
    let key = spec.key();
    let hashes: Vec<Vec<u8>> = texts.iter().map(|t| content_hash(t)).collect();
    let mut found: HashMap<Vec<u8>, Vec<f32>> = crate::spi_util::select_prepared(
        "SELECT content_hash, embedding::real[] FROM dionysus.embedding_cache \
         WHERE model = $1 AND content_hash = ANY($2)",
        &[key.clone().into(), hashes.clone().into()],
        |row| Some((row.get::<Vec<u8>>(1).ok()??, row.get::<Vec<f32>>(2).ok()??)),
    )
    .into_iter()
    .collect();
    // Each distinct missing text is computed once.
    let mut missing: Vec<usize> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, h) in hashes.iter().enumerate() {
        if !found.contains_key(h) && seen.insert(h.clone()) {
            missing.push(i);
        }
    }
    if !missing.is_empty() {
        let computed = compute_with(&spec, &missing.iter().map(|&i| texts[i]).collect::<Vec<_>>(), Some(dims));
        if can_write() {
            let miss_hashes: Vec<Vec<u8>> = missing.iter().map(|&i| hashes[i].clone()).collect();
            let miss_vecs: Vec<String> = computed.iter().map(|v| vector_literal(v)).collect();
            Spi::run_with_args(
                &format!(
                    "INSERT INTO dionysus.embedding_cache (model, content_hash, embedding) \
                     SELECT $1, h, v::{} FROM unnest($2::bytea[], $3::text[]) AS u(h, v) \
                     ON CONFLICT (model, content_hash) DO NOTHING",
                    crate::spi_util::vector_type()
                ),
                &[key.into(), miss_hashes.into(), miss_vecs.into()],
            )
            .unwrap_or_else(|e| errors::embedding_failed(format!("embedding cache: {e}")));
        }
        for (&i, v) in missing.iter().zip(computed) {
            found.insert(hashes[i].clone(), v);
        }
    }
    hashes.iter().map(|h| found[h].clone()).collect()
}

pub fn embed_one(text: &str) -> Vec<f32> {
    embed_texts(&[text]).pop().expect("one embedding per text")
}

/// pgvector's text form, `[x,y,...]`.
pub fn vector_literal(v: &[f32]) -> String {
    let mut s = String::with_capacity(v.len() * 12 + 2);
    s.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push(']');
    s
}

/// Checks a text argument: not null, not blank, within `dionysus.max_content_length`.
pub fn check_text<'a>(arg: &str, text: Option<&'a str>) -> &'a str {
    let Some(t) = text else { errors::null_arg(arg) };
    if t.trim().is_empty() {
        errors::invalid_arg(arg, "must not be empty");
    }
    let limit = settings::MAX_CONTENT_LENGTH.get().max(1) as usize;
    let len = t.chars().count();
    if len > limit {
        errors::too_long(arg, len, limit);
    }
    t
}

/// Embedding of `content` as real[]; `dionysus.embed(text) → vector` wraps it.
#[pg_extern(volatile, parallel_unsafe)]
fn embed_real(content: Option<&str>) -> Vec<f32> {
    embed_one(check_text("content", content))
}

/// Embeddings of many texts at once (packed into encoder passes of up to 256 tokens), in input order.
#[pg_extern(volatile, parallel_unsafe)]
fn embed_batch_real(
    contents: Option<Vec<Option<String>>>,
) -> TableIterator<'static, (name!(ord, i32), name!(embedding, Vec<f32>))> {
    let texts = bounded_texts(contents);
    numbered(embed_texts(&texts.iter().map(String::as_str).collect::<Vec<_>>()))
}

/// At most this many texts, and this many bytes in all, in one call of a batch function: the
/// embeddings of a batch are held in memory until it returns (and each text is already bounded
/// by dionysus.max_content_length). Larger work goes in several calls.
pub const MAX_BATCH_TEXTS: usize = 4096;
pub const MAX_BATCH_BYTES: usize = 16 << 20;

/// A `contents` argument, each text checked (`contents[i]` named in the error).
fn checked_texts(contents: Option<Vec<Option<String>>>) -> Vec<String> {
    let Some(contents) = contents else { errors::null_arg("contents") };
    contents.into_iter().enumerate().map(|(i, t)| check_text(&format!("contents[{}]", i + 1), t.as_deref()).to_string()).collect()
}

/// `checked_texts` within the batch bounds (54000 past them, before anything is embedded).
fn bounded_texts(contents: Option<Vec<Option<String>>>) -> Vec<String> {
    if let Some(c) = &contents {
        if c.len() > MAX_BATCH_TEXTS {
            errors::limit_exceeded("contents", format!("{} texts, at most {MAX_BATCH_TEXTS} in one call", c.len()));
        }
        let bytes: usize = c.iter().map(|t| t.as_ref().map_or(0, String::len)).sum();
        if bytes > MAX_BATCH_BYTES {
            errors::limit_exceeded("contents", format!("{bytes} bytes of text, at most {MAX_BATCH_BYTES} in one call"));
        }
    }
    checked_texts(contents)
}

/// Vectors with their 1-based position, as the batch functions return them.
fn numbered(out: Vec<Vec<f32>>) -> TableIterator<'static, (name!(ord, i32), name!(embedding, Vec<f32>))> {
    TableIterator::new(out.into_iter().enumerate().map(|(i, v)| ((i + 1) as i32, v)))
}

/// The model the settings name, as `reindex_start()` records it (never the API key).
#[pg_extern(stable, parallel_safe)]
fn embedding_settings() -> pgrx::JsonB {
    pgrx::JsonB(Spec::from_settings().to_json())
}

/// Embeddings of texts by a re-index run's model, without the cache (its vectors may be of
/// another width than the store's until the swap), in input order. Only a run that is still
/// building has a model to use; the run's model was recorded from the superuser-only settings.
#[pg_extern(volatile, parallel_unsafe)]
fn reindex_embed_real(
    run_id: Option<pgrx::Uuid>,
    contents: Option<Vec<Option<String>>>,
) -> TableIterator<'static, (name!(ord, i32), name!(embedding, Vec<f32>))> {
    let Some(run) = run_id else { errors::null_arg("run_id") };
    let texts = checked_texts(contents);
    let found = crate::spi_util::select_prepared(
        "SELECT target, dimensions FROM dionysus.reindex_runs WHERE id = $1 AND status = 'building'",
        &[run.into()],
        |row| Some((row.get::<pgrx::JsonB>(1).ok()??, row.get::<i32>(2).ok().flatten())),
    );
    let Some((pgrx::JsonB(target), dims)) = found.into_iter().next() else {
        errors::invalid_arg("run_id", format!("no re-index run {run} is building"))
    };
    let spec: Spec = serde_json::from_value(target).unwrap_or_else(|e| errors::embedding_failed(format!("reindex_runs.target: {e}")));
    numbered(compute_with(&spec, &texts.iter().map(String::as_str).collect::<Vec<_>>(), dims.map(|d| d as usize)))
}

/// Declares that the stored vectors are the settings' model's: for a store that holds none yet
/// (a new database set up for another model of the same width), or, with force, vectors made
/// elsewhere by that model. Anything else is a re-index. Owner only (sql/900_api.sql).
#[pg_extern(volatile, parallel_unsafe)]
fn embedding_store_adopt(force: default!(Option<bool>, false)) -> pgrx::JsonB {
    let spec = Spec::from_settings();
    let store = crate::spi_util::first_or_none::<i32>("SELECT dimensions FROM dionysus.embedding_store WHERE id = 1", &[]).unwrap_or(DIMENSIONS as i32);
    let probe = compute_with(&spec, &["dionysus: which width is this model?"], None);
    let width = probe.first().map_or(0, Vec::len);
    if width != store as usize {
        errors::dimension_mismatch(width, store as usize, &spec.provider);
    }
    let held = crate::spi_util::first_or_none::<i64>("SELECT count(*) FROM dionysus.memories", &[]).unwrap_or(0);
    if held > 0 && !force.unwrap_or(false) {
        errors::raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("dionysus: the store holds {held} memories embedded by another model"),
            Some("Run `dionysus reindex` to rebuild them with the settings' model (force => true only if that model made them).".into()),
        );
    }
    Spi::run_with_args(
        "UPDATE dionysus.embedding_store SET spec = $1, model_key = $2, updated_at = now() WHERE id = 1",
        &[pgrx::JsonB(serde_json::to_value(&spec).expect("a spec is JSON")).into(), spec.key().into()],
    )
    .unwrap_or_else(|e| errors::embedding_failed(format!("embedding_store: {e}")));
    pgrx::JsonB(spec.to_json())
}

/// What the embedding organ is configured with, what the store holds, and whether it works:
/// for `dionysus doctor`.
#[pg_extern(volatile, parallel_unsafe)]
fn embedding_info() -> pgrx::JsonB {
    let provider = provider();
    let settings = Spec::from_settings();
    let store = crate::spi_util::select_prepared(
        "SELECT spec, dimensions FROM dionysus.embedding_store WHERE id = 1",
        &[],
        |row| Some((row.get::<pgrx::JsonB>(1).ok()??, row.get::<i32>(2).ok()??)),
    )
    .into_iter()
    .next();
    let (store_key, dims) = match &store {
        Some((pgrx::JsonB(spec), d)) => (serde_json::from_value::<Spec>(spec.clone()).map(|s| s.key()).ok(), *d as usize),
        None => (None, DIMENSIONS),
    };
    let mut info = serde_json::json!({
        "provider": match provider { Provider::Local => "local", Provider::Http => "http" },
        "model_key": settings.key(),
        "dimensions": dims,
        "store_model_key": store_key,
        // The settings name another model than the one that made the stored vectors: recall
        // would compare vectors of two models until `dionysus reindex` rebuilds them.
        "reindex_needed": store_key.as_deref().is_some_and(|k| k != settings.key()),
    });
    match provider {
        Provider::Local => {
            let path = model_path();
            info["model_path"] = path.display().to_string().into();
            match local::model(&path) {
                Ok(_) => info["loadable"] = true.into(),
                Err(e) => {
                    info["loadable"] = false.into();
                    info["error"] = format!("{e:?}").into();
                }
            }
        }
        Provider::Http => {
            info["url"] = settings::string(&EMBEDDING_URL).into();
        }
    }
    pgrx::JsonB(info)
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn embeddings_are_unit_length_and_384_wide() {
        let v = super::embed_one("A quiet morning by the lake");
        assert_eq!(v.len(), super::DIMENSIONS);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    }

    #[pg_test]
    fn batch_and_single_agree_and_order_is_kept() {
        let texts = ["first text", "a rather longer second text that pads the batch", "third"];
        let batch = super::compute(&texts);
        for (i, t) in texts.iter().enumerate() {
            let single = super::compute(&[t]).pop().unwrap();
            let diff: f32 = single.iter().zip(&batch[i]).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(diff < 1e-5, "padding changed text {i} by {diff}");
        }
    }

    #[pg_test]
    fn vector_literal_is_pgvector_text() {
        assert_eq!(super::vector_literal(&[1.0, -0.5, 0.25]), "[1,-0.5,0.25]");
        let ok = Spi::get_one::<bool>(&format!("SELECT vector_dims('{}'::vector) = 3", super::vector_literal(&[1.0, 2.0, 3.0])));
        assert_eq!(ok, Ok(Some(true)));
    }

    #[pg_test(error = "dionysus: invalid argument \"content\": must not be empty")]
    fn blank_text_is_rejected() {
        super::check_text("content", Some("  \n "));
    }
}
