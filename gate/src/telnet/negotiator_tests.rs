use super::*;
use crate::telnet::caps::MTTS_UTF8;
use crate::telnet::mssp::MsspStatus;

fn neg(n: &mut Negotiator, verb: u8, opt: u8) -> Vec<u8> {
    let mut out = Vec::new();
    n.handle(&TelnetEvent::Negotiate { verb, opt }, &mut out);
    out
}

fn sub(n: &mut Negotiator, opt: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    n.handle(
        &TelnetEvent::Subnegotiation {
            opt,
            data: data.to_vec(),
        },
        &mut out,
    );
    out
}

#[test]
fn greeting_offers_and_asks_as_the_contract_says() {
    let mut n = Negotiator::default();
    assert_eq!(
        n.greeting(),
        [
            cmd(WILL, OPT_GMCP),
            cmd(WILL, OPT_MSSP),
            cmd(WILL, OPT_MCCP2),
            cmd(WILL, OPT_EOR),
            cmd(WILL, OPT_CHARSET),
            cmd(DO, OPT_NAWS),
            cmd(DO, OPT_TTYPE),
        ]
        .concat()
    );
}

#[test]
fn answers_to_our_own_offers_need_no_reply_and_turn_things_on() {
    let mut n = Negotiator::default();
    n.greeting();
    assert!(neg(&mut n, WILL, OPT_NAWS).is_empty());
    assert_eq!(neg(&mut n, WILL, OPT_TTYPE), ttype::SEND);
    assert!(neg(&mut n, DO, OPT_GMCP).is_empty());
    assert!(n.caps.gmcp);
    assert!(neg(&mut n, DO, OPT_EOR).is_empty());
    assert_eq!(n.prompt_end(), &[IAC, CMD_EOR]);
    assert_eq!(neg(&mut n, DO, OPT_MCCP2), MCCP_START);
    assert_eq!(n.change.take(), Some(Change::CompressOn));
    // Said again: already on, nothing owed, no loop.
    for (verb, opt) in [(DO, OPT_GMCP), (DO, OPT_MCCP2), (WILL, OPT_NAWS)] {
        assert!(neg(&mut n, verb, opt).is_empty());
    }
    assert_eq!(n.change, None);
    sub(&mut n, OPT_NAWS, &[0, 40, 0, 20]);
    assert_eq!((n.caps.width, n.caps.height), (40, 20));
    sub(&mut n, OPT_NAWS, &[0, 40, 0]);
    assert_eq!(n.caps.width, 40, "a short NAWS is ignored");
}

#[test]
fn refusals_and_a_client_that_says_dont() {
    let mut n = Negotiator::default();
    n.greeting();
    assert_eq!(neg(&mut n, WILL, 42 + 100), cmd(DONT, 142));
    assert_eq!(neg(&mut n, DO, 3), cmd(WONT, 3));
    assert!(neg(&mut n, WONT, 99).is_empty());
    assert!(neg(&mut n, DONT, 99).is_empty());
    // Refusing an offer: nothing owed, and it stays off.
    assert!(neg(&mut n, DONT, OPT_GMCP).is_empty());
    assert!(!n.caps.gmcp);
    assert!(neg(&mut n, DONT, OPT_MCCP2).is_empty());
    assert_eq!(n.change, None, "never compressed, nothing to end");
    // Turned on later by the client, then off: WILL then WONT, in order.
    assert_eq!(neg(&mut n, DO, OPT_GMCP), cmd(WILL, OPT_GMCP));
    assert!(n.caps.gmcp);
    assert_eq!(neg(&mut n, DONT, OPT_GMCP), cmd(WONT, OPT_GMCP));
    assert!(!n.caps.gmcp);
    let mut on = neg(&mut n, DO, OPT_MCCP2);
    assert_eq!(on.drain(..3).collect::<Vec<_>>(), cmd(WILL, OPT_MCCP2));
    assert_eq!(on, MCCP_START);
    assert_eq!(n.change.take(), Some(Change::CompressOn));
    assert_eq!(neg(&mut n, DONT, OPT_MCCP2), cmd(WONT, OPT_MCCP2));
    assert_eq!(n.change.take(), Some(Change::CompressOff));
    // The client withdraws NAWS.
    neg(&mut n, WILL, OPT_NAWS);
    assert_eq!(neg(&mut n, WONT, OPT_NAWS), cmd(DONT, OPT_NAWS));
    assert!(neg(&mut n, WONT, OPT_NAWS).is_empty());
}

#[test]
fn a_hundred_flips_cost_one_reply_each_and_never_grow() {
    let mut n = Negotiator::default();
    n.greeting();
    for _ in 0..100 {
        assert!(neg(&mut n, DO, OPT_EOR).len() <= 3);
        assert!(neg(&mut n, DONT, OPT_EOR).len() <= 3);
    }
}

#[test]
fn mssp_is_answered_when_the_client_asks() {
    let mut n = Negotiator {
        mssp: Some(Arc::new(MsspStatus::new(Vec::new(), 4000))),
        ..Negotiator::default()
    };
    n.greeting();
    let out = neg(&mut n, DO, OPT_MSSP);
    assert_eq!(&out[..3], &[IAC, SB, OPT_MSSP]);
    assert!(out.windows(7).any(|w| w == b"PLAYERS"));
}

#[test]
fn mtts_cycles_three_times() {
    let mut n = Negotiator::default();
    n.greeting();
    neg(&mut n, WILL, OPT_TTYPE);
    assert_eq!(sub(&mut n, OPT_TTYPE, b"\0TINTIN++"), ttype::SEND);
    assert_eq!(sub(&mut n, OPT_TTYPE, b"\0XTERM-256COLOR"), ttype::SEND);
    assert!(sub(&mut n, OPT_TTYPE, b"\0MTTS 2317").is_empty());
    assert_eq!(n.caps.client_name, "TINTIN++");
    assert_eq!(n.caps.mtts & MTTS_UTF8, MTTS_UTF8);
}

#[test]
fn charset_takes_utf8_only() {
    let mut n = Negotiator::default();
    n.greeting();
    let out = neg(&mut n, DO, OPT_CHARSET);
    assert_eq!(
        out,
        [&[IAC, SB, OPT_CHARSET, 1][..], b";UTF-8", &[IAC, SE]].concat()
    );
    sub(&mut n, OPT_CHARSET, b"\x02UTF-8");
    assert!(n.caps.utf8);
    sub(&mut n, OPT_CHARSET, b"\x03");
    assert!(!n.caps.utf8);
    let out = sub(&mut n, OPT_CHARSET, b"\x01 ISO-8859-1 utf-8");
    assert_eq!(
        out,
        [&[IAC, SB, OPT_CHARSET, 2][..], b"UTF-8", &[IAC, SE]].concat()
    );
    assert!(n.caps.utf8);
    let out = sub(&mut n, OPT_CHARSET, b"\x01;KOI8-R");
    assert_eq!(out, vec![IAC, SB, OPT_CHARSET, 3, IAC, SE]);
    assert!(sub(&mut n, OPT_CHARSET, b"").is_empty());
}

#[test]
fn gmcp_only_once_enabled() {
    let mut n = Negotiator::default();
    n.greeting();
    assert!(sub(&mut n, OPT_GMCP, b"Core.Ping").is_empty());
    neg(&mut n, DO, OPT_GMCP);
    assert_eq!(
        sub(&mut n, OPT_GMCP, b"Core.Ping"),
        gmcp::frame("Core.Ping", "")
    );
    sub(&mut n, OPT_GMCP, br#"Core.Supports.Set ["Room 1"]"#);
    assert!(n.caps.wants("Room.Info"));
}

#[test]
fn echo_toggles_only_for_telnet_clients_and_does_not_loop() {
    let mut raw = Negotiator::default();
    assert!(raw.set_hide_input(true).is_empty());
    assert!(raw.prompt_end().is_empty());

    let mut n = Negotiator::default();
    neg(&mut n, WILL, OPT_NAWS);
    assert_eq!(n.prompt_end(), &[IAC, CMD_GA]);
    assert_eq!(n.set_hide_input(true), cmd(WILL, OPT_ECHO));
    assert!(n.set_hide_input(true).is_empty());
    assert!(neg(&mut n, DO, OPT_ECHO).is_empty());
    assert_eq!(n.set_hide_input(false), cmd(WONT, OPT_ECHO));
    assert!(neg(&mut n, DONT, OPT_ECHO).is_empty());
    // Unprompted DO ECHO is refused.
    assert_eq!(neg(&mut n, DO, OPT_ECHO), cmd(WONT, OPT_ECHO));
}

#[test]
fn answers_to_the_timing_mark_probe_are_counted_and_never_loop() {
    let mut n = Negotiator::default();
    n.greeting();
    // A client that implements TIMING-MARK says WILL; refused at once, so
    // the next probe is asked afresh.
    assert_eq!(
        neg(&mut n, WILL, OPT_TIMING_MARK),
        cmd(DONT, OPT_TIMING_MARK)
    );
    assert_eq!(n.timing_marks, 1);
    // Its WONT to that, or a client that refuses unknown options: no reply.
    assert!(neg(&mut n, WONT, OPT_TIMING_MARK).is_empty());
    assert_eq!(n.timing_marks, 2);
    // Other options are no answer to the probe.
    neg(&mut n, WILL, OPT_NAWS);
    assert_eq!(n.timing_marks, 2);
}

/// Issue 29: echo back on after `create`'s first password and off again
/// for the second prompt. The gate keeps it off between the two now, but
/// any hide asked at a later line is sent even if the client never
/// answered the show before it (a client answers ahead of its user's next
/// line, so an answer not in by then never comes), and the client's `DO`
/// leaves echo with us: never answered `WONT ECHO`.
#[test]
fn echo_asked_again_at_a_later_line_is_sent_and_ends_with_us_echoing() {
    let mut n = Negotiator::default();
    neg(&mut n, WILL, OPT_NAWS);
    assert_eq!(n.set_hide_input(true), cmd(WILL, OPT_ECHO));
    assert!(neg(&mut n, DO, OPT_ECHO).is_empty());
    assert_eq!(n.set_hide_input(false), cmd(WONT, OPT_ECHO));
    // The client's DONT came before its next line (the usual case).
    assert!(neg(&mut n, DONT, OPT_ECHO).is_empty());
    assert_eq!(n.set_hide_input(true), cmd(WILL, OPT_ECHO));
    assert!(neg(&mut n, DO, OPT_ECHO).is_empty());
    assert!(n.us.is_on(OPT_ECHO));
    // A client that never answers: the next change still goes out.
    assert_eq!(n.set_hide_input(false), cmd(WONT, OPT_ECHO));
    assert_eq!(n.set_hide_input(true), cmd(WILL, OPT_ECHO));
}
