//! What the harness measures about the process and the machine, outside the
//! engine: `/proc/self/io`, resident memory, directory sizes, and a
//! description of the machine printed beside every result.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Counters of `/proc/self/io` for the whole process (all threads, the
/// engine's background threads included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcIo {
    /// Bytes the process asked to read (page cache hits included).
    pub rchar: u64,
    /// Bytes the process asked to write.
    pub wchar: u64,
    /// Bytes actually fetched from the storage layer.
    pub read_bytes: u64,
    /// Bytes sent to the storage layer (written back, now or later):
    /// counted when a page is dirtied.
    pub write_bytes: u64,
    /// Of `write_bytes`, those dirtied in files truncated or deleted before
    /// their pages were written back (a WAL dropped after its flush): they
    /// never reached the disk.
    #[serde(default)]
    pub cancelled_write_bytes: u64,
}

impl ProcIo {
    /// The current counters; zeros where /proc is unavailable.
    pub fn now() -> ProcIo {
        let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
        parse_proc_io(&text)
    }

    /// `self - earlier`, saturating.
    pub fn since(&self, earlier: &ProcIo) -> ProcIo {
        ProcIo {
            rchar: self.rchar.saturating_sub(earlier.rchar),
            wchar: self.wchar.saturating_sub(earlier.wchar),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            cancelled_write_bytes: self
                .cancelled_write_bytes
                .saturating_sub(earlier.cancelled_write_bytes),
        }
    }

    /// Bytes that reached (or will reach) the disk: dirtied, not cancelled.
    pub fn disk_write_bytes(&self) -> u64 {
        self.write_bytes.saturating_sub(self.cancelled_write_bytes)
    }
}

/// Parses the `key: value` lines of `/proc/<pid>/io`.
pub fn parse_proc_io(text: &str) -> ProcIo {
    let mut io = ProcIo::default();
    for line in text.lines() {
        let mut parts = line.splitn(2, ':');
        let (Some(k), Some(v)) = (parts.next(), parts.next()) else {
            continue;
        };
        let v: u64 = v.trim().parse().unwrap_or(0);
        match k.trim() {
            "rchar" => io.rchar = v,
            "wchar" => io.wchar = v,
            "read_bytes" => io.read_bytes = v,
            "write_bytes" => io.write_bytes = v,
            "cancelled_write_bytes" => io.cancelled_write_bytes = v,
            _ => {}
        }
    }
    io
}

/// `(VmRSS, VmHWM)` in bytes from `/proc/self/status`.
pub fn rss() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Bytes of all files under `dir` (allocated size is not used: the figure
/// is compared with logical data bytes for space amplification).
pub fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The machine a result was measured on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Host name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Logical CPUs available to this process.
    pub cpus: usize,
    /// Physical memory.
    pub memory_bytes: u64,
    /// How this binary was built (`release` or `debug`).
    pub build: String,
}

impl Machine {
    /// Describes this machine.
    pub fn detect() -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let memory_bytes = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024);
        Machine {
            hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            cpu_model,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes,
            build: if cfg!(debug_assertions) {
                "debug".into()
            } else {
                "release".into()
            },
        }
    }

    /// One line for the report header.
    pub fn line(&self) -> String {
        format!(
            "{} * {}, {:.1} GiB RAM, Linux {}, {} build",
            self.cpus,
            if self.cpu_model.is_empty() {
                "unknown CPU"
            } else {
                &self.cpu_model
            },
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.kernel,
            self.build
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_io() {
        let t = "rchar: 10\nwchar: 20\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\n\
                 write_bytes: 8192\ncancelled_write_bytes: 4096\n";
        let io = parse_proc_io(t);
        assert_eq!(
            io,
            ProcIo {
                rchar: 10,
                wchar: 20,
                read_bytes: 4096,
                write_bytes: 8192,
                cancelled_write_bytes: 4096,
            }
        );
        assert_eq!(io.disk_write_bytes(), 4096);
        let later = ProcIo { wchar: 25, ..io };
        assert_eq!(later.since(&io).wchar, 5);
        assert_eq!(io.since(&later).wchar, 0);
    }

    #[test]
    fn process_counters_move() {
        let before = ProcIo::now();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), vec![7u8; 100_000]).unwrap();
        let after = ProcIo::now();
        assert!(after.since(&before).wchar >= 100_000);
        assert_eq!(dir_size(dir.path()), 100_000);
        assert!(rss().0 > 0);
        assert!(Machine::detect().cpus >= 1);
    }
}
