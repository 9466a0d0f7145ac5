//! The receivers and people of issue 15 driven through the real `herald serve` binary: a sync alice started fails,
//! her team hears of it in Slack, PagerDuty, Redmine, ServiceNow and Matrix, she gets a direct message; Herald is
//! killed with SIGKILL and started again; her next sync deploys a new revision, which resolves every ticket Herald
//! opened (no second one) and sends one PagerDuty change event.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::helpers::{Binary, base_yaml, envelope, eventually, now_rfc3339, with_operation};

const FAILED: &str = "0123456789abcdef0123456789abcdef01234567";
const DEPLOYED: &str = "1111111111111111111111111111111111111111";
const NEW: &str = "2222222222222222222222222222222222222222";
const SYS_ID: &str = "9d385017c611228701d22104cc95c371";

/// One fake per system, each answering as its documentation says.
struct Systems {
    slack: MockServer,
    pagerduty: MockServer,
    redmine: MockServer,
    servicenow: MockServer,
    matrix: MockServer,
}

impl Systems {
    async fn start() -> Self {
        let slack = MockServer::start().await;
        let ok = json!({"ok": true, "channel": "C0OPS", "ts": "1700000000.000100"});
        Mock::given(method("POST"))
            .and(path_regex("^/api/chat\\.(postMessage|update)$"))
            .respond_with(ResponseTemplate::new(200).set_body_json(ok))
            .mount(&slack)
            .await;

        let pagerduty = MockServer::start().await;
        let processed = json!({"status": "success", "message": "Event processed", "dedup_key": "k"});
        Mock::given(method("POST"))
            .and(path_regex("^/v2/(change/)?enqueue$"))
            .respond_with(ResponseTemplate::new(202).set_body_json(processed))
            .mount(&pagerduty)
            .await;

        let redmine = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/redmine/issues.json"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"issues": [], "total_count": 0})))
            .mount(&redmine)
            .await;
        let created = json!({"issue": {"id": 123, "subject": "created", "status": {"id": 1, "name": "New"}}});
        Mock::given(method("POST"))
            .and(path("/redmine/issues.json"))
            .respond_with(ResponseTemplate::new(201).set_body_json(created))
            .mount(&redmine)
            .await;
        Mock::given(method("PUT"))
            .and(path("/redmine/issues/123.json"))
            .respond_with(ResponseTemplate::new(204))
            .mount(&redmine)
            .await;

        let servicenow = MockServer::start().await;
        let record = json!({"sys_id": SYS_ID, "number": "INC0010001", "state": "1", "active": "true"});
        Mock::given(method("GET"))
            .and(path("/api/now/table/incident"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"result": []})))
            .mount(&servicenow)
            .await;
        Mock::given(method("POST"))
            .and(path("/api/now/table/incident"))
            .respond_with(ResponseTemplate::new(201).set_body_json(json!({"result": record})))
            .mount(&servicenow)
            .await;
        Mock::given(method("PATCH"))
            .and(path(format!("/api/now/table/incident/{SYS_ID}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"result": record})))
            .mount(&servicenow)
            .await;

        let matrix = MockServer::start().await;
        Mock::given(method("PUT"))
            .and(path_regex(
                "^/_matrix/client/v3/rooms/[^/]+/send/m\\.room\\.message/[^/]+$",
            ))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"event_id": "$first"})))
            .mount(&matrix)
            .await;

        Self {
            slack,
            pagerduty,
            redmine,
            servicenow,
            matrix,
        }
    }

    fn config(&self, dir: &Path) -> String {
        format!(
            r#"{base}
teams: {{payments: {{receivers: [slack-bot, pd, redmine, servicenow, matrix]}}}}
grouping: {{group_wait: 0s, group_interval: 1s}}
people:
  alice: {{slack: U024BE7LH}}
receivers:
  - {{name: slack-bot, slack: {{token: xoxb-test, channel: "C0OPS", api_url: "{slack}/api"}}}}
  - {{name: pd, pagerduty: {{url: "{pd}/v2/enqueue", routing_key: R0UT1NGKEY0000000000000000000000, change_events: true}}}}
  - {{name: redmine, redmine: {{url: "{redmine}/redmine", api_key: rm-k3y, project_id: payments, closed_status_id: 5}}}}
  - {{name: servicenow, servicenow: {{instance_url: "{servicenow}", user: herald, password: sn-pw}}}}
  - {{name: matrix, matrix: {{homeserver: "{matrix}", room_id: "!ops:example.org", access_token: syt_t0ken}}}}
"#,
            base = base_yaml(dir),
            slack = self.slack.uri(),
            pd = self.pagerduty.uri(),
            redmine = self.redmine.uri(),
            servicenow = self.servicenow.uri(),
            matrix = self.matrix.uri(),
        )
    }
}

/// Each request a fake received, as `METHOD path` and its JSON body (`null` when there is none).
async fn calls(server: &MockServer) -> Vec<(String, Value)> {
    let requests: Vec<Request> = server.received_requests().await.unwrap_or_default();
    (requests.iter())
        .map(|r| {
            let body = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
            (format!("{} {}", r.method, r.url.path()), body)
        })
        .collect()
}

/// Waits (up to 20 s) until `server` received a request that `wanted` accepts; answers all it received.
async fn wait_until(server: &MockServer, what: &str, wanted: impl Fn(&str, &Value) -> bool) -> Vec<(String, Value)> {
    let found = eventually(Duration::from_secs(20), || async {
        let all = calls(server).await;
        all.iter().any(|(call, body)| wanted(call, body)).then_some(all)
    })
    .await;
    match found {
        Some(all) => all,
        None => panic!("never got {what}; got {:?}", calls(server).await),
    }
}

fn count(calls: &[(String, Value)], call: &str) -> usize {
    calls.iter().filter(|(c, _)| c == call).count()
}

/// `payments-api` after a sync alice started, with Argo CD's history of what was deployed.
fn synced_by_alice(sync: &str, phase: &str, revision: &str, history: &[&str]) -> String {
    let mut body: Value = serde_json::from_str(&with_operation(
        &envelope("payments-api", "payments", sync, "Healthy", &now_rfc3339()),
        json!({"phase": phase, "message": "one or more objects failed to apply", "startedAt": now_rfc3339(),
               "finishedAt": now_rfc3339(), "operation": {"initiatedBy": {"username": "alice"},
               "sync": {"revision": revision}}, "syncResult": {"revision": revision}}),
    ))
    .expect("json");
    let history: Vec<Value> = (history.iter().enumerate())
        .map(|(id, r)| json!({"id": id, "revision": r, "deployedAt": "2026-01-01T10:00:00Z"}))
        .collect();
    body["app"]["status"]["history"] = json!(history);
    body.to_string()
}

async fn post(bin: &Binary, body: String) {
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/argocd/events", bin.address))
        .body(body)
        .send()
        .await
        .expect("herald answers");
    assert_eq!(
        answer.status().as_u16(),
        202,
        "{}",
        answer.text().await.unwrap_or_default()
    );
}

#[tokio::test]
async fn the_real_binary_tells_alice_opens_one_ticket_everywhere_and_resolves_them_after_a_kill_9() {
    let systems = Systems::start().await;
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("herald.yaml");
    std::fs::write(&file, systems.config(dir.path())).expect("config");

    let mut bin = Binary::start(&file, &[]);
    post(&bin, synced_by_alice("OutOfSync", "Failed", FAILED, &[DEPLOYED])).await;

    // Alice's failure: the team's channel and a direct message to her, a page, a ticket in each tracker, a room
    // message.
    wait_until(&systems.slack, "a DM to alice", |_, b| b["channel"] == "U024BE7LH").await;
    let slack = wait_until(&systems.slack, "the team's message", |_, b| b["channel"] == "C0OPS").await;
    let pages = wait_until(&systems.pagerduty, "a trigger", |c, b| {
        c == "POST /v2/enqueue" && b["event_action"] == "trigger"
    })
    .await;
    let redmine = wait_until(&systems.redmine, "an issue", |c, _| c == "POST /redmine/issues.json").await;
    let servicenow = wait_until(&systems.servicenow, "an incident", |c, _| {
        c == "POST /api/now/table/incident"
    })
    .await;
    wait_until(&systems.matrix, "a room message", |c, _| c.starts_with("PUT ")).await;

    let dm = slack.iter().find(|(_, b)| b["channel"] == "U024BE7LH").expect("dm");
    assert!(dm.1.to_string().contains("payments-api"), "{}", dm.1);
    let trigger = pages.iter().find(|(c, _)| c == "POST /v2/enqueue").expect("trigger");
    assert_eq!(trigger.1["payload"]["severity"], "critical", "{}", trigger.1);
    let issue = &redmine
        .iter()
        .find(|(c, _)| c == "POST /redmine/issues.json")
        .expect("issue")
        .1;
    assert_eq!(issue["issue"]["project_id"], "payments", "{issue}");
    assert!(
        issue["issue"]["subject"]
            .as_str()
            .unwrap_or_default()
            .contains("[herald:"),
        "{issue}"
    );
    let incident = &servicenow
        .iter()
        .find(|(c, _)| c.starts_with("POST"))
        .expect("incident")
        .1;
    assert!(incident["correlation_id"].is_string(), "{incident}");
    assert!(
        pages.iter().all(|(c, _)| c != "POST /v2/change/enqueue"),
        "a failed sync is no change"
    );

    // Everything is delivered (and recorded so, or the restart would rightly send again): kill -9 then loses
    // nothing and must repeat nothing.
    let recorded = eventually(Duration::from_secs(10), || async {
        let pending: Value = reqwest::get(format!("{}/v1/outbox?state=pending", bin.address))
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        (pending["count"] == 0).then_some(())
    })
    .await;
    assert!(recorded.is_some(), "deliveries still pending: {}", bin.logs());
    bin.kill9();
    let mut bin = Binary::start(&file, &[]);
    post(&bin, synced_by_alice("Synced", "Succeeded", NEW, &[DEPLOYED, NEW])).await;

    let pages = wait_until(&systems.pagerduty, "a resolve", |c, b| {
        c == "POST /v2/enqueue" && b["event_action"] == "resolve"
    })
    .await;
    let pages = match count(&pages, "POST /v2/change/enqueue") {
        0 => {
            wait_until(&systems.pagerduty, "a change event", |c, _| {
                c == "POST /v2/change/enqueue"
            })
            .await
        }
        _ => pages,
    };
    let redmine = wait_until(&systems.redmine, "the issue closed", |c, b| {
        c == "PUT /redmine/issues/123.json" && b["issue"]["status_id"] == 5
    })
    .await;
    let servicenow = wait_until(&systems.servicenow, "the incident resolved", |c, b| {
        c.starts_with("PATCH") && b["state"] == "6"
    })
    .await;
    let matrix = wait_until(&systems.matrix, "the first message edited", |_, b| {
        b["m.relates_to"]["rel_type"] == "m.replace"
    })
    .await;

    let change = &pages
        .iter()
        .find(|(c, _)| c == "POST /v2/change/enqueue")
        .expect("change")
        .1;
    assert_eq!(change["payload"]["custom_details"]["revision"], NEW, "{change}");
    assert_eq!(
        change["payload"]["custom_details"]["previous_revision"], DEPLOYED,
        "{change}"
    );
    assert_eq!(change["payload"]["custom_details"]["initiator"], "alice", "{change}");
    let edit = &matrix
        .iter()
        .find(|(_, b)| b["m.relates_to"]["rel_type"] == "m.replace")
        .expect("edit")
        .1;
    assert_eq!(
        edit["m.relates_to"]["event_id"], "$first",
        "the edit names the first message: {edit}"
    );

    // Settled: one ticket per incident, one direct message, one change event, nothing repeated after the restart.
    bin.settle().await;
    let slack = calls(&systems.slack).await;
    let dms = slack.iter().filter(|(_, b)| b["channel"] == "U024BE7LH").count();
    assert_eq!(dms, 1, "the resolve goes to the team, not to alice again: {slack:?}");
    assert_eq!(count(&calls(&systems.redmine).await, "POST /redmine/issues.json"), 1);
    assert_eq!(
        count(&redmine, "GET /redmine/issues.json"),
        1,
        "the restart remembered issue 123"
    );
    assert_eq!(
        count(&calls(&systems.servicenow).await, "POST /api/now/table/incident"),
        1
    );
    assert_eq!(
        count(&servicenow, "GET /api/now/table/incident"),
        1,
        "the restart remembered the sys_id"
    );
    let pages = calls(&systems.pagerduty).await;
    assert_eq!(count(&pages, "POST /v2/change/enqueue"), 1, "{pages:?}");
    let triggers = pages.iter().filter(|(_, b)| b["event_action"] == "trigger").count();
    assert_eq!(triggers, 1, "{pages:?}");
    bin.kill9();
}
