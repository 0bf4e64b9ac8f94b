//! A bounded pool for slow, memory-hungry CPU work: password hashes.
//!
//! At most `workers` jobs run at once, each on a blocking thread and each
//! with a worker state of its own (argon2's block memory, reused job after
//! job); at most `queue` more wait for a worker; beyond that a job is
//! refused on the spot with [`PoolError::Busy`]. So a storm of logins costs
//! a bounded number of threads and buffers, queues a bounded number of
//! hashes, and gets a clear "busy" for the rest instead of piling up.
//!
//! Admission is synchronous ([`HashPool::submit`] answers `Busy` before
//! anything is awaited) so the bound is exact and testable without timing.

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// Every worker is busy and the queue is full: try again later.
    #[error("every worker is busy and the queue is full")]
    Busy,
    /// The job panicked, or the runtime shut down under it.
    #[error("the job did not finish: {0}")]
    Failed(String),
}

/// See the module docs. Cheap to share behind an `Arc`.
pub struct HashPool<S> {
    workers: usize,
    queue: usize,
    /// `workers + queue` permits: one is held from admission to the job's end.
    admitted: Arc<Semaphore>,
    /// `workers` permits: one is held while a job runs.
    running: Arc<Semaphore>,
    /// Worker states not in use. A state is taken with a `running` permit
    /// and put back before that permit is released, so at most `workers`
    /// states ever exist; they are made on first need.
    idle: Arc<Mutex<Vec<S>>>,
    make: fn() -> S,
}

impl<S> std::fmt::Debug for HashPool<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashPool")
            .field("workers", &self.workers)
            .field("queue", &self.queue)
            .field("running", &self.running_jobs())
            .field("waiting", &self.waiting_jobs())
            .finish()
    }
}

/// A job's hold on a worker: its state and both permits. Dropping it (at
/// the job's end, or while a panic unwinds) puts the state back first,
/// then gives up the admission, and frees the worker last (fields drop in
/// order), so a waiting job that gets the worker finds both counts right.
struct Lease<S> {
    state: Option<S>,
    idle: Arc<Mutex<Vec<S>>>,
    _admitted: OwnedSemaphorePermit,
    _running: OwnedSemaphorePermit,
}

impl<S> Drop for Lease<S> {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            lock(&self.idle).push(state);
        }
        // The permits are fields: released after this body.
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A job's panic never happens under this lock: poison carries nothing.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<S> HashPool<S> {
    /// `workers` at once (at least 1), `queue` waiting, states from `make`.
    pub fn new(workers: usize, queue: usize, make: fn() -> S) -> HashPool<S> {
        let workers = workers.max(1);
        HashPool {
            workers,
            queue,
            admitted: Arc::new(Semaphore::new(workers + queue)),
            running: Arc::new(Semaphore::new(workers)),
            idle: Arc::new(Mutex::new(Vec::with_capacity(workers))),
            make,
        }
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    pub fn queue(&self) -> usize {
        self.queue
    }

    /// Jobs running now.
    pub fn running_jobs(&self) -> usize {
        self.workers - self.running.available_permits()
    }

    /// Jobs admitted and waiting for a worker now.
    pub fn waiting_jobs(&self) -> usize {
        (self.workers + self.queue - self.admitted.available_permits())
            .saturating_sub(self.running_jobs())
    }
}

impl<S: Send + 'static> HashPool<S> {
    /// Admit `job` now, or refuse it with `Busy` when `workers + queue`
    /// jobs are already admitted. The returned future waits for a worker
    /// and runs the job there with that worker's state. Dropping the future
    /// while it waits gives its place up; once the job runs it runs to the
    /// end (a blocking thread cannot be interrupted) and keeps its worker
    /// until then.
    pub fn submit<R, F>(
        &self,
        job: F,
    ) -> Result<impl Future<Output = Result<R, PoolError>> + Send + use<R, F, S>, PoolError>
    where
        R: Send + 'static,
        F: FnOnce(&mut S) -> R + Send + 'static,
    {
        let admitted = self
            .admitted
            .clone()
            .try_acquire_owned()
            .map_err(|_| PoolError::Busy)?;
        let (running, idle, make) = (self.running.clone(), self.idle.clone(), self.make);
        Ok(async move {
            // The semaphores are never closed, so this only waits.
            let running = running
                .acquire_owned()
                .await
                .map_err(|e| PoolError::Failed(e.to_string()))?;
            let state = lock(&idle).pop().unwrap_or_else(make);
            let mut lease = Lease {
                state: Some(state),
                idle,
                _admitted: admitted,
                _running: running,
            };
            tokio::task::spawn_blocking(move || {
                let state = lease.state.as_mut().expect("a lease holds its state");
                job(state)
            })
            .await
            .map_err(|e| PoolError::Failed(e.to_string()))
        })
    }

    /// [`submit`](Self::submit) and wait for the result.
    pub async fn run<R, F>(&self, job: F) -> Result<R, PoolError>
    where
        R: Send + 'static,
        F: FnOnce(&mut S) -> R + Send + 'static,
    {
        self.submit(job)?.await
    }
}

#[cfg(test)]
#[path = "hash_pool_tests.rs"]
mod tests;
