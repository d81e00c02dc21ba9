//! The same stacks on real worker threads and the real clock (no simulation): two
//! hosts joined by a memory wire, blocking sockets on application threads. This is
//! the path `mpstack run` takes, minus the TAP, so it runs without root.

use dev::mem::{wire, WireConfig};
use net::Stack;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

fn host(name: &str, workers: usize, dev: dev::mem::MemDevice, addr: &str) -> Stack {
    sim::standalone_host(name, workers, Box::new(dev), addr).unwrap()
}

#[test]
fn blocking_udp_echo_and_ping_on_worker_threads() {
    for workers in [1, 2] {
        let (da, db) = wire(WireConfig {
            num_queues: workers,
            ..WireConfig::default()
        });
        let mut a = host("a", workers, da, "198.18.1.1/24");
        let mut b = host("b", workers, db, "198.18.1.2/24");
        let server = b
            .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7))
            .unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        a.start().unwrap();
        b.start().unwrap();

        // A blocking echo server on its own thread.
        let echo = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            for _ in 0..50 {
                let (n, from) = server.recv_from(&mut buf).expect("server receives");
                server.send_to(&buf[..n], from).unwrap();
            }
        });

        let client = a
            .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
            .unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        client
            .connect(SocketAddrV4::new(Ipv4Addr::new(198, 18, 1, 2), 7))
            .unwrap();
        let mut buf = [0u8; 2048];
        for i in 0..50u32 {
            let msg = format!("datagram {i} from a with {workers} worker(s)");
            client.send(msg.as_bytes()).unwrap();
            let n = match client.recv(&mut buf) {
                Ok(n) => n,
                Err(e) => {
                    let mut out = String::new();
                    a.stats().write_netstat(&mut out, false).unwrap();
                    b.stats().write_netstat(&mut out, false).unwrap();
                    panic!("workers={workers} i={i}: {e}\n{out}");
                }
            };
            assert_eq!(&buf[..n], msg.as_bytes());
        }
        echo.join().unwrap();

        // Ping, blocking with a timeout.
        let p = a.ping_socket(7).unwrap();
        p.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for seq in 0..10 {
            p.send_echo(Ipv4Addr::new(198, 18, 1, 2), seq, b"on threads")
                .unwrap();
            let r = p.recv_reply(&mut buf).expect("echo reply");
            assert_eq!(r.from, Ipv4Addr::new(198, 18, 1, 2));
            assert_eq!(&buf[..r.len], b"on threads");
        }

        // A read timeout is an error of kind WouldBlock/TimedOut, not a hang.
        client
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let e = client.recv(&mut buf).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{e:?}"
        );

        a.stop();
        b.stop();
        assert_eq!(b.stats().udp.ipackets, 50, "workers={workers}");
        assert_eq!(b.stats().icmp.inecho, 10, "workers={workers}");
    }
}

#[test]
fn blocking_tcp_echo_on_worker_threads() {
    use std::io::{Read, Write};
    for workers in [1, 2] {
        let (da, db) = wire(WireConfig {
            num_queues: workers,
            ..WireConfig::default()
        });
        let mut a = host("a", workers, da, "198.18.1.1/24");
        let mut b = host("b", workers, db, "198.18.1.2/24");
        let listener = b
            .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), 8)
            .unwrap();
        a.start().unwrap();
        b.start().unwrap();
        let server = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut buf = vec![0u8; 8192];
            let mut total = 0;
            loop {
                let n = c.read(&mut buf).expect("server read");
                if n == 0 {
                    break;
                }
                c.write_all(&buf[..n]).unwrap();
                total += n;
            }
            total
        });
        let mut c = a
            .tcp_connect(
                SocketAddrV4::new(Ipv4Addr::new(198, 18, 1, 2), 7),
                Some(Duration::from_secs(10)),
            )
            .expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let reader = {
            let mut back = Vec::with_capacity(data.len());
            let mut sent = 0;
            let mut buf = vec![0u8; 65536];
            c.set_nonblocking(false).unwrap();
            while back.len() < data.len() {
                if sent < data.len() {
                    c.set_write_timeout(Some(Duration::from_millis(5))).unwrap();
                    match c.write(&data[sent..(sent + 65536).min(data.len())]) {
                        Ok(n) => sent += n,
                        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(e) => panic!("write: {e}"),
                    }
                }
                c.set_read_timeout(Some(Duration::from_millis(if sent < data.len() {
                    5
                } else {
                    20_000
                })))
                .unwrap();
                match c.read(&mut buf) {
                    Ok(0) => panic!("early EOF at {}", back.len()),
                    Ok(n) => back.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                    Err(e) => panic!("read: {e}"),
                }
            }
            back
        };
        assert!(reader == data, "workers={workers}: echo differs");
        c.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(server.join().unwrap(), data.len());
        let mut rest = [0u8; 8];
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(c.read(&mut rest).unwrap(), 0, "EOF after the server closed");
        drop(c);
        a.stop();
        b.stop();
    }
}
