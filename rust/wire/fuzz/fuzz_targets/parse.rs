// SPDX-License-Identifier: GPL-2.0
//! libFuzzer target: arbitrary bytes into oxrdma-wire's packet parser, builder and ICRC code.
//! The checks are in ../harness.rs, which ../../tests/fuzz_harness.rs also runs on stable.

#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../harness.rs");

fuzz_target!(|data: &[u8]| fuzz_one(data));
