//! The time-sequence trace of selected connections (the measured GETs, chosen by client
//! port): one CSV line per segment with its sequence range, ACK, SACK blocks, receive window,
//! in-flight bytes and the RTT sample it took, as tcptrace/xplot and Wireshark's stream
//! graphs draw them. Options are parsed with etherparse only for these connections.

use std::io::{self, Write};

use etherparse::{TcpOptionElement, TcpOptionsIterator};

use crate::decode::{Segment, ACK, FIN, RST, SYN};

pub const TRACE_HEADER: &str = "conn,ts_ns,dir,flags,seq_off,end_off,payload_bytes,retransmitted,\
ack_off,rwnd_bytes,sack_blocks,in_flight_bytes,rtt_ns";

/// The per-connection state a trace needs beyond the metrics': the window scales of the SYNs.
#[derive(Debug, Default, Clone)]
pub struct TraceState {
    /// Window scale shift announced in each direction's SYN (client, server).
    pub wscale: [Option<u8>; 2],
    pub row: Option<TraceRow>,
}

/// One segment of a traced connection. Offsets are relative to the sender's first sequence
/// number (its SYN's is 0); `ack_off` and SACK blocks are in the receiver's (peer's) space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceRow {
    pub ts_ns: i64,
    pub from_client: bool,
    pub flags: u8,
    pub seq_off: i64,
    pub end_off: i64,
    pub payload_bytes: u32,
    pub retransmitted: bool,
    pub ack_off: Option<i64>,
    pub rwnd_bytes: u64,
    pub sack: [(i64, i64); 4],
    pub sack_count: u8,
    pub in_flight_bytes: i64,
    pub rtt_ns: Option<i64>,
}

/// The window scale shift of a SYN's options, if it carries one (RFC 7323: at most 14).
pub fn window_scale(seg: &Segment) -> Option<u8> {
    TcpOptionsIterator::from_slice(seg.options())
        .map_while(Result::ok)
        .find_map(|o| match o {
            TcpOptionElement::WindowScale(shift) => Some(shift.min(14)),
            _ => None,
        })
}

/// The SACK blocks (left, right edges as sent) of a segment's options.
pub fn sack_blocks(seg: &Segment) -> ([(u32, u32); 4], u8) {
    let mut out = [(0, 0); 4];
    let mut n = 0u8;
    for option in TcpOptionsIterator::from_slice(seg.options()).map_while(Result::ok) {
        if let TcpOptionElement::SelectiveAcknowledgement(first, rest) = option {
            for block in std::iter::once(Some(first)).chain(rest).flatten() {
                if usize::from(n) < out.len() {
                    out[usize::from(n)] = block;
                    n += 1;
                }
            }
        }
    }
    (out, n)
}

fn flag_letters(flags: u8) -> String {
    [(SYN, 'S'), (FIN, 'F'), (RST, 'R'), (0x08, 'P'), (ACK, 'A')]
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|&(_, c)| c)
        .collect()
}

pub fn write_row(w: &mut dyn Write, conn: u64, r: &TraceRow) -> io::Result<()> {
    let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let sacks: Vec<String> = r.sack[..usize::from(r.sack_count)]
        .iter()
        .map(|(a, b)| format!("{a}-{b}"))
        .collect();
    writeln!(
        w,
        "{conn},{},{},{},{},{},{},{},{},{},{},{},{}",
        r.ts_ns,
        if r.from_client { "c" } else { "s" },
        flag_letters(r.flags),
        r.seq_off,
        r.end_off,
        r.payload_bytes,
        u8::from(r.retransmitted),
        opt(r.ack_off),
        r.rwnd_bytes,
        sacks.join(" "),
        r.in_flight_bytes,
        opt(r.rtt_ns),
    )
}
