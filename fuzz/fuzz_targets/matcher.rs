//! The matcher on generated grammars and token walks with rollback and fork, against the
//! brute-force oracle.
#![no_main]

use stencil_fuzz::gen::MatcherInput;

libfuzzer_sys::fuzz_target!(|input: MatcherInput| {
    if let Some(case) = input.case() {
        stencil_fuzz::print_case(&case.to_json());
        stencil_fuzz::checks::check_matcher(&case);
    }
});
