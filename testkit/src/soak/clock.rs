//! One time base for everything the soak records: milliseconds since the
//! run started ([`Ms`]), and the wall clock of that start so the processes'
//! log lines (RFC 3339, UTC) can be placed on the same axis.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Milliseconds since the run started.
pub type Ms = u64;

/// The run's time base. Cheap to copy.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    /// Unix milliseconds at `start`.
    start_unix_ms: u64,
}

impl Clock {
    pub fn start() -> Clock {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Clock {
            start: Instant::now(),
            start_unix_ms: u64::try_from(unix.as_millis()).unwrap_or(u64::MAX),
        }
    }

    pub fn now(&self) -> Ms {
        self.at(Instant::now())
    }

    /// `instant` on the run's axis (0 for anything before the start).
    pub fn at(&self, instant: Instant) -> Ms {
        let d = instant.saturating_duration_since(self.start);
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }

    /// The instant `ms` after the start.
    pub fn instant(&self, ms: Ms) -> Instant {
        self.start + Duration::from_millis(ms)
    }

    pub fn start_unix_ms(&self) -> u64 {
        self.start_unix_ms
    }
}

/// Seconds with one decimal, the way reports print times (`12.3s`).
pub fn secs(ms: Ms) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// The Unix milliseconds of a log line's leading RFC 3339 UTC timestamp
/// (`2026-12-01T09:13:33.830195Z ...`), if it has one.
pub fn log_line_unix_ms(line: &str) -> Option<u64> {
    let stamp = line.split_whitespace().next()?;
    let stamp = stamp.strip_suffix('Z')?;
    let (date, time) = stamp.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (year, month, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':');
    let hour: u64 = t.next()?.parse().ok()?;
    let minute: u64 = t.next()?.parse().ok()?;
    let rest = t.next()?;
    let (sec, frac) = rest.split_once('.').unwrap_or((rest, ""));
    let sec: u64 = sec.parse().ok()?;
    let millis: u64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    Some((((days * 24 + hour) * 60 + minute) * 60 + sec) * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_timestamps_parse_to_unix_milliseconds() {
        assert_eq!(
            log_line_unix_ms("1970-01-01T00:00:01.5Z INFO x"),
            Some(1500)
        );
        // date -u -d 2026-12-01T09:13:33.830Z +%s%3N
        assert_eq!(
            log_line_unix_ms("2026-12-01T09:13:33.830195Z  INFO telos_world: drain summary"),
            Some(1_796_116_413_830)
        );
        assert_eq!(log_line_unix_ms("1970-01-02T00:00:07Z x"), Some(86_407_000));
        assert_eq!(log_line_unix_ms("not a stamp"), None);
        assert_eq!(log_line_unix_ms(""), None);
    }

    #[test]
    fn times_print_in_seconds() {
        assert_eq!(secs(12_345), "12.3s");
        assert_eq!(secs(0), "0.0s");
    }
}
