//! The status page as a person sees it: the real binary fed with fixtures, loaded in a real headless Chromium
//! (Debian's `chromium`, started with the flags a closed network needs). A screenshot is saved to
//! `test-artifacts/status-page.png`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::helpers::*;
use serde_json::Value;

pub(crate) fn chromium(args: &[&str]) -> std::process::Output {
    let profile = tempfile::tempdir().expect("profile");
    let bin = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok())
        .expect("Chromium is not installed: apt-get install chromium (scripts/test does it)");
    Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .output()
        .expect("run chromium")
}

/// The text of the table rows inside the element with `id` (cells joined by ` | `, tags dropped, the header row
/// left out), as Herald wrote the page or as Chromium rendered the DOM.
pub(crate) fn rows(dom: &str, id: &str) -> Vec<String> {
    let Some(start) = dom.find(&format!("id=\"{id}\"")) else {
        return Vec::new();
    };
    let end = dom[start..].find("</table>").map(|e| start + e).unwrap_or(dom.len());
    dom[start..end]
        .split("<tr>")
        .skip(2) // the header row
        .map(|r| {
            let mut text = String::new();
            let mut in_tag = false;
            for c in r.chars() {
                match c {
                    '<' => in_tag = true,
                    '>' => {
                        in_tag = false;
                        text.push('|');
                    }
                    c if !in_tag => text.push(c),
                    _ => {}
                }
            }
            text.split('|')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect()
}

#[tokio::test]
async fn the_status_page_shows_what_needs_attention_in_a_real_browser() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            "server: {{listen: '127.0.0.1:0'}}\nstorage: {{url: 'sqlite://{}/h.db'}}\nscheduler: {{tick: 100ms}}\n\
             rules: {{sync_failed: {{for: 0s}}}}\ngrouping: {{group_wait: 0s}}\n\
             receivers: [{{name: down, webhook: {{url: 'http://127.0.0.1:9/x'}}}}, {{name: c, console: {{}}}}]\n\
             outbox: {{max_age: 1s, initial_backoff: 100ms}}\n\
             ownership: {{default_team: platform}}\nteams: {{platform: {{receivers: [down]}}}}\n",
            dir.path().display()
        ),
    )
    .expect("config");
    let bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();
    let post = |body: String| {
        let client = client.clone();
        let url = format!("{}/v1/argocd/events", bin.address);
        async move {
            let r = client.post(url).body(body).send().await.expect("post");
            assert_eq!(r.status(), 202);
        }
    };
    // The captured timeline: aaaaaaaaa ends OutOfSync with podinfo requiring pruning.
    for (_, body) in captured() {
        post(String::from_utf8(body).expect("utf8")).await;
    }
    bin.settle().await;
    post(envelope("ledger", "payments", "OutOfSync", "Healthy", &now_rfc3339())).await;
    post(with_operation(
        &envelope("billing-api", "billing", "OutOfSync", "Healthy", &now_rfc3339()),
        serde_json::json!({"phase": "Failed", "message": "one or more objects failed to apply", "startedAt": now_rfc3339()}),
    ))
    .await;
    let ends = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339();
    let r = client
        .post(format!("{}/v1/silences", bin.address))
        .body(format!(r#"{{"matchers":[{{"name":"app","value":"legacy-*"}}],"ends_at":"{ends}","created_by":"alice","comment":"decommissioning"}}"#))
        .send()
        .await
        .expect("silence");
    assert_eq!(r.status(), 201);
    // The webhook receiver is down: after max_age the delivery is dead.
    eventually(Duration::from_secs(10), || async {
        let v: Value = client
            .get(format!("{}/v1/outbox?state=dead", bin.address))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        // billing-api's failed sync, a sync still running and aaaaaaa's deletion (listed below).
        (v["count"].as_i64() >= Some(3)).then_some(())
    })
    .await
    .expect("three dead deliveries");

    let url = format!("{}/", bin.address);
    let out = chromium(&["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        dom.contains("<h1>Herald</h1>"),
        "Chromium rendered the page: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Every Application that is not Synced+Healthy, the longest first, with team, statuses, since and pruning count.
    let oos = rows(&dom, "attention-table");
    assert_eq!(oos.len(), 4, "{oos:#?}");
    assert!(
        oos[0].starts_with("argocd/aaaaa-aa | platform | Unknown | Healthy"),
        "{oos:#?}"
    );
    let aaa = oos
        .iter()
        .find(|r| r.starts_with("argocd/aaaaaaaaa | platform | OutOfSync | Healthy"))
        .expect("aaaaaaaaa needs attention");
    assert!(
        aaa.ends_with("| 1 | open"),
        "one resource requiring pruning, and a link to Argo CD: {oos:#?}"
    );
    assert!(
        oos.iter().any(|r| r.starts_with("argocd/ledger | payments"))
            && oos.iter().any(|r| r.starts_with("argocd/billing-api | billing")),
        "{oos:#?}"
    );
    let api: Value = client
        .get(format!("{}/v1/apps/argocd/aaaaaaaaa", bin.address))
        .send()
        .await
        .expect("a")
        .json()
        .await
        .expect("j");
    let since = chrono::DateTime::parse_from_rfc3339(api["sync"]["since"].as_str().expect("since")).expect("time");
    assert!(
        aaa.contains(&since.format("%Y-%m-%d %H:%M:%S UTC").to_string()),
        "the time shown is the since time: {oos:#?}"
    );
    // Argo CD's colours and a link to the Application in Argo CD (context.argocdUrl of the captured bodies).
    assert!(dom.contains("class=\"badge OutOfSync\""), "status colours");
    assert!(
        dom.contains("href=\"https://argocd.example.com/applications/argocd/ledger\""),
        "linked to Argo CD"
    );
    assert!(dom.contains("name=\"viewport\""), "readable on a phone");

    // One team, by a link to share: only its Applications and incidents.
    let team_url = format!("{}/?team=payments", bin.address);
    let team_dom = String::from_utf8_lossy(&chromium(&["--dump-dom", &team_url]).stdout).into_owned();
    let team_rows = rows(&team_dom, "attention-table");
    assert_eq!(team_rows.len(), 1, "{team_rows:#?}");
    assert!(team_rows[0].starts_with("argocd/ledger | payments"), "{team_rows:#?}");
    assert!(
        !team_dom.contains("Team billing"),
        "another team's incidents are not shown"
    );

    // Pending incidents say when they fire: ledger is OutOfSync, due in about an hour.
    let pending = rows(&dom, "pending-table");
    assert!(
        pending
            .iter()
            .any(|r| r.contains("fires in 59 min") && r.contains("argocd/ledger") && r.contains("OutOfSync for")),
        "{pending:#?}"
    );

    // Firing incidents by team, pending prunes, dead notifications, silences.
    assert!(dom.contains("Team billing"), "firing incidents grouped by team");
    assert!(dom.contains("Sync failed"), "in words");
    // The forms folded: one line an incident (what to do is folded the same way: `status_page::tests`).
    assert!(
        !dom.contains("<form")
            || dom.contains("<details class=\"acts\"><summary>Acknowledge or silence</summary><form"),
        "forms folded: {dom}"
    );
    assert!(!dom.contains("sync_failed"), "never the internal name");
    assert!(
        dom.contains("href=\"/apps/argocd/ledger\""),
        "each Application links to its page"
    );
    let prunes = rows(&dom, "prune-table");
    assert_eq!(prunes.len(), 1);
    assert!(
        prunes[0].contains("Application/argocd/podinfo") && prunes[0].ends_with("no"),
        "{prunes:#?}"
    );
    // billing-api's failed sync, and from the captured timeline (its operations started in 2025): a sync still
    // Running, and aaaaaaa deleted while its sync was still running.
    let dead = rows(&dom, "dead-table");
    // (aaaaaaaaa's own sync, Running as long, may be dead by now too.)
    assert!((3..=4).contains(&dead.len()), "{dead:#?}");
    let outbox: Value = (client.get(format!("{}/v1/outbox?state=dead", bin.address)).send().await)
        .expect("outbox")
        .json()
        .await
        .expect("json");
    let titles: Vec<&str> = (outbox["items"].as_array().expect("items").iter())
        .filter_map(|i| i["title"].as_str())
        .collect();
    let told = |what: &dyn Fn(&str) -> bool| titles.iter().any(|t| what(t));
    assert!(told(&|t| t.starts_with("billing-api: sync failed")), "{titles:#?}");
    assert!(told(&|t| t.starts_with("aaaaaaa: deleted from Argo CD")), "{titles:#?}");
    // One stuck sync, or both captured ones in one group ("a sync still running on 2 Applications…").
    assert!(
        told(&|t| t.contains("still running") && !t.contains("deleted from Argo CD")),
        "{titles:#?}"
    );
    let silences = rows(&dom, "silence-table");
    assert!(
        silences[0].contains("app=legacy-*") && silences[0].contains("alice"),
        "{silences:#?}"
    );
    assert!(dom.contains("http-equiv=\"refresh\""), "refreshes itself");
    assert!(!dom.contains("<script"), "no scripts, nothing from a CDN");

    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts dir");
    let shot = artifacts.join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1280,1400",
        &url,
    ]);
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a real screenshot");
    drop(bin);
}
