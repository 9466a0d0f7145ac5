//! What Discord is sent for a notification: `{allowed_mentions: {parse: []}, embeds}`, the embeds in the shared
//! layout (the title and why now, then each Application with its facts as fields and its problems, resources,
//! messages and what to do as the description), coloured by state, and always within Discord's documented embed
//! limits: cut with a count ("… and 254 more") rather than refused.

use serde_json::{Value, json};

use crate::domain::{Action, Body, Hint, Notification, Severity};
use crate::receivers::render::{self, AppView, escape, status_emoji, status_word, truncate_utf16};

/// Discord's limits (Embed Limits, in the Message resource's documentation).
pub const MAX_EMBEDS: usize = 10;
pub const MAX_TOTAL: usize = 6000;
pub const MAX_FIELDS: usize = 25;
pub const MAX_TITLE: usize = 256;
pub const MAX_DESCRIPTION: usize = 4096;
pub const MAX_FIELD_NAME: usize = 256;
pub const MAX_FIELD_VALUE: usize = 1024;

/// What the descriptions of a message may take together: the total less what titles and fields take, with room for
/// the count of a cut.
const DESCRIPTIONS_MARGIN: usize = 100;
/// A list of problems or a digest's tables take at most this much of their one description.
const LIST_DESCRIPTION: usize = MAX_DESCRIPTION - 96;
/// A fact longer than this gets a whole row of the embed rather than a third of one.
const INLINE_FIELD: usize = 40;

/// Discord's length of a text (counted as JavaScript counts it: an emoji is two), so a cut is never short of
/// what Discord counts.
pub fn len(s: &str) -> usize {
    s.encode_utf16().count()
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    name: String,
    value: String,
    inline: bool,
}

#[derive(Debug, Clone, PartialEq)]
struct Embed {
    title: String,
    url: Option<String>,
    description: String,
    fields: Vec<Field>,
}

impl Embed {
    /// What the embed counts toward the 6,000 characters of a message.
    fn size(&self) -> usize {
        len(&self.title) + len(&self.description) + self.fields_size()
    }

    fn fields_size(&self) -> usize {
        self.fields.iter().map(|f| len(&f.name) + len(&f.value)).sum()
    }

    fn to_json(&self, colour: u32, timestamp: &str) -> Value {
        let mut e = json!({"title": self.title, "color": colour, "timestamp": timestamp});
        if let Some(u) = &self.url {
            e["url"] = json!(u);
        }
        if !self.description.is_empty() {
            e["description"] = json!(self.description);
        }
        if !self.fields.is_empty() {
            let fields: Vec<Value> = (self.fields.iter())
                .map(|f| json!({"name": f.name, "value": f.value, "inline": f.inline}))
                .collect();
            e["fields"] = json!(fields);
        }
        e
    }
}

/// The embeds' colour, as the other chats colour their messages: green when resolved, red when critical, amber
/// for a warning, blue for the rest (information, a test, a digest), purple once acknowledged.
pub fn colour(n: &Notification) -> u32 {
    match n.action {
        Action::Resolve => 0x1A7F37,
        Action::Acknowledge => 0x8250DF,
        Action::Test | Action::Digest => 0x0969DA,
        Action::Open | Action::Update => match n.highest_severity() {
            Severity::Critical => 0xCF222E,
            Severity::Warning => 0xD29922,
            _ => 0x0969DA,
        },
    }
}

/// A masked link Herald makes: escaped text, a URL that cannot end the link.
fn link(text: &str, url: &str) -> String {
    format!(
        "[{}]({})",
        escape::discord(text),
        url.replace(' ', "%20").replace(')', "%29")
    )
}

/// `{emoji} {WORD}: {title}`, the first embed's title.
fn header(n: &Notification) -> String {
    format!("{} {}: {}", status_emoji(n), status_word(n), escape::discord(&n.title))
}

fn hints(hints: &[&Hint]) -> Vec<String> {
    if hints.is_empty() {
        return Vec::new();
    }
    let mut out = vec!["**What to do**\n".to_string()];
    for h in hints {
        let text = escape::with_code(&h.text, escape::discord, escape::discord_code);
        out.push(format!("• **{}**: {text}\n", escape::discord(&h.title)));
    }
    out
}

/// An Application's problems, as blocks of lines (a block is never cut inside: a quote or a line stays whole).
fn incident_blocks(app: &AppView<'_>, now: chrono::DateTime<chrono::Utc>, zone: crate::domain::Zone) -> Vec<String> {
    let mut out = Vec::new();
    for i in &app.incidents {
        out.push(format!(
            "**[{}] {}**\n",
            render::incident_word(i),
            escape::discord(&i.status_line(now, zone))
        ));
        for r in &i.resources {
            let (what, status) = render::resource_line(r);
            let what = render::linked(&what, r.url.as_deref(), link, escape::discord_code);
            let mut line = format!("• {what}: {}", escape::discord(&status));
            if !r.message.is_empty() {
                line.push_str(&format!(" — {}", escape::discord(&r.message)));
            }
            out.push(line + "\n");
        }
        for m in &i.messages {
            let lines: Vec<String> = (escape::message_lines(m).iter())
                .map(|l| format!("> {}\n", escape::discord(l)))
                .collect();
            out.push(lines.concat());
        }
        out.extend(hints(&i.hints.iter().collect::<Vec<_>>()));
        for note in &i.notes {
            out.push(format!("*Note: {}*\n", escape::discord(note)));
        }
    }
    out
}

/// The blocks that fit in `budget`, in order, and a last line counting the ones left out.
fn fit_blocks(blocks: &[String], budget: usize) -> String {
    let total: usize = blocks.iter().map(|b| len(b)).sum();
    if total <= budget {
        return blocks.concat();
    }
    let mut out = String::new();
    let mut used = 0;
    for (k, b) in blocks.iter().enumerate() {
        let tail = len(&more_lines(blocks.len() - k));
        if used + len(b) + tail > budget {
            out.push_str(&more_lines(blocks.len() - k));
            return out;
        }
        used += len(b);
        out.push_str(b);
    }
    out
}

fn more_lines(hidden: usize) -> String {
    format!("… and {hidden} more lines\n")
}

/// A fact as a field: Discord refuses an empty name or value.
fn field(name: &str, value: String) -> Field {
    let value = if value.trim().is_empty() {
        "—".to_string()
    } else {
        value
    };
    Field {
        name: truncate_utf16(name, MAX_FIELD_NAME),
        inline: len(&value) <= INLINE_FIELD,
        value: truncate_utf16(&value, MAX_FIELD_VALUE),
    }
}

/// An Application's facts as at most 25 fields, the last one counting those left out.
fn fields(app: &AppView<'_>) -> Vec<Field> {
    let facts = app.facts();
    let mut out: Vec<Field> = (facts.iter())
        .map(|f| {
            let value = render::linked(&f.value, f.link.as_deref(), link, escape::discord);
            field(&escape::discord(&f.label), value)
        })
        .collect();
    if out.len() > MAX_FIELDS {
        let hidden = out.len() - (MAX_FIELDS - 1);
        out.truncate(MAX_FIELDS - 1);
        out.push(field("…", format!("… and {hidden} more")));
    }
    out
}

/// The embeds for `n` without a template.
fn embeds(n: &Notification) -> Vec<Embed> {
    let title = truncate_utf16(&header(n), MAX_TITLE);
    let reason = match n.reason.trim() {
        "" => String::new(),
        _ => format!("*{}*\n\n", escape::discord(&n.reason)),
    };
    if let Body::Digest(d) = &n.body {
        return vec![Embed {
            title,
            url: None,
            description: render::digest::discord(d, LIST_DESCRIPTION),
            fields: Vec::new(),
        }];
    }
    if !render::detailed(n) {
        let mut what_to_do = hints(&render::summary_hints(n)).concat();
        if let Some(links) = render::group_links(n, link) {
            what_to_do.insert_str(0, &format!("**{links}**\n"));
        }
        let budget = LIST_DESCRIPTION.saturating_sub(len(&reason) + len(&what_to_do));
        let status = n.status_url.as_deref().map(|u| link("the status page", u));
        let list = render::summary_list_within(
            n,
            link,
            escape::discord,
            |i, name, status| match status {
                "" => format!("• **{}** {name}\n", render::incident_word(i)),
                _ => format!("• **{}** {name}: {status}\n", render::incident_word(i)),
            },
            budget,
            len,
            |hidden| format!("• {}\n", render::more_words(hidden, status.as_deref())),
        );
        return vec![Embed {
            title,
            url: None,
            description: format!("{reason}{list}{what_to_do}"),
            fields: Vec::new(),
        }];
    }
    let apps = render::apps(n);
    let mut out: Vec<(Embed, Vec<String>)> = (apps.iter().enumerate())
        .map(|(k, app)| {
            let mut blocks = Vec::new();
            if k == 0 && !reason.is_empty() {
                blocks.push(reason.clone());
            }
            blocks.extend(incident_blocks(app, n.created_at, n.zone));
            let embed = Embed {
                title: match k {
                    0 => title.clone(),
                    _ => truncate_utf16(&escape::discord(&app.name), MAX_TITLE),
                },
                url: app.url.map(str::to_string),
                description: String::new(),
                fields: fields(app),
            };
            (embed, blocks)
        })
        .collect();
    out.truncate(MAX_EMBEDS);
    let fixed: usize = out.iter().map(|(e, _)| e.size()).sum();
    let share = MAX_TOTAL.saturating_sub(fixed + DESCRIPTIONS_MARGIN) / out.len().max(1);
    let budget = share.min(MAX_DESCRIPTION - DESCRIPTIONS_MARGIN);
    out.into_iter()
        .map(|(mut e, blocks)| {
            e.description = fit_blocks(&blocks, budget);
            e
        })
        .collect()
}

/// Whatever was built, within every limit: at most 10 embeds, each string within its own limit, and 6,000
/// characters in all, taken first from the descriptions (last embed first), then from the fields' values, then
/// by leaving fields out. A message Discord would refuse is never sent.
fn within_limits(mut embeds: Vec<Embed>) -> Vec<Embed> {
    embeds.truncate(MAX_EMBEDS);
    for e in &mut embeds {
        e.title = truncate_utf16(&e.title, MAX_TITLE);
        e.description = truncate_utf16(&e.description, MAX_DESCRIPTION);
        e.fields.truncate(MAX_FIELDS);
        for f in &mut e.fields {
            f.name = truncate_utf16(&f.name, MAX_FIELD_NAME);
            f.value = truncate_utf16(&f.value, MAX_FIELD_VALUE);
        }
    }
    let total = |embeds: &[Embed]| embeds.iter().map(Embed::size).sum::<usize>();
    for k in (0..embeds.len()).rev() {
        let excess = total(&embeds).saturating_sub(MAX_TOTAL);
        if excess == 0 {
            return embeds;
        }
        let d = &mut embeds[k].description;
        *d = truncate_utf16(d, len(d).saturating_sub(excess));
    }
    for k in (0..embeds.len()).rev() {
        for f in (0..embeds[k].fields.len()).rev() {
            let excess = total(&embeds).saturating_sub(MAX_TOTAL);
            if excess == 0 {
                return embeds;
            }
            let v = &mut embeds[k].fields[f].value;
            *v = truncate_utf16(v, len(v).saturating_sub(excess).max(1));
        }
    }
    while total(&embeds) > MAX_TOTAL {
        let many = embeds.len() > 1;
        match embeds.last_mut() {
            Some(e) if !e.fields.is_empty() => {
                e.fields.pop();
            }
            Some(_) if many => {
                embeds.pop();
            }
            _ => break,
        }
    }
    embeds
}

/// The Execute Webhook body for `n`: the embeds (or, with the receiver's template, its text as the one embed's
/// description), and no mention allowed (`allowed_mentions.parse` empty), whatever the text holds.
pub fn message(n: &Notification, templated: Option<&str>) -> Value {
    let embeds = match templated {
        Some(text) => vec![Embed {
            title: format!("{} {}", status_emoji(n), status_word(n)),
            url: None,
            description: text.to_string(),
            fields: Vec::new(),
        }],
        None => embeds(n),
    };
    let colour = colour(n);
    let timestamp = n.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let embeds: Vec<Value> = (within_limits(embeds).iter())
        .map(|e| e.to_json(colour, &timestamp))
        .collect();
    json!({"allowed_mentions": {"parse": []}, "embeds": embeds})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embed(description: usize, fields: usize, value: usize) -> Embed {
        Embed {
            title: "t".repeat(300),
            url: None,
            description: "d".repeat(description),
            fields: (0..fields)
                .map(|k| Field {
                    name: format!("f{k}"),
                    value: "v".repeat(value),
                    inline: false,
                })
                .collect(),
        }
    }

    #[test]
    fn whatever_was_built_is_brought_within_every_limit() {
        let built = vec![embed(5000, 30, 2000); 12];

        let fitted = within_limits(built);

        assert!(fitted.len() <= MAX_EMBEDS);
        assert!(fitted.iter().map(Embed::size).sum::<usize>() <= MAX_TOTAL);
        for e in &fitted {
            assert!(len(&e.title) <= MAX_TITLE && len(&e.description) <= MAX_DESCRIPTION);
            assert!(e.fields.len() <= MAX_FIELDS);
            assert!(
                e.fields
                    .iter()
                    .all(|f| len(&f.value) <= MAX_FIELD_VALUE && !f.value.is_empty())
            );
        }
    }

    #[test]
    fn blocks_that_do_not_fit_are_counted() {
        let blocks: Vec<String> = (0..100).map(|k| format!("line {k:03}\n")).collect();

        let text = fit_blocks(&blocks, 200);

        assert!(len(&text) <= 200, "{}", len(&text));
        let shown = text.matches("line ").count();
        assert!(text.ends_with(&format!("… and {} more lines\n", 100 - shown)), "{text}");
    }
}
