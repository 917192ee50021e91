//! TUN devices created inside a network namespace. The device is not
//! persistent: it disappears when its fd (owned by [`TunDevice`]) closes.

use super::{check, Error, Result};
use crate::packet::VNET_HDR_LEN;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
// _IOW('T', n, int)
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;

/// Packets the kernel queues for us to read (the TUN ring; default 500).
/// When the forwarding thread is briefly starved of CPU, packets wait here
/// instead of being dropped where the stats cannot see them.
const TX_QUEUE_LEN: libc::c_int = 10_000;

/// `struct ifreq`: name + a 24-byte union (we use flags or mtu).
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> Self {
        let mut r = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: [0; 24],
        };
        r.name[..name.len()].copy_from_slice(name.as_bytes());
        r
    }
    fn set_short(&mut self, v: libc::c_short) {
        self.data[..2].copy_from_slice(&v.to_ne_bytes());
    }
    fn short(&self) -> libc::c_short {
        libc::c_short::from_ne_bytes([self.data[0], self.data[1]])
    }
    fn set_int(&mut self, v: libc::c_int) {
        self.data[..4].copy_from_slice(&v.to_ne_bytes());
    }
}

fn open(path: &str, flags: libc::c_int) -> Result<OwnedFd> {
    let c = CString::new(path).map_err(|_| Error(format!("open {path}: NUL in path")))?;
    // SAFETY: valid C string; the returned fd is owned below.
    let fd = check(
        unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) },
        format_args!("open {path}"),
    )?;
    // SAFETY: fd was just returned by open and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// While alive, the calling thread is in another network namespace; drop
/// moves it back.
struct NetnsGuard {
    home: OwnedFd,
}

impl NetnsGuard {
    fn enter(netns: &Path) -> Result<Self> {
        let home = open("/proc/thread-self/ns/net", libc::O_RDONLY)?;
        let p = netns
            .to_str()
            .ok_or_else(|| Error(format!("{}: path is not UTF-8", netns.display())))?;
        let target = open(p, libc::O_RDONLY)?;
        // SAFETY: plain syscall on an owned fd.
        check(
            unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) },
            format_args!("setns {p}"),
        )?;
        Ok(NetnsGuard { home })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // SAFETY: plain syscall on an owned fd.
        if unsafe { libc::setns(self.home.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
            // Staying in the wrong namespace would make later devices land
            // there: this is unrecoverable.
            eprintln!(
                "tunbench-link: error: setns back to the original namespace: {}",
                std::io::Error::last_os_error()
            );
            std::process::exit(1);
        }
    }
}

#[derive(Debug)]
pub struct TunDevice {
    fd: OwnedFd,
    name: String,
}

impl TunDevice {
    /// Create TUN device `name` inside the namespace at `netns` (a file such
    /// as /run/netns/NAME), with IFF_VNET_HDR and TSO4/TSO6/CSUM offloads,
    /// MTU set and IFF_UP. Addresses are left to the caller.
    pub fn create_in(netns: &Path, name: &str, mtu: u32) -> Result<Self> {
        let _ns = NetnsGuard::enter(netns)?;
        // The device joins the namespace of the thread that opens the
        // clone device, so open it after setns.
        let fd = open("/dev/net/tun", libc::O_RDWR | libc::O_NONBLOCK)?;
        let mut req = IfReq::new(name);
        req.set_short(IFF_TUN | IFF_NO_PI | IFF_VNET_HDR);
        // SAFETY: ioctl with a correctly sized ifreq.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
            let e = std::io::Error::last_os_error();
            let hint = match e.raw_os_error() {
                Some(libc::EINVAL) | Some(libc::EBUSY) | Some(libc::EEXIST) => {
                    " (is there already a device with that name in the namespace?)"
                }
                Some(libc::EPERM) => " (needs CAP_NET_ADMIN)",
                _ => "",
            };
            return Err(Error(format!(
                "create TUN device {name} in {}: {e}{hint}",
                netns.display()
            )));
        }
        let hdr_len = VNET_HDR_LEN as libc::c_int;
        // SAFETY: ioctl with a pointer to an int.
        check(
            unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETVNETHDRSZ, &hdr_len) },
            format_args!("ioctl TUNSETVNETHDRSZ {name}"),
        )?;
        let offloads: libc::c_uint = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
        // SAFETY: TUNSETOFFLOAD takes the flags by value.
        check(
            unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, offloads as libc::c_ulong) },
            format_args!("ioctl TUNSETOFFLOAD {name}"),
        )?;
        let dev = TunDevice {
            fd,
            name: name.to_string(),
        };
        dev.configure(mtu)?;
        Ok(dev)
    }

    /// Set the MTU and queue length and bring the link up (through a socket created in the
    /// device's namespace: the caller is still inside it).
    fn configure(&self, mtu: u32) -> Result<()> {
        // SAFETY: plain socket(2); fd owned below.
        let s = check(
            unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
            "socket AF_INET",
        )?;
        // SAFETY: just created, owned by nobody else.
        let sock = unsafe { OwnedFd::from_raw_fd(s) };
        let mut req = IfReq::new(&self.name);
        req.set_int(mtu as libc::c_int);
        // SAFETY: ioctl with a correctly sized ifreq.
        check(
            unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFMTU, &mut req) },
            format_args!("ioctl SIOCSIFMTU {} {mtu}", self.name),
        )?;
        let mut req = IfReq::new(&self.name);
        req.set_int(TX_QUEUE_LEN);
        // SAFETY: ioctl with a correctly sized ifreq.
        check(
            unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFTXQLEN, &mut req) },
            format_args!("ioctl SIOCSIFTXQLEN {} {TX_QUEUE_LEN}", self.name),
        )?;
        let mut req = IfReq::new(&self.name);
        // SAFETY: as above.
        check(
            unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) },
            format_args!("ioctl SIOCGIFFLAGS {}", self.name),
        )?;
        let flags = req.short() | libc::IFF_UP as libc::c_short;
        req.set_short(flags);
        // SAFETY: as above.
        check(
            unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &mut req) },
            format_args!("ioctl SIOCSIFFLAGS {} up", self.name),
        )?;
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Read one packet (virtio-net header + IP) into `buf`.
    /// `Ok(None)`: nothing to read now.
    pub fn recv(&self, buf: &mut [u8]) -> Result<Option<usize>> {
        loop {
            // SAFETY: buf is valid for buf.len() bytes.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(Some(n as usize));
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(None),
                Some(libc::EINTR) => continue,
                _ => return Err(Error(format!("read {}: {e}", self.name))),
            }
        }
    }

    /// Write one packet (virtio-net header + IP).
    pub fn send(&self, buf: &[u8]) -> std::io::Result<()> {
        loop {
            // SAFETY: buf is valid for buf.len() bytes.
            let n = unsafe { libc::write(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }
}

impl AsRawFd for TunDevice {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Check up front that a namespace file can be opened (clear error before
/// creating anything).
pub fn check_netns(netns: &Path) -> Result<()> {
    let p = netns
        .to_str()
        .ok_or_else(|| Error(format!("{}: path is not UTF-8", netns.display())))?;
    open(p, libc::O_RDONLY).map(drop)
}

const _: () = assert!(std::mem::size_of::<IfReq>() == 40);
