//! rtnetlink replies (src/runtime/netlink.rs): the datagrams the kernel answers a request
//! with, read as `Netlink` reads them (messages, acknowledgements, errors, dumps), then as
//! links, link names and addresses.
//!
//! Differential: replies built here from `linux/netlink.h` and `linux/rtnetlink.h` (headers,
//! 4-byte alignment, nested attributes, late answers to other requests, a dump ending in
//! `NLMSG_DONE` or an error) read back to the model. Arbitrary and mutated datagrams: no panic,
//! and never more links or addresses than messages.

use std::net::Ipv4Addr;

use probelet::runtime::fuzzing::{Link, LinkAddr, read_replies};
use proptest::prelude::*;

use crate::support::{config, mutate, mutation};

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWLINK: u16 = 16;
const RTM_NEWADDR: u16 = 20;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const AF_INET: u8 = 2;
const SEQ: u32 = 7;

fn pad(out: &mut Vec<u8>) {
    out.resize(out.len().div_ceil(4) * 4, 0);
}

/// `struct nlattr` and its value, padded.
fn attr(out: &mut Vec<u8>, ty: u16, value: &[u8]) {
    out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(value);
    pad(out);
}

/// `struct nlmsghdr` and its payload.
fn message(out: &mut Vec<u8>, ty: u16, seq: u32, payload: &[u8]) {
    out.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(&0u16.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(payload);
    pad(out);
}

/// A message of the model.
#[derive(Debug, Clone)]
enum Reply {
    Link {
        index: u32,
        name: String,
        kind: Option<String>,
    },
    Addr {
        index: u32,
        addr: [u8; 4],
        prefix: u8,
        local: bool,
    },
    Late,
}

impl Reply {
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Link { index, name, kind } => {
                let mut p = vec![0, 0, 1, 0]; // family, pad, type
                p.extend_from_slice(&index.to_ne_bytes());
                p.extend_from_slice(&[0; 8]); // flags, change
                let mut name = name.as_bytes().to_vec();
                name.push(0);
                attr(&mut p, IFLA_IFNAME, &name);
                if let Some(kind) = kind {
                    let mut info = Vec::new();
                    attr(&mut info, IFLA_INFO_KIND, kind.as_bytes());
                    attr(&mut p, IFLA_LINKINFO, &info);
                }
                message(out, RTM_NEWLINK, SEQ, &p);
            }
            Reply::Addr {
                index,
                addr,
                prefix,
                local,
            } => {
                let mut p = vec![AF_INET, *prefix, 0, 0];
                p.extend_from_slice(&index.to_ne_bytes());
                attr(&mut p, if *local { IFA_LOCAL } else { IFA_ADDRESS }, addr);
                message(out, RTM_NEWADDR, SEQ, &p);
            }
            Reply::Late => message(out, RTM_NEWLINK, SEQ - 1, &[0; 16]),
        }
    }
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        (
            any::<u32>(),
            "[a-z0-9]{1,15}",
            prop::option::of("[a-z]{1,8}")
        )
            .prop_map(|(index, name, kind)| Reply::Link { index, name, kind }),
        (any::<u32>(), any::<[u8; 4]>(), 0u8..=32, any::<bool>()).prop_map(
            |(index, addr, prefix, local)| Reply::Addr {
                index,
                addr,
                prefix,
                local
            }
        ),
        Just(Reply::Late),
    ]
}

/// The end of the request: an acknowledgement, `NLMSG_DONE`, or an errno.
fn end(out: &mut Vec<u8>, errno: Option<i32>) {
    match errno {
        None => message(out, NLMSG_DONE, SEQ, &0i32.to_ne_bytes()),
        Some(e) => {
            let mut p = e.wrapping_neg().to_ne_bytes().to_vec();
            p.extend_from_slice(&[0; 16]); // the request's header
            message(out, NLMSG_ERROR, SEQ, &p);
        }
    }
}

/// The model's datagrams: the messages split at `cuts` (on message boundaries), then the end.
fn datagrams(replies: &[Reply], cuts: &[usize], errno: Option<i32>) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    for (i, r) in replies.iter().enumerate() {
        if cuts.contains(&i) {
            out.push(Vec::new());
        }
        r.put(out.last_mut().unwrap());
    }
    end(out.last_mut().unwrap(), errno);
    out
}

fn check(datagrams: &[Vec<u8>]) {
    let slices: Vec<&[u8]> = datagrams.iter().map(Vec::as_slice).collect();
    let (_, links, addrs) = read_replies(&slices, SEQ);
    let bytes: usize = datagrams.iter().map(Vec::len).sum();
    assert!((links.len() + addrs.len()) * 16 <= bytes);
}

const TOKENS: &[&[u8]] = &[
    &[0, 0, 0, 0],
    &[0xff, 0xff, 0xff, 0xff],
    &[0, 0, 0, 0x80],
    &[4, 0, 18, 0],
    &[0xff, 0xff, 3, 0],
    &[3, 0, 0, 0],
];

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn netlink_replies_read_back(
        replies in prop::collection::vec(reply(), 0..8),
        cuts in prop::collection::vec(0usize..8, 0..3),
        errno in prop::option::of(1i32..200),
    ) {
        let d = datagrams(&replies, &cuts, errno);
        let slices: Vec<&[u8]> = d.iter().map(Vec::as_slice).collect();
        let (end, links, addrs) = read_replies(&slices, SEQ);
        match (end, errno) {
            (Some(Ok(())), None) => {}
            (Some(Err(e)), Some(errno)) => prop_assert_eq!(e.raw_os_error(), Some(errno)),
            (end, _) => prop_assert!(false, "ended {end:?} for errno {errno:?}"),
        }
        let want_links: Vec<(Link, Option<String>)> = replies.iter().filter_map(|r| match r {
            Reply::Link { index, name, kind } => Some((
                Link { index: *index, kind: kind.clone().unwrap_or_default() },
                Some(name.clone()),
            )),
            _ => None,
        }).collect();
        let want_addrs: Vec<(u32, LinkAddr)> = replies.iter().filter_map(|r| match r {
            Reply::Addr { index, addr, prefix, .. } => {
                Some((*index, LinkAddr { addr: Ipv4Addr::from(*addr), prefix: *prefix }))
            }
            _ => None,
        }).collect();
        prop_assert_eq!(links, want_links);
        prop_assert_eq!(addrs, want_addrs);
    }

    #[test]
    fn netlink_mutated_replies(
        replies in prop::collection::vec(reply(), 0..8),
        errno in prop::option::of(prop_oneof![Just(i32::MIN), any::<i32>()]),
        mutations in prop::collection::vec(mutation(TOKENS), 1..6),
    ) {
        let d = datagrams(&replies, &[], errno.map(|e| e.wrapping_neg()));
        check(&[mutate(&d[0], &mutations)]);
    }

    #[test]
    fn netlink_arbitrary_datagrams(d in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..256), 1..4)) {
        check(&d);
    }
}

/// The kernel sends `-errno` in `NLMSG_ERROR`; a code of `i32::MIN` (no errno) overflowed the
/// negation and panicked before.
#[test]
fn i44_fuzz_netlink_error_code_i32_min_is_an_error_not_a_panic() {
    let mut d = Vec::new();
    let mut p = i32::MIN.to_ne_bytes().to_vec();
    p.extend_from_slice(&[0; 16]);
    message(&mut d, NLMSG_ERROR, SEQ, &p);
    let (end, links, addrs) = read_replies(&[&d], SEQ);
    let e = end.unwrap().unwrap_err();
    assert!(e.to_string().contains("not a negative errno"), "{e}");
    assert!(links.is_empty() && addrs.is_empty());
}
