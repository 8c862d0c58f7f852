//! Web search for the inquire actions: a SearXNG-style JSON API
//! (`GET {url}?q=…&format=json` → `{"results": [{"title", "url", "content"}]}`), and page
//! fetching reduced to plain text for inquire_deep.
use crate::web::{self, Web};
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// Asks the operator's search endpoint (trusted: it may be a local SearXNG). The hits it returns
/// are untrusted: their URLs go through [`Web::fetch_untrusted`], their text into a fence.
pub async fn search(web: &Web, endpoint: &str, query: &str, max: usize) -> Result<Vec<Hit>, String> {
    let resp = web.trusted().get(endpoint).query(&[("q", query), ("format", "json")]).send().await.map_err(|e| web::describe(&e))?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status().as_u16()));
    }
    web::accepted_type(&resp, web::SEARCH_TYPES)?;
    let body = web::read_capped(resp, web::PAGE_CAP).await?;
    let v: Value = serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))?;
    let hits = v
        .get("results")
        .and_then(Value::as_array)
        .ok_or("no \"results\" array")?
        .iter()
        .filter_map(|r| {
            // An untrusted answer: a field that is not a string is taken as absent.
            let field = |key: &str| r.get(key).and_then(Value::as_str);
            Some(Hit {
                title: field("title").unwrap_or("").chars().take(200).collect(),
                url: field("url")?.to_string(),
                snippet: field("content").unwrap_or("").chars().take(400).collect(),
            })
        })
        .take(max)
        .collect();
    Ok(hits)
}

/// The visible text of an untrusted page, at most `max_chars`.
pub async fn fetch_text(web: &Web, url: &str, max_chars: usize) -> Result<String, String> {
    let page = web.fetch_untrusted(url, web::PAGE_CAP, web::PAGE_TYPES).await?;
    let body = String::from_utf8_lossy(&page.body);
    let text = if page.content_type == "text/plain" { body.split_whitespace().collect::<Vec<_>>().join(" ") } else { html_to_text(&body) };
    Ok(text.chars().take(max_chars).collect())
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
