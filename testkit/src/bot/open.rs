//! Opening a bot's connection to the gate: from any local address, with
//! any receive buffer, up to the login prompt.

use std::sync::Arc;

use anyhow::Context;
use tokio::sync::{mpsc, watch};

use super::reader::{Received, read_loop};
use super::{BANNER_LAST_LINE, Bot, DEFAULT_TIMEOUT};

impl Bot {
    /// Connect to the gate at `addr` and read its banner, up to the login
    /// prompt.
    pub async fn open(addr: &str) -> anyhow::Result<Bot> {
        Bot::open_with(addr, None).await
    }

    /// [`open`](Self::open) with a receive buffer of `recv_buffer` bytes:
    /// with [`set_read_rate`](Self::set_read_rate), a slow link.
    pub async fn open_with(addr: &str, recv_buffer: Option<u32>) -> anyhow::Result<Bot> {
        Bot::open_on(addr, recv_buffer, None).await
    }

    /// [`open`](Self::open) from the local address `from` (any of
    /// 127.0.0.0/8 is this host: a player from another address, or
    /// another network, on loopback).
    pub async fn open_from(addr: &str, from: std::net::IpAddr) -> anyhow::Result<Bot> {
        Bot::open_on(addr, None, Some(from)).await
    }

    async fn open_on(
        addr: &str,
        recv_buffer: Option<u32>,
        from: Option<std::net::IpAddr>,
    ) -> anyhow::Result<Bot> {
        let connect = async {
            let to: std::net::SocketAddr = addr.parse()?;
            let socket = if to.is_ipv4() {
                tokio::net::TcpSocket::new_v4()?
            } else {
                tokio::net::TcpSocket::new_v6()?
            };
            if let Some(bytes) = recv_buffer {
                socket.set_recv_buffer_size(bytes)?;
            }
            if let Some(ip) = from {
                socket.bind(std::net::SocketAddr::new(ip, 0))?;
            }
            anyhow::Ok(socket.connect(to).await?)
        };
        let stream = tokio::time::timeout(DEFAULT_TIMEOUT, connect)
            .await
            .with_context(|| format!("connecting to the gate at {addr}: timed out"))?
            .with_context(|| format!("connecting to the gate at {addr}"))?;
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        let received = Arc::new(Received::default());
        let (tx, lines) = mpsc::unbounded_channel();
        let (reading, reading_rx) = watch::channel(true);
        let reader = tokio::spawn(read_loop(rd, tx, received.clone(), reading_rx));
        let mut bot = Bot {
            name: String::new(),
            wr,
            lines,
            received,
            reader,
            reading,
            sent: Vec::new(),
            markers: 0,
            timeout: DEFAULT_TIMEOUT,
        };
        bot.read_until(|l| l.contains(BANNER_LAST_LINE), DEFAULT_TIMEOUT)
            .await
            .context("waiting for the gate's banner")?;
        Ok(bot)
    }

    /// [`open`](Self::open) then [`create`](Self::create).
    pub async fn create_at(addr: &str, name: &str, password: &str) -> anyhow::Result<Bot> {
        let mut bot = Bot::open(addr).await?;
        bot.create(name, password).await?;
        Ok(bot)
    }

    /// [`open`](Self::open) then [`connect`](Self::connect).
    pub async fn connect_at(addr: &str, name: &str, password: &str) -> anyhow::Result<Bot> {
        let mut bot = Bot::open(addr).await?;
        bot.connect(name, password).await?;
        Ok(bot)
    }
}
