//! How many replicas the primary has, against the `WAIT` every fenced
//! write asks for ([`super::durable`]): behind Sentinel, a primary with
//! fewer replicas than [`WAIT_REPLICAS`] fails every fenced write (no lease
//! renews, no save is acknowledged) until one connects, and one with
//! exactly that many has none to spare — the replica's loss, or a failover
//! (the promoted replica has none until the old primary comes back as
//! one), stops the world's writes. A shard says so at start.

use redis::Value;
use redis::{ErrorKind, ServerErrorKind};

use super::connection::WAIT_REPLICAS;
use super::error::DirectoryError;
use super::handle::Directory;

/// What the primary's `ROLE` says of its replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicas {
    /// Connected replicas, and how many a fenced write waits for.
    Counted { connected: usize, waited_for: i64 },
    /// The ACL user may not run `ROLE`, or the node is not a primary.
    Unknown,
}

impl Directory {
    /// The replicas connected to the primary now (`ROLE`).
    pub async fn primary_replicas(&self) -> Result<Replicas, DirectoryError> {
        match redis::cmd("ROLE")
            .query_async::<Value>(&mut self.conn())
            .await
        {
            Ok(Value::Array(items)) => Ok(replicas_of(&items)),
            Ok(_) => Ok(Replicas::Unknown),
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) => {
                Ok(Replicas::Unknown)
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// `ROLE` on a primary: `["master", offset, [[ip, port, offset], ...]]`.
fn replicas_of(items: &[Value]) -> Replicas {
    let is_primary = match items.first() {
        Some(Value::BulkString(role)) => role.as_slice() == b"master",
        Some(Value::SimpleString(role)) => role == "master",
        _ => false,
    };
    match items.get(2) {
        Some(Value::Array(replicas)) if is_primary => Replicas::Counted {
            connected: replicas.len(),
            waited_for: WAIT_REPLICAS,
        },
        _ => Replicas::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(replicas: usize) -> Vec<Value> {
        vec![
            Value::BulkString(b"master".to_vec()),
            Value::Int(42),
            Value::Array(vec![Value::Array(vec![]); replicas]),
        ]
    }

    #[test]
    fn a_primarys_replicas_are_counted() {
        assert_eq!(
            replicas_of(&role(2)),
            Replicas::Counted {
                connected: 2,
                waited_for: WAIT_REPLICAS
            }
        );
        let replica = vec![Value::BulkString(b"slave".to_vec())];
        assert_eq!(replicas_of(&replica), Replicas::Unknown);
    }
}
