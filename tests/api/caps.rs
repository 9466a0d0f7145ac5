//! What one Application may weigh (issue 24 item 5): a page of `/v1/apps` is bounded in bytes as well as in rows,
//! and its `next` link gives the rest; `/v1/prune-pending` and the status page show a bounded number of rows and
//! say how many more there are.

use serde_json::{Value, json};

use crate::helpers::{TestApp, envelope, now_rfc3339};

/// `name` OutOfSync with 1,000 resources waiting to be pruned, each with a long name: about 0.7 MB as an item.
fn heavy(name: &str) -> String {
    let mut body: Value =
        serde_json::from_str(&envelope(name, "payments", "OutOfSync", "Healthy", &now_rfc3339())).expect("json");
    let resources: Vec<Value> = (0..1000)
        .map(|k| {
            json!({"version": "v1", "kind": "ConfigMap", "namespace": name,
                        "name": format!("cm-{k}-{}", "x".repeat(250)), "status": "OutOfSync", "requiresPruning": true})
        })
        .collect();
    body["app"]["status"]["resources"] = json!(resources);
    body.to_string()
}

#[tokio::test]
async fn a_page_of_large_applications_is_bounded_in_bytes_and_its_next_link_gives_the_rest() {
    let app = TestApp::spawn("").await;
    for k in 0..20 {
        assert_eq!(app.post(heavy(&format!("big-{k:02}"))).await.status(), 202);
    }

    let (mut names, mut pages, mut path) = (Vec::new(), 0, "/v1/apps?limit=1000".to_string());
    loop {
        let answer = app
            .client
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .expect("get");
        assert_eq!(answer.status(), 200);
        let text = answer.text().await.expect("text");
        assert!(
            text.len() <= herald::api::MAX_ANSWER_BYTES + (1 << 20),
            "{} bytes",
            text.len()
        );
        let page: Value = serde_json::from_str(&text).expect("json");
        names.extend(
            page["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|i| i["name"].to_string()),
        );
        pages += 1;
        match page["next"].as_str() {
            Some(next) => path = next.to_string(),
            None => break,
        }
    }

    assert!(pages >= 2, "one page of 20 × 0.7 MB would be 14 MB");
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 20, "every Application once: {names:?}");

    let answer = app
        .client
        .get(format!("{}/v1/prune-pending", app.address))
        .send()
        .await
        .expect("get");
    let text = answer.text().await.expect("text");
    assert!(text.len() < 2 << 20, "{} bytes", text.len());
    let pending: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(pending["count"], herald::api::MAX_PRUNE_ROWS);
    assert_eq!(
        pending["omitted"],
        20_000 - herald::api::MAX_PRUNE_ROWS,
        "says how many more"
    );

    let page = app.client.get(format!("{}/", app.address)).send().await.expect("get");
    let html = page.text().await.expect("text");
    assert!(html.len() < 256 << 10, "the status page is {} bytes", html.len());
    assert!(html.contains("… and 19900 more resources"), "says how many more");
    app.stop().await;
}
