//! How long a Redis connection waits for what, in one leaf both the
//! direct connection (`connection`) and the Sentinel link
//! (`sentinel_link`) read.

use std::time::Duration;

/// First pause between reconnect attempts; doubles up to
/// [`RECONNECT_MAX_DELAY`]. Short: a Redis restart is usually over quickly.
pub const RECONNECT_MIN_DELAY: Duration = Duration::from_millis(50);

/// Longest pause between reconnect attempts (the library adds up to 100 %
/// jitter, so two attempts are at most twice this apart): a client is back
/// within ~0.5 s of Redis, at the cost of a few refused connects a second
/// per client while it is down.
pub const RECONNECT_MAX_DELAY: Duration = Duration::from_millis(250);

/// One connect attempt (TCP and handshake): a SIGSTOPped Redis accepts the
/// TCP connection but never answers the handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// One request's round trip on a live connection. Redis answers in about
/// 100 µs on loopback; this only catches a server that stopped answering.
/// A timeout does not make the library reconnect (the socket may be fine),
/// so it is also the longest one stuck request holds its caller.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

/// One request from start to answer, every retry and the wait for a
/// connection included. A player's login, `who` or move waits at most this
/// on Redis before being told it cannot be reached; 2 s is what issue 11
/// grants a transient failure (Redis restarting) before refusing.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Pause before sending a request again, so an error that repeats at once
/// (`LOADING` while Redis reads its append-only file) does not spin.
pub const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// How often an otherwise idle connection is checked (`PING`), so a drop is
/// seen and the reconnect started before a real request needs it. A few
/// µs of Redis time a second; shorter than any Redis restart.
pub const HEALTH_PERIOD: Duration = Duration::from_millis(250);

/// How long the first connection may take before `connect` gives up: a
/// process started before Redis (a container starting) gets this long.
pub const FIRST_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a fenced write waits for a replica to have it (`WAIT 1 <ms>`).
/// On loopback or a LAN a replica acknowledges in well under a millisecond
/// (`WAIT` makes the primary ask at once); a replica that has not answered
/// in this long is lagging or gone, and the write counts as failed. Short
/// enough that a lease renew failing this way is retried well before the
/// lease's local deadline.
pub const WAIT_TIMEOUT: Duration = Duration::from_millis(1000);
