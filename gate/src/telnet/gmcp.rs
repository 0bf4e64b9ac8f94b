//! GMCP (option 201, https://tintin.mudhalla.net/protocols/gmcp/): JSON
//! messages inside `IAC SB GMCP <Package.Name> <json> IAC SE`.
//!
//! [`render`] turns a world [`Event`] into its GMCP package and JSON body —
//! one function, so every transport that speaks GMCP (telnet here, a
//! WebSocket `gmcp.mudstandards.org` endpoint) says the same thing.
//! [`on_client_message`] applies what a client sends: `Core.Hello`,
//! `Core.Supports.Set/Add/Remove`, `Core.Ping`.

use serde_json::{Map, Value, json};
use telos_proto::v1::Event;
use telos_proto::v1::event::Kind;

use super::caps::{Capabilities, clean_name};
use super::parser::{IAC, SB, SE};

pub const OPT_GMCP: u8 = 201;

/// `IAC SB GMCP <package> <json> IAC SE`, IAC bytes doubled (UTF-8 JSON
/// never holds 255, a package name is ASCII, but nothing here trusts that).
pub fn frame(package: &str, json: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(package.len() + json.len() + 6);
    out.extend_from_slice(&[IAC, SB, OPT_GMCP]);
    let mut push = |bytes: &[u8]| {
        for &b in bytes {
            out.push(b);
            if b == IAC {
                out.push(IAC);
            }
        }
    };
    push(package.as_bytes());
    if !json.is_empty() {
        push(b" ");
        push(json.as_bytes());
    }
    out.extend_from_slice(&[IAC, SE]);
    out
}

/// A package name as GMCP allows it: dot-separated words of letters,
/// digits, `_` and `-`.
pub fn valid_package(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.split('.').all(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
}

/// The GMCP package and JSON body of a world event; `None` for an event
/// that cannot be said (a game's custom package with a bad name or body)
/// or is not GMCP's (the player's colour choice, for the gate's renderer).
pub fn render(event: &Event) -> Option<(String, String)> {
    let (package, body) = match event.kind.as_ref()? {
        Kind::Room(r) => {
            let exits: Map<String, Value> = r
                .exits
                .iter()
                .map(|e| (e.direction.clone(), json!(e.num)))
                .collect();
            let exit_ids: Map<String, Value> = r
                .exits
                .iter()
                .map(|e| (e.direction.clone(), json!(e.id)))
                .collect();
            (
                "Room.Info",
                json!({
                    "num": r.num,
                    "id": r.id,
                    "name": r.name,
                    "area": r.area,
                    "exits": exits,
                    "exit_ids": exit_ids,
                }),
            )
        }
        Kind::Vitals(v) => (
            "Char.Vitals",
            Value::Object(
                v.stats
                    .iter()
                    .map(|s| (s.name.clone(), json!(s.value)))
                    .collect(),
            ),
        ),
        Kind::Status(s) => (
            "Char.Status",
            Value::Object(
                s.fields
                    .iter()
                    .map(|f| (f.name.clone(), json!(f.value)))
                    .collect(),
            ),
        ),
        Kind::Items(l) => (
            "Char.Items.List",
            json!({
                "location": l.location,
                "items": l.items.iter().map(item).collect::<Vec<_>>(),
            }),
        ),
        Kind::ItemAdd(c) => ("Char.Items.Add", change(c)),
        Kind::ItemRemove(c) => ("Char.Items.Remove", change(c)),
        Kind::Channel(c) => (
            "Comm.Channel.Text",
            json!({ "channel": c.channel, "talker": c.talker, "text": c.text }),
        ),
        Kind::Colour(_) => return None,
        Kind::Custom(c) => {
            if !valid_package(&c.package) {
                return None;
            }
            // Re-encoded: a game's body reaches the client as valid,
            // compact JSON or not at all.
            let body: Value = serde_json::from_str(&c.json).ok()?;
            return Some((c.package.clone(), body.to_string()));
        }
    };
    Some((package.to_string(), body.to_string()))
}

fn item(i: &telos_proto::v1::Item) -> Value {
    let mut v = json!({ "id": i.id, "name": i.name });
    if !i.attrib.is_empty() {
        v["attrib"] = json!(i.attrib);
    }
    v
}

fn change(c: &telos_proto::v1::ItemChange) -> Value {
    json!({
        "location": c.location,
        "item": c.item.as_ref().map(item).unwrap_or(Value::Null),
    })
}

/// `Char.Name` for a player who just logged in.
pub fn char_name(name: &str) -> (String, String) {
    (
        "Char.Name".to_string(),
        json!({ "name": name, "fullname": name }).to_string(),
    )
}

/// Apply one message from the client; answers (a `Core.Ping`) go to `out`.
/// Anything malformed is ignored: a client's bad JSON costs it only its
/// own message.
pub fn on_client_message(caps: &mut Capabilities, data: &[u8], out: &mut Vec<u8>) {
    let text = String::from_utf8_lossy(data);
    let (package, body) = match text.split_once(|c: char| c.is_ascii_whitespace()) {
        Some((p, b)) => (p, b.trim()),
        None => (text.trim(), ""),
    };
    match package.to_ascii_lowercase().as_str() {
        "core.hello" => {
            if let Ok(Value::Object(hello)) = serde_json::from_str::<Value>(body)
                && let Some(Value::String(client)) = hello.get("client")
                && caps.client_name.is_empty()
            {
                caps.client_name = clean_name(client.as_bytes());
            }
        }
        "core.supports.set" => {
            if let Some(entries) = list(body) {
                caps.gmcp_packages.clear();
                subscribe_all(caps, &entries, true);
            }
        }
        "core.supports.add" => subscribe_all(caps, &list(body).unwrap_or_default(), true),
        "core.supports.remove" => subscribe_all(caps, &list(body).unwrap_or_default(), false),
        "core.ping" => out.extend_from_slice(&frame("Core.Ping", "")),
        _ => {}
    }
}

/// A `Core.Supports.*` body: a JSON array of strings (others skipped).
fn list(body: &str) -> Option<Vec<String>> {
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Array(entries)) => Some(
            entries
                .into_iter()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect(),
        ),
        _ => None,
    }
}

fn subscribe_all(caps: &mut Capabilities, entries: &[String], on: bool) {
    for entry in entries {
        caps.subscribe(entry, on);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use telos_proto::v1 as w;

    fn room() -> Event {
        Event {
            kind: Some(Kind::Room(w::RoomInfo {
                num: 7,
                id: "forest:edge".into(),
                name: "Edge".into(),
                area: "The Old Forest".into(),
                exits: vec![w::Exit {
                    direction: "west".into(),
                    num: 9,
                    id: "city:gate".into(),
                }],
            })),
            chatter: false,
        }
    }

    #[test]
    fn room_info_as_a_mapper_reads_it() {
        let (p, body) = render(&room()).unwrap();
        assert_eq!(p, "Room.Info");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["num"], 7);
        assert_eq!(v["area"], "The Old Forest");
        assert_eq!(v["exits"]["west"], 9);
        assert_eq!(v["exit_ids"]["west"], "city:gate");
    }

    #[test]
    fn custom_packages_are_checked() {
        let custom = |package: &str, json: &str| Event {
            kind: Some(Kind::Custom(w::Custom {
                package: package.into(),
                json: json.into(),
            })),
            chatter: false,
        };
        assert_eq!(
            render(&custom("Beacon.Lit", r#"{ "times": 2 }"#)),
            Some(("Beacon.Lit".into(), r#"{"times":2}"#.into()))
        );
        assert_eq!(render(&custom("Beacon Lit", "{}")), None);
        assert_eq!(render(&custom("Beacon.Lit", "{nope")), None);
        assert_eq!(render(&Event::default()), None);
    }

    #[test]
    fn frames_escape_iac_and_separate_the_body() {
        assert_eq!(
            frame("Core.Ping", ""),
            [&[IAC, SB, OPT_GMCP][..], b"Core.Ping", &[IAC, SE]].concat()
        );
        let f = frame("A.B", "\"\u{ff}\"");
        assert!(!f[3..f.len() - 2].windows(2).any(|w| w == [IAC, SE]));
    }

    #[test]
    fn core_messages_from_the_client() {
        let mut caps = Capabilities {
            gmcp: true,
            ..Capabilities::default()
        };
        let mut out = Vec::new();
        on_client_message(
            &mut caps,
            br#"Core.Hello {"client":"Mudlet","version":"4.17"}"#,
            &mut out,
        );
        assert_eq!(caps.client_name, "Mudlet");
        on_client_message(
            &mut caps,
            br#"Core.Supports.Set ["Char 1", "Room 1"]"#,
            &mut out,
        );
        assert!(caps.wants("Room.Info") && caps.wants("Char.Vitals"));
        on_client_message(&mut caps, br#"Core.Supports.Remove ["Room"]"#, &mut out);
        assert!(!caps.wants("Room.Info"));
        on_client_message(&mut caps, br#"Core.Supports.Add ["Comm 1"]"#, &mut out);
        assert!(caps.wants("Comm.Channel.Text"));
        on_client_message(&mut caps, b"Core.Supports.Set [1,{", &mut out);
        assert!(caps.wants("Comm.Channel.Text"), "bad JSON changes nothing");
        assert!(out.is_empty());
        on_client_message(&mut caps, b"Core.Ping", &mut out);
        assert_eq!(out, frame("Core.Ping", ""));
    }
}
