//! The time-sequence trace of selected connections (the measured GETs, chosen by client
//! port): one CSV line per segment with its sequence range, ACK, SACK blocks, receive window,
//! in-flight bytes and the RTT sample it took, as tcptrace/xplot and Wireshark's stream
//! graphs draw them. Options are parsed with etherparse only for these connections.

use std::io::{self, Write};

use etherparse::{TcpOptionElement, TcpOptionsIterator};

use crate::decode::{Segment, ACK, FIN, PSH, RST, SYN};

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

/// Writes one line; `line` is a buffer kept across calls. Integers go through itoa into the
/// buffer and the line out in one write: a traced bulk transfer is a line per frame.
pub fn write_row(w: &mut dyn Write, line: &mut Vec<u8>, conn: u64, r: &TraceRow) -> io::Result<()> {
    let mut num = itoa::Buffer::new();
    line.clear();
    line.extend_from_slice(num.format(conn).as_bytes());
    line.push(b',');
    line.extend_from_slice(num.format(r.ts_ns).as_bytes());
    line.extend_from_slice(if r.from_client { b",c," } else { b",s," });
    for (bit, letter) in [
        (SYN, b'S'),
        (FIN, b'F'),
        (RST, b'R'),
        (PSH, b'P'),
        (ACK, b'A'),
    ] {
        if r.flags & bit != 0 {
            line.push(letter);
        }
    }
    for v in [
        r.seq_off,
        r.end_off,
        i64::from(r.payload_bytes),
        i64::from(r.retransmitted),
    ] {
        line.push(b',');
        line.extend_from_slice(num.format(v).as_bytes());
    }
    line.push(b',');
    if let Some(ack) = r.ack_off {
        line.extend_from_slice(num.format(ack).as_bytes());
    }
    line.push(b',');
    line.extend_from_slice(num.format(r.rwnd_bytes).as_bytes());
    line.push(b',');
    for (i, &(left, right)) in r.sack[..usize::from(r.sack_count)].iter().enumerate() {
        if i > 0 {
            line.push(b' ');
        }
        line.extend_from_slice(num.format(left).as_bytes());
        line.push(b'-');
        line.extend_from_slice(num.format(right).as_bytes());
    }
    line.push(b',');
    line.extend_from_slice(num.format(r.in_flight_bytes).as_bytes());
    line.push(b',');
    if let Some(rtt) = r.rtt_ns {
        line.extend_from_slice(num.format(rtt).as_bytes());
    }
    line.push(b'\n');
    w.write_all(line)
}
