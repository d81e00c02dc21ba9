//! Code that spans both IP families (a tunnel carries one in the other; a
//! firewall's answer goes back by the family of what it refused) is given
//! [`Ip46Cx`]: the link's context, what both families share, and each family's own
//! state as siblings, from which it takes IPv4's or IPv6's borrows for the call it
//! makes. A stage of one family is never given it.

use crate::inet::cx::{Inet4, InetCx};
use crate::inet6::cx::{Inet6, Inet6Cx};
use crate::ip::IpCx;
use crate::link::LinkCx;

/// Both IP families' borrows, side by side.
pub(crate) struct Ip46Cx<'b, 'a> {
    pub link: &'b mut LinkCx<'a>,
    pub ip: &'b mut IpCx<'a>,
    pub v4: &'b mut Inet4<'a>,
    pub v6: &'b mut Inet6<'a>,
}

impl<'a> crate::link::AsLink<'a> for Ip46Cx<'_, 'a> {
    #[inline(always)]
    fn link(&mut self) -> &mut LinkCx<'a> {
        self.link
    }
}

impl<'a> Ip46Cx<'_, 'a> {
    /// IPv4's borrows.
    #[inline(always)]
    pub fn inet(&mut self) -> InetCx<'_, 'a> {
        InetCx {
            link: self.link,
            ip: self.ip,
            v4: self.v4,
        }
    }

    /// IPv6's borrows.
    #[inline(always)]
    pub fn inet6(&mut self) -> Inet6Cx<'_, 'a> {
        Inet6Cx {
            link: self.link,
            ip: self.ip,
            v6: self.v6,
        }
    }
}
