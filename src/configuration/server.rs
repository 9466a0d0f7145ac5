//! `server` and `log`: where Herald listens, under which host names, who may call it and with which scope, and how
//! it logs. Credentials are checked here, at load: an empty or short token or password, an empty basic username, or
//! any credential with a control character (a newline) refuses the whole configuration (an empty token once let
//! `Authorization: Bearer` with no token in).

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::{ConfigError, FromSetting, Parsed, invalid};

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
    #[serde(with = "crate::configuration::duration")]
    pub max_clock_skew: std::time::Duration,
    /// The bytes of event bodies read at once, all requests together; beyond it a request waits, then gets 503.
    pub max_inflight_body_bytes: usize,
    /// An event request not received and handled within this is answered 408 (a slow body is not held forever).
    #[serde(with = "crate::configuration::duration")]
    pub body_read_timeout: std::time::Duration,
    /// The `Host` names requests may carry (`name` or `name:port`; `*` for any); unset: see [`ServerSettings::hosts`].
    pub allowed_hosts: Option<Vec<String>>,
    /// Where people reach Herald (`https://herald.example.com`): when set, a message whose list was cut links to
    /// the status page filtered to its team; unset, the cut only says how many rows are left out.
    pub public_url: Option<Parsed<url::Url>>,
    /// Signs the one-click links in messages (HMAC-SHA256; at least 32 characters; or `link_signing_key_file`).
    /// With `public_url`, every chat and e-mail message carries signed links; without either, none.
    pub link_signing_key: Option<SecretString>,
    /// How long a one-click link works.
    #[serde(with = "crate::configuration::duration")]
    pub link_ttl: std::time::Duration,
    /// The time zone the pages show times in unless `?tz=` asks for another (an IANA name; default UTC).
    pub time_zone: Parsed<chrono_tz::Tz>,
    /// Who may read `/metrics`, and whether it names teams.
    pub metrics: MetricsSettings,
}

/// `server.metrics`: `/metrics` is open by default (Prometheus scrapes it without credentials, and it says nothing an
/// Application's manifests do not); `auth: true` asks for a credential with the `read` scope, as the API does.
/// `team_labels: false` drops the `team` label (open incidents are then counted by state and kind only), for a
/// Herald whose team names are not for everyone who can scrape it.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSettings {
    pub auth: bool,
    pub team_labels: bool,
}

impl Default for MetricsSettings {
    fn default() -> Self {
        Self {
            auth: false,
            team_labels: true,
        }
    }
}

/// The shortest `server.link_signing_key`: a link signed with a short key can be forged by guessing the key.
pub const MIN_LINK_KEY_CHARS: usize = 32;

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
            allowed_hosts: None,
            public_url: None,
            link_signing_key: None,
            link_ttl: std::time::Duration::from_secs(7 * 24 * 3600),
            time_zone: Parsed::utc(),
            metrics: MetricsSettings::default(),
        }
    }
}

/// What a credential may do. `admin` implies the others; `respond` (acknowledge and unacknowledge incidents, for
/// the people on call) implies `read`; `ingest` and `read` are separate, so the token Argo CD holds cannot read the
/// API, and a dashboard's cannot send events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `POST`/`PUT /v1/argocd/events`.
    Ingest,
    /// `GET` on the API and the status page.
    Read,
    /// `POST /v1/incidents/{id}/ack` and `/unack`, and everything `read` allows: taking an incident is what the
    /// person on call does, without the power to silence whole teams or retry deliveries.
    Respond,
    /// Silences and retries, and everything else.
    Admin,
}

impl Scope {
    pub fn allows(self, needed: Scope) -> bool {
        self == Scope::Admin || self == needed || (self == Scope::Respond && needed == Scope::Read)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Read => "read",
            Scope::Respond => "respond",
            Scope::Admin => "admin",
        }
    }

    fn read() -> Self {
        Scope::Read
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
    /// A reload (SIGHUP) may remove every credential only when the new file says this (see `crate::reload`).
    pub allow_reload_to_lower: bool,
    /// People signed in by an authenticating proxy in front (oauth2-proxy, an ingress with SSO): see
    /// [`super::proxy`].
    pub proxy: Option<super::ProxySettings>,
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
    /// The Argo CD instance (`argocd.instances[].name`, or `default`) whose bodies this ingest token sends: the
    /// natural setup with several Argo CDs, one Secret each.
    pub instance: Option<String>,
    /// The teams whose incidents this credential acts on (acknowledge; with `admin`, silence); unset: every team.
    pub teams: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicCredential {
    /// Also the credential's name (the `created_by` of the silences it creates).
    pub username: String,
    pub password: SecretString,
    /// `read` unless given: a forgotten scope must not give everything (it once meant `admin`).
    #[serde(default = "Scope::read")]
    pub scope: Scope,
    /// The teams whose incidents this user acts on; unset: every team.
    pub teams: Option<Vec<String>>,
}

/// A credential as the server checks it: trimmed, named, scoped.
#[derive(Debug, Clone)]
pub struct Credential {
    pub name: String,
    pub scope: Scope,
    pub secret: CredentialSecret,
    /// The Argo CD instance an ingest token speaks for.
    pub instance: Option<String>,
    /// The teams whose incidents it acts on.
    pub teams: Teams,
}

/// The teams whose incidents and Applications a credential acts on (acknowledges; with `admin`, silences): every
/// team (no `teams:` key, as before teams existed), or only those named. Reading is not limited by team.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Teams {
    #[default]
    All,
    Only(Vec<String>),
}

impl Teams {
    /// `teams:` as configured (unset: every team).
    pub fn of(list: Option<&Vec<String>>) -> Self {
        match list {
            None => Teams::All,
            Some(l) => Teams::Only(l.iter().map(|t| t.trim().to_string()).collect()),
        }
    }

    /// Whether an incident or Application of `team` is within these teams.
    pub fn allows(&self, team: &str) -> bool {
        match self {
            Teams::All => true,
            Teams::Only(l) => l.iter().any(|t| t == team),
        }
    }

    /// The union of two (every team when either is).
    pub fn union(self, other: &Teams) -> Teams {
        match (self, other) {
            (Teams::Only(mut a), Teams::Only(b)) => {
                for t in b {
                    if !a.contains(t) {
                        a.push(t.clone());
                    }
                }
                Teams::Only(a)
            }
            _ => Teams::All,
        }
    }

    /// The team names, or `None` for every team.
    pub fn names(&self) -> Option<&[String]> {
        match self {
            Teams::All => None,
            Teams::Only(l) => Some(l.as_slice()),
        }
    }

    /// In words, for an error message: `every team`, `the team payments`, `the teams payments, search`.
    pub fn words(&self) -> String {
        match self {
            Teams::All => "every team".into(),
            Teams::Only(l) if l.len() == 1 => format!("the team {}", l[0]),
            Teams::Only(l) => format!("the teams {}", l.join(", ")),
        }
    }
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
                let (name, token, scope, instance, teams) = match entry {
                    TokenEntry::Plain(t) => (format!("{key}[{i}]"), t, list_scope, None, Teams::All),
                    TokenEntry::Named(n) => (
                        n.name.trim().to_string(),
                        &n.token,
                        n.scope.unwrap_or(list_scope),
                        n.instance.clone(),
                        Teams::of(n.teams.as_ref()),
                    ),
                };
                let token = token.expose_secret().trim();
                if token.chars().count() >= MIN_TOKEN_CHARS && !name.is_empty() && !has_control(token) {
                    out.push(Credential {
                        name,
                        scope,
                        secret: CredentialSecret::Bearer(SecretString::from(token.to_string())),
                        instance,
                        teams,
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
                    instance: None,
                    teams: Teams::of(b.teams.as_ref()),
                });
            }
        }
        out
    }

    fn validate(&self, errors: &mut Vec<ConfigError>) {
        for (key, list, list_scope) in self.token_lists() {
            for (i, entry) in list.iter().enumerate() {
                let at = format!("server.auth.{key}[{i}]");
                let token = match entry {
                    TokenEntry::Plain(t) => t,
                    TokenEntry::Named(n) => {
                        if n.instance.is_some() && n.scope.unwrap_or(list_scope) != Scope::Ingest {
                            errors.push(invalid(
                                format!("{at}.instance"),
                                "only an ingest token speaks for an Argo CD instance (put it under ingest_tokens, or \
                                 give it scope: ingest)",
                            ));
                        }
                        if n.name.trim().is_empty() {
                            errors.push(invalid(format!("{at}.name"), "must not be empty"));
                        } else if has_control(&n.name) {
                            errors.push(invalid(
                                format!("{at}.name"),
                                "must not contain a control character (a newline, a tab…)",
                            ));
                        }
                        &n.token
                    }
                };
                if let Some(problem) = secret_problem("token", token.expose_secret().trim()) {
                    errors.push(invalid(at, problem));
                }
            }
        }
        for (i, b) in self.basic.iter().enumerate() {
            if let Some((field, problem)) = basic_problem(b) {
                errors.push(invalid(format!("server.auth.basic[{i}].{field}"), problem));
            }
        }
        if let Some(p) = &self.proxy {
            p.validate(errors);
        }
    }
}

impl AuthSettings {
    /// Whether requests need a credential: some credential is configured, or an authenticating proxy.
    pub fn has_authentication(&self) -> bool {
        !self.credentials().is_empty() || self.proxy.is_some()
    }

    /// The `teams:` of every credential (and proxy group) name teams Herald knows (`known`: a key of `teams:` or
    /// `ownership.default_team`), and only credentials that act on incidents (`respond`, `admin`) carry them.
    pub(super) fn validate_teams(&self, known: &dyn Fn(&str) -> bool, known_list: &str, errors: &mut Vec<ConfigError>) {
        let mut each = |at: String, scope: Scope, teams: Option<&Vec<String>>| {
            validate_team_list(&at, scope, teams, known, known_list, errors)
        };
        for (key, list, list_scope) in self.token_lists() {
            for (i, entry) in list.iter().enumerate() {
                if let TokenEntry::Named(n) = entry {
                    each(
                        format!("server.auth.{key}[{i}]"),
                        n.scope.unwrap_or(list_scope),
                        n.teams.as_ref(),
                    );
                }
            }
        }
        for (i, b) in self.basic.iter().enumerate() {
            each(format!("server.auth.basic[{i}]"), b.scope, b.teams.as_ref());
        }
        if let Some(p) = &self.proxy {
            for (name, g) in &p.groups {
                each(format!("server.auth.proxy.groups.{name}"), g.scope, g.teams.as_ref());
            }
        }
    }
}

/// One credential's `teams:` at `at`: not empty, known team names, on a scope that acts on incidents.
fn validate_team_list(
    at: &str,
    scope: Scope,
    teams: Option<&Vec<String>>,
    known: &dyn Fn(&str) -> bool,
    known_list: &str,
    errors: &mut Vec<ConfigError>,
) {
    let Some(teams) = teams else { return };
    if !matches!(scope, Scope::Respond | Scope::Admin) {
        errors.push(invalid(
            format!("{at}.teams"),
            format!(
                "teams limit what a credential acts on (acknowledge, silence), and the {} scope acts on no \
                 incident (reading is not limited by team): remove teams, or give it scope respond or admin",
                scope.as_str()
            ),
        ));
        return;
    }
    if teams.is_empty() {
        errors.push(invalid(
            format!("{at}.teams"),
            "an empty list would act on no team: name at least one, or leave teams out to act on every team",
        ));
    }
    for (j, t) in teams.iter().enumerate() {
        let t = t.trim();
        if t.is_empty() || has_control(t) {
            errors.push(invalid(format!("{at}.teams[{j}]"), "must be a team name"));
        } else if !known(t) {
            errors.push(invalid(
                format!("{at}.teams[{j}]"),
                format!("{t:?} is not a team Herald knows ({known_list})"),
            ));
        }
    }
}

/// What is wrong with a secret (a token or a password), if anything. The message says how long it is, never what it
/// is.
fn secret_problem(what: &str, secret: &str) -> Option<String> {
    let len = secret.chars().count();
    if len == 0 {
        Some(format!("empty {what}: remove the entry, or give a {what}"))
    } else if has_control(secret) {
        // A newline in a secret is a copy-paste accident (or a forged header line), never a credential.
        Some(format!(
            "the {what} contains a control character (a newline, a tab…): remove it"
        ))
    } else if len < MIN_TOKEN_CHARS {
        Some(format!(
            "a {what} of {len} characters is too short to be secret: use at least {MIN_TOKEN_CHARS} \
             (e.g. `openssl rand -hex 32`)"
        ))
    } else {
        None
    }
}

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// What is wrong with a basic credential, if anything: the field and why.
fn basic_problem(b: &BasicCredential) -> Option<(&'static str, String)> {
    if b.username.trim().is_empty() {
        Some(("username", "must not be empty".into()))
    } else if b.username.contains(':') {
        // Basic sends `username:password`: a colon in the name makes the split ambiguous.
        Some(("username", "must not contain `:`".into()))
    } else if has_control(&b.username) {
        Some((
            "username",
            "must not contain a control character (a newline, a tab…)".into(),
        ))
    } else {
        secret_problem("password", b.password.expose_secret()).map(|p| ("password", p))
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

/// `server.public_url`: an http(s) URL with a host and without query or fragment (where people reach Herald).
impl FromSetting for url::Url {
    fn from_setting(text: &str) -> Result<Self, String> {
        match url::Url::parse(text) {
            Ok(p)
                if matches!(p.scheme(), "http" | "https")
                    && p.host().is_some()
                    && p.query().is_none()
                    && p.fragment().is_none() =>
            {
                Ok(p)
            }
            _ => Err(format!(
                "{} is not an http(s) URL without query, such as https://herald.example.com",
                super::shown_url(text)
            )),
        }
    }
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
        for (i, h) in self.allowed_hosts.iter().flatten().enumerate() {
            if h.trim() != "*" && HostName::parse(h).is_none() {
                errors.push(invalid(
                    format!("server.allowed_hosts[{i}]"),
                    format!(
                        "{h:?} is not a host name, `name:port` or `*` (e.g. herald.example.com, localhost:8080, [::1])"
                    ),
                ));
            }
        }
        if let Some(k) = &self.link_signing_key
            && k.expose_secret().trim().chars().count() < MIN_LINK_KEY_CHARS
        {
            errors.push(invalid(
                "server.link_signing_key",
                format!("must be at least {MIN_LINK_KEY_CHARS} characters (`openssl rand -hex 32`)"),
            ));
        }
        if self.link_ttl.is_zero() {
            errors.push(invalid("server.link_ttl", "must be greater than 0"));
        }
        self.auth.validate(errors);
        let readers = self.auth.credentials().iter().any(|c| c.scope.allows(Scope::Read));
        if self.metrics.auth && !readers {
            errors.push(invalid(
                "server.metrics.auth",
                "asks for a credential with the read scope on /metrics, but server.auth has none (read_tokens, \
                 bearer_tokens or basic): add the token Prometheus will send, or leave /metrics open",
            ));
        }
    }

    /// Where one-click links point and the key that signs them, when both are set: messages carry links only then.
    pub fn links(&self) -> Option<(&str, &[u8])> {
        let url = self.public_url.as_deref()?;
        let key = self.link_signing_key.as_ref()?;
        Some((url.trim_end_matches('/'), key.expose_secret().trim().as_bytes()))
    }

    /// The pages' time zone (`time_zone`, parsed at load).
    pub fn zone(&self) -> chrono_tz::Tz {
        self.time_zone.tz()
    }

    /// [`ServerSettings::zone`] as people read times in it (pages, link pages, `herald route`).
    pub fn reader_zone(&self) -> crate::domain::Zone {
        crate::domain::Zone(self.zone())
    }

    /// Why messages carry no one-click links, when they do not (for `herald check-config`).
    pub fn links_missing(&self) -> Option<&'static str> {
        match (&self.public_url, &self.link_signing_key) {
            (Some(_), Some(_)) => None,
            (None, Some(_)) => Some(
                "server.link_signing_key is set but server.public_url is not: messages carry no one-click links \
                 (Acknowledge, Silence 1 h, …) until Herald knows the URL people reach it at",
            ),
            (Some(_), None) => Some(
                "server.public_url is set but server.link_signing_key is not: messages carry no one-click links \
                 (Acknowledge, Silence 1 h, …) until a key signs them",
            ),
            (None, None) => {
                Some("no one-click links in messages: set server.public_url and server.link_signing_key to add them")
            }
        }
    }

    /// The host names requests may carry in `Host`: `allowed_hosts` when set; unset, the loopback names (`localhost`,
    /// `127.0.0.1`, `[::1]`) and the listen address, on any port — or any host when listening on every interface
    /// (`0.0.0.0`, `::`), which needs credentials or `allow_anonymous`, and where the names clients use (a Kubernetes
    /// Service, an ingress, a pod IP) are not known in advance.
    pub fn hosts(&self) -> AllowedHosts {
        if let Some(list) = &self.allowed_hosts {
            if list.iter().any(|h| h.trim() == "*") {
                return AllowedHosts::Any;
            }
            return AllowedHosts::Only(list.iter().filter_map(|h| HostName::parse(h)).collect());
        }
        let listen = self.listen.parse::<std::net::SocketAddr>().ok();
        if listen.is_some_and(|a| a.ip().is_unspecified()) {
            return AllowedHosts::Any;
        }
        let mut names: Vec<HostName> = ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .filter_map(HostName::parse)
            .collect();
        if let Some(a) = listen.and_then(|a| HostName::parse(&a.ip().to_string()))
            && !names.contains(&a)
        {
            names.push(a);
        }
        AllowedHosts::Only(names)
    }
}

/// Which `Host` a request may carry (DNS rebinding: a page on `evil.example` resolved to 127.0.0.1 reaches a
/// loopback Herald with `Host: evil.example`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    Any,
    Only(Vec<HostName>),
}

impl AllowedHosts {
    /// Whether a `Host` header value (`name` or `name:port`) is allowed.
    pub fn allows(&self, host: &str) -> bool {
        match self {
            AllowedHosts::Any => true,
            AllowedHosts::Only(names) => HostName::parse(host).is_some_and(|h| {
                names
                    .iter()
                    .any(|n| n.name == h.name && (n.port.is_none() || n.port == h.port))
            }),
        }
    }
}

/// A host name (lower case, without a trailing dot; an IPv6 address in brackets) and, when given, a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostName {
    pub name: String,
    pub port: Option<u16>,
}

impl HostName {
    /// `name`, `name:port`, `[v6]`, `[v6]:port` or a bare IPv6 address; `None` for anything else (a URL, a path,
    /// a space…).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (name, port) = if let Some(rest) = s.strip_prefix('[') {
            let (addr, after) = rest.split_once(']')?;
            let ip: std::net::Ipv6Addr = addr.parse().ok()?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':')?.parse().ok()?),
            };
            (format!("[{ip}]"), port)
        } else if let Ok(ip) = s.parse::<std::net::Ipv6Addr>() {
            (format!("[{ip}]"), None)
        } else {
            let (name, port) = match s.split_once(':') {
                Some((n, p)) => (n, Some(p.parse().ok()?)),
                None => (s, None),
            };
            let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
            let valid = !name.is_empty()
                && name.len() <= 253
                && name
                    .split('.')
                    .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            if !valid {
                return None;
            }
            (name, port)
        };
        Some(Self { name, port })
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
                             basic: [{username: alice, password: alice-password-0123, scope: admin},
                                     {username: bob, password: bob-password-012345}]}}",
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
                ("alice".to_string(), Scope::Admin),
                ("bob".to_string(), Scope::Read),
            ]
        );
        let CredentialSecret::Bearer(t) = &s.server.auth.credentials()[0].secret else {
            panic!("a token")
        };
        assert_eq!(t.expose_secret(), "admin-token-0123456", "trimmed");
    }

    #[test]
    fn a_basic_password_follows_the_token_rules() {
        let e = refused("server: {auth: {basic: [{username: ops, password: x}]}}");
        assert!(
            e.contains("server.auth.basic[0].password: a password of 1 characters is too short"),
            "{e}"
        );
        assert!(e.contains("at least 16"), "{e}");
        Settings::from_yaml("server: {auth: {basic: [{username: ops, password: sixteen-chars-ok}]}}")
            .expect("16 characters are enough");
    }

    #[test]
    fn a_credential_with_a_control_character_refuses_the_configuration() {
        for (yaml, path) in [
            (
                "server: {auth: {bearer_tokens: [\"admin-token-0123\\nX-Injected: 1\"]}}",
                "server.auth.bearer_tokens[0]: the token contains a control character",
            ),
            (
                "server: {auth: {read_tokens: [{name: \"ci\\r\\nforged\", token: read-token-0123456789}]}}",
                "server.auth.read_tokens[0].name",
            ),
            (
                "server: {auth: {basic: [{username: ops, password: \"a-long-password-0123\\n\"}]}}",
                "server.auth.basic[0].password: the password contains a control character",
            ),
            (
                "server: {auth: {basic: [{username: \"ops\\u001b[2J\", password: a-long-password-0123}]}}",
                "server.auth.basic[0].username",
            ),
        ] {
            let e = refused(yaml);
            assert!(e.contains(path), "{yaml}: {e}");
            assert!(!e.contains("0123"), "the secret is not shown: {e}");
        }
    }

    #[test]
    fn a_basic_user_without_a_scope_may_only_read() {
        let s = Settings::from_yaml("server: {auth: {basic: [{username: ops, password: a-long-password-0123}]}}")
            .expect("valid");
        assert_eq!(s.server.auth.credentials()[0].scope, Scope::Read);
    }

    #[test]
    fn allowed_hosts_default_to_the_loopback_names_and_the_listen_address() {
        let hosts = |yaml: &str| Settings::from_yaml(yaml).expect(yaml).server.hosts();
        let loopback = hosts("");
        for ok in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LOCALHOST.",
        ] {
            assert!(loopback.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "",
            "localhost:x",
        ] {
            assert!(!loopback.allows(refused), "{refused:?}");
        }
        let one = hosts("server: {listen: '10.1.2.3:8080', auth: {allow_anonymous: true}}");
        assert!(one.allows("10.1.2.3:8080") && one.allows("localhost") && !one.allows("10.1.2.4"));
        assert_eq!(
            hosts("server: {listen: '0.0.0.0:8080', auth: {allow_anonymous: true}}"),
            AllowedHosts::Any,
            "every interface: the names clients use are not known in advance"
        );
        let set = hosts("server: {listen: '0.0.0.0:8080', allowed_hosts: [herald.example.com, 'herald:8080']}");
        assert!(set.allows("herald.example.com") && set.allows("Herald.Example.Com:443"));
        assert!(set.allows("herald:8080") && !set.allows("herald:9090") && !set.allows("localhost"));
        assert_eq!(hosts("server: {allowed_hosts: ['*']}"), AllowedHosts::Any);
        let e = refused("server: {allowed_hosts: ['https://herald.example.com/']}");
        assert!(e.contains("server.allowed_hosts[0]"), "{e}");
    }

    #[test]
    fn the_pages_time_zone_is_utc_unless_set_and_an_unknown_one_is_refused() {
        let zone = |yaml: &str| Settings::from_yaml(yaml).expect(yaml).server.zone();
        assert_eq!(zone(""), chrono_tz::UTC);
        assert_eq!(zone("server: {time_zone: Europe/Berlin}"), chrono_tz::Europe::Berlin);
        let e = refused("server: {time_zone: Mars/Olympus}");
        assert!(e.contains("server.time_zone") && e.contains("Mars/Olympus"), "{e}");
    }

    #[test]
    fn the_public_url_is_optional_and_must_be_an_http_url() {
        let url = |yaml: &str| Settings::from_yaml(yaml).expect(yaml).server.public_url;
        assert_eq!(url(""), None);
        assert_eq!(
            url("server: {public_url: 'https://herald.example.com/'}").as_deref(),
            Some("https://herald.example.com/")
        );
        for bad in [
            "herald.example.com",
            "javascript:alert(1)",
            "https://herald.example.com/?a=b",
        ] {
            let e = refused(&format!("server: {{public_url: '{bad}'}}"));
            assert!(e.contains("server.public_url"), "{bad}: {e}");
        }
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

    #[test]
    fn a_credentials_teams_must_be_known_non_empty_and_on_a_scope_that_acts() {
        let teams = "teams: {payments: {}, search: {}}\n";
        let ok = Settings::from_yaml(&format!(
            "{teams}server: {{auth: {{bearer_tokens: [{{name: pay, token: pay-token-0123456789, scope: respond, teams: [payments]}}],
                                     basic: [{{username: lead, password: lead-password-0123, scope: admin, teams: [payments, search]}}]}}}}"
        ))
        .expect("valid");
        let got: Vec<Teams> = ok.server.auth.credentials().into_iter().map(|c| c.teams).collect();
        assert_eq!(
            got,
            [
                Teams::Only(vec!["payments".into()]),
                Teams::Only(vec!["payments".into(), "search".into()])
            ]
        );
        for (yaml, path, words) in [
            (
                "server: {auth: {bearer_tokens: [{name: pay, token: pay-token-0123456789, scope: respond, teams: [paymnets]}]}}",
                "server.auth.bearer_tokens[0].teams[0]",
                "\"paymnets\" is not a team Herald knows (teams: payments, search, platform)",
            ),
            (
                "server: {auth: {basic: [{username: lead, password: lead-password-0123, scope: admin, teams: [search, ghost]}]}}",
                "server.auth.basic[0].teams[1]",
                "\"ghost\"",
            ),
            (
                "server: {auth: {bearer_tokens: [{name: pay, token: pay-token-0123456789, teams: []}]}}",
                "server.auth.bearer_tokens[0].teams",
                "an empty list would act on no team",
            ),
            (
                "server: {auth: {read_tokens: [{name: dash, token: dash-token-0123456789, teams: [payments]}]}}",
                "server.auth.read_tokens[0].teams",
                "the read scope acts on no incident",
            ),
            (
                "server: {auth: {ingest_tokens: [{name: cd, token: cd-token-0123456789, teams: [payments]}]}}",
                "server.auth.ingest_tokens[0].teams",
                "the ingest scope acts on no incident",
            ),
            (
                "server: {auth: {bearer_tokens: [{name: pay, token: pay-token-0123456789, teams: ['']}]}}",
                "server.auth.bearer_tokens[0].teams[0]",
                "must be a team name",
            ),
        ] {
            let e = refused(&format!("{teams}{yaml}"));
            assert!(e.contains(path) && e.contains(words), "{yaml}: {e}");
        }
        // Wrong types: named by serde with the key path.
        for (yaml, path) in [
            (
                "server: {auth: {basic: [{username: lead, password: lead-password-0123, teams: payments}]}}",
                "server.auth.basic[0].teams",
            ),
            (
                "server: {auth: {basic: [{username: lead, password: lead-password-0123, teams: [{a: 1}]}]}}",
                "server.auth.basic[0].teams",
            ),
        ] {
            let e = refused(&format!("{teams}{yaml}"));
            assert!(e.contains(path), "{yaml}: {e}");
        }
    }

    #[test]
    fn an_authenticating_proxy_is_checked_at_load_and_each_error_names_its_key() {
        let teams = "teams: {payments: {}}\n";
        let proxy = |body: &str| format!("{teams}server: {{auth: {{proxy: {{{body}}}}}}}");
        let good = "user_header: X-Forwarded-User, groups_header: X-Forwarded-Groups, trusted_proxies: [10.0.0.0/8], \
                    groups: {oncall: {scope: respond, teams: [payments]}, sre: {scope: read}}";
        let s = Settings::from_yaml(&proxy(good)).expect("valid");
        assert!(s.server.auth.has_authentication(), "a proxy alone is authentication");
        for (body, path, words) in [
            (
                good.replace("10.0.0.0/8", "10.0.0.0/33"),
                "server.auth.proxy.trusted_proxies[0]",
                "not an address range",
            ),
            (
                good.replace("10.0.0.0/8", "proxy.internal"),
                "server.auth.proxy.trusted_proxies[0]",
                "not an address range",
            ),
            (
                good.replace("10.0.0.0/8", "0.0.0.0/0"),
                "server.auth.proxy.trusted_proxies[0]",
                "every address",
            ),
            (
                good.replace("[10.0.0.0/8]", "[]"),
                "server.auth.proxy.trusted_proxies",
                "must name the addresses",
            ),
            (
                good.replace("X-Forwarded-User", "''"),
                "server.auth.proxy.user_header",
                "must not be empty",
            ),
            (
                good.replace("X-Forwarded-Groups", "'X Groups'"),
                "server.auth.proxy.groups_header",
                "not an HTTP header name",
            ),
            (
                good.replace("X-Forwarded-User", "Authorization"),
                "server.auth.proxy.user_header",
                "not Authorization",
            ),
            (
                good.replace("X-Forwarded-Groups", "x-forwarded-user"),
                "server.auth.proxy.groups_header",
                "must differ",
            ),
            (
                good.replace("scope: respond", "scope: root"),
                "server.auth.proxy.groups.oncall.scope",
                "unknown variant",
            ),
            (
                good.replace("scope: respond", "scope: ingest"),
                "server.auth.proxy.groups.oncall.scope",
                "read, respond or admin",
            ),
            (
                good.replace("[payments]", "[ghost]"),
                "server.auth.proxy.groups.oncall.teams[0]",
                "\"ghost\" is not a team",
            ),
            (
                good.replace("{scope: read}", "{scope: read, teams: [payments]}"),
                "server.auth.proxy.groups.sre.teams",
                "acts on no incident",
            ),
            (
                good.replace(
                    ", groups: {oncall: {scope: respond, teams: [payments]}, sre: {scope: read}}",
                    ", groups: {}",
                ),
                "server.auth.proxy.groups",
                "at least one group",
            ),
            (
                good.replace("trusted_proxies: [10.0.0.0/8]", "trusted_proxies: 10.0.0.0/8"),
                "server.auth.proxy.trusted_proxies",
                "",
            ),
            (
                good.replace("user_header: X-Forwarded-User, ", ""),
                "server.auth.proxy",
                "user_header",
            ),
            (format!("{good}, extra: 1"), "server.auth.proxy", "extra"),
        ] {
            let e = refused(&proxy(&body));
            assert!(e.contains(path) && e.contains(words), "{body}: {e}");
        }
    }
}
