//! What a running process holds, from `/proc/<pid>/status`: the memory and
//! thread figures the login-storm test and bench bound and print.

use anyhow::Context;

/// One reading of `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// Resident set size now (`VmRSS`), KiB.
    pub rss_kib: u64,
    /// Peak resident set size since the process started (`VmHWM`), KiB: a
    /// peak no sampling can miss.
    pub peak_rss_kib: u64,
    /// Threads now (`Threads`).
    pub threads: u64,
}

impl Status {
    pub fn rss_mib(&self) -> f64 {
        self.rss_kib as f64 / 1024.0
    }

    pub fn peak_rss_mib(&self) -> f64 {
        self.peak_rss_kib as f64 / 1024.0
    }
}

/// Read `/proc/<pid>/status` (Linux).
pub fn status(pid: i32) -> anyhow::Result<Status> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse(&text).with_context(|| format!("parsing {path}"))
}

fn parse(text: &str) -> anyhow::Result<Status> {
    let field = |name: &str| -> anyhow::Result<u64> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .with_context(|| format!("no {name} line"))?;
        let number = line.split_whitespace().next().unwrap_or_default();
        number
            .parse()
            .with_context(|| format!("{name}: {number:?} is not a number"))
    };
    Ok(Status {
        rss_kib: field("VmRSS")?,
        peak_rss_kib: field("VmHWM")?,
        threads: field("Threads")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_three_fields_in_kib() {
        let text = "Name:\ttelos-world\nVmHWM:\t  204800 kB\nVmRSS:\t   10240 kB\nThreads:\t7\n";
        let s = parse(text).unwrap();
        assert_eq!(
            s,
            Status {
                rss_kib: 10240,
                peak_rss_kib: 204800,
                threads: 7
            }
        );
        assert_eq!(s.rss_mib(), 10.0);
    }

    #[test]
    fn reads_this_process() {
        let s = status(std::process::id() as i32).unwrap();
        assert!(s.rss_kib > 0 && s.peak_rss_kib >= s.rss_kib && s.threads >= 1);
    }

    #[test]
    fn a_missing_field_is_an_error() {
        let err = parse("VmRSS:\t1 kB\n").unwrap_err().to_string();
        assert!(err.contains("VmHWM"), "{err}");
    }
}
