//! Builds and runs the service: store → pipeline → HTTP server (bound first, so port 0 works in tests) → the
//! scheduler loop (timers) and the outbox worker. `run_until_stopped` handles SIGTERM/Ctrl-C gracefully: stop
//! accepting, let in-flight requests and deliveries finish within a timeout, exit; and, when the application knows
//! its configuration file ([`Application::reloading_from`]), SIGHUP reloads it (`crate::reload`).

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpServer, web};
use tokio::sync::watch;

use crate::api::{self, AppContext, Auth, BodyLimits};
use crate::clock::{SharedClock, SystemClock};
use crate::configuration::Settings;
use crate::outbox::Worker;
use crate::pipeline::Pipeline;
use crate::progress::{Loop, Progress};
use crate::receivers::{self, Shared};
use crate::reload::{ConfigSource, Reloader};
use crate::store::Store;

pub struct Application {
    port: u16,
    server: actix_web::dev::Server,
    pipeline: Pipeline,
    store: Store,
    worker: Worker,
    tick: Duration,
    purge_every: Duration,
    settings: Arc<Settings>,
    api: web::Data<AppContext>,
    reloader: Option<Arc<Reloader>>,
    progress: Progress,
}

impl Application {
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        Self::build_with_clock(settings, Arc::new(SystemClock)).await
    }

    pub async fn build_with_clock(settings: Settings, clock: SharedClock) -> anyhow::Result<Self> {
        settings.check_exposure()?;
        let settings = Arc::new(settings);
        let store = Store::connect(&settings.storage).await?;
        let pipeline = Pipeline::new(settings.clone(), store.clone(), clock.clone());
        let receivers = receivers::build_all(&Shared::new(settings.clone(), clock.clone()))?;
        let progress = Progress::default();
        let worker = Worker::new(store.clone(), receivers, &settings, clock.clone())
            .woken_by(pipeline.deliveries_queued())
            .reporting_to(progress.clone());
        let listener = TcpListener::bind(&settings.server.listen)
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", settings.server.listen))?;
        let port = listener.local_addr()?.port();
        let data = api::data(AppContext {
            pipeline: pipeline.clone(),
            auth: Auth::new(&settings.server.auth),
            body_limits: BodyLimits::of(&settings.server),
            metrics: crate::telemetry::metrics(),
            hosts: settings.server.hosts(),
            form_key: api::FormKey::of(&settings.server),
            metrics_settings: settings.server.metrics,
        });
        let api = data.clone();
        let server = http_server(data, &settings, listener)?;
        Ok(Self {
            port,
            server,
            pipeline,
            store,
            worker,
            tick: settings.scheduler.tick,
            purge_every: Duration::from_secs(60),
            settings,
            api,
            reloader: None,
            progress,
        })
    }

    /// Reloads the configuration from `source` on SIGHUP (see `crate::reload`).
    pub fn reloading_from(mut self, source: ConfigSource) -> Self {
        self.reloader = Some(Arc::new(Reloader::new(
            source,
            self.settings.clone(),
            self.pipeline.clone(),
            self.worker.receiver_set(),
            self.api.clone(),
        )));
        self
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The passes of the scheduler and the outbox worker (see `crate::progress`): tests wait on it.
    pub fn progress(&self) -> Progress {
        self.progress.clone()
    }

    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        self.run_until(shutdown_signal()).await
    }

    /// Runs until `stop` completes (tests pass their own trigger), then shuts down gracefully.
    pub async fn run_until(self, stop: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let handle = self.server.handle();
        let server = tokio::spawn(self.server);
        let scheduler = tokio::spawn(scheduler_loop(
            self.pipeline.clone(),
            self.tick,
            self.purge_every,
            self.progress.clone(),
            stop_rx.clone(),
        ));
        let checkpointer = tokio::spawn(checkpoint_loop(self.store.clone(), stop_rx.clone()));
        // The Argo CD API source, when configured (it returns at once otherwise).
        let resync = tokio::spawn(crate::resync::run(self.pipeline.clone(), stop_rx.clone()));
        // The schedules' calendars given by URL (returns at once on stop; does nothing without any).
        let calendars = tokio::spawn(crate::pipeline::refresh_loop(self.pipeline.clone(), stop_rx.clone()));
        if let Some(reloader) = self.reloader.clone() {
            // Installed before "herald is listening": a SIGHUP right after it reloads, never kills.
            #[cfg(unix)]
            let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
            #[cfg(not(unix))]
            let hangup = ();
            tokio::spawn(reload_on_hangup(reloader, hangup, stop_rx.clone()));
        }
        let worker = tokio::spawn(self.worker.run(stop_rx));
        tracing::info!(port = self.port, "herald is listening");
        stop.await;
        tracing::info!("shutting down: no new requests; finishing what is in flight");
        handle.stop(true).await;
        let _ = stop_tx.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(20), async {
            let _ = scheduler.await;
            let _ = worker.await;
            let _ = checkpointer.await;
            let _ = resync.await;
            let _ = calendars.await;
        })
        .await;
        let _ = server.await;
        self.store.close().await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// SIGTERM or Ctrl-C. The handler is installed when this is called, not when the future is first polled: a SIGTERM
/// arriving right after "herald is listening" is a clean stop, never the default disposition's kill.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        #[cfg(unix)]
        if let Some(mut term) = term {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Reloads the configuration on each SIGHUP until the service stops.
#[cfg(unix)]
async fn reload_on_hangup(
    reloader: Arc<Reloader>,
    hangup: std::io::Result<tokio::signal::unix::Signal>,
    mut stop: watch::Receiver<bool>,
) {
    {
        let mut hangup = match hangup {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP: the configuration will not be reloaded");
                return;
            }
        };
        loop {
            tokio::select! {
                _ = hangup.recv() => {
                    tracing::info!("SIGHUP: reloading the configuration");
                    // Loading reads files: off the runtime's workers.
                    let r = reloader.clone();
                    let _ = tokio::task::spawn_blocking(move || r.reload()).await;
                }
                _ = stop.changed() => return,
            }
        }
    }
}

#[cfg(not(unix))]
async fn reload_on_hangup(reloader: Arc<Reloader>, _hangup: (), mut stop: watch::Receiver<bool>) {
    let _ = (reloader, stop.changed().await);
}

/// SQLite's write-ahead log is checkpointed here, twice a second, off the writer's path.
async fn checkpoint_loop(store: Store, mut stop: watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            let _ = store.checkpoint().await;
            return;
        }
        if let Err(e) = store.checkpoint().await {
            tracing::debug!(error = %e, "checkpoint skipped");
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = stop.changed() => {}
        }
    }
}

/// The durable timers: every `tick`, whatever is due in the store runs (rule deadlines, group flushes,
/// escalations, silences that ended); raw bodies past their retention are purged now and then.
pub async fn scheduler_loop(
    p: Pipeline,
    tick: Duration,
    purge_every: Duration,
    progress: Progress,
    mut stop: watch::Receiver<bool>,
) {
    let mut last_purge = std::time::Instant::now() - purge_every;
    loop {
        if *stop.borrow() {
            return;
        }
        match p.tick().await {
            Ok(ran) => progress.passed(Loop::Scheduler, ran > 0),
            Err(e) => {
                tracing::warn!(error = %e, "scheduler tick failed; will retry");
                // Not idle: what was due is still to do.
                progress.passed(Loop::Scheduler, true);
            }
        }
        if last_purge.elapsed() >= purge_every {
            last_purge = std::time::Instant::now();
            match p.purge_expired().await {
                Ok(n) if n > 0 => {
                    tracing::info!(
                        purged = n,
                        "rows past their retention removed (raw bodies, deleted Applications, resolved incidents and timelines, delivered notifications)"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "purging rows past their retention failed"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            // Woken by an ingest that made something due: gather what else arrives for a moment, so a busy
            // ingest does not turn into a tick per batch.
            _ = async {
                p.timers_due().await;
                tokio::time::sleep(WAKE_DEBOUNCE.min(tick)).await;
            } => {}
            _ = stop.changed() => {}
        }
    }
}

const WAKE_DEBOUNCE: Duration = Duration::from_millis(20);

/// The HTTP server of the API and the pages on `listener`, with `data`; none of its pages may be framed by another
/// site (their forms act on incidents: clickjacking).
fn http_server(
    data: web::Data<AppContext>,
    settings: &Settings,
    listener: TcpListener,
) -> anyhow::Result<actix_web::dev::Server> {
    let budget = web::Data::new(api::BodyBudget::of(&settings.server));
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(budget.clone())
            .app_data(
                web::PathConfig::default()
                    .error_handler(|e, _| api::ApiError::BadRequest(format!("bad path: {e}")).into()),
            )
            .configure(api::configure)
            .wrap(actix_web::middleware::from_fn(api::refuse_forgeries))
            .wrap(actix_web::middleware::from_fn(api::close_refused))
            // No page of Herald's may be framed by another site (its forms act on incidents: clickjacking).
            .wrap(
                actix_web::middleware::DefaultHeaders::new()
                    .add(("X-Frame-Options", "DENY"))
                    .add(("Content-Security-Policy", "frame-ancestors 'none'"))
                    .add(("X-Content-Type-Options", "nosniff")),
            )
    })
    .shutdown_timeout(10)
    .disable_signals();
    if let Some(w) = settings.server.workers {
        server = server.workers(w.max(1));
    }
    Ok(server.listen(listener)?.run())
}
