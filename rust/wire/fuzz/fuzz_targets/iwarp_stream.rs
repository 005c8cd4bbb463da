// SPDX-License-Identifier: GPL-2.0
//! libFuzzer target: iWARP MPA streams (valid ones built from the input, and the input
//! itself as a hostile stream) cut at every place, into oxrdma-wire's deframer. The checks
//! are in ../harness_iwarp.rs, which ../../tests/iwarp_fuzz_harness.rs also runs on stable.

#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../harness_iwarp.rs");

fuzz_target!(|data: &[u8]| fuzz_iwarp(data));
