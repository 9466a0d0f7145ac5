//! The Redmine receiver against a wiremock Redmine: a contract test, written from Redmine's REST API
//! documentation and checked against a real Redmine 5.0.4 (Debian's, which tests/api/redmine.rs runs on loopback):
//!
//! - https://www.redmine.org/projects/redmine/wiki/Rest_api — JSON with the `.json` suffix, the API key in the
//!   `X-Redmine-API-Key` header, validation failures as 422 with `{"errors": ["…", …]}`.
//! - https://www.redmine.org/projects/redmine/wiki/Rest_Issues — `GET /issues.json` with `project_id`,
//!   `status_id=*` (open and closed), `sort=id:desc`, `limit`, `cf_x` (a custom field "used as a filter") and the
//!   operator filters (`subject=~…`: contains); the answer `{"issues": [...], "total_count", "offset", "limit"}`;
//!   `POST /issues.json` `{"issue": {project_id, tracker_id, priority_id, subject, description, custom_fields:
//!   [{id, value}]}}` answering 201 with the issue; `PUT /issues/[id].json` `{"issue": {notes, status_id}}`
//!   answering 204 No Content (422 when refused).
//!
//! What the real Redmine showed beyond the documentation: an issue's status carries `is_closed` (since 5.0), a wrong
//! API key is read as the anonymous user (a search answers 200 with the public issues, a write 401), and a filter
//! Redmine does not offer (`cf_x` of a field not used as a filter) is ignored rather than refused.

use secrecy::ExposeSecret;
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::domain::Action;
use crate::receivers::testing::{self, EchoEverything, FINGERPRINT, assert_no_secret, refuse_anything_else};
use crate::receivers::ticket::contract;

const API_KEY: &str = "rm-4p1-k3y-0123456789abcdef";
const CLOSED: u64 = 5;

fn settings(server: &MockServer) -> Config {
    Config {
        url: format!("{}/redmine/", server.uri()),
        api_key: API_KEY.into(),
        project_id: ProjectId::Identifier("payments".into()),
        tracker_id: Some(3),
        closed_status_id: CLOSED,
        priority_id: None,
        custom_field_id: None,
    }
}

fn redmine(server: &MockServer) -> Redmine {
    Redmine::new(settings(server), testing::http())
}

fn tag() -> String {
    subject_tag(FINGERPRINT)
}

/// An issue as `GET /issues.json` lists it in Redmine 5.0 (the fields this receiver reads, and some it does not).
/// Its status is New (1, open), Closed (`CLOSED`) or Rejected (6, closed too).
fn listed(id: u64, subject: &str, status: u64) -> Value {
    let (name, is_closed) = match status {
        CLOSED => ("Closed", true),
        6 => ("Rejected", true),
        _ => ("New", false),
    };
    json!({
        "id": id,
        "project": { "id": 1, "name": "Payments" },
        "tracker": { "id": 3, "name": "Incident" },
        "status": { "id": status, "name": name, "is_closed": is_closed },
        "priority": { "id": 2, "name": "Normal" },
        "subject": subject,
        "description": "…",
        "created_on": "2025-03-01T11:00:00Z",
    })
}

/// The issue fields of a note telling `action`'s notification.
fn note(action: Action) -> Value {
    json!({ "notes": render::markdown(&testing::notification(action)) })
}

/// `GET /issues.json` by the subject tag, answered with `issues`.
async fn search_answers(server: &MockServer, issues: Vec<Value>) {
    let total = issues.len();
    let matching = Mock::given(method("GET"))
        .and(path("/redmine/issues.json"))
        .and(header("X-Redmine-API-Key", API_KEY))
        .and(query_param("project_id", "payments"))
        .and(query_param("status_id", "*"))
        .and(query_param("sort", "id:desc"))
        .and(query_param("subject", format!("~{}", tag())));
    let answer = ResponseTemplate::new(200).set_body_json(json!({
        "issues": issues, "total_count": total, "offset": 0, "limit": 25,
    }));
    let name = "find the incident's issue by its subject tag";
    testing::expect_matching(server, matching, answer, 1, name).await;
}

async fn create_answers(server: &MockServer, times: u64) {
    let matching = Mock::given(method("POST"))
        .and(path("/redmine/issues.json"))
        .and(header("X-Redmine-API-Key", API_KEY));
    let answer = ResponseTemplate::new(201).set_body_json(json!({
        "issue": listed(123, "created", 1),
    }));
    testing::expect_matching(server, matching, answer, times, "create an issue").await;
}

/// `PUT /issues/{id}.json` with `fields` in the issue, answered 204 No Content.
async fn put_answers(server: &MockServer, id: u64, fields: Value, times: u64) {
    let matching = Mock::given(method("PUT"))
        .and(path(format!("/redmine/issues/{id}.json")))
        .and(header("X-Redmine-API-Key", API_KEY))
        .and(body_partial_json(json!({ "issue": fields })));
    testing::expect_matching(server, matching, ResponseTemplate::new(204), times, "update an issue").await;
}

#[tokio::test]
async fn open_without_a_memo_looks_for_the_subject_tag_then_creates_the_issue() {
    let server = MockServer::start().await;
    search_answers(&server, vec![]).await;
    create_answers(&server, 1).await;

    let out = contract::deliver(&server, redmine(&server), Action::Open, None).await;

    testing::assert_delivered(&out, Some(json!({ "id": 123 })), "created #123");
    let sent = testing::requests(&server).await;
    assert_eq!(sent.len(), 2);
    let created = testing::json(&sent[1])["issue"].clone();
    assert_eq!(created["project_id"], "payments");
    assert_eq!(created["tracker_id"], 3);
    assert_eq!(created["subject"], format!("payments is Degraded {}", tag()));
    assert_eq!(
        created["description"],
        render::markdown(&testing::notification(Action::Open))
    );
    assert_eq!(created.get("custom_fields"), None);
    assert_eq!(created.get("priority_id"), None);
}

#[tokio::test]
async fn with_a_custom_field_the_fingerprint_is_stored_and_searched_there() {
    let server = MockServer::start().await;
    let matching = Mock::given(method("GET"))
        .and(path("/redmine/issues.json"))
        .and(query_param("project_id", "7"))
        .and(query_param("status_id", "*"))
        .and(query_param("cf_12", FINGERPRINT));
    let answer = ResponseTemplate::new(200).set_body_json(json!({ "issues": [], "total_count": 0 }));
    testing::expect_matching(&server, matching, answer, 1, "find by the custom field").await;
    create_answers(&server, 1).await;
    refuse_anything_else(&server).await;
    let config = Config {
        project_id: ProjectId::Id(7),
        tracker_id: None,
        priority_id: Some(4),
        custom_field_id: Some(12),
        ..settings(&server)
    };

    Redmine::new(config, testing::http())
        .deliver(&testing::notification(Action::Open), None)
        .await
        .unwrap();

    let sent = testing::requests(&server).await;
    let created = testing::json(&sent[1])["issue"].clone();
    assert_eq!(created["project_id"], 7);
    assert_eq!(created["priority_id"], 4);
    assert_eq!(created["custom_fields"], json!([{ "id": 12, "value": FINGERPRINT }]));
    assert_eq!(created.get("tracker_id"), None);
}

#[tokio::test]
async fn with_a_custom_field_the_issue_holding_the_fingerprint_there_is_found_again() {
    let server = MockServer::start().await;
    let with_value = |id: u64, value: &str| {
        let mut issue = listed(id, "payments is Degraded", 1);
        issue["custom_fields"] = json!([{ "id": 12, "name": "Herald fingerprint", "value": value }]);
        issue
    };
    let issues = json!([
        with_value(90, "argocd/payments:degraded-not"),
        with_value(88, FINGERPRINT)
    ]);
    let matching = Mock::given(method("GET"))
        .and(path("/redmine/issues.json"))
        .and(query_param("cf_12", FINGERPRINT));
    let answer = ResponseTemplate::new(200).set_body_json(json!({ "issues": issues, "total_count": 2 }));
    testing::expect_matching(&server, matching, answer, 1, "find by the custom field").await;
    put_answers(&server, 88, json!({}), 1).await;
    let config = Config {
        custom_field_id: Some(12),
        ..settings(&server)
    };

    let out = contract::deliver(&server, Redmine::new(config, testing::http()), Action::Update, None).await;

    assert_eq!(out.detail, "commented on #88 (found by custom field)");
}

#[tokio::test]
async fn after_a_crash_the_newest_open_issue_of_the_incident_gets_a_note_and_no_second_issue() {
    let server = MockServer::start().await;
    let ours = format!("payments is Degraded {}", tag());
    // Before 5.0 a status has no `is_closed`: `closed_status_id` tells that one.
    let mut closed_before_5 = listed(81, &ours, CLOSED);
    closed_before_5["status"] = json!({ "id": CLOSED, "name": "Closed" });
    search_answers(
        &server,
        vec![
            closed_before_5,
            listed(80, &ours, 6),
            listed(79, "someone else's [herald:0000000000000000]", 1),
            listed(77, &ours, 1),
        ],
    )
    .await;
    put_answers(&server, 77, note(Action::Open), 1).await;
    create_answers(&server, 0).await;

    let memo = json!({ "id": 77 });
    let detail = "commented on #77 (found by subject tag)";
    contract::an_open_notes_the_ticket_found(&server, redmine(&server), memo, detail).await;
}

#[tokio::test]
async fn an_update_adds_a_note_to_the_remembered_issue_without_looking() {
    let server = MockServer::start().await;
    put_answers(&server, 77, note(Action::Update), 1).await;

    let out = contract::deliver(&server, redmine(&server), Action::Update, Some(json!({ "id": 77 }))).await;

    testing::assert_delivered(&out, Some(json!({ "id": 77 })), "commented on #77");
    let sent = testing::requests(&server).await;
    assert_eq!(testing::json(&sent[0])["issue"].get("status_id"), None);
}

#[tokio::test]
async fn resolve_sets_the_closed_status_with_a_note() {
    let server = MockServer::start().await;
    let mut closing = note(Action::Resolve);
    closing["status_id"] = json!(CLOSED);
    put_answers(&server, 77, closing, 1).await;

    let out = contract::deliver(&server, redmine(&server), Action::Resolve, Some(json!({ "id": 77 }))).await;

    let resolved = json!({ "id": 77, "resolved_at": "2025-03-01T12:00:00Z" });
    testing::assert_delivered(&out, Some(resolved), "closed #77");
}

#[tokio::test]
async fn resolve_with_nothing_open_creates_nothing() {
    let server = MockServer::start().await;
    search_answers(&server, vec![listed(80, &format!("x {}", tag()), CLOSED)]).await;

    contract::resolves_nothing(&server, redmine(&server)).await;
}

/// 404 on a remembered issue means it was deleted (or moved where the key cannot see it): looking again and,
/// with nothing open, creating a new issue keeps the incident tracked; a permanent failure would leave it
/// without a ticket until someone reads the dead letters.
#[tokio::test]
async fn a_remembered_issue_answering_404_is_looked_for_again_then_recreated() {
    let server = MockServer::start().await;
    testing::expect_request(&server, "PUT", "/redmine/issues/41.json", ResponseTemplate::new(404), 1).await;
    search_answers(&server, vec![]).await;
    create_answers(&server, 1).await;

    let out = contract::deliver(&server, redmine(&server), Action::Update, Some(json!({ "id": 41 }))).await;

    assert_eq!(out.memo, Some(json!({ "id": 123 })));
}

fn boxed(server: &MockServer) -> Box<dyn Receiver> {
    Box::new(redmine(server))
}

#[tokio::test]
async fn a_422_is_permanent_and_says_redmines_own_errors() {
    let errors = json!({ "errors": ["Tracker is not included in the list", "Subject cannot be blank"] });
    let refused = ResponseTemplate::new(422).set_body_json(errors);

    let e = contract::failure(boxed, Some(json!({ "id": 77 })), refused).await;

    let expected = "redmine note on #77: HTTP 422: Tracker is not included in the list; Subject cannot be blank";
    assert_eq!(e, DeliveryError::permanent(expected));
}

#[tokio::test]
async fn failures_follow_the_shared_status_table() {
    contract::follows_the_status_table(boxed, json!({ "id": 77 })).await;
}

#[tokio::test]
async fn the_api_key_never_appears_in_failures() {
    let e = contract::failure(boxed, None, EchoEverything(401)).await;

    assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
    assert!(e.to_string().contains("[redacted]"), "{e}");
    assert_no_secret(&e, &[API_KEY]);
}

#[tokio::test]
async fn send_test_opens_an_issue_for_the_test_incident() {
    let server = MockServer::start().await;
    let matching = Mock::given(method("GET"))
        .and(path("/redmine/issues.json"))
        .and(query_param("subject", format!("~{}", subject_tag("herald-test"))));
    let answer = ResponseTemplate::new(200).set_body_json(json!({ "issues": [] }));
    testing::expect_matching(&server, matching, answer, 1, "find the test incident's issue").await;
    create_answers(&server, 1).await;
    refuse_anything_else(&server).await;

    let n = Notification::test("team-redmine", testing::now());
    let out = redmine(&server).deliver(&n, None).await.unwrap();

    assert_eq!(out.detail, "created #123");
}

#[test]
fn the_subject_keeps_its_tag_when_the_title_is_cut() {
    let mut n = testing::notification(Action::Open);
    n.title = format!("{}\nsecond line", "x".repeat(400));

    let (subject, _) = preview(&n, FINGERPRINT);

    assert_eq!(subject.chars().count(), SUBJECT_MAX_CHARS);
    assert!(subject.ends_with(&format!(" {}", tag())), "{subject}");
    assert!(!subject.contains('\n'));
}

#[test]
fn the_api_key_may_be_read_from_a_file_and_the_url_is_checked() {
    use crate::configuration::Settings;
    let key = testing::secret_file("redmine-key", API_KEY);
    let yaml = format!(
        "receivers: [{{name: rm, redmine: {{url: 'https://redmine.example.com', api_key_file: {}, project_id: 3, closed_status_id: 5}}}}]",
        key.path.display()
    );

    let settings = Settings::from_yaml(&yaml).expect("valid");

    let crate::receivers::ReceiverKind::Redmine(config) = &settings.receivers[0].kind else {
        panic!("a redmine block");
    };
    assert_eq!(config.api_key.expose_secret(), API_KEY);
    assert_eq!(config.project_id, ProjectId::Id(3));
    let bad = "receivers: [{name: rm, redmine: {url: nope, api_key: k, project_id: '', closed_status_id: 5}}]";
    testing::assert_settings_refused(bad, "receivers[\"rm\"].redmine.url");
    testing::assert_settings_refused(bad, "receivers[\"rm\"].redmine.project_id");
}
