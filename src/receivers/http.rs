//! What every HTTP receiver shares: one reqwest client with the clock that reads `Retry-After` dates ([`Http`]),
//! the one status-code → retry table ([`classify_status`], tested once for all), and the mapping of transport
//! errors, which never quotes the URL (it may hold a key).

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::DeliveryError;
use super::redact::Redactor;
use crate::clock::SharedClock;

/// A receiver's HTTP client: reqwest plus the injected clock, so a `Retry-After` given as a date is read against
/// Herald's "now" (a manual clock in tests), not the machine's.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    clock: SharedClock,
}

impl Http {
    pub fn new(client: reqwest::Client, clock: SharedClock) -> Self {
        Self { client, clock }
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// "Now", as a [`SystemTime`] (what HTTP dates are compared with).
    pub fn now(&self) -> SystemTime {
        SystemTime::from(self.clock.now())
    }

    /// The response's `Retry-After`, in seconds or as an HTTP date.
    pub fn retry_after(&self, headers: &HeaderMap) -> Option<Duration> {
        parse_retry_after(
            headers.get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()),
            self.now(),
        )
    }

    /// The shared classification of a failed response, with its Retry-After.
    pub fn classify(&self, status: u16, headers: &HeaderMap, body: &str) -> DeliveryError {
        classify_status(status, self.retry_after(headers), body)
    }

    /// Reads a failed response into the shared classification.
    pub async fn error_from_response(&self, resp: reqwest::Response) -> DeliveryError {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.unwrap_or_default();
        self.classify(status, &headers, &body)
    }

    /// Sends a request of a REST API: a 2xx answers its body (possibly empty); anything else is `classify`'s
    /// failure (status, headers, body), keeping the status so callers can react to one (a 404 on a remembered
    /// issue means "look for it again").
    pub async fn call(
        &self,
        request: reqwest::RequestBuilder,
        classify: impl FnOnce(u16, &HeaderMap, &str) -> DeliveryError,
    ) -> Result<String, CallError> {
        let resp = request.send().await.map_err(|e| CallError {
            status: None,
            error: transport_error(e),
        })?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let headers = resp.headers().clone();
            let body = resp.text().await.unwrap_or_default();
            return Err(CallError {
                status: Some(status),
                error: classify(status, &headers, &body),
            });
        }
        resp.text().await.map_err(|e| CallError {
            status: Some(status),
            error: transport_error(e),
        })
    }

    /// POSTs a JSON body to an incoming-webhook URL; any 2xx is success and its body is returned. Failures go
    /// through the shared status table (prefixed with `who`), with the URL's secrets removed.
    pub async fn post_json(
        &self,
        url: &str,
        body: &Value,
        redactor: &Redactor,
        who: &str,
    ) -> Result<String, DeliveryError> {
        let resp = self
            .client
            .post(url)
            .json(body)
            .send()
            .await
            .map_err(|e| redactor.apply(transport_error(e)))?;
        if !resp.status().is_success() {
            let e = self.error_from_response(resp).await;
            return Err(redactor.apply(DeliveryError::prefixed(who, e)));
        }
        Ok(resp.text().await.unwrap_or_default())
    }
}

/// A failed [`Http::call`]: the failure, and the HTTP status when there was a response.
pub struct CallError {
    pub status: Option<u16>,
    pub error: DeliveryError,
}

impl CallError {
    /// The same failure reworded (prefixed, secrets removed); the status is kept.
    pub fn map(self, f: impl FnOnce(DeliveryError) -> DeliveryError) -> Self {
        Self {
            status: self.status,
            error: f(self.error),
        }
    }
}

impl From<CallError> for DeliveryError {
    fn from(e: CallError) -> Self {
        e.error
    }
}

/// Reads a 2xx JSON body. An unreadable one is transient: something between Herald and the API may have answered,
/// and a retry looks again before it creates anything.
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, DeliveryError> {
    serde_json::from_str(body).map_err(|e| DeliveryError::transient(format!("unexpected response ({e})")))
}

/// The one status-code → retry table: 408, 425, 429 and 5xx (but 501) are worth retrying; other 4xx are not.
pub fn classify_status(status: u16, retry_after: Option<Duration>, body: &str) -> DeliveryError {
    let snippet: String = body.chars().take(300).collect();
    let reason = if snippet.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {snippet}")
    };
    match status {
        408 | 425 | 429 => DeliveryError::Transient { reason, retry_after },
        501 => DeliveryError::Permanent { reason },
        500..=599 => DeliveryError::Transient { reason, retry_after },
        _ => DeliveryError::Permanent { reason },
    }
}

/// `Retry-After` in seconds or as an HTTP date.
pub fn parse_retry_after(value: Option<&str>, now: SystemTime) -> Option<Duration> {
    let v = value?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Maps a reqwest transport error (no response) to a transient failure, without the URL (it may hold a key).
pub fn transport_error(e: reqwest::Error) -> DeliveryError {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    DeliveryError::transient(format!("{kind}: {}", e.without_url()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_table() {
        let cases = [
            (400, false),
            (401, false),
            (403, false),
            (404, false),
            (408, true),
            (410, false),
            (422, false),
            (429, true),
            (500, true),
            (501, false),
            (502, true),
            (503, true),
            (504, true),
        ];
        for (status, transient) in cases {
            let e = classify_status(status, None, "");
            assert_eq!(
                matches!(e, DeliveryError::Transient { .. }),
                transient,
                "status {status}"
            );
        }
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(parse_retry_after(Some("7"), now), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(parse_retry_after(Some(&later), now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after(Some("soon"), now), None);
        assert_eq!(parse_retry_after(None, now), None);
    }

    #[tokio::test]
    async fn a_retry_after_date_is_read_against_the_injected_clock() {
        use chrono::TimeZone;
        use wiremock::{Mock, MockServer, ResponseTemplate, matchers::any};
        // Years ahead of the machine's clock: only the injected clock makes this a 90-second wait.
        let now = chrono::Utc.with_ymd_and_hms(2040, 1, 1, 0, 0, 0).unwrap();
        let at = httpdate::fmt_http_date(SystemTime::from(now) + Duration::from_secs(90));
        let server = MockServer::start().await;
        Mock::given(any())
            .respond_with(ResponseTemplate::new(503).insert_header("retry-after", at.as_str()))
            .mount(&server)
            .await;
        let http = Http::new(
            reqwest::Client::new(),
            std::sync::Arc::new(crate::clock::ManualClock::new(now)),
        );

        let resp = http.client().get(server.uri()).send().await.unwrap();

        assert_eq!(
            http.error_from_response(resp).await,
            DeliveryError::Transient {
                reason: "HTTP 503".into(),
                retry_after: Some(Duration::from_secs(90)),
            }
        );
    }
}
