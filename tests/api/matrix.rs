//! The Matrix receiver against a real Synapse on loopback (SQLite, no federation, rate limits raised): Herald, fed
//! Argo CD events, posts the first message of a group in a room, replies in its thread when the group changes and
//! edits it when everything recovered, all read back from the room as another client would.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::delivery::{failed_sync, recovered};
use crate::helpers::*;

const INSTALL: &str =
    "this test needs Synapse: `python3 -m pip install matrix-synapse==1.163.2` (scripts/test installs it)";
const SHARED_SECRET: &str = "herald-test-registration-secret";
const PASSWORD: &str = "herald-test-password";

/// A Synapse homeserver on 127.0.0.1 in a temporary directory, killed on drop.
struct Synapse {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
    client: reqwest::Client,
}

/// Synapse's settings: one client listener on loopback, SQLite, registration by shared secret only, no key
/// servers and no federation, and rate limits far above what the test sends.
fn homeserver_yaml(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        r#"server_name: localhost
pid_file: {d}/homeserver.pid
listeners:
  - {{port: {port}, bind_addresses: ["127.0.0.1"], type: http, tls: false, resources: [{{names: [client], compress: false}}]}}
database: {{name: sqlite3, args: {{database: {d}/homeserver.db}}}}
media_store_path: {d}/media
signing_key_path: {d}/signing.key
registration_shared_secret: {SHARED_SECRET}
report_stats: false
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
rc_message: {{per_second: 1000, burst_count: 1000}}
rc_registration: {{per_second: 1000, burst_count: 1000}}
rc_login:
  address: {{per_second: 1000, burst_count: 1000}}
  account: {{per_second: 1000, burst_count: 1000}}
  failed_attempts: {{per_second: 1000, burst_count: 1000}}
"#
    )
}

/// Runs `python3 -m <module> args…` to completion; panics with its output when it fails.
fn python(module: &str, args: &[&str]) {
    let mut cmd = Command::new("python3");
    cmd.arg("-m").arg(module).args(args);
    run_to_completion(&format!("python3 -m {module}"), &mut cmd, INSTALL);
}

impl Synapse {
    async fn start() -> Self {
        let installed = Command::new("python3")
            .args(["-c", "import synapse"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(installed, "{INSTALL}");
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let config = dir.path().join("homeserver.yaml");
        std::fs::write(&config, homeserver_yaml(dir.path(), port)).expect("write the config");
        let config = config.display().to_string();
        python("synapse.app.homeserver", &["--config-path", &config, "--generate-keys"]);
        let mut homeserver = Command::new("python3");
        homeserver.args(["-m", "synapse.app.homeserver", "--config-path", &config]);
        let child = spawn_logged("Synapse", &mut homeserver, &dir.path().join("synapse.log"), INSTALL);
        let mut synapse = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
            client: reqwest::Client::new(),
        };
        synapse.wait_until_ready().await;
        synapse
    }

    async fn wait_until_ready(&mut self) {
        let versions = format!("{}/_matrix/client/versions", self.url);
        let (client, log) = (self.client.clone(), self.dir.path().join("synapse.log"));
        let log = || std::fs::read_to_string(&log).unwrap_or_default();
        wait_until_serving(
            "Synapse",
            &mut self.child,
            Duration::from_secs(60),
            || client.get(&versions),
            log,
        )
        .await;
    }

    /// `/_matrix/client/v3/<segments…>` on this server, each segment percent-encoded.
    fn api(&self, segments: &[&str]) -> reqwest::Url {
        let mut url = reqwest::Url::parse(&self.url).expect("url");
        url.path_segments_mut()
            .expect("a base")
            .extend(["_matrix", "client", "v3"])
            .extend(segments);
        url
    }

    /// Registers `user` with the shared secret and logs it in: its access token.
    async fn user(&self, user: &str) -> String {
        python(
            "synapse._scripts.register_new_matrix_user",
            &["-u", user, "-p", PASSWORD, "--no-admin", "-k", SHARED_SECRET, &self.url],
        );
        let login = json!({"type": "m.login.password", "identifier": {"type": "m.id.user", "user": user},
                           "password": PASSWORD});
        let answer = succeeds("Synapse", self.client.post(self.api(&["login"])).json(&login)).await;
        answer["access_token"].as_str().expect("an access token").to_string()
    }

    async fn create_room(&self, token: &str) -> String {
        let body = json!({"name": "herald-test", "preset": "private_chat"});
        let create = self
            .client
            .post(self.api(&["createRoom"]))
            .bearer_auth(token)
            .json(&body);
        let answer = succeeds("Synapse", create).await;
        answer["room_id"].as_str().expect("a room id").to_string()
    }

    /// The room's `m.room.message` events, oldest first.
    async fn messages(&self, token: &str, room: &str) -> Vec<Value> {
        let mut url = self.api(&["rooms", room, "messages"]);
        url.query_pairs_mut()
            .append_pair("dir", "b")
            .append_pair("limit", "100");
        let answer = succeeds("Synapse", self.client.get(url).bearer_auth(token)).await;
        let mut events: Vec<Value> = answer["chunk"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e["type"] == "m.room.message")
            .collect();
        events.reverse();
        events
    }

    /// Waits until the room holds at least `n` messages; a failure shows what it holds.
    async fn wait_for_messages(&self, token: &str, room: &str, n: usize) -> Vec<Value> {
        let seen = eventually(Duration::from_secs(20), || async {
            let seen = self.messages(token, room).await;
            (seen.len() >= n).then_some(seen)
        })
        .await;
        match seen {
            Some(seen) => seen,
            None => panic!(
                "{n} messages expected in the room, got {:#?}",
                self.messages(token, room).await
            ),
        }
    }
}

impl Drop for Synapse {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_real_synapse_shows_the_first_message_the_threaded_update_and_the_edit_on_resolve() {
    let synapse = Synapse::start().await;
    let token = synapse.user("herald").await;
    let room = synapse.create_room(&token).await;
    let app = TestApp::spawn(&format!(
        r#"
receivers:
  - {{name: room, rate_limit_per_second: 20, matrix: {{homeserver: "{}", room_id: "{room}", access_token: "{token}"}}}}
teams: {{payments: {{receivers: [room]}}}}
rules: {{sync_failed: {{for: 0s}}, out_of_sync: {{enabled: false}}}}
grouping: {{group_wait: 0s, group_interval: 1s}}
"#,
        synapse.url
    ))
    .await;

    assert_eq!(
        app.post(failed_sync("pay-api", "2026-01-01T00:00:00Z")).await.status(),
        202
    );
    synapse.wait_for_messages(&token, &room, 1).await;
    assert_eq!(
        app.post(failed_sync("pay-web", "2026-01-01T00:01:00Z")).await.status(),
        202
    );
    synapse.wait_for_messages(&token, &room, 2).await;
    for name in ["pay-api", "pay-web"] {
        assert_eq!(app.post(recovered(name, "2026-01-01T00:05:00Z")).await.status(), 202);
    }
    synapse.wait_for_messages(&token, &room, 3).await;
    app.settle().await;
    let messages = synapse.messages(&token, &room).await;

    assert_eq!(messages.len(), 3, "no extra messages: {messages:#?}");
    let (first, update, resolve) = (&messages[0], &messages[1], &messages[2]);
    let first_id = first["event_id"].as_str().expect("an event id");
    let content = &first["content"];
    assert_eq!(content.get("m.relates_to"), None, "{first}");
    assert!(
        content["body"].as_str().unwrap_or_default().contains("FIRING"),
        "{first}"
    );
    assert!(
        content["body"].as_str().unwrap_or_default().contains("pay-api"),
        "{first}"
    );
    assert_eq!(content["format"], "org.matrix.custom.html", "{first}");

    let relation = &update["content"]["m.relates_to"];
    assert_eq!(relation["rel_type"], "m.thread", "{update}");
    assert_eq!(relation["event_id"], first_id, "{update}");
    assert_eq!(relation["m.in_reply_to"]["event_id"], first_id, "{update}");
    assert!(
        update["content"]["body"]
            .as_str()
            .unwrap_or_default()
            .contains("pay-web"),
        "{update}"
    );

    let relation = &resolve["content"]["m.relates_to"];
    assert_eq!(relation["rel_type"], "m.replace", "{resolve}");
    assert_eq!(relation["event_id"], first_id, "{resolve}");
    let new_body = resolve["content"]["m.new_content"]["body"].as_str().unwrap_or_default();
    assert!(new_body.starts_with("✅ RESOLVED"), "{resolve}");
    assert!(
        resolve["content"]["body"]
            .as_str()
            .unwrap_or_default()
            .starts_with("* ✅ RESOLVED"),
        "{resolve}"
    );
    assert_eq!(app.get_json("/v1/outbox?state=done").await["count"], 3);
    app.stop().await;
}

#[tokio::test]
async fn a_user_outside_the_room_is_refused_for_good_and_its_token_stays_out_of_the_failure() {
    let synapse = Synapse::start().await;
    let owner = synapse.user("owner").await;
    let room = synapse.create_room(&owner).await;
    let outsider = synapse.user("outsider").await;
    let settings = herald::configuration::Settings::from_yaml(&format!(
        r#"receivers: [{{name: room, matrix: {{homeserver: "{}", room_id: "{room}", access_token: "{outsider}"}}}}]"#,
        synapse.url
    ))
    .expect("valid settings");
    let shared = herald::receivers::Shared::new(
        std::sync::Arc::new(settings),
        std::sync::Arc::new(herald::clock::SystemClock),
    );
    let receiver = herald::receivers::build(&shared.settings.receivers[0], &shared).expect("builds");

    let e = receiver
        .deliver(&herald::domain::Notification::test("room", chrono::Utc::now()), None)
        .await
        .expect_err("an outsider cannot post");

    let herald::receivers::DeliveryError::Permanent { reason } = &e else {
        panic!("not being in the room is permanent: {e:?}");
    };
    assert!(reason.contains("HTTP 403 M_FORBIDDEN"), "{reason}");
    assert!(!format!("{e} {e:?}").contains(&outsider), "the token leaked: {e:?}");
    assert!(synapse.messages(&owner, &room).await.is_empty(), "nothing was posted");
}
