use super::*;

const ROOM: &str = "Town Square\nA wide square.\nExits: north east\n";

fn spans() -> Vec<Span> {
    vec![
        Span {
            start: 0,
            end: 11,
            style: Style::RoomName as i32,
        },
        Span {
            start: 27,
            end: 44,
            style: Style::Exits as i32,
        },
    ]
}

fn look(colours: u32) -> Look {
    Look::new(colours, false, ColourMode::Auto)
}

#[test]
fn each_depth_renders_its_own_sgr_and_a_raw_client_the_text_itself() {
    assert_eq!(&ROOM[27..44], "Exits: north east");
    let truecolour = render(ROOM, &spans(), look(1 << 24));
    assert_eq!(
        truecolour,
        "\x1b[1m\x1b[38;2;95;215;255mTown Square\x1b[0m\nA wide square.\n\x1b[38;2;0;175;0mExits: north east\x1b[0m\n"
    );
    let xterm = render(ROOM, &spans(), look(256));
    let (room, exits) = (
        xterm_index(Style::RoomName).unwrap(),
        xterm_index(Style::Exits).unwrap(),
    );
    assert_eq!((room, exits), (81, 34));
    assert!(
        xterm.starts_with("\x1b[1m\x1b[38;5;81mTown Square\x1b[0m\n"),
        "{xterm:?}"
    );
    assert!(
        xterm.contains("\x1b[38;5;34mExits: north east\x1b[0m\n"),
        "{xterm:?}"
    );
    let ansi = render(ROOM, &spans(), look(16));
    assert!(
        ansi.starts_with("\x1b[1m\x1b[96mTown Square\x1b[0m\n"),
        "{ansi:?}"
    );
    assert!(
        ansi.contains("\x1b[32mExits: north east\x1b[0m\n"),
        "{ansi:?}"
    );
    // No colour: the very same string, not a copy with the spans dropped.
    assert!(matches!(
        render(ROOM, &spans(), look(0)),
        Cow::Borrowed(ROOM)
    ));
}

#[test]
fn the_players_choice_overrides_what_the_client_said() {
    assert_eq!(
        Look::new(1 << 24, false, ColourMode::Off).depth,
        Depth::None
    );
    assert_eq!(Look::new(0, false, ColourMode::Ansi16).depth, Depth::Ansi16);
    assert_eq!(
        Look::new(16, false, ColourMode::Truecolour).depth,
        Depth::Truecolour
    );
    // A screen reader gets no colour unless the player asks for it.
    assert_eq!(Look::new(256, true, ColourMode::Auto).depth, Depth::None);
    assert_eq!(
        Look::new(256, true, ColourMode::Xterm256).depth,
        Depth::Xterm256
    );
}

#[test]
fn a_screen_reader_loses_decoration_lines_and_keeps_the_rest() {
    let text = "Score\n-----\nHP: 20/20\n";
    let rule = Span {
        start: 6,
        end: 11,
        style: Style::Decoration as i32,
    };
    let reader = Look::new(1 << 24, true, ColourMode::Auto);
    assert_eq!(render(text, &[rule], reader), "Score\nHP: 20/20\n");
    // A decoration inside a line goes, the line stays.
    let inline = "== Score ==\n";
    let eq = |start, end| Span {
        start,
        end,
        style: Style::Decoration as i32,
    };
    assert_eq!(render(inline, &[eq(0, 3), eq(8, 11)], reader), "Score\n");
    // Anyone else sees the decoration.
    assert_eq!(render(text, &[rule], look(0)), text);
}

#[test]
fn bad_spans_are_skipped_never_a_panic() {
    let text = "héllo\nworld\n";
    let span = |start, end, style: Style| Span {
        start,
        end,
        style: style as i32,
    };
    let bad = [
        span(2, 3, Style::Speech),  // inside é
        span(4, 2, Style::Speech),  // backwards
        span(0, 99, Style::Speech), // past the end
        span(3, 3, Style::Speech),  // empty
        Span {
            start: 0,
            end: 6,
            style: 77,
        }, // unknown style: no colour
    ];
    for b in &bad {
        assert_eq!(
            render(text, std::slice::from_ref(b), look(256)),
            text,
            "{b:?}"
        );
    }
    // Out of order: the later one is skipped, the text is whole.
    let out = render(
        text,
        &[span(7, 12, Style::Exits), span(0, 6, Style::Speech)],
        look(16),
    );
    assert_eq!(out, "héllo\n\x1b[32mworld\x1b[0m\n");
}

#[test]
fn every_style_has_a_colour_at_every_depth() {
    let all = [
        Style::RoomName,
        Style::Exits,
        Style::Speech,
        Style::Tell,
        Style::Channel,
        Style::Decoration,
    ];
    let at = |depth| {
        all.iter()
            .map(|s| sgr(*s, depth).unwrap().render().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        at(Depth::Ansi16),
        [
            "\x1b[1m\x1b[96m",
            "\x1b[32m",
            "\x1b[33m",
            "\x1b[35m",
            "\x1b[36m",
            "\x1b[37m"
        ]
    );
    assert_eq!(
        at(Depth::Xterm256),
        [
            "\x1b[1m\x1b[38;5;81m",
            "\x1b[38;5;34m",
            "\x1b[38;5;178m",
            "\x1b[38;5;127m",
            "\x1b[38;5;37m",
            "\x1b[38;5;244m"
        ]
    );
    assert!(sgr(Style::Unspecified, Depth::Truecolour).is_none());
    assert!(all.iter().all(|s| sgr(*s, Depth::None).is_none()));
}
