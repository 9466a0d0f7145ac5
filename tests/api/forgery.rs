//! What a web page can make a browser send to Herald: a form on another site (CSRF), with or without remembered
//! Basic credentials, and a page on a name that resolves to 127.0.0.1 (DNS rebinding). One case goes through a real
//! headless Chromium.

use crate::helpers::*;
use crate::status_page::chromium;

const FUTURE_SILENCE: &str =
    r#"{"matchers":[{"name":"app","value":"*"}],"duration":"720h","created_by":"me","comment":"c"}"#;

async fn silences(app: &TestApp, auth: Option<&str>) -> Vec<serde_json::Value> {
    let mut req = app.client.get(format!("{}/v1/silences", app.address));
    if let Some(a) = auth {
        req = req.header("Authorization", a);
    }
    let v: serde_json::Value = req.send().await.expect("req").json().await.expect("json");
    v["items"].as_array().cloned().unwrap_or_else(|| panic!("a list: {v}"))
}

/// Serves `page` from another site (`localhost` is not `127.0.0.1`) and opens it in headless Chromium; the DOM at
/// the end (after what the page's script started).
async fn open_attacker_page(page: String) -> String {
    let attacker = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("GET"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_raw(page, "text/html"))
        .mount(&attacker)
        .await;
    let url = format!("http://localhost:{}/attack.html", attacker.address().port());
    // Off the runtime: Herald and the attacker's server answer on it while the browser runs.
    let out = tokio::task::spawn_blocking(move || chromium(&["--virtual-time-budget=5000", "--dump-dom", &url]))
        .await
        .expect("chromium ran");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn a_form_on_another_site_cannot_create_a_silence_through_a_real_browser() {
    // The default configuration: loopback, no credentials.
    let app = TestApp::spawn("").await;
    // A text/plain form whose one field makes the body valid JSON, submitted as soon as the page loads.
    let dom = open_attacker_page(format!(
        r#"<!doctype html><html><body>
<form id="f" method="POST" action="{address}/v1/silences" enctype="text/plain">
<input type="hidden" name='{{"matchers":[{{"name":"app","value":"*"}}],"duration":"720h","created_by":"mallory","comment":"' value='"}}'>
</form>
<script>document.getElementById('f').submit();</script>
</body></html>"#,
        address = app.address
    ))
    .await;
    assert_eq!(silences(&app, None).await, Vec::<serde_json::Value>::new(), "{dom}");
    assert!(
        dom.contains("takes a JSON body") && dom.contains("415"),
        "the browser's post reached Herald, which refused it and said why: {dom}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_script_on_another_site_cannot_post_an_untyped_body_through_a_real_browser() {
    let app = TestApp::spawn("").await;
    // A Blob without a type is sent with no Content-Type, and needs no CORS preflight: only the browser's word on
    // where the request comes from (Sec-Fetch-Site) tells it apart from Argo CD.
    let dom = open_attacker_page(format!(
        r#"<!doctype html><html><body><p id="state">sending</p>
<script>
fetch("{address}/v1/silences", {{method: "POST", mode: "no-cors", credentials: "include",
  body: new Blob(['{{"matchers":[{{"name":"app","value":"*"}}],"duration":"720h","created_by":"mallory","comment":"c"}}'])}})
  .then(() => document.getElementById("state").textContent = "sent",
        e => document.getElementById("state").textContent = "failed: " + e);
</script></body></html>"#,
        address = app.address
    ))
    .await;
    assert!(dom.contains(">sent<"), "the browser sent it: {dom}");
    assert_eq!(silences(&app, None).await, Vec::<serde_json::Value>::new(), "{dom}");
    app.stop().await;
}

#[tokio::test]
async fn a_state_change_whose_body_is_not_json_is_refused_with_415() {
    let app = TestApp::spawn("").await;
    for (path, content_type, body) in [
        ("/v1/silences", "text/plain", FUTURE_SILENCE.to_string()),
        ("/v1/silences", "application/x-www-form-urlencoded", "a=b".to_string()),
        (
            "/v1/argocd/events",
            "text/plain;charset=UTF-8",
            envelope("pay-api", "payments", "Synced", "Healthy", &now_rfc3339()),
        ),
    ] {
        let r = app
            .client
            .post(format!("{}{path}", app.address))
            .header("Content-Type", content_type)
            .body(body)
            .send()
            .await
            .expect("req");
        assert_eq!(r.status(), 415, "{path} {content_type}");
        let e: serde_json::Value = r.json().await.expect("json");
        assert!(
            e["error"]
                .as_str()
                .is_some_and(|m| m.contains("Content-Type: application/json")),
            "{e}"
        );
    }
    assert!(silences(&app, None).await.is_empty());
    // What Argo CD sends without a configured header (no Content-Type), and JSON, are accepted.
    let r = app
        .client
        .post(format!("{}/v1/argocd/events", app.address))
        .body(envelope("pay-api", "payments", "Synced", "Healthy", &now_rfc3339()))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 202);
    let r = app
        .client
        .post(format!("{}/v1/silences", app.address))
        .header("Content-Type", "application/json")
        .body(FUTURE_SILENCE)
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 201);
    app.stop().await;
}

#[tokio::test]
async fn a_cross_site_request_with_remembered_basic_credentials_is_refused() {
    let app = TestApp::spawn(
        "server: {auth: {bearer_tokens: [admin-token-0123456789], \
         basic: [{username: alice, password: alice-password-0123, scope: admin}]}}",
    )
    .await;
    let alice = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "alice:alice-password-0123")
    );
    let post = |auth: String, headers: Vec<(&str, &str)>| {
        let mut req = app
            .client
            .post(format!("{}/v1/silences", app.address))
            .header("Authorization", auth)
            .header("Content-Type", "application/json")
            .body(FUTURE_SILENCE);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        req.send()
    };
    for headers in [
        vec![("Sec-Fetch-Site", "cross-site"), ("Origin", "https://evil.example")],
        vec![("Sec-Fetch-Site", "same-site")],
        vec![("Origin", "https://evil.example")],
        vec![("Origin", "null")],
        // The same host on another port is another origin (another program on the machine).
        vec![("Origin", "http://127.0.0.1:9")],
    ] {
        let r = post(alice.clone(), headers.clone()).await.expect("req");
        assert_eq!(r.status(), 403, "{headers:?}");
        let e: serde_json::Value = r.json().await.expect("json");
        assert!(e["error"].as_str().is_some_and(|m| m.contains("another")), "{e}");
    }
    let admin = "Bearer admin-token-0123456789";
    assert!(silences(&app, Some(admin)).await.is_empty());
    // The same origin, a client that is no browser, and a bearer token (no browser adds one by itself) are fine.
    let own_origin = app.address.clone();
    for (auth, headers) in [
        (
            alice.clone(),
            vec![("Sec-Fetch-Site", "same-origin"), ("Origin", own_origin.as_str())],
        ),
        (alice.clone(), vec![]),
        (admin.to_string(), vec![("Sec-Fetch-Site", "cross-site")]),
    ] {
        let r = post(auth, headers.clone()).await.expect("req");
        assert_eq!(r.status(), 201, "{headers:?}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_request_naming_a_host_herald_does_not_answer_to_is_refused() {
    let app = TestApp::spawn("").await;
    let port = app.address.rsplit(':').next().expect("port").to_string();
    for (host, status) in [
        (format!("evil.example:{port}"), 421),
        ("evil.example".to_string(), 421),
        (format!("127.0.0.1:{port}"), 200),
        (format!("localhost:{port}"), 200),
        (format!("[::1]:{port}"), 200),
    ] {
        let r = app
            .client
            .get(format!("{}/v1/apps", app.address))
            .header("Host", &host)
            .send()
            .await
            .expect("req");
        assert_eq!(r.status().as_u16(), status, "{host}");
        if status == 421 {
            let e: serde_json::Value = r.json().await.expect("json");
            assert!(
                e["error"].as_str().is_some_and(|m| m.contains("server.allowed_hosts")),
                "{e}"
            );
        }
    }
    // The kubelet probes a pod by its IP, whatever the names.
    let r = app
        .client
        .get(format!("{}/healthz", app.address))
        .header("Host", "10.244.1.7:8080")
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200);
    app.stop().await;
}

#[tokio::test]
async fn allowed_hosts_names_the_hosts_herald_answers_to() {
    let app = TestApp::spawn("server: {allowed_hosts: ['herald.example.com']}").await;
    for (host, status) in [("herald.example.com", 200), ("127.0.0.1", 421)] {
        let r = app
            .client
            .get(format!("{}/v1/apps", app.address))
            .header("Host", host)
            .send()
            .await
            .expect("req");
        assert_eq!(r.status().as_u16(), status, "{host}");
    }
    app.stop().await;
}

#[tokio::test]
async fn no_page_of_herald_can_be_framed_by_another_site() {
    let app = TestApp::spawn("").await;
    for path in ["/", "/v1/apps", "/apps/argocd/nothing-here", "/healthz"] {
        let r = app
            .client
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .expect("req");
        let header = |name: &str| {
            (r.headers().get(name))
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(header("x-frame-options"), "DENY", "{path}");
        assert_eq!(header("content-security-policy"), "frame-ancestors 'none'", "{path}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
    }
    app.stop().await;
}
