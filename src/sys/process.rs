//! This process's resource figures, as Prometheus's client libraries export
//! them (`process_cpu_seconds_total`, `process_resident_memory_bytes`, …).
//!
//! Read from `/proc/self` with the `procfs` crate, which is what the
//! Prometheus Rust client's process collector uses: it parses
//! `/proc/self/stat` correctly whatever the command name holds, and knows
//! the clock tick, page size and boot time the raw numbers need.
//!
//! # Portability
//! Linux only. Elsewhere [`ProcessStats::read`] returns
//! `ProcessStatsError::Unsupported` (a variant that exists only there, so
//! not linked here) and `/metrics` simply has no `process_*` series.

/// A snapshot of the process's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ProcessStats {
    /// User plus system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Resident set size, bytes.
    pub resident_bytes: u64,
    /// Virtual memory size, bytes.
    pub virtual_bytes: u64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on open file descriptors (`None`: unlimited).
    pub max_fds: Option<u64>,
    /// When the process started, seconds since the Unix epoch.
    pub start_time_seconds: f64,
    /// Threads of the process.
    pub threads: u64,
}

/// The figures could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProcessStatsError {
    /// `/proc` is missing or unreadable (e.g. not mounted in a container):
    /// mount it, or do without the `process_*` series.
    #[cfg(target_os = "linux")]
    #[error("cannot read /proc/self: {0}")]
    Proc(#[from] procfs::ProcError),
    /// Not Linux: there is no `/proc` to read.
    #[cfg(not(target_os = "linux"))]
    #[error("process figures are read from /proc, which only Linux has")]
    Unsupported,
}

impl ProcessStats {
    /// Reads the figures now (a few small files under `/proc/self`).
    ///
    /// # Errors
    /// When `/proc` cannot be read, or on a system without it.
    #[cfg(target_os = "linux")]
    pub(crate) fn read() -> Result<ProcessStats, ProcessStatsError> {
        let me = procfs::process::Process::myself()?;
        let stat = me.stat()?;
        let ticks = procfs::ticks_per_second().max(1) as f64;
        let page = procfs::page_size();
        let boot = procfs::boot_time_secs()?;
        let max_fds = match me.limits()?.max_open_files.soft_limit {
            procfs::process::LimitValue::Unlimited => None,
            procfs::process::LimitValue::Value(v) => Some(v),
        };
        Ok(ProcessStats {
            cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
            resident_bytes: stat.rss * page,
            virtual_bytes: stat.vsize,
            open_fds: me.fd_count()? as u64,
            max_fds,
            start_time_seconds: boot as f64 + stat.starttime as f64 / ticks,
            threads: u64::try_from(stat.num_threads).unwrap_or(0),
        })
    }

    /// Reads the figures now.
    ///
    /// # Errors
    /// Always: only Linux has `/proc`.
    #[cfg(not(target_os = "linux"))]
    pub fn read() -> Result<ProcessStats, ProcessStatsError> {
        Err(ProcessStatsError::Unsupported)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn figures_of_this_test_process_are_plausible() {
        let a = ProcessStats::read().expect("/proc readable");
        assert!(a.resident_bytes > 0 && a.virtual_bytes >= a.resident_bytes);
        assert!(a.open_fds >= 3, "stdin, stdout, stderr at least");
        assert!(a.max_fds.is_none_or(|m| m >= a.open_fds));
        assert!(a.threads >= 1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started within the last day (boot time is whole seconds).
        assert!(a.start_time_seconds <= now + 1.0 && a.start_time_seconds > now - 86_400.0);
        let b = ProcessStats::read().unwrap();
        assert!(b.cpu_seconds >= a.cpu_seconds, "CPU time never goes back");
        assert_eq!(b.start_time_seconds, a.start_time_seconds);
    }
}
