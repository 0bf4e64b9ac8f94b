//! The metrics listener's three paths: `/metrics` (Prometheus text),
//! `/livez` (the process answers: 200) and `/readyz` (200 while the
//! process says it can serve, 503 with the reason while it cannot), for an
//! orchestrator's probes. Each binary keeps its [`Health`] current; the
//! listener only reads it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusBuilder;

/// How often histogram summaries are folded (what the exporter's own
/// listener did on its own).
const UPKEEP: Duration = Duration::from_secs(5);

/// Whether the process can serve now, and if not, why (as `/readyz` says).
#[derive(Debug)]
pub struct Health {
    ready: Mutex<Result<(), String>>,
}

impl Health {
    /// Not ready until told: a process is ready once it has checked.
    pub fn starting() -> Arc<Health> {
        Arc::new(Health {
            ready: Mutex::new(Err("starting".into())),
        })
    }

    pub fn set(&self, ready: Result<(), String>) {
        *self.ready.lock().unwrap_or_else(|p| p.into_inner()) = ready;
    }

    pub fn get(&self) -> Result<(), String> {
        self.ready.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Install `builder`'s recorder and serve `/metrics`, `/livez` and
/// `/readyz` on `addr`. Must run inside the Tokio runtime.
pub fn serve_metrics_and_health(
    addr: SocketAddr,
    builder: PrometheusBuilder,
    health: Arc<Health>,
) -> Result<(), String> {
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| format!("binding {addr}: {e}"))?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
    let handle = builder.install_recorder().map_err(|e| e.to_string())?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(UPKEEP).await;
            upkeep.run_upkeep();
        }
    });
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let text = handle.render();
                async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text) }
            }),
        )
        .route("/livez", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let answer = match health.get() {
                    Ok(()) => (StatusCode::OK, "ready\n".to_string()),
                    Err(why) => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("not ready: {why}\n"),
                    ),
                };
                async move { answer }
            }),
        );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the metrics and health listener stopped");
        }
    });
    Ok(())
}
