//! dummynet's behaviour in virtual time: every test drives the clock itself, jumping
//! from one `next_wakeup` to the next, and checks release times computed by hand.

use super::*;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr};

#[derive(Clone, Debug, PartialEq)]
struct Pkt {
    id: u64,
    len: usize,
    flow: FlowKey,
}

impl DnPacket for Pkt {
    fn len(&self) -> usize {
        self.len
    }
    fn flow(&self) -> FlowKey {
        self.flow
    }
}

const MS: u64 = 1_000_000;
/// A 1500-byte packet at 10 Mbit/s.
const TX_10M: u64 = 1_200_000;

fn flow(src: u32) -> FlowKey {
    FlowKey {
        proto: 17,
        src: IpAddr::V4(Ipv4Addr::from(src)),
        dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        sport: 1000,
        dport: 53,
    }
}

fn pkt(id: u64, len: usize, src: u32) -> Pkt {
    Pkt {
        id,
        len,
        flow: flow(src),
    }
}

fn pipe(bw: u64, delay_ms: u64, queue: QueueLimit) -> PipeConfig {
    PipeConfig {
        bandwidth: bw,
        delay: Duration::from_millis(delay_ms),
        queue,
        ..PipeConfig::default()
    }
}

/// Runs the clock wake-up to wake-up until nothing is held; returns what came out
/// with the time it came out. Checks on the way that nothing was due earlier.
fn drain(dn: &mut Dummynet<Pkt>) -> Vec<(u64, Pkt)> {
    let mut got = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = dn.next_wakeup() {
        dn.poll(t, &mut buf);
        got.extend(buf.drain(..).map(|p| (t, p)));
    }
    got
}

fn check_balance(s: &PipeStats) {
    let held = s.out_pkts
        + s.drop_loss_pkts
        + s.drop_full_pkts
        + s.drop_flows_pkts
        + s.queued_pkts
        + s.delayed_pkts;
    assert_eq!(s.in_pkts, held, "{s:?}");
    let held = s.out_bytes
        + s.drop_loss_bytes
        + s.drop_full_bytes
        + s.drop_flows_bytes
        + s.queued_bytes
        + s.delayed_bytes;
    assert_eq!(s.in_bytes, held, "{s:?}");
}

#[test]
fn ten_mbit_pipe_carries_back_to_back_packets_at_line_rate_plus_delay() {
    let mut dn = Dummynet::new(1);
    dn.configure_pipe(1, pipe(10_000_000, 20, QueueLimit::Slots(100)))
        .unwrap();
    let t0 = 5_000 * MS;
    for i in 0..100 {
        dn.enqueue_pipe(1, pkt(i, 1500, 1), t0).unwrap();
    }
    let got = drain(&mut dn);
    assert_eq!(got.len(), 100);
    for (i, (t, p)) in got.iter().enumerate() {
        assert_eq!(p.id, i as u64);
        // Packet i ends its transmission (i + 1) * 1.2 ms after t0, then waits 20 ms.
        assert_eq!(*t, t0 + (i as u64 + 1) * TX_10M + 20 * MS, "packet {i}");
    }
    let s = dn.pipe_stats(1).unwrap();
    assert_eq!((s.out_pkts, s.out_bytes), (100, 150_000));
    check_balance(&s);
}

#[test]
fn queues_beyond_freebsds_sysctl_limits_are_refused() {
    let mut dn: Dummynet<Pkt> = Dummynet::new(1);
    // 100 slots and 1 MB are allowed, one more of either is not (FreeBSD's
    // pipe_slot_limit and pipe_byte_limit, inclusive as ipfw(8) checks them).
    dn.configure_pipe(1, pipe(1000, 0, QueueLimit::Slots(100)))
        .unwrap();
    dn.configure_pipe(2, pipe(1000, 0, QueueLimit::Bytes(1 << 20)))
        .unwrap();
    let e = dn
        .configure_pipe(3, pipe(1000, 0, QueueLimit::Slots(99_999_999)))
        .unwrap_err();
    assert_eq!(
        e,
        DnError::QueueTooLong {
            asked: QueueLimit::Slots(99_999_999),
            limit: QueueLimit::Slots(100)
        }
    );
    assert_eq!(
        e.to_string(),
        "queue size 99999999 is more than 100 (at most 100 slots: \
         net.inet.ip.dummynet.pipe_slot_limit)"
    );
    let e = dn
        .configure_pipe(3, pipe(1000, 0, QueueLimit::Bytes((1 << 20) + 1)))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("net.inet.ip.dummynet.pipe_byte_limit"),
        "{e}"
    );
    let q = QueueConfig {
        queue: QueueLimit::Slots(101),
        ..QueueConfig::new(1)
    };
    assert!(matches!(
        dn.configure_queue(1, q.clone()),
        Err(DnError::QueueTooLong { .. })
    ));
    assert!(dn.pipe_stats(3).is_none() && dn.queues().is_empty());
    // check_command says the same before anything is applied.
    let cmd = parse_config("pipe 1 config bw 1Kbit/s queue 99999999").unwrap();
    assert!(check_command(&cmd, &DnLimits::default()).is_err());
    // A delay beyond ipfw(8)'s 10 s.
    assert_eq!(
        dn.configure_pipe(3, pipe(0, 10_001, DEFAULT_QUEUE)),
        Err(DnError::BadDelay)
    );
    dn.configure_pipe(3, pipe(0, 10_000, DEFAULT_QUEUE))
        .unwrap();

    // The sysctls move the limits; what they refuse changes nothing.
    assert!(!dn.set_limits(DnLimits {
        slots: 0,
        bytes: 1 << 20
    }));
    assert!(!dn.set_limits(DnLimits {
        slots: 100,
        bytes: 1499
    }));
    assert_eq!(dn.limits(), DnLimits::default());
    assert!(dn.set_limits(DnLimits {
        slots: 200,
        bytes: 1500
    }));
    dn.configure_queue(1, q).unwrap();
    assert!(dn
        .configure_pipe(4, pipe(1000, 0, QueueLimit::Bytes(1501)))
        .is_err());
    // Lowered below what pipe 1 has: pipe 1 keeps its 100 slots.
    assert!(dn.set_limits(DnLimits {
        slots: 10,
        bytes: 1500
    }));
    assert_eq!(dn.pipes()[0].1.queue, QueueLimit::Slots(100));
}

#[test]
fn a_flood_into_a_slow_pipe_holds_no_more_than_the_limit_and_counts_the_rest() {
    // The hostile run's pipe: 1 Kbit/s, as large a queue as the limits allow.
    let mut dn = Dummynet::new(1);
    let lim = dn.limits();
    assert!(dn
        .apply(parse_config("pipe 1 config bw 1Kbit/s queue 99999999").unwrap())
        .is_err());
    dn.configure_pipe(1, pipe(1000, 0, QueueLimit::Slots(lim.slots)))
        .unwrap();
    let q = QueueConfig {
        mask: FlowMask::ALL,
        queue: QueueLimit::Bytes(lim.bytes),
        buckets: 1,
        ..QueueConfig::new(1)
    };
    dn.configure_queue(1, q.clone()).unwrap();
    let mut most = 0;
    for i in 0..200_000u64 {
        let now = i * 1000;
        let _ = dn.enqueue_pipe(1, pkt(i, 1000, 1), now);
        // 64 flows through the masked queue: each may hold 1 MB, and at most
        // 16 of them exist.
        let _ = dn.enqueue_queue(1, pkt(i, 1000, (i % 64) as u32), now);
        let s = dn.pipe_stats(1).unwrap();
        most = most.max(s.queued_pkts + s.delayed_pkts);
    }
    let s = dn.pipe_stats(1).unwrap();
    check_balance(&s);
    // Own queue: 100 slots (+1 on the wire); flows: 16 queues of 1048 packets of
    // 1000 bytes (+ their share of the wire).
    assert!(most <= 100 + 16 * 1048 + 1, "{most}");
    assert!(s.flows <= 16, "{s:?}");
    assert!(
        s.drop_full_pkts > 150_000 && s.drop_flows_pkts > 100_000,
        "{s:?}"
    );
    assert_eq!(s.in_pkts, 400_000);
}

#[test]
fn each_packet_is_delayed_by_its_transmission_time_plus_the_delay() {
    let mut dn = Dummynet::new(1);
    dn.configure_pipe(1, pipe(10_000_000, 20, DEFAULT_QUEUE))
        .unwrap();
    let mut out = Vec::new();
    // One packet every 2 ms on a link that needs 1.2 ms for each: no queueing.
    for i in 0..50u64 {
        let t = i * 2 * MS;
        dn.poll(t, &mut out);
        dn.enqueue_pipe(1, pkt(i, 1500, 1), t).unwrap();
    }
    let got = drain(&mut dn);
    assert_eq!(got.len() + out.len(), 50);
    for (t, p) in got.iter().filter(|(_, p)| p.id >= 40) {
        assert_eq!(*t, p.id * 2 * MS + TX_10M + 20 * MS);
    }
    // Bandwidth unlimited: exactly the delay.
    let mut dn = Dummynet::new(1);
    dn.configure_pipe(1, pipe(0, 7, DEFAULT_QUEUE)).unwrap();
    dn.enqueue_pipe(1, pkt(0, 9000, 1), 3).unwrap();
    assert_eq!(drain(&mut dn)[0].0, 3 + 7 * MS);
}

#[test]
fn full_queue_drops_are_counted() {
    let mut dn = Dummynet::new(1);
    dn.configure_pipe(1, pipe(10_000_000, 0, DEFAULT_QUEUE))
        .unwrap();
    let mut full = 0;
    for i in 0..100 {
        if let Err((_, why)) = dn.enqueue_pipe(1, pkt(i, 1500, 1), 0) {
            assert_eq!(why, DnDrop::QueueFull);
            full += 1;
        }
    }
    // The first packet is on the wire at once and leaves the queue: 1 + 50 taken.
    assert_eq!(full, 49);
    let s = dn.pipe_stats(1).unwrap();
    assert_eq!((s.drop_full_pkts, s.queued_pkts, s.in_pkts), (49, 50, 100));
    check_balance(&s);
    // After one transmission time a slot is free again.
    dn.enqueue_pipe(1, pkt(100, 1500, 1), TX_10M).unwrap();
    assert!(dn.enqueue_pipe(1, pkt(101, 1500, 1), TX_10M).is_err());
    assert_eq!(drain(&mut dn).len(), 52);

    // A byte limit is a true bound: 15,000 bytes hold ten 1500-byte packets.
    let mut dn = Dummynet::new(1);
    dn.configure_pipe(1, pipe(10_000_000, 0, QueueLimit::Bytes(15_000)))
        .unwrap();
    let taken = (0..20)
        .filter(|&i| dn.enqueue_pipe(1, pkt(i, 1500, 1), 0).is_ok())
        .count();
    assert_eq!(taken, 11);
    assert_eq!(dn.pipe_stats(1).unwrap().queued_bytes, 15_000);
}

fn losses(seed: u64) -> Vec<u64> {
    let mut dn = Dummynet::new(seed);
    let cfg = PipeConfig {
        plr: 0.1,
        ..PipeConfig::default()
    };
    dn.configure_pipe(1, cfg).unwrap();
    let mut lost = Vec::new();
    let mut out = Vec::new();
    for i in 0..100_000u64 {
        match dn.enqueue_pipe(1, pkt(i, 100, 1), i * 1000) {
            Ok(()) => {}
            Err((p, DnDrop::Loss)) => lost.push(p.id),
            Err(e) => panic!("{e:?}"),
        }
        dn.poll(i * 1000, &mut out);
    }
    let s = dn.pipe_stats(1).unwrap();
    assert_eq!(s.drop_loss_pkts, lost.len() as u64);
    assert_eq!(s.out_pkts, out.len() as u64);
    check_balance(&s);
    lost
}

#[test]
fn plr_drops_within_statistical_bounds_and_reproducibly() {
    let a = losses(42);
    // Binomial(100000, 0.1): sd 94.9; 4.2 sd either side.
    assert!((9_600..=10_400).contains(&a.len()), "{}", a.len());
    assert_eq!(a, losses(42), "same seed, same losses");
    let b = losses(43);
    assert!((9_600..=10_400).contains(&b.len()), "{}", b.len());
    assert_ne!(a, b);
}

#[test]
fn burst_leaves_at_line_rate_after_idle_then_the_rest_at_bw() {
    let mut dn = Dummynet::new(1);
    let cfg = PipeConfig {
        burst: 15_000,
        queue: QueueLimit::Slots(100),
        ..pipe(1_000_000, 10, DEFAULT_QUEUE)
    };
    dn.configure_pipe(1, cfg).unwrap();
    let tx = 12 * MS; // 1500 bytes at 1 Mbit/s
    let t0 = 1_000 * MS;
    for i in 0..20 {
        dn.enqueue_pipe(1, pkt(i, 1500, 1), t0).unwrap();
    }
    let got = drain(&mut dn);
    for (t, p) in &got {
        // A new pipe has the whole burst: ten packets go at once; the eleventh also
        // starts at once but is paid for at 1 Mbit/s, and so on.
        let want = if p.id < 10 {
            t0 + 10 * MS
        } else {
            t0 + (p.id - 9) * tx + 10 * MS
        };
        assert_eq!(*t, want, "packet {}", p.id);
    }
    // The link went idle at t0 + 120 ms; 60 ms later it has 7500 bytes of credit.
    let t1 = t0 + 180 * MS;
    for i in 0..10 {
        dn.enqueue_pipe(1, pkt(i, 1500, 1), t1).unwrap();
    }
    for (t, p) in drain(&mut dn) {
        let want = if p.id < 5 {
            t1 + 10 * MS
        } else {
            t1 + (p.id - 4) * tx + 10 * MS
        };
        assert_eq!(t, want, "packet {}", p.id);
    }
    // One packet after a long idle spends a tenth of the burst; reconfigured
    // without burst, the pipe loses the rest.
    let t2 = t1 + 1_000 * MS;
    dn.enqueue_pipe(1, pkt(0, 1500, 1), t2).unwrap();
    assert_eq!(drain(&mut dn)[0].0, t2 + 10 * MS);
    let cfg = PipeConfig {
        burst: 0,
        ..dn.pipes()[0].1.clone()
    };
    dn.configure_pipe(1, cfg).unwrap();
    dn.enqueue_pipe(1, pkt(1, 1500, 1), t2 + 20 * MS).unwrap();
    assert_eq!(drain(&mut dn)[0].0, t2 + 20 * MS + tx + 10 * MS);
    // Without burst, the first packet of an idle pipe pays its own way.
    let mut dn = Dummynet::new(1);
    dn.configure_pipe(1, pipe(1_000_000, 10, DEFAULT_QUEUE))
        .unwrap();
    dn.enqueue_pipe(1, pkt(0, 1500, 1), t0).unwrap();
    assert_eq!(drain(&mut dn)[0].0, t0 + tx + 10 * MS);
}

/// Three flowsets of weights 1, 2, 3 (packets of 1500, 1000 and 500 bytes, so that
/// the shares are of bytes, not packets), kept backlogged on a 10 Mbit/s pipe.
fn shares(kind: SchedKind) -> [f64; 3] {
    let mut dn = Dummynet::new(1);
    // Queues longer than FreeBSD's default limit, as its sysctl allows.
    assert!(dn.set_limits(DnLimits {
        slots: 1000,
        ..DnLimits::default()
    }));
    let cfg = PipeConfig {
        sched: kind,
        ..pipe(10_000_000, 0, DEFAULT_QUEUE)
    };
    dn.configure_pipe(1, cfg).unwrap();
    let lens = [1500, 1000, 500];
    for q in 1..=3 {
        let cfg = QueueConfig {
            weight: q,
            queue: QueueLimit::Slots(1000),
            ..QueueConfig::new(1)
        };
        dn.configure_queue(q, cfg).unwrap();
    }
    let mut id = 0;
    let mut top_up = |dn: &mut Dummynet<Pkt>, q: u32, n: usize, now: u64| {
        for _ in 0..n {
            id += 1;
            dn.enqueue_queue(q, pkt(id, lens[q as usize - 1], q), now)
                .unwrap();
        }
    };
    for q in 1..=3 {
        top_up(&mut dn, q, 100, 0);
    }
    let mut bytes = [0u64; 3];
    let mut out = Vec::new();
    while let Some(t) = dn.next_wakeup() {
        if t > 2_000 * MS {
            break;
        }
        dn.poll(t, &mut out);
        for p in out.drain(..) {
            let q = p.flow.src;
            let IpAddr::V4(a) = q else { unreachable!() };
            let q = u32::from(a);
            bytes[q as usize - 1] += p.len as u64;
            top_up(&mut dn, q, 1, t);
        }
    }
    let total: u64 = bytes.iter().sum();
    // 2 s at 10 Mbit/s.
    assert!(total.abs_diff(2_500_000) <= 1500, "{total}");
    let s = bytes.map(|b| b as f64 / total as f64);
    println!("{kind:?}: byte shares {s:?} of {total} bytes");
    s
}

#[test]
fn wf2q_gives_weights_1_2_3_their_share_of_a_saturated_pipe() {
    let s = shares(SchedKind::Wf2q);
    for (i, share) in s.iter().enumerate() {
        let want = (i + 1) as f64 / 6.0;
        assert!((share / want - 1.0).abs() < 0.03, "{s:?}");
    }
    // FIFO, by contrast, serves packets in arrival order, whatever the weights:
    // about equal packet counts, so bytes in proportion to the packet sizes.
    let f = shares(SchedKind::Fifo);
    assert!(f[0] > 0.45 && f[2] < 0.2, "{f:?}");
}

#[test]
fn a_mask_makes_a_queue_per_flow() {
    let mut dn = Dummynet::new(1);
    dn.configure_pipe(1, pipe(1_000_000, 0, DEFAULT_QUEUE))
        .unwrap();
    let cmd = parse_config("queue 2 config pipe 1 mask src-ip 0xffffffff queue 5").unwrap();
    dn.apply(cmd).unwrap();
    let mut full = 0;
    for src in 1..=4u32 {
        for i in 0..10 {
            match dn.enqueue_queue(2, pkt(u64::from(src) * 100 + i, 1500, src), 0) {
                Ok(()) => {}
                Err((_, DnDrop::QueueFull)) => full += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
    }
    // Source 1's first packet went on the wire at once; each queue then took 5.
    assert_eq!(full, 19);
    assert_eq!(dn.pipe_stats(1).unwrap().flows, 4);
    let got = drain(&mut dn);
    assert_eq!(got.len(), 21);
    let src = |p: &Pkt| p.id / 100;
    assert_eq!(src(&got[0].1), 1);
    // Equal weights: WF2Q+ takes the flows in turn.
    for round in got[1..].chunks(4) {
        let order: Vec<u64> = round.iter().map(|(_, p)| src(p)).collect();
        assert_eq!(order, [1, 2, 3, 4]);
    }
    let s = dn.pipe_stats(1).unwrap();
    assert_eq!(
        s.flows, 4,
        "idle queues stay until their flowset needs room"
    );
    check_balance(&s);
}

#[test]
fn dynamic_flow_queues_are_bounded() {
    for kind in [SchedKind::Wf2q, SchedKind::Fifo] {
        let mut dn = Dummynet::new(1);
        let cfg = PipeConfig {
            sched: kind,
            ..pipe(1_000_000, 0, DEFAULT_QUEUE)
        };
        dn.configure_pipe(1, cfg).unwrap();
        let cfg = QueueConfig {
            buckets: 1,
            mask: FlowMask {
                src_ip: 32,
                ..FlowMask::NONE
            },
            ..QueueConfig::new(1)
        };
        dn.configure_queue(1, cfg).unwrap();
        let mut too_many = 0;
        for src in 1..=20u32 {
            match dn.enqueue_queue(1, pkt(src.into(), 1500, src), 0) {
                Ok(()) => {}
                Err((_, DnDrop::TooManyFlows)) => too_many += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
        // 16 flows per bucket. Source 1's packet went on the wire at once and its
        // queue, idle, is expired to make room: 17 taken.
        assert_eq!(too_many, 3, "{kind:?}");
        let s = dn.pipe_stats(1).unwrap();
        assert!(s.flows <= 16);
        assert_eq!(s.drop_flows_pkts, 3);
        assert_eq!(drain(&mut dn).len(), 17);
        // Drained, the flows are gone and new ones are welcome.
        let t = 10_000 * MS;
        for src in 100..116u32 {
            dn.enqueue_queue(1, pkt(src.into(), 1500, src), t).unwrap();
        }
    }
}

#[test]
fn next_wakeup_names_the_next_release_or_transmission() {
    let mut dn = Dummynet::new(1);
    assert_eq!(dn.next_wakeup(), None);
    dn.configure_pipe(1, pipe(0, 5, DEFAULT_QUEUE)).unwrap();
    dn.enqueue_pipe(1, pkt(0, 100, 1), 0).unwrap();
    assert_eq!(dn.next_wakeup(), Some(5 * MS));
    let mut out = Vec::new();
    dn.poll(5 * MS - 1, &mut out);
    assert!(out.is_empty());
    dn.poll(5 * MS, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(dn.next_wakeup(), None);

    // With a bandwidth: the link takes the second packet at 1.2 ms.
    let mut dn = Dummynet::new(1);
    dn.configure_pipe(2, pipe(10_000_000, 20, DEFAULT_QUEUE))
        .unwrap();
    dn.enqueue_pipe(2, pkt(1, 1500, 1), 0).unwrap();
    dn.enqueue_pipe(2, pkt(2, 1500, 1), 0).unwrap();
    assert_eq!(dn.next_wakeup(), Some(TX_10M));
    dn.poll(TX_10M, &mut out);
    assert_eq!(dn.next_wakeup(), Some(TX_10M + 20 * MS));
    dn.poll(TX_10M + 20 * MS, &mut out);
    assert_eq!(dn.next_wakeup(), Some(2 * TX_10M + 20 * MS));
}

#[test]
fn poll_returns_packets_in_release_order_across_pipes() {
    let mut dn = Dummynet::new(1);
    for (n, d) in [(1, 10), (2, 5), (3, 7)] {
        dn.configure_pipe(n, pipe(0, d, DEFAULT_QUEUE)).unwrap();
    }
    dn.enqueue_pipe(1, pkt(1, 100, 1), 0).unwrap(); // 10 ms
    dn.enqueue_pipe(2, pkt(2, 100, 1), MS).unwrap(); // 6 ms
    dn.enqueue_pipe(3, pkt(3, 100, 1), 2 * MS).unwrap(); // 9 ms
    dn.enqueue_pipe(2, pkt(4, 100, 1), 3 * MS).unwrap(); // 8 ms
    dn.enqueue_pipe(2, pkt(5, 100, 1), 5 * MS).unwrap(); // 10 ms, after pipe 1's
    let mut out = Vec::new();
    dn.poll(100 * MS, &mut out);
    let ids: Vec<u64> = out.iter().map(|p| p.id).collect();
    assert_eq!(ids, [2, 4, 3, 1, 5]);
}

#[test]
fn reconfiguring_a_pipe_keeps_its_packets() {
    let mut dn = Dummynet::new(1);
    dn.configure_pipe(1, pipe(10_000_000, 0, DEFAULT_QUEUE))
        .unwrap();
    dn.configure_queue(1, QueueConfig::new(1)).unwrap();
    for i in 0..10 {
        // Alternate between the pipe's own queue and the flowset.
        if i % 2 == 0 {
            dn.enqueue_pipe(1, pkt(i, 1500, 1), 0).unwrap();
        } else {
            dn.enqueue_queue(1, pkt(i, 1500, 1), 0).unwrap();
        }
    }
    // Twice the bandwidth, and FIFO: arrival order from the packet after the one on
    // the wire, which finishes at the old rate.
    let cfg = PipeConfig {
        sched: SchedKind::Fifo,
        ..pipe(20_000_000, 0, DEFAULT_QUEUE)
    };
    dn.configure_pipe(1, cfg).unwrap();
    let got = drain(&mut dn);
    let ids: Vec<u64> = got.iter().map(|(_, p)| p.id).collect();
    assert_eq!(ids, (0..10).collect::<Vec<_>>());
    for (i, (t, _)) in got.iter().enumerate() {
        assert_eq!(*t, TX_10M + i as u64 * TX_10M / 2);
    }
    // And back to WF2Q+ with packets queued.
    for i in 0..10 {
        dn.enqueue_queue(1, pkt(i, 1500, 1), 100 * MS).unwrap();
    }
    assert!(dn.configure_sched(1, SchedKind::Wf2q));
    assert_eq!(drain(&mut dn).len(), 10);
    check_balance(&dn.pipe_stats(1).unwrap());
}

#[test]
fn unknown_pipes_and_queues_refuse_packets() {
    let mut dn = Dummynet::new(1);
    assert_eq!(
        dn.enqueue_pipe(7, pkt(0, 1, 1), 0).unwrap_err().1,
        DnDrop::NoSuchPipe
    );
    assert_eq!(
        dn.enqueue_queue(7, pkt(0, 1, 1), 0).unwrap_err().1,
        DnDrop::NoSuchQueue
    );
    dn.configure_queue(7, QueueConfig::new(3)).unwrap();
    assert_eq!(
        dn.enqueue_queue(7, pkt(0, 1, 1), 0).unwrap_err().1,
        DnDrop::NoSuchPipe
    );
    assert_eq!(
        dn.configure_queue(
            8,
            QueueConfig {
                weight: 101,
                ..QueueConfig::new(3)
            }
        ),
        Err(DnError::BadWeight(101))
    );
    assert!(dn.delete_queue(7));
    assert!(!dn.delete_pipe(3));
}

#[test]
fn parses_ipfw_syntax() {
    let c =
        parse_config("pipe 1 config bw 10Mbit/s delay 20ms plr 0.01 queue 50 burst 100KB").unwrap();
    let want = PipeConfig {
        bandwidth: 10_000_000,
        delay: Duration::from_millis(20),
        plr: 0.01,
        queue: QueueLimit::Slots(50),
        burst: 100 * 1024,
        sched: SchedKind::Wf2q,
    };
    assert_eq!(c, DnCommand::Pipe(1, want));
    let c = parse_config(
        "ipfw queue 2 config pipe 1 weight 30 mask src-ip 0xffffffff dst-port 0xffff queue 20Kbytes",
    )
    .unwrap();
    let want = QueueConfig {
        pipe: 1,
        weight: 30,
        mask: FlowMask {
            src_ip: 32,
            dst_port: 0xffff,
            ..FlowMask::NONE
        },
        queue: QueueLimit::Bytes(20 * 1024),
        buckets: DEFAULT_BUCKETS,
    };
    assert_eq!(c, DnCommand::Queue(2, want));
    assert_eq!(
        parse_config("sched 1 config type fifo"),
        Ok(DnCommand::Sched(1, SchedKind::Fifo))
    );
    let c = parse_config("pipe 3 config bw 1MByte/s type fifo").unwrap();
    let DnCommand::Pipe(3, c) = c else { panic!() };
    assert_eq!((c.bandwidth, c.sched), (8_000_000, SchedKind::Fifo));
    assert_eq!(parse_config("pipe 3 delete"), Ok(DnCommand::DeletePipe(3)));
    assert_eq!(
        parse_config("pipe 1 config bw 10Mbit/s delay 20ms plr 0.01 burst 100KB")
            .unwrap()
            .to_string(),
        "pipe 1 config bw 10Mbit/s delay 20ms plr 0.01 burst 100KB"
    );
}

#[test]
fn parse_errors_name_the_column_and_what_was_expected() {
    let e = parse_config("pipe 1 config bw 10Mbit/sec delay 20ms").unwrap_err();
    assert_eq!(e.col, 18);
    assert_eq!(e.found, "'10Mbit/sec'");
    assert!(e.expected.contains("bandwidth"), "{e}");
    assert_eq!(
        e.to_string(),
        "1:18: expected a bandwidth like 10Mbit/s, 512Kbit/s or 1MByte/s, found '10Mbit/sec'"
    );
    let e = parse_config("pipe 1 config bw 10Mbit/s delay").unwrap_err();
    assert_eq!((e.col, e.found.as_str()), (32, "the end of the line"));
    let e = parse_config("pipe 0 config").unwrap_err();
    assert_eq!(e.col, 6);
    let e = parse_config("queue 2 config pipe 1 weight 300").unwrap_err();
    assert_eq!((e.col, e.expected.as_str()), (30, "a weight in 1..100"));
    let e = parse_config("queue 2 config weight 3").unwrap_err();
    assert!(e.expected.contains("pipe N"));
    let e = parse_config("queue 2 config pipe 1 mask src-ip 0xff00ff00").unwrap_err();
    assert_eq!(e.col, 35);
    let e = parse_config("pipe 1 config sched qfq").unwrap_err();
    assert_eq!(e.col, 21);
    let e = parse_config("pipe 1 config plr 1.5").unwrap_err();
    assert_eq!(e.col, 19);
    let e = parse_config("pipe 1 config frobnicate").unwrap_err();
    assert_eq!((e.col, e.expected.as_str()), (15, parse::PIPE_OPTION));
    let e = parse_config("pipe 1 delete now").unwrap_err();
    assert_eq!(e.col, 15);
}

fn any_limit() -> impl Strategy<Value = QueueLimit> {
    prop_oneof![
        (1usize..100_000).prop_map(QueueLimit::Slots),
        (1usize..1 << 40).prop_map(QueueLimit::Bytes),
        (1usize..1 << 20).prop_map(|k| QueueLimit::Bytes(k << 10)),
    ]
}

fn any_pipe() -> impl Strategy<Value = PipeConfig> {
    (
        prop_oneof![any::<u64>(), (0u64..10_000).prop_map(|m| m * 1_000_000)],
        prop_oneof![any::<u64>(), (0u64..10_000).prop_map(|m| m * 1_000_000)],
        prop_oneof![Just(0.0), Just(1.0), 0.0f64..1.0],
        any_limit(),
        prop_oneof![any::<u64>(), (0u64..10_000).prop_map(|k| k << 10)],
        prop_oneof![Just(SchedKind::Fifo), Just(SchedKind::Wf2q)],
    )
        .prop_map(|(bandwidth, d, plr, queue, burst, sched)| PipeConfig {
            bandwidth,
            delay: Duration::from_nanos(d),
            plr,
            queue,
            burst,
            sched,
        })
}

fn any_queue() -> impl Strategy<Value = QueueConfig> {
    (
        1u32..=65535,
        1u32..=100,
        (0u8..=32, 0u8..=32, 0u8..=128, 0u8..=128),
        (any::<u16>(), any::<u16>(), any::<u8>()),
        any_limit(),
        1u32..=65536,
    )
        .prop_map(
            |(pipe, weight, a, (sp, dp, pr), queue, buckets)| QueueConfig {
                pipe,
                weight,
                mask: FlowMask {
                    src_ip: a.0,
                    dst_ip: a.1,
                    src_ip6: a.2,
                    dst_ip6: a.3,
                    src_port: sp,
                    dst_port: dp,
                    proto: pr,
                },
                queue,
                buckets,
            },
        )
}

proptest! {
    #[test]
    fn pipe_config_round_trips(n in 1u32..=65535, c in any_pipe()) {
        let text = format!("pipe {n} config {c}");
        prop_assert_eq!(parse_config(&text), Ok(DnCommand::Pipe(n, c.clone())), "{}", text);
        let cmd = DnCommand::Pipe(n, c);
        prop_assert_eq!(parse_config(&cmd.to_string()), Ok(cmd));
    }

    #[test]
    fn queue_config_round_trips(n in 1u32..=65535, c in any_queue()) {
        let cmd = DnCommand::Queue(n, c);
        let text = cmd.to_string();
        prop_assert_eq!(parse_config(&text), Ok(cmd), "{}", text);
    }

    #[test]
    fn parse_never_panics(s in "[a-z0-9 ./+-]{0,60}") {
        let _ = parse_config(&s);
        let _ = parse_config(&format!("pipe 1 config {s}"));
        let _ = parse_config(&format!("queue 1 config pipe 1 {s}"));
    }
}

/// Cost of enqueue + poll per packet: `cargo test -p fw --release -- --ignored
/// dummynet_bench --nocapture`. Scenarios interleaved, best of 3 rounds; the baseline
/// is a bare delay line (a `VecDeque` of release times), the least any shaper costs.
#[test]
#[ignore]
fn dummynet_bench() {
    use std::collections::VecDeque;
    use std::time::Instant;
    const N: u64 = 1_000_000;
    const BATCH: u64 = 32;
    // 32 packets of 1500 bytes at 10 Gbit/s take 38.4 us: the pipe is offered
    // exactly its rate.
    const STEP: u64 = 38_400;
    let baseline = || {
        let mut line: VecDeque<(u64, Pkt)> = VecDeque::new();
        let mut out = Vec::with_capacity(4096);
        let (mut now, mut id, mut released) = (0, 0, 0u64);
        let start = Instant::now();
        while id < N {
            for _ in 0..BATCH {
                line.push_back((now + 100_000, pkt(id, 1500, 1)));
                id += 1;
            }
            now += STEP;
            while line.front().is_some_and(|p| p.0 <= now) {
                out.push(line.pop_front().unwrap().1);
            }
            released += out.len() as u64;
            out.clear();
        }
        (start.elapsed().as_nanos() as f64 / N as f64, released)
    };
    let run = |kind: SchedKind, flows: u32, via_queue: bool| {
        let mut dn = Dummynet::new(1);
        dn.set_limits(DnLimits {
            slots: 100_000,
            ..DnLimits::default()
        });
        let cfg = PipeConfig {
            bandwidth: 10_000_000_000,
            delay: Duration::from_micros(100),
            queue: QueueLimit::Slots(100_000),
            sched: kind,
            ..PipeConfig::default()
        };
        dn.configure_pipe(1, cfg).unwrap();
        let q = QueueConfig {
            mask: FlowMask {
                src_ip: 32,
                ..FlowMask::NONE
            },
            queue: QueueLimit::Slots(100_000),
            buckets: 4096,
            ..QueueConfig::new(1)
        };
        dn.configure_queue(1, q).unwrap();
        let mut out = Vec::with_capacity(4096);
        let (mut now, mut id, mut released) = (0, 0, 0u64);
        let start = Instant::now();
        while id < N {
            for _ in 0..BATCH {
                let p = pkt(id, 1500, (id % u64::from(flows)) as u32 + 1);
                let r = if via_queue {
                    dn.enqueue_queue(1, p, now)
                } else {
                    dn.enqueue_pipe(1, p, now)
                };
                assert!(r.is_ok());
                id += 1;
            }
            now += STEP;
            dn.poll(now, &mut out);
            released += out.len() as u64;
            out.clear();
        }
        (start.elapsed().as_nanos() as f64 / N as f64, released)
    };
    let rows: [(&str, SchedKind, u32, bool); 6] = [
        ("fifo, pipe N", SchedKind::Fifo, 1, false),
        ("wf2q+, pipe N", SchedKind::Wf2q, 1, false),
        ("fifo, queue N, 64 flows", SchedKind::Fifo, 64, true),
        ("wf2q+, queue N, 1 flow", SchedKind::Wf2q, 1, true),
        ("wf2q+, queue N, 64 flows", SchedKind::Wf2q, 64, true),
        ("wf2q+, queue N, 4096 flows", SchedKind::Wf2q, 4096, true),
    ];
    let mut best = [f64::MAX; 7];
    let mut released = [0; 7];
    for _ in 0..3 {
        let (ns, r) = baseline();
        best[0] = best[0].min(ns);
        released[0] = r;
        for (i, &(_, kind, flows, via_queue)) in rows.iter().enumerate() {
            let (ns, r) = run(kind, flows, via_queue);
            best[i + 1] = best[i + 1].min(ns);
            released[i + 1] = r;
        }
    }
    println!(
        "dummynet enqueue+poll, 10 Gbit/s pipe, 100 us delay, {N} packets of 1500 B \
         in batches of {BATCH} at line rate; best of 3"
    );
    println!(
        "{:<34} {:>7.1} ns/packet ({} released)",
        "baseline: bare delay line", best[0], released[0]
    );
    for (i, row) in rows.iter().enumerate() {
        println!(
            "{:<34} {:>7.1} ns/packet ({} released)",
            row.0,
            best[i + 1],
            released[i + 1]
        );
    }
}

#[test]
fn ipv6_masks_and_deleted_queues_drain() {
    let mut dn = Dummynet::new(1);
    dn.configure_pipe(1, pipe(1_000_000, 0, DEFAULT_QUEUE))
        .unwrap();
    dn.apply(parse_config("queue 1 config pipe 1 mask src-ip6 /64").unwrap())
        .unwrap();
    let v6 = |s: &str, id| Pkt {
        id,
        len: 1000,
        flow: FlowKey {
            src: s.parse().unwrap(),
            ..flow(1)
        },
    };
    // Two hosts of one /64 share a queue; another /64 gets its own.
    dn.enqueue_queue(1, v6("2001:db8:0:1::1", 1), 0).unwrap();
    dn.enqueue_queue(1, v6("2001:db8:0:1::2", 2), 0).unwrap();
    dn.enqueue_queue(1, v6("2001:db8:0:2::1", 3), 0).unwrap();
    assert_eq!(dn.pipe_stats(1).unwrap().flows, 2);
    // Deleting the queue lets its packets drain; its queues go once empty.
    assert!(dn.delete_queue(1));
    assert_eq!(
        dn.enqueue_queue(1, v6("2001:db8::1", 4), 0).unwrap_err().1,
        DnDrop::NoSuchQueue
    );
    let ids: Vec<u64> = drain(&mut dn).iter().map(|(_, p)| p.id).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(dn.pipe_stats(1).unwrap().flows, 0);
}

#[derive(Clone, Debug)]
enum Op {
    EnqPipe(u32, usize, u32),
    EnqQueue(u32, usize, u32),
    Wait(u64),
    Pipe(u32, PipeConfig),
    Queue(u32, u32, u32, bool),
    Sched(u32, SchedKind),
    DeletePipe(u32),
    DeleteQueue(u32),
}

fn small_pipe() -> impl Strategy<Value = PipeConfig> {
    (
        prop_oneof![Just(0u64), Just(1_000_000), Just(10_000_000)],
        prop_oneof![Just(0u64), Just(1), Just(10)],
        prop_oneof![Just(0.0), Just(0.1)],
        prop_oneof![
            (1usize..20).prop_map(QueueLimit::Slots),
            (1000usize..20_000).prop_map(QueueLimit::Bytes)
        ],
        prop_oneof![Just(0u64), Just(5000)],
        prop_oneof![Just(SchedKind::Fifo), Just(SchedKind::Wf2q)],
    )
        .prop_map(|(bw, d, plr, queue, burst, sched)| PipeConfig {
            bandwidth: bw,
            delay: Duration::from_millis(d),
            plr,
            queue,
            burst,
            sched,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u32..=3, 1usize..3000, 1u32..6).prop_map(|(p, l, s)| Op::EnqPipe(p, l, s)),
        6 => (1u32..=3, 1usize..3000, 1u32..40).prop_map(|(q, l, s)| Op::EnqQueue(q, l, s)),
        4 => (0u64..5_000_000).prop_map(Op::Wait),
        1 => (1u32..=3, small_pipe()).prop_map(|(n, c)| Op::Pipe(n, c)),
        1 => (1u32..=3, 1u32..=3, 1u32..=100, any::<bool>())
            .prop_map(|(n, p, w, m)| Op::Queue(n, p, w, m)),
        1 => (1u32..=3, prop_oneof![Just(SchedKind::Fifo), Just(SchedKind::Wf2q)])
            .prop_map(|(n, k)| Op::Sched(n, k)),
        1 => (1u32..=3).prop_map(Op::DeletePipe),
        1 => (1u32..=3).prop_map(Op::DeleteQueue),
    ]
}

proptest! {
    /// Whatever is configured and sent: nothing panics, the counters balance, every
    /// packet comes out at most once, and after `poll(now)` nothing is left due.
    #[test]
    fn random_workloads_keep_the_invariants(ops in proptest::collection::vec(op(), 1..300)) {
        let mut dn = Dummynet::new(7);
        for n in 1..=3 {
            dn.configure_pipe(n, pipe(1_000_000, 1, QueueLimit::Slots(10))).unwrap();
            let q = QueueConfig { mask: FlowMask { src_ip: 32, ..FlowMask::NONE }, buckets: 1, ..QueueConfig::new(n) };
            dn.configure_queue(n, q).unwrap();
        }
        let mut now = 0;
        let mut id = 0;
        let mut taken = std::collections::HashSet::new();
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for op in ops {
            match op {
                Op::EnqPipe(n, len, src) | Op::EnqQueue(n, len, src) => {
                    id += 1;
                    let p = pkt(id, len, src);
                    let r = if matches!(op, Op::EnqPipe(..)) {
                        dn.enqueue_pipe(n, p, now)
                    } else {
                        dn.enqueue_queue(n, p, now)
                    };
                    match r {
                        Ok(()) => { taken.insert(id); }
                        Err((p, _)) => prop_assert_eq!(p.id, id),
                    }
                }
                Op::Wait(d) => now += d,
                Op::Pipe(n, c) => dn.configure_pipe(n, c).unwrap(),
                Op::Queue(n, p, w, m) => {
                    let mask = if m { FlowMask::ALL } else { FlowMask::NONE };
                    let c = QueueConfig { weight: w, mask, buckets: 1, ..QueueConfig::new(p) };
                    dn.configure_queue(n, c).unwrap();
                }
                Op::Sched(n, k) => { dn.configure_sched(n, k); }
                Op::DeletePipe(n) => { dn.delete_pipe(n); }
                Op::DeleteQueue(n) => { dn.delete_queue(n); }
            }
            dn.poll(now, &mut out);
            for p in out.drain(..) {
                prop_assert!(taken.contains(&p.id));
                prop_assert!(seen.insert(p.id), "{} twice", p.id);
            }
            prop_assert!(dn.next_wakeup().is_none_or(|t| t > now));
            for (_, _, s) in dn.pipes() {
                check_balance(&s);
                prop_assert!(s.flows <= 3 * 16);
            }
        }
    }
}
