//! all-MiniLM-L6-v2 in-process: tokenizers + our own BERT encoder (encoder.rs), pure Rust.
//!
//! Matches sentence-transformers: truncation at 256 tokens, mean pooling over the text's
//! tokens, then L2 normalisation. Loaded once, in the postmaster when preloaded (every backend
//! then shares the weights copy-on-write), else on a backend's first use; one compute thread,
//! so a backend never spins up a pool beside Postgres.
//!
//! candle's BERT (`dionysus.embedding_engine = 'candle'`, in a build with the `candle` feature)
//! is kept as the reference the encoder is checked against (`scripts/bench.sh embed` builds
//! it); it loads its own copy of the weights, in the backend that asks for it, never in the
//! postmaster. Without it, the tests check the encoder against vectors candle made
//! (`reference_vectors.json`); the default build does not compile candle at all.
pub use super::encoder::Precision;
use super::encoder::{Encoder, Scratch};
use crate::errors;
use crate::settings::{self, EMBEDDING_ENGINE};
#[cfg(feature = "candle")]
use candle_core::{DType, Device, Tensor};
#[cfg(feature = "candle")]
use candle_nn::VarBuilder;
#[cfg(feature = "candle")]
use candle_transformers::models::bert::BertModel;
#[cfg(feature = "candle")]
use std::cell::OnceCell;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use tokenizers::{Tokenizer, TruncationParams};

pub const DIMENSIONS: usize = 384;
const MAX_TOKENS: usize = 256;
/// Tokens in one encoder pass: texts are packed back to back until the next would pass this
/// (a single text never does: it is truncated at MAX_TOKENS). Bounds the scratch buffers at
/// about 4 MB of a backend's private memory.
const PASS_TOKENS: usize = MAX_TOKENS;
/// Texts per forward pass of the candle reference: bounds its padded tensors' memory.
#[cfg(feature = "candle")]
const CANDLE_BATCH: usize = 16;

/// What the encoder reads of the model's `config.json`.
#[derive(serde::Deserialize)]
struct Config {
    hidden_size: usize,
    num_attention_heads: usize,
    layer_norm_eps: f64,
    hidden_act: String,
}

pub struct LocalModel {
    pub path: PathBuf,
    tokenizer: Tokenizer,
    encoder: Encoder,
    scratch: RefCell<Scratch>,
    #[cfg(feature = "candle")]
    reference: OnceCell<BertModel>,
}

thread_local! {
    static MODEL: RefCell<Option<Rc<LocalModel>>> = const { RefCell::new(None) };
}

/// What went wrong loading the model, with the path looked at.
#[derive(Debug)]
pub enum LoadError {
    Missing { path: PathBuf, file: &'static str },
    Broken { path: PathBuf, reason: String },
}

/// Which code runs the model (`dionysus.embedding_engine`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Engine {
    Native,
    Candle,
}

pub fn engine() -> Engine {
    match settings::string(&EMBEDDING_ENGINE).trim().to_ascii_lowercase().as_str() {
        "" | "native" => Engine::Native,
        "candle" if cfg!(feature = "candle") => Engine::Candle,
        "candle" => errors::invalid_arg(
            "dionysus.embedding_engine",
            "this build has no candle engine (the reference for checks and benchmarks: build with the `candle` feature)",
        ),
        other => errors::invalid_arg(
            "dionysus.embedding_engine",
            format!("unknown engine '{other}' (expected 'native' or 'candle')"),
        ),
    }
}

/// The backend's model, loading it on first use (or when `dionysus.model_path` changed).
/// Whether this CPU runs the int8 form fast (AVX-512 VNNI): what `auto` precision picks for a
/// new store.
pub fn int8_is_fast() -> bool {
    super::encoder::Isa::detect() == super::encoder::Isa::Vnni
}

pub fn model(path: &Path) -> Result<Rc<LocalModel>, LoadError> {
    MODEL.with(|cell| {
        if let Some(m) = cell.borrow().as_ref() {
            if m.path == path {
                return Ok(m.clone());
            }
        }
        let m = Rc::new(load(path)?);
        *cell.borrow_mut() = Some(m.clone());
        Ok(m)
    })
}

fn load(path: &Path) -> Result<LocalModel, LoadError> {
    for file in ["model.safetensors", "tokenizer.json", "config.json"] {
        if !path.join(file).is_file() {
            return Err(LoadError::Missing { path: path.to_path_buf(), file });
        }
    }
    let broken = |reason: String| LoadError::Broken { path: path.to_path_buf(), reason };
    let config: Config = serde_json::from_str(
        &std::fs::read_to_string(path.join("config.json")).map_err(|e| broken(e.to_string()))?,
    )
    .map_err(|e| broken(format!("config.json: {e}")))?;
    if config.hidden_size != DIMENSIONS {
        return Err(broken(format!("hidden_size is {}, Dionysus stores {DIMENSIONS}", config.hidden_size)));
    }
    if config.hidden_act != "gelu" {
        return Err(broken(format!("hidden_act is {:?}, the encoder runs BERT's exact gelu", config.hidden_act)));
    }
    let mut tokenizer =
        Tokenizer::from_file(path.join("tokenizer.json")).map_err(|e| broken(format!("tokenizer.json: {e}")))?;
    tokenizer
        .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
        .map_err(|e| broken(format!("tokenizer truncation: {e}")))?;
    tokenizer.with_padding(None);
    let weights = std::fs::read(path.join("model.safetensors")).map_err(|e| broken(format!("model.safetensors: {e}")))?;
    let encoder = Encoder::load(&weights, config.num_attention_heads, config.layer_norm_eps)
        .map_err(|e| broken(format!("model.safetensors: {e}")))?;
    Ok(LocalModel {
        path: path.to_path_buf(),
        tokenizer,
        encoder,
        scratch: RefCell::default(),
        #[cfg(feature = "candle")]
        reference: OnceCell::new(),
    })
}

impl LocalModel {
    /// Embeds texts with the engine the settings name; each result is L2-normalised, 384 long.
    pub fn embed(&self, texts: &[&str], precision: Precision) -> Result<Vec<Vec<f32>>, String> {
        self.embed_with(engine(), precision, texts)
    }

    pub fn embed_with(&self, engine: Engine, precision: Precision, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        match engine {
            Engine::Native => self.embed_native(texts, precision),
            // The reference is the model as published: it has no int8 form.
            Engine::Candle if precision == Precision::Int8 => {
                Err("the candle engine computes f32 vectors only; this store's model is int8 (dionysus.embedding_engine = 'native')".into())
            }
            #[cfg(feature = "candle")]
            Engine::Candle => self.embed_candle(texts),
            #[cfg(not(feature = "candle"))]
            Engine::Candle => Err("this build has no candle engine (build with the `candle` feature)".into()),
        }
    }

    /// Texts in their order, packed into passes of at most PASS_TOKENS tokens, none padded.
    fn embed_native(&self, texts: &[&str], precision: Precision) -> Result<Vec<Vec<f32>>, String> {
        let mut scratch = self.scratch.try_borrow_mut().map_err(|_| "the encoder is already running in this backend".to_string())?;
        let mut out = Vec::with_capacity(texts.len());
        let mut pass: Vec<Vec<u32>> = Vec::new();
        let mut run = |pass: &mut Vec<Vec<u32>>| -> Result<(), String> {
            // A cancel, statement_timeout or shutdown is honoured between passes and, in the
            // encoder, between layers (a layer of a full pass is a few milliseconds).
            pgrx::check_for_interrupts!();
            let ids: Vec<&[u32]> = pass.iter().map(Vec::as_slice).collect();
            out.extend(self.encoder.embed(&ids, precision, &mut scratch, &|| {
                pgrx::check_for_interrupts!();
            })?);
            pass.clear();
            Ok(())
        };
        for text in texts {
            let ids = self.tokenizer.encode(*text, true).map_err(|e| e.to_string())?.get_ids().to_vec();
            if pass.iter().map(Vec::len).sum::<usize>() + ids.len() > PASS_TOKENS {
                run(&mut pass)?;
            }
            pass.push(ids);
        }
        if !pass.is_empty() {
            run(&mut pass)?;
        }
        Ok(out)
    }

    #[cfg(feature = "candle")]
    fn embed_candle(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let model = match self.reference.get() {
            Some(m) => m,
            None => {
                let m = load_candle(&self.path).map_err(|e| format!("candle model: {e}"))?;
                self.reference.get_or_init(|| m)
            }
        };
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(CANDLE_BATCH) {
            pgrx::check_for_interrupts!();
            out.extend(self.embed_candle_chunk(model, chunk).map_err(|e| e.to_string())?);
        }
        Ok(out)
    }

    #[cfg(feature = "candle")]
    fn embed_candle_chunk(&self, model: &BertModel, texts: &[&str]) -> Result<Vec<Vec<f32>>, Box<dyn std::error::Error + Send + Sync>> {
        let encodings = texts
            .iter()
            .map(|t| self.tokenizer.encode(*t, true))
            .collect::<Result<Vec<_>, _>>()?;
        // Pad to the batch's longest, as sentence-transformers does.
        let len = encodings.iter().map(|e| e.get_ids().len()).max().unwrap_or(1).max(1);
        let n = encodings.len();
        let mut ids = vec![0u32; n * len];
        let mut mask = vec![0u32; n * len];
        for (row, enc) in encodings.iter().enumerate() {
            for (col, (&id, &m)) in enc.get_ids().iter().zip(enc.get_attention_mask()).enumerate() {
                ids[row * len + col] = id;
                mask[row * len + col] = m;
            }
        }
        let device = &model.device;
        let input_ids = Tensor::from_vec(ids, (n, len), device)?;
        let attention = Tensor::from_vec(mask, (n, len), device)?;
        let token_types = input_ids.zeros_like()?;
        let hidden = model.forward(&input_ids, &token_types, Some(&attention))?; // (n, len, 384)
        let mask_f = attention.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
        let summed = hidden.broadcast_mul(&mask_f)?.sum(1)?; // (n, 384)
        let counts = mask_f.sum(1)?.clamp(1e-9, f64::MAX)?; // (n, 1)
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        let normalised = mean.broadcast_div(&norm)?;
        Ok(normalised.to_vec2::<f32>()?)
    }
}

#[cfg(feature = "candle")]
fn load_candle(path: &Path) -> Result<BertModel, Box<dyn std::error::Error + Send + Sync>> {
    let config: candle_transformers::models::bert::Config = serde_json::from_str(&std::fs::read_to_string(path.join("config.json"))?)?;
    // candle and gemm size their pools from these; a backend must stay single-threaded.
    for var in ["RAYON_NUM_THREADS", "CANDLE_NUM_THREADS"] {
        if std::env::var_os(var).is_none() {
            std::env::set_var(var, "1");
        }
    }
    // SAFETY: the file is only read; candle keeps its own copy of the tensors it needs.
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[path.join("model.safetensors")], DType::F32, &Device::Cpu) }?;
    Ok(BertModel::load(vb, &config)?)
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::{Engine, Precision};
    use pgrx::prelude::*;

    #[derive(serde::Deserialize)]
    struct Reference {
        text: String,
        vector: Vec<f32>,
    }

    /// The vectors candle made of texts at the edges (reference_vectors.json).
    fn reference() -> Vec<Reference> {
        serde_json::from_str(include_str!("reference_vectors.json")).expect("the reference vectors")
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (norm(a) * norm(b))
    }

    /// The encoder against the vectors candle's BERT made of the same texts (generated with
    /// `dionysus.embedding_engine = 'candle'`, kept in `reference_vectors.json`: no build here
    /// compiles candle), text by text and as one batch of mixed lengths in its order: one
    /// character, unicode, past the 256-token truncation, a question, chat turns.
    #[pg_test]
    fn native_vectors_match_candles_reference() {
        let reference = reference();
        assert!(reference.len() >= 8 && reference.iter().all(|r| r.vector.len() == super::DIMENSIONS));
        let model = super::model(&crate::embed::model_path()).expect("the model is installed");
        let texts: Vec<&str> = reference.iter().map(|r| r.text.as_str()).collect();
        let batch = model.embed_with(Engine::Native, Precision::F32, &texts).unwrap();
        assert_eq!(batch.len(), texts.len());
        for (i, r) in reference.iter().enumerate() {
            let alone = model.embed_with(Engine::Native, Precision::F32, &[r.text.as_str()]).unwrap().pop().unwrap();
            for (how, v) in [("alone", &alone), ("in the batch", &batch[i])] {
                let c = cosine(v, &r.vector);
                assert!(c >= 0.9999, "text {i} ({:.30}) {how}: cosine {c} to candle's", r.text);
            }
        }
    }

    /// Every instruction set this CPU runs (AVX-512, AVX2, portable: CI's machine may take
    /// another than this one's), each against candle's reference vectors, one batch of mixed
    /// lengths: the kernels differ per set, attention's products too.
    #[pg_test]
    fn every_instruction_set_matches_candles_reference() {
        use crate::embed::encoder::Isa;
        let reference = reference();
        let texts: Vec<&str> = reference.iter().map(|r| r.text.as_str()).collect();
        let mut model = super::load(&crate::embed::model_path()).expect("the model is installed");
        let mut ran = 0;
        for isa in [Isa::Avx512, Isa::Avx2, Isa::Portable] {
            if !isa.supported() {
                continue;
            }
            model.encoder.set_isa(isa).unwrap();
            let batch = model.embed_with(Engine::Native, Precision::F32, &texts).unwrap();
            for (i, (v, r)) in batch.iter().zip(&reference).enumerate() {
                let c = cosine(v, &r.vector);
                assert!(c >= 0.9999, "{isa:?}: text {i} ({:.30}): cosine {c} to candle's", r.text);
            }
            ran += 1;
        }
        assert!(ran >= 1, "the portable kernels at least");
    }

    /// The int8 form on every instruction set this CPU runs: near candle's f32 reference (its
    /// vectors are another model's: cosine ≥ 0.98 each, 0.987 the least of 2,760 LoCoMo turns),
    /// alone or in a batch, and the same vectors on every instruction set with FMA (the int8
    /// sums are exact everywhere, the f32 arithmetic around them rounds alike): cosine ≥
    /// 0.99999. The portable kernels round their f32 products unfused, and int8 carries such
    /// a difference on (a value on the edge of two steps takes the other): ≥ 0.995 there.
    #[pg_test]
    fn int8_vectors_are_near_f32_and_the_same_on_every_instruction_set() {
        use crate::embed::encoder::Isa;
        let reference = reference();
        let texts: Vec<&str> = reference.iter().map(|r| r.text.as_str()).collect();
        let mut model = super::load(&crate::embed::model_path()).expect("the model is installed");
        let mut first: Option<(Isa, Vec<Vec<f32>>)> = None;
        for isa in [Isa::Vnni, Isa::Avx512, Isa::Avx2, Isa::Portable] {
            if !isa.supported() {
                continue;
            }
            model.encoder.set_isa(isa).unwrap();
            let batch = model.embed_with(Engine::Native, Precision::Int8, &texts).unwrap();
            for (i, (v, r)) in batch.iter().zip(&reference).enumerate() {
                assert_eq!(v.len(), super::DIMENSIONS);
                let c = cosine(v, &r.vector);
                assert!((0.98..0.99999).contains(&c), "{isa:?}: text {i} ({:.30}): cosine {c} to candle's f32 (int8 is near it, not it)", r.text);
                let alone = model.embed_with(Engine::Native, Precision::Int8, &[r.text.as_str()]).unwrap().pop().unwrap();
                let c = cosine(v, &alone);
                assert!(c >= 0.99999, "{isa:?}: text {i} in a batch and alone: cosine {c}");
            }
            match &first {
                None => first = Some((isa, batch)),
                Some((other, theirs)) => {
                    let least = if isa == Isa::Portable { 0.995 } else { 0.99999 };
                    for (i, (a, b)) in batch.iter().zip(theirs).enumerate() {
                        let c = cosine(a, b);
                        assert!(c >= least, "text {i}: {isa:?} against {other:?}: cosine {c}");
                    }
                }
            }
        }
        assert!(first.is_some(), "the portable kernels at least");
        // The reference engine has no int8 form: asked for one, it says so.
        let refused = model.embed_with(Engine::Candle, Precision::Int8, &texts[..1]).unwrap_err();
        assert!(refused.contains("f32 vectors only"), "{refused}");
    }

    /// The encoder against candle itself (a build with the `candle` feature), text by text, on
    /// texts that reach its edges: no words, one character, unicode, one past the 256-token
    /// truncation; then a batch of mixed lengths (several packed passes) in its order.
    #[cfg(feature = "candle")]
    #[pg_test]
    fn native_vectors_are_candles() {
        let model = super::model(&crate::embed::model_path()).expect("the model is installed");
        let long = "memories of the lake at dawn ".repeat(80);
        let mut texts = vec!["", ".", "x", "Café naïve 日本語 🙂 Ωμέγα — “quoted”", long.as_str()];
        let turns: Vec<String> = (1..=24).map(|i| format!("turn {i}: {}", "we talked about the garden and the rain ".repeat(i % 7 + 1))).collect();
        texts.extend(turns.iter().map(String::as_str));
        let reference: Vec<Vec<f32>> = texts.iter().map(|t| model.embed_with(Engine::Candle, Precision::F32, &[*t]).unwrap().pop().unwrap()).collect();
        let batch = model.embed_with(Engine::Native, Precision::F32, &texts).unwrap();
        assert_eq!(batch.len(), texts.len());
        for (i, t) in texts.iter().enumerate() {
            let alone = model.embed_with(Engine::Native, Precision::F32, &[*t]).unwrap().pop().unwrap();
            for (how, v) in [("alone", &alone), ("in the batch", &batch[i])] {
                assert_eq!(v.len(), super::DIMENSIONS);
                let c = cosine(v, &reference[i]);
                assert!(c >= 0.9999, "text {i} ({:.30}) {how}: cosine {c} to candle's", t);
            }
        }
    }
}
