//! Two mpstack stacks joined by a memory wire (`dev::mem::wire`), each with its own
//! worker threads, and a quinn endpoint on each: what the tests, the example and
//! `mpstack bench quic` run QUIC over in one process. Addresses 198.18.0.1 and
//! 198.18.0.2 (RFC 2544's benchmarking range).

use dev::mem::{wire, MemDevice, WireConfig};
use net::{IfConfig, Stack, StackConfig};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// The server's address and port.
pub const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 4433);
/// The client's address.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

/// Socket queues of the lab's stacks, in datagrams: at QUIC's rate the default of 256
/// fills between two runs of the application's task, and every datagram dropped
/// there is one QUIC retransmits.
pub const SOCKET_QUEUE: usize = 4096;

fn host(name: &str, workers: usize, dev: MemDevice, addr: &str) -> Result<Stack, String> {
    let mut s = Stack::new(StackConfig {
        name: name.into(),
        workers,
        socket_queue: SOCKET_QUEUE,
        ..StackConfig::default()
    });
    let addrs = vec![addr.parse().map_err(|e| format!("{addr}: {e}"))?];
    s.add_interface(
        Box::new(dev),
        IfConfig {
            addrs,
            ..IfConfig::default()
        },
    )
    .map_err(|e| format!("{name}: {e:?}"))?;
    s.start().map_err(|e| format!("{name}: {e:?}"))?;
    Ok(s)
}

/// The client's and the server's stack, `workers` worker threads each, on a wire of
/// MTU 1500.
pub fn stacks(workers: usize) -> Result<(Stack, Stack), String> {
    let (dc, ds) = wire(WireConfig {
        num_queues: workers,
        queue_limit: 4096,
        ..WireConfig::default()
    });
    Ok((
        host("quic-client", workers, dc, "198.18.0.1/24")?,
        host("quic-server", workers, ds, "198.18.0.2/24")?,
    ))
}

/// A client endpoint on `client` and a server endpoint on `server` at [`SERVER`], in
/// that order, with [`crate::bulk_transport`] and a self-signed certificate for
/// "localhost". Call it inside a tokio runtime.
pub fn endpoints(
    client: &Stack,
    server: &Stack,
) -> Result<(quinn::Endpoint, quinn::Endpoint), String> {
    let (sc, cc) =
        crate::self_signed("localhost", crate::bulk_transport()).map_err(|e| e.to_string())?;
    let ss = server.udp_bind(SERVER).map_err(|e| e.to_string())?;
    let cs = client
        .udp_bind(SocketAddr::V4(SocketAddrV4::new(CLIENT_IP, 0)))
        .map_err(|e| e.to_string())?;
    let se = crate::endpoint(ss, quinn::EndpointConfig::default(), Some(sc))
        .map_err(|e| e.to_string())?;
    let mut ce =
        crate::endpoint(cs, quinn::EndpointConfig::default(), None).map_err(|e| e.to_string())?;
    ce.set_default_client_config(cc);
    Ok((ce, se))
}

/// The baseline's endpoints: quinn on the Linux kernel's UDP over loopback
/// (127.0.0.1, tokio's sockets), a client and a server, with the same transport and
/// certificate as [`endpoints`]; and the server's address. Call it inside a tokio
/// runtime.
pub fn loopback_endpoints() -> Result<(quinn::Endpoint, quinn::Endpoint, SocketAddr), String> {
    let (sc, cc) =
        crate::self_signed("localhost", crate::bulk_transport()).map_err(|e| e.to_string())?;
    let lo = |port| SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
    let se = quinn::Endpoint::server(sc, lo(0)).map_err(|e| format!("bind 127.0.0.1: {e}"))?;
    let to = se.local_addr().map_err(|e| e.to_string())?;
    let mut ce = quinn::Endpoint::client(lo(0)).map_err(|e| format!("bind 127.0.0.1: {e}"))?;
    ce.set_default_client_config(cc);
    Ok((ce, se, to))
}
