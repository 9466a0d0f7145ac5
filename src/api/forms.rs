//! The pages' forms: per open incident, Acknowledge (scope `respond`) and Silence (scope `admin`), shown only to a
//! caller whose credential allows them, posted as plain HTML forms (`application/x-www-form-urlencoded`, which
//! `forgery` lets through on these routes only) to `POST /incidents/{id}/ack` and `/incidents/{id}/silence`; they
//! act, then redirect back (303) to the page the form was on. A `GET` of them never acts.
//!
//! Each form carries a token, HMAC-SHA256(key, action, caller's name, incident id, hour): a form is good for the
//! hour it was made in and the next. The key is `server.link_signing_key` when set, else random per process — so
//! with several replicas the key must be set, or a form made by one is refused by another. A POST without the
//! token, with a wrong or old one, or from a caller whose scope does not allow it — or bound to teams (`teams:`)
//! the incident is not of: its forms are shown on its teams' incidents only — gets a 403 page and changes nothing.
//! A team-bound caller's silence also matches the incident's team, so it is that team's. Without `server.auth` (an
//! open Herald, where anyone may do anything through the API) the forms are shown to everyone, bound to no name,
//! and ask who you are.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use maud::{Markup, html};
use secrecy::ExposeSecret;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::events::read_body;
use super::html::{error_page, or_error_page};
use super::{ApiError, AppContext, Caller};
use crate::configuration::{Scope, Teams};
use crate::domain::{Acknowledgement, IncidentState};
use crate::pipeline::{AckOutcome, IncidentRecord, LinkOutcome, SilenceEnd};

type HmacSha256 = Hmac<Sha256>;

/// A form's token is good for the hour it was made in and the next.
const BUCKET_SECS: i64 = 3600;

/// The key the forms' tokens are signed with.
pub struct FormKey(Vec<u8>);

/// How long an acknowledgement lasts, as the form offers it (value for `for`, words).
const ACK_FOR: &[(&str, &str)] = &[("", "until resolved"), ("1h", "1 h"), ("4h", "4 h"), ("1d", "1 day")];
/// How long a silence lasts, as the form offers it.
const SILENCE_FOR: &[(&str, &str)] = &[
    ("1h", "1 h"),
    ("4h", "4 h"),
    ("1d", "1 day"),
    ("monday", "until Monday 09:00"),
];

impl FormKey {
    /// `server.link_signing_key` when set (every replica then takes each other's forms), else random.
    pub fn of(server: &crate::configuration::ServerSettings) -> Self {
        match &server.link_signing_key {
            Some(k) => FormKey(k.expose_secret().trim().as_bytes().to_vec()),
            None => FormKey(rand::random::<[u8; 32]>().to_vec()),
        }
    }

    fn token(&self, action: FormAction, caller: &str, incident: i64, bucket: i64) -> String {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(format!("herald-form\n{}\n{caller}\n{incident}\n{bucket}", action.as_str()).as_bytes());
        B64.encode(mac.finalize().into_bytes())
    }

    /// Whether `token` is this caller's for this action on this incident, made this hour or the last.
    fn accepts(&self, token: &str, action: FormAction, caller: &str, incident: i64, now: DateTime<Utc>) -> bool {
        let bucket = now.timestamp().div_euclid(BUCKET_SECS);
        [bucket, bucket - 1].iter().fold(false, |ok, b| {
            let expected = self.token(action, caller, incident, *b);
            let equal: bool = expected.as_bytes().ct_eq(token.as_bytes()).into();
            ok | equal
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormAction {
    Acknowledge,
    Silence,
}

impl FormAction {
    fn as_str(self) -> &'static str {
        match self {
            FormAction::Acknowledge => "ack",
            FormAction::Silence => "silence",
        }
    }

    fn scope(self) -> Scope {
        match self {
            FormAction::Acknowledge => Scope::Respond,
            FormAction::Silence => Scope::Admin,
        }
    }
}

/// What forms a page shows its reader: none, Acknowledge, or both; and as whom.
pub struct Forms<'a> {
    key: &'a FormKey,
    /// The credential's name; empty on an open Herald (the form then asks for a name).
    caller: String,
    open: bool,
    can_ack: bool,
    can_silence: bool,
    /// The teams whose incidents the reader acts on: the forms are shown on those only.
    teams: Teams,
    now: DateTime<Utc>,
}

impl<'a> Forms<'a> {
    /// The forms for the reader of `req`.
    pub fn for_request(req: &HttpRequest, ctx: &'a AppContext) -> Self {
        let caller = req.extensions().get::<Caller>().cloned();
        let open = !ctx.auth.enabled();
        let allows = |s: Scope| open || caller.as_ref().is_some_and(|c| c.scope.allows(s));
        Forms {
            key: &ctx.form_key,
            caller: caller.as_ref().map(|c| c.name.clone()).unwrap_or_default(),
            open,
            can_ack: allows(Scope::Respond),
            can_silence: allows(Scope::Admin),
            teams: caller.as_ref().map(|c| c.teams.clone()).unwrap_or_default(),
            now: ctx.pipeline.now(),
        }
    }

    /// The forms for one incident (none once it resolved, or for an event told once), coming back to `back`.
    pub fn for_incident(&self, i: &IncidentRecord, back: &str) -> Markup {
        let open_incident =
            i.state != IncidentState::Resolved && !i.kind.is_informational() && self.teams.allows(&i.team);
        let token = |a: FormAction| {
            self.key
                .token(a, &self.caller, i.id, self.now.timestamp().div_euclid(BUCKET_SECS))
        };
        let acked = i.ack.as_ref().is_some_and(|a| a.active(self.now));
        html! {
            @if open_incident && self.can_ack && !acked {
                (self.form(i.id, "ack", token(FormAction::Acknowledge), back, ACK_FOR, "Acknowledge"))
            }
            @if open_incident && self.can_silence {
                (self.form(i.id, "silence", token(FormAction::Silence), back, SILENCE_FOR, "Silence"))
            }
        }
    }

    /// One incident's form posting to `/incidents/{id}/{path}`: its token, the page to go back to, the name where
    /// none is known, how long (`durations`: value and words), a comment, and the button.
    fn form(&self, id: i64, path: &str, token: String, back: &str, durations: &[(&str, &str)], button: &str) -> Markup {
        html! {
            form.act method="post" action={ "/incidents/" (id) "/" (path) } {
                input type="hidden" name="csrf" value=(token);
                input type="hidden" name="back" value=(back);
                (self.name_field())
                label { "for " select name="for" {
                    @for (value, words) in durations { option value=(value) { (words) } }
                } }
                " "
                input type="text" name="comment" placeholder="comment (optional)" maxlength="4096";
                " "
                button type="submit" { (button) }
            }
        }
    }

    fn name_field(&self) -> Markup {
        html! {
            @if self.open {
                input type="text" name="name" placeholder="your name" required maxlength="256" autocomplete="name";
                " "
            }
        }
    }
}

/// What a form posts.
#[derive(Default)]
struct Posted {
    csrf: String,
    back: String,
    for_: String,
    comment: String,
    name: String,
}

impl Posted {
    fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let mut p = Posted::default();
        let mut seen = std::collections::HashSet::new();
        for (k, v) in url::form_urlencoded::parse(body) {
            if !seen.insert(k.clone()) {
                return Err(ApiError::BadRequest(format!("the form field {k:?} is given twice")));
            }
            let slot = match k.as_ref() {
                "csrf" => &mut p.csrf,
                "back" => &mut p.back,
                "for" => &mut p.for_,
                "comment" => &mut p.comment,
                "name" => &mut p.name,
                other => {
                    return Err(ApiError::BadRequest(format!(
                        "unknown form field {other:?}: the form has csrf, back, for, comment and name"
                    )));
                }
            };
            *slot = v.into_owned();
        }
        Ok(p)
    }
}

/// `POST /incidents/{id}/ack`.
pub(super) async fn acknowledge(
    req: HttpRequest,
    path: web::Path<String>,
    payload: web::Payload,
    ctx: web::Data<AppContext>,
) -> HttpResponse {
    or_error_page(act(FormAction::Acknowledge, &req, &path, payload, &ctx).await)
}

/// `POST /incidents/{id}/silence`.
pub(super) async fn silence(
    req: HttpRequest,
    path: web::Path<String>,
    payload: web::Payload,
    ctx: web::Data<AppContext>,
) -> HttpResponse {
    or_error_page(act(FormAction::Silence, &req, &path, payload, &ctx).await)
}

/// `GET` of a form's address: it never acts; it says where the button is.
pub(super) async fn not_by_get() -> HttpResponse {
    let mut resp = error_page(&ApiError::MethodNotAllowed(
        "this address only takes the Acknowledge and Silence forms of Herald's pages (a POST); opening it does \
         nothing"
            .into(),
    ));
    resp.headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
    resp
}

async fn act(
    action: FormAction,
    req: &HttpRequest,
    path: &str,
    payload: web::Payload,
    ctx: &AppContext,
) -> Result<HttpResponse, ApiError> {
    let id = path
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::BadRequest("the incident id in the address must be a positive number".into()))?;
    // Refused before the body is read: a caller that may not do this learns nothing more.
    super::auth::also_needs(req, ctx, action.scope())?;
    super::auth::may_act_on_incident(req, ctx, id).await?;
    let caller = req.extensions().get::<Caller>().cloned();
    let bind_team = caller.as_ref().is_some_and(|c| c.teams != Teams::All);
    let body = read_body(req, payload, 16 * 1024).await?;
    let posted = Posted::parse(&body)?;
    let now = ctx.pipeline.now();
    let signer = caller.as_ref().map(|c| c.name.as_str()).unwrap_or("");
    if !ctx.form_key.accepts(&posted.csrf, action, signer, id, now) {
        return Err(ApiError::Forbidden(
            "the form's token is missing, wrong or more than an hour old: reload the page and use its form again \
             (nothing was changed)"
                .into(),
        ));
    }
    let by = match caller {
        Some(c) => c.name,
        None if !posted.name.trim().is_empty() => posted.name.trim().to_string(),
        None => {
            return Err(ApiError::Unprocessable(
                "say who you are: the name field is empty".into(),
            ));
        }
    };
    super::acks::check_words(&by, &posted.comment)?;
    match action {
        FormAction::Acknowledge => acknowledge_as(ctx, id, by, &posted, now).await?,
        FormAction::Silence => {
            let end = silence_end(&posted.for_)?;
            match ctx
                .pipeline
                .silence_incident(id, end, &by, &posted.comment, bind_team)
                .await?
            {
                LinkOutcome::Done(_) => {}
                LinkOutcome::Nothing(why) | LinkOutcome::AlreadyUsed(why) => return Err(ApiError::Conflict(why)),
            }
        }
    }
    Ok(HttpResponse::build(StatusCode::SEE_OTHER)
        .insert_header((header::LOCATION, back_to(&posted.back)))
        .insert_header(super::no_store())
        .finish())
}

/// The Acknowledge form's act: incident `id` acknowledged by `by` for as long as the form says.
async fn acknowledge_as(
    ctx: &AppContext,
    id: i64,
    by: String,
    posted: &Posted,
    now: DateTime<Utc>,
) -> Result<(), ApiError> {
    let for_ = match posted.for_.trim() {
        "" => None,
        d => Some(
            crate::configuration::duration::parse(d)
                .map_err(|e| ApiError::BadRequest(format!("for must be a duration such as 1h or 4h: {e}")))?,
        ),
    };
    let until = super::acks::acknowledged_until(None, for_, now)?;
    let ack = Acknowledgement {
        by,
        at: now,
        until,
        comment: posted.comment.trim().to_string(),
    };
    match ctx.pipeline.acknowledge(id, ack).await? {
        AckOutcome::Done(_) => Ok(()),
        AckOutcome::NotFound => Err(ApiError::NotFound(format!("no incident {id}"))),
        AckOutcome::Resolved(_) => Err(ApiError::Conflict(format!(
            "incident {id} has resolved: there is nothing to acknowledge"
        ))),
    }
}

/// When the Silence form's silence ends: `monday`, or a duration from 1 minute to 30 days.
fn silence_end(for_: &str) -> Result<SilenceEnd, ApiError> {
    match for_.trim() {
        "monday" => Ok(SilenceEnd::UntilMonday),
        d => {
            let why = |e: String| {
                ApiError::BadRequest(format!(
                    "for must be a duration from 1m to 30d (such as 1h) or monday: {e}"
                ))
            };
            let d = crate::configuration::duration::parse(d).map_err(|e| why(e.to_string()))?;
            let d = Some(d)
                .filter(|d| (60..=30 * 24 * 3600).contains(&d.as_secs()))
                .and_then(|d| chrono::Duration::from_std(d).ok())
                .ok_or_else(|| why(format!("{d:?} is outside that span")))?;
            Ok(SilenceEnd::For(d))
        }
    }
}

/// Where to go back to: the page the form was on, a path on this Herald; anything else (another site, `//host`,
/// a backslash a browser reads as a slash) is the status page.
fn back_to(back: &str) -> String {
    let local = back.starts_with('/')
        && !back.starts_with("//")
        && back.len() <= 2048
        && !back.chars().any(|c| c == '\\' || c.is_control() || c.is_whitespace());
    if local { back.to_string() } else { "/".into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("t").with_timezone(&Utc)
    }

    #[test]
    fn a_token_is_good_for_its_caller_incident_and_action_this_hour_and_the_next() {
        let key = FormKey(b"0123456789abcdef0123456789abcdef".to_vec());
        let made = at("2026-03-02T10:59:00Z");
        let token = key.token(
            FormAction::Acknowledge,
            "alice",
            7,
            made.timestamp().div_euclid(BUCKET_SECS),
        );
        assert!(key.accepts(&token, FormAction::Acknowledge, "alice", 7, made));
        assert!(key.accepts(&token, FormAction::Acknowledge, "alice", 7, at("2026-03-02T11:30:00Z")));
        assert!(
            !key.accepts(&token, FormAction::Acknowledge, "alice", 7, at("2026-03-02T12:00:00Z")),
            "too old"
        );
        assert!(
            !key.accepts(&token, FormAction::Acknowledge, "bob", 7, made),
            "another caller"
        );
        assert!(
            !key.accepts(&token, FormAction::Acknowledge, "alice", 8, made),
            "another incident"
        );
        assert!(
            !key.accepts(&token, FormAction::Silence, "alice", 7, made),
            "another action"
        );
        assert!(!key.accepts("", FormAction::Acknowledge, "alice", 7, made), "none");
        let other = FormKey(b"another-key-0123456789abcdef0123".to_vec());
        assert!(
            !other.accepts(&token, FormAction::Acknowledge, "alice", 7, made),
            "another key"
        );
    }

    #[test]
    fn going_back_stays_on_this_herald() {
        assert_eq!(
            back_to("/apps/argocd/pay?tz=Europe%2FBerlin"),
            "/apps/argocd/pay?tz=Europe%2FBerlin"
        );
        for away in [
            "https://evil.example/",
            "//evil.example",
            "/\\evil.example",
            "",
            "apps",
            "/a b",
            "/a\nb",
        ] {
            assert_eq!(back_to(away), "/", "{away:?}");
        }
    }
}
