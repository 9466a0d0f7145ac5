//! The command line's HTTP client: `herald silence …` and `herald incidents` ([`commands`]) talk to a running
//! Herald's API, as `amtool` talks to Alertmanager. This module owns the requests and the reading of the answers;
//! errors say what to do (a wrong URL, a missing token, a token without the scope).

pub mod commands;

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::domain::Incident;
use crate::routing::Silence;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{url:?} is not Herald's base URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("cannot reach Herald at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Herald answered {status}: {message}{hint}")]
    Refused {
        status: u16,
        message: String,
        hint: &'static str,
    },
    #[error("unexpected answer from {url}: {reason}")]
    Unreadable { url: String, reason: String },
}

/// What `GET /v1/silences` lists: a silence and whether it is in force now.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct ListedSilence {
    #[serde(flatten)]
    pub silence: Silence,
    pub active: bool,
    /// `active`, `pending` (starts later) or `expired` (from a Herald that says so).
    #[serde(default)]
    pub state: Option<String>,
}

impl ListedSilence {
    /// `active`, `pending` or `expired`.
    pub fn state(&self) -> &str {
        match &self.state {
            Some(s) => s,
            None if self.active => "active",
            None => self.silence.state(chrono::Utc::now()),
        }
    }
}

#[derive(serde::Deserialize)]
struct Items<T> {
    items: Vec<T>,
}

pub struct Client {
    base: url::Url,
    token: Option<SecretString>,
    http: reqwest::Client,
}

impl Client {
    /// A client for the Herald at `base` (`http://127.0.0.1:8080`), sending `token` as a bearer token.
    pub fn new(base: &str, token: Option<SecretString>) -> Result<Self, ClientError> {
        let bad = |reason: String| ClientError::BadUrl {
            url: base.to_string(),
            reason,
        };
        let mut url = url::Url::parse(base).map_err(|e| bad(e.to_string()))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(bad("use http:// or https://".into()));
        }
        // `join` replaces the last segment unless the path ends with a slash (Herald behind a path prefix).
        if !url.path().ends_with('/') {
            url.set_path(&format!("{}/", url.path()));
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(15))
            .user_agent(concat!("herald-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(Self {
            base: url,
            token: token.filter(|t| !t.expose_secret().trim().is_empty()),
            http,
        })
    }

    /// Incidents, newest first, filtered as `GET /v1/incidents` filters.
    pub async fn incidents(&self, filters: &[(&str, String)]) -> Result<Vec<Incident>, ClientError> {
        let v: Items<Incident> = self
            .send(self.request(reqwest::Method::GET, "v1/incidents", filters)?)
            .await?;
        Ok(v.items)
    }

    /// The silences in force or still to come (with `expired`, the ended ones too).
    pub async fn silences(&self, expired: bool) -> Result<Vec<ListedSilence>, ClientError> {
        let req = self.request(reqwest::Method::GET, "v1/silences", &[("expired", expired.to_string())])?;
        let v: Items<ListedSilence> = self.send(req).await?;
        Ok(v.items)
    }

    /// Creates a silence from a `POST /v1/silences` body; returns it as stored.
    pub async fn add_silence(&self, body: &Value) -> Result<Silence, ClientError> {
        self.send(self.request(reqwest::Method::POST, "v1/silences", &[])?.json(body))
            .await
    }

    /// Ends a silence now.
    pub async fn expire_silence(&self, id: &str) -> Result<(), ClientError> {
        let path = format!("v1/silences/{}", url_segment(id));
        let _: Value = self.send(self.request(reqwest::Method::DELETE, &path, &[])?).await?;
        Ok(())
    }

    /// `POST /v1/incidents/{id}/ack` with `body`; returns the incident as it is now.
    pub async fn acknowledge(&self, id: i64, body: &Value) -> Result<Incident, ClientError> {
        let path = format!("v1/incidents/{id}/ack");
        self.send(self.request(reqwest::Method::POST, &path, &[])?.json(body))
            .await
    }

    /// `POST /v1/incidents/{id}/unack`; returns the incident as it is now.
    pub async fn unacknowledge(&self, id: i64) -> Result<Incident, ClientError> {
        let path = format!("v1/incidents/{id}/unack");
        self.send(self.request(reqwest::Method::POST, &path, &[])?).await
    }

    /// `GET /v1/oncall`: who `schedule` (every schedule) has on call at `at` (now).
    pub async fn on_call(
        &self,
        schedule: Option<&str>,
        at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<Vec<Value>, ClientError> {
        let mut query = Vec::new();
        if let Some(s) = schedule {
            query.push(("schedule", s.to_string()));
        }
        if let Some(at) = at {
            query.push(("at", at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)));
        }
        let v: Items<Value> = self
            .send(self.request(reqwest::Method::GET, "v1/oncall", &query)?)
            .await?;
        Ok(v.items)
    }

    fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<reqwest::RequestBuilder, ClientError> {
        let mut url = self.base.join(path).map_err(|e| ClientError::BadUrl {
            url: self.base.to_string(),
            reason: e.to_string(),
        })?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let req = self.http.request(method, url);
        Ok(match &self.token {
            Some(t) => req.bearer_auth(t.expose_secret()),
            None => req,
        })
    }

    async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T, ClientError> {
        let url = self.base.to_string();
        let resp = req.send().await.map_err(|e| ClientError::Unreachable {
            url: url.clone(),
            reason: e.without_url().to_string(),
        })?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| ClientError::Unreachable {
            url: url.clone(),
            reason: e.without_url().to_string(),
        })?;
        if !status.is_success() {
            let message = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(300).collect());
            let hint = match (status.as_u16(), self.token.is_some()) {
                (401, false) => " (give a token: --token or HERALD_TOKEN)",
                (401, true) => " (the token is not one Herald accepts)",
                _ => "",
            };
            return Err(ClientError::Refused {
                status: status.as_u16(),
                message,
                hint,
            });
        }
        serde_json::from_slice(&body).map_err(|e| ClientError::Unreadable {
            url,
            reason: e.to_string(),
        })
    }
}

/// `id` as one path segment (a silence id is a UUID, but what a person types is not checked here).
fn url_segment(id: &str) -> String {
    url::form_urlencoded::byte_serialize(id.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_under_the_base_url_even_behind_a_prefix() {
        let c = Client::new("http://herald.example/ops", None).expect("client");
        let req = c
            .request(reqwest::Method::GET, "v1/incidents", &[("state", "firing".into())])
            .expect("req")
            .build()
            .expect("build");
        assert_eq!(
            req.url().as_str(),
            "http://herald.example/ops/v1/incidents?state=firing"
        );
        assert!(Client::new("herald.example", None).is_err());
        assert!(Client::new("ftp://herald.example", None).is_err());
        assert_eq!(url_segment("a b/c"), "a%20b%2Fc");
    }
}
