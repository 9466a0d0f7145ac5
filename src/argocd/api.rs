//! The Argo CD API client (a read-only account's token): one Application (`GET /api/v1/applications/{name}`), to
//! confirm a condition before a timed rule fires; the listing (`GET /api/v1/applications`, only the fields Herald
//! reads), for the periodic resync; and the event stream (`GET /api/v1/stream/applications`, newline-delimited JSON),
//! for `argocd.api.watch`. Every Application it returns goes through the same parser as a webhook body.

use secrecy::ExposeSecret;
use serde_json::Value;

use super::{AppId, PayloadError, Snapshot};
use crate::configuration::ArgoCdApiSettings;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("the Argo CD API could not be reached: {0}")]
    Unreachable(String),
    #[error("the Argo CD API answered {0}")]
    Status(u16),
    #[error("the Argo CD API has no Application {0}")]
    NotFound(AppId),
    #[error("the Argo CD API returned an Application Herald cannot read: {0}")]
    Payload(#[from] PayloadError),
    #[error("the Argo CD API returned a listing Herald cannot read: {0}")]
    Listing(String),
}

/// The fields of each Application Herald reads (`argocd::from_value`): asking for these only keeps a listing of
/// 10,000 Applications small (no managed fields, no summary, no source hydrator state).
pub const LIST_FIELDS: &[&str] = &[
    "items.metadata.name",
    "items.metadata.namespace",
    "items.metadata.uid",
    "items.metadata.labels",
    "items.metadata.annotations",
    "items.metadata.deletionTimestamp",
    "items.spec.project",
    "items.spec.destination",
    "items.spec.syncPolicy",
    "items.spec.source",
    "items.spec.sources",
    "items.status.sync",
    "items.status.health",
    "items.status.operationState",
    "items.status.resources",
    "items.status.conditions",
    "items.status.history",
    "items.status.reconciledAt",
];

/// One complete listing: every Application the token may see (in the configured projects), parsed. Items that
/// cannot be parsed are counted, not fatal: one odd Application must not stop the others from being seen.
#[derive(Debug, Default)]
pub struct Listing {
    pub apps: Vec<Snapshot>,
    pub unreadable: Vec<String>,
}

/// One event of the stream.
#[derive(Debug)]
pub enum WatchEvent {
    /// ADDED or MODIFIED: the Application as it is now.
    Changed(Box<Snapshot>),
    /// DELETED: it is gone.
    Deleted(AppId),
}

#[derive(Clone)]
pub struct ArgoCdApi {
    http: reqwest::Client,
    settings: ArgoCdApiSettings,
}

impl ArgoCdApi {
    pub fn new(settings: ArgoCdApiSettings) -> Self {
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self { http, settings }
    }

    pub fn settings(&self) -> &ArgoCdApiSettings {
        &self.settings
    }

    /// `path` under the configured base URL, with `query` (percent-encoded).
    fn url(&self, path: &str, query: &[(&str, &str)]) -> Result<url::Url, ApiError> {
        let mut url = url::Url::parse(&format!("{}{path}", self.settings.url.trim_end_matches('/')))
            .map_err(|e| ApiError::Unreachable(format!("argocd.api.url is not a URL: {e}")))?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    fn projects_query(&self) -> Vec<(&str, &str)> {
        self.settings
            .projects
            .iter()
            .map(|p| ("projects", p.as_str()))
            .collect()
    }

    async fn get(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, ApiError> {
        request
            .bearer_auth(self.settings.token.expose_secret())
            .send()
            .await
            .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))
    }

    pub async fn application(&self, app: &AppId) -> Result<Snapshot, ApiError> {
        let url = self.url(
            &format!("/api/v1/applications/{}", app.name),
            &[("appNamespace", app.namespace.as_str())],
        )?;
        let request = self.http.get(url);
        let resp = self.get(request).await?;
        match resp.status().as_u16() {
            200 => {}
            404 => return Err(ApiError::NotFound(app.clone())),
            s => return Err(ApiError::Status(s)),
        }
        let value: Value = resp
            .json()
            .await
            .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))?;
        Ok(from_api(&value)?)
    }

    /// Every Application, in the configured projects (all when none are configured).
    pub async fn list(&self) -> Result<Listing, ApiError> {
        let fields = LIST_FIELDS.join(",");
        let mut query = self.projects_query();
        query.push(("fields", &fields));
        let request = self.http.get(self.url("/api/v1/applications", &query)?);
        let resp = self.get(request).await?;
        match resp.status().as_u16() {
            200 => {}
            s => return Err(ApiError::Status(s)),
        }
        let value: Value = resp
            .json()
            .await
            .map_err(|e| ApiError::Listing(e.without_url().to_string()))?;
        parse_listing(&value)
    }

    /// Opens the event stream; read it with [`Stream::next`].
    pub async fn watch(&self) -> Result<Stream, ApiError> {
        // The stream stays open: no overall timeout, only the connect timeout of the client's own settings.
        let http = reqwest::Client::builder()
            .connect_timeout(self.settings.timeout)
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        let request = http.get(self.url("/api/v1/stream/applications", &self.projects_query())?);
        let resp = self.get(request).await?;
        match resp.status().as_u16() {
            200 => Ok(Stream {
                resp,
                buffer: Vec::new(),
            }),
            s => Err(ApiError::Status(s)),
        }
    }
}

/// The open event stream: newline-delimited `{"result": {"type": …, "application": {…}}}` objects.
pub struct Stream {
    resp: reqwest::Response,
    buffer: Vec<u8>,
}

/// A line longer than this is not an Application event; the stream is dropped and re-opened after a resync.
const MAX_LINE: usize = 16 * 1024 * 1024;

impl Stream {
    /// The next event; `Ok(None)` when the server closed the stream.
    pub async fn next(&mut self) -> Result<Option<WatchEvent>, ApiError> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if let Some(event) = parse_event(&line)? {
                    return Ok(Some(event));
                }
                continue;
            }
            if self.buffer.len() > MAX_LINE {
                return Err(ApiError::Listing("a stream line is longer than 16 MiB".into()));
            }
            match self.resp.chunk().await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                Ok(None) => {
                    let rest = std::mem::take(&mut self.buffer);
                    return match parse_event(&rest)? {
                        Some(event) => Ok(Some(event)),
                        None => Ok(None),
                    };
                }
                Err(e) => return Err(ApiError::Unreachable(e.without_url().to_string())),
            }
        }
    }
}

/// An Application read from the API: what it says is the state now (no body time), marked as from the API.
fn from_api(value: &Value) -> Result<Snapshot, PayloadError> {
    let mut snap = super::from_value(value)?;
    super::caps::bound(&mut snap);
    snap.observed_at = None;
    snap.source = super::Source::Api;
    Ok(snap)
}

fn parse_listing(value: &Value) -> Result<Listing, ApiError> {
    let items = match value.get("items") {
        // Argo CD answers `"items": null` when there are none.
        None | Some(Value::Null) => return Ok(Listing::default()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ApiError::Listing("`items` is not a list".into())),
    };
    let mut listing = Listing::default();
    for (i, item) in items.iter().enumerate() {
        match from_api(item) {
            Ok(snap) => listing.apps.push(snap),
            Err(e) => listing.unreadable.push(format!("items[{i}]: {e}")),
        }
    }
    Ok(listing)
}

/// One stream line; blank lines and keep-alives are skipped (`None`).
fn parse_event(line: &[u8]) -> Result<Option<WatchEvent>, ApiError> {
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(line).map_err(|e| ApiError::Listing(format!("stream line: {e}")))?;
    if let Some(err) = value.get("error") {
        let message = err.get("message").and_then(Value::as_str).unwrap_or("unknown error");
        return Err(ApiError::Listing(format!("the stream reported an error: {message}")));
    }
    let Some(result) = value.get("result") else {
        return Ok(None);
    };
    let kind = result.get("type").and_then(Value::as_str).unwrap_or_default();
    let Some(app) = result.get("application") else {
        return Ok(None);
    };
    let snap = from_api(app)?;
    Ok(Some(match kind {
        "DELETED" => WatchEvent::Deleted(snap.app),
        _ => WatchEvent::Changed(Box::new(snap)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn app(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "argocd", "uid": format!("uid-{name}")},
               "spec": {"project": "default"},
               "status": {"sync": {"status": "Synced"}, "health": {"status": "Healthy"}}})
    }

    #[test]
    fn a_listing_parses_every_readable_item_and_counts_the_rest() {
        let listing = parse_listing(&json!({"items": [app("a"), {"metadata": {}}, app("b")]})).expect("listing");
        let names: Vec<&str> = listing.apps.iter().map(|s| s.app.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(listing.unreadable.len(), 1);
        assert!(
            listing.unreadable[0].starts_with("items[1]: "),
            "{:?}",
            listing.unreadable
        );
        assert!(parse_listing(&json!({"items": null})).expect("empty").apps.is_empty());
        assert!(parse_listing(&json!({"items": 3})).is_err());
    }

    #[test]
    fn stream_lines_become_events() {
        let line = |t: &str| serde_json::to_vec(&json!({"result": {"type": t, "application": app("a")}})).unwrap();
        assert!(matches!(parse_event(&line("ADDED")), Ok(Some(WatchEvent::Changed(s))) if s.app.name == "a"));
        assert!(matches!(
            parse_event(&line("MODIFIED")),
            Ok(Some(WatchEvent::Changed(_)))
        ));
        assert!(matches!(parse_event(&line("DELETED")), Ok(Some(WatchEvent::Deleted(a))) if a.name == "a"));
        assert!(matches!(parse_event(b"\n"), Ok(None)));
        assert!(parse_event(br#"{"error": {"message": "permission denied"}}"#).is_err());
        assert!(parse_event(b"{not json").is_err());
    }

    #[test]
    fn the_listing_asks_for_every_field_the_parser_reads() {
        for field in [
            "metadata.uid",
            "metadata.deletionTimestamp",
            "status.operationState",
            "status.resources",
        ] {
            assert!(LIST_FIELDS.contains(&format!("items.{field}").as_str()), "{field}");
        }
    }
}
