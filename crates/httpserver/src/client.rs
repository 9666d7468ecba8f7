//! Who the client is, behind load balancers (issue 31 point 7).
//!
//! Without trusted proxies (the default) the client is the TCP peer, as it always was. A
//! balancer in front of several replicas makes every request arrive from the balancer's
//! address, so every client would share one wrong-token bucket and look alike in the logs.
//! The operator names the proxies they run (`--trusted-proxy CIDR`, repeatable) and the
//! client is then read from what those proxies add: the `X-Forwarded-For` header of an HTTP
//! proxy, or the PROXY protocol header (v1 text, v2 binary) a TCP proxy sends before the
//! first byte of HTTP (read in `listener.rs`).
//!
//! # The rule (exactly)
//!
//! The hops of a request are, from the client's side to ours: the `X-Forwarded-For` entries
//! (every instance of the header in order, each a comma-separated list), then the source of
//! the connection's PROXY header (if it had one), then the TCP peer. Starting from the TCP
//! peer and walking leftwards:
//!
//! 1. a hop that is not a trusted proxy is the client; the walk ends (so an untrusted TCP
//!    peer is always the client, whatever it sent);
//! 2. a trusted hop vouches for the hop to its left: the walk goes on;
//! 3. a hop that is not an IP address (`unknown`, an obfuscated name, garbage, a header that
//!    is not text) ends the walk: the client is the last trusted hop seen;
//! 4. when every hop is trusted the client is the leftmost, the last one seen.
//!
//! Why from the right: a client can put anything in `X-Forwarded-For` before the request
//! reaches the first proxy, and each proxy only appends what it saw. The entries left of the
//! first untrusted hop were written by the client itself, so a spoofed left entry never
//! becomes the client: `X-Forwarded-For: 1.2.3.4, <real address>` from a proxy the operator
//! trusts answers `<real address>`. A PROXY header is honoured only from a trusted peer, for
//! the same reason.
//!
//! An entry may carry a port (`203.0.113.7:4711`, `[2001:db8::1]:443`); IPv4-mapped IPv6
//! addresses (`::ffff:10.0.0.1`, what a dual-stack socket reports) count as their IPv4
//! address, for the peer, the entries and the configured blocks alike.
//!
//! The client address keys the wrong-token rate limits and appears in the logs; it never
//! earns a capability (no address does).

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName};
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

/// The header an HTTP proxy appends the address it received a request from to.
const FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The address of the client a request came from, by the rule of this module: the TCP peer
/// unless trusted proxies say otherwise. [`serve_with`](crate::serve_with) puts it in every
/// request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientAddr(pub IpAddr);

/// What a connection brought with it, before any request: its TCP peer and, from a trusted
/// peer that sent a PROXY header with addresses, the source that header named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Connection {
    pub(crate) peer: SocketAddr,
    pub(crate) proxied: Option<IpAddr>,
}

/// The proxies whose word on the client is taken: IP addresses and CIDR blocks. Empty by
/// default, which trusts nobody: the client is always the TCP peer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<IpNet>,
}

/// A trusted-proxy value that is not an address or a block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid trusted proxy {value:?}: {reason}; give an IP address (10.0.0.7, ::1) or a CIDR \
     block (10.0.0.0/8, fd00::/8)"
)]
pub struct InvalidTrustedProxy {
    /// The value as given.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl TrustedProxies {
    /// Trusts nobody (the default).
    pub fn none() -> Self {
        Self::default()
    }

    /// Parses one setting value: an address (a single host, `/32` or `/128`), a CIDR block,
    /// or several of them separated by commas (as an environment variable carries a list).
    /// Host bits of a block are ignored (`10.1.2.3/8` is `10.0.0.0/8`); an IPv4-mapped IPv6
    /// block (`::ffff:10.0.0.0/104`) is its IPv4 block.
    pub fn parse(text: &str) -> Result<Self, InvalidTrustedProxy> {
        let invalid = |value: &str, reason| InvalidTrustedProxy {
            value: value.to_owned(),
            reason,
        };
        if text.trim().is_empty() {
            return Err(invalid(text, "it is empty"));
        }
        let mut nets = Vec::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            nets.push(parse_net(item).map_err(|reason| invalid(item, reason))?);
        }
        Ok(Self { nets })
    }

    /// Every value of a repeatable setting, each parsed by [`TrustedProxies::parse`].
    pub fn from_values<'a>(
        values: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, InvalidTrustedProxy> {
        let mut all = Self::none();
        for value in values {
            all.nets.extend(Self::parse(value)?.nets);
        }
        Ok(all)
    }

    /// Whether no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// Whether `addr` is one of the trusted proxies.
    pub fn trusts(&self, addr: IpAddr) -> bool {
        let addr = addr.to_canonical();
        self.nets.iter().any(|net| net.contains(&addr))
    }

    /// The client of a request by the rule of this module: `peer` the TCP peer, `proxied`
    /// the source its PROXY header named (only ever set for a trusted peer), `headers` the
    /// request's.
    pub fn client(&self, peer: IpAddr, proxied: Option<IpAddr>, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        // The usual case, and every case without trusted proxies: nothing else is looked at.
        if !self.trusts(peer) {
            return peer;
        }
        let mut last_trusted = peer;
        if let Some(source) = proxied {
            let source = source.to_canonical();
            if !self.trusts(source) {
                return source;
            }
            last_trusted = source;
        }
        for value in headers.get_all(FORWARDED_FOR).iter().rev() {
            let Ok(text) = value.to_str() else {
                return last_trusted;
            };
            for hop in text.rsplit(',') {
                let Some(hop) = parse_hop(hop) else {
                    return last_trusted;
                };
                if !self.trusts(hop) {
                    return hop;
                }
                last_trusted = hop;
            }
        }
        last_trusted
    }
}

impl FromStr for TrustedProxies {
    type Err = InvalidTrustedProxy;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl fmt::Display for TrustedProxies {
    /// The blocks, comma-separated, in the form they are matched in (`10.0.0.0/8`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, net) in self.nets.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{net}")?;
        }
        Ok(())
    }
}

/// One address or block, normalised (host bits cleared, IPv4-mapped blocks as IPv4).
fn parse_net(item: &str) -> Result<IpNet, &'static str> {
    let net = match item.parse::<IpAddr>() {
        Ok(addr) => IpNet::from(addr),
        Err(_) => {
            let (addr, prefix) = item
                .split_once('/')
                .ok_or("it is neither an IP address nor a CIDR block")?;
            let addr = addr
                .parse::<IpAddr>()
                .map_err(|_| "the part before `/` is not an IP address")?;
            let prefix = prefix
                .parse::<u8>()
                .map_err(|_| "the prefix length after `/` is not a number")?;
            IpNet::new(addr, prefix)
                .map_err(|_| "the prefix length is too long (at most 32 for IPv4, 128 for IPv6)")?
        }
    };
    Ok(unmap(net).trunc())
}

/// An IPv4-mapped IPv6 block as the IPv4 block it covers: addresses are matched in their
/// canonical form, so the mapped block would never match.
fn unmap(net: IpNet) -> IpNet {
    if let IpNet::V6(v6) = net
        && let Some(v4) = v6.addr().to_ipv4_mapped()
        && v6.prefix_len() >= 96
        && let Ok(mapped) = IpNet::new(IpAddr::V4(v4), v6.prefix_len() - 96)
    {
        return mapped;
    }
    net
}

/// One `X-Forwarded-For` entry: an address, optionally with a port (`1.2.3.4:80`,
/// `[::1]:80`) or in brackets (`[::1]`); `None` for anything else.
fn parse_hop(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    if let Ok(addr) = text.parse::<IpAddr>() {
        return Some(addr.to_canonical());
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(addr.ip().to_canonical());
    }
    let bracketed = text.strip_prefix('[')?.strip_suffix(']')?;
    bracketed
        .parse::<Ipv6Addr>()
        .ok()
        .map(|a| IpAddr::V6(a).to_canonical())
}

/// The PROXY protocol v1 signature: the header is text, `PROXY TCP4 <src> <dst> <sport>
/// <dport>\r\n` and at most 107 bytes.
const V1_SIGNATURE: &[u8] = b"PROXY ";
/// The longest v1 header, `\r\n` included.
const V1_MAX: usize = 107;
/// The PROXY protocol v2 signature, the first 12 of its 16 fixed bytes.
const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";
/// Bytes of a v2 header after its fixed 16 at most: the addresses (36 for TCP over IPv6) and
/// room for the TLVs balancers add (cloud endpoint ids, TLS facts). The protocol allows up to
/// 65,535; a larger one from a proxy closes the connection rather than buffer that much.
const V2_MAX_BODY: usize = 4096;
/// Bytes a connection's prelude may take before its PROXY header must be complete.
pub(crate) const PRELUDE_MAX: usize = 16 + V2_MAX_BODY;

/// What the first bytes of a connection from a trusted peer are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prelude {
    /// Not a PROXY header: HTTP, served as it came.
    Plain,
    /// Too few bytes to tell yet.
    More,
    /// A PROXY header of `len` bytes; `source` is the client's address it names (`None` for
    /// a LOCAL command, `UNKNOWN`, or an address family without one: the peer then stands).
    Header { len: usize, source: Option<IpAddr> },
    /// A PROXY header that cannot be read: the connection is closed.
    Invalid(&'static str),
}

/// A whole PROXY protocol v1 line, `\r\n` included.
fn v1(line: &[u8]) -> Prelude {
    match ppp::v1::Header::try_from(line) {
        Ok(header) if header.header.len() == line.len() => Prelude::Header {
            len: line.len(),
            source: match header.addresses {
                ppp::v1::Addresses::Tcp4(a) => Some(IpAddr::V4(a.source_address)),
                ppp::v1::Addresses::Tcp6(a) => Some(IpAddr::V6(a.source_address)),
                ppp::v1::Addresses::Unknown => None,
            },
        },
        _ => Prelude::Invalid("a malformed PROXY protocol v1 header"),
    }
}

/// Whether `bytes` starts with `signature`: `Some(true)` yes, `Some(false)` no, `None` too
/// few bytes to tell.
fn starts_with(bytes: &[u8], signature: &[u8]) -> Option<bool> {
    let common = bytes.len().min(signature.len());
    if bytes[..common] != signature[..common] {
        Some(false)
    } else if common < signature.len() {
        None
    } else {
        Some(true)
    }
}

/// Reads the PROXY header (v1 or v2) at the start of `bytes`, if there is one (parsed with
/// the `ppp` crate; the signatures and bounds are checked here).
pub(crate) fn prelude(bytes: &[u8]) -> Prelude {
    use ppp::PartialResult;
    match (
        starts_with(bytes, V1_SIGNATURE),
        starts_with(bytes, V2_SIGNATURE),
    ) {
        (Some(false), Some(false)) => Prelude::Plain,
        (Some(true), _) => {
            // The line is parsed once whole: a header cut between two reads may end at a
            // separator, which a parser of partial input takes for an empty field.
            let Some(end) = bytes.iter().take(V1_MAX).position(|&b| b == b'\n') else {
                return if bytes.len() >= V1_MAX {
                    Prelude::Invalid("a PROXY protocol v1 header longer than 107 bytes")
                } else {
                    Prelude::More
                };
            };
            v1(&bytes[..=end])
        }
        (_, Some(true)) => {
            if bytes.len() >= 16
                && usize::from(u16::from_be_bytes([bytes[14], bytes[15]])) > V2_MAX_BODY
            {
                return Prelude::Invalid("a PROXY protocol v2 header longer than 4 KiB");
            }
            match ppp::v2::Header::try_from(bytes) {
                Ok(header) => Prelude::Header {
                    len: header.len(),
                    source: match (header.command, header.protocol, header.addresses) {
                        (ppp::v2::Command::Local, _, _) => None,
                        (_, ppp::v2::Protocol::Stream, ppp::v2::Addresses::IPv4(a)) => {
                            Some(IpAddr::V4(a.source_address))
                        }
                        (_, ppp::v2::Protocol::Stream, ppp::v2::Addresses::IPv6(a)) => {
                            Some(IpAddr::V6(a.source_address))
                        }
                        _ => None,
                    },
                },
                Err(error) if error.is_incomplete() => Prelude::More,
                Err(_) => Prelude::Invalid("a malformed PROXY protocol v2 header"),
            }
        }
        _ => Prelude::More,
    }
}

/// The middleware [`serve_with`](crate::serve_with) puts in front of the app: the request's
/// [`ClientAddr`], and the peer as axum's `ConnectInfo<SocketAddr>`.
pub(crate) async fn mark(
    State(trusted): State<Arc<TrustedProxies>>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(ConnectInfo(connection)) = request
        .extensions()
        .get::<ConnectInfo<Connection>>()
        .copied()
    {
        let client = trusted.client(connection.peer.ip(), connection.proxied, request.headers());
        let extensions = request.extensions_mut();
        extensions.insert(ClientAddr(client));
        extensions.insert(ConnectInfo(connection.peer));
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(FORWARDED_FOR, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn values_parse_into_blocks() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        assert!(trusted.trusts(ip("10.200.3.4")) && !trusted.trusts(ip("11.0.0.1")));
        let host = TrustedProxies::parse(" 192.0.2.7 ").unwrap();
        assert_eq!(host.to_string(), "192.0.2.7/32");
        assert_eq!(TrustedProxies::parse("::1").unwrap().to_string(), "::1/128");
        assert_eq!(
            TrustedProxies::parse("10.1.2.3/8, fd00::1/8")
                .unwrap()
                .to_string(),
            "10.0.0.0/8,fd00::/8",
            "host bits cleared, lists split"
        );
        assert_eq!(
            TrustedProxies::parse("::ffff:10.0.0.0/104")
                .unwrap()
                .to_string(),
            "10.0.0.0/8",
            "mapped blocks are IPv4 blocks"
        );
        assert!(
            TrustedProxies::parse("10.0.0.0/8")
                .unwrap()
                .trusts(ip("::ffff:10.1.1.1")),
            "a mapped peer is its IPv4 address"
        );
        let all = TrustedProxies::from_values(["10.0.0.0/8", "::1,127.0.0.1"]).unwrap();
        assert_eq!(all.to_string(), "10.0.0.0/8,::1/128,127.0.0.1/32");
        assert!(TrustedProxies::none().is_empty());
        for (bad, says) in [
            ("", "it is empty"),
            ("10.0.0.0/33", "prefix length is too long"),
            ("10.0.0/8", "before `/`"),
            ("10.0.0.0/x", "not a number"),
            ("proxy.example", "neither an IP address"),
            ("10.0.0.0/8,nonsense", "neither an IP address"),
        ] {
            let error = TrustedProxies::parse(bad).unwrap_err();
            let text = error.to_string();
            assert!(text.contains(says), "{bad}: {text}");
            assert!(text.contains("CIDR block"), "says what to give: {text}");
        }
        assert_eq!(
            TrustedProxies::parse("10.0.0.0/8,nonsense")
                .unwrap_err()
                .value,
            "nonsense",
            "names the bad value"
        );
    }

    #[test]
    fn without_trust_the_peer_is_the_client() {
        let none = TrustedProxies::none();
        let headers = forwarded(&["203.0.113.9"]);
        assert_eq!(none.client(ip("10.0.0.1"), None, &headers), ip("10.0.0.1"));
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        assert_eq!(
            trusted.client(ip("192.0.2.1"), None, &headers),
            ip("192.0.2.1"),
            "an untrusted peer's header is ignored"
        );
        assert_eq!(
            none.client(ip("::ffff:192.0.2.1"), None, &headers),
            ip("192.0.2.1")
        );
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let peer = ip("10.0.0.1");
        let client = |values: &[&str]| trusted.client(peer, None, &forwarded(values));
        assert_eq!(client(&["203.0.113.9"]), ip("203.0.113.9"));
        assert_eq!(
            client(&["198.51.100.1, 203.0.113.9"]),
            ip("203.0.113.9"),
            "a spoofed left entry does not help"
        );
        assert_eq!(
            client(&["198.51.100.1, 203.0.113.9, 10.1.1.1"]),
            ip("203.0.113.9"),
            "trusted hops are skipped"
        );
        assert_eq!(
            client(&["198.51.100.1", "203.0.113.9, 10.1.1.1"]),
            ip("203.0.113.9"),
            "header instances in order"
        );
        assert_eq!(
            client(&["10.3.3.3, 10.1.1.1"]),
            ip("10.3.3.3"),
            "all trusted"
        );
        assert_eq!(client(&[]), peer, "no header: the peer");
        assert_eq!(
            client(&["203.0.113.9, unknown, 10.1.1.1"]),
            ip("10.1.1.1"),
            "an unparsable hop stops at the last trusted one"
        );
        assert_eq!(client(&["203.0.113.9, garbage"]), peer);
        assert_eq!(client(&["203.0.113.9, "]), peer, "an empty entry stops too");
        assert_eq!(
            client(&["[2001:db8::7]:443"]),
            ip("2001:db8::7"),
            "ports and brackets"
        );
        assert_eq!(client(&["203.0.113.9:4711"]), ip("203.0.113.9"));
        assert_eq!(client(&["[2001:db8::8]"]), ip("2001:db8::8"));
        assert_eq!(client(&["::ffff:203.0.113.9"]), ip("203.0.113.9"));
        let mut headers = HeaderMap::new();
        headers.append(
            FORWARDED_FOR,
            HeaderValue::from_bytes(b"203.0.113.9, \xff").unwrap(),
        );
        assert_eq!(trusted.client(peer, None, &headers), peer, "not text");
    }

    /// A v2 header: `command` 0x20 LOCAL or 0x21 PROXY, `family` 0x11 TCP4 or 0x21 TCP6.
    fn v2(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
        let mut header = V2_SIGNATURE.to_vec();
        header.push(command);
        header.push(family);
        header.extend_from_slice(&u16::try_from(addresses.len()).unwrap().to_be_bytes());
        header.extend_from_slice(addresses);
        header
    }

    #[test]
    fn proxy_headers_are_read_and_bounded() {
        let request = b"GET / HTTP/1.1\r\n\r\n";
        assert_eq!(prelude(request), Prelude::Plain);
        assert_eq!(prelude(b"POST"), Prelude::Plain);
        assert_eq!(prelude(b""), Prelude::More);
        assert_eq!(prelude(b"PRO"), Prelude::More);
        assert_eq!(prelude(b"\r\n\r\n\0"), Prelude::More);
        assert_eq!(prelude(b"\r\n\r\nX"), Prelude::Plain);

        let v1 = b"PROXY TCP4 203.0.113.5 10.0.0.1 40000 80\r\n";
        let mut with_request = v1.to_vec();
        with_request.extend_from_slice(request);
        assert_eq!(
            prelude(&with_request),
            Prelude::Header {
                len: v1.len(),
                source: Some(ip("203.0.113.5"))
            }
        );
        for cut in 1..v1.len() {
            assert_eq!(prelude(&v1[..cut]), Prelude::More, "{cut} bytes");
        }
        assert_eq!(
            prelude(b"PROXY TCP6 2001:db8::5 2001:db8::1 40000 80\r\n"),
            Prelude::Header {
                len: 45,
                source: Some(ip("2001:db8::5"))
            }
        );
        assert_eq!(
            prelude(b"PROXY UNKNOWN\r\n"),
            Prelude::Header {
                len: 15,
                source: None
            }
        );
        assert!(matches!(
            prelude(b"PROXY TCP4 nonsense 10.0.0.1 1 2\r\n"),
            Prelude::Invalid(_)
        ));
        let mut long = b"PROXY TCP4 ".to_vec();
        long.resize(120, b'1');
        assert!(
            matches!(prelude(&long), Prelude::Invalid(_)),
            "over 107 bytes"
        );

        let tcp4 = v2(
            0x21,
            0x11,
            &[203, 0, 113, 6, 10, 0, 0, 1, 0x9c, 0x40, 0, 80],
        );
        let mut with_request = tcp4.clone();
        with_request.extend_from_slice(request);
        assert_eq!(
            prelude(&with_request),
            Prelude::Header {
                len: 28,
                source: Some(ip("203.0.113.6"))
            }
        );
        for cut in 1..tcp4.len() {
            assert_eq!(prelude(&tcp4[..cut]), Prelude::More, "{cut} bytes");
        }
        let mut six = Vec::new();
        six.extend_from_slice(&ip6("2001:db8::6"));
        six.extend_from_slice(&ip6("2001:db8::1"));
        six.extend_from_slice(&[0x9c, 0x40, 0, 80]);
        assert_eq!(
            prelude(&v2(0x21, 0x21, &six)),
            Prelude::Header {
                len: 52,
                source: Some(ip("2001:db8::6"))
            }
        );
        assert_eq!(
            prelude(&v2(0x20, 0x00, &[])),
            Prelude::Header {
                len: 16,
                source: None
            },
            "LOCAL: the peer stands"
        );
        let mut huge = v2(0x21, 0x11, &[]);
        huge[14..16].copy_from_slice(&5000u16.to_be_bytes());
        assert!(matches!(prelude(&huge), Prelude::Invalid(_)), "capped");
        assert!(
            matches!(prelude(&v2(0x25, 0x11, &[0; 12])), Prelude::Invalid(_)),
            "unknown command"
        );
    }

    fn ip6(text: &str) -> [u8; 16] {
        text.parse::<Ipv6Addr>().unwrap().octets()
    }

    #[test]
    fn a_proxy_header_source_is_a_hop() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let peer = ip("10.0.0.1");
        let headers = forwarded(&["198.51.100.1"]);
        assert_eq!(
            trusted.client(peer, Some(ip("203.0.113.5")), &headers),
            ip("203.0.113.5"),
            "an untrusted PROXY source is the client; the header behind it is its own"
        );
        assert_eq!(
            trusted.client(peer, Some(ip("10.9.9.9")), &headers),
            ip("198.51.100.1"),
            "a trusted PROXY source vouches for its header"
        );
        assert_eq!(
            trusted.client(peer, Some(ip("10.9.9.9")), &HeaderMap::new()),
            ip("10.9.9.9")
        );
    }
}
