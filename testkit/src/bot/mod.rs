//! A bot player: an async TCP client that speaks the player protocol
//! (CONTRACT.md, "Player protocol") through `telos-gate`, for end-to-end
//! tests, fault tests and benchmarks.
//!
//! ```no_run
//! # async fn demo(gate_addr: &str) -> anyhow::Result<()> {
//! use telos_testkit::bot::Bot;
//! let mut bot = Bot::create_at(gate_addr, "Alice", "correct horse").await?;
//! let (zone, room, shard) = bot.where_().await?;
//! bot.command("journal hello").await?;
//! assert_eq!(bot.journal_list().await?, ["hello"]);
//! bot.quit().await?;
//! # Ok(()) }
//! ```
//!
//! # Knowing where a command's output ends
//!
//! The socket carries no acks, only text. [`Bot::command`] therefore sends
//! its line followed by a *marker* line and returns everything received up to
//! the marker's answer. Output on one connection is in input order, so the
//! marker's answer comes after all of the command's output.
//!
//! The marker is `alias <word> x` where `<word>` is a command word. The world
//! refuses to alias a command word and says so, naming it:
//! `'<word>' is a command and can't be an alias.` That is the one cheap,
//! side-effect-free command whose answer repeats something the bot chose
//! (`where` or an unknown word answer the same every time), which matters:
//! after a shard crash the gate replays every line above the durable
//! watermark, and the world prints their output again. Each marker uses the
//! next word of [`MARKER_WORDS`], so a replayed answer of an older marker is
//! recognised as such and skipped instead of ending the wrong command. Other
//! players' lines (`<Name> says, ...`, arrivals, mobs) can never look like a
//! marker answer: they start with a name.
//!
//! Consequences for callers: `command` returns *everything* received since
//! the previous marker, including output of lines sent with [`Bot::send`]
//! meanwhile and unsolicited lines; do not send `alias <command word> ...`
//! yourself through `command`.
//!
//! # Timestamps and a client that stops reading
//!
//! Every received line carries the instant the reader task took it off the
//! socket ([`Bot::recv`]), so a caller can time each answer. The reader can
//! be paused ([`Bot::pause_reading`]): the socket is then not read at all,
//! as a stuck client would do, and the gate's output backs up.
//!
//! # Telnet
//!
//! The gate only negotiates with clients that negotiate, so this raw client
//! sees plain text; it still strips every IAC sequence (the gate's opening
//! `DO NAWS`/`DO TTYPE`, anything else) and never sends one.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use std::time::Duration;
use sync::lock;

use anyhow::{Context, bail};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long [`Bot::command`], login and the other waits give the gate by
/// default. Generous: a command answers in milliseconds, but a test on a
/// loaded 2-core machine, or a player riding out a shard restart, may wait
/// seconds; this only turns a hang into a failure with the transcript.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// How many trailing characters of the transcript an error message shows.
const ERROR_TAIL_CHARS: usize = 2000;

/// The last line of the gate's banner: the bot is at the login prompt.
const BANNER_LAST_LINE: &str = "`create <name> <password>`";

mod markers;
mod open;
mod parse;
mod reader;
mod sync;
mod telnet;

pub use markers::{MARKER_WORDS, answered_marker, is_marker_answer, is_marker_line, marker_answer};
pub use parse::{is_login_refusal, parse_journal, parse_where, welcome_name};
use reader::Received;

/// What [`Bot::recv`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recv {
    /// A line, and when the reader task took it off the socket.
    Line(Instant, String),
    /// The gate closed the connection (or it failed) and every line before
    /// that has been consumed.
    Closed,
    /// Nothing arrived before the deadline.
    TimedOut,
}

/// How a login attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginReply {
    /// `Welcome, <Name>.`: the name as the world spells it, and the text that
    /// followed (the room description).
    Welcome { name: String, text: String },
    /// Any refusal (`Login failed...`, a bad name, the world unreachable):
    /// the gate's line.
    Refused(String),
}

/// One player connection through the gate. See the module docs.
pub struct Bot {
    /// The character's name as the world spells it (after login), else as typed.
    pub name: String,
    wr: OwnedWriteHalf,
    lines: mpsc::UnboundedReceiver<(Instant, String)>,
    received: Arc<Received>,
    reader: JoinHandle<()>,
    /// `false` while the reader task must leave the socket alone.
    reading: watch::Sender<bool>,
    sent: Vec<String>,
    markers: usize,
    timeout: Duration,
}

impl Drop for Bot {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl std::fmt::Debug for Bot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bot")
            .field("name", &self.name)
            .field("sent", &self.sent.len())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Bot {
    /// `create <name> <password>`; fails unless the gate says `Welcome`.
    /// Returns the room description shown after the welcome.
    pub async fn create(&mut self, name: &str, password: &str) -> anyhow::Result<String> {
        self.login_or_fail("create", name, password).await
    }

    /// `connect <name> <password>`; fails unless the gate says `Welcome`.
    /// Returns the room description shown after the welcome.
    pub async fn connect(&mut self, name: &str, password: &str) -> anyhow::Result<String> {
        self.login_or_fail("connect", name, password).await
    }

    async fn login_or_fail(
        &mut self,
        verb: &str,
        name: &str,
        password: &str,
    ) -> anyhow::Result<String> {
        match self.login(verb, name, password).await? {
            LoginReply::Welcome { text, .. } => Ok(text),
            LoginReply::Refused(line) => bail!("{verb} {name}: refused: {line}"),
        }
    }

    /// One login attempt, `verb` being `create` or `connect`. A refusal is
    /// `Ok(Refused)` (the connection stays at the login prompt unless the
    /// gate closed it); only a timeout or a closed socket is an error.
    pub async fn login(
        &mut self,
        verb: &str,
        name: &str,
        password: &str,
    ) -> anyhow::Result<LoginReply> {
        self.name = name.to_string();
        self.send(&format!("{verb} {name} {password}")).await?;
        let timeout = self.timeout;
        let lines = self
            .read_until(
                |l| welcome_name(l).is_some() || is_login_refusal(l),
                timeout,
            )
            .await
            .with_context(|| format!("{verb} {name}: waiting for the answer"))?;
        let last = lines.last().expect("read_until returns the match");
        let Some(spelled) = welcome_name(last) else {
            return Ok(LoginReply::Refused(last.clone()));
        };
        self.name = spelled.to_string();
        // Everything up to the first marker is the arrival: the room.
        let text = self.sync().await?;
        Ok(LoginReply::Welcome {
            name: self.name.clone(),
            text,
        })
    }

    /// How long the waits of this bot last; [`DEFAULT_TIMEOUT`] to start with.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The current wait bound (see [`set_timeout`](Self::set_timeout)).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Send one line (`\r\n` appended) without waiting for anything.
    pub async fn send(&mut self, line: &str) -> anyhow::Result<()> {
        if line.contains(['\n', '\r']) {
            bail!("a line may not contain a line end: {line:?}");
        }
        self.sent.push(line.to_string());
        let mut bytes = Vec::with_capacity(line.len() + 2);
        bytes.extend_from_slice(line.as_bytes());
        bytes.extend_from_slice(b"\r\n");
        self.write(&bytes).await
    }

    /// Send raw bytes exactly as given (hostile-input tests). Not recorded
    /// in [`sent`](Self::sent).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.write(bytes).await
    }

    async fn write(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        tokio::time::timeout(self.timeout, self.wr.write_all(bytes))
            .await
            .with_context(|| format!("{}: write timed out (gate not reading)", self.name))?
            .with_context(|| format!("{}: write failed", self.name))
    }

    /// Consume received lines until one satisfies `pred`; returns the
    /// consumed lines, the matching one last. Fails on timeout or when the
    /// socket closes first (the error shows the end of the transcript).
    pub async fn read_until(
        &mut self,
        mut pred: impl FnMut(&str) -> bool,
        timeout: Duration,
    ) -> anyhow::Result<Vec<String>> {
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        loop {
            let line = self.next_line(deadline).await?;
            let done = pred(&line);
            got.push(line);
            if done {
                return Ok(got);
            }
        }
    }

    /// The next received line with the instant it came off the socket,
    /// waiting until `deadline`.
    pub async fn recv(&mut self, deadline: Instant) -> Recv {
        match tokio::time::timeout_at(deadline, self.lines.recv()).await {
            Ok(Some((at, line))) => Recv::Line(at, line),
            Ok(None) => Recv::Closed,
            Err(_) => Recv::TimedOut,
        }
    }

    /// Stop reading the socket at once: a client that stopped reading.
    /// Lines already received stay available.
    pub fn pause_reading(&self) {
        self.reading.send_replace(false);
    }

    /// Undo [`pause_reading`](Self::pause_reading).
    pub fn resume_reading(&self) {
        self.reading.send_replace(true);
    }

    /// Whether the reader task reads the socket (see
    /// [`pause_reading`](Self::pause_reading)).
    pub fn is_reading(&self) -> bool {
        *self.reading.borrow()
    }

    /// Read at most `bytes_per_sec` from now on (0: as fast as it comes).
    pub fn set_read_rate(&self, bytes_per_sec: u64) {
        self.received
            .read_rate
            .store(bytes_per_sec, Ordering::Relaxed);
    }

    /// Keep only about the newest `bytes` of [`transcript`](Self::transcript)
    /// (long-running bots); unlimited to start with.
    pub fn limit_transcript(&self, bytes: usize) {
        *lock(&self.received.transcript_limit) = Some(bytes);
    }

    /// The next received line, waiting until `deadline`.
    async fn next_line(&mut self, deadline: Instant) -> anyhow::Result<String> {
        match tokio::time::timeout_at(deadline, self.lines.recv()).await {
            Ok(Some((_, line))) => Ok(line),
            Ok(None) => bail!(
                "{}: the gate closed the connection; transcript ends:\n{}",
                self.name,
                self.transcript_tail()
            ),
            Err(_) => bail!(
                "{}: timed out; transcript ends:\n{}",
                self.name,
                self.transcript_tail()
            ),
        }
    }

    /// Every line received and not yet consumed, without waiting.
    pub fn drain_received(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok((_, line)) = self.lines.try_recv() {
            out.push(line);
        }
        out
    }

    /// Send a marker and return everything received before its answer
    /// (see the module docs). After it, every line sent so far has been
    /// applied by the world and its output read.
    pub async fn sync(&mut self) -> anyhow::Result<String> {
        let word = self.send_marker().await?;
        let answer = marker_answer(word);
        let deadline = Instant::now() + self.timeout;
        let mut text = String::new();
        loop {
            let line = self
                .next_line(deadline)
                .await
                .with_context(|| format!("waiting for marker {word:?}"))?;
            if line == answer {
                return Ok(text);
            }
            if line == format!("Alias '{word}' set.") {
                bail!("marker word {word:?} is not a command word any more; fix MARKER_WORDS");
            }
            // An older marker's answer, repeated by a replay after an outage.
            if is_marker_answer(&line) {
                continue;
            }
            text.push_str(&line);
            text.push('\n');
        }
    }

    /// Send the next marker line without waiting for its answer; returns
    /// the marker's word ([`marker_answer`] is the line that answers it).
    /// For callers that pipeline commands and match answers themselves.
    pub async fn send_marker(&mut self) -> anyhow::Result<&'static str> {
        let word = MARKER_WORDS[self.markers % MARKER_WORDS.len()];
        self.markers += 1;
        self.send(&format!("alias {word} x")).await?;
        Ok(word)
    }

    /// Send `line` and return its output (plus anything else received
    /// since the last marker; see the module docs).
    pub async fn command(&mut self, line: &str) -> anyhow::Result<String> {
        self.send(line).await?;
        self.sync().await
    }

    /// `where`, parsed: `(zone, room, shard)`.
    pub async fn where_(&mut self) -> anyhow::Result<(String, String, String)> {
        let text = self.command("where").await?;
        let line = text
            .lines()
            .rev()
            .find(|l| l.starts_with("where: "))
            .with_context(|| format!("{}: no `where:` line in {text:?}", self.name))?;
        parse_where(line).with_context(|| format!("{}: bad where line {line:?}", self.name))
    }

    /// `journal` (list), parsed: the entries' texts, oldest first. Checks
    /// the listing is complete (`journal end <count>` matches).
    pub async fn journal_list(&mut self) -> anyhow::Result<Vec<String>> {
        let text = self.command("journal").await?;
        parse_journal(&text).with_context(|| format!("{}: journal listing {text:?}", self.name))
    }

    /// `quit` and wait for the gate to close the socket.
    pub async fn quit(&mut self) -> anyhow::Result<()> {
        self.send("quit").await?;
        self.wait_closed(self.timeout).await
    }

    /// Wait until the gate closes the connection, consuming what arrives.
    pub async fn wait_closed(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(()),
                Err(_) => bail!(
                    "{}: the connection is still open after {timeout:?}; transcript ends:\n{}",
                    self.name,
                    self.transcript_tail()
                ),
            }
        }
    }

    /// Every line sent, in order, including the login line and markers
    /// (filter those with [`is_marker_line`]).
    pub fn sent(&self) -> &[String] {
        &self.sent
    }

    /// Every line received so far (consumed or not), `\n`-terminated, IAC
    /// sequences and `\r` removed, followed by any unterminated last line
    /// (a prompt).
    pub fn transcript(&self) -> String {
        let mut text = lock(&self.received.transcript).clone();
        text.push_str(&lock(&self.received.partial));
        text
    }

    fn transcript_tail(&self) -> String {
        let text = self.transcript();
        let skip = text.chars().count().saturating_sub(ERROR_TAIL_CHARS);
        text.chars().skip(skip).collect()
    }

    /// Whether the gate closed the socket (or it failed).
    pub fn is_closed(&self) -> bool {
        self.received.closed.load(Ordering::Acquire)
    }

    /// When the reader task saw the socket close (not when the bot noticed:
    /// a bot that was sleeping notices later).
    pub fn closed_at(&self) -> Option<Instant> {
        *lock(&self.received.closed_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    /// A fake gate: sends the banner, then whatever the test writes.
    async fn gate() -> (String, tokio::task::JoinHandle<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accept = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(format!("=== Telos ===\r\n{BANNER_LAST_LINE}\r\n").as_bytes())
                .await
                .unwrap();
            s
        });
        (addr, accept)
    }

    #[tokio::test]
    async fn a_paused_reader_leaves_the_socket_alone_and_lines_carry_their_time() {
        let (addr, accept) = gate().await;
        let mut bot = Bot::open(&addr).await.unwrap();
        let mut server = accept.await.unwrap();
        bot.pause_reading();
        assert!(!bot.is_reading());
        server.write_all(b"one\r\n").await.unwrap();
        let soon = Instant::now() + Duration::from_millis(200);
        assert_eq!(bot.recv(soon).await, Recv::TimedOut);
        let resumed = Instant::now();
        bot.resume_reading();
        let later = Instant::now() + DEFAULT_TIMEOUT;
        match bot.recv(later).await {
            Recv::Line(at, line) => {
                assert_eq!(line, "one");
                assert!(at >= resumed, "read only after the resume");
            }
            other => panic!("{other:?}"),
        }
        let before_close = Instant::now();
        drop(server);
        assert_eq!(bot.recv(later).await, Recv::Closed);
        assert!(bot.closed_at().is_some_and(|t| t >= before_close));
    }

    #[tokio::test]
    async fn a_limited_transcript_keeps_the_newest_lines() {
        let (addr, accept) = gate().await;
        let mut bot = Bot::open(&addr).await.unwrap();
        let mut server = accept.await.unwrap();
        bot.limit_transcript(10);
        for i in 0..20 {
            server
                .write_all(format!("line{i:02}\r\n").as_bytes())
                .await
                .unwrap();
        }
        let lines = bot
            .read_until(|l| l == "line19", DEFAULT_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(lines.len(), 20);
        let text = bot.transcript();
        assert!(text.ends_with("line19\n"), "{text:?}");
        assert!(text.len() <= 20, "{text:?}");
        assert!(!text.contains("line00"));
    }
}
