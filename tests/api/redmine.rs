//! The Redmine receiver against a real Redmine on loopback: Debian's `redmine` 5.0 with SQLite, one private instance
//! per test (its own database, configuration, log and files in a temporary directory, served by WEBrick). Herald,
//! fed Argo CD events, opens one issue per incident, adds notes to it, closes it on recovery and finds it again after
//! forgetting it; all of it read back through Redmine's REST API as any client would.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald::clock::{Clock, ManualClock};
use herald::receivers::redmine::subject_tag;
use serde_json::{Value, json};
use sqlx::{ConnectOptions, Connection};

use crate::delivery::{failed_sync, recovered};
use crate::helpers::*;

const INSTALL: &str =
    "this test needs Debian's Redmine: `apt-get install redmine redmine-sqlite` (scripts/test installs it)";
/// Where Debian's package puts Redmine.
const REDMINE: &str = "/usr/share/redmine";
/// The database Debian's package created for its default instance: migrated, with Redmine's default data (trackers,
/// statuses, roles, workflows and an `admin`). A copy starts an instance at once; migrating one takes about 10 s.
const DEBIAN_DATABASE: &str = "/var/lib/dbconfig-common/sqlite3/redmine/instances/default/redmine_default";
/// From Redmine's default data: the tracker Herald is told to use (not the project's default, Bug) and the status
/// it closes with.
const SUPPORT: u64 = 3;
const CLOSED: u64 = 5;
/// When the failed sync of every test started: the same event, the same incident.
const STARTED: &str = "2026-01-01T00:00:00Z";

/// A Redmine on 127.0.0.1 whose instance lives in a temporary directory, killed on drop.
struct Redmine {
    child: Child,
    url: String,
    /// The admin's API key: what the test sets up and reads back with.
    key: String,
    /// The issue custom field (a string, used as a filter) that can hold the fingerprint.
    field: u64,
    dir: tempfile::TempDir,
    client: reqwest::Client,
}

/// Debian's Redmine keeps an instance under `instances/<name>` of its tree (`config/multitenancy_environment.rb`):
/// its `database.yml` and secret, its log, tmp and attachments. A name that climbs to `/` (extra `..` stay there)
/// and comes down into the temporary directory makes that directory a private instance, without writing outside it.
fn instance_name(dir: &Path) -> String {
    let inside = dir.strip_prefix("/").expect("an absolute temporary directory");
    format!("{}{}", "../".repeat(32), inside.display())
}

/// A command in Redmine's tree on the instance in `dir`. Redmine's Gemfile has no web server and names the SQLite
/// adapter only when the default instance uses it, so the instance's own Gemfile adds both.
fn in_instance(dir: &Path, program: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(REDMINE)
        .env("REDMINE_INSTANCE", instance_name(dir))
        .env("BUNDLE_GEMFILE", dir.join("Gemfile"))
        .env("RAILS_ENV", "production")
        .env("REDMINE_LANG", "en")
        // Either would take the place of the instance's database.yml.
        .env_remove("X_DEBIAN_SITEID")
        .env_remove("DATABASE_URL");
    cmd
}

fn write(path: PathBuf, text: &str) {
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The instance's files: its database settings, secret, attachments directory and Gemfile.
fn write_instance(dir: &Path) {
    for sub in ["config", "log", "tmp", "files"] {
        std::fs::create_dir_all(dir.join(sub)).expect("an instance directory");
    }
    let d = dir.display();
    write(
        dir.join("config/database.yml"),
        &format!("production:\n  adapter: sqlite3\n  database: {d}/redmine.db\n"),
    );
    write(dir.join("config/secret_key.txt"), &random_hex());
    write(
        dir.join("config/configuration.yml"),
        &format!("default:\n  attachments_storage_path: {d}/files\n"),
    );
    write(
        dir.join("Gemfile"),
        "eval_gemfile '/usr/share/redmine/Gemfile'\n\
         gem 'sqlite3' unless dependencies.any? { |d| d.name == 'sqlite3' }\n\
         gem 'webrick'\n",
    );
}

/// The instance's database: a copy of Debian's when it can be read (as root), else migrated here. The default data
/// is loaded by a second rake: in the migrating one, Rails still knows the tables as they were before.
fn create_database(dir: &Path) {
    if std::fs::copy(DEBIAN_DATABASE, dir.join("redmine.db")).is_ok() {
        return;
    }
    for task in ["db:migrate", "redmine:load_default_data"] {
        run_to_completion(&format!("rake {task}"), in_instance(dir, "rake").arg(task), INSTALL);
    }
}

/// What the REST API cannot set itself, written before Redmine starts: the API switched on, CommonMark (what Herald
/// writes), an API key for `admin`, and the fingerprint's custom field (for every tracker and project). Answers the
/// field's id.
async fn prepare_database(db: &Path, key: &str) -> u64 {
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .connect()
        .await
        .expect("open Redmine's database");
    // `rake redmine:load_default_data` says it failed, but exits 0.
    let trackers: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM trackers")
        .fetch_one(&mut conn)
        .await
        .expect("count the trackers");
    assert!(trackers >= 3, "Redmine's default data is not loaded");
    let statements = [
        "DELETE FROM settings WHERE name IN ('rest_api_enabled', 'text_formatting')",
        "INSERT INTO settings (name, value, updated_on) VALUES \
         ('rest_api_enabled', '1', CURRENT_TIMESTAMP), ('text_formatting', 'common_mark', CURRENT_TIMESTAMP)",
    ];
    for sql in statements {
        sqlx::query(sql).execute(&mut conn).await.expect(sql);
    }
    let token = "INSERT INTO tokens (user_id, action, value, created_on, updated_on) \
                 SELECT id, 'api', ?, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP FROM users WHERE login = 'admin'";
    let added = sqlx::query(token).bind(key).execute(&mut conn).await.expect(token);
    assert_eq!(added.rows_affected(), 1, "Redmine's database has an admin");
    let field = "INSERT INTO custom_fields (type, name, field_format, is_for_all, is_filter, position, searchable, \
                 editable, visible, multiple, format_store) VALUES ('IssueCustomField', 'Herald fingerprint', 'string', \
                 1, 1, 1, 0, 1, 1, 0, ?)";
    let store = "--- !ruby/hash:ActiveSupport::HashWithIndifferentAccess\ntext_formatting: ''\nurl_pattern: ''\n";
    let id = sqlx::query(field)
        .bind(store)
        .execute(&mut conn)
        .await
        .expect(field)
        .last_insert_rowid();
    let trackers = "INSERT INTO custom_fields_trackers (custom_field_id, tracker_id) SELECT ?, id FROM trackers";
    sqlx::query(trackers).bind(id).execute(&mut conn).await.expect(trackers);
    conn.close().await.expect("close Redmine's database");
    u64::try_from(id).expect("a positive id")
}

fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 20]>())
}

impl Redmine {
    async fn start() -> Self {
        let started = Instant::now();
        assert!(Path::new(REDMINE).join("config.ru").exists(), "{INSTALL}");
        let dir = tempfile::Builder::new()
            .prefix("herald-redmine")
            .tempdir()
            .expect("tempdir");
        write_instance(dir.path());
        create_database(dir.path());
        let key = random_hex();
        let field = prepare_database(&dir.path().join("redmine.db"), &key).await;
        let port = free_port();
        let mut rackup = in_instance(dir.path(), "rackup");
        let port_arg = port.to_string();
        rackup.args(["-E", "production", "-o", "127.0.0.1", "-p", &port_arg, "config.ru"]);
        let child = spawn_logged("Redmine", &mut rackup, &dir.path().join("rackup.log"), INSTALL);
        let mut redmine = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            key,
            field,
            dir,
            client: reqwest::Client::new(),
        };
        redmine.wait_until_ready().await;
        eprintln!("Redmine ready after {:.1} s", started.elapsed().as_secs_f64());
        redmine
    }

    /// Until the admin's key is accepted: Rails has booted and the API is on.
    async fn wait_until_ready(&mut self) {
        let (client, dir) = (self.client.clone(), self.dir.path().to_path_buf());
        let current = format!("{}/users/current.json", self.url);
        let key = self.key.clone();
        let probe = || client.get(&current).header("X-Redmine-API-Key", &key);
        let log = || log_tail(&dir);
        wait_until_serving("Redmine", &mut self.child, Duration::from_secs(120), probe, log).await;
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client
            .get(format!("{}{path}", self.url))
            .header("X-Redmine-API-Key", &self.key)
    }

    fn post(&self, path: &str, body: &Value) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}{path}", self.url))
            .header("X-Redmine-API-Key", &self.key)
            .json(body)
    }

    /// A public project with the issue tracking module and the Bug and Support trackers; answers its id.
    async fn create_project(&self, identifier: &str) -> u64 {
        let project = json!({"project": {"name": identifier, "identifier": identifier, "is_public": true,
                             "tracker_ids": [1, SUPPORT], "enabled_module_names": ["issue_tracking"]}});
        let answer = succeeds("Redmine", self.post("/projects.json", &project)).await;
        answer["project"]["id"].as_u64().expect("a project id")
    }

    /// An issue someone filed by hand; answers its id.
    async fn create_issue(&self, fields: Value) -> u64 {
        let answer = succeeds("Redmine", self.post("/issues.json", &json!({ "issue": fields }))).await;
        answer["issue"]["id"].as_u64().expect("an issue id")
    }

    /// Every issue of the project, open or closed, oldest first.
    async fn issues(&self, project: &str) -> Vec<Value> {
        let path = format!("/issues.json?project_id={project}&status_id=*&sort=id&limit=100");
        let answer = succeeds("Redmine", self.get(&path)).await;
        answer["issues"].as_array().cloned().unwrap_or_default()
    }

    /// One issue with its journals (the notes and changes, oldest first).
    async fn issue(&self, id: u64) -> Value {
        let answer = succeeds("Redmine", self.get(&format!("/issues/{id}.json?include=journals"))).await;
        answer["issue"].clone()
    }

    /// Waits until the project holds `n` issues; a failure shows what it holds.
    async fn wait_for_issues(&self, project: &str, n: usize) -> Vec<Value> {
        let found = eventually(Duration::from_secs(30), || async {
            Some(self.issues(project).await).filter(|issues| issues.len() >= n)
        });
        match found.await {
            Some(issues) => issues,
            None => panic!("{n} issues expected, got {:#?}", self.issues(project).await),
        }
    }

    /// Waits until the issue satisfies `done`; a failure shows the issue.
    async fn wait_for_issue(&self, id: u64, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let found = eventually(Duration::from_secs(30), || async {
            Some(self.issue(id).await).filter(&done)
        });
        match found.await {
            Some(issue) => issue,
            None => panic!("issue #{id}: {what} expected, got {:#}", self.issue(id).await),
        }
    }

    /// Herald's settings: a `redmine` receiver on `project` with `key` (plus `extra` settings of the receiver), the
    /// payments team's only receiver; failed syncs fire at once, a still-firing incident repeats hourly.
    fn herald_yaml(&self, key: &str, project: &str, extra: &str) -> String {
        format!(
            r#"
receivers:
  - {{name: tickets, redmine: {{url: "{url}", api_key: "{key}", project_id: {project}, tracker_id: {SUPPORT}, closed_status_id: {CLOSED}{extra}}}}}
teams: {{payments: {{receivers: [tickets]}}}}
rules: {{sync_failed: {{for: 0s}}, out_of_sync: {{enabled: false}}}}
grouping: {{group_wait: 0s, group_interval: 1s, repeat_interval: 1h}}
"#,
            url = self.url
        )
    }
}

/// The end of WEBrick's output and of Rails' log, of the instance in `dir`.
fn log_tail(dir: &Path) -> String {
    let tail = |name: &str| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let start = text.len().saturating_sub(4000);
        text.get(start..).unwrap_or_default().to_string()
    };
    format!("{}\n{}", tail("rackup.log"), tail("log/production.log"))
}

impl Drop for Redmine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn journals(issue: &Value) -> Vec<Value> {
    issue["journals"].as_array().cloned().unwrap_or_default()
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// `body` as Argo CD sends it at `clock`'s time.
fn at(clock: &ManualClock, body: String) -> String {
    let mut v: Value = serde_json::from_str(&body).expect("json");
    v["timestamp"] = json!(clock.now().to_rfc3339());
    v.to_string()
}

/// The fingerprint of the incident of Herald's first delivery.
async fn delivered_fingerprint(app: &TestApp) -> String {
    let done = eventually(Duration::from_secs(30), || async {
        let v = app.get_json("/v1/outbox?state=done").await;
        v["items"]
            .as_array()
            .and_then(|items| items.last())
            .and_then(|item| item["incidents"][0].as_str())
            .map(str::to_string)
    })
    .await;
    done.expect("a delivery done")
}

/// Waits until Herald has `n` deliveries done.
async fn wait_for_done(app: &TestApp, n: u64) {
    let done = eventually(Duration::from_secs(30), || async {
        (app.get_json("/v1/outbox?state=done").await["count"] == n).then_some(())
    })
    .await;
    done.unwrap_or_else(|| panic!("{n} deliveries done expected"));
}

#[tokio::test]
async fn a_failed_sync_opens_one_redmine_issue_an_hourly_repeat_adds_a_note_and_the_recovery_closes_it() {
    let redmine = Redmine::start().await;
    let project = redmine.create_project("payments").await;
    let clock = ManualClock::new(chrono::Utc::now());
    let dir = Arc::new(tempfile::tempdir().expect("tempdir"));
    let yaml = redmine.herald_yaml(&redmine.key, "payments", "");
    let app = TestApp::spawn_in(dir, &yaml, Arc::new(clock.clone())).await;

    let fired = app.post(at(&clock, failed_sync("pay-api", STARTED))).await;
    assert_eq!(fired.status(), 202);
    let issues = redmine.wait_for_issues("payments", 1).await;
    let fingerprint = delivered_fingerprint(&app).await;
    let issue = &issues[0];
    let id = issue["id"].as_u64().expect("an issue id");
    assert_eq!(issue["project"]["id"], project, "{issue:#}");
    assert_eq!(issue["tracker"]["id"], SUPPORT, "{issue:#}");
    assert_eq!(issue["status"]["is_closed"], false, "{issue:#}");
    let subject = text(issue, "subject");
    assert!(subject.contains("pay-api"), "{subject}");
    assert!(
        subject.ends_with(&format!(" {}", subject_tag(&fingerprint))),
        "{subject}"
    );
    let description = text(issue, "description");
    assert!(description.contains("pay-api"), "{description}");
    assert!(
        description.contains("one or more objects failed to apply"),
        "{description}"
    );

    // An hour on, still failing: Herald's repeat is a note, the status unchanged.
    clock.advance(Duration::from_secs(3601));
    let noted = redmine.wait_for_issue(id, "a note", |i| !journals(i).is_empty()).await;
    let note = &journals(&noted)[0];
    assert!(text(note, "notes").contains("pay-api"), "{note:#}");
    assert_eq!(note["details"], json!([]), "a note changes nothing: {note:#}");

    let recovery = app.post(at(&clock, recovered("pay-api", STARTED))).await;
    assert_eq!(recovery.status(), 202);
    clock.advance(Duration::from_secs(2));
    let closed = redmine
        .wait_for_issue(id, "closed", |i| i["status"]["id"] == CLOSED)
        .await;
    assert_eq!(closed["status"]["is_closed"], true, "{closed:#}");
    let closing = journals(&closed).last().cloned().unwrap_or_default();
    assert!(text(&closing, "notes").contains("RESOLVED"), "{closing:#}");
    assert_eq!(
        closing["details"],
        json!([{"property": "attr", "name": "status_id", "old_value": "1", "new_value": CLOSED.to_string()}]),
        "{closing:#}"
    );

    wait_for_done(&app, 3).await;
    app.settle().await;
    let issues = redmine.issues("payments").await;
    assert_eq!(issues.len(), 1, "one issue for the incident: {issues:#?}");
    assert_eq!(
        journals(&redmine.issue(id).await).len(),
        2,
        "a note and the closing, nothing more"
    );
    app.stop().await;
}

/// A Herald that lost its database (a crash between "created" and "remembered" leaves it the same way) looks before
/// it creates: by the subject tag, or by the custom field when it has one. Each project also holds a newer issue
/// someone filed by hand about the same application, which Herald must leave alone; in the custom field's project
/// that one even carries the tag in its subject, so only the field tells them apart.
#[tokio::test]
async fn a_herald_that_forgot_its_issue_finds_it_by_subject_tag_or_custom_field_and_opens_no_second_one() {
    let redmine = Redmine::start().await;
    let with_field = format!(", custom_field_id: {}", redmine.field);
    for (project, extra) in [("tagged", ""), ("fielded", with_field.as_str())] {
        let project_id = redmine.create_project(project).await;
        let yaml = redmine.herald_yaml(&redmine.key, project, extra);
        let first = TestApp::spawn(&yaml).await;
        assert_eq!(first.post(failed_sync("pay-api", STARTED)).await.status(), 202);
        let ours = redmine.wait_for_issues(project, 1).await[0]["id"]
            .as_u64()
            .expect("an issue id");
        let fingerprint = delivered_fingerprint(&first).await;
        drop(first.stop().await); // and its database with it
        let hand_made = match extra {
            "" => "pay-api fails to sync (filed by hand)".to_string(),
            _ => format!("pay-api, copied by hand {}", subject_tag(&fingerprint)),
        };
        let decoy = redmine
            .create_issue(
                json!({"project_id": project_id, "tracker_id": SUPPORT, "subject": hand_made,
                                 "custom_fields": [{"id": redmine.field, "value": "someone else's"}]}),
            )
            .await;

        let second = TestApp::spawn(&yaml).await;
        assert_eq!(second.post(failed_sync("pay-api", STARTED)).await.status(), 202);
        let noted = redmine
            .wait_for_issue(ours, "a note", |i| !journals(i).is_empty())
            .await;
        assert!(text(&journals(&noted)[0], "notes").contains("pay-api"), "{noted:#}");
        assert_eq!(second.post(recovered("pay-api", STARTED)).await.status(), 202);
        redmine
            .wait_for_issue(ours, "closed", |i| i["status"]["id"] == CLOSED)
            .await;
        wait_for_done(&second, 2).await;
        second.settle().await;

        let issues = redmine.issues(project).await;
        let ids: Vec<u64> = issues.iter().filter_map(|i| i["id"].as_u64()).collect();
        assert_eq!(ids, [ours, decoy], "{project}: no second issue: {issues:#?}");
        if !extra.is_empty() {
            let field = &redmine.issue(ours).await["custom_fields"][0];
            assert_eq!(field["value"], fingerprint.as_str(), "{field}");
        }
        let untouched = redmine.issue(decoy).await;
        assert!(journals(&untouched).is_empty(), "{project}: {untouched:#}");
        assert_eq!(untouched["status"]["is_closed"], false, "{project}: {untouched:#}");
        second.stop().await;
    }
}

#[tokio::test]
async fn a_wrong_api_key_is_refused_for_good_creates_nothing_and_stays_out_of_the_failure() {
    let redmine = Redmine::start().await;
    redmine.create_project("payments").await;
    let wrong = random_hex();
    let app = TestApp::spawn(&redmine.herald_yaml(&wrong, "payments", "")).await;

    assert_eq!(app.post(failed_sync("pay-api", STARTED)).await.status(), 202);
    let dead = eventually(Duration::from_secs(30), || async {
        let v = app.get_json("/v1/outbox?state=dead").await;
        (v["count"] == 1).then_some(v)
    })
    .await
    .expect("dead after Redmine refused the key");

    let row = &dead["items"][0];
    let error = text(row, "last_error");
    assert!(error.contains("redmine create issue: HTTP 401"), "{row:#}");
    assert!(!dead.to_string().contains(&wrong), "the key leaked: {dead:#}");
    assert_eq!(row["attempts"], 1, "a refused key is not retried: {row:#}");
    let issues = redmine.issues("payments").await;
    assert!(issues.is_empty(), "{issues:#?}");
    app.stop().await;
}
