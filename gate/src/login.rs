//! The login dialogue before a character is attached. Pure: it turns lines
//! into steps; the connection task does the I/O and the shard round trip.
//!
//! `create <name> <password>` / `connect <name> <password>` in one line, or
//! the command with a name only, after which the next line (typed with echo
//! off) is the password — for `create`, asked twice, so a typo made unseen
//! does not lock the player out of their new character. Names and
//! passwords are checked here for a clear message; the world checks them
//! again.

use std::fmt;

pub const NAME_MIN: usize = 3;
pub const NAME_MAX: usize = 16;
pub const PASSWORD_MIN: usize = 8;

pub const BANNER: &str = "\
=== Telos ===\n\
A world spread across many shards.\n\
Type `connect <name> <password>` to log in,\n\
or `create <name> <password>` for a new character.\n";

pub const PASSWORD_PROMPT: &str = "Password: ";

/// The second asking of a new password.
pub const REPEAT_PROMPT: &str = "Password again: ";

/// The two typings of a new password differed.
pub const MISMATCH: &str =
    "The passwords did not match; nothing was created. Try `create <name>` again.";

const USAGE: &str = "Type `connect <name> <password>` or `create <name> <password>` (or `quit`).";

/// What the player asked to log in as. The password lives only here and
/// only until the `Login` frame is built.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub name: String,
    pub password: String,
    pub create: bool,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("name", &self.name)
            .field("password", &"<redacted>")
            .field("create", &self.create)
            .finish()
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum LoginStep {
    /// Nothing to do (an empty line).
    Nothing,
    /// Tell the player this line and wait for the next.
    Say(String),
    /// Prompt for the password with echo off.
    AskPassword,
    /// Prompt for the new password a second time, echo off.
    AskPasswordAgain,
    /// Try these credentials against the world.
    Attempt(Credentials),
    /// The player wants to leave.
    Quit,
}

#[derive(Debug, Default)]
pub struct LoginDialog {
    pending: Option<Pending>,
}

/// What the next line is, when it is a password.
#[derive(Debug)]
enum Pending {
    Password {
        name: String,
        create: bool,
    },
    /// A new character's password, to be typed again.
    Repeat {
        name: String,
        password: String,
    },
}

pub fn valid_name(name: &str) -> bool {
    (NAME_MIN..=NAME_MAX).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphabetic())
}

impl LoginDialog {
    pub fn awaiting_password(&self) -> bool {
        self.pending.is_some()
    }

    /// Whether the password awaited is a new character's (`create Name`).
    pub fn creating(&self) -> bool {
        matches!(
            self.pending,
            Some(Pending::Password { create: true, .. } | Pending::Repeat { .. })
        )
    }

    /// Forget the half-typed dialogue (a refusal came before the password).
    pub fn cancel(&mut self) {
        self.pending = None;
    }

    pub fn on_line(&mut self, line: &str) -> LoginStep {
        match self.pending.take() {
            Some(Pending::Password { name, create }) => {
                let step = Self::check(name, line.to_string(), create);
                return match step {
                    LoginStep::Attempt(c) if c.create => {
                        self.pending = Some(Pending::Repeat {
                            name: c.name,
                            password: c.password,
                        });
                        LoginStep::AskPasswordAgain
                    }
                    step => step,
                };
            }
            Some(Pending::Repeat { name, password }) => {
                if line != password {
                    return LoginStep::Say(MISMATCH.into());
                }
                return LoginStep::Attempt(Credentials {
                    name,
                    password,
                    create: true,
                });
            }
            None => {}
        }
        let line = line.trim();
        let mut words = line.splitn(2, char::is_whitespace);
        let verb = words.next().unwrap_or("").to_ascii_lowercase();
        let rest = words.next().unwrap_or("").trim_start();
        let create = match verb.as_str() {
            "" => return LoginStep::Nothing,
            "quit" => return LoginStep::Quit,
            "create" => true,
            "connect" => false,
            _ => return LoginStep::Say(USAGE.into()),
        };
        let mut parts = rest.splitn(2, char::is_whitespace);
        let name = parts.next().unwrap_or("").to_string();
        let password = parts.next().unwrap_or("").trim();
        if name.is_empty() {
            return LoginStep::Say(USAGE.into());
        }
        if !valid_name(&name) {
            return LoginStep::Say(format!(
                "Names are {NAME_MIN}-{NAME_MAX} letters (A-Z), nothing else."
            ));
        }
        if password.is_empty() {
            self.pending = Some(Pending::Password { name, create });
            return LoginStep::AskPassword;
        }
        Self::check(name, password.to_string(), create)
    }

    fn check(name: String, password: String, create: bool) -> LoginStep {
        // Only a new password is checked for length: for `connect`, a short
        // password is simply wrong, and must read exactly like any other
        // wrong password.
        if create && password.chars().count() < PASSWORD_MIN {
            return LoginStep::Say(format!(
                "Passwords must be at least {PASSWORD_MIN} characters."
            ));
        }
        if password.is_empty() {
            return LoginStep::Say(USAGE.into());
        }
        LoginStep::Attempt(Credentials {
            name,
            password,
            create,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(name: &str, password: &str, create: bool) -> LoginStep {
        LoginStep::Attempt(Credentials {
            name: name.into(),
            password: password.into(),
            create,
        })
    }

    #[test]
    fn one_line_connect_and_create() {
        let mut d = LoginDialog::default();
        assert_eq!(
            d.on_line("connect Alice hunter22"),
            attempt("Alice", "hunter22", false)
        );
        assert_eq!(
            d.on_line("  CREATE bob  s3cret pass "),
            attempt("bob", "s3cret pass", true)
        );
    }

    #[test]
    fn name_alone_prompts_for_password() {
        let mut d = LoginDialog::default();
        assert_eq!(d.on_line("connect Alice"), LoginStep::AskPassword);
        assert!(d.awaiting_password());
        assert_eq!(
            d.on_line("correct horse"),
            attempt("Alice", "correct horse", false)
        );
        assert!(!d.awaiting_password());
    }

    #[test]
    fn bad_names_and_short_new_passwords_get_clear_messages() {
        let mut d = LoginDialog::default();
        for bad in [
            "connect al pw123456",
            "connect al1ce pw123456",
            "create abcdefghijklmnopq pw123456",
        ] {
            assert!(
                matches!(d.on_line(bad), LoginStep::Say(m) if m.starts_with("Names are")),
                "{bad}"
            );
        }
        assert!(
            matches!(d.on_line("create Alice short"), LoginStep::Say(m) if m.starts_with("Passwords"))
        );
        assert_eq!(
            d.on_line("connect Alice short"),
            attempt("Alice", "short", false)
        );
    }

    #[test]
    fn other_lines() {
        let mut d = LoginDialog::default();
        assert_eq!(d.on_line(""), LoginStep::Nothing);
        assert_eq!(d.on_line("quit"), LoginStep::Quit);
        assert!(matches!(d.on_line("look"), LoginStep::Say(_)));
        assert!(matches!(d.on_line("connect"), LoginStep::Say(_)));
        assert_eq!(d.on_line("create Alice"), LoginStep::AskPassword);
        assert!(matches!(d.on_line(""), LoginStep::Say(_)));
        assert!(!d.awaiting_password());
    }

    #[test]
    fn create_asks_for_the_password_twice() {
        let mut d = LoginDialog::default();
        assert_eq!(d.on_line("create Alice"), LoginStep::AskPassword);
        assert_eq!(d.on_line("correct horse"), LoginStep::AskPasswordAgain);
        assert!(d.awaiting_password());
        assert_eq!(
            d.on_line("correct horse"),
            attempt("Alice", "correct horse", true)
        );
        assert!(!d.awaiting_password());
        // A mismatch creates nothing and starts over.
        assert_eq!(d.on_line("create Alice"), LoginStep::AskPassword);
        assert_eq!(d.on_line("correct horse"), LoginStep::AskPasswordAgain);
        assert_eq!(d.on_line("correct hors"), LoginStep::Say(MISMATCH.into()));
        assert!(!d.awaiting_password());
        // A short one is refused at once, before the second asking.
        assert_eq!(d.on_line("create Alice"), LoginStep::AskPassword);
        assert!(matches!(d.on_line("short"), LoginStep::Say(m) if m.starts_with("Passwords")));
        assert!(!d.awaiting_password());
        // The one-line form stays one line (scripts and the contract).
        assert_eq!(
            d.on_line("create Alice correct horse"),
            attempt("Alice", "correct horse", true)
        );
    }

    #[test]
    fn debug_never_shows_the_password() {
        let c = Credentials {
            name: "Alice".into(),
            password: "hunter22".into(),
            create: false,
        };
        assert!(!format!("{c:?}").contains("hunter22"));
    }
}
