//! `GET /`: the status page a person opens — server-rendered HTML (maud), no scripts or CDN, refreshing itself:
//! Applications OutOfSync the longest first, firing incidents by team, pending prunes, dead notifications, silences.

use actix_web::{HttpResponse, web};
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use super::{ApiError, AppContext};
use crate::domain::{DeliveryState, IncidentState};
use crate::pipeline::{AppRecord, IncidentRecord, OutboxRecord, PruneRow};
use crate::receivers::render::age;
use crate::routing::Silence;

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;\
margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}\
.warning{color:#a60}.critical{color:#b00;font-weight:bold}.empty{color:#777}h2{margin-top:1.2em}";

pub async fn page(ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let p = &ctx.pipeline;
    let now = p.now();
    let out_of_sync = p.apps(Some("OutOfSync"), None, 500).await?;
    let firing = p.incidents(Some(IncidentState::Firing), None, None, None, 500).await?;
    let prunes = p.prune_pending().await?;
    let dead = p.outbox(Some(DeliveryState::Dead), 100).await?;
    let silences = p.silences(false, now).await?;
    let markup: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content="30";
                title { "Herald — status" }
                style { (STYLE) }
            }
            body {
                h1 { "Herald" }
                p { "As of " span #now { (when(now)) } ". This page refreshes every 30 seconds." }
                (out_of_sync_section(&out_of_sync, now))
                (incidents_section(&firing))
                (prunes_section(&prunes))
                (dead_section(&dead))
                (silences_section(&silences, now))
            }
        }
    };
    Ok(HttpResponse::Ok()
        .insert_header(super::no_store())
        .content_type("text/html; charset=utf-8")
        .body(markup.into_string()))
}

fn out_of_sync_section(apps: &[AppRecord], now: DateTime<Utc>) -> Markup {
    html! {
        h2 #out-of-sync { "OutOfSync Applications (" (apps.len()) ")" }
        @if apps.is_empty() { p.empty { "None." } } @else {
            table #out-of-sync-table {
                tr { th { "Application" } th { "Team" } th { "OutOfSync since" } th { "For" } th { "Requiring pruning" } }
                @for a in apps {
                    tr {
                        td { (a.state.snapshot.app) }
                        td { (a.team) }
                        td { (when(a.state.sync_since)) }
                        td { (age(a.state.sync_since, now)) }
                        td { (a.state.prune_since.len()) }
                    }
                }
            }
        }
    }
}

/// Firing incidents, one table per team.
fn incidents_section(firing: &[IncidentRecord]) -> Markup {
    let mut by_team: BTreeMap<&str, Vec<&IncidentRecord>> = BTreeMap::new();
    for i in firing {
        by_team.entry(i.team.as_str()).or_default().push(i);
    }
    html! {
        h2 #incidents { "Firing incidents (" (firing.len()) ")" }
        @if firing.is_empty() { p.empty { "None." } }
        @for (team, list) in &by_team {
            h3 { "Team " (team) }
            table.incidents {
                tr { th { "Kind" } th { "Severity" } th { "Application" } th { "Summary" } th { "Firing since" } }
                @for i in list {
                    tr {
                        td { (i.kind) }
                        td class=(i.severity) { (i.severity) }
                        td { (i.app) }
                        td { (i.view.summary) }
                        td { (i.fired_at.map(when).unwrap_or_default()) }
                    }
                }
            }
        }
    }
}

fn prunes_section(prunes: &[PruneRow]) -> Markup {
    html! {
        h2 #prune-pending { "Waiting to be pruned (" (prunes.len()) ")" }
        @if prunes.is_empty() { p.empty { "None." } } @else {
            table #prune-table {
                tr { th { "Application" } th { "Team" } th { "Resource" } th { "Waiting since" } th { "Prune enabled" } }
                @for r in prunes {
                    tr {
                        td { (r.app_namespace) "/" (r.app) }
                        td { (r.team) }
                        td { (r.kind) "/" (r.namespace) "/" (r.name) }
                        td { (when(r.waiting_since)) }
                        td { (if r.prune_enabled { "yes" } else { "no" }) }
                    }
                }
            }
        }
    }
}

fn dead_section(dead: &[OutboxRecord]) -> Markup {
    html! {
        h2 #dead { "Dead notifications (" (dead.len()) ")" }
        @if dead.is_empty() { p.empty { "None." } } @else {
            table #dead-table {
                tr { th { "Id" } th { "Receiver" } th { "Action" } th { "Attempts" } th { "Last error" } }
                @for d in dead {
                    tr { td { (d.id) } td { (d.receiver) } td { (d.action) } td { (d.attempts) } td { (d.last_error.clone().unwrap_or_default()) } }
                }
            }
        }
    }
}

fn silences_section(silences: &[Silence], now: DateTime<Utc>) -> Markup {
    html! {
        h2 #silences { "Active silences (" (silences.iter().filter(|s| s.active(now)).count()) ")" }
        @if silences.is_empty() { p.empty { "None." } } @else {
            table #silence-table {
                tr { th { "Matchers" } th { "Until" } th { "By" } th { "Comment" } }
                @for s in silences {
                    tr {
                        td { @for m in &s.matchers { (m.name) "=" (m.value) " " } }
                        td { (when(s.ends_at)) }
                        td { (s.created_by) }
                        td { (s.comment) }
                    }
                }
            }
        }
    }
}
