use super::*;

const WINDOW: std::time::Duration = std::time::Duration::from_secs(120);
const CLUSTER: &str = "https://10.20.30.40:6443";

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-05T10:02:00Z")
        .expect("a time")
        .with_timezone(&Utc)
        + chrono::Duration::seconds(seconds)
}

/// `n` candidates of `kind` on `cluster` of `instance`, ids from `first`, one every `every` seconds from `start`.
fn many(first: i64, n: i64, instance: &str, cluster: &str, kind: Kind, start: i64, every: i64) -> Vec<Candidate> {
    (0..n)
        .map(|k| Candidate {
            id: first + k,
            instance: instance.into(),
            cluster: cluster.into(),
            kind,
            since: at(start + k * every),
        })
        .collect()
}

fn scope(instance: &str, cluster: &str, kind: Kind) -> Scope {
    Scope {
        instance: instance.into(),
        cluster: cluster.into(),
        kind,
    }
}

/// What `judge` opens: (scope, how many members).
fn opened(verdicts: &[Verdict]) -> Vec<(Scope, usize)> {
    (verdicts.iter())
        .filter_map(|v| match v {
            Verdict::Open { scope, members, .. } => Some((scope.clone(), members.len())),
            Verdict::Join { .. } => None,
        })
        .collect()
}

#[test]
fn detection() {
    let unknown = Kind::SyncUnknown;
    let mut two_clusters = many(1, 10, "default", CLUSTER, unknown, 0, 5);
    two_clusters.extend(many(100, 9, "default", "https://other:6443", unknown, 0, 5));
    let mut spread = many(1, 5, "default", "a", unknown, 0, 5);
    spread.extend(many(100, 5, "default", "b", unknown, 0, 5));
    let mut mixed = many(1, 6, "default", CLUSTER, unknown, 0, 5);
    mixed.extend(many(100, 6, "default", CLUSTER, Kind::Degraded, 0, 5));
    let mut late = many(1, 10, "default", CLUSTER, unknown, 0, 5);
    late.extend(many(100, 3, "default", CLUSTER, unknown, 3600, 5));
    let mut instances = many(1, 5, "default", CLUSTER, unknown, 0, 5);
    instances.extend(many(100, 5, "us", CLUSTER, unknown, 0, 5));
    // (candidates, min_apps, storms opened, why)
    type Case = (Vec<Candidate>, usize, Vec<(Scope, usize)>, &'static str);
    let cases: Vec<Case> = vec![
        (
            many(1, 9, "default", CLUSTER, unknown, 0, 5),
            10,
            vec![],
            "below the threshold",
        ),
        (
            many(1, 10, "default", CLUSTER, unknown, 0, 5),
            10,
            vec![(scope("default", CLUSTER, unknown), 10)],
            "ten in 45 seconds",
        ),
        (
            many(1, 10, "default", CLUSTER, unknown, 0, 20),
            10,
            vec![],
            "ten over three minutes: never ten within two",
        ),
        (
            many(1, 40, "default", CLUSTER, unknown, 0, 1),
            10,
            vec![(scope("default", CLUSTER, unknown), 40)],
            "forty in a minute: all of them",
        ),
        (
            two_clusters,
            10,
            vec![(scope("default", CLUSTER, unknown), 10)],
            "two clusters: the one with ten; the other's nine stay themselves",
        ),
        (
            spread,
            10,
            vec![(scope("default", "", unknown), 10)],
            "five on each of two clusters: a storm of the instance",
        ),
        (
            mixed,
            10,
            vec![],
            "six Unknown and six Degraded are two problems, neither a storm",
        ),
        (
            late,
            10,
            vec![(scope("default", CLUSTER, unknown), 13)],
            "later ones of the same cluster and problem are members too",
        ),
        (instances, 10, vec![], "two Argo CD instances are never one storm"),
        (
            many(1, 40, "default", CLUSTER, unknown, 0, 1),
            0,
            vec![],
            "min_apps 0: no storms",
        ),
    ];
    for (candidates, min_apps, want, why) in cases {
        let got = opened(&judge(&candidates, &[], min_apps, WINDOW));
        assert_eq!(got, want, "{why}");
    }
}

#[test]
fn a_storm_starts_at_its_first_burst() {
    // An Application Unknown for an hour is not part of the cluster's storm that starts later.
    let mut list = many(1, 1, "default", CLUSTER, Kind::SyncUnknown, -3600, 0);
    list.extend(many(10, 10, "default", CLUSTER, Kind::SyncUnknown, 0, 3));
    let got = judge(&list, &[], 10, WINDOW);
    assert_eq!(
        got,
        vec![Verdict::Open {
            scope: scope("default", CLUSTER, Kind::SyncUnknown),
            since: at(0),
            members: (10..20).collect(),
        }]
    );
}

#[test]
fn incidents_join_the_open_storm_of_their_cluster_else_of_their_instance() {
    let open = vec![
        OpenStorm {
            id: 7,
            scope: scope("default", CLUSTER, Kind::SyncUnknown),
            since: at(0),
            ended_at: None,
        },
        OpenStorm {
            id: 8,
            scope: scope("default", "", Kind::SyncUnknown),
            since: at(0),
            ended_at: None,
        },
        OpenStorm {
            id: 9,
            scope: scope("default", "https://ended:6443", Kind::SyncUnknown),
            since: at(0),
            ended_at: Some(at(60)),
        },
    ];
    let mut list = many(1, 2, "default", CLUSTER, Kind::SyncUnknown, 30, 1);
    list.extend(many(10, 1, "default", "https://else:6443", Kind::SyncUnknown, 30, 1));
    list.extend(many(20, 1, "default", CLUSTER, Kind::SyncUnknown, -30, 1));
    list.extend(many(30, 1, "default", CLUSTER, Kind::Degraded, 30, 1));
    list.extend(many(40, 1, "default", "https://ended:6443", Kind::SyncUnknown, 90, 1));
    let got = judge(&list, &open, 10, WINDOW);
    assert_eq!(
        got,
        vec![
            Verdict::Join {
                storm: 7,
                members: vec![1, 2]
            },
            Verdict::Join {
                storm: 8,
                members: vec![10, 40]
            },
        ],
        "one that began before the storm, another problem, joins nothing; an ended storm takes nobody"
    );
}

#[test]
fn a_storm_holds_while_open_and_for_its_window_after() {
    let mut storm = OpenStorm {
        id: 1,
        scope: scope("default", CLUSTER, Kind::SyncUnknown),
        since: at(0),
        ended_at: None,
    };
    assert!(storm.holds(WINDOW, at(3600)));
    storm.ended_at = Some(at(600));
    assert!(storm.holds(WINDOW, at(719)));
    assert!(!storm.holds(WINDOW, at(720)));
}

#[test]
fn a_storm_is_over_when_more_than_half_recovered() {
    for (members, recovered, want) in [
        (40, 20, false),
        (40, 21, true),
        (0, 0, true),
        (3, 1, false),
        (3, 2, true),
    ] {
        assert_eq!(over(members, recovered), want, "{recovered} of {members}");
    }
}

fn member(app: &str, team: &str, message: &str, state: IncidentState) -> Incident {
    Incident {
        app_name: app.into(),
        team: team.into(),
        state,
        messages: vec![message.into()],
        ..Default::default()
    }
}

#[test]
fn a_storm_says_what_they_share() {
    let refused = "ComparisonError: Failed to load live state: Get \"https://10.20.30.40:6443/version\": dial tcp \
                   10.20.30.40:6443: connect: connection refused";
    let mut members: Vec<Incident> = (1..=3)
        .map(|k| member(&format!("pay-{k}"), "payments", refused, IncidentState::Firing))
        .collect();
    members.push(member("cart", "shop", refused, IncidentState::Resolved));
    let d = describe(
        &scope("default", CLUSTER, Kind::SyncUnknown),
        at(0),
        &members,
        false,
        crate::domain::Zone::UTC,
    );
    assert_eq!(
        d.summary,
        "cluster https://10.20.30.40:6443: 4 Applications Unknown since 10:02 UTC (connection refused), 1 recovered"
    );
    assert_eq!(
        d.messages,
        vec![
            format!("They all say: {refused}"),
            "team payments: pay-1, pay-2, pay-3".to_string(),
            "team shop: cart (recovered)".to_string(),
        ]
    );
    members[0].messages = vec!["ComparisonError: something else".into()];
    let d = describe(
        &scope("us", "", Kind::Degraded),
        at(0),
        &members,
        false,
        crate::domain::Zone::UTC,
    );
    assert_eq!(
        d.summary, "Argo CD instance us: 4 Applications Degraded since 10:02 UTC, 1 recovered",
        "no shared message: no cause"
    );
    let d = describe(
        &scope("default", CLUSTER, Kind::SyncUnknown),
        at(0),
        &members,
        true,
        crate::domain::Zone::UTC,
    );
    assert_eq!(
        d.condition, "4 Applications Unknown since 10:02 UTC",
        "over: its resolution says how many recovered"
    );
}
