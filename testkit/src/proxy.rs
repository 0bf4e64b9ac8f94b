//! A fault-injecting TCP proxy: one listener in front of one upstream
//! address, whose links can be cut, held one way, slowed or reset while
//! connections are open — the soak's partitions (docs/soak.md).
//!
//! Bytes are never lost from the middle of a stream: TCP never does that
//! (it retransmits), and a byte dropped from a Redis reply would pair the
//! next reply with the wrong request, a fault no network makes. A cut or
//! one-way link *holds* its bytes instead: the proxy stops reading that
//! direction (the sender's buffers fill as they would with no ACKs coming
//! back) and delivers what was held once the link heals, unless a side
//! gave up and closed first.
//!
//! Every connection is named by its source when the proxy was given a
//! [`Classifier`] (one listener in front of a shard serves the gate and its
//! peers alike), so a rule can cut one source and let the others pass.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use std::os::fd::AsRawFd;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Bytes read from one side before they are passed on.
const CHUNK: usize = 16 * 1024;
/// Chunks in flight per direction of a delayed link.
const DELAY_QUEUE: usize = 1024;
/// After a failed accept (out of descriptors), wait this long before the
/// next, rather than spinning.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// What a link does with its traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    /// Forward both ways.
    Pass,
    /// Forward nothing either way (connections stay open, held).
    Blackhole,
    /// Hold what the client sends; the server's bytes still arrive.
    DropUp,
    /// Hold what the server sends back; the client's still arrive (a
    /// request lands, its answer never comes back while this lasts).
    DropDown,
    /// Deliver every chunk this long after it was read, both ways.
    Delay(Duration),
    /// Reset every open connection (RST) and every new one.
    Reset,
}

impl LinkMode {
    /// Whether bytes flowing `up` (client to server) or down may move.
    fn flows(self, up: bool) -> bool {
        match self {
            LinkMode::Pass | LinkMode::Delay(_) => true,
            LinkMode::Blackhole | LinkMode::Reset => false,
            LinkMode::DropUp => !up,
            LinkMode::DropDown => up,
        }
    }

    fn delay(self) -> Duration {
        match self {
            LinkMode::Delay(d) => d,
            _ => Duration::ZERO,
        }
    }
}

/// The rules of one proxy: a mode for every connection, and modes for
/// named sources that override it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub default: Option<LinkMode>,
    pub by_source: BTreeMap<String, LinkMode>,
}

impl Rules {
    /// The mode a connection from `source` runs under now.
    pub fn mode_for(&self, source: Option<&str>) -> LinkMode {
        source
            .and_then(|s| self.by_source.get(s).copied())
            .or(self.default)
            .unwrap_or(LinkMode::Pass)
    }
}

/// Where new connections go (a restarted server on a new port takes the
/// connections made from then on).
type Upstream = Arc<std::sync::Mutex<String>>;

/// Names the process that opened a connection, from the connection's
/// client address and the proxy's own address as the client dialled it.
pub type Classifier = Arc<dyn Fn(SocketAddr, SocketAddr) -> Option<String> + Send + Sync>;

/// A running proxy. Dropping it stops the listener and every connection.
pub struct Proxy {
    /// The address clients dial.
    pub addr: SocketAddr,
    upstream: Upstream,
    rules: watch::Sender<Rules>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listen on `listen` (`127.0.0.1:0` for any port) and forward to
    /// `upstream`, naming sources with `classify` when given.
    pub async fn start(
        listen: &str,
        upstream: &str,
        classify: Option<Classifier>,
    ) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("proxy: binding {listen}"))?;
        let addr = listener.local_addr()?;
        let (rules, watcher) = watch::channel(Rules::default());
        let upstream: Upstream = Arc::new(std::sync::Mutex::new(upstream.to_string()));
        let accept = tokio::spawn(accept_loop(listener, upstream.clone(), classify, watcher));
        Ok(Proxy {
            addr,
            upstream,
            rules,
            accept,
        })
    }

    /// New connections go to `upstream` from now on; open ones stay.
    pub fn set_upstream(&self, upstream: &str) {
        *self.upstream.lock().unwrap_or_else(|p| p.into_inner()) = upstream.to_string();
    }

    /// Every connection (that no source rule names) runs under `mode`.
    pub fn set(&self, mode: LinkMode) {
        self.rules.send_modify(|r| r.default = Some(mode));
    }

    /// Connections from `source` run under `mode`.
    pub fn set_for(&self, source: &str, mode: LinkMode) {
        self.rules.send_modify(|r| {
            r.by_source.insert(source.to_string(), mode);
        });
    }

    /// Every link passes again.
    pub fn heal(&self) {
        self.rules.send_replace(Rules::default());
    }

    pub fn rules(&self) -> Rules {
        self.rules.borrow().clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Connections end when their rules' sender is gone.
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: Upstream,
    classify: Option<Classifier>,
    rules: watch::Receiver<Rules>,
) {
    loop {
        let Ok((client, peer)) = listener.accept().await else {
            // Out of descriptors, say: try again in a moment, not at once.
            tokio::time::sleep(ACCEPT_RETRY).await;
            continue;
        };
        let to = upstream.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let (classify, rules) = (classify.clone(), rules.clone());
        tokio::spawn(async move {
            // Reads /proc: off the accept loop.
            let local = client.local_addr().unwrap_or(peer);
            let source = classify.and_then(|c| c(peer, local));
            connection(client, to, source, rules).await;
        });
    }
}

/// One client connection: reset at once under [`LinkMode::Reset`], else
/// joined to a fresh upstream connection and pumped both ways until both
/// sides have closed, a reset comes, or the proxy is dropped.
async fn connection(
    mut client: TcpStream,
    upstream: String,
    source: Option<String>,
    mut rules: watch::Receiver<Rules>,
) {
    let src = source.as_deref();
    if rules.borrow().mode_for(src) == LinkMode::Reset {
        reset(client);
        return;
    }
    let Ok(mut server) = TcpStream::connect(&upstream).await else {
        reset(client);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let reset_now = {
        let (cr, cw) = client.split();
        let (sr, sw) = server.split();
        let both = futures_join(
            pump(cr, sw, true, src, rules.clone()),
            pump(sr, cw, false, src, rules.clone()),
        );
        let resets = async {
            loop {
                if rules.changed().await.is_err() {
                    return; // the proxy is gone
                }
                if rules.borrow().mode_for(src) == LinkMode::Reset {
                    return;
                }
            }
        };
        tokio::select! {
            _ = both => false,
            _ = resets => true,
        }
    };
    if reset_now {
        reset(client);
        reset(server);
    }
}

async fn futures_join(a: impl Future<Output = ()>, b: impl Future<Output = ()>) {
    tokio::join!(a, b);
}

/// Close with a TCP RST (linger zero), as a peer that crashed would.
fn reset(stream: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket this function owns, with a pointer to
    // a live `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(stream);
}

/// Pump one direction while the rules let it flow, until the reading side
/// closes (then the writing side is shut down) or the writing side fails.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    up: bool,
    src: Option<&str>,
    mut rules: watch::Receiver<Rules>,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(DELAY_QUEUE);
    let mut writer_rules = rules.clone();
    // Delivers chunks at their time, in order, while the direction flows.
    let writer = async move {
        while let Some((at, bytes)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if wait_flowing(&mut writer_rules, src, up).await.is_err() {
                break;
            }
            if to.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    let reader = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let Ok(mode) = wait_flowing(&mut rules, src, up).await else {
                break;
            };
            let n = tokio::select! {
                r = from.read(&mut buf) => match r {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                },
                // The rules changed while waiting to read: look again.
                _ = rules.changed() => continue,
            };
            let at = Instant::now() + mode.delay();
            if tx.send((at, buf[..n].to_vec())).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(reader, writer);
}

/// Wait until the direction may flow; its mode then. `Err` once the proxy
/// is gone.
async fn wait_flowing(
    rules: &mut watch::Receiver<Rules>,
    source: Option<&str>,
    up: bool,
) -> Result<LinkMode, watch::error::RecvError> {
    loop {
        let mode = rules.borrow_and_update().mode_for(source);
        if mode.flows(up) {
            return Ok(mode);
        }
        rules.changed().await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, BufReader};
    use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

    /// An echo server on a free port.
    async fn echo() -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (r, mut w) = s.into_split();
                    let mut lines = BufReader::new(r).lines();
                    while let Ok(Some(l)) = lines.next_line().await {
                        if w.write_all(format!("{l}\n").as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    struct Client {
        lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
        w: OwnedWriteHalf,
    }

    impl Client {
        async fn dial(addr: SocketAddr) -> Client {
            let (r, w) = TcpStream::connect(addr).await.unwrap().into_split();
            Client {
                lines: BufReader::new(r).lines(),
                w,
            }
        }

        async fn send(&mut self, l: &str) {
            self.w.write_all(format!("{l}\n").as_bytes()).await.unwrap();
        }

        /// The next line within `within`; `None` if none came.
        async fn line(&mut self, within: Duration) -> Option<String> {
            match tokio::time::timeout(within, self.lines.next_line()).await {
                Ok(Ok(l)) => l,
                _ => None,
            }
        }
    }

    const SOON: Duration = Duration::from_millis(300);
    const LONG: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn a_cut_holds_both_ways_and_delivers_in_order_when_healed() {
        let proxy = Proxy::start("127.0.0.1:0", &echo().await, None)
            .await
            .unwrap();
        let mut c = Client::dial(proxy.addr).await;
        c.send("one").await;
        assert_eq!(c.line(LONG).await.as_deref(), Some("one"));
        proxy.set(LinkMode::Blackhole);
        c.send("two").await;
        c.send("three").await;
        assert_eq!(c.line(SOON).await, None, "nothing passes a cut link");
        // A new connection during the cut is held too.
        let mut d = Client::dial(proxy.addr).await;
        d.send("four").await;
        assert_eq!(d.line(SOON).await, None);
        proxy.heal();
        assert_eq!(c.line(LONG).await.as_deref(), Some("two"));
        assert_eq!(c.line(LONG).await.as_deref(), Some("three"));
        assert_eq!(d.line(LONG).await.as_deref(), Some("four"));
    }

    #[tokio::test]
    async fn one_way_lets_requests_land_and_holds_their_answers() {
        let proxy = Proxy::start("127.0.0.1:0", &echo().await, None)
            .await
            .unwrap();
        let mut c = Client::dial(proxy.addr).await;
        proxy.set(LinkMode::DropDown);
        c.send("landed").await;
        assert_eq!(c.line(SOON).await, None, "the answer is held");
        proxy.set(LinkMode::DropUp);
        // The held answer arrives now; a new request is held on its way.
        assert_eq!(c.line(LONG).await.as_deref(), Some("landed"));
        c.send("held").await;
        assert_eq!(c.line(SOON).await, None);
        proxy.set(LinkMode::Pass);
        assert_eq!(c.line(LONG).await.as_deref(), Some("held"));
    }

    #[tokio::test]
    async fn a_slow_link_delays_each_chunk() {
        let proxy = Proxy::start("127.0.0.1:0", &echo().await, None)
            .await
            .unwrap();
        proxy.set(LinkMode::Delay(Duration::from_millis(400)));
        let mut c = Client::dial(proxy.addr).await;
        let t = std::time::Instant::now();
        c.send("slow").await;
        assert_eq!(c.line(LONG).await.as_deref(), Some("slow"));
        // 400 ms up and 400 ms down.
        assert!(
            t.elapsed() >= Duration::from_millis(800),
            "{:?}",
            t.elapsed()
        );
    }

    #[tokio::test]
    async fn a_reset_closes_open_connections_and_refuses_new_ones() {
        let proxy = Proxy::start("127.0.0.1:0", &echo().await, None)
            .await
            .unwrap();
        let mut c = Client::dial(proxy.addr).await;
        c.send("x").await;
        assert_eq!(c.line(LONG).await.as_deref(), Some("x"));
        proxy.set(LinkMode::Reset);
        assert_eq!(c.line(LONG).await, None, "the open connection ends");
        let mut d = Client::dial(proxy.addr).await;
        assert_eq!(d.line(LONG).await, None, "a new one is reset");
        proxy.heal();
        let mut e = Client::dial(proxy.addr).await;
        e.send("back").await;
        assert_eq!(e.line(LONG).await.as_deref(), Some("back"));
    }

    #[tokio::test]
    async fn a_rule_for_one_source_leaves_the_others_passing() {
        // Sources named by client port here, registered as they dial; the
        // soak names them by the process that owns the socket.
        let names: Arc<std::sync::Mutex<BTreeMap<u16, String>>> = Arc::default();
        let known = names.clone();
        let classify: Classifier =
            Arc::new(move |peer, _| known.lock().unwrap().get(&peer.port()).cloned());
        let proxy = Proxy::start("127.0.0.1:0", &echo().await, Some(classify))
            .await
            .unwrap();
        let socket = |name: &str| {
            let s = tokio::net::TcpSocket::new_v4().unwrap();
            s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
            let port = s.local_addr().unwrap().port();
            names.lock().unwrap().insert(port, name.to_string());
            s
        };
        let dial = |s: tokio::net::TcpSocket| async move {
            let (r, w) = s.connect(proxy.addr).await.unwrap().into_split();
            Client {
                lines: BufReader::new(r).lines(),
                w,
            }
        };
        let mut cut = dial(socket("gate")).await;
        let mut other = dial(socket("shard-b")).await;
        proxy.set_for("gate", LinkMode::Blackhole);
        cut.send("cut").await;
        other.send("through").await;
        assert_eq!(other.line(LONG).await.as_deref(), Some("through"));
        assert_eq!(cut.line(SOON).await, None);
        assert_eq!(proxy.rules().mode_for(Some("gate")), LinkMode::Blackhole);
        assert_eq!(proxy.rules().mode_for(None), LinkMode::Pass);
        proxy.heal();
        assert_eq!(cut.line(LONG).await.as_deref(), Some("cut"));
    }
}
