//! What a running process holds, from `/proc`: the memory and thread
//! figures of `/proc/<pid>/status` the login-storm test and bench bound and
//! print, and which process owns one end of a local TCP connection (the
//! soak's proxy names its clients so).

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

/// CPU time a process has used, user and system, in seconds
/// (`/proc/<pid>/stat` fields 14 and 15).
pub fn cpu_seconds(pid: i32) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // The command name (field 2) may hold spaces: count after its ')'.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .with_context(|| format!("parsing {path}"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        // Field n is at index n - 3 after the name.
        Ok(fields
            .get(i - 3)
            .with_context(|| format!("{path}: no field {i}"))?
            .parse::<f64>()?)
    };
    // SAFETY: sysconf reads a constant of the running system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok((ticks(14)? + ticks(15)?) / hz)
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

/// Which of `pids` (name, pid) owns the socket whose local end is
/// `client` and whose remote end is `server` (an IPv4 loopback connection,
/// as seen from `/proc/net/tcp` and each process's `fd` folder).
pub fn socket_owner(
    client: std::net::SocketAddr,
    server: std::net::SocketAddr,
    pids: &[(String, i32)],
) -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let inode = tcp_inode(&table, client, server)?;
    let want = format!("socket:[{inode}]");
    pids.iter().find_map(|(name, pid)| {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()))
            .then(|| name.clone())
    })
}

/// The inode of the `/proc/net/tcp` row from `local` to `remote`.
fn tcp_inode(
    table: &str,
    local: std::net::SocketAddr,
    remote: std::net::SocketAddr,
) -> Option<u64> {
    let (l, r) = (hex_addr(local)?, hex_addr(remote)?);
    table.lines().skip(1).find_map(|row| {
        let f: Vec<&str> = row.split_whitespace().collect();
        (f.len() > 9 && f[1] == l && f[2] == r).then(|| f[9].parse().ok())?
    })
}

/// An IPv4 address as `/proc/net/tcp` writes it: the address as a
/// little-endian word, the port big-endian, both in upper-case hex.
fn hex_addr(a: std::net::SocketAddr) -> Option<String> {
    let std::net::SocketAddr::V4(v4) = a else {
        return None;
    };
    let ip = u32::from_le_bytes(v4.ip().octets());
    Some(format!("{ip:08X}:{:04X}", v4.port()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_of_this_process_grows_with_work() {
        let pid = std::process::id() as i32;
        let before = cpu_seconds(pid).expect("readable");
        assert!(before >= 0.0);
        // Work until a clock tick is charged to us; the bound only stops a
        // hang (a loaded machine gives us a slice of a core, not none).
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while cpu_seconds(pid).expect("readable") <= before {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
            assert!(start.elapsed() < std::time::Duration::from_secs(60));
        }
    }

    use super::*;

    #[test]
    fn a_loopback_connection_is_traced_to_the_process_that_opened_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let conn = std::net::TcpStream::connect(server).unwrap();
        let client = conn.local_addr().unwrap();
        assert_eq!(
            hex_addr("127.0.0.1:8080".parse().unwrap()).as_deref(),
            Some("0100007F:1F90")
        );
        let me = std::process::id() as i32;
        let pids = [("other".to_string(), 1), ("me".to_string(), me)];
        assert_eq!(socket_owner(client, server, &pids).as_deref(), Some("me"));
        assert_eq!(socket_owner(client, server, &pids[..1]), None);
        drop(listener);
    }

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
