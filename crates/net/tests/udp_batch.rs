//! Batched UDP (`UdpSocket::send_batch`, `send_segmented`, `recv_batch` and their
//! async forms) between two stacks joined by a memory wire, worker threads on the real
//! clock: many datagrams for one wake-up of the home worker, and bad input refused
//! whole instead of half sent.

use dev::mem::{wire, MemDevice, WireConfig};
use net::socket::RecvMeta;
use net::{IfConfig, Stack, StackConfig};
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::{Duration, Instant};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn host(name: &str, socket_queue: usize, dev: MemDevice, addr: &str, start: bool) -> Stack {
    let mut s = Stack::new(StackConfig {
        name: name.into(),
        workers: 1,
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
    if start {
        s.start().expect("worker threads");
    }
    s
}

fn pair(socket_queue: usize) -> (Stack, Stack) {
    pair_with(socket_queue, socket_queue)
}

/// `a`'s sockets have queues of `qa` datagrams, `b`'s of `qb`.
fn pair_with(qa: usize, qb: usize) -> (Stack, Stack) {
    let (da, db) = wire(WireConfig {
        queue_limit: 4096,
        ..WireConfig::default()
    });
    let (a, b) = (
        host("batch-a", qa, da, "198.18.0.1/24", true),
        host("batch-b", qb, db, "198.18.0.2/24", true),
    );
    // One datagram each way first: ARP holds only a few packets while it resolves,
    // and the tests' batches are larger.
    let (sa, sb) = (
        a.udp_bind(SocketAddrV4::new(A, 0)).unwrap(),
        b.udp_bind(SocketAddrV4::new(B, 0)).unwrap(),
    );
    sb.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    sa.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 8];
    sa.send_to(b"arp", sb.local_addr().unwrap()).unwrap();
    let (_, from) = sb.recv_from(&mut buf).expect("the warm-up datagram");
    sb.send_to(b"arp", from).unwrap();
    sa.recv_from(&mut buf).expect("the warm-up answer");
    (a, b)
}

/// Datagram `i`: its length and bytes say which it is.
fn datagram(i: usize) -> Vec<u8> {
    (0..100 + i * 7).map(|k| (k as u8) ^ (i as u8)).collect()
}

/// Receives `n` datagrams with `recv_batch` (blocking, 10 s timeout), in batches of
/// at most `per_call`, and returns them with their senders.
fn recv_n(s: &net::UdpSocket, n: usize, per_call: usize) -> Vec<(Vec<u8>, SocketAddr)> {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut bufs = vec![vec![0u8; 2048]; per_call];
    let mut meta = vec![RecvMeta::default(); per_call];
    let mut got = Vec::new();
    let mut calls = 0;
    while got.len() < n {
        let k = s.recv_batch(&mut bufs, &mut meta).expect("recv_batch");
        assert!((1..=per_call).contains(&k), "recv_batch returned {k}");
        calls += 1;
        for (b, m) in bufs.iter().zip(&meta).take(k) {
            assert!(!m.truncated);
            got.push((b[..m.len].to_vec(), m.from));
        }
    }
    assert!(calls <= n);
    got
}

#[test]
fn send_batch_arrives_whole_and_in_order_and_recv_batch_drains_it() {
    let (a, b) = pair(256);
    let server = b.udp_bind(SocketAddrV4::new(B, 7)).unwrap();
    let client = a.udp_bind(SocketAddrV4::new(A, 0)).unwrap();
    let batch: Vec<Vec<u8>> = (0..40).map(datagram).collect();
    assert_eq!(
        client.send_batch(&batch, SocketAddrV4::new(B, 7)).unwrap(),
        40
    );
    let got = recv_n(&server, 40, 16);
    let from = client.local_addr().unwrap();
    for (i, (d, f)) in got.iter().enumerate() {
        assert_eq!(d, &batch[i], "datagram {i}");
        assert_eq!(*f, from);
    }
}

#[test]
fn send_segmented_cuts_one_buffer_into_datagrams_of_the_segment_size() {
    let (a, b) = pair(256);
    let server = b.udp_bind(SocketAddrV4::new(B, 7)).unwrap();
    let client = a.udp_bind(SocketAddrV4::new(A, 0)).unwrap();
    // 9 segments of 1200 bytes and a last one of 500.
    let buf: Vec<u8> = (0..9 * 1200 + 500).map(|k| (k % 251) as u8).collect();
    assert_eq!(
        client
            .send_segmented(&buf, 1200, SocketAddrV4::new(B, 7))
            .unwrap(),
        10
    );
    let got = recv_n(&server, 10, 32);
    let lens: Vec<usize> = got.iter().map(|(d, _)| d.len()).collect();
    assert_eq!(
        lens,
        [1200, 1200, 1200, 1200, 1200, 1200, 1200, 1200, 1200, 500]
    );
    let joined: Vec<u8> = got.into_iter().flat_map(|(d, _)| d).collect();
    assert_eq!(joined, buf);
}

#[test]
fn recv_batch_truncates_to_its_buffers_and_says_so() {
    let (a, b) = pair(256);
    let server = b.udp_bind(SocketAddrV4::new(B, 7)).unwrap();
    let client = a.udp_bind(SocketAddrV4::new(A, 0)).unwrap();
    client
        .send_batch(&[vec![1u8; 10], vec![2u8; 300]], SocketAddrV4::new(B, 7))
        .unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut bufs = [[0u8; 64], [0u8; 64]];
    let mut meta = [RecvMeta::default(); 2];
    let mut n = 0;
    let mut first = [0u8; 64];
    while n < 2 {
        let mut views: Vec<&mut [u8]> = bufs.iter_mut().skip(n).map(|b| &mut b[..]).collect();
        let k = server.recv_batch(&mut views, &mut meta[n..]).unwrap();
        if n == 0 {
            first = bufs[0];
        }
        n += k;
    }
    assert_eq!((meta[0].len, meta[0].truncated), (10, false));
    assert_eq!(&first[..10], &[1u8; 10]);
    assert_eq!((meta[1].len, meta[1].truncated), (64, true));
    assert_eq!(bufs[1], [2u8; 64]);
}

#[test]
fn bad_batches_are_refused_whole_and_never_block() {
    let (a, _b) = pair(256);
    let s = a.udp_bind(SocketAddrV4::new(A, 0)).unwrap();
    let to = SocketAddrV4::new(B, 7);
    // One datagram too large refuses the batch: nothing of it is sent.
    let room = s.send_room();
    let e = s
        .send_batch(&[vec![0u8; 10], vec![0u8; 65_508]], to)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert_eq!(s.send_room(), room);
    for seg in [0, 65_508] {
        let e = s.send_segmented(&[0u8; 100], seg, to).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "segment size {seg}");
    }
    let v6 = SocketAddrV6::new("2001:2::1".parse().unwrap(), 7, 0, 0);
    let e = s.send_batch(&[[0u8; 4]], v6).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    // Nothing to do is done at once.
    assert_eq!(s.send_batch::<&[u8]>(&[], to).unwrap(), 0);
    assert_eq!(s.send_segmented(&[], 1200, to).unwrap(), 0);
    let t = Instant::now();
    let mut none: [&mut [u8]; 0] = [];
    assert_eq!(
        s.recv_batch(&mut none, &mut [RecvMeta::default()]).unwrap(),
        0
    );
    let mut one = [[0u8; 8]];
    let mut views: Vec<&mut [u8]> = one.iter_mut().map(|b| &mut b[..]).collect();
    assert_eq!(s.recv_batch(&mut views, &mut []).unwrap(), 0);
    // Non-blocking with nothing queued: WouldBlock, not a wait.
    s.set_nonblocking(true).unwrap();
    let e = s
        .recv_batch(&mut views, &mut [RecvMeta::default()])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock);
    assert!(t.elapsed() < Duration::from_secs(1));
    // Blocking with a timeout: TimedOut after it.
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let e = s
        .recv_batch(&mut views, &mut [RecvMeta::default()])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
}

#[test]
fn a_batch_larger_than_the_send_queue_is_queued_in_part_then_would_block() {
    // The stack's workers are not started: nothing drains the queue of 8.
    let (da, _db) = wire(WireConfig::default());
    let a = host("batch-stopped", 8, da, "198.18.0.1/24", false);
    let s = a.udp_bind(SocketAddrV4::new(A, 0)).unwrap();
    let to = SocketAddrV4::new(B, 7);
    assert_eq!((s.send_capacity(), s.send_room()), (8, 8));
    let batch: Vec<Vec<u8>> = (0..20).map(datagram).collect();
    assert_eq!(s.send_batch(&batch, to).unwrap(), 8);
    assert_eq!(s.send_room(), 0);
    let e = s.send_batch(&batch[8..], to).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock);
    let e = s.send_segmented(&[0u8; 3000], 1000, to).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock);
}

#[cfg(feature = "tokio")]
mod tokio_forms {
    use super::*;
    use std::future::poll_fn;

    fn run<F: std::future::Future>(f: F) -> F::Output {
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

    #[test]
    fn async_batches_wait_for_room_and_for_datagrams() {
        // A send queue of 8: batches of 20 must wait for the worker to drain it
        // (the receiver's queue is large enough that none is dropped).
        let (a, b) = pair_with(8, 256);
        let server = b.udp_bind(SocketAddrV4::new(B, 7)).unwrap();
        let client = a.udp_bind(SocketAddrV4::new(A, 0)).unwrap();
        let batch: Vec<Vec<u8>> = (0..20).map(datagram).collect();
        run(async {
            let rx = tokio::spawn(async move {
                let mut bufs = vec![vec![0u8; 2048]; 8];
                let mut meta = vec![RecvMeta::default(); 8];
                let mut got = Vec::new();
                while got.len() < 60 {
                    let k = server.recv_batch_async(&mut bufs, &mut meta).await?;
                    for (b, m) in bufs.iter().zip(&meta).take(k) {
                        got.push(b[..m.len].to_vec());
                    }
                }
                std::io::Result::Ok(got)
            });
            for _ in 0..3 {
                poll_fn(|cx| client.poll_send_ready(cx, 8)).await.unwrap();
                assert_eq!(client.send_room(), 8);
                let mut done = 0;
                while done < batch.len() {
                    let k = poll_fn(|cx| {
                        client.poll_send_batch(
                            cx,
                            &batch[done..(done + 4).min(20)],
                            SocketAddr::V4(SocketAddrV4::new(B, 7)),
                        )
                    })
                    .await
                    .unwrap();
                    assert!(k >= 1);
                    done += k;
                }
            }
            let got = rx.await.unwrap().unwrap();
            for (i, d) in got.iter().enumerate() {
                assert_eq!(d, &batch[i % 20], "datagram {i}");
            }
        });
    }

    #[test]
    fn send_batch_async_sends_every_datagram() {
        let (a, b) = pair(256);
        let server = b.udp_bind(SocketAddrV4::new(B, 7)).unwrap();
        let client = a.udp_bind(SocketAddrV4::new(A, 0)).unwrap();
        let batch: Vec<Vec<u8>> = (0..100).map(datagram).collect();
        run(async {
            assert_eq!(
                client
                    .send_batch_async(&batch, SocketAddrV4::new(B, 7))
                    .await
                    .unwrap(),
                100
            );
            let seg: Vec<u8> = (0..5000).map(|k| k as u8).collect();
            let n = poll_fn(|cx| {
                client.poll_send_segmented(cx, &seg, 1000, SocketAddr::V4(SocketAddrV4::new(B, 7)))
            })
            .await
            .unwrap();
            assert_eq!(n, 5);
        });
        let got = recv_n(&server, 105, 64);
        for (i, (d, _)) in got.iter().take(100).enumerate() {
            assert_eq!(d, &batch[i]);
        }
        assert_eq!(got[100..].iter().map(|(d, _)| d.len()).sum::<usize>(), 5000);
    }
}
