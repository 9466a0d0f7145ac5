//! What hostile bodies cost the real binary: bodies of just under 4 MB whose one list is as long as fits (about 1.3
//! million `{}`), four at once, through each list a parser once built whole — `status.resources`,
//! `operationState.syncResult.resources`, `status.conditions`, `status.sync.revisions`, and a `status.resources` with
//! one wrong element past the cap (the typed reader refuses it, the tolerant one reads a whole `Value`) — and through
//! the Argo CD
//! API's listing (four such Applications in one listing). The lists are capped while they are parsed (what is past
//! the cap is skipped, never built): the peak resident memory (`VmHWM`) of each fresh process stays under
//! [`LIMIT_MB`] (a body of 1.3 million empty resources took 470 MB alone before). The figures are printed
//! (`cargo test --test api memory:: -- --nocapture`) and kept in docs/benchmarks.md.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_argocd::FakeArgoCd;
use crate::helpers::*;

/// The peak four hostile bodies read at once may cost, the process included.
const LIMIT_MB: u64 = 200;

/// Just under the default `server.max_body_bytes` (4 MiB).
const BODY_BYTES: usize = 4 * 1024 * 1024 - 2048;

/// An Application (as a body's `app`) whose list at `shape` is as long as fits in [`BODY_BYTES`].
fn hostile_app(k: usize, shape: &str) -> Value {
    let mut app = json!({
        "metadata": {"name": format!("hostile-{k}"), "namespace": "argocd", "uid": format!("uid-hostile-{k}")},
        "spec": {"project": "default"},
        "status": {"sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"}}
    });
    let count = (BODY_BYTES - 600) / 3;
    let list = || Value::Array(vec![json!({}); count]);
    match shape {
        "resources" => app["status"]["resources"] = list(),
        "syncResult" => {
            app["status"]["operationState"] = json!({"phase": "Failed", "syncResult": {"resources": list()}})
        }
        "conditions" => app["status"]["conditions"] = list(),
        "wrong" => {
            // One element past the cap is of the wrong type: the typed reader refuses it, the tolerant one reads it.
            let mut l = list();
            if let Value::Array(items) = &mut l {
                items.push(json!(1));
            }
            app["status"]["resources"] = l
        }
        _ => {
            let revisions: Vec<Value> = (0..(BODY_BYTES - 600) / 8).map(|i| json!(format!("{i:x}"))).collect();
            app["status"]["sync"]["revisions"] = Value::Array(revisions);
        }
    }
    app
}

fn body(k: usize, shape: &str) -> Vec<u8> {
    let b = serde_json::to_vec(&bare_envelope(hostile_app(k, shape), &now_rfc3339())).expect("json");
    assert!(b.len() <= BODY_BYTES + 1024, "{shape}: {} bytes", b.len());
    b
}

/// The peak resident memory of process `pid`, in MB (`VmHWM` of /proc/PID/status).
fn peak_mb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb / 1024
}

/// A fresh `herald serve` with a budget for four bodies at once (the default, 16 MiB, may shed one while others are
/// read: this is the worst case), time and a worker each for a debug build to parse them (a worker busy parsing one
/// does not read the next request's head within actix-web's 5 s: 408), and `extra` YAML.
fn start(dir: &Path, extra: &str) -> Binary {
    let config = dir.join("herald.yaml");
    std::fs::write(
        &config,
        format!(
            "server: {{listen: \"127.0.0.1:0\", max_inflight_body_bytes: 67108864, body_read_timeout: 600s, workers: 4}}\nstorage: {{url: \"sqlite://{}/h.db\"}}\n\
             log: {{level: warn}}\n{extra}",
            dir.display()
        ),
    )
    .expect("config");
    Binary::start(&config, &[])
}

#[tokio::test]
async fn four_hostile_bodies_at_once_stay_under_200_mb_whatever_their_list() {
    for shape in ["wrong", "resources", "syncResult", "conditions", "revisions"] {
        let dir = tempfile::tempdir().expect("tmp");
        let mut bin = start(dir.path(), "");
        let before = peak_mb(bin.child.id());
        let client = reqwest::Client::new();
        let sends = (0..4).map(|k| {
            let request = client
                .post(format!("{}/v1/argocd/events", bin.address))
                .timeout(Duration::from_secs(120))
                .body(body(k, shape));
            async move { request.send().await.expect("an answer").status().as_u16() }
        });
        let answers = futures_util::future::join_all(sends).await;
        let peak = peak_mb(bin.child.id());
        println!("{shape}: four bodies of 4 MB at once: answers {answers:?}; peak RSS {before} MB at start, {peak} MB");
        assert!(
            answers.iter().all(|a| *a == 202),
            "{shape}: every body read and stored: {answers:?}\n{}",
            bin.logs()
        );
        assert!(peak < LIMIT_MB, "{shape}: peak RSS {peak} MB");
        bin.terminate().await;
    }
}

#[tokio::test]
async fn a_listing_of_hostile_applications_stays_under_200_mb() {
    let argo = FakeArgoCd::start("argocd-read-token").await;
    for k in 0..4 {
        argo.put(hostile_app(k, "resources"));
    }
    let dir = tempfile::tempdir().expect("tmp");
    let api = format!(
        "argocd: {{api: {{url: \"{}\", token: argocd-read-token, resync_interval: 1h, timeout: 60s}}}}",
        argo.uri()
    );
    let mut bin = start(dir.path(), &api);
    let client = reqwest::Client::new();
    let listed = eventually(Duration::from_secs(120), || async {
        let r = client.get(format!("{}/v1/apps", bin.address)).send().await.ok()?;
        let v: Value = r.json().await.ok()?;
        (v["count"] == 4).then_some(())
    })
    .await;
    assert!(listed.is_some(), "the four listed: {}", bin.logs());
    let peak = peak_mb(bin.child.id());
    println!("listing of four Applications of 1.3 million resources each: peak RSS {peak} MB");
    assert!(peak < LIMIT_MB, "peak RSS {peak} MB");
    bin.terminate().await;
}
