//! TCP. This step holds the connection state machine ([`tcb`]), sans IO and tested
//! against itself over a lossy, reordering, duplicating link in virtual time; the
//! worker demux, listeners and sockets that put it on the wire come next.

pub mod cc;
pub(crate) mod chan;
pub(crate) mod layer;
pub mod sndbuf;
pub mod socket;
pub mod tcb;

pub use cc::CongestionControl;
pub use socket::{TcpBuffers, TcpListener, TcpStream};
pub use tcb::{
    reset_answering, reset_for, wscale_for, CookieOpts, Payload, SegIn, SegOut, State, Tcb,
    TcpConfig, TcpError, PAYLOAD_PIECES,
};
