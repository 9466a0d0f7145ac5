//! The Grafana receiver against a wiremock Grafana, modelled on Grafana's Annotations HTTP API
//! (https://grafana.com/docs/grafana/latest/developers/http_api/annotations/#create-annotation: `POST
//! /api/annotations` with `time` in epoch milliseconds, `text`, `tags`, `dashboardUID`, answered 200
//! `{"message": "Annotation added", "id": 1}`; the action it needs is `annotations:create`), and on its error
//! answers (`{"message": …}`: 400 for an invalid dashboard UID, 401, 403 "Access denied", 429, 5xx).

use std::time::Duration;

use secrecy::SecretString;
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::receivers::testing::{self, EchoEverything, assert_no_secret, change, error_text, sync_notification};

const TOKEN: &str = "glsa_gr4fanaT0ken_5e1f0c";

fn config(url: &str) -> Config {
    Config {
        url: url.into(),
        token: SecretString::from(TOKEN),
        dashboard_uid: Some("deploys-01".into()),
        tags: vec!["prod".into(), "herald".into()],
    }
}

fn receiver(server: &MockServer) -> Grafana {
    Grafana::new(config(&format!("{}/grafana/", server.uri())), testing::http())
}

fn deployed() -> Notification {
    sync_notification(Body::Change(Box::new(change())))
}

fn added() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"message": "Annotation added", "id": 1}))
}

#[tokio::test]
async fn a_deployment_is_one_annotation_at_the_syncs_end_saying_what_and_who() {
    let server = MockServer::start().await;
    let posting = Mock::given(method("POST"))
        .and(path("/grafana/api/annotations"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .and(header("content-type", "application/json"));
    testing::expect_matching(&server, posting, added(), 1, "create annotation").await;

    let out = testing::deliver_strictly(&server, &receiver(&server), &deployed(), None)
        .await
        .expect("added");

    assert_eq!(out.detail, "added annotation 1");
    assert_eq!(
        testing::only_body(&server).await,
        json!({
            "time": testing::now().timestamp_millis(),
            "text": "Deployed payments: 0123456 → 4c3d2b1, started by alice \
                     (<a href=\"https://argocd.example.com/applications/argocd/payments\">Argo CD</a>)",
            "tags": ["herald", "app:payments", "instance:default", "team:payments", "revision:4c3d2b1", "prod"],
            "dashboardUID": "deploys-01",
        })
    );
}

#[test]
fn without_a_dashboard_it_is_an_organization_annotation_and_another_instance_is_named() {
    let settings = Config {
        dashboard_uid: None,
        tags: Vec::new(),
        ..config("https://grafana.example.com")
    };
    let mut c = change();
    c.instance = "us".into();
    c.previous_revision = None;
    c.app_url = None;
    c.team = String::new();

    let body = annotation(&settings, &sync_notification(Body::Change(Box::new(c)))).expect("an annotation");

    assert_eq!(body.get("dashboardUID"), None);
    assert_eq!(body["text"], "Deployed us/payments: 4c3d2b1, started by alice");
    assert_eq!(
        body["tags"],
        json!(["herald", "app:payments", "instance:us", "revision:4c3d2b1"]),
        "no team tag when the team is not known"
    );
}

#[test]
fn text_from_argo_cd_is_escaped_for_grafanas_html() {
    let mut c = change();
    c.initiator = "<img src=x onerror=alert(1)>\nbob".into();

    let text = super::text(&c);

    assert!(
        !text.contains('<') || text.matches('<').count() == 2,
        "only Herald's own link: {text}"
    );
    assert!(text.contains("&lt;img src=x onerror=alert(1)&gt; bob"), "{text}");
}

/// One annotation posted to a Grafana answering `answer`; the failure.
async fn refused_with(answer: ResponseTemplate) -> DeliveryError {
    let server = testing::expecting_one_post("/grafana/api/annotations", answer).await;
    receiver(&server).deliver(&deployed(), None).await.expect_err("refused")
}

#[tokio::test]
async fn an_unknown_dashboard_is_a_permanent_failure_with_grafanas_message() {
    let e = refused_with(
        ResponseTemplate::new(400).set_body_json(json!({"message": "Invalid dashboard UID in annotation request"})),
    )
    .await;

    let reason = testing::permanent_reason(&e);
    assert!(
        reason.starts_with("grafana annotation: Grafana refused the annotation"),
        "{reason}"
    );
    assert!(
        reason.contains("HTTP 400") && reason.contains("Invalid dashboard UID"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_bad_token_or_one_without_annotations_create_is_permanent_and_says_what_to_fix() {
    let e = refused_with(ResponseTemplate::new(401).set_body_json(json!({"message": "invalid API key"}))).await;
    assert!(testing::permanent_reason(&e).contains("the token is not valid"), "{e}");

    let e = refused_with(ResponseTemplate::new(403).set_body_json(json!({
        "accessErrorId": "ACE0947587429",
        "message": "You'll need additional permissions to perform this action. Permissions needed: annotations:create",
        "title": "Access denied",
    })))
    .await;
    let reason = testing::permanent_reason(&e);
    assert!(
        reason.contains("the token lacks the annotations:create permission"),
        "{reason}"
    );
    assert!(reason.contains("HTTP 403"), "{reason}");
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried() {
    let e = refused_with(ResponseTemplate::new(429).insert_header("Retry-After", "30")).await;
    assert_eq!(testing::transient_after(&e), Some(Duration::from_secs(30)));
    for status in [500, 502, 503] {
        let e =
            refused_with(ResponseTemplate::new(status).set_body_json(json!({"message": "Failed to save annotation"})))
                .await;
        assert_eq!(testing::transient_after(&e), None, "HTTP {status}");
    }
}

#[tokio::test]
async fn the_token_never_appears_in_a_failure() {
    let server = testing::answering_once(EchoEverything(400)).await;

    let e = receiver(&server).deliver(&deployed(), None).await.unwrap_err();

    assert!(error_text(&e).contains("HTTP 400"), "{e}");
    assert_no_secret(&e, &[TOKEN]);
}

#[tokio::test]
async fn send_test_adds_a_test_annotation_and_an_incident_is_refused_without_a_request() {
    let server = testing::expecting_one_post("/grafana/api/annotations", added()).await;

    receiver(&server)
        .deliver(&Notification::test("grafana", testing::now()), None)
        .await
        .expect("added");
    let e = receiver(&server)
        .deliver(&testing::notification(Action::Open), None)
        .await
        .unwrap_err();

    let body = testing::only_body(&server).await;
    assert_eq!(body["tags"], json!(["herald", "test", "prod"]));
    assert!(body["text"].as_str().is_some_and(|t| t.starts_with("[TEST]")), "{body}");
    assert!(testing::permanent_reason(&e).contains("takes no incidents"), "{e}");
}

#[test]
fn the_block_is_checked_under_its_key() {
    testing::assert_settings_refused(
        "receivers: [{name: g, grafana: {url: nope, token: t}}]",
        "receivers[\"g\"].grafana.url",
    );
    testing::assert_settings_refused(
        "receivers: [{name: g, grafana: {url: 'https://g', token: t, dashboard_uid: ''}}]",
        "receivers[\"g\"].grafana.dashboard_uid",
    );
    testing::assert_settings_refused(
        "receivers: [{name: g, grafana: {url: 'https://g', token: t, tags: ['']}}]",
        "receivers[\"g\"].grafana.tags[0]",
    );
}
