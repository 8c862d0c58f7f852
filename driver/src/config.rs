//! Configuration from the environment.

pub const DEFAULT_DATABASE_URL: &str = "postgresql://postgres@127.0.0.1:5433/dionysus";

#[derive(Clone, Debug)]
pub struct Config {
    pub database_url: String,
}

impl Config {
    pub fn from_env() -> Config {
        Config {
            database_url: std::env::var("DIONYSUS_DATABASE_URL")
                .ok()
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_string()),
        }
    }
}

/// The URL with any password replaced, for messages and logs.
pub fn redact(url: &str) -> String {
    // URL form: scheme://user:password@host
    if let Some((scheme, rest)) = url.split_once("://") {
        if let Some((auth, host)) = rest.split_once('@') {
            let user = auth.split(':').next().unwrap_or("");
            let masked = if auth.contains(':') { format!("{user}:***") } else { user.to_string() };
            return format!("{scheme}://{masked}@{host}");
        }
        return url.to_string();
    }
    // key=value form
    url.split_whitespace()
        .map(|kv| if kv.to_ascii_lowercase().starts_with("password=") { "password=***".to_string() } else { kv.to_string() })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redact("postgresql://bob:s3cret@db:5432/x"), "postgresql://bob:***@db:5432/x");
        assert_eq!(redact("postgresql://bob@db/x"), "postgresql://bob@db/x");
        assert_eq!(redact("host=db user=bob password=s3cret dbname=x"), "host=db user=bob password=*** dbname=x");
        assert!(!redact("host=db PASSWORD=s3cret").contains("s3cret"));
    }
}
