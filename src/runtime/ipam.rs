//! Pod IP address management for one node: the node's pod CIDR (`spec.podCIDR`, assigned by
//! the controller-manager), its first host address for the bridge (the pods' gateway), and
//! the pod IPs handed out from the rest, never the network or broadcast address.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 CIDR such as `10.244.0.0/24`, stored as its network address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: Ipv4Addr,
    prefix: u8,
}

/// Why a pod CIDR cannot be used or no address can be handed out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpamError {
    /// Not `A.B.C.D/N`.
    #[error("invalid pod CIDR {0:?}: expected an IPv4 CIDR such as 10.244.0.0/24")]
    Syntax(String),
    /// Fewer than two pod addresses would remain after the network, gateway and broadcast.
    #[error(
        "pod CIDR {0} is too small: a /30 or larger is needed (network, gateway, pods, broadcast)"
    )]
    TooSmall(Cidr),
    /// Every pod address is in use.
    #[error("no free pod IP in {cidr}: all {pods} pod addresses are in use")]
    Exhausted {
        /// The node's pod CIDR.
        cidr: Cidr,
        /// How many pod addresses it has.
        pods: u32,
    },
}

impl FromStr for Cidr {
    type Err = IpamError;

    /// Parses `A.B.C.D/N` (N ≤ 30); host bits after the prefix are cleared, as the API
    /// server's `spec.podCIDR` never has them but a hand-written flag might.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || IpamError::Syntax(s.to_string());
        let (addr, prefix) = s.split_once('/').ok_or_else(syntax)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| syntax())?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32 && !s.contains('+'))
            .ok_or_else(syntax)?;
        let cidr = Cidr {
            network: Ipv4Addr::from(u32::from(addr) & mask(prefix)),
            prefix,
        };
        if prefix > 30 {
            return Err(IpamError::TooSmall(cidr));
        }
        Ok(cidr)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

fn mask(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

impl Cidr {
    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The first host address: the bridge's, and the pods' default gateway.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + 1)
    }

    /// The number of addresses (2^(32 − prefix)).
    fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    /// The number of pod addresses: all but network, gateway and broadcast.
    pub fn pod_addresses(&self) -> u32 {
        u32::try_from(self.size() - 3).unwrap_or(u32::MAX)
    }

    /// Whether `ip` is inside the CIDR.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.prefix) == u32::from(self.network)
    }

    /// Whether the subnet of an address `addr/prefix` lies inside the CIDR (the same subnet or
    /// a narrower one): its route is then as specific as the CIDR's or more, and takes the
    /// pods' traffic. A wider subnet (a host's `10.0.0.0/8`) does not: the CIDR's own route is
    /// the more specific one.
    pub fn covers(&self, addr: Ipv4Addr, prefix: u8) -> bool {
        prefix >= self.prefix && self.contains(addr)
    }
}

/// The pod IPs of one node's CIDR: lowest free first, so a released address is the next one
/// handed out (easy to follow in `kubectl get pods -o wide`).
#[derive(Debug)]
pub struct Ipam {
    cidr: Cidr,
    /// Offsets from the network address of the addresses in use.
    used: BTreeSet<u32>,
    /// Offsets kept for the pods that had them before a restart, by pod (sandbox id): handed
    /// to others only when nothing else is free.
    reserved: BTreeMap<String, u32>,
}

impl Ipam {
    /// An allocator with every pod address free.
    pub fn new(cidr: Cidr) -> Self {
        Ipam {
            cidr,
            used: BTreeSet::new(),
            reserved: BTreeMap::new(),
        }
    }

    /// The CIDR it allocates from.
    pub fn cidr(&self) -> Cidr {
        self.cidr
    }

    /// The offset of the last pod address (the one before the broadcast address).
    fn last(&self) -> u32 {
        u32::try_from(self.cidr.size() - 2).unwrap_or(u32::MAX)
    }

    /// The offset of `ip` when it is a pod address of the CIDR (not the network, gateway or
    /// broadcast address).
    fn pod_offset(&self, ip: Ipv4Addr) -> Option<u32> {
        let offset = u32::from(ip).checked_sub(u32::from(self.cidr.network))?;
        (self.cidr.contains(ip) && (2..=self.last()).contains(&offset)).then_some(offset)
    }

    /// Keeps `ip` for the pod `id` (its address before a restart): [`Ipam::allocate_for`]
    /// gives it to `id`, and to another pod only when no other address is free. An address
    /// that is not a pod address of the CIDR (another CIDR's record) is not kept: `false`.
    pub fn reserve(&mut self, id: &str, ip: Ipv4Addr) -> bool {
        let Some(offset) = self.pod_offset(ip) else {
            return false;
        };
        self.reserved.insert(id.to_string(), offset);
        true
    }

    /// Takes the lowest free pod address (offsets 2 ..= size − 2: after the gateway, before
    /// the broadcast address); see [`Ipam::allocate_for`].
    pub fn allocate(&mut self) -> Result<Ipv4Addr, IpamError> {
        self.allocate_for("")
    }

    /// Takes an address for pod `id`: the one kept for it ([`Ipam::reserve`]) if free, else
    /// the lowest free address kept for no one, else the lowest free address at all (its
    /// reservation is then void).
    pub fn allocate_for(&mut self, id: &str) -> Result<Ipv4Addr, IpamError> {
        let own = self.reserved.remove(id);
        let offset = match own.filter(|o| !self.used.contains(o)) {
            Some(offset) => offset,
            None => {
                let kept: BTreeSet<u32> = self.reserved.values().copied().collect();
                let taken: BTreeSet<u32> = self.used.union(&kept).copied().collect();
                match first_gap(&taken, self.last()).or_else(|| first_gap(&self.used, self.last()))
                {
                    Some(offset) => {
                        self.reserved.retain(|_, o| *o != offset);
                        offset
                    }
                    None => {
                        return Err(IpamError::Exhausted {
                            cidr: self.cidr,
                            pods: self.cidr.pod_addresses(),
                        });
                    }
                }
            }
        };
        self.used.insert(offset);
        Ok(Ipv4Addr::from(u32::from(self.cidr.network) + offset))
    }

    /// Gives `ip` back; releasing an address that is not in use does nothing.
    pub fn release(&mut self, ip: Ipv4Addr) {
        if self.cidr.contains(ip) {
            self.used
                .remove(&(u32::from(ip) - u32::from(self.cidr.network)));
        }
    }

    /// How many pod addresses are in use.
    pub fn in_use(&self) -> usize {
        self.used.len()
    }
}

/// The lowest offset from 2 to `last` not in `taken` (sorted): walking the set is cheap, it
/// never holds more than the pods of one node.
fn first_gap(taken: &BTreeSet<u32>, last: u32) -> Option<u32> {
    let mut candidate = 2;
    for &t in taken.range(2..) {
        if t != candidate {
            break;
        }
        candidate += 1;
    }
    (candidate <= last).then_some(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn pod_cidr_parses_and_its_gateway_is_the_first_host_address() {
        let c = cidr("10.244.3.0/24");
        assert_eq!(c.to_string(), "10.244.3.0/24");
        assert_eq!(c.gateway(), Ipv4Addr::new(10, 244, 3, 1));
        assert_eq!(c.pod_addresses(), 253);
        // Host bits are cleared.
        assert_eq!(
            cidr("10.244.3.77/24").network(),
            Ipv4Addr::new(10, 244, 3, 0)
        );
        for bad in [
            "10.244.0.0",
            "10.244.0.0/33",
            "10.244.0/24",
            "x/24",
            "10.0.0.0/+8",
            "",
        ] {
            assert!(
                matches!(bad.parse::<Cidr>(), Err(IpamError::Syntax(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            "10.0.0.0/31".parse::<Cidr>(),
            Err(IpamError::TooSmall(_))
        ));
        assert!(cidr("0.0.0.0/0").contains(Ipv4Addr::new(1, 2, 3, 4)));
    }

    #[test]
    fn an_address_covers_the_pod_cidr_when_its_subnet_is_as_specific_or_more() {
        let c = cidr("10.244.0.0/24");
        let ip = |d: u8| Ipv4Addr::new(10, 244, 0, d);
        assert!(c.covers(ip(1), 24), "a stale bridge on the same CIDR");
        assert!(c.covers(ip(130), 25), "a narrower subnet inside it");
        assert!(c.covers(ip(9), 32), "a single address inside it");
        assert!(
            !c.covers(ip(1), 16),
            "a wider subnet: the CIDR's route is more specific"
        );
        assert!(!c.covers(Ipv4Addr::new(10, 1, 2, 3), 8));
        assert!(
            !c.covers(Ipv4Addr::new(10, 244, 1, 1), 24),
            "the next node's CIDR"
        );
    }

    #[test]
    fn pod_ips_skip_network_gateway_and_broadcast_and_are_reused_after_release() {
        let mut ipam = Ipam::new(cidr("10.1.0.0/29")); // .0 network, .1 gateway, .7 broadcast
        let ips: Vec<_> = (0..5).map(|_| ipam.allocate().unwrap()).collect();
        let last: Vec<u8> = ips.iter().map(|ip| ip.octets()[3]).collect();
        assert_eq!(last, [2, 3, 4, 5, 6]);
        assert!(matches!(
            ipam.allocate(),
            Err(IpamError::Exhausted { pods: 5, .. })
        ));
        ipam.release(ips[1]);
        ipam.release(Ipv4Addr::new(192, 168, 0, 3)); // outside: ignored
        assert_eq!(ipam.in_use(), 4);
        assert_eq!(ipam.allocate().unwrap(), ips[1]);
    }

    #[test]
    fn a_slash_30_has_one_pod_address() {
        let mut ipam = Ipam::new(cidr("10.9.0.4/30"));
        assert_eq!(ipam.allocate().unwrap(), Ipv4Addr::new(10, 9, 0, 6));
        let err = ipam.allocate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "no free pod IP in 10.9.0.4/30: all 1 pod addresses are in use"
        );
    }

    #[test]
    fn i46_2_a_reserved_address_goes_back_to_its_pod_and_to_others_only_when_nothing_else_is_free()
    {
        let mut ipam = Ipam::new(cidr("10.1.0.0/29")); // pods .2 to .6
        let ip = |d: u8| Ipv4Addr::new(10, 1, 0, d);
        assert!(ipam.reserve("b", ip(3)));
        assert!(ipam.reserve("c", ip(2)));
        assert!(!ipam.reserve("x", ip(1)), "the gateway");
        assert!(!ipam.reserve("x", ip(7)), "the broadcast address");
        assert!(
            !ipam.reserve("x", Ipv4Addr::new(10, 2, 0, 3)),
            "another CIDR"
        );
        assert_eq!(
            ipam.allocate_for("new").unwrap(),
            ip(4),
            "skips the kept ones"
        );
        assert_eq!(ipam.allocate_for("b").unwrap(), ip(3));
        assert_eq!(ipam.allocate_for("new2").unwrap(), ip(5));
        assert_eq!(ipam.allocate_for("new3").unwrap(), ip(6));
        // Nothing else free: c's kept address goes to another pod, and c gets what is free.
        assert_eq!(ipam.allocate_for("new4").unwrap(), ip(2));
        ipam.release(ip(5));
        assert_eq!(ipam.allocate_for("c").unwrap(), ip(5));
        assert!(matches!(
            ipam.allocate_for("d"),
            Err(IpamError::Exhausted { .. })
        ));
    }
}
