//! `cargo bench -p wire --bench wire`: the Internet checksum beside the naive RFC 1071 loop,
//! and parse/emit of the two sample frames of `wire::sample` (the ones the tests prove).

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::net::IpAddr;
use wire::sample;
use wire::*;

fn checksum(c: &mut Criterion) {
    let mut group = c.benchmark_group("checksum");
    for len in [64usize, 1500, 9000] {
        let bytes = sample::payload(len);
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("ours", len), &bytes, |b, bytes| {
            b.iter(|| checksum::data(black_box(bytes)))
        });
        group.bench_with_input(BenchmarkId::new("naive", len), &bytes, |b, bytes| {
            b.iter(|| checksum::data_naive(black_box(bytes)))
        });
    }
    group.finish();
}

/// Ethernet → IPv4 (checksum verified) → UDP (checksum verified); returns the payload length.
fn parse_ipv4_udp(bytes: &[u8]) -> Result<usize> {
    let frame = EthernetFrame::new_checked(bytes)?;
    let eth = EthernetRepr::parse(&frame)?;
    if eth.ethertype != EtherType::Ipv4 {
        return Err(Error::Unsupported);
    }
    let ip = Ipv4Packet::new_checked(frame.payload())?;
    let ip_repr = Ipv4Repr::parse(&ip, true)?;
    let udp = UdpPacket::new_checked(ip.payload())?;
    let (s, d) = (IpAddr::V4(ip_repr.src_addr), IpAddr::V4(ip_repr.dst_addr));
    UdpRepr::parse(&udp, &s, &d, true)?;
    Ok(udp.payload().len())
}

/// Ethernet → IPv6 → TCP with options (checksum verified); returns the payload length.
fn parse_ipv6_tcp(bytes: &[u8]) -> Result<usize> {
    let frame = EthernetFrame::new_checked(bytes)?;
    let eth = EthernetRepr::parse(&frame)?;
    if eth.ethertype != EtherType::Ipv6 {
        return Err(Error::Unsupported);
    }
    let ip = Ipv6Packet::new_checked(frame.payload())?;
    let ip_repr = Ipv6Repr::parse(&ip)?;
    let tcp = TcpPacket::new_checked(ip.payload())?;
    let (s, d) = (IpAddr::V6(ip_repr.src_addr), IpAddr::V6(ip_repr.dst_addr));
    let repr = TcpRepr::parse(&tcp, &s, &d, true)?;
    Ok(repr.payload.len())
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    for len in [0usize, 1400] {
        let udp = sample::ethernet_ipv4_udp(len);
        let tcp = sample::ethernet_ipv6_tcp(len);
        assert_eq!(parse_ipv4_udp(&udp), Ok(len));
        assert_eq!(parse_ipv6_tcp(&tcp), Ok(len));
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::new("eth_ipv4_udp", len), &udp, |b, f| {
            b.iter(|| parse_ipv4_udp(black_box(f)))
        });
        group.bench_with_input(BenchmarkId::new("eth_ipv6_tcp_opts", len), &tcp, |b, f| {
            b.iter(|| parse_ipv6_tcp(black_box(f)))
        });
    }
    group.finish();
}

fn emit(c: &mut Criterion) {
    let mut group = c.benchmark_group("emit");
    for len in [0usize, 1400] {
        let data = sample::payload(len);
        let expected_udp = sample::ethernet_ipv4_udp(len);
        let expected_tcp = sample::ethernet_ipv6_tcp(len);
        group.throughput(Throughput::Elements(1));

        let mut buf = vec![0u8; expected_udp.len()];
        let emit_udp = |buf: &mut [u8], data: &[u8]| {
            let udp = UdpRepr {
                src_port: 40000,
                dst_port: 53,
            };
            let ip = Ipv4Repr {
                src_addr: sample::IP4_A,
                dst_addr: sample::IP4_B,
                next_header: IpProtocol::Udp,
                payload_len: udp.buffer_len(data.len()),
                hop_limit: 64,
                dscp: 0,
                ident: 0x2256,
                dont_frag: true,
            };
            let eth = EthernetRepr {
                src_addr: sample::MAC_A,
                dst_addr: sample::MAC_B,
                ethertype: EtherType::Ipv4,
            };
            let mut frame = EthernetFrame::new_unchecked(buf);
            eth.emit(&mut frame);
            let mut packet = Ipv4Packet::new_unchecked(frame.payload_mut());
            ip.emit(&mut packet);
            udp.emit(
                &mut UdpPacket::new_unchecked(packet.payload_mut()),
                &IpAddr::V4(sample::IP4_A),
                &IpAddr::V4(sample::IP4_B),
                data.len(),
                |b| b.copy_from_slice(data),
                true,
            );
        };
        emit_udp(&mut buf, &data);
        assert_eq!(buf, expected_udp);
        group.bench_function(BenchmarkId::new("eth_ipv4_udp", len), |b| {
            b.iter(|| emit_udp(black_box(&mut buf), black_box(&data)))
        });

        let mut buf = vec![0u8; expected_tcp.len()];
        let emit_tcp = |buf: &mut [u8], data: &[u8]| {
            let tcp = sample::tcp_repr(data);
            let ip = Ipv6Repr {
                src_addr: sample::IP6_A,
                dst_addr: sample::IP6_B,
                next_header: IpProtocol::Tcp,
                payload_len: tcp.buffer_len(),
                hop_limit: 64,
            };
            let eth = EthernetRepr {
                src_addr: sample::MAC_A,
                dst_addr: sample::MAC_B,
                ethertype: EtherType::Ipv6,
            };
            let mut frame = EthernetFrame::new_unchecked(buf);
            eth.emit(&mut frame);
            let mut packet = Ipv6Packet::new_unchecked(frame.payload_mut());
            ip.emit(&mut packet);
            tcp.emit(
                &mut TcpPacket::new_unchecked(packet.payload_mut()),
                &IpAddr::V6(sample::IP6_A),
                &IpAddr::V6(sample::IP6_B),
                true,
            );
        };
        emit_tcp(&mut buf, &data);
        assert_eq!(buf, expected_tcp);
        group.bench_function(BenchmarkId::new("eth_ipv6_tcp_opts", len), |b| {
            b.iter(|| emit_tcp(black_box(&mut buf), black_box(&data)))
        });
    }
    group.finish();
}

criterion_group!(benches, checksum, parse, emit);
criterion_main!(benches);
