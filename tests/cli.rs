//! The command line as a user runs it: check-config, route, replay, send-test.

use std::path::Path;
use std::process::Command;

fn herald(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_herald"));
    cmd.args(args).env("NO_COLOR", "1").env_remove("RUST_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run herald");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/argocd")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.display().to_string()
}

#[test]
fn the_shipped_config_and_the_examples_are_valid() {
    let (code, out, err) = herald(&["check-config", "config/herald.yaml"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("OK"));
    for entry in std::fs::read_dir("config/examples").expect("examples") {
        let p = entry.expect("entry").path();
        let (code, out, err) = herald(&["check-config", &p.display().to_string()], &[]);
        assert_eq!(code, 0, "{}: {out}{err}", p.display());
    }
}

#[test]
fn config_errors_name_the_key_path() {
    let dir = tempfile::tempdir().expect("tmp");
    let cases = [
        ("teams: {pay: {receivers: [nobody]}}", "teams.pay.receivers[0]"),
        (
            "routes: [{namespace: 'prod-[', receivers: [console]}]",
            "routes[0].namespace",
        ),
        ("rules: {degraded: {for: -5m}}", "rules.degraded.for"),
        ("rules: {degraded: {for: soon}}", "rules.degraded.for"),
        ("server: {max_body_bytes: -1}", "server.max_body_bytes"),
        (
            "receivers: [{name: m, email: {to: [not-an-address]}}]",
            "receivers[0].email",
        ),
        (
            "receivers: [{name: j, jira: {url: 'ftp://x', project: P, token: t, user: u}}]",
            "receivers[0].jira.url",
        ),
        ("grouping: {group_wait: 5}", "grouping.group_wait"),
        ("server: [1, 2]", "server"),
        ("{{{", "cannot read configuration"),
    ];
    for (i, (yaml, path)) in cases.iter().enumerate() {
        let f = write(dir.path(), &format!("c{i}.yaml"), yaml);
        let (code, out, err) = herald(&["check-config", &f], &[]);
        assert_eq!(code, 2, "{yaml}: {out}{err}");
        assert!(err.contains(path), "{yaml}: expected {path} in {err}");
    }
    let (code, _, err) = herald(&["check-config", "/nonexistent/herald.yaml"], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("no such file"), "{err}");
}

#[test]
fn environment_variables_override_keys() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = write(dir.path(), "c.yaml", "server: {listen: '127.0.0.1:8080'}");
    let (code, _, err) = herald(&["check-config", &f], &[("HERALD__SERVER__LISTEN", "not-an-address")]);
    assert_eq!(code, 2);
    assert!(err.contains("server.listen"), "{err}");
    let (code, out, err) = herald(&["check-config", &f], &[("HERALD__GROUPING__GROUP_BY", "team,app")]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = herald(&["check-config", &f], &[("HERALD__GROUPING__GROUP_BY", "team,colour")]);
    assert_eq!(code, 2);
    assert!(err.contains("grouping.group_by[1]"), "{err}");
}

#[test]
fn route_explains_team_incidents_and_receivers() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = write(
        dir.path(),
        "c.yaml",
        r#"
receivers: [{name: console, console: {}}, {name: plat-chat, console: {}}, {name: pager, console: {}}]
ownership: {projects: {default: platform}}
teams: {platform: {receivers: [plat-chat], escalation: [{after: 1h, receivers: [pager]}]}}
routes: [{kind: prune_pending, receivers: [pager], continue: true}]
"#,
    );
    let app = fixtures().join("captured/021_remove_podinfo_1_1.json");
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &app.display().to_string()], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("application: argocd/aaaaaaaaa"), "{out}");
    assert!(out.contains("owning team: platform"), "{out}");
    assert!(out.contains("incident:    out_of_sync"), "{out}");
    assert!(out.contains("fires after 1h"), "{out}");
    assert!(out.contains("incident:    prune_pending"), "{out}");
    assert!(out.contains("routes[0]"), "{out}");
    assert!(out.contains("receivers: pager"), "{out}");
    assert!(out.contains("receivers: plat-chat"), "{out}");
    assert!(out.contains("escalation step 1: after 1h → pager"), "{out}");
    let (code, _, err) = herald(&["route", "--config", &cfg, "--app", "/nonexistent.json"], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("nonexistent"), "{err}");
}

#[test]
fn replay_with_the_recorded_clock_shows_transitions_incidents_and_notifications() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = write(
        dir.path(),
        "c.yaml",
        "rules: {sync_unknown: {for: 5m}}\ngrouping: {group_wait: 0s}\n",
    );
    let mut args: Vec<String> = vec![
        "replay".into(),
        "--config".into(),
        cfg,
        "--clock".into(),
        "recorded".into(),
    ];
    let mut files: Vec<_> = std::fs::read_dir(fixtures().join("captured"))
        .expect("dir")
        .map(|e| e.expect("e").path().display().to_string())
        .collect();
    files.sort();
    args.extend(files);
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let (code, out, err) = herald(&refs, &[]);
    assert_eq!(code, 0, "{err}");
    // Time order, not file order: 003 (16:06Z) comes before 000 (16:13Z), so 000 is the duplicate.
    assert!(out.contains("003.json  argocd/aaaaaaa: changed"), "{out}");
    assert!(
        out.contains("000_cli_template.json  argocd/aaaaaaa: duplicate"),
        "{out}"
    );
    assert!(out.contains("sync: Synced → OutOfSync"), "{out}");
    assert!(out.contains("incident out_of_sync"), "{out}");
    // The Unknown apps of 16:06 have been Unknown for 5 minutes at 16:11: that is where the rule fires.
    assert!(
        out.contains("2025-10-02T16:11:23Z would notify console (open): sync status Unknown on 2 Applications"),
        "{out}"
    );
    assert!(
        out.contains("would notify console (open): aaaaaaa: Missing for"),
        "{out}"
    );
    assert!(!out.contains("sync_unknown on"), "no internal names in titles: {out}");
}

#[test]
fn replay_renders_what_a_receiver_would_show() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = write(dir.path(), "c.yaml", "grouping: {group_wait: 0s}\n");
    let body = fixtures()
        .join("captured/021_remove_podinfo_1_1.json")
        .display()
        .to_string();
    // Derived from 021: the same Application a little over an hour later, still OutOfSync with podinfo to prune.
    let mut later: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&body).expect("021")).expect("JSON");
    later["timestamp"] = "2025-10-02T18:02:00Z".into();
    let later = write(dir.path(), "later.json", &later.to_string());
    let args = [
        "replay", "--config", &cfg, "--clock", "recorded", "--render", "slack", &body, &later,
    ];

    let (code, out, err) = herald(&args, &[]);

    assert_eq!(code, 0, "{err}");
    assert!(out.contains("---- slack json ----"), "{out}");
    // Fired the moment the hour was up (group_wait 0s): one message, a line per problem.
    assert!(
        out.contains("aaaaaaaaa: OutOfSync for 1 h; 1 resource waiting to be pruned for 1 h [2 incident(s)]"),
        "{out}"
    );
    assert!(out.contains("--resource argoproj.io:Application:podinfo"), "{out}");
    let (code, _, err) = herald(&["replay", "--config", &cfg, "--render", "fax", &body], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("not a receiver type"), "{err}");
}

#[test]
fn send_test_reports_success_and_failure() {
    let dir = tempfile::tempdir().expect("tmp");
    let sink = dir.path().join("out.jsonl");
    let cfg = write(
        dir.path(),
        "c.yaml",
        &format!(
            "receivers: [{{name: c, console: {{file: '{}'}}}}, {{name: down, webhook: {{url: 'http://127.0.0.1:9/hook'}}}}]",
            sink.display()
        ),
    );
    let (code, out, _) = herald(&["send-test", "--config", &cfg, "--receiver", "c"], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("c: delivered"), "{out}");
    let line = std::fs::read_to_string(&sink).expect("sink");
    assert!(line.contains("[TEST]"), "{line}");
    let (code, out, _) = herald(&["send-test", "--config", &cfg, "--receiver", "down"], &[]);
    assert_eq!(code, 1);
    assert!(out.contains("down: FAILED"), "{out}");
    let (code, _, err) = herald(&["send-test", "--config", &cfg, "--receiver", "nope"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("configured: c, down"), "{err}");
}
