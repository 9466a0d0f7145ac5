//! `herald silence …`, `herald incidents`, `herald ack`, `herald unack` and `herald oncall`: their arguments, the calls to a running Herald, and the tables they
//! print (columns as `amtool` prints them).

use std::process::ExitCode;

use clap::Subcommand;

use super::Client;

/// Where a running Herald answers, for the commands that talk to it.
#[derive(clap::Args, Debug)]
pub struct Remote {
    /// Herald's base URL.
    #[arg(long, env = "HERALD_URL", default_value = "http://127.0.0.1:8080", global = true)]
    url: String,
    /// A bearer token: `read` scope to list, `respond` to acknowledge, `admin` to add or expire silences.
    #[arg(long, env = "HERALD_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum SilenceAction {
    /// Mute the incidents whose labels match every matcher, e.g. `app=pay-*` `kind=out_of_sync` (fields as in
    /// grouping.group_by, values are globs); prints the new silence's id.
    Add {
        #[arg(required = true, value_name = "FIELD=GLOB")]
        matchers: Vec<String>,
        /// How long from its start (`2h`, `1h 30m`).
        #[arg(long, default_value = "1h", conflicts_with = "end", value_parser = crate::configuration::duration::parse_arg)]
        duration: std::time::Duration,
        /// When it starts (RFC 3339, e.g. `2026-12-07T18:00:00+01:00`): a maintenance planned ahead. Default now.
        #[arg(long)]
        start: Option<chrono::DateTime<chrono::FixedOffset>>,
        /// When it ends instead (RFC 3339).
        #[arg(long)]
        end: Option<chrono::DateTime<chrono::FixedOffset>>,
        /// Why (required, as amtool requires it).
        #[arg(long)]
        comment: String,
        /// Who: default the token's credential name, or $USER without a token.
        #[arg(long)]
        author: Option<String>,
    },
    /// The silences in force or still to come.
    List {
        /// Include the ended ones.
        #[arg(long)]
        expired: bool,
        /// Only the ids.
        #[arg(short, long)]
        quiet: bool,
    },
    /// End silences now.
    Expire {
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

/// `herald ack ID`: what to send.
#[derive(clap::Args, Debug)]
pub struct AckArgs {
    /// The incident's id (the ID column of `herald incidents`).
    pub id: i64,
    /// How long from now (`2h`, `1h 30m`); default: until the incident resolves.
    #[arg(long = "for", value_name = "DURATION", conflicts_with = "until", value_parser = crate::configuration::duration::parse_arg)]
    pub for_: Option<std::time::Duration>,
    /// When it ends instead (RFC 3339).
    #[arg(long)]
    pub until: Option<chrono::DateTime<chrono::Utc>>,
    #[arg(long)]
    pub comment: Option<String>,
}

/// `herald ack`: takes an incident; prints what holds it now.
pub async fn ack(remote: Remote, args: AckArgs) -> anyhow::Result<ExitCode> {
    let c = client(&remote)?;
    let mut body = serde_json::json!({});
    if let Some(d) = args.for_ {
        body["for"] = serde_json::json!(crate::configuration::duration::format(d));
    }
    if let Some(u) = args.until {
        body["until"] = serde_json::json!(u);
    }
    if let Some(comment) = args.comment {
        body["comment"] = serde_json::json!(comment);
    }
    // Without a token Herald knows no caller: name the person running the command.
    if remote.token.is_none()
        && let Ok(user) = std::env::var("USER")
    {
        body["by"] = serde_json::json!(user);
    }
    let i = c.acknowledge(args.id, &body).await?;
    let words =
        (i.acknowledged.as_ref()).map_or_else(|| "acknowledged".into(), |a| a.describe(crate::domain::Zone::UTC));
    println!("incident {}: {words}", i.id);
    Ok(ExitCode::SUCCESS)
}

/// `herald unack ID`: gives an incident back (repeats and escalation resume).
pub async fn unack(remote: Remote, id: i64) -> anyhow::Result<ExitCode> {
    let i = client(&remote)?.unacknowledge(id).await?;
    println!("incident {}: no longer acknowledged", i.id);
    Ok(ExitCode::SUCCESS)
}

fn client(remote: &Remote) -> anyhow::Result<Client> {
    let token = remote.token.clone().map(secrecy::SecretString::from);
    Ok(crate::client::Client::new(&remote.url, token)?)
}

pub async fn silence(remote: Remote, action: SilenceAction) -> anyhow::Result<ExitCode> {
    let c = client(&remote)?;
    match action {
        SilenceAction::Add {
            matchers,
            duration,
            start,
            end,
            comment,
            author,
        } => {
            let matchers = matchers
                .iter()
                .map(|m| matcher(m))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut body = serde_json::json!({"matchers": matchers, "comment": comment});
            if let Some(start) = start {
                body["starts_at"] = serde_json::json!(start.with_timezone(&chrono::Utc));
            }
            match end {
                Some(end) => body["ends_at"] = serde_json::json!(end.with_timezone(&chrono::Utc)),
                None => body["duration"] = serde_json::json!(crate::configuration::duration::format(duration)),
            }
            // Without a token Herald knows no caller: name the person running the command.
            let author = author.or_else(|| remote.token.is_none().then(|| std::env::var("USER").ok()).flatten());
            if let Some(a) = author {
                body["created_by"] = serde_json::json!(a);
            }
            let s = c.add_silence(&body).await?;
            println!("{}", s.id);
        }
        SilenceAction::List { expired, quiet } => {
            let list = c.silences(expired).await?;
            if quiet {
                for l in &list {
                    println!("{}", l.silence.id);
                }
                return Ok(ExitCode::SUCCESS);
            }
            print_silences(&list);
        }
        SilenceAction::Expire { ids } => return expire_silences(&c, ids).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// One `FIELD=GLOB` argument as the API's matcher.
fn matcher(m: &str) -> anyhow::Result<serde_json::Value> {
    match m.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok(serde_json::json!({"name": name.trim(), "value": value.trim()}))
        }
        _ => Err(anyhow::anyhow!(
            "matcher {m:?}: write FIELD=GLOB, e.g. app=pay-* or team=payments"
        )),
    }
}

/// `herald silence list`'s table.
fn print_silences(list: &[super::ListedSilence]) {
    let rows = list
        .iter()
        .map(|l| {
            let s = &l.silence;
            vec![
                s.id.clone(),
                s.matchers
                    .iter()
                    .map(|m| format!("{}={}", m.name, m.value))
                    .collect::<Vec<_>>()
                    .join(" "),
                l.state().to_string(),
                s.starts_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
                s.ends_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
                s.created_by.clone(),
                s.comment.clone(),
            ]
        })
        .collect();
    print_table(
        &[
            "ID",
            "MATCHERS",
            "STATE",
            "STARTS AT",
            "ENDS AT",
            "CREATED BY",
            "COMMENT",
        ],
        rows,
    );
}

/// `herald silence expire`: each one tried; a failure when any failed.
async fn expire_silences(c: &Client, ids: Vec<String>) -> anyhow::Result<ExitCode> {
    let mut failed = false;
    for id in ids {
        match c.expire_silence(&id).await {
            Ok(()) => println!("expired {id}"),
            Err(e) => {
                eprintln!("{id}: {e}");
                failed = true;
            }
        }
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// `herald oncall [SCHEDULE] [--at TIME]`: one line per schedule — who, until when, by what; a schedule whose
/// calendar cannot be read says so (its last good copy is what answers).
pub async fn on_call(
    remote: Remote,
    schedule: Option<String>,
    at: Option<chrono::DateTime<chrono::Utc>>,
) -> anyhow::Result<ExitCode> {
    let items = client(&remote)?.on_call(schedule.as_deref(), at).await?;
    let time = |v: &serde_json::Value| {
        (v.as_str())
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map_or_else(|| "-".to_string(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string())
    };
    let rows = (items.iter())
        .map(|s| {
            let who = &s["on_call"];
            let calendar = match &s["calendar"] {
                serde_json::Value::Null => "-".to_string(),
                c => match c["error"].as_str() {
                    Some(e) => format!(
                        "{} (failing: {e}; copy of {})",
                        c["source"].as_str().unwrap_or(""),
                        time(&c["read_at"])
                    ),
                    None => format!("{} (read {})", c["source"].as_str().unwrap_or(""), time(&c["read_at"])),
                },
            };
            vec![
                s["schedule"].as_str().unwrap_or("").to_string(),
                who["person"].as_str().unwrap_or("nobody").to_string(),
                if who.is_null() { "-".into() } else { time(&who["until"]) },
                who["by"].as_str().unwrap_or("-").to_string(),
                calendar,
            ]
        })
        .collect();
    print_table(&["SCHEDULE", "ON CALL", "UNTIL", "BY", "CALENDAR"], rows);
    Ok(ExitCode::SUCCESS)
}

pub async fn incidents(
    remote: Remote,
    state: Option<crate::domain::IncidentState>,
    team: Option<String>,
    kind: Option<crate::domain::Kind>,
    instance: Option<String>,
    limit: u32,
) -> anyhow::Result<ExitCode> {
    let mut filters = vec![("limit", limit.to_string())];
    let kind = kind.map(|k| k.as_str().to_string());
    for (key, value) in [("team", team), ("kind", kind), ("instance", instance)] {
        if let Some(v) = value {
            filters.push((key, v));
        }
    }
    let c = client(&remote)?;
    let list = match state {
        Some(s) => {
            filters.push(("state", s.as_str().to_string()));
            c.incidents(&filters).await?
        }
        None => needing_attention(&c, filters, limit).await?,
    };
    print_incidents(&list);
    Ok(ExitCode::SUCCESS)
}

/// What needs attention: everything firing, and what resolved in the last day after telling someone (an incident
/// that ended while pending told nobody: `--state resolved` lists it).
async fn needing_attention(
    c: &Client,
    filters: Vec<(&str, String)>,
    limit: u32,
) -> anyhow::Result<Vec<crate::domain::Incident>> {
    let mut firing = filters.clone();
    firing.push(("state", "firing".into()));
    let mut list = c.incidents(&firing).await?;
    let mut resolved = filters;
    resolved.extend([("state", "resolved".to_string()), ("notified", "true".to_string())]);
    let day_ago = chrono::Utc::now() - chrono::Duration::hours(24);
    list.extend(
        (c.incidents(&resolved).await?.into_iter())
            .filter(|i| i.resolved_at.is_none_or(|t| t >= day_ago))
            .take(limit as usize),
    );
    Ok(list)
}

/// `herald incidents`' table.
fn print_incidents(list: &[crate::domain::Incident]) {
    let rows = list
        .iter()
        .map(|i| {
            vec![
                i.id.to_string(),
                i.state.to_string(),
                i.kind.to_string(),
                i.severity.as_str().to_string(),
                crate::argocd::AppId::of(&i.instance, &i.app_namespace, &i.app_name).to_string(),
                i.team.clone(),
                i.since.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
                i.held
                    .as_ref()
                    .map_or_else(|| "-".to_string(), |h| h.describe(crate::domain::Zone::UTC)),
                i.acknowledged
                    .as_ref()
                    .map_or_else(|| "-".to_string(), |a| a.describe(crate::domain::Zone::UTC)),
                i.summary.clone(),
            ]
        })
        .collect();
    print_table(
        &[
            "ID",
            "STATE",
            "KIND",
            "SEVERITY",
            "APPLICATION",
            "TEAM",
            "SINCE",
            "HELD BACK",
            "ACKNOWLEDGED",
            "SUMMARY",
        ],
        rows,
    );
}

/// Columns padded to their widest cell, as amtool prints; the last column is not padded.
fn print_table(headers: &[&str], rows: Vec<Vec<String>>) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last {
                    c.to_string()
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(headers.to_vec());
    for r in &rows {
        line(r.iter().map(String::as_str).collect());
    }
}
