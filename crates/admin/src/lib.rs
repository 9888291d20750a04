//! The HTTP room: ZooKeeper's AdminServer commands (`/commands/<name>`,
//! JSON) and the Prometheus endpoint (`/metrics`), each on the port
//! ZooKeeper's keys give it. Everything here reads what the server
//! publishes through its [`server::Monitor`]; the only changes it makes are
//! the stat resets ZooKeeper's commands make.
//!
//! Layout:
//! - `commands`: the command table and each command's JSON.
//! - `metrics`: the Prometheus text exposition.
//!
//! The listeners are bound before the server starts ([`Listeners::bind`]),
//! so a busy metrics port stops the start-up as ZooKeeper's provider does,
//! and serve once the server can be read ([`Listeners::serve`]).

mod commands;
mod metrics;

use std::net::SocketAddr;

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use server::{Monitor, ServerConfig};
use tokio::net::TcpListener;

/// The bound HTTP listeners of one server.
pub struct Listeners {
    admin: Option<TcpListener>,
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
            let addr = SocketAddr::new(config.admin.address, config.admin.port);
            match TcpListener::bind(addr).await {
                Ok(listener) => Some(listener),
                Err(error) => {
                    tracing::warn!(
                        "the AdminServer cannot listen on {addr}: {error}; the server runs without it (set admin.serverPort, or admin.enableServer=false)"
                    );
                    None
                }
            }
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
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Where `/metrics` is served, if it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves both listeners on the current runtime until it stops.
    pub fn serve(self, monitor: Monitor) {
        if let Some(listener) = self.admin {
            let routes = admin_routes(&self.command_url, monitor.clone());
            log_serving("the AdminServer", &listener, &self.command_url);
            tokio::spawn(serve_routes(listener, routes));
        }
        if let Some(listener) = self.metrics {
            let routes = Router::new()
                .route("/metrics", get(metrics_page))
                .with_state(monitor);
            log_serving("Prometheus metrics", &listener, "/metrics");
            tokio::spawn(serve_routes(listener, routes));
        }
    }
}

fn log_serving(what: &str, listener: &TcpListener, path: &str) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!("{what} at http://{addr}{path}");
    }
}

async fn serve_routes(listener: TcpListener, routes: Router) {
    if let Err(error) = axum::serve(listener, routes).await {
        tracing::warn!("an HTTP listener stopped: {error}");
    }
}

fn admin_routes(command_url: &str, monitor: Monitor) -> Router {
    let listing = {
        let command_url = command_url.to_string();
        move || async move { Html(commands::links(&command_url)) }
    };
    Router::new()
        .route(command_url, get(listing.clone()))
        .route(&format!("{command_url}/"), get(listing))
        .route(&format!("{command_url}/{{name}}"), get(command))
        .with_state(monitor)
}

async fn command(
    State(monitor): State<Monitor>,
    Path(name): Path<String>,
    Query(arguments): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let body = commands::run(&monitor, &name, &arguments);
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string_pretty(&body).unwrap_or_default(),
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
