//! hyper over mpstack: an HTTP/1.1 server on one stack and hyper's client on
//! another, joined by a memory wire, in one process (no root, no TAP):
//! `cargo run -p mpstack --example hyper_server`.
//!
//! The stack's `TcpStream` is a tokio `AsyncRead + AsyncWrite` (net's `tokio`
//! feature); hyper-util's `TokioIo` turns it into hyper's I/O. Two requests go over
//! one kept-alive connection.

use bytes::Bytes;
use dev::mem::{wire, MemDevice, WireConfig};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use net::{IfConfig, Stack, StackConfig};
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddrV4};

/// A stack with one interface on `dev`, its worker running.
fn host(name: &str, dev: MemDevice, addr: &str) -> Stack {
    let mut s = Stack::new(StackConfig {
        name: name.into(),
        workers: 1,
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
    s.start().expect("the worker starts");
    s
}

/// The server's one handler: says which path was asked for.
async fn hello(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = format!(
        "hello from mpstack: {} {}\n",
        req.method(),
        req.uri().path()
    );
    Ok(Response::new(Full::new(Bytes::from(body))))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (da, db) = wire(WireConfig::default());
    let mut client = host("client", da, "198.18.0.1/24");
    let mut server = host("server", db, "198.18.0.2/24");
    let listener = server.tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80), 16)?;

    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    rt.block_on(async {
        // The server: hyper's HTTP/1.1 connection on each accepted stream.
        tokio::spawn(async move {
            while let Ok((c, _)) = listener.accept_async().await {
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(hello);
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(c), svc);
                    if let Err(e) = conn.await {
                        eprintln!("server: {e}");
                    }
                });
            }
        });

        // The client: hyper's connection over a stream of the other stack.
        let stream = client
            .tcp_connect_async(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 80))
            .await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let conn = tokio::spawn(conn);
        for path in ["/", "/index.html"] {
            let req = Request::get(path)
                .header("host", "198.18.0.2")
                .body(Empty::<Bytes>::new())?;
            let resp = sender.send_request(req).await?;
            let status = resp.status();
            let body = resp.into_body().collect().await?.to_bytes();
            print!(
                "client: GET {path}: {status}: {}",
                String::from_utf8_lossy(&body)
            );
            assert_eq!(body, format!("hello from mpstack: GET {path}\n"));
        }
        // Dropping the sender ends the connection: its task returns.
        drop(sender);
        conn.await??;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    client.stop();
    server.stop();
    Ok(())
}
