//! A receiver's own `template` (minijinja): the context it is rendered with (`notification`, `incidents`, `text`),
//! how every value it writes is escaped, the errors that name the line, and the sample notifications `herald
//! check-config` renders each template against (a firing incident, a resolved one, a digest) — so a template that
//! would fail a delivery for good is refused as configuration instead. `docs/templates.md` lists the variables;
//! a test keeps that list equal to what [`complete_sample`] serialises to.

use chrono::{DateTime, Duration, TimeZone, Utc};

use super::{DeliveryError, escape, text};
use crate::domain::action_link::MessageLink;
use crate::domain::digest::{DeadDelivery, FiringIncident, OutOfSyncApp, PendingPrune, SilenceLine};
use crate::domain::incident::SourceRevision;
use crate::domain::notification::Stored;
use crate::domain::{
    Acknowledgement, Action, Body, Change, Deployment, Digest, Hint, ImageChange, Incident, IncidentState, Kind,
    Notification, Recipient, ResourceRef, Severity, SourceChange, SyncCounts,
};

/// How a receiver's template writes values into its target's markup: each value's lines escaped by the target's
/// one-line escape ([`escape::each_line`]). The template's own text is written as it is.
pub type TemplateEscape = fn(&str) -> String;

/// Why a template does not render: the line (when minijinja knows it) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub line: Option<usize>,
    pub message: String,
}

impl TemplateError {
    fn from_minijinja(e: &minijinja::Error) -> Self {
        let message = match e.detail() {
            Some(detail) => format!("{}: {detail}", e.kind()),
            None => e.kind().to_string(),
        };
        TemplateError {
            line: e.line(),
            message,
        }
    }
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// The receiver's own `template` rendered, when it has one, every value escaped by `escape` for the receiver's
/// markup. A template that does not render fails the delivery for good: retrying renders it the same way.
pub fn custom_text(
    template: Option<&str>,
    n: &Notification,
    escape: TemplateEscape,
) -> Result<Option<String>, DeliveryError> {
    template
        .map(|t| with_template(t, n, escape).map_err(|e| DeliveryError::permanent(format!("template: {e}"))))
        .transpose()
}

/// Renders a receiver's own minijinja template with the notification as context (`notification`, `incidents`,
/// `text`). Every value the template writes is escaped by `escape`, line by line (a value marked `|safe` is
/// written as it is: the operator then vouches for it). Errors say what is wrong with the template, and on which
/// line.
pub fn with_template(template: &str, n: &Notification, escape: TemplateEscape) -> Result<String, TemplateError> {
    let mut env = minijinja::Environment::new();
    env.set_formatter(move |out, _state, value| {
        if value.is_safe() {
            write!(out, "{value}")?;
        } else {
            out.write_str(&escape::each_line(&value.to_string(), escape))?;
        }
        Ok(())
    });
    let error = |e: minijinja::Error| TemplateError::from_minijinja(&e);
    env.add_template("template", template).map_err(error)?;
    env.get_template("template")
        .and_then(|t| t.render(context(n)))
        .map_err(error)
}

/// What a template sees: `notification` (every field of [`Notification`]), `incidents` (the same list as
/// `notification.incidents`) and `text` (Herald's own plain-text rendering of the whole message).
fn context(n: &Notification) -> minijinja::Value {
    minijinja::context! {
        notification => minijinja::value::Serde(n),
        incidents => minijinja::value::Serde(n.incidents()),
        text => text(n),
    }
}

/// The context of `n` as JSON, as a template reads it (`docs/templates.md` lists its keys).
pub fn context_json(n: &Notification) -> serde_json::Value {
    serde_json::json!({
        "notification": n,
        "incidents": n.incidents(),
        "text": text(n),
    })
}

/// [`context_json`] of a notification in its stored shape, which may hold every body at once (the complete sample
/// does): its `text` is that of the notification it reads back as.
pub fn stored_context_json(s: &Stored) -> serde_json::Value {
    serde_json::json!({
        "notification": s,
        "incidents": s.incidents,
        "text": text(&Notification::from(s.clone())),
    })
}

/// Renders `template` against each sample a receiver may be sent: a firing incident, a resolved one and, for a
/// receiver that takes digests, a digest. The first failure says which sample and which line.
pub fn check(template: &str, takes_digest: bool) -> Result<(), String> {
    for (what, n) in samples(sample_time(), takes_digest) {
        if let Err(e) = with_template(template, &n, escape::one_line) {
            return Err(format!("{e} (rendering {what})"));
        }
    }
    Ok(())
}

/// A fixed time for the samples, so a template is judged the same way every time: 2026-12-02 10:00 UTC.
fn sample_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 2, 10, 0, 0).single().unwrap_or_default()
}

/// What a receiver may be sent, as `check` renders it: `(what, notification)`.
pub fn samples(now: DateTime<Utc>, digest: bool) -> Vec<(&'static str, Notification)> {
    let complete = complete_sample(now);
    let digest_body = complete.digest.clone().unwrap_or_default();
    let complete = Notification::from(complete);
    let incident = Incident {
        instance: crate::domain::default_instance(),
        resolved_at: None,
        resolution: None,
        acknowledged: None,
        ..complete_incident(now)
    };
    let firing = Notification {
        action: Action::Open,
        reason: "fired".into(),
        body: Body::Incidents(vec![incident.clone()]),
        recipient: None,
        ..complete.clone()
    };
    let resolved = Notification {
        action: Action::Resolve,
        title: "payments-api is Synced again".into(),
        reason: "resolved".into(),
        body: Body::Incidents(vec![Incident {
            state: IncidentState::Resolved,
            resolved_at: Some(now),
            actions: vec![],
            ..incident
        }]),
        ..firing.clone()
    };
    let mut out = vec![("a firing incident", firing), ("a resolved incident", resolved)];
    if digest {
        out.push((
            "a digest",
            Notification {
                action: Action::Digest,
                thread_key: "digest:payments".into(),
                title: "Digest for payments: 1 OutOfSync, 1 prune pending, 1 incident firing".into(),
                reason: "digest".into(),
                body: Body::Digest(digest_body),
                recipient: None,
                ..complete
            },
        ));
    }
    out
}

/// One notification, in its stored shape, with every field a template can read set (no empty list, no absent value;
/// every body at once, as no notification sent has them): the one `docs/templates.md` lists the variables of.
/// Written without `..Default::default()`, so a field added to any of these types does not compile until it is
/// given a value here — and then the page's test asks for its row.
pub fn complete_sample(now: DateTime<Utc>) -> Stored {
    let argocd = "https://argocd.example.com/applications/argocd/payments-api";
    let commit = "3de5b39dd5428a9b1c8e0c6f0f9d2a1b7c4e5f60";
    let since = now - Duration::minutes(75);
    let incident = complete_incident(now);
    let digest = Digest {
        team: "payments".into(),
        at: now,
        timezone: "Europe/Berlin".into(),
        out_of_sync: vec![OutOfSyncApp {
            app: "argocd/payments-api".into(),
            since,
            revision: Some(commit.into()),
            pruning: 1,
            url: Some(argocd.into()),
        }],
        pending_prunes: vec![PendingPrune {
            app: "argocd/payments-api".into(),
            resource: "ConfigMap payments/old-settings".into(),
            since,
        }],
        firing: vec![FiringIncident {
            app: "argocd/payments-api".into(),
            problem: "OutOfSync".into(),
            summary: "payments-api has been OutOfSync for 1 h 15 min".into(),
            since,
        }],
        silences: vec![SilenceLine {
            id: "3f2a9c1e".into(),
            matchers: "team=payments, app=payments-*".into(),
            comment: "migration".into(),
            created_by: "bob".into(),
            ends_at: now + Duration::hours(3),
            ends_before_next: true,
        }],
        dead: vec![DeadDelivery {
            id: 9,
            receiver: "payments-slack".into(),
            title: "[FIRING] payments-api is OutOfSync".into(),
            error: "slack webhook: 404 no_service".into(),
            created_at: now - Duration::days(1),
        }],
        status_url: Some("https://herald.example.com/?team=payments".into()),
    };
    Stored {
        receiver: "payments-slack".into(),
        action: Action::Open,
        thread_key: "group:payments:argocd/payments-api".into(),
        title: "payments-api is OutOfSync".into(),
        reason: "fired".into(),
        incidents: vec![incident],
        created_at: now,
        digest: Some(Box::new(digest)),
        recipient: Some(Recipient {
            username: "alice".into(),
            email: Some("alice@example.com".into()),
            slack: Some("U024BE7LH".into()),
        }),
        change: Some(Box::new(Change {
            instance: "us".into(),
            app_namespace: "argocd".into(),
            app_name: "payments-api".into(),
            project: "shop".into(),
            team: "payments".into(),
            destination_namespace: "payments".into(),
            revision: commit.into(),
            previous_revision: Some("9b2f1c0d7e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c".into()),
            initiator: "alice".into(),
            finished_at: now,
            app_url: Some(argocd.into()),
        })),
        status_url: Some("https://herald.example.com/?team=payments".into()),
        group_actions: Vec::new(),
        zone: Default::default(),
        // Told only to `github_status` receivers, which take no template.
        commit_status: None,
    }
}

/// The incident of [`complete_sample`], every field set.
fn complete_incident(now: DateTime<Utc>) -> Incident {
    let since = now - Duration::minutes(75);
    let argocd = "https://argocd.example.com/applications/argocd/payments-api";
    let commit = "3de5b39dd5428a9b1c8e0c6f0f9d2a1b7c4e5f60";
    Incident {
        id: 42,
        fingerprint: "us/argocd/payments-api:out_of_sync".into(),
        kind: Kind::OutOfSync,
        severity: Severity::Warning,
        state: IncidentState::Firing,
        summary: "payments-api has been OutOfSync for 1 h 15 min".into(),
        instance: "us".into(),
        app_namespace: "argocd".into(),
        app_name: "payments-api".into(),
        project: "shop".into(),
        team: "payments".into(),
        destination_cluster: "https://kubernetes.default.svc".into(),
        destination_namespace: "payments".into(),
        app_url: Some(argocd.into()),
        since,
        fired_at: Some(since + Duration::hours(1)),
        resolved_at: Some(now),
        revision: Some(commit.into()),
        previous_revision: Some("9b2f1c0d7e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c".into()),
        initiated_by: Some("alice".into()),
        resources: vec![ResourceRef {
            kind: "Deployment".into(),
            namespace: "payments".into(),
            name: "payments-api".into(),
            status: "OutOfSync".into(),
            message: "replicas: 3 → 2".into(),
            group: "apps".into(),
            url: Some(format!("{argocd}?resource=apps%2FDeployment%2Fpayments%2Fpayments-api")),
        }],
        messages: vec!["one or more objects failed to apply".into()],
        hints: vec![Hint {
            id: "manual_change".into(),
            title: "Someone changed it by hand".into(),
            text: "Sync again, or put the change in Git.".into(),
        }],
        labels: [("tier".to_string(), "backend".to_string())].into(),
        notes: vec!["not confirmed: Argo CD API unreachable".into()],
        resolution: Some("Application deleted".into()),
        condition: "OutOfSync".into(),
        sources: vec![SourceRevision {
            repo_url: "https://github.com/acme/apps.git".into(),
            path: Some("payments".into()),
            chart: Some("payments".into()),
            target_revision: Some("main".into()),
            revision: Some(commit.into()),
            commit_url: Some(format!("https://github.com/acme/apps/commit/{commit}")),
        }],
        deployment: Some(Deployment {
            images: vec![ImageChange {
                image: "ghcr.io/acme/payments-api".into(),
                from: Some("1.4.2".into()),
                to: Some("1.5.0".into()),
            }],
            more_images: 2,
            sources: vec![
                SourceChange {
                    repo_url: "https://github.com/acme/apps.git".into(),
                    chart: None,
                    from: Some("9b2f1c0d7e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c".into()),
                    to: Some(commit.into()),
                    compare_url: Some(format!(
                        "https://github.com/acme/apps/compare/9b2f1c0d7e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c...{commit}"
                    )),
                },
                SourceChange {
                    repo_url: "https://charts.acme.example".into(),
                    chart: Some("redis".into()),
                    from: Some("18.1.0".into()),
                    to: Some("18.2.1".into()),
                    compare_url: None,
                },
            ],
            resources: SyncCounts {
                created: 1,
                changed: 2,
                applied: 3,
                pruned: 1,
            },
        }),
        asked_receivers: vec!["payments-pager".into()],
        // Never in a message: filled in only when incidents are read (the API, `herald incidents`, the pages).
        held: None,
        sync_window: Some(crate::domain::SyncWindowHold {
            until: now + Duration::hours(2),
            manual_sync: false,
        }),
        acknowledged: Some(Acknowledgement {
            by: "alice".into(),
            at: now - Duration::minutes(5),
            until: Some(now + Duration::hours(2)),
            comment: "rolling back".into(),
        }),
        actions: vec![MessageLink {
            label: "Acknowledge".into(),
            url: "https://herald.example.com/act/eyJh…".into(),
        }],
    }
}

/// Every variable path of a context (`notification.title`, `incidents[].resources[].kind`), with the JSON value
/// of its first occurrence, in order.
pub fn variables(context: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
        if !prefix.is_empty() && !out.iter().any(|(p, _)| p == prefix) {
            out.push((prefix.to_string(), v.clone()));
        }
        match v {
            serde_json::Value::Object(m) => {
                for (k, child) in m {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&path, child, out);
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    walk(&format!("{prefix}[]"), item, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", context, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;

    fn page() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/templates.md")).expect("docs/templates.md")
    }

    /// The variable column of the page's table: `| \`notification.title\` | …`.
    fn listed(page: &str) -> Vec<String> {
        page.lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .filter(|v| v.starts_with("notification") || v.starts_with("incidents") || *v == "text")
            .map(str::to_string)
            .collect()
    }

    /// The type a template sees, as the page says it.
    fn type_of(path: &str, v: &serde_json::Value, optional: bool) -> String {
        let t = match v {
            serde_json::Value::String(s) if DateTime::parse_from_rfc3339(s).is_ok() => "time (RFC 3339 string)",
            serde_json::Value::String(_) => "string",
            serde_json::Value::Number(_) => "integer",
            serde_json::Value::Bool(_) => "boolean",
            serde_json::Value::Array(_) => "list",
            serde_json::Value::Object(_) if path.ends_with("labels") => "map of strings",
            serde_json::Value::Object(_) => "object",
            serde_json::Value::Null => "none",
        };
        if optional {
            format!("{t}, may be absent")
        } else {
            t.to_string()
        }
    }

    /// The page's table as this code would write it: every variable of the complete sample but those under
    /// `notification.incidents[]` (the same as `incidents[]`) and inside a `labels` map (its keys are the
    /// Application's), with its type and example. A variable is "may be absent" when a sample with every value
    /// at its default lacks it or has it none.
    fn table() -> String {
        let now = sample_time();
        let complete = stored_context_json(&complete_sample(now));
        let sparse_incident = Incident {
            resources: vec![ResourceRef::default()],
            hints: vec![Hint::default()],
            sources: vec![SourceRevision::default()],
            deployment: Some(Deployment {
                images: vec![ImageChange::default()],
                sources: vec![SourceChange::default()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let sparse = Stored {
            incidents: vec![sparse_incident],
            digest: Some(Box::new(Digest {
                out_of_sync: vec![OutOfSyncApp::default()],
                pending_prunes: vec![PendingPrune::default()],
                firing: vec![FiringIncident::default()],
                silences: vec![SilenceLine::default()],
                dead: vec![DeadDelivery::default()],
                ..Default::default()
            })),
            ..Stored::from(Notification::test("r", now))
        };
        let plain = Notification {
            body: Body::Incidents(vec![Incident::default()]),
            ..Notification::test("r", now)
        };
        let plain = Stored::from(plain);
        let present = |n: &Stored| -> std::collections::HashMap<String, serde_json::Value> {
            (variables(&stored_context_json(n)).into_iter())
                .filter(|(_, v)| !v.is_null())
                .collect()
        };
        let (plain, sparse) = (present(&plain), present(&sparse));
        // Absent where its parent is present, in a notification with every value at its default (an item of a
        // list is an item, not a value that may be absent).
        let optional = |path: &str| {
            let parent = path.rsplit_once('.').map_or("", |(p, _)| p);
            !path.ends_with("[]")
                && [&plain, &sparse]
                    .iter()
                    .any(|s| s.contains_key(parent) && !s.contains_key(path))
        };
        let mut out = String::from("| variable | type | example |\n|---|---|---|\n");
        for (path, v) in variables(&complete) {
            if path.starts_with("notification.incidents[]") || path.contains("labels.") {
                continue;
            }
            let example = match &v {
                serde_json::Value::Object(_) | serde_json::Value::Array(_) => String::new(),
                serde_json::Value::String(s) if s.chars().count() > 48 => {
                    format!("`{}…`", s.chars().take(47).collect::<String>().replace('|', "\\|"))
                }
                other => format!("`{}`", other.to_string().trim_matches('"').replace('|', "\\|")),
            };
            let _ = writeln!(
                out,
                "| `{path}` | {} | {example} |",
                type_of(&path, &v, optional(&path))
            );
        }
        out
    }

    const BEGIN: &str = "<!-- variables: begin (generated: HERALD_BLESS=1 cargo test --lib templates_page) -->\n";
    const END: &str = "<!-- variables: end -->";

    #[test]
    fn the_templates_page_lists_every_variable_a_template_can_use() {
        let page = page();
        let expected = table();
        if std::env::var_os("HERALD_BLESS").is_some() {
            let (head, rest) = page.split_once(BEGIN).expect("the page's begin marker");
            let (_, tail) = rest.split_once(END).expect("the page's end marker");
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/templates.md");
            std::fs::write(path, format!("{head}{BEGIN}{expected}{END}{tail}")).expect("write the page");
            return;
        }
        let wanted = listed(&expected);
        let on_page = listed(&page);
        let missing: Vec<&String> = wanted.iter().filter(|v| !on_page.contains(v)).collect();
        let stale: Vec<&String> = on_page.iter().filter(|v| !wanted.contains(v)).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "docs/templates.md: not listed {missing:?}, listed but gone {stale:?} (HERALD_BLESS=1 rewrites the table)"
        );
        assert!(
            page.contains(&expected),
            "docs/templates.md: types or examples changed (HERALD_BLESS=1)"
        );
    }

    #[test]
    fn incidents_is_the_list_notification_incidents_is() {
        let c = stored_context_json(&complete_sample(sample_time()));
        assert_eq!(c["incidents"], c["notification"]["incidents"]);
        let under = |root: &str| -> Vec<String> {
            variables(&c)
                .into_iter()
                .filter_map(|(p, _)| p.strip_prefix(root).map(str::to_string))
                .collect()
        };
        assert_eq!(under("notification.incidents[]"), under("incidents[]"));
    }

    #[test]
    fn the_complete_sample_leaves_nothing_empty() {
        for (path, v) in variables(&stored_context_json(&complete_sample(sample_time()))) {
            let empty = v.is_null() || v.as_str() == Some("") || v.as_array().is_some_and(Vec::is_empty);
            assert!(
                !empty,
                "{path} is empty in the complete sample: the page could not list what is inside"
            );
        }
    }

    #[test]
    fn a_template_that_fails_names_the_line_and_the_sample() {
        let broken = "{{ notification.title }}\n{{ notification.title | no_such_filter }}";
        let e = check(broken, false).unwrap_err();
        assert!(e.starts_with("line 2: "), "{e}");
        assert!(e.contains("no_such_filter"), "{e}");
        assert!(e.ends_with("(rendering a firing incident)"), "{e}");

        let syntax = "{% for i in incidents %}\n{{ i.app_name }}";
        let e = check(syntax, false).unwrap_err();
        assert!(e.contains("syntax error"), "{e}");
        assert!(e.starts_with("line 2: "), "{e}");

        // Fine for incidents, broken for a digest (no incident to index): only a receiver taking digests fails.
        let first = "{{ incidents[0].app_name }}";
        assert_eq!(check(first, false), Ok(()));
        let e = check(first, true).unwrap_err();
        assert!(e.ends_with("(rendering a digest)"), "{e}");
    }

    #[test]
    fn a_template_writes_values_escaped_for_its_target_and_its_own_text_as_it_is() {
        let mut n = crate::receivers::testing::notification(Action::Open);
        n.title = "<!channel> [x](https://evil.example)\n# h @all".into();
        let t = "*{{ notification.title }}*";
        assert_eq!(
            with_template(t, &n, escape::mrkdwn_keep_links).unwrap(),
            "*&lt;!channel&gt; [x](https://evil.example)\n# h @\u{2060}all*"
        );
        assert_eq!(
            with_template(t, &n, escape::commonmark_keep_links).unwrap(),
            "*&lt;\\!channel&gt; \\[x\\]\\(https://evil.example\\)\n\\# h @\u{2060}all*"
        );
        assert_eq!(
            with_template("{{ notification.title|safe }}", &n, escape::mrkdwn).unwrap(),
            n.title,
            "|safe is the operator's word that a value is markup"
        );
        let listed = "{% for i in incidents %}- {{ i.app_name }}\n{% endfor %}";
        n.incidents_mut()[0].app_name = "a\n- <!here>".into();
        assert_eq!(
            with_template(listed, &n, escape::mrkdwn).unwrap(),
            "- a\n- &lt;!here&gt;\n"
        );
    }
}
