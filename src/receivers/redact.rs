//! [`Redactor`]: removes a receiver's secrets (webhook URLs, tokens, passwords, and the encoded forms they travel
//! in) from failure reasons before they are logged or stored, since a downstream may echo any of them back in an
//! error body. Every receiver builds its error text through one, and scrubs the whole text before anything cuts it
//! short: a secret cut in half by a length limit would no longer be recognised.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::DeliveryError;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Parts of a webhook URL shorter than this are words (`invoke`, `messages`, `1`), not keys: only the URL's
/// configured whole, its path and its query are secret whatever their length.
const URL_PART_KEY_LEN: usize = 16;

/// The secrets of one receiver, in every form a downstream may echo them back.
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// A configured secret value (a token, a password, a routing key), whatever its length, with its base64 and
    /// percent-encoded forms. Only configured values come here, so even a short one is scrubbed without scrubbing
    /// common words.
    pub fn secret(mut self, s: &str) -> Self {
        self.add(s);
        self
    }

    /// HTTP Basic credentials: the password, and `base64(user:password)` as the `Authorization` header carries it.
    pub fn basic(self, user: &str, password: &str) -> Self {
        self.secret(password).encoded(&format!("{user}:{password}"))
    }

    /// SMTP AUTH: the password, `base64(\0user\0password)` (PLAIN) and `base64(password)` (LOGIN, where the
    /// user name and the password travel as two separate base64 lines).
    pub fn smtp_auth(self, user: &str, password: &str) -> Self {
        self.secret(password)
            .encoded(&format!("\0{user}\0{password}"))
            .encoded(&format!("{user}\0{user}\0{password}"))
    }

    /// A webhook URL: the whole URL, its path and query, credentials in it, and its last path segment and query
    /// values when long enough to be a key.
    pub fn url(mut self, raw: &str) -> Self {
        self.add(raw);
        let Ok(u) = url::Url::parse(raw) else {
            return self;
        };
        if u.path().len() > 1 {
            self.add(u.path());
        }
        if let Some(q) = u.query() {
            self.add(q);
        }
        if let Some(password) = u.password() {
            let user = u.username().to_string();
            let password = password.to_string();
            self = self.basic(&user, &password);
            self = self.basic(&user, &percent_decode(&password));
        }
        if let Some(last) = u.path_segments().and_then(|mut s| s.next_back())
            && last.len() >= URL_PART_KEY_LEN
        {
            self.add(last);
        }
        for (_, v) in u.query_pairs() {
            if v.len() >= URL_PART_KEY_LEN {
                self.add(&v);
            }
        }
        self
    }

    /// Only the credentials of a URL that is not secret otherwise (`https://user:password@alertmanager:9093`):
    /// the password as written and as typed, and the Basic header made from them.
    pub fn url_credentials(mut self, raw: &str) -> Self {
        if let Ok(u) = url::Url::parse(raw)
            && let Some(password) = u.password()
        {
            let user = u.username().to_string();
            let password = password.to_string();
            self = self.secret(&password).basic(&user, &percent_decode(&password));
        }
        self
    }

    /// `raw` and its percent-encoded form (a secret echoed inside a URL), plus its base64 form.
    fn add(&mut self, raw: &str) {
        if raw.is_empty() {
            return;
        }
        self.push(raw.to_string());
        self.push(STANDARD.encode(raw));
        let encoded: String = url::form_urlencoded::byte_serialize(raw.as_bytes()).collect();
        self.push(encoded);
    }

    /// Only the base64 form of `raw` (an encoding of secrets already registered, such as `user:password`).
    fn encoded(mut self, raw: &str) -> Self {
        self.push(STANDARD.encode(raw));
        self
    }

    fn push(&mut self, s: String) {
        if !s.is_empty() && !self.secrets.contains(&s) {
            self.secrets.push(s);
            // Longest first, so a URL is replaced whole rather than leaving its host around a redacted path.
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// `reason` with every secret replaced by [`REDACTED`]. One pass from left to right: a replacement is never
    /// searched again, so a short secret cannot match inside `[redacted]`.
    pub fn scrub(&self, reason: &str) -> String {
        if self.secrets.is_empty() {
            return reason.to_string();
        }
        let mut out = String::with_capacity(reason.len());
        let mut rest = reason;
        'outer: while let Some(c) = rest.chars().next() {
            for s in &self.secrets {
                if rest.starts_with(s.as_str()) {
                    out.push_str(REDACTED);
                    rest = &rest[s.len()..];
                    continue 'outer;
                }
            }
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
        out
    }

    /// The failure with its reason scrubbed; the retry decision is kept.
    pub fn apply(&self, e: DeliveryError) -> DeliveryError {
        e.map_reason(|reason| self.scrub(&reason))
    }
}

/// A URL's password as typed (`p%40ss` is `p@ss`).
fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_configured_secret_is_scrubbed_but_short_url_parts_are_words() {
        let r = Redactor::default()
            .secret("abc")
            .url("https://example.com/workflows/invoke?api-version=1&sig=0123456789abcdefXYZ");

        let scrubbed = r.scrub("token abc rejected by invoke; api-version=1 is fine; sig 0123456789abcdefXYZ");

        assert_eq!(
            scrubbed,
            "token [redacted] rejected by invoke; api-version=1 is fine; sig [redacted]"
        );
    }

    #[test]
    fn encoded_forms_of_credentials_are_scrubbed() {
        let r = Redactor::default()
            .basic("bot@example.com", "jira-token")
            .smtp_auth("herald", "pw");
        let basic = STANDARD.encode("bot@example.com:jira-token");
        let plain = STANDARD.encode("\0herald\0pw");
        let login = STANDARD.encode("pw");
        let text = format!("Authorization: Basic {basic}; AUTH PLAIN {plain}; AUTH LOGIN {login}");

        let scrubbed = r.scrub(&text);

        for secret in [basic.as_str(), plain.as_str(), login.as_str(), "jira-token", "pw"] {
            assert!(!scrubbed.contains(secret), "{secret} in {scrubbed}");
        }
    }

    #[test]
    fn a_url_is_replaced_whole_and_its_credentials_in_every_form() {
        let r = Redactor::default().url("https://hook:p%40ss-w0rd@example.com/hooks/T0001/s3cr3t");
        let basic = STANDARD.encode("hook:p@ss-w0rd");

        let scrubbed = r.scrub(&format!(
            "404 for https://hook:p%40ss-w0rd@example.com/hooks/T0001/s3cr3t (auth {basic}, p@ss-w0rd)"
        ));

        assert_eq!(scrubbed, "404 for [redacted] (auth [redacted], [redacted])");
    }

    #[test]
    fn a_replacement_is_not_searched_again() {
        let r = Redactor::default().secret("d").secret("red");
        assert_eq!(r.scrub("red d"), "[redacted] [redacted]");
    }
}
