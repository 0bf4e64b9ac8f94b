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
//! # Telnet
//!
//! The gate only negotiates with clients that negotiate, so this raw client
//! sees plain text; it still strips every IAC sequence (the gate's opening
//! `DO NAWS`/`DO TTYPE`, anything else) and never sends one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long [`Bot::command`], login and the other waits give the gate by
/// default. Generous: a command answers in milliseconds, but a test on a
/// loaded 2-core machine, or a player riding out a shard restart, may wait
/// seconds; this only turns a hang into a failure with the transcript.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// How many trailing characters of the transcript an error message shows.
const ERROR_TAIL_CHARS: usize = 2000;

/// Bytes per socket read in the reader task.
const READ_CHUNK: usize = 16 * 1024;

/// The last line of the gate's banner: the bot is at the login prompt.
const BANNER_LAST_LINE: &str = "`create <name> <password>`";

/// Command words used as markers, in rotation. Each is a command word the
/// world refuses as an alias name (the full words of the player protocol
/// and their accepted abbreviations), so `alias <word> x` changes nothing.
/// The rotation length bounds how far back a replayed marker answer can be
/// told apart from the current one.
pub const MARKER_WORDS: &[&str] = &[
    "look",
    "loo",
    "lo",
    "l",
    "north",
    "nort",
    "nor",
    "no",
    "n",
    "south",
    "sout",
    "sou",
    "so",
    "s",
    "east",
    "eas",
    "ea",
    "e",
    "west",
    "wes",
    "we",
    "w",
    "up",
    "u",
    "down",
    "dow",
    "do",
    "d",
    "inventory",
    "inventor",
    "invento",
    "invent",
    "inven",
    "inve",
    "inv",
    "in",
    "i",
    "journal",
    "journa",
    "journ",
    "jour",
    "jou",
    "jo",
    "j",
    "wizinvis",
    "wizinvi",
    "wizinv",
    "wizin",
    "wizi",
    "wiz",
    "where",
    "wher",
    "whe",
    "who",
    "wh",
    "say",
    "sa",
    "score",
    "scor",
    "sco",
    "sc",
    "get",
    "ge",
    "g",
    "drop",
    "dro",
    "dr",
    "alias",
    "alia",
    "ali",
    "al",
    "help",
    "hel",
    "he",
    "h",
    "quit",
];

/// The line the world answers a marker with.
fn marker_answer(word: &str) -> String {
    format!("'{word}' is a command and can't be an alias.")
}

/// Whether `line` is the world's answer to some marker (current or old).
pub fn is_marker_answer(line: &str) -> bool {
    line.strip_prefix('\'')
        .and_then(|rest| rest.strip_suffix("' is a command and can't be an alias."))
        .is_some_and(|word| MARKER_WORDS.contains(&word))
}

/// Whether `line` is a marker line as the bot sends it (for filtering
/// [`Bot::sent`]).
pub fn is_marker_line(line: &str) -> bool {
    line.strip_prefix("alias ")
        .and_then(|rest| rest.strip_suffix(" x"))
        .is_some_and(|word| MARKER_WORDS.contains(&word))
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

/// State the reader task shares with the bot.
#[derive(Debug, Default)]
struct Received {
    /// Every complete line received, IAC stripped, line ends removed.
    transcript: Mutex<String>,
    /// The bytes of the line being received (a prompt has no line end).
    partial: Mutex<String>,
    closed: AtomicBool,
}

/// One player connection through the gate. See the module docs.
pub struct Bot {
    /// The character's name as the world spells it (after login), else as typed.
    pub name: String,
    wr: OwnedWriteHalf,
    lines: mpsc::UnboundedReceiver<String>,
    received: Arc<Received>,
    reader: JoinHandle<()>,
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
    /// Connect to the gate at `addr` and read its banner, up to the login
    /// prompt.
    pub async fn open(addr: &str) -> anyhow::Result<Bot> {
        let stream = tokio::time::timeout(DEFAULT_TIMEOUT, TcpStream::connect(addr))
            .await
            .with_context(|| format!("connecting to the gate at {addr}: timed out"))?
            .with_context(|| format!("connecting to the gate at {addr}"))?;
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        let received = Arc::new(Received::default());
        let (tx, lines) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_loop(rd, tx, received.clone()));
        let mut bot = Bot {
            name: String::new(),
            wr,
            lines,
            received,
            reader,
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

    /// The next received line, waiting until `deadline`.
    async fn next_line(&mut self, deadline: Instant) -> anyhow::Result<String> {
        match tokio::time::timeout_at(deadline, self.lines.recv()).await {
            Ok(Some(line)) => Ok(line),
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
        while let Ok(line) = self.lines.try_recv() {
            out.push(line);
        }
        out
    }

    /// Send a marker and return everything received before its answer
    /// (see the module docs). After it, every line sent so far has been
    /// applied by the world and its output read.
    pub async fn sync(&mut self) -> anyhow::Result<String> {
        let word = MARKER_WORDS[self.markers % MARKER_WORDS.len()];
        self.markers += 1;
        self.send(&format!("alias {word} x")).await?;
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
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `Welcome, <Name>.` → `<Name>`.
fn welcome_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("Welcome, ")?;
    let name = rest.trim_end_matches(['.', '!', ' ']);
    (!name.is_empty()).then_some(name)
}

/// Gate and world lines that end a login attempt without a welcome.
fn is_login_refusal(line: &str) -> bool {
    const REFUSALS: &[&str] = &[
        "Login failed",
        "Names are",
        "Passwords must",
        "Too many failed logins",
        "The world is not reachable",
        "The world could not be reached",
        "The world cannot be reached",
        crate::storm::BUSY_PREFIX,
        "The gate is full",
        "The gate is shutting down",
        "Type `connect <name> <password>` or",
    ];
    REFUSALS.iter().any(|p| line.starts_with(p))
}

/// `where: zone=<z> room=<r> shard=<s>` → `(z, r, s)`.
pub fn parse_where(line: &str) -> Option<(String, String, String)> {
    let rest = line.strip_prefix("where: ")?;
    let mut parts = rest.split(' ');
    let zone = parts.next()?.strip_prefix("zone=")?;
    let room = parts.next()?.strip_prefix("room=")?;
    let shard = parts.next()?.strip_prefix("shard=")?;
    if parts.next().is_some() {
        return None;
    }
    Some((zone.into(), room.into(), shard.into()))
}

/// The last complete `journal <n>: <text>` … `journal end <count>` listing
/// in `text` (a replay after an outage may have printed one twice). Lines
/// of other kinds in between (other players talking) are ignored.
pub fn parse_journal(text: &str) -> anyhow::Result<Vec<String>> {
    let mut entries: Vec<String> = Vec::new();
    let mut done: Option<Vec<String>> = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("journal ") else {
            continue;
        };
        if let Some(count) = rest.strip_prefix("end ") {
            let count: usize = count.trim().parse().context("journal end count")?;
            if count != entries.len() {
                bail!("`journal end {count}` after {} entries", entries.len());
            }
            done = Some(std::mem::take(&mut entries));
            continue;
        }
        let Some((n, entry)) = rest.split_once(": ") else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else {
            continue;
        };
        if n == 1 {
            entries.clear();
        }
        if n != entries.len() + 1 {
            bail!("journal entry {n} after {} entries", entries.len());
        }
        entries.push(entry.to_string());
    }
    done.context("no `journal end` line")
}

/// The reader task: socket bytes → telnet stripped → lines.
async fn read_loop(
    mut rd: OwnedReadHalf,
    tx: mpsc::UnboundedSender<String>,
    received: Arc<Received>,
) {
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut telnet = IacStripper::default();
    let mut data = Vec::with_capacity(READ_CHUNK);
    let mut line = Vec::new();
    loop {
        let n = match rd.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        data.clear();
        telnet.feed(&chunk[..n], &mut data);
        for &b in &data {
            match b {
                b'\n' => {
                    let text = clean_line(&line);
                    line.clear();
                    {
                        let mut t = lock(&received.transcript);
                        t.push_str(&text);
                        t.push('\n');
                    }
                    // A closed receiver only means the bot is gone.
                    let _ = tx.send(text);
                }
                _ => line.push(b),
            }
        }
        *lock(&received.partial) = clean_line(&line);
    }
    received.closed.store(true, Ordering::Release);
}

/// Lossy UTF-8 without `\r` and NUL (telnet's `\r\n` and `\r\0`).
fn clean_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| *c != '\r' && *c != '\0')
        .collect()
}

const IAC: u8 = 255;
const SB: u8 = 250;
const SE: u8 = 240;
const WILL: u8 = 251;
const DONT: u8 = 254;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum IacState {
    #[default]
    Data,
    Iac,
    /// After `IAC WILL|WONT|DO|DONT`: the option byte.
    Option,
    Sub,
    SubIac,
}

/// Removes telnet command sequences from a byte stream; state carries over
/// between reads. `IAC IAC` is a literal 255.
#[derive(Debug, Default)]
struct IacStripper {
    state: IacState,
}

impl IacStripper {
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        use IacState::*;
        for &b in input {
            self.state = match (self.state, b) {
                (Data, IAC) => Iac,
                (Data, _) => {
                    out.push(b);
                    Data
                }
                (Iac, IAC) => {
                    out.push(IAC);
                    Data
                }
                (Iac, WILL..=DONT) => Option,
                (Iac, SB) => Sub,
                (Iac, _) | (Option, _) => Data,
                (Sub, IAC) => SubIac,
                (Sub, _) => Sub,
                (SubIac, SE) => Data,
                (SubIac, _) => Sub,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(chunks: &[&[u8]]) -> Vec<u8> {
        let mut s = IacStripper::default();
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, &mut out);
        }
        out
    }

    #[test]
    fn iac_sequences_are_removed_even_split_across_reads() {
        assert_eq!(
            strip(&[&[IAC, 253, 31, IAC, 253, 24], b"=== Telos"]),
            b"=== Telos"
        );
        assert_eq!(strip(&[b"a", &[IAC], &[251], &[1, b'b']]), b"ab");
        assert_eq!(strip(&[&[IAC, SB, 24, 1, IAC], &[SE], b"c"]), b"c");
        assert_eq!(strip(&[&[b'x', IAC, IAC, b'y']]), vec![b'x', IAC, b'y']);
        assert_eq!(strip(&[&[IAC, 241, b'z']]), b"z");
    }

    #[test]
    fn marker_words_are_distinct_and_recognised() {
        let mut words = MARKER_WORDS.to_vec();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), MARKER_WORDS.len());
        for w in MARKER_WORDS {
            assert!(is_marker_answer(&marker_answer(w)));
            assert!(is_marker_line(&format!("alias {w} x")));
        }
        assert!(!is_marker_answer(
            "Alice says, ''look' is a command and can't be an alias.'"
        ));
        assert!(!is_marker_line("alias foo x"));
    }

    #[test]
    fn where_and_journal_parse() {
        assert_eq!(
            parse_where("where: zone=city room=city:square shard=shard-a"),
            Some(("city".into(), "city:square".into(), "shard-a".into()))
        );
        assert_eq!(parse_where("where: zone=city"), None);
        let text = "Bob says, 'journal 1: no'\njournal 1: a\njournal 2: b: c\njournal end 2\n";
        assert_eq!(parse_journal(text).unwrap(), ["a", "b: c"]);
        // A listing printed twice (a replay): the last one counts.
        let twice = "journal 1: a\njournal end 1\njournal 1: a\njournal end 1\n";
        assert_eq!(parse_journal(twice).unwrap(), ["a"]);
        assert_eq!(
            parse_journal("journal end 0\n").unwrap(),
            Vec::<String>::new()
        );
        assert!(parse_journal("journal 1: a\njournal end 2\n").is_err());
        assert!(parse_journal("journal 1: a\n").is_err());
    }

    #[test]
    fn welcome_and_refusals() {
        assert_eq!(welcome_name("Welcome, Alice."), Some("Alice"));
        assert_eq!(welcome_name("Welcome back"), None);
        assert!(is_login_refusal("Login failed."));
        assert!(!is_login_refusal("Alice says, 'Login failed'"));
    }
}
