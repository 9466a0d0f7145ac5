//! The Mattermost receiver: Markdown text through a Slack-compatible incoming webhook, one new post per action
//! (an incoming webhook cannot edit or thread), or the receiver's template.

use serde_json::json;

use super::http::Http;
use super::{Delivered, DeliveryError, Memo, Receiver, incoming_webhook};
use crate::domain::Notification;
use crate::receivers::render;
use crate::receivers::render::{status_emoji, truncate};

/// `mattermost: {webhook_url}`: an incoming webhook (its URL is the secret).
pub type Config = incoming_webhook::Config<Mattermost>;

impl incoming_webhook::FromBlock for Mattermost {
    fn from_block(settings: Config, http: Http, template: Option<String>) -> Self {
        Self::new(settings, http, template)
    }
}

/// Mattermost's default maximum post size is 16,383 characters.
const MATTERMOST_MAX_TEXT: usize = 16000;

pub struct Mattermost {
    hook: incoming_webhook::Hook,
    template: Option<String>,
}

impl Mattermost {
    pub fn new(settings: Config, http: Http, template: Option<String>) -> Self {
        Self {
            hook: settings.hook(http),
            template,
        }
    }
}

/// How a template's values are written: CommonMark.
pub const TEMPLATE_ESCAPE: render::TemplateEscape = render::escape::commonmark_keep_links;

/// The post: the status, then the shared CommonMark rendering.
pub fn text(n: &Notification) -> String {
    let body = render::markdown_within(n, MATTERMOST_MAX_TEXT - 200);
    format!("{} **{}**\n{body}", status_emoji(n), render::status_word(n))
}

#[async_trait::async_trait]
impl Receiver for Mattermost {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let text = match render::custom_text(self.template.as_deref(), n, TEMPLATE_ESCAPE)? {
            Some(t) => t,
            None => text(n),
        };
        let body = json!({"text": truncate(&text, MATTERMOST_MAX_TEXT)});
        self.hook.post(&body, "mattermost").await?;
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
        Mattermost::new(Config::new(url), testing::http(), template)
    }

    #[tokio::test]
    async fn mattermost_posts_markdown_text() {
        let server = MockServer::start().await;
        testing::expect_post(&server, PATH, ResponseTemplate::new(200).set_body_string("ok"), 1).await;

        let out = testing::deliver_open(&mattermost(&server, None)).await;

        assert_eq!(out.memo, None);
        let body = testing::only_body(&server).await;
        assert_eq!(body.as_object().unwrap().len(), 1, "only `text`: {body}");
        let text = body["text"].as_str().unwrap();
        testing::assert_contains_all(
            text,
            &[
                "**FIRING**",
                "### payments is Degraded",
                "| Deployment payments/payments-api | Degraded |",
                "**[FIRING] Degraded for 5 min, since 11:55 UTC**",
                "**What to do**",
                "[argocd/payments](https://argocd.example.com/applications/argocd/payments)",
            ],
        );
    }

    #[tokio::test]
    async fn mattermost_uses_the_template_and_a_broken_template_is_permanent() {
        let server = MockServer::start().await;
        testing::expect_post(&server, PATH, ResponseTemplate::new(200).set_body_string("ok"), 1).await;

        testing::deliver_open(&mattermost(&server, Some(testing::REASON_AND_TITLE.into()))).await;
        let e = mattermost(&server, Some("{{ unclosed".into()))
            .deliver(&testing::notification(Action::Open), None)
            .await
            .unwrap_err();

        assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
        let reqs = requests(&server).await;
        assert_eq!(reqs.len(), 1, "a broken template sends nothing");
        assert_eq!(json(&reqs[0])["text"], testing::REASON_AND_TITLE_OF_AN_OPEN);
    }
}
