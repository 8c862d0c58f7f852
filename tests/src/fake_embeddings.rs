//! A local OpenAI-compatible `/v1/embeddings` server whose model is a hashed bag of words of a
//! chosen width: texts sharing words are near, so recall through it is predictable, and its
//! width differs from the local model's (for a re-index to another width).
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub struct FakeEmbeddings {
    /// The URL to set as dionysus.embedding_url.
    pub url: String,
    /// Texts embedded so far.
    pub texts: Arc<AtomicUsize>,
}

/// The model: each lower-cased word adds 1 to its FNV-1a bucket, then the vector is normalised.
pub fn bag_of_words(text: &str, width: usize) -> Vec<f32> {
    let mut v = vec![0f32; width];
    for word in text.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let h = word.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
        v[(h % width as u64) as usize] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        v[0] = 1.0;
        return v;
    }
    v.iter().map(|x| x / norm).collect()
}

impl FakeEmbeddings {
    pub async fn start(width: usize) -> FakeEmbeddings {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/embeddings", listener.local_addr().unwrap());
        let texts = Arc::new(AtomicUsize::new(0));
        let counter = texts.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else { return };
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut req = Vec::new();
                    let mut buf = vec![0u8; 65536];
                    let body = loop {
                        let n = sock.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        req.extend_from_slice(&buf[..n]);
                        let text = String::from_utf8_lossy(&req).to_string();
                        if let Some(h) = text.find("\r\n\r\n") {
                            let len = text[..h]
                                .lines()
                                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                                .unwrap_or(0);
                            if req.len() >= h + 4 + len {
                                break req[h + 4..h + 4 + len].to_vec();
                            }
                        }
                    };
                    let input: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let texts: Vec<String> = match &input["input"] {
                        Value::String(s) => vec![s.clone()],
                        Value::Array(a) => a.iter().map(|t| t.as_str().unwrap_or("").to_string()).collect(),
                        _ => vec![],
                    };
                    counter.fetch_add(texts.len(), Ordering::SeqCst);
                    let data: Vec<Value> =
                        texts.iter().enumerate().map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": bag_of_words(t, width)})).collect();
                    let out = json!({"object": "list", "data": data, "model": input["model"]}).to_string();
                    let resp = format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}", out.len());
                    let _ = sock.write_all(resp.as_bytes()).await;
                });
            }
        });
        FakeEmbeddings { url, texts }
    }
}
