//! The translation between the connection task's byte stream (telnet, as
//! a TCP client gets it) and WebSocket messages, for each mudstandards
//! subprotocol. The connection task is the same for both edges, so GMCP is
//! rendered once ([`crate::telnet::gmcp::render`]) and unwrapped here.
//!
//! - `gmcp.mudstandards.org`: BINARY frames carry the game text (ANSI
//!   kept), TEXT frames `Package.Name <json>` GMCP messages, both ways.
//! - `terminal.mudstandards.org`: BINARY frames of text only; every telnet
//!   command stripped.
//! - `telnet.mudstandards.org`: the raw telnet stream in BINARY frames.

use crate::telnet::caps::{MTTS_256, MTTS_ANSI, MTTS_TRUECOLOR, MTTS_UTF8};
use crate::telnet::gmcp::OPT_GMCP;
use crate::telnet::ttype::{OPT_TTYPE, TTYPE_IS};
use crate::telnet::{DO, DONT, IAC, OPT_ECHO, OPT_NAWS, SB, SE, WILL, WONT};

pub const GMCP_PROTOCOL: &str = "gmcp.mudstandards.org";
pub const TERMINAL_PROTOCOL: &str = "terminal.mudstandards.org";
pub const TELNET_PROTOCOL: &str = "telnet.mudstandards.org";

/// The subprotocols offered, preferred first.
pub const PROTOCOLS: [&str; 3] = [GMCP_PROTOCOL, TERMINAL_PROTOCOL, TELNET_PROTOCOL];

/// A GMCP message from the gate longer than this is dropped (a `who` list
/// of thousands is a few KiB); it bounds what one unfinished subnegotiation
/// may hold.
pub const MAX_GMCP_BYTES: usize = 64 * 1024;

/// The WebSocket subprotocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Gmcp,
    Terminal,
    Telnet,
}

impl Proto {
    /// The negotiated subprotocol; none asked for is plain text
    /// (`terminal`).
    pub fn from_name(name: Option<&str>) -> Proto {
        match name {
            Some(GMCP_PROTOCOL) => Proto::Gmcp,
            Some(TELNET_PROTOCOL) => Proto::Telnet,
            _ => Proto::Terminal,
        }
    }

    /// What the gate is told as the connection opens, as if the client had
    /// said it: a GMCP page takes GMCP (`DO GMCP`); a GMCP or terminal
    /// page shows ANSI colour (the gate's own page, `app.js`, renders 24-bit
    /// SGR; a terminal page is an xterm-like emulator, 256 colours), said
    /// as a telnet client says it, through the TTYPE/MTTS cycle. A telnet
    /// page negotiates for itself.
    pub fn opening_input(self) -> Vec<u8> {
        match self {
            Proto::Gmcp => [
                &[IAC, DO, OPT_GMCP][..],
                &mtts_answers("TELOS-WEB", "ANSI-TRUECOLOR", MTTS_WEB_PAGE),
            ]
            .concat(),
            Proto::Terminal => mtts_answers("WEB-TERMINAL", "XTERM-256COLOR", MTTS_WEB_TERMINAL),
            Proto::Telnet => Vec::new(),
        }
    }
}

/// MTTS bits the gate's page is known for: ANSI, UTF-8, 256 colours,
/// truecolour.
const MTTS_WEB_PAGE: u32 = MTTS_ANSI | MTTS_UTF8 | MTTS_256 | MTTS_TRUECOLOR;
/// A terminal page's: ANSI, UTF-8, 256 colours.
const MTTS_WEB_TERMINAL: u32 = MTTS_ANSI | MTTS_UTF8 | MTTS_256;

/// `WILL TTYPE` and the three answers of the cycle: name, terminal, MTTS.
fn mtts_answers(name: &str, terminal: &str, mtts: u32) -> Vec<u8> {
    let mut bytes = vec![IAC, WILL, OPT_TTYPE];
    for answer in [name, terminal, &format!("MTTS {mtts}")] {
        bytes.extend_from_slice(&[IAC, SB, OPT_TTYPE, TTYPE_IS]);
        bytes.extend_from_slice(answer.as_bytes());
        bytes.extend_from_slice(&[IAC, SE]);
    }
    bytes
}

/// One WebSocket message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// A TEXT frame: a GMCP message, `Package.Name <json>`.
    Text(String),
    /// A BINARY frame: game text.
    Binary(Vec<u8>),
}

impl Msg {
    /// Bytes this message holds, for the replay bound.
    pub fn len(&self) -> usize {
        match self {
            Msg::Text(t) => t.len(),
            Msg::Binary(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The page is told to hide (or show again) what is typed: the telnet
/// ECHO toggle around a password, as GMCP.
pub const ECHO_PACKAGE: &str = "Telos.Echo";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Data,
    Iac,
    Verb(u8),
    SbOpt,
    Sb,
    SbIac,
}

/// Splits the gate's output stream into messages in order, across reads.
#[derive(Debug)]
pub struct OutSplitter {
    proto: Proto,
    state: State,
    sb_opt: u8,
    sb: Vec<u8>,
    /// Set when the subnegotiation outgrew [`MAX_GMCP_BYTES`]: dropped.
    sb_over: bool,
}

impl OutSplitter {
    pub fn new(proto: Proto) -> Self {
        Self {
            proto,
            state: State::Data,
            sb_opt: 0,
            sb: Vec::new(),
            sb_over: false,
        }
    }

    /// The messages `bytes` complete, appended to `out` in stream order.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Msg>) {
        if self.proto == Proto::Telnet {
            if !bytes.is_empty() {
                out.push(Msg::Binary(bytes.to_vec()));
            }
            return;
        }
        let mut text = Vec::new();
        for &b in bytes {
            match self.state {
                State::Data if b == IAC => self.state = State::Iac,
                State::Data => text.push(b),
                State::Iac => {
                    self.state = match b {
                        IAC => {
                            text.push(IAC);
                            State::Data
                        }
                        SB => State::SbOpt,
                        WILL | WONT | DO | DONT => State::Verb(b),
                        // GA, EOR, NOP: nothing a page shows.
                        _ => State::Data,
                    }
                }
                State::Verb(verb) => {
                    self.state = State::Data;
                    if self.proto == Proto::Gmcp && b == OPT_ECHO && (verb == WILL || verb == WONT)
                    {
                        flush(&mut text, out);
                        let hide = verb == WILL;
                        out.push(Msg::Text(format!("{ECHO_PACKAGE} {{\"hide\":{hide}}}")));
                    }
                }
                State::SbOpt => {
                    self.sb_opt = b;
                    self.sb.clear();
                    self.sb_over = false;
                    self.state = State::Sb;
                }
                State::Sb if b == IAC => self.state = State::SbIac,
                State::Sb => self.sb_push(b),
                State::SbIac => match b {
                    SE => {
                        self.state = State::Data;
                        self.end_sb(&mut text, out);
                    }
                    IAC => {
                        self.sb_push(IAC);
                        self.state = State::Sb;
                    }
                    _ => self.state = State::Sb,
                },
            }
        }
        flush(&mut text, out);
    }

    fn sb_push(&mut self, b: u8) {
        if self.sb.len() < MAX_GMCP_BYTES {
            self.sb.push(b);
        } else {
            self.sb_over = true;
        }
    }

    fn end_sb(&mut self, text: &mut Vec<u8>, out: &mut Vec<Msg>) {
        let body = std::mem::take(&mut self.sb);
        if self.proto != Proto::Gmcp || self.sb_opt != OPT_GMCP || self.sb_over {
            return;
        }
        flush(text, out);
        out.push(Msg::Text(String::from_utf8_lossy(&body).into_owned()));
    }
}

fn flush(text: &mut Vec<u8>, out: &mut Vec<Msg>) {
    if !text.is_empty() {
        out.push(Msg::Binary(std::mem::take(text)));
    }
}

/// Text from the page as the gate's input stream: the byte 255 escaped
/// (a page cannot send telnet commands through a text channel). A GMCP
/// page's BINARY frame is one line: its end is added if missing.
pub fn input_bytes(proto: Proto, data: &[u8]) -> Vec<u8> {
    if proto == Proto::Telnet {
        return data.to_vec();
    }
    let mut bytes = Vec::with_capacity(data.len() + 1);
    for &b in data {
        bytes.push(b);
        if b == IAC {
            bytes.push(IAC);
        }
    }
    if proto == Proto::Gmcp && !bytes.ends_with(b"\n") {
        bytes.push(b'\n');
    }
    bytes
}

/// A GMCP message from the page (a TEXT frame) as the telnet
/// subnegotiation the gate's negotiator reads (`Core.Hello`,
/// `Core.Supports.Set`). A message with the byte 255 cannot be: UTF-8
/// never holds it.
pub fn gmcp_input(message: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(message.len() + 5);
    bytes.extend_from_slice(&[IAC, SB, OPT_GMCP]);
    bytes.extend_from_slice(message.as_bytes());
    bytes.extend_from_slice(&[IAC, SE]);
    bytes
}

/// The page's size in characters (`Telos.Size {"width":W,"height":H}`,
/// sent as it opens and when it is resized) as the telnet NAWS
/// subnegotiation a telnet client sends for its window: the gate wraps
/// the world's text to it as for a narrow terminal ([`crate::mud`]).
pub fn naws_input(width: u16, height: u16) -> Vec<u8> {
    let mut bytes = vec![IAC, SB, OPT_NAWS];
    for b in [width.to_be_bytes(), height.to_be_bytes()].concat() {
        bytes.push(b);
        if b == IAC {
            bytes.push(IAC);
        }
    }
    bytes.extend_from_slice(&[IAC, SE]);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telnet::gmcp::frame;

    fn split(proto: Proto, chunks: &[&[u8]]) -> Vec<Msg> {
        let mut s = OutSplitter::new(proto);
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, &mut out);
        }
        out
    }

    #[test]
    fn gmcp_pages_get_text_and_gmcp_in_order_across_reads() {
        let mut stream = b"Edge of the Forest\r\n".to_vec();
        stream.extend(frame("Room.Info", r#"{"num":1}"#));
        stream.extend(b"more \xff\xff text");
        stream.extend([IAC, WILL, OPT_ECHO, IAC, 249]);
        // Cut everywhere: the messages do not depend on the reads.
        for cut in 0..stream.len() {
            let msgs = split(Proto::Gmcp, &[&stream[..cut], &stream[cut..]]);
            let text: Vec<u8> = msgs
                .iter()
                .filter_map(|m| match m {
                    Msg::Binary(b) => Some(b.clone()),
                    _ => None,
                })
                .flatten()
                .collect();
            assert_eq!(text, b"Edge of the Forest\r\nmore \xff text");
            let texts: Vec<&Msg> = msgs.iter().filter(|m| matches!(m, Msg::Text(_))).collect();
            assert_eq!(
                texts,
                [
                    &Msg::Text(r#"Room.Info {"num":1}"#.into()),
                    &Msg::Text(r#"Telos.Echo {"hide":true}"#.into())
                ]
            );
        }
        // In order: the room's text before its GMCP message.
        let msgs = split(Proto::Gmcp, &[&stream]);
        assert_eq!(msgs[0], Msg::Binary(b"Edge of the Forest\r\n".to_vec()));
        assert!(matches!(&msgs[1], Msg::Text(t) if t.starts_with("Room.Info")));
    }

    #[test]
    fn terminal_pages_get_text_only_and_telnet_pages_everything() {
        let mut stream = vec![IAC, WILL, OPT_GMCP];
        stream.extend(frame("Char.Vitals", "{}"));
        stream.extend(b"hello\r\n");
        assert_eq!(
            split(Proto::Terminal, &[&stream]),
            [Msg::Binary(b"hello\r\n".to_vec())]
        );
        assert_eq!(
            split(Proto::Telnet, &[&stream]),
            [Msg::Binary(stream.clone())]
        );
    }

    #[test]
    fn an_overlong_gmcp_message_is_dropped_and_memory_stays_bounded() {
        let mut s = OutSplitter::new(Proto::Gmcp);
        let mut out = Vec::new();
        s.feed(&[IAC, SB, OPT_GMCP], &mut out);
        for _ in 0..100 {
            s.feed(&[b'x'; 4096], &mut out);
        }
        assert!(s.sb.capacity() <= 2 * MAX_GMCP_BYTES);
        s.feed(&[IAC, SE], &mut out);
        s.feed(b"after", &mut out);
        assert_eq!(out, [Msg::Binary(b"after".to_vec())]);
    }

    #[test]
    fn input_escapes_iac_and_ends_gmcp_lines() {
        assert_eq!(input_bytes(Proto::Gmcp, b"look"), b"look\n");
        assert_eq!(input_bytes(Proto::Gmcp, b"say \xff\n"), b"say \xff\xff\n");
        assert_eq!(input_bytes(Proto::Terminal, b"lo"), b"lo");
        assert_eq!(input_bytes(Proto::Telnet, &[IAC, DO, 1]), [IAC, DO, 1]);
        assert_eq!(
            gmcp_input("Core.Hello {}"),
            [&[IAC, SB, OPT_GMCP][..], b"Core.Hello {}", &[IAC, SE]].concat()
        );
    }

    #[test]
    fn web_pages_say_the_colour_they_show_and_a_telnet_page_says_nothing() {
        use crate::telnet::Negotiator;
        use crate::telnet::caps::{COLOURS_256, COLOURS_NONE, COLOURS_TRUE};
        for (proto, colours) in [
            (Proto::Gmcp, COLOURS_TRUE),
            (Proto::Terminal, COLOURS_256),
            (Proto::Telnet, COLOURS_NONE),
        ] {
            let mut n = Negotiator::default();
            let mut parser = crate::telnet::parser::TelnetParser::default();
            let (mut data, mut events, mut out) = (Vec::new(), Vec::new(), Vec::new());
            parser.feed(&proto.opening_input(), &mut data, &mut events);
            for e in &events {
                n.handle(e, &mut out);
            }
            assert!(data.is_empty(), "no stray input: {data:?}");
            assert_eq!(n.caps.colours(), colours, "{proto:?}");
            assert!(!n.caps.screen_reader());
        }
    }

    #[test]
    fn a_page_size_is_a_naws_subnegotiation_the_negotiator_reads() {
        use crate::telnet::Negotiator;
        assert_eq!(
            naws_input(40, 20),
            vec![IAC, SB, OPT_NAWS, 0, 40, 0, 20, IAC, SE]
        );
        // 255 in either byte is doubled, as telnet escapes it.
        assert_eq!(
            naws_input(255, 0x1ff),
            vec![IAC, SB, OPT_NAWS, 0, IAC, IAC, 1, IAC, IAC, IAC, SE]
        );
        let mut n = Negotiator::default();
        let mut parser = crate::telnet::parser::TelnetParser::default();
        let (mut data, mut events, mut out) = (Vec::new(), Vec::new(), Vec::new());
        parser.feed(&naws_input(33, 12), &mut data, &mut events);
        for e in &events {
            n.handle(e, &mut out);
        }
        assert!(data.is_empty(), "no stray input: {data:?}");
        assert_eq!((n.caps.width, n.caps.height), (33, 12));
    }
}
