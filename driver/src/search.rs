//! Web search for the inquire actions: a SearXNG-style JSON API
//! (`GET {url}?q=…&format=json` → `{"results": [{"title", "url", "content"}]}`), and page
//! fetching reduced to plain text for inquire_deep.
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

pub async fn search(http: &reqwest::Client, endpoint: &str, query: &str, max: usize) -> Result<Vec<Hit>, String> {
    let resp = http.get(endpoint).query(&[("q", query), ("format", "json")]).send().await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status().as_u16()));
    }
    let v: Value = resp.json().await.map_err(|e| format!("not JSON: {e}"))?;
    let hits = v["results"]
        .as_array()
        .ok_or("no \"results\" array")?
        .iter()
        .filter_map(|r| {
            Some(Hit {
                title: r["title"].as_str().unwrap_or("").to_string(),
                url: r["url"].as_str()?.to_string(),
                snippet: r["content"].as_str().unwrap_or("").chars().take(400).collect(),
            })
        })
        .take(max)
        .collect();
    Ok(hits)
}

pub async fn fetch_text(http: &reqwest::Client, url: &str, max_chars: usize) -> Result<String, String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err("not an http(s) URL".into());
    }
    let resp = http.get(url).send().await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status().as_u16()));
    }
    let body = resp.text().await.map_err(|e| e.to_string())?;
    let body: String = body.chars().take(400_000).collect();
    Ok(html_to_text(&body).chars().take(max_chars).collect())
}

/// Visible text of an HTML page: scripts, styles and tags removed, whitespace collapsed.
pub fn html_to_text(html: &str) -> String {
    let lower = html.to_ascii_lowercase();
    let mut out = String::with_capacity(html.len() / 4);
    let mut i = 0;
    let bytes = html.as_bytes();
    while i < bytes.len() {
        if bytes[i] == b'<' {
            for skip in ["script", "style", "noscript"] {
                if lower[i + 1..].starts_with(skip) {
                    if let Some(end) = lower[i..].find(&format!("</{skip}")) {
                        i += end;
                    }
                }
            }
            match html[i..].find('>') {
                Some(end) => {
                    i += end + 1;
                    out.push(' ');
                }
                None => break,
            }
        } else {
            let next = html[i..].find('<').map(|n| i + n).unwrap_or(html.len());
            out.push_str(&html[i..next]);
            i = next;
        }
    }
    let out = out.replace("&nbsp;", " ").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn html_becomes_visible_text() {
        let html = "<html><head><style>p{}</style><script>var x = '<p>';</script></head><body><p>Hello&nbsp;<b>world</b></p>\n<p>é &amp; more</p></body></html>";
        assert_eq!(super::html_to_text(html), "Hello world é & more");
    }
}
