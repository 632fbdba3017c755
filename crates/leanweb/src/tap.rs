//! Opening an existing TAP device by name (TUNSETIFF on /dev/net/tun) and waiting on it.
//! The only module of leanweb with `unsafe`: if_nametoindex, ioctl and ppoll through libc.
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
/// Every frame read or written starts with a `struct virtio_net_hdr` (crates/leanweb/src/gso.rs).
const IFF_VNET_HDR: libc::c_short = 0x4000;
/// _IOW('T', 216, int): the size of that header.
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

pub struct Tap {
    file: File,
    name: String,
}

impl Tap {
    /// Attaches to the TAP device `name` (created beforehand with `ip tuntap add … mode tap`);
    /// with `vnet_hdr`, every frame read and written carries a 10-byte virtio_net_hdr
    /// (`gso::VNET_HDR_LEN`). No TUNSETOFFLOAD: the kernel still hands us single frames with
    /// complete checksums.
    pub fn open(name: &str, vnet_hdr: bool) -> io::Result<Tap> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad interface name {name:?}")));
        }
        // TUNSETIFF would create a missing device (in whatever namespace we run): refuse instead.
        let c_name =
            std::ffi::CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))?;
        // SAFETY: a valid NUL-terminated string that outlives the call.
        if unsafe { libc::if_nametoindex(c_name.as_ptr()) } == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no device {name:?} in this network namespace (create it first: ip tuntap add dev {name} mode tap)"
                ),
            ));
        }
        let file = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NONBLOCK).open("/dev/net/tun")?;
        let flags = IFF_TAP | IFF_NO_PI | if vnet_hdr { IFF_VNET_HDR } else { 0 };
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags, _pad: [0; 22] };
        for (dst, src) in req.name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        // SAFETY: `req` is a properly sized, initialised `struct ifreq` prefix the kernel reads
        // and writes within its 40 bytes; the fd is valid for the duration of the call.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReq) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        if vnet_hdr {
            let size = crate::gso::VNET_HDR_LEN as libc::c_int;
            // SAFETY: TUNSETVNETHDRSZ reads one int through the pointer, valid for the call.
            if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETVNETHDRSZ as _, &size as *const libc::c_int) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Tap { file, name: name.to_string() })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits until a frame can be read or `timeout` passes (microsecond resolution, so
    /// sub-millisecond protocol timers — RACK's reordering window, the tail loss probe —
    /// fire on time); EINTR counts as a timeout.
    pub fn wait_readable(&self, timeout: std::time::Duration) -> io::Result<bool> {
        let mut pfd = libc::pollfd { fd: self.file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one valid pollfd, count 1; a valid timespec; no signal mask change (null).
        let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(err) };
        }
        Ok(rc > 0 && pfd.revents & libc::POLLIN != 0)
    }

    /// One frame, or `None` if none is waiting.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match self.file.read(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends one frame; a full device queue drops it (TCP recovers) and returns false.
    pub fn send(&mut self, frame: &[u8]) -> io::Result<bool> {
        self.send_vectored(&[IoSlice::new(frame)])
    }

    /// Sends one frame given in parts (`writev`: a TAP write is one frame, all or nothing).
    pub fn send_vectored(&mut self, parts: &[IoSlice<'_>]) -> io::Result<bool> {
        match self.file.write_vectored(parts) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }
}
