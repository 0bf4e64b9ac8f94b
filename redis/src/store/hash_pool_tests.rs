//! The pool's bounds, shown with jobs that block until the test lets them
//! go: no timing anywhere.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc as std_mpsc};

use tokio::sync::mpsc;

use super::*;

/// States made so far, for the bound on states: one counter per test that
/// counts (tests run in parallel), each behind its own `make` below.
static MADE_BOUNDS: AtomicUsize = AtomicUsize::new(0);
static MADE_REUSE: AtomicUsize = AtomicUsize::new(0);

/// A job's state: which state it is, and how many jobs used it.
#[derive(Debug)]
struct Worker {
    id: usize,
    uses: usize,
}

fn make_bounds() -> Worker {
    Worker {
        id: MADE_BOUNDS.fetch_add(1, Ordering::SeqCst),
        uses: 0,
    }
}

fn make_reuse() -> Worker {
    Worker {
        id: MADE_REUSE.fetch_add(1, Ordering::SeqCst),
        uses: 0,
    }
}

/// Jobs that say when they start and block until released, counting how
/// many run at once.
struct Gate {
    started: mpsc::UnboundedReceiver<usize>,
    started_tx: mpsc::UnboundedSender<usize>,
    release_tx: std_mpsc::Sender<()>,
    release: Arc<Mutex<std_mpsc::Receiver<()>>>,
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl Gate {
    fn new() -> Gate {
        let (started_tx, started) = mpsc::unbounded_channel();
        let (release_tx, release) = std_mpsc::channel();
        Gate {
            started,
            started_tx,
            release_tx,
            release: Arc::new(Mutex::new(release)),
            now: Arc::new(AtomicUsize::new(0)),
            most: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A job that reports its state's id on start, then waits for one
    /// release.
    fn job(&self) -> impl FnOnce(&mut Worker) -> usize + Send + 'static {
        let (started, release) = (self.started_tx.clone(), self.release.clone());
        let (now, most) = (self.now.clone(), self.most.clone());
        move |w: &mut Worker| {
            let running = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(running, Ordering::SeqCst);
            w.uses += 1;
            let _ = started.send(w.id);
            // Each release lets exactly one job finish.
            let _ = lock(&release).recv();
            now.fetch_sub(1, Ordering::SeqCst);
            w.id
        }
    }

    async fn next_start(&mut self) -> usize {
        self.started.recv().await.expect("a job started")
    }

    fn release_one(&self) {
        self.release_tx.send(()).expect("jobs are waiting");
    }
}

#[tokio::test]
async fn at_most_workers_run_queue_waits_and_beyond_is_busy() {
    const WORKERS: usize = 2;
    const QUEUE: usize = 3;
    let pool = Arc::new(HashPool::new(WORKERS, QUEUE, make_bounds));
    let mut gate = Gate::new();
    let mut tasks = Vec::new();
    for _ in 0..WORKERS + QUEUE {
        let job = pool.submit(gate.job()).expect("within workers + queue");
        tasks.push(tokio::spawn(job));
    }
    // Admission is counted at submit: one more is refused at once.
    assert!(matches!(pool.submit(gate.job()), Err(PoolError::Busy)));
    for _ in 0..WORKERS {
        gate.next_start().await;
    }
    assert_eq!(pool.running_jobs(), WORKERS);
    assert_eq!(pool.waiting_jobs(), QUEUE);
    // Each finished job lets exactly one waiting job start.
    for left in (0..QUEUE).rev() {
        gate.release_one();
        gate.next_start().await;
        assert_eq!(pool.waiting_jobs(), left);
        assert_eq!(pool.running_jobs(), WORKERS);
    }
    for _ in 0..WORKERS {
        gate.release_one();
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(gate.most.load(Ordering::SeqCst), WORKERS);
    assert_eq!(
        MADE_BOUNDS.load(Ordering::SeqCst),
        WORKERS,
        "one state a worker"
    );
    assert_eq!((pool.running_jobs(), pool.waiting_jobs()), (0, 0));
    // The bound is free again, and the next job reuses a state.
    gate.release_one();
    let id = pool.run(gate.job()).await.unwrap();
    assert!(id < WORKERS, "state {id}");
    assert_eq!(MADE_BOUNDS.load(Ordering::SeqCst), WORKERS);
}

#[tokio::test]
async fn states_are_reused_job_after_job() {
    const WORKERS: usize = 2;
    const JOBS: usize = 20;
    let pool = HashPool::new(WORKERS, 0, make_reuse);
    for _ in 0..JOBS {
        pool.run(|w: &mut Worker| w.uses += 1).await.unwrap();
    }
    assert_eq!(
        MADE_REUSE.load(Ordering::SeqCst),
        1,
        "sequential jobs share one state"
    );
    let uses: usize = lock(&pool.idle).iter().map(|w| w.uses).sum();
    assert_eq!(uses, JOBS);
}

#[tokio::test]
async fn a_waiting_job_dropped_gives_its_place_up() {
    fn make() -> Worker {
        Worker { id: 0, uses: 0 }
    }
    let pool = HashPool::new(1, 1, make);
    let mut gate = Gate::new();
    let running = tokio::spawn(pool.submit(gate.job()).unwrap());
    gate.next_start().await;
    let waiting = pool.submit(gate.job()).unwrap();
    assert!(matches!(pool.submit(gate.job()), Err(PoolError::Busy)));
    drop(waiting);
    let again = tokio::spawn(pool.submit(gate.job()).expect("the place was given up"));
    gate.release_one();
    gate.next_start().await;
    gate.release_one();
    running.await.unwrap().unwrap();
    again.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_panicking_job_fails_alone_and_frees_its_worker() {
    fn make() -> Worker {
        Worker { id: 7, uses: 0 }
    }
    let pool = HashPool::new(1, 0, make);
    let err = pool
        .run(|_: &mut Worker| -> usize { panic!("boom") })
        .await
        .unwrap_err();
    assert!(matches!(err, PoolError::Failed(_)), "{err:?}");
    assert_eq!(pool.running_jobs(), 0);
    assert_eq!(pool.run(|w: &mut Worker| w.id).await.unwrap(), 7);
    assert_eq!(lock(&pool.idle).len(), 1, "the state came back");
}

#[test]
fn at_least_one_worker() {
    fn make() {}
    let pool = HashPool::new(0, 4, make);
    assert_eq!((pool.workers(), pool.queue()), (1, 4));
}
