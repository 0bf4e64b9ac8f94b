//! Metric names, in one place so dashboards and code agree. Recorded through
//! the `metrics` facade; the binary installs the Prometheus exporter, tests
//! record into nothing.

use std::net::SocketAddr;

/// Connections accepted (counter).
pub const CONNECTIONS_TOTAL: &str = "telos_gate_connections_total";
/// Connections open now (gauge).
pub const CONNECTIONS_OPEN: &str = "telos_gate_connections";
/// Disconnects the gate decided, by `reason` (counter):
/// `slow_client`, `idle`, `login_failures`, `login_timeout`, `resume_gave_up`,
/// `full`, `ip_cap` (over `--max-connections-per-ip`), `shutdown`.
pub const DISCONNECTS_TOTAL: &str = "telos_gate_disconnects_total";
/// Input lines sent again after a re-attach (counter).
pub const REPLAYED_LINES_TOTAL: &str = "telos_gate_replayed_lines_total";
/// Input lines held across all connections, waiting for a `DurableAck` (gauge).
pub const BUFFERED_LINES: &str = "telos_gate_buffered_lines";
/// Bytes of input held across all connections, waiting for a `DurableAck`
/// (gauge): bounded by `--input-buffer-bytes` per connection.
pub const BUFFERED_BYTES: &str = "telos_gate_buffered_input_bytes";
/// Sessions re-attached, by `kind` (`handoff`, `redirect`, `resume`) (counter).
pub const REATTACH_TOTAL: &str = "telos_gate_reattach_total";
/// Login attempts by `outcome` (`ok`, `failed`, `rate_limited`,
/// `create_limited`, `unavailable`, `busy`) (counter).
pub const LOGINS_TOTAL: &str = "telos_gate_logins_total";
/// Protocol violations from shards, e.g. acks beyond what was sent (counter).
pub const PROTOCOL_ERRORS_TOTAL: &str = "telos_gate_protocol_errors_total";
/// Shards found hung (off the registry and no answer to a probe), whose
/// links the gate ended (counter).
pub const HUNG_SHARDS_TOTAL: &str = "telos_gate_hung_shards_total";
/// Operator page requests refused for naming it by another host (counter;
/// DNS rebinding, `crate::operator`).
pub const OPERATOR_REFUSED_TOTAL: &str = "telos_gate_operator_refused_total";
/// Shards that heartbeat but did not answer this gate for the reachability
/// bound, whose links the gate ended (counter; `crate::reachability`).
pub const UNREACHABLE_SHARDS_TOTAL: &str = "telos_gate_unreachable_shards_total";
/// Room chatter frames dropped for players reading slower than the room talks.
pub const CHATTER_DROPPED_TOTAL: &str = "telos_gate_chatter_dropped_total";
/// Floods of commands over a player's rate (`--commands-per-sec`): counted
/// once a flood, when the player is told.
pub const COMMANDS_THROTTLED_TOTAL: &str = "telos_gate_commands_throttled_total";

/// Web pages resuming a kept session, by `outcome` (`resumed`, `refused`:
/// a token spent, revoked or unknown) (counter).
pub const WEB_RESUMES_TOTAL: &str = "telos_gate_web_resumes_total";
/// WebSocket requests refused for their page's `Origin`.
pub const WEB_ORIGIN_REFUSED_TOTAL: &str = "telos_gate_web_origin_refused_total";
/// Telnet `resume <token>` attempts, by `outcome` (`resumed`, `refused`).
pub const TELNET_RESUMES_TOTAL: &str = "telos_gate_telnet_resumes_total";

pub fn disconnect(reason: &'static str) {
    metrics::counter!(DISCONNECTS_TOTAL, "reason" => reason).increment(1);
}

/// Install the Prometheus recorder and serve `/metrics`, `/livez` and
/// `/readyz` (from `health`) on `addr`. Must run inside the Tokio runtime.
pub fn install_prometheus(
    addr: SocketAddr,
    health: std::sync::Arc<telos_telemetry::health::Health>,
) -> Result<(), String> {
    let builder = metrics_exporter_prometheus::PrometheusBuilder::new();
    telos_telemetry::health::serve_metrics_and_health(addr, builder, health).map_err(|e| {
        format!("invalid metrics_listen (--metrics-listen / TELOS_METRICS_LISTEN) {addr}: {e}")
    })?;
    metrics::describe_counter!(CONNECTIONS_TOTAL, "Player connections accepted");
    metrics::describe_gauge!(CONNECTIONS_OPEN, "Player connections open");
    metrics::describe_counter!(
        DISCONNECTS_TOTAL,
        "Disconnects decided by the gate, by reason"
    );
    metrics::describe_counter!(
        REPLAYED_LINES_TOTAL,
        "Input lines replayed after a re-attach"
    );
    metrics::describe_gauge!(BUFFERED_LINES, "Input lines buffered until durably saved");
    metrics::describe_gauge!(BUFFERED_BYTES, "Input bytes buffered until durably saved");
    metrics::describe_counter!(REATTACH_TOTAL, "Sessions re-attached, by kind");
    metrics::describe_counter!(LOGINS_TOTAL, "Login attempts, by outcome");
    metrics::describe_counter!(
        PROTOCOL_ERRORS_TOTAL,
        "Protocol violations seen from shards"
    );
    metrics::describe_counter!(
        HUNG_SHARDS_TOTAL,
        "Shards found hung, whose players the gate resumed elsewhere"
    );
    metrics::describe_counter!(
        OPERATOR_REFUSED_TOTAL,
        "Operator page requests refused for naming the page by another host"
    );
    metrics::describe_counter!(
        UNREACHABLE_SHARDS_TOTAL,
        "Shards this gate could not reach while they heartbeat, whose players it resumed where their zones went"
    );
    metrics::describe_counter!(
        CHATTER_DROPPED_TOTAL,
        "Room chatter frames dropped for players reading slower than the room talks"
    );
    metrics::describe_counter!(
        COMMANDS_THROTTLED_TOTAL,
        "Floods of commands held to a player's rate (one a flood)"
    );
    Ok(())
}
