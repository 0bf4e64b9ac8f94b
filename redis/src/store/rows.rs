//! Character rows: create, load, claim, fenced save, tier.

use std::sync::LazyLock;

use redis::Script;

use super::claim_id::ClaimId;
use super::error::StoreError;
use super::handle::{Store, row_key};
use super::types::{CharacterRow, Claimant, ClaimedCharacter, SaveOutcome, TIERS, ended_by_quit};
use super::zone_commit::{CommitOutcome, RowWrite, ZoneCommit};

static CREATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("create.lua")));
static CLAIM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("claim.lua")));
static SET_TIER: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("set_tier.lua")));
static HEAL: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("heal.lua")));

/// Row fields in the order [`parse_row`] expects them.
const ROW_FIELDS: [&str; 9] = [
    "name",
    "persist_id",
    "state",
    "state_version",
    "owner_epoch",
    "conn_id",
    "applied_seq",
    "quit_seq",
    "tier",
];

/// Bytes of randomness in a `persist_id`: 128 bits, collision-free in practice.
const PERSIST_ID_BYTES: usize = 16;

/// Builds a row from an HMGET of [`ROW_FIELDS`]. `None` when every field is
/// absent (no such row).
fn parse_row(key: &str, fields: Vec<Option<Vec<u8>>>) -> Result<Option<CharacterRow>, StoreError> {
    if fields.iter().all(Option::is_none) {
        return Ok(None);
    }
    let corrupt = |reason: String| StoreError::Corrupt {
        key: key.to_owned(),
        reason,
    };
    if fields.len() != ROW_FIELDS.len() {
        return Err(corrupt(format!("{} fields returned", fields.len())));
    }
    let mut it = ROW_FIELDS.iter().zip(fields);
    let mut bytes = |default: Option<&str>| -> Result<Vec<u8>, StoreError> {
        let (name, value) = it.next().expect("ROW_FIELDS and fields have equal length");
        value
            .or_else(|| default.map(|d| d.as_bytes().to_vec()))
            .ok_or_else(|| corrupt(format!("missing field {name}")))
    };
    let text = |b: Vec<u8>| String::from_utf8(b).map_err(|e| corrupt(e.to_string()));
    let number = |b: Vec<u8>| -> Result<u64, StoreError> {
        text(b)?.parse().map_err(|e| corrupt(format!("{e}")))
    };
    Ok(Some(CharacterRow {
        name: text(bytes(None)?)?,
        persist_id: text(bytes(None)?)?,
        state_json: bytes(None)?,
        state_version: number(bytes(None)?)?,
        owner_epoch: number(bytes(None)?)?,
        conn_id: text(bytes(Some(""))?)?,
        applied_seq: number(bytes(Some("0"))?)?,
        quit_seq: number(bytes(Some("0"))?)?,
        tier: text(bytes(Some("player"))?)?,
    }))
}

/// The `{status, epoch, version, owner_claim}` reply of
/// `heal.lua`.
fn save_outcome(
    (status, current_epoch, version, claim): (i64, u64, u64, String),
) -> Result<SaveOutcome, StoreError> {
    match status {
        1 => Ok(SaveOutcome::Saved { version }),
        0 => Ok(SaveOutcome::Refused {
            current_epoch,
            current_version: version,
            current_claim: ClaimId::parse(&claim),
        }),
        _ => Err(StoreError::NotFound),
    }
}

impl Store {
    /// Creates a character at `state_version` 1, `owner_epoch` 0, tier
    /// `player`. `NameTaken` if the name exists in any letter case; `Busy`
    /// (nothing written) when password hashing is at capacity.
    pub async fn create_character(
        &self,
        name: &str,
        password: &str,
        state_json: &[u8],
    ) -> Result<(), StoreError> {
        self.create_character_by(name, password, state_json, "")
            .await
    }

    /// [`create_character`](Self::create_character) asked by the
    /// connection `creator` (a gate's connection id), kept in the row so
    /// that connection's retry of a create that took effect — answered
    /// "try again" after the row was written, or lost on the way back — can
    /// be told from a name another player holds ([`creator`](Self::creator)).
    pub async fn create_character_by(
        &self,
        name: &str,
        password: &str,
        state_json: &[u8],
        creator: &str,
    ) -> Result<(), StoreError> {
        // A bad name is refused before a hash is spent on it.
        row_key(name)?;
        let phc = self.hasher.hash(password).await?;
        self.create_row(name, &phc, state_json, creator).await
    }

    /// The connection id that created this character; `None` when there is
    /// no such character or it was created without one.
    pub async fn creator(&self, name: &str) -> Result<Option<String>, StoreError> {
        let creator: Option<String> = redis::cmd("HGET")
            .arg(row_key(name)?)
            .arg("creator")
            .query_async(&mut self.conn())
            .await?;
        Ok(creator.filter(|c| !c.is_empty()))
    }

    /// [`create_character`](Self::create_character) with a password hash
    /// made elsewhere (an argon2 PHC string: an import, or a test
    /// population that must not spend a 19 MiB hash on each of thousands
    /// of characters). A login verifies with the parameters the string
    /// names.
    pub async fn create_character_hashed(
        &self,
        name: &str,
        phc: &str,
        state_json: &[u8],
    ) -> Result<(), StoreError> {
        self.create_row(name, phc, state_json, "").await
    }

    async fn create_row(
        &self,
        name: &str,
        phc: &str,
        state_json: &[u8],
        creator: &str,
    ) -> Result<(), StoreError> {
        let key = row_key(name)?;
        let persist_id = hex::encode(rand::random::<[u8; PERSIST_ID_BYTES]>());
        let created: i64 = CREATE
            .key(key)
            .arg(name)
            .arg(phc)
            .arg(state_json)
            .arg(persist_id)
            .arg(creator)
            .invoke_async(&mut self.conn().durable())
            .await?;
        if created == 1 {
            Ok(())
        } else {
            Err(StoreError::NameTaken)
        }
    }

    /// Whether `password` is this character's. False for an unknown name too,
    /// after the same amount of hashing work. `Busy` when password hashing
    /// is at capacity.
    pub async fn verify_password(&self, name: &str, password: &str) -> Result<bool, StoreError> {
        let phc: Option<String> = redis::cmd("HGET")
            .arg(row_key(name)?)
            .arg("pw")
            .query_async(&mut self.conn())
            .await?;
        self.hasher.verify(password, phc).await
    }

    /// The row, `Ok(None)` if the character does not exist. An `Err` means
    /// the store could not be read: callers must fail closed, never treat it
    /// as a miss.
    pub async fn load(&self, name: &str) -> Result<Option<CharacterRow>, StoreError> {
        let key = row_key(name)?;
        let fields: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
            .arg(&key)
            .arg(&ROW_FIELDS[..])
            .query_async(&mut self.conn())
            .await?;
        parse_row(&key, fields)
    }

    /// Whether `conn_id`'s session ended with a quit the row holds
    /// ([`CharacterRow::quit_by`]), reading only the three fields that
    /// decide it (a resume asks this each time; the state and the password
    /// hash stay in Redis). `Ok(false)` when the character does not exist.
    pub async fn quit_by(&self, name: &str, conn_id: &str) -> Result<bool, StoreError> {
        let key = row_key(name)?;
        let (row_conn, applied_seq, quit_seq): (Option<String>, Option<u64>, Option<u64>) =
            redis::cmd("HMGET")
                .arg(&key)
                .arg(&["conn_id", "applied_seq", "quit_seq"])
                .query_async(&mut self.conn())
                .await?;
        Ok(ended_by_quit(
            row_conn.as_deref().unwrap_or(""),
            applied_seq.unwrap_or(0),
            quit_seq.unwrap_or(0),
            conn_id,
        ))
    }

    /// ClaimCharacter: mints the next `owner_epoch` under a fresh
    /// [`ClaimId`] and returns both with the row, atomically. Every earlier
    /// epoch's saves are refused from now on. A claim no gate attempt
    /// orders (a tool, a test); play claims with [`claim_character_for`].
    ///
    /// [`claim_character_for`]: Self::claim_character_for
    pub async fn claim_character(&self, name: &str) -> Result<ClaimedCharacter, StoreError> {
        self.claim_character_for(name, Claimant::UNORDERED).await
    }

    /// [`claim_character`](Self::claim_character) for one attempt of a gate
    /// connection: refused with [`StoreError::OlderAttempt`] when a later
    /// attempt of the same connection has claimed the character already.
    /// The gate gave this one up (it timed out, or its shard stalled) and
    /// asked again, perhaps on another shard; minting now would fence the
    /// session the later attempt put into play.
    pub async fn claim_character_for(
        &self,
        name: &str,
        claimant: Claimant<'_>,
    ) -> Result<ClaimedCharacter, StoreError> {
        let key = row_key(name)?;
        let claim = ClaimId::random();
        let reply: redis::Value = CLAIM
            .key(&key)
            .arg(claim.to_string())
            .arg(claimant.conn_id)
            .arg(claimant.attempt)
            .arg(&ROW_FIELDS[..])
            .invoke_async(&mut self.conn().durable())
            .await?;
        let fields: Vec<Option<Vec<u8>>> = match reply {
            redis::Value::Nil => return Err(StoreError::NotFound),
            redis::Value::Int(0) => return Err(StoreError::OlderAttempt),
            fields => redis::from_redis_value(fields).map_err(|e| StoreError::Corrupt {
                key: key.clone(),
                reason: e.to_string(),
            })?,
        };
        let row = parse_row(&key, fields)?.ok_or(StoreError::NotFound)?;
        Ok(ClaimedCharacter {
            epoch: row.owner_epoch,
            claim,
            row,
        })
    }

    /// Fenced save: applies only if the row is at `expected_version` and
    /// owned by `epoch`; the new version is `expected_version + 1`.
    pub async fn save(
        &self,
        name: &str,
        epoch: u64,
        expected_version: u64,
        state_json: &[u8],
        conn_id: &str,
        applied_seq: u64,
    ) -> Result<SaveOutcome, StoreError> {
        self.save_marked(
            name,
            epoch,
            expected_version,
            state_json,
            conn_id,
            applied_seq,
            false,
        )
        .await
    }

    /// [`save`](Self::save), and `quit`: the last line applied
    /// (`applied_seq`) was the player's quit, which ends `conn_id`'s
    /// session ([`CharacterRow::quit_by`]).
    #[allow(clippy::too_many_arguments)]
    pub async fn save_marked(
        &self,
        name: &str,
        epoch: u64,
        expected_version: u64,
        state_json: &[u8],
        conn_id: &str,
        applied_seq: u64,
        quit: bool,
    ) -> Result<SaveOutcome, StoreError> {
        // One writer of character rows: a save is a zone commit of one row
        // without a zone (`zone_commit.lua`), fenced the same way.
        let row = RowWrite {
            name,
            fence: (epoch, expected_version),
            state: state_json,
            conn_id,
            applied_seq,
            quit,
        };
        let batch = ZoneCommit {
            rows: vec![row],
            ..ZoneCommit::default()
        };
        match self.commit_zone(&batch).await? {
            CommitOutcome::Committed { versions } => Ok(SaveOutcome::Saved {
                version: versions.first().copied().unwrap_or_default(),
            }),
            CommitOutcome::Row {
                current_epoch,
                current_version,
                current_claim,
                ..
            } => Ok(SaveOutcome::Refused {
                current_epoch,
                current_version,
                current_claim,
            }),
            CommitOutcome::Missing { .. } | CommitOutcome::Zone(_) => Err(StoreError::NotFound),
        }
    }

    /// Rewrites a row that went back (Redis lost acknowledged writes) from
    /// the live session holding `epoch` (minted by `claim`), the newest:
    /// applied only while no newer owner exists and the row is really
    /// behind — at `epoch` and `claim` with a version below `last_version`
    /// (the one the session last wrote), or at an older epoch. See
    /// `heal.lua`. `quit` as in [`save_marked`](Self::save_marked).
    #[allow(clippy::too_many_arguments)]
    pub async fn heal(
        &self,
        name: &str,
        epoch: u64,
        claim: ClaimId,
        last_version: u64,
        state_json: &[u8],
        conn_id: &str,
        applied_seq: u64,
        quit: bool,
    ) -> Result<SaveOutcome, StoreError> {
        let reply: (i64, u64, u64, String) = HEAL
            .key(row_key(name)?)
            .arg(epoch)
            .arg(last_version)
            .arg(state_json)
            .arg(conn_id)
            .arg(applied_seq)
            .arg(claim.to_string())
            .arg(if quit { applied_seq } else { 0 })
            .invoke_async(&mut self.conn().durable())
            .await?;
        save_outcome(reply)
    }

    /// Sets the trust tier (effective at the next login or handoff).
    pub async fn set_tier(&self, name: &str, tier: &str) -> Result<(), StoreError> {
        if !TIERS.contains(&tier) {
            return Err(StoreError::InvalidTier(tier.to_owned()));
        }
        let set: i64 = SET_TIER
            .key(row_key(name)?)
            .arg(tier)
            .invoke_async(&mut self.conn())
            .await?;
        if set == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }
}
