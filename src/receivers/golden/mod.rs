//! Golden files: what every kind of receiver sends in six situations built from the captured Argo CD bodies
//! (`tests/fixtures/argocd/captured/`), run through the real pipeline (state, incidents, routing, groups, titles) on
//! a manual clock. Each situation's notifications are rendered by [`preview`] for every kind and compared with
//! `src/receivers/golden/<situation>/<kind>.<part>`. `HERALD_BLESS=1` rewrites them, and renders the Slack and
//! e-mail messages as HTML pages with screenshots (headless chromium) into `docs/messages/`.

mod outgoing;
mod pages;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::ReceiverType;
use super::preview::preview;
use crate::clock::{Clock, ManualClock};
use crate::configuration::Settings;
use crate::domain::{Action, Incident, Notification};
use crate::pipeline::Pipeline;

const SETTINGS: &str = r#"
receivers: [{name: team-chat, console: {}}]
ownership: {default_team: platform}
teams: {platform: {receivers: [team-chat]}}
grouping: {group_wait: 30s, group_interval: 5m, repeat_interval: 4h}
"#;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn captured(name: &str) -> Value {
    let path = root().join("tests/fixtures/argocd/captured").join(name);
    serde_json::from_slice(&std::fs::read(&path).expect("a captured body")).expect("JSON")
}

fn time(body: &Value) -> DateTime<Utc> {
    let t = body["timestamp"].as_str().expect("an envelope timestamp");
    DateTime::parse_from_rfc3339(t).expect("RFC 3339").with_timezone(&Utc)
}

/// The pipeline on a private SQLite store, its clock at `start`.
struct Run {
    pipeline: Pipeline,
    clock: ManualClock,
    _dir: tempfile::TempDir,
}

impl Run {
    async fn start(start: DateTime<Utc>) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut settings = Settings::from_yaml(SETTINGS).expect("valid settings");
        let db = format!("sqlite://{}", dir.path().join("golden.db").display());
        settings.storage.url = secrecy::SecretString::from(db);
        let store = crate::store::Store::connect(&settings.storage).await.expect("a store");
        let clock = ManualClock::new(start);
        let pipeline = Pipeline::new(Arc::new(settings), store, Arc::new(clock.clone()));
        Self {
            pipeline,
            clock,
            _dir: dir,
        }
    }

    async fn post(&self, body: &Value) {
        let snap = crate::argocd::parse_body(body.to_string().as_bytes(), 64).expect("a valid body");
        self.pipeline.ingest(snap, None).await.expect("ingested");
        self.pipeline.tick().await.expect("ticked");
    }

    /// Moves the clock by `d` in 10-second steps, running the timers as they fall due.
    async fn wait(&self, d: Duration) {
        let end = self.clock.now() + chrono::Duration::from_std(d).expect("a duration");
        while self.clock.now() < end {
            self.clock.advance(Duration::from_secs(10));
            self.pipeline.tick().await.expect("ticked");
        }
    }

    /// Every notification queued when `body`, posted at its own time, has been followed by `d` of ticks.
    async fn notifications_after(body: &Value, d: Duration) -> Vec<Notification> {
        let run = Run::start(time(body)).await;
        run.post(body).await;
        run.wait(d).await;
        run.notifications().await
    }

    /// Every notification queued so far, oldest first.
    async fn notifications(&self) -> Vec<Notification> {
        let mut rows = self.pipeline.outbox(None, 1000, None).await.expect("the outbox");
        rows.reverse();
        rows.iter()
            .map(|r| serde_json::from_str(&r.payload).expect("a notification"))
            .collect()
    }
}

/// An hour after capture 021, `argocd/aaaaaaaaa` is OutOfSync with one resource (the `podinfo` Application) left
/// to prune: both rules fire in the same flush.
async fn out_of_sync_for_an_hour_with_a_prune_pending() -> Vec<Notification> {
    let body = captured("021_remove_podinfo_1_1.json");
    Run::notifications_after(&body, Duration::from_secs(3600 + 40)).await
}

/// Derived from 021: the sync `alice` started failed, with the message and the failing ServiceAccount of
/// `objects/02` (a name Kubernetes refuses) and the SyncError condition repeating it; nothing is left to prune.
async fn a_sync_failed_by_a_user() -> Vec<Notification> {
    let mut body = captured("021_remove_podinfo_1_1.json");
    let message = "one or more objects failed to apply, reason: ServiceAccount \"jen-jenkins_helm_demo\" is invalid: \
        metadata.name: Invalid value: \"jen-jenkins_helm_demo\": a lowercase RFC 1123 subdomain must consist of lower \
        case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
    let app = &mut body["app"];
    app["status"]["resources"][1]["requiresPruning"] = json!(false);
    let op = &mut app["status"]["operationState"];
    op["phase"] = json!("Failed");
    op["message"] = json!(message);
    op["operation"]["initiatedBy"] = json!({"username": "alice"});
    op["operation"]["sync"]["revision"] = json!("3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5");
    op["syncResult"]["revision"] = json!("3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5");
    op["syncResult"]["resources"] = json!([{
        "group": "", "version": "v1", "kind": "ServiceAccount", "namespace": "argocd", "name": "jen-jenkins_helm_demo",
        "status": "SyncFailed", "hookPhase": "Failed", "syncPhase": "Sync",
        "message": "ServiceAccount \"jen-jenkins_helm_demo\" is invalid: metadata.name: Invalid value",
    }]);
    app["status"]["conditions"] = json!([{
        "type": "SyncError",
        "message": format!("Failed sync attempt to 3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5: {message} (retried 5 times)."),
    }]);
    Run::notifications_after(&body, Duration::from_secs(40)).await
}

/// Derived from 010 (`argocd/aaaaaaa` Synced and Degraded): Argo CD's per-resource health added to the Deployment
/// and to a migration Job (as Argo CD keeps it before 3.0, or opted in).
async fn degraded_with_two_unhealthy_resources() -> Vec<Notification> {
    let mut body = captured("010_sync_podinfo_1_4.json");
    let resources = &mut body["app"]["status"]["resources"];
    resources[1]["health"] = json!({
        "status": "Degraded",
        "message": "Deployment \"aaaaaaa\" exceeded its progress deadline",
    });
    resources.as_array_mut().expect("resources").push(json!({
        "group": "batch", "version": "v1", "kind": "Job", "namespace": "aaaaaaa", "name": "aaaaaaa-migrate",
        "status": "Synced",
        "health": {"status": "Degraded", "message": "Job has reached the specified backoff limit"},
    }));
    Run::notifications_after(&body, Duration::from_secs(300 + 40)).await
}

/// 015 (`argocd/aaaaaaa`, multi-source: `syncResult.revision` empty, `revisions: ["6.9.0"]`), derived with a
/// second source holding the values (a Git repository at a commit), Degraded since 16:31.
async fn a_multi_source_application() -> Vec<Notification> {
    let mut body = captured("015_sync_podinfo_3_2.json");
    let commit = "3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5";
    let values = json!({"repoURL": "https://github.com/cdviz-dev/demo-cluster", "path": "values/podinfo",
                        "targetRevision": "HEAD", "ref": "values"});
    let app = &mut body["app"];
    app["spec"]["sources"].as_array_mut().expect("sources").push(values);
    app["status"]["sync"]["revisions"] = json!(["6.9.0", commit]);
    app["status"]["operationState"]["operation"]["sync"]["revisions"] = json!(["6.9.0", commit]);
    Run::notifications_after(&body, Duration::from_secs(300 + 40)).await
}

/// The values commit before and after the deployment of [`degraded_after_a_deployment`].
const VALUES_BEFORE: &str = "9b2f1c0d7e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";
const VALUES_AFTER: &str = "3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5";

/// 017 then 022 (`argocd/aaaaaaa`: chart podinfo 6.9.0 and image `ghcr.io/stefanprodan/aaaaaaa:6.9.0`, then the
/// sync to 6.9.2, which ran the image 6.9.2), both derived with a second source holding the values (a Git
/// repository, one commit before and another after), and 022 not being deleted, Degraded (the Deployment's health as Argo CD keeps it
/// before 3.0) with its sync's results as kubectl's client-side apply words them (`created`, `configured`) and one
/// resource pruned. Five minutes later: Degraded, with what the deployment changed.
async fn degraded_after_a_deployment() -> Vec<Notification> {
    let values = |commit: &str| {
        let source = json!({"repoURL": "https://github.com/cdviz-dev/demo-cluster", "path": "values/podinfo",
                            "targetRevision": "HEAD", "ref": "values"});
        (source, commit.to_string())
    };
    let with_values = |mut body: Value, chart: &str, commit: &str| {
        let (source, commit) = values(commit);
        let app = &mut body["app"];
        app["spec"]["sources"].as_array_mut().expect("sources").push(source);
        app["status"]["sync"]["revisions"] = json!([chart, commit]);
        app["status"]["operationState"]["operation"]["sync"]["revisions"] = json!([chart, commit]);
        app["status"]["operationState"]["syncResult"]["revisions"] = json!([chart, commit]);
        body
    };
    let before = with_values(captured("017_sync_podinfo_3_4.json"), "6.9.0", VALUES_BEFORE);
    let mut after = with_values(captured("022_remove_podinfo_2_1.json"), "6.9.2", VALUES_AFTER);
    let app = &mut after["app"];
    // 022 was captured while Argo CD deleted the Application: here it lives on.
    app["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("deletionTimestamp");
    app["status"]["health"] = json!({"status": "Degraded"});
    app["status"]["resources"][1]["health"] = json!({
        "status": "Degraded",
        "message": "Deployment \"aaaaaaa\" exceeded its progress deadline",
    });
    let results = &mut app["status"]["operationState"]["syncResult"]["resources"];
    results[0]["message"] = json!("service/aaaaaaa configured");
    results[1]["message"] = json!("deployment.apps/aaaaaaa configured");
    let results = results.as_array_mut().expect("sync results");
    results.push(json!({"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "aaaaaaa",
        "name": "aaaaaaa-config", "status": "Synced", "syncPhase": "Sync", "message": "configmap/aaaaaaa-config created"}));
    results.push(
        json!({"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "aaaaaaa",
        "name": "aaaaaaa-old", "status": "Pruned", "syncPhase": "Sync", "message": "pruned"}),
    );
    let run = Run::start(time(&before)).await;
    run.post(&before).await;
    run.clock.set(time(&after));
    run.post(&after).await;
    run.wait(Duration::from_secs(300 + 40)).await;
    // The prune is news of its own, told at once (with the same lines): the message here is the Degraded one.
    let all = run.notifications().await;
    assert!(all.iter().any(|n| {
        n.incidents()
            .iter()
            .any(|i| i.kind == crate::domain::Kind::Pruned && i.deployment.is_some())
    }));
    all.into_iter()
        .filter(|n| n.incidents().iter().all(|i| i.kind == crate::domain::Kind::Degraded))
        .collect()
}

/// 021 for an hour, then Synced with nothing to prune (derived) 1 h 12 min after it went OutOfSync: the resolve.
async fn a_resolve_after_1_h_12_min() -> Vec<Notification> {
    let body = captured("021_remove_podinfo_1_1.json");
    let start = time(&body);
    let run = Run::start(start).await;
    run.post(&body).await;
    run.wait(Duration::from_secs(72 * 60)).await;
    let mut synced = body.clone();
    synced["timestamp"] = json!(run.clock.now().to_rfc3339());
    synced["app"]["status"]["sync"]["status"] = json!("Synced");
    synced["app"]["status"]["resources"][1]["requiresPruning"] = json!(false);
    synced["app"]["status"]["resources"][1]["status"] = json!("Synced");
    run.post(&synced).await;
    run.wait(Duration::from_secs(40)).await;
    run.notifications()
        .await
        .into_iter()
        .filter(|n| n.action == Action::Resolve)
        .collect()
}

/// Forty copies of 021 (derived: names `shop-01`…`shop-40`, their own uids, nothing to prune), OutOfSync for an
/// hour together: one message for the team.
async fn a_group_of_40_applications() -> Vec<Notification> {
    let body = captured("021_remove_podinfo_1_1.json");
    let run = Run::start(time(&body)).await;
    for k in 1..=40 {
        let mut copy = body.clone();
        copy["app"]["metadata"]["name"] = json!(format!("shop-{k:02}"));
        copy["app"]["metadata"]["uid"] = json!(format!("00000000-0000-0000-0000-{k:012}"));
        copy["app"]["status"]["resources"][1]["requiresPruning"] = json!(false);
        run.post(&copy).await;
    }
    run.wait(Duration::from_secs(3600 + 40)).await;
    run.notifications().await
}

/// Forty copies of 021 (derived: `shop-01`…`shop-40`, their own uids) on one cluster, which stops answering: each
/// goes Unknown with Argo CD's ComparisonError, one every 1.5 seconds. Ten minutes later: one storm message, the
/// Applications' own incidents held by it.
async fn a_storm_of_40_applications() -> Vec<Notification> {
    let body = captured("021_remove_podinfo_1_1.json");
    let run = Run::start(time(&body)).await;
    let refused = "Failed to load live state: failed to get cluster info for \"https://kubernetes.default.svc\": \
        Get \"https://kubernetes.default.svc/version?timeout=32s\": dial tcp 10.96.0.1:443: connect: connection refused";
    for k in 1..=40 {
        let mut copy = body.clone();
        copy["timestamp"] = json!(run.clock.now().to_rfc3339());
        copy["app"]["metadata"]["name"] = json!(format!("shop-{k:02}"));
        copy["app"]["metadata"]["uid"] = json!(format!("00000000-0000-0000-0000-{k:012}"));
        copy["app"]["status"]["resources"][1]["requiresPruning"] = json!(false);
        copy["app"]["status"]["sync"]["status"] = json!("Unknown");
        copy["app"]["status"]["conditions"] = json!([{"type": "ComparisonError", "message": refused}]);
        run.post(&copy).await;
        run.clock.advance(Duration::from_millis(1500));
    }
    run.wait(Duration::from_secs(600 + 40)).await;
    run.notifications().await
}

/// Compares `text` with the golden file at `path`, or writes it when blessing.
fn check(path: &Path, text: &str, bless: bool, failures: &mut Vec<String>) {
    if bless {
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("a golden folder");
        std::fs::write(path, text).expect("a golden file");
        return;
    }
    match std::fs::read_to_string(path) {
        Ok(golden) if golden == text => {}
        Ok(_) => failures.push(format!("{} differs", path.display())),
        Err(e) => failures.push(format!("{}: {e}", path.display())),
    }
}

/// Renders the situation's one notification for every kind and checks each part against its golden file.
fn golden(situation: &str, notifications: &[Notification]) {
    assert_eq!(
        notifications.len(),
        1,
        "{situation}: one message, got {:#?}",
        notifications.iter().map(|n| &n.title).collect::<Vec<_>>()
    );
    let n = &notifications[0];
    let bless = std::env::var("HERALD_BLESS").is_ok_and(|v| v == "1");
    let dir = root().join("src/receivers/golden").join(situation);
    let mut failures = Vec::new();
    for kind in ReceiverType::ALL {
        let parts = preview(kind, n, n.created_at);
        for (k, part) in parts.iter().enumerate() {
            let name = match parts.iter().filter(|p| p.name == part.name).count() {
                1 => format!("{kind}.{}", part.name),
                _ => format!("{kind}.{k}.{}", part.name),
            };
            check(&dir.join(name), &part.text, bless, &mut failures);
        }
    }
    if bless {
        pages::write(situation, n);
    }
    assert!(
        failures.is_empty(),
        "{situation}: {failures:#?}\nrun with HERALD_BLESS=1 to accept the new renderings, and read the diff"
    );
}

/// The text of the incident's hint `id`; fails the test when it has no such hint.
fn hint<'a>(i: &'a Incident, id: &str) -> &'a str {
    match i.hints.iter().find(|h| h.id == id) {
        Some(h) => &h.text,
        None => panic!("no hint {id:?} in {:?}", i.hints),
    }
}

#[tokio::test]
async fn out_of_sync_for_an_hour_because_of_a_prune_pending_is_one_incident_the_prune() {
    // One cause, one incident: the resource waiting to be pruned is why the Application is OutOfSync (built-in
    // inhibition), so people see the prune, with what to do about it.
    let n = out_of_sync_for_an_hour_with_a_prune_pending().await;
    golden("out-of-sync-with-prune-pending", &n);
    assert_eq!(n[0].incidents().len(), 1);
    assert_eq!(n[0].title, "aaaaaaaaa: 1 resource waiting to be pruned for over 1 h");
    let prune = hint(&n[0].incidents()[0], "prune_disabled");
    assert!(prune.contains("--resource argoproj.io:Application:podinfo"), "{prune}");
}

#[tokio::test]
async fn a_sync_failed_by_a_user_is_titled_by_its_first_sentence_and_says_the_message_once() {
    let n = a_sync_failed_by_a_user().await;
    golden("sync-failed-by-a-user", &n);
    assert_eq!(
        n[0].title,
        "aaaaaaaaa: sync failed: one or more objects failed to apply"
    );
    let i = &n[0].incidents()[0];
    assert_eq!(i.messages.len(), 1, "{:?}", i.messages);
    assert_eq!(i.initiated_by.as_deref(), Some("user alice"));
    // No `people` entry for alice: the team is told who started it, and that Herald could not tell her.
    assert_eq!(i.notes, vec!["started by alice (no contact configured)"]);
}

#[tokio::test]
async fn degraded_says_why_with_each_unhealthy_resource_and_the_hint() {
    let n = degraded_with_two_unhealthy_resources().await;
    golden("degraded-two-resources", &n);
    let i = &n[0].incidents()[0];
    let statuses: Vec<(&str, &str)> = i
        .resources
        .iter()
        .map(|r| (r.name.as_str(), r.message.as_str()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("aaaaaaa", "Deployment \"aaaaaaa\" exceeded its progress deadline"),
            ("aaaaaaa-migrate", "Job has reached the specified backoff limit")
        ]
    );
    assert!(
        hint(i, "job_failed").contains("logs job/aaaaaaa-migrate"),
        "{:?}",
        i.hints
    );
    assert!(
        hint(i, "rollout_stuck").contains("rollout status deployment/aaaaaaa"),
        "{:?}",
        i.hints
    );
}

#[tokio::test]
async fn a_multi_source_application_names_each_source_with_its_revision() {
    let n = a_multi_source_application().await;
    golden("multi-source", &n);
    let sources = &n[0].incidents()[0].sources;
    let revisions: Vec<Option<&str>> = sources.iter().map(|s| s.revision.as_deref()).collect();
    assert_eq!(
        revisions,
        [Some("6.9.0"), Some("3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5")]
    );
    assert!(sources[1].commit_url.is_some());
}

#[tokio::test]
async fn degraded_after_a_deployment_says_what_the_deployment_changed() {
    let n = degraded_after_a_deployment().await;
    golden("degraded-after-a-deployment", &n);
    let d = n[0].incidents()[0]
        .deployment
        .as_ref()
        .expect("what the deployment changed");
    let images: Vec<String> = d.images.iter().map(|i| i.describe()).collect();
    assert_eq!(images, ["ghcr.io/stefanprodan/aaaaaaa:6.9.0 → 6.9.2"]);
    let sources: Vec<String> = d.sources.iter().map(|s| s.describe()).collect();
    assert_eq!(sources, ["aaaaaaa 6.9.0 → 6.9.2", "9b2f1c0d7e6a → 3de5b39dd542"]);
    assert_eq!(d.sources[0].compare_url, None, "a chart version has no comparison");
    assert_eq!(
        d.sources[1].compare_url.as_deref(),
        Some(format!("https://github.com/cdviz-dev/demo-cluster/compare/{VALUES_BEFORE}...{VALUES_AFTER}").as_str())
    );
    assert_eq!(d.resources.describe(), "1 created, 2 changed, 1 pruned");
}

#[tokio::test]
async fn a_resolve_says_when_and_after_how_long() {
    let n = a_resolve_after_1_h_12_min().await;
    golden("resolved-after-1h12", &n);
    assert!(n[0].title.contains("ended after 1 h 12 min"), "{}", n[0].title);
}

#[tokio::test]
async fn a_group_of_40_applications_is_one_list() {
    let n = a_group_of_40_applications().await;
    golden("group-of-40", &n);
    assert_eq!(n[0].title, "OutOfSync on 40 Applications of team platform");
}

#[tokio::test]
async fn a_group_of_40_applications_with_one_click_links_offers_acknowledge_all() {
    let mut n = a_group_of_40_applications().await;
    // As `server.public_url` and `server.link_signing_key` make them (tokens fixed here: they are random).
    let link = |label: &str, token: &str| crate::domain::action_link::MessageLink {
        label: label.into(),
        url: format!("https://herald.example.com/act/{token}"),
    };
    for i in n[0].incidents_mut() {
        i.actions = vec![link("Acknowledge", &format!("ack-{}", i.id))];
    }
    n[0].group_actions = vec![link("Acknowledge all 40", "ack-all-40")];
    n[0].status_url = Some("https://herald.example.com/?team=platform".into());
    golden("group-of-40-with-links", &n);
}

#[tokio::test]
async fn a_storm_of_40_applications_is_one_message_about_the_cluster() {
    let n = a_storm_of_40_applications().await;
    golden("storm-of-40", &n);
    assert_eq!(
        n[0].title,
        "cluster https://kubernetes.default.svc: 40 Applications Unknown since 17:01 UTC (connection refused)"
    );
}
