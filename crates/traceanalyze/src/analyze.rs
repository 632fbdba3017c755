//! The one pass: frames -> segments -> connections at the server port, writing connection
//! summaries, RTT samples and series lines as they become final. State is per connection
//! (sequence ranges with holes, unacknowledged server segments, one open series bin), so
//! memory grows with connections and their windows, not with packets.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Read, Write};
use std::time::Instant;

use crate::capture::{read_frames, BadFrame, End, Item};
use crate::decode::{decode, Family, Segment, Skip};
use crate::dedup::CaptureDuplicates;
use crate::error::TraceError;
use crate::flow::{Connection, SeriesBin};
use crate::output::{self, mbps, ndjson, seconds, PortRecord, StatsRecord};
use crate::segment_trace::{self, TraceState};

#[derive(Debug, Clone)]
pub struct Config {
    pub server_port: u16,
    /// Series bin width; None writes no series.
    pub bin_ns: Option<i64>,
    /// The port aggregate's interval [start, end] (inclusive); None: the whole capture.
    pub window_ns: Option<(i64, i64)>,
    /// Client ports whose connections get a segment trace (with a `trace` sink).
    pub trace_client_ports: HashSet<u16>,
}

/// Where the outputs go; the summary is required, the others on request.
pub struct Sinks<'a> {
    pub summary: &'a mut dyn Write,
    pub rtt: Option<&'a mut dyn Write>,
    pub series: Option<&'a mut dyn Write>,
    /// The segment trace of the connections from `Config::trace_client_ports`.
    pub trace: Option<&'a mut dyn Write>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub port: PortRecord,
    pub stats: StatsRecord,
}

type Key = (Family, [u8; 16], u16, [u8; 16]);

#[derive(Default)]
struct PortTotals {
    connections: u64,
    segments: u64,
    bytes_to_server: u64,
    bytes_from_server: u64,
    payload_from_server: u64,
    unique_payload_from_server: u64,
    bytes_nrt: u64,
    retransmissions: u64,
    capture_duplicates: u64,
    first_ns: Option<i64>,
    last_ns: i64,
}

struct Analyzer<'s, 'a> {
    config: Config,
    sinks: &'s mut Sinks<'a>,
    /// Open connections in slots (reused when a 4-tuple is), found by key; the last key
    /// found is remembered, as consecutive segments mostly belong to one connection.
    slots: Vec<Connection>,
    index: HashMap<Key, usize>,
    last: Option<(Key, usize)>,
    next_id: u64,
    port: PortTotals,
    frames: u64,
    tcp_segments: u64,
    segments_at_port: u64,
    skipped: BTreeMap<String, u64>,
    malformed: u64,
    /// Frames recorded twice (dedup.rs): counted, never analysed.
    duplicates: CaptureDuplicates,
    capture_duplicates: u64,
    write_error: Option<TraceError>,
    trace_line: Vec<u8>,
}

/// Analyses one capture read from `input`; `pcap_name` only labels the header record.
pub fn analyze<R: Read + Send>(
    input: R,
    pcap_name: &str,
    config: Config,
    sinks: &mut Sinks<'_>,
) -> Result<Outcome, TraceError> {
    let started = Instant::now();
    ndjson(
        sinks.summary,
        &output::HeaderRecord {
            record: "header",
            format: output::FORMAT,
            version: output::FORMAT_VERSION,
            pcap: pcap_name.to_string(),
            server_port: config.server_port,
        },
    )?;
    if let Some(rtt) = sinks.rtt.as_mut() {
        writeln!(rtt, "{}", output::RTT_HEADER).map_err(TraceError::write("RTT samples"))?;
    }
    if let Some(series) = sinks.series.as_mut() {
        writeln!(series, "{}", output::SERIES_HEADER).map_err(TraceError::write("series"))?;
    }
    if let Some(trace) = sinks.trace.as_mut() {
        writeln!(trace, "{}", segment_trace::TRACE_HEADER).map_err(TraceError::write("trace"))?;
    }
    let mut a = Analyzer {
        config,
        sinks,
        slots: Vec::new(),
        index: HashMap::new(),
        last: None,
        next_id: 0,
        port: PortTotals::default(),
        frames: 0,
        tcp_segments: 0,
        segments_at_port: 0,
        skipped: BTreeMap::new(),
        malformed: 0,
        duplicates: CaptureDuplicates::default(),
        capture_duplicates: 0,
        write_error: None,
        trace_line: Vec::with_capacity(256),
    };
    // the callbacks cannot return errors: a write error is kept and stops the analysis below
    let end = read_frames(input, |item| {
        if a.write_error.is_some() {
            return;
        }
        a.frames += 1;
        let skip = match item {
            Item::Frame(frame) if a.duplicates.check(frame.ts_ns, frame.data) => {
                a.capture_duplicates += 1;
                if let Ok(seg) = decode(&frame) {
                    a.duplicate(&seg);
                }
                return;
            }
            Item::Frame(frame) => match decode(&frame) {
                Ok(seg) => {
                    a.tcp_segments += 1;
                    if let Err(e) = a.segment(&seg) {
                        a.write_error = Some(e);
                    }
                    return;
                }
                Err(skip) => {
                    if matches!(skip, Skip::Undecodable | Skip::BadTcpHeaderLength) {
                        a.malformed += 1;
                    }
                    skip.label()
                }
            },
            Item::Bad(bad) => {
                a.malformed += 1;
                match bad {
                    BadFrame::UnknownInterface => "unknown interface".to_string(),
                    BadFrame::NoTimestamp => "simple packet block without timestamp".to_string(),
                }
            }
        };
        *a.skipped.entry(skip).or_default() += 1;
    })?;
    if let Some(e) = a.write_error.take() {
        return Err(e);
    }
    let stop_reason = match end {
        End::Complete => None,
        End::Truncated(why) => {
            *a.skipped.entry("truncated file".to_string()).or_default() += 1;
            Some(why)
        }
    };
    // connections still open, in order of their first packet
    let mut rest = std::mem::take(&mut a.slots);
    rest.sort_by_key(|c| c.id);
    for conn in rest {
        finish(a.sinks, conn)?;
    }
    let (window_start, window_end) = match a.config.window_ns {
        Some((s, e)) => (Some(s), Some(e)),
        None => (None, None),
    };
    let interval_ns = match a.config.window_ns {
        Some((s, e)) => e - s,
        None => a.port.first_ns.map_or(0, |f| a.port.last_ns - f),
    };
    let p = &a.port;
    let port = PortRecord {
        record: "port",
        server_port: a.config.server_port,
        window_start_s: window_start.map(seconds),
        window_end_s: window_end.map(seconds),
        interval_s: interval_ns as f64 / 1e9,
        connections: p.connections,
        segments: p.segments,
        bytes_to_server: p.bytes_to_server,
        bytes_from_server: p.bytes_from_server,
        payload_bytes_from_server: p.payload_from_server,
        unique_payload_bytes_from_server: p.unique_payload_from_server,
        bytes_nrt: p.bytes_nrt,
        retransmissions: p.retransmissions,
        capture_duplicates: p.capture_duplicates,
        throughput_mbps: mbps(p.bytes_to_server + p.bytes_from_server, interval_ns),
        nrt_throughput_mbps: mbps(p.bytes_nrt, interval_ns),
        from_server_mbps: mbps(p.bytes_from_server, interval_ns),
        goodput_mbps: mbps(p.unique_payload_from_server, interval_ns),
    };
    ndjson(a.sinks.summary, &port)?;
    let stats = StatsRecord {
        record: "stats",
        frames: a.frames,
        tcp_segments: a.tcp_segments,
        segments_at_port: a.segments_at_port,
        skipped: a.skipped,
        malformed: a.malformed,
        capture_duplicates: a.capture_duplicates,
        truncated: stop_reason.is_some(),
        stop_reason,
        connections: a.next_id,
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    ndjson(a.sinks.summary, &stats)?;
    for w in [
        Some(&mut *a.sinks.summary),
        a.sinks.rtt.as_deref_mut(),
        a.sinks.series.as_deref_mut(),
        a.sinks.trace.as_deref_mut(),
    ]
    .into_iter()
    .flatten()
    {
        w.flush().map_err(TraceError::write("output"))?;
    }
    Ok(Outcome { port, stats })
}

impl Analyzer<'_, '_> {
    /// The connection key of a segment to or from the server port.
    fn key(&self, seg: &Segment) -> Option<Key> {
        let port = self.config.server_port;
        if seg.dport == port {
            Some((seg.family, seg.src, seg.sport, seg.dst))
        } else if seg.sport == port {
            Some((seg.family, seg.dst, seg.dport, seg.src))
        } else {
            None
        }
    }

    fn slot_of(&self, key: &Key) -> Option<usize> {
        match self.last {
            Some((last_key, slot)) if last_key == *key => Some(slot),
            _ => self.index.get(key).copied(),
        }
    }

    fn in_window(&self, ts_ns: i64) -> bool {
        self.config
            .window_ns
            .is_none_or(|(s, e)| s <= ts_ns && ts_ns <= e)
    }

    /// A capture duplicate of a segment: counted on the connection its original went to
    /// (and on the port inside the window), nothing else.
    fn duplicate(&mut self, seg: &Segment) {
        let Some(slot) = self.key(seg).and_then(|key| self.slot_of(&key)) else {
            return;
        };
        self.slots[slot].capture_duplicates += 1;
        if self.in_window(seg.ts_ns) {
            self.port.capture_duplicates += 1;
        }
    }

    fn segment(&mut self, seg: &Segment) -> Result<(), TraceError> {
        let port = self.config.server_port;
        let Some(key) = self.key(seg) else {
            return Ok(());
        };
        let (_, client, client_port, server) = key;
        self.segments_at_port += 1;
        let fresh_syn = seg.syn() && !seg.has_ack() && seg.dport == port;
        let slot = self.slot_of(&key);
        let slot = match slot {
            Some(slot) if fresh_syn && self.slots[slot].closing => {
                // a reused 4-tuple after a close starts a new connection at its SYN
                let fresh = Connection::new(self.next_id, seg, client, client_port, server, port);
                self.next_id += 1;
                let old = std::mem::replace(&mut self.slots[slot], fresh);
                finish(self.sinks, old)?;
                slot
            }
            Some(slot) => slot,
            None => {
                self.slots.push(Connection::new(
                    self.next_id,
                    seg,
                    client,
                    client_port,
                    server,
                    port,
                ));
                self.next_id += 1;
                self.index.insert(key, self.slots.len() - 1);
                self.slots.len() - 1
            }
        };
        self.last = Some((key, slot));
        let in_window = self.in_window(seg.ts_ns);
        let traced =
            self.sinks.trace.is_some() && self.config.trace_client_ports.contains(&client_port);
        let conn = &mut self.slots[slot];
        if traced && conn.trace.is_none() {
            conn.trace = Some(Box::<TraceState>::default());
        }
        let id = conn.id;
        let io_err: RefCell<Option<io::Error>> = RefCell::new(None);
        let bin_ns = self.config.bin_ns;
        let Sinks {
            rtt, series, trace, ..
        } = &mut *self.sinks;
        let effect = conn.update(
            seg,
            |ack_ns, rtt_ns| {
                if let Some(w) = rtt.as_mut() {
                    if let Err(e) = writeln!(w, "{id},{ack_ns},{rtt_ns}") {
                        io_err.borrow_mut().get_or_insert(e);
                    }
                }
            },
            bin_ns,
            |bin| {
                if let Some(w) = series.as_mut() {
                    if let Err(e) = write_bin(w, id, bin) {
                        io_err.borrow_mut().get_or_insert(e);
                    }
                }
            },
        );
        if let (Some(w), Some(row)) = (
            trace.as_mut(),
            conn.trace.as_mut().and_then(|t| t.row.take()),
        ) {
            if let Err(e) = segment_trace::write_row(*w, &mut self.trace_line, id, &row) {
                io_err.borrow_mut().get_or_insert(e);
            }
        }
        if let Some(e) = io_err.into_inner() {
            return Err(TraceError::Write {
                what: "RTT samples, series or trace",
                source: e,
            });
        }
        if in_window {
            let p = &mut self.port;
            if !conn.in_window {
                conn.in_window = true;
                p.connections += 1;
            }
            p.segments += 1;
            p.first_ns.get_or_insert(seg.ts_ns);
            p.last_ns = p.last_ns.max(seg.ts_ns);
            let frame = u64::from(seg.frame_len);
            let payload = u64::from(seg.payload_len);
            if effect.from_client {
                p.bytes_to_server += frame;
            } else {
                p.bytes_from_server += frame;
                p.payload_from_server += payload;
                if !effect.retransmitted {
                    p.unique_payload_from_server += payload;
                }
            }
            if !effect.retransmitted {
                p.bytes_nrt += frame;
            }
            if effect.retransmitted && payload > 0 {
                p.retransmissions += 1;
            }
        }
        Ok(())
    }
}

fn finish(sinks: &mut Sinks<'_>, mut conn: Connection) -> Result<(), TraceError> {
    if let (Some(bin), Some(w)) = (conn.take_bin(), sinks.series.as_mut()) {
        write_bin(w, conn.id, &bin).map_err(TraceError::write("series"))?;
    }
    ndjson(sinks.summary, &conn.summary())
}

fn write_bin(w: &mut dyn Write, conn: u64, bin: &SeriesBin) -> io::Result<()> {
    writeln!(
        w,
        "{conn},{},{},{},{},{},{},{},{},{},{},{}",
        seconds(bin.index * bin.width_ns),
        bin.width_ns as f64 / 1e9,
        bin.server_bytes,
        bin.client_bytes,
        bin.server_payload_bytes,
        bin.server_goodput_bytes,
        bin.retransmissions,
        mbps(bin.server_bytes, bin.width_ns),
        mbps(bin.server_goodput_bytes, bin.width_ns),
        bin.in_flight_max_bytes,
        bin.in_flight_end_bytes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    /// (t_us, from_client, client_port, seq, ack, syn, fin, payload) -> Ethernet frame bytes
    type Spec = (u32, bool, u16, u32, u32, bool, bool, usize);

    fn pcap(specs: &[Spec], tail: &[&[u8]]) -> Vec<u8> {
        let mut frames = frames(specs);
        frames.extend(
            tail.iter()
                .enumerate()
                .map(|(i, d)| (9_000_000 + i as u32, d.to_vec())),
        );
        write_pcap(&frames)
    }

    /// (t_us, Ethernet frame) of each spec (IPv4 ID 0)
    fn frames(specs: &[Spec]) -> Vec<(u32, Vec<u8>)> {
        specs
            .iter()
            .map(|&(t, fc, port, seq, ack, syn, fin, payload)| {
                let (src, dst, sp, dp) = if fc {
                    ([10, 0, 0, 10], [10, 0, 4, 10], port, 80)
                } else {
                    ([10, 0, 4, 10], [10, 0, 0, 10], 80, port)
                };
                let mut b = PacketBuilder::ethernet2([2; 6], [4; 6])
                    .ipv4(src, dst, 64)
                    .tcp(sp, dp, seq, 65535);
                if !(syn && fc) {
                    b = b.ack(ack);
                }
                if syn {
                    b = b.syn();
                }
                if fin {
                    b = b.fin();
                }
                let mut data = Vec::new();
                b.write(&mut data, &vec![0u8; payload]).unwrap();
                (t, data)
            })
            .collect()
    }

    /// (t_us, Ethernet frame) -> a little-endian pcap
    fn write_pcap(frames: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for (t, data) in frames.iter().cloned() {
            for v in [
                t / 1_000_000,
                t % 1_000_000,
                data.len() as u32,
                data.len() as u32,
            ] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&data);
        }
        out
    }

    fn exchange(t0: u32, port: u16, isn: u32) -> Vec<Spec> {
        vec![
            (t0, true, port, isn, 0, true, false, 0),
            (t0 + 100, false, port, 5000, isn + 1, true, false, 0),
            (t0 + 200, true, port, isn + 1, 5001, false, false, 50),
            (t0 + 300, false, port, 5001, isn + 51, false, false, 1000),
            (t0 + 400, true, port, isn + 51, 6001, false, false, 0),
            (t0 + 500, true, port, isn + 51, 6001, false, true, 0),
            (t0 + 600, false, port, 6001, isn + 52, false, true, 0),
            (t0 + 700, true, port, isn + 52, 6002, false, false, 0),
        ]
    }

    fn run(
        bytes: &[u8],
        window_ns: Option<(i64, i64)>,
    ) -> (Vec<serde_json::Value>, String, Outcome) {
        let (mut summary, mut rtt) = (Vec::new(), Vec::new());
        let outcome = {
            let mut sinks = Sinks {
                summary: &mut summary,
                rtt: Some(&mut rtt),
                series: None,
                trace: None,
            };
            let config = Config {
                server_port: 80,
                bin_ns: None,
                window_ns,
                trace_client_ports: HashSet::new(),
            };
            analyze(bytes, "test", config, &mut sinks).unwrap()
        };
        let records = String::from_utf8(summary)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (records, String::from_utf8(rtt).unwrap(), outcome)
    }

    #[test]
    fn reused_four_tuple_is_a_new_connection_and_records_are_typed() {
        let mut specs = exchange(1_000_000, 40000, 100);
        specs.extend(exchange(2_000_000, 40001, 900));
        specs.extend(exchange(3_000_000, 40000, 7000)); // same 4-tuple, after the close
        let ether_arp = {
            let mut f = vec![0u8; 42];
            f[12..14].copy_from_slice(&[0x08, 0x06]);
            f
        };
        let (records, rtt, outcome) = run(&pcap(&specs, &[&ether_arp, &[1, 2, 3]]), None);
        let kinds: Vec<&str> = records
            .iter()
            .map(|r| r["record"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "header",
                "connection",
                "connection",
                "connection",
                "port",
                "stats"
            ]
        );
        // the first connection is written when its 4-tuple is reused, the others at the end
        let conns: Vec<(u64, u64)> = records[1..4]
            .iter()
            .map(|r| {
                (
                    r["conn"].as_u64().unwrap(),
                    r["client_port"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(conns, [(0, 40000), (1, 40001), (2, 40000)]);
        for r in &records[1..4] {
            assert_eq!(r["error"], serde_json::Value::Null);
            assert_eq!(r["delay_ms"].as_f64(), Some(0.2)); // request at +200 µs, ACK at +400 µs
            assert_eq!(r["payload_bytes"].as_u64(), Some(1000));
        }
        assert_eq!(rtt.lines().count(), 1 + 3);
        assert_eq!(outcome.stats.frames, 26);
        assert_eq!(outcome.stats.tcp_segments, 24);
        assert_eq!(outcome.stats.malformed, 1); // the 3-byte frame; ARP is merely not IP
        assert_eq!(outcome.port.connections, 3);
        assert_eq!(outcome.port.payload_bytes_from_server, 3000);
        assert!(!outcome.stats.truncated);
    }

    #[test]
    fn mutated_captures_never_panic() {
        // seeded byte flips, cuts and splices of a valid capture: every outcome is a result
        // (frames skipped, a truncated stream, or a not-a-pcap error), never a panic
        let mut specs = exchange(1_000_000, 40000, 100);
        specs.extend(exchange(1_000_350, 40001, 900));
        let good = pcap(&specs, &[]);
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..3000 {
            let mut bytes = good.clone();
            let flips = 1 + next() % 8;
            for _ in 0..flips {
                let at = 24 + (next() as usize) % (bytes.len() - 24);
                bytes[at] = next() as u8;
            }
            if round % 3 == 0 {
                bytes.truncate(24 + (next() as usize) % (bytes.len() - 24));
            }
            if round % 5 == 0 {
                let at = (next() as usize) % bytes.len();
                bytes[at..].rotate_left(1 + (next() as usize) % 7);
            }
            let (mut summary, mut rtt, mut series) = (Vec::new(), Vec::new(), Vec::new());
            let mut sinks = Sinks {
                summary: &mut summary,
                rtt: Some(&mut rtt),
                series: Some(&mut series),
                trace: None,
            };
            let config = Config {
                server_port: 80,
                bin_ns: Some(100_000),
                window_ns: Some((0, i64::MAX)),
                trace_client_ports: HashSet::new(),
            };
            if let Ok(outcome) = analyze(&bytes[..], "fuzz", config, &mut sinks) {
                assert!(outcome.stats.tcp_segments <= outcome.stats.frames);
            }
        }
    }

    #[test]
    fn trace_of_the_selected_client_port_only() {
        use etherparse::TcpOptionElement::{SelectiveAcknowledgement, WindowScale};
        // (t_us, from_client, client_port, seq, ack, flags "SAF", window, options, payload)
        type Frame<'o> = (
            u32,
            bool,
            u16,
            u32,
            u32,
            &'static str,
            u16,
            &'o [etherparse::TcpOptionElement],
            usize,
        );
        let (ci, si) = (100u32, 5000u32);
        let sack = [SelectiveAcknowledgement(
            (si + 2001, si + 3001),
            [None, None, None],
        )];
        let specs: Vec<Frame> = vec![
            (0, true, 40000, ci, 0, "S", 64240, &[WindowScale(7)], 0),
            (10, true, 40001, 9, 0, "S", 64240, &[WindowScale(7)], 0), // a load connection
            (
                100,
                false,
                40000,
                si,
                ci + 1,
                "SA",
                65160,
                &[WindowScale(9)],
                0,
            ),
            (200, true, 40000, ci + 1, si + 1, "A", 502, &[], 50), // request
            (300, false, 40000, si + 1, ci + 51, "A", 128, &[], 1000),
            (300, false, 40000, si + 1001, ci + 51, "A", 128, &[], 1000), // lost
            (300, false, 40000, si + 2001, ci + 51, "A", 128, &[], 1000),
            (400, true, 40000, ci + 51, si + 1001, "A", 500, &sack, 0),
            (500, false, 40000, si + 1001, ci + 51, "A", 128, &[], 1000), // resent
            (600, true, 40000, ci + 51, si + 3001, "A", 501, &[], 0),
        ];
        let frames: Vec<(u32, Vec<u8>)> = specs
            .iter()
            .map(
                |&(t, fc, port, seq, ack, flags, window, options, payload)| {
                    let (src, dst, sp, dp) = if fc {
                        ([10, 0, 0, 10], [10, 0, 4, 10], port, 80)
                    } else {
                        ([10, 0, 4, 10], [10, 0, 0, 10], 80, port)
                    };
                    let mut b = PacketBuilder::ethernet2([2; 6], [4; 6])
                        .ipv4(src, dst, 64)
                        .tcp(sp, dp, seq, window)
                        .options(options)
                        .unwrap();
                    if flags.contains('A') {
                        b = b.ack(ack);
                    }
                    if flags.contains('S') {
                        b = b.syn();
                    }
                    let mut data = Vec::new();
                    b.write(&mut data, &vec![0u8; payload]).unwrap();
                    (t, data)
                },
            )
            .collect();
        let bytes = write_pcap(&frames);
        let (mut summary, mut trace) = (Vec::new(), Vec::new());
        let mut sinks = Sinks {
            summary: &mut summary,
            rtt: None,
            series: None,
            trace: Some(&mut trace),
        };
        let config = Config {
            server_port: 80,
            bin_ns: None,
            window_ns: None,
            trace_client_ports: HashSet::from([40000]),
        };
        analyze(&bytes[..], "trace", config, &mut sinks).unwrap();
        let text = String::from_utf8(trace).unwrap();
        let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
        assert_eq!(rows[0].join(","), segment_trace::TRACE_HEADER);
        // only port 40000's 9 segments, all of connection 0
        assert_eq!(rows.len(), 1 + 9);
        assert!(rows[1..].iter().all(|r| r[0] == "0"));
        // conn,ts_ns,dir,flags,seq_off,end_off,payload,retx,ack_off,rwnd,sack,in_flight,rtt_ns
        assert_eq!(
            rows[1][1..],
            ["0", "c", "S", "0", "1", "0", "0", "", "64240", "", "0", ""]
        );
        // the SYN-ACK's window is not scaled; afterwards the sender's shift applies
        assert_eq!(rows[2][3..10], ["SA", "0", "1", "0", "0", "1", "65160"]);
        assert_eq!(rows[3][9], (502u64 << 7).to_string());
        assert_eq!(rows[4][9], (128u64 << 9).to_string());
        // the SACK-bearing ACK: cumulative 1001, SACK 2001-3001 (relative), 2000 in flight
        // after it, RTT sample of the first segment (100 µs)
        assert_eq!(
            rows[7][8..],
            ["1001", "64000", "2001-3001", "2000", "100000"]
        );
        // the resend is flagged; the ACK to 3001 samples only the never-resent third
        // segment (sent at 300 µs: Karn), none for the resend
        assert_eq!(rows[8][2..8], ["s", "A", "1001", "2001", "1000", "1"]);
        assert_eq!(rows[9][8..], ["3001", "64128", "", "0", "300000"]);
    }

    #[test]
    fn window_and_truncation() {
        let mut specs = exchange(1_000_000, 40000, 100);
        specs.extend(exchange(2_000_000, 40001, 900));
        let bytes = pcap(&specs, &[]);
        let (_, _, outcome) = run(&bytes, Some((1_900_000_000, 3_000_000_000)));
        assert_eq!((outcome.port.connections, outcome.port.segments), (1, 8));
        assert!((outcome.port.interval_s - 1.1).abs() < 1e-12);
        let (records, _, outcome) = run(&bytes[..bytes.len() - 10], None);
        assert!(outcome.stats.truncated);
        assert_eq!(outcome.stats.frames, 15);
        assert_eq!(
            records
                .iter()
                .filter(|r| r["record"] == "connection")
                .count(),
            2
        );
    }

    fn connections(records: &[serde_json::Value]) -> Vec<serde_json::Value> {
        records
            .iter()
            .filter(|r| r["record"] == "connection")
            .cloned()
            .collect()
    }

    #[test]
    fn a_capture_written_twice_is_the_capture_once_with_its_duplicates_counted() {
        let mut specs = exchange(1_000_000, 40000, 100);
        specs.extend(exchange(1_000_350, 40001, 900));
        let once = frames(&specs);
        let twice: Vec<(u32, Vec<u8>)> = once.iter().flat_map(|f| [f.clone(), f.clone()]).collect();
        let (single, rtt_single, single_out) = run(&write_pcap(&once), None);
        let (double, rtt_double, double_out) = run(&write_pcap(&twice), None);
        assert_eq!(rtt_double, rtt_single);
        let (mut a, b) = (connections(&single), connections(&double));
        assert_eq!(a.len(), 2);
        for (x, y) in a.iter_mut().zip(&b) {
            assert_eq!(y["retransmissions"], 0);
            assert_eq!(y["capture_duplicates"], 8);
            x["capture_duplicates"] = y["capture_duplicates"].clone();
        }
        assert_eq!(a, b);
        assert_eq!(double_out.stats.frames, 32);
        assert_eq!(double_out.stats.capture_duplicates, 16);
        assert_eq!(double_out.stats.tcp_segments, single_out.stats.tcp_segments);
        assert_eq!(double_out.port.capture_duplicates, 16);
        let port = PortRecord {
            capture_duplicates: 0,
            ..double_out.port
        };
        assert_eq!(port, single_out.port);
    }

    #[test]
    fn a_resend_with_a_new_ip_id_or_after_the_window_is_a_retransmission() {
        let specs = exchange(1_000_000, 40000, 100);
        let once = frames(&specs);
        let data = once[3].clone(); // the server's 1000 bytes at +300 µs
        let mut new_id = data.1.clone();
        new_id[18..20].copy_from_slice(&7u16.to_be_bytes()); // IPv4 identification
        for (again, duplicates, retransmissions) in [
            ((data.0 + 5, data.1.clone()), 1, 0), // 5 µs later, the same bytes
            ((data.0 + 5, new_id), 0, 1),         // 5 µs later, sent again
            ((data.0 + 11, data.1.clone()), 0, 1), // the same bytes, beyond 10 µs
        ] {
            let mut frames = once.clone();
            frames.insert(4, again);
            let (records, _, outcome) = run(&write_pcap(&frames), None);
            let conn = &connections(&records)[0];
            assert_eq!(conn["capture_duplicates"], duplicates);
            assert_eq!(conn["retransmissions"], retransmissions);
            assert_eq!(outcome.stats.capture_duplicates, duplicates);
            assert_eq!(outcome.port.retransmissions, retransmissions);
            assert_eq!(conn["payload_bytes"], 1000);
        }
    }
}
