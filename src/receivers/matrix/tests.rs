use std::time::Duration;

use serde_json::json;
use wiremock::matchers::{header, method, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::configuration::Settings;
use crate::receivers::testing::{self, EchoEverything, assert_no_secret, json, requests, transient_after};

const TOKEN: &str = "syt_aGVyYWxk_secretTokenValue_0xyz";
const ROOM: &str = "!ops/room:example.org";
/// The room ID as a path segment: its `/` encoded, `!` and `:` kept.
const ROOM_PATH: &str = "/_matrix/client/v3/rooms/!ops%2Froom:example.org/send/m.room.message/";
const FIRST: &str = "$first-event:example.org";

fn matrix(server: &MockServer, template: Option<String>) -> Matrix {
    Matrix::new(
        Config {
            homeserver: format!("{}/", server.uri()),
            room_id: ROOM.into(),
            access_token: TOKEN.into(),
        },
        testing::http(),
        template,
    )
}

/// Expects `times` sends into the room with the bearer token, answered with `answer`; refuses anything else.
async fn expect_send(server: &MockServer, answer: ResponseTemplate, times: u64) {
    let sending = Mock::given(method("PUT"))
        .and(path_regex(format!(
            "^{}herald-[0-9a-f]{{32}}$",
            regex_escape(ROOM_PATH)
        )))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()));
    testing::expect_matching(server, sending, answer, times, "send into the room").await;
    testing::refuse_anything_else(server).await;
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| if "$.!%/:".contains(c) { vec!['\\', c] } else { vec![c] })
        .collect()
}

fn sent(event_id: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"event_id": event_id}))
}

/// Delivers the shared notification for `action` with `memo` through a receiver on `server`.
async fn deliver(server: &MockServer, action: Action, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
    matrix(server, None).deliver(&testing::notification(action), memo).await
}

fn memo() -> Memo {
    json!({"event_id": FIRST})
}

fn txn_of(r: &wiremock::Request) -> String {
    r.url.path().rsplit('/').next().unwrap_or_default().to_string()
}

#[tokio::test]
async fn an_open_posts_text_and_html_into_the_room_and_remembers_the_event() {
    let server = MockServer::start().await;
    expect_send(&server, sent(FIRST), 1).await;

    let out = deliver(&server, Action::Open, None).await.unwrap();

    assert_eq!(out.memo, Some(memo()));
    let reqs = requests(&server).await;
    assert_eq!(reqs.len(), 1);
    let body = json(&reqs[0]);
    assert_eq!(body["msgtype"], "m.text");
    assert_eq!(body["format"], "org.matrix.custom.html");
    assert_eq!(body.get("m.relates_to"), None, "an open starts a thread: {body}");
    let text = body["body"].as_str().unwrap();
    assert!(text.starts_with("🔴 FIRING\npayments is Degraded"), "{text}");
    assert!(text.contains("Deployment payments/payments-api: Degraded"), "{text}");
    let html = body["formatted_body"].as_str().unwrap();
    assert!(html.starts_with("<p>🔴 <b>FIRING</b></p><h2"), "{html}");
    assert!(!html.contains("<html") && !html.contains("<body"), "{html}");
    assert!(html.contains(testing::APP_URL), "{html}");
}

#[tokio::test]
async fn an_update_is_posted_in_the_thread_of_the_first_message() {
    let server = MockServer::start().await;
    expect_send(&server, sent("$reply:example.org"), 1).await;

    let out = deliver(&server, Action::Update, Some(&memo())).await.unwrap();

    assert_eq!(
        out.memo,
        Some(json!({"event_id": FIRST, "latest": "$reply:example.org"})),
        "the first message stays the thread's, the reply is its latest"
    );
    let body = json(&requests(&server).await[0]);
    assert_eq!(
        body["m.relates_to"],
        json!({"rel_type": "m.thread", "event_id": FIRST, "is_falling_back": true,
               "m.in_reply_to": {"event_id": FIRST}})
    );
    assert!(body["body"].as_str().unwrap().starts_with("🔴 FIRING"), "{body}");
}

#[tokio::test]
async fn a_resolve_edits_the_first_message() {
    let server = MockServer::start().await;
    expect_send(&server, sent("$edit:example.org"), 1).await;

    let out = deliver(&server, Action::Resolve, Some(&memo())).await.unwrap();

    assert_eq!(out.memo, None);
    let body = json(&requests(&server).await[0]);
    assert_eq!(
        body["m.relates_to"],
        json!({"rel_type": "m.replace", "event_id": FIRST})
    );
    let new = &body["m.new_content"];
    assert_eq!(new["msgtype"], "m.text");
    assert_eq!(new.get("m.relates_to"), None, "the new content carries no relation");
    assert!(new["body"].as_str().unwrap().starts_with("✅ RESOLVED\n"), "{new}");
    assert_eq!(body["body"], format!("* {}", new["body"].as_str().unwrap()));
    assert_eq!(
        body["formatted_body"],
        format!("* {}", new["formatted_body"].as_str().unwrap())
    );
}

#[tokio::test]
async fn a_resolve_without_a_first_message_posts_a_new_one() {
    let server = MockServer::start().await;
    expect_send(&server, sent("$resolved:example.org"), 1).await;

    let out = deliver(&server, Action::Resolve, None).await.unwrap();

    assert_eq!(out.memo, Some(json!({"event_id": "$resolved:example.org"})));
    let body = json(&requests(&server).await[0]);
    assert_eq!(body.get("m.relates_to"), None, "{body}");
    assert!(body["body"].as_str().unwrap().starts_with("✅ RESOLVED"), "{body}");
}

#[tokio::test]
async fn a_retried_delivery_reuses_its_transaction_id_and_another_delivery_does_not() {
    let server = MockServer::start().await;
    expect_send(&server, sent(FIRST), 4).await;
    let receiver = matrix(&server, None);
    let open = testing::notification(Action::Open);
    let mut later = open.clone();
    later.created_at += chrono::Duration::seconds(1);

    receiver.deliver(&open, None).await.unwrap();
    receiver.deliver(&open, None).await.unwrap();
    receiver.deliver(&later, None).await.unwrap();
    receiver
        .deliver(&testing::notification(Action::Update), Some(&memo()))
        .await
        .unwrap();

    let txns: Vec<String> = requests(&server).await.iter().map(txn_of).collect();
    assert_eq!(txns[0], txns[1], "a retry is deduplicated by the homeserver");
    assert_ne!(txns[0], txns[2], "a later delivery is another message");
    assert_ne!(txns[0], txns[3], "an update of the same thread is another message");
}

#[tokio::test]
async fn text_from_argo_cd_cannot_inject_html() {
    let server = MockServer::start().await;
    expect_send(&server, sent(FIRST), 1).await;
    let mut n = testing::notification(Action::Open);
    n.title = "<script>alert(1)</script>".into();
    n.incidents_mut()[0].messages = vec!["<a href=\"https://evil.example\">click</a>".into()];

    matrix(&server, None).deliver(&n, None).await.unwrap();

    let html = json(&requests(&server).await[0])["formatted_body"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !html.contains("<script>") && !html.contains("<a href=\"https://evil"),
        "{html}"
    );
    assert!(html.contains("&lt;script&gt;"), "{html}");
}

#[tokio::test]
async fn a_template_replaces_the_text_and_sends_no_html() {
    let server = MockServer::start().await;
    expect_send(&server, sent(FIRST), 1).await;

    testing::deliver_open(&matrix(&server, Some(testing::REASON_AND_TITLE.into()))).await;

    let body = json(&requests(&server).await[0]);
    assert_eq!(
        body,
        json!({"msgtype": "m.text", "body": testing::REASON_AND_TITLE_OF_AN_OPEN, "m.mentions": {}})
    );
}

#[tokio::test]
async fn nothing_from_argo_cd_mentions_the_room() {
    let server = MockServer::start().await;
    expect_send(&server, sent(FIRST), 2).await;
    let mut n = testing::notification(Action::Open);
    n.incidents_mut()[0].project = "@room".into();
    n.incidents_mut()[0].messages = vec!["deploy failed, @room look".into()];
    n.incidents_mut()[0].initiated_by = Some("@room:example.org".into());

    matrix(&server, None).deliver(&n, None).await.unwrap();
    let template = "{{ incidents[0].project }} {{ incidents[0].initiated_by }}".to_string();
    matrix(&server, Some(template)).deliver(&n, None).await.unwrap();

    for request in requests(&server).await {
        let event = json(&request);
        assert_eq!(event["m.mentions"], json!({}), "{event}");
        for key in ["body", "formatted_body"] {
            let text = event[key].as_str().unwrap_or_default();
            assert!(!text.contains("@room"), "{key}: {text}");
        }
        let body = event["body"]
            .as_str()
            .unwrap()
            .replace(crate::receivers::render::escape::WORD_JOINER, "");
        assert!(body.contains("@room"), "still readable: {body}");
    }
}

#[tokio::test]
async fn rate_limiting_waits_as_long_as_the_homeserver_asks() {
    let server = MockServer::start().await;
    let limited = json!({"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": 2500});
    expect_send(&server, ResponseTemplate::new(429).set_body_json(limited), 1).await;

    let e = deliver(&server, Action::Open, None).await.unwrap_err();

    assert_eq!(transient_after(&e), Some(Duration::from_millis(2500)));
    assert!(e.to_string().contains("M_LIMIT_EXCEEDED"), "{e}");
}

#[tokio::test]
async fn without_retry_after_ms_the_retry_after_header_is_obeyed() {
    let server = MockServer::start().await;
    let limited = ResponseTemplate::new(429)
        .insert_header("retry-after", "7")
        .set_body_json(json!({"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests"}));
    expect_send(&server, limited, 1).await;

    let e = deliver(&server, Action::Open, None).await.unwrap_err();

    assert_eq!(transient_after(&e), Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn an_unknown_token_or_a_forbidden_room_is_permanent_and_says_what_to_fix() {
    for (status, errcode, advice) in [
        (401, "M_UNKNOWN_TOKEN", "log the user in again"),
        (403, "M_FORBIDDEN", "invite it, join it"),
    ] {
        let server = MockServer::start().await;
        let body = json!({"errcode": errcode, "error": "refused"});
        expect_send(&server, ResponseTemplate::new(status).set_body_json(body), 1).await;

        let e = deliver(&server, Action::Open, None).await.unwrap_err();

        let reason = testing::permanent_reason(&e);
        assert!(
            reason.starts_with(&format!("matrix post: HTTP {status} {errcode}")),
            "{reason}"
        );
        assert!(reason.contains(advice), "{reason}");
    }
}

#[tokio::test]
async fn a_server_error_is_transient() {
    let server = MockServer::start().await;
    expect_send(&server, ResponseTemplate::new(502).set_body_string("bad gateway"), 1).await;

    let e = deliver(&server, Action::Update, Some(&memo())).await.unwrap_err();

    assert_eq!(transient_after(&e), None);
    assert!(e.to_string().contains("matrix thread reply: HTTP 502"), "{e}");
}

#[tokio::test]
async fn the_access_token_never_appears_in_a_failure() {
    for status in [401, 403, 429, 500] {
        let server = MockServer::start().await;
        testing::expect_matching(&server, Mock::given(method("PUT")), EchoEverything(status), 1, "a send").await;

        let e = deliver(&server, Action::Open, None).await.unwrap_err();

        assert!(e.to_string().contains(&format!("HTTP {status}")), "{e}");
        assert_no_secret(&e, &[TOKEN]);
    }
}

#[test]
fn the_block_reads_its_token_from_a_file_and_refuses_a_room_alias() {
    let token = testing::secret_file("token", TOKEN);
    let yaml = format!(
        "receivers: [{{name: ops, matrix: {{homeserver: 'https://matrix.example.org', room_id: '!abc:example.org', \
         access_token_file: '{}'}}}}]",
        token.path.display()
    );
    let settings = Settings::from_yaml(&yaml).expect("valid");
    let crate::receivers::ReceiverKind::Matrix(c) = &settings.receivers[0].kind else {
        panic!("a matrix block");
    };
    assert_eq!(c.access_token.expose_secret(), TOKEN);
    let caps = settings.receivers[0].capabilities();
    assert_eq!((caps.sends_resolved, caps.default_rate), (true, Some(1.0)));

    let alias = "receivers: [{name: ops, matrix: {homeserver: 'https://m.example.org', room_id: '#ops:example.org', \
                 access_token: t}}]";
    testing::assert_settings_refused(alias, "receivers[\"ops\"].matrix.room_id");
}

#[tokio::test]
async fn the_third_message_of_a_thread_replies_to_the_second() {
    let server = MockServer::start().await;
    let sends = std::sync::atomic::AtomicUsize::new(0);
    let answers = [FIRST, "$second:example.org", "$third:example.org"];
    testing::expect_matching(
        &server,
        Mock::given(method("PUT")),
        move |_: &wiremock::Request| {
            let k = sends.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            sent(answers[k.min(2)])
        },
        3,
        "a send",
    )
    .await;
    let receiver = matrix(&server, None);

    let first = receiver
        .deliver(&testing::notification(Action::Open), None)
        .await
        .unwrap();
    let memo = first.memo.expect("the open is remembered");
    let second = receiver
        .deliver(&testing::notification(Action::Update), Some(&memo))
        .await
        .unwrap();
    let memo = second.memo.expect("the reply is remembered");
    let mut update = testing::notification(Action::Update);
    update.created_at += chrono::Duration::minutes(5);
    receiver.deliver(&update, Some(&memo)).await.unwrap();

    let reqs = requests(&server).await;
    let relation = |k: usize| json(&reqs[k])["m.relates_to"].clone();
    assert_eq!(relation(1)["m.in_reply_to"]["event_id"], FIRST);
    assert_eq!(relation(2)["event_id"], FIRST, "still in the first message's thread");
    assert_eq!(relation(2)["m.in_reply_to"]["event_id"], "$second:example.org");
}

#[tokio::test]
async fn a_resolve_after_replies_edits_the_first_message_and_keeps_the_memo() {
    let server = MockServer::start().await;
    expect_send(&server, sent("$edit:example.org"), 1).await;
    let thread = json!({"event_id": FIRST, "latest": "$second:example.org"});

    let out = deliver(&server, Action::Resolve, Some(&thread)).await.unwrap();

    assert_eq!(out.memo, None);
    let body = json(&requests(&server).await[0]);
    assert_eq!(
        body["m.relates_to"],
        json!({"rel_type": "m.replace", "event_id": FIRST})
    );
}

/// Every tag and attribute in `html`, each as `tag` or `tag attribute`, read by a plain scan of `<…>`.
fn tags_and_attributes(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for piece in html.split('<').skip(1) {
        let inside = piece.split('>').next().unwrap_or_default();
        let inside = inside.trim_start_matches('/');
        let mut words = inside.splitn(2, char::is_whitespace);
        let tag = words.next().unwrap_or_default().to_ascii_lowercase();
        out.push(tag.clone());
        for (attr, _) in super::html::parse_attributes(words.next().unwrap_or_default()) {
            out.push(format!("{tag} {attr}"));
        }
    }
    out
}

/// The specification's list (client-server API, `m.room.message` msgtypes, `org.matrix.custom.html`), written
/// out here rather than taken from the receiver, so that the test checks the receiver against the specification.
fn permitted(item: &str) -> bool {
    const TAGS: &str = "del h1 h2 h3 h4 h5 h6 blockquote p a ul ol sup sub li b i u strong em s code hr br div \
                        table thead tbody tr th td caption pre span img details summary";
    const ATTRIBUTES: &str = "span:data-mx-bg-color span:data-mx-color span:data-mx-spoiler span:data-mx-maths \
                              a:target a:href img:width img:height img:alt img:title img:src ol:start code:class \
                              div:data-mx-maths";
    match item.split_once(' ') {
        None => TAGS.split_whitespace().any(|t| t == item),
        Some((tag, attr)) => ATTRIBUTES.split_whitespace().any(|a| a == format!("{tag}:{attr}")),
    }
}

/// A firing group of `apps` Applications, one incident each.
fn group(apps: usize) -> Notification {
    let mut n = testing::firing_notification(Action::Open);
    let one = n.incidents()[0].clone();
    *crate::receivers::testing::incidents_of(&mut n) = (0..apps)
        .map(|k| {
            let mut i = one.clone();
            i.id = k as i64;
            i.app_name = format!("payments-{k}");
            i.initiated_by = Some("alice@example.com".into());
            i
        })
        .collect();
    n
}

#[test]
fn the_html_uses_only_the_tags_and_attributes_the_specification_permits() {
    let cases = [
        ("a firing group", group(3)),
        ("a firing group listed in one line each", group(8)),
        ("a resolve", testing::notification(Action::Resolve)),
        (
            "a digest",
            crate::receivers::render::digest::tests::notification(crate::receivers::render::digest::tests::digest()),
        ),
    ];
    for (what, n) in cases {
        let m = message(&n, None);
        let html = m["formatted_body"].as_str().expect("an HTML rendering");
        let found = tags_and_attributes(html);
        assert!(found.iter().any(|t| t == "a href"), "{what} keeps its links: {html}");
        assert!(found.iter().any(|t| t == "table" || t == "ul"), "{what}: {html}");
        let refused: Vec<_> = found.iter().filter(|t| !permitted(t)).collect();
        assert!(refused.is_empty(), "{what}: {refused:?} in {html}");
    }
}

#[test]
fn an_address_stays_readable_but_unlinked_and_a_mention_is_broken() {
    let mut n = testing::notification(Action::Open);
    n.incidents_mut()[0].initiated_by = Some("alice@example.com".into());
    n.incidents_mut()[0].messages = vec!["@room see https://git.example.com/@alice/repo".into()];

    let m = message(&n, None);

    for key in ["body", "formatted_body"] {
        let text = m[key].as_str().unwrap();
        assert!(text.contains("alice@example.com"), "{key}: {text}");
        // Element links a bare address by itself: a word joiner before `:` and each `.` of the host keeps it text.
        assert!(!text.contains("https://git.example.com"), "{key}: {text}");
        assert!(
            text.contains("https\u{2060}://git\u{2060}.example\u{2060}.com/@"),
            "{key}: {text}"
        );
        assert!(text.contains("@\u{2060}room"), "{key}: {text}");
    }
}
