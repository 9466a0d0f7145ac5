//! The Argo CD API client (a read-only account's token): one Application (`GET /api/v1/applications/{name}`), to
//! confirm a condition before a timed rule fires; the listing (`GET /api/v1/applications`, only the fields Herald
//! reads), for the periodic resync; and the event stream (`GET /api/v1/stream/applications`, newline-delimited JSON),
//! for `argocd.api.watch`. Every Application it returns goes through the same parser as a webhook body.

use secrecy::ExposeSecret;
use serde_json::Value;

use super::held::HeldItem;
use super::sync_windows::{self, SyncWindow};
use super::{AppId, PayloadError, Snapshot};
use crate::configuration::ArgoCdApiSettings;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("the Argo CD API could not be reached: {0}")]
    Unreachable(String),
    #[error("the Argo CD API answered {0}")]
    Status(u16),
    #[error("the Argo CD API has no Application {0}")]
    NotFound(AppId),
    /// 403: Argo CD's RBAC does not let the token `get` Applications of the project asked about (or, asked
    /// without a project, it does not say whether the Application exists at all).
    #[error("the Argo CD API answered 403: permission denied")]
    PermissionDenied,
    #[error("the Argo CD API returned an Application Herald cannot read: {0}")]
    Payload(#[from] PayloadError),
    #[error("the Argo CD API returned a listing Herald cannot read: {0}")]
    Listing(String),
    /// The listing does not prove it holds every Application (no `items` array, a `continue` token): nothing is
    /// deleted by absence.
    #[error("the Argo CD listing is incomplete: {0}")]
    Incomplete(String),
    #[error("the Argo CD listing is larger than argocd.api.max_listing_bytes ({0} bytes)")]
    TooLarge(u64),
}

impl ApiError {
    /// Why a listing was refused, for `herald_argocd_listings_refused_total{reason}`.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::Unreachable(_) => "unreachable",
            ApiError::Status(_) | ApiError::NotFound(_) | ApiError::PermissionDenied => "status",
            ApiError::Payload(_) | ApiError::Listing(_) => "invalid",
            ApiError::Incomplete(_) => "incomplete",
            ApiError::TooLarge(_) => "too_large",
        }
    }
}

/// The fields of each Application a listing asks for, all of them paths of Argo CD's own table of selectable fields
/// (`appFields` in argo-cd's `pkg/apiclient/application/forwarder_overwrite.go`): it silently drops any other path,
/// so asking for `metadata.uid` or `status.conditions` gets nothing. `spec` whole rather than its parts: releases
/// before 3.5 have only `spec` (3.5's parts are covered by it); `status.sync.revision` exists from 3.5 on.
/// `status.operationState.operation.sync` is, in that table, the operation's sync *result* (`syncResult`), not the
/// operation asked for. Not `status.reconciledAt` (not in the table anyway): an Application read from the API is the
/// state now whatever its time.
///
/// What the table cannot give — `metadata.uid`, `status.conditions`, `status.history`, the operation's message,
/// initiator and retries — a listing item lacks: it is read as [`Snapshot::listed`], and the pipeline keeps the
/// stored values of those fields (from webhook bodies, the stream or a GET, which carry whole Applications).
pub const LIST_FIELDS: &[&str] = &[
    "items.metadata.name",
    "items.metadata.namespace",
    "items.metadata.labels",
    "items.metadata.annotations",
    "items.metadata.deletionTimestamp",
    "items.spec",
    "items.status.sync.status",
    "items.status.sync.revision",
    "items.status.health",
    "items.status.operationState.phase",
    "items.status.operationState.startedAt",
    "items.status.operationState.finishedAt",
    "items.status.operationState.operation.sync",
    "items.status.resources",
    "items.status.summary",
];

/// One entry of a listing, as it is read.
#[derive(Debug)]
pub enum Listed {
    /// An Application, with the key of its item's bytes ([`item_key`]).
    App { snap: Box<Snapshot>, key: u128 },
    /// An item whose bytes the caller's [`ItemMemory`] knows as its Application's stored state: not parsed. What the
    /// memory answered (the caller's key of the Application).
    Unchanged(u128),
    /// An item Herald cannot read (where, and why): counted, not fatal — one odd Application must not stop the others
    /// from being seen — but the listing then deletes nothing by absence.
    Unreadable(String),
}

/// A listing being read: a task receives the answer's chunks (at most [`CHUNKS_AHEAD`] waiting, each read within
/// `timeout`, all together within `max_listing_bytes`), a blocking thread cuts them into items
/// ([`super::listing`]) and holds them compressed ([`super::held`]) until the listing has ended; only a complete
/// listing's items are then parsed one by one, and wait here ([`ITEMS_AHEAD`] at most) until the caller takes them —
/// a refused listing hands over nothing.
pub struct ListingReader {
    items: tokio::sync::mpsc::Receiver<Listed>,
    receiving: tokio::task::JoinHandle<Result<(), ApiError>>,
    parsing: tokio::task::JoinHandle<Result<ListingEnd, ApiError>>,
}

/// What a complete listing was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListingEnd {
    /// Items in `items`, readable or not.
    pub items: usize,
}

/// Asked for each item before it is parsed, with the item's [`item_key`]: `Some` (the caller's key of the
/// Application) when those bytes are known to be what is stored for it, so parsing them would change nothing.
/// What Herald reads of the AppProjects ([`ArgoCdApi::projects`]), by project name.
#[derive(Debug, Default)]
pub struct AppProjects {
    /// Each project's Herald annotations.
    pub annotations: std::collections::HashMap<String, std::collections::BTreeMap<String, String>>,
    /// The sync windows of the projects that have any.
    pub windows: std::collections::HashMap<String, Vec<SyncWindow>>,
}

pub type ItemMemory = std::sync::Arc<dyn Fn(u128) -> Option<u128> + Send + Sync>;

/// The key of a listing item's bytes from `instance`: a 128-bit hash.
pub fn item_key(instance: &str, bytes: &[u8]) -> u128 {
    let seed = xxhash_rust::xxh3::xxh3_64(instance.as_bytes());
    xxhash_rust::xxh3::xxh3_128_with_seed(bytes, seed)
}

/// An item's bytes → their [`item_key`], and what the [`ItemMemory`] knows of them.
type KnownItem<'a> = dyn Fn(&[u8]) -> (u128, Option<u128>) + 'a;

const CHUNKS_AHEAD: usize = 8;
const ITEMS_AHEAD: usize = 256;

/// How deep an Application of a listing may nest (as deep as `serde_json` reads a whole listing).
const ITEM_DEPTH: usize = 126;

impl ListingReader {
    fn start(
        mut resp: reqwest::Response,
        max: u64,
        timeout: std::time::Duration,
        instance: String,
        memory: Option<ItemMemory>,
    ) -> Self {
        let (chunk_tx, mut chunk_rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(CHUNKS_AHEAD);
        // Whether every byte came within the cap: the parser hands nothing on before it knows.
        let (verdict_tx, verdict_rx) = tokio::sync::oneshot::channel::<bool>();
        let receiving = tokio::spawn(async move {
            let result = async {
                let mut received = 0u64;
                loop {
                    let chunk = tokio::time::timeout(timeout, resp.chunk())
                        .await
                        .map_err(|_| ApiError::Unreachable("the listing stopped arriving (argocd.api.timeout)".into()))?
                        .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))?;
                    let Some(chunk) = chunk else { return Ok(()) };
                    received += chunk.len() as u64;
                    if received > max {
                        return Err(ApiError::TooLarge(max));
                    }
                    if chunk_tx.send(chunk).await.is_err() {
                        // The parser stopped (a malformed listing, or the reader was dropped): nothing more to read.
                        return Ok(());
                    }
                }
            }
            .await;
            let _ = verdict_tx.send(result.is_ok());
            result
        });
        let (items_tx, items) = tokio::sync::mpsc::channel(ITEMS_AHEAD);
        let parsing = tokio::task::spawn_blocking(move || {
            let chunks = std::iter::from_fn(|| chunk_rx.blocking_recv());
            let known = |bytes: &[u8]| {
                let key = item_key(&instance, bytes);
                (key, memory.as_ref().and_then(|m| m(key)))
            };
            let mut verdict = Some(verdict_rx);
            let mut received = || verdict.take().is_some_and(|v| v.blocking_recv().unwrap_or(false));
            read_listing(chunks, &known, &mut received, &mut |entry| {
                items_tx.blocking_send(entry).is_ok()
            })
        });
        Self {
            items,
            receiving,
            parsing,
        }
    }

    /// The items as they are read; the stream ends with the listing (completely or not: see
    /// [`ListingReader::finish`]).
    pub fn items(&mut self) -> impl futures_util::Stream<Item = Listed> + Send + '_ {
        futures_util::stream::poll_fn(|cx| self.items.poll_recv(cx))
    }

    /// Whether the listing was complete: every byte received, within the cap, and a well-formed `items` array.
    pub async fn finish(mut self) -> Result<ListingEnd, ApiError> {
        // Items not taken are dropped, so a parser waiting to hand one over stops.
        self.items.close();
        while self.items.recv().await.is_some() {}
        let parsed = (&mut self.parsing)
            .await
            .map_err(|e| ApiError::Listing(format!("the listing parser stopped: {e}")))?;
        let received = (&mut self.receiving)
            .await
            .map_err(|e| ApiError::Listing(format!("the listing receiver stopped: {e}")))?;
        // A cut or oversized body makes the parser fail too; the receiver's error says why.
        received?;
        parsed
    }
}

impl Drop for ListingReader {
    fn drop(&mut self) {
        self.receiving.abort();
    }
}

/// Reads a listing (`{"metadata": {…}, "items": [Application, …]}`) from its `chunks`, holding each item as it is
/// cut out ([`super::held`]), and hands them to `emit` (which answers false to stop) only once the listing is
/// complete and `received` says every byte came within the cap: a refused listing stores nothing. Complete only with
/// a well-formed `items` array and no `metadata.continue` (a page of a longer listing). An item that is not JSON
/// makes the listing malformed; one that is JSON but not an Application Herald can read is handed over as
/// [`Listed::Unreadable`].
fn read_listing<C: AsRef<[u8]>>(
    chunks: impl IntoIterator<Item = C>,
    known: &KnownItem,
    received: &mut dyn FnMut() -> bool,
    emit: &mut dyn FnMut(Listed) -> bool,
) -> Result<ListingEnd, ApiError> {
    let mut held = super::held::HeldItems::new().map_err(|e| ApiError::Listing(format!("cannot hold items: {e}")))?;
    let mut scanner = super::listing::Scanner::new();
    let mut index = 0usize;
    let mut on_item = |bytes: &[u8], depth: u32| {
        let item = match known(bytes) {
            (_, Some(app)) => HeldItem::Unchanged(app),
            (key, None) => {
                not_json(bytes, depth).map_err(|e| format!("items[{index}]: {e}"))?;
                HeldItem::Item {
                    key,
                    depth,
                    bytes: bytes.to_vec(),
                }
            }
        };
        index += 1;
        held.hold(&item).map_err(|e| format!("cannot hold items: {e}"))?;
        Ok(true)
    };
    for chunk in chunks {
        scanner.feed(chunk.as_ref(), &mut on_item).map_err(ApiError::Listing)?;
    }
    let seen = scanner.finish().map_err(ApiError::Listing)?;
    if let Some(token) = seen.continue_token.filter(|t| !t.is_empty()) {
        return Err(ApiError::Incomplete(format!(
            "it is one page of a longer listing (metadata.continue {:?})",
            token.chars().take(32).collect::<String>()
        )));
    }
    let Some(items) = seen.items else {
        return Err(ApiError::Incomplete(
            "it has no `items` array (an empty list is `\"items\": []`); a token without access to the \
             Applications can answer this way"
                .into(),
        ));
    };
    if !received() {
        return Err(ApiError::Listing("the listing was not received whole".into()));
    }
    let mut index = 0usize;
    (held.replay(&mut |item| {
        let entry = parsed(item, index);
        index += 1;
        emit(entry)
    }))
    .map_err(|e| ApiError::Listing(format!("cannot read the held items: {e}")))?;
    Ok(ListingEnd { items })
}

/// An item's bytes that are not JSON at all (the listing is then malformed), checked as the item is held without
/// building anything; `Ok` for everything else, which [`parsed`] reads.
fn not_json(bytes: &[u8], depth: u32) -> Result<(), PayloadError> {
    if depth as usize > ITEM_DEPTH || serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        return Ok(());
    }
    match from_api_bytes(bytes, depth) {
        Err(e @ PayloadError::InvalidJson { .. }) => Err(e),
        _ => Ok(()),
    }
}

/// A held item as the caller takes it.
fn parsed(item: HeldItem, index: usize) -> Listed {
    match item {
        HeldItem::Unchanged(app) => Listed::Unchanged(app),
        HeldItem::Item { key, depth, bytes } => match from_api_bytes(&bytes, depth) {
            Ok(snap) => Listed::App {
                snap: Box::new(snap),
                key,
            },
            Err(e) => Listed::Unreadable(format!("items[{index}]: {e}")),
        },
    }
}

/// What a confirming GET ([`ArgoCdApi::confirm`]) found.
#[derive(Debug)]
pub enum Confirmation {
    /// In the project Herald holds it in: the Application as it is now.
    Present(Box<Snapshot>),
    /// Not in that project (404), but there without one (200): moved to another project Herald may see.
    Moved(Box<Snapshot>),
    /// Not in that project (404), and 403 or 404 without one: gone — or moved to a project the token may not see,
    /// which Argo CD answers exactly alike on purpose.
    Gone,
    /// 403 with its project: the token may not `get` that project's Applications. Nothing can be said about it.
    Denied,
}

/// One event of the stream.
#[derive(Debug)]
pub enum WatchEvent {
    /// ADDED or MODIFIED: the Application as it is now.
    Changed(Box<Snapshot>),
    /// DELETED: it is gone.
    Deleted(AppId),
}

#[derive(Clone)]
pub struct ArgoCdApi {
    http: reqwest::Client,
    /// For the listing and the stream, which may take long as a whole: only connecting is bounded by the client;
    /// the answer's headers and each read are bounded by `timeout` where they are awaited.
    long_http: reqwest::Client,
    settings: ArgoCdApiSettings,
    /// The Argo CD instance this API belongs to: every Application read from it is that instance's.
    instance: String,
}

impl ArgoCdApi {
    pub fn new(instance: &str, settings: ArgoCdApiSettings) -> Self {
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        let long_http = reqwest::Client::builder()
            .connect_timeout(settings.timeout)
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self {
            http,
            long_http,
            settings,
            instance: instance.to_string(),
        }
    }

    pub fn settings(&self) -> &ArgoCdApiSettings {
        &self.settings
    }

    /// The instance's name (`default`, or `argocd.instances[].name`).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Marks what was read from this API as this instance's.
    pub fn own(&self, snap: &mut Snapshot) {
        snap.app.instance.clone_from(&self.instance);
    }

    /// The path `segments` under the configured base URL, each percent-encoded as one segment (a `/`, `?`, `%` or
    /// `..` in a name cannot reach another path), with `query` (percent-encoded).
    fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Result<url::Url, ApiError> {
        let mut url = url::Url::parse(&self.settings.url)
            .map_err(|e| ApiError::Unreachable(format!("argocd.api.url is not a URL: {e}")))?;
        if let Some(bad) = segments.iter().find(|s| matches!(**s, "" | "." | "..")) {
            return Err(ApiError::Unreachable(format!(
                "{bad:?} cannot be a path segment of an Argo CD API URL"
            )));
        }
        url.path_segments_mut()
            .map_err(|()| ApiError::Unreachable("argocd.api.url cannot have a path".into()))?
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    fn projects_query(&self) -> Vec<(&str, &str)> {
        self.settings
            .projects
            .iter()
            .map(|p| ("projects", p.as_str()))
            .collect()
    }

    async fn get(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, ApiError> {
        request
            .bearer_auth(self.settings.token.expose_secret())
            .send()
            .await
            .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))
    }

    /// The Application, asked for in `project` (`?project=`) or without one. Argo CD's answers
    /// (`getAppEnforceRBAC` in argo-cd's `server/application/application.go`): with a project, 404 means it is not
    /// in that project (gone, or in another project) and 403 that the token may not `get` that project's
    /// Applications; without one, a missing Application and one the token may not see are both 403.
    pub async fn application(&self, app: &AppId, project: Option<&str>) -> Result<Snapshot, ApiError> {
        let mut query = vec![("appNamespace", app.namespace.as_str())];
        if let Some(p) = project {
            query.push(("project", if p.is_empty() { "default" } else { p }));
        }
        let url = self.url(&["api", "v1", "applications", &app.name], &query)?;
        let request = self.http.get(url);
        let resp = self.get(request).await?;
        match resp.status().as_u16() {
            200 => {}
            404 => return Err(ApiError::NotFound(app.clone())),
            403 => return Err(ApiError::PermissionDenied),
            s => return Err(ApiError::Status(s)),
        }
        let value: Value = resp
            .json()
            .await
            .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))?;
        let mut snap = from_api(&value)?;
        self.own(&mut snap);
        Ok(snap)
    }

    /// What Argo CD says of an Application Herald holds in `project`: a GET with that project, and after a 404 one
    /// without, which tells an Application moved to another project Herald may see from one that is gone.
    pub async fn confirm(&self, app: &AppId, project: &str) -> Result<Confirmation, ApiError> {
        match self.application(app, Some(project)).await {
            Ok(snap) => Ok(Confirmation::Present(Box::new(snap))),
            Err(ApiError::PermissionDenied) => Ok(Confirmation::Denied),
            Err(ApiError::NotFound(_)) => match self.application(app, None).await {
                Ok(snap) => Ok(Confirmation::Moved(Box::new(snap))),
                // Without a project Argo CD answers 403 alike for "no such Application" and "not yours to see".
                Err(ApiError::NotFound(_) | ApiError::PermissionDenied) => Ok(Confirmation::Gone),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// What Herald reads of every AppProject (in the configured projects, all when none are), by project name: only
    /// the annotations `keep` wants (Herald's own), so a project's other annotations cost nothing, and its sync
    /// windows (`spec.syncWindows`; one that cannot be read is left out with a warning). Needs `projects, get` in
    /// the read-only account's RBAC.
    pub async fn projects(&self, keep: &[&str]) -> Result<AppProjects, ApiError> {
        let request = self.http.get(self.url(&["api", "v1", "projects"], &[])?);
        let resp = self.get(request).await?;
        match resp.status().as_u16() {
            200 => {}
            s => return Err(ApiError::Status(s)),
        }
        let value: Value = resp
            .json()
            .await
            .map_err(|e| ApiError::Unreachable(e.without_url().to_string()))?;
        let items = value
            .get("items")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let wanted = &self.settings.projects;
        let mut out = AppProjects::default();
        for item in items {
            let meta = item.get("metadata");
            let Some(name) = meta.and_then(|m| m.get("name")).and_then(Value::as_str) else {
                continue;
            };
            if !wanted.is_empty() && !wanted.iter().any(|p| p == name) {
                continue;
            }
            let annotations = (meta.and_then(|m| m.get("annotations")).and_then(Value::as_object))
                .map(|a| {
                    (a.iter())
                        .filter(|(k, _)| keep.contains(&k.as_str()))
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.chars().take(1024).collect())))
                        .collect()
                })
                .unwrap_or_default();
            out.annotations.insert(name.to_string(), annotations);
            let windows = item
                .get("spec")
                .map(|spec| sync_windows::parse(name, spec))
                .unwrap_or_default();
            if !windows.is_empty() {
                out.windows.insert(name.to_string(), windows);
            }
        }
        Ok(out)
    }

    /// Every Application, in the configured projects (all when none are configured), read item by item as the
    /// answer arrives: memory holds one item and a few chunks, whatever the listing's size. Read it with
    /// [`ListingReader::items`], then ask [`ListingReader::finish`] whether it was complete. Items `memory` knows
    /// are not parsed.
    pub async fn list(&self, memory: Option<ItemMemory>) -> Result<ListingReader, ApiError> {
        let fields = LIST_FIELDS.join(",");
        let mut query = self.projects_query();
        query.push(("fields", &fields));
        let request = self.long_http.get(self.url(&["api", "v1", "applications"], &query)?);
        let resp = tokio::time::timeout(self.settings.timeout, self.get(request))
            .await
            .map_err(|_| ApiError::Unreachable("no answer within argocd.api.timeout".into()))??;
        match resp.status().as_u16() {
            200 => {}
            s => return Err(ApiError::Status(s)),
        }
        let max = self.settings.max_listing_bytes;
        if resp.content_length().is_some_and(|n| n > max) {
            return Err(ApiError::TooLarge(max));
        }
        Ok(ListingReader::start(
            resp,
            max,
            self.settings.timeout,
            self.instance.clone(),
            memory,
        ))
    }

    /// Opens the event stream; read it with [`Stream::next`].
    pub async fn watch(&self) -> Result<Stream, ApiError> {
        // The stream stays open: no overall timeout, only the connect timeout of the client's own settings.
        let request = (self.long_http).get(self.url(&["api", "v1", "stream", "applications"], &self.projects_query())?);
        let resp = self.get(request).await?;
        match resp.status().as_u16() {
            200 => Ok(Stream {
                resp,
                buffer: Vec::new(),
                instance: self.instance.clone(),
            }),
            s => Err(ApiError::Status(s)),
        }
    }
}

/// The open event stream: newline-delimited `{"result": {"type": …, "application": {…}}}` objects.
pub struct Stream {
    resp: reqwest::Response,
    buffer: Vec<u8>,
    instance: String,
}

/// A line longer than this is not an Application event; the stream is dropped and re-opened after a resync.
const MAX_LINE: usize = 16 * 1024 * 1024;

impl Stream {
    /// The next event; `Ok(None)` when the server closed the stream.
    pub async fn next(&mut self) -> Result<Option<WatchEvent>, ApiError> {
        let mut event = self.next_of_any_instance().await?;
        match &mut event {
            Some(WatchEvent::Changed(snap)) => snap.app.instance.clone_from(&self.instance),
            Some(WatchEvent::Deleted(app)) => app.instance.clone_from(&self.instance),
            None => {}
        }
        Ok(event)
    }

    async fn next_of_any_instance(&mut self) -> Result<Option<WatchEvent>, ApiError> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if let Some(event) = parse_event(&line)? {
                    return Ok(Some(event));
                }
                continue;
            }
            if self.buffer.len() > MAX_LINE {
                return Err(ApiError::Listing("a stream line is longer than 16 MiB".into()));
            }
            match self.resp.chunk().await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                Ok(None) => {
                    let rest = std::mem::take(&mut self.buffer);
                    return match parse_event(&rest)? {
                        Some(event) => Ok(Some(event)),
                        None => Ok(None),
                    };
                }
                Err(e) => return Err(ApiError::Unreachable(e.without_url().to_string())),
            }
        }
    }
}

/// An Application read from the API: what it says is the state now (no body time), marked as from the API.
fn from_api(value: &Value) -> Result<Snapshot, PayloadError> {
    let mut snap = super::from_value(value)?;
    super::caps::bound(&mut snap);
    Ok(as_read_from_api(snap))
}

/// The same from a listing item's bytes (nesting `depth` deep), read as a webhook body is, then as what it is: a
/// selection of [`LIST_FIELDS`] ([`Snapshot::listed`]), whose sync result is under `operationState.operation.sync`.
fn from_api_bytes(bytes: &[u8], depth: u32) -> Result<Snapshot, PayloadError> {
    if depth as usize > ITEM_DEPTH {
        return Err(PayloadError::TooDeep(ITEM_DEPTH));
    }
    let mut snap = super::parse_shallow_body(bytes)?;
    snap.listed = true;
    if let Some(op) = &mut snap.operation {
        let result = (std::str::from_utf8(bytes).ok())
            .and_then(super::typed::listed_sync_result)
            .unwrap_or_default();
        op.revisions = result.revisions;
        op.resources = result.resources;
        if result.revision.is_some() {
            op.revision = result.revision;
        }
    }
    super::caps::bound(&mut snap);
    Ok(as_read_from_api(snap))
}

fn as_read_from_api(mut snap: Snapshot) -> Snapshot {
    snap.observed_at = None;
    snap.source = super::Source::Api;
    snap
}

/// One stream line; blank lines and keep-alives are skipped (`None`).
fn parse_event(line: &[u8]) -> Result<Option<WatchEvent>, ApiError> {
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(line).map_err(|e| ApiError::Listing(format!("stream line: {e}")))?;
    if let Some(err) = value.get("error") {
        let message = err.get("message").and_then(Value::as_str).unwrap_or("unknown error");
        return Err(ApiError::Listing(format!("the stream reported an error: {message}")));
    }
    let Some(result) = value.get("result") else {
        return Ok(None);
    };
    let kind = result.get("type").and_then(Value::as_str).unwrap_or_default();
    let Some(app) = result.get("application") else {
        return Ok(None);
    };
    let snap = from_api(app)?;
    Ok(Some(match kind {
        "DELETED" => WatchEvent::Deleted(snap.app),
        _ => WatchEvent::Changed(Box::new(snap)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn app(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "argocd", "uid": format!("uid-{name}")},
               "spec": {"project": "default"},
               "status": {"sync": {"status": "Synced"}, "health": {"status": "Healthy"}}})
    }

    /// Reads `body` as a listing: what was handed over, and how it ended.
    fn read(body: &[u8]) -> (Vec<Listed>, Result<ListingEnd, ApiError>) {
        let mut got = Vec::new();
        let end = read_listing(body.chunks(5), &|_| (0, None), &mut || true, &mut |e| {
            got.push(e);
            true
        });
        (got, end)
    }

    #[test]
    fn a_listing_hands_over_every_readable_item_and_names_the_rest() {
        let body = serde_json::to_vec(
            &json!({"metadata": {"resourceVersion": "7"}, "items": [app("a"), {"metadata": {}}, app("b")]}),
        )
        .unwrap();
        let (got, end) = read(&body);
        let names: Vec<&str> = (got.iter())
            .filter_map(|e| match e {
                Listed::App { snap, .. } => Some(snap.app.name.as_str()),
                Listed::Unreadable(_) | Listed::Unchanged(_) => None,
            })
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert!(
            matches!(&got[1], Listed::Unreadable(why) if why.starts_with("items[1]: ")),
            "{got:?}"
        );
        assert_eq!(end.expect("complete").items, 3);
        let (got, end) = read(br#"{"items": []}"#);
        assert!(got.is_empty());
        assert_eq!(end.expect("an empty list is complete").items, 0);
    }

    #[test]
    fn an_item_the_memory_knows_is_handed_over_unparsed() {
        let known = serde_json::to_vec(&json!({"not": "an application"})).unwrap();
        let body = format!(
            r#"{{"items": [{}, {}]}}"#,
            String::from_utf8_lossy(&known),
            serde_json::to_string(&app("b")).unwrap()
        );
        let key = item_key("eu", &known);
        let memory = |bytes: &[u8]| {
            let k = item_key("eu", bytes);
            (k, (k == key).then_some(42))
        };
        let mut got = Vec::new();
        let end = read_listing(body.as_bytes().chunks(7), &memory, &mut || true, &mut |e| {
            got.push(e);
            true
        });
        assert_eq!(end.expect("complete").items, 2);
        assert!(matches!(got[0], Listed::Unchanged(42)), "{got:?}");
        assert!(
            matches!(&got[1], Listed::App { snap, key } if snap.app.name == "b" && *key != 0),
            "{got:?}"
        );
        assert_ne!(
            item_key("eu", &known),
            item_key("us", &known),
            "the same bytes from another instance"
        );
    }

    #[test]
    fn a_listing_without_a_well_formed_items_array_is_incomplete() {
        for body in [
            &br#"{}"#[..],
            br#"{"items": null}"#,
            br#"{"metadata": {}}"#,
            br#"{"metadata": {"continue": "abc"}, "items": []}"#,
        ] {
            let (_, end) = read(body);
            assert!(
                matches!(end, Err(ApiError::Incomplete(_))),
                "{}: {end:?}",
                String::from_utf8_lossy(body)
            );
        }
        for body in [
            &br#"{"items": 3}"#[..],
            br#"{"items": {"a": 1}}"#,
            br#"[]"#,
            br#"{"items": [{"metadata": {"name": "a"}}"#,
            br#"{"items": []} trailing"#,
            br#"{"items": [], "items": []}"#,
            b"",
        ] {
            let (_, end) = read(body);
            assert!(
                matches!(end, Err(ApiError::Listing(_))),
                "{}: {end:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_cut_listing_hands_over_nothing_and_is_not_complete() {
        let body = serde_json::to_vec(&json!({"items": [app("a"), app("b")]})).unwrap();
        let (got, end) = read(&body[..body.len() - 10]);
        assert_eq!(got.len(), 0, "the first item, read before the cut, is not handed over");
        assert!(end.is_err());
        for (page, what) in [
            (json!({"metadata": {"continue": "t"}, "items": [app("a")]}), "one page"),
            (json!({"apps": [app("a")]}), "no items array"),
        ] {
            let (got, end) = read(&serde_json::to_vec(&page).unwrap());
            assert!(got.is_empty() && end.is_err(), "{what}: {got:?} {end:?}");
        }
    }

    #[test]
    fn a_listing_over_its_cap_hands_over_nothing() {
        let body = serde_json::to_vec(&json!({"items": [app("a"), app("b")]})).unwrap();
        let mut got = Vec::new();
        let end = read_listing(body.chunks(5), &|_| (0, None), &mut || false, &mut |e| {
            got.push(e);
            true
        });
        assert!(got.is_empty(), "{got:?}");
        assert!(matches!(end, Err(ApiError::Listing(_))), "{end:?}");
    }

    #[test]
    fn api_urls_escape_each_path_segment() {
        let api = ArgoCdApi::new(
            "default",
            serde_json::from_value(json!({"url": "https://argocd.example/base/", "token": "t"})).expect("settings"),
        );
        let url = api
            .url(&["api", "v1", "applications", "a/b?c%d"], &[("appNamespace", "x y")])
            .expect("url");
        assert_eq!(
            url.as_str(),
            "https://argocd.example/base/api/v1/applications/a%2Fb%3Fc%25d?appNamespace=x+y"
        );
        for bad in ["", ".", ".."] {
            assert!(api.url(&["api", "v1", "applications", bad], &[]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn stream_lines_become_events() {
        let line = |t: &str| serde_json::to_vec(&json!({"result": {"type": t, "application": app("a")}})).unwrap();
        assert!(matches!(parse_event(&line("ADDED")), Ok(Some(WatchEvent::Changed(s))) if s.app.name == "a"));
        assert!(matches!(
            parse_event(&line("MODIFIED")),
            Ok(Some(WatchEvent::Changed(_)))
        ));
        assert!(matches!(parse_event(&line("DELETED")), Ok(Some(WatchEvent::Deleted(a))) if a.name == "a"));
        assert!(matches!(parse_event(b"\n"), Ok(None)));
        assert!(parse_event(br#"{"error": {"message": "permission denied"}}"#).is_err());
        assert!(parse_event(b"{not json").is_err());
    }

    /// Argo CD's table of selectable fields (`appFields`, argo-cd 3.5), the paths a listing may ask for.
    fn argo_cd_fields() -> impl Iterator<Item = &'static str> {
        include_str!("../../tests/fixtures/argocd/app_fields.txt").lines()
    }

    #[test]
    fn the_listing_asks_only_for_paths_in_argo_cds_field_table() {
        for field in LIST_FIELDS {
            let path = field.strip_prefix("items.").expect("an item path");
            assert!(
                argo_cd_fields().any(|f| f == path),
                "{path} is not selectable: Argo CD drops it"
            );
        }
        for needed in [
            "metadata.deletionTimestamp",
            "spec",
            "status.sync.status",
            "status.resources",
        ] {
            assert!(LIST_FIELDS.contains(&format!("items.{needed}").as_str()), "{needed}");
        }
    }

    /// A listing item as Argo CD's field selection writes it: nil pointers and maps as `null`, the sync result
    /// under `operationState.operation.sync`, no uid, no conditions, no history.
    fn listed_item() -> Vec<u8> {
        serde_json::to_vec(&json!({
            "metadata": {"annotations": null, "deletionTimestamp": null, "labels": {"team": "pay"},
                         "name": "a", "namespace": "argocd"},
            "spec": {"destination": {"namespace": "pay", "server": "https://kubernetes.default.svc"},
                     "project": "beta", "source": {"repoURL": "https://git.example/a", "path": "a"},
                     "syncPolicy": null},
            "status": {"health": {"status": "Healthy"},
                       "operationState": {"finishedAt": "2026-01-05T09:00:10Z", "phase": "Succeeded",
                                          "startedAt": "2026-01-05T09:00:00Z",
                                          "operation": {"sync": {"revision": "abc",
                                              "resources": [{"kind": "ConfigMap", "name": "old", "namespace": "pay",
                                                             "status": "Pruned", "message": "pruned"}]}}},
                       "sync": {"revision": "abc", "status": "OutOfSync"}}
        }))
        .unwrap()
    }

    #[test]
    fn a_listing_item_is_read_as_the_selection_argo_cd_wrote() {
        let snap = from_api_bytes(&listed_item(), 4).expect("readable");
        assert!(snap.listed);
        assert_eq!(snap.sync_status, crate::argocd::SyncStatus::OutOfSync);
        assert_eq!(snap.project, "beta");
        assert_eq!(snap.uid, None);
        assert!(!snap.deleting, "a null deletionTimestamp is none");
        let op = snap.operation.as_ref().expect("an operation");
        assert_eq!(op.revision.as_deref(), Some("abc"));
        assert_eq!(
            op.resources.len(),
            1,
            "the sync result is read from operationState.operation.sync"
        );
        assert_eq!(op.resources[0].status, crate::argocd::ResultCode::Pruned);
    }

    #[test]
    fn a_listing_items_sync_result_of_the_wrong_shape_is_read_as_none() {
        for result in [
            json!("a string"),
            json!({"resources": "not a list"}),
            json!({"revision": 5}),
            json!({"resources": [{"kind": ["ConfigMap"]}]}),
            json!([1, 2]),
        ] {
            let mut item: Value = serde_json::from_slice(&listed_item()).unwrap();
            item["status"]["operationState"]["operation"]["sync"] = result.clone();
            let snap = from_api_bytes(&serde_json::to_vec(&item).unwrap(), 4);
            if let Ok(snap) = snap {
                let op = snap.operation.expect("the operation is still read");
                assert!(op.resources.is_empty(), "{result}: {op:?}");
            }
        }
        let mut item: Value = serde_json::from_slice(&listed_item()).unwrap();
        item["status"]["operationState"]["operation"]["sync"] = json!(null);
        let snap = from_api_bytes(&serde_json::to_vec(&item).unwrap(), 4).expect("a nil result is none");
        assert!(snap.operation.expect("op").resources.is_empty());
    }

    #[test]
    fn a_listing_item_keeps_what_only_a_whole_application_carries() {
        let mut stored = from_api_bytes(&listed_item(), 4).expect("readable");
        stored.listed = false;
        stored.uid = Some("uid-a".into());
        stored.conditions = vec![crate::argocd::Condition {
            r#type: "SyncError".into(),
            message: "boom".into(),
        }];
        stored.previous_revision = Some("old".into());
        if let Some(op) = &mut stored.operation {
            op.initiator.username = Some("alice".into());
            op.message = "successfully synced".into();
        }
        let mut item = from_api_bytes(&listed_item(), 4).expect("readable");
        item.complete_from(Some(&stored));
        assert!(!item.listed);
        assert_eq!(
            item.uid.as_deref(),
            Some("uid-a"),
            "a missing uid is not a new Application"
        );
        assert_eq!(item.conditions, stored.conditions, "a missing field is never a change");
        assert_eq!(item.previous_revision.as_deref(), Some("old"));
        let op = item.operation.as_ref().expect("op");
        assert_eq!(op.initiator.username.as_deref(), Some("alice"), "the same operation");
        assert_eq!(crate::state::content_hash(&item), crate::state::content_hash(&stored));

        // Another operation: its initiator and message are not the stored one's.
        let mut later = from_api_bytes(&listed_item(), 4).expect("readable");
        if let Some(op) = &mut later.operation {
            op.started_at = op.started_at.map(|t| t + chrono::Duration::minutes(5));
        }
        later.complete_from(Some(&stored));
        let op = later.operation.as_ref().expect("op");
        assert_eq!(op.initiator.username, None);
        assert_eq!(op.message, "");
    }
}
