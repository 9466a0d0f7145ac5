use super::*;
use serde_json::json;

/// Monday 2026-01-05 at `hh:mm` UTC.
fn at(hm: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(&format!("2026-01-05T{hm}:00Z"))
        .expect("a time")
        .with_timezone(&Utc)
}

fn window(w: Value) -> SyncWindow {
    parse_one(&w).unwrap_or_else(|e| panic!("{w}: {e}"))
}

const PAY: Target = Target {
    name: "pay-api",
    namespace: "payments",
    server: Some("https://kubernetes.default.svc"),
    cluster_name: None,
};

#[test]
fn whether_and_until_when_windows_block_a_sync() {
    let deny_10_12 = json!({"kind": "deny", "schedule": "0 10 * * *", "duration": "2h", "applications": ["*"]});
    let manual = json!({"kind": "deny", "schedule": "0 10 * * *", "duration": "2h", "applications": ["pay-*"], "manualSync": true});
    let allow_18 = json!({"kind": "allow", "schedule": "0 18 * * *", "duration": "1h", "namespaces": ["pay*"]});
    let allow_18_manual = json!({"kind": "allow", "schedule": "0 18 * * *", "duration": "1h", "namespaces": ["pay*"], "manualSync": true});
    let other_app = json!({"kind": "deny", "schedule": "0 10 * * *", "duration": "2h", "applications": ["cart"]});
    let chained =
        json!({"kind": "deny", "schedule": "30 11 * * *", "duration": "3h", "clusters": ["https://kubernetes.*"]});
    let paris = json!({"kind": "deny", "schedule": "0 10 * * *", "duration": "2h", "applications": ["*"], "timeZone": "Europe/Paris"});
    // (windows, now, blocked until (HH:MM, manual sync allowed), why)
    type Case<'a> = (Vec<Value>, &'a str, Option<(&'a str, bool)>, &'a str);
    let cases: Vec<Case> = vec![
        (vec![], "11:00", None, "no window: every sync may run"),
        (
            vec![deny_10_12.clone()],
            "11:00",
            Some(("12:00", false)),
            "inside a deny window: until it ends",
        ),
        (vec![deny_10_12.clone()], "09:59", None, "before the deny window"),
        (
            vec![deny_10_12.clone()],
            "10:00",
            None,
            "at its very start it is not open yet (Argo CD's Active)",
        ),
        (vec![deny_10_12.clone()], "12:00", None, "at its end it is closed"),
        (
            vec![manual.clone()],
            "11:00",
            Some(("12:00", true)),
            "a deny window that allows manual syncs",
        ),
        (
            vec![manual, deny_10_12.clone()],
            "11:00",
            Some(("12:00", false)),
            "manual only when every deny allows it",
        ),
        (
            vec![allow_18.clone()],
            "11:00",
            Some(("18:00", false)),
            "outside every allow window: until the next opens",
        ),
        (vec![allow_18.clone()], "18:30", None, "inside the allow window"),
        (
            vec![allow_18_manual],
            "11:00",
            Some(("18:00", true)),
            "closed allow windows that allow manual syncs",
        ),
        (
            vec![allow_18.clone(), deny_10_12.clone()],
            "18:30",
            None,
            "an open allow, no open deny",
        ),
        (
            vec![other_app],
            "11:00",
            None,
            "a window assigned to another Application",
        ),
        (
            vec![deny_10_12.clone(), chained],
            "11:00",
            Some(("14:30", false)),
            "a second deny starting inside the first",
        ),
        (
            vec![paris.clone()],
            "11:00",
            None,
            "10:00 in Paris is 09:00 UTC: over at 11:00 UTC",
        ),
        (
            vec![paris],
            "10:30",
            Some(("11:00", false)),
            "the window in its own time zone",
        ),
    ];
    for (windows, now, expected, why) in cases {
        let windows: Vec<SyncWindow> = windows.into_iter().map(window).collect();
        let got = blocked(&windows, &PAY, at(now)).map(|b| (b.until.format("%H:%M").to_string(), b.manual_sync));
        let expected = expected.map(|(t, m)| (t.to_string(), m));
        assert_eq!(got, expected, "{why}");
    }
}

#[test]
fn which_applications_a_window_is_assigned_to() {
    let named = Target {
        cluster_name: Some("prod-eu"),
        server: Some("https://10.0.0.1"),
        ..PAY
    };
    // (window's lists, target, assigned, why)
    let cases: Vec<(Value, Target, bool, &str)> = vec![
        (json!({"applications": ["pay-*"]}), PAY, true, "a glob on the name"),
        (json!({"applications": ["cart"]}), PAY, false, "another name"),
        (
            json!({"namespaces": ["pay?ents"]}),
            PAY,
            true,
            "a glob on the destination namespace",
        ),
        (
            json!({"clusters": ["prod-*"]}),
            named,
            true,
            "the destination cluster by name",
        ),
        (
            json!({"clusters": ["https://10.*"]}),
            named,
            true,
            "the destination cluster by server",
        ),
        (json!({"clusters": ["prod-*"]}), PAY, false, "no cluster name to match"),
        (
            json!({"applications": ["cart"], "namespaces": ["payments"]}),
            PAY,
            true,
            "any list matching (OR)",
        ),
        (
            json!({"applications": ["cart"], "namespaces": ["payments"], "andOperator": true}),
            PAY,
            false,
            "AND: the name does not match",
        ),
        (
            json!({"applications": ["pay-*"], "namespaces": ["payments"], "andOperator": true}),
            PAY,
            true,
            "AND: both match",
        ),
        (
            json!({"applications": ["pay-*"], "clusters": ["prod-*"], "andOperator": true}),
            PAY,
            false,
            "AND: the cluster does not match",
        ),
        (json!({}), PAY, false, "no list: assigned to nothing"),
    ];
    for (lists, target, expected, why) in cases {
        let mut w = json!({"kind": "deny", "schedule": "0 10 * * *", "duration": "1h"});
        w.as_object_mut()
            .expect("an object")
            .extend(lists.as_object().expect("an object").clone());
        assert_eq!(window(w).assigned(&target), expected, "{why}");
    }
}

#[test]
fn a_window_that_cannot_be_read_is_left_out_and_the_others_kept() {
    let spec = json!({"syncWindows": [
        {"kind": "deny", "schedule": "0 25 * * *", "duration": "1h", "applications": ["*"]},
        {"kind": "deny", "schedule": "0 0 10 * * *", "duration": "1h", "applications": ["*"]},
        {"kind": "deny", "schedule": "@daily", "duration": "1h", "applications": ["*"]},
        {"kind": "block", "schedule": "0 10 * * *", "duration": "1h", "applications": ["*"]},
        {"kind": "deny", "schedule": "0 10 * * *", "duration": "one hour", "applications": ["*"]},
        {"kind": "deny", "schedule": "0 10 * * *", "duration": "1h", "timeZone": "Mars/Olympus", "applications": ["*"]},
        {"kind": "deny", "schedule": "0 10 * * *", "duration": "1h30m", "applications": ["*"]},
        "not a window"
    ]});
    let windows = parse("payments", &spec);
    assert_eq!(windows.len(), 1, "{windows:?}");
    assert_eq!(blocked(&windows, &PAY, at("11:00")).map(|b| b.until), Some(at("11:30")));
    assert!(parse("payments", &json!({})).is_empty());
    assert!(parse("payments", &json!({"syncWindows": "nonsense"})).is_empty());
}

#[test]
fn durations_are_read_as_go_writes_them() {
    for (text, seconds) in [
        ("2h", 7200),
        ("1h30m", 5400),
        ("90m", 5400),
        ("1.5h", 5400),
        ("45s", 45),
        ("1h0m0s", 3600),
    ] {
        assert_eq!(go_duration(text), Ok(Duration::seconds(seconds)), "{text}");
    }
    for bad in ["", "2", "h", "2d", "-1h", "0s", "1h 30m"] {
        assert!(go_duration(bad).is_err(), "{bad} is not a Go duration");
    }
}

#[test]
fn a_day_of_month_schedule_is_not_every_day() {
    // Standard cron: a restricted day of month with `*` for the day of week means that day only.
    let w = window(json!({"kind": "deny", "schedule": "0 10 1 * *", "duration": "2h", "applications": ["*"]}));
    assert!(!w.active(at("11:00")), "5 January is not the 1st");
    let allow = window(json!({"kind": "allow", "schedule": "0 10 * * 1-5", "duration": "8h", "applications": ["*"]}));
    assert!(allow.active(at("11:00")), "Monday is a weekday");
}

#[test]
fn a_block_beyond_the_look_ahead_is_told_until_its_end() {
    let yearly = window(json!({"kind": "allow", "schedule": "0 0 1 6 *", "duration": "1h", "applications": ["*"]}));
    let b = blocked(&[yearly], &PAY, at("11:00")).expect("blocked");
    assert_eq!(b.until, at("11:00") + LOOK_AHEAD);
}
