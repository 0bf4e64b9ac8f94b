//! Logs and OpenTelemetry traces for `telos-world` and `telos-gate`
//! (the project contract, "Tracing"; handoff design note, "Why it exists").
//!
//! # Layout
//! - [`init`]: logs to stderr as before (`RUST_LOG` filters,
//!   `TELOS_LOG_FORMAT=json` gives one JSON object a line) and, **only** when
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
//!   set, an OTLP/gRPC exporter behind a `tracing-opentelemetry` layer.
//!   Unset, no layer, no exporter, no propagation: nothing is paid.
//! - [`HandoffCarveOut`]: the sampler. The handoff path is recorded at 100 %
//!   whatever the head ratio (`OTEL_TRACES_SAMPLER_ARG`); everything else is
//!   parent-based with that ratio at the root.
//! - [`TelemetryGuard::shutdown`]: the clean flush at exit.
//! - [`traced`], [`with_remote_parent`]: W3C `traceparent` across the
//!   `Handoff` gRPC hop, so both shards' spans join one trace.
//! - [`metrics_listen_addr`]: where `/metrics` listens (a bare port is
//!   loopback), and [`warn_if_metrics_exposed`].
//!
//! What reaches the collector is bounded: spans from `telos*` crates at
//! INFO or above (their attributes are the declared fields only — no file,
//! thread or target attributes), and of the events only the failure events:
//! WARN or above with a `step` field (and no `player` field). Other log
//! lines, which may name a player, stay in the logs.

pub mod health;
mod listen;
mod open_files;
pub use listen::{
    METRICS_DEFAULT_IP, MetricsListenError, metrics_listen_addr, warn_if_metrics_exposed,
};
pub use open_files::raise_open_file_limit;

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{Link, SpanKind, TraceContextExt, TraceId, TracerProvider as _};
use opentelemetry::{Context, Key, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::resource::{EnvResourceDetector, ResourceDetector};
use opentelemetry_sdk::trace::{
    Sampler, SamplingDecision, SamplingResult, SdkTracer, SdkTracerProvider, ShouldSample,
};
use tracing::{Metadata, Subscriber, warn};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{EnvFilter, FilterExt, FilterFn, LevelFilter};
use tracing_subscriber::layer::{Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// Root spans recorded whatever the head ratio. Their children (`prepare`,
/// `directory_claim`, `abort`; `rpc`, `lease_flip`; `transfer_complete`)
/// follow them by parent-based sampling, so a `prepare` or `rpc` span
/// elsewhere is not forced in.
pub const CARVE_OUT: [&str; 4] = ["beginHandoff", "handoverZoneTo", "adopt", "transferZone"];

/// One OTLP export may take this long (unless `OTEL_EXPORTER_OTLP_TIMEOUT`
/// says otherwise). 2 s: a collector on the network answers in
/// milliseconds, and a stuck one must not hold the shutdown flush.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(2);

/// The flush at exit: one export of the last batch ([`EXPORT_TIMEOUT`]) and
/// a margin. Bounded, so an unreachable collector delays a stop, never
/// blocks it (the drain deadline comes first and is far longer).
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// Head ratio when `OTEL_TRACES_SAMPLER_ARG` is unset: sample everything.
const DEFAULT_RATIO: f64 = 1.0;

/// Set once an exporter is installed; propagation is a no-op until then.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Holds the tracer provider; [`TelemetryGuard::shutdown`] flushes it.
#[must_use = "call shutdown() at exit, or buffered spans are lost"]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Flush buffered spans and stop the exporter, within [`SHUTDOWN_TIMEOUT`].
    ///
    /// On a blocking thread: the SDK's shutdown blocks until the last
    /// export finishes, and that export needs the tonic worker task, which
    /// needs a runtime thread — blocking one in place can stall the flush
    /// for the whole timeout (on a current-thread runtime, always).
    pub async fn shutdown(mut self) {
        let Some(provider) = self.provider.take() else {
            return;
        };
        EXPORTING.store(false, Ordering::Relaxed);
        match tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT))
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %e, "flushing traces at exit failed"),
            Err(e) => warn!(error = %e, "the trace flush task failed"),
        }
    }
}

/// Install logging and, when an OTLP endpoint is configured, trace export.
///
/// Call inside a Tokio runtime: the tonic exporter connects lazily on the
/// current runtime. `service` is the default `service.name`
/// (`OTEL_SERVICE_NAME` or a `service.name` in `OTEL_RESOURCE_ATTRIBUTES`
/// wins). A second call keeps the first subscriber.
pub fn init(service: &str) -> TelemetryGuard {
    let (provider, problem) = if !otlp_configured() {
        (None, None)
    } else if tokio::runtime::Handle::try_current().is_err() {
        (
            None,
            Some("telemetry::init ran outside a Tokio runtime".to_string()),
        )
    } else {
        match build_provider(service) {
            Ok(p) => (Some(p), None),
            Err(e) => (None, Some(e)),
        }
    };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info"))
        .and(FilterFn::new(no_payloads));
    // Colour only for a terminal: log files and collectors get plain text.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let json = std::env::var("TELOS_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let fmt = if json {
        fmt.json().with_filter(filter).boxed()
    } else {
        fmt.with_filter(filter).boxed()
    };
    let otel = provider
        .as_ref()
        .map(|p| otel_layer(p.tracer(env!("CARGO_PKG_NAME"))));
    let installed = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init()
        .is_ok();
    // Not installed (a subscriber was already set): this provider saw no
    // span, so dropping it flushes nothing.
    let provider = provider.filter(|_| installed);
    if let Some(e) = problem {
        warn!(error = %e, "OTLP trace export is configured but could not start; tracing is off");
    }
    if provider.is_some() {
        EXPORTING.store(true, Ordering::Relaxed);
        tracing::info!(ratio = head_ratio(), "exporting traces over OTLP");
    }
    TelemetryGuard { provider }
}

/// Libraries that log what a player sent, whole, below INFO: the WebSocket
/// library traces every frame and message (a web player's password, a
/// resume token). Their events above DEBUG stay; none below, whatever
/// `RUST_LOG` asks (issue 30: no credential at any log level).
const PAYLOAD_LOGGERS: &[&str] = &["tungstenite", "tokio_tungstenite"];

/// Whether an event may be logged: not a [`PAYLOAD_LOGGERS`] one below INFO.
fn no_payloads(meta: &Metadata<'_>) -> bool {
    *meta.level() <= tracing::Level::INFO
        || !PAYLOAD_LOGGERS
            .iter()
            .any(|t| meta.target() == *t || meta.target().starts_with(&format!("{t}::")))
}

/// The standard switches: an endpoint turns export on; `OTEL_SDK_DISABLED`
/// and `OTEL_TRACES_EXPORTER=none` turn it off.
fn otlp_configured() -> bool {
    let set = |v: &str| std::env::var(v).is_ok_and(|s| !s.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
        || std::env::var("OTEL_TRACES_EXPORTER").is_ok_and(|v| v.eq_ignore_ascii_case("none"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

fn build_provider(service: &str) -> Result<SdkTracerProvider, String> {
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    let timeout_set = [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some());
    if !timeout_set {
        // The builder's own timeout overrides the environment: set it only
        // when the operator did not.
        exporter = exporter.with_timeout(EXPORT_TIMEOUT);
    }
    let exporter = exporter.build().map_err(|e| e.to_string())?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(HandoffCarveOut::new(head_ratio()))
        .with_resource(
            Resource::builder()
                .with_service_name(service_name(service))
                .build(),
        )
        .build())
}

/// `OTEL_SERVICE_NAME`, else `service.name` from `OTEL_RESOURCE_ATTRIBUTES`,
/// else `default` (the binary's name).
fn service_name(default: &str) -> String {
    if let Ok(name) = std::env::var("OTEL_SERVICE_NAME")
        && !name.is_empty()
    {
        return name;
    }
    EnvResourceDetector::new()
        .detect()
        .get(&Key::from_static_str("service.name"))
        .map(|v| v.to_string())
        .unwrap_or_else(|| default.to_string())
}

/// The head ratio for roots outside the carve-out: `OTEL_TRACES_SAMPLER_ARG`
/// (0..=1, default 1). `OTEL_TRACES_SAMPLER=always_off` / `always_on` (or
/// their `parentbased_` forms) mean 0 / 1. Sampling is always parent-based.
pub fn head_ratio() -> f64 {
    match std::env::var("OTEL_TRACES_SAMPLER").as_deref() {
        Ok("always_off" | "parentbased_always_off") => return 0.0,
        Ok("always_on" | "parentbased_always_on") => return 1.0,
        _ => {}
    }
    std::env::var("OTEL_TRACES_SAMPLER_ARG")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|r| (0.0..=1.0).contains(r))
        .unwrap_or(DEFAULT_RATIO)
}

/// The sampler: [`CARVE_OUT`] roots are `RecordAndSample`, whatever the
/// ratio; every other span is parent-based, roots at the head ratio.
#[derive(Clone, Debug)]
pub struct HandoffCarveOut {
    rest: Sampler,
}

impl HandoffCarveOut {
    pub fn new(ratio: f64) -> Self {
        HandoffCarveOut {
            rest: Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))),
        }
    }
}

impl ShouldSample for HandoffCarveOut {
    fn should_sample(
        &self,
        parent_context: Option<&Context>,
        trace_id: TraceId,
        name: &str,
        span_kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[Link],
    ) -> SamplingResult {
        if CARVE_OUT.contains(&name) {
            let trace_state = parent_context
                .filter(|cx| cx.has_active_span())
                .map(|cx| cx.span().span_context().trace_state().clone())
                .unwrap_or_default();
            return SamplingResult {
                decision: SamplingDecision::RecordAndSample,
                attributes: Vec::new(),
                trace_state,
            };
        }
        self.rest
            .should_sample(parent_context, trace_id, name, span_kind, attributes, links)
    }
}

/// The `tracing-opentelemetry` layer, with what it may see bounded (module
/// docs): the span's declared fields and nothing else, and of the events
/// only the failure events.
fn otel_layer<S>(tracer: SdkTracer) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_error_fields_to_exceptions(false)
        .with_filter(FilterFn::new(exported).with_max_level_hint(LevelFilter::INFO))
}

/// Spans from our crates at INFO+, and the failure events: WARN+ with a
/// `step` field and no `player` field.
fn exported(meta: &Metadata<'_>) -> bool {
    let fields = meta.fields();
    meta.target().starts_with("telos")
        && *meta.level() <= tracing::Level::INFO
        && (meta.is_span()
            || (*meta.level() <= tracing::Level::WARN
                && fields.field("step").is_some()
                && fields.field("player").is_none()))
}

/// `msg` as a tonic request carrying the current span's W3C `traceparent`
/// (nothing when not exporting).
pub fn traced<T>(msg: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(msg);
    if EXPORTING.load(Ordering::Relaxed) {
        let cx = tracing::Span::current().context();
        TraceContextPropagator::new()
            .inject_context(&cx, &mut MetadataInjector(request.metadata_mut()));
    }
    request
}

/// `span` (a `Handoff` handler's span) made a child of the caller's span,
/// from the request's `traceparent`. No header, or not exporting: `span`
/// is returned as it is.
pub fn with_remote_parent<T>(span: tracing::Span, request: &tonic::Request<T>) -> tracing::Span {
    if EXPORTING.load(Ordering::Relaxed) {
        let cx = TraceContextPropagator::new().extract(&MetadataExtractor(request.metadata()));
        if cx.span().span_context().is_remote() {
            let _ = span.set_parent(cx);
        }
    }
    span
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            tonic::metadata::MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(key, value);
        }
    }
}

struct MetadataExtractor<'a>(&'a tonic::metadata::MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => k.as_str(),
                tonic::metadata::KeyRef::Binary(k) => k.as_str(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceState};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};
    use tracing::info_span;

    use super::*;

    fn decide(sampler: &HandoffCarveOut, parent: Option<&Context>, name: &str) -> SamplingDecision {
        sampler
            .should_sample(
                parent,
                TraceId::from(0x5eed),
                name,
                &SpanKind::Internal,
                &[],
                &[],
            )
            .decision
    }

    fn parent(sampled: bool) -> Context {
        let flags = if sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        Context::new().with_remote_span_context(SpanContext::new(
            TraceId::from(7u128),
            SpanId::from(7u64),
            flags,
            true,
            TraceState::default(),
        ))
    }

    #[test]
    fn ratio_zero_keeps_the_carve_out_and_drops_the_rest() {
        let s = HandoffCarveOut::new(0.0);
        for root in CARVE_OUT {
            assert_eq!(
                decide(&s, None, root),
                SamplingDecision::RecordAndSample,
                "{root}"
            );
            // Even under an unsampled parent: the handoff is always traced.
            assert_eq!(
                decide(&s, Some(&parent(false)), root),
                SamplingDecision::RecordAndSample,
                "{root}"
            );
        }
        for other in ["tick", "session", "prepare", "rpc", "lease_flip"] {
            assert_eq!(decide(&s, None, other), SamplingDecision::Drop, "{other}");
            assert_eq!(
                decide(&s, Some(&parent(false)), other),
                SamplingDecision::Drop,
                "{other}"
            );
        }
        // A child follows its (carve-out, so sampled) parent.
        for child in ["prepare", "directory_claim", "abort", "rpc", "lease_flip"] {
            assert_eq!(
                decide(&s, Some(&parent(true)), child),
                SamplingDecision::RecordAndSample,
                "{child}"
            );
        }
        let all = HandoffCarveOut::new(1.0);
        assert_eq!(
            decide(&all, None, "tick"),
            SamplingDecision::RecordAndSample
        );
    }

    /// Collects exported spans in memory.
    #[derive(Clone, Debug, Default)]
    struct Collect(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Collect {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    /// The real layer and sampler at ratio 0, through `tracing`.
    #[test]
    fn through_tracing_only_the_handoff_path_is_exported() {
        let spans = Collect::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .with_sampler(HandoffCarveOut::new(0.0))
            .build();
        let subscriber = tracing_subscriber::registry().with(otel_layer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let root = info_span!("beginHandoff", zone = "forest", from_shard = "a");
            root.in_scope(|| {
                info_span!("directory_claim").in_scope(|| {});
                info_span!("prepare", to_shard = "b").in_scope(|| {
                    tracing::info!(player = "Hana", "not exported: no step field");
                });
                tracing::info!(step = "prepare", "not exported: below WARN");
                tracing::warn!(step = "prepare", player = "Hana", "not exported: a player");
                tracing::warn!(step = "prepare", "handoff failed");
            });
            drop(root);
            let other = info_span!("session", player = "Hana");
            other.in_scope(|| info_span!("prepare").in_scope(|| {}));
            info_span!("rpc").in_scope(|| {});
        });
        provider.shutdown().unwrap();
        let spans = spans.0.lock().unwrap();
        let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
        names.sort();
        assert_eq!(names, ["beginHandoff", "directory_claim", "prepare"]);
        let root = spans.iter().find(|s| s.name == "beginHandoff").unwrap();
        for child in spans.iter().filter(|s| s.name != "beginHandoff") {
            assert_eq!(child.span_context.trace_id(), root.span_context.trace_id());
            assert_eq!(child.parent_span_id, root.span_context.span_id());
        }
        let keys: Vec<&str> = root.attributes.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["zone", "from_shard"]);
        let events: Vec<_> = spans.iter().flat_map(|s| s.events.iter()).collect();
        assert_eq!(events.len(), 1, "only the failure event: {events:?}");
        assert!(
            events[0]
                .attributes
                .iter()
                .any(|kv| kv.key.as_str() == "step" && kv.value.as_str() == "prepare")
        );
    }

    #[test]
    fn traceparent_crosses_tonic_metadata() {
        let span_context = SpanContext::new(
            TraceId::from(0xabc),
            SpanId::from(0xdef),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        let cx = Context::new().with_remote_span_context(span_context);
        let mut md = tonic::metadata::MetadataMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut MetadataInjector(&mut md));
        assert!(md.get("traceparent").is_some());
        let back = TraceContextPropagator::new().extract(&MetadataExtractor(&md));
        let got = back.span().span_context().clone();
        assert_eq!(got.trace_id(), TraceId::from(0xabc));
        assert_eq!(got.span_id(), SpanId::from(0xdef));
        assert!(got.is_sampled() && got.is_remote());
    }
}
