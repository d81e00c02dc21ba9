//! The socket semantics of `TcpStream` that programs rely on, between virtual
//! hosts (IPv4 and IPv6): reads after `shutdown(Read)`, a reset reported once,
//! a close with unread data, blocking writes that queue everything, buffer sizes
//! set after the handshake, and the MSS.

mod common;

use dev::Duration;
use sim::{HostId, Sim};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr};

/// Hosts `a` and `b` on one hub, with addresses of both families; `tcp` their
/// TCP settings.
fn pair(seed: u64, tcp: net::tcp::TcpConfig) -> (Sim, HostId, HostId) {
    let (mut s, a, b, _) = common::hub::pair_on_hub(1, seed, dev::mem::WireConfig::default(), tcp);
    common::hub::add_addresses6(&mut s, a, b);
    // Duplicate address detection.
    s.run_for(Duration::from_secs(3));
    (s, a, b)
}

/// `b`'s address in the family asked for.
fn addr_b(v6: bool, port: u16) -> SocketAddr {
    let ip: IpAddr = if v6 {
        Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2).into()
    } else {
        Ipv4Addr::new(198, 18, 0, 2).into()
    };
    SocketAddr::new(ip, port)
}

/// The unspecified address of the family asked for, for a listener.
fn any(v6: bool, port: u16) -> SocketAddr {
    let ip: IpAddr = if v6 {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    SocketAddr::new(ip, port)
}

/// A connection from `a` to `b`: the listener, the client's end, the server's,
/// both ends non-blocking.
fn connected(
    s: &mut Sim,
    a: HostId,
    b: HostId,
    v6: bool,
    port: u16,
) -> (net::TcpListener, net::TcpStream, net::TcpStream) {
    let l = s.host(b).tcp_listen(any(v6, port), 4).unwrap();
    l.set_nonblocking(true).unwrap();
    let c = s.host(a).tcp_connect_nonblocking(addr_b(v6, port)).unwrap();
    s.run_for(Duration::from_millis(50));
    let (srv, _) = l.accept().unwrap();
    c.set_nonblocking(true).unwrap();
    srv.set_nonblocking(true).unwrap();
    (l, c, srv)
}

fn default_cfg() -> net::tcp::TcpConfig {
    net::tcp::TcpConfig::default()
}

/// Everything `c` has to read now (non-blocking): the bytes, and how it ended.
fn read_all_now(c: &net::TcpStream) -> (usize, std::io::Result<usize>) {
    let (mut got, mut buf) = (0, vec![0u8; 65536]);
    loop {
        match (&*c).read(&mut buf) {
            Ok(0) => return (got, Ok(0)),
            Ok(n) => got += n,
            Err(e) => return (got, Err(e)),
        }
    }
}

/// C3: after `shutdown(Read)` (or `Both`) a read returns 0 at once, blocking or
/// not, what was waiting is dropped, and what arrives later is acknowledged and
/// dropped (the peer is not stalled by a window that never opens). It used to
/// block for ever (non-blocking: `WouldBlock`).
#[test]
fn reads_after_shutdown_read_return_the_end() {
    for v6 in [false, true] {
        for how in [Shutdown::Read, Shutdown::Both] {
            let (mut s, a, b) = pair(7, default_cfg());
            let (_l, c, srv) = connected(&mut s, a, b, v6, 5001);
            (&c).write_all(&[1u8; 1000]).unwrap();
            s.run_for(Duration::from_millis(50));
            assert_eq!(srv.available(), 1000, "v6={v6}");
            srv.shutdown(how).unwrap();
            let mut buf = [0u8; 100];
            assert_eq!((&srv).read(&mut buf).unwrap(), 0, "non-blocking, {how:?}");
            assert_eq!(srv.peek(&mut buf).unwrap(), 0, "peek, {how:?}");
            // Blocking: the end at once (the timeout only keeps a regression from
            // hanging the test).
            srv.set_nonblocking(false).unwrap();
            srv.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            assert_eq!((&srv).read(&mut buf).unwrap(), 0, "blocking, {how:?}");
            // Four receive buffers' worth from the peer all leave its send
            // buffer: acknowledged, and not held.
            let data = vec![7u8; 4 * srv.recv_buffer_size()];
            let mut sent = 0;
            s.run_until(Duration::from_secs(30), |_| {
                while sent < data.len() {
                    match (&c).write(&data[sent..]) {
                        Ok(n) => sent += n,
                        Err(_) => break,
                    }
                }
                sent == data.len()
            });
            assert_eq!(sent, data.len(), "v6={v6} {how:?}: the writer stalled");
            s.run_for(Duration::from_secs(1));
            assert_eq!(srv.available(), 0, "dropped, v6={v6} {how:?}");
            assert_eq!((&srv).read(&mut buf).unwrap(), 0);
        }
    }
}

/// After a reset, a read reports `ConnectionReset` once, then the end of the
/// stream (Linux's and FreeBSD's `so_error`, cleared once reported); a write
/// after that is `BrokenPipe`. It used to report the reset on every read.
#[test]
fn a_reset_is_reported_once() {
    for v6 in [false, true] {
        let (mut s, a, b) = pair(9, default_cfg());
        let (_l, c, srv) = connected(&mut s, a, b, v6, 5002);
        srv.abort();
        s.run_for(Duration::from_millis(50));
        let mut buf = [0u8; 16];
        assert_eq!(
            c.peek(&mut buf).unwrap_err().kind(),
            ErrorKind::ConnectionReset
        );
        assert!(c.pending_error().is_some(), "a peek leaves it");
        let e = (&c).read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "v6={v6}");
        assert_eq!((&c).read(&mut buf).unwrap(), 0, "then the end, v6={v6}");
        assert_eq!((&c).read(&mut buf).unwrap(), 0);
        assert!(c.pending_error().is_none());
        // The cause stays for take_error (what a polling connect asks).
        assert!(c.take_error().unwrap().is_some());
        assert_eq!((&c).write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);

        // A write reports it first just as well; the read after it sees the end.
        let (_l, c, srv) = connected(&mut s, a, b, v6, 5003);
        srv.abort();
        s.run_for(Duration::from_millis(50));
        let e = (&c).write(b"x").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "v6={v6}");
        assert_eq!((&c).read(&mut buf).unwrap(), 0);
    }
}

/// C7: closing with received data unread resets the connection (RFC 9293
/// §3.6.1, RFC 1122 §4.2.2.13, Linux), counted in `tcp.abortonclose`; with
/// `close_unread_rst` off, a FIN, as FreeBSD. With everything read, a FIN.
#[test]
fn closing_with_unread_data_resets() {
    for v6 in [false, true] {
        for rst in [true, false] {
            let cfg = net::tcp::TcpConfig {
                close_unread_rst: rst,
                ..default_cfg()
            };
            let (mut s, a, b) = pair(11, cfg);
            let (_l, c, srv) = connected(&mut s, a, b, v6, 5004);
            (&c).write_all(&[1u8; 1000]).unwrap();
            s.run_for(Duration::from_millis(50));
            assert_eq!(srv.available(), 1000);
            drop(srv);
            s.run_for(Duration::from_millis(50));
            let (_, end) = read_all_now(&c);
            let st = s.host(b).stats().tcp;
            if rst {
                assert_eq!(
                    end.unwrap_err().kind(),
                    ErrorKind::ConnectionReset,
                    "v6={v6}"
                );
                assert_eq!(st.abortonclose, 1);
            } else {
                assert_eq!(end.unwrap(), 0, "a FIN, v6={v6}");
                assert_eq!(st.abortonclose, 0);
            }
            // Read to the end first: a FIN whatever the setting.
            let (_l, c, srv) = connected(&mut s, a, b, v6, 5005);
            (&c).write_all(&[1u8; 1000]).unwrap();
            s.run_for(Duration::from_millis(50));
            assert_eq!(read_all_now(&srv).0, 1000);
            drop(srv);
            s.run_for(Duration::from_millis(50));
            assert_eq!(read_all_now(&c).1.unwrap(), 0, "v6={v6}");
            assert_eq!(s.host(b).stats().tcp.abortonclose, u64::from(rst));
        }
    }
}

/// A blocking write queues all of its buffer, waiting for room as often as it
/// takes (POSIX), instead of returning the part the send buffer took at once
/// (263,000 of 400,000).
#[test]
fn a_blocking_write_queues_everything() {
    for v6 in [false, true] {
        let (mut s, a, b) = pair(13, default_cfg());
        let (_l, c, srv) = connected(&mut s, a, b, v6, 5006);
        c.set_nonblocking(false).unwrap();
        let data: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
        let c = std::sync::Arc::new(c);
        let writer = {
            let (c, data) = (c.clone(), data.clone());
            std::thread::spawn(move || (&*c).write(&data))
        };
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        for _ in 0..200_000 {
            s.run_for(Duration::from_millis(1));
            while let Ok(n) = (&srv).read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            if writer.is_finished() && got.len() == data.len() {
                break;
            }
        }
        let n = writer.join().unwrap().unwrap();
        assert_eq!(n, data.len(), "v6={v6}: one write, all of it");
        assert!(got == data, "v6={v6}: {} bytes arrived", got.len());
    }
}

/// Writes on `c` (non-blocking) while the simulation runs until it takes no
/// more for a while: how much it took.
fn fill(s: &mut Sim, c: &net::TcpStream) -> usize {
    let chunk = vec![3u8; 16384];
    let mut took = 0;
    for _ in 0..200 {
        while let Ok(n) = (&*c).write(&chunk) {
            took += n;
        }
        s.run_for(Duration::from_millis(20));
    }
    took
}

/// `SO_RCVBUF` and `SO_SNDBUF` set after the handshake apply: a larger receive
/// buffer holds (and offers) more, a smaller one less once what was offered is
/// used, and a smaller send buffer takes fewer bytes ahead of the peer. They
/// used to be recorded and not applied.
#[test]
fn buffer_sizes_set_on_an_open_connection_apply() {
    for v6 in [false, true] {
        let (mut s, a, b) = pair(15, default_cfg());
        let (_l, c, srv) = connected(&mut s, a, b, v6, 5007);
        let default = srv.recv_buffer_size();
        srv.set_recv_buffer_size(1 << 20).unwrap();
        assert_eq!(srv.recv_buffer_size(), 1 << 20);
        fill(&mut s, &c);
        let held = srv.available();
        assert!(held > 1_000_000, "v6={v6}: {held} held (default {default})");
        // Smaller: once what was offered is read, no more than the new size.
        srv.set_recv_buffer_size(16384).unwrap();
        for _ in 0..4 {
            let _ = read_all_now(&srv);
            s.run_for(Duration::from_millis(200));
        }
        let held = srv.available();
        assert!(held <= 16384 + 1500, "v6={v6}: {held} held");
        assert_eq!(srv.recv_buffer_size(), 16384, "v6={v6}: the size set");
        // The writer is not stalled by it.
        let before = read_all_now(&srv).0;
        s.run_for(Duration::from_millis(200));
        assert!(before + read_all_now(&srv).0 > 0);

        let (_l, c, srv) = connected(&mut s, a, b, v6, 5008);
        c.set_send_buffer_size(16384).unwrap();
        assert_eq!(c.send_buffer_size(), 16384);
        let took = fill(&mut s, &c);
        let most = srv.recv_buffer_size() + 2 * 16384 + 2 * 1460;
        assert!(took <= most, "v6={v6}: {took} taken, at most {most}");
        assert!(took > srv.recv_buffer_size(), "v6={v6}: {took}");

        // Smaller while the whole default window is still offered: the size
        // set is what it reports at once and after (it used to grow back to
        // the old size, and stay there, while the window offered drained).
        let (_l, c, srv) = connected(&mut s, a, b, v6, 5013);
        let default = srv.recv_buffer_size();
        assert!(default > 8192);
        srv.set_recv_buffer_size(8192).unwrap();
        s.run_for(Duration::from_millis(10));
        assert_eq!(srv.recv_buffer_size(), 8192, "v6={v6}");
        fill(&mut s, &c);
        let _ = read_all_now(&srv);
        s.run_for(Duration::from_millis(200));
        let _ = read_all_now(&srv);
        fill(&mut s, &c);
        assert!(
            srv.available() <= 8192 + 1500,
            "v6={v6}: {}",
            srv.available()
        );
        assert_eq!(srv.recv_buffer_size(), 8192, "v6={v6}");
    }
}

/// `TCP_MAXSEG` before the SYN bounds the MSS offered and used (the peer sends
/// no larger segments either); later it only lowers the one in use; `mss()`
/// answers with the effective one.
#[test]
fn the_mss_is_set_and_read() {
    for v6 in [false, true] {
        let (mut s, a, b) = pair(17, default_cfg());
        let l = s.host(b).tcp_listen(any(v6, 5009), 4).unwrap();
        l.set_nonblocking(true).unwrap();
        let c = s.host(a).tcp_connect_nonblocking(addr_b(v6, 5009)).unwrap();
        c.set_mss(1000).unwrap();
        assert_eq!(c.mss(), 1000);
        s.run_for(Duration::from_millis(50));
        let (srv, _) = l.accept().unwrap();
        s.run_for(Duration::from_millis(10));
        assert_eq!(c.mss(), 1000, "v6={v6}");
        assert_eq!(srv.mss(), 1000, "v6={v6}: the peer takes the MSS offered");
        let full = if v6 { 1440 } else { 1460 };
        let (_l2, c2, srv2) = connected(&mut s, a, b, v6, 5010);
        assert_eq!(c2.mss(), full);
        srv2.set_mss(600).unwrap();
        s.run_for(Duration::from_millis(10));
        assert_eq!(srv2.mss(), 600, "v6={v6}: lowered on the open connection");
        assert_eq!(c2.mss(), full);
        assert_eq!(c2.set_mss(40).unwrap_err().kind(), ErrorKind::InvalidInput);
        // Data in segments of at most 600 bytes all arrive.
        (&srv2).write_all(&[9u8; 6000]).unwrap();
        s.run_for(Duration::from_millis(100));
        assert_eq!(read_all_now(&c2).0, 6000);
    }
}

/// `TCP_MAXSEG` on a listener is inherited by the connections it accepts, from
/// their SYN-ACK on: the MSS offered there, and so the peer's, is the
/// listener's, and so is the accepted end's (Linux's `user_mss`). Set later,
/// it applies to the connections accepted after; those accepted keep theirs.
/// It used to be taken by the packetdrill object only, and applied after
/// `accept`, when the SYN-ACK had offered the route's MSS.
#[test]
fn a_listeners_mss_is_inherited() {
    for v6 in [false, true] {
        let (mut s, a, b) = pair(19, default_cfg());
        let l = s.host(b).tcp_listen(any(v6, 5011), 4).unwrap();
        l.set_nonblocking(true).unwrap();
        let full = if v6 { 1440 } else { 1460 };
        assert_eq!(l.mss(), 1460, "the stack's, before it is set");
        assert_eq!(l.set_mss(40).unwrap_err().kind(), ErrorKind::InvalidInput);
        l.set_mss(900).unwrap();
        assert_eq!(l.mss(), 900);
        let c = s.host(a).tcp_connect_nonblocking(addr_b(v6, 5011)).unwrap();
        s.run_for(Duration::from_millis(50));
        let (srv, _) = l.accept().unwrap();
        s.run_for(Duration::from_millis(10));
        assert_eq!(srv.mss(), 900, "v6={v6}: the accepted end's");
        assert_eq!(c.mss(), 900, "v6={v6}: the SYN-ACK offered it");
        l.set_mss(700).unwrap();
        let c2 = s.host(a).tcp_connect_nonblocking(addr_b(v6, 5011)).unwrap();
        s.run_for(Duration::from_millis(50));
        let (srv2, _) = l.accept().unwrap();
        s.run_for(Duration::from_millis(10));
        assert_eq!((srv2.mss(), c2.mss()), (700, 700), "v6={v6}");
        assert_eq!(srv.mss(), 900, "v6={v6}: accepted before, unchanged");
        // A connection elsewhere keeps the route's.
        let (_l3, c3, srv3) = connected(&mut s, a, b, v6, 5012);
        assert_eq!((c3.mss(), srv3.mss()), (full, full));
        // Data in segments of at most 900 bytes all arrive.
        c.set_nonblocking(true).unwrap();
        srv.set_nonblocking(true).unwrap();
        (&srv).write_all(&[7u8; 9000]).unwrap();
        s.run_for(Duration::from_millis(100));
        assert_eq!(read_all_now(&c).0, 9000);
    }
}
