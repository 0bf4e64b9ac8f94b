//! A shard's superseded incarnation: a second process of the same shard id
//! started while the first still runs (paused, say: the twin case), and
//! what the soak does with the first afterwards.

use std::process::ExitStatus;

use anyhow::Context;

use super::Cluster;
use crate::redis::free_port;

impl Cluster {
    /// Start a second process of shard `i` (same id) on new gRPC and
    /// metrics ports while the first still runs (paused, say); the front
    /// proxy leads new connections to the new one. The first is kept as
    /// the slot's superseded incarnation.
    pub fn start_replacement(&mut self, i: usize) -> anyhow::Result<()> {
        let old_name = self.shards[i].incarnation_name();
        let old = self.shards[i]
            .proc_
            .take()
            .context("no running process to replace")?;
        self.shards[i].listen = format!("127.0.0.1:{}", free_port());
        self.shards[i].metrics = format!("127.0.0.1:{}", free_port());
        self.shards[i].front.set_upstream(&self.shards[i].listen);
        self.shards[i].old_log = Some(old.log.clone());
        self.shards[i].old = Some((old_name, old));
        let proc_ = self.spawn_shard(i)?;
        self.shards[i].proc_ = Some(proc_);
        Ok(())
    }

    /// The superseded incarnation of shard `i`, if one is around.
    pub fn old_pid(&self, i: usize) -> Option<i32> {
        self.shards[i].old.as_ref().map(|(_, p)| p.pid())
    }

    /// Send `sig` to shard `i`'s superseded incarnation.
    pub fn signal_old(&self, i: usize, sig: i32) {
        if let Some((_, p)) = &self.shards[i].old {
            p.signal(sig);
        }
    }

    /// The superseded incarnation's exit status once it has exited (then
    /// it is forgotten).
    pub fn old_exit(&mut self, i: usize) -> anyhow::Result<Option<ExitStatus>> {
        let Some((name, p)) = self.shards[i].old.as_mut() else {
            return Ok(None);
        };
        let status = p.child.try_wait()?;
        if status.is_some() {
            let name = name.clone();
            self.forget(&name);
            self.shards[i].old = None;
        }
        Ok(status)
    }

    /// SIGKILL the superseded incarnation of shard `i` (and reap it).
    pub fn kill_old(&mut self, i: usize) {
        if let Some((name, mut p)) = self.shards[i].old.take() {
            p.kill();
            self.forget(&name);
        }
    }

    /// The text of the last superseded incarnation's log.
    pub fn old_log(&self, i: usize) -> String {
        self.shards[i]
            .old_log
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }
}
