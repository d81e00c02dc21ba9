//! TCP between virtual hosts: connect, transfer, echo, close, refused connections,
//! with one and two workers and on lossy, reordering links (virtual time).

mod common;
use common::hub::{add_addresses6, pair_on_hub};

use dev::impair::Impairments;
use dev::mem::WireConfig;
use dev::Duration;
use sim::{HostId, Sim};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, n)
}

fn pair(workers: usize, seed: u64, impair: Impairments) -> (Sim, HostId, HostId) {
    pair_on(
        workers,
        seed,
        WireConfig {
            impair,
            ..WireConfig::default()
        },
    )
}

fn pair_on(workers: usize, seed: u64, wire: WireConfig) -> (Sim, HostId, HostId) {
    pair_with(workers, seed, wire, net::tcp::TcpConfig::default())
}

/// Hosts `a` (198.18.0.1) and `b` (198.18.0.2) on one hub with `wire`, each with
/// `workers` workers and the TCP settings `tcp`.
fn pair_with(
    workers: usize,
    seed: u64,
    wire: WireConfig,
    tcp: net::tcp::TcpConfig,
) -> (Sim, HostId, HostId) {
    let (s, a, b, _) = pair_on_hub(workers, seed, wire, tcp);
    (s, a, b)
}

/// A non-blocking listener on `b`'s `port`.
fn listener(s: &mut Sim, b: HostId, port: u16, backlog: usize) -> net::TcpListener {
    let l = s
        .host(b)
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port), backlog)
        .unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

/// A listener on `b`'s (`ip(2)`) `port` and a connection to it from `a`, accepted
/// after `settle` of simulated time: the listener, the client's end, the server's.
fn connected(
    s: &mut Sim,
    a: HostId,
    b: HostId,
    port: u16,
    settle: Duration,
) -> (net::TcpListener, net::TcpStream, net::TcpStream) {
    let l = listener(s, b, port, 4);
    let c = s
        .host(a)
        .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), port))
        .unwrap();
    s.run_for(settle);
    let (srv, _) = l.accept().unwrap();
    (l, c, srv)
}

/// As [`connected`], with buffer sizes of its own on both ends (`tcp_listen_with`,
/// `tcp_connect_with`), and both ends non-blocking.
fn connected_with(
    s: &mut Sim,
    a: HostId,
    b: HostId,
    port: u16,
    settle: Duration,
    bufs: net::TcpBuffers,
) -> (net::TcpListener, net::TcpStream, net::TcpStream) {
    let l = listener_with(s, b, port, 4, bufs);
    let c = client_with(s, a, port, bufs);
    s.run_for(settle);
    let (srv, _) = l.accept().unwrap();
    srv.set_nonblocking(true).unwrap();
    (l, c, srv)
}

/// A non-blocking listener on `b`'s `port` whose connections take `bufs`.
fn listener_with(
    s: &mut Sim,
    b: HostId,
    port: u16,
    backlog: usize,
    bufs: net::TcpBuffers,
) -> net::TcpListener {
    let l = s
        .host(b)
        .tcp_listen_with(
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port),
            backlog,
            bufs,
        )
        .unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

/// A non-blocking connection from `a` to `b`'s (`ip(2)`) `port` with `bufs`.
fn client_with(s: &mut Sim, a: HostId, port: u16, bufs: net::TcpBuffers) -> net::TcpStream {
    let c = s
        .host(a)
        .tcp_connect_with(SocketAddrV4::new(ip(2), port), None, bufs)
        .unwrap();
    c.set_nonblocking(true).unwrap();
    c
}

/// Writes `data` on `c` and reads on `srv` while the simulation runs, for at most
/// `limit` of simulated time; returns what `srv` read.
fn carry(
    s: &mut Sim,
    c: &net::TcpStream,
    srv: &net::TcpStream,
    data: &[u8],
    limit: Duration,
) -> Vec<u8> {
    carry_from(s, c, srv, data, 0, limit)
}

/// As [`carry`], and checks that `srv` read `data` byte-exact; `what` names the
/// case in the failure.
fn carry_exact(
    s: &mut Sim,
    c: &net::TcpStream,
    srv: &net::TcpStream,
    data: &[u8],
    limit: Duration,
    what: &str,
) {
    let got = carry(s, c, srv, data, limit);
    assert!(got == data, "{what}: {} of {} bytes", got.len(), data.len());
}

/// As [`carry`], when the first `sent` bytes of `data` are written already.
fn carry_from(
    s: &mut Sim,
    c: &net::TcpStream,
    srv: &net::TcpStream,
    data: &[u8],
    sent: usize,
    limit: Duration,
) -> Vec<u8> {
    carry_in_writes(s, c, srv, data, sent, usize::MAX, limit)
}

/// As [`carry_from`], writing at most `write` bytes a call, as many calls a step as
/// the stream takes whole (one, when `write` is all of `data`).
fn carry_in_writes(
    s: &mut Sim,
    c: &net::TcpStream,
    srv: &net::TcpStream,
    data: &[u8],
    mut sent: usize,
    write: usize,
    limit: Duration,
) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    s.run_until(limit, |_| {
        while sent < data.len() {
            let want = (data.len() - sent).min(write);
            match (&*c).write(&data[sent..sent + want]) {
                Ok(n) => {
                    sent += n;
                    if n < want {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        while let Ok(n) = (&*srv).read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got.len() == data.len()
    });
    got
}

/// Connects `a` to `b`'s `port` (accepted after `settle`), sends `n` bytes from `a`
/// and checks that `b` reads them byte-exact within `limit` of simulated time;
/// returns how long the transfer took.
fn transfer(
    s: &mut Sim,
    a: HostId,
    b: HostId,
    port: u16,
    settle: Duration,
    n: u32,
    limit: Duration,
) -> Duration {
    let (_l, c, srv) = connected(s, a, b, port, settle);
    c.set_nonblocking(true).unwrap();
    srv.set_nonblocking(true).unwrap();
    let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    let t0 = s.now();
    let got = carry(s, &c, &srv, &data, limit);
    assert!(got == data, "{} of {} bytes", got.len(), data.len());
    s.now().saturating_duration_since(t0)
}

/// A sends `total` bytes to B's echo server and reads them back; B echoes with
/// non-blocking sockets driven from the simulation loop.
fn echo(
    workers: usize,
    seed: u64,
    impair: Impairments,
    total: usize,
) -> (sim::Sim, HostId, HostId) {
    let wire = WireConfig {
        impair,
        ..WireConfig::default()
    };
    echo_on(workers, seed, wire, total)
}

/// [`echo`] over a wire of any configuration.
fn echo_on(
    workers: usize,
    seed: u64,
    wire: WireConfig,
    total: usize,
) -> (sim::Sim, HostId, HostId) {
    let (mut s, a, b) = pair_on(workers, seed, wire);
    let listener = s
        .host(b)
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), 16)
        .unwrap();
    listener.set_nonblocking(true).unwrap();
    let mut client = s
        .host(a)
        .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 7))
        .unwrap();
    client.set_nonblocking(true).unwrap();
    let data: Vec<u8> = (0..total).map(|i| (i * 7 + i / 300) as u8).collect();
    let (mut sent, mut back) = (0usize, Vec::with_capacity(total));
    let mut server: Option<net::TcpStream> = None;
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    let mut failure: Option<String> = None;
    let done = s.run_until(Duration::from_secs(600), |_| {
        if server.is_none() {
            if let Ok((c, from)) = listener.accept() {
                assert_eq!(
                    from,
                    std::net::SocketAddr::V4(SocketAddrV4::new(ip(1), from.port()))
                );
                c.set_nonblocking(true).unwrap();
                server = Some(c);
            }
        }
        if let Some(srv) = server.as_mut() {
            loop {
                match srv.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => pending.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => {
                        failure = Some(format!("server read: {e}"));
                        return true;
                    }
                }
            }
            while !pending.is_empty() {
                match srv.write(&pending) {
                    Ok(n) => {
                        pending.drain(..n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => {
                        failure = Some(format!("server write: {e}"));
                        return true;
                    }
                }
            }
        }
        if client.is_connected() && sent < total {
            match client.write(&data[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => {
                    failure = Some(format!("client write: {e}"));
                    return true;
                }
            }
        }
        loop {
            match client.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => back.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    failure = Some(format!("client read: {e}"));
                    return true;
                }
            }
        }
        back.len() == total
    });
    if !done || failure.is_some() {
        let mut out = String::new();
        s.host(a).stats().write_netstat(&mut out, false).unwrap();
        s.host(b).stats().write_netstat(&mut out, false).unwrap();
        panic!(
            "workers={workers}: echoed {} of {total}, sent {sent}, pending {}\n{out}",
            back.len(),
            pending.len()
        );
    }
    assert!(back == data, "workers={workers}: echo differs");
    for h in [a, b] {
        assert_eq!(
            s.host(h).stats().ip.toolong,
            0,
            "no segment exceeds the MTU, options included"
        );
    }
    // Orderly close: the client shuts down, the server sees EOF and closes too.
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let srv = server.take().unwrap();
    let eof = s.run_until(Duration::from_secs(60), |_| {
        matches!((&srv).read(&mut [0u8; 16]), Ok(0))
    });
    assert!(eof, "server saw EOF");
    drop(srv);
    let closed = s.run_until(Duration::from_secs(60), |_| {
        matches!(client.read(&mut [0u8; 16]), Ok(0))
    });
    assert!(closed, "client saw EOF");
    drop(client);
    (s, a, b)
}

#[test]
fn tcp_echo_one_and_two_workers() {
    for workers in [1, 2] {
        let (s, a, b) = echo(
            workers,
            1,
            Impairments {
                delay: Duration::from_micros(200),
                ..Default::default()
            },
            1 << 20,
        );
        let (sa, sb) = (s.host(a).stats(), s.host(b).stats());
        assert_eq!(sa.tcp.connects, 1);
        assert_eq!(sb.tcp.accepts, 1);
        assert_eq!(sa.tcp.sndrexmitpack, 0, "no loss, no retransmission");
        assert_eq!(
            sa.tcp.handoff + sb.tcp.handoff,
            0,
            "RSS steers every segment to its home worker"
        );
    }
}

#[test]
fn tcp_echo_under_loss_reordering_and_duplication() {
    for (i, impair) in [
        Impairments {
            delay: Duration::from_millis(1),
            loss: 0.01,
            ..Default::default()
        },
        Impairments {
            delay: Duration::from_millis(1),
            loss: 0.05,
            ..Default::default()
        },
        Impairments {
            delay: Duration::from_millis(5),
            loss: 0.2,
            ..Default::default()
        },
        Impairments {
            delay: Duration::from_millis(2),
            jitter: Duration::from_millis(2),
            duplicate: 0.05,
            reorder: 0.05,
            ..Default::default()
        },
        Impairments {
            delay: Duration::from_millis(50),
            loss: 0.02,
            ..Default::default()
        },
    ]
    .into_iter()
    .enumerate()
    {
        for workers in [1, 2] {
            eprintln!("scenario {i} workers {workers}: {impair:?}");
            let (s, a, b) = echo(workers, 10 + i as u64, impair, 200_000);
            let rexmit = s.host(a).stats().tcp.sndrexmitpack + s.host(b).stats().tcp.sndrexmitpack;
            if impair.loss >= 0.05 {
                assert!(rexmit > 0, "{impair:?}: losses were repaired");
            }
        }
    }
}

#[test]
fn tcp_connection_to_a_closed_port_is_refused() {
    for workers in [1, 2] {
        let (mut s, a, b) = pair(workers, 3, Impairments::default());
        let c = s
            .host(a)
            .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 4444))
            .unwrap();
        s.run_for(Duration::from_millis(100));
        let e = c
            .wait_connected(Some(std::time::Duration::ZERO))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "workers={workers}");
        assert_eq!(s.host(b).stats().tcp.noport, 1);
    }
}

/// `TcpStream::abort` (SO_LINGER 0): the peer is reset at once and told so by its
/// next read, and what the aborting side had queued is not sent.
#[test]
fn tcp_abort_resets_the_peer() {
    for workers in [1, 2] {
        let (mut s, a, b) = pair(workers, 5, Impairments::default());
        let (_l, c, srv) = connected(&mut s, a, b, 4445, Duration::from_millis(100));
        c.set_nonblocking(true).unwrap();
        (&srv).write_all(b"never sent").unwrap();
        srv.abort();
        s.run_for(Duration::from_millis(100));
        let mut buf = [0u8; 16];
        // The reset, and no byte before it.
        let e = (&c).read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "workers={workers}");
    }
}

#[test]
fn tcp_backlog_is_bounded() {
    let (mut s, a, b) = pair(1, 4, Impairments::default());
    let l = s
        .host(b)
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 4)
        .unwrap();
    let clients: Vec<_> = (0..10)
        .map(|_| {
            s.host(a)
                .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 80))
                .unwrap()
        })
        .collect();
    s.run_for(Duration::from_millis(50));
    assert_eq!(
        l.pending(),
        4,
        "never more than the backlog waits for accept"
    );
    assert_eq!(s.host(b).stats().tcp.listendrop, 6);
    assert_eq!(clients.iter().filter(|c| c.is_connected()).count(), 4);
    let refused = clients
        .iter()
        .filter(|c| c.wait_connected(Some(std::time::Duration::ZERO)).is_err())
        .count();
    assert_eq!(refused, 6, "the others are reset, not left hanging");
}

/// A SYN that finds the accept queue full is dropped without an answer and
/// counted (`tcp.listendrop`), as Linux drops it: the client is neither reset nor
/// told it is connected, and its retransmitted SYN connects once `accept` has
/// made room.
#[test]
fn tcp_a_full_accept_queue_drops_the_syn_for_the_client_to_retry() {
    for workers in [1, 2] {
        let (mut s, a, b) = pair(workers, 7, Impairments::default());
        let l = listener(&mut s, b, 80, 2);
        let connect = |s: &mut Sim| {
            s.host(a)
                .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 80))
                .unwrap()
        };
        let first = [connect(&mut s), connect(&mut s)];
        s.run_for(Duration::from_millis(50));
        assert_eq!(l.pending(), 2, "the backlog is full");
        assert!(first.iter().all(|c| c.is_connected()));
        let late = connect(&mut s);
        s.run_for(Duration::from_millis(500));
        let st = s.host(b).stats().tcp;
        assert_eq!(st.listendrop, 1, "workers={workers}: {st:?}");
        assert_eq!(st.sndrst, 0, "no reset");
        assert!(!late.is_connected(), "still connecting");
        assert!(late.take_error().unwrap().is_none(), "not refused");
        // Room: the client's SYN, sent again after its RTO (1 s), connects.
        let _taken = l.accept().unwrap();
        s.run_for(Duration::from_secs(2));
        assert!(late.is_connected(), "workers={workers}");
        assert_eq!(l.pending(), 2);
        assert_eq!(s.host(b).stats().tcp.listendrop, 1);
    }
}

/// How many of `h`'s connections are in `state` (netstat's name), asked of its
/// workers while the simulation runs for a millisecond.
fn conns_in(s: &mut Sim, h: HostId, state: &str) -> usize {
    let q = s.host(h).tcp_connections_ask().unwrap();
    s.run_for(Duration::from_millis(1));
    assert!(q.ready());
    q.into_list().iter().filter(|c| c.state == state).count()
}

/// The node (b) closes first and its peer then goes silent: b's firewall drops the
/// peer's FIN and RST, so FIN_WAIT_2 would wait for ever. Once b's application has
/// closed, each connection waits `net.inet.tcp.finwait2_timeout` (60 s) of silence
/// and is then dropped and counted (`tcp.finwait2_drops`), as FreeBSD's
/// `tcp_timer_2msl` drops it.
#[test]
fn tcp_fin_wait_2_of_a_closed_socket_ends_after_the_finwait2_timeout() {
    const N: usize = 6;
    for workers in [1, 2] {
        let (mut s, a, b) = pair(workers, 41, Impairments::default());
        let fw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), workers).unwrap();
        fw.command("add 100 deny tcp from 198.18.0.1 to any tcpflags fin")
            .unwrap();
        fw.command("add 110 deny tcp from 198.18.0.1 to any tcpflags rst")
            .unwrap();
        fw.command("add 200 allow ip from any to any").unwrap();
        fw.attach(s.host(b));
        let l = listener(&mut s, b, 80, 16);
        let clients: Vec<_> = (0..N)
            .map(|_| {
                s.host(a)
                    .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 80))
                    .unwrap()
            })
            .collect();
        s.run_for(Duration::from_millis(50));
        let servers: Vec<_> = (0..N).map(|_| l.accept().unwrap().0).collect();
        // b closes: its FINs are acknowledged, and it waits in FIN_WAIT_2.
        drop(servers);
        s.run_for(Duration::from_millis(100));
        assert_eq!(conns_in(&mut s, b, "FIN_WAIT_2"), N, "workers={workers}");
        // The peer closes too, but b never hears its FINs.
        drop(clients);
        s.run_for(Duration::from_secs(59));
        assert_eq!(
            conns_in(&mut s, b, "FIN_WAIT_2"),
            N,
            "still waiting at 59 s"
        );
        assert_eq!(s.host(b).stats().tcp.finwait2_drops, 0);
        s.run_for(Duration::from_secs(2));
        assert_eq!(conns_in(&mut s, b, "FIN_WAIT_2"), 0, "workers={workers}");
        let st = s.host(b).stats().tcp;
        assert_eq!(st.finwait2_drops, N as u64, "{st:?}");
        assert_eq!(st.pcbcount, 0, "nothing left of them");
    }
}

/// A half-closed socket (shut down for writing, still open) may still receive:
/// its FIN_WAIT_2 is not limited, as on FreeBSD.
#[test]
fn tcp_fin_wait_2_of_a_half_closed_socket_waits_for_the_peer() {
    let (mut s, a, b) = pair(1, 42, Impairments::default());
    let (_l, c, srv) = connected(&mut s, a, b, 80, Duration::from_millis(50));
    srv.shutdown(std::net::Shutdown::Write).unwrap();
    s.run_for(Duration::from_secs(300));
    assert_eq!(conns_in(&mut s, b, "FIN_WAIT_2"), 1);
    assert_eq!(s.host(b).stats().tcp.finwait2_drops, 0);
    // The peer still gets through, and its FIN ends it as usual.
    (&c).write_all(b"late").unwrap();
    drop(c);
    s.run_for(Duration::from_millis(100));
    let mut buf = [0u8; 8];
    assert_eq!((&srv).read(&mut buf).unwrap(), 4);
    assert_eq!(conns_in(&mut s, b, "TIME_WAIT"), 1);
}

/// Reads `c` (non-blocking) until it ends: the bytes read, and how it ended (`Ok` at
/// the end of the stream, the error otherwise).
fn read_to_end_now(c: &net::TcpStream) -> (Vec<u8>, std::io::Result<()>) {
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        match (&*c).read(&mut buf) {
            Ok(0) => return (got, Ok(())),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return (got, Err(e)),
        }
    }
}

/// The server closes (not only shuts down for writing) and the client goes on
/// sending: nobody will read that, so the server resets the connection, as
/// FreeBSD's tcp_input does (`tcps_rcvafterclose`) and RFC 1122 §4.2.2.13 asks,
/// instead of acknowledging data into a void. The client is told at once.
#[test]
fn tcp_data_sent_after_the_server_closed_is_answered_with_a_reset() {
    for workers in [1, 2] {
        let (mut s, a, b) = pair(workers, 43, Impairments::default());
        let (_l, c, srv) = connected(&mut s, a, b, 80, Duration::from_millis(50));
        c.set_nonblocking(true).unwrap();
        drop(srv);
        s.run_for(Duration::from_millis(100));
        assert_eq!(conns_in(&mut s, b, "FIN_WAIT_2"), 1, "workers={workers}");
        // The client has heard the FIN, and still writes.
        (&c).write_all(b"one more thing").unwrap();
        s.run_for(Duration::from_millis(100));
        assert_eq!(conns_in(&mut s, b, "FIN_WAIT_2"), 0, "workers={workers}");
        assert_eq!(s.host(b).stats().tcp.rcvafterclose, 1, "workers={workers}");
        assert_eq!(s.host(b).stats().tcp.pcbcount, 0);
        assert_eq!(conns_in(&mut s, a, "CLOSE_WAIT"), 0, "the client is reset");
        let (_, end) = read_to_end_now(&c);
        assert_eq!(end.unwrap_err().kind(), ErrorKind::ConnectionReset);
    }
}

/// How many connections `h` holds, in any state but LISTEN.
fn conns_held(s: &mut Sim, h: HostId) -> usize {
    let q = s.host(h).tcp_connections_ask().unwrap();
    s.run_for(Duration::from_millis(1));
    assert!(q.ready());
    q.into_list().iter().filter(|c| c.state != "LISTEN").count()
}

/// A client that never reads answers every window probe with a zero window. A
/// server that has closed its socket with data still to send is held by it only
/// `net.inet.tcp.persist_orphan_timeout` (60 s) after the close, then dropped with
/// a reset and counted in `tcp.persistdrop`; a server that still owns its socket
/// probes on (RFC 1122 §4.2.2.17), the application's to end.
#[test]
fn tcp_a_closed_socket_facing_a_zero_window_is_dropped_after_the_persist_orphan_timeout() {
    for closed in [false, true] {
        let (mut s, a, b) = pair(1, 45, Impairments::default());
        let bufs = net::TcpBuffers {
            send: 16 * 1024,
            recv: 16 * 1024,
        };
        let (_l, c, srv) = connected_with(&mut s, a, b, 80, Duration::from_millis(20), bufs);
        let data = vec![5u8; 200_000];
        let mut sent = 0;
        for _ in 0..20 {
            while let Ok(n) = (&srv).write(&data[sent..]) {
                sent += n;
            }
            s.run_for(Duration::from_millis(100));
        }
        assert!(sent < data.len(), "the client's window shut");
        let probes = s.host(b).stats().tcp.sndprobe;
        let answers = s.host(a).stats().tcp.sndacks;
        let srv = if closed {
            drop(srv);
            None
        } else {
            Some(srv)
        };
        s.run_for(Duration::from_secs(59));
        assert_eq!(
            conns_held(&mut s, b),
            1,
            "held before the bound, closed={closed}"
        );
        assert_eq!(s.host(b).stats().tcp.persistdrop, 0);
        assert!(s.host(b).stats().tcp.sndprobe > probes, "probed");
        assert!(s.host(a).stats().tcp.sndacks > answers, "and answered");
        s.run_for(Duration::from_secs(2));
        let st = s.host(b).stats().tcp;
        if closed {
            assert_eq!(conns_held(&mut s, b), 0, "gone after it");
            assert_eq!(st.persistdrop, 1);
            assert_eq!(st.pcbcount, 0);
            // The client reads what it had, then the reset.
            let (got, end) = read_to_end_now(&c);
            assert!(!got.is_empty());
            assert_eq!(end.unwrap_err().kind(), ErrorKind::ConnectionReset);
        } else {
            s.run_for(Duration::from_secs(600));
            assert_eq!(conns_held(&mut s, b), 1, "its application still owns it");
            assert_eq!(s.host(b).stats().tcp.persistdrop, 0);
            drop(srv);
        }
    }
}

/// Four servers close with data stalled behind their clients' shut windows, on a
/// node that holds at most two orphans (`net.inet.tcp.maxorphans=2`): the first two
/// closes leave orphans, the next two are reset at once and freed
/// (`tcp.orphandrop`), as Linux answers "too many orphaned sockets". Once the
/// orphans end (`persist_orphan_timeout`), a close leaves an orphan again. Before,
/// every closed connection was kept, up to `tcp_max_conns` of them with their send
/// buffers, for as long as its peer acknowledged a little now and then.
#[test]
fn tcp_closes_beyond_maxorphans_reset_and_free_the_connection() {
    const N: usize = 4;
    let tcp = net::tcp::TcpConfig {
        max_orphans: 2,
        ..net::tcp::TcpConfig::default()
    };
    let (mut s, a, b) = pair_with(1, 46, WireConfig::default(), tcp);
    let bufs = net::TcpBuffers {
        send: 16 * 1024,
        recv: 16 * 1024,
    };
    let l = listener_with(&mut s, b, 80, 16, bufs);
    let clients: Vec<_> = (0..N + 1)
        .map(|_| client_with(&mut s, a, 80, bufs))
        .collect();
    s.run_for(Duration::from_millis(20));
    let servers: Vec<_> = (0..N + 1)
        .map(|_| {
            let srv = l.accept().unwrap().0;
            srv.set_nonblocking(true).unwrap();
            srv
        })
        .collect();
    // Each server fills its client's window, which the client never reads.
    let data = vec![5u8; 200_000];
    for _ in 0..20 {
        for srv in &servers {
            let _ = (&*srv).write(&data);
        }
        s.run_for(Duration::from_millis(100));
    }
    assert_eq!(conns_held(&mut s, b), N + 1);
    let mut servers = servers.into_iter();
    for srv in servers.by_ref().take(N) {
        drop(srv);
    }
    s.run_for(Duration::from_millis(50));
    let st = s.host(b).stats().tcp;
    assert_eq!((st.orphans, st.orphandrop), (2, 2), "{st:?}");
    assert_eq!(conns_held(&mut s, b), N + 1 - 2, "two reset and freed");
    assert_eq!(s.host(b).stats().tcp.pcbcount, (N + 1 - 2) as u64);
    // The clients of the last two closed hear the reset, after what they had.
    let ends: Vec<_> = clients[..N].iter().map(|c| read_to_end_now(c).1).collect();
    let reset = ends
        .iter()
        .filter(|e| {
            e.as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::ConnectionReset)
        })
        .count();
    assert_eq!(reset, 2, "{ends:?}");
    // The two orphans end at their bound (their clients keep the window shut);
    // then a close leaves an orphan again.
    s.run_for(Duration::from_secs(61));
    let st = s.host(b).stats().tcp;
    assert_eq!((st.orphans, st.persistdrop), (0, 2), "{st:?}");
    drop(servers.next());
    s.run_for(Duration::from_millis(50));
    let st = s.host(b).stats().tcp;
    assert_eq!((st.orphans, st.orphandrop), (1, 2), "{st:?}");
    drop(clients);
}

/// Forty clients that never read, each asking its server for more than its
/// buffers hold, on a server node whose TCP memory is bounded to 1 MiB
/// (`net.inet.tcp.mem`, low 512 KiB, pressure 683 KiB): past pressure every
/// buffer is clamped to 16 KiB, past high to 4 KiB, so the node holds about the
/// bound, not forty connections' buffers (5 MiB, as before); the states are
/// counted and a writer held at the clamp is counted (`tcp.memrefused`); a new
/// client still has its answer; above high, closed connections whose data waits
/// behind the shut windows (orphans) are reset and freed first
/// (`tcp.memorphandrop`); once every connection is gone the total is back to 0
/// and the state normal. Virtual time, two workers.
#[test]
fn tcp_memory_is_bounded_across_connections_with_pressure_states() {
    const N: usize = 40;
    const HIGH: usize = 1 << 20;
    let tcp = net::tcp::TcpConfig {
        mem: net::tcp::TcpMemLimits::from_high(HIGH),
        ..net::tcp::TcpConfig::default()
    };
    let (mut s, a, b) = pair_with(2, 47, WireConfig::default(), tcp);
    let bufs = net::TcpBuffers {
        send: 64 * 1024,
        recv: 64 * 1024,
    };
    let l = listener_with(&mut s, b, 80, 64, bufs);
    let small = net::TcpBuffers {
        send: 16 * 1024,
        recv: 16 * 1024,
    };
    let open = |s: &mut Sim| client_with(s, a, 80, small);
    let mut clients = Vec::new();
    let mut servers = Vec::new();
    for _ in 0..N {
        clients.push(open(&mut s));
        s.run_for(Duration::from_millis(5));
        let srv = l.accept().unwrap().0;
        srv.set_nonblocking(true).unwrap();
        servers.push(srv);
    }
    let data = vec![7u8; 400_000];
    let mut most = 0;
    for _ in 0..30 {
        for srv in &servers {
            let _ = (&*srv).write(&data);
            s.run_for(Duration::from_millis(1));
            most = most.max(s.host(b).stats().tcp.mem);
        }
        s.run_for(Duration::from_millis(50));
    }
    let st = s.host(b).stats().tcp;
    // The bound, and what the clamps let each connection add once it is
    // reached (its two buffers at the pressure clamp), and a connection's two
    // buffers filled in the moment before the workers looked.
    let bound = HIGH + N * 2 * 16 * 1024 + 2 * 128 * 1024;
    println!(
        "held at most {most} of a bound {bound}; pressure {}, high {}, refused {}",
        st.mempressure, st.memhigh, st.memrefused
    );
    assert!(most as usize <= bound, "held {most} > {bound}: {st:?}");
    assert!(st.mempressure >= 1 && st.memhigh >= 1, "{st:?}");
    assert!(st.memrefused > 0, "{st:?}");
    assert!(st.memstate >= 1, "{st:?}");
    // A newcomer is answered while the crowd holds its memory.
    let c = open(&mut s);
    s.run_for(Duration::from_millis(20));
    let srv = l.accept().unwrap().0;
    (&c).write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    s.run_for(Duration::from_millis(20));
    let mut req = [0u8; 64];
    assert_eq!((&srv).read(&mut req).unwrap(), 18);
    (&srv).write_all(&[1u8; 1000]).unwrap();
    s.run_for(Duration::from_millis(50));
    let (got, _) = read_to_end_now(&c);
    assert_eq!(got.len(), 1000);
    // Half the servers close: their data has no reader but the shut windows.
    let mut servers = servers.into_iter();
    for srv in servers.by_ref().take(N / 2) {
        drop(srv);
    }
    s.run_for(Duration::from_millis(300));
    let st = s.host(b).stats().tcp;
    assert!(st.memorphandrop >= 1, "{st:?}");
    let reset = clients[..N / 2]
        .iter()
        .filter(|c| {
            read_to_end_now(c)
                .1
                .is_err_and(|e| e.kind() == ErrorKind::ConnectionReset)
        })
        .count();
    assert!(reset >= 1, "the orphans' clients are reset");
    // Everything ends: the total goes back to nothing, the state to normal.
    drop(servers);
    drop(srv);
    drop(clients);
    drop(c);
    s.run_for(Duration::from_secs(2));
    let st = s.host(b).stats().tcp;
    assert_eq!((st.mem, st.memstate), (0, 0), "{st:?}");
}

#[test]
fn tcp_socket_options_reach_the_connection() {
    let (mut s, a, b) = pair(2, 5, Impairments::default());
    let (_l, c, srv) = connected(&mut s, a, b, 22, Duration::from_millis(10));
    assert!(c.is_connected());
    assert!(!c.nodelay().unwrap());
    c.set_nodelay(true).unwrap();
    assert!(c.nodelay().unwrap());
    // Keepalive after 1 s idle: an idle connection is probed, and survives.
    c.set_keepalive(Some(std::time::Duration::from_secs(1)))
        .unwrap();
    s.run_for(Duration::from_secs(10));
    let st = s.host(a).stats().tcp;
    assert!(st.keepprobe >= 1, "{st:?}");
    assert_eq!(st.keepdrops, 0);
    assert!(c.is_connected());
    // Nodelay: ten small writes leave as ten segments at once.
    let before = s.host(a).stats().tcp.sndpack;
    for _ in 0..10 {
        (&c).write_all(b"x").unwrap();
        s.run_for(Duration::from_micros(10));
    }
    s.run_for(Duration::from_millis(10));
    assert_eq!(s.host(a).stats().tcp.sndpack - before, 10);
    let mut got = [0u8; 16];
    srv.set_nonblocking(true).unwrap();
    assert_eq!((&srv).read(&mut got).unwrap(), 10);
}

/// A SYN to `dst:dport` from `src:sport`, as a full Ethernet frame.
fn syn_frame(
    dst_mac: wire::EthernetAddress,
    src: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    dport: u16,
    seq: u32,
) -> Vec<u8> {
    use std::net::IpAddr;
    let tcp = wire::TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq_number: wire::TcpSeqNumber(seq),
        ack_number: wire::TcpSeqNumber(0),
        flags: wire::TcpFlags::SYN,
        window_len: 65535,
        urgent_at: 0,
        max_seg_size: Some(1460),
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [None; 4],
        timestamp: None,
        fast_open: None,
        payload: &[],
    };
    let tlen = tcp.buffer_len();
    let mut f = vec![0u8; 14 + 20 + tlen];
    f[0..6].copy_from_slice(&dst_mac.0);
    f[6..12].copy_from_slice(&[2, 0xee, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + tlen) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let sum = !wire::checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    let mut p = wire::TcpPacket::new_unchecked(&mut f[34..]);
    tcp.emit(&mut p, &IpAddr::V4(src), &IpAddr::V4(dst), true);
    f
}

#[test]
fn syn_flood_engages_cookies_and_leaves_established_and_new_connections_working() {
    let (mut s, a, b) = pair(1, 6, Impairments::default());
    let hub = sim::HubId(0);
    let mut attacker = s.attach_raw(hub);
    let b_mac = s.host(b).interfaces()[0].mac;
    let backlog = 32;
    let l = s
        .host(b)
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), backlog)
        .unwrap();
    l.set_nonblocking(true).unwrap();
    let old = s
        .host(a)
        .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 80))
        .unwrap();
    old.set_nonblocking(true).unwrap();
    s.run_for(Duration::from_millis(10));
    let (old_srv, _) = l.accept().unwrap();
    old_srv.set_nonblocking(true).unwrap();
    // Ten seconds of 5,000 SYNs a second from spoofed, unreachable sources.
    let mut rng = dev::rng::Rng::new(7);
    let mut new_client = None;
    let mut max_pcbs = 0;
    for ms in 0..10_000u32 {
        let mut batch = Vec::new();
        for _ in 0..5 {
            let src = Ipv4Addr::new(198, 19, rng.below(256) as u8, 1 + rng.below(254) as u8);
            let f = syn_frame(
                b_mac,
                src,
                1024 + rng.below(60_000) as u16,
                ip(2),
                80,
                rng.next_u32(),
            );
            batch.push(mbuf::Mbuf::from_slice(&f).unwrap());
        }
        let now = s.now();
        attacker.tx_burst(now, &mut batch);
        s.run_for(Duration::from_millis(1));
        max_pcbs = max_pcbs.max(s.host(b).stats().tcp.pcbcount);
        if ms == 5_000 {
            // A new client in the middle of the flood.
            let c = s
                .host(a)
                .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 80))
                .unwrap();
            c.set_nonblocking(true).unwrap();
            new_client = Some(c);
        }
        if ms % 500 == 0 {
            // The established connection keeps working throughout.
            (&old).write_all(b"ping").unwrap();
        }
    }
    let st = s.host(b).stats().tcp;
    assert!(st.syncookiessent > 40_000, "{st:?}");
    assert!(
        max_pcbs <= backlog as u64 + 2,
        "state stays bounded: {max_pcbs} control blocks"
    );
    let mut buf = [0u8; 256];
    let n = (&old_srv).read(&mut buf).unwrap();
    assert_eq!(n, 4 * 20, "every write on the old connection arrived");
    // The new client got through on a cookie.
    let c = new_client.unwrap();
    assert!(c.is_connected(), "{st:?}");
    assert!(st.syncookiesrecvd >= 1);
    let mut accepted = None;
    while let Ok((x, from)) = l.accept() {
        if from == c.local_addr().unwrap() {
            accepted = Some(x);
        }
    }
    let srv = accepted.expect("the new connection was queued for accept");
    (&c).write_all(b"through the flood").unwrap();
    s.run_for(Duration::from_millis(10));
    srv.set_nonblocking(true).unwrap();
    let n = (&srv).read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"through the flood");
    // A bulk transfer on the cookie connection: its window scale, timestamps and SACK
    // came back in the echoed timestamp, and both ends agree on them.
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    let got = carry(&mut s, &c, &srv, &data, Duration::from_secs(30));
    assert!(got == data, "bulk transfer on the cookie connection");
}

/// A two-worker host on a single-queue link: every frame arrives on worker 0, flows
/// homed on worker 1 are handed over (TCP inbox), and worker 1's output is handed back
/// to the queue's owner. Nothing may be lost on the way.
#[test]
fn handoffs_between_workers_lose_nothing() {
    let (da, db) = dev::mem::wire(WireConfig::default());
    let mut a = sim::standalone_host("a", 1, Box::new(da), "198.18.0.1/24").unwrap();
    let mut b = sim::standalone_host("b", 2, Box::new(db), "198.18.0.2/24").unwrap();
    let l = b
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), 16)
        .unwrap();
    l.set_nonblocking(true).unwrap();
    let clients: Vec<net::TcpStream> = (0..8)
        .map(|_| {
            let c = a
                .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 7))
                .unwrap();
            c.set_nonblocking(true).unwrap();
            c
        })
        .collect();
    let mut servers = Vec::new();
    let msg = vec![0xabu8; 20_000];
    let mut sent = vec![0usize; clients.len()];
    let mut back = vec![0usize; clients.len()];
    let mut buf = vec![0u8; 65536];
    let mut now = dev::Instant::ZERO;
    for _ in 0..200_000 {
        a.poll(now);
        b.poll(now);
        now += Duration::from_micros(50);
        while let Ok((c, _)) = l.accept() {
            c.set_nonblocking(true).unwrap();
            servers.push(c);
        }
        for srv in &servers {
            while let Ok(n) = (&*srv).read(&mut buf) {
                if n == 0 {
                    break;
                }
                (&*srv).write_all(&buf[..n]).unwrap();
            }
        }
        for (i, c) in clients.iter().enumerate() {
            if c.is_connected() && sent[i] < msg.len() {
                sent[i] += (&*c).write(&msg[sent[i]..]).unwrap_or(0);
            }
            while let Ok(n) = (&*c).read(&mut buf) {
                if n == 0 {
                    break;
                }
                back[i] += n;
            }
        }
        if back.iter().all(|&n| n == msg.len()) {
            break;
        }
    }
    assert!(back.iter().all(|&n| n == msg.len()), "echoed {back:?}");
    let st = b.stats();
    assert!(st.tcp.handoff > 0, "some flows are homed on worker 1");
    assert_eq!(st.tcp.handoffdrop + st.ether.odropped, 0);
}

/// The server closes first, so its end of the 4-tuple waits in TIME_WAIT; the client
/// comes back from the same port at once, and the server takes the newer incarnation
/// over (its timestamps are higher: RFC 6191) instead of leaving it to time out.
#[test]
fn a_four_tuple_in_time_wait_is_reused_by_a_newer_incarnation() {
    let (mut s, a, b) = pair(1, 9, Impairments::default());
    let l = listener(&mut s, b, 80, 8);
    for round in 0..3 {
        one_incarnation(&mut s, a, &l, round);
    }
    let st = s.host(b).stats().tcp;
    assert_eq!(st.timewaitreuse, 2, "{st:?}");
    assert_eq!(st.accepts, 3);
}

/// One connection from `a`'s port 40000 to the listener `l` (on `ip(2)`, port 80):
/// five bytes, the server closing first, so its end waits in TIME_WAIT.
fn one_incarnation(s: &mut Sim, a: HostId, l: &net::TcpListener, round: usize) {
    let c = s
        .host(a)
        .tcp_connect_from_nonblocking(40_000, SocketAddrV4::new(ip(2), 80))
        .unwrap();
    c.set_nonblocking(true).unwrap();
    s.run_for(Duration::from_millis(20));
    c.wait_connected(Some(std::time::Duration::ZERO))
        .unwrap_or_else(|e| panic!("round {round}: {e}"));
    let (srv, _) = l.accept().expect("accepted");
    srv.set_nonblocking(true).unwrap();
    (&c).write_all(b"hello").unwrap();
    s.run_for(Duration::from_millis(20));
    let mut buf = [0u8; 16];
    assert_eq!((&srv).read(&mut buf).unwrap(), 5);
    // The server closes first; the client reads the end and closes too.
    drop(srv);
    s.run_for(Duration::from_millis(20));
    assert_eq!(
        (&c).read(&mut buf).unwrap(),
        0,
        "round {round}: end of stream"
    );
    drop(c);
    s.run_for(Duration::from_millis(50));
}

/// A 4-tuple reopened again and again ends its TIME_WAIT remnant early each time;
/// the deadlines those remnants leave behind do not pile up for the minute they
/// would last: the timer entries stay a bounded few per live connection.
#[test]
fn reopening_a_four_tuple_leaves_no_pile_of_stale_deadlines() {
    let (mut s, a, b) = pair(1, 9, Impairments::default());
    let l = listener(&mut s, b, 80, 8);
    const ROUNDS: usize = 200;
    for round in 0..ROUNDS {
        one_incarnation(&mut s, a, &l, round);
    }
    let st = s.host(b).stats().tcp;
    assert_eq!(st.timewaitreuse, ROUNDS as u64 - 1, "{st:?}");
    assert_eq!(st.pcbcount, 1, "one remnant left");
    assert!(
        st.timerentries <= 2 * st.pcbcount + 65,
        "{} timer entries for {} connection(s)",
        st.timerentries,
        st.pcbcount
    );
}

/// An application that drops many streams at once overflows its worker's inbox of
/// wake-ups; none is lost: every connection still sends its FIN.
#[test]
fn dropping_more_streams_than_the_inbox_holds_closes_them_all() {
    let mut s = Sim::new(10);
    let hub = s.add_hub(WireConfig::default());
    let a = s.add_host_with(net::StackConfig {
        name: "a".into(),
        workers: 1,
        tcp_inbox: 16,
        ..net::StackConfig::default()
    });
    let b = s.add_host("b", 1);
    s.connect(a, hub, "198.18.0.1/24");
    s.connect(b, hub, "198.18.0.2/24");
    let l = s
        .host(b)
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 512)
        .unwrap();
    l.set_nonblocking(true).unwrap();
    let n = 200;
    let mut clients = Vec::new();
    let mut servers = Vec::new();
    for _ in 0..n {
        clients.push(
            s.host(a)
                .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 80))
                .unwrap(),
        );
        if clients.len() % 10 == 0 {
            s.run_for(Duration::from_millis(5));
        }
        while let Ok((c, _)) = l.accept() {
            c.set_nonblocking(true).unwrap();
            servers.push(c);
        }
    }
    s.run_for(Duration::from_millis(50));
    while let Ok((c, _)) = l.accept() {
        c.set_nonblocking(true).unwrap();
        servers.push(c);
    }
    assert_eq!(servers.len(), n);
    drop(clients);
    s.run_for(Duration::from_millis(200));
    let mut buf = [0u8; 8];
    let ended = servers
        .iter()
        .filter(|c| matches!((&**c).read(&mut buf), Ok(0)))
        .count();
    assert_eq!(ended, n, "every dropped stream sent its FIN");
}

/// Per-connection buffer sizes (SO_SNDBUF/SO_RCVBUF): small buffers on both sides
/// still carry a bulk transfer byte-exact; sizes are reported and clamped.
#[test]
fn small_per_connection_buffers_carry_a_transfer() {
    let (mut s, a, b) = pair(1, 11, Impairments::default());
    let small = net::TcpBuffers {
        send: 8 * 1024,
        recv: 6 * 1024,
    };
    let (_l, c, srv) = connected_with(&mut s, a, b, 80, Duration::from_millis(20), small);
    // Rounded up to whole segments once the MSS (1460) is known, as FreeBSD's
    // tcp_mss does: 6 and 5 of them.
    assert_eq!((c.send_buffer_size(), c.recv_buffer_size()), (8760, 7300));
    assert_eq!(srv.recv_buffer_size(), 7300);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let got = carry(&mut s, &c, &srv, &data, Duration::from_secs(60));
    assert_eq!(got, data);
    let tiny = s
        .host(a)
        .tcp_connect_with(
            SocketAddrV4::new(ip(2), 80),
            None,
            net::TcpBuffers { send: 1, recv: 1 },
        )
        .unwrap();
    assert_eq!(tiny.send_buffer_size(), 4096, "clamped to 4 KiB");
}

/// What a reader that does not read leaves a writer ahead, as `TcpBuffers` says:
/// the reader's buffer once (the window counts what waits unread) and the writer's
/// twice (its channel and its connection), and no more; when the reader reads,
/// every byte arrives.
#[test]
fn a_stalled_reader_leaves_the_writer_its_buffers_ahead_and_no_more() {
    let (mut s, a, b) = pair(1, 14, Impairments::default());
    let bufs = net::TcpBuffers {
        send: 16 * 1024,
        recv: 32 * 1024,
    };
    let (_l, c, srv) = connected_with(&mut s, a, b, 80, Duration::from_millis(20), bufs);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut sent = 0;
    for _ in 0..50 {
        while let Ok(n) = (&c).write(&data[sent..]) {
            sent += n;
        }
        s.run_for(Duration::from_millis(100));
    }
    // Each buffer rounded up to whole segments of 1460 (FreeBSD's tcp_mss).
    let (snd, rcv) = (12 * 1460, 23 * 1460);
    assert_eq!((c.send_buffer_size(), srv.recv_buffer_size()), (snd, rcv));
    // The reader holds SO_RCVBUF but for what a window at scale 6 cannot offer (it
    // counts in 64-byte units, and 23 × 1460 is not a multiple of 64); the writer
    // twice SO_SNDBUF beyond that.
    let held = srv.available();
    assert!(
        held <= rcv && held > rcv - 64,
        "the reader holds SO_RCVBUF: {held} of {rcv}"
    );
    assert_eq!(sent, held + 2 * snd, "and the writer twice SO_SNDBUF");
    let got = carry_from(&mut s, &c, &srv, &data, sent, Duration::from_secs(60));
    assert_eq!(got, data);
}

/// Deadlines that move (delayed ACK, retransmission, a keepalive hours away) leave
/// stale entries in the worker's timer heap; the heap stays within a few entries per
/// connection however long the connections talk.
#[test]
fn the_timer_heap_stays_proportional_to_the_connections() {
    let (mut s, a, b) = pair(1, 12, Impairments::default());
    let l = s
        .host(b)
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 64)
        .unwrap();
    l.set_nonblocking(true).unwrap();
    let n = 40;
    let mut clients = Vec::new();
    for _ in 0..n {
        let c = s
            .host(a)
            .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 80))
            .unwrap();
        c.set_nonblocking(true).unwrap();
        c.set_keepalive(Some(std::time::Duration::from_secs(3600)))
            .unwrap();
        clients.push(c);
    }
    // SYNs beyond the ARP hold queue go again after the first timeout.
    let mut servers = Vec::new();
    s.run_until(Duration::from_secs(5), |_| {
        while let Ok((c, _)) = l.accept() {
            c.set_nonblocking(true).unwrap();
            servers.push(c);
        }
        servers.len() == n
    });
    assert_eq!(servers.len(), n);
    let mut buf = [0u8; 64];
    let mut max_entries = 0;
    for _ in 0..50 {
        for c in &clients {
            (&*c).write_all(b"ping").unwrap();
        }
        s.run_for(Duration::from_millis(60));
        for c in &servers {
            while matches!((&*c).read(&mut buf), Ok(k) if k > 0) {}
        }
        s.run_for(Duration::from_millis(60));
        max_entries = max_entries.max(s.host(a).stats().tcp.timerentries);
    }
    let bound = 4 * n as u64 + 64;
    assert!(
        max_entries <= bound,
        "timer heap reached {max_entries} entries for {n} connections (bound {bound})"
    );
    assert!(
        max_entries >= n as u64,
        "every connection has a timer: {max_entries}"
    );
}

#[test]
fn segmentation_and_checksum_offload_carry_large_segments_byte_exact() {
    // A wire whose "devices" fill in TCP checksums and cut segments themselves:
    // TCP builds segments of up to 64 KiB for it, the peer receives them whole.
    for (workers, impair) in [
        (1, Impairments::default()),
        (2, Impairments::default()),
        (
            1,
            Impairments {
                delay: Duration::from_millis(1),
                loss: 0.02,
                ..Default::default()
            },
        ),
        (
            2,
            Impairments {
                delay: Duration::from_millis(2),
                jitter: Duration::from_millis(2),
                duplicate: 0.05,
                reorder: 0.05,
                ..Default::default()
            },
        ),
    ] {
        let wire = WireConfig {
            impair,
            offload: dev::Offloads::ALL,
            ..WireConfig::default()
        };
        let (s, a, b) = echo_on(workers, 9, wire, 4 << 20);
        let (sa, sb) = (s.host(a).stats(), s.host(b).stats());
        for st in [&sa, &sb] {
            assert!(st.ip.tso > 0, "segments larger than the MTU went out whole");
            assert_eq!(st.ip.swcsum, 0, "no checksum computed in software");
            assert_eq!(st.tcp.rcvbadsum, 0);
        }
        // Far fewer, larger segments than 1448-byte ones would need; with a round
        // trip of milliseconds and a small window, a segment carries about a
        // millisecond of the sending rate (`Tcb::tso_burst`), still more than one.
        let larger = if impair.delay.is_zero() {
            8 * 1448
        } else {
            1448
        };
        assert!(
            sa.tcp.sndbyte / sa.tcp.sndpack.max(1) > larger,
            "workers={workers} {impair:?}: {} bytes in {} segments",
            sa.tcp.sndbyte,
            sa.tcp.sndpack
        );
        if impair.loss > 0.0 {
            // By either side's retransmissions, or (where only ACKs were lost) a
            // tail loss probe.
            let repaired = [&sa, &sb]
                .iter()
                .map(|s| s.tcp.sndrexmitpack + s.tcp.tlpprobes)
                .sum::<u64>();
            assert!(repaired > 0, "losses were repaired: {:?}", sa.tcp);
        }
        // The large segments carried their data by reference to the writer's
        // chunks (no copy into the packet), and the reader's channel held them so.
        // (Segments of a few MSS, as on the path with jitter, are copied.)
        if sa.tcp.sndbyte / sa.tcp.sndpack.max(1) <= 8 * 1448 {
            continue;
        }
        assert!(
            sa.tcp.sndbyteshared > sa.tcp.sndbyte / 2,
            "workers={workers} {impair:?}: {} of {} bytes sent shared",
            sa.tcp.sndbyteshared,
            sa.tcp.sndbyte
        );
        // (Out-of-order data waits in the receive buffer, a copy: under loss and
        // reordering less of it is shared.)
        let part = if impair == Impairments::default() {
            2
        } else {
            8
        };
        assert!(
            sb.tcp.rcvbyteshared > sb.tcp.rcvbyte / part,
            "workers={workers} {impair:?}: {} of {} bytes received shared",
            sb.tcp.rcvbyteshared,
            sb.tcp.rcvbyte
        );
    }
}

/// a ── offload wire ── r1 ── `path[0]` ── r2 ── … ── `path[n-1]` ── b: 2 MiB from a
/// to b, byte-exact, through as many routers as `path` has links (198.18.1.0/24,
/// 198.18.2.0/24 and so on, a router at .1 and .2 between two of them); the
/// counters of a, of the first router and of b.
fn through_a_router(path: &[WireConfig]) -> (net::Stats, net::Stats, net::Stats) {
    through_a_router_from(dev::Offloads::ALL, path)
}

/// [`through_a_router`] with a's wire offloading `first`.
fn through_a_router_from(
    first: dev::Offloads,
    path: &[WireConfig],
) -> (net::Stats, net::Stats, net::Stats) {
    let mut s = Sim::new(4);
    let mut hubs = vec![s.add_hub(WireConfig {
        offload: first,
        ..WireConfig::default()
    })];
    hubs.extend(path.iter().map(|w| s.add_hub(*w)));
    let net = |k: usize, host: u8| format!("198.18.{}.{host}/24", k + 1);
    let a = s.add_host("a", 1);
    s.connect(a, hubs[0], &net(0, 1));
    let mut routers = Vec::new();
    for k in 0..path.len() {
        let r = s.add_host(&format!("r{}", k + 1), 2);
        let i0 = s.connect(r, hubs[k], &net(k, 2));
        let i1 = s.connect(r, hubs[k + 1], &net(k + 1, 1));
        for i in [i0, i1] {
            s.host(r).set_forwarding(i, true, false).unwrap();
        }
        routers.push(r);
    }
    let b = s.add_host("b", 1);
    s.connect(b, hubs[path.len()], &net(path.len(), 2));
    let via = |k: usize, host: u8| format!("198.18.{}.{host}", k + 1).parse().unwrap();
    let all: route::IpPrefix = "198.18.0.0/16".parse().unwrap();
    s.host(a).add_route_via(all, via(0, 2)).unwrap();
    s.host(b).add_route_via(all, via(path.len(), 1)).unwrap();
    for (k, &r) in routers.iter().enumerate() {
        // Towards b past the next router, towards a past the one before.
        for far in k + 2..=path.len() {
            let p = net(far, 0).parse().unwrap();
            s.host(r).add_route_via(p, via(k + 1, 2)).unwrap();
        }
        for far in 0..k {
            let p = net(far, 0).parse().unwrap();
            s.host(r).add_route_via(p, via(k, 1)).unwrap();
        }
    }
    let r = routers[0];
    let l = s
        .host(b)
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9), 4)
        .unwrap();
    l.set_nonblocking(true).unwrap();
    let c = s
        .host(a)
        .tcp_connect_nonblocking(SocketAddrV4::new(
            Ipv4Addr::new(198, 18, path.len() as u8 + 1, 2),
            9,
        ))
        .unwrap();
    c.set_nonblocking(true).unwrap();
    let total = 2usize << 20;
    let data: Vec<u8> = (0..total).map(|i| (i * 31 + i / 977) as u8).collect();
    let (mut sent, mut got) = (0usize, Vec::with_capacity(total));
    let mut srv: Option<net::TcpStream> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let done = s.run_until(Duration::from_secs(120), |_| {
        if srv.is_none() {
            if let Ok((x, _)) = l.accept() {
                x.set_nonblocking(true).unwrap();
                srv = Some(x);
            }
        }
        if c.is_connected() && sent < total {
            if let Ok(n) = (&c).write(&data[sent..]) {
                sent += n;
            }
        }
        if let Some(x) = &srv {
            while let Ok(n) = (&*x).read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
        got.len() == total
    });
    assert!(done, "{} of {total} bytes", got.len());
    assert!(got == data, "the bytes arrived intact");
    (s.host(a).stats(), s.host(r).stats(), s.host(b).stats())
}

#[test]
fn a_router_cuts_large_segments_and_fills_in_checksums_for_a_link_without_offload() {
    // a's 64 KiB segments, their checksums unfilled, reach b (which checks every
    // checksum) as ordinary segments cut by the router (software segmentation, not
    // fragments); b's answers go back as ordinary segments.
    let (sa, sr, sb) = through_a_router(&[WireConfig::default()]);
    assert!(sa.ip.tso > 0, "a sent segments larger than the MTU");
    assert!(
        sr.ip.swgso > 0,
        "the router cut them into ordinary segments for the plain link"
    );
    assert!(
        sr.ip.swcsum > 0,
        "and filled in the checksums of smaller ones"
    );
    assert_eq!(sr.ip.fragmented, 0, "rather than fragmenting them");
    assert_eq!(sb.ip.reassembled, 0);
    assert_eq!(sb.tcp.rcvbadsum, 0, "every checksum b checked was right");
    assert_eq!(sb.ip.badsum, 0);
}

#[test]
fn a_router_cuts_large_segments_whose_pieces_would_not_fit_the_next_link() {
    // a and b sit on 1500-byte links, so a's segments stand for 1448-byte ones, but
    // the link between the two routers, offloading too, has an MTU of 1280. Handed
    // over whole, its device would cut them into packets longer than the link
    // takes; the first router cuts them itself, to fit. A full segment of a's
    // own (the last of a burst cut to whole segments, sent alone) is no offload
    // segment: it is fragmented, as any IPv4 datagram without DF is, never
    // handed to the device whole (which once put 1,500-byte frames on the
    // 1,280-byte link).
    let offload = |mtu| WireConfig {
        offload: dev::Offloads::ALL,
        mtu,
        ..WireConfig::default()
    };
    let (sa, sr, _) = through_a_router(&[offload(1280), offload(1500)]);
    assert!(sa.ip.tso > 0, "a sent segments larger than the MTU");
    assert!(sr.ip.swgso > 0, "the router cut them: {:?}", sr.ip);
    assert_eq!(sr.ip.tso, 0, "and handed none over whole: {:?}", sr.ip);
}

/// Two hosts on a wire that takes 512 KiB segments whole (`dev::Offloads::BIG`),
/// with `impair`, and a connection between them with 2 MiB buffers each way: the
/// simulation, the hosts, the listener, the client's end and the server's.
fn big_pair(
    workers: usize,
    seed: u64,
    impair: Impairments,
) -> (
    Sim,
    HostId,
    HostId,
    net::TcpListener,
    net::TcpStream,
    net::TcpStream,
) {
    let wire = WireConfig {
        impair,
        offload: dev::Offloads::BIG,
        ..WireConfig::default()
    };
    let (mut s, a, b) = pair_on(workers, seed, wire);
    let bufs = net::TcpBuffers {
        send: 2 << 20,
        recv: 2 << 20,
    };
    let (l, c, srv) = connected_with(&mut s, a, b, 80, Duration::from_millis(20), bufs);
    (s, a, b, l, c, srv)
}

/// Segments longer than an IP header can say (BIG TCP: Total Length 0), over a wire
/// that takes 512 KiB ones whole: a transfer arrives byte-exact in segments past
/// 64 KiB, and with loss, reordering and duplication too, repaired.
#[test]
fn segments_past_64_kib_carry_a_transfer_byte_exact() {
    for (workers, impair) in [
        (1, Impairments::default()),
        (
            2,
            // A few dozen segments each way: losses enough to need repairs.
            Impairments {
                delay: Duration::from_millis(1),
                loss: 0.1,
                duplicate: 0.05,
                reorder: 0.05,
                ..Default::default()
            },
        ),
    ] {
        let (mut s, a, b, _l, c, srv) = big_pair(workers, 12, impair);
        let data: Vec<u8> = (0..8u32 << 20).map(|i| (i % 253) as u8).collect();
        let what = format!("{impair:?}");
        carry_exact(&mut s, &c, &srv, &data, Duration::from_secs(120), &what);
        let (sa, sb) = (s.host(a).stats(), s.host(b).stats());
        for st in [&sa, &sb] {
            assert_eq!((st.ip.toolong, st.ip.badlen), (0, 0), "{:?}", st.ip);
            assert_eq!(st.tcp.rcvbadsum, 0);
        }
        if impair == Impairments::default() {
            assert!(
                sa.tcp.sndbyte / sa.tcp.sndpack > 65_535,
                "{} bytes in {} segments",
                sa.tcp.sndbyte,
                sa.tcp.sndpack
            );
        } else {
            assert!(sa.tcp.sndrexmitpack > 0, "losses were repaired");
        }
    }
    // Written 3000 bytes at a time, the data go into the send buffer's own chunks
    // rather than packet buffers, and each large segment copies them: into more
    // than one jumbo cluster.
    let (mut s, a, b, _l, c, srv) = big_pair(1, 13, Impairments::default());
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 249) as u8).collect();
    let got = carry_in_writes(&mut s, &c, &srv, &data, 0, 3000, Duration::from_secs(60));
    assert!(
        got == data,
        "small writes: {} of {} bytes",
        got.len(),
        data.len()
    );
    let sa = s.host(a).stats();
    assert!(sa.tcp.sndbyte / sa.tcp.sndpack > 65_535, "{:?}", sa.tcp);
    assert_eq!(sa.ip.odropped, 0, "{:?}", sa.ip);
    // Copied into full jumbo clusters, a handful a segment: the receiver holds
    // them by reference. (Each cluster past the first had gone in empty and been
    // passed over, the bytes into 2 KiB clusters: more than TCP input takes by
    // reference, so the receiver copied every segment twice.)
    let sb = s.host(b).stats();
    assert!(
        sb.tcp.rcvbyteshared > sb.tcp.rcvbyte / 2,
        "{} of {} bytes received shared",
        sb.tcp.rcvbyteshared,
        sb.tcp.rcvbyte
    );
    // And both ways at once, with the stack's default buffers.
    let wire = WireConfig {
        offload: dev::Offloads::BIG,
        ..WireConfig::default()
    };
    let (s, a, _) = echo_on(1, 9, wire, 4 << 20);
    assert!(s.host(a).stats().ip.tso > 0);
}

#[test]
fn a_router_cuts_segments_past_64_kib_for_smaller_links_and_passes_them_to_big_ones() {
    // A plain link and a 64 KiB offload link: cut (from Total Length 0) into
    // ordinary segments, byte-exact.
    for next in [
        WireConfig::default(),
        WireConfig {
            offload: dev::Offloads::ALL,
            ..WireConfig::default()
        },
    ] {
        let (sa, sr, sb) = through_a_router_from(dev::Offloads::BIG, &[next]);
        assert!(sa.tcp.sndbyte / sa.tcp.sndpack > 65_535, "{:?}", sa.tcp);
        assert!(sr.ip.swgso > 0, "the router cut them: {:?}", sr.ip);
        assert_eq!(
            sr.ip.toolong + sr.ip.badlen + sr.ip.fragmented,
            0,
            "{:?}",
            sr.ip
        );
        assert_eq!(sb.tcp.rcvbadsum, 0);
    }
    // Another link that takes them: handed over whole.
    let big = WireConfig {
        offload: dev::Offloads::BIG,
        ..WireConfig::default()
    };
    let (_, sr, _) = through_a_router_from(dev::Offloads::BIG, &[big]);
    assert!(sr.ip.tso > 0, "{:?}", sr.ip);
    assert_eq!(sr.ip.swgso, 0, "{:?}", sr.ip);
}

/// The receiver answers a burst of data segments with one ACK (its output waits for
/// the end of the worker's batch, as GRO makes Linux do), not one per two segments,
/// and no ACK leaves more than 64 KiB unacknowledged; the transfer is byte-exact.
#[test]
fn one_ack_answers_a_burst_of_segments() {
    let (mut s, a, b) = pair(1, 13, Impairments::default());
    let total = 4_000_000u32;
    let ms = Duration::from_millis;
    transfer(&mut s, a, b, 80, ms(20), total, Duration::from_secs(60));
    let st = s.host(b).stats();
    let rx = st.tcp;
    // Counted in frames: LRO may have merged several into one segment already.
    let segs_per_ack = st.ether.ipackets as f64 / rx.sndacks.max(1) as f64;
    assert!(
        segs_per_ack >= 4.0,
        "{} data segments ({} frames), {} ACKs",
        rx.rcvpack,
        st.ether.ipackets,
        rx.sndacks
    );
    // An ACK at least every 64 KiB: the acknowledged stretch is bounded.
    assert!(
        rx.sndacks as usize >= total as usize / (64 * 1024 + 1448),
        "{} ACKs for {total} bytes",
        rx.sndacks,
    );
}

/// One 4 MB transfer from `a` to `b` over a 10 Mbit/s link with 20 ms each way and a
/// queue of `queue` frames, with 1 MiB socket buffers (so the window is the
/// congestion window), HyStart++ on or off: the sender's counters and how long the
/// transfer took (virtual time).
fn through_a_queue(hystart: bool, queue: usize) -> (net::Stats, Duration) {
    let wire = WireConfig {
        impair: Impairments {
            delay: Duration::from_millis(20),
            rate_bps: 10_000_000,
            ..Impairments::default()
        },
        queue_limit: queue,
        ..WireConfig::default()
    };
    let tcp = net::tcp::TcpConfig {
        hystart,
        sndbuf: 1 << 20,
        rcvbuf: 1 << 20,
        ..net::tcp::TcpConfig::default()
    };
    let (mut s, a, b) = pair_with(1, 21, wire, tcp);
    let took = transfer(
        &mut s,
        a,
        b,
        80,
        Duration::from_millis(200),
        4_000_000,
        Duration::from_secs(120),
    );
    (s.host(a).stats(), took)
}

/// RFC 9406: slow start ends when the round trip time grows, not once a window twice
/// the path's has overflowed the bottleneck's queue. Through a 10 Mbit/s, 40 ms path
/// (a bandwidth-delay product of 33 frames) with a queue of 300 frames, standard slow
/// start doubles its window until the queue overflows, loses hundreds of segments at
/// once and recovers through timeouts; HyStart++ sees the queue build in the RTT,
/// turns to Conservative Slow Start and then congestion avoidance, and loses
/// nothing. With a short queue it cannot stop every loss (CSS still grows the window
/// threefold), but costs no more time.
#[test]
fn hystart_leaves_slow_start_before_a_long_queue_overflows() {
    let (on, t_on) = through_a_queue(true, 300);
    let (off, t_off) = through_a_queue(false, 300);
    eprintln!(
        "queue 300: HyStart++ {t_on:?}, {} retransmitted, {} timeouts; \
         without {t_off:?}, {} retransmitted, {} timeouts",
        on.tcp.sndrexmitpack, on.tcp.rexmttimeo, off.tcp.sndrexmitpack, off.tcp.rexmttimeo,
    );
    assert_eq!(
        (on.tcp.hystartcss, on.tcp.hystartca),
        (1, 1),
        "{:?}",
        on.tcp
    );
    assert_eq!((on.tcp.sndrexmitpack, on.tcp.rexmttimeo), (0, 0));
    // 4 MB at 10 Mbit/s is 3.2 s on the wire.
    assert!(t_on < Duration::from_millis(3_700), "{t_on:?}");
    assert_eq!(off.tcp.hystartcss, 0);
    assert!(
        off.tcp.sndrexmitpack > 100 && off.tcp.rexmttimeo >= 1,
        "{:?}",
        off.tcp
    );
    // RACK, with the receiver's SACK blocks naming its newest ranges however many
    // holes it has, repairs most of the overflow within the recovery (it once took
    // half as long again, then a quarter), but not all of it.
    assert!(t_off > t_on * 21 / 20, "{t_off:?} against {t_on:?}");

    for queue in [40, 100] {
        let (on, t_on) = through_a_queue(true, queue);
        let (off, t_off) = through_a_queue(false, queue);
        eprintln!(
            "queue {queue}: HyStart++ {t_on:?}, {} retransmitted, {} timeouts; \
             without {t_off:?}, {} retransmitted, {} timeouts",
            on.tcp.sndrexmitpack, on.tcp.rexmttimeo, off.tcp.sndrexmitpack, off.tcp.rexmttimeo,
        );
        assert!(on.tcp.rexmttimeo <= off.tcp.rexmttimeo, "queue {queue}");
        assert!(
            t_on < t_off * 11 / 10,
            "queue {queue}: {t_on:?} against {t_off:?}"
        );
    }
}

/// RFC 9293 §3.7.1: the MSS a host offers, and sends with, is its link's MTU less
/// the IP and TCP headers. On a 1280-byte link both ends offer 1240, so a transfer
/// leaves in packets the link takes and nothing is fragmented; offering the
/// configured 1460, each full segment left as two fragments.
///
/// With large segments off (`net.inet.tcp.tso=0`) TCP's own segments show the MSS;
/// on (the default), the pieces software GSO cuts them into fit the link as well.
#[test]
fn the_mss_follows_the_link_mtu() {
    for tso in [false, true] {
        let wire = WireConfig {
            mtu: 1280,
            ..WireConfig::default()
        };
        let tcp = net::tcp::TcpConfig {
            tso,
            ..Default::default()
        };
        let (mut s, a, b) = pair_with(1, 31, wire, tcp);
        let ms = Duration::from_millis;
        transfer(&mut s, a, b, 80, ms(20), 1_000_000, Duration::from_secs(30));
        let (sa, sb) = (s.host(a).stats(), s.host(b).stats());
        assert_eq!((sa.ip.fragmented, sb.ip.reassembled), (0, 0), "{:?}", sa.ip);
        if tso {
            assert!(sa.ip.swgso > 0, "{:?}", sa.ip);
            continue;
        }
        // Full segments: 1240 less the 12 bytes of timestamps.
        assert!(
            sa.tcp.sndbyte / sa.tcp.sndpack > 1100 && sa.tcp.sndbyte / sa.tcp.sndpack <= 1228,
            "{} bytes in {} segments",
            sa.tcp.sndbyte,
            sa.tcp.sndpack
        );
    }
}

/// Over a plain wire (no offload) with the stack's defaults, TCP builds 64 KiB
/// segments that IP cuts in software before the device (GSO), and the receiver
/// merges each burst's in-order frames before IP input (LRO); with
/// `net.inet.tcp.tso` and `net.inet.tcp.lro` off, neither happens. Either way,
/// clean and with loss, reordering and duplication, 4 MiB cross byte-exact both
/// ways, and no frame on the wire is longer than the MTU.
#[test]
fn software_gso_and_lro_carry_transfers_byte_exact_and_switch_off() {
    for (gso_lro, workers, impair) in [
        (true, 1, Impairments::default()),
        (true, 2, Impairments::default()),
        (
            true,
            1,
            Impairments {
                delay: Duration::from_millis(1),
                loss: 0.02,
                ..Default::default()
            },
        ),
        (
            true,
            2,
            Impairments {
                delay: Duration::from_millis(2),
                jitter: Duration::from_millis(2),
                duplicate: 0.05,
                reorder: 0.05,
                loss: 0.01,
                ..Default::default()
            },
        ),
        (
            true,
            1,
            Impairments {
                delay: Duration::from_millis(1),
                duplicate: 0.05,
                reorder: 0.05,
                loss: 0.01,
                ..Default::default()
            },
        ),
        (false, 1, Impairments::default()),
        (
            false,
            2,
            Impairments {
                delay: Duration::from_millis(1),
                loss: 0.02,
                reorder: 0.05,
                ..Default::default()
            },
        ),
    ] {
        let wire = WireConfig {
            impair,
            ..WireConfig::default()
        };
        let tcp = net::tcp::TcpConfig {
            tso: gso_lro,
            lro: gso_lro,
            ..Default::default()
        };
        let (mut s, a, b) = pair_with(workers, 11, wire, tcp);
        let (_l, c, srv) = connected_with(
            &mut s,
            a,
            b,
            80,
            // Room for a lost SYN to be sent again.
            Duration::from_secs(5),
            net::TcpBuffers {
                send: 256 << 10,
                recv: 256 << 10,
            },
        );
        let data: Vec<u8> = (0..4u32 << 20)
            .map(|i| (i % 251 + i / 4093) as u8)
            .collect();
        let what = format!("gso/lro {gso_lro}, workers {workers}, {impair:?}");
        carry_exact(&mut s, &c, &srv, &data, Duration::from_secs(120), &what);
        let back = format!("{what}, back");
        carry_exact(&mut s, &srv, &c, &data, Duration::from_secs(120), &back);
        let (sa, sb) = (s.host(a).stats(), s.host(b).stats());
        for st in [&sa, &sb] {
            assert_eq!(st.tcp.rcvbadsum, 0, "{what}");
            assert_eq!(st.ip.tso, 0, "{what}: nothing went out whole");
            if gso_lro {
                assert!(st.ip.swgso > 0, "{what}: segments cut in software");
                // Jitter spreads a burst's frames over time, one a receive burst:
                // nothing to merge then.
                if impair.jitter.is_zero() {
                    assert!(st.tcp.lroqueued > 0 && st.tcp.lroflushed > 0, "{what}");
                    // Fewer TCP segments up the stack than frames came in.
                    assert!(st.tcp.rcvtotal < st.ether.ipackets, "{what}");
                }
            } else {
                assert_eq!(st.ip.swgso, 0, "{what}");
                assert_eq!((st.tcp.lroqueued, st.tcp.lroflushed), (0, 0), "{what}");
                assert!(st.tcp.sndbyte / st.tcp.sndpack.max(1) <= 1448, "{what}");
            }
            if impair.loss > 0.0 {
                assert!(st.tcp.sndrexmitpack > 0, "{what}: losses were repaired");
            }
        }
    }
}

/// tcpdrop(8) through `Stack::tcp_drop_ask`: the selected connection is reset
/// (the peer hears it, the application sees `ConnectionAborted`); the others and
/// the listener stay.
#[test]
fn tcpdrop_resets_the_connection_it_selects_and_no_other() {
    let (mut s, a, b) = pair(1, 15, Impairments::default());
    let (_l, c1, srv1) = connected(&mut s, a, b, 80, Duration::from_millis(20));
    let c2 = s
        .host(a)
        .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 80))
        .unwrap();
    s.run_for(Duration::from_millis(20));
    let which = net::tcp::TcpDrop::Conn {
        local: srv1.local_addr().unwrap(),
        remote: srv1.peer_addr().unwrap(),
    };
    let q = s.host(b).tcp_drop_ask(which).unwrap();
    s.run_for(Duration::from_millis(20));
    assert!(q.ready());
    let dropped = q.into_list();
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].state, "ESTABLISHED");
    let mut buf = [0u8; 8];
    let e = (&srv1).read(&mut buf).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionAborted);
    let e = (&c1).read(&mut buf).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset);
    // The other connection still carries data; the listener is still listed.
    assert_eq!((&c2).write(b"ping").unwrap(), 4);
    s.run_for(Duration::from_millis(20));
    let q = s.host(b).tcp_connections_ask().unwrap();
    s.run_for(Duration::from_millis(20));
    let list = q.into_list();
    assert!(list.iter().any(|c| c.state == "LISTEN"));
    assert_eq!(
        list.iter().filter(|c| c.state == "ESTABLISHED").count(),
        1,
        "{list:?}"
    );
}

/// FreeBSD's `icmp_may_rst`: an ICMP hard error quoting the SYN of a connection in
/// SYN-SENT (its sequence number exactly) ends the connect with ECONNREFUSED, or
/// EHOSTUNREACH for time exceeded; a quoted sequence number off by one, a soft
/// error (host unreachable) and any error about an established connection are
/// ignored; with the knob off so is everything.
#[test]
fn icmp_hard_errors_end_a_connect_whose_syn_they_quote() {
    // (type, code, the connect's error), or None where the connect goes on.
    let cases: [(u8, u8, Option<ErrorKind>); 5] = [
        (3, 3, Some(ErrorKind::ConnectionRefused)),
        (3, 13, Some(ErrorKind::ConnectionRefused)),
        (11, 0, Some(ErrorKind::HostUnreachable)),
        (3, 1, None),
        (11, 1, None),
    ];
    for workers in [1, 2] {
        for may_rst in [true, false] {
            for (ty, code, want) in cases {
                let tcp = net::tcp::TcpConfig {
                    icmp_may_rst: may_rst,
                    ..net::tcp::TcpConfig::default()
                };
                let (mut s, a, b, hub) = pair_on_hub(workers, 5, WireConfig::default(), tcp);
                // b swallows SYNs to port 9, so that a waits in SYN-SENT.
                let fw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), workers).unwrap();
                fw.command("add 100 deny tcp from any to any 9 setup")
                    .unwrap();
                fw.attach(s.host(b));
                let mut raw = s.attach_raw(hub);
                let am = s.host(a).interfaces()[0].mac;
                let c = s
                    .host(a)
                    .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 9))
                    .unwrap();
                s.run_for(Duration::from_millis(20));
                let mut got = Vec::new();
                raw.rx_burst(s.now(), &mut got, 1024);
                let syn = got
                    .iter()
                    .map(mbuf::Mbuf::to_vec)
                    .find(|v| v[6..12] == am.0 && v[12..14] == [8, 0] && v[14 + 9] == 6)
                    .expect("a's SYN");
                let mut quoted = syn[14..14 + 28].to_vec();
                let seq = u32::from_be_bytes(quoted[24..28].try_into().unwrap());
                let case = format!("workers {workers} may_rst {may_rst} type {ty} code {code}");
                // One past the SYN's sequence number: not ours to believe.
                quoted[24..28].copy_from_slice(&seq.wrapping_add(1).to_be_bytes());
                let now = s.now();
                raw.tx_burst(
                    now,
                    &mut vec![common::icmp4_error_frame(am, ty, code, [0; 4], &quoted)],
                );
                s.run_for(Duration::from_millis(5));
                assert!(c.take_error().unwrap().is_none(), "{case}");
                quoted[24..28].copy_from_slice(&seq.to_be_bytes());
                let now = s.now();
                raw.tx_burst(
                    now,
                    &mut vec![common::icmp4_error_frame(am, ty, code, [0; 4], &quoted)],
                );
                s.run_for(Duration::from_millis(5));
                let e = c.take_error().unwrap().map(|e| e.kind());
                assert_eq!(e, want.filter(|_| may_rst), "{case}");
            }
        }
    }
}

/// An established connection ignores hard errors (RFC 5461 §4.1): the transfer
/// after one is byte-exact.
#[test]
fn an_established_connection_ignores_icmp_hard_errors() {
    let tcp = net::tcp::TcpConfig::default();
    let (mut s, a, b, hub) = pair_on_hub(1, 6, WireConfig::default(), tcp);
    let mut raw = s.attach_raw(hub);
    let am = s.host(a).interfaces()[0].mac;
    let (_l, mut c, mut srv) = connected(&mut s, a, b, 9, Duration::from_millis(20));
    c.write_all(b"before").unwrap();
    s.run_for(Duration::from_millis(5));
    let mut got = Vec::new();
    raw.rx_burst(s.now(), &mut got, 1024);
    let seg = got
        .iter()
        .map(mbuf::Mbuf::to_vec)
        .rfind(|v| v[6..12] == am.0 && v[12..14] == [8, 0] && v[14 + 9] == 6)
        .expect("a's segment");
    for (ty, code) in [(3, 3), (3, 2), (3, 13), (11, 0)] {
        let now = s.now();
        raw.tx_burst(
            now,
            &mut vec![common::icmp4_error_frame(
                am,
                ty,
                code,
                [0; 4],
                &seg[14..14 + 28],
            )],
        );
    }
    s.run_for(Duration::from_millis(5));
    assert!(c.take_error().unwrap().is_none());
    c.write_all(b" and after").unwrap();
    s.run_for(Duration::from_millis(100));
    let mut buf = [0u8; 16];
    srv.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"before and after");
}

/// ECN (RFC 3168) end to end, over a wire that marks 1% of ECN-capable packets
/// Congestion Experienced (an active queue that marks instead of dropping): with
/// ECN asked for (`ecn.enable=1`) and granted (the default, 2), the handshake
/// negotiates it, data goes out ECT(0), the receiver counts the marks and echoes
/// them, and the sender halves its window for them (the CE reaction) without a
/// single retransmission; the transfer is byte-exact. With ECN off, no packet is
/// ECN-capable, so none is marked and nothing reacts.
#[test]
fn ecn_marks_slow_the_sender_without_a_retransmission() {
    for (asked, workers) in [(true, 1), (true, 2), (false, 1)] {
        let wire = WireConfig {
            impair: Impairments {
                delay: Duration::from_millis(5),
                ce: 0.01,
                ..Impairments::default()
            },
            ..WireConfig::default()
        };
        let tcp = net::tcp::TcpConfig {
            ecn: if asked { 1 } else { 0 },
            ..net::tcp::TcpConfig::default()
        };
        let (mut s, a, b) = pair_with(workers, 31, wire, tcp);
        transfer(
            &mut s,
            a,
            b,
            80,
            Duration::from_millis(100),
            4_000_000,
            Duration::from_secs(60),
        );
        let (sa, sb) = (s.host(a).stats().tcp, s.host(b).stats().tcp);
        let case = format!("ECN asked {asked}, {workers} workers: {sa:?} {sb:?}");
        assert_eq!(sa.sndrexmitpack, 0, "{case}");
        if asked {
            assert_eq!((sa.ecn_shs, sb.ecn_shs), (1, 1), "{case}");
            // Every data segment went out ECN-capable (none was retransmitted).
            assert_eq!(sa.ecn_ect0, sa.sndpack, "{case}");
            assert!(sb.ecn_ce > 5, "{case}");
            assert!(sa.ecn_rcwnd > 0, "{case}");
            // At most one reduction a window: fewer than the marks.
            assert!(sa.ecn_rcwnd <= sb.ecn_ce, "{case}");
        } else {
            assert_eq!(
                (sa.ecn_shs, sa.ecn_ect0, sb.ecn_ce, sa.ecn_rcwnd),
                (0, 0, 0, 0),
                "{case}"
            );
        }
    }
}

/// BBR through the real stack (its workers' pacing timers, the scoreboard's rate
/// samples): 4 MB over a 10 Mbit/s, 40 ms path with a 100-frame queue and 2%
/// random loss each way. BBR keeps near the path's rate; CUBIC, halving its window
/// per loss, a fraction of it. Both byte-exact.
#[test]
fn bbr_keeps_a_lossy_path_busy_where_cubic_backs_off() {
    use net::tcp::CongestionControl;
    let took = |cc: CongestionControl| {
        let wire = WireConfig {
            impair: Impairments {
                delay: Duration::from_millis(20),
                rate_bps: 10_000_000,
                loss: 0.02,
                ..Impairments::default()
            },
            queue_limit: 100,
            ..WireConfig::default()
        };
        let tcp = net::tcp::TcpConfig {
            cc,
            sndbuf: 1 << 20,
            rcvbuf: 1 << 20,
            ..net::tcp::TcpConfig::default()
        };
        let (mut s, a, b) = pair_with(1, 26, wire, tcp);
        let t = transfer(
            &mut s,
            a,
            b,
            80,
            Duration::from_millis(200),
            4_000_000,
            Duration::from_secs(600),
        );
        (t, s.host(a).stats().tcp)
    };
    let (bbr, sb) = took(CongestionControl::Bbr);
    let (cubic, sc) = took(CongestionControl::Cubic);
    eprintln!(
        "4 MB, 10 Mbit/s, 40 ms, 2% loss: BBR {bbr:?} ({} retransmitted, {} timeouts), \
         CUBIC {cubic:?} ({} retransmitted, {} timeouts)",
        sb.sndrexmitpack, sb.rexmttimeo, sc.sndrexmitpack, sc.rexmttimeo
    );
    // 4 MB at 10 Mbit/s is 3.2 s on the wire; 2% more for the repairs.
    assert!(bbr < Duration::from_secs(5), "BBR {bbr:?}");
    assert!(cubic > bbr * 2, "CUBIC {cubic:?} against BBR {bbr:?}");
}

/// BBR without loss fills a 100 Mbit/s, 20 ms path (a queue of a BDP): its
/// bandwidth samples count what each ACK delivers, also when it acknowledges only
/// the head of a send (a segmentation offload burst of up to 64 KiB, which the
/// receiver acknowledges a few segments at a time). When only whole bursts counted,
/// BBR believed the path a quarter as fast and held to ~26 Mbit/s.
#[test]
fn bbr_fills_a_clean_path() {
    use net::tcp::CongestionControl;
    for workers in [1, 2] {
        let wire = WireConfig {
            impair: Impairments {
                delay: Duration::from_millis(10),
                rate_bps: 100_000_000,
                ..Impairments::default()
            },
            queue_limit: 250,
            ..WireConfig::default()
        };
        let tcp = net::tcp::TcpConfig {
            cc: CongestionControl::Bbr,
            sndbuf: 4 << 20,
            rcvbuf: 4 << 20,
            ..net::tcp::TcpConfig::default()
        };
        let (mut s, a, b) = pair_with(workers, 27, wire, tcp);
        let t = transfer(
            &mut s,
            a,
            b,
            80,
            Duration::from_millis(200),
            16_000_000,
            Duration::from_secs(600),
        );
        let mbps = 16e6 * 8.0 / t.as_secs_f64() / 1e6;
        eprintln!("BBR, 16 MB over 100 Mbit/s, 20 ms, {workers} workers: {t:?}, {mbps:.1} Mbit/s");
        // 1.28 s on the wire; STARTUP, DRAIN and PROBE_RTT's dips cost some.
        assert!(mbps > 60.0, "{workers} workers: {mbps:.1} Mbit/s in {t:?}");
    }
}

/// A TCP segment seen on the wire, with the IP header fields the socket options
/// set: (source, TTL or hop limit, TOS or traffic class, TCP flags).
fn tcp_frames(s: &mut Sim) -> Vec<(std::net::IpAddr, u8, u8, u8)> {
    let mut out = Vec::new();
    for r in s.take_trace() {
        let f = &r.frame;
        match f.get(12..14) {
            Some([0x08, 0x00]) if f.len() >= 34 + 14 && f[23] == 6 => {
                let hl = usize::from(f[14] & 0xf) * 4;
                let src = Ipv4Addr::new(f[26], f[27], f[28], f[29]);
                out.push((src.into(), f[22], f[15], f[14 + hl + 13]));
            }
            Some([0x86, 0xdd]) if f.len() >= 54 + 14 && f[20] == 6 => {
                let src: [u8; 16] = f[22..38].try_into().unwrap();
                let tclass = (f[14] & 0x0f) << 4 | f[15] >> 4;
                out.push((
                    std::net::Ipv6Addr::from(src).into(),
                    f[21],
                    tclass,
                    f[54 + 13],
                ));
            }
            _ => {}
        }
    }
    out
}

/// Hosts `a` and `b` (198.18.0.1 and .2, 2001:2::1 and ::2) on one hub, tracing.
fn traced_pair(seed: u64) -> (Sim, HostId, HostId) {
    let mut s = Sim::new(seed);
    s.enable_trace();
    let hub = s.add_hub(WireConfig::default());
    let a = s.add_host("a", 1);
    let b = s.add_host("b", 1);
    s.connect(a, hub, "198.18.0.1/24");
    s.connect(b, hub, "198.18.0.2/24");
    add_addresses6(&mut s, a, b);
    // Duplicate address detection, before any connection.
    s.run_for(Duration::from_secs(5));
    s.take_trace();
    (s, a, b)
}

/// `IP_TTL` and `IP_TOS` (IPv4) and `IPV6_UNICAST_HOPS` and `IPV6_TCLASS` (the same
/// methods on an IPv6 socket) reach every segment of a connection: the client's
/// from its SYN on, the listener's on its SYN-ACK and on the connection it
/// accepts, which inherits them; a change takes effect on the next segments.
/// The ECN field stays the stack's.
fn ip_options_reach_the_wire(v6: bool) {
    let (mut s, a, b) = traced_pair(41);
    let (any, server): (std::net::IpAddr, std::net::IpAddr) = if v6 {
        ("::".parse().unwrap(), "2001:2::2".parse().unwrap())
    } else {
        (Ipv4Addr::UNSPECIFIED.into(), ip(2).into())
    };
    let l = s.host(b).tcp_listen((any, 7000), 4).unwrap();
    l.set_nonblocking(true).unwrap();
    l.set_ttl(7).unwrap();
    l.set_tos(0xb8 | 0b01).unwrap(); // EF; the ECN bits are ignored
    assert_eq!((l.ttl().unwrap(), l.tos().unwrap()), (7, 0xb8));
    let c = s.host(a).tcp_connect_nonblocking((server, 7000)).unwrap();
    assert_eq!((c.ttl().unwrap(), c.tos().unwrap()), (64, 0));
    c.set_ttl(9).unwrap();
    c.set_tos(0x20).unwrap();
    for bad in [0, 256, 1000] {
        assert_eq!(c.set_ttl(bad).unwrap_err().kind(), ErrorKind::InvalidInput);
        assert_eq!(l.set_ttl(bad).unwrap_err().kind(), ErrorKind::InvalidInput);
    }
    assert_eq!(c.set_tos(256).unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(c.ttl().unwrap(), 9);
    s.run_for(Duration::from_millis(50));
    let (srv, _) = l.accept().unwrap();
    assert_eq!((srv.ttl().unwrap(), srv.tos().unwrap()), (7, 0xb8));
    srv.set_nonblocking(true).unwrap();
    let mut c = c;
    let mut srv = srv;
    c.write_all(b"ping").unwrap();
    s.run_for(Duration::from_millis(50));
    let mut buf = [0u8; 16];
    assert_eq!(srv.read(&mut buf).unwrap(), 4);
    srv.write_all(b"pong").unwrap();
    s.run_for(Duration::from_millis(50));
    let client_ip = c.local_addr().unwrap().ip();
    let first = tcp_frames(&mut s);
    let ours = |fs: &[(std::net::IpAddr, u8, u8, u8)], from: std::net::IpAddr| {
        fs.iter()
            .filter(|f| f.0 == from)
            .map(|&(_, ttl, tos, flags)| (ttl, tos & !0b11, flags))
            .collect::<Vec<_>>()
    };
    let (cf, sf) = (ours(&first, client_ip), ours(&first, server));
    // The client's SYN, the server's SYN-ACK, and data both ways.
    assert!(cf.iter().any(|f| f.2 & 0x12 == 0x02), "{cf:?}");
    assert!(sf.iter().any(|f| f.2 & 0x12 == 0x12), "{sf:?}");
    assert!(cf.len() >= 3 && sf.len() >= 2, "{cf:?} {sf:?}");
    assert!(cf.iter().all(|f| (f.0, f.1) == (9, 0x20)), "client: {cf:?}");
    assert!(sf.iter().all(|f| (f.0, f.1) == (7, 0xb8)), "server: {sf:?}");
    // A change on the accepted connection, from its next segment on.
    srv.set_ttl(33).unwrap();
    srv.set_tos(0x48).unwrap();
    srv.write_all(b"again").unwrap();
    s.run_for(Duration::from_millis(50));
    let sf = ours(&tcp_frames(&mut s), server);
    assert!(
        !sf.is_empty() && sf.iter().all(|f| (f.0, f.1) == (33, 0x48)),
        "{sf:?}"
    );
    // The listener's own are unchanged.
    assert_eq!((l.ttl().unwrap(), l.tos().unwrap()), (7, 0xb8));
}

#[test]
fn ip_ttl_and_tos_reach_every_segment_and_accepted_connections_inherit_them() {
    ip_options_reach_the_wire(false);
}

#[test]
fn ipv6_hop_limit_and_traffic_class_reach_every_segment_and_are_inherited() {
    ip_options_reach_the_wire(true);
}

/// A socket bound and not listening (`Stack::tcp_bind`) refuses SYNs with resets
/// that carry its TTL and TOS, as FreeBSD's do; once it listens, its listener
/// answers with them.
#[test]
fn a_bound_socket_resets_with_its_ip_options_and_listens_with_them() {
    let (mut s, a, b) = traced_pair(43);
    let bound = s
        .host(b)
        .tcp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7001))
        .unwrap();
    bound.set_ttl(5).unwrap();
    bound.set_tos(0x28).unwrap();
    // Not a listener: a listen elsewhere on the port is not refused by it.
    let c = s
        .host(a)
        .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 7001))
        .unwrap();
    s.run_for(Duration::from_millis(50));
    assert_eq!(
        c.take_error().unwrap().unwrap().kind(),
        ErrorKind::ConnectionRefused
    );
    let frames = tcp_frames(&mut s);
    let rst: Vec<_> = frames
        .iter()
        .filter(|f| f.0 == std::net::IpAddr::from(ip(2)) && f.3 & 0x04 != 0)
        .collect();
    assert!(!rst.is_empty(), "{frames:?}");
    assert!(rst.iter().all(|f| (f.1, f.2) == (5, 0x28)), "{rst:?}");
    let l = bound.listen(4, None).unwrap();
    assert_eq!((l.ttl().unwrap(), l.tos().unwrap()), (5, 0x28));
    l.set_nonblocking(true).unwrap();
    let c = s
        .host(a)
        .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 7001))
        .unwrap();
    s.run_for(Duration::from_millis(50));
    assert!(c.is_connected());
    let (srv, _) = l.accept().unwrap();
    assert_eq!(srv.ttl().unwrap(), 5);
    let synack: Vec<_> = tcp_frames(&mut s)
        .into_iter()
        .filter(|f| f.0 == std::net::IpAddr::from(ip(2)) && f.3 & 0x12 == 0x12)
        .collect();
    assert_eq!(synack.len(), 1);
    assert_eq!((synack[0].1, synack[0].2), (5, 0x28));
    // Without options, a closed port's reset keeps the stack's defaults.
    let c = s
        .host(a)
        .tcp_connect_nonblocking(SocketAddrV4::new(ip(2), 7002))
        .unwrap();
    s.run_for(Duration::from_millis(50));
    assert!(c.take_error().unwrap().is_some());
    let rst: Vec<_> = tcp_frames(&mut s)
        .into_iter()
        .filter(|f| f.0 == std::net::IpAddr::from(ip(2)) && f.3 & 0x04 != 0)
        .collect();
    assert!(
        !rst.is_empty() && rst.iter().all(|f| (f.1, f.2) == (64, 0)),
        "{rst:?}"
    );
}

/// The first data of each SYN `a` sent on the wire: its length (0: none).
fn syn_payloads(s: &mut Sim) -> Vec<usize> {
    let mut out = Vec::new();
    for r in s.take_trace() {
        let f = &r.frame;
        if f.get(12..14) != Some(&[0x08, 0x00][..]) || f.len() < 34 + 20 || f[23] != 6 {
            continue;
        }
        let hl = usize::from(f[14] & 0xf) * 4;
        let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
        let tcp = 14 + hl;
        let flags = f[tcp + 13];
        // A SYN without ACK: the client's.
        if flags & 0x12 == 0x02 {
            let thl = usize::from(f[tcp + 12] >> 4) * 4;
            out.push(total - hl - thl);
        }
    }
    out
}

/// TCP Fast Open (RFC 7413) between two stacks: the first connection asks for a
/// cookie and sends its data after the handshake; the second carries its data in
/// the SYN, which the server takes (its listener's cookie check, through the real
/// stack); a server without Fast Open gives no cookie, so both SYNs stay plain.
#[test]
fn fast_open_carries_data_in_the_syn_once_a_cookie_is_held() {
    for server_on in [true, false] {
        let tcp = net::tcp::TcpConfig {
            fastopen_server: server_on,
            ..net::tcp::TcpConfig::default()
        };
        let mut s = Sim::new(73);
        s.enable_trace();
        let hub = s.add_hub(WireConfig::default());
        let (a, b) = (s.add_host_tcp("a", 1, tcp), s.add_host_tcp("b", 1, tcp));
        s.connect(a, hub, "198.18.0.1/24");
        s.connect(b, hub, "198.18.0.2/24");
        let l = listener(&mut s, b, 80, 8);
        l.set_fastopen(16).unwrap();
        let mut syns = Vec::new();
        for round in 0..2u8 {
            let data = vec![round + 1; 300];
            let (c, queued) = s
                .host(a)
                .tcp_connect_fastopen(SocketAddrV4::new(ip(2), 80), None, None, &data)
                .unwrap();
            assert_eq!(queued, 300);
            s.run_for(Duration::from_millis(50));
            let (mut srv, _) = l.accept().expect("accepted");
            srv.set_nonblocking(true).unwrap();
            let mut got = vec![0u8; 1000];
            let n = srv.read(&mut got).unwrap_or(0);
            assert_eq!(&got[..n], &data[..], "server {server_on}, round {round}");
            syns.extend(syn_payloads(&mut s));
            drop((c, srv));
            s.run_for(Duration::from_millis(50));
        }
        let (ca, cb) = (s.host(a).stats().tcp, s.host(b).stats().tcp);
        if server_on {
            // A cookie request without data, then the data in the SYN.
            assert_eq!(syns, vec![0, 300], "{ca:?}");
            assert_eq!(
                (ca.tfo_cookiereq, ca.tfo_cookierecvd, ca.tfo_syndata_acked),
                (1, 1, 1)
            );
            assert_eq!((cb.tfo_cookiesent, cb.tfo_passive), (1, 1), "{cb:?}");
        } else {
            assert_eq!(syns, vec![0, 0], "{ca:?}");
            assert_eq!((ca.tfo_syndata, cb.tfo_passive), (0, 0));
        }
    }
}

/// `read_with` lends the received bytes where they lie: a transfer read only
/// through it (after a peek, whose bytes come first, and with a consumer that
/// sometimes takes part of a piece) arrives byte-exact, and the end of the stream
/// reads as 0.
#[test]
fn read_with_lends_the_bytes_in_place_byte_exact() {
    use std::io::Write;
    let (mut s, a, b) = pair(1, 88, Impairments::default());
    let (_l, mut c, srv) = connected(&mut s, a, b, 80, Duration::from_millis(50));
    c.set_nonblocking(true).unwrap();
    srv.set_nonblocking(true).unwrap();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 509) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut peeked = false;
    let mut calls = 0u32;
    let mut closed = false;
    for _ in 0..100_000 {
        if sent < data.len() {
            sent += c.write(&data[sent..]).unwrap_or(0);
        } else if !closed {
            c.shutdown(std::net::Shutdown::Write).unwrap();
            closed = true;
        }
        s.run_for(Duration::from_micros(200));
        if !peeked && got.is_empty() {
            let mut look = [0u8; 100];
            if let Ok(n) = srv.peek(&mut look) {
                assert_eq!(&look[..n], &data[..n]);
                peeked = n > 0;
            }
        }
        loop {
            calls += 1;
            // Every third call takes only half of a piece (at least a byte).
            let half = calls.is_multiple_of(3);
            match srv.read_with(64 * 1024, |piece| {
                let take = if half {
                    piece.len().div_ceil(2)
                } else {
                    piece.len()
                };
                got.extend_from_slice(&piece[..take]);
                take
            }) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        if got.len() == data.len() && closed {
            break;
        }
    }
    eprintln!("read_with: {} bytes in {calls} calls", got.len());
    assert!(peeked, "a peek saw the first bytes");
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
    s.run_for(Duration::from_millis(50));
    assert_eq!(srv.read_with(100, |p| p.len()).unwrap(), 0, "the end");
}

/// `write_with` lends room in the stack's own buffer: a transfer written only
/// through it (in pieces of varying size, some claimed only in part) and read
/// through `read_with` arrives byte-exact, each byte written once by the
/// application and read where it lies.
#[test]
fn write_with_and_read_with_carry_a_transfer_without_copies() {
    let (mut s, a, b) = pair(1, 89, Impairments::default());
    let (_l, c, srv) = connected(&mut s, a, b, 80, Duration::from_millis(50));
    c.set_nonblocking(true).unwrap();
    srv.set_nonblocking(true).unwrap();
    let data: Vec<u8> = (0..4_000_000u32)
        .map(|i| (i * 13 + i / 1021) as u8)
        .collect();
    let (mut sent, mut got, mut calls) = (0usize, Vec::new(), 0usize);
    for _ in 0..100_000 {
        while sent < data.len() {
            calls += 1;
            let max = [1, 100, 70_000, usize::MAX][calls % 4].min(data.len() - sent);
            let part = calls.is_multiple_of(5);
            match c.write_with(max, |room| {
                assert!(room.len() <= max && !room.is_empty());
                let n = if part {
                    room.len().div_ceil(2)
                } else {
                    room.len()
                };
                room[..n].copy_from_slice(&data[sent..sent + n]);
                n
            }) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        if sent == data.len() {
            c.shutdown(std::net::Shutdown::Write).unwrap();
        }
        s.run_for(Duration::from_micros(200));
        while let Ok(n) = srv.read_with(usize::MAX, |p| {
            got.extend_from_slice(p);
            p.len()
        }) {
            if n == 0 {
                break;
            }
        }
        if got.len() == data.len() {
            break;
        }
    }
    eprintln!("write_with: {sent} bytes in {calls} calls");
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
    let sa = s.host(a).stats();
    assert_eq!(sa.tcp.sndbyte, data.len() as u64, "{:?}", sa.tcp);
}

#[test]
fn write_mbuf_sends_the_applications_buffers_in_order_with_plain_writes() {
    let (mut s, a, b) = pair(1, 91, Impairments::default());
    let (_l, c, srv) = connected(&mut s, a, b, 80, Duration::from_millis(50));
    c.set_nonblocking(true).unwrap();
    srv.set_nonblocking(true).unwrap();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 509) as u8).collect();
    // Alternately a plain write and a chain of three packet buffers (given to
    // the stack, not copied), of odd sizes.
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut k = 0usize;
    while at < data.len() {
        let n = [777, 40_000, 3, 100_000][k % 4].min(data.len() - at);
        pieces.push((k % 2 == 1, at, n));
        at += n;
        k += 1;
    }
    let chain = |bytes: &[u8]| {
        let third = bytes.len() / 3;
        let mut m = mbuf::Mbuf::from_slice(&bytes[..third]).unwrap();
        m.cat(mbuf::Mbuf::from_slice(&bytes[third..2 * third]).unwrap());
        m.cat(mbuf::Mbuf::from_slice(&bytes[2 * third..]).unwrap());
        m
    };
    let (mut next, mut cur, mut by_ref, mut got) =
        (0, None::<(bool, usize, usize, mbuf::Mbuf)>, 0, Vec::new());
    for _ in 0..100_000 {
        loop {
            if cur.is_none() && next < pieces.len() {
                let (own, at, n) = pieces[next];
                next += 1;
                cur = Some((own, at, n, chain(&data[at..at + n])));
            }
            let Some((own, at, n, m)) = cur.as_mut() else {
                break;
            };
            let r = if *own {
                let before = m.len();
                c.write_mbuf(m).inspect(|&k| {
                    by_ref += k;
                    assert_eq!(m.len(), before - k);
                })
            } else {
                let done = *n - m.len();
                (&c).write(&data[*at + done..*at + *n])
                    .inspect(|&k| m.adj(k as isize))
            };
            match r {
                Ok(_) if m.is_empty() => cur = None,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        if cur.is_none() && next == pieces.len() {
            c.shutdown(std::net::Shutdown::Write).ok();
        }
        s.run_for(Duration::from_micros(200));
        let mut buf = vec![0u8; 65536];
        loop {
            match (&srv).read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => break,
            }
        }
        if got.len() == data.len() {
            break;
        }
    }
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
    assert!(by_ref > data.len() / 3, "{by_ref} bytes given by reference");
}

/// The largest TCP segment in `frames` (Ethernet frames) sent from `src`: data plus
/// TCP options, per segment the frame stands for (a frame past the MTU, whole for
/// the device to cut, stands for `tso_segsz`-byte ones).
fn largest_segment(frames: &[mbuf::Mbuf], src: std::net::IpAddr, mtu: usize) -> usize {
    let mut most = 0;
    for m in frames {
        let f = m.to_vec();
        if f.len() < 14 + 40 {
            continue;
        }
        let (l3, total, from) = match (u16::from_be_bytes([f[12], f[13]]), f[14] >> 4) {
            (0x0800, 4) if f[14 + 9] == 6 => {
                let ihl = usize::from(f[14] & 0xf) * 4;
                let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
                let s: [u8; 4] = f[26..30].try_into().unwrap();
                (ihl, total, std::net::IpAddr::from(s))
            }
            (0x86dd, 6) if f[14 + 6] == 6 => {
                let total = 40 + usize::from(u16::from_be_bytes([f[18], f[19]]));
                let s: [u8; 16] = f[22..38].try_into().unwrap();
                (40, total, std::net::IpAddr::from(s))
            }
            _ => continue,
        };
        if from != src {
            continue;
        }
        let tcp = 14 + l3;
        let doff = usize::from(f[tcp + 12] >> 4) * 4;
        let opts = doff - 20;
        let data = total - l3 - doff;
        let per = if total > mtu && m.hdr.tso_segsz != 0 {
            usize::from(m.hdr.tso_segsz).min(data)
        } else {
            data
        };
        if data > 0 {
            most = most.max(per + opts);
        }
    }
    most
}

/// RFC 9293 §3.7.1: no segment larger than the peer's MSS (data and TCP options,
/// RFC 6691), whatever the offload path: segments of up to 64 KiB cut in software
/// (the default), cut by the device, or one MSS each. A peer behind a smaller link
/// (its interface's MTU here) offers a smaller MSS than ours; `fit_link` cut only
/// what exceeded our link's MTU, so a burst that fit it left whole: segments of
/// up to 1,440 bytes to a peer offering 1,200. Random MSS values and write sizes,
/// IPv4 and IPv6; the frames from the sender are read off the wire.
#[test]
fn no_segment_exceeds_the_peers_mss_whatever_the_offload() {
    let mut rng = dev::rng::Rng::new(46);
    for case in 0..12u64 {
        let v6 = case % 2 == 1;
        let (tso, device) = match case % 6 / 2 {
            0 => (true, 0),
            1 => (true, 64 * 1024),
            _ => (false, 0),
        };
        let mss = match case {
            0 | 1 => 536,
            2 | 3 => 1200,
            _ => 536 + rng.below(900) as usize,
        };
        let write = 1 + rng.below(20_000) as usize;
        let wire = WireConfig {
            offload: dev::Offloads {
                csum: device > 0,
                tso: device,
            },
            ..WireConfig::default()
        };
        let tcp = net::tcp::TcpConfig {
            tso,
            ..Default::default()
        };
        let (mut s, a, b, hub) = pair_on_hub(1, 60 + case, wire, tcp);
        let mut sniff = s.attach_raw(hub);
        // The peer's link: its MTU makes its MSS (IPv6's header is 20 bytes more).
        let ip_hdr = if v6 { 40 } else { 20 };
        s.host(b)
            .set_mtu(net::IfIndex(0), mss + ip_hdr + 20)
            .unwrap();
        let (src, to): (std::net::IpAddr, std::net::SocketAddr) = if v6 {
            add_addresses6(&mut s, a, b);
            s.run_for(Duration::from_millis(1500));
            (
                "2001:2::1".parse().unwrap(),
                "[2001:2::2]:80".parse().unwrap(),
            )
        } else {
            (ip(1).into(), SocketAddrV4::new(ip(2), 80).into())
        };
        let l = s.host(b).tcp_listen(to, 4).unwrap();
        l.set_nonblocking(true).unwrap();
        let c = s.host(a).tcp_connect_nonblocking(to).unwrap();
        s.run_for(Duration::from_millis(50));
        let (srv, _) = l.accept().unwrap();
        c.set_nonblocking(true).unwrap();
        srv.set_nonblocking(true).unwrap();
        // Bulk (the sender's backlog cut into bursts), then messages each read
        // before the next is written (the tail of each leaves alone, the length
        // the application gave).
        let mut sizes = vec![(300_000, write)];
        for _ in 0..40 {
            let n = 1 + rng.below(4 * mss as u64) as usize;
            sizes.push((n, n));
        }
        let mut frames = Vec::new();
        let what = format!(
            "case {case}: v6 {v6}, tso {tso}, device {device}, mss {mss}, writes of {write}"
        );
        let mut buf = vec![0u8; 65536];
        for (total, write) in sizes {
            let data: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
            let (mut sent, mut got) = (0, 0);
            let done = s.run_until(Duration::from_secs(60), |s| {
                while sent < total {
                    let n = write.min(total - sent);
                    match (&c).write(&data[sent..sent + n]) {
                        Ok(k) if k > 0 => sent += k,
                        _ => break,
                    }
                }
                while let Ok(n) = (&srv).read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    got += n;
                }
                while sniff.rx_burst(s.now(), &mut frames, 256) > 0 {}
                got == total
            });
            assert!(done, "{what}: {got} of {total}");
        }
        let most = largest_segment(&frames, src, 1500);
        assert!(most > 0, "{what}: frames seen");
        assert!(most <= mss, "{what}: a segment of {most} bytes");
    }
}
