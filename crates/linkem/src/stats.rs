//! The counters linkem reports as one JSON object (stdout line and `--stats` file).

use serde::Serialize;
use std::io::Write;
use std::path::Path;

#[derive(Debug, Default, Clone, Serialize, PartialEq)]
pub struct Counters {
    pub queue_num: u16,
    /// Packets read from the queue.
    pub received: u64,
    /// Packets whose delay was counted from the kernel's receive stamp (not linkem's read).
    pub kernel_stamped: u64,
    /// Packets accepted after their delay (duplicates not counted).
    pub delayed: u64,
    /// Sum of all drops below.
    pub dropped: u64,
    pub dropped_random: u64,
    pub dropped_burst: u64,
    /// Dropped because `--max-held` packets were already held.
    pub dropped_held_cap: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Duplicates that could not be sent (packet truncated, not IP, or send error).
    pub duplicate_failed: u64,
    /// Packets held right now.
    pub held: u64,
    pub held_max: u64,
    /// Held packets accepted at once when linkem stopped.
    pub flushed_at_exit: u64,
    /// Verdicts the kernel refused (e.g. packet already gone).
    pub verdict_errors: u64,
    /// From /proc/net/netfilter/nfnetlink_queue: packets the kernel dropped because its
    /// queue was full, and because linkem's socket buffer overflowed (linkem fell behind).
    pub kernel_queue_dropped: Option<u64>,
    pub kernel_user_dropped: Option<u64>,
    /// Increases by one with every report, so a reader can wait for a fresh one.
    pub snapshot: u64,
    /// Why this report was written: "sigusr1", "interval" or "exit".
    pub reason: String,
}

impl Counters {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("counters serialize")
    }

    /// Write atomically (temp file + rename) so a reader never sees half a report.
    pub fn write_file(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(self.to_json().as_bytes())?;
            f.write_all(b"\n")?;
        }
        std::fs::rename(&tmp, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_every_counter_and_file_round_trips() {
        let c = Counters {
            queue_num: 3,
            received: 10,
            dropped: 2,
            dropped_random: 2,
            reason: "exit".into(),
            ..Default::default()
        };
        let v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
        assert_eq!(v["queue_num"], 3);
        assert_eq!(v["dropped_random"], 2);
        assert_eq!(v["reason"], "exit");
        for key in [
            "delayed",
            "dropped_burst",
            "dropped_held_cap",
            "duplicated",
            "held",
            "held_max",
            "snapshot",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        let dir = std::env::temp_dir().join(format!("linkem-stats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stats.json");
        c.write_file(&path).unwrap();
        let back: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back, v);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
