//! The API's contract, `docs/openapi.json`, is served at `/v1/openapi.json` without credentials and names every
//! `/v1` route Herald serves (Schemathesis checks the answers against it: scripts/contract).

use crate::helpers::*;

#[tokio::test]
async fn the_contract_is_served_and_names_every_v1_route() {
    let app = TestApp::spawn("").await;
    let r = app
        .client
        .get(format!("{}/v1/openapi.json", app.address))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200);
    let doc: serde_json::Value = r.json().await.expect("json");
    assert_eq!(doc["openapi"], "3.1.0");
    let routes = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/api/mod.rs")).expect("routes");
    let mut served: Vec<String> = routes
        .split('"')
        // Route paths, not the URIs the module's own tests request (they carry a query).
        .filter(|s| s.starts_with("/v1/") && !s.contains('?'))
        .map(str::to_string)
        .collect();
    served.sort();
    served.dedup();
    assert!(served.len() >= 10, "{served:?}");
    for path in &served {
        assert!(
            doc["paths"].get(path).is_some(),
            "{path} is served but not in docs/openapi.json"
        );
    }
    app.stop().await;
}
