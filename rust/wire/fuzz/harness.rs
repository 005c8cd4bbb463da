// SPDX-License-Identifier: GPL-2.0
//
// The body of the `parse` fuzz target, shared (by `include!`) between the cargo-fuzz target
// (fuzz_targets/parse.rs, libFuzzer, nightly) and a plain test that feeds it the fixtures,
// mutations of them and random bytes (../tests/fuzz_harness.rs, stable, part of `cargo test`).

/// Feeds `data` to every parser of `oxrdma_wire` and checks what must hold for any input:
/// nothing panics; whatever `packet::parse` accepts accounts for every byte, builds again
/// from its parsed headers and parses back to the same result; the ICRC functions accept or
/// reject any bytes (as each encapsulation) without panicking, and agree with each other.
/// `data` is tried as an IBA packet (with and without ICRC) and as an IP packet (RoCE v2
/// IPv4/IPv6, RoCE v1 GRH) whose UDP payload (or GRH payload) is an IBA packet.
pub fn fuzz_one(data: &[u8]) {
    use oxrdma_wire::icrc::{self, Encap, ICRC_LEN};
    use oxrdma_wire::packet;

    check_iba(data);
    for encap in [Encap::RoceV2Ipv4, Encap::RoceV2Ipv6, Encap::RoceV1] {
        let computed = icrc::compute(encap, data);
        let verified = icrc::verify(encap, data);
        if let (Some(body_len), Ok(_)) = (data.len().checked_sub(ICRC_LEN), &verified) {
            // verify() accepted: the trailer is the ICRC of the rest.
            let icrc = icrc::compute(encap, &data[..body_len]).expect("verified, so computable");
            assert_eq!(icrc::to_wire(icrc), data[body_len..]);
        }
        if let Ok(c) = computed {
            let mut with = data.to_vec();
            with.extend_from_slice(&icrc::to_wire(c));
            assert_eq!(icrc::verify(encap, &with), Ok(()));
        }
        if let Ok(bth) = icrc::bth_offset(encap, data) {
            if let Some(iba) = data.get(bth..) {
                check_iba(iba);
            }
        }
    }

    fn check_iba(data: &[u8]) {
        for (result, trailer) in [
            (packet::parse(data), ICRC_LEN),
            (packet::parse_without_icrc(data), 0),
        ] {
            let Ok(p) = result else { continue };
            assert_eq!(p.len_without_icrc() + trailer, data.len());
            assert_eq!(Some(&p.opcode.value()), data.first());
            assert_eq!(p.header_len, p.opcode.header_len());
            let payload = p.payload(data);
            assert_eq!(payload.len(), p.payload_len);
            let mut buf = vec![0u8; p.len_without_icrc()];
            let n = packet::build(&p.headers, payload, &mut buf).expect("parsed headers build");
            assert_eq!(n, buf.len());
            assert_eq!(packet::parse_without_icrc(&buf), Ok(p));
        }
    }
}
