//! `--log FILE`: JSON lines, one per connection event — the ground truth for the pcap analysis.
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

pub struct EventLog {
    out: Option<BufWriter<Box<dyn Write + Send>>>,
    /// Wall-clock time (µs since the Unix epoch) at stack time zero, to align with pcaps.
    start_unix_us: u64,
    pub lines: u64,
}

impl EventLog {
    pub fn disabled() -> Self {
        EventLog { out: None, start_unix_us: 0, lines: 0 }
    }

    pub fn to_file(path: &Path, start_unix_us: u64) -> std::io::Result<Self> {
        let file = File::create(path)?;
        Ok(Self::to_writer(Box::new(file), start_unix_us))
    }

    pub fn to_writer(out: Box<dyn Write + Send>, start_unix_us: u64) -> Self {
        EventLog { out: Some(BufWriter::with_capacity(1 << 16, out)), start_unix_us, lines: 0 }
    }

    pub fn enabled(&self) -> bool {
        self.out.is_some()
    }

    /// Writes one line: `{"t_us":…,"unix_us":…,"event":kind, …fields}`.
    pub fn write(&mut self, t_us: u64, kind: &str, fields: Value) {
        let Some(out) = self.out.as_mut() else { return };
        let mut line = Map::new();
        line.insert("t_us".into(), t_us.into());
        line.insert("unix_us".into(), (self.start_unix_us + t_us).into());
        line.insert("event".into(), kind.into());
        if let Value::Object(map) = fields {
            line.extend(map);
        }
        // A full disk must not take the server down: the line is lost, the count says so.
        if serde_json::to_writer(&mut *out, &Value::Object(line)).is_ok() && out.write_all(b"\n").is_ok() {
            self.lines += 1;
        }
    }

    /// Wall-clock µs of stack time `t_us`, for lines written with `write_line`.
    pub fn unix_us(&self, t_us: u64) -> u64 {
        self.start_unix_us + t_us
    }

    /// Writes one line from a struct that holds the whole line (`event`, `t_us` and `unix_us`
    /// included) with its fields declared in alphabetical order: byte for byte what `write`
    /// makes of the same fields (its map sorts keys), without building that map. The events
    /// logged per segment and per ACK take this path (docs/notes/leantcp-sending-speed.md).
    pub fn write_line<T: Serialize>(&mut self, line: &T) {
        let Some(out) = self.out.as_mut() else { return };
        if serde_json::to_writer(&mut *out, line).is_ok() && out.write_all(b"\n").is_ok() {
            self.lines += 1;
        }
    }

    pub fn flush(&mut self) {
        if let Some(out) = self.out.as_mut() {
            let _ = out.flush();
        }
    }
}
