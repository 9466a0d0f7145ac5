//! Text from Argo CD cannot act in what people read. A property test feeds arbitrary strings (hostile fragments
//! mixed with any characters) into every text field of a notification, renders it for every kind of receiver, and
//! compares what the target would act on — mentions, links, images, HTML, line breaks — with the rendering of the
//! same notification whose fields are plain words: anything more was put there by the input. (Less is allowed: a
//! long input makes a target's length limit cut the text.)

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use serde_json::Value;

use super::ReceiverType;
use super::preview::{Markup, Part, preview};
use super::render::escape::{WORD_JOINER, message_lines};
use super::testing;
use crate::domain::digest::{Digest, OutOfSyncApp};
use crate::domain::{Action, Body, Hint, Incident, Notification, ResourceRef};

const FRAGMENTS: &[&str] = &[
    "<!channel>",
    "<!here>",
    "@channel",
    "@all",
    "@here",
    "<users/all>",
    "<@U024BE7LH>",
    "<https://evil.example|click>",
    "[click me](https://evil.example)",
    "![beacon](https://evil.example/p.png)",
    "<img src=x onerror=alert(1)>",
    "<nil>",
    "<at>everyone</at>",
    "[~admin]",
    "!image.png!",
    "{noformat}",
    "\n# heading\n",
    "\r\n- item",
    "\u{2028}",
    "\u{1b}[31m",
    "```",
    "`",
    "*",
    "_",
    "|",
    "\\",
    "&lt;",
    "](",
    "<",
    ">",
    "@",
    " ",
    "x",
];

fn hostile() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => proptest::sample::select(FRAGMENTS).prop_map(str::to_string),
        1 => any::<char>().prop_map(String::from),
    ];
    proptest::collection::vec(piece, 0..8).prop_map(|v| v.concat())
}

/// Every text field of a notification, and whether it is a multi-line message.
fn fields(n: &mut Notification) -> Vec<(&mut String, bool)> {
    let mut out: Vec<(&mut String, bool)> = vec![(&mut n.title, false), (&mut n.reason, false)];
    let incidents: &mut [Incident] = match &mut n.body {
        Body::Incidents(list) => list,
        _ => &mut [],
    };
    for i in incidents {
        for s in [
            &mut i.summary,
            &mut i.app_namespace,
            &mut i.app_name,
            &mut i.project,
            &mut i.team,
            &mut i.destination_cluster,
            &mut i.destination_namespace,
        ] {
            out.push((s, false));
        }
        for s in [
            &mut i.revision,
            &mut i.previous_revision,
            &mut i.initiated_by,
            &mut i.resolution,
        ]
        .into_iter()
        .flatten()
        {
            out.push((s, false));
        }
        for r in &mut i.resources {
            for s in [
                &mut r.kind,
                &mut r.namespace,
                &mut r.name,
                &mut r.status,
                &mut r.message,
            ] {
                out.push((s, false));
            }
        }
        for m in &mut i.messages {
            out.push((m, true));
        }
        for h in &mut i.hints {
            out.push((&mut h.title, false));
            out.push((&mut h.text, false));
        }
        for note in &mut i.notes {
            out.push((note, false));
        }
        for s in &mut i.sources {
            out.push((&mut s.repo_url, false));
            for part in [&mut s.path, &mut s.chart, &mut s.target_revision, &mut s.revision]
                .into_iter()
                .flatten()
            {
                out.push((part, false));
            }
        }
        if let Some(d) = &mut i.deployment {
            for image in &mut d.images {
                out.push((&mut image.image, false));
                out.extend(
                    [&mut image.from, &mut image.to]
                        .into_iter()
                        .flatten()
                        .map(|s| (s, false)),
                );
            }
            for c in &mut d.sources {
                out.push((&mut c.repo_url, false));
                out.extend(
                    [&mut c.chart, &mut c.from, &mut c.to]
                        .into_iter()
                        .flatten()
                        .map(|s| (s, false)),
                );
            }
        }
    }
    out
}

/// Two incidents with every section a rendering has, each field filled from `values` in turn.
fn notification(values: &[String]) -> Notification {
    let mut n = testing::notification(Action::Open);
    let mut i: Incident = testing::incident();
    i.revision = Some(String::new());
    i.previous_revision = Some(String::new());
    i.initiated_by = Some(String::new());
    i.resolution = Some(String::new());
    i.resources.push(ResourceRef::default());
    i.messages.push(String::new());
    i.hints.push(Hint::default());
    i.notes.push(String::new());
    i.sources.push(crate::domain::incident::SourceRevision {
        path: Some(String::new()),
        chart: Some(String::new()),
        target_revision: Some(String::new()),
        revision: Some(String::new()),
        ..Default::default()
    });
    // What a deployment changed: an image, a Git source and a chart, each text from Argo CD.
    i.deployment = Some(crate::domain::Deployment {
        images: vec![crate::domain::ImageChange {
            from: Some(String::new()),
            to: Some(String::new()),
            ..Default::default()
        }],
        sources: vec![
            crate::domain::SourceChange {
                from: Some(String::new()),
                to: Some(String::new()),
                ..Default::default()
            },
            crate::domain::SourceChange {
                chart: Some(String::new()),
                from: Some(String::new()),
                to: Some(String::new()),
                ..Default::default()
            },
        ],
        ..Default::default()
    });
    *crate::receivers::testing::incidents_of(&mut n) = vec![i.clone(), Incident { id: 8, ..i }];
    for (k, (field, _)) in fields(&mut n).into_iter().enumerate() {
        *field = values[k % values.len()].clone();
    }
    n
}

/// The same notification with plain words: the same emptiness, equal fields equal (one Application stays one),
/// the same number of message lines.
fn plain_words(n: &Notification) -> Notification {
    let mut plain = n.clone();
    let mut words = Words::default();
    for (field, multiline) in fields(&mut plain) {
        *field = words.plain(field, multiline);
    }
    plain
}

/// Plain words for fields: equal fields get equal words.
#[derive(Default)]
struct Words(Vec<String>);

impl Words {
    fn word(&mut self, s: &str) -> String {
        let k = self.0.iter().position(|w| w == s).unwrap_or_else(|| {
            self.0.push(s.to_string());
            self.0.len() - 1
        });
        format!("w{k}")
    }

    /// `field` as plain words: the same emptiness and, for a message, the same number of lines.
    fn plain(&mut self, field: &str, multiline: bool) -> String {
        match (field.is_empty(), field.trim().is_empty(), multiline) {
            (true, _, _) => String::new(),
            (false, true, _) => " ".into(),
            (false, false, false) => self.word(field),
            (false, false, true) => match message_lines(field).len() {
                0 => " ".into(),
                lines => (0..lines).map(|_| self.word(field)).collect::<Vec<_>>().join("\n"),
            },
        }
    }
}

/// Every string inside a JSON value.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// A mention as chats read one: `@` and a word, at the start of a word (not after a letter or digit, as in
/// `alice@example.com`) and not inside a URL (the run of characters up to a space or delimiter holds `://`).
fn mention_at(chars: &[char], k: usize) -> bool {
    if chars[k] != '@' || !chars.get(k + 1).is_some_and(|c| c.is_alphanumeric()) {
        return false;
    }
    if k > 0 && chars[k - 1].is_alphanumeric() {
        return false;
    }
    let delimiter = |c: &char| c.is_whitespace() || c.is_control() || "<>|\"'()[]`".contains(*c);
    let word: String = chars[..k].iter().rev().take_while(|c| !delimiter(c)).collect();
    let word: String = word.chars().rev().collect();
    let in_url = word.contains("://") || word.to_ascii_lowercase().contains("mailto:");
    let name: String = chars[k + 1..].iter().take_while(|c| c.is_alphanumeric()).collect();
    // Everyone's mentions are read even in a URL's path by a chat that splits words at `/`.
    !in_url
        || ["here", "channel", "all", "everyone", "room"]
            .iter()
            .any(|g| name.eq_ignore_ascii_case(g))
}

/// What a target acts on in `text`: `<` that is not broken, mentions, line breaks, and `](` and `![` where
/// `links` are Markdown's. `escapes` says whether a backslash escapes the next character (CommonMark, Jira wiki),
/// `code` whether backticks make literal spans (where only mentions and `<` can still act, through Mattermost's
/// rewriting).
fn active(text: &str, escapes: bool, code: bool, links: bool, out: &mut Vec<String>) {
    let chars: Vec<char> = text.chars().collect();
    let mut in_code = false;
    let mut k = 0;
    while k < chars.len() {
        let c = chars[k];
        let next = chars.get(k + 1).copied();
        if escapes && c == '\\' && !in_code {
            k += 2;
            continue;
        }
        if code && c == '`' {
            in_code = !in_code;
        }
        if c == '<' && next != Some(WORD_JOINER) {
            out.push("<".into());
        }
        if mention_at(&chars, k) {
            out.push("mention".into());
        }
        if c == '\n' {
            out.push("line".into());
        }
        if c.is_control() && c != '\n' {
            out.push(format!("control {:?}", c));
        }
        if links && !in_code && ((c == ']' && next == Some('(')) || (c == '!' && next == Some('['))) {
            out.push(format!("{c}{}", next.unwrap_or(' ')));
        }
        k += 1;
    }
}

/// What `text`, written in `markup`, makes its target do.
fn acts(markup: Markup, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    match markup {
        Markup::Plain | Markup::Console => {
            for c in text.chars() {
                if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}') {
                    out.push(format!("{c:?}"));
                }
            }
        }
        Markup::CommonMark => active(text, true, true, true, &mut out),
        Markup::GoogleChat => {
            active(text, false, false, false, &mut out);
            out.extend(text.matches("```").map(|_| "fence".to_string()));
        }
        Markup::Html => {
            // Backticks in a hint make code, which is formatting, not an injection.
            let tags = text.replace("<code>", "").replace("</code>", "");
            out.extend(tags.matches('<').map(|_| "tag".to_string()));
            out.extend(text.matches('\n').map(|_| "line".to_string()));
        }
        Markup::JiraWiki => {
            // {noformat} blocks are literal: only how many there are matters.
            for (k, piece) in text.split("{noformat}").enumerate() {
                if k % 2 == 0 {
                    // Links and mentions (`[`), images (`!`), macros (`{`), table cells (`|`), unless escaped;
                    // backticks in a hint make `{{monospace}}`, which is formatting.
                    let piece = piece.replace("{{", "").replace("}}", "");
                    let mut chars = piece.chars();
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => {
                                chars.next();
                            }
                            '[' | '!' | '{' | '|' => out.push(c.to_string()),
                            '\n' => out.push("line".into()),
                            c if c.is_control() => out.push(format!("control {c:?}")),
                            _ => {}
                        }
                    }
                } else {
                    out.push("noformat".into());
                    out.extend(piece.matches('\n').map(|_| "line".to_string()));
                }
            }
        }
        Markup::SlackBlocks | Markup::TeamsCard | Markup::Adf => {
            let v: Value = serde_json::from_str(text).expect("JSON");
            let mut all = Vec::new();
            strings(&v, &mut all);
            for s in all {
                if s.starts_with("http") && !s.contains(' ') {
                    // Herald's own links; a resource's names are percent-encoded in the query.
                    out.push(format!("url {}", s.split('?').next().unwrap_or_default()));
                    continue;
                }
                match markup {
                    Markup::Adf => out.extend(s.matches('\n').map(|_| "line".to_string())),
                    Markup::TeamsCard => active(&s, false, false, true, &mut out),
                    _ => active(&s, false, false, false, &mut out),
                }
            }
        }
        Markup::TelegramHtml => {
            // Herald's own tags are the same in both renderings; text from Argo CD may open none.
            let tags = text.replace("<code>", "").replace("</code>", "");
            active(&tags, false, false, false, &mut out);
        }
        Markup::DiscordEmbeds => {
            let v: Value = serde_json::from_str(text).expect("JSON");
            let mut all = Vec::new();
            strings(&v, &mut all);
            for s in all {
                if s.starts_with("http") && !s.contains(' ') {
                    out.push(format!("url {}", s.split('?').next().unwrap_or_default()));
                    continue;
                }
                // Discord's Markdown: a backslash escapes, backticks make literal code, `[text](url)` links.
                active(&s, true, true, true, &mut out);
            }
        }
        Markup::Json => {}
    }
    out.sort();
    out
}

/// What `hostile` has that `benign` has not (multisets, both sorted).
fn more(hostile: Vec<String>, mut benign: Vec<String>) -> Vec<String> {
    let mut extra = Vec::new();
    for h in hostile {
        match benign.iter().position(|b| *b == h) {
            Some(k) => {
                benign.remove(k);
            }
            None => extra.push(h),
        }
    }
    extra
}

/// What `kind` renders from the hostile notification `n` and from its plain-words twin `plain`, part by part.
fn renderings(kind: ReceiverType, n: &Notification, plain: &Notification) -> (Vec<Part>, Vec<Part>) {
    let hostile = preview(kind, n, testing::now());
    let benign = preview(kind, plain, testing::now());
    (hostile, benign)
}

/// The property both kinds of notification must keep, tried on `cases` sets of hostile values: every part each of
/// `kinds` renders from `build(values)` acts (mentions, links, HTML, line breaks) on nothing that the same
/// notification in plain words (`plain`) does not.
fn hostile_values_act_on_nothing(
    cases: u32,
    build: fn(&[String]) -> Notification,
    plain: fn(&Notification) -> Notification,
    kinds: &[ReceiverType],
) {
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let result = TestRunner::new(config).run(&proptest::collection::vec(hostile(), 1..12), |values| {
        let n = build(&values);
        let plain = plain(&n);
        for &kind in kinds {
            let (hostile, benign) = renderings(kind, &n, &plain);
            prop_assert_eq!(hostile.len(), benign.len());
            for (h, b) in hostile.iter().zip(&benign) {
                let extra = more(acts(h.markup, &h.text), acts(b.markup, &b.text));
                prop_assert!(
                    extra.is_empty(),
                    "{} {} acts on {:?} from {:?}:\n{}",
                    kind,
                    h.name,
                    extra,
                    values,
                    h.text
                );
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn text_from_argo_cd_cannot_mention_link_inject_html_or_break_lines_in_any_receiver() {
    hostile_values_act_on_nothing(256, notification, plain_words, &ReceiverType::ALL);
}

#[test]
fn the_issue_examples_read_as_text_everywhere() {
    let values: Vec<String> = FRAGMENTS.iter().map(|f| f.to_string()).collect();
    let n = notification(&values);
    let plain = plain_words(&n);
    for kind in ReceiverType::ALL {
        let (hostile, benign) = renderings(kind, &n, &plain);
        for (h, b) in hostile.iter().zip(&benign) {
            assert_eq!(
                acts(h.markup, &h.text),
                acts(b.markup, &b.text),
                "{kind} {}:\n{}",
                h.name,
                h.text
            );
            let chat = matches!(
                h.markup,
                Markup::CommonMark
                    | Markup::SlackBlocks
                    | Markup::GoogleChat
                    | Markup::TeamsCard
                    | Markup::DiscordEmbeds
                    | Markup::TelegramHtml
            );
            assert!(
                !(chat && h.text.contains("<!channel>")),
                "{kind} {}:\n{}",
                h.name,
                h.text
            );
        }
    }
}

/// Every text field of a digest (all one-line).
fn digest_fields(d: &mut Digest) -> Vec<&mut String> {
    let mut out = vec![&mut d.team];
    for a in &mut d.out_of_sync {
        out.push(&mut a.app);
        out.extend(a.revision.as_mut());
    }
    for p in &mut d.pending_prunes {
        out.extend([&mut p.app, &mut p.resource]);
    }
    for f in &mut d.firing {
        out.extend([&mut f.app, &mut f.problem, &mut f.summary]);
    }
    for s in &mut d.silences {
        out.extend([&mut s.id, &mut s.matchers, &mut s.comment, &mut s.created_by]);
    }
    for x in &mut d.dead {
        out.extend([&mut x.receiver, &mut x.title, &mut x.error]);
    }
    out
}

/// A digest notification with one row in every part, each field filled from `values` in turn.
fn digest_notification(values: &[String]) -> Notification {
    let mut d = Digest {
        at: testing::now(),
        timezone: "Europe/Berlin".into(),
        out_of_sync: vec![OutOfSyncApp {
            revision: Some(String::new()),
            url: Some("https://argocd.example.com/applications/argocd/pay".into()),
            ..Default::default()
        }],
        pending_prunes: vec![Default::default()],
        firing: vec![Default::default()],
        silences: vec![Default::default()],
        dead: vec![Default::default()],
        ..Default::default()
    };
    for (k, field) in digest_fields(&mut d).into_iter().enumerate() {
        *field = values[k % values.len()].clone();
    }
    with_digest(d)
}

fn with_digest(d: Digest) -> Notification {
    let mut n = testing::notification(Action::Digest);
    n.title = d.title();
    n.body = Body::Digest(Box::new(d));
    n
}

fn plain_digest(n: &Notification) -> Notification {
    let mut d = n.digest().cloned().unwrap_or_default();
    let mut words = Words::default();
    for field in digest_fields(&mut d) {
        *field = words.plain(field, false);
    }
    with_digest(d)
}

#[test]
fn text_in_a_digest_cannot_mention_link_inject_html_or_break_lines_in_any_receiver_of_digests() {
    let kinds = [
        ReceiverType::Console,
        ReceiverType::Email,
        ReceiverType::Slack,
        ReceiverType::Matrix,
        ReceiverType::Msteams,
        ReceiverType::Googlechat,
        ReceiverType::Mattermost,
        ReceiverType::Discord,
        ReceiverType::Telegram,
        ReceiverType::Webhook,
    ];
    hostile_values_act_on_nothing(32, digest_notification, plain_digest, &kinds);
}

/// Links a sender chose (`context.argocdUrl`, `spec.source.repoURL`): a line break then a mention, a Markdown
/// link, a Jira image or heading; another scheme; a URL whose own characters close a link.
const HOSTILE_URLS: &[&str] = &[
    "https://argocd.example.com\n<!channel>",
    "https://argocd.example.com/\r\n@here",
    "https://argocd.example.com/\n[Fix-it-now](https://evil.example)",
    "https://argocd.example.com/\n!https://evil.example/x.png!",
    "https://argocd.example.com/\nh1. Owned",
    "https://argocd.example.com/a)[Fix-it-now](https://evil.example",
    "https://argocd.example.com/a|Fix-it-now]",
    "javascript:alert(1)",
];

/// Every `(key, string)` inside a JSON value.
fn keyed_strings<'v>(key: &'v str, v: &'v Value, out: &mut Vec<(&'v str, &'v str)>) {
    match v {
        Value::String(s) => out.push((key, s)),
        Value::Array(a) => a.iter().for_each(|x| keyed_strings(key, x, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| keyed_strings(k, x, out)),
        _ => {}
    }
}

/// The fixture notification with every link (and the repository's URL, shown as text) set to `url`.
fn with_links(url: &str) -> Notification {
    let mut n = testing::notification(Action::Open);
    let i = &mut n.incidents_mut()[0];
    i.app_url = Some(url.into());
    i.resources[0].url = Some(url.into());
    i.sources = vec![crate::domain::incident::SourceRevision {
        repo_url: url.into(),
        revision: Some("3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5".into()),
        commit_url: Some(url.into()),
        ..Default::default()
    }];
    n
}

#[test]
fn hostile_argocd_and_repository_urls_reach_no_receiver_as_a_line_or_markup_of_their_own() {
    let benign = with_links(testing::APP_URL);
    for hostile in HOSTILE_URLS {
        let n = with_links(hostile);
        for kind in ReceiverType::ALL {
            let (h, b) = renderings(kind, &n, &benign);
            for (h, b) in h.iter().zip(&b) {
                let extra = more(acts(h.markup, &h.text), acts(b.markup, &b.text));
                assert!(
                    extra.is_empty(),
                    "{kind} {} acts on {extra:?} from {hostile:?}:\n{}",
                    h.name,
                    h.text
                );
                if let Ok(v) = serde_json::from_str::<Value>(&h.text) {
                    let mut all = Vec::new();
                    keyed_strings("", &v, &mut all);
                    for (key, s) in all {
                        let link = key.ends_with("url") || key.ends_with("href") || key == "links";
                        assert!(
                            !link || key == "repo_url" || crate::domain::link::is_safe(s),
                            "{kind} {} links {key}={s:?}",
                            h.name
                        );
                    }
                    continue;
                }
                for line in h.text.lines() {
                    let line = line.trim_start();
                    for start in ["<!channel>", "@here", "[Fix-it-now]", "!https://evil", "h1."] {
                        assert!(
                            !line.starts_with(start),
                            "{kind} {}: a line of its own:\n{}",
                            h.name,
                            h.text
                        );
                    }
                }
                let linked = ["(", "|", "href=\"", "<"]
                    .iter()
                    .any(|p| h.text.contains(&format!("{p}javascript:")));
                assert!(!linked, "{kind} {}: a javascript: link\n{}", h.name, h.text);
                let markup = match h.markup {
                    Markup::CommonMark => "[Fix-it-now](https://evil",
                    Markup::JiraWiki => "!https://evil.example/x.png!",
                    _ => continue,
                };
                assert!(!h.text.contains(markup), "{kind} {}: {markup}\n{}", h.name, h.text);
            }
        }
    }
}

/// An e-mail address and a URL with `@` in real text, beside real mentions, in what each chat or tracker receives:
/// the address arrives byte for byte (searchable, copyable), the URL whole but unlinkable (word joiners in its
/// scheme and host: chats link a bare URL by themselves), each mention is broken. Matrix still shows the URL as it
/// is (its plain body carries Herald's own links as text, which must stay linkable).
#[test]
fn addresses_stay_as_they_are_urls_are_not_linked_and_mentions_are_broken_in_every_chat_and_tracker() {
    const ADDRESS: &str = "alice@example.com";
    const URL: &str = "https://git.example.com/@alice/repo";
    const MAILTO: &str = "mailto:bob@example.com";
    let mut n = testing::notification(Action::Open);
    n.incidents_mut()[0].initiated_by = Some(ADDRESS.into());
    n.incidents_mut()[0].messages = vec![format!(
        "ask {ADDRESS} or @here, see {URL} and {MAILTO}, @channel @room @all"
    )];
    for kind in [
        ReceiverType::Slack,
        ReceiverType::Msteams,
        ReceiverType::Googlechat,
        ReceiverType::Mattermost,
        ReceiverType::Github,
        ReceiverType::Redmine,
        ReceiverType::Matrix,
        ReceiverType::Discord,
        ReceiverType::Telegram,
    ] {
        let parts = preview(kind, &n, testing::now());
        let all: String = parts.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n");
        for literal in [ADDRESS, MAILTO] {
            assert!(
                all.contains(literal),
                "{kind}: {literal} is not there byte for byte in {all}"
            );
        }
        assert!(
            all.replace(WORD_JOINER, "").contains(URL),
            "{kind}: {URL} is not shown in {all}"
        );
        if kind != ReceiverType::Matrix {
            assert!(!all.contains(URL), "{kind}: {URL} would be linked in {all}");
        }
        for mention in ["here", "channel", "room", "all"] {
            assert!(
                !all.contains(&format!("@{mention}")),
                "{kind}: @{mention} is not broken in {all}"
            );
            assert!(
                all.contains(&format!("@{WORD_JOINER}{mention}")),
                "{kind}: @{mention} is still readable in {all}"
            );
        }
    }
}

/// Every text field of a sync a receiver told of syncs only renders (a change, a commit status), and whether it
/// is a multi-line message.
fn sync_fields(n: &mut Notification) -> Vec<(&mut String, bool)> {
    let mut out: Vec<(&mut String, bool)> = Vec::new();
    match &mut n.body {
        Body::Change(c) => {
            for s in [
                &mut c.instance,
                &mut c.app_namespace,
                &mut c.app_name,
                &mut c.project,
                &mut c.destination_namespace,
                &mut c.revision,
                &mut c.initiator,
                &mut c.team,
            ] {
                out.push((s, false));
            }
            out.extend(c.previous_revision.iter_mut().map(|s| (s, false)));
        }
        Body::CommitStatus(s) => {
            for f in [&mut s.instance, &mut s.app_name, &mut s.initiator] {
                out.push((f, false));
            }
            out.push((&mut s.message, true));
        }
        _ => {}
    }
    out
}

/// A deployment told as `body` (a change or a commit status), each field filled from `values` in turn.
fn sync_notification(body: Body, values: &[String]) -> Notification {
    let mut n = testing::sync_notification(body);
    for (k, (field, _)) in sync_fields(&mut n).into_iter().enumerate() {
        *field = values[k % values.len()].clone();
    }
    n
}

/// A deployment told as a change, each field filled from `values` in turn.
fn change_notification(values: &[String]) -> Notification {
    sync_notification(Body::Change(Box::new(testing::change())), values)
}

/// A deployment told as a commit status, each field filled from `values` in turn.
fn status_notification(values: &[String]) -> Notification {
    let status = testing::commit_status(crate::domain::CommitState::Failure);
    sync_notification(Body::CommitStatus(Box::new(status)), values)
}

/// [`plain_words`] for a sync's fields.
fn plain_sync(n: &Notification) -> Notification {
    let mut plain = n.clone();
    let mut words = Words::default();
    for (field, multiline) in sync_fields(&mut plain) {
        *field = words.plain(field, multiline);
    }
    plain
}

#[test]
fn text_from_argo_cd_cannot_act_in_a_commit_status_or_a_grafana_annotation() {
    hostile_values_act_on_nothing(64, status_notification, plain_sync, &[ReceiverType::GithubStatus]);
    hostile_values_act_on_nothing(64, change_notification, plain_sync, &[ReceiverType::Grafana]);
}

#[test]
fn an_at_sign_before_a_code_span_is_no_mention_in_any_receiver() {
    // Found by the property above (Telegram read `@` + `<code>x</code>` as a mention of @x).
    let values: Vec<String> = ["@```x", "", "", ""].iter().map(|s| s.to_string()).collect();
    let n = notification(&values);
    let plain = plain_words(&n);
    for kind in ReceiverType::ALL {
        let (hostile, benign) = renderings(kind, &n, &plain);
        for (h, b) in hostile.iter().zip(&benign) {
            let extra = more(acts(h.markup, &h.text), acts(b.markup, &b.text));
            assert!(extra.is_empty(), "{kind} {} acts on {extra:?}:\n{}", h.name, h.text);
        }
    }
}
