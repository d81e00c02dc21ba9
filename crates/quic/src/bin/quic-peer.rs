//! `quic-peer`: a quinn endpoint on the Linux kernel's UDP (tokio's sockets), speaking
//! [`mpstack_quic::xfer`]'s transfer: the kernel's side of the interop test and of
//! `mpstack bench quic`'s baseline. It serves one connection, or makes one, and exits.
//!
//! ```text
//! quic-peer server LISTEN_ADDR CERT.der KEY.der
//! quic-peer client SERVER_ADDR NAME CA.der UP_BYTES DOWN_BYTES [STREAMS]
//! ```
//!
//! The server prints `listening on ADDR` once it is ready and `served N bytes` at the
//! end; the client prints `moved UP up and DOWN down in S s`. Any failure, a byte that
//! differs from the pattern included, exits with status 1 and a message.
#![forbid(unsafe_code)]

use mpstack_quic::xfer;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    let a = args.get(i).ok_or_else(|| format!("missing {what}"))?;
    a.parse().map_err(|e| format!("{what} {a:?}: {e}"))
}

fn read(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{path}: {e}"))
}

async fn server(args: &[String]) -> Result<(), String> {
    let listen: SocketAddr = arg(args, 0, "listen address")?;
    let cert = read(&arg::<String>(args, 1, "certificate file")?)?;
    let key = read(&arg::<String>(args, 2, "key file")?)?;
    let sc = mpstack_quic::server_config(&cert, &key, mpstack_quic::bulk_transport())
        .map_err(|e| e.to_string())?;
    let ep = quinn::Endpoint::server(sc, listen).map_err(|e| format!("bind {listen}: {e}"))?;
    println!(
        "listening on {}",
        ep.local_addr().map_err(|e| e.to_string())?
    );
    let inc = ep.accept().await.ok_or("the endpoint closed")?;
    let conn = inc.await.map_err(|e| format!("handshake: {e}"))?;
    let got = xfer::serve(conn, None).await.map_err(|e| e.to_string())?;
    ep.wait_idle().await;
    println!("served {got} bytes");
    Ok(())
}

async fn client(args: &[String]) -> Result<(), String> {
    let to: SocketAddr = arg(args, 0, "server address")?;
    let name: String = arg(args, 1, "server name")?;
    let ca = read(&arg::<String>(args, 2, "CA certificate file")?)?;
    let up: u64 = arg(args, 3, "bytes up")?;
    let down: u64 = arg(args, 4, "bytes down")?;
    let streams: usize = if args.len() > 5 {
        arg(args, 5, "streams")?
    } else {
        1
    };
    let cc = mpstack_quic::client_config(&ca, mpstack_quic::bulk_transport())
        .map_err(|e| e.to_string())?;
    let any: SocketAddr = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut ep = quinn::Endpoint::client(any).map_err(|e| format!("bind: {e}"))?;
    ep.set_default_client_config(cc);
    let conn = ep
        .connect(to, &name)
        .map_err(|e| e.to_string())?
        .await
        .map_err(|e| format!("handshake with {to}: {e}"))?;
    let t0 = std::time::Instant::now();
    xfer::client(&conn, up, down, streams, None)
        .await
        .map_err(|e| e.to_string())?;
    let secs = t0.elapsed().as_secs_f64();
    conn.close(0u32.into(), b"done");
    ep.wait_idle().await;
    println!("moved {up} up and {down} down in {secs:.3} s");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("quic-peer: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let r = rt.block_on(async {
        let job = async {
            match args.first().map(String::as_str) {
                Some("server") => server(&args[1..]).await,
                Some("client") => client(&args[1..]).await,
                _ => Err("usage: quic-peer server LISTEN CERT KEY | quic-peer client SERVER NAME CA UP DOWN [STREAMS]".to_string()),
            }
        };
        // A peer that never hears from the other side must not hang its test.
        match tokio::time::timeout(Duration::from_secs(1800), job).await {
            Ok(r) => r,
            Err(_) => Err("gave up after 30 minutes".into()),
        }
    });
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quic-peer: {e}");
            ExitCode::FAILURE
        }
    }
}
