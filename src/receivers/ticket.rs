//! What the one-ticket-per-incident receivers (GitHub, Redmine, ServiceNow) share: the lifecycle ([`deliver`]:
//! comment on the remembered ticket, else find the incident's open ticket again, else create one; a resolve closes
//! it), the memo that remembers a ticket, the short digest that tags a ticket with its incident's fingerprint, and
//! the REST call ([`Rest`]) whose failures name the receiver and never carry its secrets.
//!
//! Without a memo the lifecycle always looks before it creates, so a crash between "ticket created" and "memo
//! stored" never opens a second ticket. A remembered ticket that is gone (404, 410) is looked for again, then
//! created anew: a missing incident ticket is worse than a second one.

use std::fmt::Display;

use chrono::{DateTime, Utc};
use reqwest::header::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::http::{CallError, Http, parse_json};
use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo};
use crate::domain::{Action, Notification};

/// 16 hex digits of the fingerprint's SHA-256: short enough for a label or a subject tag, and free of the spaces
/// and quotes a fingerprint may hold.
pub fn fingerprint_digest(fingerprint: &str) -> String {
    let digest = hex::encode(Sha256::digest(fingerprint.as_bytes()));
    digest[..16].to_string()
}

/// One ticket system as the lifecycle uses it. `Ticket` is what identifies a ticket (an issue number, a sys_id and
/// its number); it is stored as the memo, and its `Display` names it in details ("#42", "INC0010001").
#[async_trait::async_trait]
pub trait Tracker: Send + Sync {
    type Ticket: Serialize + DeserializeOwned + Display + Send + Sync;
    /// The receiver's key, for failures ("github").
    const KEY: &'static str;
    /// What a ticket is called, for details and logs ("GitHub issue").
    const NOUN: &'static str;

    /// How [`Tracker::find_open`] finds the incident's ticket ("label"), for details.
    fn found_by(&self) -> &'static str;
    /// The newest open ticket of the incident with this fingerprint.
    async fn find_open(&self, fingerprint: &str) -> Result<Option<Self::Ticket>, DeliveryError>;
    /// Opens the incident's ticket; the detail says what was created.
    async fn create(&self, n: &Notification, fingerprint: &str) -> Result<(Self::Ticket, String), DeliveryError>;
    /// Adds what `n` says to the ticket. The status tells a ticket that is gone (404, 410) from other failures.
    async fn update(&self, ticket: &Self::Ticket, n: &Notification) -> Result<(), CallError>;
    /// Adds what `n` says and closes the ticket; answers the detail ("closed #42"). The status as in `update`.
    async fn close(&self, ticket: &Self::Ticket, n: &Notification) -> Result<String, CallError>;
}

/// What Herald remembers per thread: the ticket, and when Herald resolved it.
#[derive(Debug, Serialize, Deserialize)]
struct TicketMemo<T> {
    #[serde(flatten)]
    ticket: T,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resolved_at: Option<DateTime<Utc>>,
}

/// Delivers `n` to `tracker`: open, update and test comment on the incident's ticket or create it; resolve closes
/// it. `memo` is what the last delivery of this thread returned.
pub async fn deliver<T: Tracker>(
    tracker: &T,
    n: &Notification,
    memo: Option<&Memo>,
) -> Result<Delivered, DeliveryError> {
    let incident = super::primary_incident(n, T::KEY)?;
    // A memo of a ticket Herald resolved says nothing about what is open now: look again.
    let remembered = memo
        .and_then(|m| serde_json::from_value::<TicketMemo<T::Ticket>>(m.clone()).ok())
        .filter(|m| m.resolved_at.is_none())
        .map(|m| m.ticket);
    let delivery = Delivery {
        tracker,
        n,
        fingerprint: &incident.fingerprint,
    };
    match n.action {
        Action::Resolve => delivery.resolve(remembered).await,
        Action::Open | Action::Update | Action::Test => delivery.fire(remembered).await,
        Action::Acknowledge => delivery.comment(remembered).await,
        Action::Digest => Err(super::digest_refused(T::KEY)),
    }
}

/// One notification on its way to one tracker.
struct Delivery<'a, T> {
    tracker: &'a T,
    n: &'a Notification,
    fingerprint: &'a str,
}

impl<T: Tracker> Delivery<'_, T> {
    async fn fire(&self, remembered: Option<T::Ticket>) -> Result<Delivered, DeliveryError> {
        let (tracker, n) = (self.tracker, self.n);
        if let Some(ticket) = remembered
            && still_there::<T, _>(n, &ticket, tracker.update(&ticket, n).await)?.is_some()
        {
            let detail = format!("commented on {ticket}");
            return Ok(delivered(ticket, None, detail));
        }
        if let Some(found) = tracker.find_open(self.fingerprint).await? {
            tracker.update(&found, n).await?;
            let detail = format!("commented on {found} (found by {})", tracker.found_by());
            return Ok(delivered(found, None, detail));
        }
        let (created, detail) = tracker.create(n, self.fingerprint).await?;
        Ok(delivered(created, None, detail))
    }

    /// Comments on the incident's ticket (an acknowledgement): never opens one, since an acknowledgement is no
    /// reason for a ticket.
    async fn comment(&self, remembered: Option<T::Ticket>) -> Result<Delivered, DeliveryError> {
        let (tracker, n) = (self.tracker, self.n);
        if let Some(ticket) = remembered
            && still_there::<T, _>(n, &ticket, tracker.update(&ticket, n).await)?.is_some()
        {
            let detail = format!("commented on {ticket}");
            return Ok(delivered(ticket, None, detail));
        }
        let Some(found) = tracker.find_open(self.fingerprint).await? else {
            return Ok(Delivered {
                memo: None,
                detail: format!("no open {} for this incident: nothing to comment on", T::NOUN),
            });
        };
        tracker.update(&found, n).await?;
        let detail = format!("commented on {found} (found by {})", tracker.found_by());
        Ok(delivered(found, None, detail))
    }

    async fn resolve(&self, remembered: Option<T::Ticket>) -> Result<Delivered, DeliveryError> {
        let (tracker, n) = (self.tracker, self.n);
        if let Some(ticket) = remembered
            && let Some(detail) = still_there::<T, _>(n, &ticket, tracker.close(&ticket, n).await)?
        {
            return Ok(delivered(ticket, Some(n.created_at), detail));
        }
        let Some(found) = tracker.find_open(self.fingerprint).await? else {
            return Ok(Delivered {
                memo: None,
                detail: format!("no open {} for this incident: nothing to resolve", T::NOUN),
            });
        };
        let detail = tracker.close(&found, n).await?;
        Ok(delivered(found, Some(n.created_at), detail))
    }
}

/// The answer of a call on a remembered ticket: `None` when the ticket is gone (deleted: 410, or not found: 404).
fn still_there<T: Tracker, V>(
    n: &Notification,
    ticket: &T::Ticket,
    answer: Result<V, CallError>,
) -> Result<Option<V>, DeliveryError> {
    match answer {
        Ok(value) => Ok(Some(value)),
        Err(e) if matches!(e.status, Some(404 | 410)) => {
            tracing::warn!(
                receiver = %n.receiver, ticket = %ticket,
                "The remembered {} is gone; looking for the incident's ticket again.", T::NOUN
            );
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

fn delivered<T: Serialize>(ticket: T, resolved_at: Option<DateTime<Utc>>, detail: String) -> Delivered {
    Delivered {
        memo: serde_json::to_value(TicketMemo { ticket, resolved_at }).ok(),
        detail,
    }
}

/// How a REST API is authenticated; the redactor of its failures is made from it.
pub enum Auth {
    /// A key in a header of its own (`X-Redmine-API-Key`).
    Header(&'static str, SecretString),
    /// HTTP Basic `user:password`.
    Basic(String, SecretString),
    /// `Authorization: Bearer <token>`.
    Bearer(SecretString),
}

impl Auth {
    fn apply(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Auth::Header(name, key) => request.header(*name, key.expose_secret()),
            Auth::Basic(user, password) => request.basic_auth(user, Some(password.expose_secret())),
            Auth::Bearer(token) => request.bearer_auth(token.expose_secret()),
        }
    }

    /// The secret, and the Basic form it travels in, should a server echo either back.
    fn redactor(&self) -> Redactor {
        match self {
            Auth::Header(_, secret) | Auth::Bearer(secret) => Redactor::default().secret(secret.expose_secret()),
            Auth::Basic(user, password) => Redactor::default().basic(user, password.expose_secret()),
        }
    }
}

/// One receiver's REST API: its base URL, how it is authenticated, how its error bodies read, and the receiver's
/// name, which prefixes every failure (whose secrets are removed).
pub struct Rest {
    http: Http,
    base: String,
    auth: Auth,
    redactor: Redactor,
    /// An API's own error shape (`{"errors": [...]}`) into its message; the body as is when it is not that.
    explain: fn(&str) -> String,
    who: &'static str,
}

impl Rest {
    pub fn new(http: Http, base: &str, auth: Auth, explain: fn(&str) -> String, who: &'static str) -> Self {
        Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            redactor: auth.redactor(),
            auth,
            explain,
            who,
        }
    }

    /// `{base}{path}`.
    pub fn url(&self, path: &str) -> Result<reqwest::Url, DeliveryError> {
        reqwest::Url::parse(&format!("{}{path}", self.base))
            .map_err(|e| DeliveryError::permanent(format!("{}: invalid base URL ({e})", self.who)))
    }

    /// Prefixes what failed (`"{who} {what}: …"`) and blanks out the secrets, should a server echo them back.
    pub fn redact(&self, what: &str, e: DeliveryError) -> DeliveryError {
        self.redactor
            .apply(DeliveryError::prefixed(&format!("{} {what}", self.who), e))
    }

    /// One authenticated request with `body` as JSON. A 2xx answers its body (possibly empty); anything else the
    /// shared status table's failure, saying the API's own message, with the status kept.
    pub async fn send(
        &self,
        what: &str,
        method: reqwest::Method,
        url: reqwest::Url,
        body: Option<&Value>,
    ) -> Result<String, CallError> {
        let mut request = self
            .auth
            .apply(self.http.client().request(method, url))
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            request = request.json(body);
        }
        let explain = self.explain;
        let classify = |status: u16, headers: &HeaderMap, body: &str| {
            self.http.classify(status, headers, &explain(body), &self.redactor)
        };
        let answer = self.http.call(request, &self.redactor, classify).await;
        answer.map_err(|e| e.map(|error| self.redact(what, error)))
    }

    /// Reads a 2xx body. An unreadable one is transient: a retry looks before it creates anything again.
    pub fn parse<T: DeserializeOwned>(&self, what: &str, body: &str) -> Result<T, DeliveryError> {
        parse_json(body).map_err(|e| self.redact(what, e))
    }

    /// Reads the `key` member of a 2xx JSON body (`{"issue": {…}}`, `{"result": […]}`), transient when missing.
    pub fn parse_member<T: DeserializeOwned>(&self, what: &str, body: &str, key: &str) -> Result<T, DeliveryError> {
        let mut whole: Value = self.parse(what, body)?;
        let member = whole.get_mut(key).map(Value::take).unwrap_or(Value::Null);
        serde_json::from_value(member)
            .map_err(|e| self.redact(what, DeliveryError::transient(format!("unexpected response ({e})"))))
    }
}

/// A failure before any request was sent (a URL that does not parse) is a call that failed without a status.
impl From<DeliveryError> for CallError {
    fn from(error: DeliveryError) -> Self {
        CallError { status: None, error }
    }
}

/// A path segment from a value the API gave us (an id), percent-encoded rather than trusted into a path.
pub fn path_segment(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// One line, its white space folded: what a ticket title may hold.
pub fn one_line(s: &str) -> String {
    super::render::escape::one_line(s)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the ticket receivers' contract tests share.
#[cfg(test)]
pub(crate) mod contract {
    use std::time::Duration;

    use serde_json::Value;
    use wiremock::matchers::any;
    use wiremock::{Mock, MockServer, Respond, ResponseTemplate};

    use crate::domain::Action;
    use crate::receivers::testing::{self, transient_after};
    use crate::receivers::{DeliveryError, Receiver};

    /// Delivers `action`'s notification (with `memo`, or none) to `receiver`, after making any request not mounted on
    /// `server` before fail the test; fails the test when the delivery fails.
    pub async fn deliver(
        server: &MockServer,
        receiver: impl Receiver,
        action: Action,
        memo: Option<Value>,
    ) -> crate::receivers::Delivered {
        testing::deliver_strictly(server, &receiver, &testing::notification(action), memo.as_ref())
            .await
            .expect("delivered")
    }

    /// A resolve with no open ticket found on `server`: nothing is created, nothing remembered.
    pub async fn resolves_nothing(server: &MockServer, receiver: impl Receiver) {
        let out = deliver(server, receiver, Action::Resolve, None).await;
        assert_eq!(out.memo, None);
        assert!(out.detail.contains("nothing to resolve"), "{}", out.detail);
    }

    /// After a crash between creating a ticket and remembering it, an open without a memo finds the ticket on
    /// `server` (which the test has told what to find, which note to expect on it, and to create nothing), and
    /// remembers `memo`, saying `detail`.
    pub async fn an_open_notes_the_ticket_found(
        server: &MockServer,
        receiver: impl Receiver,
        memo: Value,
        detail: &str,
    ) {
        let out = deliver(server, receiver, Action::Open, None).await;
        testing::assert_delivered(&out, Some(memo), detail);
    }

    /// Builds a receiver against a mock server.
    pub type Build = fn(&MockServer) -> Box<dyn Receiver>;

    /// Delivers an update (with `memo`, or none) to the receiver `build` makes for a server answering every request
    /// with `answer`, and returns the failure.
    pub async fn failure(build: Build, memo: Option<Value>, answer: impl Respond + 'static) -> DeliveryError {
        let server = MockServer::start().await;
        Mock::given(any()).respond_with(answer).mount(&server).await;
        build(&server)
            .deliver(&testing::notification(Action::Update), memo.as_ref())
            .await
            .expect_err("the server refuses")
    }

    /// The shared status table as the receiver applies it, updating the ticket `memo` remembers.
    pub async fn follows_the_status_table(build: Build, memo: Value) {
        let fail_with = |answer: ResponseTemplate| failure(build, Some(memo.clone()), answer);
        for status in [400, 401, 403, 404, 422] {
            let e = fail_with(ResponseTemplate::new(status)).await;
            assert!(matches!(e, DeliveryError::Permanent { .. }), "{status}: {e:?}");
            assert!(e.to_string().contains(&format!("HTTP {status}")), "{e}");
        }
        let e = fail_with(ResponseTemplate::new(429).insert_header("Retry-After", "7")).await;
        assert_eq!(transient_after(&e), Some(Duration::from_secs(7)), "{e}");
        for status in [500, 502, 503] {
            let e = fail_with(ResponseTemplate::new(status)).await;
            assert_eq!(transient_after(&e), None, "{status}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_digest_is_sixteen_hex_digits_and_stable() {
        let d = fingerprint_digest("argocd/payments:degraded");
        assert_eq!(d.len(), 16);
        assert!(d.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(d, fingerprint_digest("argocd/payments:degraded"));
        assert_ne!(d, fingerprint_digest("argocd/payments:out_of_sync"));
    }

    #[test]
    fn a_memo_keeps_the_tickets_fields_beside_when_it_was_resolved() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Issue {
            id: u64,
        }
        let open = delivered(Issue { id: 7 }, None, String::new());
        assert_eq!(open.memo, Some(serde_json::json!({ "id": 7 })));
        let read: TicketMemo<Issue> =
            serde_json::from_value(serde_json::json!({ "id": 7, "resolved_at": "2025-03-01T12:00:00Z" })).unwrap();
        assert_eq!(read.ticket, Issue { id: 7 });
        assert!(read.resolved_at.is_some());
    }
}
