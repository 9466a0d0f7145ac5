//! `server` and `log`: where Herald listens, who may call it and with which scope, and how it logs. Credentials are
//! checked here, at load: an empty or short token, or an empty basic credential, refuses the whole configuration
//! (an empty token once let `Authorization: Bearer` with no token in).

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    pub listen: String,
    pub auth: AuthSettings,
    pub max_body_bytes: usize,
    /// JSON nesting deeper than this is refused before parsing (Application objects nest about 12 deep).
    pub max_json_depth: usize,
    pub workers: Option<usize>,
    /// A body time further ahead of Herald's clock than this is taken as now.
    #[serde(with = "humantime_serde")]
    pub max_clock_skew: std::time::Duration,
    /// The bytes of event bodies read at once, all requests together; beyond it a request waits, then gets 503.
    pub max_inflight_body_bytes: usize,
    /// An event request not received and handled within this is answered 408 (a slow body is not held forever).
    #[serde(with = "humantime_serde")]
    pub body_read_timeout: std::time::Duration,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            auth: AuthSettings::default(),
            max_body_bytes: 4 * 1024 * 1024,
            max_json_depth: 128,
            workers: None,
            max_clock_skew: std::time::Duration::from_secs(300),
            max_inflight_body_bytes: 16 * 1024 * 1024,
            body_read_timeout: std::time::Duration::from_secs(30),
        }
    }
}

/// What a credential may do. `admin` implies the other two; `ingest` and `read` are separate, so the token Argo CD
/// holds cannot read the API, and a dashboard's cannot send events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `POST`/`PUT /v1/argocd/events`.
    Ingest,
    /// `GET` on the API and the status page.
    Read,
    /// Silences and retries, and everything else.
    Admin,
}

impl Scope {
    pub fn allows(self, needed: Scope) -> bool {
        self == Scope::Admin || self == needed
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Read => "read",
            Scope::Admin => "admin",
        }
    }

    fn admin() -> Self {
        Scope::Admin
    }
}

/// Shortest token accepted: a short token can be guessed, and a 2-character one was once accepted.
pub const MIN_TOKEN_CHARS: usize = 16;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthSettings {
    /// Tokens with the `admin` scope, unless an entry says otherwise: the list that existed before scopes, so a
    /// configuration written then keeps every access it had.
    pub bearer_tokens: Vec<TokenEntry>,
    /// Tokens that may only send events (what Argo CD holds).
    pub ingest_tokens: Vec<TokenEntry>,
    /// Tokens that may only read (dashboards, `herald incidents`).
    pub read_tokens: Vec<TokenEntry>,
    pub basic: Vec<BasicCredential>,
    pub allow_anonymous: bool,
}

/// One token: a plain string (its scope is its list's, its name the key path), or `{name, token, scope}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "a token string, or {name, token, scope}")]
pub enum TokenEntry {
    Plain(SecretString),
    Named(NamedToken),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedToken {
    pub name: String,
    pub token: SecretString,
    pub scope: Option<Scope>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicCredential {
    /// Also the credential's name (the `created_by` of the silences it creates).
    pub username: String,
    pub password: SecretString,
    #[serde(default = "Scope::admin")]
    pub scope: Scope,
}

/// A credential as the server checks it: trimmed, named, scoped.
#[derive(Debug, Clone)]
pub struct Credential {
    pub name: String,
    pub scope: Scope,
    pub secret: CredentialSecret,
}

#[derive(Debug, Clone)]
pub enum CredentialSecret {
    Bearer(SecretString),
    Basic { username: String, password: SecretString },
}

impl AuthSettings {
    /// The token lists with the scope of their plain entries, by key name.
    fn token_lists(&self) -> [(&'static str, &[TokenEntry], Scope); 3] {
        [
            ("bearer_tokens", &self.bearer_tokens, Scope::Admin),
            ("ingest_tokens", &self.ingest_tokens, Scope::Ingest),
            ("read_tokens", &self.read_tokens, Scope::Read),
        ]
    }

    /// Every usable credential. An entry that [`AuthSettings::validate`] refuses is left out, so a caller that
    /// skipped validation still cannot let an empty or short secret in.
    pub fn credentials(&self) -> Vec<Credential> {
        let mut out = Vec::new();
        for (key, list, list_scope) in self.token_lists() {
            for (i, entry) in list.iter().enumerate() {
                let (name, token, scope) = match entry {
                    TokenEntry::Plain(t) => (format!("{key}[{i}]"), t, list_scope),
                    TokenEntry::Named(n) => (n.name.trim().to_string(), &n.token, n.scope.unwrap_or(list_scope)),
                };
                let token = token.expose_secret().trim();
                if token.chars().count() >= MIN_TOKEN_CHARS && !name.is_empty() {
                    out.push(Credential {
                        name,
                        scope,
                        secret: CredentialSecret::Bearer(SecretString::from(token.to_string())),
                    });
                }
            }
        }
        for b in &self.basic {
            if basic_problem(b).is_none() {
                out.push(Credential {
                    name: b.username.clone(),
                    scope: b.scope,
                    secret: CredentialSecret::Basic {
                        username: b.username.clone(),
                        password: b.password.clone(),
                    },
                });
            }
        }
        out
    }

    fn validate(&self, errors: &mut Vec<ConfigError>) {
        for (key, list, _) in self.token_lists() {
            for (i, entry) in list.iter().enumerate() {
                let at = format!("server.auth.{key}[{i}]");
                let token = match entry {
                    TokenEntry::Plain(t) => t,
                    TokenEntry::Named(n) => {
                        if n.name.trim().is_empty() {
                            errors.push(invalid(format!("{at}.name"), "must not be empty"));
                        }
                        &n.token
                    }
                };
                // The message says how long the token is, never what it is.
                let len = token.expose_secret().trim().chars().count();
                if len == 0 {
                    errors.push(invalid(at, "empty token: remove the entry, or give a token"));
                } else if len < MIN_TOKEN_CHARS {
                    errors.push(invalid(
                        at,
                        format!(
                            "a token of {len} characters is too short to be secret: use at least {MIN_TOKEN_CHARS} \
                             (e.g. `openssl rand -hex 32`)"
                        ),
                    ));
                }
            }
        }
        for (i, b) in self.basic.iter().enumerate() {
            if let Some((field, problem)) = basic_problem(b) {
                errors.push(invalid(format!("server.auth.basic[{i}].{field}"), problem));
            }
        }
    }
}

/// What is wrong with a basic credential, if anything: the field and why.
fn basic_problem(b: &BasicCredential) -> Option<(&'static str, &'static str)> {
    if b.username.trim().is_empty() {
        Some(("username", "must not be empty"))
    } else if b.username.contains(':') {
        // Basic sends `username:password`: a colon in the name makes the split ambiguous.
        Some(("username", "must not contain `:`"))
    } else if b.password.expose_secret().is_empty() {
        Some(("password", "must not be empty"))
    } else {
        None
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// `tracing` filter, e.g. `info,herald=debug`. `RUST_LOG` wins when set.
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

impl ServerSettings {
    pub(super) fn validate(&self, errors: &mut Vec<ConfigError>) {
        if self.max_inflight_body_bytes < 1024 {
            errors.push(invalid("server.max_inflight_body_bytes", "must be at least 1024"));
        }
        if self.body_read_timeout.is_zero() {
            errors.push(invalid("server.body_read_timeout", "must be greater than 0"));
        }
        if self.max_body_bytes < 1024 {
            errors.push(invalid("server.max_body_bytes", "must be at least 1024"));
        }
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            errors.push(invalid(
                "server.listen",
                format!("{:?} is not an address:port such as 127.0.0.1:8080", self.listen),
            ));
        }
        self.auth.validate(errors);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configuration::Settings;

    fn refused(yaml: &str) -> String {
        Settings::from_yaml(yaml).expect_err(yaml).to_string()
    }

    #[test]
    fn an_empty_or_short_token_refuses_the_configuration_and_names_the_key() {
        let e = refused("server: {auth: {bearer_tokens: ['']}}");
        assert!(e.contains("server.auth.bearer_tokens[0]: empty token"), "{e}");
        let e = refused("server: {auth: {ingest_tokens: [abcdefghijklmnop, '  ab  ']}}");
        assert!(
            e.contains("server.auth.ingest_tokens[1]: a token of 2 characters"),
            "{e}"
        );
        assert!(!e.contains("ab "), "the token itself is not shown: {e}");
        let e = refused("server: {auth: {read_tokens: [{name: '', token: abcdefghijklmnop}]}}");
        assert!(e.contains("server.auth.read_tokens[0].name"), "{e}");
    }

    #[test]
    fn empty_basic_credentials_refuse_the_configuration() {
        let e = refused("server: {auth: {basic: [{username: '', password: ''}]}}");
        assert!(e.contains("server.auth.basic[0].username"), "{e}");
        let e = refused("server: {auth: {basic: [{username: ops, password: ''}]}}");
        assert!(e.contains("server.auth.basic[0].password"), "{e}");
        let e = refused("server: {auth: {basic: [{username: 'a:b', password: c}]}}");
        assert!(e.contains("server.auth.basic[0].username"), "{e}");
    }

    #[test]
    fn each_credential_has_a_name_and_a_scope() {
        let s = Settings::from_yaml(
            "server: {auth: {bearer_tokens: ['  admin-token-0123456  ', {name: ci, token: ci-token-0123456789, scope: read}],
                             ingest_tokens: [argocd-token-0123456],
                             read_tokens: [{name: grafana, token: grafana-token-012345}],
                             basic: [{username: alice, password: pw, scope: read}, {username: root, password: pw}]}}",
        )
        .expect("valid");
        let got: Vec<(String, Scope)> = s
            .server
            .auth
            .credentials()
            .into_iter()
            .map(|c| (c.name, c.scope))
            .collect();
        assert_eq!(
            got,
            [
                ("bearer_tokens[0]".to_string(), Scope::Admin),
                ("ci".to_string(), Scope::Read),
                ("ingest_tokens[0]".to_string(), Scope::Ingest),
                ("grafana".to_string(), Scope::Read),
                ("alice".to_string(), Scope::Read),
                ("root".to_string(), Scope::Admin),
            ]
        );
        let CredentialSecret::Bearer(t) = &s.server.auth.credentials()[0].secret else {
            panic!("a token")
        };
        assert_eq!(t.expose_secret(), "admin-token-0123456", "trimmed");
    }

    #[test]
    fn admin_implies_the_other_scopes_and_the_others_only_themselves() {
        use Scope::*;
        for (has, needs, ok) in [
            (Admin, Ingest, true),
            (Admin, Read, true),
            (Admin, Admin, true),
            (Ingest, Ingest, true),
            (Ingest, Read, false),
            (Ingest, Admin, false),
            (Read, Read, true),
            (Read, Ingest, false),
            (Read, Admin, false),
        ] {
            assert_eq!(has.allows(needs), ok, "{has:?} needs {needs:?}");
        }
    }
}
