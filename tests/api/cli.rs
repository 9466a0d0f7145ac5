//! The command line as a user runs it: check-config, route, replay, send-test, digest.

use std::path::Path;
use std::process::Command;

use crate::argocd_bodies::{bare_envelope, envelope_from};
use crate::fixtures::{captured, fixture, fixture_json, fixture_path};

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

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.display().to_string()
}

/// `herald --version` says the Cargo version, the one `herald_build_info` carries (tests/api/metrics.rs), and the
/// changelog has a section for it: an upgrade can be matched with what it says to do.
#[test]
fn the_version_is_the_cargo_version_and_the_changelog_has_its_section() {
    let version = env!("CARGO_PKG_VERSION");
    let (code, out, err) = herald(&["--version"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("herald {version}"));
    let changelog = std::fs::read_to_string("CHANGELOG.md").expect("CHANGELOG.md");
    assert!(
        changelog.lines().any(|l| l.starts_with(&format!("## {version} "))),
        "CHANGELOG.md has no section `## {version} …`"
    );
}

#[test]
fn the_shipped_config_and_the_examples_are_valid() {
    for shipped in ["config/herald.yaml", "config/quickstart.yaml"] {
        let (code, out, err) = herald(&["check-config", shipped], &[]);
        assert_eq!(code, 0, "{shipped}: {out}{err}");
        assert!(out.contains("OK"));
    }
    for entry in std::fs::read_dir("config/examples").expect("examples") {
        let p = entry.expect("entry").path();
        let (code, out, err) = herald(&["check-config", &p.display().to_string()], &[]);
        assert_eq!(code, 0, "{}: {out}{err}", p.display());
    }
}

/// docs/configuration.md's "Several Argo CD instances" example is a configuration `check-config` accepts (with its
/// secret files present).
#[test]
fn the_several_instances_example_in_the_docs_is_valid() {
    let doc = std::fs::read_to_string("docs/configuration.md").expect("docs");
    let section = doc.split("## Several Argo CD instances").nth(1).expect("the section");
    let yaml = (section.split("```yaml\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("a yaml block");
    let dir = tempfile::tempdir().expect("tmp");
    let secrets = dir.path().join("secrets");
    std::fs::create_dir(&secrets).expect("dir");
    for name in [
        "argocd-token",
        "argocd-eu-token",
        "ingest-hub",
        "ingest-eu",
        "ingest-us",
    ] {
        std::fs::write(secrets.join(name), format!("{name}-0123456789abcdef\n")).expect("secret");
    }
    for name in ["payments-slack-webhook", "eu-platform-slack-webhook"] {
        std::fs::write(secrets.join(name), "https://hooks.slack.com/services/T0/B0/x\n").expect("secret");
    }
    let yaml = yaml.replace("/etc/herald/secrets", &secrets.display().to_string());
    let f = write(dir.path(), "instances.yaml", &yaml);
    let (code, out, err) = herald(&["check-config", &f], &[]);
    assert_eq!(code, 0, "{yaml}\n{out}{err}");
    assert!(out.contains("OK"), "{out}");
}

/// docs/configuration.md's "Deployments on GitHub and Grafana" example is a configuration `check-config` accepts;
/// with a route naming the commit-status receiver it is refused, saying where and why.
#[test]
fn the_deployments_example_in_the_docs_is_valid_and_its_receivers_take_no_route() {
    let doc = std::fs::read_to_string("docs/configuration.md").expect("docs");
    let section = doc
        .split("## Deployments on GitHub and Grafana")
        .nth(1)
        .expect("the section");
    let yaml = (section.split("```yaml\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("a yaml block");
    let dir = tempfile::tempdir().expect("tmp");
    let secrets = dir.path().join("secrets");
    std::fs::create_dir(&secrets).expect("dir");
    for (name, value) in [
        ("github-status-token", "github_pat_0123456789abcdef"),
        ("grafana-token", "glsa_0123456789abcdef"),
        ("payments-slack-webhook", "https://hooks.slack.com/services/T0/B0/x"),
    ] {
        std::fs::write(secrets.join(name), format!("{value}\n")).expect("secret");
    }
    let yaml = yaml.replace("/run/secrets", &secrets.display().to_string());
    let f = write(dir.path(), "deployments.yaml", &yaml);
    let (code, out, err) = herald(&["check-config", &f], &[]);
    assert_eq!(code, 0, "{yaml}\n{out}{err}");

    let routed = format!("{yaml}routes: [{{app: 'pay-*', receivers: [payments-slack, commits]}}]\n");
    let f = write(dir.path(), "routed.yaml", &routed);
    let (code, out, err) = herald(&["check-config", &f], &[]);
    assert_ne!(code, 0, "{out}{err}");
    let said = format!("{out}{err}");
    assert!(
        said.contains("routes[0].receivers[1]") && said.contains("takes no incidents"),
        "{said}"
    );
    assert!(
        !said.contains("github_pat_0123456789abcdef") && !said.contains("glsa_0123456789abcdef"),
        "{said}"
    );
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
            "receivers[\"m\"].email",
        ),
        (
            "receivers: [{name: j, jira: {url: 'ftp://x', project: P, token: t, user: u}}]",
            "receivers[\"j\"].jira.url",
        ),
        (
            "grouping: {group_wait: 5}",
            "grouping.group_wait: \"5\" is not a duration: 5 has no unit; write 5s, 5m or 5h",
        ),
        (
            "inhibit_rules: [{source_matchers: ['colour=red'], target_matchers: ['kind=out_of_sync']}]",
            "inhibit_rules[0].source_matchers[0]: \"colour=red\": unknown field \"colour\"",
        ),
        (
            "inhibit_rules: [{source_matchers: ['kind=~degr.*'], target_matchers: ['kind']}]",
            "inhibit_rules[0].source_matchers[0]: \"kind=~degr.*\": regular expressions",
        ),
        (
            "inhibit_rules: [{source_matchers: ['kind=degraded'], target_matchers: []}]",
            "inhibit_rules[0].target_matchers: must have at least one matcher",
        ),
        (
            "inhibit_rules: [{source_matchers: ['kind=degraded'], target_matchers: ['kind!=degraded'], equal: [size]}]",
            "inhibit_rules[0].equal[0]",
        ),
        ("inhibit_builtin: maybe", "inhibit_builtin"),
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
fn check_config_says_what_is_wrong_with_a_digest() {
    let dir = tempfile::tempdir().expect("tmp");
    let jira = "receivers: [{name: chat, console: {}}, {name: tickets, jira: {url: 'https://jira.example.com', project: P, token: t, user: u}}]";
    let cases = [
        (
            "teams: {pay: {receivers: [console], digest: {schedule: 'Mon-Fri 09:00', timezone: Europe/Atlantis}}}"
                .to_string(),
            "teams.pay.digest.timezone",
            "unknown time zone \"Europe/Atlantis\"",
        ),
        (
            "teams: {pay: {receivers: [console], digest: {schedule: 'Mon-Fry 9am'}}}".to_string(),
            "teams.pay.digest.schedule",
            "bad schedule: unknown day \"Fry\"",
        ),
        (
            "teams: {pay: {receivers: [console], digest: {schedule: 'daily 09:00', receivers: [nobody]}}}".to_string(),
            "teams.pay.digest.receivers[0]",
            "unknown receiver \"nobody\"",
        ),
        (
            format!(
                "{jira}\nteams: {{pay: {{receivers: [chat], digest: {{schedule: 'daily 09:00', receivers: [chat, tickets]}}}}}}"
            ),
            "teams.pay.digest.receivers[1]",
            "ticket or paging receiver: it gets no digest",
        ),
        (
            format!("{jira}\nteams: {{pay: {{receivers: [tickets], digest: {{schedule: 'daily 09:00'}}}}}}"),
            "teams.pay.digest.receivers",
            "no receiver takes a digest",
        ),
        (
            "teams: {pay: {receivers: [console], digest: {schedule: 'daily 09:00', catch_up: 0s}}}".to_string(),
            "teams.pay.digest.catch_up",
            "must be greater than 0",
        ),
    ];
    for (i, (yaml, path, says)) in cases.iter().enumerate() {
        let f = write(dir.path(), &format!("d{i}.yaml"), yaml);
        let (code, out, err) = herald(&["check-config", &f], &[]);
        assert_eq!(code, 2, "{yaml}: {out}{err}");
        assert!(
            err.contains(path) && err.contains(says),
            "{yaml}: expected {path}: {says} in {err}"
        );
    }
    let good = "teams: {pay: {receivers: [console], digest: {schedule: 'Mon,Wed,Fri 09:00 17:30', timezone: Europe/Berlin, catch_up: 2h, when_empty: all_green}}}";
    let (code, out, err) = herald(&["check-config", &write(dir.path(), "good.yaml", good)], &[]);
    assert_eq!(code, 0, "{out}{err}");
    // A team with a digest adds a ticket receiver: the digest goes to its chat receiver only, no error.
    let with_jira =
        format!("{jira}\nteams: {{pay: {{receivers: [chat, tickets], digest: {{schedule: 'daily 09:00'}}}}}}");
    let (code, out, err) = herald(&["check-config", &write(dir.path(), "jira.yaml", &with_jira)], &[]);
    assert_eq!(
        code, 0,
        "a digest defaults to the team's digest-capable receivers: {out}{err}"
    );
}

#[test]
fn digest_prints_what_a_team_would_get_now_and_refuses_an_unknown_team() {
    let dir = tempfile::tempdir().expect("tmp");
    let yaml = format!(
        "storage: {{url: \"sqlite://{}/h.db\"}}\nteams: {{pay: {{receivers: [console], digest: {{schedule: 'daily 09:00'}}}}}}",
        dir.path().display()
    );
    let f = write(dir.path(), "h.yaml", &yaml);
    let (code, out, err) = herald(&["digest", "--team", "pay", "--config", &f], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Digest for pay: all green"), "{out}");
    assert!(out.contains("All green for team pay"), "{out}");
    let (code, out, err) = herald(&["digest", "--team", "pay", "--config", &f, "--json"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["team"], "pay");
    let (code, out, err) = herald(&["digest", "--team", "nobody", "--config", &f], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no team \"nobody\""), "{err}");
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
fn an_error_from_an_environment_variable_names_the_variable() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = write(
        dir.path(),
        "c.yaml",
        "receivers: [{name: console, console: {}}, {name: team-hook, webhook: {url: 'https://hooks.example/x'}}]\n\
         routes: [{team: pay, receivers: [console]}]\nrules: {degraded: {for: soon}}\n",
    );
    let env = [
        ("HERALD__ROUTES__0__RECEIVERS", "nobody"),
        ("HERALD__SERVER__LISTEN", "not-an-address"),
        ("HERALD__RECEIVERS__1__WEBHOOK__URL", "ftp://hooks.example/SECRET"),
        ("HERALD__GROUPING__GROUP_BY", "team,colour"),
    ];
    let (code, out, err) = herald(&["check-config", &f], &env);
    assert_eq!(code, 2, "{out}{err}");
    for (path, variable) in [
        ("routes[0].receivers", "HERALD__ROUTES__0__RECEIVERS"),
        ("server.listen", "HERALD__SERVER__LISTEN"),
        (
            "receivers[\"team-hook\"].webhook.url",
            "HERALD__RECEIVERS__1__WEBHOOK__URL",
        ),
        ("grouping.group_by[1]", "HERALD__GROUPING__GROUP_BY"),
    ] {
        let line = err
            .lines()
            .find(|l| l.contains(path) && l.contains(variable))
            .unwrap_or_else(|| panic!("{path} blamed on {variable} in:\n{err}"));
        assert!(!line.contains("SECRET"), "{line}");
    }
    // An error in the file itself blames no variable.
    let from_file = err.lines().find(|l| l.contains("rules.degraded.for")).expect(&err);
    assert!(!from_file.contains("HERALD__"), "{from_file}");
    // A key that does not exist, reported at the section above it.
    let (code, _, err) = herald(&["check-config", &f], &[("HERALD__SERVER__COLOUR", "blue")]);
    assert_eq!(code, 2);
    assert!(
        err.lines()
            .any(|l| l.contains("unknown field `colour`") && l.contains("HERALD__SERVER__COLOUR")),
        "{err}"
    );
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
    let app = fixture_path("captured/021_remove_podinfo_1_1.json");
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &app.display().to_string()], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("application: argocd/aaaaaaaaa"), "{out}");
    assert!(out.contains("owning team: platform"), "{out}");
    assert!(out.contains("incident:    out_of_sync"), "{out}");
    assert!(out.contains("fires after 1h"), "{out}");
    assert!(out.contains("incident:    prune_pending"), "{out}");
    assert!(out.contains("routes[0]"), "{out}");
    // The `continue: true` route adds the pager; the owning team keeps its own receivers.
    assert!(
        out.contains("routes[0] (continue: true) + team platform's receivers"),
        "{out}"
    );
    assert!(out.contains("receivers: pager, plat-chat"), "{out}");
    assert!(out.contains("receivers: plat-chat"), "{out}");
    // One cause, one incident: the OutOfSync the prune causes is shown inhibited.
    assert!(
        out.contains("held back: inhibited by prune_pending of the same Application (built-in rule)"),
        "{out}"
    );
    assert!(out.contains("escalation step 1: after 1h → pager"), "{out}");
    let (code, _, err) = herald(&["route", "--config", &cfg, "--app", "/nonexistent.json"], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("nonexistent"), "{err}");
}

/// `herald route` says an incident would be held while its team is muted (every year: always inside), and `check-config` names the key path of a malformed interval value and of an unknown name.
#[test]
fn route_shows_a_muted_team_and_check_config_names_a_bad_interval() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = write(
        dir.path(),
        "c.yaml",
        r#"
receivers: [{name: console, console: {}}, {name: plat-chat, console: {}}]
ownership: {projects: {default: platform}}
teams: {platform: {receivers: [plat-chat], mute_time_intervals: [always]}}
time_intervals: [{name: always, time_intervals: [{years: ["1:9999"]}]}]
"#,
    );
    let app = fixture_path("captured/021_remove_podinfo_1_1.json");
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &app.display().to_string()], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("held back: muted for team platform (time interval always), with no end within a year"),
        "{out}"
    );
    let bad = write(
        dir.path(),
        "bad.yaml",
        r#"
receivers: [{name: plat-chat, console: {}}]
teams: {platform: {receivers: [plat-chat], mute_time_intervals: [nights, weekend]}}
time_intervals:
  - name: nights
    time_intervals:
      - times: [{start_time: "22:00", end_time: "24:00"}]
      - {weekdays: [monday, funday], days_of_month: ["-1:5"], location: Moon/Base}
"#,
    );
    let (code, out, err) = herald(&["check-config", &bad], &[]);
    assert_ne!(code, 0, "{out}{err}");
    for want in [
        "time_intervals[0].time_intervals[1].weekdays[1]: \"funday\" is not a day of the week",
        "time_intervals[0].time_intervals[1].days_of_month[0]",
        "time_intervals[0].time_intervals[1].location: unknown time zone \"Moon/Base\"",
        "teams.platform.mute_time_intervals[1]: unknown time interval \"weekend\" (defined: nights)",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
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
    let files = (captured().into_iter()).map(|(name, _)| fixture_path(&format!("captured/{name}")));
    args.extend(files.map(|f| f.display().to_string()));
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
    // The Unknown apps of 16:06:22 and 16:06:23 have been Unknown for 5 minutes at 16:11:22 and 16:11:23: each
    // rule fires at its own second (group_wait 0s: the first alone), the second joins the group's next message.
    assert!(
        out.contains(
            "2025-10-02T16:11:22Z would notify console (open): aaaaaaa: sync status Unknown (InvalidSpecError) for 5 min"
        ),
        "{out}"
    );
    assert!(
        out.contains("2025-10-02T16:16:22Z would notify console (update): sync status Unknown on 2 Applications"),
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
    let body = fixture_path("captured/021_remove_podinfo_1_1.json")
        .display()
        .to_string();
    // Derived from 021: the same Application a little over an hour later, still OutOfSync with podinfo to prune.
    let mut later = fixture_json("captured/021_remove_podinfo_1_1.json");
    later["timestamp"] = "2025-10-02T18:02:00Z".into();
    let later = write(dir.path(), "later.json", &later.to_string());
    let args = [
        "replay", "--config", &cfg, "--clock", "recorded", "--render", "slack", &body, &later,
    ];

    let (code, out, err) = herald(&args, &[]);

    assert_eq!(code, 0, "{err}");
    assert!(out.contains("---- slack json ----"), "{out}");
    // Fired the moment the hour was up (group_wait 0s): one message about the cause, the resource waiting to be
    // pruned (the OutOfSync it causes is inhibited).
    assert!(
        out.contains("aaaaaaaaa: 1 resource waiting to be pruned for 1 h [1 incident(s)]"),
        "{out}"
    );
    assert!(out.contains("--resource argoproj.io:Application:podinfo"), "{out}");
    let (code, _, err) = herald(&["replay", "--config", &cfg, "--render", "fax", &body], &[]);
    assert_ne!(code, 0);
    assert!(
        err.contains("'fax'") && err.contains("configured, console, email, slack"),
        "a wrong receiver type is answered with the valid ones: {err}"
    );
}

#[test]
fn the_help_lists_the_values_of_state_kind_and_render_and_a_wrong_one_is_answered_with_them() {
    let (code, help, _) = herald(&["incidents", "--help"], &[]);
    assert_eq!(code, 0);
    assert!(help.contains("pending, firing, resolved"), "{help}");
    assert!(
        help.contains(
            "out_of_sync, prune_pending, sync_failed, degraded, sync_unknown, pruned, sync_running, progressing, deleted, storm"
        ),
        "every incident kind, and only those (no `test`): {help}"
    );
    let (code, help, _) = herald(&["replay", "--help"], &[]);
    assert_eq!(code, 0);
    assert!(help.contains("configured, console, email, slack"), "{help}");
    assert!(help.contains("servicenow"), "{help}");
    let (code, _, err) = herald(
        &["incidents", "--kind", "outofsync"],
        &[("HERALD_URL", "http://127.0.0.1:9")],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("'outofsync'") && err.contains("out_of_sync, prune_pending"),
        "refused before any request, with the kinds: {err}"
    );
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

#[test]
fn with_json_logs_the_console_receiver_writes_one_json_object_per_notification() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = write(
        dir.path(),
        "c.yaml",
        "log: {format: json}\nreceivers: [{name: console, console: {}}]\n",
    );
    let (code, out, err) = herald(&["send-test", "--config", &cfg, "--receiver", "console"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let objects: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(objects.len(), 1, "one object per notification: {out}");
    let n = &objects[0];
    assert_eq!(n["receiver"], "console");
    assert!(n["text"].as_str().is_some_and(|t| t.contains("[TEST]")), "{n}");
    assert!(n.get("thread_key").is_none(), "no internal keys: {n}");
    assert!(!out.contains("herald-test-") && !out.contains("==>"), "{out}");
    // What is not the object is the send-test verdict, one line.
    assert_eq!(out.lines().filter(|l| !l.starts_with('{')).count(), 1, "{out}");
}

fn herald_with_stdin(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run herald");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn route_reads_kubectl_yaml_from_a_file_or_standard_input() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = write(dir.path(), "c.yaml", "ownership: {default_team: platform}\n");
    let yaml = fixture_path("objects/02-live-app-outofsync-sync-failed.yaml");
    let (code, from_file, err) = herald(&["route", "--config", &cfg, "--app", &yaml.display().to_string()], &[]);
    assert_eq!(code, 0, "{from_file}{err}");
    assert!(from_file.contains("application: argocd/jen"), "{from_file}");
    assert!(from_file.contains("incident:    out_of_sync"), "{from_file}");
    let text = fixture("objects/02-live-app-outofsync-sync-failed.yaml");
    let (code, from_stdin, err) = herald_with_stdin(&["route", "--config", &cfg, "--app", "-"], &text);
    assert_eq!(code, 0, "{from_stdin}{err}");
    assert_eq!(from_stdin, from_file);
    // JSON on standard input too; and what is neither says so.
    let json = fixture("captured/021_remove_podinfo_1_1.json");
    let (code, out, err) = herald_with_stdin(&["route", "--config", &cfg, "--app", "-"], &json);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("application: argocd/aaaaaaaaa"), "{out}");
    let (code, _, err) = herald_with_stdin(&["route", "--config", &cfg, "--app", "-"], b"key: [unclosed");
    assert_ne!(code, 0);
    assert!(err.contains("neither JSON nor YAML"), "{err}");
}

#[test]
fn route_says_when_the_applications_project_holds_it_in_a_sync_window() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = write(dir.path(), "c.yaml", "ownership: {default_team: platform}\n");
    let yaml = fixture_path("objects/02-live-app-outofsync-sync-failed.yaml");
    let yaml = yaml.display().to_string();
    // A deny window open all day, every day (Argo CD's own shape, as `kubectl get appproject -o yaml` prints it).
    let project = |name: &str, manual: bool| {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {{name: {name}, namespace: argocd}}\n\
             spec:\n  syncWindows:\n  - {{kind: deny, schedule: '0 0 * * *', duration: 24h, applications: ['*'], \
             manualSync: {manual}}}\n  - {{kind: allow, schedule: 'not a cron', duration: 1h}}\n"
        )
    };
    let denied = write(dir.path(), "p.yaml", &project("default", false));
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &yaml, "--project", &denied], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("in a sync window: Argo CD may not sync it until "),
        "{out}"
    );
    assert!(err.contains("1 of its 2 sync windows cannot be read"), "{err}");
    // A window that lets a person sync by hand is told apart.
    let manual = write(dir.path(), "m.yaml", &project("default", true));
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &yaml, "--project", &manual], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("(a person may, by hand)"), "{out}");
    // Without --project nothing is said of windows; another project's file is refused, saying whose it is.
    let (code, out, _) = herald(&["route", "--config", &cfg, "--app", &yaml], &[]);
    assert_eq!(code, 0);
    assert!(!out.contains("sync window"), "{out}");
    let other = write(dir.path(), "o.yaml", &project("payments", false));
    let (code, _, err) = herald(&["route", "--config", &cfg, "--app", &yaml, "--project", &other], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("is not the Application's project"), "{err}");
    // Malformed or wrong-typed: refused, saying which file and what is wrong.
    for (name, text) in [("bad.yaml", "key: [unclosed"), ("list.yaml", "- a\n- b\n")] {
        let bad = write(dir.path(), name, text);
        let (code, _, err) = herald(&["route", "--config", &cfg, "--app", &yaml, "--project", &bad], &[]);
        assert_ne!(code, 0, "{name}");
        assert!(err.contains(name), "{name}: {err}");
    }
}

#[test]
fn replay_until_runs_the_clock_on_and_summarises_fired_resolved_and_pending() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = write(
        dir.path(),
        "c.yaml",
        "rules: {degraded: {for: 10m}, out_of_sync: {for: 1h}}\ngrouping: {group_wait: 0s}\n",
    );
    let body = |sync: &str, health: &str, t: &str| {
        let app = serde_json::json!({
            "metadata": {"name": "pay-api", "namespace": "argocd", "uid": "u1"},
            "spec": {"project": "default", "destination": {"namespace": "pay"}},
            "status": {"sync": {"status": sync}, "health": {"status": health}}
        });
        bare_envelope(app, t).to_string()
    };
    let a = write(
        dir.path(),
        "a.json",
        &body("OutOfSync", "Degraded", "2025-10-02T16:00:00Z"),
    );
    let b = write(
        dir.path(),
        "b.json",
        &body("OutOfSync", "Healthy", "2025-10-02T16:20:00Z"),
    );
    let (code, out, err) = herald(
        &[
            "replay", "--config", &cfg, "--clock", "recorded", "--until", "+30m", &a, &b,
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let summary = out
        .split("at 2025-10-02T16:50:00Z:")
        .nth(1)
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        summary.contains("fired     2025-10-02T16:10:00Z  degraded argocd/pay-api"),
        "{out}"
    );
    assert!(
        summary.contains("resolved  2025-10-02T16:20:00Z  degraded argocd/pay-api"),
        "{out}"
    );
    assert!(
        summary.contains("pending   out_of_sync argocd/pay-api would fire at 2025-10-02T17:00:00Z (in 10m)"),
        "{out}"
    );
    // The degraded incident was sent when it fired and when it resolved, while the clock ran on.
    assert!(
        out.contains("2025-10-02T16:10:00Z would notify console (open)"),
        "{out}"
    );
    // An absolute end works too; a bad one says how to write it.
    let (code, out, err) = herald(
        &[
            "replay",
            "--config",
            &cfg,
            "--clock",
            "recorded",
            "--until",
            "2025-10-02T17:00:30Z",
            &a,
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("fired     2025-10-02T17:00:00Z  out_of_sync argocd/pay-api"),
        "{out}"
    );
    let (code, _, err) = herald(&["replay", "--config", &cfg, "--until", "soon", &a], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("+2h"), "{err}");
}

#[test]
fn check_config_reports_every_error_at_once_and_refuses_what_serve_refuses() {
    let dir = tempfile::tempdir().expect("tmp");
    let many = write(
        dir.path(),
        "many.yaml",
        r#"
server: {listen: nowhere, auth: {bearer_tokens: [short]}}
rules: {degraded: {for: soon}}
argocd: {url: 'not a url'}
receivers:
  - {name: hook, webhook: {url: 'ftp://hooks.example/SECRET-PATH'}}
  - {name: teams, msteams: {webhook_url: 'SECRET-not-a-url'}}
"#,
    );
    let (code, out, err) = herald(&["check-config", &many], &[]);
    assert_eq!(code, 2, "{out}{err}");
    // `rules` cannot be read: that is reported with the rest of what can be, the checks across sections included
    // (a bad duration no longer hides a bad receiver until it is fixed).
    assert!(err.contains("rules.degraded.for"), "{err}");
    assert!(err.contains("receivers[\"hook\"].webhook.url"), "{err}");
    // `--config FILE` is accepted like every other command takes it.
    let (code, _, err2) = herald(&["check-config", "--config", &many], &[]);
    assert_eq!((code, &err2), (2, &err), "the same answer either way");
    let (code, _, err) = herald(
        &["check-config", &write(dir.path(), "typed.yaml", &many_without_rules())],
        &[],
    );
    assert_eq!(code, 2);
    for path in [
        "server.listen",
        "server.auth.bearer_tokens[0]",
        "argocd.url",
        "receivers[\"hook\"].webhook.url",
        "receivers[\"teams\"].msteams.webhook_url",
    ] {
        assert!(err.contains(path), "{path} in {err}");
    }
    assert!(!err.contains("SECRET"), "secret URLs are not echoed: {err}");

    let exposed = write(dir.path(), "exposed.yaml", "server: {listen: '0.0.0.0:8080'}\n");
    let (code, out, err) = herald(&["check-config", &exposed], &[]);
    assert_eq!(code, 2, "serve would refuse to start: {out}{err}");
    assert!(err.contains("server.auth") && err.contains("no credentials"), "{err}");
    let (code, out, err) = herald(
        &["check-config", &exposed],
        &[("HERALD__SERVER__AUTH__INGEST_TOKENS", "argocd-token-0123456789,")],
    );
    assert_eq!(code, 0, "{out}{err}");
}

fn many_without_rules() -> String {
    r#"
server: {listen: nowhere, auth: {bearer_tokens: [short]}}
argocd: {url: 'not a url'}
receivers:
  - {name: hook, webhook: {url: 'ftp://hooks.example/SECRET-PATH'}}
  - {name: teams, msteams: {webhook_url: 'SECRET-not-a-url'}}
"#
    .into()
}

/// `herald serve` on a free port with `yaml`; stopped on drop.
struct Server {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(yaml: &str) -> Self {
        use std::io::BufRead;
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = write(
            dir.path(),
            "herald.yaml",
            &format!(
                "{yaml}\nstorage: {{url: 'sqlite://{}/h.db'}}\nscheduler: {{tick: 50ms}}\n",
                dir.path().display()
            ),
        );
        let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(["serve", "--config", &cfg])
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("serve");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(p) = line.split("port=").nth(1) {
                    let _ = tx.send(p.trim().to_string());
                }
            }
        });
        let port = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("herald is listening");
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    fn post_event(&self, token: &str, body: &str) {
        let out = Command::new("curl")
            .args([
                "-sf",
                "-XPOST",
                "-H",
                &format!("Authorization: Bearer {token}"),
                // curl's default for --data-binary is a form's type, which a state change may not have.
                "-H",
                "Content-Type: application/json",
                "--data-binary",
                body,
            ])
            .arg(format!("{}/v1/argocd/events", self.url))
            .output()
            .expect("curl");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// README's quick start, as written: `serve --config config/quickstart.yaml` from a fresh directory, the captured
/// body posted with curl, and the notification on the console (standard output) within a minute.
#[test]
fn the_quick_start_shows_a_notification_on_the_console_within_a_minute() {
    use std::io::BufRead;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("tmp");
    let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--config"])
        .arg(root.join("config/quickstart.yaml"))
        .current_dir(dir.path())
        // The README's port may be taken on a shared machine: any free one.
        .env("HERALD__SERVER__LISTEN", "127.0.0.1:0")
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("serve");
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(p) = line.split("port=").nth(1) {
                let _ = port_tx.send(p.trim().to_string());
            }
        }
    });
    let (line_tx, line_rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = line_tx.send(line);
        }
    });
    let port = port_rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("herald is listening");
    let body = fixture_path("captured/021_remove_podinfo_1_1.json");
    let posted = std::time::Instant::now();
    let out = Command::new("curl")
        .args(["-sf", "-XPOST", "-H", "Content-Type: application/json", "--data-binary"])
        .arg(format!("@{}", body.display()))
        .arg(format!("http://127.0.0.1:{port}/v1/argocd/events"))
        .output()
        .expect("curl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut seen = String::new();
    let told = loop {
        let left = std::time::Duration::from_secs(60).saturating_sub(posted.elapsed());
        match line_rx.recv_timeout(left) {
            Ok(line) => seen.push_str(&format!("{line}\n")),
            Err(_) => break false,
        }
        // The Application is OutOfSync with a resource to prune: one prune_pending message (it inhibits the
        // out_of_sync of the same Application).
        if seen.contains("FIRING") && seen.contains("argocd/aaaaaaaaa") {
            break true;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(told, "no notification within a minute; standard output:\n{seen}");
    assert!(dir.path().join("data").exists(), "the store under ./data");
}

const ADMIN: &str = "admin-token-0123456789";
const READ: &str = "read-token-0123456789";

#[test]
fn silences_are_added_listed_and_expired_against_a_running_herald() {
    let server = Server::start(&format!(
        "server: {{listen: '127.0.0.1:0', auth: {{bearer_tokens: [{ADMIN}], read_tokens: [{READ}]}}}}"
    ));
    let env = [("HERALD_URL", server.url.as_str()), ("HERALD_TOKEN", ADMIN)];
    let (code, out, err) = herald(
        &[
            "silence",
            "add",
            "app=pay-*",
            "kind=out_of_sync",
            "--duration",
            "2h",
            "--comment",
            "migration",
        ],
        &env,
    );
    assert_eq!(code, 0, "{out}{err}");
    let id = out.trim().to_string();
    assert_eq!(id.len(), 36, "the new silence's id: {out}");

    let (code, out, err) = herald(&["silence", "list", "--url", &server.url, "--token", READ], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("ID") && lines[0].contains("MATCHERS"), "{out}");
    assert!(lines[1].starts_with(&id), "{out}");
    assert!(lines[1].contains("app=pay-* kind=out_of_sync"), "{out}");
    assert!(lines[1].contains("active"), "{out}");
    assert!(
        lines[1].contains("bearer_tokens[0]"),
        "created by the token's credential: {out}"
    );
    assert!(lines[1].ends_with("migration"), "{out}");

    // A read token may list, not expire; without a token, nothing.
    let (code, _, err) = herald(&["silence", "expire", &id, "--url", &server.url, "--token", READ], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("403") && err.contains("admin"), "{err}");
    let (code, _, err) = herald(&["silence", "list", "--url", &server.url], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("401") && err.contains("HERALD_TOKEN"), "{err}");

    let (code, out, err) = herald(&["silence", "expire", &id], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), format!("expired {id}"));
    let (code, out, _) = herald(&["silence", "list", "-q"], &env);
    assert_eq!(code, 0);
    assert!(out.trim().is_empty(), "{out}");
    let (code, out, _) = herald(&["silence", "list", "-q", "--expired"], &env);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), id);

    // A maintenance planned ahead: it starts later (its own zone's time), lasts from then, and holds nothing yet.
    let (code, out, err) = herald(
        &[
            "silence",
            "add",
            "team=payments",
            "--start",
            "2099-06-01T18:00:00+02:00",
            "--duration",
            "3h",
            "--comment",
            "db upgrade",
        ],
        &env,
    );
    assert_eq!(code, 0, "{out}{err}");
    let planned = out.trim().to_string();
    let (code, out, _) = herald(&["silence", "list"], &env);
    assert_eq!(code, 0);
    let line = out
        .lines()
        .find(|l| l.starts_with(&planned))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("pending"), "{line}");
    assert!(
        line.contains("2099-06-01 16:00:00 UTC") && line.contains("2099-06-01 19:00:00 UTC"),
        "{line}"
    );
    let (code, _, err) = herald(
        &["silence", "add", "team=x", "--start", "tomorrow", "--comment", "x"],
        &env,
    );
    assert_ne!(code, 0);
    assert!(err.contains("--start"), "{err}");

    let (code, _, err) = herald(&["silence", "add", "pay-*", "--comment", "x"], &env);
    assert_ne!(code, 0);
    assert!(err.contains("FIELD=GLOB"), "{err}");
    let (code, _, err) = herald(&["silence", "list", "--url", "http://127.0.0.1:9"], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("cannot reach Herald at http://127.0.0.1:9/"), "{err}");
}

#[test]
fn incidents_are_listed_from_a_running_herald_filtered_by_state() {
    let server = Server::start(&format!(
        "server: {{listen: '127.0.0.1:0', auth: {{bearer_tokens: [{ADMIN}], read_tokens: [{READ}]}}}}\n\
         rules: {{degraded: {{for: 0s}}}}"
    ));
    let now = chrono::Utc::now().to_rfc3339();
    for (name, health) in [("pay-api", "Degraded"), ("cart", "Healthy")] {
        let body = bare_envelope(
            serde_json::json!({
                "metadata": {"name": name, "namespace": "argocd", "uid": name, "labels": {"team": "payments"}},
                "spec": {"project": "default"},
                "status": {"sync": {"status": "OutOfSync"}, "health": {"status": health}}
            }),
            &now,
        );
        server.post_event(ADMIN, &body.to_string());
    }
    let env = [("HERALD_URL", server.url.as_str()), ("HERALD_TOKEN", READ)];
    let (code, out, err) = herald(&["incidents", "--state", "firing"], &env);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("ID") && lines[0].contains("APPLICATION"), "{out}");
    assert_eq!(lines.len(), 2, "only the firing one: {out}");
    assert!(lines[1].contains("firing") && lines[1].contains("degraded"), "{out}");
    assert!(
        lines[1].contains("argocd/pay-api") && lines[1].contains("payments"),
        "{out}"
    );
    let (code, out, _) = herald(&["incidents", "--state", "pending"], &env);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 3, "two out_of_sync incidents are pending: {out}");
    let (code, _, err) = herald(&["incidents", "--state", "burning"], &env);
    assert_ne!(code, 0);
    assert!(
        err.contains("'burning'") && err.contains("pending, firing, resolved"),
        "refused by the command line, with the states: {err}"
    );
}

#[test]
fn route_shows_what_an_applications_annotation_asks_for_and_what_its_team_refuses() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = write(
        dir.path(),
        "c.yaml",
        r#"
receivers: [{name: plat-chat, console: {}}, {name: plat-jira, console: {}}, {name: shop-chat, console: {}}]
ownership: {projects: {default: platform}}
teams:
  platform: {receivers: [plat-chat], allowed_receivers: [plat-jira]}
  shop: {receivers: [shop-chat]}
"#,
    );
    let mut body = fixture_json("captured/021_remove_podinfo_1_1.json");
    body["app"]["metadata"]["annotations"]["herald.io/receivers"] = "plat-jira, shop-chat".into();
    let app = write(dir.path(), "app.json", &body.to_string());
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &app], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("receivers: plat-chat, plat-jira"),
        "the allowed one is added: {out}"
    );
    assert!(
        out.contains(
            "refused:   shop-chat (asked for by the Application's annotation; not in teams.platform.allowed_receivers)"
        ),
        "another team's channel is refused, visibly: {out}"
    );
    // An unknown receiver in allowed_receivers is a configuration error.
    let bad = write(
        dir.path(),
        "bad.yaml",
        "teams: {pay: {receivers: [console], allowed_receivers: [nope]}}",
    );
    let (code, _, err) = herald(&["check-config", &bad], &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("teams.pay.allowed_receivers[0]: unknown receiver \"nope\""),
        "{err}"
    );
}

#[test]
fn check_config_never_repeats_the_credentials_of_a_url_it_refuses() {
    let dir = tempfile::tempdir().expect("tmp");
    for homeserver in [
        "ftp://herald:s3cret-matrix-pass@matrix.example",
        "herald:s3cret-matrix-pass@matrix.example",
    ] {
        let f = write(
            dir.path(),
            "matrix.yaml",
            &format!(
                "receivers: [{{name: m, matrix: {{homeserver: \"{homeserver}\", room_id: \"!r:matrix.example\", \
                 access_token: syt_0123456789abcdef}}}}]\n"
            ),
        );
        let (code, out, err) = herald(&["check-config", &f], &[]);
        assert_ne!(code, 0, "{homeserver}: {out}{err}");
        assert!(err.contains("homeserver"), "the error names the key: {err}");
        assert!(!(out.clone() + &err).contains("s3cret"), "{homeserver}: {out}{err}");
    }
}

/// Two Argo CD instances (`default` at argocd-a, `us` at argocd-us) holding Applications of the same names; a route
/// sends the US instance's incidents to `us-pager`.
fn two_instances(dir: &Path) -> String {
    write(
        dir,
        "two.yaml",
        r#"
argocd:
  url: https://argocd-a.example.com
  instances: [{name: us, url: "https://argocd-us.example.com"}]
receivers: [{name: console, console: {}}, {name: us-pager, console: {}}]
ownership: {default_team: payments}
teams: {payments: {receivers: [console]}}
routes: [{instance: us, receivers: [us-pager]}]
rules: {out_of_sync: {for: 13s}}
grouping: {group_wait: 0s}
"#,
    )
}

/// `pay-api` OutOfSync as the Argo CD at `url` sends it (no `context` without one).
fn out_of_sync_from(url: Option<&str>, t: &str) -> String {
    let app = serde_json::json!({
        "metadata": {"name": "pay-api", "namespace": "argocd", "uid": "u1"},
        "spec": {"project": "default", "destination": {"namespace": "pay"}},
        "status": {"sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"}}
    });
    // Only the URL in its `context`.
    let context = url.map(|url| serde_json::json!({"argocdUrl": url}));
    envelope_from(context, app, t).to_string()
}

#[test]
fn route_and_replay_give_a_body_to_its_instance_as_the_service_does() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = two_instances(dir.path());
    let t = "2025-10-02T16:00:00Z";
    let us = write(
        dir.path(),
        "us.json",
        &out_of_sync_from(Some("https://argocd-us.example.com/"), t),
    );
    let a = write(
        dir.path(),
        "a.json",
        &out_of_sync_from(Some("https://argocd-a.example.com"), t),
    );
    let unnamed = write(dir.path(), "unnamed.json", &out_of_sync_from(None, t));

    // The body's context.argocdUrl says which instance: the route `instance: us` matches the US body only.
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &us], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("application: us/argocd/pay-api"), "{out}");
    assert!(out.contains("receivers: us-pager"), "{out}");
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &a], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("application: argocd/pay-api"), "{out}");
    assert!(out.contains("receivers: console"), "{out}");
    // A body that names none: --instance says which, as an ingest token bound to it would.
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &unnamed, "--instance", "us"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("application: us/argocd/pay-api") && out.contains("receivers: us-pager"),
        "{out}"
    );
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &unnamed], &[]);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("does not say which") && err.contains("--instance"),
        "{err}"
    );

    // The replay too: each line names the instance, and the US incident goes to the US pager.
    let (code, out, err) = herald(&["replay", "--config", &cfg, "--clock", "recorded", &us, &a], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("us.json  us/argocd/pay-api: changed"), "{out}");
    assert!(out.contains("a.json  argocd/pay-api: changed"), "{out}");
    let (code, out, err) = herald(
        &[
            "replay",
            "--config",
            &cfg,
            "--instance",
            "us",
            "--until",
            "+1m",
            &unnamed,
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("would notify us-pager (open)"), "{out}");
    assert!(!out.contains("would notify console"), "{out}");
}

#[test]
fn an_instance_that_is_not_configured_or_contradicts_the_body_is_refused_naming_both() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = two_instances(dir.path());
    let us = write(
        dir.path(),
        "us.json",
        &out_of_sync_from(Some("https://argocd-us.example.com"), "2025-10-02T16:00:00Z"),
    );
    for verb in [
        &["route", "--config", &cfg, "--app", &us][..],
        &["replay", "--config", &cfg, &us][..],
    ] {
        for (instance, says) in [
            (
                "eu",
                "\"eu\" is not a configured Argo CD instance (configured: default, us)",
            ),
            ("", "\"\" is not a configured Argo CD instance"),
            ("US", "\"US\" is not a configured"),
            ("us\n--x", "is not a configured"),
            ("default", "is instance \"us\"'s, not \"default\"'s"),
        ] {
            let mut args = verb.to_vec();
            args.extend(["--instance", instance]);
            let (code, out, err) = herald(&args, &[]);
            if verb[0] == "replay" && instance == "default" {
                // replay says of each body it refuses why, and goes on with the others.
                assert_eq!(code, 0, "{out}{err}");
                assert!(
                    out.contains(says) && out.contains("→ refused"),
                    "--instance {instance:?}: {out}"
                );
                continue;
            }
            assert_ne!(code, 0, "{verb:?} --instance {instance:?}: {out}");
            assert!(err.contains(says), "{verb:?} --instance {instance:?}: {out}{err}");
        }
    }
    // The instance matches the body's: as without it.
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &us, "--instance", "us"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("application: us/argocd/pay-api"), "{out}");
}

#[test]
fn replay_until_fires_a_rule_at_its_own_time_not_at_a_step() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = two_instances(dir.path());
    let a = write(
        dir.path(),
        "a.json",
        &out_of_sync_from(Some("https://argocd-a.example.com"), "2025-10-02T16:00:00Z"),
    );
    let (code, out, err) = herald(
        &["replay", "--config", &cfg, "--clock", "recorded", "--until", "+2m", &a],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    // `for: 13s`: it fires 13 seconds after the body, and is sent then (group_wait 0s).
    assert!(
        out.contains("fired     2025-10-02T16:00:13Z  out_of_sync argocd/pay-api"),
        "{out}"
    );
    assert!(
        out.contains("→ 2025-10-02T16:00:13Z would notify console (open)"),
        "{out}"
    );
}

/// What `GET /v1/apps/{namespace}/{name}/raw` answers (its shape is checked against the API in tests/api).
fn raw_answer(instance: Option<&str>, items: &[(&str, serde_json::Value)]) -> String {
    let items: Vec<serde_json::Value> = items
        .iter()
        .map(|(at, body)| serde_json::json!({"received_at": at, "body": body}))
        .collect();
    let mut v = serde_json::json!({"namespace": "argocd", "name": "pay-api", "count": items.len(), "items": items});
    if let Some(i) = instance {
        v["instance"] = serde_json::json!(i);
    }
    v.to_string()
}

#[test]
fn replay_and_route_read_the_answer_of_the_raw_endpoint() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = two_instances(dir.path());
    let body = |sync: &str, t: &str| -> serde_json::Value {
        let mut v: serde_json::Value = serde_json::from_str(&out_of_sync_from(None, t)).expect("json");
        v["app"]["status"]["sync"]["status"] = serde_json::json!(sync);
        v
    };
    // Newest first, as the API lists them; the second body is kept as text (it was not JSON when received).
    let raw = write(
        dir.path(),
        "raw.json",
        &raw_answer(
            Some("us"),
            &[
                ("2025-10-02T16:05:00Z", body("Synced", "2025-10-02T16:05:00Z")),
                (
                    "2025-10-02T16:00:00Z",
                    serde_json::json!(body("OutOfSync", "2025-10-02T16:00:00Z").to_string()),
                ),
            ],
        ),
    );
    let (code, out, err) = herald(&["replay", "--config", &cfg, "--clock", "recorded", &raw], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let first = out.find("raw.json[items.1]  us/argocd/pay-api: changed (sync OutOfSync");
    let second = out.find("raw.json[items.0]  us/argocd/pay-api: changed (sync Synced");
    assert!(first.zip(second).is_some_and(|(a, b)| a < b), "oldest first: {out}");
    assert!(
        out.contains("would notify us-pager (open)"),
        "fired at +13 s, before the Synced body: {out}"
    );
    // `route` takes the newest body: the Application as it is now.
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &raw], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("application: us/argocd/pay-api") && out.contains("incidents:   none"),
        "{out}"
    );
    // Without the answer's instance, the bodies' own URL (none here) decides: name it.
    let bare = write(
        dir.path(),
        "bare.json",
        &raw_answer(
            None,
            &[("2025-10-02T16:00:00Z", body("OutOfSync", "2025-10-02T16:00:00Z"))],
        ),
    );
    let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &bare, "--instance", "us"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("application: us/argocd/pay-api"), "{out}");

    // Malformed, wrong-typed and hostile answers: refused, saying what is wrong (never a panic).
    let ok_body = body("OutOfSync", "2025-10-02T16:00:00Z");
    for (name, text, says) in [
        ("empty.json", raw_answer(Some("us"), &[]), "holds no body"),
        (
            "at.json",
            serde_json::json!({"items": [{"received_at": "yesterday", "body": ok_body}]}).to_string(),
            "items[0].received_at: \"yesterday\" is not an RFC 3339 time",
        ),
        (
            "at-type.json",
            serde_json::json!({"items": [{"received_at": 5, "body": ok_body}]}).to_string(),
            "items[0].received_at: missing, or not an RFC 3339 time",
        ),
        (
            "body-type.json",
            serde_json::json!({"items": [{"received_at": "2025-10-02T16:00:00Z", "body": 7}]}).to_string(),
            "items[0].body: missing, or neither",
        ),
        (
            "instance-type.json",
            serde_json::json!({"instance": ["us"], "items": [{"received_at": "2025-10-02T16:00:00Z", "body": ok_body}]})
                .to_string(),
            "`instance` must be an Argo CD instance's name",
        ),
        (
            "instance-unknown.json",
            raw_answer(Some("mars"), &[("2025-10-02T16:00:00Z", ok_body.clone())]),
            "instance \"mars\", which this configuration does not have (configured: default, us)",
        ),
        (
            "text-body.json",
            serde_json::json!({"items": [{"received_at": "2025-10-02T16:00:00Z", "body": "hello {{app.metadata.name}}"}]})
                .to_string(),
            "text-body.json[items.0]",
        ),
        (
            "deep.json",
            format!(
                "{{\"items\": [{{\"received_at\": \"2025-10-02T16:00:00Z\", \"body\": {}1{}}}]}}",
                "[".repeat(5000),
                "]".repeat(5000)
            ),
            "deep.json",
        ),
    ] {
        let f = write(dir.path(), name, &text);
        let (code, out, err) = herald(&["route", "--config", &cfg, "--app", &f], &[]);
        assert_ne!(code, 0, "{name}: {out}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        // replay says it and goes on with the other files.
        let (code, out, err) = herald(&["replay", "--config", &cfg, &f], &[]);
        assert_eq!(code, 0, "{name}: {out}{err}");
        assert!(out.contains("→ refused") && out.contains(says), "{name}: {out}");
    }
}

#[test]
fn durations_refuse_a_capital_m_and_say_which_units_exist_in_config_and_on_the_command_line() {
    let dir = tempfile::tempdir().expect("tmp");
    for (yaml, path, says) in [
        (
            "teams: {t: {receivers: [console], escalation: [{after: 30M, receivers: [console]}]}}",
            "teams.t.escalation[0].after",
            "minutes are `m` (30m)",
        ),
        (
            "rules: {out_of_sync: {for: 30mn}}",
            "rules.out_of_sync.for",
            "\"mn\" is no unit (units: ms, s, m (minutes)",
        ),
        (
            "grouping: {group_wait: -30m}",
            "grouping.group_wait",
            "never negative (units: ms, s, m (minutes)",
        ),
        (
            "grouping: {group_interval: 30}",
            "grouping.group_interval",
            "30 has no unit",
        ),
        (
            "grouping: {repeat_interval: 1.5h}",
            "grouping.repeat_interval",
            "whole numbers only",
        ),
        (
            "grouping: {repeat_interval: [1h]}",
            "grouping.repeat_interval",
            "a duration such as 30s",
        ),
        (
            "storage: {raw_retention: 99999999999999999999999y}",
            "storage.raw_retention",
            "too long a duration",
        ),
    ] {
        let f = write(dir.path(), "d.yaml", yaml);
        let (code, out, err) = herald(&["check-config", &f], &[]);
        assert_eq!(code, 2, "{yaml}: {out}{err}");
        assert!(err.contains(path) && err.contains(says), "{yaml}: {err}");
    }
    // From the environment too, naming the variable.
    let ok = write(dir.path(), "ok.yaml", "");
    let (code, _, err) = herald(&["check-config", &ok], &[("HERALD__GROUPING__GROUP_WAIT", "30M")]);
    assert_eq!(code, 2);
    assert!(
        err.contains("minutes are `m`") && err.contains("HERALD__GROUPING__GROUP_WAIT"),
        "{err}"
    );
    // What was accepted before still is, meaning the same.
    let f = write(
        dir.path(),
        "d.yaml",
        "teams: {t: {receivers: [console], escalation: [{after: 1h 30m, receivers: [console]}]}}\nrules: {out_of_sync: {for: 90min}}\n",
    );
    let (code, out, err) = herald(&["check-config", &f], &[]);
    assert_eq!(code, 0, "{out}{err}");
    // The command line: replay --until, silence --duration, ack --for.
    let body = write(dir.path(), "b.json", &out_of_sync_from(None, "2025-10-02T16:00:00Z"));
    for (args, says) in [
        (
            vec!["replay", "--config", &ok, "--until", "+30M", &body],
            "minutes are `m`",
        ),
        (
            vec!["replay", "--config", &ok, "--until", "+30mn", &body],
            "units: ms, s, m (minutes)",
        ),
        (
            vec![
                "silence",
                "add",
                "app=x",
                "--comment",
                "c",
                "--duration",
                "30M",
                "--url",
                "http://127.0.0.1:9",
            ],
            "minutes are `m`",
        ),
        (
            vec!["ack", "1", "--for=-30m", "--url", "http://127.0.0.1:9"],
            "never negative",
        ),
    ] {
        let (code, out, err) = herald(&args, &[]);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn check_config_refuses_an_environment_list_that_drops_the_files_instance_bindings() {
    let dir = tempfile::tempdir().expect("tmp");
    for name in ["eu", "us"] {
        std::fs::write(dir.path().join(name), format!("{name}-ingest-token-0123456789\n")).expect("secret");
    }
    let f = write(
        dir.path(),
        "two.yaml",
        &format!(
            r#"
argocd:
  instances: [{{name: eu, url: "https://argocd.eu.example.com"}}, {{name: us, url: "https://argocd.us.example.com"}}]
server:
  auth:
    ingest_tokens:
      - {{name: argocd-eu, instance: eu, token_file: {d}/eu}}
      - {{name: argocd-us, instance: us, token_file: {d}/us}}
"#,
            d = dir.path().display()
        ),
    );
    let (code, out, err) = herald(&["check-config", &f], &[]);
    assert_eq!(code, 0, "{out}{err}");
    // The kit's old variable, left in a Deployment: the whole list, and its bindings, would be replaced.
    let token = "plain-ingest-token-0123456789";
    let (code, out, err) = herald(&["check-config", &f], &[("HERALD__SERVER__AUTH__INGEST_TOKENS", token)]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("server.auth.ingest_tokens: the environment variable HERALD__SERVER__AUTH__INGEST_TOKENS")
            && err.contains("(eu, us)")
            && err.contains("token_file"),
        "{err}"
    );
    assert!(
        !err.contains(token) && !err.contains("eu-ingest-token"),
        "no secret said: {err}"
    );
    // One entry's token from the environment merges into that entry, and keeps its binding.
    let by_entry = write(
        dir.path(),
        "by-entry.yaml",
        r#"
argocd:
  instances: [{name: eu, url: "https://argocd.eu.example.com"}, {name: us, url: "https://argocd.us.example.com"}]
server:
  auth:
    ingest_tokens: [{name: argocd-eu, instance: eu}, {name: argocd-us, instance: us}]
"#,
    );
    let (code, out, err) = herald(
        &["check-config", &by_entry],
        &[
            ("HERALD__SERVER__AUTH__INGEST_TOKENS__0__TOKEN", token),
            (
                "HERALD__SERVER__AUTH__INGEST_TOKENS__1__TOKEN",
                "other-ingest-token-0123456789",
            ),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
}

/// A receiver's template that does not render is a configuration error naming the receiver, the template key, the
/// line and what it was rendering, with exit 2 and no panic; a template that works for incidents but not for a
/// digest is refused only on a receiver that gets digests.
#[test]
fn check_config_renders_each_template_and_names_the_receiver_and_the_line_of_a_broken_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let broken = write(
        dir.path(),
        "broken.yaml",
        "receivers:\n\
         - name: payments-chat\n\
         \x20 mattermost: {webhook_url: 'https://chat.example.com/hooks/s3cr3t-hook-key-0123456789'}\n\
         \x20 template: \"{{ notification.title }}\\n{{ notification.title | no_such_filter }}\"\n\
         - name: payments-console\n\
         \x20 console: {}\n\
         \x20 template: \"{% for i in incidents %}\\n{{ i.app_name }}\"\n",
    );
    let (code, out, err) = herald(&["check-config", &broken], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains(
            "receivers[\"payments-chat\"].template: does not render: line 2: unknown filter: filter no_such_filter is \
             unknown (rendering a firing incident)"
        ),
        "{err}"
    );
    assert!(
        err.contains("receivers[\"payments-console\"].template: does not render: line 2: syntax error"),
        "{err}"
    );
    assert!(!err.contains("s3cr3t-hook-key"), "no secret in the error: {err}");

    // `incidents[0]` does not exist in a digest: refused on a chat receiver (it gets digests), not on a ticket one.
    let first_incident = "template: '{{ incidents[0].app_name }} is {{ incidents[0].condition }}'";
    let chat = write(
        dir.path(),
        "chat.yaml",
        &format!("receivers: [{{name: chat, console: {{}}, {first_incident}}}]"),
    );
    let (code, _, err) = herald(&["check-config", &chat], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("receivers[\"chat\"].template: does not render: line 1: undefined value")
            && err.contains("(rendering a digest)"),
        "{err}"
    );
    let tickets = write(
        dir.path(),
        "tickets.yaml",
        &format!(
            "receivers: [{{name: tickets, github: {{repo: acme/pay, token: ghp-0123456789abcdef}}, {first_incident}}}]"
        ),
    );
    let (code, out, err) = herald(&["check-config", &tickets], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("note: receivers[\"tickets\"].template: a github receiver takes no template; it is not used"),
        "{out}"
    );
}

/// `send-test --render` prints what the receiver would send, its template rendered, and sends nothing: the
/// receiver's server gets no request, and its webhook URL (a secret) is not printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_test_render_previews_the_templated_message_and_sends_nothing() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::any())
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("ok"))
        .expect(0)
        .named("anything sent")
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().expect("tmp");
    let hook = format!("{}/services/T0001/B0001/s3cr3tS3cr3tS3cr3t", server.uri());
    let cfg = write(
        dir.path(),
        "c.yaml",
        &format!(
            "receivers:\n\
             - name: team-slack\n\
             \x20 slack: {{webhook_url: '{hook}'}}\n\
             \x20 template: 'Heads up, {{{{ notification.reason }}}}: {{{{ notification.title }}}}'\n\
             - name: team-pager\n\
             \x20 pagerduty: {{routing_key: R0UT1NGK3Y0123456789abcdef012345, url: '{}/v2/enqueue'}}\n",
            server.uri()
        ),
    );
    let run = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            herald(&args, &[])
        })
    };
    let args = |name: &str| {
        vec![
            "send-test".into(),
            "--config".into(),
            cfg.clone(),
            "--render".into(),
            name.into(),
        ]
    };

    let (code, out, err) = run(args("team-slack")).await.expect("joined");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("team-slack (slack, with its template): what it would send; nothing is sent"),
        "{out}"
    );
    assert!(out.contains("---- the test: json ----"), "{out}");
    assert!(
        out.contains("Heads up, sent by `herald send-test` to check this receiver: [TEST] Herald test notification"),
        "the template, rendered: {out}"
    );
    assert!(
        !out.contains("s3cr3tS3cr3tS3cr3t") && !err.contains("s3cr3tS3cr3tS3cr3t"),
        "{out}{err}"
    );

    // A paging receiver: the trigger and the resolve that would close it, with the routing key a placeholder.
    let (code, out, err) = run(args("team-pager")).await.expect("joined");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("---- the test: json ----"), "{out}");
    assert!(out.contains("---- closing the test again: json ----"), "{out}");
    assert!(out.contains("ROUTING_KEY") && !out.contains("R0UT1NGK3Y"), "{out}");

    let (code, _, err) = run(args("nobody")).await.expect("joined");
    assert_eq!(code, 2);
    assert!(err.contains("configured: team-slack, team-pager"), "{err}");
    server.verify().await;
}

/// Every URL a configuration error names is shown without its user, password and query values: a non-http
/// homeserver, ticket system, Alertmanager, the Argo CD link and the public URL, each carrying credentials.
#[test]
fn check_config_hides_the_credentials_and_query_values_of_every_url_it_names() {
    let dir = tempfile::tempdir().expect("tmp");
    let yaml = r#"
server: {public_url: "ftp://pub-user:pubPass01@herald.example?sig=pubSig01"}
argocd: {url: "https://argo-user:argoPass01@argocd.example/?token=argoTok01"}
receivers:
  - {name: chat, matrix: {homeserver: "ftp://mx-user:mxPass01@matrix.example", room_id: "!r:example", access_token: t}}
  - {name: tickets, redmine: {url: "gopher://rm-user:rmPass01@redmine.example/?key=rmKey01", api_key: k, project_id: p, closed_status_id: 5}}
  - {name: am, alertmanager: {url: "file:///etc/am?token=amTok01"}}
  - {name: snow, servicenow: {instance_url: "ldap://sn-user:snPass01@snow.example", token: t}}
"#;
    let f = write(dir.path(), "urls.yaml", yaml);
    let (code, out, err) = herald(&["check-config", &f], &[]);
    assert_eq!(code, 2, "{out}{err}");
    for key in [
        "server.public_url",
        "argocd.url",
        "receivers[\"chat\"].matrix.homeserver",
        "receivers[\"tickets\"].redmine.url",
        "receivers[\"am\"].alertmanager.url",
        "receivers[\"snow\"].servicenow.instance_url",
    ] {
        assert!(err.contains(key), "{key} named: {err}");
    }
    for secret in [
        "pubPass01",
        "pubSig01",
        "argoPass01",
        "argoTok01",
        "mxPass01",
        "rmPass01",
        "rmKey01",
        "amTok01",
        "snPass01",
    ] {
        assert!(!format!("{out}{err}").contains(secret), "{secret} repeated: {out}{err}");
    }
    assert!(err.contains("\"ftp://***@matrix.example/\""), "{err}");
    assert!(err.contains("key=***"), "the query's names stay: {err}");
}
