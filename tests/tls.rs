//! Mutual TLS with roles on a keyed world's gRPC port (issue 13; the
//! project contract: "a world serves `Handoff` only to shard certificates,
//! `Play` only to gate (or shard) certificates, `Admin` only to operator
//! certificates, and never accepts a plaintext connection"), and a gate
//! that sends logins only to listeners holding a shard certificate.
//!
//! Every refusal here is checked against an allowed call on the same
//! shard, so a test cannot pass because the shard was simply unreachable.

use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use telos_proto::v1::admin_client::AdminClient;
use telos_proto::v1::handoff_client::HandoffClient;
use telos_proto::v1::play_server::{Play, PlayServer};
use telos_proto::v1::{ClientFrame, PrepareRequest, ServerFrame, StatusRequest, client_frame};
use telos_redis::directory::{Directory, ShardInfo, ShardState};
use telos_testkit::RedisServer;
use telos_testkit::bot::{Bot, LoginReply};
use telos_testkit::keys::TempKeys;
use telos_testkit::play::PlayStream;
use telos_testkit::process::{Proc, start_keyed_gate, start_keyed_world};
use telos_tls::grpc::endpoint;
use telos_tls::{Role, TlsKeys};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status, Streaming};

const READY: Duration = Duration::from_secs(20);
/// Bounds one refused call: a refusal must come, not a hang.
const CALL: Duration = Duration::from_secs(10);

struct World {
    redis: RedisServer,
    keys: TempKeys,
    shard: Proc,
}

async fn keyed_world() -> anyhow::Result<World> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let no_flags: [&str; 0] = [];
    let shard = start_keyed_world(
        "shard-a",
        &redis.url,
        &["city"],
        keys.path(),
        None,
        &no_flags,
    )?;
    shard.wait_log("zone started zone=city", READY).await?;
    Ok(World { redis, keys, shard })
}

/// A channel to `addr` presenting `tls` (`None`: plaintext), connected now
/// so that a handshake failure shows here.
async fn dial(addr: &str, tls: Option<&TlsKeys>) -> Result<Channel, String> {
    let ep = endpoint(addr, tls).map_err(|e| e.to_string())?;
    match tokio::time::timeout(CALL, ep.connect()).await {
        Ok(Ok(ch)) => Ok(ch),
        Ok(Err(e)) => Err(chain(&e)),
        Err(_) => Err("connect timed out".into()),
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

/// Call each of the three services once on `channel`; each result is the
/// status code (`Ok` when the service answered the call itself, even
/// with its own refusal of a bad request).
async fn call_each(channel: Channel) -> [Result<(), Status>; 3] {
    let admin = async {
        AdminClient::new(channel.clone())
            .status(StatusRequest {})
            .await
            .map(drop)
    };
    // An empty Prepare is refused by the handler (bad snapshot), which
    // proves the caller got past the role check. It names as its source
    // the holder of keygen's shard certificate (`shard`): a request
    // speaks for the caller's own shard only.
    let handoff = async {
        match HandoffClient::new(channel.clone())
            .prepare(PrepareRequest {
                from_shard_id: "shard".into(),
                ..PrepareRequest::default()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(s) if answered_by_handler(s.code()) => Ok(()),
            Err(s) => Err(s),
        }
    };
    let play = async {
        let mut s = PlayStream::open_on(channel.clone())
            .await
            .map_err(as_status)?;
        s.login("nobody", "wrong-password-0", false, "conn-1")
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        s.next().await.map(drop).map_err(as_status)
    };
    [
        within(admin).await,
        within(handoff).await,
        within(play).await,
    ]
}

async fn within(f: impl std::future::Future<Output = Result<(), Status>>) -> Result<(), Status> {
    tokio::time::timeout(CALL, f)
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("no answer")))
}

/// The codes a handler answers a bad request with, as opposed to the
/// transport's and the role check's.
fn answered_by_handler(code: Code) -> bool {
    matches!(
        code,
        Code::InvalidArgument
            | Code::FailedPrecondition
            | Code::NotFound
            | Code::Unauthenticated
            | Code::Aborted
            | Code::Unimplemented
    )
}

fn as_status(e: anyhow::Error) -> Status {
    match e.downcast::<Status>() {
        Ok(status) => status,
        Err(e) => Status::unavailable(format!("{e:#}")),
    }
}

fn code(r: &Result<(), Status>) -> Option<Code> {
    r.as_ref().err().map(Status::code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_and_foreign_certificates_are_refused_at_the_handshake() -> anyhow::Result<()> {
    let w = keyed_world().await?;
    let addr = w.shard.addr.clone();

    // Plaintext: no service answers.
    let plain = endpoint(&addr, None)?.connect_lazy();
    for (service, result) in ["Admin", "Handoff", "Play"]
        .iter()
        .zip(call_each(plain).await)
    {
        let status = result.expect_err(service);
        assert_ne!(
            status.code(),
            Code::PermissionDenied,
            "{service}: refused before any role check: {status}"
        );
    }

    // A client of another cluster's CA: it does not trust this shard, and
    // this shard does not trust it.
    let foreign = TempKeys::generate()?;
    for role in Role::ALL {
        let err = dial(&addr, Some(&foreign.tls(role)))
            .await
            .expect_err("foreign CA");
        assert!(err.contains("certificate"), "{role}: {err}");
    }
    // A foreign certificate that trusts this cluster's CA: only the
    // shard's check of the client certificate stands in the way.
    for role in Role::ALL {
        let mixed = tempfile::tempdir()?;
        mix(w.keys.path(), foreign.path(), role, mixed.path())?;
        let tls = TlsKeys::load(mixed.path(), role)?;
        let refused = match dial(&addr, Some(&tls)).await {
            Err(e) => e,
            // TLS 1.3 reports the client certificate's rejection on the
            // first read after the handshake.
            Ok(ch) => {
                let results = call_each(ch).await;
                assert!(results.iter().all(Result::is_err), "{role}: {results:?}");
                format!("{results:?}")
            }
        };
        assert!(!refused.is_empty(), "{role}");
    }

    // The control: this cluster's own certificates are served.
    let gate = dial(&addr, Some(&w.keys.tls(Role::Gate)))
        .await
        .expect("gate certificate");
    let [_, _, play] = call_each(gate).await;
    assert!(play.is_ok(), "Play serves a gate certificate: {play:?}");
    Ok(())
}

/// `out` holds this cluster's CA with `foreign`'s certificate for `role`.
fn mix(ours: &Path, foreign: &Path, role: Role, out: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::copy(ours.join("ca.crt"), out.join("ca.crt"))?;
    for file in [format!("{role}.crt"), format!("{role}.key")] {
        std::fs::copy(foreign.join(&file), out.join(&file))?;
        std::fs::set_permissions(out.join(&file), std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_service_is_served_only_to_its_roles() -> anyhow::Result<()> {
    let w = keyed_world().await?;
    let addr = w.shard.addr.clone();
    // [Admin, Handoff, Play] allowed per role (the project contract).
    let table = [
        (Role::Gate, [false, false, true]),
        (Role::Operator, [true, false, false]),
        (Role::Shard, [false, true, true]),
    ];
    for (role, allowed) in table {
        let ch = dial(&addr, Some(&w.keys.tls(role)))
            .await
            .expect("handshake");
        let results = call_each(ch).await;
        for ((service, allowed), result) in ["Admin", "Handoff", "Play"]
            .iter()
            .zip(allowed)
            .zip(&results)
        {
            if allowed {
                assert!(result.is_ok(), "{role} calling {service}: {result:?}");
            } else {
                assert_eq!(
                    code(result),
                    Some(Code::PermissionDenied),
                    "{role} calling {service}: {result:?}"
                );
                let message = result.as_ref().unwrap_err().message();
                assert!(
                    message.contains(&format!("a {role} certificate")),
                    "{message}"
                );
            }
        }
    }

    // telosctl with the operator certificate reads the cluster through the
    // shard's Admin service.
    let out = telos_testkit::process::blocking(|| {
        std::process::Command::new(telos_testkit::process::bin("telosctl"))
            .args([
                "--keys",
                &w.keys.path().display().to_string(),
                "--shard",
                &addr,
                "status",
                "--json",
            ])
            .output()
    })?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"id\":\"shard-a\""));

    // Without the operator certificate the shard refuses the handshake, and
    // telosctl says in one line what is missing.
    let mut cmd = telos_testkit::cli::clean_command("telosctl");
    cmd.args(["--shard", &addr, "status"]);
    let out = telos_testkit::process::blocking(|| {
        telos_testkit::cli::run_to_exit("telosctl", cmd, telos_testkit::cli::EXIT_TIMEOUT)
    })?;
    assert!(!out.success(), "{}", out.stdout);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", out.stderr);
    assert!(lines[0].contains(&addr), "{}", lines[0]);
    assert!(lines[0].contains("needs --keys"), "{}", lines[0]);
    Ok(())
}

/// A `Play` listener that records every first frame it is sent.
struct Recorder(mpsc::UnboundedSender<ClientFrame>);

type Frames = Pin<Box<dyn Stream<Item = Result<ServerFrame, Status>> + Send>>;

#[tonic::async_trait]
impl Play for Recorder {
    type SessionStream = Frames;

    async fn session(
        &self,
        request: Request<Streaming<ClientFrame>>,
    ) -> Result<Response<Frames>, Status> {
        let mut frames = request.into_inner();
        if let Ok(Some(first)) = frames.message().await {
            let _ = self.0.send(first);
        }
        Err(Status::unavailable("recorded"))
    }
}

/// A listener registered in the directory as shard `evil`, serving `Play`
/// with `certificate_of`'s certificate from this cluster's CA.
async fn forged_shard(
    keys: &TempKeys,
    certificate_of: Role,
    redis_url: &str,
) -> anyhow::Result<mpsc::UnboundedReceiver<ClientFrame>> {
    let (tx, rx) = mpsc::unbounded_channel();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    // `server()` presents the role's certificate (its identity) and asks
    // for a client certificate from the CA, as a stolen certificate would.
    let tls = keys.tls(certificate_of).server();
    tokio::spawn(
        tonic::transport::Server::builder()
            .tls_config(tls)?
            .add_service(PlayServer::new(Recorder(tx)))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let dir = Directory::connect(redis_url).await?;
    let entry = ShardInfo {
        id: "evil".into(),
        addr,
        state: ShardState::Live,
        players: 0,
        capacity: 2000,
        handoff_version: telos_world::handoff::HANDOFF_VERSION,
        incarnation: 0,
    };
    dir.heartbeat(&entry, Duration::from_secs(60)).await?;
    Ok(rx)
}

async fn login_through_gate(
    keys: &TempKeys,
    redis_url: &str,
) -> anyhow::Result<(Proc, Result<LoginReply, anyhow::Error>)> {
    let no_flags: [&str; 0] = [];
    let gate = start_keyed_gate(redis_url, keys.path(), &no_flags)?;
    let mut bot = Bot::open(&gate.addr).await?;
    bot.set_timeout(Duration::from_secs(15));
    let reply = bot
        .login("connect", "victim", "correct-horse-battery")
        .await;
    Ok((gate, reply))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_registry_entry_receives_no_login() -> anyhow::Result<()> {
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    // The attacker holds a real certificate of this cluster — a gate's —
    // and writes a registry entry pointing at its own listener.
    let mut recorded = forged_shard(&keys, Role::Gate, &redis.url).await?;
    let (gate, reply) = login_through_gate(&keys, &redis.url).await?;
    assert!(
        !matches!(reply, Ok(LoginReply::Welcome { .. })),
        "no welcome without a shard: {reply:?}"
    );
    assert!(
        recorded.try_recv().is_err(),
        "the forged listener got a frame"
    );
    let log = gate.log_text();
    assert!(
        !log.contains("correct-horse-battery"),
        "the password is never logged"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_with_a_shard_certificate_does_get_the_login() -> anyhow::Result<()> {
    // The control for the test above: the same listener holding a shard
    // certificate is sent the login, so "nothing recorded" there means
    // refused, not unreachable.
    let redis = RedisServer::start()?;
    let keys = TempKeys::generate()?;
    let mut recorded = forged_shard(&keys, Role::Shard, &redis.url).await?;
    let (_gate, _reply) = login_through_gate(&keys, &redis.url).await?;
    let first = tokio::time::timeout(CALL, recorded.recv())
        .await?
        .expect("a frame");
    match first.frame {
        Some(client_frame::Frame::Login(login)) => assert_eq!(login.name, "victim"),
        other => panic!("expected a Login, got {other:?}"),
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_shard_cannot_join_a_keyed_cluster() -> anyhow::Result<()> {
    // A keyless shard serves Admin in plaintext to anyone; on a keyed
    // cluster's Redis its TransferZone would move the keyed shards' zones.
    let w = keyed_world().await?;
    let redis_url = w.redis.url.clone();
    let opts = telos_testkit::process::WorldOpts::new("intruder", &redis_url, &["docks"]);
    let cmd = telos_testkit::process::world_command(opts);
    let done = telos_testkit::process::blocking(|| {
        telos_testkit::cli::run_to_exit("world-intruder", cmd, READY)
    })?;
    assert!(
        !done.success(),
        "a keyless shard started on a keyed cluster"
    );
    assert!(
        done.stderr.contains("keyed cluster") && done.stderr.contains("--keys"),
        "{}",
        done.stderr
    );
    Ok(())
}
