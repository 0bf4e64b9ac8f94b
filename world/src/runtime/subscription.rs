//! A Redis pub/sub subscription the shard follows (transfers, words
//! between shards): subscribed on the primary the target names now (asked
//! again on every re-subscription, so a failover is followed), bounded like
//! every Redis connection, and read until it is lost — a closed connection,
//! or a PING a silent subscription does not answer (a half-open socket
//! never closes by itself).

use std::time::Duration;

use redis::aio::PubSub;
use telos_redis::directory::connection::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use telos_redis::target::RedisTarget;
use tokio_stream::StreamExt;

/// Subscribe to `channel`, or why not.
pub(crate) async fn subscribe(
    target: &RedisTarget,
    channel: &str,
) -> Result<PubSub, redis::RedisError> {
    let subscribed = async {
        let client = target.primary_client().await?;
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok::<_, redis::RedisError>(pubsub)
    };
    // A stopped Redis takes the TCP connection and never answers the
    // handshake.
    match tokio::time::timeout(CONNECT_TIMEOUT, subscribed).await {
        Ok(r) => r,
        Err(_) => Err(lost(format!(
            "no answer to SUBSCRIBE in {CONNECT_TIMEOUT:?}"
        ))),
    }
}

/// Hand every message to `on_message` until the subscription is lost,
/// PINGing it every `every`; returns why it was lost.
pub(crate) async fn read_until_lost(
    pubsub: PubSub,
    every: Duration,
    mut on_message: impl FnMut(redis::Msg),
) -> redis::RedisError {
    let (mut sink, mut messages) = pubsub.split();
    let mut health = tokio::time::interval(every);
    loop {
        tokio::select! {
            m = messages.next() => match m {
                Some(msg) => on_message(msg),
                None => return lost("the connection closed".into()),
            },
            _ = health.tick() => {
                match tokio::time::timeout(RESPONSE_TIMEOUT, sink.ping::<redis::Value>()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return e,
                    Err(_) => return lost(format!("no answer to PING in {RESPONSE_TIMEOUT:?}")),
                }
            }
        }
    }
}

fn lost(why: String) -> redis::RedisError {
    std::io::Error::new(std::io::ErrorKind::ConnectionAborted, why).into()
}
