//! The shim without packetdrill: socket calls and the packets they make, in
//! virtual time, as packetdrill would see them.

use dev::packetdrill::{Host, PollFd};
use mpstack_packetdrill::shim::Shim;

/// An IPv4 TCP segment from packetdrill's side (198.18.0.2:sport) to the stack.
fn segment(dport: u16, sport: u16, seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    use std::net::{IpAddr, Ipv4Addr};
    let (src, dst) = (Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 1));
    let tcp = wire::TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq_number: wire::TcpSeqNumber(seq),
        ack_number: wire::TcpSeqNumber(ack),
        flags: wire::TcpFlags::from_bits_truncate(u16::from(flags)),
        window_len: 65535,
        urgent_at: 0,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [None; 4],
        timestamp: None,
        fast_open: None,
        payload,
    };
    let tlen = tcp.buffer_len();
    let mut p = vec![0u8; 20 + tlen];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((20 + tlen) as u16).to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let sum = !wire::checksum::data(&p[..20]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    tcp.emit(
        &mut wire::TcpPacket::new_unchecked(&mut p[20..]),
        &IpAddr::V4(src),
        &IpAddr::V4(dst),
        true,
    );
    p
}

/// The next packet the stack sent: (TCP flags, seq, ack, payload length, when).
fn sniff(s: &Shim) -> (u8, u32, u32, usize, i64) {
    let mut b = [0u8; 2048];
    let (n, t) = s.netdev_receive(&mut b).unwrap().expect("a packet");
    let p = &b[..n];
    assert_eq!(p[0] >> 4, 4);
    assert_eq!(p[9], 6, "TCP");
    let tcp = &p[20..];
    let hl = usize::from(tcp[12] >> 4) * 4;
    let seq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
    let ack = u32::from_be_bytes(tcp[8..12].try_into().unwrap());
    (tcp[13], seq, ack, tcp.len() - hl, t)
}

#[test]
fn a_listener_accepts_reads_and_answers_in_virtual_time() {
    let s = Shim::from_flags("");
    let fd = s
        .socket(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP)
        .unwrap();
    assert_eq!(fd, 3);
    s.bind(fd, "0.0.0.0:8080".parse().unwrap()).unwrap();
    s.listen(fd, 5).unwrap();
    assert_eq!(
        s.fcntl(fd, libc::F_SETFL, i64::from(libc::O_NONBLOCK)),
        Ok(0)
    );
    assert_eq!(
        s.fcntl(fd, libc::F_GETFL, 0),
        Ok(libc::O_RDWR | libc::O_NONBLOCK)
    );
    assert_eq!(s.accept(fd).unwrap_err(), libc::EAGAIN);
    let t0 = s.now_usecs();
    s.netdev_send(&segment(8080, 5000, 1000, 0, 0x02, &[]))
        .unwrap();
    let (flags, isn, ack, len, t) = sniff(&s);
    assert_eq!((flags, ack, len), (0x12, 1001, 0), "SYN-ACK");
    assert!(t - t0 < 1000, "at once: {} us", t - t0);
    s.netdev_send(&segment(8080, 5000, 1001, isn + 1, 0x10, &[]))
        .unwrap();
    let mut p = [PollFd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }];
    assert_eq!(s.poll(&mut p, 0), Ok(1));
    let st = s
        .command(&["sockstat", "-4", "-P", "tcp", "-s", "-p", "8080"])
        .unwrap();
    assert!(
        st.lines().any(|l| l.contains("198.18.0.1:8080")
            && l.contains("198.18.0.2:5000")
            && l.ends_with("ESTABLISHED")),
        "{st}"
    );
    assert!(
        st.lines()
            .any(|l| l.contains("*:8080") && l.ends_with("LISTEN")),
        "{st}"
    );
    let (c, peer) = s.accept(fd).unwrap();
    assert_eq!(peer, "198.18.0.2:5000".parse().unwrap());
    s.netdev_send(&segment(8080, 5000, 1001, isn + 1, 0x18, b"hello"))
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(s.recv(c, &mut buf, 0).unwrap().0, 5);
    assert_eq!(&buf[..5], b"hello");
    // The delayed ACK, later in virtual time (sniffing runs the clock).
    let (flags, _, ack, _, t1) = sniff(&s);
    assert_eq!((flags, ack), (0x10, 1006));
    assert!(t1 - t >= 30_000, "delayed: {} us", t1 - t);
    assert_eq!(s.send(c, b"world", 0, None), Ok(5));
    let (flags, seq, _, len, _) = sniff(&s);
    assert_eq!((flags & 0x08, seq, len), (0x08, isn + 1, 5));
    s.usleep(10_000);
    assert!(s.now_usecs() - t1 >= 10_000);
    assert_eq!(s.close(c), Ok(()));
    let (flags, ..) = sniff(&s);
    assert_eq!(flags & 0x01, 0x01, "FIN on close");
    assert_eq!(s.close(c), Err(libc::EBADF));
    let loose = s.socket(libc::AF_INET, libc::SOCK_STREAM, 0).unwrap();
    s.bind(loose, "198.18.0.1:9000".parse().unwrap()).unwrap();
    let st = s.command(&["sockstat", "-s", "-p", "9000"]).unwrap();
    assert!(
        st.lines()
            .any(|l| l.contains("198.18.0.1:9000") && l.ends_with("CLOSED")),
        "{st}"
    );
    assert!(s
        .command(&["sysctl", "-w", "net.inet.tcp.nosuch=1"])
        .is_err());
    assert!(s.command(&["reboot"]).is_err());
}

#[test]
fn a_nonblocking_connect_is_in_progress_until_the_syn_ack() {
    let s = Shim::from_flags("");
    let fd = s
        .socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0)
        .unwrap();
    let to = "198.18.0.2:80".parse().unwrap();
    assert_eq!(s.connect(fd, to), Err(libc::EINPROGRESS));
    assert_eq!(s.connect(fd, to), Err(libc::EALREADY));
    let (flags, isn, _, _, t) = sniff(&s);
    assert_eq!(flags, 0x02);
    let mut p = [PollFd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    }];
    assert_eq!(
        s.poll(&mut p, 0),
        Ok(0),
        "not writable before the handshake"
    );
    // No answer: the SYN again after the initial RTO (1 s).
    let (flags2, isn2, _, _, t2) = sniff(&s);
    assert_eq!((flags2, isn2), (0x02, isn));
    assert!((900_000..1_300_000).contains(&(t2 - t)), "{} us", t2 - t);
    let mut b = [0u8; 4];
    assert_eq!(
        s.getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut b),
        Ok(4)
    );
    assert_eq!(i32::from_ne_bytes(b), 0);
    assert_eq!(
        s.socket(libc::AF_INET, libc::SOCK_DGRAM, 0),
        Err(libc::EPROTONOSUPPORT)
    );
}

#[test]
fn so_flags_name_the_addresses_and_the_link() {
    let f = mpstack_packetdrill::shim::Flags::parse("local=2001:2::1 remote=2001:2::2 mtu=9000");
    assert_eq!(f.prefix, 64);
    assert_eq!(f.mtu, 9000);
    assert!(f.local.is_ipv6() && f.remote.is_ipv6());
    let d = mpstack_packetdrill::shim::Flags::parse("");
    assert_eq!(d.local.to_string(), "198.18.0.1");
    assert_eq!(d.remote.to_string(), "198.18.0.2");
}

#[test]
fn a_segment_for_a_closed_port_is_answered_with_a_reset() {
    let s = Shim::from_flags("");
    let fd = s.socket(libc::AF_INET, libc::SOCK_STREAM, 0).unwrap();
    s.bind(fd, "0.0.0.0:8080".parse().unwrap()).unwrap();
    s.netdev_send(&segment(8080, 5000, 17, 34, 0x10, b"abc"))
        .unwrap();
    let (flags, seq, _, len, _) = sniff(&s);
    assert_eq!((flags, seq, len), (0x04, 34, 0), "RST 34:34(0)");
}
