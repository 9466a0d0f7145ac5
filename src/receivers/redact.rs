//! [`Redactor`]: removes a receiver's secrets (webhook URLs, tokens, passwords) from failure reasons before they
//! are logged or stored, since a downstream may echo any of them back in an error body.

use super::DeliveryError;

/// Removes secrets from error reasons: a webhook URL carries its secret in the path or the query, and a
/// downstream may echo any of it back in an error body.
#[derive(Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// The whole URL, its path and query, and its last path segment and query values when long enough to be a key
    /// (short ones such as `invoke` or `1` are words, not secrets).
    pub fn url(mut self, raw: &str) -> Self {
        const KEY_LEN: usize = 16;
        self.secrets.push(raw.to_string());
        if let Ok(u) = url::Url::parse(raw) {
            if u.path().len() > 1 {
                self.secrets.push(u.path().to_string());
            }
            if let Some(q) = u.query() {
                self.secrets.push(q.to_string());
            }
            if let Some(last) = u.path_segments().and_then(|mut s| s.next_back())
                && last.len() >= KEY_LEN
            {
                self.secrets.push(last.to_string());
            }
            for (_, v) in u.query_pairs() {
                if v.len() >= KEY_LEN {
                    self.secrets.push(v.into_owned());
                }
            }
        }
        self
    }

    pub fn secret(mut self, s: &str) -> Self {
        self.secrets.push(s.to_string());
        self
    }

    pub fn scrub(&self, reason: &str) -> String {
        let mut out = reason.to_string();
        let mut secrets: Vec<&String> = self.secrets.iter().filter(|s| s.len() >= 6).collect();
        // Longest first, so a URL is replaced whole rather than leaving its host around a redacted path.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        for s in secrets {
            out = out.replace(s.as_str(), "[redacted]");
        }
        out
    }

    pub fn apply(&self, e: DeliveryError) -> DeliveryError {
        e.map_reason(|reason| self.scrub(&reason))
    }
}
