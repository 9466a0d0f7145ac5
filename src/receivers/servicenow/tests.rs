//! The ServiceNow receiver against a wiremock instance: a contract test, written from the Table API documentation
//! (https://www.servicenow.com/docs/r/api-reference/rest-apis/c_TableAPI.html, and the Utah edition at
//! https://docs.servicenow.com/bundle/utah-api-reference/page/integrate/inbound-rest/concept/c_TableAPI.html):
//! `GET /api/now/table/{tableName}` with `sysparm_query` (an encoded query, `^` between conditions),
//! `sysparm_limit`, `sysparm_fields`, answering 200 `{"result": [...]}`; `POST /api/now/table/{tableName}`
//! answering 201 `{"result": {sys_id, number, …}}`; `PATCH /api/now/table/{tableName}/{sys_id}` answering 200
//! `{"result": {…}}`; failures as `{"error": {"message", "detail"}, "status": "failure"}` (401 "User Not
//! Authenticated"), 429 with Retry-After under rate limits.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::domain::Action;
use crate::receivers::testing::{self, EchoEverything, FINGERPRINT, assert_no_secret, refuse_anything_else};
use crate::receivers::ticket::contract;

const USER: &str = "herald.integration";
const PASSWORD: &str = "sn-Passw0rd-4242";
const TOKEN: &str = "sn-oauth-t0ken-abcdef0123";
const TABLE: &str = "/api/now/table/incident";
const SYS_ID: &str = "9d385017c611228701d22104cc95c371";

fn settings(server: &MockServer) -> Config {
    Config {
        instance_url: format!("{}/", server.uri()),
        user: Some(USER.into()),
        password: Some(PASSWORD.into()),
        token: None,
        assignment_group: Some("Platform".into()),
        caller: Some("argocd.bot".into()),
        category: Some("software".into()),
        close_code: "Resolved by caller".into(),
    }
}

fn servicenow(server: &MockServer) -> ServiceNow {
    ServiceNow::new(settings(server), testing::http())
}

fn basic() -> String {
    format!("Basic {}", STANDARD.encode(format!("{USER}:{PASSWORD}")))
}

fn remembered() -> Value {
    json!({ "sys_id": SYS_ID, "number": "INC0010001" })
}

/// The record as the Table API returns it (the fields asked for, or more).
fn record(sys_id: &str, number: &str) -> Value {
    json!({ "sys_id": sys_id, "number": number, "state": "1", "active": "true" })
}

/// The record fields of a work note telling `action`'s notification.
fn work_note(action: Action) -> Value {
    json!({ "work_notes": render::text(&testing::notification(action)) })
}

async fn search_answers(server: &MockServer, result: Vec<Value>) {
    let matching = Mock::given(method("GET"))
        .and(path(TABLE))
        .and(header("authorization", basic().as_str()))
        .and(query_param(
            "sysparm_query",
            format!("correlation_id={FINGERPRINT}^active=true^ORDERBYDESCsys_created_on"),
        ))
        .and(query_param("sysparm_limit", "1"))
        .and(query_param("sysparm_fields", "sys_id,number,state"));
    let answer = ResponseTemplate::new(200).set_body_json(json!({ "result": result }));
    let name = "find the active incident by correlation_id";
    testing::expect_matching(server, matching, answer, 1, name).await;
}

async fn create_answers(server: &MockServer, times: u64) {
    let matching = Mock::given(method("POST"))
        .and(path(TABLE))
        .and(header("authorization", basic().as_str()));
    let answer = ResponseTemplate::new(201).set_body_json(json!({ "result": record(SYS_ID, "INC0010001") }));
    testing::expect_matching(server, matching, answer, times, "create an incident").await;
}

/// `PATCH …/incident/{sys_id}` with `fields`, answered 200 with the record.
async fn patch_answers(server: &MockServer, sys_id: &str, fields: Value) {
    let matching = Mock::given(method("PATCH"))
        .and(path(format!("{TABLE}/{sys_id}")))
        .and(header("authorization", basic().as_str()))
        .and(body_partial_json(fields));
    let answer = ResponseTemplate::new(200).set_body_json(json!({ "result": record(sys_id, "INC0010001") }));
    testing::expect_matching(server, matching, answer, 1, "update an incident").await;
}

#[tokio::test]
async fn open_without_a_memo_looks_by_correlation_id_then_creates_the_incident() {
    let server = MockServer::start().await;
    search_answers(&server, vec![]).await;
    create_answers(&server, 1).await;
    refuse_anything_else(&server).await;
    let n = testing::notification(Action::Open);

    let out = servicenow(&server).deliver(&n, None).await.unwrap();

    testing::assert_delivered(&out, Some(remembered()), "created INC0010001");
    let sent = testing::requests(&server).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(
        testing::json(&sent[1]),
        json!({
            "short_description": "payments is Degraded",
            "description": render::text(&n),
            "correlation_id": FINGERPRINT,
            "correlation_display": "Herald",
            "urgency": "1",
            "impact": "1",
            "assignment_group": "Platform",
            "caller_id": "argocd.bot",
            "category": "software",
        })
    );
}

#[tokio::test]
async fn after_a_crash_the_active_incident_gets_a_work_note_and_no_second_incident() {
    let server = MockServer::start().await;
    search_answers(&server, vec![record("abc123", "INC0010007")]).await;
    patch_answers(&server, "abc123", work_note(Action::Open)).await;
    create_answers(&server, 0).await;

    let memo = json!({ "sys_id": "abc123", "number": "INC0010007" });
    let detail = "commented on INC0010007 (found by correlation_id)";
    contract::an_open_notes_the_ticket_found(&server, servicenow(&server), memo, detail).await;
}

#[tokio::test]
async fn an_update_adds_a_work_note_to_the_remembered_incident_without_looking() {
    let server = MockServer::start().await;
    patch_answers(&server, SYS_ID, work_note(Action::Update)).await;

    let out = contract::deliver(&server, servicenow(&server), Action::Update, Some(remembered())).await;

    testing::assert_delivered(&out, Some(remembered()), "commented on INC0010001");
}

#[tokio::test]
async fn resolve_sets_the_resolved_state_with_the_close_code_and_notes() {
    let server = MockServer::start().await;
    let resolve = testing::notification(Action::Resolve);
    patch_answers(
        &server,
        SYS_ID,
        json!({ "state": "6", "close_code": "Solved (Permanently)", "close_notes": render::text(&resolve) }),
    )
    .await;
    let config = Config {
        close_code: "Solved (Permanently)".into(),
        ..settings(&server)
    };

    let closing = ServiceNow::new(config, testing::http());
    let out = contract::deliver(&server, closing, Action::Resolve, Some(remembered())).await;

    let resolved = json!({ "sys_id": SYS_ID, "number": "INC0010001", "resolved_at": "2025-03-01T12:00:00Z" });
    testing::assert_delivered(&out, Some(resolved), "resolved INC0010001");
}

#[tokio::test]
async fn resolve_with_no_active_incident_creates_nothing() {
    let server = MockServer::start().await;
    search_answers(&server, vec![]).await;

    contract::resolves_nothing(&server, servicenow(&server)).await;
}

#[tokio::test]
async fn a_token_is_sent_as_bearer_and_severity_sets_urgency_and_impact() {
    let server = MockServer::start().await;
    let bearer = format!("Bearer {TOKEN}");
    let finding = Mock::given(method("GET"))
        .and(path(TABLE))
        .and(header("authorization", bearer.as_str()));
    let none = ResponseTemplate::new(200).set_body_json(json!({ "result": [] }));
    testing::expect_matching(&server, finding, none, 1, "find with the token").await;
    let creating = Mock::given(method("POST"))
        .and(path(TABLE))
        .and(header("authorization", bearer.as_str()))
        .and(body_partial_json(json!({ "urgency": "3", "impact": "3" })));
    let created = ResponseTemplate::new(201).set_body_json(json!({ "result": record(SYS_ID, "INC0010002") }));
    testing::expect_matching(&server, creating, created, 1, "create with urgency and impact 3").await;
    refuse_anything_else(&server).await;
    let config = Config {
        user: None,
        password: None,
        token: Some(TOKEN.into()),
        assignment_group: None,
        caller: None,
        category: None,
        ..settings(&server)
    };
    let mut n = testing::notification(Action::Open);
    n.incidents_mut()[0].severity = Severity::Info;

    let out = ServiceNow::new(config, testing::http())
        .deliver(&n, None)
        .await
        .unwrap();

    assert_eq!(out.detail, "created INC0010002");
    let created = testing::json(&testing::requests(&server).await[1]);
    assert_eq!(created.get("assignment_group"), None);
}

fn boxed(server: &MockServer) -> Box<dyn Receiver> {
    Box::new(servicenow(server))
}

fn with_a_token(server: &MockServer) -> Box<dyn Receiver> {
    let config = Config {
        user: None,
        password: None,
        token: Some(TOKEN.into()),
        ..settings(server)
    };
    Box::new(ServiceNow::new(config, testing::http()))
}

#[tokio::test]
async fn a_401_is_permanent_and_says_servicenows_message() {
    let refused = ResponseTemplate::new(401).set_body_json(json!({
        "error": { "message": "User Not Authenticated", "detail": "Required to provide Auth information" },
        "status": "failure",
    }));

    let e = contract::failure(boxed, None, refused).await;

    let expected = "servicenow find incident: HTTP 401: User Not Authenticated (Required to provide Auth information)";
    assert_eq!(e, DeliveryError::permanent(expected));
}

#[tokio::test]
async fn failures_follow_the_shared_status_table() {
    contract::follows_the_status_table(boxed, remembered()).await;
}

#[tokio::test]
async fn the_password_its_basic_form_and_the_token_never_appear_in_failures() {
    let basic = STANDARD.encode(format!("{USER}:{PASSWORD}"));
    for build in [boxed as contract::Build, with_a_token] {
        let e = contract::failure(build, None, EchoEverything(401)).await;
        assert!(e.to_string().contains("[redacted]"), "{e}");
        assert_no_secret(&e, &[PASSWORD, TOKEN, &basic]);
    }
}

#[test]
fn a_fingerprint_that_does_not_fit_the_correlation_id_is_digested() {
    assert_eq!(correlation_id(FINGERPRINT), FINGERPRINT);
    let long = "x".repeat(101);
    assert_eq!(correlation_id(&long), format!("herald:{}", fingerprint_digest(&long)));
    assert!(correlation_id("a^ORactive=false").starts_with("herald:"));
}

#[test]
fn the_block_needs_one_way_to_authenticate() {
    use crate::configuration::Settings;
    let cases = [
        (
            "{instance_url: 'https://x.service-now.com'}",
            "receivers[\"sn\"].servicenow.user",
        ),
        (
            "{instance_url: 'https://x.service-now.com', user: u}",
            "receivers[\"sn\"].servicenow.password",
        ),
        (
            "{instance_url: 'https://x.service-now.com', user: u, password: p, token: t}",
            "receivers[\"sn\"].servicenow.token",
        ),
        (
            "{instance_url: nope, token: t}",
            "receivers[\"sn\"].servicenow.instance_url",
        ),
    ];
    for (block, key) in cases {
        let yaml = format!("receivers: [{{name: sn, servicenow: {block}}}]");
        testing::assert_settings_refused(&yaml, key);
    }
    let ok = "receivers: [{name: sn, servicenow: {instance_url: 'https://x.service-now.com', user: u, password_file: /dev/null}}]";
    assert!(Settings::from_yaml(ok).is_ok());
}

#[tokio::test]
async fn code_markup_from_argo_cd_reaches_the_description_and_close_notes_as_text() {
    const HOSTILE: &str = "[code]<img src=x onerror=alert(1)>[/code]";
    let server = MockServer::start().await;
    search_answers(&server, vec![]).await;
    create_answers(&server, 1).await;
    let closing = Mock::given(method("PATCH")).and(path(format!("{TABLE}/{SYS_ID}")));
    let answer = ResponseTemplate::new(200).set_body_json(json!({ "result": record(SYS_ID, "INC0010001") }));
    testing::expect_matching(&server, closing, answer, 1, "resolve the incident").await;
    refuse_anything_else(&server).await;
    let mut open = testing::notification(Action::Open);
    open.incidents_mut()[0].messages = vec![HOSTILE.into()];
    open.incidents_mut()[0].project = "[CODE]<script>x</script>[/CODE]".into();
    let mut resolve = testing::notification(Action::Resolve);
    resolve.incidents_mut()[0].messages = vec![HOSTILE.into()];

    let sn = servicenow(&server);
    sn.deliver(&open, None).await.unwrap();
    sn.deliver(&resolve, Some(&remembered())).await.unwrap();

    let sent = testing::requests(&server).await;
    let description = testing::json(&sent[1])["description"].as_str().unwrap().to_string();
    let close_notes = testing::json(&sent[2])["close_notes"].as_str().unwrap().to_string();
    for text in [description, close_notes] {
        assert!(!text.to_lowercase().contains("[code]"), "{text}");
        assert!(!text.to_lowercase().contains("[/code]"), "{text}");
        assert!(
            text.replace(render::escape::WORD_JOINER, "").contains(HOSTILE),
            "the text is still shown: {text}"
        );
    }
}
