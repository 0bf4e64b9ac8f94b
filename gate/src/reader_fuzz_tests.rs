//! The gate's read path fuzzed as it ships: a real [`Reader`] over one
//! end of a `tokio::io::duplex` socket, answering through a real
//! [`Output`] (its writer task, its MCCP2 switch) on the same socket, fed
//! arbitrary streams built from telnet pieces (negotiations, option loops,
//! well-formed, broken, truncated and giant subnegotiations for every
//! option we speak, stray IACs, raw bytes), split into arbitrary reads. A
//! bounded number of cases (`PROPTEST_CASES` raises it); a failure prints
//! its minimized input and is kept in
//! `gate/proptest-regressions/reader_fuzz_tests.txt` (commit it with the
//! fix) to run first next time.
//!
//! After every read: no panic, every buffer under its documented cap. At
//! the end: the reads parsed to the data and lines one read of the whole
//! stream gives, every reply is bounded, and what the client received
//! decodes (through every MCCP2 start and stop, with the testkit's
//! client-side decoder) to exactly the replies a negotiator owes those
//! events, in order.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use telos_testkit::tap::decode_wire;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{READ_CHUNK, Reader};
use crate::lines::{LineEvent, LineFramer};
use crate::output::Output;
use crate::stream::PlayerIo;
use crate::telnet::caps::{Capabilities, MAX_GMCP_PACKAGES, MAX_PACKAGE_NAME, MAX_TERMINAL_NAME};
use crate::telnet::gmcp::OPT_GMCP;
use crate::telnet::mccp::OPT_MCCP2;
use crate::telnet::mssp::{MsspStatus, OPT_MSSP};
use crate::telnet::negotiator::{OPT_CHARSET, OPT_EOR};
use crate::telnet::parser::{
    DO, DONT, IAC, MAX_SUBNEG_BYTES, OPT_ECHO, OPT_NAWS, SB, SE, WILL, WONT,
};
use crate::telnet::ttype::OPT_TTYPE;
use crate::telnet::{Negotiator, TelnetEvent, TelnetParser};

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

/// The output bound here: far above anything a case replies, so no case
/// ends as a slow client (the bound has its own tests in `output`).
const OUTPUT_CAP: usize = 64 << 20;

/// Bounds a hang of the writer's final flush; never reached when it works.
const CLOSE_GRACE: Duration = Duration::from_secs(30);

/// The output's stall timeout: never reached here (nothing pauses input).
const STALL: Duration = Duration::from_secs(30);

/// A socket's buffer each way: more than one read ([`READ_CHUNK`]).
const SOCKET_BUFFER: usize = 4 * READ_CHUNK;

/// What the gate's read path did with one client stream.
struct Run {
    /// The parsed data of every read, in order.
    data: Vec<u8>,
    lines: Vec<LineEvent>,
    /// Everything the client received, as it was on the wire.
    wire: Vec<u8>,
    /// What the reader's negotiator learnt of the client (window size,
    /// GMCP packages, names): events that cause no reply show only here.
    caps: Capabilities,
}

/// A gate's negotiator, with the MSSP answer a crawler would get.
fn negotiator(mssp: &Arc<MsspStatus>) -> Negotiator {
    let mut n = Negotiator::default();
    n.mssp = Some(mssp.clone());
    n
}

/// The bounds that must hold after every read (before its lines are
/// consumed).
fn check_bounds(reader: &Reader) -> Result<(), TestCaseError> {
    prop_assert!(
        reader.telnet.buffered_bytes() <= MAX_SUBNEG_BYTES,
        "subnegotiation buffer {} over its cap",
        reader.telnet.buffered_bytes()
    );
    prop_assert!(reader.negotiator.held_bytes() <= MAX_HELD);
    let caps = &reader.negotiator.caps;
    prop_assert!(caps.gmcp_packages.len() <= MAX_GMCP_PACKAGES);
    prop_assert!(
        caps.gmcp_packages
            .iter()
            .all(|p| p.len() <= MAX_PACKAGE_NAME)
    );
    prop_assert!(caps.client_name.chars().count() <= MAX_TERMINAL_NAME);
    prop_assert!(caps.terminal_type.chars().count() <= MAX_TERMINAL_NAME);
    prop_assert!(reader.framer.pending_bytes() <= MAX_LINE);
    // One line event a byte at most.
    prop_assert!(reader.lines.len() <= READ_CHUNK);
    Ok(())
}

/// The gate's side of one connection, as `connection::run_conn` opens it
/// (the greeting first), fed `bytes` one read of each `reads` length in
/// turn; the client reads everything the gate sends until it closes.
async fn run(bytes: &[u8], reads: &[usize], mssp: &Arc<MsspStatus>) -> Result<Run, TestCaseError> {
    let (client, gate_end) = tokio::io::duplex(SOCKET_BUFFER);
    let (mut client_rd, mut client_wr) = tokio::io::split(client);
    let received = tokio::spawn(async move {
        let mut wire = Vec::new();
        client_rd.read_to_end(&mut wire).await.map(|_| wire)
    });
    let io = PlayerIo::split(gate_end);
    let out = Output::spawn(io.wr, OUTPUT_CAP, STALL);
    let mut reader = Reader::new(io.rd, MAX_LINE, None, Vec::new());
    reader.negotiator = negotiator(mssp);
    let greeting = reader.negotiator.greeting();
    out.raw(greeting).map_err(fail)?;

    let (mut data, mut lines) = (Vec::new(), Vec::new());
    let mut rest = bytes;
    for &n in reads.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (read, after) = rest.split_at(n.min(rest.len()));
        rest = after;
        // The whole piece sits in the socket's buffer before the read, so
        // the read takes exactly it.
        client_wr.write_all(read).await.map_err(fail)?;
        reader
            .fill(&out)
            .await
            .map_err(|e| fail(format!("{e:?}")))?;
        check_bounds(&reader)?;
        data.extend_from_slice(&reader.data);
        lines.extend(std::iter::from_fn(|| reader.pop()));
    }
    out.close(CLOSE_GRACE).await;
    let wire = received.await.map_err(fail)?.map_err(fail)?;
    let caps = reader.negotiator.caps.clone();
    Ok(Run {
        data,
        lines,
        wire,
        caps,
    })
}

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

/// What the whole stream in one read parses to, and the replies a
/// negotiator owes it (the greeting first), each reply checked against
/// `max_reply`.
struct Expected {
    data: Vec<u8>,
    lines: Vec<LineEvent>,
    said: Vec<u8>,
    caps: Capabilities,
}

fn expected(bytes: &[u8], mssp: &Arc<MsspStatus>) -> Result<Expected, TestCaseError> {
    let (mut data, mut events) = (Vec::new(), Vec::<TelnetEvent>::new());
    TelnetParser::default().feed(bytes, &mut data, &mut events);
    let mut lines = Vec::new();
    LineFramer::new(MAX_LINE).feed(&data, &mut lines);
    // The longest reply one event may cause: an MSSP answer, at most.
    let max_reply = mssp.frame().len() + 64;
    let mut negotiator = negotiator(mssp);
    let mut said = negotiator.greeting();
    for ev in &events {
        if let TelnetEvent::Subnegotiation { data, .. } = ev {
            prop_assert!(
                data.len() <= MAX_SUBNEG_BYTES,
                "{} bytes delivered",
                data.len()
            );
        }
        let before = said.len();
        negotiator.handle(ev, &mut said);
        negotiator.change = None;
        prop_assert!(
            said.len() - before <= max_reply,
            "{} bytes of replies to one event",
            said.len() - before
        );
    }
    Ok(Expected {
        data,
        lines,
        said,
        caps: negotiator.caps,
    })
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
        let mssp = Arc::new(MsspStatus::new(Vec::new(), 4000));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(fail)?;
        let got = rt.block_on(run(&bytes, &reads, &mssp))?;
        let want = expected(&bytes, &mssp)?;

        // Reads split anywhere parse as one read does.
        prop_assert_eq!(&got.data, &want.data);
        prop_assert_eq!(&got.lines, &want.lines);
        // ...and leave the negotiator knowing the same of the client (NAWS,
        // GMCP subscriptions and names cause no reply to compare).
        prop_assert_eq!(&got.caps, &want.caps);
        // No IAC sequence leaks into the data: each data IAC was doubled.
        let raw_iacs = bytes.iter().filter(|&&b| b == IAC).count();
        prop_assert!(got.data.iter().filter(|&&b| b == IAC).count() * 2 <= raw_iacs);

        // Through every compression start and stop, the client reads
        // exactly the replies, in order.
        let view = decode_wire(&got.wire).map_err(|e| fail(format!("{e:#}")))?;
        prop_assert!(view.plain == want.said, "the wire does not decode to the replies");
    }
}
