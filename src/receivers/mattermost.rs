//! The Mattermost receiver: Markdown text through a Slack-compatible incoming webhook, one new post per action
//! (an incoming webhook cannot edit or thread), or the receiver's template.

use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::http::Http;
use super::redact::Redactor;
use super::{Capabilities, Delivered, DeliveryError, Integration, Memo, Receiver, Sections, Shared};
use crate::configuration::{ConfigError, ReceiverSettings};
use crate::domain::Notification;
use crate::receivers::render;
use crate::receivers::render::{status_emoji, truncate};

/// `mattermost: {webhook_url}`: an incoming webhook (its URL is the secret).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub webhook_url: SecretString,
}

impl Integration for Config {
    fn capabilities(&self) -> Capabilities {
        Capabilities::MESSAGES
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        crate::configuration::check_secret_url(errors, &format!("{path}.webhook_url"), &self.webhook_url);
    }

    fn build(&self, r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(Mattermost::new(
            self.clone(),
            shared.http.clone(),
            r.template.clone(),
        )))
    }
}

/// Mattermost's default maximum post size is 16,383 characters.
const MATTERMOST_MAX_TEXT: usize = 16000;

pub struct Mattermost {
    webhook_url: SecretString,
    http: Http,
    template: Option<String>,
    redactor: Redactor,
}

impl Mattermost {
    pub fn new(settings: Config, http: Http, template: Option<String>) -> Self {
        let redactor = Redactor::default().url(settings.webhook_url.expose_secret());
        Self {
            webhook_url: settings.webhook_url,
            http,
            template,
            redactor,
        }
    }
}

/// The post: the status, then the shared CommonMark rendering.
pub fn text(n: &Notification) -> String {
    format!(
        "{} **{}**\n{}",
        status_emoji(n),
        render::status_word(n),
        render::markdown(n)
    )
}

#[async_trait::async_trait]
impl Receiver for Mattermost {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let text = match render::custom_text(self.template.as_deref(), n)? {
            Some(t) => t,
            None => text(n),
        };
        let body = json!({"text": truncate(&text, MATTERMOST_MAX_TEXT)});
        self.http
            .post_json(self.webhook_url.expose_secret(), &body, &self.redactor, "mattermost")
            .await?;
        Ok(Delivered {
            memo: None,
            detail: "posted".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use wiremock::{MockServer, ResponseTemplate};

    use super::*;
    use crate::domain::Action;
    use crate::receivers::testing::{self, json, requests};

    const PATH: &str = "/hooks/mattermosthooksecret0123456";

    fn mattermost(server: &MockServer, template: Option<String>) -> Mattermost {
        let url = format!("{}{PATH}", server.uri());
        Mattermost::new(
            Config {
                webhook_url: url.into(),
            },
            testing::http(),
            template,
        )
    }

    #[tokio::test]
    async fn mattermost_posts_markdown_text() {
        let server = MockServer::start().await;
        testing::expect_post(&server, PATH, ResponseTemplate::new(200).set_body_string("ok"), 1).await;

        let out = mattermost(&server, None)
            .deliver(&testing::notification(Action::Open), None)
            .await
            .unwrap();

        assert_eq!(out.memo, None);
        let reqs = requests(&server).await;
        assert_eq!(reqs.len(), 1);
        let body = json(&reqs[0]);
        assert_eq!(body.as_object().unwrap().len(), 1, "only `text`: {body}");
        let text = body["text"].as_str().unwrap();
        for expected in [
            "**FIRING**",
            "### payments is Degraded",
            "| Deployment payments/payments-api | Degraded |",
            "**[FIRING] Degraded for 5 min, since 11:55 UTC**",
            "**What to do**",
            "[argocd/payments](https://argocd.example.com/applications/argocd/payments)",
        ] {
            assert!(text.contains(expected), "{expected:?} not in {text}");
        }
    }

    #[tokio::test]
    async fn mattermost_uses_the_template_and_a_broken_template_is_permanent() {
        let server = MockServer::start().await;
        testing::expect_post(&server, PATH, ResponseTemplate::new(200).set_body_string("ok"), 1).await;

        mattermost(
            &server,
            Some("{{ notification.reason }}: {{ notification.title }}".into()),
        )
        .deliver(&testing::notification(Action::Open), None)
        .await
        .unwrap();
        let e = mattermost(&server, Some("{{ unclosed".into()))
            .deliver(&testing::notification(Action::Open), None)
            .await
            .unwrap_err();

        assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
        let reqs = requests(&server).await;
        assert_eq!(reqs.len(), 1, "a broken template sends nothing");
        assert_eq!(json(&reqs[0])["text"], "fired: payments is Degraded");
    }
}
