//! A check of every outgoing body: each golden situation (and two more — with one-click links, and from an
//! Application whose repository is on a host nobody listed, whose Argo CD message carries a URL) rendered for every
//! kind of receiver, read as a stranger would: no part over the e-mail limit, and every link Herald wrote goes to
//! Herald (`server.public_url`), to Argo CD, or to a Git host someone trusts (github.com, gitlab.com,
//! bitbucket.org, `links.git_hosts`). A URL that came in Argo CD's text is defused (a word joiner after its
//! scheme), so no auto-linker makes it a link either: it never reads as `https://` here — but where nothing links
//! (subjects and titles, a Jira issue's text and code) and in the bodies that are data for a program ([`DATA`]).

use std::collections::BTreeSet;

use serde_json::json;

use super::*;

/// The hosts a body may name as a URL: Herald's own (the situations' `public_url`), the captured Argo CD's, the Git
/// hosts trusted by default; Adaptive Cards' schema (a Teams card's `$schema`).
const TRUSTED: [&str; 6] = [
    "herald.example.com",
    "demo.cdviz.dev",
    "github.com",
    "gitlab.com",
    "bitbucket.org",
    "adaptivecards.io",
];

/// The most an e-mail may weigh before Gmail clips it (about 102 KB): every part stays under it.
const MAX_PART_BYTES: usize = 100_000;

/// Where an address is data for a program or a terminal, never a link a reader is offered: the console (a
/// terminal), and the JSON of webhooks, PagerDuty and Alertmanager, which carry Argo CD's messages and repository
/// URLs as they are (the program that reads them decides).
const DATA: [ReceiverType; 4] = [
    ReceiverType::Console,
    ReceiverType::Webhook,
    ReceiverType::Pagerduty,
    ReceiverType::Alertmanager,
];

/// A subject or a title (e-mail, issues, tickets) is shown as text by every client: it links nothing.
const TITLES: [&str; 4] = ["subject", "title", "summary", "short_description"];

/// What of a Jira issue can link: in wiki markup everything but `{noformat}` blocks; in ADF, only the `href` of a
/// `link` mark (a text node is text, a code block code).
fn linkable(kind: ReceiverType, part: &str, text: &str) -> String {
    fn hrefs(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Array(items) => items.iter().for_each(|i| hrefs(i, out)),
            serde_json::Value::Object(map) => {
                if let Some(h) = map.get("href").and_then(|h| h.as_str()) {
                    out.push(h.to_string());
                }
                map.values().for_each(|i| hrefs(i, out));
            }
            _ => {}
        }
    }
    if kind != ReceiverType::Jira {
        return text.to_string();
    }
    if part.ends_with("json") {
        let mut out = Vec::new();
        hrefs(&serde_json::from_str(text).unwrap_or_default(), &mut out);
        return out.join(" ");
    }
    text.split("{noformat}").step_by(2).collect::<Vec<_>>().join(" ")
}

/// The hosts of the `http://` and `https://` URLs in `text`.
fn linked_hosts(text: &str) -> BTreeSet<String> {
    let mut hosts = BTreeSet::new();
    for scheme in ["https://", "http://"] {
        for (at, _) in text.match_indices(scheme) {
            let rest = &text[at + scheme.len()..];
            let host: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
                .collect();
            hosts.insert(host.to_ascii_lowercase());
        }
    }
    hosts
}

/// 021's sync started by alice failed on a repository at `gitlab.evil.example` (a host that only looks like GitLab
/// and is not in `links.git_hosts`), Argo CD's message naming a URL.
async fn a_sync_failed_on_an_unlisted_host() -> Vec<Notification> {
    let mut body = captured("021_remove_podinfo_1_1.json");
    let app = &mut body["app"];
    app["spec"]["source"]["repoURL"] = json!("https://gitlab.evil.example/acme/app");
    app["status"]["resources"][1]["requiresPruning"] = json!(false);
    let op = &mut app["status"]["operationState"];
    op["phase"] = json!("Failed");
    op["message"] = json!("one or more objects failed to apply: see https://evil.example/fix-it-now for the fix");
    op["operation"]["initiatedBy"] = json!({"username": "alice"});
    op["syncResult"]["revision"] = json!("3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5");
    Run::notifications_after(&body, Duration::from_secs(40)).await
}

#[tokio::test]
async fn every_outgoing_body_stays_under_the_email_limit_and_links_only_to_herald_argocd_and_trusted_git_hosts() {
    let mut with_links = a_group_of_40_applications().await;
    for i in with_links[0].incidents_mut() {
        i.actions = vec![crate::domain::action_link::MessageLink {
            label: "Acknowledge".into(),
            url: format!("https://herald.example.com/act/ack-{}", i.id),
        }];
    }
    with_links[0].status_url = Some("https://herald.example.com/?team=platform".into());
    let unlisted = a_sync_failed_on_an_unlisted_host().await;
    assert!(!unlisted.is_empty(), "the failed sync is told");
    let situations = [
        (
            "out-of-sync-with-prune-pending",
            out_of_sync_for_an_hour_with_a_prune_pending().await,
        ),
        ("sync-failed-by-a-user", a_sync_failed_by_a_user().await),
        ("degraded-two-resources", degraded_with_two_unhealthy_resources().await),
        ("multi-source", a_multi_source_application().await),
        ("degraded-after-a-deployment", degraded_after_a_deployment().await),
        ("resolved-after-1h12", a_resolve_after_1_h_12_min().await),
        ("group-of-40", a_group_of_40_applications().await),
        ("group-of-40-with-links", with_links),
        ("storm-of-40", a_storm_of_40_applications().await),
        ("unlisted-host", unlisted),
    ];
    let mut failures = Vec::new();
    let mut bodies = 0;
    for (situation, notifications) in &situations {
        for n in notifications {
            for kind in ReceiverType::ALL {
                for part in preview(kind, n, n.created_at) {
                    bodies += 1;
                    let at = format!("{situation}: {kind}.{}", part.name);
                    if part.text.len() > MAX_PART_BYTES {
                        failures.push(format!("{at}: {} bytes", part.text.len()));
                    }
                    if DATA.contains(&kind) || TITLES.contains(&part.name) {
                        continue;
                    }
                    for host in linked_hosts(&linkable(kind, part.name, &part.text)) {
                        if !TRUSTED.contains(&host.as_str()) {
                            let k = part.text.find(&host).unwrap_or(0);
                            let around: String = part.text[k.saturating_sub(60)..].chars().take(90).collect();
                            failures.push(format!("{at}: links to {host}: …{around}…"));
                        }
                    }
                }
            }
        }
    }
    assert!(bodies > 250, "{bodies} bodies read");
    assert!(failures.is_empty(), "{failures:#?}");
    // The unlisted host's repository is named as text, not linked.
    let text = crate::receivers::render::text(&situations[9].1[0]);
    assert!(text.contains("gitlab.evil.example/acme/app"), "{text}");
}
