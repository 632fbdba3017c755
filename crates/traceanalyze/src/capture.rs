//! Streams the frames of a pcap or pcapng file once, with `pcap-parser`'s circular-buffer
//! readers: memory is the buffer, whatever the file's size.
//!
//! A capture cut short (tcpdump killed mid-write) ends the stream at the last complete
//! record and reports why; a file that is not a capture at all is an error.

use std::io::Read;

use pcap_parser::{create_reader, Block, PcapBlockOwned, PcapError};

use crate::error::TraceError;

/// Start size of the read buffer; grown (up to `MAX_BUFFER_BYTES`) for larger records.
const BUFFER_BYTES: usize = 1 << 20;
const MAX_BUFFER_BYTES: usize = 16 << 20; // a larger record is corrupt (tcpdump's snaplen is at most 256 KiB)

/// One captured frame: link type (LINKTYPE_* value), timestamp and the captured bytes.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub linktype: i32,
    pub ts_ns: i64,
    pub data: &'a [u8],
}

/// How the stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Complete,
    /// The capture stops inside a record or at a corrupt block: analysed up to there.
    Truncated(String),
}

/// Frames pcap-parser returned that carry no usable packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadFrame {
    /// An enhanced packet block naming an interface the section never described.
    UnknownInterface,
    /// A simple packet block: no timestamp, so no place in time.
    NoTimestamp,
}

#[derive(Clone, Copy)]
struct Interface {
    linktype: i32,
    ticks_per_s: u64,
    offset_s: i64,
}

/// One item of the stream.
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    Frame(Frame<'a>),
    Bad(BadFrame),
}

/// Calls `on_item` for every frame (or frame without a usable packet) in file order;
/// returns how the stream ended.
pub fn read_frames<R, F>(input: R, mut on_item: F) -> Result<End, TraceError>
where
    R: Read + Send,
    F: FnMut(Item<'_>),
{
    let mut reader = match create_reader(BUFFER_BYTES, input) {
        Ok(reader) => reader,
        Err(PcapError::ReadError) => {
            return Err(TraceError::Read(std::io::Error::other("read failed")))
        }
        Err(PcapError::Eof) => return Err(TraceError::NotAPcap("empty file".into())),
        Err(e) => return Err(TraceError::NotAPcap(format!("{e:?}"))),
    };
    let mut capacity = BUFFER_BYTES;
    // legacy pcap: one link type for the file; pcapng: interfaces per section
    let mut legacy: Option<(i32, bool)> = None;
    let mut interfaces: Vec<Interface> = Vec::new();
    loop {
        let consumed = reader.consumed();
        let stop = match reader.next() {
            Ok((offset, block)) => {
                match block {
                    PcapBlockOwned::LegacyHeader(header) => {
                        legacy = Some((header.network.0, header.is_nanosecond_precision()));
                    }
                    PcapBlockOwned::Legacy(rec) => {
                        let (linktype, nanos) = legacy.unwrap_or((1, false));
                        let frac_ns = if nanos {
                            rec.ts_usec as i64
                        } else {
                            rec.ts_usec as i64 * 1000
                        };
                        on_item(Item::Frame(Frame {
                            linktype,
                            ts_ns: rec.ts_sec as i64 * 1_000_000_000 + frac_ns,
                            data: rec.data,
                        }));
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => interfaces.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        interfaces.push(Interface {
                            linktype: idb.linktype.0,
                            ticks_per_s: idb.ts_resolution().unwrap_or(1_000_000).max(1),
                            offset_s: idb.ts_offset(),
                        })
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        match interfaces.get(epb.if_id as usize) {
                            Some(ifc) => {
                                let ticks = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                                let ns = clamp_ns(
                                    ticks_to_ns(ticks, ifc.ticks_per_s)
                                        .saturating_add(ifc.offset_s.saturating_mul(1_000_000_000)),
                                );
                                let caplen = (epb.caplen as usize).min(epb.data.len());
                                on_item(Item::Frame(Frame {
                                    linktype: ifc.linktype,
                                    ts_ns: ns,
                                    data: &epb.data[..caplen],
                                }));
                            }
                            None => on_item(Item::Bad(BadFrame::UnknownInterface)),
                        }
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(_)) => {
                        on_item(Item::Bad(BadFrame::NoTimestamp))
                    }
                    PcapBlockOwned::NG(_) => {} // statistics, name resolution, custom blocks
                }
                reader.consume(offset);
                None
            }
            Err(PcapError::Eof) => Some(End::Complete),
            Err(PcapError::Incomplete(_)) => {
                reader
                    .refill()
                    .map_err(|_| TraceError::Read(std::io::Error::other("read failed")))?;
                None
            }
            Err(PcapError::UnexpectedEof) => {
                Some(End::Truncated("the capture ends inside a record".into()))
            }
            Err(PcapError::BufferTooSmall) => {
                if capacity < MAX_BUFFER_BYTES && reader.grow(capacity * 2) {
                    capacity *= 2;
                    reader
                        .refill()
                        .map_err(|_| TraceError::Read(std::io::Error::other("read failed")))?;
                    None
                } else {
                    Some(End::Truncated(format!(
                        "a record claims more than {MAX_BUFFER_BYTES} bytes"
                    )))
                }
            }
            Err(PcapError::ReadError) => {
                return Err(TraceError::Read(std::io::Error::other("read failed")))
            }
            Err(e) => Some(End::Truncated(format!(
                "corrupt block after {consumed} bytes: {e:?}"
            ))),
        };
        if let Some(end) = stop {
            return Ok(end);
        }
    }
}

/// Timestamps are kept in [0, 2^62] ns (until the year 2116), so that differences of two
/// never overflow, whatever a corrupt pcapng block says.
fn clamp_ns(ns: i64) -> i64 {
    ns.clamp(0, 1 << 62)
}

fn ticks_to_ns(ticks: u64, ticks_per_s: u64) -> i64 {
    let ns = u128::from(ticks) * 1_000_000_000 / u128::from(ticks_per_s);
    i64::try_from(ns).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy_pcap(records: &[(u32, u32, &[u8])], nanos: bool) -> Vec<u8> {
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut out = Vec::new();
        out.extend_from_slice(&magic.to_le_bytes());
        out.extend_from_slice(&2u16.to_le_bytes());
        out.extend_from_slice(&4u16.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&65535u32.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        for (sec, frac, data) in records {
            out.extend_from_slice(&sec.to_le_bytes());
            out.extend_from_slice(&frac.to_le_bytes());
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(data);
        }
        out
    }

    fn collect(bytes: &[u8]) -> (Vec<(i64, usize)>, End) {
        let mut frames = Vec::new();
        let end = read_frames(bytes, |item| {
            if let Item::Frame(f) = item {
                frames.push((f.ts_ns, f.data.len()))
            }
        })
        .unwrap();
        (frames, end)
    }

    #[test]
    fn microsecond_and_nanosecond_timestamps() {
        let (frames, end) = collect(&legacy_pcap(&[(10, 5, b"abc"), (11, 0, b"")], false));
        assert_eq!(end, End::Complete);
        assert_eq!(frames, vec![(10_000_005_000, 3), (11_000_000_000, 0)]);
        let (frames, _) = collect(&legacy_pcap(&[(10, 5, b"abc")], true));
        assert_eq!(frames, vec![(10_000_000_005, 3)]);
    }

    #[test]
    fn cut_capture_keeps_complete_records_and_says_truncated() {
        let full = legacy_pcap(&[(1, 0, &[7u8; 60]), (2, 0, &[8u8; 60])], false);
        for cut in [full.len() - 1, full.len() - 60, full.len() - 70] {
            let (frames, end) = collect(&full[..cut]);
            assert_eq!(frames.len(), 1, "cut at {cut}");
            assert!(matches!(end, End::Truncated(_)), "cut at {cut}");
        }
    }

    #[test]
    fn garbage_is_not_a_pcap() {
        let err = read_frames(&b"definitely not a capture file"[..], |_| {}).unwrap_err();
        assert!(matches!(err, TraceError::NotAPcap(_)), "{err}");
        assert!(matches!(
            read_frames(&b""[..], |_| {}),
            Err(TraceError::NotAPcap(_))
        ));
    }

    #[test]
    fn pcapng_with_nanosecond_interface() {
        // SHB, IDB (linktype 1, if_tsresol = 9), one EPB with 4 bytes of data
        let mut out = Vec::new();
        let block = |out: &mut Vec<u8>, kind: u32, body: &[u8]| {
            let len = 12 + body.len() as u32;
            out.extend_from_slice(&kind.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(body);
            out.extend_from_slice(&len.to_le_bytes());
        };
        let mut shb = Vec::new();
        shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        block(&mut out, 0x0a0d_0d0a, &shb);
        let mut idb = Vec::new();
        idb.extend_from_slice(&1u16.to_le_bytes());
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&0u32.to_le_bytes());
        idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0]); // if_tsresol option, padded
        idb.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        block(&mut out, 1, &idb);
        let ticks: u64 = 1_700_000_000_123_456_789;
        let mut epb = Vec::new();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&((ticks >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ticks as u32).to_le_bytes());
        epb.extend_from_slice(&4u32.to_le_bytes());
        epb.extend_from_slice(&4u32.to_le_bytes());
        epb.extend_from_slice(&[1, 2, 3, 4]);
        block(&mut out, 6, &epb);
        let (frames, end) = collect(&out);
        assert_eq!(end, End::Complete);
        assert_eq!(frames, vec![(1_700_000_000_123_456_789, 4)]);
    }
}
