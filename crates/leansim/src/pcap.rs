//! A classic pcap writer (Ethernet link type, microsecond timestamps): the simulated capture
//! at the server, read back by the same analyzer as a tcpdump capture
//! (python/src/congestlab/analysis/trace.py). The offline crate cache holds pcap-parser
//! (reader only, its writer needs cookie-factory), so the 24 + 16 byte headers are written here;
//! the tests read the file back with pcap-parser.
use std::io::{self, Write};

const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
const LINKTYPE_ETHERNET: u32 = 1;
const SNAPLEN: u32 = 65_535;

pub struct PcapWriter<W: Write> {
    out: W,
    /// Added to every timestamp: the virtual clock starts at zero, captures at an epoch time.
    epoch_us: u64,
    pub frames: u64,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W, epoch_us: u64) -> io::Result<Self> {
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&MAGIC_MICROS.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        header.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        header.extend_from_slice(&SNAPLEN.to_le_bytes());
        header.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter { out, epoch_us, frames: 0 })
    }

    pub fn write(&mut self, at_us: u64, frame: &[u8]) -> io::Result<()> {
        let t = self.epoch_us + at_us;
        let len = frame.len() as u32;
        let caplen = len.min(SNAPLEN);
        let mut record = Vec::with_capacity(16);
        record.extend_from_slice(&((t / 1_000_000) as u32).to_le_bytes());
        record.extend_from_slice(&((t % 1_000_000) as u32).to_le_bytes());
        record.extend_from_slice(&caplen.to_le_bytes());
        record.extend_from_slice(&len.to_le_bytes());
        self.out.write_all(&record)?;
        self.out.write_all(&frame[..caplen as usize])?;
        self.frames += 1;
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
