// SPDX-License-Identifier: GPL-2.0
//! Link-level facts of an RDMA port over Ethernet: node GUID from the MAC address, and the IB
//! MTU a netdev MTU can carry.

/// The IB path MTUs (IBA 7.7.1), smallest first.
pub const IB_MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

/// The largest header stack a RoCE payload packet carries inside the netdev MTU: IPv6 (40)
/// or GRH (40), UDP (8), BTH (12), RETH (16), ImmDt (4), ICRC (4). IPv4 is smaller.
pub const ROCE_MAX_OVERHEAD: u32 = 40 + 8 + 12 + 16 + 4 + 4;

/// The node GUID of a port on an Ethernet device: the modified EUI-64 of its MAC address
/// (RFC 4291 appendix A: `FF:FE` in the middle, universal/local bit flipped), in network
/// byte order.
pub const fn node_guid_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// The largest IB MTU whose packets, with `overhead` bytes of headers, fit a link MTU of
/// `link_mtu` bytes; the smallest IB MTU (256) if none fits.
pub const fn ib_mtu_for_link(link_mtu: u32, overhead: u32) -> u32 {
    let mut best = IB_MTUS[0];
    let mut i = 0;
    while i < IB_MTUS.len() {
        if IB_MTUS[i] + overhead <= link_mtu {
            best = IB_MTUS[i];
        }
        i += 1;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eui64_flips_the_universal_local_bit() {
        assert_eq!(
            node_guid_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
        assert_eq!(node_guid_from_mac([0; 6])[0], 0x02);
    }

    #[test]
    fn standard_ethernet_mtus() {
        assert_eq!(ib_mtu_for_link(1500, ROCE_MAX_OVERHEAD), 1024);
        assert_eq!(ib_mtu_for_link(9000, ROCE_MAX_OVERHEAD), 4096);
        assert_eq!(
            ib_mtu_for_link(2048 + ROCE_MAX_OVERHEAD, ROCE_MAX_OVERHEAD),
            2048
        );
        assert_eq!(
            ib_mtu_for_link(2047 + ROCE_MAX_OVERHEAD, ROCE_MAX_OVERHEAD),
            1024
        );
        assert_eq!(ib_mtu_for_link(68, ROCE_MAX_OVERHEAD), 256);
        assert_eq!(ib_mtu_for_link(1500, 0), 1024);
        assert_eq!(ib_mtu_for_link(65536, 0), 4096);
    }

    #[test]
    fn result_is_monotonic_in_link_mtu() {
        let mut last = 0;
        for mtu in 0..10_000 {
            let m = ib_mtu_for_link(mtu, ROCE_MAX_OVERHEAD);
            assert!(m >= last && IB_MTUS.contains(&m));
            last = m;
        }
    }
}
