//! The recorder's vocabulary: everything a run observed, as plain data.
//! Bots, the fault driver and the sampler write it; the checker reads only
//! this (so it can be tested on synthetic histories and re-run on a kept
//! `history.json`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::clock::Ms;
use super::config::{FaultKind, Mode};

/// What a bot does most of the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Walks across zone boundaries in both directions, journals, talks.
    Walker,
    /// Paces back and forth across one zone boundary, fast, then another:
    /// a crossing every few hundred milliseconds, so some land in the
    /// moments a zone moves.
    Pacer,
    /// A walker that also logs out and in (`quit`, reconnect, `connect`).
    Logger,
    /// Mostly idle: a command every several seconds.
    Idler,
    /// Stays in its zone and talks (others' lines in the room).
    Talker,
    /// A walker that, now and then, stops reading its socket for a while.
    SlowReader,
}

/// What a command was, as far as the checker cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// A move from `from` towards `dir`; `to` is where the map says it leads.
    Move {
        from: String,
        dir: String,
        to: String,
    },
    /// `journal <text>`: the bot's journal line number `n`.
    Journal {
        n: u64,
    },
    /// `journal` (the listing).
    JournalList,
    Say {
        text: String,
    },
    Where,
    Look,
    /// `get all` (`pick_up`) or `drop all`: the bots carry the world's
    /// items across shards, for the item census.
    Carry {
        pick_up: bool,
    },
    Quit,
    /// `create` or `connect`.
    Login,
}

/// How an answered command was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    /// A move printed this room.
    Moved {
        room: String,
    },
    /// A move refused with a line starting `You can't go that way`.
    Refused {
        line: String,
    },
    /// A move refused in other words (CONTRACT.md: every refusal starts
    /// `You can't go that way`).
    OffContract {
        line: String,
    },
    Noted,
    Listed {
        entries: Vec<String>,
    },
    Said,
    Where {
        zone: String,
        room: String,
        shard: String,
    },
    Looked,
    /// A `get all` or `drop all` answered in one of its shapes.
    Carried,
    Goodbye,
    Welcome,
    /// A login refused with this line.
    LoginRefused {
        line: String,
    },
    /// Its answer was lost with the link it was sent on (a shard the gate
    /// could not reach, whose links it ended): the session resumed and the
    /// takeover showed the room the player stands in, which answers a line
    /// applied before the link failed (docs/operations.md, "A world shard
    /// hangs"; issue 30's one-sided cut).
    TakenOver,
    /// The world took the line (its marker was answered) but printed none
    /// of the shapes the contract gives this command.
    Unrecognised,
}

/// How a command's wait ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Its answer arrived at `at`.
    Answered { at: Ms, answer: Answer },
    /// The connection closed at `at` before the answer.
    Closed { at: Ms },
    /// The bot gave up waiting at `at` (and dropped the connection).
    Abandoned { at: Ms },
}

impl Outcome {
    pub fn answered_at(&self) -> Option<Ms> {
        match self {
            Outcome::Answered { at, .. } => Some(*at),
            _ => None,
        }
    }

    pub fn answer(&self) -> Option<&Answer> {
        match self {
            Outcome::Answered { answer, .. } => Some(answer),
            _ => None,
        }
    }
}

/// One command a bot sent and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandRecord {
    /// Index into the bot's `sessions`.
    pub session: usize,
    /// The line as sent (a login's password is not kept).
    pub line: String,
    pub kind: Kind,
    pub sent: Ms,
    /// Sent while the bot was not reading its socket: it read again from
    /// here, so the answer could not be seen before.
    pub read_from: Option<Ms>,
    pub outcome: Outcome,
    /// Lines received while waiting, with their times: kept for slow,
    /// unanswered and unrecognised commands (the report's transcript).
    pub excerpt: Vec<(Ms, String)>,
    /// Answers to the bot's own lines shown while waiting beyond the one
    /// this command itself gets (a `Noted.` or a `You say, '…'` seen
    /// again): an answer a replay showed a second time. With output commit
    /// always 0 (issue "One command, one commit": no answer is shown twice).
    #[serde(default)]
    pub shown_again: u32,
}

/// One journal line a bot wrote (`journal <text>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalLine {
    /// 1, 2, … per bot, in the order sent.
    pub n: u64,
    pub text: String,
    pub sent: Ms,
    /// When `Noted.` came back, if it did.
    pub acked: Option<Ms>,
    pub session: usize,
}

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CloseCause {
    /// The bot quit and the gate closed the socket.
    Quit,
    /// The gate's side closed (a gate crash, or the gate hung up).
    Remote,
    /// The bot dropped it after giving up on an answer.
    Abandoned,
}

/// One connection of a bot, from open to close.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub opened: Ms,
    /// When the login was welcomed.
    pub logged_in: Option<Ms>,
    pub closed: Option<(Ms, CloseCause)>,
    /// The last lines received (for a report on an unexpected close).
    pub tail: Vec<String>,
}

/// What a bot saw at the end of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalView {
    /// The final `where`, parsed.
    pub location: Option<(String, String, String)>,
    /// The room the bot believed it was in before that `where` (from its
    /// last move's or `where`'s answer).
    pub believed_room: Option<String>,
    /// The final `journal` listing.
    pub listing: Option<Vec<String>>,
    /// The durable row's journal after the final `quit`.
    pub durable: Option<Vec<String>>,
    /// The durable row's `owner_epoch` after the final `quit`.
    pub durable_epoch: Option<u64>,
}

/// Everything one bot did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotHistory {
    pub name: String,
    pub role: Role,
    pub sessions: Vec<Session>,
    pub commands: Vec<CommandRecord>,
    pub journal: Vec<JournalLine>,
    /// Times the bot stopped reading its socket: (from, to).
    pub pauses: Vec<(Ms, Ms)>,
    pub last: FinalView,
}

impl BotHistory {
    pub fn new(name: &str, role: Role) -> BotHistory {
        BotHistory {
            name: name.to_string(),
            role,
            sessions: Vec::new(),
            commands: Vec::new(),
            journal: Vec::new(),
            pauses: Vec::new(),
            last: FinalView::default(),
        }
    }
}

/// One fault as it was carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRecord {
    /// 1, 2, … in schedule order.
    pub id: usize,
    pub kind: FaultKind,
    /// The shard, zone → shard, or process it hit.
    pub target: String,
    pub start: Ms,
    /// When the fault was undone (restart ready, SIGCONT, transfer done).
    pub restored: Option<Ms>,
    /// The end of the fault's window for answer bounds: when its work was
    /// served again. For a paused shard, when its peers served its zones
    /// (or, if they had not, when it was healthy again after SIGCONT).
    pub window_end: Option<Ms>,
    /// When the cluster was healthy again (the next fault waits for it).
    pub healthy: Option<Ms>,
    /// What happened, for the report.
    pub notes: Vec<String>,
    /// What went wrong in the fault's own steps (a drain's exit status or
    /// summary, a failed transfer, no recovery): violations.
    pub problems: Vec<String>,
}

impl FaultRecord {
    /// `#3 kill shard-b`.
    pub fn label(&self) -> String {
        format!("#{} {} {}", self.id, self.kind.name(), self.target)
    }
}

/// A value sampled from Redis, recorded each time it changed.
pub type Series = Vec<(Ms, Option<u64>)>;

/// A zone lease's (owner, generation), recorded each time it changed.
pub type LeaseSeries = Vec<(Ms, Option<(String, u64)>)>;

/// What the sampler read from Redis and /proc during the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Samples {
    /// `telos:zone:{zone}:gen` (the generation counter) per zone.
    pub zone_gen: BTreeMap<String, Series>,
    /// The lease hash's `gen` per zone (`None` while no lease exists).
    pub lease_gen: BTreeMap<String, Series>,
    /// `telos:char:{name}` `owner_epoch` per bot.
    pub owner_epoch: BTreeMap<String, Series>,
    /// The number `n` of the last journal line in the bot's durable row.
    pub durable_tail: BTreeMap<String, Series>,
    /// RSS in KiB per process incarnation (`shard-a#2`), every sample.
    pub rss_kib: BTreeMap<String, Vec<(Ms, u64)>>,
    /// Sample rounds in which Redis answered (to say how dense the
    /// sampling was).
    pub rounds: u64,
    /// The lease's (owner, generation) per zone, recorded on each change.
    #[serde(default)]
    pub lease: BTreeMap<String, LeaseSeries>,
    /// Whether the cluster was healthy (every shard live, every zone leased
    /// by a live shard, nothing moving), recorded on each change.
    #[serde(default)]
    pub healthy: Vec<(Ms, bool)>,
    /// Every scrape of the shards' `/metrics` for the zones they serve.
    #[serde(default)]
    pub actors: Vec<ActorRound>,
    /// Item censuses taken while the cluster was healthy (see
    /// [`super::census`]): how many, and each one that found an item in
    /// two places, with what it found.
    #[serde(default)]
    pub censuses: u64,
    #[serde(default)]
    pub census_anomalies: Vec<(Ms, Vec<String>)>,
}

/// One scrape of every shard process's `/metrics`: which zones each serves
/// (`telos_zone_serving`), under which generation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActorRound {
    pub at: Ms,
    /// Every (process incarnation, zone) with at least one serving actor.
    pub serving: Vec<Serving>,
    /// Processes that did not answer (paused, starting, gone).
    pub silent: Vec<String>,
}

/// Zone actors serving on one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Serving {
    /// `shard-b#2`.
    pub process: String,
    pub zone: String,
    /// Actors taking players for the zone there (more than 1 is a defect).
    pub actors: u64,
    /// The lease generation they hold (0: not confirmed yet).
    pub generation: u64,
}

/// Record `value` at `t` if it differs from the last value recorded.
pub fn record_if_changed<T: PartialEq>(series: &mut Vec<(Ms, T)>, t: Ms, value: T) {
    if series.last().map(|(_, v)| v) != Some(&value) {
        series.push((t, value));
    }
}

/// Record `value` at `t` if it differs from the last value recorded.
pub fn record_change(series: &mut Series, t: Ms, value: Option<u64>) {
    if series.last().map(|(_, v)| *v) != Some(value) {
        series.push((t, value));
    }
}

/// A process as found at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEnd {
    /// `shard-a#2`, `gate#1`, `redis#1`.
    pub name: String,
    pub pid: i32,
    pub alive: bool,
}

/// `telosctl status --json`, the parts the checker reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusView {
    pub shards: Vec<StatusShard>,
    pub zones: Vec<StatusZone>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusShard {
    pub id: String,
    pub state: String,
    pub players: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusZone {
    pub id: String,
    pub owner: Option<String>,
    pub players: u64,
    /// Whether a transfer is pending.
    pub transfer: bool,
}

/// The end of the run as the driver found it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndState {
    pub processes: Vec<ProcessEnd>,
    /// The last `telosctl status --json` read, and when.
    pub status: Option<(Ms, StatusView)>,
    /// Why no status could be read, if none could.
    pub status_error: Option<String>,
    /// When play stopped (the end of the schedule).
    pub stopped: Ms,
    /// The item census after every bot logged out: what was wrong (an
    /// item in two places or nowhere), or why none could be taken.
    #[serde(default)]
    pub census: Option<Result<Vec<String>, String>>,
}

/// A whole run: what the checker checks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub seed: u64,
    #[serde(default)]
    pub mode: Mode,
    /// The schedule as drawn, one line a fault.
    pub plan: Vec<String>,
    /// Unix milliseconds at the run's start (to read log timestamps).
    pub start_unix_ms: u64,
    /// When setup (cluster up, every bot created) was done.
    pub setup_done: Ms,
    pub bots: Vec<BotHistory>,
    pub faults: Vec<FaultRecord>,
    pub samples: Samples,
    pub end: EndState,
    /// RSS growth allowed per process, KiB.
    pub rss_growth_kib: u64,
}

/// The text of bot `name`'s journal line `n` (unique per bot, so the
/// checker can tell every line in a listing apart).
pub fn journal_text(name: &str, n: u64) -> String {
    format!("{name} line {n}")
}

/// The `n` of a [`journal_text`] (any bot's), if it is one.
pub fn journal_number(text: &str) -> Option<u64> {
    let (_, n) = text.rsplit_once(" line ")?;
    n.parse().ok()
}
