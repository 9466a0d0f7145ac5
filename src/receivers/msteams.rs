//! The Microsoft Teams receiver: a Workflows incoming webhook, one Adaptive Card 1.4 per notification. Teams cannot
//! edit an earlier card, so each action is a new card, coloured by state.

use serde_json::{Value, json};

use super::http::Http;
use super::{Delivered, DeliveryError, Memo, Receiver, incoming_webhook};
use crate::domain::{Action, Body, Incident, Notification};
use crate::receivers::render;
use crate::receivers::render::{AppView, escape, status_emoji, truncate};

/// `msteams: {webhook_url}`: a Workflows incoming webhook (its URL is the secret).
pub type Config = incoming_webhook::Config<Teams>;

impl incoming_webhook::FromBlock for Teams {
    fn from_block(settings: Config, http: Http, _template: Option<String>) -> Self {
        Self::new(settings, http)
    }
}

/// Teams accepts a card of about 28 KB: a list of problems takes at most this many bytes of it (as JSON).
const TEAMS_LIST_BYTES: usize = 20_000;
const TEAMS_MAX_ACTIONS: usize = 5;
const TEAMS_MAX_TEXT: usize = 2000;

pub struct Teams {
    hook: incoming_webhook::Hook,
}

impl Teams {
    pub fn new(settings: Config, http: Http) -> Self {
        Self {
            hook: settings.hook(http),
        }
    }
}

/// Adaptive Card colour of the title: red when critical, amber when a warning, green when resolved.
fn teams_colour(n: &Notification) -> &'static str {
    match n.action {
        Action::Resolve => "Good",
        Action::Test | Action::Digest | Action::Acknowledge => "Accent",
        Action::Open | Action::Update => match n.highest_severity() {
            crate::domain::Severity::Critical => "Attention",
            crate::domain::Severity::Warning => "Warning",
            _ => "Accent",
        },
    }
}

fn text_block(text: &str) -> Value {
    json!({"type": "TextBlock", "text": truncate(text, TEAMS_MAX_TEXT), "wrap": true})
}

/// A link Herald makes, in TextBlock Markdown.
fn link(text: &str, url: &str) -> String {
    format!(
        "[{}]({})",
        escape::teams(text),
        url.replace(' ', "%20").replace(')', "%29")
    )
}

fn hints_block(hints: &[&crate::domain::Hint]) -> Option<Value> {
    if hints.is_empty() {
        return None;
    }
    let lines: Vec<String> = hints
        .iter()
        .map(|h| format!("- **{}**: {}", escape::teams(&h.title), escape::teams(&h.text)))
        .collect();
    Some(text_block(&format!("**What to do**\n\n{}", lines.join("\n"))))
}

/// One problem: its line, the resources (each linked into Argo CD), the messages, what to do.
fn teams_incident(i: &Incident, now: chrono::DateTime<chrono::Utc>, zone: crate::domain::Zone) -> Vec<Value> {
    use escape::teams as t;
    let mut items = vec![json!({
        "type": "TextBlock",
        "text": truncate(&format!("[{}] {}", render::incident_word(i), t(&i.status_line(now, zone))), TEAMS_MAX_TEXT),
        "weight": "Bolder",
        "wrap": true,
    })];
    if !i.resources.is_empty() {
        let lines: Vec<String> = i
            .resources
            .iter()
            .map(|r| {
                let (what, status) = render::resource_line(r);
                let what = match &r.url {
                    Some(u) => link(&what, u),
                    None => t(&what),
                };
                let mut l = format!("- {what}: {}", t(&status));
                if !r.message.is_empty() {
                    l.push_str(&format!(" — {}", t(&r.message)));
                }
                l
            })
            .collect();
        items.push(text_block(&lines.join("\n")));
    }
    for m in i.messages.iter().take(3) {
        let lines: Vec<String> = escape::message_lines(m).iter().map(|l| t(l)).collect();
        items.push(json!({
            "type": "TextBlock",
            "text": truncate(&lines.join("\n\n"), TEAMS_MAX_TEXT),
            "isSubtle": true,
            "fontType": "Monospace",
            "wrap": true,
        }));
    }
    items.extend(hints_block(&i.hints.iter().collect::<Vec<_>>()));
    for note in &i.notes {
        items.push(json!({
            "type": "TextBlock",
            "text": truncate(&format!("Note: {}", t(note)), TEAMS_MAX_TEXT),
            "isSubtle": true,
            "wrap": true,
        }));
    }
    items
}

/// One Application: its name, its facts, then its problems.
fn teams_app(app: &AppView<'_>, now: chrono::DateTime<chrono::Utc>, zone: crate::domain::Zone) -> Value {
    // A FactSet cannot carry a link: the signed one-click links are the card's buttons ([`link_buttons`]).
    let actionable: Vec<&str> = (app.incidents.iter())
        .flat_map(|i| i.actions.iter().map(|a| a.url.as_str()))
        .collect();
    let facts: Vec<Value> = app
        .facts()
        .into_iter()
        .filter(|f| !f.link.as_deref().is_some_and(|u| actionable.contains(&u)))
        .map(|f| json!({"title": f.label, "value": truncate(&escape::teams(&f.value), 500)}))
        .collect();
    let mut items = vec![json!({"type": "FactSet", "facts": facts})];
    // A deployment's comparison links, which the FactSet cannot carry, as a line of links below it.
    let compares: Vec<String> = (app.incidents.iter().find_map(|i| i.deployment.as_ref()).into_iter())
        .flat_map(|d| d.sources.iter())
        .filter_map(|c| {
            let url = c.compare_url.as_deref().filter(|u| crate::domain::link::is_safe(u))?;
            Some(link(&c.describe(), url))
        })
        .collect();
    if !compares.is_empty() {
        items.push(json!({
            "type": "TextBlock",
            "text": truncate(&format!("Compare: {}", compares.join(", ")), TEAMS_MAX_TEXT),
            "wrap": true,
        }));
    }
    for i in &app.incidents {
        items.extend(teams_incident(i, now, zone));
    }
    json!({"type": "Container", "separator": true, "items": items})
}

/// Many Applications: one line per problem, and what to do once.
fn teams_list(n: &Notification) -> Vec<Value> {
    let mut rows = Vec::new();
    for app in render::apps(n) {
        let name = match app.url {
            Some(u) => link(&app.name, u),
            None => escape::teams(&app.name),
        };
        for i in &app.incidents {
            let word = render::incident_word(i);
            rows.push(render::Row {
                full: format!(
                    "- **{word}** {name}: {}",
                    escape::teams(&i.status_line(n.created_at, n.zone))
                ),
                short: format!("- **{word}** {name}"),
            });
        }
    }
    let status = n.status_url.as_deref().map(|u| link("the status page", u));
    let more = |hidden| format!("- {}", render::more_words(hidden, status.as_deref()));
    let lines = render::fit_rows(&rows, TEAMS_LIST_BYTES, render::json_len, more);
    // One block for the whole list, within its share of the card.
    let list = json!({"type": "TextBlock", "text": lines.join("\n"), "wrap": true});
    let mut out = vec![json!({"type": "Container", "separator": true, "items": [list]})];
    out.extend(hints_block(&render::summary_hints(n)));
    out
}

/// The signed one-click links of the firing incidents as the card's buttons, first (they ask people to act), within
/// Teams' button limit: an incident's Acknowledge, Silence and Open in Herald; with several, each one's Acknowledge
/// named after its Application and problem.
/// What does not fit is reached through "Open in Herald" or the status page.
fn link_buttons(n: &Notification) -> Vec<Value> {
    let with_links: Vec<&crate::domain::Incident> = n.incidents().iter().filter(|i| !i.actions.is_empty()).collect();
    // "Acknowledge all 40" first, then each incident's own while Teams' limit allows.
    let mut out: Vec<Value> = (n.group_actions.iter())
        .map(|a| json!({"type": "Action.OpenUrl", "title": truncate(&escape::chat_plain(&a.label), 100), "url": a.url}))
        .collect();
    // Several incidents: one Acknowledge each (the first of an incident's links), the silences on their pages.
    let per_incident = if with_links.len() == 1 { usize::MAX } else { 1 };
    for i in &with_links {
        for a in i.actions.iter().take(per_incident) {
            if out.len() >= TEAMS_MAX_ACTIONS {
                return out;
            }
            let title = match with_links.len() {
                1 => a.label.clone(),
                _ => format!("{}: {} {}", a.label, i.app_name, i.problem()),
            };
            out.push(
                json!({"type": "Action.OpenUrl", "title": truncate(&escape::chat_plain(&title), 100), "url": a.url}),
            );
        }
    }
    out
}

/// The Workflows webhook message: one attachment holding an Adaptive Card 1.4.
pub(crate) fn teams_message(n: &Notification) -> Value {
    if let Body::Digest(d) = &n.body {
        return crate::receivers::render::digest::teams_card(d);
    }
    let mut body = vec![json!({
        "type": "TextBlock",
        "text": truncate(&format!("{} {}: {}", status_emoji(n), render::status_word(n), escape::teams(&n.title)), 500),
        "size": "Medium",
        "weight": "Bolder",
        "color": teams_colour(n),
        "wrap": true,
    })];
    if !n.reason.is_empty() {
        body.push(json!({"type": "TextBlock", "text": truncate(&escape::teams(&n.reason), 500), "isSubtle": true, "wrap": true}));
    }
    let apps = render::apps(n);
    if render::detailed(n) {
        body.extend(apps.iter().map(|a| teams_app(a, n.created_at, n.zone)));
    } else {
        body.extend(teams_list(n));
    }
    let mut actions = link_buttons(n);
    for app in &apps {
        if let Some(u) = app.url
            && actions.len() < TEAMS_MAX_ACTIONS
            && !actions.iter().any(|a| a["url"] == u)
        {
            actions.push(json!({
                "type": "Action.OpenUrl",
                "title": truncate(&format!("Open {} in Argo CD", escape::chat_plain(&app.short_name())), 100),
                "url": u,
            }));
        }
    }
    let mut card = json!({
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "msteams": {"width": "Full"},
        "body": body,
    });
    if !actions.is_empty() {
        card["actions"] = Value::Array(actions);
    }
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": card,
        }],
    })
}

#[async_trait::async_trait]
impl Receiver for Teams {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        // Workflows answers 202 (accepted) in general, 200 for some flows: both are success.
        self.hook.post(&teams_message(n), "msteams").await?;
        Ok(Delivered {
            memo: None,
            detail: "posted an Adaptive Card".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use wiremock::{MockServer, ResponseTemplate};

    use super::*;
    use crate::receivers::testing::{self, json, requests};

    const PATH: &str = "/workflows/abc123/triggers/manual/paths/invoke";
    const SIG: &str = "teamsSignatureSecretValue0123456789";

    fn teams(server: &MockServer) -> Teams {
        let url = format!(
            "{}{PATH}?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sig={SIG}",
            server.uri()
        );
        Teams::new(Config::new(url), testing::http())
    }

    #[tokio::test]
    async fn teams_posts_an_adaptive_card_and_accepts_202() {
        let server = MockServer::start().await;
        testing::expect_post(&server, PATH, ResponseTemplate::new(202), 1).await;

        let out = testing::deliver_open(&teams(&server)).await;

        assert_eq!(out.memo, None);
        let body = testing::only_body(&server).await;
        let posted = &requests(&server).await[0];
        assert_eq!(testing::query(posted, "sig"), [SIG]);
        assert_eq!(testing::query(posted, "api-version"), ["1"]);
        assert_eq!(body["type"], "message");
        let attachment = &body["attachments"][0];
        assert_eq!(attachment["contentType"], "application/vnd.microsoft.card.adaptive");
        let card = &attachment["content"];
        assert_eq!(card["type"], "AdaptiveCard");
        assert_eq!(card["version"], "1.4");
        let title = &card["body"][0];
        assert_eq!(title["type"], "TextBlock");
        assert_eq!(title["color"], "Attention");
        assert!(title["text"].as_str().unwrap().contains("FIRING: payments is Degraded"));
        let incident = card["body"][2]["items"].as_array().unwrap();
        let facts = incident.iter().find(|i| i["type"] == "FactSet").unwrap();
        assert!(
            facts["facts"]
                .as_array()
                .unwrap()
                .contains(&json!({"title": "Application", "value": "argocd/payments"}))
        );
        let texts: Vec<&str> = incident.iter().filter_map(|i| i["text"].as_str()).collect();
        assert!(
            texts
                .iter()
                .any(|t| t.contains("Deployment payments/payments-api: Degraded")),
            "{texts:?}"
        );
        assert!(
            texts
                .iter()
                .any(|t| t.contains("**What to do**") && t.contains("Check the image"))
        );
        assert_eq!(
            card["actions"],
            json!([{
                "type": "Action.OpenUrl",
                "title": "Open payments in Argo CD",
                "url": "https://argocd.example.com/applications/argocd/payments",
            }])
        );
    }

    #[test]
    fn a_firing_incidents_signed_links_are_the_cards_first_buttons_not_link_less_facts() {
        let mut n = testing::notification(Action::Open);
        n.incidents_mut()[0].actions = [
            "Acknowledge",
            "Silence 1 h",
            "Silence until Monday 09:00 (UTC)",
            "Open in Herald",
        ]
        .iter()
        .enumerate()
        .map(|(k, label)| crate::domain::action_link::MessageLink {
            label: label.to_string(),
            url: format!("https://herald.example.com/act/token-{k}"),
        })
        .collect();

        let card = &teams_message(&n)["attachments"][0]["content"];

        let buttons = card["actions"].as_array().unwrap();
        let titles: Vec<&str> = buttons.iter().map(|b| b["title"].as_str().unwrap()).collect();
        assert_eq!(
            titles,
            [
                "Acknowledge",
                "Silence 1 h",
                "Silence until Monday 09:00 (UTC)",
                "Open in Herald",
                "Open payments in Argo CD"
            ]
        );
        assert_eq!(buttons[0]["url"], "https://herald.example.com/act/token-0");
        let facts = card.to_string();
        assert!(
            !facts.contains(r#""title":"Acknowledge","value""#),
            "no link-less fact: {facts}"
        );
    }

    #[tokio::test]
    async fn teams_resolve_is_a_new_green_card_and_200_is_success_too() {
        let server = MockServer::start().await;
        testing::expect_post(&server, PATH, ResponseTemplate::new(200), 1).await;

        let out = teams(&server)
            .deliver(&testing::notification(Action::Resolve), Some(&json!({"ignored": true})))
            .await
            .unwrap();

        assert_eq!(out.memo, None);
        let body = json(&requests(&server).await[0]);
        let title = &body["attachments"][0]["content"]["body"][0];
        assert_eq!(title["color"], "Good");
        assert!(title["text"].as_str().unwrap().contains("RESOLVED"));
    }

    #[test]
    fn a_teams_card_with_fifty_applications_lists_every_one_and_caps_its_buttons() {
        let mut n = testing::notification(Action::Open);
        let one = n.incidents()[0].clone();
        *crate::receivers::testing::incidents_of(&mut n) = (0..50)
            .map(|k| Incident {
                app_name: format!("app-{k}"),
                app_url: Some(format!("https://argocd.example.com/applications/argocd/app-{k}")),
                ..one.clone()
            })
            .collect();

        let card = &teams_message(&n)["attachments"][0]["content"];

        let body = card["body"].as_array().unwrap();
        let list = body.iter().find(|b| b["type"] == "Container").unwrap();
        let lines = list["items"][0]["text"].as_str().unwrap().lines().count();
        assert_eq!(lines, 50, "fifty lines fit in the card: none is cut");
        assert!(!card.to_string().contains("more"), "{card}");
        assert_eq!(card["actions"].as_array().unwrap().len(), TEAMS_MAX_ACTIONS);
    }
}
