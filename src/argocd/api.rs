//! The Argo CD API client used to confirm a condition in the cluster before a timed rule fires
//! ("confirm in the cluster, not in Git"): `GET /api/v1/applications/{name}?appNamespace=…`.

use secrecy::ExposeSecret;

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
            .build()
            .unwrap_or_default();
        Self { http, settings }
    }

    pub async fn application(&self, app: &AppId) -> Result<Snapshot, ApiError> {
        let base = self.settings.url.trim_end_matches('/');
        let resp = self
            .http
            .get(format!(
                "{base}/api/v1/applications/{}?appNamespace={}",
                app.name, app.namespace
            ))
            .bearer_auth(self.settings.token.expose_secret())
            .send()
            .await
            .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))?;
        match resp.status().as_u16() {
            200 => {}
            404 => return Err(ApiError::NotFound(app.clone())),
            s => return Err(ApiError::Status(s)),
        }
        let value: serde_json::Value = resp
            .json()
            .await
            .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))?;
        let mut snap = super::from_value(&value)?;
        // What the API says is the state now.
        snap.observed_at = None;
        Ok(snap)
    }
}
