//! The web listener's accept loop, in front of the router: what
//! `axum::serve` leaves out and a listener facing the Internet needs.
//!
//! - **A header-read timeout** ([`HEADER_READ_TIMEOUT`]): a client that
//!   opens a connection and sends its request a byte at a time (slowloris),
//!   or leaves a kept-alive connection idle, is closed; `axum::serve` sets
//!   no timer, so hyper's timeout never ran.
//! - **The telnet listeners' admission, at accept** ([`admit_client`]):
//!   a connection is counted in its address's and its network's caps and
//!   holds a pre-login place (evictable by a newcomer from a lighter
//!   network) until it becomes a WebSocket, which then holds them in its
//!   stead ([`AdmittedSlot`]); over a cap it is closed at once. Only a
//!   trusted HTTP proxy's (`--web-forwarded-from`: its clients' addresses
//!   come per request) is counted at the upgrade instead, its connections
//!   bounded by `--max-pre-login` until then.
//! - **The PROXY protocol** from `--proxy-protocol-from` peers, exactly as
//!   the telnet listeners take it ([`crate::proxy`]): required from them,
//!   never parsed from anyone else; the header's address is the one every
//!   per-address limit counts.
//! - **TLS** (`--web-tls`): `https://` and `wss://` with the players'
//!   certificate ([`PlayerTls`], reloaded on SIGHUP with the telnet one's).
//!
//! `X-Forwarded-For` (an HTTP proxy's, `--web-forwarded-from`) is read per
//! request, at the WebSocket's upgrade ([`client_addr`]).

use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::HeaderMap;
use axum::{Extension, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::admit::{Admitted, admit_client};
use crate::config_web::WebConfig;
use crate::metrics as m;
use crate::player_tls::{HANDSHAKE_TIMEOUT, PlayerTls};
use crate::proxy;
use crate::shared::Shared;
use crate::stream::{Prefixed, tune};

/// A request's headers arrive within this long of the connection (or of
/// the last response on a kept-alive one), or the connection is closed. A
/// browser sends them at once; 10 s covers a poor mobile link.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// hyper's read buffer per HTTP connection (its default grows to ~400
/// KiB): a browser's request headers take one or two KiB.
pub const HTTP_BUFFER: usize = 16 * 1024;

/// Pause after a failed `accept` (out of file descriptors, say), as the
/// telnet listeners do.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Accept on `listener` until `shutdown`; each connection is served by
/// `app` with its player's address as [`ConnectInfo`].
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shared: Arc<Shared>,
    tls: Option<Arc<PlayerTls>>,
    shutdown: CancellationToken,
) {
    // Connections whose client is not known at accept (a PROXY-protocol
    // balancer's until its header; a trusted HTTP proxy's, whose clients
    // are counted at the upgrade): as many as strangers may hold.
    let unknown = Arc::new(Semaphore::new(shared.cfg.edge.max_pre_login));
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "web accept failed");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        let unadmitted =
            shared.cfg.edge.is_proxy(peer.ip()) || shared.cfg.web.is_forwarder(peer.ip());
        let (slot, permit) = if unadmitted {
            // A balancer's or an HTTP proxy's: its client is not known yet.
            let Ok(permit) = unknown.clone().try_acquire_owned() else {
                m::disconnect("pre_login_full");
                continue;
            };
            (AdmittedSlot::default(), Some(permit))
        } else {
            let Some(admitted) = admit(&shared, &stream, peer, tls.is_none()) else {
                continue;
            };
            (AdmittedSlot::holding(admitted), None)
        };
        let conn = Opening {
            app: app.clone(),
            tls: tls.clone(),
            shared: shared.clone(),
            shutdown: shutdown.clone(),
            admitted: slot,
            _permit: permit,
        };
        // Until its WebSocket, a connection is a stranger's, held to the
        // pre-login timeout as a telnet one is: the header-read timeout
        // alone let a client keep its slot for ever with a request every
        // few seconds, or by never reading a response. (The WebSocket,
        // once upgraded, runs in its own task, outside this bound.)
        let deadline = shared.cfg.pre_login_timeout;
        tokio::spawn(async move {
            if tokio::time::timeout(deadline, conn.run(stream, peer))
                .await
                .is_err()
            {
                m::disconnect("pre_login_timeout");
            }
        });
    }
}

/// Count a connection from `client` in the telnet listeners' limits; a
/// refused one is told why (plain HTTP only: before a TLS handshake
/// nothing can be said) and closed.
fn admit(shared: &Shared, stream: &TcpStream, client: SocketAddr, plain: bool) -> Option<Admitted> {
    match admit_client(shared, client) {
        Ok(admitted) => Some(admitted),
        Err(refused) => {
            m::disconnect(refused.reason);
            if plain {
                let answer = format!(
                    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                    refused.line.len(),
                    refused.line
                );
                let _ = stream.try_write(answer.as_bytes());
            }
            None
        }
    }
}

/// A connection's places in the admission limits, until its WebSocket's
/// upgrade takes them over ([`AdmittedSlot::take`]): the same client, the
/// same places, counted once. Empty for a trusted HTTP proxy's
/// connection (its clients are admitted at the upgrade).
#[derive(Clone, Default)]
pub struct AdmittedSlot(Arc<Mutex<Option<Admitted>>>);

impl AdmittedSlot {
    fn holding(admitted: Admitted) -> Self {
        Self(Arc::new(Mutex::new(Some(admitted))))
    }

    fn put(&self, admitted: Admitted) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(admitted);
    }

    /// The places, for the WebSocket this connection becomes.
    pub fn take(&self) -> Option<Admitted> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Fires when the connection's pre-login place went to a newcomer
    /// from a lighter network; never without one.
    fn evicted(&self) -> Option<WaitForCancellationFutureOwned> {
        let held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let place = &held.as_ref()?.pre_login;
        Some(place.evicted().clone().cancelled_owned())
    }
}

/// One connection until it is a WebSocket (or closed).
struct Opening {
    app: Router,
    tls: Option<Arc<PlayerTls>>,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    admitted: AdmittedSlot,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Opening {
    async fn run(self, mut stream: TcpStream, peer: SocketAddr) {
        tune(&stream);
        let proxied = self.shared.cfg.edge.is_proxy(peer.ip());
        let (client, rest) = if proxied {
            let header =
                tokio::time::timeout(proxy::HEADER_TIMEOUT, proxy::read_header(&mut stream));
            match header.await {
                Ok(Ok(p)) => (p.client.unwrap_or(peer), p.rest),
                Ok(Err(e)) => {
                    m::disconnect("proxy_header");
                    tracing::warn!(%peer, error = %e, "web connection from a PROXY-protocol peer refused");
                    return;
                }
                Err(_) => {
                    m::disconnect("proxy_header");
                    tracing::warn!(%peer, "no PROXY header within {:?}; web connection refused", proxy::HEADER_TIMEOUT);
                    return;
                }
            }
        } else {
            (peer, Vec::new())
        };
        if proxied && !self.shared.cfg.web.is_forwarder(peer.ip()) {
            // The balancer named the client: counted as at accept.
            let Some(admitted) = admit(&self.shared, &stream, client, self.tls.is_none()) else {
                return;
            };
            self.admitted.put(admitted);
        }
        let Some(evicted) = self.admitted.evicted() else {
            return self.open(stream, client, rest).await;
        };
        tokio::select! {
            _ = self.open(stream, client, rest) => {}
            _ = evicted => m::disconnect("pre_login_evicted"),
        }
    }

    async fn open(&self, stream: TcpStream, client: SocketAddr, rest: Vec<u8>) {
        let io = Prefixed::new(rest, stream);
        let app = self
            .app
            .clone()
            .layer(Extension(ConnectInfo(client)))
            .layer(Extension(self.admitted.clone()));
        let Some(tls) = &self.tls else {
            return self.http(io, app).await;
        };
        let accept = tls.acceptor().accept(io);
        let why = tokio::select! {
            _ = self.shutdown.cancelled() => return,
            r = tokio::time::timeout(HANDSHAKE_TIMEOUT, accept) => match r {
                Ok(Ok(tls)) => return self.http(tls, app).await,
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no handshake within {HANDSHAKE_TIMEOUT:?}"),
            },
        };
        m::disconnect("tls_handshake");
        tracing::debug!(%client, why, "web TLS handshake failed");
    }

    /// HTTP/1.1 until the connection closes or becomes a WebSocket (whose
    /// task then runs on its own).
    async fn http<S>(&self, io: S, app: Router)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .max_buf_size(HTTP_BUFFER);
        let conn = builder
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(app))
            .with_upgrades();
        let mut conn = pin!(conn);
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "web connection ended");
                }
            }
            _ = self.shutdown.cancelled() => {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(HEADER_READ_TIMEOUT, conn).await;
            }
        }
    }
}

/// The player's address for a request from `peer` (the PROXY header's
/// when there was one): the last `X-Forwarded-For` entry (the one the
/// proxy added) when `peer` is one of `--web-forwarded-from`, else `peer`.
/// A trusted proxy's header that names no address is the proxy itself.
pub fn client_addr(cfg: &WebConfig, peer: SocketAddr, headers: &HeaderMap) -> SocketAddr {
    if !cfg.is_forwarder(peer.ip()) {
        return peer;
    }
    let last = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .next_back()
        .and_then(|s| s.trim().parse::<IpAddr>().ok());
    match last {
        Some(ip) => SocketAddr::new(ip, peer.port()),
        None => peer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn forwarded_for_is_believed_only_from_a_trusted_proxy_and_only_its_own_entry() {
        let cfg = WebConfig {
            forwarded_from: vec!["10.0.0.0/8".parse().unwrap()],
            ..WebConfig::default()
        };
        let mut h = HeaderMap::new();
        h.append(
            "x-forwarded-for",
            HeaderValue::from_static("1.1.1.1, 203.0.113.9"),
        );
        h.append("x-forwarded-for", HeaderValue::from_static("198.51.100.4"));
        let proxy: SocketAddr = "10.1.1.1:5000".parse().unwrap();
        let stranger: SocketAddr = "192.0.2.1:5000".parse().unwrap();
        // The last entry is the proxy's own; earlier ones are the client's word.
        assert_eq!(
            client_addr(&cfg, proxy, &h).ip().to_string(),
            "198.51.100.4"
        );
        assert_eq!(client_addr(&cfg, stranger, &h), stranger);
        let mut junk = HeaderMap::new();
        junk.append("x-forwarded-for", HeaderValue::from_static("unknown"));
        assert_eq!(client_addr(&cfg, proxy, &junk), proxy);
        assert_eq!(client_addr(&cfg, proxy, &HeaderMap::new()), proxy);
    }
}
