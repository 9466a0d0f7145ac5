//! The Google Chat receiver: text messages through a space's incoming webhook, threaded by the notification's
//! `thread_key` (replies land in the first message's thread). Google Chat's own light markup, or the receiver's
//! template.

use secrecy::ExposeSecret;
use serde_json::json;

use super::http::Http;
use super::{Delivered, DeliveryError, Memo, Receiver, incoming_webhook};
use crate::domain::{Body, Notification};
use crate::receivers::render;
use crate::receivers::render::{escape, status_emoji, truncate};

/// `googlechat: {webhook_url}`: a space's incoming webhook (its `key` and `token` are the secret).
pub type Config = incoming_webhook::Config<GoogleChat>;

impl incoming_webhook::FromBlock for GoogleChat {
    fn from_block(settings: Config, http: Http, template: Option<String>) -> Self {
        Self::new(settings, http, template)
    }
}

/// Google Chat refuses message text over 4,096 characters.
const GOOGLE_CHAT_MAX_TEXT: usize = 4000;
/// The least a list of problems is given of a message's characters, whatever the title and what to do take.
const GOOGLE_CHAT_MIN_LIST: usize = 1500;
const THREAD_KEY_MAX: usize = 100;

pub struct GoogleChat {
    hook: incoming_webhook::Hook,
    template: Option<String>,
}

impl GoogleChat {
    pub fn new(settings: Config, http: Http, template: Option<String>) -> Self {
        Self {
            hook: settings.hook(http),
            template,
        }
    }

    /// The webhook URL (which already carries `key` and `token`) plus the reply option that threads by key.
    fn url(&self) -> Result<String, DeliveryError> {
        let mut u = url::Url::parse(self.hook.url.expose_secret())
            .map_err(|_| DeliveryError::permanent("googlechat: webhook_url is not a valid URL"))?;
        let kept: Vec<(String, String)> = u
            .query_pairs()
            .filter(|(k, _)| k != "messageReplyOption")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        u.query_pairs_mut()
            .clear()
            .extend_pairs(kept)
            .append_pair("messageReplyOption", "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD");
        Ok(u.into())
    }
}

/// A thread key Google Chat accepts as is: ASCII letters, digits, `-`, `_` and `.`, at most 100 characters. When
/// the key had to change, a hash of the original keeps distinct keys distinct.
pub(crate) fn google_thread_key(key: &str) -> String {
    let clean: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if clean == key && !clean.is_empty() && clean.len() <= THREAD_KEY_MAX {
        return clean;
    }
    use sha2::Digest;
    let hash = hex::encode(sha2::Sha256::digest(key.as_bytes()));
    let head: String = clean.chars().take(THREAD_KEY_MAX - 17).collect();
    format!("{head}-{}", &hash[..16])
}

/// A link Herald makes, `<url|text>`: nothing in the URL that would end the link.
fn link(text: &str, url: &str) -> String {
    let url = url.replace('|', "%7C").replace('>', "%3E").replace('<', "%3C");
    format!("<{url}|{}>", escape::google_chat(text))
}

fn code(c: &str) -> String {
    format!("`{}`", escape::google_chat(c).replace('`', "'"))
}

fn hints(s: &mut String, hints: &[&crate::domain::Hint]) {
    if hints.is_empty() {
        return;
    }
    s.push_str("*What to do*\n");
    for h in hints {
        let text = escape::with_code(&h.text, escape::google_chat, code);
        s.push_str(&format!("• *{}*: {text}\n", escape::google_chat(&h.title)));
    }
}

/// Google Chat's own light markup (`MARKUP_SYNTAX_CHAT`, said in the request): `*bold*`, `_italic_`,
/// `` `code` ``, `<url|label>`, in the shared layout; every field from Argo CD through [`escape::google_chat`],
/// and messages in a code block (Chat shows `>` literally).
pub(crate) fn google_chat_text(n: &Notification) -> String {
    if let Body::Digest(d) = &n.body {
        return crate::receivers::render::digest::google_chat(d);
    }
    use escape::google_chat as gc;
    let now = n.created_at;
    let mut s = format!("{} *{}: {}*\n", status_emoji(n), render::status_word(n), gc(&n.title));
    if !n.reason.is_empty() {
        s.push_str(&format!("_{}_\n", gc(&n.reason)));
    }
    if !render::detailed(n) {
        s.push('\n');
        let mut what_to_do = String::new();
        if let Some(links) = render::group_links(n, link) {
            what_to_do.insert_str(0, &format!("*{links}*\n"));
        }
        hints(&mut what_to_do, &render::summary_hints(n));
        let used = s.chars().count() + what_to_do.chars().count();
        let budget = GOOGLE_CHAT_MAX_TEXT.saturating_sub(used).max(GOOGLE_CHAT_MIN_LIST);
        let status = n.status_url.as_deref().map(|u| link("the status page", u));
        let list = render::summary_list_within(
            n,
            link,
            gc,
            |i, name, status| match status {
                "" => format!("• *{}* {name}\n", render::incident_word(i)),
                _ => format!("• *{}* {name}: {status}\n", render::incident_word(i)),
            },
            budget,
            |l| l.chars().count(),
            |hidden| format!("• {}\n", render::more_words(hidden, status.as_deref())),
        );
        s.push_str(&list);
        s.push_str(&what_to_do);
        return s;
    }
    for app in render::apps(n) {
        s.push('\n');
        for f in app.facts() {
            let value = render::linked(&f.value, f.link.as_deref(), link, code);
            s.push_str(&format!("{}: {value}\n", f.label));
        }
        for i in &app.incidents {
            s.push_str(&format!(
                "\n*[{}] {}*\n",
                render::incident_word(i),
                gc(&i.status_line(now, n.zone))
            ));
            for r in &i.resources {
                let (what, status) = render::resource_line(r);
                let what = render::linked(&what, r.url.as_deref(), link, code);
                s.push_str(&format!("• {what}: {}", gc(&status)));
                if !r.message.is_empty() {
                    s.push_str(&format!(" — {}", gc(&r.message)));
                }
                s.push('\n');
            }
            for m in &i.messages {
                let lines: Vec<String> = escape::message_lines(m).iter().map(|l| gc(l)).collect();
                s.push_str(&format!("```\n{}\n```\n", lines.join("\n")));
            }
            hints(&mut s, &i.hints.iter().collect::<Vec<_>>());
            for note in &i.notes {
                s.push_str(&format!("_Note: {}_\n", gc(note)));
            }
        }
    }
    s
}

/// How a template's values are written: Google Chat's own markup.
pub const TEMPLATE_ESCAPE: render::TemplateEscape = render::escape::google_chat_keep_links;

#[async_trait::async_trait]
impl Receiver for GoogleChat {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let text =
            render::custom_text(self.template.as_deref(), n, TEMPLATE_ESCAPE)?.unwrap_or_else(|| google_chat_text(n));
        let thread_key = google_thread_key(&n.thread_key);
        let body = json!({
            "text": truncate(&text, GOOGLE_CHAT_MAX_TEXT),
            // Said, not left to the app's default: new Chat apps read Markdown, and this text is Chat markup.
            "markupSyntax": "MARKUP_SYNTAX_CHAT",
            "thread": {"threadKey": thread_key},
        });
        let hook = &self.hook;
        hook.http
            .post_json(&self.url()?, &body, &hook.redactor, "googlechat")
            .await?;
        Ok(Delivered {
            memo: None,
            detail: format!("posted in thread {thread_key}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use wiremock::{MockServer, ResponseTemplate};

    use super::*;
    use crate::domain::Action;
    use crate::receivers::testing::{self, json, requests};

    const PATH: &str = "/v1/spaces/AAAAspace/messages";
    const KEY: &str = "AIzaSyGoogleChatKeySecret0123";
    const TOKEN: &str = "googleChatTokenSecret0123456789";

    /// Threaded by a key Google Chat would refuse as is.
    fn notification(action: Action) -> Notification {
        Notification {
            thread_key: "group:payments/prod".into(),
            ..testing::notification(action)
        }
    }

    fn settings(url: String) -> Config {
        Config::new(url)
    }

    fn google_chat(server: &MockServer, template: Option<String>) -> GoogleChat {
        let url = format!("{}{PATH}?key={KEY}&token={TOKEN}", server.uri());
        GoogleChat::new(settings(url), testing::http(), template)
    }

    #[tokio::test]
    async fn google_chat_keeps_key_and_token_and_threads_by_the_notification_key() {
        let server = MockServer::start().await;
        let posted = ResponseTemplate::new(200).set_body_json(json!({
            "name": "spaces/AAAAspace/messages/m1",
            "thread": {"name": "spaces/AAAAspace/threads/t1"},
        }));
        testing::expect_post(&server, PATH, posted, 3).await;

        let chat = google_chat(&server, None);
        for action in [Action::Open, Action::Update, Action::Resolve] {
            let out = chat.deliver(&notification(action), None).await.unwrap();
            assert_eq!(out.memo, None);
        }

        let reqs = requests(&server).await;
        assert_eq!(reqs.len(), 3);
        let key = google_thread_key("group:payments/prod");
        for r in &reqs {
            let body = json(r);
            assert_eq!(
                body["thread"]["threadKey"],
                key.as_str(),
                "updates land in the first message's thread"
            );
            assert_eq!(testing::query(r, "key"), [KEY]);
            assert_eq!(testing::query(r, "token"), [TOKEN]);
            let replies = testing::query(r, "messageReplyOption");
            assert_eq!(
                replies,
                ["REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"],
                "exactly one reply option"
            );
        }
        let open = json(&reqs[0]);
        let text = open["text"].as_str().unwrap();
        testing::assert_contains_all(
            text,
            &[
                "*FIRING: payments is Degraded*",
                "Application: <https://argocd.example.com/applications/argocd/payments|argocd/payments>",
                "*[FIRING] Degraded for 5 min, since 11:55 UTC*",
                "• `Deployment payments/payments-api`: Degraded — exceeded its progress deadline",
                "*What to do*",
            ],
        );
        assert_eq!(open["markupSyntax"], "MARKUP_SYNTAX_CHAT", "the markup Herald writes");
        assert!(json(&reqs[2])["text"].as_str().unwrap().contains("*RESOLVED: "));
    }

    #[tokio::test]
    async fn google_chat_replaces_a_reply_option_already_in_the_url() {
        let server = MockServer::start().await;
        testing::expect_post(&server, PATH, ResponseTemplate::new(200).set_body_json(json!({})), 1).await;
        let url = format!(
            "{}{PATH}?key={KEY}&messageReplyOption=REPLY_MESSAGE_OR_FAIL&token={TOKEN}",
            server.uri()
        );
        let chat = GoogleChat::new(settings(url), testing::http(), None);

        chat.deliver(&notification(Action::Open), None).await.unwrap();

        let reqs = requests(&server).await;
        assert_eq!(reqs.len(), 1);
        let options = testing::query(&reqs[0], "messageReplyOption");
        assert_eq!(options, ["REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"]);
        assert_eq!(testing::query(&reqs[0], "token"), [TOKEN]);
    }

    #[tokio::test]
    async fn google_chat_uses_the_template_as_text() {
        let server = MockServer::start().await;
        testing::expect_post(&server, PATH, ResponseTemplate::new(200).set_body_json(json!({})), 1).await;
        let chat = google_chat(&server, Some("{{ notification.title }}!".into()));

        chat.deliver(&notification(Action::Open), None).await.unwrap();

        assert_eq!(json(&requests(&server).await[0])["text"], "payments is Degraded!");
    }

    #[test]
    fn thread_keys_are_sanitised_short_and_still_distinct() {
        assert_eq!(google_thread_key("herald-group_1.a"), "herald-group_1.a");
        let a = google_thread_key("group:payments/prod");
        let b = google_thread_key("group:payments:prod");
        assert_ne!(a, b, "keys that sanitise alike keep distinct hashes");
        assert!(a.starts_with("group-payments-prod-"), "{a}");
        let long = google_thread_key(&"x".repeat(500));
        assert_eq!(long.len(), THREAD_KEY_MAX);
        for k in [a, b, long, google_thread_key(""), google_thread_key("ünïcödé key")] {
            assert!(!k.is_empty() && k.len() <= THREAD_KEY_MAX, "{k}");
            assert!(
                k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')),
                "{k}"
            );
        }
    }
}
