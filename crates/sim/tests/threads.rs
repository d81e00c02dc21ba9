//! The same stacks on real worker threads and the real clock (no simulation): two
//! hosts joined by a memory wire, blocking sockets on application threads. This is
//! the path `mpstack run` takes, minus the TAP, so it runs without root.

use dev::mem::{wire, WireConfig};
use net::{IfConfig, Stack, StackConfig};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

fn host(name: &str, workers: usize, dev: dev::mem::MemDevice, addr: &str) -> Stack {
    let mut s = Stack::new(StackConfig {
        name: name.into(),
        workers,
        ..StackConfig::default()
    });
    s.add_interface(
        Box::new(dev),
        IfConfig {
            addrs: vec![addr.parse().unwrap()],
            ..IfConfig::default()
        },
    )
    .unwrap();
    s
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
