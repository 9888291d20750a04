//! The HTTP room: ZooKeeper's AdminServer commands (`/commands/<name>`,
//! JSON) and the Prometheus endpoint (`/metrics`), each on the port
//! ZooKeeper's keys give it. Everything here reads what the server
//! publishes through its [`server::Monitor`]; the only changes it makes are
//! the stat resets ZooKeeper's commands make.
//!
//! Layout:
//! - `commands`: the command table and each command's JSON.
//! - `connections`: the AdminServer's port, HTTP and HTTPS, and who each
//!   request comes from.
//! - `authorization`: the `Authorization` header and the root's ACL, for
//!   the commands that need them.
//! - `snapshot`: the `snapshot` and `restore` commands.
//! - `metrics`: the Prometheus text exposition.
//!
//! The listeners are bound before the server starts ([`Listeners::bind`]),
//! so a busy metrics port stops the start-up as ZooKeeper's provider does,
//! and serve once the server can be read ([`Listeners::serve`]).

mod authorization;
mod commands;
mod connections;
mod console;
mod metrics;
mod snapshot;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::Value;
use server::{Monitor, ServerConfig};
use tokio::net::TcpListener;

use crate::commands::{Action, Arguments, Object};
use crate::connections::{Https, Peer};
use crate::snapshot::RateLimiter;

/// The bound HTTP listeners of one server.
pub struct Listeners {
    admin: Option<(TcpListener, Option<Https>)>,
    metrics: Option<TcpListener>,
    command_url: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(
        "cannot serve Prometheus metrics on {addr}: {source} (is another server using the port? set metricsProvider.httpPort)"
    )]
    MetricsListen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

impl Listeners {
    /// Binds the AdminServer's port when `admin.enableServer` is on, and
    /// the metrics port when a metrics provider is configured. Like
    /// ZooKeeper, a server whose AdminServer cannot start still serves
    /// clients (the failure is logged), and one whose metrics provider
    /// cannot start does not start.
    pub async fn bind(config: &ServerConfig) -> Result<Self, AdminError> {
        let admin = if config.admin.enabled {
            bind_admin(config).await
        } else {
            None
        };
        let metrics = match &config.metrics {
            Some(metrics) => {
                let addr = SocketAddr::new(metrics.host, metrics.port);
                let listener = TcpListener::bind(addr)
                    .await
                    .map_err(|source| AdminError::MetricsListen { addr, source })?;
                Some(listener)
            }
            None => None,
        };
        Ok(Self {
            admin,
            metrics,
            command_url: config.admin.command_url.clone(),
        })
    }

    /// Where the AdminServer listens, if it does.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }

    /// Where `/metrics` is served, if it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves both listeners on the current runtime until it stops, or
    /// until the tasks returned are aborted (which frees the ports).
    pub fn serve(self, monitor: Monitor) -> Vec<tokio::task::JoinHandle<()>> {
        let mut served = Vec::new();
        if let Some((listener, https)) = self.admin {
            let routes = admin_routes(&self.command_url, monitor.clone());
            let scheme = if https.is_some() { "https" } else { "http" };
            log_serving("the AdminServer", scheme, &listener, &self.command_url);
            served.push(tokio::spawn(connections::serve(listener, routes, https)));
        }
        if let Some(listener) = self.metrics {
            let routes = Router::new()
                .route("/metrics", get(metrics_page))
                .with_state(monitor);
            log_serving("Prometheus metrics", "http", &listener, "/metrics");
            served.push(tokio::spawn(serve_routes(listener, routes)));
        }
        served
    }
}

/// The AdminServer's listener and its HTTPS, or `None` when it cannot
/// serve: as in ZooKeeper, the server then runs without it, which is
/// logged.
async fn bind_admin(config: &ServerConfig) -> Option<(TcpListener, Option<Https>)> {
    let admin = &config.admin;
    let https = if admin.https() {
        match admin_https(config) {
            Ok(https) => Some(https),
            Err(error) => {
                tracing::warn!(
                    "the AdminServer cannot serve HTTPS: {error}; the server runs without it (admin.forceHttps and admin.portUnification use the ssl.quorum.keyStore and ssl.quorum.trustStore settings)"
                );
                return None;
            }
        }
    } else {
        None
    };
    let addr = SocketAddr::new(admin.address, admin.port);
    match TcpListener::bind(addr).await {
        Ok(listener) => Some((listener, https)),
        Err(error) => {
            tracing::warn!(
                "the AdminServer cannot listen on {addr}: {error}; the server runs without it (set admin.serverPort, or admin.enableServer=false)"
            );
            None
        }
    }
}

/// HTTPS with the `ssl.quorum.*` stores, as ZooKeeper's AdminServer: a
/// client certificate asked for only with `admin.needClientAuth`, and then
/// required. The console, when it is on and there is a trust store to
/// check them against, asks for one without requiring it, so that a
/// person can sign in with it.
fn admin_https(config: &ServerConfig) -> Result<Https, tls::TlsError> {
    let mut settings = config.quorum_tls.settings.clone();
    let can_check_certificates = settings.trust_store.location.is_some();
    settings.client_auth = if config.admin.need_client_auth {
        tls::ClientAuth::Need
    } else if config.admin.console_enabled && can_check_certificates {
        tls::ClientAuth::Want
    } else {
        tls::ClientAuth::None
    };
    Ok(Https {
        acceptor: tokio_rustls::TlsAcceptor::from(tls::server_config(&settings)?),
        plain_too: !config.admin.force_https,
    })
}

fn log_serving(what: &str, scheme: &str, listener: &TcpListener, path: &str) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!("{what} at {scheme}://{addr}{path}");
    }
}

async fn serve_routes(listener: TcpListener, routes: Router) {
    if let Err(error) = axum::serve(listener, routes).await {
        tracing::warn!("an HTTP listener stopped: {error}");
    }
}

/// What the AdminServer's handlers share.
struct AdminState {
    monitor: Monitor,
    snapshot_limiter: RateLimiter,
}

fn admin_routes(command_url: &str, monitor: Monitor) -> Router {
    let listing = {
        let command_url = command_url.to_string();
        move || async move { Html(commands::links(&command_url)) }
    };
    let console = monitor
        .config()
        .admin
        .console_enabled
        .then(|| console::routes(monitor.clone()));
    let state = Arc::new(AdminState {
        snapshot_limiter: RateLimiter::for_snapshot(monitor.config().admin.rate_limit_interval_ms),
        monitor,
    });
    let commands = Router::new()
        .route(command_url, get(listing.clone()).post(listing.clone()))
        .route(
            &format!("{command_url}/"),
            get(listing.clone()).post(listing),
        )
        .route(
            &format!("{command_url}/{{name}}"),
            get(command).post(command),
        )
        .with_state(state);
    match console {
        Some(console) => commands.merge(console),
        None => commands,
    }
}

/// Runs one command, in ZooKeeper's order of checks: is there such a
/// command, can the server run it now, may this caller, does the method
/// fit it.
async fn command(
    State(state): State<Arc<AdminState>>,
    Extension(peer): Extension<Peer>,
    method: Method,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(arguments): Query<Arguments>,
) -> Response {
    let monitor = &state.monitor;
    let command = match commands::find(monitor, &name) {
        Ok(command) => command,
        Err(answer) => return json(StatusCode::OK, &answer),
    };
    if command.needs_authorization() {
        let header = headers.get(header::AUTHORIZATION);
        if let Err(refusal) = authorization::authorize(monitor, header, &peer) {
            let error = Some(refusal.error.to_string());
            return json(
                refusal.status,
                &commands::answer(&name, Object::new(), error),
            );
        }
    }
    match (command.action, method == Method::POST) {
        (Action::Read(run), false) => json(
            StatusCode::OK,
            &commands::run_read(monitor, command, run, &arguments),
        ),
        (Action::Snapshot, false) => {
            snapshot::snapshot(monitor, &state.snapshot_limiter, &arguments).await
        }
        (Action::Restore, true) => snapshot::restore(monitor),
        (Action::Restore, false) => wrong_method(command.primary(), "POST"),
        (_, true) => wrong_method(command.primary(), "GET"),
    }
}

/// A command asked with the method it does not take. ZooKeeper's servlet
/// fails with an HTML error page there; this says what to do instead.
fn wrong_method(command: &str, takes: &str) -> Response {
    let error = format!("{command} takes {takes}");
    json(
        StatusCode::METHOD_NOT_ALLOWED,
        &commands::answer(command, Object::new(), Some(error)),
    )
}

/// A JSON answer, pretty-printed as ZooKeeper's Jackson writes it.
fn json(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string_pretty(body).unwrap_or_default(),
    )
        .into_response()
}

async fn metrics_page(State(monitor): State<Monitor>) -> Response {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        metrics::render(&monitor),
    )
        .into_response()
}
