//! The one pass: frames -> segments -> connections at the server port, writing connection
//! summaries, RTT samples and series lines as they become final. State is per connection
//! (sequence ranges with holes, unacknowledged server segments, one open series bin), so
//! memory grows with connections and their windows, not with packets.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::time::Instant;

use crate::capture::{read_frames, BadFrame, End, Item};
use crate::decode::{decode, Family, Segment, Skip};
use crate::error::TraceError;
use crate::flow::{Connection, SeriesBin};
use crate::output::{self, mbps, ndjson, seconds, PortRecord, StatsRecord};

#[derive(Debug, Clone)]
pub struct Config {
    pub server_port: u16,
    /// Series bin width; None writes no series.
    pub bin_ns: Option<i64>,
    /// The port aggregate's interval [start, end] (inclusive); None: the whole capture.
    pub window_ns: Option<(i64, i64)>,
}

/// Where the outputs go; the summary is required, the others on request.
pub struct Sinks<'a> {
    pub summary: &'a mut dyn Write,
    pub rtt: Option<&'a mut dyn Write>,
    pub series: Option<&'a mut dyn Write>,
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
    retransmissions: u64,
    first_ns: Option<i64>,
    last_ns: i64,
}

struct Analyzer<'s, 'a> {
    config: Config,
    sinks: &'s mut Sinks<'a>,
    conns: HashMap<Key, Connection>,
    next_id: u64,
    port: PortTotals,
    frames: u64,
    tcp_segments: u64,
    segments_at_port: u64,
    skipped: BTreeMap<String, u64>,
    malformed: u64,
    write_error: Option<TraceError>,
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
    let mut a = Analyzer {
        config,
        sinks,
        conns: HashMap::new(),
        next_id: 0,
        port: PortTotals::default(),
        frames: 0,
        tcp_segments: 0,
        segments_at_port: 0,
        skipped: BTreeMap::new(),
        malformed: 0,
        write_error: None,
    };
    // the callbacks cannot return errors: a write error is kept and stops the analysis below
    let end = read_frames(input, |item| {
        if a.write_error.is_some() {
            return;
        }
        a.frames += 1;
        let skip = match item {
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
    let mut rest: Vec<Connection> = a.conns.drain().map(|(_, c)| c).collect();
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
        retransmissions: p.retransmissions,
        throughput_mbps: mbps(p.bytes_to_server + p.bytes_from_server, interval_ns),
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
        truncated: stop_reason.is_some(),
        stop_reason,
        connections: a.next_id,
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    ndjson(a.sinks.summary, &stats)?;
    for w in [Some(&mut *a.sinks.summary), a.sinks.rtt.as_deref_mut(), a.sinks.series.as_deref_mut()]
        .into_iter()
        .flatten()
    {
        w.flush().map_err(TraceError::write("output"))?;
    }
    Ok(Outcome { port, stats })
}

impl Analyzer<'_, '_> {
    fn segment(&mut self, seg: &Segment) -> Result<(), TraceError> {
        let port = self.config.server_port;
        let (client, client_port, server) = if seg.dport == port {
            (seg.src, seg.sport, seg.dst)
        } else if seg.sport == port {
            (seg.dst, seg.dport, seg.src)
        } else {
            return Ok(());
        };
        self.segments_at_port += 1;
        let key: Key = (seg.family, client, client_port, server);
        let fresh_syn = seg.syn() && !seg.has_ack() && seg.dport == port;
        if fresh_syn && self.conns.get(&key).is_some_and(|c| c.closing) {
            // a reused 4-tuple after a close starts a new connection at its SYN
            if let Some(old) = self.conns.remove(&key) {
                finish(self.sinks, old)?;
            }
        }
        let next_id = &mut self.next_id;
        let conn = self.conns.entry(key).or_insert_with(|| {
            let id = *next_id;
            *next_id += 1;
            Connection::new(id, seg, client, client_port, server, port)
        });
        let id = conn.id;
        let io_err: RefCell<Option<io::Error>> = RefCell::new(None);
        let bin_ns = self.config.bin_ns;
        let Sinks { rtt, series, .. } = &mut *self.sinks;
        let effect = conn.update(
            seg,
            |ack_ns, rtt_ns| {
                if let Some(w) = rtt.as_mut() {
                    if let Err(e) = writeln!(w, "{id},{},{}", seconds(ack_ns), rtt_ns as f64 / 1e6) {
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
        if let Some(e) = io_err.into_inner() {
            return Err(TraceError::Write { what: "RTT samples or series", source: e });
        }
        let in_window = self.config.window_ns.is_none_or(|(s, e)| s <= seg.ts_ns && seg.ts_ns <= e);
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
