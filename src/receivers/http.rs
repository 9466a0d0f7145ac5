//! What every HTTP receiver shares: one reqwest client with the clock that reads `Retry-After` dates ([`Http`]) and
//! a redirect policy that never carries a request to another origin ([`client_builder`]), the one status-code →
//! retry table ([`classify_status`], tested once for all), and the mapping of transport errors, which never quotes
//! the URL (it may hold a key). Every failure text passes through the receiver's [`Redactor`] before it is cut.

use std::time::{Duration, SystemTime};

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;

use super::DeliveryError;
use super::redact::Redactor;
use crate::clock::SharedClock;

/// How much of a downstream's error body a failure reason keeps.
const BODY_SNIPPET_CHARS: usize = 300;
/// Redirects followed at most, all within the first URL's origin.
const MAX_REDIRECTS: usize = 5;

/// JSON as chat APIs want it: Slack's Web API warns about a body without a charset.
pub const JSON_UTF8: &str = "application/json; charset=utf-8";

/// The reqwest client every receiver uses: redirects are followed only within the origin (scheme, host and port)
/// of the URL first asked for. A 307 to another origin would forward the POST body and the static headers (a
/// token, say) to whoever the first server names; it is answered as the failure it is instead.
pub fn client_builder() -> reqwest::ClientBuilder {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error("too many redirects")
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder().redirect(policy)
}

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

    /// The shared classification of a failed response, with its Retry-After. The body is scrubbed whole before
    /// [`classify_status`] keeps the start of it.
    pub fn classify(&self, status: u16, headers: &HeaderMap, body: &str, redactor: &Redactor) -> DeliveryError {
        redactor.apply(classify_status(
            status,
            self.retry_after(headers),
            &redactor.scrub(body),
        ))
    }

    /// Reads a failed response into the shared classification, secrets removed.
    pub async fn error_from_response(&self, resp: reqwest::Response, redactor: &Redactor) -> DeliveryError {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.unwrap_or_default();
        self.classify(status, &headers, &body, redactor)
    }

    /// Sends `request` and answers its 2xx response; a transport failure or any other status is the shared
    /// classification, with `redactor`'s secrets removed.
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
        redactor: &Redactor,
    ) -> Result<reqwest::Response, DeliveryError> {
        let resp = request.send().await.map_err(|e| redactor.apply(transport_error(e)))?;
        if !resp.status().is_success() {
            return Err(self.error_from_response(resp, redactor).await);
        }
        Ok(resp)
    }

    /// Sends a request of a REST API: a 2xx answers its body (possibly empty); anything else is `classify`'s
    /// failure (status, headers, and the body already scrubbed by `redactor`), keeping the status so callers can
    /// react to one (a 404 on a remembered issue means "look for it again").
    pub async fn call(
        &self,
        request: reqwest::RequestBuilder,
        redactor: &Redactor,
        classify: impl FnOnce(u16, &HeaderMap, &str) -> DeliveryError,
    ) -> Result<String, CallError> {
        let resp = request.send().await.map_err(|e| CallError {
            status: None,
            error: redactor.apply(transport_error(e)),
        })?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let headers = resp.headers().clone();
            let body = resp.text().await.unwrap_or_default();
            return Err(CallError {
                status: Some(status),
                error: redactor.apply(classify(status, &headers, &redactor.scrub(&body))),
            });
        }
        resp.text().await.map_err(|e| CallError {
            status: Some(status),
            error: redactor.apply(transport_error(e)),
        })
    }

    /// POSTs a JSON body (UTF-8, said so in the Content-Type) to an incoming-webhook URL; any 2xx is success and
    /// its body is returned. Failures go through the shared status table (prefixed with `who`), with the URL's
    /// secrets removed.
    pub async fn post_json(
        &self,
        url: &str,
        body: &Value,
        redactor: &Redactor,
        who: &str,
    ) -> Result<String, DeliveryError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| DeliveryError::permanent(format!("{who}: cannot encode the body: {e}")))?;
        let request = (self.client.post(url))
            .header(CONTENT_TYPE, HeaderValue::from_static(JSON_UTF8))
            .body(bytes);
        let resp = (self.send(request, redactor).await).map_err(|e| redactor.apply(DeliveryError::prefixed(who, e)))?;
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

/// The start of a downstream's error body, for a failure reason. `body` must already be scrubbed: a secret cut in
/// half here would no longer be recognised.
pub fn snippet(body: &str) -> String {
    body.chars().take(BODY_SNIPPET_CHARS).collect()
}

/// The one status-code → retry table: 408, 425, 429 and 5xx (but 501) are worth retrying; other 4xx are not, and
/// neither is a redirect the client did not follow (to another origin). `body` must already be scrubbed.
pub fn classify_status(status: u16, retry_after: Option<Duration>, body: &str) -> DeliveryError {
    let snippet = snippet(body);
    let what = if (300..400).contains(&status) {
        format!("HTTP {status} (a redirect to another origin is not followed: configure the final URL)")
    } else {
        format!("HTTP {status}")
    };
    let reason = if snippet.is_empty() {
        what
    } else {
        format!("{what}: {snippet}")
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
            http.error_from_response(resp, &Redactor::default()).await,
            DeliveryError::Transient {
                reason: "HTTP 503".into(),
                retry_after: Some(Duration::from_secs(90)),
            }
        );
    }

    #[tokio::test]
    async fn a_secret_at_the_length_limit_is_scrubbed_before_the_body_is_cut() {
        use wiremock::{Mock, MockServer, ResponseTemplate, matchers::any};
        let secret = "xoxb-0123456789-abcdefghij";
        // The secret starts 10 characters before the cut: cutting first would leave its head, unrecognisable.
        let body = format!("{}{secret} was refused", "x".repeat(BODY_SNIPPET_CHARS - 10));
        let server = MockServer::start().await;
        Mock::given(any())
            .respond_with(ResponseTemplate::new(401).set_body_string(body))
            .mount(&server)
            .await;
        let http = Http::new(client_builder().build().unwrap(), crate::receivers::testing::clock());
        let redactor = Redactor::default().secret(secret);

        let resp = http.client().get(server.uri()).send().await.unwrap();
        let e = http.error_from_response(resp, &redactor).await;

        let text = format!("{e} {e:?}");
        assert!(!text.contains("xoxb-0123"), "{text}");
        assert!(text.contains("HTTP 401: xxx"), "{text}");
    }

    #[tokio::test]
    async fn a_redirect_is_followed_within_the_origin_and_never_to_another() {
        use wiremock::matchers::{header, method, path};
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let elsewhere = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200))
            .expect(0)
            .named("the other origin")
            .mount(&elsewhere)
            .await;
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/moved"))
            .respond_with(ResponseTemplate::new(307).insert_header("location", "/hook"))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/hook"))
            .and(header("authorization", "Bearer static-token"))
            .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/away"))
            .respond_with(
                ResponseTemplate::new(307).insert_header("location", format!("{}/steal", elsewhere.uri()).as_str()),
            )
            .expect(1)
            .mount(&server)
            .await;
        let http = Http::new(client_builder().build().unwrap(), crate::receivers::testing::clock());
        let post = |p: &str| {
            http.client()
                .post(format!("{}{p}", server.uri()))
                .header("authorization", "Bearer static-token")
                .body("{}")
        };

        let same = http
            .call(post("/moved"), &Redactor::default(), |s, _, b| {
                classify_status(s, None, b)
            })
            .await;
        let away = http
            .call(post("/away"), &Redactor::default(), |s, _, b| {
                classify_status(s, None, b)
            })
            .await;

        assert_eq!(same.ok().as_deref(), Some("ok"));
        let e = away.expect_err("a redirect to another origin fails").error;
        assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
        assert!(e.to_string().contains("HTTP 307"), "{e}");
        assert!(elsewhere.received_requests().await.unwrap_or_default().is_empty());
    }
}
