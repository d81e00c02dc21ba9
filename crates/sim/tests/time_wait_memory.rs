//! A connection in TIME_WAIT whose application is gone keeps only its remnant (what
//! answering the peer takes, FreeBSD's `tcptw`): its control block, byte channels and
//! buffers are freed when it enters the state.
//! A counting global allocator watches 200 connections that each carried 20 KB both
//! ways and were closed by the server first (so the server holds the TIME_WAITs).

use dev::mem::WireConfig;
use dev::Duration;
use sim::Sim;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};

#[global_allocator]
static A: dev::alloc_count::CountingAlloc = dev::alloc_count::CountingAlloc;

const CONNS: usize = 200;
const BYTES: usize = 20_000;

#[test]
fn time_wait_connections_hold_no_buffers() {
    let mut s = Sim::new(3);
    let hub = s.add_hub(WireConfig::default());
    let a = s.add_host("a", 1);
    let b = s.add_host("b", 1);
    s.connect(a, hub, "198.18.0.1/24");
    s.connect(b, hub, "198.18.0.2/24");
    let l = s
        .host(b)
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9000), 1024)
        .unwrap();
    l.set_nonblocking(true).unwrap();
    // Resolve addresses before measuring.
    s.run_for(Duration::from_millis(1));
    // Two rounds grow the packet pool (written data travels in jumbo clusters, and
    // the thread caches fill over more than one round) and the tables to their
    // working size; their TIME_WAITs run out (60 s), and a third round is measured.
    for _ in 0..2 {
        round(&mut s, a, &l);
        s.run_for(Duration::from_secs(61));
        assert_eq!(s.host(b).stats().get("tcp.pcbcount"), Some(0));
    }
    let before = dev::alloc_count::live_bytes();
    round(&mut s, a, &l);
    let st = s.host(b).stats();
    assert_eq!(
        st.get("tcp.pcbcount"),
        Some(CONNS as u64),
        "TIME_WAITs on the server"
    );
    let after = dev::alloc_count::live_bytes();
    let per_conn = after.saturating_sub(before) / CONNS as u64;
    eprintln!("{per_conn} bytes of heap per TIME_WAIT connection");
    // A remnant and its table entries: a few hundred bytes when the tables grow,
    // none when earlier rounds grew them. A whole control block was 2.3 KB with its
    // table entries; with the channels and buffers kept too, over 300 KB (grown
    // 256 KiB send and receive buffers, 16 KiB channel chunks).
    assert!(
        per_conn < 512,
        "{per_conn} bytes per TIME_WAIT connection ({before} -> {after})"
    );
}

/// CONNS connections from `a` to the listener, BYTES each way, the server closing
/// first; returns when every server end is in TIME_WAIT.
fn round(s: &mut Sim, a: sim::HostId, l: &net::TcpListener) {
    let data = vec![0x42u8; BYTES];
    let mut clients: Vec<(net::TcpStream, usize, usize)> = (0..CONNS)
        .map(|_| {
            let c = s
                .host(a)
                .tcp_connect_nonblocking(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 9000))
                .unwrap();
            c.set_nonblocking(true).unwrap();
            (c, 0, 0)
        })
        .collect();
    let mut servers: Vec<(net::TcpStream, usize, usize)> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut accepted = 0;
    let done = s.run_until(Duration::from_secs(60), |_| {
        while let Ok((c, _)) = l.accept() {
            c.set_nonblocking(true).unwrap();
            servers.push((c, 0, 0));
            accepted += 1;
        }
        // Both sides send BYTES and read BYTES; the server then closes first.
        let step = |c: &mut (net::TcpStream, usize, usize), buf: &mut [u8]| {
            while c.1 < BYTES {
                match c.0.write(&data[c.1..]) {
                    Ok(n) => c.1 += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("write: {e}"),
                }
            }
            loop {
                match c.0.read(buf) {
                    Ok(0) => return true,
                    Ok(n) => c.2 += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                    Err(e) => panic!("read: {e}"),
                }
            }
        };
        servers.retain_mut(|c| {
            step(c, &mut buf);
            !(c.1 == BYTES && c.2 == BYTES)
        });
        clients.retain_mut(|c| {
            let eof = step(c, &mut buf);
            !(eof && c.2 == BYTES)
        });
        accepted == CONNS && servers.is_empty() && clients.is_empty()
    });
    assert!(
        done,
        "{} clients and {} servers left",
        clients.len(),
        servers.len()
    );
    // Let the last ACKs and FINs land: every server end is then in TIME_WAIT.
    s.run_for(Duration::from_millis(100));
}
