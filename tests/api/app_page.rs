//! An Application's page as a person sees it: a timeline replayed on the manual clock (OutOfSync at 10:00, the
//! incident fires after an hour, people are told, someone acknowledges, Synced again) reads back in words, newest
//! first and paged, in the zone asked for, in a real headless Chromium (screenshot in
//! `test-artifacts/app-page.png`); the Acknowledge and Silence forms act only with their token and the scope; hostile
//! paths and parameters get 4xx pages, never a 5xx, and what Argo CD sent is shown as text.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::helpers::*;
use crate::status_page::{chromium, rows};
use herald::clock::{Clock, ManualClock};
use serde_json::{Value, json};

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T10:00:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc)
}

fn open_config(dir: &Path) -> String {
    format!(
        r#"
receivers:
  - {{name: chat, console: {{file: "{d}/chat.jsonl"}}}}
  - {{name: pager, console: {{file: "{d}/pager.jsonl"}}}}
ownership: {{default_team: payments}}
teams:
  payments:
    receivers: [chat]
    escalation: [{{after: 30m, receivers: [pager]}}]
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 4h}}
"#,
        d = dir.display()
    )
}

async fn post_status(app: &TestApp, clock: &ManualClock, sync: &str, health: &str) {
    let body = envelope("pay-api", "payments", sync, health, &clock.now().to_rfc3339());
    let r = app.post(body).await;
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
    app.settle().await;
}

async fn page(app: &TestApp, path: &str) -> (u16, String) {
    let r = app
        .client
        .get(format!("{}{path}", app.address))
        .send()
        .await
        .expect("get");
    let status = r.status().as_u16();
    (status, r.text().await.expect("text"))
}

/// The `href` of the element with `id`, as written (entities decoded for `&`).
fn href(html: &str, id: &str) -> Option<String> {
    let start = html.find(&format!("id=\"{id}\""))?;
    let tag_start = html[..start].rfind('<')?;
    let tag = &html[tag_start..start + html[start..].find('>')?];
    let h = tag.split("href=\"").nth(1)?.split('"').next()?;
    Some(h.replace("&amp;", "&"))
}

fn position(rows: &[String], needle: &str) -> usize {
    rows.iter()
        .position(|r| r.contains(needle))
        .unwrap_or_else(|| panic!("no row with {needle:?}: {rows:#?}"))
}

#[tokio::test]
async fn an_applications_page_tells_its_story_newest_first_in_words_and_in_the_readers_zone() {
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &open_config(&d), Arc::new(clock.clone())).await;

    // 10:00 OutOfSync; the incident fires after an hour (at the tick past it) and chat is told.
    post_status(&app, &clock, "OutOfSync", "Healthy").await;
    app.advance(&clock, Duration::from_secs(60 * 60 + 30)).await;
    assert_eq!(wait_for(&d.join("chat.jsonl"), 1).await[0]["action"], "open");
    let incident = app.get_json("/v1/incidents?state=firing").await["items"][0].clone();
    let id = incident["id"].as_i64().expect("id");

    let (status, html) = page(&app, "/apps/argocd/pay-api").await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("OutOfSync for over 1 h"), "the incident in words: {html}");
    assert!(!html.contains("out_of_sync"), "no internal names");
    let fired = chrono::DateTime::parse_from_rfc3339(incident["fired_at"].as_str().expect("fired_at")).expect("t");
    let pager_in = (fired + chrono::Duration::minutes(30)).with_timezone(&chrono::Utc) - clock.now();
    assert!(
        html.contains(&format!(
            "Next: pager in {} min (escalation step 1",
            pager_in.num_minutes()
        )),
        "the escalation line: {html}"
    );
    assert!(
        html.contains("<strong>chat</strong> told: "),
        "who was told, in the incident: {html}"
    );

    // Alice acknowledges with the page's form: an open Herald (no server.auth) asks who she is.
    let ack = format!("/incidents/{id}/ack");
    let token = token_of(&html, &ack).expect("an open Herald shows the forms");
    assert!(html.contains("name=\"name\""), "and asks for a name");
    let fields = [
        ("csrf", token.as_str()),
        ("back", "/apps/argocd/pay-api"),
        ("name", "alice"),
    ];
    let (status, location, answer) = post_form(&app, None, &ack, &fields).await;
    assert_eq!((status, location.as_str()), (303, "/apps/argocd/pay-api"), "{answer}");
    let (_, html) = page(&app, "/apps/argocd/pay-api").await;
    assert!(
        html.contains("Acknowledged by alice at 11:00 UTC, until resolved"),
        "acknowledged: {html}"
    );
    assert!(html.contains("held back while acknowledged"), "{html}");

    // Synced again at 11:10: resolved, and chat is told.
    app.advance(&clock, Duration::from_secs(9 * 60 + 30)).await;
    post_status(&app, &clock, "Synced", "Healthy").await;
    let told = wait_for(&d.join("chat.jsonl"), 2).await;
    assert_eq!(told.len(), 2, "{told:#?}");
    assert_eq!(told[1]["action"], "resolve");

    let (_, html) = page(&app, "/apps/argocd/pay-api").await;
    assert!(html.contains("Open incidents (0)"), "{html}");
    let history = rows(&html, "history-table");
    let resolved = position(
        &history,
        "chat | told it resolved: pay-api: OutOfSync ended after 1 h 10 min",
    );
    let synced = position(&history, "| Sync: OutOfSync → Synced");
    let opened = position(&history, "chat | told: pay-api: OutOfSync for over 1 h (fired)");
    let first = (history.iter().rposition(|r| r.ends_with("| Sync: OutOfSync"))).expect("the first state");
    assert!(
        resolved < synced && synced < opened && opened < first,
        "newest first: {history:#?}"
    );
    assert!(history[synced].starts_with("2026-03-02 11:10:00 UTC"), "{history:#?}");
    assert!(history[first].starts_with("2026-03-02 10:00:00 UTC"), "{history:#?}");
    assert!(href(&html, "older").is_none(), "one page: {history:#?}");

    // Another zone: the same times in Berlin (CET, UTC+1), and links keep it.
    let (status, berlin) = page(&app, "/apps/argocd/pay-api?tz=Europe/Berlin").await;
    assert_eq!(status, 200);
    let berlin_history = rows(&berlin, "history-table");
    assert!(
        berlin_history[first].starts_with("2026-03-02 11:00:00 CET"),
        "{berlin_history:#?}"
    );
    assert!(
        berlin.contains("href=\"/?tz=Europe%2FBerlin\""),
        "the status page link keeps the zone"
    );
    let (status, bad_zone) = page(&app, "/apps/argocd/pay-api?tz=Mars/Olympus").await;
    assert_eq!(status, 400);
    assert!(
        bad_zone.contains("unknown time zone") && bad_zone.contains("Mars/Olympus"),
        "{bad_zone}"
    );

    // The status page links the Application to its page.
    let (_, status_page) = page(&app, "/?tz=Europe/Berlin").await;
    assert!(status_page.contains("Times in Europe/Berlin"), "{status_page}");

    // Many changes: the history pages, 50 lines a page, each page older than the one before, none lost.
    for n in 0..55 {
        clock.advance(Duration::from_secs(60));
        let health = if n % 2 == 0 { "Progressing" } else { "Healthy" };
        let body = envelope("pay-api", "payments", "Synced", health, &clock.now().to_rfc3339());
        assert_eq!(app.post(body).await.status(), 202);
    }
    app.settle().await;
    let (_, newest) = page(&app, "/apps/argocd/pay-api?tz=Europe/Berlin").await;
    let page1 = rows(&newest, "history-table");
    assert_eq!(page1.len(), 50, "{page1:#?}");
    let older = href(&newest, "older").expect("an older link");
    assert!(
        older.contains("tz=Europe%2FBerlin") && older.contains("before="),
        "{older}"
    );
    let (status, older_html) = page(&app, &older).await;
    assert_eq!(status, 200);
    let page2 = rows(&older_html, "history-table");
    assert!(!page2.is_empty() && page2.len() < 50, "{page2:#?}");
    assert!(page2.iter().all(|r| !page1.contains(r)), "no line twice");
    assert!(page1.last() >= page2.first(), "older on the next page");
    assert_eq!(page1.len() + page2.len(), history.len() + 55, "every line, once");
    assert!(
        page2
            .last()
            .is_some_and(|r| r.contains("Health: Healthy") || r.contains("Sync: OutOfSync"))
    );
    assert!(href(&older_html, "older").is_none() && href(&older_html, "newest").is_some());

    // In a real browser: the same page, no scripts, readable on a phone; a screenshot to look at.
    let url = format!("{}/apps/argocd/pay-api", app.address);
    let out = chromium(&["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        dom.contains("<h1 id=\"app\">argocd/pay-api</h1>"),
        "Chromium rendered the page: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rows(&dom, "history-table").len(), 50);
    assert!(dom.contains("name=\"viewport\"") && !dom.contains("<script"));
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts dir");
    let shot = artifacts.join("app-page.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=420,1600",
        &url,
    ]);
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a real screenshot");
    app.stop().await;
}

const ALICE: &str = "alice-respond-token-0123456789";
const READER: &str = "reader-token-0123456789";
const ADMIN: &str = "admin-token-0123456789abc";
const ARGOCD: &str = "argocd-ingest-token-0123456789";
const KEY: &str = "the-form-signing-key-0123456789abcdef";

fn guarded_config(dir: &Path) -> String {
    format!(
        r#"
server:
  link_signing_key: {KEY}
  auth:
    bearer_tokens: [{{name: alice, token: {ALICE}, scope: respond}}, {{name: root, token: {ADMIN}, scope: admin}}]
    read_tokens: [{{name: dashboard, token: {READER}}}]
    ingest_tokens: [{ARGOCD}]
receivers: [{{name: chat, console: {{file: "{d}/chat.jsonl"}}}}]
ownership: {{default_team: payments}}
teams: {{payments: {{receivers: [chat]}}}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 1h}}
"#,
        d = dir.display()
    )
}

async fn get_as(app: &TestApp, token: &str, path: &str) -> (u16, String) {
    let r = app
        .client
        .get(format!("{}{path}", app.address))
        .bearer_auth(token)
        .send()
        .await
        .expect("get");
    (r.status().as_u16(), r.text().await.expect("text"))
}

/// Posts a form as a browser would (no redirect followed): the status, the `Location`, the body.
async fn post_form(app: &TestApp, token: Option<&str>, path: &str, fields: &[(&str, &str)]) -> (u16, String, String) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    let mut r = client.post(format!("{}{path}", app.address));
    if let Some(token) = token {
        r = r.bearer_auth(token);
    }
    let r = r
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", &app.address)
        .body(body)
        .send()
        .await
        .expect("post");
    let status = r.status().as_u16();
    let location = r
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, location, r.text().await.unwrap_or_default())
}

/// The CSRF token of the form posting to `action` on a page.
fn token_of(html: &str, action: &str) -> Option<String> {
    let form = html.split(&format!("action=\"{action}\"")).nth(1)?;
    let form = &form[..form.find("</form>")?];
    Some(
        form.split("name=\"csrf\" value=\"")
            .nth(1)?
            .split('"')
            .next()?
            .to_string(),
    )
}

async fn the_incident(app: &TestApp) -> Value {
    let (status, body) = get_as(app, READER, "/v1/incidents?state=firing").await;
    assert_eq!(status, 200);
    serde_json::from_str::<Value>(&body).expect("json")["items"][0].clone()
}

#[tokio::test]
async fn a_pages_forms_act_only_with_their_token_and_the_scope_and_a_get_never_acts() {
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &guarded_config(&d), Arc::new(clock.clone())).await;
    let body = envelope("pay-api", "payments", "Synced", "Degraded", &clock.now().to_rfc3339());
    let r = app.post_as(ARGOCD, body).await;
    assert_eq!(r.status(), 202);
    app.settle().await;
    let id = the_incident(&app).await["id"].as_i64().expect("id");
    let (ack, silence) = (format!("/incidents/{id}/ack"), format!("/incidents/{id}/silence"));

    // Who sees which forms: alice (respond) may acknowledge, not silence; the dashboard (read) neither.
    let (status, alice_page) = get_as(&app, ALICE, "/apps/argocd/pay-api?tz=Europe/Berlin").await;
    assert_eq!(status, 200);
    let alices = token_of(&alice_page, &ack).expect("alice gets the Acknowledge form");
    assert!(token_of(&alice_page, &silence).is_none(), "silencing needs admin");
    assert!(!alice_page.contains(KEY), "the key signs the tokens, never shows");
    let (_, read_page) = get_as(&app, READER, "/apps/argocd/pay-api").await;
    assert!(!read_page.contains("<form"), "a read-only credential gets no forms");
    let (_, status_page) = get_as(&app, ALICE, "/").await;
    assert!(
        token_of(&status_page, &ack).is_some(),
        "the status page has the form too"
    );

    let unacknowledged = || async { the_incident(&app).await["acknowledged"].is_null() };
    let back = "/apps/argocd/pay-api?tz=Europe%2FBerlin";
    // Refused with a 403 page, and nothing changes: no token, a wrong one, another's, or a read-only caller.
    for (who, token, fields) in [
        ("no token", ALICE, vec![("back", back)]),
        ("a wrong token", ALICE, vec![("csrf", "AAAA"), ("back", back)]),
        (
            "alice's token, posted by root",
            ADMIN,
            vec![("csrf", alices.as_str()), ("back", back)],
        ),
        (
            "a read-only caller",
            READER,
            vec![("csrf", alices.as_str()), ("back", back)],
        ),
    ] {
        let (status, _, page) = post_form(&app, Some(token), &ack, &fields).await;
        assert_eq!(status, 403, "{who}: {page}");
        assert!(page.contains("<h1>Not allowed</h1>"), "{who}: a page, not JSON: {page}");
        assert!(unacknowledged().await, "{who} changed nothing");
    }
    // Opening the form's address never acts.
    let (status, page) = get_as(&app, ALICE, &ack).await;
    assert_eq!(status, 405, "{page}");
    assert!(unacknowledged().await, "a GET changed nothing");

    // With her token: acknowledged by her credential's name, then back to the page she was on.
    let fields = [
        ("csrf", alices.as_str()),
        ("back", back),
        ("for", "4h"),
        ("comment", "rolling back"),
    ];
    let (status, location, page) = post_form(&app, Some(ALICE), &ack, &fields).await;
    assert_eq!((status, location.as_str()), (303, back), "{page}");
    let acked = the_incident(&app).await["acknowledged"].clone();
    assert_eq!(acked["by"], "alice");
    assert_eq!(acked["comment"], "rolling back");
    assert_eq!(acked["until"], "2026-03-02T14:00:00Z");
    let (_, after) = get_as(&app, ALICE, back).await;
    assert!(
        after.contains("Acknowledged by alice at 11:00 CET, until 15:00 CET: rolling back."),
        "{after}"
    );

    // Root (admin) silences for an hour; an address outside Herald is never where it goes back to.
    let (_, root_page) = get_as(&app, ADMIN, "/apps/argocd/pay-api").await;
    let roots = token_of(&root_page, &silence).expect("admin gets the Silence form");
    let fields = [
        ("csrf", roots.as_str()),
        ("back", "https://evil.example/"),
        ("for", "1h"),
    ];
    let (status, location, page) = post_form(&app, Some(ADMIN), &silence, &fields).await;
    assert_eq!((status, location.as_str()), (303, "/"), "{page}");
    let (_, silences) = get_as(&app, READER, "/v1/silences").await;
    let silences: Value = serde_json::from_str(&silences).expect("json");
    assert_eq!(silences["items"].as_array().map(Vec::len), Some(1), "{silences}");
    assert_eq!(silences["items"][0]["created_by"], "root");
    assert_eq!(silences["items"][0]["ends_at"], "2026-03-02T11:00:00Z");
    // A bad duration is a 400 page; a form from another site is refused before any token is looked at.
    let (status, _, _) = post_form(
        &app,
        Some(ADMIN),
        &silence,
        &[("csrf", roots.as_str()), ("for", "forever")],
    )
    .await;
    assert_eq!(status, 400);
    let r = app
        .client
        .post(format!("{}{silence}", app.address))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "cross-site")
        .header("authorization", format!("Basic {}", "cm9vdDp4"))
        .body(format!("csrf={roots}&for=1h"))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 403);
    app.stop().await;
}

/// A GET of `path` exactly as written (an HTTP client would resolve `..` before sending it): status and body.
async fn raw_get(app: &TestApp, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = app.address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn hostile_paths_and_parameters_get_4xx_pages_and_what_argo_cd_sent_is_shown_as_text() {
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &open_config(&d), Arc::new(clock.clone())).await;
    let mut body: Value = serde_json::from_str(&envelope(
        "pay-api",
        "payments",
        "Synced",
        "Degraded",
        &clock.now().to_rfc3339(),
    ))
    .expect("json");
    body["app"]["status"]["health"]["message"] = json!("<script>alert(1)</script> & <b>bold</b>");
    assert_eq!(app.post(body.to_string()).await.status(), 202);
    app.settle().await;

    let (status, html) = page(&app, "/apps/argocd/pay-api").await;
    assert_eq!(status, 200);
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;"),
        "escaped: {html}"
    );
    assert!(!html.contains("<script") && !html.contains("<b>bold"), "{html}");

    let long = "a".repeat(300);
    for (path, status) in [
        ("/apps/argocd/never-seen".to_string(), 404),
        ("/apps/argocd/%3Cscript%3Ealert(1)%3C%2Fscript%3E".to_string(), 404),
        ("/apps/no-such-instance/argocd/pay-api".to_string(), 404),
        ("/apps/argocd/..".to_string(), 400),
        ("/apps/%2E%2E/pay-api".to_string(), 400),
        ("/apps/argocd/pay%00api".to_string(), 400),
        (format!("/apps/argocd/{long}"), 400),
        ("/apps/argocd/pay-api?tz=Not/AZone".to_string(), 400),
        ("/apps/argocd/pay-api?tz=%00".to_string(), 400),
        ("/apps/argocd/pay-api?before=yesterday".to_string(), 400),
        ("/apps/argocd/pay-api?before=1.2.3".to_string(), 400),
        ("/apps/argocd/pay-api?before=99999999999999999999.1.1".to_string(), 400),
        ("/apps/argocd/pay-api?colour=red".to_string(), 400),
        ("/apps/argocd/pay-api?tz=UTC&tz=UTC".to_string(), 400),
        ("/?tz=Atlantis".to_string(), 400),
        ("/?team=a&colour=red".to_string(), 400),
        ("/incidents/abc/ack".to_string(), 405),
    ] {
        let (got, html) = raw_get(&app, &path).await;
        assert_eq!(got, status, "{path}: {html}");
        assert!(html.starts_with("<!DOCTYPE html>"), "{path}: a page: {html}");
        assert!(!html.contains("<script"), "{path}: what was sent is text: {html}");
    }
    let (_, html) = page(&app, "/apps/argocd/pay-api?tz=Not/AZone").await;
    assert!(
        html.contains("unknown time zone &quot;Not/AZone&quot;"),
        "says which: {html}"
    );
    // A form posted with a malformed id or body is a 4xx page too.
    let post = |path: &'static str, body: &'static str| {
        app.client
            .post(format!("{}{path}", app.address))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    assert_eq!(post("/incidents/-1/ack", "").await.expect("post").status(), 400);
    assert_eq!(
        post("/incidents/1/ack", "csrf=a&csrf=b").await.expect("post").status(),
        400
    );
    assert_eq!(post("/incidents/1/ack", "%ff%fe=1").await.expect("post").status(), 400);
    assert_eq!(
        post("/incidents/1/ack", "csrf=nope&name=eve")
            .await
            .expect("post")
            .status(),
        403
    );
    app.stop().await;
}
