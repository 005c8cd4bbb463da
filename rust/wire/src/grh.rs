// SPDX-License-Identifier: GPL-2.0

//! The Global Route Header of RoCE v1 packets (IBA vol 1 8.3, RoCE annex A16): on Ethernet
//! with ethertype 0x8915, a 40-byte header laid out like IPv6's, whose "next header" is 0x1B
//! (an IBA transport header follows) and whose addresses are the source and destination GIDs.
//! Its payload length counts everything after it: the IBA headers, the payload, the pad and
//! the ICRC (RoCE v1 has no VCRC).
//!
//! This file is self-contained: it is compiled both as a module of the `oxrdma-wire` crate and,
//! via `#[path]`, as a module of the kernel crate.

/// Length of the GRH.
pub const GRH_LEN: usize = 40;
/// The GRH's IP version field.
pub const GRH_IPVER: u8 = 6;
/// The GRH's next header: an IBA transport header (BTH) follows.
pub const GRH_NEXT_HDR_IBA: u8 = 0x1b;
/// Ethertype of RoCE v1.
pub const ETH_P_IBOE: u16 = 0x8915;

/// The fields of a GRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grh {
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Bytes after the GRH (IBA headers, payload, pad, ICRC).
    pub payload_len: u16,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source GID.
    pub sgid: [u8; 16],
    /// Destination GID.
    pub dgid: [u8; 16],
}

/// Why a GRH could not be written or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrhError {
    /// Fewer than 40 bytes.
    Short,
    /// Not version 6 with next header 0x1B.
    NotIba,
    /// The payload length does not match the bytes that follow.
    Length,
}

/// Writes `h` at the start of `pkt`.
pub fn write(h: &Grh, pkt: &mut [u8]) -> Result<(), GrhError> {
    let b = pkt.get_mut(..GRH_LEN).ok_or(GrhError::Short)?;
    let w0 = (u32::from(GRH_IPVER) << 28)
        | (u32::from(h.traffic_class) << 20)
        | (h.flow_label & 0xf_ffff);
    b[0..4].copy_from_slice(&w0.to_be_bytes());
    b[4..6].copy_from_slice(&h.payload_len.to_be_bytes());
    b[6] = GRH_NEXT_HDR_IBA;
    b[7] = h.hop_limit;
    b[8..24].copy_from_slice(&h.sgid);
    b[24..40].copy_from_slice(&h.dgid);
    Ok(())
}

/// Reads the GRH at the start of `pkt` (a whole received RoCE v1 packet: GRH through ICRC,
/// Ethernet padding allowed after it). The payload length must fit in `pkt`.
pub fn parse(pkt: &[u8]) -> Result<Grh, GrhError> {
    let b = pkt.get(..GRH_LEN).ok_or(GrhError::Short)?;
    let w0 = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    if (w0 >> 28) as u8 != GRH_IPVER || b[6] != GRH_NEXT_HDR_IBA {
        return Err(GrhError::NotIba);
    }
    let payload_len = u16::from_be_bytes([b[4], b[5]]);
    if usize::from(payload_len) > pkt.len() - GRH_LEN {
        return Err(GrhError::Length);
    }
    let mut sgid = [0u8; 16];
    let mut dgid = [0u8; 16];
    sgid.copy_from_slice(&b[8..24]);
    dgid.copy_from_slice(&b[24..40]);
    Ok(Grh {
        traffic_class: ((w0 >> 20) & 0xff) as u8,
        flow_label: w0 & 0xf_ffff,
        payload_len,
        hop_limit: b[7],
        sgid,
        dgid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Grh {
        Grh {
            traffic_class: 0xa5,
            flow_label: 0x12345,
            payload_len: 28,
            hop_limit: 1,
            sgid: [
                0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55,
            ],
            dgid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2],
        }
    }

    #[test]
    fn round_trip() {
        let mut p = [0u8; GRH_LEN + 28];
        write(&sample(), &mut p).unwrap();
        assert_eq!(p[0], 0x6a);
        assert_eq!(p[1], 0x51);
        assert_eq!(&p[1..4], &[0x51, 0x23, 0x45]);
        assert_eq!(p[6], 0x1b);
        assert_eq!(parse(&p), Ok(sample()));
    }

    #[test]
    fn refuses_what_is_not_a_grh() {
        let mut p = [0u8; GRH_LEN + 28];
        assert_eq!(write(&sample(), &mut p[..39]), Err(GrhError::Short));
        write(&sample(), &mut p).unwrap();
        assert_eq!(parse(&p[..39]), Err(GrhError::Short));
        assert_eq!(parse(&p[..GRH_LEN + 27]), Err(GrhError::Length));
        // Ethernet padding after the packet is fine.
        let mut padded = [0u8; GRH_LEN + 40];
        padded[..p.len()].copy_from_slice(&p);
        assert!(parse(&padded).is_ok());
        let mut q = p;
        q[6] = 17;
        assert_eq!(parse(&q), Err(GrhError::NotIba));
        let mut q = p;
        q[0] = 0x4a;
        assert_eq!(parse(&q), Err(GrhError::NotIba));
    }
}
