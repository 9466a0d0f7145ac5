//! The generic webhook receiver: POSTs every notification as versioned JSON to a configured URL, with optional
//! static headers and, when `hmac_secret` is set, a signature of the send time and the exact body bytes
//! (`Herald-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`, as Stripe and Svix sign), so the
//! receiving side can check the message came from Herald and refuse a captured request replayed later. The URL,
//! the header values and the signing key are secrets: they never appear in errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use sha2::Sha256;

use super::http::Http;
use super::redact::Redactor;
use super::{Capabilities, Delivered, DeliveryError, Integration, Memo, Receiver, Sections, Shared};
use crate::configuration::{ConfigError, ReceiverSettings};
use crate::domain::{Body, Notification};
use crate::receivers::render;

/// `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`, keyed with `hmac_secret`.
pub const SIGNATURE_HEADER: &str = "herald-signature";

/// `webhook: {url, hmac_secret, headers}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub url: SecretString,
    pub hmac_secret: Option<SecretString>,
    #[serde(default)]
    pub headers: BTreeMap<String, SecretString>,
}

impl Integration for Config {
    fn capabilities(&self) -> Capabilities {
        Capabilities::MESSAGES
    }

    /// The URL and headers are checked when the receiver is built: a bad one fails each delivery, naming it
    /// without quoting the secret.
    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        crate::configuration::check_secret_url(errors, &format!("{path}.url"), &self.url);
    }

    fn build(&self, _r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(Webhook::new(self.clone(), shared.http.clone())))
    }
}

pub struct Webhook {
    url: Result<reqwest::Url, String>,
    hmac_secret: Option<SecretString>,
    /// The static headers, checked once; a bad one fails every delivery with a message naming it.
    headers: Result<HeaderMap, String>,
    http: Http,
    redactor: Redactor,
}

impl Webhook {
    pub fn new(settings: Config, http: Http) -> Self {
        let url = reqwest::Url::parse(settings.url.expose_secret())
            .map_err(|e| format!("webhook.url is not a valid URL: {e}"));
        let headers = static_headers(&settings);
        let mut redactor = Redactor::default().url(settings.url.expose_secret());
        for value in settings.headers.values() {
            redactor = redactor.secret(value.expose_secret());
            // `Bearer <token>` echoed as the token alone, or `Basic <base64>`.
            if let Some((_, credential)) = value.expose_secret().split_once(' ') {
                redactor = redactor.secret(credential.trim());
            }
        }
        if let Some(key) = &settings.hmac_secret {
            redactor = redactor.secret(key.expose_secret());
        }
        Self {
            url,
            hmac_secret: settings.hmac_secret,
            headers,
            http,
            redactor,
        }
    }
}

fn static_headers(settings: &Config) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in &settings.headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("webhook.headers: {name:?} is not a valid header name"))?;
        // The value is a secret (a token, say): the error names the header only.
        let mut value = HeaderValue::from_str(value.expose_secret())
            .map_err(|_| format!("webhook.headers.{name}: the value is not a valid header value"))?;
        value.set_sensitive(true);
        map.insert(header, value);
    }
    Ok(map)
}

/// The hex HMAC-SHA256 of `body` keyed with `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// The [`SIGNATURE_HEADER`] value for `body` sent at `timestamp` (Unix seconds): the signed text is
/// `"{timestamp}.{body}"`, so the time cannot be changed without the key, and a receiver that refuses old
/// timestamps refuses a captured request replayed later.
pub fn signature_header(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut signed = format!("{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    format!("t={timestamp},v1={}", signature(secret, &signed))
}

pub fn body(n: &Notification) -> serde_json::Value {
    let mut body = serde_json::json!({
        "version": "1",
        "action": n.action.as_str(),
        "receiver": n.receiver,
        "thread_key": n.thread_key,
        "title": n.title,
        "reason": n.reason,
        "incidents": n.incidents(),
        "text": render::text(n),
    });
    // "Acknowledge all 40" under a message about a large group (each incident carries its own `actions`).
    if !n.group_actions.is_empty() {
        body["group_actions"] = serde_json::json!(n.group_actions);
    }
    // A digest travels as its own structured field, beside its text.
    if let Body::Digest(d) = &n.body {
        body["digest"] = serde_json::json!(d);
    }
    body
}

#[async_trait::async_trait]
impl Receiver for Webhook {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let url = self
            .url
            .clone()
            .map_err(|e| self.redactor.apply(DeliveryError::permanent(e)))?;
        let mut headers = self
            .headers
            .clone()
            .map_err(|e| self.redactor.apply(DeliveryError::permanent(e)))?;
        let bytes = serde_json::to_vec(&body(n))
            .map_err(|e| DeliveryError::permanent(format!("cannot encode the body: {e}")))?;
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(secret) = &self.hmac_secret {
            let now = self.http.clock().now().timestamp();
            let sig = signature_header(secret.expose_secret().as_bytes(), now, &bytes);
            // Digits, hex digits, `t=`, `,` and `v1=` are always a valid header value.
            if let Ok(sig) = HeaderValue::from_str(&sig) {
                headers.insert(SIGNATURE_HEADER, sig);
            }
        }
        let request = self.http.client().post(url).headers(headers).body(bytes);
        let resp = self.http.send(request, &self.redactor).await?;
        Ok(Delivered {
            memo: None,
            detail: format!("posted, HTTP {}", resp.status().as_u16()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::clock::ManualClock;
    use crate::domain::{Action, Incident};
    use crate::receivers::testing;

    const SECRET_PATH: &str = "/hooks/T0001/s3cr3t-path-token";

    fn settings(url: String) -> Config {
        Config {
            url: SecretString::from(url),
            hmac_secret: None,
            headers: BTreeMap::new(),
        }
    }

    /// Two applications of the payments team, with summaries that need escaping in JSON.
    fn notification() -> Notification {
        let mut n = testing::notification(Action::Open);
        n.receiver = "team-hook".into();
        n.thread_key = "team=payments,kind=degraded".into();
        n.title = "2 applications degraded".into();
        *crate::receivers::testing::incidents_of(&mut n) = ["payments-api", "payments-worker"]
            .iter()
            .map(|app| Incident {
                fingerprint: format!("argocd/{app}/degraded"),
                summary: format!("{app} is Degraded: \"quoted\" <and> escaped"),
                app_name: app.to_string(),
                ..testing::incident()
            })
            .collect();
        n
    }

    /// The secret path of the URL, in parts, and a header value.
    fn assert_no_secret(e: &DeliveryError) {
        testing::assert_no_secret(e, &["s3cr3t", "hooks/T0001", "Bearer xyz"]);
    }

    #[tokio::test]
    async fn posts_the_notification_as_versioned_json_with_the_static_headers() {
        let server = MockServer::start().await;
        let n = notification();
        let expected = serde_json::json!({
            "version": "1",
            "action": "open",
            "receiver": "team-hook",
            "thread_key": "team=payments,kind=degraded",
            "title": "2 applications degraded",
            "reason": "fired",
            "incidents": serde_json::to_value(n.incidents()).unwrap(),
            "text": render::text(&n),
        });
        Mock::given(method("POST"))
            .and(path(SECRET_PATH))
            .and(header("content-type", "application/json"))
            .and(header("authorization", "Bearer xyz"))
            .and(body_json(&expected))
            .respond_with(ResponseTemplate::new(204))
            .expect(1)
            .mount(&server)
            .await;
        let mut s = settings(format!("{}{SECRET_PATH}", server.uri()));
        s.headers
            .insert("Authorization".into(), SecretString::from("Bearer xyz".to_string()));
        let hook = Webhook::new(s, testing::http());

        let delivered = hook.deliver(&n, None).await.unwrap();

        assert_eq!(delivered.memo, None);
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 1);
        let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
        assert_eq!(body["incidents"][1]["app_name"], "payments-worker");
        assert_eq!(
            body["incidents"][0]["summary"],
            "payments-api is Degraded: \"quoted\" <and> escaped"
        );
        assert!(
            requests[0].headers.get(SIGNATURE_HEADER).is_none(),
            "no secret, no signature"
        );
    }

    #[tokio::test]
    async fn with_an_hmac_secret_the_send_time_and_the_exact_body_bytes_are_signed() {
        let server = MockServer::start().await;
        testing::expect_post(&server, SECRET_PATH, ResponseTemplate::new(200), 1).await;
        let mut s = settings(format!("{}{SECRET_PATH}", server.uri()));
        s.hmac_secret = Some(SecretString::from("shared-signing-key".to_string()));
        // The timestamp comes from Herald's clock, not the machine's.
        let clock = Arc::new(ManualClock::new(testing::now()));
        let hook = Webhook::new(s, Http::new(reqwest::Client::new(), clock));

        hook.deliver(&notification(), None).await.unwrap();

        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 1);
        let got = requests[0].headers.get(SIGNATURE_HEADER).unwrap().to_str().unwrap();
        let (t, v1) = got
            .strip_prefix("t=")
            .and_then(|rest| rest.split_once(",v1="))
            .expect("t=…,v1=…");
        assert_eq!(t.parse::<i64>().unwrap(), testing::now().timestamp());
        // Recomputed here from the received bytes, independently of the receiver's helper.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(b"shared-signing-key").unwrap();
        mac.update(format!("{t}.").as_bytes());
        mac.update(&requests[0].body);
        assert_eq!(v1, hex::encode(mac.finalize().into_bytes()));
    }

    #[test]
    fn a_signature_does_not_verify_at_another_time() {
        let body = br#"{"version":"1"}"#;
        let at = signature_header(b"k", 1_700_000_000, body);
        let later = signature_header(b"k", 1_700_000_600, body);
        let v1 = |h: &str| h.split_once(",v1=").map(|(_, v)| v.to_string()).unwrap();
        assert_ne!(v1(&at), v1(&later), "a replay with a fresh timestamp needs the key");
        assert_eq!(
            at,
            format!("t=1700000000,v1={}", signature(b"k", b"1700000000.{\"version\":\"1\"}"))
        );
    }

    #[test]
    fn the_signature_matches_a_published_hmac_sha256_vector() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    async fn failing_with(response: ResponseTemplate) -> DeliveryError {
        let server = MockServer::start().await;
        testing::expect_post(&server, SECRET_PATH, response, 1).await;
        let mut s = settings(format!("{}{SECRET_PATH}", server.uri()));
        s.headers
            .insert("Authorization".into(), SecretString::from("Bearer xyz".to_string()));
        let hook = Webhook::new(s, testing::http());
        let err = hook.deliver(&notification(), None).await.unwrap_err();
        assert_no_secret(&err);
        err
    }

    #[tokio::test]
    async fn too_many_requests_is_transient_with_the_servers_retry_after() {
        let err = failing_with(ResponseTemplate::new(429).insert_header("retry-after", "7")).await;
        assert_eq!(
            err,
            DeliveryError::Transient {
                reason: "HTTP 429".into(),
                retry_after: Some(Duration::from_secs(7)),
            }
        );
    }

    #[tokio::test]
    async fn a_server_error_is_transient() {
        let err = failing_with(ResponseTemplate::new(500).set_body_string("database down")).await;
        assert_eq!(err, DeliveryError::transient("HTTP 500: database down"));
    }

    #[tokio::test]
    async fn a_bad_request_is_permanent() {
        let err = failing_with(ResponseTemplate::new(400).set_body_string("unknown field")).await;
        assert_eq!(err, DeliveryError::permanent("HTTP 400: unknown field"));
    }

    #[tokio::test]
    async fn an_unreachable_endpoint_is_transient_and_the_url_stays_secret() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let hook = Webhook::new(
            settings(format!("http://127.0.0.1:{port}{SECRET_PATH}")),
            testing::http(),
        );
        let err = hook.deliver(&notification(), None).await.unwrap_err();
        assert!(matches!(err, DeliveryError::Transient { .. }), "{err:?}");
        assert_no_secret(&err);
    }

    #[tokio::test]
    async fn bad_settings_fail_permanently_without_quoting_secrets() {
        let bad_url = Webhook::new(settings("not a url s3cr3t".into()), testing::http());
        let err = bad_url.deliver(&notification(), None).await.unwrap_err();
        assert!(matches!(err, DeliveryError::Permanent { .. }), "{err:?}");
        assert_no_secret(&err);

        let mut s = settings("http://127.0.0.1:9/hook".into());
        s.headers
            .insert("Authorization".into(), SecretString::from("Bearer xyz\n".to_string()));
        let bad_header = Webhook::new(s, testing::http());
        let err = bad_header.deliver(&notification(), None).await.unwrap_err();
        assert!(matches!(err, DeliveryError::Permanent { .. }), "{err:?}");
        assert!(err.to_string().contains("webhook.headers.Authorization"), "{err}");
        assert_no_secret(&err);
    }
}
