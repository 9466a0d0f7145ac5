//! `GET /`: the status page a person opens — server-rendered HTML (maud), no scripts or CDN, refreshing itself:
//! Applications OutOfSync the longest first, firing incidents by team, pending prunes, dead notifications, silences.
//! Also the rows behind `GET /v1/prune-pending`.

use actix_web::{HttpRequest, HttpResponse, web};
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};
use serde::Serialize;

use super::{ApiError, AppContext};
use crate::pipeline::Pipeline;
use crate::receivers::render::age;

#[derive(Debug, Serialize)]
pub struct PruneRow {
    pub app_namespace: String,
    pub app: String,
    pub team: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `requires pruning` or `PruneSkipped`.
    pub status: String,
    pub waiting_since: DateTime<Utc>,
    pub prune_enabled: bool,
}

pub async fn prune_rows(p: &Pipeline) -> Result<Vec<PruneRow>, ApiError> {
    let apps = p.store.apps_with_pending_prunes().await?;
    let mut rows = Vec::new();
    for a in apps {
        let s = &a.state;
        for r in crate::incidents::pending_prunes(&s.snapshot) {
            let key = crate::state::resource_key(&r.kind, &r.namespace, &r.name);
            rows.push(PruneRow {
                app_namespace: s.snapshot.app.namespace.clone(),
                app: s.snapshot.app.name.clone(),
                team: a.team.clone(),
                kind: r.kind,
                namespace: r.namespace,
                name: r.name,
                status: r.status,
                waiting_since: s.prune_since.get(&key).copied().unwrap_or(s.last_seen),
                prune_enabled: s.snapshot.sync_policy.prune,
            });
        }
    }
    rows.sort_by_key(|r| r.waiting_since);
    Ok(rows)
}

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;\
margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}\
.warning{color:#a60}.critical{color:#b00;font-weight:bold}.empty{color:#777}h2{margin-top:1.2em}";

pub async fn page(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
    let p = &ctx.pipeline;
    let now = p.clock.now();
    let out_of_sync = p.store.apps(Some("OutOfSync"), None, 500).await?;
    let firing = p
        .store
        .incidents(Some(crate::domain::IncidentState::Firing), None, None, None, 500)
        .await?;
    let prunes = prune_rows(p).await?;
    let dead = p.store.outbox(Some(crate::domain::DeliveryState::Dead), 100).await?;
    let silences = p.store.silences(false, now).await?;
    let mut by_team: std::collections::BTreeMap<String, Vec<_>> = Default::default();
    for i in &firing {
        by_team.entry(i.team.clone()).or_default().push(i);
    }
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
                h2 #out-of-sync { "OutOfSync Applications (" (out_of_sync.len()) ")" }
                @if out_of_sync.is_empty() { p.empty { "None." } } @else {
                    table #out-of-sync-table {
                        tr { th { "Application" } th { "Team" } th { "OutOfSync since" } th { "For" } th { "Requiring pruning" } }
                        @for a in &out_of_sync {
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
                h2 #prune-pending { "Waiting to be pruned (" (prunes.len()) ")" }
                @if prunes.is_empty() { p.empty { "None." } } @else {
                    table #prune-table {
                        tr { th { "Application" } th { "Team" } th { "Resource" } th { "Waiting since" } th { "Prune enabled" } }
                        @for r in &prunes {
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
                h2 #dead { "Dead notifications (" (dead.len()) ")" }
                @if dead.is_empty() { p.empty { "None." } } @else {
                    table #dead-table {
                        tr { th { "Id" } th { "Receiver" } th { "Action" } th { "Attempts" } th { "Last error" } }
                        @for d in &dead {
                            tr { td { (d.id) } td { (d.receiver) } td { (d.action) } td { (d.attempts) } td { (d.last_error.clone().unwrap_or_default()) } }
                        }
                    }
                }
                h2 #silences { "Active silences (" (silences.iter().filter(|s| s.active(now)).count()) ")" }
                @if silences.is_empty() { p.empty { "None." } } @else {
                    table #silence-table {
                        tr { th { "Matchers" } th { "Until" } th { "By" } th { "Comment" } }
                        @for s in &silences {
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
    };
    Ok(HttpResponse::Ok()
        .insert_header(super::no_store())
        .content_type("text/html; charset=utf-8")
        .body(markup.into_string()))
}
