//! Accounts: a `Login` (create, or check the password) or a `Resume` (check
//! the resume credential) proves who the player is; then [`super::route`]
//! finds where the character plays.

use std::sync::Arc;
use std::time::Duration;

use telos_proto::v1::ServerFrame;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::model::names::{name_key, valid_name};
use crate::runtime::shard::Shard;
use telos_redis::store::{Admission, StoreError};

use super::forward::InPlay;
use super::frames::{send_closed, send_login_busy};
use super::limits::{caller_bucket, source_bucket, too_many_attempts};
use super::route::enter;
use super::strength::too_weak;
use telos_proto::{NAME_TAKEN, PASSWORD_REFUSED};

/// A resume credential lives this long after its last use: long enough to
/// ride out a shard restart or a long outage, short enough that a leaked one
/// goes stale.
const CREDENTIAL_TTL: Duration = Duration::from_secs(24 * 3600);

/// Bound on a client-chosen connection id.
const MAX_CONN_ID: usize = 64;

/// What a login hears when the store cannot answer it: not `Login failed`,
/// which is the contract's verdict on a name and password (and which the
/// gate counts against the connection and its address). Sent non-final,
/// so the gate tries another shard — one cut from Redis need not speak for
/// the rest — and shows its own outage line when none can answer.
const UNREACHABLE: &str = "The world cannot be reached right now.";

/// The shortest password a new character may have.
const MIN_PASSWORD: usize = 8;

pub(super) async fn login_frame(
    shard: &Arc<Shard>,
    login: telos_proto::v1::Login,
    out: &mpsc::Sender<ServerFrame>,
    caller: &str,
) -> Option<InPlay> {
    if !valid_conn_id(&login.conn_id) {
        send_closed(out, "Protocol error: bad connection id.", true).await;
        return None;
    }
    if !valid_name(&login.name) {
        send_closed(out, "Login failed: names are 3-16 letters.", true).await;
        return None;
    }
    let key = name_key(&login.name);
    let store = shard.store();
    if login.create {
        if login.password.chars().count() < MIN_PASSWORD {
            send_closed(
                out,
                &format!("{PASSWORD_REFUSED}s need at least 8 characters."),
                true,
            )
            .await;
            return None;
        }
        if let Some(why) = too_weak(&login.password, &login.name) {
            let line = format!("{PASSWORD_REFUSED} too weak: {why}");
            send_closed(out, &line, true).await;
            return None;
        }
        let ch = shard.game().new_player(&login.name);
        match store
            .create_character_by(
                &login.name,
                &login.password,
                &ch.dump_state_json(),
                &login.conn_id,
            )
            .await
        {
            Ok(()) => {
                info!(player = %key, "character created");
                // The creator's address is the account's first known
                // source: exempt from the account-wide throttle, so a
                // guesser elsewhere cannot crowd the creator out of its
                // own account before its first login.
                let bucket = source_bucket(&login.client_addr);
                if let Err(e) = store.login_succeeded(&login.name, &bucket).await {
                    warn!(error = %e, "marking the creator's address as known failed");
                }
            }
            Err(StoreError::NameTaken) => match made_by_this_login(shard, &login).await {
                Ok(true) => {
                    info!(player = %key, "create retried: the character its first try made");
                }
                Ok(false) => {
                    send_closed(out, NAME_TAKEN, true).await;
                    return None;
                }
                Err(e) => return refuse_for_store(out, e, "create failed").await,
            },
            Err(e) => return refuse_for_store(out, e, "create failed").await,
        }
    } else if !check_password(shard, &login, out, caller).await {
        return None;
    }
    let credential = match store
        .issue_credential(&key, &login.conn_id, CREDENTIAL_TTL)
        .await
    {
        Ok(c) => c,
        Err(e) => return refuse_for_store(out, e, "issuing a credential failed").await,
    };
    enter(shard, key, login.conn_id, login.attempt, credential, out).await
}

/// Whether a create that met its name taken is this connection's retry of
/// a create that took effect: the row was written, then the login was
/// answered "try again" (its start zone not served yet, the credential
/// not issued) or the answer was lost, and the gate asked again — this
/// shard or the next — with the same connection id and password. Then the
/// character is the player's own and the login goes on; anyone else's
/// create (another connection, another password) still hears the name is
/// taken.
async fn made_by_this_login(
    shard: &Shard,
    login: &telos_proto::v1::Login,
) -> Result<bool, StoreError> {
    let store = shard.store();
    if store.creator(&login.name).await?.as_deref() != Some(login.conn_id.as_str()) {
        return Ok(false);
    }
    store.verify_password(&login.name, &login.password).await
}

/// Whether `login`'s password is right, within the failed-login limits:
/// checked only when the limits admit it (a refused guess costs no hash),
/// counted the same whether the name exists or not. Anything but `true`
/// has been answered.
async fn check_password(
    shard: &Shard,
    login: &telos_proto::v1::Login,
    out: &mpsc::Sender<ServerFrame>,
    caller: &str,
) -> bool {
    let store = shard.store();
    let limits = &shard.config().login_limits;
    // The client address is the caller's word: trusted only while the
    // caller has budget for failures attributed to it (a gate inventing
    // addresses to escape the per-source locks spends it at once), then
    // its logins are one source, its own.
    let trusted = match store.caller_budget(caller, limits, false).await {
        Ok(trusted) => trusted,
        Err(e) => {
            answer_store_error(out, e, "login limit check failed").await;
            return false;
        }
    };
    // A spent budget must not lock a returning player out through the
    // caller's one bucket (an attacker failing through the same gate
    // would lock every account for everyone behind it): a source that
    // logged in to this account lately keeps its own bucket.
    let source = source_bucket(&login.client_addr);
    let bucket = if trusted {
        source
    } else {
        match store.known_source(&login.name, &source).await {
            Ok(true) => source,
            Ok(false) => caller_bucket(caller),
            Err(e) => {
                answer_store_error(out, e, "login limit check failed").await;
                return false;
            }
        }
    };
    let admitted = match store.admit_login(&login.name, &bucket, limits).await {
        Ok(Admission::Wait(wait)) => {
            metrics::counter!("telos_login_limited_total").increment(1);
            send_closed(out, &too_many_attempts(wait), true).await;
            return false;
        }
        Ok(a) => a,
        Err(e) => {
            answer_store_error(out, e, "login limit check failed").await;
            return false;
        }
    };
    match store.verify_password(&login.name, &login.password).await {
        Ok(true) => {
            if let Err(e) = store.login_succeeded(&login.name, &bucket).await {
                // The login stands; the pair's count lapses by its TTL.
                warn!(error = %e, "clearing failed logins after a success failed");
            }
            true
        }
        Ok(false) => {
            metrics::counter!("telos_login_failures_total").increment(1);
            if trusted && let Err(e) = store.caller_budget(caller, limits, true).await {
                warn!(error = %e, "charging the caller's budget failed");
            }
            let line = match admitted {
                Admission::Admitted { locks: Some(lock) } => too_many_attempts(lock),
                _ => "Login failed.".to_string(),
            };
            send_closed(out, &line, true).await;
            false
        }
        Err(e) => {
            // Not judged: it does not count against the player.
            if let Err(e) = store.login_unchecked(&login.name, &bucket, admitted).await {
                warn!(error = %e, "taking back an unchecked login attempt failed");
            }
            answer_store_error(out, e, "password check failed").await;
            false
        }
    }
}

/// A login the store could not answer: "busy" when every hasher is taken,
/// otherwise the world is unreachable from here; neither is a failed
/// login. Logged as `what`.
async fn refuse_for_store<T>(
    out: &mpsc::Sender<ServerFrame>,
    e: StoreError,
    what: &str,
) -> Option<T> {
    answer_store_error(out, e, what).await;
    None
}

async fn answer_store_error(out: &mpsc::Sender<ServerFrame>, e: StoreError, what: &str) {
    if matches!(e, StoreError::Busy) {
        send_login_busy(out).await;
    } else {
        warn!(error = %e, "{what}");
        send_closed(out, UNREACHABLE, false).await;
    }
}

pub(super) async fn resume_frame(
    shard: &Arc<Shard>,
    resume: telos_proto::v1::Resume,
    out: &mpsc::Sender<ServerFrame>,
) -> Option<InPlay> {
    if !valid_conn_id(&resume.conn_id) || !valid_name(&resume.name) {
        send_closed(out, "Protocol error: bad resume.", true).await;
        return None;
    }
    let key = name_key(&resume.name);
    match shard
        .store()
        .check_credential(&key, &resume.conn_id, &resume.credential)
        .await
    {
        Ok(true) => {
            if ended_by_quit(shard, &key, &resume.conn_id, out).await? {
                return None;
            }
            enter(
                shard,
                key,
                resume.conn_id,
                resume.attempt,
                resume.credential,
                out,
            )
            .await
        }
        Ok(false) => {
            send_closed(
                out,
                "Login failed: your session expired; please log in again.",
                true,
            )
            .await;
            None
        }
        Err(e) => {
            warn!(error = %e, "credential check failed");
            send_closed(out, "The world cannot be reached right now.", false).await;
            None
        }
    }
}

/// A resume of a connection whose session a saved quit ended: the quit's
/// save landed but its reply was lost (a Redis link that held its answers),
/// so the world closed the session not-final for the gate to replay the
/// quit, and there is nothing left to replay. Answered as the quit was —
/// `Goodbye.`, final, the credential revoked — rather than put back into
/// play with no answer (partition soak seed 937332575). `Some(true)`:
/// answered; `None`: the row could not be read (said, non-final). Only
/// the row's quit mark is read, not the whole row.
async fn ended_by_quit(
    shard: &Shard,
    key: &str,
    conn_id: &str,
    out: &mpsc::Sender<ServerFrame>,
) -> Option<bool> {
    match shard.store().quit_by(key, conn_id).await {
        Ok(true) => {}
        Ok(false) => return Some(false),
        Err(e) => {
            warn!(player = %key, error = %e, "reading the character's quit mark to resume failed");
            send_closed(out, UNREACHABLE, false).await;
            return None;
        }
    }
    info!(player = %key, conn_id, "resume of a session its saved quit ended: saying goodbye");
    if let Err(e) = shard.store().revoke_credential(key, conn_id).await {
        warn!(player = %key, error = %e, "revoking the resume credential after quit failed; it lapses by its TTL");
    }
    send_closed(out, "Goodbye.", true).await;
    Some(true)
}

fn valid_conn_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_CONN_ID && id.bytes().all(|b| b.is_ascii_graphic())
}
