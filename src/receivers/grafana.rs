//! The Grafana annotations receiver (`grafana: {url, token, dashboard_uid, tags}`): each deployment (a change: a
//! successful sync that deployed a new revision, decided once in `routing::change`) is an annotation at the time
//! the sync finished, `POST {url}/api/annotations` with a service account's token, so dashboards show what was
//! deployed where their graphs move. It takes no incidents.
//!
//! Grafana answers 200 `{"message": "Annotation added", "id": 1}`. A 400 (an unknown `dashboardUID`, an invalid
//! body) is permanent with Grafana's message; 401 and 403 are permanent with what to fix (the token, its
//! `annotations:create` permission); 429 and 5xx are retried.

use std::sync::Arc;

use reqwest::Method;
use reqwest::header::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{CallError, Http, classify_status, parse_retry_after};
use super::redact::Redactor;
use super::{
    Capabilities, Delivered, DeliveryError, Integration, Memo, Receiver, Sections, Shared, digest_refused,
    incident_refused,
};
use crate::configuration::{ConfigError, ReceiverSettings, check_url, invalid};
use crate::domain::notification::short_revision as short;
use crate::domain::{Action, Body, Change, Notification};
use crate::receivers::render::escape;

/// `grafana: {url, token, dashboard_uid, tags}` (`token_file` works).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Grafana's base URL (`https://grafana.example.com`, or under a path).
    pub url: String,
    /// A service account's token with `annotations:create` (Editor, or a role granting it).
    pub token: SecretString,
    /// Puts the annotations on this dashboard only; without it they are organization annotations, shown by any
    /// dashboard whose annotation query filters on their tags.
    #[serde(default)]
    pub dashboard_uid: Option<String>,
    /// Tags added to Herald's own (`herald`, `app:…`, `instance:…`, `team:…`, `revision:…`).
    #[serde(default)]
    pub tags: Vec<String>,
}

impl Integration for Config {
    /// An annotation per deployment; no incidents.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            change_events: true,
            ..Capabilities::SYNCS_ONLY
        }
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        check_url(errors, &format!("{path}.url"), &self.url);
        if self.dashboard_uid.as_deref().is_some_and(|u| u.trim().is_empty()) {
            errors.push(invalid(
                format!("{path}.dashboard_uid"),
                "is empty: leave it out for organization annotations",
            ));
        }
        for (i, tag) in self.tags.iter().enumerate() {
            if tag.trim().is_empty() {
                errors.push(invalid(format!("{path}.tags[{i}]"), "is empty"));
            }
        }
    }

    fn build(&self, _r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(Grafana::new(self.clone(), shared.http.clone())))
    }
}

pub struct Grafana {
    settings: Config,
    http: Http,
    redactor: Redactor,
}

/// What `n` becomes at Grafana: the annotation of its change, or of a test; `None` for anything else.
pub fn annotation(settings: &Config, n: &Notification) -> Option<Value> {
    let (time, text, mut tags) = match (&n.body, n.action) {
        (Body::Change(c), _) => (c.finished_at.timestamp_millis(), text(c), tags(c)),
        (_, Action::Test) => (
            n.created_at.timestamp_millis(),
            "[TEST] Herald test annotation: nothing was deployed".to_string(),
            vec!["herald".to_string(), "test".to_string()],
        ),
        _ => return None,
    };
    for t in &settings.tags {
        if !tags.contains(t) {
            tags.push(t.clone());
        }
    }
    let mut body = json!({ "time": time, "text": text, "tags": tags });
    if let Some(uid) = &settings.dashboard_uid {
        body["dashboardUID"] = json!(uid);
    }
    Some(body)
}

/// What was deployed, in one line of escaped HTML (Grafana shows an annotation's text as sanitized HTML):
/// `Deployed payments-api: 1111111 → 2222222, started by alice`, the instance before the name outside the
/// default one, and Argo CD's page of it as a link when known.
pub fn text(c: &Change) -> String {
    let revisions = match &c.previous_revision {
        Some(before) => format!("{} → {}", short(before), short(&c.revision)),
        None => short(&c.revision).to_string(),
    };
    let line = escape::html(&format!(
        "Deployed {}: {revisions}, started by {}",
        c.app_title(),
        c.initiator
    ));
    match &c.app_url {
        Some(u) => format!("{line} (<a href=\"{}\">Argo CD</a>)", escape::html(u)),
        None => line,
    }
}

/// Herald's tags, each one token Grafana filters on: `herald`, `app:<name>`, `instance:<instance>`,
/// `team:<team>` (when known), `revision:<short revision>`.
pub fn tags(c: &Change) -> Vec<String> {
    let instance = match crate::domain::is_default_instance(&c.instance) {
        true => crate::domain::DEFAULT_INSTANCE,
        false => c.instance.as_str(),
    };
    let mut tags = vec![
        "herald".to_string(),
        format!("app:{}", c.app_name),
        format!("instance:{instance}"),
    ];
    if !c.team.is_empty() {
        tags.push(format!("team:{}", c.team));
    }
    tags.push(format!("revision:{}", short(&c.revision)));
    tags
}

/// Grafana's errors: 401 and 403 are permanent with what to fix, the rest the shared table (400 permanent, 429
/// and 5xx transient, Retry-After honoured). `body` is already scrubbed.
fn classify(status: u16, headers: &HeaderMap, body: &str, now: std::time::SystemTime) -> DeliveryError {
    let retry_after = parse_retry_after(
        headers.get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()),
        now,
    );
    let e = classify_status(status, retry_after, body);
    let hint = match status {
        401 => "the token is not valid (a service account token, `glsa_…`, expired or deleted?)",
        403 => {
            "the token lacks the annotations:create permission (give its service account the Editor role, or a role with annotations:create on the dashboard)"
        }
        400 => "Grafana refused the annotation (is dashboard_uid a dashboard of this organization?)",
        _ => return e,
    };
    e.map_reason(|reason| format!("{hint}: {reason}"))
}

impl Grafana {
    pub fn new(settings: Config, http: Http) -> Self {
        let redactor = Redactor::default()
            .secret(settings.token.expose_secret())
            .url_credentials(&settings.url);
        Self {
            settings,
            http,
            redactor,
        }
    }

    fn url(&self) -> Result<reqwest::Url, DeliveryError> {
        let invalid = || DeliveryError::permanent("grafana: url is not a base URL");
        let mut url = reqwest::Url::parse(&self.settings.url).map_err(|_| invalid())?;
        url.path_segments_mut()
            .map_err(|_| invalid())?
            .pop_if_empty()
            .extend(["api", "annotations"]);
        Ok(url)
    }

    async fn post(&self, annotation: &Value) -> Result<Delivered, DeliveryError> {
        let rb = (self.http.client())
            .request(Method::POST, self.url()?)
            .bearer_auth(self.settings.token.expose_secret())
            .header(reqwest::header::ACCEPT, "application/json")
            .json(annotation);
        let classify = |status: u16, headers: &HeaderMap, body: &str| classify(status, headers, body, self.http.now());
        let text = (self.http.call(rb, &self.redactor, classify).await).map_err(|e: CallError| {
            self.redactor
                .apply(DeliveryError::prefixed("grafana annotation", e.error))
        })?;
        let id = serde_json::from_str::<Value>(&text).ok().and_then(|v| v["id"].as_i64());
        Ok(Delivered {
            memo: None,
            detail: match id {
                Some(id) => format!("added annotation {id}"),
                None => "added the annotation".into(),
            },
        })
    }
}

#[async_trait::async_trait]
impl Receiver for Grafana {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        if let Some(annotation) = annotation(&self.settings, n) {
            return self.post(&annotation).await;
        }
        match n.action {
            Action::Digest => Err(digest_refused("grafana")),
            _ => Err(incident_refused("grafana")),
        }
    }
}

#[cfg(test)]
mod tests;
