//! What a [`Driver`] reads of the contract's answers: `where`, the journal
//! listing.

use anyhow::Context;

use crate::driver::Driver;

impl Driver {
    pub async fn where_(&mut self) -> anyhow::Result<(String, String, String)> {
        let text = self.command("where").await?;
        let line = text
            .lines()
            .find(|l| l.starts_with("where: "))
            .with_context(|| format!("no where line in {text:?}"))?;
        let field = |k: &str| {
            line.split(' ')
                .find_map(|w| w.strip_prefix(k))
                .unwrap_or_default()
                .to_string()
        };
        Ok((field("zone="), field("room="), field("shard=")))
    }

    /// The journal entries, in order (the `journal` listing).
    pub async fn journal(&mut self) -> anyhow::Result<Vec<String>> {
        let list = self.command("journal").await?;
        Ok(list
            .lines()
            .filter_map(|l| {
                let (n, entry) = l.strip_prefix("journal ")?.split_once(": ")?;
                n.parse::<usize>().ok()?;
                Some(entry.to_string())
            })
            .collect())
    }
}
