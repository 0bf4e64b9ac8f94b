//! The cluster's handoff keys in a temp folder.

use std::path::PathBuf;

/// A key folder written like `telosctl keygen`, removed on drop.
pub struct Keys(pub PathBuf);

impl Keys {
    pub fn generate() -> anyhow::Result<Keys> {
        let dir = std::env::temp_dir().join(format!(
            "telos-test-keys-{}-{}",
            std::process::id(),
            telos_testkit::unique()
        ));
        telos_world::handoff::keys::generate(&dir)?;
        Ok(Keys(dir))
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
