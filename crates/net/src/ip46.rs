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

impl<'b, 'a> Ip46Cx<'b, 'a> {
    /// IPv4's borrows, for as long as these were given.
    #[inline(always)]
    pub fn into_inet(self) -> InetCx<'b, 'a> {
        InetCx {
            link: self.link,
            ip: self.ip,
            v4: self.v4,
        }
    }

    /// IPv6's borrows, for as long as these were given.
    #[inline(always)]
    pub fn into_inet6(self) -> Inet6Cx<'b, 'a> {
        Inet6Cx {
            link: self.link,
            ip: self.ip,
            v6: self.v6,
        }
    }

    /// IPv4's borrows, for a call.
    #[inline(always)]
    pub fn inet(&mut self) -> InetCx<'_, 'a> {
        self.re().into_inet()
    }

    /// IPv6's borrows, for a call.
    #[inline(always)]
    pub fn inet6(&mut self) -> Inet6Cx<'_, 'a> {
        self.re().into_inet6()
    }

    /// The same borrows for a shorter while.
    #[inline(always)]
    fn re(&mut self) -> Ip46Cx<'_, 'a> {
        Ip46Cx {
            link: self.link,
            ip: self.ip,
            v4: self.v4,
            v6: self.v6,
        }
    }
}
