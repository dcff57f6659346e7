//! A minimal rtnetlink client: the handful of requests the pod network needs (create a bridge
//! or a veth pair, set a link up or under a master, add an IPv4 address or a route,
//! delete a link, look links and addresses up), encoded by hand over a `NETLINK_ROUTE` socket.
//!
//! Why not the `rtnetlink` crate: it is asynchronous (so a `Drop` could not clean up with it),
//! brings `nix`, `futures` and four `netlink-*` crates, and these requests are a few hundred
//! bytes of a stable kernel ABI (`linux/rtnetlink.h`, `linux/if_link.h`). Shelling out to `ip`
//! would make every pod start depend on iproute2's output format.
//!
//! A socket talks to the network namespace it was created in, whichever thread uses it later:
//! that is how the sandbox side is configured (see [`super::netns`]).

use rustix::fd::{AsFd, OwnedFd};
use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::BorrowedFd;

// linux/netlink.h
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
/// The two top bits of an attribute type are flags (nested, network byte order).
const NLA_TYPE_MASK: u16 = 0x3fff;
// linux/rtnetlink.h
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_GETLINK: u16 = 18;
const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
const RTM_NEWROUTE: u16 = 24;
const RT_TABLE_MAIN: u8 = 254;
const RTPROT_BOOT: u8 = 3;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RTN_UNICAST: u8 = 1;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
// linux/if_link.h, linux/if_addr.h, linux/veth.h
const IFLA_IFNAME: u16 = 3;
const IFLA_MASTER: u16 = 10;
const IFLA_LINKINFO: u16 = 18;
const IFLA_NET_NS_FD: u16 = 28;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const VETH_INFO_PEER: u16 = 1;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const AF_UNSPEC: u8 = 0;
const AF_INET: u8 = 2;
const IFF_UP: u32 = 0x1;

/// The largest reply datagram read at once (a dump of a few links fits many times over).
const RECV_BUF: usize = 64 * 1024;

/// An IPv4 address on a link, as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkAddr {
    /// The address.
    pub addr: Ipv4Addr,
    /// Its prefix length.
    pub prefix: u8,
}

/// A link found by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Its interface index.
    pub index: u32,
    /// `IFLA_INFO_KIND` (`bridge`, `veth`, ...), empty for a link without one (`lo`).
    pub kind: String,
}

/// A `NETLINK_ROUTE` socket bound to the network namespace it was opened in.
#[derive(Debug)]
pub struct Netlink {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl Netlink {
    /// Opens a socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Netlink> {
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            // NETLINK_ROUTE is protocol 0, the family's default.
            None,
        )?;
        rustix::net::bind(&fd, &SocketAddrNetlink::new(0, 0))?;
        Ok(Netlink {
            fd,
            seq: 0,
            buf: vec![0; RECV_BUF],
        })
    }

    /// Looks a link up by name; `None` when there is none.
    pub fn link(&mut self, name: &str) -> io::Result<Option<Link>> {
        let mut m = Msg::new(RTM_GETLINK, 0);
        m.ifinfo(0, 0, 0);
        m.attr_str(IFLA_IFNAME, name);
        match self.call(m) {
            Ok(replies) => Ok(replies
                .iter()
                .find(|(ty, _)| *ty == RTM_NEWLINK)
                .and_then(|(_, p)| parse_link(p))),
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates a bridge named `name` (fails with `EEXIST` when a link has that name).
    pub fn add_bridge(&mut self, name: &str) -> io::Result<()> {
        let mut m = Msg::new(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
        m.ifinfo(0, 0, 0);
        m.attr_str(IFLA_IFNAME, name);
        let info = m.begin(IFLA_LINKINFO);
        m.attr(IFLA_INFO_KIND, b"bridge");
        m.end(info);
        self.call(m).map(drop)
    }

    /// Creates a veth pair: `host` here, and its peer `peer` directly inside the network
    /// namespace `netns` (an open nsfs file).
    pub fn add_veth(&mut self, host: &str, peer: &str, netns: BorrowedFd<'_>) -> io::Result<()> {
        let mut m = Msg::new(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
        m.ifinfo(0, 0, 0);
        m.attr_str(IFLA_IFNAME, host);
        let info = m.begin(IFLA_LINKINFO);
        m.attr(IFLA_INFO_KIND, b"veth");
        let data = m.begin(IFLA_INFO_DATA);
        let p = m.begin(VETH_INFO_PEER);
        // The peer's attributes follow its own ifinfomsg header.
        m.ifinfo(0, 0, 0);
        m.attr_str(IFLA_IFNAME, peer);
        let fd = u32::try_from(rustix::fd::AsRawFd::as_raw_fd(&netns))
            .map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        m.attr(IFLA_NET_NS_FD, &fd.to_ne_bytes());
        m.end(p);
        m.end(data);
        m.end(info);
        self.call(m).map(drop)
    }

    /// Sets link `index` up, and under `master` when given.
    pub fn set_up(&mut self, index: u32, master: Option<u32>) -> io::Result<()> {
        let mut m = Msg::new(RTM_NEWLINK, 0);
        m.ifinfo(index, IFF_UP, IFF_UP);
        if let Some(master) = master {
            m.attr(IFLA_MASTER, &master.to_ne_bytes());
        }
        self.call(m).map(drop)
    }

    /// Deletes the link named `name`; `Ok(false)` when there was none.
    pub fn delete_link(&mut self, name: &str) -> io::Result<bool> {
        let mut m = Msg::new(RTM_DELLINK, 0);
        m.ifinfo(0, 0, 0);
        m.attr_str(IFLA_IFNAME, name);
        match self.call(m) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Adds `addr/prefix` to link `index`.
    pub fn add_addr(&mut self, index: u32, addr: LinkAddr) -> io::Result<()> {
        let mut m = Msg::new(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
        m.push(&[AF_INET, addr.prefix, 0, RT_SCOPE_UNIVERSE]);
        m.push(&index.to_ne_bytes());
        m.attr(IFA_LOCAL, &addr.addr.octets());
        m.attr(IFA_ADDRESS, &addr.addr.octets());
        self.call(m).map(drop)
    }

    /// The IPv4 addresses on link `index`.
    pub fn addrs(&mut self, index: u32) -> io::Result<Vec<LinkAddr>> {
        Ok(self
            .all_addrs()?
            .into_iter()
            .filter(|(i, _)| *i == index)
            .map(|(_, a)| a)
            .collect())
    }

    /// Every IPv4 address of the namespace, with the index of the link that holds it.
    pub fn all_addrs(&mut self) -> io::Result<Vec<(u32, LinkAddr)>> {
        let mut m = Msg::new(RTM_GETADDR, NLM_F_DUMP);
        m.push(&[AF_INET, 0, 0, 0]);
        m.push(&0u32.to_ne_bytes());
        let replies = self.call(m)?;
        Ok(replies
            .iter()
            .filter(|(ty, _)| *ty == RTM_NEWADDR)
            .filter_map(|(_, p)| parse_addr(p))
            .collect())
    }

    /// The name of link `index`; `None` when there is none.
    pub fn link_name(&mut self, index: u32) -> io::Result<Option<String>> {
        let mut m = Msg::new(RTM_GETLINK, 0);
        m.ifinfo(index, 0, 0);
        match self.call(m) {
            Ok(replies) => Ok(replies
                .iter()
                .find(|(ty, _)| *ty == RTM_NEWLINK)
                .and_then(|(_, p)| link_name(p))),
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Adds a default route via `gateway` out of link `index`.
    pub fn add_default_route(&mut self, index: u32, gateway: Ipv4Addr) -> io::Result<()> {
        self.add_route(
            LinkAddr {
                addr: Ipv4Addr::UNSPECIFIED,
                prefix: 0,
            },
            index,
            gateway,
        )
    }

    /// Adds a route to `dst` (prefix 0: the default route) via `gateway` out of link `index`.
    pub fn add_route(&mut self, dst: LinkAddr, index: u32, gateway: Ipv4Addr) -> io::Result<()> {
        let mut m = Msg::new(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
        // family, dst_len, src_len, tos, table, protocol, scope, type; flags.
        m.push(&[
            AF_INET,
            dst.prefix,
            0,
            0,
            RT_TABLE_MAIN,
            RTPROT_BOOT,
            RT_SCOPE_UNIVERSE,
            RTN_UNICAST,
        ]);
        m.push(&0u32.to_ne_bytes());
        if dst.prefix > 0 {
            m.attr(RTA_DST, &dst.addr.octets());
        }
        m.attr(RTA_GATEWAY, &gateway.octets());
        m.attr(RTA_OIF, &index.to_ne_bytes());
        self.call(m).map(drop)
    }

    /// Sends one request (with an acknowledgement asked for) and collects the replies
    /// (type, payload) until the acknowledgement or the end of a dump. A kernel error is the
    /// OS error it names.
    fn call(&mut self, msg: Msg) -> io::Result<Vec<(u16, Vec<u8>)>> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let bytes = msg.finish(seq);
        rustix::net::sendto(
            &self.fd,
            &bytes,
            SendFlags::empty(),
            &SocketAddrNetlink::new(0, 0),
        )?;
        let mut replies = Vec::new();
        loop {
            let (n, _) = rustix::net::recv(self.fd.as_fd(), &mut self.buf[..], RecvFlags::empty())?;
            if let Some(end) = absorb(&self.buf[..n.min(self.buf.len())], seq, &mut replies) {
                return end.map(|()| replies);
            }
        }
    }
}

/// Reads one reply datagram to request `seq`: its messages go to `replies` (type, payload);
/// `Some` once the request is answered (the acknowledgement, the end of a dump, or a kernel
/// error: the OS error it names). Messages of other requests (late answers) are skipped.
fn absorb(datagram: &[u8], seq: u32, replies: &mut Vec<(u16, Vec<u8>)>) -> Option<io::Result<()>> {
    for reply in Replies::new(datagram) {
        let (ty, rseq, payload) = match reply {
            Ok(reply) => reply,
            Err(e) => return Some(Err(e)),
        };
        if rseq != seq {
            continue; // a late answer to an earlier request
        }
        match ty {
            NLMSG_ERROR => {
                let Some(code) = payload.get(..4) else {
                    return Some(Err(truncated("error message")));
                };
                let code = i32::from_ne_bytes([code[0], code[1], code[2], code[3]]);
                return Some(match code {
                    0 => Ok(()),
                    // The kernel sends `-errno`; anything else is not an errno.
                    ..0 if code > i32::MIN => Err(io::Error::from_raw_os_error(-code)),
                    _ => Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("netlink: error code {code} is not a negative errno"),
                    )),
                });
            }
            NLMSG_DONE => return Some(Ok(())),
            _ => replies.push((ty, payload.to_vec())),
        }
    }
    None
}

/// What the reply datagrams `datagrams` to request `seq` say, read as [`Netlink`] reads them:
/// how the request ended (`None`: more datagrams were needed), and every message read as a
/// link ([`Netlink::link`]), a link name ([`Netlink::link_name`]) and an address
/// ([`Netlink::all_addrs`]). The fuzz tests' entry point (tests/fuzz).
#[doc(hidden)]
pub fn read_replies(datagrams: &[&[u8]], seq: u32) -> ReadReplies {
    let mut replies = Vec::new();
    let end = datagrams.iter().find_map(|d| absorb(d, seq, &mut replies));
    let links = replies
        .iter()
        .filter(|(ty, _)| *ty == RTM_NEWLINK)
        .filter_map(|(_, p)| Some((parse_link(p)?, link_name(p))))
        .collect();
    let addrs = replies
        .iter()
        .filter(|(ty, _)| *ty == RTM_NEWADDR)
        .filter_map(|(_, p)| parse_addr(p))
        .collect();
    (end, links, addrs)
}

/// [`read_replies`]'s answer: the end, the links with their names, the addresses.
#[doc(hidden)]
pub type ReadReplies = (
    Option<io::Result<()>>,
    Vec<(Link, Option<String>)>,
    Vec<(u32, LinkAddr)>,
);

fn truncated(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("netlink: truncated {what}"),
    )
}

/// A request being encoded: `nlmsghdr`, a fixed family header, then attributes (4-aligned).
#[derive(Debug)]
struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    fn new(ty: u16, flags: u16) -> Msg {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&(flags | NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // sequence, set by finish
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel
        Msg { buf }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.align();
    }

    /// `struct ifinfomsg` for `index` (0: by name or new), with `flags` under the `change` mask.
    fn ifinfo(&mut self, index: u32, flags: u32, change: u32) {
        self.push(&[AF_UNSPEC, 0, 0, 0]); // family, pad, type (u16)
        self.push(&index.to_ne_bytes());
        self.push(&flags.to_ne_bytes());
        self.push(&change.to_ne_bytes());
    }

    fn attr(&mut self, ty: u16, data: &[u8]) {
        let len = u16::try_from(4 + data.len()).unwrap_or(u16::MAX);
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.align();
    }

    fn attr_str(&mut self, ty: u16, s: &str) {
        let mut data = s.as_bytes().to_vec();
        data.push(0);
        self.attr(ty, &data);
    }

    /// Opens a nested attribute; returns where its header is, for [`Msg::end`].
    fn begin(&mut self, ty: u16) -> usize {
        let at = self.buf.len();
        self.attr(ty, &[]);
        at
    }

    fn end(&mut self, at: usize) {
        let len = u16::try_from(self.buf.len() - at).unwrap_or(u16::MAX);
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }

    fn align(&mut self) {
        self.buf.resize(align4(self.buf.len()), 0);
    }

    fn finish(mut self, seq: u32) -> Vec<u8> {
        let len = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf[8..12].copy_from_slice(&seq.to_ne_bytes());
        self.buf
    }
}

/// The messages of one reply datagram: (type, sequence, payload after the `nlmsghdr`).
struct Replies<'a> {
    rest: &'a [u8],
}

impl<'a> Replies<'a> {
    fn new(datagram: &'a [u8]) -> Self {
        Replies { rest: datagram }
    }
}

impl<'a> Iterator for Replies<'a> {
    type Item = io::Result<(u16, u32, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let header = self.rest.get(..16);
        let len = header.map(|h| u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize);
        let Some((h, len)) = header
            .zip(len)
            .filter(|(_, l)| *l >= 16 && *l <= self.rest.len())
        else {
            self.rest = &[];
            return Some(Err(truncated("reply")));
        };
        let ty = u16::from_ne_bytes([h[4], h[5]]);
        let seq = u32::from_ne_bytes([h[8], h[9], h[10], h[11]]);
        let payload = &self.rest[16..len];
        self.rest = self.rest.get(align4(len)..).unwrap_or(&[]);
        Some(Ok((ty, seq, payload)))
    }
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The attributes in `data`: (type without its flag bits, value). Stops at a malformed one.
fn attrs(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let h = data.get(..4)?;
        let len = usize::from(u16::from_ne_bytes([h[0], h[1]]));
        let ty = u16::from_ne_bytes([h[2], h[3]]) & NLA_TYPE_MASK;
        let value = data.get(4..len.max(4))?;
        data = data.get(align4(len.max(4))..).unwrap_or(&[]);
        Some((ty, value))
    })
}

/// An `RTM_NEWLINK` payload: `ifinfomsg` (16 bytes) then attributes.
fn parse_link(payload: &[u8]) -> Option<Link> {
    let h = payload.get(..16)?;
    let index = u32::from_ne_bytes([h[4], h[5], h[6], h[7]]);
    let kind = attrs(&payload[16..])
        .find(|(ty, _)| *ty == IFLA_LINKINFO)
        .and_then(|(_, info)| attrs(info).find(|(ty, _)| *ty == IFLA_INFO_KIND))
        .map(|(_, k)| cstr(k))
        .unwrap_or_default();
    Some(Link { index, kind })
}

/// An `RTM_NEWADDR` payload: `ifaddrmsg` (8 bytes) then attributes; (link index, address).
fn parse_addr(payload: &[u8]) -> Option<(u32, LinkAddr)> {
    let h = payload.get(..8)?;
    if h[0] != AF_INET {
        return None;
    }
    let index = u32::from_ne_bytes([h[4], h[5], h[6], h[7]]);
    let addr = attrs(&payload[8..])
        .find(|(ty, _)| *ty == IFA_LOCAL)
        .or_else(|| attrs(&payload[8..]).find(|(ty, _)| *ty == IFA_ADDRESS))
        .and_then(|(_, v)| <[u8; 4]>::try_from(v).ok())?;
    Some((
        index,
        LinkAddr {
            addr: Ipv4Addr::from(addr),
            prefix: h[1],
        },
    ))
}

/// The `IFLA_IFNAME` of an `RTM_NEWLINK` payload.
fn link_name(payload: &[u8]) -> Option<String> {
    attrs(payload.get(16..)?)
        .find(|(ty, _)| *ty == IFLA_IFNAME)
        .map(|(_, name)| cstr(name))
}

fn cstr(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_attributes_carry_their_full_length_and_are_aligned() {
        let mut m = Msg::new(RTM_NEWLINK, NLM_F_CREATE);
        m.ifinfo(0, 0, 0);
        m.attr_str(IFLA_IFNAME, "br0"); // 4 + 4 bytes
        let info = m.begin(IFLA_LINKINFO);
        m.attr(IFLA_INFO_KIND, b"bridge"); // 4 + 6, padded to 12
        m.end(info);
        let bytes = m.finish(7);
        assert_eq!(bytes.len(), 16 + 16 + 8 + 4 + 12);
        assert_eq!(u32::from_ne_bytes(bytes[0..4].try_into().unwrap()), 56);
        assert_eq!(u32::from_ne_bytes(bytes[8..12].try_into().unwrap()), 7);
        let attrs: Vec<_> = attrs(&bytes[32..]).collect();
        assert_eq!(attrs[0], (IFLA_IFNAME, &b"br0\0"[..]));
        assert_eq!(attrs[1].0, IFLA_LINKINFO);
        assert_eq!(
            attrs[1].1.len(),
            12,
            "the nest's length covers its padded child"
        );
        let link = {
            let mut payload = vec![0u8; 16];
            payload[4..8].copy_from_slice(&5u32.to_ne_bytes());
            payload.extend_from_slice(&bytes[32..]);
            parse_link(&payload).unwrap()
        };
        assert_eq!(
            link,
            Link {
                index: 5,
                kind: "bridge".into()
            }
        );
    }

    #[test]
    fn malformed_replies_end_the_parse_without_panicking() {
        // A length shorter than the header, then one longer than the datagram.
        let mut bad = 8u32.to_ne_bytes().to_vec();
        bad.extend_from_slice(&[0; 12]);
        assert!(Replies::new(&bad).next().unwrap().is_err());
        let mut long = 400u32.to_ne_bytes().to_vec();
        long.extend_from_slice(&[0; 12]);
        assert!(Replies::new(&long).next().unwrap().is_err());
        // An attribute whose length runs past the data.
        assert_eq!(attrs(&[40, 0, 1, 0, 1, 2]).count(), 0);
        assert!(parse_link(&[0; 3]).is_none());
        assert!(parse_addr(&[AF_INET, 24, 0, 0]).is_none());
    }
}
