//! Figures shared by the benchmarks: percentiles and the measuring window.

use std::time::Duration;

use tokio::time::Instant;

/// Nearest-rank percentile `p` (0–100) of `sorted` samples; `None` when
/// there are none.
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// [`nearest_rank`] of sorted nanosecond latencies, in µs; NaN when empty.
pub fn percentile_us(sorted_ns: &[u64], p: f64) -> f64 {
    nearest_rank(sorted_ns, p).map_or(f64::NAN, |ns| ns as f64 / 1000.0)
}

/// When measuring starts and ends, shared by every player of one side.
#[derive(Clone, Copy)]
pub struct Window {
    pub begin: Instant,
    pub measure_from: Instant,
    pub until: Instant,
}

impl Window {
    /// Begin shortly (every player's task spawned by then), discard
    /// `warmup`, then measure for `measure`.
    pub fn starting_now(warmup: Duration, measure: Duration) -> Window {
        let begin = Instant::now() + Duration::from_millis(50);
        Window {
            begin,
            measure_from: begin + warmup,
            until: begin + warmup + measure,
        }
    }
}
