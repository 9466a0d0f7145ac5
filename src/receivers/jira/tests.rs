//! The Jira receiver against a wiremock Jira (Cloud and Data Center): the issue lifecycle (search by label,
//! create, comment, resolve, reopen), ADF and wiki rendering, the status table, and the token kept out of failures.

use std::time::Duration;

use chrono::TimeZone;
use secrecy::SecretString;
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use super::client::parse_jira_time;
use super::*;
use crate::receivers::testing::{self, APP_URL, FINGERPRINT, error_text, now};

const TOKEN: &str = "jira-token-s3cr3t-5b1f";

fn note(action: Action) -> Notification {
    let mut n = testing::firing_notification(action);
    if action == Action::Update {
        n.reason = "escalation step 1 (after 1h)".into();
    }
    n
}

fn settings(server: &MockServer, api: Api) -> Config {
    Config {
        url: format!("{}/", server.uri()),
        api,
        project: "PAY".into(),
        issue_type: "Task".into(),
        user: (api == Api::Cloud).then(|| "bot@example.com".to_string()),
        token: SecretString::from(TOKEN),
        labels: vec!["argocd".into(), "on call".into()],
        resolve_transition: Some("done".into()),
        reopen_transition: Some("Reopen".into()),
        reopen_window: Some(Duration::from_secs(24 * 3600)),
    }
}

fn jira(server: &MockServer, api: Api) -> Jira {
    Jira::new(settings(server, api), testing::http())
}

/// What a delivery comes to.
type Outcome = Result<Delivered, DeliveryError>;

/// Delivers `action` (with `memo`) through a Jira on `server`, failing on any request not mounted before.
async fn deliver(server: &MockServer, api: Api, action: Action, memo: Option<&Memo>) -> Outcome {
    deliver_with(server, settings(server, api), action, memo).await
}

/// [`deliver`] through a Jira with the settings `s` (the defaults changed by the test).
async fn deliver_with(server: &MockServer, s: Config, action: Action, memo: Option<&Memo>) -> Outcome {
    testing::deliver_strictly(server, &Jira::new(s, testing::http()), &note(action), memo).await
}

/// Delivers an open through a Jira with the settings `s` on `server`, whose search has found only an issue not to
/// reopen, and checks that a new issue is created instead.
async fn opens_a_new_issue(server: &MockServer, s: Config) {
    create_expected(server, s.api, 1).await;
    let out = deliver_with(server, s, Action::Open, None).await.unwrap();
    assert_eq!(out.detail, "created PAY-42");
}

fn base(api: Api) -> &'static str {
    match api {
        Api::Cloud => "/rest/api/3",
        Api::Datacenter => "/rest/api/2",
    }
}

fn search_path(api: Api) -> &'static str {
    match api {
        Api::Cloud => "/rest/api/3/search/jql",
        Api::Datacenter => "/rest/api/2/search",
    }
}

fn label() -> String {
    fingerprint_label(FINGERPRINT)
}

fn issue(key: &str, category: &str, resolved: Option<DateTime<Utc>>) -> Value {
    json!({
        "id": "10001",
        "key": key,
        "fields": {
            "status": { "name": category, "statusCategory": { "key": category } },
            "labels": [label()],
            "resolutiondate": resolved.map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3f%z").to_string()),
        }
    })
}

/// A Jira whose search by the fingerprint label finds `issues`.
async fn finding(api: Api, issues: Vec<Value>) -> MockServer {
    let server = MockServer::start().await;
    search_finds(&server, api, issues).await;
    server
}

async fn search_finds(server: &MockServer, api: Api, issues: Vec<Value>) {
    let body = match api {
        Api::Cloud => json!({ "issues": issues, "isLast": true }),
        Api::Datacenter => {
            json!({ "startAt": 0, "maxResults": 50, "total": issues.len(), "issues": issues })
        }
    };
    let matching = Mock::given(method("POST"))
        .and(path(search_path(api)))
        .and(body_partial_json(json!({
            "jql": format!("project = \"PAY\" AND labels = \"{}\" ORDER BY created DESC", label()),
            "fields": ["status", "labels", "resolutiondate"],
        })));
    let answer = ResponseTemplate::new(200).set_body_json(body);
    testing::expect_matching(server, matching, answer, 1, "search by fingerprint label").await;
}

async fn comment_expected(server: &MockServer, api: Api, key: &str, times: u64) {
    let answer = ResponseTemplate::new(201).set_body_json(json!({ "id": "100" }));
    testing::expect_post(server, &format!("{}/issue/{key}/comment", base(api)), answer, times).await;
}

async fn create_expected(server: &MockServer, api: Api, times: u64) {
    let created = json!({ "id": "10042", "key": "PAY-42", "self": "https://jira.example.com/rest/api/2/issue/10042" });
    let answer = ResponseTemplate::new(201).set_body_json(created);
    testing::expect_post(server, &format!("{}/issue", base(api)), answer, times).await;
}

async fn transitions_offered(server: &MockServer, api: Api, key: &str) {
    let matching = Mock::given(method("GET")).and(path(format!("{}/issue/{key}/transitions", base(api))));
    let answer = ResponseTemplate::new(200).set_body_json(json!({
        "transitions": [
            { "id": "11", "name": "To Do" },
            { "id": "31", "name": "Done" },
            { "id": "41", "name": "Reopen" },
        ]
    }));
    testing::expect_matching(server, matching, answer, 1, "list transitions").await;
}

async fn transition_expected(server: &MockServer, api: Api, key: &str, id: &str) {
    let matching = Mock::given(method("POST"))
        .and(path(format!("{}/issue/{key}/transitions", base(api))))
        .and(body_partial_json(json!({ "transition": { "id": id } })));
    testing::expect_matching(server, matching, ResponseTemplate::new(204), 1, "apply transition").await;
}

fn nodes_of_type<'a>(v: &'a Value, kind: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(o) => {
            if o.get("type").and_then(Value::as_str) == Some(kind) {
                out.push(v);
            }
            o.values().for_each(|c| nodes_of_type(c, kind, out));
        }
        Value::Array(a) => a.iter().for_each(|c| nodes_of_type(c, kind, out)),
        _ => {}
    }
}

#[tokio::test]
async fn cloud_open_searches_by_label_then_creates_one_issue_described_in_adf() {
    let server = finding(Api::Cloud, vec![]).await;
    create_expected(&server, Api::Cloud, 1).await;

    let out = deliver(&server, Api::Cloud, Action::Open, None).await.unwrap();

    testing::assert_delivered(&out, Some(json!({ "key": "PAY-42" })), "created PAY-42");
    let requests = server.received_requests().await.unwrap();
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("bot@example.com:{TOKEN}"));
    for r in &requests {
        assert_eq!(r.headers["authorization"], format!("Basic {basic}").as_str());
    }
    let created = testing::bodies(&server, "POST", "/rest/api/3/issue").await;
    let fields = &created[0]["fields"];
    assert_eq!(fields["project"], json!({ "key": "PAY" }));
    assert_eq!(fields["issuetype"], json!({ "name": "Task" }));
    assert_eq!(fields["summary"], "[FIRING] payments is Degraded");
    assert_eq!(fields["labels"], json!([label(), "argocd", "on-call"]));
    let doc = &fields["description"];
    assert_eq!(doc["type"], "doc");
    assert_eq!(doc["version"], 1);
    let mut texts = vec![];
    nodes_of_type(doc, "text", &mut texts);
    assert!(
        texts.iter().all(|t| !t["text"].as_str().unwrap().is_empty()),
        "ADF refuses empty text nodes"
    );
    let all_text: String = texts.iter().map(|t| t["text"].as_str().unwrap()).collect();
    assert!(all_text.contains("payments-api"), "{all_text}");
    assert!(all_text.contains("Check the image"), "{all_text}");
    let mut tables = vec![];
    nodes_of_type(doc, "table", &mut tables);
    assert_eq!(tables.len(), 1, "resources are a table");
    assert_eq!(
        tables[0]["content"].as_array().unwrap().len(),
        2,
        "a header row and one resource"
    );
    let mut headings = vec![];
    nodes_of_type(doc, "heading", &mut headings);
    assert!(!headings.is_empty());
    assert!(
        texts
            .iter()
            .any(|t| t["marks"][0]["type"] == "link" && t["marks"][0]["attrs"]["href"] == APP_URL),
        "links to the application in Argo CD"
    );
}

#[tokio::test]
async fn cloud_searches_with_search_jql_and_never_calls_the_retired_search_endpoint() {
    let server = MockServer::start().await;
    let gone = ResponseTemplate::new(410).set_body_string("Gone");
    testing::expect_request(&server, "POST", "/rest/api/3/search", gone, 0).await;
    search_finds(&server, Api::Cloud, vec![issue("PAY-7", "indeterminate", None)]).await;
    comment_expected(&server, Api::Cloud, "PAY-7", 1).await;

    let out = deliver(&server, Api::Cloud, Action::Open, None).await.unwrap();

    assert_eq!(out.memo, Some(json!({ "key": "PAY-7" })));
    let search = testing::bodies(&server, "POST", "/rest/api/3/search/jql").await;
    assert_eq!(search[0]["maxResults"], 50);
}

#[tokio::test]
async fn datacenter_open_uses_api_2_a_bearer_token_and_wiki_markup() {
    let server = finding(Api::Datacenter, vec![]).await;
    create_expected(&server, Api::Datacenter, 1).await;

    let out = deliver(&server, Api::Datacenter, Action::Open, None).await.unwrap();

    assert_eq!(out.memo, Some(json!({ "key": "PAY-42" })));
    for r in server.received_requests().await.unwrap() {
        assert_eq!(r.headers["authorization"], format!("Bearer {TOKEN}").as_str());
    }
    let created = testing::bodies(&server, "POST", "/rest/api/2/issue").await;
    let fields = &created[0]["fields"];
    assert_eq!(fields["labels"], json!([label(), "argocd", "on-call"]));
    let description = fields["description"]
        .as_str()
        .expect("plain-text description on Data Center");
    assert!(description.starts_with("h3. "), "{description}");
    assert!(description.contains("||Resource||Status||Message||"), "{description}");
    assert!(
        description.contains("|Deployment payments/payments-api|Degraded|"),
        "{description}"
    );
    assert!(
        description.contains(&format!("[argocd/payments|{APP_URL}]")),
        "{description}"
    );
    assert!(
        description.contains("{noformat}\nBack-off pulling image"),
        "{description}"
    );
}

#[tokio::test]
async fn an_issue_found_again_by_its_label_gets_a_comment_and_no_second_issue() {
    for api in [Api::Cloud, Api::Datacenter] {
        // What a crash after "created" but before "memo stored" leaves behind.
        let found = vec![
            issue("PAY-9", "new", None),
            issue("PAY-3", "done", Some(now() - chrono::Duration::days(30))),
        ];
        let server = finding(api, found).await;
        comment_expected(&server, api, "PAY-9", 1).await;
        create_expected(&server, api, 0).await;

        let out = deliver(&server, api, Action::Open, None).await.unwrap();

        assert_eq!(out.memo, Some(json!({ "key": "PAY-9" })), "{api:?}");
        assert_eq!(out.detail, "commented on PAY-9 (found by label)");
    }
}

#[tokio::test]
async fn cloud_search_follows_the_next_page_token() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/rest/api/3/search/jql"))
        .and(body_partial_json(json!({ "nextPageToken": "page-2" })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "issues": [issue("PAY-2", "indeterminate", None)], "isLast": true,
        })))
        .expect(1)
        .with_priority(1)
        .mount(&server)
        .await;
    testing::expect_post(&server, "/rest/api/3/search/jql", ResponseTemplate::new(200).set_body_json(json!({ "issues": [issue("PAY-5", "done", Some(now() - chrono::Duration::days(9)))], "isLast": false, "nextPageToken": "page-2", })), 1).await;
    comment_expected(&server, Api::Cloud, "PAY-2", 1).await;

    let out = deliver(&server, Api::Cloud, Action::Open, None).await.unwrap();

    assert_eq!(out.memo, Some(json!({ "key": "PAY-2" })));
}

#[tokio::test]
async fn an_update_comments_on_the_remembered_issue_without_searching() {
    for api in [Api::Cloud, Api::Datacenter] {
        let server = MockServer::start().await;
        comment_expected(&server, api, "PAY-12", 1).await;

        let memo = json!({ "key": "PAY-12" });
        let out = deliver(&server, api, Action::Update, Some(&memo)).await.unwrap();

        testing::assert_delivered(&out, Some(json!({ "key": "PAY-12" })), "commented on PAY-12");
        let comment = &testing::bodies(&server, "POST", &format!("{}/issue/PAY-12/comment", base(api))).await[0];
        let rendered = comment["body"].to_string();
        assert!(rendered.contains("escalation step 1 (after 1h)"), "{api:?}: {rendered}");
        assert!(rendered.contains("payments is Degraded"), "{api:?}: {rendered}");
    }
}

#[tokio::test]
async fn resolve_comments_then_applies_the_resolve_transition_found_by_name() {
    for api in [Api::Cloud, Api::Datacenter] {
        let server = MockServer::start().await;
        comment_expected(&server, api, "PAY-12", 1).await;
        transitions_offered(&server, api, "PAY-12").await;
        transition_expected(&server, api, "PAY-12", "31").await;

        let memo = json!({ "key": "PAY-12" });
        let out = deliver(&server, api, Action::Resolve, Some(&memo)).await.unwrap();

        assert_eq!(out.detail, "resolved PAY-12 (Done)");
        assert_eq!(
            out.memo,
            Some(json!({ "key": "PAY-12", "resolved_at": "2025-03-01T12:00:00Z" }))
        );
        let order: Vec<String> = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| format!("{} {}", r.method, r.url.path()))
            .collect();
        let b = base(api);
        assert_eq!(
            order,
            [
                format!("POST {b}/issue/PAY-12/comment"),
                format!("GET {b}/issue/PAY-12/transitions"),
                format!("POST {b}/issue/PAY-12/transitions"),
            ]
        );
    }
}

#[tokio::test]
async fn the_resolve_transition_may_be_given_by_id() {
    let server = MockServer::start().await;
    comment_expected(&server, Api::Cloud, "PAY-12", 1).await;
    transitions_offered(&server, Api::Cloud, "PAY-12").await;
    transition_expected(&server, Api::Cloud, "PAY-12", "31").await;
    let mut s = settings(&server, Api::Cloud);
    s.resolve_transition = Some("31".into());

    let memo = json!({ "key": "PAY-12" });
    let out = deliver_with(&server, s, Action::Resolve, Some(&memo)).await.unwrap();

    assert_eq!(out.detail, "resolved PAY-12 (Done)");
}

#[tokio::test]
async fn a_resolve_transition_that_does_not_exist_is_permanent_and_names_the_available_ones() {
    let server = MockServer::start().await;
    comment_expected(&server, Api::Cloud, "PAY-12", 1).await;
    transitions_offered(&server, Api::Cloud, "PAY-12").await;
    let open = ResponseTemplate::new(200).set_body_json(issue("PAY-12", "indeterminate", None));
    testing::expect_request(&server, "GET", "/rest/api/3/issue/PAY-12", open, 1).await;
    let mut s = settings(&server, Api::Cloud);
    s.resolve_transition = Some("Close Issue".into());

    let memo = json!({ "key": "PAY-12" });
    let err = deliver_with(&server, s, Action::Resolve, Some(&memo))
        .await
        .unwrap_err();

    let reason = testing::permanent_reason(&err);
    assert!(reason.contains("\"Close Issue\""), "{reason}");
    assert!(reason.contains("To Do (11), Done (31), Reopen (41)"), "{reason}");
}

#[tokio::test]
async fn resolving_an_issue_someone_already_closed_succeeds() {
    let server = MockServer::start().await;
    comment_expected(&server, Api::Cloud, "PAY-12", 1).await;
    let only_reopen = json!({ "transitions": [{ "id": "41", "name": "Reopen" }] });
    let transitions = ResponseTemplate::new(200).set_body_json(only_reopen);
    testing::expect_request(&server, "GET", "/rest/api/3/issue/PAY-12/transitions", transitions, 1).await;
    let closed = ResponseTemplate::new(200).set_body_json(issue("PAY-12", "done", Some(now())));
    testing::expect_request(&server, "GET", "/rest/api/3/issue/PAY-12", closed, 1).await;

    let memo = json!({ "key": "PAY-12" });
    let out = deliver(&server, Api::Cloud, Action::Resolve, Some(&memo))
        .await
        .unwrap();

    assert_eq!(out.detail, "commented on PAY-12 (already resolved)");
}

#[tokio::test]
async fn a_new_occurrence_reopens_the_issue_resolved_within_the_window() {
    for api in [Api::Cloud, Api::Datacenter] {
        let server = finding(
            api,
            vec![issue("PAY-12", "done", Some(now() - chrono::Duration::hours(2)))],
        )
        .await;
        transitions_offered(&server, api, "PAY-12").await;
        transition_expected(&server, api, "PAY-12", "41").await;
        comment_expected(&server, api, "PAY-12", 1).await;
        create_expected(&server, api, 0).await;

        // The memo of the earlier resolve: Herald looks again rather than trusting it.
        let memo = json!({ "key": "PAY-12", "resolved_at": "2025-03-01T10:00:00Z" });
        let out = deliver(&server, api, Action::Open, Some(&memo)).await.unwrap();

        assert_eq!(out.detail, "reopened PAY-12 (Reopen)", "{api:?}");
        assert_eq!(out.memo, Some(json!({ "key": "PAY-12" })));
    }
}

#[tokio::test]
async fn an_issue_resolved_before_the_window_gets_a_new_issue_instead() {
    let server = finding(
        Api::Cloud,
        vec![issue("PAY-12", "done", Some(now() - chrono::Duration::hours(25)))],
    )
    .await;

    opens_a_new_issue(&server, settings(&server, Api::Cloud)).await;
}

#[tokio::test]
async fn without_a_reopen_transition_a_resolved_issue_is_never_reopened() {
    let server = finding(Api::Cloud, vec![issue("PAY-12", "done", Some(now()))]).await;
    let mut s = settings(&server, Api::Cloud);
    s.reopen_transition = None;

    opens_a_new_issue(&server, s).await;
}

#[tokio::test]
async fn a_reopen_transition_the_workflow_does_not_offer_falls_back_to_a_new_issue() {
    let server = finding(Api::Cloud, vec![issue("PAY-12", "done", Some(now()))]).await;
    let none = ResponseTemplate::new(200).set_body_json(json!({ "transitions": [] }));
    testing::expect_request(&server, "GET", "/rest/api/3/issue/PAY-12/transitions", none, 1).await;

    opens_a_new_issue(&server, settings(&server, Api::Cloud)).await;
}

#[tokio::test]
async fn a_remembered_issue_that_was_deleted_is_replaced() {
    let server = MockServer::start().await;
    testing::expect_post(
        &server,
        "/rest/api/3/issue/PAY-1/comment",
        ResponseTemplate::new(404).set_body_json(json!({ "errorMessages": ["Issue does not exist"] })),
        1,
    )
    .await;
    search_finds(&server, Api::Cloud, vec![]).await;
    create_expected(&server, Api::Cloud, 1).await;

    let memo = json!({ "key": "PAY-1" });
    let out = deliver(&server, Api::Cloud, Action::Update, Some(&memo)).await.unwrap();

    assert_eq!(out.memo, Some(json!({ "key": "PAY-42" })));
}

#[tokio::test]
async fn resolve_without_a_memo_resolves_the_open_issue_found_by_label() {
    let server = finding(Api::Datacenter, vec![issue("PAY-9", "indeterminate", None)]).await;
    comment_expected(&server, Api::Datacenter, "PAY-9", 1).await;
    transitions_offered(&server, Api::Datacenter, "PAY-9").await;
    transition_expected(&server, Api::Datacenter, "PAY-9", "31").await;

    let out = deliver(&server, Api::Datacenter, Action::Resolve, None).await.unwrap();

    assert_eq!(out.detail, "resolved PAY-9 (Done)");
}

#[tokio::test]
async fn resolve_with_nothing_open_changes_nothing() {
    let server = finding(Api::Cloud, vec![issue("PAY-3", "done", Some(now()))]).await;

    let out = deliver(&server, Api::Cloud, Action::Resolve, None).await.unwrap();

    assert_eq!(out.memo, None);
    assert!(out.detail.contains("nothing to resolve"), "{}", out.detail);
}

#[tokio::test]
async fn rate_limited_is_transient_with_the_servers_retry_after() {
    let server = MockServer::start().await;
    testing::expect_post(
        &server,
        "/rest/api/3/search/jql",
        ResponseTemplate::new(429).insert_header("Retry-After", "30"),
        1,
    )
    .await;

    let err = deliver(&server, Api::Cloud, Action::Open, None).await.unwrap_err();

    assert!(
        matches!(&err, DeliveryError::Transient { retry_after: Some(d), .. } if *d == Duration::from_secs(30)),
        "{err:?}"
    );
}

#[tokio::test]
async fn statuses_are_classified_by_the_shared_table() {
    let cases = [
        (500, true),
        (502, true),
        (503, true),
        (400, false),
        (401, false),
        (403, false),
        (404, false),
    ];
    for (status, transient) in cases {
        let server = MockServer::start().await;
        testing::expect_post(
            &server,
            "/rest/api/2/issue/PAY-12/comment",
            ResponseTemplate::new(status).set_body_json(json!({ "errorMessages": ["nope"] })),
            1,
        )
        .await;
        // A 404 on a remembered issue looks for it again; nothing is found and a new one is created…
        if status == 404 {
            search_finds(&server, Api::Datacenter, vec![]).await;
            testing::expect_post(
                &server,
                "/rest/api/2/issue",
                ResponseTemplate::new(404).set_body_string("project PAY does not exist"),
                1,
            )
            .await;
        }

        let memo = json!({ "key": "PAY-12" });
        let err = deliver(&server, Api::Datacenter, Action::Update, Some(&memo))
            .await
            .unwrap_err();

        // …and that 404 is permanent.
        assert_eq!(
            matches!(err, DeliveryError::Transient { .. }),
            transient,
            "HTTP {status}: {err:?}"
        );
        assert!(error_text(&err).contains(&format!("HTTP {status}")), "{err:?}");
    }
}

#[tokio::test]
async fn a_create_rejected_as_bad_request_is_permanent_and_says_why() {
    let server = finding(Api::Cloud, vec![]).await;
    testing::expect_post(
        &server,
        "/rest/api/3/issue",
        ResponseTemplate::new(400)
            .set_body_json(json!({ "errorMessages": [], "errors": { "issuetype": "Specify a valid issue type" } })),
        1,
    )
    .await;

    let err = deliver(&server, Api::Cloud, Action::Open, None).await.unwrap_err();

    let reason = testing::permanent_reason(&err);
    assert!(reason.starts_with("jira create issue: HTTP 400"), "{reason}");
    assert!(reason.contains("Specify a valid issue type"), "{reason}");
}

/// A server that answers 401 repeating the credentials it was sent, in every form.
struct EchoCredentials;

impl wiremock::Respond for EchoCredentials {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let (auth, decoded) = testing::credentials(request);
        ResponseTemplate::new(401).set_body_string(format!("bad credentials: {auth} ({decoded})"))
    }
}

#[tokio::test]
async fn the_token_never_appears_in_errors() {
    for api in [Api::Cloud, Api::Datacenter] {
        let server = testing::answering_once(EchoCredentials).await;

        let (err, text) = testing::delivery_failure(&jira(&server, api), &note(Action::Open)).await;

        assert!(matches!(err, DeliveryError::Permanent { .. }), "{text}");
        assert!(text.contains("bad credentials"), "{text}");
        assert!(!text.contains(TOKEN), "{api:?}: {text}");
        use base64::Engine as _;
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("bot@example.com:{TOKEN}"));
        assert!(!text.contains(&basic), "{api:?}: {text}");
    }
    // Nothing listens there: a transport error, without the token either.
    let mut s = settings(&MockServer::start().await, Api::Cloud);
    s.url = testing::UNREACHABLE.into();
    testing::assert_unreachable_is_transient(&Jira::new(s, testing::http()), &note(Action::Open), &[TOKEN]).await;
}

#[test]
fn the_fingerprint_label_is_sixteen_hex_digits_without_spaces() {
    let l = fingerprint_label("argocd/payments: a fingerprint with spaces");
    assert_eq!(l.len(), "herald-".len() + 16);
    assert!(l.starts_with("herald-"));
    assert!(l["herald-".len()..].chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(l, fingerprint_label("argocd/payments: a fingerprint with spaces"));
    assert_ne!(l, fingerprint_label("argocd/orders: a fingerprint with spaces"));
}

#[test]
fn summaries_are_one_line_of_at_most_255_characters() {
    let long = format!("first line\nsecond {}", "é".repeat(400));
    let s = summary(&long);
    assert_eq!(s.chars().count(), 255);
    assert!(!s.contains('\n'));
    assert!(s.starts_with("first line second é"));
    assert!(s.ends_with('…'));
    assert_eq!(summary("short"), "short");
}

#[test]
fn jira_dates_parse_with_or_without_a_colon_in_the_offset() {
    let expected = Utc.with_ymd_and_hms(2024, 5, 1, 8, 0, 0).unwrap();
    assert_eq!(parse_jira_time("2024-05-01T10:00:00.000+0200"), Some(expected));
    assert_eq!(parse_jira_time("2024-05-01T08:00:00Z"), Some(expected));
    assert_eq!(parse_jira_time("yesterday"), None);
}

#[test]
fn empty_fields_leave_no_empty_text_nodes_in_adf() {
    let mut n = note(Action::Test);
    n.reason.clear();
    n.incidents_mut()[0].resources[0].namespace.clear();
    n.incidents_mut()[0].resources[0].message.clear();
    n.incidents_mut()[0].team.clear();
    let doc = adf::document(&n);
    let mut texts = vec![];
    nodes_of_type(&doc, "text", &mut texts);
    assert!(texts.iter().all(|t| !t["text"].as_str().unwrap().is_empty()));
}

#[tokio::test]
async fn an_acknowledgement_comments_on_the_incidents_issue_and_never_creates_one() {
    for api in [Api::Cloud, Api::Datacenter] {
        // The remembered issue.
        let server = MockServer::start().await;
        comment_expected(&server, api, "PAY-12", 1).await;
        let memo = json!({ "key": "PAY-12" });
        let out = deliver(&server, api, Action::Acknowledge, Some(&memo)).await.unwrap();
        testing::assert_delivered(&out, Some(json!({ "key": "PAY-12" })), "commented on PAY-12");

        // None remembered: the open one found by label; a resolved one is never reopened for an ack.
        let server = finding(api, vec![issue("PAY-9", "new", None)]).await;
        comment_expected(&server, api, "PAY-9", 1).await;
        create_expected(&server, api, 0).await;
        let out = deliver(&server, api, Action::Acknowledge, None).await.unwrap();
        assert_eq!(out.detail, "commented on PAY-9 (found by label)", "{api:?}");

        let server = finding(api, vec![issue("PAY-3", "done", Some(now()))]).await;
        create_expected(&server, api, 0).await;
        let out = deliver(&server, api, Action::Acknowledge, None).await.unwrap();
        assert_eq!(out.memo, None);
        assert!(out.detail.contains("nothing to comment on"), "{}", out.detail);
    }
}

#[tokio::test]
async fn an_acknowledgement_jira_refuses_is_retried_only_when_retrying_can_help() {
    for (status, transient) in [(503, true), (429, true), (403, false)] {
        let server = MockServer::start().await;
        let answer = ResponseTemplate::new(status).set_body_json(json!({ "errorMessages": ["no"] }));
        testing::expect_post(
            &server,
            &format!("{}/issue/PAY-12/comment", base(Api::Cloud)),
            answer,
            1,
        )
        .await;
        let memo = json!({ "key": "PAY-12" });
        let err = deliver(&server, Api::Cloud, Action::Acknowledge, Some(&memo))
            .await
            .unwrap_err();
        assert_eq!(
            matches!(err, DeliveryError::Transient { .. }),
            transient,
            "{status}: {err:?}"
        );
    }
}
