//! Two Applications under one name (the name deleted and created again: another `metadata.uid`): the one created
//! later is the Application, whichever order their bodies come in and however close their times.

use crate::helpers::*;
use serde_json::Value;

/// The captured bodies `files`, all renamed to one Application `name`: four incarnations (their own uids and
/// creation times), dated within one second as Argo CD sends them, as a busy receiver gets them again and again.
fn incarnations(name: &str, files: &[&str]) -> Vec<(String, Vec<u8>)> {
    captured()
        .into_iter()
        .filter(|(f, _)| files.contains(&f.as_str()))
        .map(|(f, body)| {
            let mut v: Value = serde_json::from_slice(&body).expect("a captured body");
            v["app"]["metadata"]["name"] = Value::from(name);
            (f, serde_json::to_vec(&v).expect("JSON"))
        })
        .collect()
}

#[tokio::test]
async fn bodies_of_four_incarnations_arriving_in_turn_settle_on_the_one_created_last() {
    let app = TestApp::spawn("").await;
    // 001 and 004 were created in the same second (12:19:16), 002 on 09-29, 003 on 10-02: all four bodies are
    // dated 16:06:22 (.298, .517, .646, .773).
    let bodies = incarnations("shared-name", &["001.json", "002.json", "003.json", "004.json"]);
    assert_eq!(bodies.len(), 4);
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let mut outcomes = Vec::new();
        for (file, body) in &bodies {
            let r = app.post(body.clone()).await;
            assert_eq!(r.status().as_u16(), 202, "{file}");
            let answer: Value = r.json().await.expect("JSON");
            outcomes.push(format!("{file} {}", answer["outcome"].as_str().unwrap_or("?")));
        }
        rounds.push(outcomes);
    }
    assert_eq!(
        rounds[0],
        [
            "001.json changed",
            "002.json changed",
            "003.json changed",
            "004.json stale"
        ],
        "each incarnation created later replaces the one before; 004, created before 003, is late"
    );
    for later in &rounds[1..] {
        assert_eq!(
            later,
            &[
                "001.json stale",
                "002.json stale",
                "003.json duplicate",
                "004.json stale"
            ],
            "no body replaces the Application again"
        );
    }
    let stored = app.get_json("/v1/apps/argocd/shared-name").await;
    assert_eq!(stored["uid"], "648b3973-e90b-4496-84c0-febef8536eec", "{stored}");
}
