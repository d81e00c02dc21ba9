//! An echo server and its client on two stacks joined by a memory wire, in one
//! process, through the stacks' tokio sockets (net's `tokio` feature). No root, no
//! TAP: `cargo run -p mpstack --example tokio_echo`.
//!
//! The sockets need no reactor: a task that must wait registers its waker with the
//! socket, and the stack's worker thread wakes it. Tokio supplies the executor and
//! the `AsyncRead`/`AsyncWrite` traits.

use dev::mem::{wire, MemDevice, WireConfig};
use net::{IfConfig, Stack, StackConfig};
use std::net::{Ipv4Addr, SocketAddrV4};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

fn main() -> std::io::Result<()> {
    let (da, db) = wire(WireConfig::default());
    let mut client = host("client", da, "198.18.0.1/24");
    let mut server = host("server", db, "198.18.0.2/24");
    let listener = server.tcp_listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), 16)?;

    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    rt.block_on(async {
        // The server: each connection a task, its bytes sent back until its FIN.
        tokio::spawn(async move {
            loop {
                let Ok((c, peer)) = listener.accept_async().await else {
                    return;
                };
                tokio::spawn(async move {
                    let (mut rd, mut wr) = (&c, &c);
                    let n = tokio::io::copy(&mut rd, &mut wr).await;
                    let _ = AsyncWriteExt::shutdown(&mut wr).await;
                    println!("server: echoed {n:?} byte(s) to {peer}");
                });
            }
        });

        // Three clients at once.
        let mut clients = Vec::new();
        for i in 0..3u8 {
            let connect =
                client.tcp_connect_async(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 7));
            clients.push(tokio::spawn(async move {
                let mut c = connect.await?;
                let msg = vec![b'a' + i; 100_000];
                c.write_all(&msg).await?;
                AsyncWriteExt::shutdown(&mut c).await?;
                let mut back = Vec::new();
                c.read_to_end(&mut back).await?;
                assert_eq!(back, msg, "the echo differs");
                println!("client {i}: {} byte(s) back intact", back.len());
                std::io::Result::Ok(())
            }));
        }
        for c in clients {
            c.await.expect("the client task ran")?;
        }
        std::io::Result::Ok(())
    })?;
    client.stop();
    server.stop();
    Ok(())
}
