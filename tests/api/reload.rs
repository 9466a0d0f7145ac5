//! `herald serve` reloads its configuration on SIGHUP, on the real binary: a receiver's new file takes the next
//! notification, new credentials are accepted, a broken file changes nothing and says why, and what needs a
//! restart is logged as ignored.

use std::path::Path;
use std::time::Duration;

use crate::helpers::*;

const ADMIN: &str = "admin-token-0123456789";
const READER: &str = "reader-token-0123456789";

fn config(dir: &Path, sink: &Path, extra: &str) -> String {
    format!(
        r#"{base}
server: {{listen: "127.0.0.1:0", auth: {{bearer_tokens: [{ADMIN}]{extra}}}}}
grouping: {{group_wait: 0s, group_by: [app]}}
rules: {{degraded: {{for: 0s}}}}
receivers: [{{name: console, console: {{file: "{sink}"}}}}]
teams: {{payments: {{receivers: [console]}}}}
"#,
        base = base_yaml(dir).replace("server: {listen: \"127.0.0.1:0\"}\n", ""),
        sink = sink.display()
    )
}

/// A directory with `herald.yaml` written whole (the admin token, a console sink): the directory, the file's path and
/// its text.
fn whole_file() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    let whole = config(dir.path(), &dir.path().join("sink.jsonl"), "");
    std::fs::write(&cfg, &whole).expect("write");
    (dir, cfg, whole)
}

pub(crate) fn hangup(bin: &Binary) {
    let status = std::process::Command::new("kill")
        .arg("-HUP")
        .arg(bin.child.id().to_string())
        .status()
        .expect("kill -HUP");
    assert!(status.success());
}

pub(crate) async fn logged(bin: &Binary, what: &str, times: usize) {
    eventually(Duration::from_secs(10), || async {
        (bin.logs().matches(what).count() >= times).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("{what:?} not logged {times} time(s): {}", bin.logs()));
}

async fn degraded(client: &reqwest::Client, bin: &Binary, app: &str) {
    let r = client
        .post(format!("{}/v1/argocd/events", bin.address))
        .bearer_auth(ADMIN)
        .body(envelope(app, "payments", "Synced", "Degraded", &now_rfc3339()))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 202);
}

#[tokio::test]
async fn sighup_reloads_receivers_and_credentials_and_a_broken_file_keeps_the_running_configuration() {
    let dir = tempfile::tempdir().expect("tmp");
    let (first, second) = (dir.path().join("first.jsonl"), dir.path().join("second.jsonl"));
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(&cfg, config(dir.path(), &first, "")).expect("write");
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();

    degraded(&client, &bin, "pay-api").await;
    wait_for(&first, 1).await;
    let r = client
        .get(format!("{}/v1/apps", bin.address))
        .bearer_auth(READER)
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 401, "not yet a credential");

    // The console receiver writes elsewhere, a read token is added, and the tick (restart only) changes.
    let new = config(dir.path(), &second, &format!(", read_tokens: [{READER}]"))
        .replace("scheduler: {tick: 50ms}", "scheduler: {tick: 70ms}");
    std::fs::write(&cfg, new).expect("write");
    hangup(&bin);
    logged(&bin, "configuration reloaded", 1).await;
    assert!(
        bin.logs().contains("scheduler changed, which needs a restart; ignored"),
        "{}",
        bin.logs()
    );
    degraded(&client, &bin, "cart").await;
    let got = wait_for(&second, 1).await;
    assert!(got[0].to_string().contains("cart"), "{got:?}");
    assert_eq!(delivered(&first).len(), 1, "nothing more went to the old file");
    let r = client
        .get(format!("{}/v1/apps", bin.address))
        .bearer_auth(READER)
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200, "the new credential is accepted");

    // A broken file: refused, logged with the key path, and the running configuration stays.
    std::fs::write(
        &cfg,
        config(dir.path(), &first, "").replace("receivers: [console]", "receivers: [ghost]"),
    )
    .expect("write");
    hangup(&bin);
    logged(&bin, "configuration reload refused", 1).await;
    assert!(bin.logs().contains("teams.payments.receivers[0]"), "{}", bin.logs());
    degraded(&client, &bin, "ledger").await;
    let got = wait_for(&second, 2).await;
    assert!(got[1].to_string().contains("ledger"), "{got:?}");
    assert_eq!(delivered(&first).len(), 1);
    let r = client
        .get(format!("{}/v1/apps", bin.address))
        .bearer_auth(READER)
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200, "still the reloaded credentials");
    assert!(bin.terminate().await.success());
}

async fn anonymous_apps(client: &reqwest::Client, bin: &Binary) -> u16 {
    client
        .get(format!("{}/v1/apps", bin.address))
        .send()
        .await
        .expect("req")
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_reload_of_an_empty_or_cut_file_keeps_the_credentials_in_force() {
    let (_dir, cfg, whole) = whole_file();
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();
    assert_eq!(anonymous_apps(&client, &bin).await, 401);

    // An empty file, then one cut before `auth:` (as a writer caught half-way leaves it): each valid alone.
    let cut = &whole[..whole.find("server:").expect("server section")];
    for (n, text) in [(1, ""), (2, cut)] {
        std::fs::write(&cfg, text).expect("write");
        hangup(&bin);
        logged(&bin, "configuration reload refused", n).await;
        assert_eq!(anonymous_apps(&client, &bin).await, 401, "file {n}: {}", bin.logs());
    }
    assert!(
        bin.logs().contains("allow_reload_to_lower: true"),
        "the refusal says how to mean it: {}",
        bin.logs()
    );

    // Said in the new file: applied, and Herald answers without credentials.
    std::fs::write(
        &cfg,
        format!("{cut}server: {{listen: \"127.0.0.1:0\", auth: {{allow_reload_to_lower: true}}}}\n"),
    )
    .expect("write");
    hangup(&bin);
    logged(&bin, "configuration reloaded", 1).await;
    assert_eq!(anonymous_apps(&client, &bin).await, 200);
    assert!(bin.logs().contains("removes every credential"), "{}", bin.logs());
    assert!(bin.terminate().await.success());
}

#[tokio::test]
async fn a_reload_of_a_file_cut_in_the_middle_of_a_token_keeps_the_credentials_in_force() {
    let (_dir, cfg, whole) = whole_file();
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();
    let apps = |token: &'static str| {
        let client = client.clone();
        let url = format!("{}/v1/apps", bin.address);
        async move {
            client
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .expect("req")
                .status()
                .as_u16()
        }
    };
    assert_eq!(apps(ADMIN).await, 200);

    // A rotation being written: the new token's line cut after 20 of its characters, no line break after it.
    const NEW: &str = "rotated-token-abcdefghijklmnopqrstuvwxyz";
    const PREFIX: &str = "rotated-token-abcdef";
    // The tokens are the file's last lines, in block style, so the cut file is valid YAML.
    let server_line = whole
        .lines()
        .find(|l| l.starts_with("server:"))
        .expect("the server line");
    let rotated = format!(
        "{}\nserver:\n  listen: \"127.0.0.1:0\"\n  auth:\n    bearer_tokens:\n      - {ADMIN}\n      - {NEW}\n",
        whole.replace(&format!("{server_line}\n"), "").trim_end()
    );
    let cut_at = rotated.find(NEW).expect("the new token") + PREFIX.len();
    std::fs::write(&cfg, &rotated[..cut_at]).expect("write");
    hangup(&bin);
    logged(&bin, "configuration reload refused", 1).await;
    assert!(bin.logs().contains("does not end with a line break"), "{}", bin.logs());
    assert_eq!(apps(PREFIX).await, 401, "the cut token is no credential");
    assert_eq!(apps(ADMIN).await, 200, "the running credentials stay");

    // The whole file: applied, the new token works.
    std::fs::write(&cfg, &rotated).expect("write");
    hangup(&bin);
    logged(&bin, "configuration reloaded", 1).await;
    assert_eq!(apps(NEW).await, 200);
    assert_eq!(apps(PREFIX).await, 401);
    assert!(bin.terminate().await.success());
}

#[tokio::test]
async fn rewriting_the_file_during_reloads_never_lets_an_anonymous_request_in() {
    let (_dir, cfg, whole) = whole_file();
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A writer that truncates and rewrites the file in small pieces, over and over (an editor without a rename).
    let writer = {
        let (cfg, whole, stop) = (cfg.clone(), whole.clone(), stop.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut f = std::fs::File::create(&cfg).expect("create");
                for piece in whole.as_bytes().chunks(64) {
                    f.write_all(piece).expect("write");
                    f.flush().expect("flush");
                    let_time_pass_blocking(Duration::from_micros(200));
                }
            }
        })
    };
    let mut admitted = 0;
    for _ in 0..100 {
        hangup(&bin);
        let r = client
            .post(format!("{}/v1/argocd/events", bin.address))
            .body(envelope("pay-api", "payments", "Synced", "Healthy", &now_rfc3339()))
            .send()
            .await
            .expect("req");
        if r.status() == 202 {
            admitted += 1;
        }
        let_time_pass(Duration::from_millis(5)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().expect("writer");
    assert_eq!(admitted, 0, "anonymous events admitted: {}", bin.logs());
    assert!(bin.logs().contains("configuration reload refused"), "{}", bin.logs());
    assert!(bin.terminate().await.success());
}

/// A token file being rewritten when SIGHUP arrives (a writer that put the new token's first 20 characters, then the
/// rest 300 ms later): the reload waits until the file has stopped changing and takes the whole token; its prefix is
/// never a credential.
#[tokio::test]
async fn a_reload_never_takes_a_token_file_caught_half_written() {
    let dir = tempfile::tempdir().expect("tmp");
    let tokens = dir.path().join("read-tokens");
    std::fs::write(&tokens, format!("{READER}\n")).expect("write");
    let cfg = dir.path().join("herald.yaml");
    let extra = format!(", read_tokens_file: \"{}\"", tokens.display());
    std::fs::write(&cfg, config(dir.path(), &dir.path().join("sink.jsonl"), &extra)).expect("write");
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();
    let apps = |token: &'static str| {
        let request = client.get(format!("{}/v1/apps", bin.address)).bearer_auth(token);
        async move { request.send().await.expect("req").status().as_u16() }
    };
    assert_eq!(apps(READER).await, 200);

    const NEW: &str = "rotated-read-token-abcdefghijklmnop";
    const PREFIX: &str = "rotated-read-token-a";
    std::fs::write(&tokens, format!("{READER}\n{PREFIX}")).expect("the first part");
    hangup(&bin);
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(&tokens, format!("{READER}\n{NEW}\n")).expect("the rest");
    logged(&bin, "configuration reloaded", 1).await;
    assert_eq!(apps(NEW).await, 200, "the whole token: {}", bin.logs());
    assert_eq!(apps(PREFIX).await, 401, "its prefix is no credential");
    assert_eq!(apps(READER).await, 200);
    assert!(bin.terminate().await.success());
}

/// A reload carries `teams:` and `server.auth.proxy` as it carries the credentials: a token given teams by a SIGHUP
/// is refused on another team's incident at once, and a proxy added by it is believed.
#[tokio::test]
async fn a_reload_binds_a_credential_to_its_teams_and_adds_the_proxy_at_once() {
    const ONCALL: &str = "oncall-respond-token-0123456789";
    let dir = tempfile::tempdir().expect("tmp");
    let sink = dir.path().join("sink.jsonl");
    let cfg = dir.path().join("herald.yaml");
    let write = |oncall_teams: &str, proxy: &str| {
        let text = format!(
            r#"{base}
server:
  listen: "127.0.0.1:0"
  auth:
    bearer_tokens: [{ADMIN}, {{name: oncall, token: {ONCALL}, scope: respond{oncall_teams}}}]
{proxy}
grouping: {{group_wait: 0s, group_by: [app]}}
rules: {{degraded: {{for: 0s}}}}
receivers: [{{name: console, console: {{file: "{sink}"}}}}]
teams: {{payments: {{receivers: [console]}}, search: {{receivers: [console]}}}}
"#,
            base = base_yaml(dir.path()).replace("server: {listen: \"127.0.0.1:0\"}\n", ""),
            sink = sink.display()
        );
        std::fs::write(&cfg, text).expect("write");
    };
    write("", "");
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/v1/argocd/events", bin.address))
        .bearer_auth(ADMIN)
        .body(envelope("search-api", "search", "Synced", "Degraded", &now_rfc3339()))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 202);
    wait_for(&sink, 1).await;
    let ack = |token: Option<&str>, user: Option<&str>| {
        let mut req = client.post(format!("{}/v1/incidents/1/ack", bin.address));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(u) = user {
            req = req
                .header("X-Forwarded-User", u)
                .header("X-Forwarded-Groups", "search-oncall");
        }
        async move { req.send().await.expect("req").status().as_u16() }
    };
    assert_eq!(ack(Some(ONCALL), None).await, 200, "every team before the reload");
    let unack = client
        .post(format!("{}/v1/incidents/1/unack", bin.address))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("req");
    assert_eq!(unack.status(), 200);
    assert_eq!(ack(None, Some("alice")).await, 401, "no proxy yet");

    write(
        ", teams: [payments]",
        "    proxy: {user_header: X-Forwarded-User, groups_header: X-Forwarded-Groups, trusted_proxies: [127.0.0.1/32], groups: {search-oncall: {scope: respond, teams: [search]}}}",
    );
    hangup(&bin);
    logged(&bin, "configuration reloaded", 1).await;
    assert_eq!(ack(Some(ONCALL), None).await, 403, "bound to payments by the reload");
    assert_eq!(ack(None, Some("alice")).await, 200, "the proxy added by the reload");

    // A reload naming a team Herald does not know is refused with the key path; the running teams stay.
    write(", teams: [paymnets]", "");
    hangup(&bin);
    logged(&bin, "configuration reload refused", 1).await;
    assert!(
        bin.logs().contains("server.auth.bearer_tokens[1].teams[0]"),
        "{}",
        bin.logs()
    );
    assert_eq!(ack(Some(ONCALL), None).await, 403);
    assert!(bin.terminate().await.success());
}
