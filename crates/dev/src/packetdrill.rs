//! packetdrill's shared-object interface (`packetdrill.h`'s `struct
//! packetdrill_interface`): how packetdrill, a test tool run beside the project,
//! drives a user-space stack loaded with `--so_filename`. packetdrill calls the
//! stack's socket API (`socket`, `connect`, `read`, `setsockopt`, `poll`, …), hands
//! it the packets a script injects (`netdev_send`), sniffs what it sends
//! (`netdev_receive`) and keeps time through it (`usleep`, `gettimeofday`), so the
//! stack may run in virtual time.
//!
//! This module is the C side only: the `#[repr(C)]` table, and a trampoline for each
//! entry that turns raw pointers into slices and socket addresses, calls a safe
//! [`Host`], and turns its `Result` into C's return value and `errno`. The stack
//! behind it lives elsewhere (`crates/packetdrill`); it is a device of sorts (it
//! sends and receives the stack's packets), so its `unsafe` lives here with the
//! other drivers'.
//!
//! `fcntl` and `ioctl` are variadic in C; they are declared here with their one
//! optional argument as a fixed integer or pointer, which the Linux x86-64 and
//! AArch64 calling conventions pass the same way.

use std::ffi::{c_char, c_int, c_long, c_longlong, c_uint, c_ulong, c_void, CStr};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// An `errno` value.
pub type Errno = c_int;

/// One entry of `poll`'s array, as the stack sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollFd {
    pub fd: i32,
    pub events: i16,
    pub revents: i16,
}

/// An `epoll_event` as the stack sees it: the events, and the caller's data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpollEvent {
    pub events: u32,
    pub data: u64,
}

/// The stack packetdrill drives, in safe Rust. Every call comes with packetdrill's
/// locks released; blocking calls come from packetdrill's system-call thread while
/// its main thread goes on (it judges "blocked" by the thread sleeping, so a
/// blocking call must wait on a condition variable or the like, not spin).
pub trait Host: Send + Sync + 'static {
    fn socket(&self, domain: i32, ty: i32, protocol: i32) -> Result<i32, Errno>;
    fn bind(&self, fd: i32, addr: SocketAddr) -> Result<(), Errno>;
    fn listen(&self, fd: i32, backlog: i32) -> Result<(), Errno>;
    fn accept(&self, fd: i32) -> Result<(i32, SocketAddr), Errno>;
    fn connect(&self, fd: i32, addr: SocketAddr) -> Result<(), Errno>;
    /// `recv`/`read`/`readv`/`recvfrom`/`recvmsg`: bytes read, and the sender's
    /// address where the socket has one to give.
    fn recv(
        &self,
        fd: i32,
        buf: &mut [u8],
        flags: i32,
    ) -> Result<(usize, Option<SocketAddr>), Errno>;
    /// `send`/`write`/`writev`/`sendto`/`sendmsg`.
    fn send(&self, fd: i32, buf: &[u8], flags: i32, to: Option<SocketAddr>)
        -> Result<usize, Errno>;
    fn fcntl(&self, fd: i32, cmd: i32, arg: i64) -> Result<i32, Errno>;
    /// An `ioctl` whose answer is an `int` written where its argument points
    /// (`FIONREAD`, …).
    fn ioctl(&self, fd: i32, request: u64) -> Result<i32, Errno>;
    fn close(&self, fd: i32) -> Result<(), Errno>;
    fn shutdown(&self, fd: i32, how: i32) -> Result<(), Errno>;
    /// Fills `val` (as long as the caller's buffer) and says how much it wrote.
    fn getsockopt(&self, fd: i32, level: i32, name: i32, val: &mut [u8]) -> Result<usize, Errno>;
    fn setsockopt(&self, fd: i32, level: i32, name: i32, val: &[u8]) -> Result<(), Errno>;
    /// Sets each entry's `revents`; the number of entries with any.
    fn poll(&self, fds: &mut [PollFd], timeout_ms: i32) -> Result<usize, Errno>;
    /// A packet (an IP datagram, no link header) for the stack.
    fn netdev_send(&self, packet: &[u8]) -> Result<(), Errno>;
    /// The next packet the stack sent (an IP datagram) into `buf`: its length and
    /// when it was sent (microseconds, on [`Host::now_usecs`]'s clock); `None`
    /// when there is none to give.
    fn netdev_receive(&self, buf: &mut [u8]) -> Result<Option<(usize, i64)>, Errno>;
    fn usleep(&self, usecs: u64);
    /// The stack's clock, in microseconds.
    fn now_usecs(&self) -> i64;
    /// `epoll_create1` (`epoll_create`'s size is only checked, as Linux does).
    fn epoll_create1(&self, _flags: i32) -> Result<i32, Errno> {
        Err(libc::ENOSYS)
    }
    /// `epoll_ctl`; `ev` is `None` for `EPOLL_CTL_DEL` without an event.
    fn epoll_ctl(
        &self,
        _epfd: i32,
        _op: i32,
        _fd: i32,
        _ev: Option<EpollEvent>,
    ) -> Result<(), Errno> {
        Err(libc::ENOSYS)
    }
    /// `epoll_wait`: at most `max` ready events.
    fn epoll_wait(
        &self,
        _epfd: i32,
        _max: usize,
        _timeout_ms: i32,
    ) -> Result<Vec<EpollEvent>, Errno> {
        Err(libc::ENOSYS)
    }
    /// `pipe`: the read end and the write end.
    fn pipe(&self) -> Result<(i32, i32), Errno> {
        Err(libc::ENOSYS)
    }
}

type Ud = *mut c_void;
type Sockaddr = *const libc::sockaddr;

/// `struct packetdrill_interface`, field for field.
#[repr(C)]
pub struct Interface {
    pub userdata: Ud,
    pub free: Option<unsafe extern "C" fn(Ud)>,
    pub socket: Option<unsafe extern "C" fn(Ud, c_int, c_int, c_int) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(Ud, c_int, Sockaddr, libc::socklen_t) -> c_int>,
    pub listen: Option<unsafe extern "C" fn(Ud, c_int, c_int) -> c_int>,
    pub accept:
        Option<unsafe extern "C" fn(Ud, c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> c_int>,
    pub connect: Option<unsafe extern "C" fn(Ud, c_int, Sockaddr, libc::socklen_t) -> c_int>,
    pub read: Option<unsafe extern "C" fn(Ud, c_int, *mut c_void, usize) -> isize>,
    pub readv: Option<unsafe extern "C" fn(Ud, c_int, *const libc::iovec, c_int) -> isize>,
    pub recv: Option<unsafe extern "C" fn(Ud, c_int, *mut c_void, usize, c_int) -> isize>,
    pub recvfrom: Option<
        unsafe extern "C" fn(
            Ud,
            c_int,
            *mut c_void,
            usize,
            c_int,
            *mut libc::sockaddr,
            *mut libc::socklen_t,
        ) -> isize,
    >,
    pub recvmsg: Option<unsafe extern "C" fn(Ud, c_int, *mut libc::msghdr, c_int) -> isize>,
    pub write: Option<unsafe extern "C" fn(Ud, c_int, *const c_void, usize) -> isize>,
    pub writev: Option<unsafe extern "C" fn(Ud, c_int, *const libc::iovec, c_int) -> isize>,
    pub send: Option<unsafe extern "C" fn(Ud, c_int, *const c_void, usize, c_int) -> isize>,
    pub sendto: Option<
        unsafe extern "C" fn(
            Ud,
            c_int,
            *const c_void,
            usize,
            c_int,
            Sockaddr,
            libc::socklen_t,
        ) -> isize,
    >,
    pub sendmsg: Option<unsafe extern "C" fn(Ud, c_int, *const libc::msghdr, c_int) -> isize>,
    pub fcntl: Option<unsafe extern "C" fn(Ud, c_int, c_int, c_long) -> c_int>,
    pub ioctl: Option<unsafe extern "C" fn(Ud, c_int, c_ulong, *mut c_void) -> c_int>,
    pub close: Option<unsafe extern "C" fn(Ud, c_int) -> c_int>,
    pub shutdown: Option<unsafe extern "C" fn(Ud, c_int, c_int) -> c_int>,
    pub getsockopt: Option<
        unsafe extern "C" fn(Ud, c_int, c_int, c_int, *mut c_void, *mut libc::socklen_t) -> c_int,
    >,
    pub setsockopt: Option<
        unsafe extern "C" fn(Ud, c_int, c_int, c_int, *const c_void, libc::socklen_t) -> c_int,
    >,
    pub poll: Option<unsafe extern "C" fn(Ud, *mut libc::pollfd, libc::nfds_t, c_int) -> c_int>,
    pub netdev_send: Option<unsafe extern "C" fn(Ud, *const c_void, usize) -> c_int>,
    pub netdev_receive:
        Option<unsafe extern "C" fn(Ud, *mut c_void, *mut usize, *mut c_longlong) -> c_int>,
    pub usleep: Option<unsafe extern "C" fn(Ud, c_uint) -> c_int>,
    pub gettimeofday: Option<unsafe extern "C" fn(Ud, *mut libc::timeval, *mut c_void) -> c_int>,
    pub epoll_create: Option<unsafe extern "C" fn(Ud, c_int) -> c_int>,
    pub epoll_ctl:
        Option<unsafe extern "C" fn(Ud, c_int, c_int, c_int, *mut libc::epoll_event) -> c_int>,
    pub epoll_wait:
        Option<unsafe extern "C" fn(Ud, c_int, *mut libc::epoll_event, c_int, c_int) -> c_int>,
    pub pipe: Option<unsafe extern "C" fn(Ud, *mut c_int) -> c_int>,
    pub splice: Option<
        unsafe extern "C" fn(
            Ud,
            c_int,
            *mut libc::loff_t,
            c_int,
            *mut libc::loff_t,
            usize,
            c_uint,
        ) -> isize,
    >,
    /// `sendfile(out_fd, in_fd, offset, count)`: `in_fd` is a file of the real
    /// system (packetdrill's `open` is not the stack's), `out_fd` the stack's.
    /// Added by `scripts/packetdrill.patch`.
    pub sendfile: Option<unsafe extern "C" fn(Ud, c_int, c_int, *mut libc::off_t, usize) -> isize>,
}

impl std::fmt::Debug for Interface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interface")
            .field("userdata", &self.userdata)
            .finish_non_exhaustive()
    }
}

/// Fills packetdrill's table with trampolines to `host` (what
/// `packetdrill_interface_init` does); `make` gets the `--so_flags` string.
///
/// # Safety
/// `ifc` must point to a writable `struct packetdrill_interface`, and `flags` be
/// null or a NUL-terminated string, as packetdrill passes them.
pub unsafe fn install<H: Host>(
    flags: *const c_char,
    ifc: *mut Interface,
    make: impl FnOnce(&str) -> H,
) {
    let flags = if flags.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's contract: a NUL-terminated string.
        unsafe { CStr::from_ptr(flags) }
            .to_string_lossy()
            .into_owned()
    };
    let host: Box<H> = Box::new(make(&flags));
    let table = Interface {
        userdata: Box::into_raw(host).cast(),
        free: Some(free::<H>),
        socket: Some(socket::<H>),
        bind: Some(bind::<H>),
        listen: Some(listen::<H>),
        accept: Some(accept::<H>),
        connect: Some(connect::<H>),
        read: Some(read::<H>),
        readv: Some(readv::<H>),
        recv: Some(recv::<H>),
        recvfrom: Some(recvfrom::<H>),
        recvmsg: Some(recvmsg::<H>),
        write: Some(write::<H>),
        writev: Some(writev::<H>),
        send: Some(send::<H>),
        sendto: Some(sendto::<H>),
        sendmsg: Some(sendmsg::<H>),
        fcntl: Some(fcntl::<H>),
        ioctl: Some(ioctl::<H>),
        close: Some(close::<H>),
        shutdown: Some(shutdown::<H>),
        getsockopt: Some(getsockopt::<H>),
        setsockopt: Some(setsockopt::<H>),
        poll: Some(poll::<H>),
        netdev_send: Some(netdev_send::<H>),
        netdev_receive: Some(netdev_receive::<H>),
        usleep: Some(usleep::<H>),
        gettimeofday: Some(gettimeofday::<H>),
        epoll_create: Some(epoll_create::<H>),
        epoll_ctl: Some(epoll_ctl::<H>),
        epoll_wait: Some(epoll_wait::<H>),
        pipe: Some(pipe::<H>),
        splice: Some(enosys_splice),
        sendfile: Some(sendfile::<H>),
    };
    // SAFETY: the caller's contract: `ifc` is writable and ours to fill.
    unsafe { ifc.write(table) };
}

/// Defines `packetdrill_interface_init`, the symbol packetdrill looks up in the
/// shared object, over `make`, a `fn(&str) -> H` from the `--so_flags` string to
/// a [`Host`]. Written here so that the entry point's `unsafe` stays in this crate:
/// the crate that builds the shared object says only `dev::packetdrill_entry!(…)`.
#[macro_export]
macro_rules! packetdrill_entry {
    ($make:path) => {
        /// packetdrill's entry point: fills its interface table.
        ///
        /// # Safety
        /// Called by packetdrill with a NUL-terminated flags string (or null) and
        /// its own `struct packetdrill_interface` to fill.
        #[no_mangle]
        pub unsafe extern "C" fn packetdrill_interface_init(
            flags: *const ::std::ffi::c_char,
            ifc: *mut $crate::packetdrill::Interface,
        ) {
            // SAFETY: packetdrill's contract, passed on unchanged.
            unsafe { $crate::packetdrill::install(flags, ifc, $make) };
        }
    };
}

fn set_errno(e: Errno) {
    // SAFETY: `__errno_location` gives this thread's errno, always valid to write.
    unsafe { *libc::__errno_location() = e };
}

fn ret<T: Into<i64>>(r: Result<T, Errno>) -> i64 {
    match r {
        Ok(v) => v.into(),
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// # Safety
/// `ud` is the `userdata` [`install`] made for `H`.
unsafe fn host<'a, H: Host>(ud: Ud) -> &'a H {
    // SAFETY: the caller's contract: `ud` is the `Box<H>` `install` leaked, alive
    // until `free`.
    unsafe { &*(ud as *const H) }
}

/// A socket address from C, or `EINVAL`/`EAFNOSUPPORT`.
///
/// # Safety
/// `sa` is null or points to `len` readable bytes.
unsafe fn sockaddr_in(sa: Sockaddr, len: libc::socklen_t) -> Result<SocketAddr, Errno> {
    if sa.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: at least the family is readable (checked above).
    let family = c_int::from(unsafe { (*sa).sa_family });
    match family {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: long enough for a sockaddr_in; read unaligned to be safe.
            let s: libc::sockaddr_in = unsafe { std::ptr::read_unaligned(sa.cast()) };
            Ok(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
                u16::from_be(s.sin_port),
            )))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: long enough for a sockaddr_in6.
            let s: libc::sockaddr_in6 = unsafe { std::ptr::read_unaligned(sa.cast()) };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(s.sin6_addr.s6_addr),
                u16::from_be(s.sin6_port),
                u32::from_be(s.sin6_flowinfo),
                s.sin6_scope_id,
            )))
        }
        libc::AF_INET | libc::AF_INET6 => Err(libc::EINVAL),
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// Writes `a` where a C caller asked for an address (`accept`, `recvfrom`): at
/// most `*len` bytes, `*len` set to the address's size.
///
/// # Safety
/// `sa` is null, or `len` points to the size of the writable buffer `sa`.
unsafe fn sockaddr_out(a: SocketAddr, sa: *mut libc::sockaddr, len: *mut libc::socklen_t) {
    if sa.is_null() || len.is_null() {
        return;
    }
    let mut buf = [0u8; std::mem::size_of::<libc::sockaddr_in6>()];
    let n = match a {
        SocketAddr::V4(v) => {
            let s = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            let n = std::mem::size_of::<libc::sockaddr_in>();
            // SAFETY: `buf` holds a sockaddr_in6, larger than a sockaddr_in.
            unsafe { std::ptr::write_unaligned(buf.as_mut_ptr().cast(), s) };
            n
        }
        SocketAddr::V6(v) => {
            let s = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v.port().to_be(),
                sin6_flowinfo: v.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v.ip().octets(),
                },
                sin6_scope_id: v.scope_id(),
            };
            // SAFETY: `buf` is exactly a sockaddr_in6's size.
            unsafe { std::ptr::write_unaligned(buf.as_mut_ptr().cast(), s) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: the caller's contract: `*len` bytes at `sa` are writable.
    unsafe {
        let room = (*len as usize).min(n);
        std::ptr::copy_nonoverlapping(buf.as_ptr(), sa.cast::<u8>(), room);
        *len = n as libc::socklen_t;
    }
}

/// A null buffer with a length: `EFAULT`, as the kernel answers (a null
/// pointer is the one bad address the stack can tell).
fn fault(p: *const c_void, n: usize) -> Result<(), Errno> {
    if p.is_null() && n > 0 {
        Err(libc::EFAULT)
    } else {
        Ok(())
    }
}

/// # Safety
/// `p` is null with `n` 0, or points to `n` readable bytes.
unsafe fn bytes<'a>(p: *const c_void, n: usize) -> &'a [u8] {
    if p.is_null() || n == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(p.cast(), n) }
}

/// # Safety
/// `p` is null with `n` 0, or points to `n` writable bytes.
unsafe fn bytes_mut<'a>(p: *mut c_void, n: usize) -> &'a mut [u8] {
    if p.is_null() || n == 0 {
        return &mut [];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(p.cast(), n) }
}

/// The iovecs of a C call, as slices.
///
/// # Safety
/// `iov` points to `n` iovecs, each naming readable (and, for reads, writable)
/// memory.
unsafe fn iovecs<'a>(iov: *const libc::iovec, n: c_int) -> Result<&'a [libc::iovec], Errno> {
    if !(0..=1024).contains(&n) || (iov.is_null() && n > 0) {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: the caller's contract.
    let v = unsafe { std::slice::from_raw_parts(iov, n as usize) };
    for x in v {
        fault(x.iov_base, x.iov_len)?;
    }
    Ok(v)
}

unsafe fn gather(v: &[libc::iovec]) -> Vec<u8> {
    let mut out = Vec::new();
    for x in v {
        // SAFETY: each iovec names readable memory (the caller's contract).
        out.extend_from_slice(unsafe { bytes(x.iov_base, x.iov_len) });
    }
    out
}

unsafe fn scatter(v: &[libc::iovec], mut data: &[u8]) {
    for x in v {
        let n = x.iov_len.min(data.len());
        // SAFETY: each iovec names writable memory (the caller's contract).
        unsafe { bytes_mut(x.iov_base, n) }.copy_from_slice(&data[..n]);
        data = &data[n..];
    }
}

unsafe extern "C" fn free<H: Host>(ud: Ud) {
    if !ud.is_null() {
        // SAFETY: `ud` is the Box<H> `install` leaked; packetdrill frees it once.
        drop(unsafe { Box::from_raw(ud as *mut H) });
    }
}

unsafe extern "C" fn socket<H: Host>(ud: Ud, d: c_int, t: c_int, p: c_int) -> c_int {
    // SAFETY: packetdrill passes back the userdata `install` set.
    ret(unsafe { host::<H>(ud) }.socket(d, t, p)) as c_int
}

unsafe extern "C" fn bind<H: Host>(ud: Ud, fd: c_int, sa: Sockaddr, len: libc::socklen_t) -> c_int {
    // SAFETY: packetdrill's pointers are valid for the call (bind(2)'s contract).
    let r = unsafe { sockaddr_in(sa, len) }.and_then(|a| unsafe { host::<H>(ud) }.bind(fd, a));
    ret(r.map(|()| 0)) as c_int
}

unsafe extern "C" fn listen<H: Host>(ud: Ud, fd: c_int, backlog: c_int) -> c_int {
    // SAFETY: as for `socket`.
    ret(unsafe { host::<H>(ud) }.listen(fd, backlog).map(|()| 0)) as c_int
}

unsafe extern "C" fn accept<H: Host>(
    ud: Ud,
    fd: c_int,
    sa: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> c_int {
    // SAFETY: as for `socket`.
    let r = unsafe { host::<H>(ud) }.accept(fd).map(|(nfd, peer)| {
        // SAFETY: accept(2)'s contract: `sa` is null or `*len` bytes writable.
        unsafe { sockaddr_out(peer, sa, len) };
        nfd
    });
    ret(r) as c_int
}

unsafe extern "C" fn connect<H: Host>(
    ud: Ud,
    fd: c_int,
    sa: Sockaddr,
    len: libc::socklen_t,
) -> c_int {
    // SAFETY: as for `bind`.
    let r = unsafe { sockaddr_in(sa, len) }.and_then(|a| unsafe { host::<H>(ud) }.connect(fd, a));
    ret(r.map(|()| 0)) as c_int
}

unsafe extern "C" fn read<H: Host>(ud: Ud, fd: c_int, buf: *mut c_void, n: usize) -> isize {
    // SAFETY: read(2) is recv(2) without flags, under the same contract.
    unsafe { recv::<H>(ud, fd, buf, n, 0) }
}

unsafe extern "C" fn recv<H: Host>(
    ud: Ud,
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    fl: c_int,
) -> isize {
    // SAFETY: recv(2) is recvfrom(2) without an address, under the same contract.
    unsafe {
        recvfrom::<H>(
            ud,
            fd,
            buf,
            n,
            fl,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
}

unsafe extern "C" fn recvfrom<H: Host>(
    ud: Ud,
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    fl: c_int,
    sa: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> isize {
    if let Err(e) = fault(buf.cast_const(), n) {
        return ret::<i64>(Err(e)) as isize;
    }
    // SAFETY: as for `read` and `accept`.
    let b = unsafe { bytes_mut(buf, n) };
    let r = unsafe { host::<H>(ud) }.recv(fd, b, fl).map(|(k, from)| {
        if let Some(a) = from {
            // SAFETY: recvfrom(2)'s contract.
            unsafe { sockaddr_out(a, sa, len) };
        }
        k as i64
    });
    ret(r) as isize
}

unsafe extern "C" fn readv<H: Host>(ud: Ud, fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    // SAFETY: readv(2)'s contract.
    let r = unsafe { iovecs(iov, n) }.and_then(|v| unsafe { recv_iov::<H>(ud, fd, v, 0) });
    ret(r.map(|(k, _)| k as i64)) as isize
}

/// `recv` into a scatter list: bytes read, and the sender where there is one.
///
/// # Safety
/// `ud` as for [`host`]; each iovec names writable memory.
unsafe fn recv_iov<H: Host>(
    ud: Ud,
    fd: c_int,
    v: &[libc::iovec],
    fl: c_int,
) -> Result<(usize, Option<SocketAddr>), Errno> {
    let total: usize = v.iter().map(|x| x.iov_len).sum();
    let mut tmp = vec![0u8; total];
    // SAFETY: the caller's contract.
    let (k, from) = unsafe { host::<H>(ud) }.recv(fd, &mut tmp, fl)?;
    // SAFETY: the caller's contract.
    unsafe { scatter(v, &tmp[..k]) };
    Ok((k, from))
}

unsafe extern "C" fn recvmsg<H: Host>(
    ud: Ud,
    fd: c_int,
    msg: *mut libc::msghdr,
    fl: c_int,
) -> isize {
    if msg.is_null() {
        return ret::<i64>(Err(libc::EINVAL)) as isize;
    }
    // SAFETY: recvmsg(2)'s contract: `msg` is a valid msghdr with valid iovecs.
    let m = unsafe { &mut *msg };
    let r = unsafe { iovecs(m.msg_iov, m.msg_iovlen as c_int) }.and_then(|v| {
        // SAFETY: as above.
        let (k, from) = unsafe { recv_iov::<H>(ud, fd, v, fl) }?;
        match from {
            Some(a) if !m.msg_name.is_null() => {
                // SAFETY: `msg_name` holds `msg_namelen` writable bytes.
                unsafe { sockaddr_out(a, m.msg_name.cast(), &mut m.msg_namelen) }
            }
            _ => m.msg_namelen = 0,
        }
        m.msg_controllen = 0;
        m.msg_flags = 0;
        Ok(k as i64)
    });
    ret(r) as isize
}

unsafe extern "C" fn write<H: Host>(ud: Ud, fd: c_int, buf: *const c_void, n: usize) -> isize {
    // SAFETY: write(2) is send(2) without flags, under the same contract.
    unsafe { send::<H>(ud, fd, buf, n, 0) }
}

unsafe extern "C" fn send<H: Host>(
    ud: Ud,
    fd: c_int,
    buf: *const c_void,
    n: usize,
    fl: c_int,
) -> isize {
    // SAFETY: send(2) is sendto(2) without an address, under the same contract.
    unsafe { sendto::<H>(ud, fd, buf, n, fl, std::ptr::null(), 0) }
}

unsafe extern "C" fn sendto<H: Host>(
    ud: Ud,
    fd: c_int,
    buf: *const c_void,
    n: usize,
    fl: c_int,
    sa: Sockaddr,
    len: libc::socklen_t,
) -> isize {
    if let Err(e) = fault(buf, n) {
        return ret::<i64>(Err(e)) as isize;
    }
    // SAFETY: sendto(2)'s contract.
    let b = unsafe { bytes(buf, n) };
    let to = if sa.is_null() {
        Ok(None)
    } else {
        unsafe { sockaddr_in(sa, len) }.map(Some)
    };
    let r = to.and_then(|to| unsafe { host::<H>(ud) }.send(fd, b, fl, to));
    ret(r.map(|k| k as i64)) as isize
}

unsafe extern "C" fn writev<H: Host>(
    ud: Ud,
    fd: c_int,
    iov: *const libc::iovec,
    n: c_int,
) -> isize {
    // SAFETY: writev(2)'s contract.
    let r = unsafe { iovecs(iov, n) }.and_then(|v| {
        let data = unsafe { gather(v) };
        unsafe { host::<H>(ud) }.send(fd, &data, 0, None)
    });
    ret(r.map(|k| k as i64)) as isize
}

unsafe extern "C" fn sendmsg<H: Host>(
    ud: Ud,
    fd: c_int,
    msg: *const libc::msghdr,
    fl: c_int,
) -> isize {
    if msg.is_null() {
        return ret::<i64>(Err(libc::EINVAL)) as isize;
    }
    // SAFETY: sendmsg(2)'s contract: a valid msghdr.
    let m = unsafe { &*msg };
    let to = if m.msg_name.is_null() {
        Ok(None)
    } else {
        unsafe { sockaddr_in(m.msg_name.cast(), m.msg_namelen) }.map(Some)
    };
    let r = to.and_then(|to| {
        let v = unsafe { iovecs(m.msg_iov, m.msg_iovlen as c_int) }?;
        let data = unsafe { gather(v) };
        unsafe { host::<H>(ud) }.send(fd, &data, fl, to)
    });
    ret(r.map(|k| k as i64)) as isize
}

unsafe extern "C" fn fcntl<H: Host>(ud: Ud, fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    // SAFETY: as for `socket`.
    ret(unsafe { host::<H>(ud) }.fcntl(fd, cmd, arg)) as c_int
}

unsafe extern "C" fn ioctl<H: Host>(ud: Ud, fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    // SAFETY: as for `socket`.
    let r = unsafe { host::<H>(ud) }.ioctl(fd, req).map(|v| {
        if !arg.is_null() {
            // SAFETY: ioctl(2)'s contract for the requests answered (an int out).
            unsafe { std::ptr::write_unaligned(arg.cast::<c_int>(), v) };
        }
        0
    });
    ret(r) as c_int
}

unsafe extern "C" fn close<H: Host>(ud: Ud, fd: c_int) -> c_int {
    // SAFETY: as for `socket`.
    ret(unsafe { host::<H>(ud) }.close(fd).map(|()| 0)) as c_int
}

unsafe extern "C" fn shutdown<H: Host>(ud: Ud, fd: c_int, how: c_int) -> c_int {
    // SAFETY: as for `socket`.
    ret(unsafe { host::<H>(ud) }.shutdown(fd, how).map(|()| 0)) as c_int
}

unsafe extern "C" fn getsockopt<H: Host>(
    ud: Ud,
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut libc::socklen_t,
) -> c_int {
    if len.is_null() {
        return ret::<i64>(Err(libc::EFAULT)) as c_int;
    }
    // SAFETY: getsockopt(2)'s contract: `*len` writable bytes at `val`.
    let room = unsafe { *len } as usize;
    let b = unsafe { bytes_mut(val, room) };
    let r = unsafe { host::<H>(ud) }
        .getsockopt(fd, level, name, b)
        .map(|n| {
            // SAFETY: as above.
            unsafe { *len = n.min(room) as libc::socklen_t };
            0
        });
    ret(r) as c_int
}

unsafe extern "C" fn setsockopt<H: Host>(
    ud: Ud,
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: libc::socklen_t,
) -> c_int {
    // SAFETY: setsockopt(2)'s contract: `len` readable bytes at `val`.
    let b = unsafe { bytes(val, len as usize) };
    ret(unsafe { host::<H>(ud) }
        .setsockopt(fd, level, name, b)
        .map(|()| 0)) as c_int
}

unsafe extern "C" fn poll<H: Host>(
    ud: Ud,
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    if n > 1024 || (fds.is_null() && n > 0) {
        return ret::<i64>(Err(libc::EINVAL)) as c_int;
    }
    let c: &mut [libc::pollfd] = if n == 0 {
        &mut []
    } else {
        // SAFETY: poll(2)'s contract: `n` writable pollfds at `fds`.
        unsafe { std::slice::from_raw_parts_mut(fds, n as usize) }
    };
    let mut v: Vec<PollFd> = c
        .iter()
        .map(|p| PollFd {
            fd: p.fd,
            events: p.events,
            revents: 0,
        })
        .collect();
    // SAFETY: as for `socket`.
    let r = unsafe { host::<H>(ud) }.poll(&mut v, timeout).map(|k| {
        for (p, q) in c.iter_mut().zip(&v) {
            p.revents = q.revents;
        }
        k as i64
    });
    ret(r) as c_int
}

unsafe extern "C" fn netdev_send<H: Host>(ud: Ud, buf: *const c_void, n: usize) -> c_int {
    // SAFETY: packetdrill passes `n` readable bytes.
    let b = unsafe { bytes(buf, n) };
    ret(unsafe { host::<H>(ud) }.netdev_send(b).map(|()| 0)) as c_int
}

unsafe extern "C" fn netdev_receive<H: Host>(
    ud: Ud,
    buf: *mut c_void,
    count: *mut usize,
    usecs: *mut c_longlong,
) -> c_int {
    if count.is_null() {
        return -1;
    }
    // SAFETY: packetdrill passes a buffer of `*count` bytes and places for the
    // length and the time.
    let b = unsafe { bytes_mut(buf, *count) };
    match unsafe { host::<H>(ud) }.netdev_receive(b) {
        Ok(Some((n, t))) => {
            // SAFETY: as above.
            unsafe {
                *count = n;
                if !usecs.is_null() {
                    *usecs = t;
                }
            }
            0
        }
        Ok(None) => {
            // SAFETY: as above.
            unsafe { *count = 0 };
            0
        }
        Err(e) => ret::<i64>(Err(e)) as c_int,
    }
}

unsafe extern "C" fn usleep<H: Host>(ud: Ud, us: c_uint) -> c_int {
    // SAFETY: as for `socket`.
    unsafe { host::<H>(ud) }.usleep(u64::from(us));
    0
}

unsafe extern "C" fn gettimeofday<H: Host>(
    ud: Ud,
    tv: *mut libc::timeval,
    _tz: *mut c_void,
) -> c_int {
    // SAFETY: as for `socket`.
    let t = unsafe { host::<H>(ud) }.now_usecs();
    if !tv.is_null() {
        // SAFETY: gettimeofday(2)'s contract: `tv` is writable.
        unsafe {
            (*tv).tv_sec = (t / 1_000_000) as libc::time_t;
            (*tv).tv_usec = (t % 1_000_000) as libc::suseconds_t;
        }
    }
    0
}

unsafe extern "C" fn epoll_create<H: Host>(ud: Ud, size: c_int) -> c_int {
    // Linux: the size only has to be positive.
    if size <= 0 {
        return ret::<i64>(Err(libc::EINVAL)) as c_int;
    }
    // SAFETY: `ud` is the host `install` made.
    ret(unsafe { host::<H>(ud) }.epoll_create1(0)) as c_int
}

unsafe extern "C" fn epoll_ctl<H: Host>(
    ud: Ud,
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut libc::epoll_event,
) -> c_int {
    let e = if ev.is_null() {
        None
    } else {
        // SAFETY: a non-null event points to one `epoll_event` (packed on
        // x86-64, so read unaligned).
        let e: libc::epoll_event = unsafe { std::ptr::read_unaligned(ev) };
        Some(EpollEvent {
            events: e.events,
            data: e.u64,
        })
    };
    if e.is_none() && op != libc::EPOLL_CTL_DEL {
        return ret::<i64>(Err(libc::EFAULT)) as c_int;
    }
    // SAFETY: `ud` is the host `install` made.
    ret(unsafe { host::<H>(ud) }
        .epoll_ctl(epfd, op, fd, e)
        .map(|()| 0)) as c_int
}

unsafe extern "C" fn epoll_wait<H: Host>(
    ud: Ud,
    epfd: c_int,
    evs: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    if max <= 0 || max > 1 << 16 {
        return ret::<i64>(Err(libc::EINVAL)) as c_int;
    }
    if evs.is_null() {
        return ret::<i64>(Err(libc::EFAULT)) as c_int;
    }
    // SAFETY: `ud` is the host `install` made.
    let r = unsafe { host::<H>(ud) }
        .epoll_wait(epfd, max as usize, timeout)
        .map(|v| {
            for (i, e) in v.iter().take(max as usize).enumerate() {
                let out = libc::epoll_event {
                    events: e.events,
                    u64: e.data,
                };
                // SAFETY: the caller's array holds `max` events; `i < max`.
                unsafe { std::ptr::write_unaligned(evs.add(i), out) };
            }
            v.len().min(max as usize) as i64
        });
    ret(r) as c_int
}

unsafe extern "C" fn pipe<H: Host>(ud: Ud, fds: *mut c_int) -> c_int {
    if fds.is_null() {
        return ret::<i64>(Err(libc::EFAULT)) as c_int;
    }
    // SAFETY: `ud` is the host `install` made.
    let r = unsafe { host::<H>(ud) }.pipe().map(|(r, w)| {
        // SAFETY: `pipe(2)`'s argument is an array of two ints.
        unsafe {
            *fds = r;
            *fds.add(1) = w;
        }
        0
    });
    ret(r) as c_int
}

/// The most `sendfile` reads from the file at a time.
const SENDFILE_CHUNK: usize = 1 << 20;

unsafe extern "C" fn sendfile<H: Host>(
    ud: Ud,
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut libc::off_t,
    count: usize,
) -> isize {
    // Where to read: `*offset`, or the file's own position (which then moves).
    let pos = if offset.is_null() {
        // SAFETY: lseek on a descriptor of the real system; a bad one fails.
        unsafe { libc::lseek(in_fd, 0, libc::SEEK_CUR) }
    } else {
        // SAFETY: a non-null offset points to an off_t (sendfile(2)).
        unsafe { *offset }
    };
    if pos < 0 {
        return ret::<i64>(Err(libc::EBADF)) as isize;
    }
    let mut data = vec![0u8; count.min(SENDFILE_CHUNK)];
    // SAFETY: `data` is writable for its length; pread fails on a bad fd.
    let n = unsafe { libc::pread(in_fd, data.as_mut_ptr().cast(), data.len(), pos) };
    if n < 0 {
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        return ret::<i64>(Err(e)) as isize;
    }
    data.truncate(n as usize);
    // SAFETY: `ud` is the host `install` made.
    let r = unsafe { host::<H>(ud) }
        .send(out_fd, &data, 0, None)
        .map(|k| {
            let end = pos + k as libc::off_t;
            if offset.is_null() {
                // SAFETY: as above.
                unsafe { libc::lseek(in_fd, end, libc::SEEK_SET) };
            } else {
                // SAFETY: as above.
                unsafe { *offset = end };
            }
            k as i64
        });
    ret(r) as isize
}

unsafe extern "C" fn enosys_splice(
    _: Ud,
    _: c_int,
    _: *mut libc::loff_t,
    _: c_int,
    _: *mut libc::loff_t,
    _: usize,
    _: c_uint,
) -> isize {
    set_errno(libc::ENOSYS);
    -1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A host that records what it was asked and answers from a script.
    #[derive(Default)]
    struct Fake {
        calls: Mutex<Vec<String>>,
    }

    impl Fake {
        fn log(&self, s: String) {
            self.calls.lock().unwrap().push(s);
        }
    }

    impl Host for Fake {
        fn socket(&self, d: i32, t: i32, p: i32) -> Result<i32, Errno> {
            self.log(format!("socket {d} {t} {p}"));
            Ok(3)
        }
        fn bind(&self, fd: i32, a: SocketAddr) -> Result<(), Errno> {
            self.log(format!("bind {fd} {a}"));
            Ok(())
        }
        fn listen(&self, _: i32, _: i32) -> Result<(), Errno> {
            Err(libc::EOPNOTSUPP)
        }
        fn accept(&self, _: i32) -> Result<(i32, SocketAddr), Errno> {
            Ok((4, "[2001:2::2]:8080".parse().unwrap()))
        }
        fn connect(&self, fd: i32, a: SocketAddr) -> Result<(), Errno> {
            self.log(format!("connect {fd} {a}"));
            Err(libc::EINPROGRESS)
        }
        fn recv(
            &self,
            _: i32,
            buf: &mut [u8],
            _: i32,
        ) -> Result<(usize, Option<SocketAddr>), Errno> {
            let n = buf.len().min(5);
            buf[..n].copy_from_slice(&b"hello"[..n]);
            Ok((n, Some("198.18.0.2:9".parse().unwrap())))
        }
        fn send(&self, _: i32, buf: &[u8], _: i32, to: Option<SocketAddr>) -> Result<usize, Errno> {
            self.log(format!("send {:?} {to:?}", String::from_utf8_lossy(buf)));
            Ok(buf.len())
        }
        fn fcntl(&self, fd: i32, cmd: i32, arg: i64) -> Result<i32, Errno> {
            self.log(format!("fcntl {fd} {cmd} {arg}"));
            Ok(2)
        }
        fn ioctl(&self, _: i32, _: u64) -> Result<i32, Errno> {
            Ok(1234)
        }
        fn close(&self, _: i32) -> Result<(), Errno> {
            Err(libc::EBADF)
        }
        fn shutdown(&self, _: i32, _: i32) -> Result<(), Errno> {
            Ok(())
        }
        fn getsockopt(&self, _: i32, _: i32, _: i32, val: &mut [u8]) -> Result<usize, Errno> {
            let v = 7i32.to_ne_bytes();
            val[..4].copy_from_slice(&v);
            Ok(4)
        }
        fn setsockopt(&self, _: i32, l: i32, n: i32, val: &[u8]) -> Result<(), Errno> {
            self.log(format!("setsockopt {l} {n} {val:?}"));
            Ok(())
        }
        fn poll(&self, fds: &mut [PollFd], _: i32) -> Result<usize, Errno> {
            fds[0].revents = fds[0].events & 1;
            Ok(1)
        }
        fn netdev_send(&self, p: &[u8]) -> Result<(), Errno> {
            self.log(format!("netdev_send {}", p.len()));
            Ok(())
        }
        fn netdev_receive(&self, buf: &mut [u8]) -> Result<Option<(usize, i64)>, Errno> {
            buf[..3].copy_from_slice(&[0x45, 0, 0]);
            Ok(Some((3, 1_500_000)))
        }
        fn usleep(&self, us: u64) {
            self.log(format!("usleep {us}"));
        }
        fn now_usecs(&self) -> i64 {
            3_000_250
        }
    }

    fn errno() -> c_int {
        std::io::Error::last_os_error().raw_os_error().unwrap()
    }

    #[test]
    fn each_entry_reaches_the_host_with_its_arguments_and_answers_as_c_does() {
        let mut ifc = std::mem::MaybeUninit::<Interface>::uninit();
        // SAFETY: `ifc` is writable; no flags.
        unsafe { install(std::ptr::null(), ifc.as_mut_ptr(), |_| Fake::default()) };
        // SAFETY: `install` filled every field.
        let ifc = unsafe { ifc.assume_init() };
        let ud = ifc.userdata;
        // SAFETY: every call below passes valid C arguments, as packetdrill does.
        unsafe {
            assert_eq!((ifc.socket.unwrap())(ud, 2, 1, 6), 3);
            let sa = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: 8080u16.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(Ipv4Addr::new(198, 18, 0, 1)).to_be(),
                },
                sin_zero: [0; 8],
            };
            let len = std::mem::size_of_val(&sa) as libc::socklen_t;
            assert_eq!(
                (ifc.bind.unwrap())(ud, 3, (&sa as *const libc::sockaddr_in).cast(), len),
                0
            );
            // Too short an address: EINVAL, the host not called.
            assert_eq!(
                (ifc.bind.unwrap())(ud, 3, (&sa as *const libc::sockaddr_in).cast(), 4),
                -1
            );
            assert_eq!(errno(), libc::EINVAL);
            assert_eq!(
                (ifc.connect.unwrap())(ud, 3, (&sa as *const libc::sockaddr_in).cast(), len),
                -1
            );
            assert_eq!(errno(), libc::EINPROGRESS);
            assert_eq!((ifc.listen.unwrap())(ud, 3, 5), -1);
            assert_eq!(errno(), libc::EOPNOTSUPP);
            let mut peer = std::mem::zeroed::<libc::sockaddr_in6>();
            let mut plen = std::mem::size_of_val(&peer) as libc::socklen_t;
            assert_eq!(
                (ifc.accept.unwrap())(
                    ud,
                    3,
                    (&mut peer as *mut libc::sockaddr_in6).cast(),
                    &mut plen
                ),
                4
            );
            assert_eq!(plen as usize, std::mem::size_of::<libc::sockaddr_in6>());
            assert_eq!(u16::from_be(peer.sin6_port), 8080);
            assert_eq!(
                Ipv6Addr::from(peer.sin6_addr.s6_addr),
                "2001:2::2".parse::<Ipv6Addr>().unwrap()
            );
            let mut buf = [0u8; 3];
            assert_eq!((ifc.read.unwrap())(ud, 4, buf.as_mut_ptr().cast(), 3), 3);
            assert_eq!(&buf, b"hel");
            let (mut a, mut b) = ([0u8; 2], [0u8; 8]);
            let iov = [
                libc::iovec {
                    iov_base: a.as_mut_ptr().cast(),
                    iov_len: 2,
                },
                libc::iovec {
                    iov_base: b.as_mut_ptr().cast(),
                    iov_len: 8,
                },
            ];
            assert_eq!((ifc.readv.unwrap())(ud, 4, iov.as_ptr(), 2), 5);
            assert_eq!((&a, &b[..3]), (b"he", &b"llo"[..]));
            let msg = b"ping";
            assert_eq!((ifc.write.unwrap())(ud, 4, msg.as_ptr().cast(), 4), 4);
            let iov = [
                libc::iovec {
                    iov_base: b"ab".as_ptr() as *mut c_void,
                    iov_len: 2,
                },
                libc::iovec {
                    iov_base: b"cd".as_ptr() as *mut c_void,
                    iov_len: 2,
                },
            ];
            assert_eq!((ifc.writev.unwrap())(ud, 4, iov.as_ptr(), 2), 4);
            assert_eq!(
                (ifc.fcntl.unwrap())(ud, 3, libc::F_SETFL, libc::O_NONBLOCK as c_long),
                2
            );
            let mut n: c_int = 0;
            assert_eq!(
                (ifc.ioctl.unwrap())(ud, 4, libc::FIONREAD, (&mut n as *mut c_int).cast()),
                0
            );
            assert_eq!(n, 1234);
            assert_eq!((ifc.close.unwrap())(ud, 9), -1);
            assert_eq!(errno(), libc::EBADF);
            let mut v: c_int = 0;
            let mut vlen = 4 as libc::socklen_t;
            assert_eq!(
                (ifc.getsockopt.unwrap())(ud, 4, 6, 1, (&mut v as *mut c_int).cast(), &mut vlen),
                0
            );
            assert_eq!((v, vlen), (7, 4));
            let one: c_int = 1;
            assert_eq!(
                (ifc.setsockopt.unwrap())(ud, 4, 6, 1, (&one as *const c_int).cast(), 4),
                0
            );
            let mut p = [libc::pollfd {
                fd: 4,
                events: libc::POLLIN | libc::POLLOUT,
                revents: 0,
            }];
            assert_eq!((ifc.poll.unwrap())(ud, p.as_mut_ptr(), 1, 0), 1);
            assert_eq!(p[0].revents, libc::POLLIN);
            let pkt = [0x45u8; 20];
            assert_eq!((ifc.netdev_send.unwrap())(ud, pkt.as_ptr().cast(), 20), 0);
            let mut rbuf = [0u8; 64];
            let (mut cnt, mut t) = (64usize, 0 as c_longlong);
            assert_eq!(
                (ifc.netdev_receive.unwrap())(ud, rbuf.as_mut_ptr().cast(), &mut cnt, &mut t),
                0
            );
            assert_eq!((cnt, t, rbuf[0]), (3, 1_500_000, 0x45));
            assert_eq!((ifc.usleep.unwrap())(ud, 250), 0);
            let mut tv = std::mem::zeroed::<libc::timeval>();
            assert_eq!(
                (ifc.gettimeofday.unwrap())(ud, &mut tv, std::ptr::null_mut()),
                0
            );
            assert_eq!((tv.tv_sec, tv.tv_usec), (3, 250));
            assert_eq!((ifc.epoll_create.unwrap())(ud, 1), -1);
            assert_eq!(errno(), libc::ENOSYS);
            let calls = host::<Fake>(ud).calls.lock().unwrap().clone();
            assert_eq!(
                calls,
                [
                    "socket 2 1 6",
                    "bind 3 198.18.0.1:8080",
                    "connect 3 198.18.0.1:8080",
                    "send \"ping\" None",
                    "send \"abcd\" None",
                    "fcntl 3 4 2048",
                    "setsockopt 6 1 [1, 0, 0, 0]",
                    "netdev_send 20",
                    "usleep 250",
                ]
            );
            (ifc.free.unwrap())(ud);
        }
    }
}
