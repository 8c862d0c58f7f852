//! OpenAI-compatible `/v1/embeddings` provider (Ollama, OpenAI, vLLM, LM Studio...).
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: Option<usize>,
    embedding: Vec<f32>,
}

pub struct Endpoint<'a> {
    pub url: &'a str,
    pub model: &'a str,
    pub api_key: Option<&'a str>,
    pub timeout: Duration,
}

/// One request for all texts; results come back in input order.
pub fn embed(ep: &Endpoint, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
    if ep.url.is_empty() {
        return Err("dionysus.embedding_url is empty; set it to the provider's /v1/embeddings URL".into());
    }
    let agent = ureq::AgentBuilder::new().timeout(ep.timeout).build();
    let mut req = agent.post(ep.url).set("Content-Type", "application/json");
    if let Some(key) = ep.api_key.filter(|k| !k.is_empty()) {
        req = req.set("Authorization", &format!("Bearer {key}"));
    }
    let body = serde_json::json!({ "model": ep.model, "input": texts });
    let resp = req.send_json(body).map_err(|e| match e {
        // Never echo the request (it may carry the key); the status and body are enough.
        ureq::Error::Status(code, r) => {
            let text = r.into_string().unwrap_or_default();
            format!("embedding endpoint {} answered HTTP {code}: {}", ep.url, text.chars().take(300).collect::<String>())
        }
        ureq::Error::Transport(t) => format!("embedding endpoint {} unreachable: {t}", ep.url),
    })?;
    let parsed: Response =
        resp.into_json().map_err(|e| format!("embedding endpoint {} sent an unreadable answer: {e}", ep.url))?;
    if parsed.data.len() != texts.len() {
        return Err(format!(
            "embedding endpoint {} returned {} embeddings for {} inputs",
            ep.url,
            parsed.data.len(),
            texts.len()
        ));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
    for (pos, item) in parsed.data.into_iter().enumerate() {
        let i = item.index.unwrap_or(pos);
        if i >= out.len() {
            return Err(format!("embedding endpoint {} returned index {i} out of range", ep.url));
        }
        out[i] = Some(item.embedding);
    }
    out.into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| format!("embedding endpoint {} skipped input {i}", ep.url)))
        .collect()
}
