//! The async sockets (feature `tokio`) between two stacks joined by a memory wire, with
//! worker threads on the real clock and a tokio current-thread runtime: the task that
//! waits is woken by the peer stack's worker threads, never by a reactor.
#![cfg(feature = "tokio")]

use dev::mem::{wire, MemDevice, WireConfig};
use net::{IfConfig, Stack, StackConfig, TcpStream};
use std::future::Future;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn host(name: &str, workers: usize, socket_queue: usize, dev: MemDevice, addr: &str) -> Stack {
    let mut s = Stack::new(StackConfig {
        name: name.into(),
        workers,
        socket_queue,
        ..StackConfig::default()
    });
    let addrs = vec![addr.parse().expect("an address")];
    s.add_interface(
        Box::new(dev),
        IfConfig {
            addrs,
            ..IfConfig::default()
        },
    )
    .expect("an interface");
    s.start().expect("worker threads");
    s
}

/// Stacks `a` (198.18.0.1) and `b` (198.18.0.2), each with `workers` worker threads.
fn pair(workers: usize) -> (Stack, Stack) {
    pair_with(workers, StackConfig::default().socket_queue)
}

fn pair_with(workers: usize, socket_queue: usize) -> (Stack, Stack) {
    let (da, db) = wire(WireConfig {
        num_queues: workers,
        queue_limit: 4096,
        ..WireConfig::default()
    });
    (
        host("tokio-a", workers, socket_queue, da, "198.18.0.1/24"),
        host("tokio-b", workers, socket_queue, db, "198.18.0.2/24"),
    )
}

/// Runs `f` on a current-thread runtime; a hang is a failure, not a stuck test.
fn run<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(60), f)
                .await
                .expect("the test finished within 60 s")
        })
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ seed)
        .collect()
}

/// Echoes one connection back until its FIN, then sends its own.
async fn echo(c: TcpStream) -> std::io::Result<u64> {
    let (mut rd, mut wr) = (&c, &c);
    let n = tokio::io::copy(&mut rd, &mut wr).await?;
    AsyncWriteExt::shutdown(&mut wr).await?;
    Ok(n)
}

#[test]
fn async_echo_of_one_mebibyte_is_byte_exact() {
    let (a, b) = pair(1);
    let l = b
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), 8)
        .unwrap();
    let data = Arc::new(pattern(0x5a, 1 << 20));
    run(async {
        let server = tokio::spawn(async move {
            let (c, _) = l.accept_async().await?;
            echo(c).await
        });
        let c = Arc::new(a.tcp_connect_async(SocketAddrV4::new(B, 7)).await.unwrap());
        // Write and read at once: 1 MiB does not fit in the buffers on the way.
        let writer = tokio::spawn({
            let (c, data) = (c.clone(), data.clone());
            async move {
                let mut w = &*c;
                w.write_all(&data).await?;
                AsyncWriteExt::shutdown(&mut w).await
            }
        });
        let mut back = vec![0u8; data.len()];
        (&*c).read_exact(&mut back).await.unwrap();
        assert!(back == *data, "the echo differs from what was sent");
        // The server's FIN follows the last byte: end of stream, again and again.
        let mut more = [0u8; 16];
        assert_eq!((&*c).read(&mut more).await.unwrap(), 0);
        assert_eq!((&*c).read(&mut more).await.unwrap(), 0);
        writer.await.unwrap().unwrap();
        assert_eq!(server.await.unwrap().unwrap(), data.len() as u64);
    });
}

#[test]
fn fifty_concurrent_connections_each_get_their_own_bytes_back() {
    const CONNS: usize = 50;
    const LEN: usize = 20_000;
    let (a, b) = pair(2);
    let l = b
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), CONNS)
        .unwrap();
    run(async {
        let server = tokio::spawn(async move {
            let mut echoes = tokio::task::JoinSet::new();
            for _ in 0..CONNS {
                let (c, _) = l.accept_async().await?;
                echoes.spawn(echo(c));
            }
            let mut total = 0;
            while let Some(r) = echoes.join_next().await {
                total += r.expect("an echo task")?;
            }
            std::io::Result::Ok(total)
        });
        let mut clients = tokio::task::JoinSet::new();
        for i in 0..CONNS {
            let connect = a.tcp_connect_async(SocketAddrV4::new(B, 7));
            clients.spawn(async move {
                let c = Arc::new(connect.await?);
                let data = pattern(i as u8, LEN);
                let writer = tokio::spawn({
                    let (c, data) = (c.clone(), data.clone());
                    async move {
                        let mut w = &*c;
                        w.write_all(&data).await?;
                        AsyncWriteExt::shutdown(&mut w).await
                    }
                });
                let mut back = Vec::new();
                (&*c).read_to_end(&mut back).await?;
                writer.await.expect("a writer task")?;
                std::io::Result::Ok(back == data)
            });
        }
        let mut exact = 0;
        while let Some(r) = clients.join_next().await {
            if r.expect("a client task").expect("a client's I/O") {
                exact += 1;
            }
        }
        assert_eq!(exact, CONNS, "connections whose echo was byte-exact");
        assert_eq!(server.await.unwrap().unwrap(), (CONNS * LEN) as u64);
    });
}

#[test]
fn async_accept_waits_for_a_connection_that_comes_later() {
    let (a, b) = pair(1);
    let l = b
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 8080), 4)
        .unwrap();
    run(async {
        let accepted = tokio::spawn(async move { l.accept_async().await });
        // The accepting task is pending (parked on the listener) when the SYN comes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!accepted.is_finished());
        let c = a
            .tcp_connect_async(SocketAddrV4::new(B, 8080))
            .await
            .unwrap();
        let (s, peer) = accepted.await.unwrap().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        assert_eq!(peer.ip(), A);
        assert_eq!(s.peer_addr().unwrap(), c.local_addr().unwrap());
        assert_eq!(
            s.local_addr().unwrap(),
            SocketAddr::V4(SocketAddrV4::new(B, 8080))
        );
    });
}

#[test]
fn udp_async_round_trip() {
    let (a, b) = pair(1);
    let server = b.udp_bind(SocketAddrV4::new(B, 7)).unwrap();
    let client = a
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .unwrap();
    run(async {
        let echo = tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            for _ in 0..3 {
                let (n, from) = server.recv_from_async(&mut buf).await?;
                server.send_to_async(&buf[..n], from).await?;
            }
            std::io::Result::Ok(())
        });
        let mut buf = [0u8; 2048];
        for (i, len) in [1usize, 1000, 1472].into_iter().enumerate() {
            let data = pattern(i as u8, len);
            let n = client
                .send_to_async(&data, SocketAddrV4::new(B, 7))
                .await
                .unwrap();
            assert_eq!(n, len);
            let (n, from) = client.recv_from_async(&mut buf).await.unwrap();
            assert_eq!(from, SocketAddr::V4(SocketAddrV4::new(B, 7)));
            assert_eq!(&buf[..n], &data[..]);
        }
        echo.await.unwrap().unwrap();
    });
}

#[test]
fn udp_send_to_async_waits_for_room_where_send_to_would_block() {
    // A send queue of 4 datagrams: a burst fills it faster than the worker drains it.
    let (a, b) = pair_with(1, 4);
    let sink = b.udp_bind(SocketAddrV4::new(B, 9)).unwrap();
    let client = a
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .unwrap();
    run(async {
        let mut would_block = 0;
        for _ in 0..200 {
            match client.send_to(&[0u8; 64], SocketAddrV4::new(B, 9)) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => would_block += 1,
                Err(e) => panic!("send_to: {e}"),
            }
        }
        assert!(would_block > 0, "the burst did not fill the send queue");
        for _ in 0..2000 {
            assert_eq!(
                client
                    .send_to_async(&[1u8; 64], SocketAddrV4::new(B, 9))
                    .await
                    .unwrap(),
                64
            );
        }
        // Something arrived (the small receive queue drops the rest, counted).
        let mut buf = [0u8; 64];
        sink.recv_from_async(&mut buf).await.unwrap();
    });
}

#[test]
fn connect_to_a_closed_port_is_refused() {
    let (a, _b) = pair(1);
    run(async {
        let e = a
            .tcp_connect_async(SocketAddrV4::new(B, 9999))
            .await
            .expect_err("nothing listens on 9999");
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    });
}

#[test]
fn read_after_the_peer_closed_gives_zero_and_write_after_shutdown_is_broken_pipe() {
    let (a, b) = pair(1);
    let l = b
        .tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), 4)
        .unwrap();
    run(async {
        let server = tokio::spawn(async move {
            let (mut s, _) = l.accept_async().await?;
            s.write_all(b"bye").await?;
            // Dropping the stream closes it: a FIN after the queued bytes.
            drop(s);
            std::io::Result::Ok(())
        });
        let mut c = a.tcp_connect_async(SocketAddrV4::new(B, 7)).await.unwrap();
        server.await.unwrap().unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"bye");
        let mut buf = [0u8; 8];
        assert_eq!(c.read(&mut buf).await.unwrap(), 0);
        AsyncWriteExt::shutdown(&mut c).await.unwrap();
        let e = c
            .write_all(b"late")
            .await
            .expect_err("written after shutdown");
        assert_eq!(e.kind(), ErrorKind::BrokenPipe);
    });
}

/// A netchannel's async side: a task waits for a flow's raw packets, woken by the
/// receiving stack's worker, and echoes each back raw through the stack.
#[test]
fn a_task_takes_a_flow_raw_and_answers_it_raw() {
    let (da, db) = wire(WireConfig {
        num_queues: 2,
        ..WireConfig::default()
    });
    let q = StackConfig::default().socket_queue;
    let a = host("nc-a", 2, q, da, "198.18.0.1/24");
    let b = host("nc-b", 2, q, db, "198.18.0.2/24");
    let ch = b
        .netchannel(net::netchan::Classifier::udp().local_port(7))
        .unwrap();
    let u = a
        .udp_bind("198.18.0.1:0".parse::<SocketAddr>().unwrap())
        .unwrap();
    u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let client = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let to: SocketAddr = "198.18.0.2:7".parse().unwrap();
        for i in 0..100u32 {
            u.send_to(&i.to_be_bytes(), to).unwrap();
            let (n, from) = u.recv_from(&mut buf).unwrap();
            assert_eq!((&buf[..n], from), (&i.to_be_bytes()[..], to));
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let echo = async {
        let mut batch = Vec::new();
        let mut seen = 0;
        while seen < 100 {
            batch.clear();
            seen += ch.recv_batch_async(&mut batch, 32).await;
            for p in &batch {
                // Addresses and ports swapped; the stack fills the checksums.
                let mut b = p.to_vec();
                let (src, dst) = (b[12..16].to_vec(), b[16..20].to_vec());
                b[12..16].copy_from_slice(&dst);
                b[16..20].copy_from_slice(&src);
                let (sp, dp) = (b[20..22].to_vec(), b[22..24].to_vec());
                b[20..22].copy_from_slice(&dp);
                b[22..24].copy_from_slice(&sp);
                ch.send(&b).unwrap();
            }
        }
    };
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), echo).await })
        .expect("100 datagrams echoed within 30 s");
    client.join().expect("every answer came back, byte-exact");
}
