//! A quinn server on one mpstack stack and a quinn client on another, joined by a
//! memory wire in this process (no root, no TAP, no kernel sockets): the client opens
//! a stream, sends a greeting and 8 MiB of a pattern, and the server checks every byte
//! and answers with the same amount back, which the client checks in turn.
//!
//! `cargo run --release -p mpstack-quic --example quinn_endpoint [MiB]`

use mpstack_quic::{lab, xfer};
use std::net::SocketAddr;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mib: u64 = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .map_err(|e| format!("{a:?}: not a number of MiB: {e}"))?,
        None => 8,
    };
    // Two stacks, one worker thread each, on a wire of MTU 1500: 198.18.0.1 and .2.
    let (client_stack, server_stack) = lab::stacks(1)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()?;
    rt.block_on(async {
        // A self-signed certificate for "localhost" that only this client trusts.
        let (sc, cc) = mpstack_quic::self_signed("localhost", mpstack_quic::bulk_transport())?;
        let server = mpstack_quic::endpoint(
            server_stack.udp_bind(lab::SERVER)?,
            quinn::EndpointConfig::default(),
            Some(sc),
        )?;
        let mut client = mpstack_quic::endpoint(
            client_stack.udp_bind(SocketAddr::new(lab::CLIENT_IP.into(), 0))?,
            quinn::EndpointConfig::default(),
            None,
        )?;
        client.set_default_client_config(cc);

        // The server: one connection, a greeting on its first stream, then the bulk
        // transfer on the next ones.
        let srv = server.clone();
        let server_task = tokio::spawn(async move {
            let conn = srv.accept().await.ok_or("no connection")?.await?;
            let (mut tx, mut rx) = conn.accept_bi().await?;
            let hello = rx.read_to_end(64).await?;
            tx.write_all(b"hello from the server on ").await?;
            tx.write_all(conn.remote_address().to_string().as_bytes())
                .await?;
            tx.finish()?;
            let got = xfer::serve(conn, None).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((hello, got))
        });

        let conn = client
            .connect(SocketAddr::V4(lab::SERVER), "localhost")?
            .await?;
        println!(
            "connected to {} from {}",
            conn.remote_address(),
            client.local_addr()?
        );
        let (mut tx, mut rx) = conn.open_bi().await?;
        tx.write_all(b"hello from the client").await?;
        tx.finish()?;
        let answer = rx.read_to_end(256).await?;
        println!("{}", String::from_utf8_lossy(&answer));

        let t0 = std::time::Instant::now();
        let bytes = mib << 20;
        xfer::client(&conn, bytes, bytes, 1, None).await?;
        let secs = t0.elapsed().as_secs_f64();
        conn.close(0u32.into(), b"done");
        let (hello, got) = server_task.await?.map_err(|e| e.to_string())?;
        println!("the server read {:?}", String::from_utf8_lossy(&hello));
        println!(
            "{mib} MiB each way, byte-exact, in {secs:.2} s ({:.0} Mbit/s each way)",
            bytes as f64 * 8.0 / secs / 1e6
        );
        assert_eq!(got, bytes);
        client.wait_idle().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}
