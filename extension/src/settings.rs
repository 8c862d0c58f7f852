//! Every `dionysus.*` GUC in one place. Recall weights live in the `recall_config` table
//! instead, so they persist per database and show up in `\d`.
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;

pub static EMBEDDING_PROVIDER: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"local"));
pub static MODEL_PATH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static EMBEDDING_ENGINE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"native"));
pub static EMBEDDING_PRECISION: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"auto"));
pub static EMBEDDING_URL: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"http://127.0.0.1:11434/v1/embeddings"));
pub static EMBEDDING_MODEL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"all-minilm"));
pub static EMBEDDING_API_KEY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static EMBEDDING_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
pub static MAX_CONTENT_LENGTH: GucSetting<i32> = GucSetting::<i32>::new(100_000);
pub static EPISODE_GAP_MINUTES: GucSetting<i32> = GucSetting::<i32>::new(30);
pub static WORKER_ENABLED: GucSetting<bool> = GucSetting::<bool>::new(true);
pub static WORKER_PAUSED: GucSetting<bool> = GucSetting::<bool>::new(false);
pub static ALLOW_OLD_SCHEMA: GucSetting<bool> = GucSetting::<bool>::new(false);
pub static WORKER_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(30);
pub static WORKER_PASS_SECONDS: GucSetting<i32> = GucSetting::<i32>::new(20);
pub static SCHEDULER_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(10);
pub static HEARTBEAT_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(60);

pub fn register() {
    GucRegistry::define_string_guc(
        c"dionysus.embedding_provider",
        c"Embedding provider: 'local' (all-MiniLM-L6-v2 in-process) or 'http' (OpenAI-compatible /v1/embeddings).",
        c"The store keeps the model that made its vectors; another model takes effect through `dionysus reindex`.",
        &EMBEDDING_PROVIDER,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"dionysus.model_path",
        c"Directory holding model.safetensors, tokenizer.json and config.json for the local provider.",
        c"Empty means $(pg_config --sharedir)/dionysus/all-MiniLM-L6-v2, where scripts/fetch-model.sh puts it.",
        &MODEL_PATH,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"dionysus.embedding_engine",
        c"What runs the local model: 'native' (Dionysus's own encoder) or 'candle' (the reference it is checked against).",
        c"Both make the same vectors (cosine >= 0.9999); 'candle' is slower, loads its own copy of the weights in each backend, and exists only in a build with the candle feature (scripts/bench.sh embed). For benchmarks and checks.",
        &EMBEDDING_ENGINE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"dionysus.embedding_precision",
        c"How the local model multiplies: 'auto' (the store's own; a new store int8 where the CPU has AVX-512 VNNI, else f32), 'f32' (the model as published) or 'int8' (int8 weights, about 2.4x f32's speed with VNNI).",
        c"int8 vectors differ from f32's (cosine 0.987-0.9999, median 0.9987; LoCoMo recall the same to 0.005, in the book's Benchmarks): they are another model to the store, under the key local:all-MiniLM-L6-v2:int8. A store keeps the model that made its vectors until `dionysus reindex` moves it to the one set here.",
        &EMBEDDING_PRECISION,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"dionysus.embedding_url",
        c"Full URL of the OpenAI-compatible embeddings endpoint for the http provider.",
        c"For example http://127.0.0.1:11434/v1/embeddings (Ollama) or https://api.openai.com/v1/embeddings.",
        &EMBEDDING_URL,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"dionysus.embedding_model",
        c"Model name sent to the http embedding provider.",
        c"",
        &EMBEDDING_MODEL,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"dionysus.embedding_api_key",
        c"Bearer key for the http embedding provider (hidden from non-superusers).",
        c"",
        &EMBEDDING_API_KEY,
        GucContext::Suset,
        GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_int_guc(
        c"dionysus.embedding_timeout_ms",
        c"Timeout of one http embedding request, in milliseconds.",
        c"",
        &EMBEDDING_TIMEOUT_MS,
        100,
        600_000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"dionysus.max_content_length",
        c"Longest memory content accepted, in characters.",
        c"",
        &MAX_CONTENT_LENGTH,
        1,
        10_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dionysus.episode_gap_minutes",
        c"A gap longer than this between episodic memories of one source starts a new episode.",
        c"",
        &EPISODE_GAP_MINUTES,
        1,
        10_080,
        GucContext::Userset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_bool_guc(
        c"dionysus.worker_enabled",
        c"Start the maintenance worker (needs dionysus in shared_preload_libraries).",
        c"",
        &WORKER_ENABLED,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    // For the update tests: a superuser's session may call an older schema's functions
    // (src/version_guard.rs), which otherwise refuse with the hint to update.
    GucRegistry::define_bool_guc(
        c"dionysus.allow_old_schema",
        c"Let this session call the functions of a database whose dionysus is at another version than the library.",
        c"Only to fill an old release before updating it; its declarations may not match this library.",
        &ALLOW_OLD_SCHEMA,
        GucContext::Suset,
        GucFlags::default(),
    );
    // Per database (ALTER DATABASE … SET, superuser only): a pass reads it once connected. Held
    // on while a dump is restored into the database, so no pass writes between its steps.
    GucRegistry::define_bool_guc(
        c"dionysus.worker_paused",
        c"Background passes skip this database (set per database with ALTER DATABASE ... SET).",
        c"",
        &WORKER_PAUSED,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dionysus.worker_interval",
        c"Seconds between maintenance passes over each database.",
        c"",
        &WORKER_INTERVAL,
        1,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"dionysus.worker_pass_seconds",
        c"Longest a maintenance pass works on one database before yielding.",
        c"",
        &WORKER_PASS_SECONDS,
        1,
        3_600,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"dionysus.scheduler_interval",
        c"Seconds between scheduler ticks (is a heartbeat due? stalled ones closed, the driver woken).",
        c"",
        &SCHEDULER_INTERVAL,
        1,
        3_600,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    // Plain minutes (no unit flag) so SQL reads it back as a number.
    GucRegistry::define_int_guc(
        c"dionysus.heartbeat_interval",
        c"Minutes between heartbeats.",
        c"A heartbeat is also due at once when requested (request_heartbeat, a significant session).",
        &HEARTBEAT_INTERVAL,
        1,
        10_080,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

/// Reads a string GUC as an owned Rust string (empty when unset).
pub fn string(setting: &GucSetting<Option<CString>>) -> String {
    setting.get().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
}
