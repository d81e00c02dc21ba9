//! mpstack as packetdrill's stack under test: a shared object packetdrill loads
//! with `--so_filename` (packetdrill is a GPLv2 test tool run beside the project;
//! nothing of it is linked here). One `Stack` in a simulation, in virtual time: the
//! interface's wire ends at a raw port where the packets a script injects go in
//! (`netdev_send`, an Ethernet header put in front) and what the stack sends comes
//! out (`netdev_receive`, with the virtual time it left); `usleep` runs the
//! simulation forward; the socket calls map onto the stack's sockets, each kept
//! non-blocking inside, a blocking call waiting on a condition variable that every
//! step of the simulation signals (packetdrill judges a call blocked when its
//! thread sleeps). Besides sockets it has epoll instances (level, `EPOLLET`,
//! `EPOLLONESHOT`) and pipes, numbered from 100,000 (apart from the real
//! descriptors packetdrill closes itself), and `sendfile` from a real file;
//! `splice` is not there (`ENOSYS`).
//!
//! `--so_flags` (space-separated `key=value`): `local=ADDR` (the stack's address,
//! default 198.18.0.1, or 2001:2::1 when it is IPv6), `remote=ADDR` (packetdrill's,
//! default 198.18.0.2 / 2001:2::2), `prefix=N` (24 / 64), `mtu=N` (1500),
//! `sysctl=PATH` (a Unix socket where the `sysctl` of `scripts/packetdrill/` asks
//! for FreeBSD tunables to be set, [`sysctl`]).
//!
//! `MPSTACK_PD_DEBUG=1` in the environment prints each injected packet and the
//! stack's counters after it, to standard error.
//!
//! The C side (the table, raw pointers, `errno`) is `dev::packetdrill`.
#![forbid(unsafe_code)]

pub mod shim;
pub mod sysctl;

dev::packetdrill_entry!(shim::Shim::from_flags);
