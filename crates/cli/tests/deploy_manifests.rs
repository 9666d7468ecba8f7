//! The shipped deployment files trust only the balancer's own addresses (issue 43 finding 4):
//! a trusted proxy's `X-Forwarded-For` names the client that rate limits and shares key on,
//! so trusting a whole pod network would let any pod name any client and rotate past the
//! wrong-token limits. Every `CSG_TRUSTED_PROXIES` value of `deploy/` is read and each
//! entry must be narrow: an address, or a block of at most 256 IPv4 addresses (an IPv6 /120).

use std::net::IpAddr;
use std::path::Path;

/// The files of `deploy/` that set `CSG_TRUSTED_PROXIES`, and how each names it.
const FILES: [&str; 2] = [
    "deploy/kubernetes/statefulset.yaml",
    "deploy/systemd/csg.env.example",
];

/// The values given to `CSG_TRUSTED_PROXIES` in `text`: `NAME=VALUE` lines and Kubernetes
/// `- name: NAME` / `value: "VALUE"` pairs.
fn trusted_proxies(text: &str) -> Vec<String> {
    let mut values = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if let Some(value) = line.strip_prefix("CSG_TRUSTED_PROXIES=") {
            values.push(value.trim_matches('"').to_owned());
        } else if line == "- name: CSG_TRUSTED_PROXIES"
            && let Some(value) = lines.next().and_then(|l| l.strip_prefix("value:"))
        {
            values.push(value.trim().trim_matches('"').to_owned());
        }
    }
    values
}

/// Whether `entry` (an address or a CIDR block) names at most 256 addresses.
fn narrow(entry: &str) -> bool {
    let (address, prefix) = entry.split_once('/').unwrap_or((entry, ""));
    let Ok(address) = address.parse::<IpAddr>() else {
        return false;
    };
    let longest = if address.is_ipv4() { 32 } else { 128 };
    let prefix = if prefix.is_empty() {
        longest
    } else {
        match prefix.parse::<u8>() {
            Ok(prefix) if prefix <= longest => prefix,
            _ => return false,
        }
    };
    longest - prefix <= 8
}

#[test]
fn issue43_the_deployment_files_trust_only_the_balancers_addresses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for file in FILES {
        let text = std::fs::read_to_string(root.join(file)).expect("a deployment file");
        let values = trusted_proxies(&text);
        assert!(!values.is_empty(), "{file} sets CSG_TRUSTED_PROXIES");
        for value in values {
            for entry in value.split(',').map(str::trim) {
                assert!(
                    narrow(entry),
                    "{file} trusts `{entry}`: name the balancer's addresses only (at most a /24)"
                );
            }
        }
    }
}

#[test]
fn the_check_tells_narrow_from_wide() {
    for entry in [
        "10.0.0.5",
        "10.42.255.0/28",
        "192.0.2.0/24",
        "::1",
        "2001:db8::/120",
    ] {
        assert!(narrow(entry), "{entry}");
    }
    for entry in [
        "10.0.0.0/8",
        "0.0.0.0/0",
        "172.16.0.0/12",
        "2001:db8::/64",
        "nonsense",
        "10.0.0.1/33",
    ] {
        assert!(!narrow(entry), "{entry}");
    }
    let yaml = "            - name: CSG_TRUSTED_PROXIES\n              value: \"10.0.0.0/8\"\n";
    assert_eq!(trusted_proxies(yaml), ["10.0.0.0/8"]);
}
