//! Per-team authorization from the outside (issue 45 §1): a credential with `teams:` acknowledges — and, with
//! `admin`, silences and expires silences — only its teams' incidents; another team's is a 403 whose body says which
//! teams the credential has and which team the incident is; the pages show the forms on its teams' incidents only
//! and a form posted for another's is a 403 page; `herald ack` and `herald silence` show the reason. Reading is as
//! before. An authenticating proxy's user (`server.auth.proxy`) is believed only from a trusted address, has the
//! widest scope of their groups with those groups' teams, and is named as who acknowledged.

use std::sync::Arc;
use std::time::Duration;

use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use serde_json::{Value, json};

const PAY_ONCALL: &str = "pay-oncall-token-0123456789";
const PAY_LEAD: &str = "pay-lead-admin-token-0123456789";
const ROOT: &str = "root-admin-token-0123456789";
const READER: &str = "reader-token-0123456789";
const ARGOCD: &str = "argocd-ingest-token-0123456789";

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc)
}

fn config(dir: &std::path::Path, auth_extra: &str) -> String {
    format!(
        r#"
server:
  auth:
    bearer_tokens:
      - {{name: pay-oncall, token: {PAY_ONCALL}, scope: respond, teams: [payments]}}
      - {{name: pay-lead, token: {PAY_LEAD}, scope: admin, teams: [payments]}}
      - {{name: root, token: {ROOT}}}
    read_tokens: [{{name: dashboard, token: {READER}}}]
    ingest_tokens: [{ARGOCD}]
{auth_extra}
receivers: [{{name: chat, console: {{file: "{d}/chat.jsonl"}}}}]
ownership: {{default_team: payments}}
teams: {{payments: {{receivers: [chat]}}, search: {{receivers: [chat]}}}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 1h}}
"#,
        d = dir.display()
    )
}

/// Starts Herald with an incident of payments (`pay-api`) and one of search (`search-api`); their ids.
async fn two_teams(auth_extra: &str) -> (TestApp, ManualClock, i64, i64) {
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d, auth_extra), Arc::new(clock.clone())).await;
    for (name, team) in [("pay-api", "payments"), ("search-api", "search")] {
        let body = envelope(name, team, "Synced", "Degraded", &clock.now().to_rfc3339());
        let r = app.post_as(ARGOCD, body).await;
        assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
    }
    let list = eventually(Duration::from_secs(20), || async {
        let list = call(&app, READER, "GET", "/v1/incidents?state=firing", None).await.1;
        (list["count"] == 2).then_some(list)
    })
    .await
    .expect("two firing incidents");
    let id_of = |team: &str| {
        (list["items"].as_array().expect("items").iter())
            .find(|i| i["team"] == team)
            .and_then(|i| i["id"].as_i64())
            .unwrap_or_else(|| panic!("no incident of {team}: {list}"))
    };
    let (pay, search) = (id_of("payments"), id_of("search"));
    (app, clock, pay, search)
}

async fn call(app: &TestApp, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let url = format!("{}{path}", app.address);
    let mut req = match method {
        "GET" => app.client.get(url),
        "DELETE" => app.client.delete(url),
        _ => app.client.post(url),
    }
    .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.expect("request");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn acknowledged_by(app: &TestApp, id: i64) -> Option<String> {
    let list = call(app, READER, "GET", "/v1/incidents?state=firing", None).await.1;
    (list["items"].as_array().expect("items").iter())
        .find(|i| i["id"] == id)
        .and_then(|i| i["acknowledged"]["by"].as_str().map(str::to_string))
}

#[tokio::test]
async fn a_team_bound_credential_acknowledges_its_teams_incidents_only_and_the_403_says_why() {
    let (app, _clock, pay, search) = two_teams("").await;

    let (status, body) = call(&app, PAY_ONCALL, "POST", &format!("/v1/incidents/{search}/ack"), None).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["credential"], "pay-oncall");
    assert_eq!(body["teams"], json!(["payments"]));
    assert_eq!(body["team"], "search");
    let error = body["error"].as_str().expect("error");
    assert!(
        error.contains("the team payments") && error.contains(&format!("incident {search} is the team search's")),
        "{error}"
    );
    assert_eq!(acknowledged_by(&app, search).await, None, "nothing was changed");
    // Nor give back another team's acknowledgement.
    assert_eq!(
        call(&app, ROOT, "POST", &format!("/v1/incidents/{search}/ack"), None)
            .await
            .0,
        200
    );
    let (status, _) = call(&app, PAY_ONCALL, "POST", &format!("/v1/incidents/{search}/unack"), None).await;
    assert_eq!(status, 403);
    assert_eq!(acknowledged_by(&app, search).await.as_deref(), Some("root"));

    let (status, body) = call(&app, PAY_ONCALL, "POST", &format!("/v1/incidents/{pay}/ack"), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(acknowledged_by(&app, pay).await.as_deref(), Some("pay-oncall"));
    // An incident that is not there is still a 404, not a 403.
    assert_eq!(
        call(&app, PAY_ONCALL, "POST", "/v1/incidents/999/ack", None).await.0,
        404
    );
    // Reading is not limited by team.
    let (status, list) = call(&app, PAY_ONCALL, "GET", "/v1/incidents?state=firing", None).await;
    assert_eq!((status, list["count"].as_i64()), (200, Some(2)), "{list}");
    app.stop().await;
}

#[tokio::test]
async fn a_team_bound_admin_silences_and_expires_only_silences_bound_to_its_teams() {
    let (app, _clock, _pay, _search) = two_teams("").await;
    let silence = |matchers: Value| json!({"matchers": matchers, "duration": "1h", "comment": "deploy"});

    // Without a team matcher: refused, with an example of what to add.
    let (status, body) = call(
        &app,
        PAY_LEAD,
        "POST",
        "/v1/silences",
        Some(silence(json!([{"name": "app", "value": "pay-*"}]))),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let error = body["error"].as_str().expect("error");
    assert!(
        error.contains("team matcher") && error.contains("\"value\": \"payments\""),
        "{error}"
    );
    // Another team's, or a glob that could reach other teams: refused.
    let (status, body) = call(
        &app,
        PAY_LEAD,
        "POST",
        "/v1/silences",
        Some(silence(json!([{"name": "team", "value": "search"}]))),
    )
    .await;
    assert_eq!((status, body["team"].as_str()), (403, Some("search")), "{body}");
    let (status, _) = call(
        &app,
        PAY_LEAD,
        "POST",
        "/v1/silences",
        Some(silence(json!([{"name": "team", "value": "pay*"}]))),
    )
    .await;
    assert_eq!(status, 403, "a glob is not a team");
    assert_eq!(call(&app, READER, "GET", "/v1/silences", None).await.1["count"], 0);

    // Its own team: created.
    let (status, own) = call(
        &app,
        PAY_LEAD,
        "POST",
        "/v1/silences",
        Some(silence(
            json!([{"name": "team", "value": "payments"}, {"name": "app", "value": "pay-*"}]),
        )),
    )
    .await;
    assert_eq!(status, 201, "{own}");
    assert_eq!(own["created_by"], "pay-lead");

    // Silences of another team, and of no team, made by a credential of every team: not its to expire.
    let (_, theirs) = call(
        &app,
        ROOT,
        "POST",
        "/v1/silences",
        Some(silence(json!([{"name": "team", "value": "search"}]))),
    )
    .await;
    let (_, everyone) = call(
        &app,
        ROOT,
        "POST",
        "/v1/silences",
        Some(silence(json!([{"name": "kind", "value": "degraded"}]))),
    )
    .await;
    for s in [&theirs, &everyone] {
        let id = s["id"].as_str().expect("id");
        let (status, body) = call(&app, PAY_LEAD, "DELETE", &format!("/v1/silences/{id}"), None).await;
        assert_eq!(status, 403, "{body}");
    }
    let (_, body) = call(
        &app,
        PAY_LEAD,
        "DELETE",
        &format!("/v1/silences/{}", theirs["id"].as_str().expect("id")),
        None,
    )
    .await;
    assert_eq!(body["team"], "search", "{body}");
    assert_eq!(
        call(&app, READER, "GET", "/v1/silences", None).await.1["count"],
        3,
        "none expired"
    );
    let id = own["id"].as_str().expect("id");
    assert_eq!(
        call(&app, PAY_LEAD, "DELETE", &format!("/v1/silences/{id}"), None)
            .await
            .0,
        200
    );
    // The bodies as received (often with secrets): its teams' Applications only.
    let (status, body) = call(&app, PAY_LEAD, "GET", "/v1/apps/argocd/search-api/raw", None).await;
    assert_eq!((status, body["team"].as_str()), (403, Some("search")), "{body}");
    let (status, body) = call(&app, PAY_LEAD, "GET", "/v1/apps/argocd/pay-api/raw", None).await;
    assert_eq!((status, body["count"].as_i64()), (200, Some(1)), "{body}");
    // Retrying a delivery (which may be about any team) needs a credential of every team.
    let (status, body) = call(&app, PAY_LEAD, "POST", "/v1/outbox/1/retry", None).await;
    assert_eq!(status, 403, "{body}");
    app.stop().await;
}

/// Posts a form as a browser would (no redirect followed): the status and the page.
async fn post_form(app: &TestApp, token: &str, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    let r = client
        .post(format!("{}{path}", app.address))
        .bearer_auth(token)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", &app.address)
        .body(body)
        .send()
        .await
        .expect("post");
    (r.status().as_u16(), r.text().await.unwrap_or_default())
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

#[tokio::test]
async fn the_pages_show_a_team_bound_reader_the_forms_of_its_teams_incidents_and_refuse_the_others() {
    let (app, _clock, pay, search) = two_teams("").await;
    let app_ref = &app;
    let page = move |token: &'static str| {
        let app = app_ref;
        async move {
            let r = app
                .client
                .get(format!("{}/", app.address))
                .bearer_auth(token)
                .send()
                .await
                .expect("get");
            assert_eq!(r.status(), 200);
            r.text().await.expect("html")
        }
    };
    let html = page(PAY_LEAD).await;
    for action in ["ack", "silence"] {
        assert!(
            html.contains(&format!("action=\"/incidents/{pay}/{action}\"")),
            "{action}: {html}"
        );
        assert!(
            !html.contains(&format!("action=\"/incidents/{search}/{action}\"")),
            "{action}: {html}"
        );
    }
    let root = page(ROOT).await;
    assert!(
        root.contains(&format!("action=\"/incidents/{search}/ack\"")),
        "every team's"
    );
    // Both incidents are still shown: reading is not limited.
    assert!(html.contains("search-api") && html.contains("pay-api"));
    // The Applications' pages alike.
    for (name, id, shown) in [("pay-api", pay, true), ("search-api", search, false)] {
        let r = (app.client.get(format!("{}/apps/argocd/{name}", app.address)))
            .bearer_auth(PAY_LEAD)
            .send()
            .await
            .expect("get");
        assert_eq!(r.status(), 200);
        let html = r.text().await.expect("html");
        assert_eq!(
            html.contains(&format!("action=\"/incidents/{id}/ack\"")),
            shown,
            "{name}: {html}"
        );
    }

    // A form posted for another team's incident (with a token made for root): a 403 page, nothing changed.
    let csrf = token_of(&root, &format!("/incidents/{search}/ack")).expect("root's form");
    let (status, page_403) = post_form(
        &app,
        PAY_LEAD,
        &format!("/incidents/{search}/ack"),
        &[("csrf", &csrf), ("back", "/"), ("for", ""), ("comment", "")],
    )
    .await;
    assert_eq!(status, 403, "{page_403}");
    assert!(
        page_403.contains("Not allowed") && page_403.contains("the team search"),
        "{page_403}"
    );
    let (status, _) = post_form(
        &app,
        PAY_LEAD,
        &format!("/incidents/{search}/silence"),
        &[("csrf", "x"), ("back", "/"), ("for", "1h"), ("comment", "")],
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(acknowledged_by(&app, search).await, None);

    // Its own team's: the form acts, and its silence is bound to the team (so it may expire it later).
    let csrf = token_of(&html, &format!("/incidents/{pay}/silence")).expect("its form");
    let (status, _) = post_form(
        &app,
        PAY_LEAD,
        &format!("/incidents/{pay}/silence"),
        &[("csrf", &csrf), ("back", "/"), ("for", "1h"), ("comment", "")],
    )
    .await;
    assert_eq!(status, 303);
    let silences = call(&app, READER, "GET", "/v1/silences", None).await.1;
    let matchers = &silences["items"][0]["matchers"];
    assert!(
        matchers
            .as_array()
            .expect("matchers")
            .contains(&json!({"name": "team", "value": "payments"})),
        "{silences}"
    );
    let id = silences["items"][0]["id"].as_str().expect("id");
    assert_eq!(
        call(&app, PAY_LEAD, "DELETE", &format!("/v1/silences/{id}"), None)
            .await
            .0,
        200
    );
    app.stop().await;
}

fn herald(args: Vec<String>) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("HERALD_TOKEN")
        .env_remove("HERALD_URL")
        .output()
        .expect("run herald");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn herald_ack_and_herald_silence_show_why_another_teams_incident_is_refused() {
    let (app, _clock, pay, search) = two_teams("").await;
    let cli = |token: &str, args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend([
            "--url".to_string(),
            app.address.clone(),
            "--token".to_string(),
            token.to_string(),
        ]);
        tokio::task::spawn_blocking(move || herald(all))
    };
    let (code, out, err) = cli(PAY_ONCALL, &["ack", &search.to_string()]).await.expect("cli");
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("403") && err.contains("the team payments") && err.contains("the team search's"),
        "{err}"
    );
    let (code, out, err) = cli(PAY_ONCALL, &["ack", &pay.to_string()]).await.expect("cli");
    assert_eq!(code, 0, "{out}{err}");

    let (code, _, err) = cli(
        PAY_LEAD,
        &["silence", "add", "team=search", "--duration", "1h", "--comment", "x"],
    )
    .await
    .expect("cli");
    assert_eq!(code, 1);
    assert!(err.contains("403") && err.contains("the team search's"), "{err}");
    let (code, _, err) = cli(
        PAY_LEAD,
        &["silence", "add", "app=pay-*", "--duration", "1h", "--comment", "x"],
    )
    .await
    .expect("cli");
    assert_eq!(code, 1);
    assert!(err.contains("403") && err.contains("team matcher"), "{err}");
    let (code, out, err) = cli(
        PAY_LEAD,
        &[
            "silence",
            "add",
            "team=payments",
            "app=pay-*",
            "--duration",
            "1h",
            "--comment",
            "x",
        ],
    )
    .await
    .expect("cli");
    assert_eq!(code, 0, "{out}{err}");
    app.stop().await;
}

const PROXY: &str = r#"
    proxy:
      user_header: X-Forwarded-User
      groups_header: X-Forwarded-Groups
      trusted_proxies: [127.0.0.1/32, "::1/128"]
      groups:
        pay-oncall: {scope: respond, teams: [payments]}
        search-oncall: {scope: respond, teams: [search]}
        sre: {scope: read}
"#;

async fn as_proxy_user(app: &TestApp, user: &str, groups: &str, method: &str, path: &str) -> (u16, Value) {
    let url = format!("{}{path}", app.address);
    let req = match method {
        "GET" => app.client.get(url),
        _ => app.client.post(url),
    };
    let r = req
        .header("X-Forwarded-User", user)
        .header("X-Forwarded-Groups", groups)
        .send()
        .await
        .expect("request");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_proxy_user_from_a_trusted_address_acts_as_their_groups_allow_and_is_named_as_who_acknowledged() {
    let (app, _clock, pay, search) = two_teams(PROXY).await;
    // In pay-oncall only: payments' incident, not search's.
    let (status, body) = as_proxy_user(
        &app,
        "alice@example.com",
        "sre, pay-oncall",
        "POST",
        &format!("/v1/incidents/{search}/ack"),
    )
    .await;
    assert_eq!(
        (status, body["credential"].as_str()),
        (403, Some("alice@example.com")),
        "{body}"
    );
    let (status, body) = as_proxy_user(
        &app,
        "alice@example.com",
        "sre,pay-oncall",
        "POST",
        &format!("/v1/incidents/{pay}/ack"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(acknowledged_by(&app, pay).await.as_deref(), Some("alice@example.com"));
    // In both on-call groups: both teams.
    let (status, body) = as_proxy_user(
        &app,
        "bob@example.com",
        "pay-oncall,search-oncall",
        "POST",
        &format!("/v1/incidents/{search}/ack"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(acknowledged_by(&app, search).await.as_deref(), Some("bob@example.com"));
    // sre reads only.
    let (status, _) = as_proxy_user(&app, "carol", "sre", "GET", "/v1/incidents").await;
    assert_eq!(status, 200);
    let (status, body) = as_proxy_user(&app, "carol", "sre", "POST", &format!("/v1/incidents/{pay}/unack")).await;
    assert_eq!(status, 403, "{body}");
    // In no configured group: refused, saying so.
    let (status, body) = as_proxy_user(&app, "mallory", "everyone", "GET", "/v1/incidents").await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().expect("error").contains("none of the groups"),
        "{body}"
    );
    // Hostile header values: too long, a control character.
    let long = "a".repeat(300);
    let (status, body) = as_proxy_user(&app, &long, "sre", "GET", "/v1/incidents").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().expect("error").contains("X-Forwarded-User"),
        "{body}"
    );
    let (status, _) = as_proxy_user(&app, "eve\tadmin", "sre", "GET", "/v1/incidents").await;
    assert_eq!(status, 400);
    // Credentials still work beside the proxy.
    assert_eq!(call(&app, READER, "GET", "/v1/incidents", None).await.0, 200);
    app.stop().await;
}

#[tokio::test]
async fn a_proxy_header_from_an_untrusted_address_is_ignored() {
    let untrusted = PROXY.replace(r#"[127.0.0.1/32, "::1/128"]"#, "[10.0.0.0/8]");
    let (app, _clock, pay, _search) = two_teams(&untrusted).await;
    let (status, _) = as_proxy_user(&app, "alice@example.com", "pay-oncall", "GET", "/v1/incidents").await;
    assert_eq!(status, 401, "the header alone is no credential");
    // With a credential of its own the request goes on, as that credential (the header is not believed).
    let r = app
        .client
        .post(format!("{}/v1/incidents/{pay}/ack", app.address))
        .bearer_auth(ROOT)
        .header("X-Forwarded-User", "alice@example.com")
        .header("X-Forwarded-Groups", "pay-oncall")
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 200);
    assert_eq!(acknowledged_by(&app, pay).await.as_deref(), Some("root"));
    app.stop().await;
}
