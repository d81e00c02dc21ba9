//! quinn (QUIC) over mpstack: [`MpstackUdpSocket`] is quinn's runtime socket
//! ([`quinn::AsyncUdpSocket`] and its [`quinn::UdpPoller`]) on an mpstack
//! [`net::UdpSocket`], so a `quinn::Endpoint` sends and receives through an mpstack
//! stack instead of the kernel. Timers and tasks stay tokio's ([`quinn::TokioRuntime`]);
//! only the I/O is ours, and it never touches a file descriptor: the socket's home
//! worker wakes the endpoint's task from its own thread (`net::async_io`).
//!
//! The socket uses the batched calls of `net`: a transmit of several segments (quinn's
//! GSO) is one [`net::UdpSocket::send_segmented`], one wake-up of the worker; a receive
//! drains up to quinn's batch of datagrams with one [`net::UdpSocket::poll_recv_batch`].
//! What it tells quinn is what it does: [`MAX_TRANSMIT_SEGMENTS`] segments a transmit
//! (fewer if the send queue is smaller), one datagram a receive buffer (no GRO
//! coalescing: `max_receive_segments` is 1), no ECN, and no fragmentation (Don't
//! Fragment is set, so quinn's path MTU discovery probes the path).
//!
//! [`endpoint`] builds a `quinn::Endpoint` on such a socket; [`self_signed`] makes the
//! rustls (ring provider) configurations of a server with a self-signed certificate
//! and of a client that trusts it, for tests, examples and benchmarks.
#![forbid(unsafe_code)]

use quinn::udp::{RecvMeta as QuinnRecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll, Wake, Waker};

pub mod lab;
pub mod xfer;

/// The quinn this crate implements the socket of, for users that need its types.
pub use quinn;

/// Segments a transmit may carry (quinn itself asks for at most 10).
pub const MAX_TRANSMIT_SEGMENTS: usize = 64;

/// Datagrams one `poll_recv` takes at most (quinn offers 32 buffers on Linux).
const RECV_BATCH: usize = 64;

/// quinn's socket on an mpstack UDP socket.
pub struct MpstackUdpSocket {
    sock: net::UdpSocket,
    /// Segments a transmit may carry: [`MAX_TRANSMIT_SEGMENTS`], or half the send
    /// queue if that is smaller, so that a whole transmit can always fit.
    max_segments: usize,
    /// Makes a transmit's room check and its queueing one step when several
    /// connection tasks send on the socket at once: quinn's `try_send` queues a
    /// transmit whole or not at all.
    send_lock: Mutex<()>,
    /// Every task waiting for room (the socket wakes one writing task; quinn has one
    /// per connection).
    writers: Arc<Writers>,
}

impl fmt::Debug for MpstackUdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MpstackUdpSocket")
            .field("local", &self.sock.local_addr().ok())
            .field("max_segments", &self.max_segments)
            .finish()
    }
}

impl MpstackUdpSocket {
    /// Wraps `sock` for quinn; sets Don't Fragment on it (quinn discovers the path
    /// MTU itself).
    pub fn new(sock: net::UdpSocket) -> Self {
        sock.set_dont_fragment(true);
        let max_segments = MAX_TRANSMIT_SEGMENTS.min((sock.send_capacity() / 2).max(1));
        MpstackUdpSocket {
            sock,
            max_segments,
            send_lock: Mutex::new(()),
            writers: Arc::new(Writers::default()),
        }
    }

    /// The mpstack socket underneath.
    pub fn socket(&self) -> &net::UdpSocket {
        &self.sock
    }
}

/// Tasks waiting for room in the send queue: the socket's write waker is one
/// [`Writers`] that wakes them all.
#[derive(Debug, Default)]
struct Writers {
    tasks: Mutex<Vec<Waker>>,
}

impl Writers {
    fn add(&self, w: &Waker) {
        let mut t = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        if !t.iter().any(|o| o.will_wake(w)) {
            t.push(w.clone());
        }
    }
}

impl Wake for Writers {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for t in tasks {
            t.wake();
        }
    }
}

/// One connection's wait for room ([`quinn::UdpPoller`]).
#[derive(Debug)]
struct Poller {
    sock: Arc<MpstackUdpSocket>,
}

impl UdpPoller for Poller {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let s = &self.sock;
        let n = s.max_segments;
        if s.sock.send_room() >= n {
            return Poll::Ready(Ok(()));
        }
        // Listed before the socket is asked again: a wake-up between the two finds us
        // in the list.
        s.writers.add(cx.waker());
        let fanout = Waker::from(s.writers.clone());
        s.sock.poll_send_ready(&mut Context::from_waker(&fanout), n)
    }
}

impl AsyncUdpSocket for MpstackUdpSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Poller { sock: self })
    }

    fn try_send(&self, t: &Transmit<'_>) -> io::Result<()> {
        let seg = match t.segment_size {
            Some(s) if s > 0 && s < t.contents.len() => s,
            _ => t.contents.len(),
        };
        let n = t.contents.len().div_ceil(seg.max(1)).max(1);
        if n > self.max_segments {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "transmit has more segments than max_transmit_segments",
            ));
        }
        let _g = self.send_lock.lock().unwrap_or_else(|e| e.into_inner());
        if self.sock.send_room() < n {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let queued = if n == 1 {
            self.sock.send_to(t.contents, t.destination).map(|_| 1)?
        } else {
            self.sock.send_segmented(t.contents, seg, t.destination)?
        };
        // The room was checked under the lock, and only senders holding it push, so
        // the whole transmit went; if another handle of the socket sent meanwhile, the
        // rest is lost as on a congested path, and QUIC's loss recovery resends it.
        debug_assert!(queued <= n);
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [QuinnRecvMeta],
    ) -> Poll<io::Result<usize>> {
        let max = bufs.len().min(meta.len()).min(RECV_BATCH);
        let mut ours = [net::socket::RecvMeta::default(); RECV_BATCH];
        let n = ready!(self
            .sock
            .poll_recv_batch(cx, &mut bufs[..max], &mut ours[..max]))?;
        let local = self.sock.local_addr()?.ip();
        let dst_ip = (!local.is_unspecified()).then_some(local);
        for (m, o) in meta.iter_mut().zip(&ours[..n]) {
            *m = QuinnRecvMeta {
                addr: o.from,
                len: o.len,
                stride: o.len,
                ecn: None,
                dst_ip,
            };
        }
        Poll::Ready(Ok(n))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.max_segments
    }

    fn max_receive_segments(&self) -> usize {
        1
    }

    fn may_fragment(&self) -> bool {
        false
    }
}

/// A quinn endpoint on `sock` (a server if `server` is given), with tokio's timers and
/// tasks. Call it inside a tokio runtime.
pub fn endpoint(
    sock: net::UdpSocket,
    config: quinn::EndpointConfig,
    server: Option<quinn::ServerConfig>,
) -> io::Result<quinn::Endpoint> {
    quinn::Endpoint::new_with_abstract_socket(
        config,
        server,
        Arc::new(MpstackUdpSocket::new(sock)),
        Arc::new(quinn::TokioRuntime),
    )
}

/// The ALPN protocol name [`self_signed`]'s configurations agree on.
pub const ALPN: &[u8] = b"mpstack-quic";

/// Why [`self_signed`] failed.
#[derive(Debug)]
pub enum CertError {
    Rcgen(rcgen::Error),
    Rustls(rustls::Error),
    Quic(String),
}

impl fmt::Display for CertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CertError::Rcgen(e) => write!(f, "certificate: {e}"),
            CertError::Rustls(e) => write!(f, "TLS configuration: {e}"),
            CertError::Quic(e) => write!(f, "QUIC crypto configuration: {e}"),
        }
    }
}

impl std::error::Error for CertError {}

/// A fresh self-signed certificate for `name` (rcgen): the certificate's and the
/// PKCS #8 private key's DER bytes.
pub fn generate_cert(name: &str) -> Result<(Vec<u8>, Vec<u8>), CertError> {
    let ck =
        rcgen::generate_simple_self_signed(vec![name.to_string()]).map_err(CertError::Rcgen)?;
    Ok((ck.cert.der().to_vec(), ck.key_pair.serialize_der()))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server configuration presenting `cert` (DER) with `key` (PKCS #8 DER): TLS 1.3
/// on rustls with the ring provider, ALPN [`ALPN`].
pub fn server_config(
    cert: &[u8],
    key: &[u8],
    transport: Arc<quinn::TransportConfig>,
) -> Result<quinn::ServerConfig, CertError> {
    use quinn::crypto::rustls::QuicServerConfig;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.to_vec()));
    let mut sc = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(CertError::Rustls)?
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(cert.to_vec())], key)
        .map_err(CertError::Rustls)?;
    sc.alpn_protocols = vec![ALPN.to_vec()];
    let sc = QuicServerConfig::try_from(sc).map_err(|e| CertError::Quic(e.to_string()))?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(sc));
    server.transport_config(transport);
    Ok(server)
}

/// A client configuration that trusts `ca` (a certificate's DER) and nothing else:
/// TLS 1.3 on rustls with the ring provider, ALPN [`ALPN`].
pub fn client_config(
    ca: &[u8],
    transport: Arc<quinn::TransportConfig>,
) -> Result<quinn::ClientConfig, CertError> {
    use quinn::crypto::rustls::QuicClientConfig;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca.to_vec()))
        .map_err(CertError::Rustls)?;
    let mut cc = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(CertError::Rustls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cc.alpn_protocols = vec![ALPN.to_vec()];
    let cc = QuicClientConfig::try_from(cc).map_err(|e| CertError::Quic(e.to_string()))?;
    let mut client = quinn::ClientConfig::new(Arc::new(cc));
    client.transport_config(transport);
    Ok(client)
}

/// A server configuration with a fresh self-signed certificate for `name`, and a
/// client configuration that trusts that certificate and nothing else
/// ([`generate_cert`], [`server_config`], [`client_config`]); `transport` applies to
/// both.
pub fn self_signed(
    name: &str,
    transport: Arc<quinn::TransportConfig>,
) -> Result<(quinn::ServerConfig, quinn::ClientConfig), CertError> {
    let (cert, key) = generate_cert(name)?;
    Ok((
        server_config(&cert, &key, transport.clone())?,
        client_config(&cert, transport)?,
    ))
}

/// A transport configuration for bulk transfers on a fast, short path: stream and
/// connection windows large enough that a window is never the limit at the wire's
/// rate (quinn's defaults are for the Internet's round-trip times).
pub fn bulk_transport() -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(quinn::VarInt::from_u32(16 << 20))
        .receive_window(quinn::VarInt::from_u32(64 << 20))
        .send_window(64 << 20)
        .max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(std::time::Duration::from_secs(30))
                .expect("30 s is a valid idle timeout"),
        ));
    Arc::new(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dev::mem::{wire, WireConfig};
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::task::Poll;

    /// A socket on a stack whose workers are not started: nothing drains its send
    /// queue of 8, so what quinn is told can be checked against what happens.
    fn stopped_socket() -> (net::Stack, Arc<MpstackUdpSocket>) {
        let (d, _peer) = wire(WireConfig::default());
        let mut s = net::Stack::new(net::StackConfig {
            name: "quic-unit".into(),
            workers: 1,
            socket_queue: 8,
            ..net::StackConfig::default()
        });
        s.add_interface(
            Box::new(d),
            net::IfConfig {
                addrs: vec!["198.18.0.1/24".parse().expect("an address")],
                ..net::IfConfig::default()
            },
        )
        .expect("an interface");
        let u = s
            .udp_bind(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 0))
            .expect("a socket");
        (s, Arc::new(MpstackUdpSocket::new(u)))
    }

    fn transmit(contents: &[u8], segment_size: Option<usize>) -> Transmit<'_> {
        Transmit {
            destination: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 4433)),
            ecn: None,
            contents,
            segment_size,
            src_ip: None,
        }
    }

    #[test]
    fn a_transmit_is_queued_whole_or_not_at_all() {
        let (_stack, s) = stopped_socket();
        // Half the queue of 8: a whole transmit always fits in an empty queue.
        assert_eq!(s.max_transmit_segments(), 4);
        assert_eq!(s.max_receive_segments(), 1);
        assert!(!s.may_fragment());
        assert!(s.socket().dont_fragment());
        let three = [7u8; 3 * 1200];
        s.try_send(&transmit(&three, Some(1200)))
            .expect("3 segments fit in 8");
        s.try_send(&transmit(&three[..2500], Some(1200)))
            .expect("3 more (the last one short) fit in 5");
        assert_eq!(s.socket().send_room(), 2);
        let e = s.try_send(&transmit(&three, Some(1200))).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(
            s.socket().send_room(),
            2,
            "nothing of a refused transmit queued"
        );
        s.try_send(&transmit(&three[..1000], None))
            .expect("one datagram fits");
        let e = s
            .try_send(&transmit(&[0u8; 5 * 100], Some(100)))
            .unwrap_err();
        assert_eq!(
            e.kind(),
            io::ErrorKind::InvalidInput,
            "more than max_transmit_segments"
        );
        // No room for a whole transmit: the poller waits.
        let mut p = s.clone().create_io_poller();
        let w = Waker::noop();
        let mut cx = Context::from_waker(w);
        assert!(p.as_mut().poll_writable(&mut cx).is_pending());
        // And nothing received: the receive side waits too.
        let mut buf = [0u8; 1500];
        let mut bufs = [IoSliceMut::new(&mut buf)];
        let mut meta = [QuinnRecvMeta::default()];
        assert!(matches!(
            s.poll_recv(&mut cx, &mut bufs, &mut meta),
            Poll::Pending
        ));
    }
}
