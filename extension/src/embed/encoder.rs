//! The BERT encoder of all-MiniLM-L6-v2, written out: embeddings, 6 layers (attention,
//! feed-forward, layer norms), mean pooling and L2 normalisation, on weights packed once at
//! load and scratch buffers kept between calls.
//!
//! candle runs the same model op by op, allocating and copying every intermediate tensor; the
//! arithmetic here is the same, so the vectors agree with candle's to cosine ≥ 0.9999 (tested
//! in local.rs), and a store needs no re-index.
//!
//! Texts are packed back to back, never padded: the projections and the feed-forward run over
//! every token of a pass at once, attention over each text's own tokens, so a batch of mixed
//! lengths costs what its tokens cost.
//!
//! Where the time goes: a 12-token query is ~0.25 GFLOP over 42 MB of weights, so it is bound
//! by how fast the weights stream through the core. They are packed at load into panels of 16
//! output columns, each panel's rows contiguous (`[panel][input][16]`, 64-byte aligned): a
//! product reads every weight once per pass, front to back, one cache line a row, while a
//! block of up to 12 tokens accumulates in registers. (gemm, which this replaced, read the
//! `[inputs][outputs]` matrix with a 1.5–6 KB stride per input: a page and a TLB miss a step.)
//! The kernels are chosen at run time: AVX-512F, AVX2+FMA, or portable Rust; the rest of the
//! forward (layer norm, GELU, softmax) is the same Rust compiled once per instruction set.
//! Attention's two products (q·kᵀ and p·v, per text and head) run on the same blocked kernels,
//! on K and V packed into panels: done a dot product at a time, they took a fifth of a pass.
//! Loops stay plain `for` loops and sums run in lanes: a closure is compiled without the
//! entry's target features, and a running scalar sum keeps a loop from vectorising (GELU
//! alone went from 1.8 s to 0.6 s of 2,760 chat turns that way).
//!
//! The projections and the feed-forward also run in int8 (`Precision::Int8`, the model's
//! quantised form, a store's model of its own): the same panels as int8, four inputs a lane,
//! against each token row quantised to u8; VNNI sums 64 products an instruction.
//!
//! No Postgres here: the caller passes its interrupt check, run before every layer.
use safetensors::{Dtype, SafeTensors};

/// Output columns of a weight panel: one AVX-512 register, two AVX2 ones, one cache line.
const PANEL: usize = 16;

/// Which kernels run: detected once at load (the postmaster's CPU is its backends').
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 with VNNI: the f32 kernels of Avx512, int8 products 64 multiply-adds an instruction.
    Vnni,
    Avx512,
    Avx2,
    Portable,
}

/// How the projections and the feed-forward multiply (attention, norms and GELU are f32 in
/// both): f32 weights, or int8 weights with a scale per output column against activations
/// quantised per token row to u8 (min and step), summed exactly in i32. int8 vectors are not
/// f32's (cosine 0.987–0.9999 to them, median 0.9987, over 2,760 LoCoMo turns): a store holds
/// one or the other, under its own model key (`local:all-MiniLM-L6-v2:int8`), and moves between
/// them by `dionysus reindex`. Every instruction set computes the same int8 sums; the f32
/// arithmetic around them rounds alike wherever there is FMA (cosine ≥ 0.99999 between them),
/// a little apart in the portable kernels (≥ 0.995). Only VNNI makes int8 fast (about 2.4× f32
/// on 2,760 chat turns); AVX2's exact int8 sums are no faster than its f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    F32,
    Int8,
}

impl Isa {
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            // The AVX-512 entries enable AVX2 and FMA too (the odd panel, the int8 fallback).
            let avx2 = std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
            if avx2 && std::arch::is_x86_feature_detected!("avx512f") {
                if std::arch::is_x86_feature_detected!("avx512bw") && std::arch::is_x86_feature_detected!("avx512vnni") {
                    return Isa::Vnni;
                }
                return Isa::Avx512;
            }
            if avx2 {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }

    /// Whether this CPU can run it.
    #[allow(dead_code)] // with set_isa: the tests run every instruction set this CPU has
    pub fn supported(self) -> bool {
        match self {
            Isa::Portable => true,
            Isa::Avx2 => Isa::detect() != Isa::Portable,
            Isa::Avx512 => matches!(Isa::detect(), Isa::Avx512 | Isa::Vnni),
            Isa::Vnni => Isa::detect() == Isa::Vnni,
        }
    }
}

pub struct Encoder {
    hidden: usize,
    heads: usize,
    eps: f32,
    isa: Isa,
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

/// One row of a panel: 16 weights, a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Row([f32; PANEL]);

/// `y = x·W + b`, W packed in panels of PANEL output columns: `w[p·inputs + i]` holds
/// `W[i][16p..16p+16]`.
///
/// The int8 copy: `q[panel][i/4][lane][i%4]` (inputs padded with zero weights to `padded`, a
/// multiple of 4: four inputs of a column side by side, as VNNI reads them), each column's
/// scale (its largest |w| / 127) and the sum of its int8 weights.
struct Linear {
    w: Vec<Row>,
    b: Vec<f32>,
    inputs: usize,
    outputs: usize,
    padded: usize,
    q: Vec<i8>,
    scale: Vec<f32>,
    colsum: Vec<i32>,
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
    kp: Vec<Row>,
    vp: Vec<Row>,
    quantised: Quantised,
}

/// Token rows quantised for the int8 products: `x[r][i] = round((v − min_r) / step_r)`, rows
/// `padded` wide (the padding meets zero weights).
#[derive(Default)]
struct Quantised {
    x: Vec<u8>,
    step: Vec<f32>,
    min: Vec<f32>,
    /// The portable kernel's row, spread as the weights are laid out.
    spread: std::cell::RefCell<Vec<i16>>,
}

impl Quantised {
    /// The same plain Rust on every instruction set: the rows an int8 product sees never
    /// depend on the CPU.
    #[inline(always)]
    fn rows(&mut self, input: &[f32], rows: usize, inputs: usize, padded: usize) {
        self.x.clear();
        self.x.resize(rows * padded, 0);
        self.step.clear();
        self.min.clear();
        for (r, row) in input[..rows * inputs].chunks_exact(inputs).enumerate() {
            // In 16 lanes, with compares (f32::min and max must also order NaNs: scalar code).
            let (mut lo, mut hi) = ([f32::MAX; 16], [f32::MIN; 16]);
            let chunks = row.chunks_exact(16);
            for &v in chunks.remainder() {
                lo[0] = if v < lo[0] { v } else { lo[0] };
                hi[0] = if v > hi[0] { v } else { hi[0] };
            }
            for c in chunks {
                for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(c) {
                    *l = if v < *l { v } else { *l };
                    *h = if v > *h { v } else { *h };
                }
            }
            let lo = lo.iter().fold(f32::MAX, |m, &v| if v < m { v } else { m });
            let hi = hi.iter().fold(f32::MIN, |m, &v| if v > m { v } else { m });
            let step = ((hi - lo) / 255.0).max(1e-12);
            let inv = 1.0 / step;
            for (q, &v) in self.x[r * padded..][..inputs].iter_mut().zip(row) {
                let y = (v - lo) * inv;
                let y = if y > 0.0 { y } else { 0.0 };
                let y = if y < 255.0 { y } else { 255.0 };
                // SAFETY: y is in [0, 255]: the compares send a NaN (an infinite row makes inv 0,
                // and (v − lo)·0 NaN) to 0, anything above to 255.
                *q = unsafe { ((y + ROUND) - ROUND).to_int_unchecked::<i32>() } as u8;
            }
            self.step.push(step);
            self.min.push(lo);
        }
    }
}

/// An int8 product's output: `y = s_w·(s_x·Σ q_x q_w + min_x·Σ q_w) + b`, with the two fused
/// multiply-adds every kernel uses, so every instruction set rounds alike.
#[inline(always)]
fn dequantised(sum: i32, step: f32, min: f32, colsum: i32, scale: f32, bias: f32) -> f32 {
    (sum as f32).mul_add(step, min * colsum as f32).mul_add(scale, bias)
}

/// A projection in the pass's precision (a function, not a closure: a closure is compiled
/// without the calling entry's target features).
#[inline(always)]
fn project<K: Kernels>(precision: Precision, l: &Linear, input: &[f32], rows: usize, out: &mut [f32], quantised: &mut Quantised) {
    match precision {
        Precision::F32 => K::linear(l, input, rows, out),
        Precision::Int8 => {
            quantised.rows(input, rows, l.inputs, l.padded);
            K::linear_q(l, quantised, rows, out)
        }
    }
}

/// The first `len` values of a scratch buffer, grown when needed (never shrunk, not cleared:
/// every value is written before it is read).
fn grown(v: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if v.len() < len {
        v.resize(len, 0.0);
    }
    &mut v[..len]
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

    /// PyTorch's `Linear` (weight `[outputs][inputs]`), several stacked along the outputs,
    /// packed in panels.
    fn linear(&self, prefixes: &[String], inputs: usize, outputs: usize) -> Result<Linear, String> {
        let total = outputs * prefixes.len();
        if total % PANEL != 0 {
            return Err(format!("{} has {total} outputs, not a multiple of {PANEL}", prefixes[0]));
        }
        let mut w = vec![Row([0.0; PANEL]); total / PANEL * inputs];
        let mut b = Vec::with_capacity(total);
        for (part, prefix) in prefixes.iter().enumerate() {
            let weight = self.get(&format!("{prefix}.weight"), &[outputs, inputs])?;
            for (o, row) in weight.chunks_exact(inputs).enumerate() {
                let column = part * outputs + o;
                let (panel, lane) = (column / PANEL, column % PANEL);
                for (i, &v) in row.iter().enumerate() {
                    w[panel * inputs + i].0[lane] = v;
                }
            }
            b.extend(self.get(&format!("{prefix}.bias"), &[outputs])?);
        }
        // int8, symmetric, a scale per output column.
        let padded = inputs.div_ceil(4) * 4;
        let mut q = vec![0i8; total / PANEL * padded * PANEL];
        let mut scale = vec![0f32; total];
        let mut colsum = vec![0i32; total];
        for c in 0..total {
            let (panel, lane) = (c / PANEL, c % PANEL);
            let column = || (0..inputs).map(|i| w[panel * inputs + i].0[lane]);
            scale[c] = column().fold(0f32, |m, v| m.max(v.abs())).max(1e-12) / 127.0;
            for (i, v) in column().enumerate() {
                let v = (v / scale[c]).round().clamp(-127.0, 127.0) as i8;
                q[(panel * padded + i / 4 * 4) * PANEL + lane * 4 + i % 4] = v;
                colsum[c] += v as i32;
            }
        }
        Ok(Linear { w, b, inputs, outputs: total, padded, q, scale, colsum })
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
        if heads == 0 || hidden % heads != 0 || (hidden / heads) % PANEL != 0 {
            return Err(format!("{heads} heads do not divide hidden size {hidden} into heads of a multiple of {PANEL}"));
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
            isa: Isa::detect(),
            word: st.get(&format!("{root}embeddings.word_embeddings.weight"), &[vocab, hidden])?,
            position: st.get(&format!("{root}embeddings.position_embeddings.weight"), &[max_positions, hidden])?,
            token_type,
            embeddings_norm: st.norm(&format!("{root}embeddings.LayerNorm"), hidden)?,
            layers,
        })
    }

    #[allow(dead_code)]
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Runs other kernels than the detected ones (for benchmarks of the encoder alone: every
    /// path agrees with candle to 1 − cosine ≈ 1e-12); refused when this CPU lacks them.
    #[allow(dead_code)]
    pub fn set_isa(&mut self, isa: Isa) -> Result<(), String> {
        if !isa.supported() {
            return Err(format!("this CPU cannot run {isa:?}"));
        }
        self.isa = isa;
        Ok(())
    }

    /// Sentence embeddings of texts given as token ids (each with its [CLS] and [SEP]), in one
    /// pass: each the mean of its tokens' last hidden states, L2-normalised.
    pub fn embed(&self, texts: &[&[u32]], precision: Precision, scratch: &mut Scratch, interrupt: &dyn Fn()) -> Result<Vec<Vec<f32>>, String> {
        let vocab = self.word.len() / self.hidden;
        let max_positions = self.position.len() / self.hidden;
        for ids in texts {
            if ids.len() > max_positions {
                return Err(format!("{} tokens, the model takes at most {max_positions}", ids.len()));
            }
            if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
                return Err(format!("token id {id} is outside the vocabulary ({vocab})"));
            }
        }
        Ok(match self.isa {
            // SAFETY: isa is only ever what Isa::detect found, or a set_isa this CPU supports.
            #[cfg(target_arch = "x86_64")]
            Isa::Vnni => unsafe { self.forward_vnni(texts, precision, scratch, interrupt) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { self.forward_avx512(texts, precision, scratch, interrupt) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { self.forward_avx2(texts, precision, scratch, interrupt) },
            _ => self.forward::<Portable>(texts, precision, scratch, interrupt),
        })
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    unsafe fn forward_vnni(&self, texts: &[&[u32]], precision: Precision, scratch: &mut Scratch, interrupt: &dyn Fn()) -> Vec<Vec<f32>> {
        self.forward::<x86::Vnni>(texts, precision, scratch, interrupt)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn forward_avx512(&self, texts: &[&[u32]], precision: Precision, scratch: &mut Scratch, interrupt: &dyn Fn()) -> Vec<Vec<f32>> {
        self.forward::<x86::Avx512>(texts, precision, scratch, interrupt)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn forward_avx2(&self, texts: &[&[u32]], precision: Precision, scratch: &mut Scratch, interrupt: &dyn Fn()) -> Vec<Vec<f32>> {
        self.forward::<x86::Avx2>(texts, precision, scratch, interrupt)
    }

    /// The forward pass, inlined into each instruction set's entry above so that its loops
    /// (layer norm, GELU, attention) are vectorised for it too.
    #[inline(always)]
    fn forward<K: Kernels>(&self, texts: &[&[u32]], precision: Precision, scratch: &mut Scratch, interrupt: &dyn Fn()) -> Vec<Vec<f32>> {
        let h = self.hidden;
        let tokens: usize = texts.iter().map(|t| t.len()).sum();
        let Scratch { x, qkv, context, projected, intermediate, scores, kp, vp, quantised } = scratch;
        let x = grown(x, tokens * h);
        let mut rows = x.chunks_exact_mut(h);
        for ids in texts {
            for (position, &id) in ids.iter().enumerate() {
                let row = rows.next().expect("a row per token");
                let (w, p) = (&self.word[id as usize * h..][..h], &self.position[position * h..][..h]);
                for (((r, w), p), t) in row.iter_mut().zip(w).zip(p).zip(&self.token_type) {
                    *r = w + p + t;
                }
                normalise(row, &self.embeddings_norm, self.eps);
            }
        }
        let inter = self.layers[0].up.outputs;
        let qkv = grown(qkv, tokens * 3 * h);
        let context = grown(context, tokens * h);
        let projected = grown(projected, tokens * h);
        let intermediate = grown(intermediate, tokens * inter);
        for layer in &self.layers {
            interrupt();
            project::<K>(precision, &layer.qkv, x, tokens, qkv, quantised);
            self.attention::<K>(texts, qkv, context, scores, kp, vp);
            project::<K>(precision, &layer.attention_out, context, tokens, projected, quantised);
            add_normalise(x, projected, &layer.attention_norm, self.eps);
            project::<K>(precision, &layer.up, x, tokens, intermediate, quantised);
            // A plain loop: a closure here is compiled without the entry's target features.
            for v in intermediate.iter_mut() {
                *v = gelu(*v);
            }
            project::<K>(precision, &layer.down, intermediate, tokens, projected, quantised);
            add_normalise(x, projected, &layer.output_norm, self.eps);
        }
        let mut rows = x.chunks_exact(h);
        texts
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
            .collect()
    }

    /// Scaled dot-product attention, each text over its own tokens, each head apart:
    /// `context = softmax(q·kᵀ/√d)·v`, heads side by side in `context`'s rows. Both products
    /// run on the linear layers' register-blocked kernels: K (scaled) and V are packed into
    /// panels first, O(n·d) against the products' O(n²·d).
    #[inline(always)]
    fn attention<K: Kernels>(&self, texts: &[&[u32]], qkv: &[f32], context: &mut [f32], scores: &mut Vec<f32>, kp: &mut Vec<Row>, vp: &mut Vec<Row>) {
        let (h, d) = (self.hidden, self.hidden / self.heads);
        let stride = 3 * h;
        let scale = 1.0 / (d as f32).sqrt();
        let mut start = 0;
        for ids in texts {
            let n = ids.len();
            if n == 0 {
                continue; // (no tokens: nothing to attend to; another tokenizer might give none)
            }
            let np = n.div_ceil(PANEL) * PANEL;
            let qkv = &qkv[start * stride..][..n * stride];
            let context = &mut context[start * h..][..n * h];
            let scores = grown(scores, n * np);
            kp.resize(np / PANEL * d, Row([0.0; PANEL]));
            vp.resize(d / PANEL * n, Row([0.0; PANEL]));
            for head in 0..self.heads {
                let (q, k, v) = (head * d, h + head * d, 2 * h + head * d);
                for p in 0..np / PANEL {
                    for c in 0..d {
                        let row = &mut kp[p * d + c].0;
                        for (jj, w) in row.iter_mut().enumerate() {
                            let j = p * PANEL + jj;
                            *w = if j < n { qkv[j * stride + k + c] * scale } else { 0.0 };
                        }
                    }
                }
                for p in 0..d / PANEL {
                    for j in 0..n {
                        vp[p * n + j].0.copy_from_slice(&qkv[j * stride + v + p * PANEL..][..PANEL]);
                    }
                }
                K::gemm(&qkv[q..], stride, n, d, kp, np, scores, np);
                for row in scores.chunks_exact_mut(np) {
                    softmax(&mut row[..n]);
                }
                K::gemm(scores, np, n, n, vp, d, &mut context[head * d..], h);
            }
            start += n;
        }
    }
}

/// `out = input·W + b` over `rows` rows (row-major, `inputs` and `outputs` wide).
trait Kernels {
    fn linear(l: &Linear, input: &[f32], rows: usize, out: &mut [f32]);
    /// `out = x·W` for attention: `rows` rows of `k` inputs `xs` apart, W packed in panels
    /// (`w.len() == k · n / PANEL`), `out`'s rows `os` apart.
    #[allow(clippy::too_many_arguments)]
    fn gemm(x: &[f32], xs: usize, rows: usize, k: usize, w: &[Row], n: usize, out: &mut [f32], os: usize);
    /// `out = input·W + b` on the int8 copy, `q` the rows quantised.
    fn linear_q(l: &Linear, q: &Quantised, rows: usize, out: &mut [f32]);
}

/// What every `linear_q` checks before it reads and writes through pointers.
#[inline(always)]
fn linear_q_fits(l: &Linear, q: &Quantised, rows: usize, out: &[f32]) {
    assert!(
        q.x.len() >= rows * l.padded && q.step.len() >= rows && q.min.len() >= rows && out.len() >= rows * l.outputs
            && l.q.len() == l.outputs * l.padded && l.outputs % PANEL == 0
            && l.padded % 4 == 0 && l.padded >= l.inputs
            && l.b.len() >= l.outputs && l.scale.len() >= l.outputs && l.colsum.len() >= l.outputs,
        "an int8 product does not fit its buffers"
    );
}

/// The int8 sums in plain Rust, a token row at a time: the row's inputs laid out as the
/// weights are (each group of four repeated for the 16 columns), so the inner loop is a
/// contiguous i16 multiply-add the compiler vectorises; each column's four partial sums are
/// added at the end.
#[inline(always)]
fn linear_q_portable(l: &Linear, q: &Quantised, rows: usize, out: &mut [f32], spread: &mut Vec<i16>) {
    linear_q_fits(l, q, rows, out);
    let (kp, n) = (l.padded, l.outputs);
    spread.resize(kp * PANEL, 0);
    for r in 0..rows {
        for (x4, to) in q.x[r * kp..][..kp].chunks_exact(4).zip(spread.chunks_exact_mut(4 * PANEL)) {
            for (j, t) in to.iter_mut().enumerate() {
                *t = x4[j % 4] as i16;
            }
        }
        for (panel, w) in l.q.chunks_exact(kp * PANEL).enumerate() {
            let mut acc = [0i32; 4 * PANEL];
            for (x, w) in spread.chunks_exact(4 * PANEL).zip(w.chunks_exact(4 * PANEL)) {
                for ((a, &x), &w) in acc.iter_mut().zip(x).zip(w) {
                    *a += x as i32 * w as i32;
                }
            }
            for (lane, sums) in acc.chunks_exact(4).enumerate() {
                let c = panel * PANEL + lane;
                out[r * n + c] = dequantised(sums.iter().sum(), q.step[r], q.min[r], l.colsum[c], l.scale[c], l.b[c]);
            }
        }
    }
}

/// The bias of attention's products, which have none.
static ZEROS: [f32; 2 * PANEL] = [0.0; 2 * PANEL];

/// What every `gemm` checks before its blocks read and write through pointers.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn gemm_fits(x: &[f32], xs: usize, rows: usize, k: usize, w: &[Row], n: usize, out: &[f32], os: usize) {
    assert!(
        n % PANEL == 0 && w.len() * PANEL == k * n && (rows == 0 || (x.len() >= (rows - 1) * xs + k && out.len() >= (rows - 1) * os + n)),
        "attention's product does not fit its buffers"
    );
}

/// Token rows a register block takes, at most.
macro_rules! by_rows {
    ($t:expr, $f:ident :: <_> $args:tt, $($n:literal)*) => {
        match $t {
            $($n => $f::<$n> $args,)*
            _ => unreachable!(),
        }
    };
}

/// Plain Rust: a panel against up to 4 token rows, the compiler vectorising what it can.
struct Portable;

impl Kernels for Portable {
    #[inline(always)]
    fn linear_q(l: &Linear, q: &Quantised, rows: usize, out: &mut [f32]) {
        linear_q_portable(l, q, rows, out, &mut q.spread.borrow_mut())
    }
    #[inline(always)]
    fn gemm(x: &[f32], xs: usize, rows: usize, k: usize, w: &[Row], n: usize, out: &mut [f32], os: usize) {
        gemm_fits(x, xs, rows, k, w, n, out, os);
        for (panel, w) in w.chunks_exact(k).enumerate() {
            let mut r = 0;
            while r < rows {
                let t = (rows - r).min(4);
                let (x, o) = (&x[r * xs..], &mut out[r * os + panel * PANEL..]);
                by_rows!(t, portable_block::<_>(k, xs, os, x, w, &ZEROS[..PANEL], o), 1 2 3 4);
                r += t;
            }
        }
    }

    #[inline(always)]
    fn linear(l: &Linear, input: &[f32], rows: usize, out: &mut [f32]) {
        let (k, n) = (l.inputs, l.outputs);
        assert!(input.len() >= rows * k && out.len() >= rows * n && l.w.len() * PANEL == k * n);
        for (panel, w) in l.w.chunks_exact(k).enumerate() {
            let bias = &l.b[panel * PANEL..][..PANEL];
            let mut r = 0;
            while r < rows {
                let t = (rows - r).min(4);
                let (x, o) = (&input[r * k..], &mut out[r * n + panel * PANEL..]);
                by_rows!(t, portable_block::<_>(k, k, n, x, w, bias, o), 1 2 3 4);
                r += t;
            }
        }
    }
}

#[inline(always)]
fn portable_block<const T: usize>(k: usize, xs: usize, n: usize, x: &[f32], w: &[Row], bias: &[f32], out: &mut [f32]) {
    debug_assert_eq!(w.len(), k);
    let mut acc = [[0.0f32; PANEL]; T];
    for a in acc.iter_mut() {
        a.copy_from_slice(bias);
    }
    for (i, row) in w.iter().enumerate() {
        for (t, a) in acc.iter_mut().enumerate() {
            let s = x[t * xs + i];
            for (a, w) in a.iter_mut().zip(&row.0) {
                *a += s * w;
            }
        }
    }
    for (t, a) in acc.iter().enumerate() {
        out[t * n..][..PANEL].copy_from_slice(a);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{dequantised, gemm_fits, linear_q_fits, Kernels, Linear, Quantised, Row, PANEL, ZEROS};

    /// int8 products without VNNI (AVX2, or AVX-512 without it), exact: the weights and the
    /// row's four inputs widened to i16, `vpmaddwd` adding their products in pairs into i32
    /// (255·127·2 fits; `vpmaddubsw` on the bytes would saturate and differ from VNNI's sums).
    #[inline(always)]
    fn linear_q256(l: &Linear, q: &Quantised, rows: usize, out: &mut [f32]) {
        linear_q_fits(l, q, rows, out);
        for panel in 0..l.outputs / PANEL {
            one_panel_q256(l, q, rows, out, panel);
        }
    }

    /// One panel against every token row, two rows a block (callers checked linear_q_fits).
    #[inline(always)]
    fn one_panel_q256(l: &Linear, q: &Quantised, rows: usize, out: &mut [f32], panel: usize) {
        let mut r = 0;
        while r < rows {
            let t = (rows - r).min(2);
            // SAFETY: sizes as linear_q_fits asserted; AVX2 in every entry that calls it
            // (forward_avx2, forward_avx512 and forward_vnni).
            unsafe { by_rows!(t, block_q256::<_>(l, q, panel, r, out), 1 2) };
            r += t;
        }
    }

    /// One panel (16 columns) against T token rows from row r.
    #[inline(always)]
    unsafe fn block_q256<const T: usize>(l: &Linear, q: &Quantised, panel: usize, r: usize, out: &mut [f32]) {
        let kp = l.padded;
        let w = l.q.as_ptr().add(panel * kp * PANEL);
        let x = q.x.as_ptr().add(r * kp);
        let z = _mm256_setzero_si256();
        let mut acc = [[z; 4]; T];
        let mut i = 0;
        while i < kp {
            // 64 bytes: four inputs of each of the 16 columns, four columns a register once widened.
            let wp = w.add(i * PANEL);
            let ws = [
                _mm256_cvtepi8_epi16(_mm_loadu_si128(wp.cast())),
                _mm256_cvtepi8_epi16(_mm_loadu_si128(wp.add(16).cast())),
                _mm256_cvtepi8_epi16(_mm_loadu_si128(wp.add(32).cast())),
                _mm256_cvtepi8_epi16(_mm_loadu_si128(wp.add(48).cast())),
            ];
            for (t, a) in acc.iter_mut().enumerate() {
                let x4 = (x.add(t * kp + i) as *const i32).read_unaligned();
                let xs = _mm256_cvtepu8_epi16(_mm_set1_epi32(x4));
                for (a, w) in a.iter_mut().zip(&ws) {
                    *a = _mm256_add_epi32(*a, _mm256_madd_epi16(xs, *w));
                }
            }
            i += 4;
        }
        // Each i32 holds half a column's sum (two of its four inputs a step): column c's halves
        // are at 2c and 2c + 1.
        for (t, a) in acc.iter().enumerate() {
            let mut halves = [0i32; 2 * PANEL];
            for (j, v) in a.iter().enumerate() {
                _mm256_storeu_si256(halves.as_mut_ptr().add(j * 8).cast(), *v);
            }
            let row = r + t;
            for lane in 0..PANEL {
                let c = panel * PANEL + lane;
                let sum = halves[2 * lane] + halves[2 * lane + 1];
                out[row * l.outputs + c] = dequantised(sum, q.step[row], q.min[row], l.colsum[c], l.scale[c], l.b[c]);
            }
        }
    }

    /// AVX-512 with VNNI: Avx512's f32 kernels, and int8 products by `vpdpbusd` (u8 × i8, four
    /// inputs a lane, 64 multiply-adds an instruction), two panels against up to 12 token rows.
    pub struct Vnni;

    impl Kernels for Vnni {
        #[inline(always)]
        fn gemm(x: &[f32], xs: usize, rows: usize, k: usize, w: &[Row], n: usize, out: &mut [f32], os: usize) {
            gemm512(x, xs, rows, k, w, n, out, os)
        }
        #[inline(always)]
        fn linear(l: &Linear, input: &[f32], rows: usize, out: &mut [f32]) {
            <Avx512 as Kernels>::linear(l, input, rows, out)
        }
        #[inline(always)]
        fn linear_q(l: &Linear, q: &Quantised, rows: usize, out: &mut [f32]) {
            linear_q_fits(l, q, rows, out);
            let panels = l.outputs / PANEL;
            let mut panel = 0;
            while panel + 2 <= panels {
                let mut r = 0;
                while r < rows {
                    let t = (rows - r).min(12);
                    // SAFETY: sizes as linear_q_fits asserted; only called from forward_vnni.
                    unsafe { by_rows!(t, block_vnni::<_>(l, q, panel, r, out), 1 2 3 4 5 6 7 8 9 10 11 12) };
                    r += t;
                }
                panel += 2;
            }
            if panel < panels {
                one_panel_q256(l, q, rows, out, panel);
            }
        }
    }

    /// Panels `panel` and `panel + 1` against T token rows from row r.
    #[inline(always)]
    unsafe fn block_vnni<const T: usize>(l: &Linear, q: &Quantised, panel: usize, r: usize, out: &mut [f32]) {
        let kp = l.padded;
        let wa = l.q.as_ptr().add(panel * kp * PANEL);
        let wb = wa.add(kp * PANEL);
        let x = q.x.as_ptr().add(r * kp);
        let z = _mm512_setzero_si512();
        let mut acc = [[z, z]; T];
        let mut i = 0;
        while i < kp {
            _mm_prefetch::<_MM_HINT_T0>(wa.wrapping_add((i + 4 * AHEAD) * PANEL).cast());
            _mm_prefetch::<_MM_HINT_T0>(wb.wrapping_add((i + 4 * AHEAD) * PANEL).cast());
            let (w0, w1) = (_mm512_loadu_si512(wa.add(i * PANEL).cast()), _mm512_loadu_si512(wb.add(i * PANEL).cast()));
            for (t, a) in acc.iter_mut().enumerate() {
                let s = _mm512_set1_epi32((x.add(t * kp + i) as *const i32).read_unaligned());
                a[0] = _mm512_dpbusd_epi32(a[0], s, w0);
                a[1] = _mm512_dpbusd_epi32(a[1], s, w1);
            }
            i += 4;
        }
        let c = panel * PANEL;
        let (s0, s1) = (_mm512_loadu_ps(l.scale.as_ptr().add(c)), _mm512_loadu_ps(l.scale.as_ptr().add(c + PANEL)));
        let (b0, b1) = (_mm512_loadu_ps(l.b.as_ptr().add(c)), _mm512_loadu_ps(l.b.as_ptr().add(c + PANEL)));
        let c0 = _mm512_cvtepi32_ps(_mm512_loadu_si512(l.colsum.as_ptr().add(c).cast()));
        let c1 = _mm512_cvtepi32_ps(_mm512_loadu_si512(l.colsum.as_ptr().add(c + PANEL).cast()));
        for (t, a) in acc.iter().enumerate() {
            let row = r + t;
            let (sx, mx) = (_mm512_set1_ps(q.step[row]), _mm512_set1_ps(q.min[row]));
            // As dequantised(): (sum·step + min·colsum)·scale + bias, two fused multiply-adds.
            let v0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[0]), sx, _mm512_mul_ps(mx, c0));
            let v1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[1]), sx, _mm512_mul_ps(mx, c1));
            let o = out.as_mut_ptr().add(row * l.outputs + c);
            _mm512_storeu_ps(o, _mm512_fmadd_ps(v0, s0, b0));
            _mm512_storeu_ps(o.add(PANEL), _mm512_fmadd_ps(v1, s1, b1));
        }
    }

    /// Attention's products on AVX-512: two panels at a time, an odd last one on AVX2.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn gemm512(x: &[f32], xs: usize, rows: usize, k: usize, w: &[Row], n: usize, out: &mut [f32], os: usize) {
        gemm_fits(x, xs, rows, k, w, n, out, os);
        let panels = n / PANEL;
        let w = w.as_ptr().cast::<f32>();
        let mut panel = 0;
        while panel < panels {
            let two = panel + 2 <= panels;
            let mut r = 0;
            while r < rows {
                let t = (rows - r).min(if two { 12 } else { 6 });
                // SAFETY: t rows from row r (xs apart) of k inputs, one or two panels of k rows
                // from `panel`, t output rows (os apart) of 16 or 32 from column 16·panel: all
                // inside the slices, as gemm_fits asserted. Only called from forward_avx512.
                unsafe {
                    let (xp, wa, o) = (x.as_ptr().add(r * xs), w.add(panel * k * PANEL), out.as_mut_ptr().add(r * os + panel * PANEL));
                    if two {
                        by_rows!(t, block512::<_>(k, xs, os, xp, wa, ZEROS.as_ptr(), o), 1 2 3 4 5 6 7 8 9 10 11 12);
                    } else {
                        by_rows!(t, block256::<_>(k, xs, os, xp, wa, ZEROS.as_ptr(), o), 1 2 3 4 5 6);
                    }
                }
                r += t;
            }
            panel += if two { 2 } else { 1 };
        }
    }

    /// Attention's products on AVX2, a panel at a time.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn gemm256(x: &[f32], xs: usize, rows: usize, k: usize, w: &[Row], n: usize, out: &mut [f32], os: usize) {
        gemm_fits(x, xs, rows, k, w, n, out, os);
        let w = w.as_ptr().cast::<f32>();
        for panel in 0..n / PANEL {
            let mut r = 0;
            while r < rows {
                let t = (rows - r).min(6);
                // SAFETY: as in gemm512, one panel; AVX2 and FMA in forward_avx2 and forward_avx512.
                unsafe {
                    let (xp, wa, o) = (x.as_ptr().add(r * xs), w.add(panel * k * PANEL), out.as_mut_ptr().add(r * os + panel * PANEL));
                    by_rows!(t, block256::<_>(k, xs, os, xp, wa, ZEROS.as_ptr(), o), 1 2 3 4 5 6);
                }
                r += t;
            }
        }
    }
    use std::arch::x86_64::*;

    /// Panel rows (cache lines) a kernel prefetches ahead of the one it reads.
    const AHEAD: usize = 32;

    /// Two panels (two registers of 16) against up to 12 token rows: 24 accumulators.
    pub struct Avx512;
    /// One panel (two registers of 8) against up to 6 token rows: 12 accumulators.
    pub struct Avx2;

    impl Kernels for Avx512 {
        #[inline(always)]
        fn linear_q(l: &Linear, q: &Quantised, rows: usize, out: &mut [f32]) {
            linear_q256(l, q, rows, out)
        }
        #[inline(always)]
        fn gemm(x: &[f32], xs: usize, rows: usize, k: usize, w: &[Row], n: usize, out: &mut [f32], os: usize) {
            gemm512(x, xs, rows, k, w, n, out, os)
        }
        #[inline(always)]
        fn linear(l: &Linear, input: &[f32], rows: usize, out: &mut [f32]) {
            let (k, n) = (l.inputs, l.outputs);
            assert!(input.len() >= rows * k && out.len() >= rows * n && l.w.len() * PANEL == k * n);
            let panels = n / PANEL;
            let w = l.w.as_ptr().cast::<f32>();
            let mut panel = 0;
            while panel + 2 <= panels {
                let mut r = 0;
                while r < rows {
                    let t = (rows - r).min(12);
                    // SAFETY: the block reads t rows of k inputs from row r, panels `panel`
                    // and `panel + 1` (k rows of 16 each), and writes t rows × 32 outputs
                    // from column 16·panel: all inside the slices, as asserted above. Only
                    // called from forward_avx512, so AVX-512F is there.
                    unsafe {
                        let (x, wa, bias, o) = (input.as_ptr().add(r * k), w.add(panel * k * PANEL), l.b.as_ptr().add(panel * PANEL), out.as_mut_ptr().add(r * n + panel * PANEL));
                        by_rows!(t, block512::<_>(k, k, n, x, wa, bias, o), 1 2 3 4 5 6 7 8 9 10 11 12);
                    }
                    r += t;
                }
                panel += 2;
            }
            if panel < panels {
                one_panel_avx2(l, input, rows, out, panel);
            }
        }
    }

    impl Kernels for Avx2 {
        #[inline(always)]
        fn linear_q(l: &Linear, q: &Quantised, rows: usize, out: &mut [f32]) {
            linear_q256(l, q, rows, out)
        }
        #[inline(always)]
        fn gemm(x: &[f32], xs: usize, rows: usize, k: usize, w: &[Row], n: usize, out: &mut [f32], os: usize) {
            gemm256(x, xs, rows, k, w, n, out, os)
        }
        #[inline(always)]
        fn linear(l: &Linear, input: &[f32], rows: usize, out: &mut [f32]) {
            let (k, n) = (l.inputs, l.outputs);
            assert!(input.len() >= rows * k && out.len() >= rows * n && l.w.len() * PANEL == k * n);
            for panel in 0..n / PANEL {
                one_panel_avx2(l, input, rows, out, panel);
            }
        }
    }

    #[inline(always)]
    fn one_panel_avx2(l: &Linear, input: &[f32], rows: usize, out: &mut [f32], panel: usize) {
        let (k, n) = (l.inputs, l.outputs);
        let w = l.w.as_ptr().cast::<f32>();
        let mut r = 0;
        while r < rows {
            let t = (rows - r).min(6);
            // SAFETY: as in Avx512::linear, one panel of 16 outputs; the callers checked the
            // sizes, and run inside forward_avx2 or forward_avx512 (AVX2 and FMA there).
            unsafe {
                let (x, wa, bias, o) = (input.as_ptr().add(r * k), w.add(panel * k * PANEL), l.b.as_ptr().add(panel * PANEL), out.as_mut_ptr().add(r * n + panel * PANEL));
                by_rows!(t, block256::<_>(k, k, n, x, wa, bias, o), 1 2 3 4 5 6);
            }
            r += t;
        }
    }

    /// `out[t][0..32] = bias + Σ_i x[t][i]·(panel a | panel b)[i]` for T token rows.
    #[inline(always)]
    unsafe fn block512<const T: usize>(k: usize, xs: usize, n: usize, x: *const f32, wa: *const f32, bias: *const f32, out: *mut f32) {
        let wb = wa.add(k * PANEL);
        let (b0, b1) = (_mm512_loadu_ps(bias), _mm512_loadu_ps(bias.add(PANEL)));
        let mut acc = [[b0, b1]; T];
        for i in 0..k {
            // The weights stream from memory: ask for them a little ahead (past a panel's
            // end this touches the next panel's rows, or nothing: a prefetch never faults).
            _mm_prefetch::<_MM_HINT_T0>(wa.wrapping_add((i + AHEAD) * PANEL).cast());
            _mm_prefetch::<_MM_HINT_T0>(wb.wrapping_add((i + AHEAD) * PANEL).cast());
            let (w0, w1) = (_mm512_load_ps(wa.add(i * PANEL)), _mm512_load_ps(wb.add(i * PANEL)));
            for (t, a) in acc.iter_mut().enumerate() {
                let s = _mm512_set1_ps(*x.add(t * xs + i));
                a[0] = _mm512_fmadd_ps(s, w0, a[0]);
                a[1] = _mm512_fmadd_ps(s, w1, a[1]);
            }
        }
        for (t, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.add(t * n), a[0]);
            _mm512_storeu_ps(out.add(t * n + PANEL), a[1]);
        }
    }

    /// `out[t][0..16] = bias + Σ_i x[t][i]·panel[i]` for T token rows.
    #[inline(always)]
    unsafe fn block256<const T: usize>(k: usize, xs: usize, n: usize, x: *const f32, w: *const f32, bias: *const f32, out: *mut f32) {
        let (b0, b1) = (_mm256_loadu_ps(bias), _mm256_loadu_ps(bias.add(8)));
        let mut acc = [[b0, b1]; T];
        for i in 0..k {
            _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add((i + AHEAD) * PANEL).cast());
            let (w0, w1) = (_mm256_load_ps(w.add(i * PANEL)), _mm256_load_ps(w.add(i * PANEL + 8)));
            for (t, a) in acc.iter_mut().enumerate() {
                let s = _mm256_broadcast_ss(&*x.add(t * xs + i));
                a[0] = _mm256_fmadd_ps(s, w0, a[0]);
                a[1] = _mm256_fmadd_ps(s, w1, a[1]);
            }
        }
        for (t, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.add(t * n), a[0]);
            _mm256_storeu_ps(out.add(t * n + 8), a[1]);
        }
    }
}

/// A sum in 16 lanes (so it vectorises; f32 addition is not reassociated otherwise).
#[inline(always)]
fn lanes_sum(v: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; 16];
    let chunks = v.chunks_exact(16);
    let rest: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += f(x);
        }
    }
    acc.iter().sum::<f32>() + rest
}

/// `x = LayerNorm(x + residual)`, row by row.
#[inline(always)]
fn add_normalise(x: &mut [f32], residual: &[f32], norm: &Norm, eps: f32) {
    let h = norm.gamma.len();
    for (row, r) in x.chunks_exact_mut(h).zip(residual.chunks_exact(h)) {
        for (v, r) in row.iter_mut().zip(r) {
            *v += r;
        }
        normalise(row, norm, eps);
    }
}

#[inline(always)]
fn normalise(row: &mut [f32], norm: &Norm, eps: f32) {
    let n = row.len() as f32;
    let mean = lanes_sum(row, |v| v) / n;
    let var = lanes_sum(row, |v| (v - mean) * (v - mean)) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
        *v = (*v - mean) * inv * g + b;
    }
}

#[inline(always)]
fn softmax(row: &mut [f32]) {
    // In lanes, each pass apart: a running sum or max in one scalar would keep the loop from
    // vectorising (f32 arithmetic is not reassociated).
    let mut lanes = [f32::NEG_INFINITY; 16];
    let chunks = row.chunks_exact(16);
    let mut max = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for c in chunks {
        for (m, &x) in lanes.iter_mut().zip(c) {
            *m = if x > *m { x } else { *m };
        }
    }
    max = lanes.iter().copied().fold(max, f32::max);
    for v in row.iter_mut() {
        *v = exp(*v - max);
    }
    let inv = 1.0 / lanes_sum(row, |v| v);
    for v in row.iter_mut() {
        *v *= inv;
    }
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
    // Compares, not f32::clamp: a NaN (an overflowed score from a broken model file) becomes
    // -87 here, so the conversion below is always in range.
    let x = if x > -87.0 { x } else { -87.0 };
    let x = if x < 88.0 { x } else { 88.0 };
    let n = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1) * r + 0.5;
    // SAFETY: n is an integer in [-126, 127] (x was clamped, NaN included). (`as i32` saturates, a compare and
    // select more per value that kept GELU from vectorising as well.)
    (p * r * r + r + 1.0) * f32::from_bits(((unsafe { n.to_int_unchecked::<i32>() } + 127) << 23) as u32)
}

/// 1.5·2^23: adding and subtracting it rounds an f32 below 2^22 to the nearest integer (ties
/// to even), in one vectorisable add each way.
const ROUND: f32 = 12_582_912.0;
