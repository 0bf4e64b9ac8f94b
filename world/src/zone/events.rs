//! A game's structured [`Event`]s as the Play stream carries them
//! (`telos.v1.Event`). The game speaks its own types; this is the one
//! translation to the wire.

use telos_proto::v1 as wire;
use telos_proto::v1::event::Kind;

use crate::model::event::{Event, Item, Location, RoomInfo};
use crate::model::ids::room_num;
use crate::model::style::{self, ColourMode, Style};

/// A game's text as an `Output`: the marks taken out, their spans beside
/// the plain text ([`style::split`]).
pub fn output(marked: &str, chatter: bool) -> wire::Output {
    let (text, spans) = style::split(marked);
    wire::Output {
        text,
        chatter,
        others_words: false,
        spans: spans
            .into_iter()
            .map(|(range, s)| wire::Span {
                // Text is bounded far below 4 GiB (a frame's limit).
                start: range.start as u32,
                end: range.end as u32,
                style: span_style(s) as i32,
            })
            .collect(),
    }
}

fn span_style(s: Style) -> wire::Style {
    match s {
        Style::RoomName => wire::Style::RoomName,
        Style::Exits => wire::Style::Exits,
        Style::Speech => wire::Style::Speech,
        Style::Tell => wire::Style::Tell,
        Style::Channel => wire::Style::Channel,
        Style::Decoration => wire::Style::Decoration,
    }
}

fn colour_mode(m: ColourMode) -> wire::ColourMode {
    match m {
        ColourMode::Auto => wire::ColourMode::Auto,
        ColourMode::Off => wire::ColourMode::Off,
        ColourMode::Ansi16 => wire::ColourMode::Ansi16,
        ColourMode::Xterm256 => wire::ColourMode::Xterm256,
        ColourMode::Truecolour => wire::ColourMode::Truecolour,
    }
}

pub fn to_wire(event: Event) -> wire::Event {
    let kind = match event {
        Event::Room(room) => Kind::Room(room_info(room)),
        Event::Vitals(stats) => Kind::Vitals(wire::Vitals {
            stats: stats
                .into_iter()
                .map(|(name, value)| wire::Stat { name, value })
                .collect(),
        }),
        Event::Status(fields) => Kind::Status(wire::Status {
            fields: fields
                .into_iter()
                .map(|(name, value)| wire::Field { name, value })
                .collect(),
        }),
        Event::Items { location, items } => Kind::Items(wire::ItemList {
            location: location.as_str().into(),
            items: items.into_iter().map(item).collect(),
        }),
        Event::ItemAdded { location, item: i } => Kind::ItemAdd(change(location, i)),
        Event::ItemRemoved { location, item: i } => Kind::ItemRemove(change(location, i)),
        Event::Channel {
            channel,
            talker,
            text,
        } => Kind::Channel(wire::ChannelLine {
            channel,
            talker,
            text: style::plain(&text),
        }),
        Event::Custom { package, json } => Kind::Custom(wire::Custom { package, json }),
        Event::Colour(mode) => Kind::Colour(colour_mode(mode) as i32),
    };
    wire::Event {
        kind: Some(kind),
        chatter: false,
    }
}

fn room_info(room: RoomInfo) -> wire::RoomInfo {
    wire::RoomInfo {
        num: room_num(&room.id),
        exits: room
            .exits
            .into_iter()
            .map(|(direction, id)| wire::Exit {
                direction,
                num: room_num(&id),
                id,
            })
            .collect(),
        id: room.id,
        name: room.name,
        area: room.area,
    }
}

fn item(i: Item) -> wire::Item {
    wire::Item {
        id: i.id,
        name: i.name,
        attrib: i.attrib,
    }
}

fn change(location: Location, i: Item) -> wire::ItemChange {
    wire::ItemChange {
        location: location.as_str().into(),
        item: Some(item(i)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_numbers_come_from_the_ids() {
        let wire = to_wire(Event::Room(RoomInfo {
            id: "forest:edge".into(),
            name: "Edge".into(),
            area: "The Old Forest".into(),
            exits: vec![("west".into(), "city:gate".into())],
        }));
        let Some(Kind::Room(r)) = wire.kind else {
            panic!("a room")
        };
        assert_eq!(r.num, room_num("forest:edge"));
        assert_eq!(r.exits[0].num, room_num("city:gate"));
        assert_eq!(r.exits[0].id, "city:gate");
    }
}
