//! Who may call Herald: bearer tokens (several, for rotation) and HTTP basic credentials, each with a name and a
//! [`Scope`], compared in constant time (on SHA-256 digests, so neither content nor length leaks through timing).
//! Applied once, as route middleware ([`needs`]): a route declares the scope it needs, the handler finds the
//! [`Caller`] in the request's extensions. Refusals are counted (`herald_auth_failures_total{reason}`) and logged
//! without the credential, at most once a minute per remote address and [`RefusalLog::MAX_LINES`] a minute in all
//! (then one line with how many were not logged). Guessing is slowed down by [`super::throttle`]: 429 +
//! `Retry-After` once a client (or all clients together) failed too often.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, web};
use base64::Engine;
use futures_util::future::LocalBoxFuture;
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::throttle::{self, FailureThrottle};
use super::{ApiError, AppContext};
use crate::configuration::{AuthSettings, Cidr, CredentialSecret, ProxySettings, Scope, Teams};
use crate::live::Live;

/// The authenticated credential of a request: its name (a basic username, a named token, or the key path of a
/// plain one, e.g. `ingest_tokens[0]`) and its scope. Absent when no credentials are configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub scope: Scope,
    /// The Argo CD instance an ingest token speaks for (`instance:` on the token).
    pub instance: Option<String>,
    /// The teams whose incidents it acts on (`teams:` on the credential, or its proxy groups').
    pub teams: Teams,
}

impl Caller {
    /// Whether this caller may act on an incident or Application of `team`; a 403 saying why not (which teams the
    /// credential has, which team the incident is) otherwise. `what` is the incident or Application in words.
    pub fn may_act_on(&self, team: &str, what: &str) -> Result<(), ApiError> {
        if self.teams.allows(team) {
            return Ok(());
        }
        Err(ApiError::OtherTeam {
            message: format!(
                "credential {:?} acts on {}; {what} is the team {team}'s: nothing was changed",
                self.name,
                self.teams.words()
            ),
            credential: self.name.clone(),
            teams: self.teams.names().map(<[String]>::to_vec).unwrap_or_default(),
            team: team.to_string(),
        })
    }
}

/// The caller of `req`, when it is bound to teams (none on an open Herald, nor for a credential of every team).
pub(super) fn team_bound(req: &actix_web::HttpRequest) -> Option<Caller> {
    req.extensions()
        .get::<Caller>()
        .filter(|c| c.teams != Teams::All)
        .cloned()
}

/// The caller of `req` may act on incident `id`: a 403 saying why when it is another team's. An incident that is
/// not kept passes (the action then answers 404).
pub(super) async fn may_act_on_incident(
    req: &actix_web::HttpRequest,
    ctx: &AppContext,
    id: i64,
) -> Result<(), ApiError> {
    let Some(caller) = team_bound(req) else {
        return Ok(());
    };
    match ctx.pipeline.incident_team(id).await? {
        Some(team) => caller.may_act_on(&team, &format!("incident {id}")),
        None => Ok(()),
    }
}

/// Why a request was refused; the `reason` label of `herald_auth_failures_total`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization` header.
    Missing,
    /// A scheme other than Bearer or Basic, an empty token, Basic that is not base64.
    Malformed,
    /// No configured credential matches.
    Unknown,
    /// A valid credential whose scope does not allow this.
    Scope { caller: Caller, needed: Scope },
    /// Not compared: this client (or all together) failed too often; try again after the duration.
    Throttled(Duration),
}

impl Refusal {
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Malformed => "malformed",
            Refusal::Unknown => "unknown_credential",
            Refusal::Scope { .. } => "insufficient_scope",
            Refusal::Throttled(_) => "rate_limited",
        }
    }

    /// Whether this refusal is a guess that failed (what the throttle counts): not a missing credential (a browser
    /// asks first without one), nor a valid one without the scope.
    fn is_failed_guess(&self) -> bool {
        matches!(self, Refusal::Malformed | Refusal::Unknown)
    }
}

type Digest32 = [u8; 32];

/// The configured credentials, as digests, and the authenticating proxy.
struct Keys {
    tokens: Vec<(Digest32, Caller)>,
    basic: Vec<(Digest32, Caller)>,
    proxy: Option<Proxy>,
}

/// `server.auth.proxy` as requests are checked against it.
struct Proxy {
    settings: ProxySettings,
    trusted: Vec<Cidr>,
}

/// The longest user name a proxy header may carry, and the longest groups list.
pub const MAX_PROXY_USER: usize = 256;
pub const MAX_PROXY_GROUPS: usize = 4096;

/// Why a proxy's headers were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyRefusal {
    /// A header value too long, not UTF-8, with a control character, or empty.
    BadHeader(String),
    /// The user is in none of the configured groups.
    NoGroup { user: String },
}

impl Proxy {
    /// The caller the proxy's headers name, when the request came from a trusted proxy and carries the user
    /// header; `None` otherwise (the request then needs a credential of its own).
    fn caller(&self, remote: Option<IpAddr>, headers: &header::HeaderMap) -> Result<Option<Caller>, ProxyRefusal> {
        let Some(remote) = remote else { return Ok(None) };
        if !self.trusted.iter().any(|c| c.contains(remote)) {
            return Ok(None);
        }
        let s = &self.settings;
        let Some(user) = headers.get(s.user_header.trim()) else {
            return Ok(None);
        };
        let user = header_text(&s.user_header, user, MAX_PROXY_USER)?.trim().to_string();
        if user.is_empty() {
            return Err(ProxyRefusal::BadHeader(format!(
                "the header {} is empty",
                s.user_header.trim()
            )));
        }
        let mut groups = Vec::new();
        for v in headers.get_all(s.groups_header.trim()) {
            let v = header_text(&s.groups_header, v, MAX_PROXY_GROUPS)?;
            groups.extend(
                v.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_string),
            );
        }
        // The widest scope of the user's groups, with the teams of the groups that give it: a lesser group's teams
        // never widen what the wider scope acts on (an admin of payments who is also in a respond group of every
        // team is not an admin of every team).
        let mut found: Option<(Scope, Teams)> = None;
        for g in groups.iter().filter_map(|g| s.groups.get(g)) {
            let teams = Teams::of(g.teams.as_ref());
            found = Some(match found {
                None => (g.scope, teams),
                Some((scope, _)) if rank(g.scope) > rank(scope) => (g.scope, teams),
                Some((scope, t)) if rank(g.scope) == rank(scope) => (scope, t.union(&teams)),
                Some(kept) => kept,
            });
        }
        let Some((scope, teams)) = found else {
            return Err(ProxyRefusal::NoGroup { user });
        };
        Ok(Some(Caller {
            name: user,
            scope,
            instance: None,
            teams,
        }))
    }
}

/// How wide a proxy group's scope is (`read` < `respond` < `admin`).
fn rank(s: Scope) -> u8 {
    match s {
        Scope::Admin => 3,
        Scope::Respond => 2,
        Scope::Read => 1,
        Scope::Ingest => 0,
    }
}

/// A proxy header's value as text: UTF-8, at most `max` bytes, no control character.
fn header_text<'a>(name: &str, v: &'a header::HeaderValue, max: usize) -> Result<&'a str, ProxyRefusal> {
    let name = name.trim();
    if v.len() > max {
        return Err(ProxyRefusal::BadHeader(format!(
            "the header {name} is longer than {max} bytes"
        )));
    }
    let text = std::str::from_utf8(v.as_bytes())
        .map_err(|_| ProxyRefusal::BadHeader(format!("the header {name} is not UTF-8")))?;
    if text.chars().any(char::is_control) {
        return Err(ProxyRefusal::BadHeader(format!(
            "the header {name} contains a control character"
        )));
    }
    Ok(text)
}

impl Keys {
    fn of(s: &AuthSettings) -> Self {
        let mut keys = Keys {
            tokens: Vec::new(),
            basic: Vec::new(),
            proxy: s.proxy.as_ref().map(|p| Proxy {
                trusted: p.trusted(),
                settings: p.clone(),
            }),
        };
        for c in s.credentials() {
            let caller = Caller {
                name: c.name,
                scope: c.scope,
                instance: c.instance,
                teams: c.teams,
            };
            match c.secret {
                CredentialSecret::Bearer(t) => keys.tokens.push((digest(t.expose_secret().as_bytes()), caller)),
                CredentialSecret::Basic { username, password } => keys.basic.push((
                    digest(format!("{username}:{}", password.expose_secret()).as_bytes()),
                    caller,
                )),
            }
        }
        keys
    }

    fn enabled(&self) -> bool {
        !self.tokens.is_empty() || !self.basic.is_empty() || self.proxy.is_some()
    }
}

fn digest(s: &[u8]) -> Digest32 {
    Sha256::digest(s).into()
}

/// The caller whose digest equals `presented`. Every candidate is compared, with no early exit.
fn find<'a>(candidates: &'a [(Digest32, Caller)], presented: &Digest32) -> Option<&'a Caller> {
    candidates.iter().fold(None, |found, (d, caller)| {
        let equal: bool = d.ct_eq(presented).into();
        found.or(equal.then_some(caller))
    })
}

pub struct Auth {
    keys: Live<Keys>,
    refusals: Mutex<RefusalLog>,
    throttle: FailureThrottle,
}

impl Auth {
    pub fn new(s: &AuthSettings) -> Self {
        Self {
            keys: Live::new(Keys::of(s)),
            refusals: Mutex::new(RefusalLog::default()),
            throttle: FailureThrottle::new(throttle::PER_CLIENT, throttle::TOTAL),
        }
    }

    /// Whether credentials are configured (so requests need one).
    pub fn enabled(&self) -> bool {
        self.keys.get().enabled()
    }

    /// [`Auth::admit`] for a request from `remote`, slowed down by the throttle: a client that failed too often is
    /// refused before its credential is compared, and each failed guess is counted.
    pub fn admit_from(
        &self,
        remote: Option<IpAddr>,
        authorization: Option<&str>,
        needed: Scope,
        now: Instant,
    ) -> Result<Option<Caller>, Refusal> {
        if !self.enabled() {
            return Ok(None);
        }
        if authorization.is_some() {
            self.throttle.check(remote, now).map_err(Refusal::Throttled)?;
        }
        let result = self.admit(authorization, needed);
        match &result {
            Err(r) if r.is_failed_guess() => self.throttle.failed(remote, now),
            Ok(Some(_)) | Err(Refusal::Scope { .. }) => self.throttle.succeeded(remote, now),
            _ => {}
        }
        result
    }

    /// The caller an authenticating proxy names in `headers`, when `remote` is a trusted proxy and the user header
    /// is there (see `configuration::proxy`); `None` otherwise.
    pub fn proxy_caller(
        &self,
        remote: Option<IpAddr>,
        headers: &header::HeaderMap,
    ) -> Result<Option<Caller>, ProxyRefusal> {
        match &self.keys.get().proxy {
            Some(p) => p.caller(remote, headers),
            None => Ok(None),
        }
    }

    /// Takes the credentials of reloaded settings (already validated).
    pub fn replace(&self, s: &AuthSettings) {
        self.keys.replace(Keys::of(s));
    }

    /// Whether a request with this `Authorization` header may do what needs `needed`: its caller (`None` when no
    /// credentials are configured, so everyone may), or why not.
    pub fn admit(&self, authorization: Option<&str>, needed: Scope) -> Result<Option<Caller>, Refusal> {
        let keys = self.keys.get();
        if !keys.enabled() {
            return Ok(None);
        }
        let value = authorization.ok_or(Refusal::Missing)?;
        let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
        let rest = rest.trim();
        if rest.is_empty() {
            return Err(Refusal::Malformed);
        }
        let caller = if scheme.eq_ignore_ascii_case("bearer") {
            find(&keys.tokens, &digest(rest.as_bytes()))
        } else if scheme.eq_ignore_ascii_case("basic") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .map_err(|_| Refusal::Malformed)?;
            find(&keys.basic, &digest(&decoded))
        } else {
            return Err(Refusal::Malformed);
        };
        let caller = caller.ok_or(Refusal::Unknown)?.clone();
        if caller.scope.allows(needed) {
            Ok(Some(caller))
        } else {
            Err(Refusal::Scope { caller, needed })
        }
    }

    fn challenge_basic(&self) -> bool {
        !self.keys.get().basic.is_empty()
    }

    /// Counts the refusal, and logs it unless this address was logged less than a minute ago or the minute's lines
    /// are used up.
    fn record(&self, refusal: &Refusal, remote: Option<IpAddr>, method: &str, path: &str) {
        metrics::counter!("herald_auth_failures_total", "reason" => refusal.reason()).increment(1);
        let (log, unlogged) = {
            let mut refusals = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let unlogged = refusals.take_summary(now);
            (refusals.should_log(remote, now), unlogged)
        };
        if let Some(n) = unlogged {
            tracing::warn!(
                unlogged = n,
                "{n} refused requests were not logged in the last minute (at most {} lines a minute); \
                 herald_auth_failures_total counts them all",
                RefusalLog::MAX_LINES
            );
        }
        if !log {
            return;
        }
        let remote = remote.map(|a| a.to_string()).unwrap_or_else(|| "unknown".into());
        match refusal {
            Refusal::Missing => {
                tracing::info!(reason = refusal.reason(), %remote, %method, %path, "request without credentials refused")
            }
            Refusal::Scope { caller, needed } => tracing::warn!(
                reason = refusal.reason(),
                %remote,
                %method,
                %path,
                credential = %caller.name,
                scope = caller.scope.as_str(),
                needed = needed.as_str(),
                "credential refused: its scope does not allow this"
            ),
            Refusal::Throttled(wait) => tracing::warn!(
                reason = refusal.reason(),
                %remote,
                %method,
                %path,
                retry_after_s = wait.as_secs_f64().ceil() as u64,
                "request refused: too many failed authentications"
            ),
            _ => tracing::warn!(reason = refusal.reason(), %remote, %method, %path, "credential refused"),
        }
    }
}

/// At most one log line per remote address per [`RefusalLog::QUIET`], and [`RefusalLog::MAX_LINES`] per minute in
/// all: a client retrying with a wrong token, or thousands of addresses at once, must not flood the log (the counter
/// still counts every refusal; the lines left out are counted in one summary line a minute).
#[derive(Default)]
struct RefusalLog {
    last: HashMap<Option<IpAddr>, Instant>,
    /// The minute being counted: when it started, the lines logged in it, the refusals not logged for the cap.
    minute: Option<Instant>,
    lines: usize,
    unlogged: u64,
}

impl RefusalLog {
    const QUIET: Duration = Duration::from_secs(60);
    /// Addresses remembered at most; past this, those quiet for a minute are forgotten.
    const MAX_ADDRESSES: usize = 4096;
    /// Refusal lines per minute, all addresses together.
    const MAX_LINES: usize = 20;

    /// Whether to log this refusal; a refusal left out only for the per-minute cap is counted for the summary.
    fn should_log(&mut self, remote: Option<IpAddr>, now: Instant) -> bool {
        if self.minute.is_none() {
            self.minute = Some(now);
        }
        if !self.quiet_enough(remote, now) {
            return false;
        }
        if self.lines >= Self::MAX_LINES {
            self.unlogged += 1;
            return false;
        }
        self.lines += 1;
        true
    }

    /// When the minute is over: how many refusals it left out (if any), and a new minute begins.
    fn take_summary(&mut self, now: Instant) -> Option<u64> {
        let started = self.minute?;
        if now.saturating_duration_since(started) < Self::QUIET {
            return None;
        }
        self.minute = Some(now);
        self.lines = 0;
        let n = std::mem::take(&mut self.unlogged);
        (n > 0).then_some(n)
    }

    fn quiet_enough(&mut self, remote: Option<IpAddr>, now: Instant) -> bool {
        if self.last.len() >= Self::MAX_ADDRESSES {
            self.last.retain(|_, at| now.duration_since(*at) < Self::QUIET);
            if self.last.len() >= Self::MAX_ADDRESSES {
                // Many addresses at once: an attack; the counter tells the size, one line per minute is enough.
                self.last.clear();
            }
        }
        match self.last.get(&remote) {
            Some(at) if now.duration_since(*at) < Self::QUIET => false,
            _ => {
                self.last.insert(remote, now);
                true
            }
        }
    }
}

/// A valid credential whose scope does not allow what needs `needed`.
fn forbidden(caller: &Caller, needed: Scope) -> ApiError {
    ApiError::Forbidden(format!(
        "credential {:?} has the scope {}; this needs {}",
        caller.name,
        caller.scope.as_str(),
        needed.as_str()
    ))
}

/// For a handler whose route admitted a lower scope and that decides from the path that it needs `needed` (see
/// `apps::three_segments`): the caller the route middleware admitted must also allow `needed`.
pub(super) fn also_needs(req: &actix_web::HttpRequest, ctx: &AppContext, needed: Scope) -> Result<(), ApiError> {
    if !ctx.auth.enabled() {
        return Ok(());
    }
    match req.extensions().get::<Caller>() {
        Some(c) if c.scope.allows(needed) => Ok(()),
        Some(c) => Err(forbidden(c, needed)),
        None => Err(ApiError::Unauthorized {
            basic: ctx.auth.challenge_basic(),
        }),
    }
}

/// Route middleware: the request goes on only with a credential that allows `needed`.
pub fn needs(
    needed: Scope,
) -> impl Fn(ServiceRequest, Next<BoxBody>) -> LocalBoxFuture<'static, Result<ServiceResponse<BoxBody>, Error>> + 'static
{
    move |req, next| Box::pin(authorize(needed, req, next))
}

pub(super) async fn authorize(
    needed: Scope,
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let Some(ctx) = req.app_data::<web::Data<AppContext>>().cloned() else {
        tracing::error!("no application state: the routes are wired without AppContext");
        return Err(ApiError::Internal.into());
    };
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    let remote = req.peer_addr().map(|a| a.ip());
    if let Some(caller) = proxy_admits(&ctx.auth, &req, remote, needed)? {
        req.extensions_mut().insert(caller);
        return next.call(req).await;
    }
    match ctx.auth.admit_from(remote, authorization, needed, Instant::now()) {
        Ok(caller) => {
            if let Some(caller) = caller {
                req.extensions_mut().insert(caller);
            }
            next.call(req).await
        }
        Err(refusal) => {
            ctx.auth.record(&refusal, remote, req.method().as_str(), req.path());
            Err(refused(&ctx.auth, refusal).into())
        }
    }
}

/// The caller an authenticating proxy's headers name, when they allow `needed`; `None` without such headers (a
/// credential then decides); an error when the headers are refused or do not allow `needed`.
fn proxy_admits(
    auth: &Auth,
    req: &ServiceRequest,
    remote: Option<IpAddr>,
    needed: Scope,
) -> Result<Option<Caller>, ApiError> {
    match auth.proxy_caller(remote, req.headers()) {
        Ok(Some(caller)) if caller.scope.allows(needed) => Ok(Some(caller)),
        Ok(Some(caller)) => {
            let e = forbidden(&caller, needed);
            auth.record(
                &Refusal::Scope { caller, needed },
                remote,
                req.method().as_str(),
                req.path(),
            );
            Err(e)
        }
        Ok(None) => Ok(None),
        Err(ProxyRefusal::BadHeader(why)) => {
            metrics::counter!("herald_auth_failures_total", "reason" => "proxy_header").increment(1);
            Err(ApiError::BadRequest(format!(
                "{why}: the authenticating proxy's headers are refused"
            )))
        }
        Err(ProxyRefusal::NoGroup { user }) => {
            metrics::counter!("herald_auth_failures_total", "reason" => "proxy_no_group").increment(1);
            Err(ApiError::Forbidden(format!(
                "user {user:?} is in none of the groups server.auth.proxy.groups names: ask for one of them in the \
                 identity provider"
            )))
        }
    }
}

/// What a refused credential is answered: 429 when throttled, 403 for a scope too low, else 401.
fn refused(auth: &Auth, refusal: Refusal) -> ApiError {
    match refusal {
        Refusal::Throttled(wait) => ApiError::TooManyRequests {
            message: "too many failed authentications from this address (or from all together); \
                      try again after Retry-After seconds"
                .into(),
            retry_after: wait.as_secs_f64().ceil().max(1.0) as u64,
        },
        Refusal::Scope { caller, needed } => forbidden(&caller, needed),
        _ => ApiError::Unauthorized {
            basic: auth.challenge_basic(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configuration::Settings;

    fn auth(yaml: &str) -> Auth {
        Auth::new(&Settings::from_yaml(yaml).expect("valid").server.auth)
    }

    fn basic(user_password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
    }

    #[test]
    fn a_credential_is_admitted_within_its_scope_and_named() {
        let a = auth(
            "server: {auth: {ingest_tokens: [argocd-token-0123456], basic: [{username: alice, password: alice-password-0123, scope: read}]}}",
        );
        assert_eq!(
            a.admit(Some("Bearer argocd-token-0123456"), Scope::Ingest),
            Ok(Some(Caller {
                name: "ingest_tokens[0]".into(),
                scope: Scope::Ingest,
                instance: None,
                teams: Teams::All,
            }))
        );
        assert!(matches!(
            a.admit(Some("Bearer argocd-token-0123456"), Scope::Read),
            Err(Refusal::Scope { .. })
        ));
        assert_eq!(
            a.admit(Some(&basic("alice:alice-password-0123")), Scope::Read)
                .map(|c| c.map(|c| c.name)),
            Ok(Some("alice".into()))
        );
        assert!(matches!(
            a.admit(Some(&basic("alice:alice-password-0123")), Scope::Admin),
            Err(Refusal::Scope { .. })
        ));
    }

    #[test]
    fn empty_and_malformed_credentials_are_refused_with_their_reason() {
        let a = auth(
            "server: {auth: {bearer_tokens: [admin-token-0123456], basic: [{username: u, password: u-password-0123456}]}}",
        );
        for (header, reason) in [
            (None, "missing"),
            (Some("Bearer"), "malformed"),
            (Some("Bearer    "), "malformed"),
            (Some("Basic Og=="), "unknown_credential"),
            (Some("Basic !!"), "malformed"),
            (Some("Token admin-token-0123456"), "malformed"),
            (Some("Bearer admin-token-012345"), "unknown_credential"),
        ] {
            assert_eq!(
                a.admit(header, Scope::Read).map_err(|r| r.reason()),
                Err(reason),
                "{header:?}"
            );
        }
    }

    #[test]
    fn without_credentials_everyone_is_admitted_anonymously() {
        let a = auth("");
        assert_eq!(a.admit(None, Scope::Admin), Ok(None));
    }

    #[test]
    fn refusal_lines_are_bounded_per_minute_and_the_rest_counted_once_a_minute() {
        let mut log = RefusalLog::default();
        let t0 = Instant::now();
        let logged = (0..6000u32)
            .filter(|i| log.should_log(Some(IpAddr::V4((0x0a00_0000 + i).into())), t0))
            .count();
        assert_eq!(logged, RefusalLog::MAX_LINES, "6000 addresses in a moment");
        assert_eq!(
            log.take_summary(t0 + Duration::from_secs(30)),
            None,
            "the minute is not over"
        );
        let summary = log.take_summary(t0 + Duration::from_secs(60));
        assert_eq!(summary, Some(6000 - RefusalLog::MAX_LINES as u64));
        assert_eq!(
            log.take_summary(t0 + Duration::from_secs(61)),
            None,
            "one summary a minute"
        );
        assert!(log.should_log("192.0.2.1".parse().ok(), t0 + Duration::from_secs(61)));
    }

    #[test]
    fn a_client_guessing_too_often_is_refused_before_comparing_even_the_right_token() {
        let a = auth("server: {auth: {bearer_tokens: [admin-token-0123456]}}");
        let t0 = Instant::now();
        let guesser: Option<IpAddr> = "10.0.0.9".parse().ok();
        for _ in 0..throttle::PER_CLIENT.burst as usize {
            assert_eq!(
                a.admit_from(guesser, Some("Bearer wrong-token-0123456"), Scope::Read, t0)
                    .map_err(|r| r.reason()),
                Err("unknown_credential")
            );
        }
        let right = a.admit_from(guesser, Some("Bearer admin-token-0123456"), Scope::Read, t0);
        assert!(matches!(right, Err(Refusal::Throttled(_))), "{right:?}");
        let other = a.admit_from(
            "10.0.0.10".parse().ok(),
            Some("Bearer admin-token-0123456"),
            Scope::Read,
            t0,
        );
        assert!(matches!(other, Ok(Some(_))), "{other:?}");
        let later = a.admit_from(
            guesser,
            Some("Bearer admin-token-0123456"),
            Scope::Read,
            t0 + Duration::from_secs(2),
        );
        assert!(matches!(later, Ok(Some(_))), "{later:?}");
    }

    #[test]
    fn refusals_are_logged_once_a_minute_per_address() {
        let mut log = RefusalLog::default();
        let t0 = Instant::now();
        let a: Option<IpAddr> = "10.0.0.1".parse().ok();
        let b: Option<IpAddr> = "10.0.0.2".parse().ok();
        assert!(log.should_log(a, t0));
        assert!(!log.should_log(a, t0 + Duration::from_secs(59)));
        assert!(log.should_log(b, t0 + Duration::from_secs(1)));
        assert!(log.should_log(a, t0 + Duration::from_secs(61)));
    }

    #[test]
    fn a_proxy_user_has_the_widest_scope_of_their_groups_with_only_those_groups_teams() {
        let a = auth(
            "teams: {payments: {}, search: {}}\n\
             server: {auth: {proxy: {user_header: X-User, groups_header: X-Groups, trusted_proxies: [10.0.0.0/8],
                              groups: {pay-admin: {scope: admin, teams: [payments]}, oncall: {scope: respond},
                                       search-admin: {scope: admin, teams: [search]}, sre: {scope: read}}}}}",
        );
        let caller = |groups: &str| {
            let mut h = header::HeaderMap::new();
            h.insert(
                header::HeaderName::from_static("x-user"),
                header::HeaderValue::from_static("alice"),
            );
            h.insert(
                header::HeaderName::from_static("x-groups"),
                header::HeaderValue::from_str(groups).expect("value"),
            );
            a.proxy_caller("10.1.2.3".parse().ok(), &h)
        };
        let got = caller("pay-admin, oncall, sre").expect("ok").expect("a caller");
        assert_eq!(
            (got.scope, got.teams),
            (Scope::Admin, Teams::Only(vec!["payments".into()]))
        );
        let got = caller("pay-admin,search-admin").expect("ok").expect("a caller");
        assert_eq!(got.teams, Teams::Only(vec!["payments".into(), "search".into()]));
        let got = caller("sre,oncall").expect("ok").expect("a caller");
        assert_eq!((got.scope, got.teams), (Scope::Respond, Teams::All));
        assert_eq!(caller("nobody"), Err(ProxyRefusal::NoGroup { user: "alice".into() }));
        let mut h = header::HeaderMap::new();
        h.insert(
            header::HeaderName::from_static("x-user"),
            header::HeaderValue::from_static("alice"),
        );
        assert_eq!(
            a.proxy_caller("192.0.2.1".parse().ok(), &h),
            Ok(None),
            "not a trusted address"
        );
    }
}
