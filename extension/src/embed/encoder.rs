//! The BERT encoder of all-MiniLM-L6-v2, written out: embeddings, 6 layers (attention,
//! feed-forward, layer norms), mean pooling and L2 normalisation, on weights packed once at
//! load and scratch buffers kept between calls. Matrix products go through `gemm` (the crate
//! candle itself uses: runtime AVX2/FMA/AVX-512 dispatch, portable fallback).
//!
//! candle runs the same model op by op, allocating and copying every intermediate tensor; the
//! arithmetic here is the same, so the vectors agree with candle's to cosine ≥ 0.9999 (tested
//! in local.rs), and a store needs no re-index.
//!
//! Texts are packed back to back, never padded: the projections and the feed-forward run over
//! every token of a pass at once, attention over each text's own tokens, so a batch of mixed
//! lengths costs what its tokens cost.
//!
//! No Postgres here: the caller passes its interrupt check, run before every layer.
use gemm::{gemm, Parallelism};
use safetensors::{Dtype, SafeTensors};

pub struct Encoder {
    hidden: usize,
    heads: usize,
    eps: f32,
    /// vocabulary × hidden, max_positions × hidden, and the one token type BERT's sentence
    /// embeddings use (type 0).
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embeddings_norm: Norm,
    layers: Vec<Layer>,
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

/// `y = x·W + b`, W stored input-major (`[inputs][outputs]`, PyTorch's transpose): gemm then
/// reads it in place as a column-major left-hand side, without packing it on every call.
struct Linear {
    w: Vec<f32>,
    b: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct Layer {
    /// Query, key and value in one product: each token's row is `[q | k | v]`.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    up: Linear,
    down: Linear,
    output_norm: Norm,
}

/// Intermediate buffers, grown to the largest pass seen and reused (a pass of 256 tokens
/// holds about 4 MB).
#[derive(Default)]
pub struct Scratch {
    x: Vec<f32>,
    qkv: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    intermediate: Vec<f32>,
    scores: Vec<f32>,
}

/// A safetensors file's tensors by name, as f32.
struct Tensors<'a>(SafeTensors<'a>);

impl Tensors<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let t = self.0.tensor(name).map_err(|e| format!("{name}: {e}"))?;
        if t.dtype() != Dtype::F32 || t.shape() != shape {
            return Err(format!("{name} is {:?} {:?}, expected F32 {shape:?}", t.dtype(), t.shape()));
        }
        Ok(t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }

    fn norm(&self, prefix: &str, hidden: usize) -> Result<Norm, String> {
        Ok(Norm { gamma: self.get(&format!("{prefix}.weight"), &[hidden])?, beta: self.get(&format!("{prefix}.bias"), &[hidden])? })
    }

    /// PyTorch's `Linear` (weight `[outputs][inputs]`), several stacked along the outputs.
    fn linear(&self, prefixes: &[String], inputs: usize, outputs: usize) -> Result<Linear, String> {
        let total = outputs * prefixes.len();
        let mut w = vec![0.0; inputs * total];
        let mut b = Vec::with_capacity(total);
        for (part, prefix) in prefixes.iter().enumerate() {
            let weight = self.get(&format!("{prefix}.weight"), &[outputs, inputs])?;
            for (o, row) in weight.chunks_exact(inputs).enumerate() {
                for (i, &v) in row.iter().enumerate() {
                    w[i * total + part * outputs + o] = v;
                }
            }
            b.extend(self.get(&format!("{prefix}.bias"), &[outputs])?);
        }
        Ok(Linear { w, b, inputs, outputs: total })
    }
}

impl Encoder {
    /// Packs a BERT checkpoint (`model.safetensors`'s bytes, with or without the `bert.`
    /// prefix) with `heads` attention heads and layer norm epsilon `eps`.
    pub fn load(safetensors: &[u8], heads: usize, eps: f64) -> Result<Encoder, String> {
        let st = Tensors(SafeTensors::deserialize(safetensors).map_err(|e| e.to_string())?);
        let root = if st.0.tensor("bert.embeddings.word_embeddings.weight").is_ok() { "bert." } else { "" };
        let word_shape = st.0.tensor(&format!("{root}embeddings.word_embeddings.weight")).map_err(|e| e.to_string())?.shape().to_vec();
        let [vocab, hidden] = word_shape[..] else { return Err(format!("word embeddings are {word_shape:?}")) };
        if heads == 0 || hidden % heads != 0 {
            return Err(format!("{heads} heads do not divide hidden size {hidden}"));
        }
        let max_positions = st.0.tensor(&format!("{root}embeddings.position_embeddings.weight")).map_err(|e| e.to_string())?.shape()[0];
        let intermediate = st.0.tensor(&format!("{root}encoder.layer.0.intermediate.dense.weight")).map_err(|e| e.to_string())?.shape()[0];
        let mut layers = Vec::new();
        while st.0.tensor(&format!("{root}encoder.layer.{}.attention.self.query.weight", layers.len())).is_ok() {
            let p = format!("{root}encoder.layer.{}", layers.len());
            layers.push(Layer {
                qkv: st.linear(&["query", "key", "value"].map(|n| format!("{p}.attention.self.{n}")), hidden, hidden)?,
                attention_out: st.linear(&[format!("{p}.attention.output.dense")], hidden, hidden)?,
                attention_norm: st.norm(&format!("{p}.attention.output.LayerNorm"), hidden)?,
                up: st.linear(&[format!("{p}.intermediate.dense")], hidden, intermediate)?,
                down: st.linear(&[format!("{p}.output.dense")], intermediate, hidden)?,
                output_norm: st.norm(&format!("{p}.output.LayerNorm"), hidden)?,
            });
        }
        if layers.is_empty() {
            return Err("no encoder layers".into());
        }
        let mut token_type = st.get(&format!("{root}embeddings.token_type_embeddings.weight"), &[2, hidden])?;
        token_type.truncate(hidden);
        Ok(Encoder {
            hidden,
            heads,
            eps: eps as f32,
            word: st.get(&format!("{root}embeddings.word_embeddings.weight"), &[vocab, hidden])?,
            position: st.get(&format!("{root}embeddings.position_embeddings.weight"), &[max_positions, hidden])?,
            token_type,
            embeddings_norm: st.norm(&format!("{root}embeddings.LayerNorm"), hidden)?,
            layers,
        })
    }

    /// Sentence embeddings of texts given as token ids (each with its [CLS] and [SEP]), in one
    /// pass: each the mean of its tokens' last hidden states, L2-normalised.
    pub fn embed(&self, texts: &[&[u32]], scratch: &mut Scratch, interrupt: &dyn Fn()) -> Result<Vec<Vec<f32>>, String> {
        let h = self.hidden;
        let vocab = self.word.len() / h;
        let max_positions = self.position.len() / h;
        let tokens: usize = texts.iter().map(|t| t.len()).sum();
        let Scratch { x, qkv, context, projected, intermediate, scores } = scratch;
        x.clear();
        x.reserve(tokens * h);
        for ids in texts {
            if ids.len() > max_positions {
                return Err(format!("{} tokens, the model takes at most {max_positions}", ids.len()));
            }
            for (position, &id) in ids.iter().enumerate() {
                let id = id as usize;
                if id >= vocab {
                    return Err(format!("token id {id} is outside the vocabulary ({vocab})"));
                }
                let (w, p) = (&self.word[id * h..][..h], &self.position[position * h..][..h]);
                x.extend(w.iter().zip(p).zip(&self.token_type).map(|((w, p), t)| w + p + t));
            }
        }
        for row in x.chunks_exact_mut(h) {
            normalise(row, &self.embeddings_norm, self.eps);
        }
        for layer in &self.layers {
            interrupt();
            linear(&layer.qkv, x, tokens, qkv);
            self.attention(texts, qkv, context, scores);
            linear(&layer.attention_out, context, tokens, projected);
            add_normalise(x, projected, &layer.attention_norm, self.eps);
            linear(&layer.up, x, tokens, intermediate);
            intermediate.iter_mut().for_each(|v| *v = gelu(*v));
            linear(&layer.down, intermediate, tokens, projected);
            add_normalise(x, projected, &layer.output_norm, self.eps);
        }
        let mut rows = x.chunks_exact(h);
        Ok(texts
            .iter()
            .map(|ids| {
                let mut mean = vec![0.0f32; h];
                for row in rows.by_ref().take(ids.len()) {
                    mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
                }
                let count = ids.len().max(1) as f32;
                mean.iter_mut().for_each(|m| *m /= count);
                let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
                mean.iter_mut().for_each(|m| *m /= norm);
                mean
            })
            .collect())
    }

    /// Scaled dot-product attention, each text over its own tokens, each head apart:
    /// `context = softmax(q·kᵀ/√d)·v`, heads side by side in `context`'s rows.
    fn attention(&self, texts: &[&[u32]], qkv: &[f32], context: &mut Vec<f32>, scores: &mut Vec<f32>) {
        let (h, d) = (self.hidden, self.hidden / self.heads);
        let stride = 3 * h;
        let scale = 1.0 / (d as f32).sqrt();
        let tokens = qkv.len() / stride;
        context.clear();
        context.resize(tokens * h, 0.0);
        let mut start = 0;
        for ids in texts {
            let n = ids.len();
            scores.clear();
            scores.resize(n * n, 0.0);
            for head in 0..self.heads {
                let q = &qkv[start * stride + head * d..];
                let k = &q[h..];
                let v = &q[2 * h..];
                // SAFETY (both products): every index gemm computes from the sizes and strides
                // stays inside the slices (n rows of `stride` from the text's first token).
                unsafe {
                    gemm(
                        n, n, d,
                        scores.as_mut_ptr(), 1, n as isize, false,
                        q.as_ptr(), 1, stride as isize,
                        k.as_ptr(), stride as isize, 1,
                        0.0, scale, false, false, false, Parallelism::None,
                    );
                }
                for row in scores.chunks_exact_mut(n) {
                    softmax(row);
                }
                unsafe {
                    gemm(
                        n, d, n,
                        context[start * h + head * d..].as_mut_ptr(), 1, h as isize, false,
                        scores.as_ptr(), 1, n as isize,
                        v.as_ptr(), 1, stride as isize,
                        0.0, 1.0, false, false, false, Parallelism::None,
                    );
                }
            }
            start += n;
        }
    }
}

/// `out = input·W + b` over `rows` rows.
fn linear(l: &Linear, input: &[f32], rows: usize, out: &mut Vec<f32>) {
    debug_assert_eq!(input.len(), rows * l.inputs);
    out.clear();
    out.resize(rows * l.outputs, 0.0);
    for row in out.chunks_exact_mut(l.outputs) {
        row.copy_from_slice(&l.b);
    }
    // SAFETY: out is rows × outputs, input rows × inputs, w inputs × outputs, all row-major.
    unsafe {
        gemm(
            rows, l.outputs, l.inputs,
            out.as_mut_ptr(), 1, l.outputs as isize, true,
            input.as_ptr(), 1, l.inputs as isize,
            l.w.as_ptr(), 1, l.outputs as isize,
            1.0, 1.0, false, false, false, Parallelism::None,
        );
    }
}

/// `x = LayerNorm(x + residual)`, row by row.
fn add_normalise(x: &mut [f32], residual: &[f32], norm: &Norm, eps: f32) {
    let h = norm.gamma.len();
    for (row, r) in x.chunks_exact_mut(h).zip(residual.chunks_exact(h)) {
        row.iter_mut().zip(r).for_each(|(v, r)| *v += r);
        normalise(row, norm, eps);
    }
}

fn normalise(row: &mut [f32], norm: &Norm, eps: f32) {
    let n = row.len() as f32;
    let mean = row.iter().sum::<f32>() / n;
    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
        *v = (*v - mean) * inv * g + b;
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = exp(*v - max);
        sum += *v;
    }
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|v| *v *= inv);
}

/// BERT's GELU, `x·Φ(x)` with the exact erf (candle's `gelu_erf`), not the tanh approximation.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf to 1.5e-7 (Abramowitz & Stegun 7.1.26); branch-free so the loops vectorise.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152_1) * t + 1.421_413_8) * t - 0.284_496_72) * t + 0.254_829_6) * t;
    (1.0 - poly * exp(-a * a)).copysign(x)
}

/// e^x to about 1 ulp (Cephes' expf), branch-free so the loops vectorise; inputs below -87
/// give ~1e-38 instead of 0, which nothing here can tell apart.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5·2^23: adding and subtracting it rounds to an integer
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1) * r + 0.5;
    (p * r * r + r + 1.0) * f32::from_bits(((n as i32 + 127) << 23) as u32)
}
