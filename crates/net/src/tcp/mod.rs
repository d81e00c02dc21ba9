//! TCP: the connection state machine ([`tcb`], sans IO, tested against itself over a
//! lossy, reordering, duplicating link in virtual time), the worker's side of it
//! ([`layer`]: demux, listeners, SYN cookies, timers, output), and the channels
//! between a connection and its application (`chan`), and Fast Open's cookies
//! ([`fastopen`]: the server's MAC, the client's cache). The application's handles
//! (`TcpStream`, `TcpListener`) are the stack's (`stack::tcp_socket`).

pub mod bbr;
pub mod cc;
pub(crate) mod chan;
pub mod fastopen;
pub(crate) mod layer;
pub mod mem;
pub mod sndbuf;
pub mod tcb;

pub use cc::CongestionControl;
pub use layer::{ConnInfo, TcpDrop};
pub use mem::{MemState, TcpMem, TcpMemLimits};
pub use tcb::{
    reset_answering, reset_for, wscale_for, CaState, CookieOpts, FoCookie, Payload, SegIn, SegOut,
    State, Tcb, TcpConfig, TcpError, TcpInfo, TfoNews, PAYLOAD_PIECES,
};
