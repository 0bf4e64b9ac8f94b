//! Login storms through the gate: many connections at once creating
//! characters or trying wrong passwords, as the login-memory test and the
//! login bench drive them. Every login costs the world one password hash, so
//! these are storms of hashes.
//!
//! The gate must let the storm through its own limits: pass it
//! [`GATE_STORM_FLAGS`] (per-address bucket and per-connection failures).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::bail;
use tokio::sync::Barrier;

use crate::bot::{Bot, LoginReply};

/// The start of the gate's answer when the world has no room to hash a
/// password now (its hashing queue is full). Not a failed login.
pub const BUSY_PREFIX: &str = "The world is busy";

/// The start of a refused password.
pub const FAILED_PREFIX: &str = "Login failed";

/// `telos-gate` flags that let one address run a storm: every storm client
/// connects from 127.0.0.1, and a wrong-password client stays connected
/// through all its failures.
pub const GATE_STORM_FLAGS: [&str; 6] = [
    "--login-ip-burst",
    "1000000",
    "--login-ip-per-sec",
    "1000000",
    "--login-max-failures",
    "1000000",
];

/// `telos-world` flags that let one address storm one account: the shard's
/// failed-login limits would otherwise refuse a storm's wrong passwords
/// unhashed after a few, and a storm is here to make the shard hash.
pub const WORLD_STORM_FLAGS: [&str; 4] = [
    "--login-lock-after",
    "1000000",
    "--login-throttle-after",
    "1000000",
];

/// How long a client told "busy" waits before it tries again, as a player
/// would: long enough for a few hashes to finish.
const BUSY_RETRY: Duration = Duration::from_millis(50);

/// What a storm's logins were answered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// `Welcome, <Name>.`
    pub welcomed: u64,
    /// `Login failed...`
    pub failed: u64,
    /// The busy line (retried where the storm retries).
    pub busy: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.welcomed += other.welcomed;
        self.failed += other.failed;
        self.busy += other.busy;
    }

    /// Every answer, busy ones included.
    pub fn answers(&self) -> u64 {
        self.welcomed + self.failed + self.busy
    }
}

/// Sort one answer into `tally`; `Err` for a line that is neither a
/// welcome, a failed login nor the busy line.
fn count(reply: &LoginReply, tally: &mut Tally) -> anyhow::Result<()> {
    match reply {
        LoginReply::Welcome { .. } => tally.welcomed += 1,
        LoginReply::Refused(line) if line.starts_with(BUSY_PREFIX) => tally.busy += 1,
        LoginReply::Refused(line) if line.starts_with(FAILED_PREFIX) => tally.failed += 1,
        LoginReply::Refused(line) => bail!("unexpected login answer {line:?}"),
    }
    Ok(())
}

/// One login on `bot`, tried again after [`BUSY_RETRY`] for as long as the
/// answer is the busy line (on the same connection: a busy answer keeps
/// it). Returns the final answer; every answer is counted in `tally`.
async fn login_until_answered(
    bot: &mut Bot,
    verb: &str,
    name: &str,
    password: &str,
    tally: &mut Tally,
) -> anyhow::Result<LoginReply> {
    loop {
        let reply = bot.login(verb, name, password).await?;
        count(&reply, tally)?;
        match &reply {
            LoginReply::Refused(line) if line.starts_with(BUSY_PREFIX) => {
                tokio::time::sleep(BUSY_RETRY).await;
            }
            _ => return Ok(reply),
        }
    }
}

/// Run `clients` tasks that share `total` jobs (job `i` for `i` in
/// `0..total`, each taken once); their tallies added up.
async fn share<F, Fut>(clients: usize, total: usize, job: F) -> anyhow::Result<Tally>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<Tally>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let job = Arc::new(job);
    let tasks: Vec<_> = (0..clients.max(1))
        .map(|_| {
            let (next, job) = (next.clone(), job.clone());
            tokio::spawn(async move {
                let mut tally = Tally::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return anyhow::Ok(tally);
                    }
                    tally.add(job(i).await?);
                }
            })
        })
        .collect();
    let mut tally = Tally::default();
    for t in tasks {
        tally.add(t.await??);
    }
    Ok(tally)
}

/// Create every one of `names` through the gate at `gate`, `clients`
/// connections at a time; each character quits once welcomed, so the
/// world ends the storm with none of them online (a storm of logins, not
/// of players). A busy answer is retried.
pub async fn create_and_quit(
    gate: &str,
    names: &[String],
    password: &str,
    clients: usize,
) -> anyhow::Result<Tally> {
    let (gate, names, password) = (
        gate.to_string(),
        Arc::new(names.to_vec()),
        password.to_string(),
    );
    share(clients, names.len(), move |i| {
        let (gate, names, password) = (gate.clone(), names.clone(), password.clone());
        async move {
            let name = &names[i];
            let mut tally = Tally::default();
            let mut bot = Bot::open(&gate).await?;
            match login_until_answered(&mut bot, "create", name, &password, &mut tally).await? {
                LoginReply::Welcome { .. } => bot.quit().await?,
                LoginReply::Refused(line) => bail!("create {name}: {line}"),
            }
            Ok(tally)
        }
    })
    .await
}

/// `attempts` logins as `name` with a wrong password, spread over
/// `clients` connections that each try one after another (so at most
/// `clients` are in flight). Busy answers are counted and retried.
pub async fn wrong_logins(
    gate: &str,
    name: &str,
    attempts: usize,
    clients: usize,
) -> anyhow::Result<Tally> {
    let clients = clients.min(attempts).max(1);
    let per_client = attempts.div_ceil(clients);
    let (gate, name) = (gate.to_string(), name.to_string());
    share(clients, clients, move |c| {
        let (gate, name) = (gate.clone(), name.clone());
        let mine = per_client.min(attempts.saturating_sub(c * per_client));
        async move {
            let mut tally = Tally::default();
            let mut bot = Bot::open(&gate).await?;
            for _ in 0..mine {
                let reply =
                    login_until_answered(&mut bot, "connect", &name, WRONG_PASSWORD, &mut tally)
                        .await?;
                if matches!(reply, LoginReply::Welcome { .. }) {
                    bail!("{name}: a wrong password was let in");
                }
            }
            Ok(tally)
        }
    })
    .await
}

/// A password no storm character has.
pub const WRONG_PASSWORD: &str = "not-the-password";

/// Open `clients` connections first, then send one wrong login as `name`
/// on every one at the same moment, and tally the answers (no retries).
/// The connections come back, still open unless the gate closed them.
pub async fn wrong_login_burst(
    gate: &str,
    name: &str,
    clients: usize,
) -> anyhow::Result<(Tally, Vec<Bot>)> {
    let mut bots = Vec::with_capacity(clients);
    for _ in 0..clients {
        bots.push(Bot::open(gate).await?);
    }
    let start = Arc::new(Barrier::new(clients));
    let tasks: Vec<_> = bots
        .into_iter()
        .map(|mut bot| {
            let (start, name) = (start.clone(), name.to_string());
            tokio::spawn(async move {
                start.wait().await;
                let reply = bot.login("connect", &name, WRONG_PASSWORD).await?;
                let mut tally = Tally::default();
                count(&reply, &mut tally)?;
                anyhow::Ok((tally, bot))
            })
        })
        .collect();
    let mut tally = Tally::default();
    let mut bots = Vec::with_capacity(clients);
    for t in tasks {
        let (one, bot) = t.await??;
        tally.add(one);
        bots.push(bot);
    }
    Ok((tally, bots))
}

/// `name(prefix, i)`: a valid character name (letters only) for any `i`,
/// distinct for distinct `i`.
pub fn name(prefix: &str, mut i: usize) -> String {
    let mut letters = Vec::new();
    loop {
        letters.push(char::from(b'a' + (i % 26) as u8));
        i /= 26;
        if i == 0 {
            break;
        }
    }
    letters.reverse();
    format!("{prefix}{}", letters.into_iter().collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_letters_and_distinct() {
        let names: Vec<String> = (0..2000).map(|i| name("Storm", i)).collect();
        assert!(
            names
                .iter()
                .all(|n| n.chars().all(|c| c.is_ascii_alphabetic()))
        );
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        assert!(names.iter().all(|n| n.len() <= 16));
    }

    #[test]
    fn answers_are_sorted_by_their_first_words() {
        let mut t = Tally::default();
        count(
            &LoginReply::Refused("The world is busy; please try again in a moment.".into()),
            &mut t,
        )
        .unwrap();
        count(&LoginReply::Refused("Login failed.".into()), &mut t).unwrap();
        assert_eq!(
            t,
            Tally {
                welcomed: 0,
                failed: 1,
                busy: 1
            }
        );
        assert!(count(&LoginReply::Refused("Names are ...".into()), &mut t).is_err());
    }
}
