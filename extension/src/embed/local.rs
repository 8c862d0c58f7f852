//! all-MiniLM-L6-v2 in-process: candle BERT + tokenizers, pure Rust.
//!
//! Matches sentence-transformers: truncation at 256 tokens, mean pooling over the attention
//! mask, then L2 normalisation. Loaded once per backend and kept; one compute thread, so a
//! backend never spins up a pool beside Postgres.
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use tokenizers::{Tokenizer, TruncationParams};

pub const DIMENSIONS: usize = 384;
const MAX_TOKENS: usize = 256;
/// Texts per forward pass: bounds the padded tensor's memory.
const BATCH: usize = 16;

pub struct LocalModel {
    pub path: PathBuf,
    model: BertModel,
    tokenizer: Tokenizer,
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

/// The backend's model, loading it on first use (or when `dionysus.model_path` changed).
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
    // candle and gemm size their pools from these; a backend must stay single-threaded.
    for var in ["RAYON_NUM_THREADS", "CANDLE_NUM_THREADS"] {
        if std::env::var_os(var).is_none() {
            std::env::set_var(var, "1");
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
    let mut tokenizer =
        Tokenizer::from_file(path.join("tokenizer.json")).map_err(|e| broken(format!("tokenizer.json: {e}")))?;
    tokenizer
        .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
        .map_err(|e| broken(format!("tokenizer truncation: {e}")))?;
    tokenizer.with_padding(None);
    // SAFETY: the file is only read; candle keeps its own copy of the tensors it needs.
    let vb = unsafe {
        VarBuilder::from_mmaped_safetensors(&[path.join("model.safetensors")], DType::F32, &Device::Cpu)
    }
    .map_err(|e| broken(format!("model.safetensors: {e}")))?;
    let model = BertModel::load(vb, &config).map_err(|e| broken(format!("model.safetensors: {e}")))?;
    Ok(LocalModel { path: path.to_path_buf(), model, tokenizer })
}

impl LocalModel {
    /// Embeds texts in batches; each result is L2-normalised, 384 long.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            // A cancel, statement_timeout or shutdown is honoured between chunks (a chunk is at
            // most a few hundred milliseconds), not after the whole batch.
            pgrx::check_for_interrupts!();
            out.extend(self.embed_chunk(chunk).map_err(|e| e.to_string())?);
        }
        Ok(out)
    }

    fn embed_chunk(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Box<dyn std::error::Error + Send + Sync>> {
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
        let device = &self.model.device;
        let input_ids = Tensor::from_vec(ids, (n, len), device)?;
        let attention = Tensor::from_vec(mask, (n, len), device)?;
        let token_types = input_ids.zeros_like()?;
        let hidden = self.model.forward(&input_ids, &token_types, Some(&attention))?; // (n, len, 384)
        let mask_f = attention.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
        let summed = hidden.broadcast_mul(&mask_f)?.sum(1)?; // (n, 384)
        let counts = mask_f.sum(1)?.clamp(1e-9, f64::MAX)?; // (n, 1)
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        let normalised = mean.broadcast_div(&norm)?;
        Ok(normalised.to_vec2::<f32>()?)
    }
}
