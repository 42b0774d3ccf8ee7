//! Which addresses a fetch may not reach without `--allow-private-network`: the host's own
//! (loopback, unspecified), its networks' (private, unique local, link-local, shared address
//! space), the clouds' metadata services, and what is not a unicast destination at all. An
//! IPv6 address that carries an IPv4 one (mapped, compatible, NAT64, 6to4) is judged as that
//! IPv4 address, so no spelling of a refused address passes as another.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `address` is refused, as the kind of address it is; `None` when it is public.
pub fn refused(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => refused_v4(v4),
            None => refused_v6(v6),
        },
    }
}

/// Metadata services that sit on public addresses (the rest are link-local or private).
const METADATA_V4: [Ipv4Addr; 2] = [
    Ipv4Addr::new(168, 63, 129, 16),   // Azure's wire server
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
];

fn refused_v4(v4: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = v4.octets();
    if METADATA_V4.contains(&v4) || v4 == Ipv4Addr::new(169, 254, 169, 254) {
        return Some("cloud metadata");
    }
    Some(if v4.is_loopback() {
        "loopback"
    } else if a == 0 {
        "unspecified (this host)"
    } else if v4.is_private() {
        "private"
    } else if v4.is_link_local() {
        "link-local"
    } else if a == 100 && (b & 0xc0) == 64 {
        "shared (carrier-grade NAT)"
    } else if v4.is_multicast() {
        "multicast"
    } else if v4.is_broadcast() {
        "broadcast"
    } else if a >= 240 || (a == 192 && b == 0 && c == 0) || (a == 198 && (b & 0xfe) == 18) {
        "reserved"
    } else if (a == 192 && b == 0 && c == 2)
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
    {
        "documentation"
    } else {
        return None;
    })
}

fn refused_v6(v6: Ipv6Addr) -> Option<&'static str> {
    let s = v6.segments();
    if v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some("cloud metadata");
    }
    Some(if v6.is_loopback() {
        "loopback"
    } else if v6.is_unspecified() {
        "unspecified (this host)"
    } else if (s[0] & 0xfe00) == 0xfc00 {
        "private (unique local)"
    } else if (s[0] & 0xffc0) == 0xfe80 || (s[0] & 0xffc0) == 0xfec0 {
        "link-local"
    } else if (s[0] & 0xff00) == 0xff00 {
        "multicast"
    } else if s[0] == 0x2001 && s[1] == 0 {
        "tunnel (Teredo)"
    } else if s[0] == 0x2001 && s[1] == 0xdb8 {
        "documentation"
    } else if s[0] == 0x100 && s[1] == 0 && s[2] == 0 && s[3] == 0 {
        "reserved (discard)"
    } else {
        return None;
    })
}

/// The IPv4 address an IPv6 address stands for: IPv4-mapped (`::ffff:a.b.c.d`),
/// IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`, `64:ff9b:1::/48`) and 6to4
/// (`2002:aabb:ccdd::`).
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..5] == [0; 5] && (s[5] == 0xffff || (s[5] == 0 && !(s[6] == 0 && s[7] <= 1))) {
        return Some(low());
    }
    if s[0] == 0x64 && s[1] == 0xff9b && ((s[2..6] == [0; 4]) || s[2] == 1) {
        return Some(low());
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> Option<&'static str> {
        refused(text.parse().expect("an address"))
    }

    #[test]
    fn the_hosts_own_and_its_networks_are_refused_in_every_spelling() {
        for (address, expected) in [
            ("127.0.0.1", "loopback"),
            ("127.8.9.10", "loopback"),
            ("0.0.0.0", "unspecified (this host)"),
            ("10.1.2.3", "private"),
            ("172.31.0.1", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("100.64.0.1", "shared (carrier-grade NAT)"),
            ("100.100.100.200", "cloud metadata"),
            ("168.63.129.16", "cloud metadata"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("::1", "loopback"),
            ("::", "unspecified (this host)"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:7f00:1", "loopback"),
            ("::127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "cloud metadata"),
            ("64:ff9b::10.0.0.1", "private"),
            ("2002:7f00:1::", "loopback"),
            ("fd00:ec2::254", "cloud metadata"),
            ("fd12::1", "private (unique local)"),
            ("fe80::1", "link-local"),
            ("2001::1", "tunnel (Teredo)"),
        ] {
            assert_eq!(kind(address), Some(expected), "{address}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for address in [
            "93.184.215.14",
            "8.8.8.8",
            "2606:4700::6810:84e5",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(kind(address), None, "{address}");
        }
    }
}
