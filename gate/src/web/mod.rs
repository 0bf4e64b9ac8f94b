//! Play in a browser: `--web-listen` serves the web client (its files are
//! part of the binary) and a WebSocket endpoint, `/ws`, on the mudstandards
//! subprotocols ([`frames`]). A WebSocket is bridged ([`park`]) onto an
//! in-memory byte stream and runs the very connection task a telnet socket
//! does ([`crate::connection::run_conn`]): the same login dialogue, limits,
//! buffers, backpressure and GMCP rendering. The bridge outlives the
//! page's connection for the resume grace period ([`replay`], [`tokens`]).
//! The protocol: docs/operations.md, "Playing in a browser".

pub mod attach;
pub mod frames;
pub mod listen;
pub mod park;
pub mod replay;
pub mod who;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Extension, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admit::{Admitted, admit_client};
use crate::client::Conn;
use crate::connection;
use crate::metrics as m;
use crate::player_tls::PlayerTls;
use crate::shared::Shared;
use crate::stream::PlayerIo;
use crate::tokens::Tokens;
use frames::{PROTOCOLS, Proto};
use listen::AdmittedSlot;
use park::{Attach, Park};

/// The byte stream between a bridge and its connection task, each way:
/// what a TCP socket's kernel buffer is to a telnet client
/// ([`crate::client::PLAYER_SEND_BUFFER`]); beyond it the connection
/// task's own bounded queue holds the output.
pub const BRIDGE_BUFFER: usize = 16 * 1024;

/// The WebSocket library's read buffer (its default is 128 KiB a
/// connection): a typed line fits many times over.
pub const WS_READ_BUFFER: usize = 4 * 1024;
/// Its write buffer: written out at once (0), so output waits in the
/// connection task's bounded queue, not in the library.
pub const WS_WRITE_BUFFER: usize = 0;
/// At most this much unsent (writes failing) before a send fails.
pub const WS_MAX_WRITE_BUFFER: usize = 64 * 1024;
/// The largest message (and frame) a page may send: a line of the
/// longest kind with room for its JSON wrapping; a larger one closes the
/// connection.
pub const WS_MAX_MESSAGE: usize = 16 * 1024;

/// The listener `--web-listen` bound, and the certificate it serves
/// with `--web-tls`.
pub struct WebListeners {
    pub web: TcpListener,
    pub tls: Option<Arc<PlayerTls>>,
}

/// What every web connection shares.
pub struct WebShared {
    pub shared: Arc<Shared>,
    pub tokens: Arc<Tokens<Attach>>,
    /// Who is online, for the pages' who panel.
    who: who::WhoFeed,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

/// Serve the web client and its WebSocket endpoint until `shutdown`; the
/// connections run on `tracker`, so the gate's shutdown waits for their
/// goodbyes as for telnet clients'.
pub fn start(
    listeners: WebListeners,
    shared: Arc<Shared>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let web = Arc::new(WebShared {
        who: who::start(shared.registry.clone(), shutdown.clone()),
        shared,
        tokens: Arc::new(Tokens::default()),
        tracker,
        shutdown: shutdown.clone(),
    });
    let app = Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/style.css", get(style_css))
        .route("/favicon.ico", get(favicon))
        .route("/favicon.svg", get(favicon))
        .route("/ws", get(upgrade));
    let shared = web.shared.clone();
    tokio::spawn(listen::serve(
        listeners.web,
        app.with_state(web),
        shared,
        listeners.tls,
        shutdown,
    ));
}

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");
const FAVICON_SVG: &str = include_str!("assets/favicon.svg");

/// The page may load its own files and open its own WebSocket, nothing else.
const CSP: &str =
    "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; frame-ancestors 'none'";

fn asset(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
        ],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    asset(INDEX_HTML, "text/html; charset=utf-8")
}

async fn app_js() -> Response {
    asset(APP_JS, "text/javascript; charset=utf-8")
}

async fn style_css() -> Response {
    asset(STYLE_CSS, "text/css; charset=utf-8")
}

/// The tab's icon, an SVG, at the path browsers ask for unbidden too.
async fn favicon() -> Response {
    asset(FAVICON_SVG, "image/svg+xml")
}

/// `/ws?resume=TOKEN&seen=N`: a page resuming its session.
#[derive(serde::Deserialize)]
struct Resume {
    resume: Option<String>,
    seen: Option<u64>,
}

async fn upgrade(
    upgrade: WebSocketUpgrade,
    ConnectInfo(conn_peer): ConnectInfo<SocketAddr>,
    Extension(slot): Extension<AdmittedSlot>,
    headers: HeaderMap,
    Query(resume): Query<Resume>,
    State(web): State<Arc<WebShared>>,
) -> Response {
    if !origin_allowed(&web.shared.cfg.web, &headers) {
        metrics::counter!(m::WEB_ORIGIN_REFUSED_TOTAL).increment(1);
        return (
            axum::http::StatusCode::FORBIDDEN,
            "this page's origin may not open the game's WebSocket\n",
        )
            .into_response();
    }
    let peer = listen::client_addr(&web.shared.cfg.web, conn_peer, &headers);
    // The connection's places in the limits go on with its WebSocket (a
    // proxy's client, named per request, is counted now instead).
    let admitted = slot.take().filter(|_| peer == conn_peer);
    upgrade
        .protocols(PROTOCOLS)
        .read_buffer_size(WS_READ_BUFFER)
        .write_buffer_size(WS_WRITE_BUFFER)
        .max_write_buffer_size(WS_MAX_WRITE_BUFFER)
        .max_message_size(WS_MAX_MESSAGE)
        .max_frame_size(WS_MAX_MESSAGE)
        .on_upgrade(move |ws| open(ws, peer, resume, web, admitted))
}

/// Whether a WebSocket request may open: no `Origin` (not a browser: a MUD
/// client, a script — it spends only its own address's places), the web
/// client's own origin (the request's `Host`), or one `--web-origins`
/// lists. Any other page a player visits would otherwise open sockets from
/// the player's browser and spend their address's places and login and
/// creation budgets.
pub fn origin_allowed(cfg: &crate::config_web::WebConfig, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    let origin = origin.trim_end_matches('/').to_ascii_lowercase();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_ascii_lowercase);
    let same = host.is_some_and(|host| {
        origin
            .split_once("://")
            .is_some_and(|(scheme, rest)| matches!(scheme, "http" | "https") && rest == host)
    });
    same || cfg.origins.contains(&origin)
}

/// A new WebSocket: a resume of a kept session, or a new connection
/// (counted in the limits already when `admitted`).
async fn open(
    mut ws: WebSocket,
    peer: SocketAddr,
    resume: Resume,
    web: Arc<WebShared>,
    admitted: Option<Admitted>,
) {
    metrics::counter!(m::CONNECTIONS_TOTAL).increment(1);
    let proto = Proto::from_name(ws.protocol().and_then(|p| p.to_str().ok()));
    let (mut pre_login, mut places) = admitted.map(|a| (a.pre_login, a.places)).unzip();
    if let (Some(token), Proto::Gmcp) = (resume.resume, proto) {
        let seen = resume.seen.unwrap_or(0);
        let (refused, back) = oneshot::channel();
        let attach = Attach {
            ws,
            seen,
            places: places.take(),
            refused,
        };
        let knock = match web.tokens.take(&token) {
            Some(door) => door.send(attach).await.map_err(|e| (e.0.ws, e.0.places)),
            None => Err((attach.ws, attach.places)),
        };
        let refused = match knock {
            // Resumed, unless the session's own page answered the probe or
            // the session ended meanwhile: its socket back either way.
            Ok(()) => back.await.ok(),
            Err((ws, places)) => Some((ws, None, places)),
        };
        let Some((back, why, back_places)) = refused else {
            metrics::counter!(m::WEB_RESUMES_TOTAL, "outcome" => "resumed").increment(1);
            return;
        };
        metrics::counter!(m::WEB_RESUMES_TOTAL, "outcome" => "refused").increment(1);
        ws = back;
        places = back_places;
        if let Some(why) = why {
            let line = Message::Binary(why.as_bytes().to_vec().into());
            if ws.send(line).await.is_err() {
                return;
            }
        }
        let ended = Message::Text("Telos.Session {\"ended\":true}".into());
        if ws.send(ended).await.is_err() {
            return;
        }
    }
    let admitted = match pre_login.take().zip(places.take()) {
        Some((pre_login, places)) => Ok(Admitted { pre_login, places }),
        None => admit_client(&web.shared, peer),
    };
    let admitted = match admitted {
        Ok(a) => a,
        Err(refused) => {
            m::disconnect(refused.reason);
            let _ = ws
                .send(Message::Binary(refused.line.into_bytes().into()))
                .await;
            let _ = ws.send(Message::Close(None)).await;
            return;
        }
    };
    let (gate_end, park_end) = tokio::io::duplex(BRIDGE_BUFFER);
    let mut conn = Conn::open(
        PlayerIo::split(gate_end),
        peer,
        web.shared.clone(),
        web.shutdown.child_token(),
        admitted,
        Vec::new(),
    );
    // The bridge keeps the session across the page's drops, and its page
    // holds the places in the address counts: a page resumed from another
    // address is counted there.
    conn.resumable = false;
    let park = Park::new(
        web.tokens.clone(),
        &web.shared.cfg.web,
        proto,
        park_end,
        conn.seated.clone(),
        web.who.clone(),
    )
    .counted_at(conn.take_places())
    .reading_at(
        web.shared.cfg.edge.pre_login_bytes_per_sec,
        web.shared.cfg.edge.input_bytes_per_sec,
    );
    web.tracker.spawn(async move {
        metrics::gauge!(m::CONNECTIONS_OPEN).increment(1.0);
        connection::run_conn(conn).await;
        metrics::gauge!(m::CONNECTIONS_OPEN).decrement(1.0);
    });
    web.tracker.spawn(park.run(ws));
}
