//! Contract tests across integrations: the chat receivers that post to one incoming-webhook URL classify failures
//! alike and never leak that URL.

use std::time::Duration;

use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::testing::{self, assert_no_secret, requests};
use super::{DeliveryError, Receiver, googlechat, mattermost, msteams};
use crate::domain::Action;

const TEAMS_PATH: &str = "/workflows/abc123/triggers/manual/paths/invoke";
const TEAMS_SIG: &str = "teamsSignatureSecretValue0123456789";
const GCHAT_PATH: &str = "/v1/spaces/AAAAspace/messages";
const GCHAT_KEY: &str = "AIzaSyGoogleChatKeySecret0123";
const GCHAT_TOKEN: &str = "googleChatTokenSecret0123456789";
const MM_PATH: &str = "/hooks/mattermosthooksecret0123456";
const SECRETS: [&str; 6] = [TEAMS_PATH, TEAMS_SIG, GCHAT_PATH, GCHAT_KEY, GCHAT_TOKEN, MM_PATH];

#[derive(Clone, Copy, Debug)]
enum Chat {
    Teams,
    GoogleChat,
    Mattermost,
}

const ALL: [Chat; 3] = [Chat::Teams, Chat::GoogleChat, Chat::Mattermost];

impl Chat {
    /// The receiver's webhook URL on `base`, secrets included.
    fn url(self, base: &str) -> String {
        match self {
            Chat::Teams => format!("{base}{TEAMS_PATH}?api-version=1&sig={TEAMS_SIG}"),
            Chat::GoogleChat => format!("{base}{GCHAT_PATH}?key={GCHAT_KEY}&token={GCHAT_TOKEN}"),
            Chat::Mattermost => format!("{base}{MM_PATH}"),
        }
    }

    fn receiver(self, url: String) -> Box<dyn Receiver> {
        let http = testing::http();
        match self {
            Chat::Teams => Box::new(msteams::Teams::new(
                msteams::Config {
                    webhook_url: url.into(),
                },
                http,
            )),
            Chat::GoogleChat => Box::new(googlechat::GoogleChat::new(
                googlechat::Config {
                    webhook_url: url.into(),
                },
                http,
                None,
            )),
            Chat::Mattermost => Box::new(mattermost::Mattermost::new(
                mattermost::Config {
                    webhook_url: url.into(),
                },
                http,
                None,
            )),
        }
    }
}

/// Mounts one answer on any POST, delivers once and returns the failure (after checking exactly one request).
async fn failure(kind: Chat, answer: ResponseTemplate) -> DeliveryError {
    failure_with(kind, move |_| answer).await
}

/// Like [`failure`], with an answer made from the receiver's own webhook URL.
async fn failure_with(kind: Chat, answer: impl FnOnce(&str) -> ResponseTemplate) -> DeliveryError {
    let server = MockServer::start().await;
    let url = kind.url(&server.uri());
    Mock::given(method("POST"))
        .respond_with(answer(&url))
        .expect(1)
        .mount(&server)
        .await;
    let e = kind
        .receiver(url)
        .deliver(&testing::notification(Action::Open), None)
        .await
        .unwrap_err();
    assert_eq!(requests(&server).await.len(), 1, "{kind:?}");
    assert_no_secret(&e, &SECRETS);
    e
}

#[tokio::test]
async fn every_chat_receiver_treats_429_as_transient_with_the_retry_after_delay() {
    for kind in ALL {
        let e = failure(kind, ResponseTemplate::new(429).insert_header("Retry-After", "7")).await;
        let delay = match e {
            DeliveryError::Transient { retry_after, .. } => retry_after,
            other => panic!("{kind:?}: expected a transient failure, got {other:?}"),
        };
        assert_eq!(delay, Some(Duration::from_secs(7)), "{kind:?}");
    }
}

#[tokio::test]
async fn every_chat_receiver_treats_500_as_transient() {
    for kind in ALL {
        let e = failure(kind, ResponseTemplate::new(500).set_body_string("boom")).await;
        assert!(matches!(e, DeliveryError::Transient { .. }), "{kind:?}: {e:?}");
    }
}

#[tokio::test]
async fn every_chat_receiver_treats_400_as_permanent() {
    for kind in ALL {
        let e = failure(kind, ResponseTemplate::new(400).set_body_string("bad payload")).await;
        assert!(matches!(e, DeliveryError::Permanent { .. }), "{kind:?}: {e:?}");
        assert!(e.to_string().contains("bad payload"), "{kind:?}: {e}");
    }
}

#[tokio::test]
async fn an_error_body_echoing_the_webhook_url_does_not_leak_it() {
    for kind in ALL {
        // The whole URL, then its path and query on their own, as a careless server might echo them.
        let e = failure_with(kind, |url| {
            let u = url::Url::parse(url).unwrap();
            let echo = format!("invalid webhook {url} (path {}, query {:?})", u.path(), u.query());
            ResponseTemplate::new(404).set_body_string(echo)
        })
        .await;
        assert!(e.to_string().contains("[redacted]"), "{kind:?}: {e}");
    }
}

#[tokio::test]
async fn an_unreachable_webhook_is_transient_and_keeps_the_url_secret() {
    let n = testing::notification(Action::Open);
    for kind in ALL {
        let e = kind
            .receiver(kind.url(testing::UNREACHABLE))
            .deliver(&n, None)
            .await
            .unwrap_err();
        assert!(matches!(e, DeliveryError::Transient { .. }), "{kind:?}: {e:?}");
        assert_no_secret(&e, &SECRETS);
    }
}
