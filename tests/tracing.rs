//! End to end: OpenTelemetry traces of the handoff path (CONTRACT
//! "Tracing"). Real `telos-world` processes export over OTLP/gRPC to a tiny
//! receiver in this test process, with the head ratio at 0: only the
//! carve-out (`beginHandoff`, `handoverZoneTo`, ...) and what hangs under it
//! may arrive, and it must arrive whole, joined across the gRPC hop, with
//! bounded attributes.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use telos_telemetry::CARVE_OUT;
use telos_testkit::RedisServer;
use telos_testkit::driver::Driver;
use telos_testkit::keys::TempKeys;
use telos_testkit::process::{Proc, WorldOpts, start_world};
use telos_testkit::world::starter_zones;
use telos_testkit::world::{path, path_to_zone};
use telos_tls::Role;
use telos_tls::files::{CA_CRT, CA_KEY, cert_file, key_file};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

const PASSWORD: &str = "correct horse";

/// A shard's clean stop (SIGINT) or drain (SIGTERM) may take this long,
/// trace flush included.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// One received span, flattened.
#[derive(Clone, Debug)]
struct Span {
    service: String,
    name: String,
    trace: String,
    id: String,
    /// Empty for a root.
    parent: String,
    attrs: BTreeMap<String, String>,
    events: Vec<(String, BTreeMap<String, String>)>,
}

impl Span {
    fn attr(&self, key: &str) -> &str {
        self.attrs.get(key).map_or("", String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.attrs.keys().map(String::as_str).collect()
    }
}

/// The OTLP `TraceService`, collecting every exported span.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Span>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let mut got = Vec::new();
        for rs in request.into_inner().resource_spans {
            let resource = rs
                .resource
                .map(|r| attrs(&r.attributes))
                .unwrap_or_default();
            let service = resource.get("service.name").cloned().unwrap_or_default();
            for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                got.push(Span {
                    service: service.clone(),
                    name: span.name,
                    trace: hex(&span.trace_id),
                    id: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                    attrs: attrs(&span.attributes),
                    events: span
                        .events
                        .into_iter()
                        .map(|e| (e.name, attrs(&e.attributes)))
                        .collect(),
                });
            }
        }
        self.0.lock().unwrap().extend(got);
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Receiver {
    /// Serve on `127.0.0.1:0`; returns the endpoint for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    async fn start() -> anyhow::Result<(Receiver, String)> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let receiver = Receiver::default();
        let service = TraceServiceServer::new(receiver.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(TcpIncoming::from(listener)),
        );
        Ok((receiver, endpoint))
    }

    fn spans(&self) -> Vec<Span> {
        self.0.lock().unwrap().clone()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
        .collect()
}

fn text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// The spans directly under `parent` (same trace, its span id as parent).
fn children<'a>(spans: &'a [Span], parent: &Span) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| s.trace == parent.trace && s.parent == parent.id)
        .collect()
}

fn names(spans: &[&Span]) -> Vec<String> {
    let mut n: Vec<String> = spans.iter().map(|s| s.name.clone()).collect();
    n.sort();
    n
}

fn one<'a>(spans: &[&'a Span], name: &str) -> &'a Span {
    let found: Vec<&&Span> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} in {spans:#?}");
    found[0]
}

/// Bounded attributes, everywhere: no instance-shaped id, no player name,
/// in any span attribute, event name or event attribute.
fn assert_bounded(spans: &[Span], player: &str) {
    let player = player.to_lowercase();
    for s in spans {
        let texts = s.attrs.values().chain(
            s.events
                .iter()
                .flat_map(|(n, a)| std::iter::once(n).chain(a.values())),
        );
        for t in texts {
            assert!(!t.contains('#'), "instance-shaped id in {s:#?}");
            assert!(!t.to_lowercase().contains(&player), "player name in {s:#?}");
        }
    }
}

/// At ratio 0 nothing outside the carve-out arrives: every span is a
/// carve-out root or hangs under one that arrived.
fn assert_only_the_carve_out(spans: &[Span]) {
    let ids: HashSet<&str> = spans.iter().map(|s| s.id.as_str()).collect();
    for s in spans {
        assert!(
            CARVE_OUT.contains(&s.name.as_str()) || ids.contains(s.parent.as_str()),
            "a span outside the carve-out was sampled at ratio 0: {s:#?}"
        );
        assert_eq!(s.service, "telos-world", "service.name defaults: {s:#?}");
    }
}

/// A shard exporting to `endpoint` at head ratio 0.
fn shard<'a>(
    id: &'a str,
    redis: &'a RedisServer,
    zones: &'a [&'a str],
    keys: &Path,
    endpoint: &str,
) -> anyhow::Result<Proc> {
    let mut o = WorldOpts::new(id, &redis.url, zones).keyed(keys);
    o.env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint.to_string()),
        ("OTEL_TRACES_SAMPLER_ARG".into(), "0".into()),
    ];
    start_world(o)
}

/// Give `to` the cluster CA and role certificates of `from`, keeping its
/// own handoff and snapshot keypairs.
fn share_certificates(from: &TempKeys, to: &TempKeys) -> anyhow::Result<()> {
    for role in [Role::Shard, Role::Gate, Role::Operator] {
        for file in [cert_file(from.path(), role), key_file(from.path(), role)] {
            let name = file.file_name().expect("a file name");
            std::fs::remove_file(to.path().join(name))?;
            std::fs::copy(&file, to.path().join(name))?;
        }
    }
    for name in [CA_CRT, CA_KEY] {
        std::fs::remove_file(to.path().join(name))?;
        std::fs::copy(from.path().join(name), to.path().join(name))?;
    }
    Ok(())
}

fn zones_except(hosted: &[&str]) -> Vec<String> {
    starter_zones()
        .into_iter()
        .filter(|z| !hosted.contains(&z.as_str()))
        .collect()
}

/// Signal `p` and wait for its exit off the runtime (the receiver must keep
/// answering the shard's last export meanwhile).
async fn stop(mut p: Proc, sig: i32) -> anyhow::Result<ExitStatus> {
    let (status, log) = tokio::task::spawn_blocking(move || {
        let status = p.stop_with(sig, STOP_TIMEOUT);
        (status, p.log_text())
    })
    .await?;
    let status = status?;
    assert!(status.success(), "exit {status:?}:\n{log}");
    Ok(status)
}

/// Walk into the forest (on shard-b) from the city square (on shard-a).
async fn walk_to_forest(p: &mut Driver) -> anyhow::Result<String> {
    let route = path_to_zone("city:square", "forest");
    let (last, approach) = route.split_last().expect("a route");
    for dir in approach {
        p.command(dir).await?;
    }
    p.command(last).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_shard_walk_is_one_trace_across_both_shards() -> anyhow::Result<()> {
    const PLAYER: &str = "Orwyn";
    let (receiver, endpoint) = Receiver::start().await?;
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let others = zones_except(&["city"]);
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let a = shard("shard-a", &redis, &["city"], keys.path(), &endpoint)?;
    let b = shard("shard-b", &redis, &others, keys.path(), &endpoint)?;

    let mut p =
        Driver::login_with(&a.addr, Some(&keys.tls(Role::Gate)), PLAYER, PASSWORD, true).await?;
    walk_to_forest(&mut p).await?;
    let (zone, _, on) = p.where_().await?;
    assert_eq!((zone.as_str(), on.as_str()), ("forest", "shard-b"));
    drop(p);
    stop(a, libc::SIGINT).await?;
    stop(b, libc::SIGINT).await?;

    let spans = receiver.spans();
    let roots: Vec<&Span> = spans.iter().filter(|s| s.name == "beginHandoff").collect();
    let root = one(&roots, "beginHandoff");
    assert_eq!(root.parent, "", "beginHandoff is a root");
    assert_eq!(root.keys(), ["epoch", "from_shard", "to_shard", "zone"]);
    assert_eq!(
        (
            root.attr("zone"),
            root.attr("from_shard"),
            root.attr("to_shard")
        ),
        ("forest", "shard-a", "shard-b")
    );
    assert!(root.attr("epoch").parse::<u64>().is_ok(), "{root:#?}");
    let kids = children(&spans, root);
    assert_eq!(names(&kids), ["directory_claim", "prepare"]);
    // The destination's handler joined the trace across the gRPC hop.
    let prepare = one(&kids, "prepare");
    let received = children(&spans, prepare);
    let received = one(&received, "prepare_received");
    assert_eq!(received.trace, root.trace);
    assert_eq!(received.attr("shard"), "shard-b");
    assert_bounded(&spans, PLAYER);
    assert_only_the_carve_out(&spans);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_traces_every_zone_handover_and_its_adoption() -> anyhow::Result<()> {
    const PLAYER: &str = "Bexley";
    let (receiver, endpoint) = Receiver::start().await?;
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let drained = ["city", "keep"];
    let others = zones_except(&drained);
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let a = shard("shard-a", &redis, &drained, keys.path(), &endpoint)?;
    let b = shard("shard-b", &redis, &others, keys.path(), &endpoint)?;

    // Into a private instance of the crypt (under the keep) on shard-a: its
    // id (`crypt#<n>`) is player-mintable and must never reach a span.
    let mut p =
        Driver::login_with(&a.addr, Some(&keys.tls(Role::Gate)), PLAYER, PASSWORD, true).await?;
    for dir in path("city:square", |r| r == "keep:chapel") {
        p.command(&dir).await?;
    }
    p.command("down").await?;
    let (zone, _, on) = p.where_().await?;
    assert!(zone.starts_with("crypt#"), "in an instance: {zone}");
    assert_eq!(on, "shard-a");

    // SIGTERM drains: the player walks out of the instance and is handed
    // off with the keep.
    let draining = tokio::spawn(stop(a, libc::SIGTERM));
    let redirect = p.until_redirect().await?;
    p.follow_redirect(&redirect).await?;
    let (zone, _, on) = p.where_().await?;
    assert_eq!((zone.as_str(), on.as_str()), ("keep", "shard-b"));
    draining.await??;
    drop(p);
    stop(b, libc::SIGINT).await?;

    let spans = receiver.spans();
    let handovers: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "handoverZoneTo")
        .collect();
    let zones: BTreeSet<&str> = handovers.iter().map(|s| s.attr("zone")).collect();
    assert_eq!(zones, BTreeSet::from(drained), "{handovers:#?}");
    for h in &handovers {
        assert_eq!(h.parent, "", "handoverZoneTo is a root");
        assert_eq!(h.keys(), ["from_shard", "lease_gen", "to_shard", "zone"]);
        assert_eq!(
            (h.attr("from_shard"), h.attr("to_shard")),
            ("shard-a", "shard-b")
        );
        let kids = children(&spans, h);
        assert_eq!(names(&kids), ["lease_flip", "rpc"], "{}", h.attr("zone"));
        assert_eq!(
            one(&kids, "lease_flip").attr("lease_gen"),
            h.attr("lease_gen")
        );
        // AdoptZone on the target, in the same trace, and the adoption
        // under it.
        let rpc = one(&kids, "rpc");
        let adopt_received = children(&spans, rpc);
        let adopt_received = one(&adopt_received, "adopt_received");
        assert_eq!(adopt_received.attr("shard"), "shard-b");
        let adopt = children(&spans, adopt_received);
        assert_eq!(one(&adopt, "adopt").attr("zone"), h.attr("zone"));
    }
    // The player's own move, fanned off by the keep's drain.
    let moved: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "beginHandoff" && s.attr("zone") == "keep")
        .collect();
    let moved = one(&moved, "beginHandoff");
    assert_eq!(
        names(&children(&spans, moved)),
        ["directory_claim", "prepare"]
    );
    assert_bounded(&spans, PLAYER);
    assert_only_the_carve_out(&spans);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_prepare_is_a_failure_event_naming_the_step() -> anyhow::Result<()> {
    const PLAYER: &str = "Fennick";
    let (receiver, endpoint) = Receiver::start().await?;
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let others = zones_except(&["city"]);
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let a = shard("shard-a", &redis, &["city"], keys.path(), &endpoint)?;
    // A destination on other handoff keys refuses every Prepare (the
    // signature does not verify). It keeps the cluster's certificates: a
    // keyless one could not be reached over TLS at all, so no Prepare of
    // its would be refused.
    let other_keys = TempKeys::generate()?;
    share_certificates(&keys, &other_keys)?;
    let b = shard("shard-b", &redis, &others, other_keys.path(), &endpoint)?;

    let mut p =
        Driver::login_with(&a.addr, Some(&keys.tls(Role::Gate)), PLAYER, PASSWORD, true).await?;
    let text = walk_to_forest(&mut p).await?;
    assert!(
        text.starts_with("You can't go that way right now: the way ahead shimmers"),
        "{text}"
    );
    let (zone, _, on) = p.where_().await?;
    assert_eq!((zone.as_str(), on.as_str()), ("city", "shard-a"));
    drop(p);
    stop(a, libc::SIGINT).await?;
    stop(b, libc::SIGINT).await?;

    let spans = receiver.spans();
    let roots: Vec<&Span> = spans.iter().filter(|s| s.name == "beginHandoff").collect();
    let root = one(&roots, "beginHandoff");
    assert_eq!(root.attr("to_shard"), "shard-b");
    let failures: Vec<&BTreeMap<String, String>> = root
        .events
        .iter()
        .filter(|(_, a)| a.contains_key("step"))
        .map(|(_, a)| a)
        .collect();
    assert_eq!(failures.len(), 1, "{root:#?}");
    assert_eq!(failures[0]["step"], "prepare");
    assert_eq!(failures[0]["level"], "WARN");
    // The refused Prepare, then the best-effort Abort.
    let kids = children(&spans, root);
    assert_eq!(names(&kids), ["abort", "directory_claim", "prepare"]);
    let refused = children(&spans, one(&kids, "prepare"));
    assert_eq!(one(&refused, "prepare_received").attr("shard"), "shard-b");
    assert_bounded(&spans, PLAYER);
    assert_only_the_carve_out(&spans);
    Ok(())
}
