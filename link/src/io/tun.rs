//! TUN devices created inside a network namespace. The device is not
//! persistent: it disappears when its fd (owned by [`TunDevice`]) closes.
//!
//! Syscalls go through rustix. The device ioctls (TUNSETIFF,
//! TUNSETVNETHDRSZ, TUNSETOFFLOAD and the `struct ifreq` ones for MTU,
//! queue length and flags) have no safe wrapper in any crate that leaves
//! device creation to us, so they remain the only `unsafe` here, each with
//! the argument type the kernel expects.
//!
//! Not tun-rs (checked with 2.8.16): its `offload(true)` also enables UDP
//! segmentation offload (TUN_F_USO4/6) whenever the kernel has it (>= 6.2),
//! with no way to ask for TCP only; `gso::offload::split` handles TCP GSO only,
//! so UDP GSO super-packets would become `dropped_emulator` on the
//! segmented path. It would also move these ioctls into its own `unsafe`
//! (plus nix, bytes, log) rather than remove them, and still needs the
//! setns guard here to create the device in a namespace.

use super::{os_error, Error, Result};
use crate::packet::VNET_HDR_LEN;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::ioctl::{self, opcode, IntegerSetter, Opcode, Setter, Updater};
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use rustix::thread::LinkNameSpaceType;
use std::os::raw::{c_int, c_short, c_uint};
use std::path::Path;

const IFF_TUN: c_short = 0x0001;
const IFF_NO_PI: c_short = 0x1000;
const IFF_VNET_HDR: c_short = 0x4000;
const TUNSETIFF: Opcode = opcode::write::<c_int>(b'T', 202);
const TUNSETOFFLOAD: Opcode = opcode::write::<c_uint>(b'T', 208);
const TUNSETVNETHDRSZ: Opcode = opcode::write::<c_int>(b'T', 216);
const TUN_F_CSUM: usize = 0x01;
const TUN_F_TSO4: usize = 0x02;
const TUN_F_TSO6: usize = 0x04;
const SIOCGIFFLAGS: Opcode = libc::SIOCGIFFLAGS as Opcode;
const SIOCSIFFLAGS: Opcode = libc::SIOCSIFFLAGS as Opcode;
const SIOCSIFMTU: Opcode = libc::SIOCSIFMTU as Opcode;
const SIOCSIFTXQLEN: Opcode = libc::SIOCSIFTXQLEN as Opcode;

/// Packets the kernel queues for us to read (the TUN ring; default 500).
/// When the forwarding thread is briefly starved of CPU, packets wait here
/// instead of being dropped where the stats cannot see them.
const TX_QUEUE_LEN: c_int = 10_000;

/// `struct ifreq`: name + a 24-byte union (we use flags or mtu). Bytes
/// rather than `libc::ifreq`, whose union fields need `unsafe` to read.
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
    fn set_short(&mut self, v: c_short) {
        self.data[..2].copy_from_slice(&v.to_ne_bytes());
    }
    fn short(&self) -> c_short {
        c_short::from_ne_bytes([self.data[0], self.data[1]])
    }
    fn set_int(&mut self, v: c_int) {
        self.data[..4].copy_from_slice(&v.to_ne_bytes());
    }
}

/// The ioctls here that take a `struct ifreq *`.
#[derive(Copy, Clone, Debug)]
enum IfReqOp {
    TunSetIff,
    GetFlags,
    SetFlags,
    SetMtu,
    SetTxQueueLen,
}

fn ifreq_ioctl(fd: BorrowedFd<'_>, op: IfReqOp, req: &mut IfReq) -> std::result::Result<(), Errno> {
    // SAFETY: every opcode below takes a pointer to a `struct ifreq`, which
    // `IfReq` is (repr(C), 40 bytes, asserted at the end of the file);
    // `req` is valid and exclusively borrowed for the call.
    unsafe {
        match op {
            IfReqOp::TunSetIff => ioctl::ioctl(fd, Updater::<TUNSETIFF, IfReq>::new(req)),
            IfReqOp::GetFlags => ioctl::ioctl(fd, Updater::<SIOCGIFFLAGS, IfReq>::new(req)),
            IfReqOp::SetFlags => ioctl::ioctl(fd, Updater::<SIOCSIFFLAGS, IfReq>::new(req)),
            IfReqOp::SetMtu => ioctl::ioctl(fd, Updater::<SIOCSIFMTU, IfReq>::new(req)),
            IfReqOp::SetTxQueueLen => ioctl::ioctl(fd, Updater::<SIOCSIFTXQLEN, IfReq>::new(req)),
        }
    }
}

fn open(path: &Path, flags: OFlags) -> Result<OwnedFd> {
    rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| os_error(format_args!("open {}", path.display()), e))
}

/// While alive, the calling thread is in another network namespace; drop
/// moves it back.
struct NetnsGuard {
    home: OwnedFd,
}

impl NetnsGuard {
    fn enter(netns: &Path) -> Result<Self> {
        let home = open(Path::new("/proc/thread-self/ns/net"), OFlags::RDONLY)?;
        let target = open(netns, OFlags::RDONLY)?;
        rustix::thread::move_into_link_name_space(target.as_fd(), Some(LinkNameSpaceType::Network))
            .map_err(|e| os_error(format_args!("setns {}", netns.display()), e))?;
        Ok(NetnsGuard { home })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        let back = rustix::thread::move_into_link_name_space(
            self.home.as_fd(),
            Some(LinkNameSpaceType::Network),
        );
        if let Err(e) = back {
            // Staying in the wrong namespace would make later devices land
            // there: this is unrecoverable.
            eprintln!(
                "tunbench-link: error: setns back to the original namespace: {}",
                std::io::Error::from(e)
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
        let fd = open(Path::new("/dev/net/tun"), OFlags::RDWR | OFlags::NONBLOCK)?;
        let mut req = IfReq::new(name);
        req.set_short(IFF_TUN | IFF_NO_PI | IFF_VNET_HDR);
        if let Err(e) = ifreq_ioctl(fd.as_fd(), IfReqOp::TunSetIff, &mut req) {
            let hint = match e {
                Errno::INVAL | Errno::BUSY | Errno::EXIST => {
                    " (is there already a device with that name in the namespace?)"
                }
                Errno::PERM => " (needs CAP_NET_ADMIN)",
                _ => "",
            };
            return Err(Error(format!(
                "create TUN device {name} in {}: {}{hint}",
                netns.display(),
                std::io::Error::from(e)
            )));
        }
        let hdr_len = VNET_HDR_LEN as c_int;
        // SAFETY: TUNSETVNETHDRSZ reads an `int` through its pointer.
        unsafe { ioctl::ioctl(fd.as_fd(), Setter::<TUNSETVNETHDRSZ, c_int>::new(hdr_len)) }
            .map_err(|e| os_error(format_args!("ioctl TUNSETVNETHDRSZ {name}"), e))?;
        let offloads = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
        // SAFETY: TUNSETOFFLOAD takes the TUN_F_* flags by value.
        unsafe {
            ioctl::ioctl(
                fd.as_fd(),
                IntegerSetter::<TUNSETOFFLOAD>::new_usize(offloads),
            )
        }
        .map_err(|e| os_error(format_args!("ioctl TUNSETOFFLOAD {name}"), e))?;
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
        let sock = rustix::net::socket_with(
            AddressFamily::INET,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| os_error("socket AF_INET", e))?;
        let name = &self.name;
        let mut req = IfReq::new(name);
        req.set_int(mtu as c_int);
        ifreq_ioctl(sock.as_fd(), IfReqOp::SetMtu, &mut req)
            .map_err(|e| os_error(format_args!("ioctl SIOCSIFMTU {name} {mtu}"), e))?;
        let mut req = IfReq::new(name);
        req.set_int(TX_QUEUE_LEN);
        ifreq_ioctl(sock.as_fd(), IfReqOp::SetTxQueueLen, &mut req)
            .map_err(|e| os_error(format_args!("ioctl SIOCSIFTXQLEN {name} {TX_QUEUE_LEN}"), e))?;
        let mut req = IfReq::new(name);
        ifreq_ioctl(sock.as_fd(), IfReqOp::GetFlags, &mut req)
            .map_err(|e| os_error(format_args!("ioctl SIOCGIFFLAGS {name}"), e))?;
        let flags = req.short() | libc::IFF_UP as c_short;
        req.set_short(flags);
        ifreq_ioctl(sock.as_fd(), IfReqOp::SetFlags, &mut req)
            .map_err(|e| os_error(format_args!("ioctl SIOCSIFFLAGS {name} up"), e))?;
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Read one packet (virtio-net header + IP) into `buf`.
    /// `Ok(None)`: nothing to read now.
    pub fn recv(&self, buf: &mut [u8]) -> Result<Option<usize>> {
        loop {
            match rustix::io::read(&self.fd, &mut *buf) {
                Ok(n) => return Ok(Some(n)),
                Err(Errno::AGAIN) => return Ok(None),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(os_error(format_args!("read {}", self.name), e)),
            }
        }
    }

    /// Write one packet (virtio-net header + IP).
    pub fn send(&self, buf: &[u8]) -> std::io::Result<()> {
        loop {
            match rustix::io::write(&self.fd, buf) {
                Ok(_) => return Ok(()),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl AsFd for TunDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Check up front that a namespace file can be opened (clear error before
/// creating anything).
pub fn check_netns(netns: &Path) -> Result<()> {
    open(netns, OFlags::RDONLY).map(drop)
}

const _: () = assert!(std::mem::size_of::<IfReq>() == 40);
// The opcodes rustix computes are the kernel's _IOW('T', n, int) values.
const _: () = assert!(TUNSETIFF == 0x4004_54ca);
const _: () = assert!(TUNSETOFFLOAD == 0x4004_54d0);
const _: () = assert!(TUNSETVNETHDRSZ == 0x4004_54d8);
