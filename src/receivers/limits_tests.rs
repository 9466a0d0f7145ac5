//! Every chat receiver's message fits its service's documented limits, for a digest of 1,000 Applications and a
//! group of 500 incidents, and every list it cuts says how many rows are left out and, with `server.public_url`,
//! links to the status page filtered to the team (a digest's and a group's alike).

use chrono::Duration;
use serde_json::Value;

use super::testing;
use super::{discord, googlechat, matrix, mattermost, msteams, slack, telegram};
use crate::domain::digest::{Digest, FiringIncident, OutOfSyncApp};
use crate::domain::{Action, Kind, Notification};

const APPS: usize = 1000;
const GROUP: usize = 500;
/// The rows a cut list shows at least (Google Chat, with 4,096 characters in all, shows 15).
const MIN: usize = 40;
const STATUS: &str = "https://herald.example.com/?team=payments";
const GROUP_STATUS: &str = "https://herald.example.com/?team=platform";

/// A digest of 1,000 Applications OutOfSync and 1,000 incidents firing, with realistic names and links. The
/// OutOfSync ones are named `oos-…` and the firing ones `fire-…`, so a rendering's rows can be counted.
pub(super) fn big_digest() -> Notification {
    let at = testing::now();
    let d = Digest {
        team: "payments".into(),
        at,
        timezone: "Europe/Berlin".into(),
        out_of_sync: (0..APPS)
            .map(|k| OutOfSyncApp {
                app: format!("argocd/oos-{k:04}-payments-api-europe-west"),
                since: at - Duration::hours(50),
                revision: Some("3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5".into()),
                pruning: 2,
                url: Some(format!("https://argocd.example.com/applications/argocd/a{k}")),
            })
            .collect(),
        firing: (0..APPS)
            .map(|k| FiringIncident {
                app: format!("argocd/fire-{k:04}-checkout"),
                problem: "Degraded: Deployment/checkout has 0/3 ready replicas".into(),
                summary: String::new(),
                since: at - Duration::minutes(90),
            })
            .collect(),
        status_url: Some(STATUS.into()),
        ..Default::default()
    };
    crate::receivers::render::digest::tests::notification(d)
}

/// One notification about 500 Applications OutOfSync (`grp-…`), as a group of team platform is sent.
pub(super) fn big_group() -> Notification {
    let mut n = testing::notification(Action::Open);
    n.title = format!("OutOfSync on {GROUP} Applications of team platform");
    *crate::receivers::testing::incidents_of(&mut n) = (0..GROUP)
        .map(|k| {
            let mut i = testing::incident();
            i.id = k as i64 + 1;
            i.kind = Kind::OutOfSync;
            i.fingerprint = format!("fp-{k}");
            i.app_name = format!("grp-{k:04}-inventory-service");
            i.app_url = Some(format!("https://argocd.example.com/applications/argocd/g{k}"));
            i.team = "platform".into();
            i
        })
        .collect();
    let n = n.with_status_page(Some("https://herald.example.com"));
    assert_eq!(n.status_url.as_deref(), Some(GROUP_STATUS));
    n
}

/// The numbers of every `… and N more` in `text`, in order.
fn mores(text: &str) -> Vec<usize> {
    text.split("… and ")
        .skip(1)
        .filter_map(|rest| rest.split_once(" more").and_then(|(n, _)| n.parse().ok()))
        .collect()
}

/// Every row of a list (its rows named `prefix…`) is either shown or counted in its one `… and N more`, and at
/// least `min` are shown (shorter lines keep rows). Returns whether the list was cut.
fn assert_accounted(what: &str, text: &str, prefix: &str, total: usize, min: usize) -> bool {
    let shown = text.matches(prefix).count();
    let counts = mores(text);
    assert!(counts.len() <= 1, "{what}: {counts:?}");
    let more = counts.first().copied().unwrap_or(0);
    assert_eq!(shown + more, total, "{what}: {shown} shown of {total}, {more} counted");
    assert!(shown >= min, "{what}: shorter lines keep rows, only {shown} shown");
    more > 0
}

/// Both parts of the digest accounted for; the first is cut, and each cut links to the team's status page.
pub(super) fn assert_digest_accounted(what: &str, text: &str, min: usize) {
    let (oos, firing) = text.split_once("Incidents firing").expect("both parts");
    assert!(
        assert_accounted(what, oos, "oos-", APPS, min),
        "{what}: 1,000 long rows are cut"
    );
    let cut = usize::from(assert_accounted(what, firing, "fire-", APPS, min));
    assert_eq!(
        text.matches(STATUS).count(),
        1 + cut,
        "{what}: each cut links to the team's status page"
    );
}

/// Every incident of the group shown or counted (Slack's 46 sections hold all 500 shorter lines); a cut links to
/// the team's status page, and a list shown whole does not.
pub(super) fn assert_group_accounted(what: &str, text: &str, min: usize) {
    let cut = assert_accounted(what, text, "grp-", GROUP, min);
    assert_eq!(
        text.matches(GROUP_STATUS).count(),
        usize::from(cut),
        "{what}: a cut links to the team's status page"
    );
}

/// The receivers that cut the group of 500 (all but Slack, whose 46 sections hold every shorter line).
#[test]
fn every_receiver_that_cuts_the_group_links_the_cut_to_the_teams_status_page() {
    let n = big_group();
    let cut = |what: &str, text: &str| {
        assert!(
            text.contains("more on ") && text.matches(GROUP_STATUS).count() == 1,
            "{what}: the cut links to {GROUP_STATUS}"
        )
    };
    cut("teams", &msteams::teams_message(&n).to_string());
    cut("google chat", &googlechat::google_chat_text(&n));
    cut("mattermost", &mattermost::text(&n));
    cut("discord", &discord::message(&n, None).to_string());
    cut("telegram", &telegram::text(&n));
    let event = matrix::message(&n, None);
    cut("matrix body", event["body"].as_str().expect("body"));
    let html = event["formatted_body"].as_str().expect("html");
    assert!(
        html.contains(&format!("<a href=\"{GROUP_STATUS}\">the status page</a>")),
        "{html}"
    );
    // Without server.public_url the cut still counts, with no link.
    let mut bare = big_group();
    bare.status_url = None;
    let text = mattermost::text(&bare);
    assert!(
        !mores(&text).is_empty() && !text.contains("herald.example.com"),
        "{text}"
    );
}

/// Slack: at most 50 blocks, 3,000 characters in a section, 150 in the header, 40,000 in `text`.
fn assert_slack_limits(what: &str, message: &Value) -> String {
    let blocks = message["blocks"].as_array().expect("blocks");
    assert!(blocks.len() <= 50, "{what}: {} blocks", blocks.len());
    let mut all = String::new();
    for b in blocks {
        let text = b["text"]["text"].as_str().unwrap_or_default();
        let limit = if b["type"] == "header" { 150 } else { 3000 };
        assert!(
            text.chars().count() <= limit,
            "{what}: {} characters in a {}",
            text.chars().count(),
            b["type"]
        );
        all.push_str(text);
        all.push('\n');
    }
    assert!(
        message["text"].as_str().unwrap_or_default().chars().count() <= 40_000,
        "{what}"
    );
    all
}

#[test]
fn slack_stays_within_its_block_and_text_limits_and_counts_what_it_leaves_out() {
    let text = assert_slack_limits("digest", &slack::preview(&big_digest()));
    assert_digest_accounted("slack digest", &text, MIN);
    let text = assert_slack_limits("group", &slack::preview(&big_group()));
    assert_group_accounted("slack group", &text, MIN);
}

#[test]
fn a_teams_card_stays_under_28_kb_and_counts_what_it_leaves_out() {
    for (what, n) in [("digest", big_digest()), ("group", big_group())] {
        let card = msteams::teams_message(&n).to_string();
        assert!(card.len() <= 28_000, "teams {what}: {} bytes", card.len());
        let text: Vec<String> =
            serde_json::from_str::<Value>(&card).expect("json")["attachments"][0]["content"]["body"]
                .as_array()
                .expect("body")
                .iter()
                .map(|b| b.to_string())
                .collect();
        let text = text.join("\n");
        match what {
            "digest" => assert_digest_accounted("teams digest", &text, MIN),
            _ => assert_group_accounted("teams group", &text, MIN),
        }
    }
}

#[test]
fn google_chat_stays_within_4096_characters_and_counts_what_it_leaves_out() {
    let text = googlechat::google_chat_text(&big_digest());
    assert!(text.chars().count() <= 4096, "{}", text.chars().count());
    assert_digest_accounted("google chat digest", &text, 15);
    let text = googlechat::google_chat_text(&big_group());
    assert!(text.chars().count() <= 4096, "{}", text.chars().count());
    assert_group_accounted("google chat group", &text, 15);
}

#[test]
fn mattermost_stays_within_16383_characters_and_counts_what_it_leaves_out() {
    let text = mattermost::text(&big_digest());
    assert!(text.chars().count() <= 16_383, "{}", text.chars().count());
    assert_digest_accounted("mattermost digest", &text, MIN);
    let text = mattermost::text(&big_group());
    assert!(text.chars().count() <= 16_383, "{}", text.chars().count());
    assert_group_accounted("mattermost group", &text, MIN);
}

#[test]
fn a_matrix_event_stays_under_65536_bytes_keeps_its_html_and_counts_what_it_leaves_out() {
    for (what, n) in [("digest", big_digest()), ("group", big_group())] {
        let event = matrix::message(&n, None);
        let bytes = event.to_string().len();
        // The event's envelope (sender, room, signatures) takes the rest of the 65,536 bytes.
        assert!(bytes <= 63_000, "matrix {what}: {bytes} bytes");
        let body = event["body"].as_str().expect("body");
        let html = event["formatted_body"]
            .as_str()
            .expect("the HTML is kept, not dropped for its size");
        match what {
            "digest" => {
                assert_digest_accounted("matrix body", body, MIN);
                assert_digest_accounted("matrix html", html, MIN);
            }
            _ => {
                assert_group_accounted("matrix body", body, MIN);
                assert_group_accounted("matrix html", html, MIN);
            }
        }
    }
}

/// Discord: at most 10 embeds, 6,000 characters in all (titles, descriptions, field names and values, footers,
/// authors), 25 fields an embed, and each text within its own limit. Returns the message's texts.
fn assert_discord_limits(what: &str, message: &Value) -> String {
    let embeds = message["embeds"].as_array().expect("embeds");
    assert!(embeds.len() <= discord::MAX_EMBEDS, "{what}: {} embeds", embeds.len());
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let mut all = String::new();
    let mut total = 0;
    for e in embeds {
        let fields = e["fields"].as_array().cloned().unwrap_or_default();
        assert!(fields.len() <= discord::MAX_FIELDS, "{what}: {} fields", fields.len());
        let limited = [
            (text(&e["title"]), discord::MAX_TITLE),
            (text(&e["description"]), discord::MAX_DESCRIPTION),
            (text(&e["footer"]["text"]), 2048),
            (text(&e["author"]["name"]), 256),
        ];
        let fields = fields.iter().flat_map(|f| {
            [
                (text(&f["name"]), discord::MAX_FIELD_NAME),
                (text(&f["value"]), discord::MAX_FIELD_VALUE),
            ]
        });
        for (s, limit) in limited.into_iter().chain(fields) {
            assert!(
                discord::len(&s) <= limit,
                "{what}: {} characters over {limit}",
                discord::len(&s)
            );
            total += discord::len(&s);
            all.push_str(&s);
            all.push('\n');
        }
    }
    assert!(total <= discord::MAX_TOTAL, "{what}: {total} characters in all");
    all
}

#[test]
fn discord_stays_within_its_embed_limits_and_counts_what_it_leaves_out() {
    let text = assert_discord_limits("digest", &discord::message(&big_digest(), None));
    assert_digest_accounted("discord digest", &text, 15);
    let text = assert_discord_limits("group", &discord::message(&big_group(), None));
    assert_group_accounted("discord group", &text, 15);
}

#[test]
fn telegram_stays_within_4096_characters_after_its_tags_are_read_and_counts_what_it_leaves_out() {
    let len = crate::receivers::render::telegram_len;
    let text = telegram::text(&big_digest());
    assert!(len(&text) <= telegram::MAX_TEXT, "{}", len(&text));
    assert_digest_accounted("telegram digest", &text, 15);
    let text = telegram::text(&big_group());
    assert!(len(&text) <= telegram::MAX_TEXT, "{}", len(&text));
    assert_group_accounted("telegram group", &text, 15);
}
