//! The telnet parser, the negotiator and the MCCP2 stream fuzzed together,
//! as [`crate::reader`] runs them on a socket's bytes: arbitrary streams
//! built from telnet pieces (negotiations, option loops, well-formed,
//! broken, truncated and giant subnegotiations for every option we speak,
//! stray IACs, raw bytes), split into arbitrary reads. A bounded number of
//! cases (`PROPTEST_CASES` raises it); a failure prints its minimized input
//! and is kept in `gate/proptest-regressions/telnet/fuzz_tests.txt` (commit
//! it with the fix) to run first next time.
//!
//! After every read: no panic, every buffer under its documented cap, the
//! replies bounded per event. At the end: the same bytes in one read parse
//! the same, and what went out decodes (through every MCCP2 start and stop)
//! to exactly the replies in order.

use std::sync::Arc;

use flate2::{Decompress, FlushDecompress, Status};
use proptest::prelude::*;

use super::caps::{MAX_GMCP_PACKAGES, MAX_PACKAGE_NAME, MAX_TERMINAL_NAME};
use super::gmcp::OPT_GMCP;
use super::mccp::{Mccp, OPT_MCCP2, START};
use super::mssp::{MsspStatus, OPT_MSSP};
use super::negotiator::{Change, OPT_CHARSET, OPT_EOR};
use super::parser::{DO, DONT, IAC, MAX_SUBNEG_BYTES, OPT_ECHO, OPT_NAWS, SB, SE, WILL, WONT};
use super::ttype::OPT_TTYPE;
use super::{Negotiator, TelnetEvent, TelnetParser};
use crate::lines::{LineEvent, LineFramer};

/// The line limit the framer runs with here (the gate's is a flag).
const MAX_LINE: usize = 512;

/// What a negotiator may keep from a client: two names, the TTYPE cycle's
/// last answer, and the GMCP subscriptions, each at its cap.
const MAX_HELD: usize = 3 * MAX_TERMINAL_NAME + MAX_GMCP_PACKAGES * MAX_PACKAGE_NAME;

/// One piece of a client's byte stream.
#[derive(Debug, Clone)]
enum Piece {
    /// Text, which may hold any byte (a lone IAC among them).
    Data(Vec<u8>),
    /// `IAC verb opt`.
    Negotiate(u8, u8),
    /// The same option asked on and off `n` times: an option loop.
    Flip(u8, u8, usize),
    /// `IAC SB opt payload [IAC SE]`; the payload's IACs doubled when
    /// `escaped`, left raw (breaking the subnegotiation off) otherwise.
    Sub {
        opt: u8,
        payload: Vec<u8>,
        escaped: bool,
        terminated: bool,
    },
}

impl Piece {
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Piece::Data(d) => out.extend_from_slice(d),
            Piece::Negotiate(verb, opt) => out.extend_from_slice(&[IAC, *verb, *opt]),
            Piece::Flip(on, opt, n) => {
                let off = match *on {
                    DO => DONT,
                    DONT => DO,
                    WILL => WONT,
                    _ => WILL,
                };
                for _ in 0..*n {
                    out.extend_from_slice(&[IAC, *on, *opt, IAC, off, *opt]);
                }
            }
            Piece::Sub {
                opt,
                payload,
                escaped,
                terminated,
            } => {
                out.extend_from_slice(&[IAC, SB, *opt]);
                for &b in payload {
                    out.push(b);
                    if b == IAC && *escaped {
                        out.push(IAC);
                    }
                }
                if *terminated {
                    out.extend_from_slice(&[IAC, SE]);
                }
            }
        }
    }
}

fn option() -> impl Strategy<Value = u8> {
    prop_oneof![
        3 => prop::sample::select(vec![
            OPT_GMCP, OPT_MCCP2, OPT_MSSP, OPT_CHARSET, OPT_TTYPE, OPT_NAWS, OPT_EOR, OPT_ECHO,
        ]),
        1 => any::<u8>(),
    ]
}

fn verb() -> impl Strategy<Value = u8> {
    prop::sample::select(vec![DO, DONT, WILL, WONT])
}

fn short_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

/// A GMCP message a client might send, or garbage in its place.
fn gmcp_payload() -> impl Strategy<Value = Vec<u8>> {
    let word = "[A-Za-z.]{0,80}( [0-9])?";
    prop_oneof![
        prop::collection::vec(word, 0..100).prop_map(|names| {
            let op = ["Set", "Add", "Remove"][names.len() % 3];
            format!("Core.Supports.{op} {}", serde_json::json!(names)).into_bytes()
        }),
        ".{0,200}".prop_map(|c| {
            format!(
                "Core.Hello {}",
                serde_json::json!({"client": c, "version": "1"})
            )
            .into_bytes()
        }),
        Just(b"Core.Ping".to_vec()),
        Just(b"Core.Supports.Set [1, {}, null".to_vec()),
        short_bytes(300),
    ]
}

/// A subnegotiation payload fitting its option, or anything.
fn payload(opt: u8) -> BoxedStrategy<Vec<u8>> {
    match opt {
        OPT_GMCP => gmcp_payload().boxed(),
        OPT_TTYPE => (prop::sample::select(vec![0u8, 1, 2]), short_bytes(120))
            .prop_map(|(kind, name)| [vec![kind], name].concat())
            .boxed(),
        OPT_NAWS => short_bytes(8).boxed(),
        OPT_CHARSET => prop_oneof![
            (1u8..=3, short_bytes(60)).prop_map(|(kind, rest)| [vec![kind], rest].concat()),
            Just(b"\x01;UTF-8;ISO-8859-1".to_vec()),
            Just(b"\x01[TTABLE]\x01 UTF-8".to_vec()),
            Just(b"\x02UTF-8".to_vec()),
        ]
        .boxed(),
        _ => short_bytes(64).boxed(),
    }
}

fn sub() -> impl Strategy<Value = Piece> {
    (option(), any::<bool>(), prop::bool::weighted(0.8)).prop_flat_map(
        |(opt, escaped, terminated)| {
            let body = prop_oneof![
                8 => payload(opt),
                // Past the cap: dropped, and the stream resyncs after it.
                1 => (MAX_SUBNEG_BYTES - 2..MAX_SUBNEG_BYTES * 3)
                    .prop_map(|n| vec![b'g'; n]),
            ];
            body.prop_map(move |payload| Piece::Sub {
                opt,
                payload,
                escaped,
                terminated,
            })
        },
    )
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        3 => short_bytes(40).prop_map(Piece::Data),
        2 => "[a-z ]{0,30}\r\n".prop_map(|s| Piece::Data(s.into_bytes())),
        4 => (verb(), option()).prop_map(|(v, o)| Piece::Negotiate(v, o)),
        1 => (verb(), option(), 1usize..40).prop_map(|(v, o, n)| Piece::Flip(v, o, n)),
        4 => sub(),
    ]
}

/// The client's stream and where its reads split it.
fn session() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
    (
        prop::collection::vec(piece(), 0..40),
        prop::collection::vec(1usize..700, 1..20),
    )
        .prop_map(|(pieces, reads)| {
            let mut bytes = Vec::new();
            for p in &pieces {
                p.write(&mut bytes);
            }
            (bytes, reads)
        })
}

/// The gate's side of one connection, run the way the reader runs it.
struct Gate {
    parser: TelnetParser,
    negotiator: Negotiator,
    framer: LineFramer,
    mccp: Mccp,
    /// What went on the wire.
    wire: Vec<u8>,
    /// Every reply in order, uncompressed.
    said: Vec<u8>,
    data: Vec<u8>,
    events: Vec<TelnetEvent>,
    lines: Vec<LineEvent>,
    /// The longest reply one event may cause (an MSSP answer, at most).
    max_reply: usize,
}

impl Gate {
    fn new() -> Self {
        let mssp = Arc::new(MsspStatus::new(Vec::new(), 4000));
        let max_reply = mssp.frame().len() + 64;
        let mut negotiator = Negotiator::default();
        negotiator.mssp = Some(mssp);
        let greeting = negotiator.greeting();
        Gate {
            parser: TelnetParser::default(),
            negotiator,
            framer: LineFramer::new(MAX_LINE),
            mccp: Mccp::default(),
            wire: greeting.clone(),
            said: greeting,
            data: Vec::new(),
            events: Vec::new(),
            lines: Vec::new(),
            max_reply,
        }
    }

    fn send(&mut self, bytes: Vec<u8>) {
        self.said.extend_from_slice(&bytes);
        self.wire.extend(self.mccp.encode(bytes));
    }

    /// One read, as `Reader::fill` handles it.
    fn read(&mut self, input: &[u8]) -> Result<(), TestCaseError> {
        let mut events = Vec::new();
        let data_before = self.data.len();
        self.parser.feed(input, &mut self.data, &mut events);
        let mut reply = Vec::new();
        let mut replied = 0;
        for ev in &events {
            self.negotiator.handle(ev, &mut reply);
            if let Some(change) = self.negotiator.change.take() {
                replied += reply.len();
                self.send(std::mem::take(&mut reply));
                match change {
                    Change::CompressOn => self.mccp.start(),
                    Change::CompressOff => self.wire.extend(self.mccp.finish()),
                }
            }
        }
        replied += reply.len();
        self.send(reply);
        self.framer.feed(&self.data[data_before..], &mut self.lines);
        self.events.extend(events.iter().cloned());

        prop_assert!(
            self.parser.buffered_bytes() <= MAX_SUBNEG_BYTES,
            "subnegotiation buffer {} over its cap",
            self.parser.buffered_bytes()
        );
        prop_assert!(self.negotiator.held_bytes() <= MAX_HELD);
        let caps = &self.negotiator.caps;
        prop_assert!(caps.gmcp_packages.len() <= MAX_GMCP_PACKAGES);
        prop_assert!(
            caps.gmcp_packages
                .iter()
                .all(|p| p.len() <= MAX_PACKAGE_NAME)
        );
        prop_assert!(caps.client_name.chars().count() <= MAX_TERMINAL_NAME);
        prop_assert!(caps.terminal_type.chars().count() <= MAX_TERMINAL_NAME);
        prop_assert!(self.framer.pending_bytes() <= MAX_LINE);
        prop_assert!(
            replied <= events.len() * self.max_reply,
            "{replied} bytes of replies to {} events",
            events.len()
        );
        for ev in &events {
            if let TelnetEvent::Subnegotiation { data, .. } = ev {
                prop_assert!(
                    data.len() <= MAX_SUBNEG_BYTES,
                    "{} bytes delivered",
                    data.len()
                );
            }
        }
        Ok(())
    }
}

/// What a client reads from `wire`: plain bytes, and after each MCCP2
/// start marker a zlib stream until it ends.
fn client_view(wire: &[u8]) -> Result<Vec<u8>, TestCaseError> {
    let mut out = Vec::new();
    let mut rest = wire;
    while !rest.is_empty() {
        let Some(at) = rest.windows(START.len()).position(|w| w == START) else {
            out.extend_from_slice(rest);
            break;
        };
        out.extend_from_slice(&rest[..at + START.len()]);
        rest = &rest[at + START.len()..];
        let mut z = Decompress::new(true);
        loop {
            let mut buf = Vec::with_capacity(64 * 1024);
            let before = z.total_in();
            let status = z
                .decompress_vec(rest, &mut buf, FlushDecompress::None)
                .map_err(|e| TestCaseError::fail(format!("not a zlib stream: {e}")))?;
            rest = &rest[(z.total_in() - before) as usize..];
            out.extend_from_slice(&buf);
            if status == Status::StreamEnd || rest.is_empty() {
                break;
            }
        }
    }
    Ok(out)
}

/// Cases a run: [`DEFAULT_CASES`] in CI, more with `PROPTEST_CASES=N`.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// A few seconds of a debug build: every run explores new streams.
const DEFAULT_CASES: u32 = 512;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_client_stream_is_parsed_bounded_and_answered_consistently(
        (bytes, reads) in session()
    ) {
        let mut gate = Gate::new();
        let mut rest = &bytes[..];
        let mut i = 0;
        while !rest.is_empty() {
            let n = reads[i % reads.len()].min(rest.len());
            gate.read(&rest[..n])?;
            rest = &rest[n..];
            i += 1;
        }

        // Reads split anywhere parse as one read does.
        let mut whole = TelnetParser::default();
        let (mut data, mut events) = (Vec::new(), Vec::new());
        whole.feed(&bytes, &mut data, &mut events);
        prop_assert_eq!(&data, &gate.data);
        prop_assert_eq!(&events, &gate.events);
        // No IAC sequence leaks into the data: each data IAC was doubled.
        let raw_iacs = bytes.iter().filter(|&&b| b == IAC).count();
        prop_assert!(data.iter().filter(|&&b| b == IAC).count() * 2 <= raw_iacs);

        // Through every compression start and stop, the client reads
        // exactly the replies, in order.
        let view = client_view(&gate.wire)?;
        prop_assert!(view == gate.said, "the wire does not decode to the replies");
    }
}
